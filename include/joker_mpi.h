/*
 * joker: distributed training over MPI (C ABI).
 *
 * Needs libjoker built with the `mpi` feature (cargo build --release --features mpi) against
 * the same MPI implementation as the caller (an MPI_Comm is a pointer in OpenMPI, an int in
 * MPICH). Written by hand: joker.h is generated and needs no mpi.h.
 */
#ifndef JOKER_MPI_H
#define JOKER_MPI_H

#include <mpi.h>

#include "joker.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Trains one model on the rows of every rank of `comm` by parallel block minimization with
 * DBCD-TR on each rank's rows (random features, or the exact kernel, for which every rank
 * receives a copy of every rank's rows). Every rank of `comm` calls it with the
 * same parameters and its own rows in `train` (at least one; the ranks' shares in rank order
 * are the training set's rows in order). `comm` is duplicated inside and stays the caller's.
 * Every rank receives the same model in `*out` (free it with joker_model_free).
 *
 * A failure on any rank aborts the MPI job (MPI_Abort, after one line on standard error naming
 * the rank and the reason): the other ranks would otherwise wait for it forever. Errors found
 * before any communication (the same parameters on every rank) are returned as usual:
 * JOKER_STATUS_UNSUPPORTED for full KRR, the doubly stochastic solvers or a bias feature.
 * Under JOKER_DEVICE_AUTO the ranks that share a machine take its GPUs in turn.
 */
JokerStatus joker_fit_mpi(const struct JokerParams *params,
                          const struct JokerData *train,
                          MPI_Comm comm,
                          struct JokerModel **out);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* JOKER_MPI_H */

//! `joker_fit_mpi`: a distributed fit on the host's MPI communicator (feature `mpi`; declared
//! in `include/joker_mpi.h`, not in `joker.h`, so that the default header needs no `mpi.h`).

use super::data::DataSet;
use super::fit::labelled_train;
use super::model::{JokerModel, new_model};
use super::params::params_ref;
use super::{JokerStatus, guard, write_out};
use crate::distributed::mpi::Mpi;
use crate::estimator::FitOptions;
use crate::solver::PbmConfig;

/// Trains one model on the rows of every rank of `comm` (parallel block minimization; see
/// `Joker::fit_distributed`). Every rank of `comm` calls it with the same parameters and its
/// own rows in `train` (at least one row; the ranks' shares in rank order are the training
/// set's rows in order). `comm` is duplicated inside, so the caller's messages are not
/// disturbed, and stays the caller's. Every rank receives the same model in `*out`.
///
/// A failure on any rank aborts the MPI job (`MPI_Abort`, after one line on standard error
/// naming the rank and the reason): the other ranks would otherwise wait for it forever.
/// Errors found before any communication (the same parameters on every rank) are returned
/// as usual: `JOKER_STATUS_UNSUPPORTED` for full KRR, the doubly stochastic solvers or a
/// bias feature. With the exact kernel every rank receives a copy of every rank's rows. Under
/// `JOKER_DEVICE_AUTO` the ranks that share a machine take its GPUs in turn.
///
/// # Safety
/// `comm` must be a valid communicator of an initialised MPI, the same implementation
/// libjoker was built against; handles must be NULL or not freed or changed by another
/// thread during the call; `out` must be NULL or valid for writing one pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_fit_mpi(
    params: *const super::JokerParams,
    train: *const super::JokerData,
    comm: mpi::ffi::MPI_Comm,
    out: *mut *mut JokerModel,
) -> JokerStatus {
    guard(|| {
        // SAFETY: `out` is NULL (rejected) or writable (function contract).
        unsafe { write_out(out, std::ptr::null_mut(), "out") }?;
        // SAFETY: handles are not freed or changed concurrently (function contract).
        let p = unsafe { params_ref(params) }?;
        // SAFETY: as above.
        let tr = unsafe { labelled_train(train) }?;
        // SAFETY: `comm` is a valid communicator of an initialised MPI (function contract).
        let comm = unsafe { Mpi::from_raw(comm) }?;
        crate::device::spread_auto(comm.local_rank());
        let pbm = PbmConfig::default();
        let model = match &tr.set {
            DataSet::F32(d) => p.fit_distributed(d, &comm, &pbm, FitOptions::default()),
            DataSet::F64(d) => p.fit_distributed(d, &comm, &pbm, FitOptions::default()),
        }?;
        let h = new_model(model);
        // SAFETY: as above.
        unsafe { write_out(out, h, "out") }
    })
}

/*
 * Distributed training from C: every rank makes its share of a synthetic binary problem,
 * joker_fit_mpi trains one model over MPI_COMM_WORLD, and every rank scores it on the same
 * test rows. Build and run (libjoker built with --features mpi):
 *
 *   mpicc -O2 -I include bindings/c/mpi_example.c -L target/release -ljoker -o mpi_example
 *   LD_LIBRARY_PATH=target/release mpirun -n 4 ./mpi_example
 *
 * Prints one line per rank: "rank R of K: N rows, accuracy A"; exits non-zero on an error.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "joker_mpi.h"

#define CHECK(call)                                                                  \
    do {                                                                             \
        JokerStatus s_ = (call);                                                     \
        if (s_ != JOKER_STATUS_OK) {                                                 \
            fprintf(stderr, "%s failed: %s\n", #call, joker_last_error());           \
            MPI_Abort(MPI_COMM_WORLD, 1);                                            \
        }                                                                            \
    } while (0)

/* Row i of the problem (the same on every rank): label sign(x0^2 + x1 - 1). */
static void row(size_t i, double *x, double *y) {
    unsigned long long s = 0x9E3779B97F4A7C15ULL * (i + 1);
    for (int j = 0; j < 3; j++) {
        s ^= s >> 33;
        s *= 0xFF51AFD7ED558CCDULL;
        s ^= s >> 33;
        x[j] = 4.0 * (double)(s >> 11) / 9007199254740992.0 - 2.0;
    }
    *y = x[0] * x[0] + x[1] - 1.0 > 0.0 ? 1.0 : -1.0;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const size_t n = 4000, n_test = 1000;
    size_t lo = n * (size_t)rank / (size_t)size, hi = n * (size_t)(rank + 1) / (size_t)size;
    size_t m = hi - lo;
    double *x = malloc(m * 3 * sizeof(double)), *y = malloc(m * sizeof(double));
    for (size_t i = 0; i < m; i++) row(lo + i, x + 3 * i, y + i);
    double *xt = malloc(n_test * 3 * sizeof(double)), *yt = malloc(n_test * sizeof(double));
    for (size_t i = 0; i < n_test; i++) row(n + i, xt + 3 * i, yt + i);

    JokerParams *params;
    JokerData *train, *test;
    JokerModel *model;
    CHECK(joker_params_new(&params));
    CHECK(joker_params_set_loss(params, JOKER_LOSS_L2_SVC, 0.0));
    CHECK(joker_params_set_n_components(params, 300));
    CHECK(joker_data_from_dense_f64(x, m, 3, y, &train));
    CHECK(joker_data_from_dense_f64(xt, n_test, 3, yt, &test));
    CHECK(joker_fit_mpi(params, train, MPI_COMM_WORLD, &model));
    double acc;
    CHECK(joker_model_score(model, test, &acc));
    printf("rank %d of %d: %zu rows, accuracy %.4f\n", rank, size, m, acc);
    joker_model_free(model);
    joker_data_free(test);
    joker_data_free(train);
    joker_params_free(params);
    free(x), free(y), free(xt), free(yt);
    MPI_Finalize();
    return 0;
}

// exact.cu: exact kernel tiles K(X_I, X_J) and the chunked product out += K(X, X_B) v, for the
// exact (non-feature) Joker model: K_BB for the block solve, beta = K alpha updates and exact
// prediction.
//
// Run on an H100 against f64 direct sums (tests/suite/gpu.rs, docs/gpu-validation.md) and under the
// host emulator (cuda/hostemu/test_exact.cpp, see cuda/README.md). CPU twins:
// `Backend::kernel_tile` (src/backend/cpu.rs) for exact_tile / exact_tile_csr, and the exact
// branch of `Predictor::decision` (src/solver/decision.rs) for exact_matvec.
//
// ------------------------------------------------------------------------------------------
// Kernels (same ids and parametrisation as src/kernel.rs and rff.cu):
//   kernel 0 Gaussian   k = exp(-gamma ||x - y||_2^2)
//   kernel 1 Laplacian  k = exp(-gamma ||x - y||_1)
//   kernel 2 Matern     r = gamma ||x - y||_2, nu = 0.5: exp(-r); 1.5: (1 + t) exp(-t), t = sqrt3 r;
//                       2.5: (1 + t + t^2/3) exp(-t), t = sqrt5 r. Any other nu is a host error
//                       (validate before launching; here it falls back to nu = 0.5).
// The function of the distance (`of_distance`) is evaluated in f64, exactly as the CPU twin.
//
// Distances (the numerical choice of this file): DIRECT DIFFERENCES, never the expansion
// ||x||^2 + ||y||^2 - 2 x.y. For the dense kernels each 32-dimension chunk accumulates
// (x_k - y_k)^2 (or |x_k - y_k|) in f32 with fmaf (no TF32, no tensor cores), and the chunk
// sums are added in f64. The relative error of a distance is then about 32 f32 ulps plus the
// f64 sum, independent of ||x|| and ||y|| -- there is no cancellation for near points, which is
// where the kernel value is largest and the expansion is worst (the CPU twin uses the
// expansion from a GEMM in its working precision, clamped at 0, and redoes by direct f64
// differences the values whose error bound from cancellation exceeds 2^-21; tests compare
// both against f64 direct sums). Cost: 2 flops per (pair, dimension) (sub + fma)
// instead of 1 FMA, which does not matter at the sizes where the f64 exp dominates (d < ~30)
// and is the price of accuracy beyond.
// CSR inputs: the two sorted index lists are merged, so every stored coordinate of either
// row contributes its own difference (x_k - y_k, x_k or -y_k) directly; terms are squared in
// f64 and summed in f64.
//
// Layouts: X_I, X_J, X, X_B row-major f32 (x_i = X[i*d .. i*d + d)); CSR: indptr int64
// (nrows + 1 entries), indices int32 strictly increasing within a row, values f32;
// out tiles f64 row-major with leading dimension ldo (out[i*ldo + j]); v and out of
// exact_matvec f64 column-major with leading dimensions (v[t*ldv + j], out[t*ldo + i]).
// Global offsets are computed in 64 bits; counts (rows, d) must be < 2^31. No atomics: every
// output element is written by exactly one thread of one block, so results are deterministic.
// ------------------------------------------------------------------------------------------
#include <stdint.h>

#define EX_THREADS 256
#define EX_T 64    // output tile: 64 x 64 pairs per block, 4 x 4 per thread
#define EX_DK 32   // dimensions per shared-memory chunk
#define EX_LD 65   // padded k-major row of the staged X tiles (conflict-free stores)
#define EX_KLD 65  // padded row of the f64 kernel tile in exact_matvec

namespace {

// The kernel as a function of its distance: squared Euclidean (Gaussian), L1 (Laplacian) or
// Euclidean (Matern). Twin of `Kernel::of_distance`.
__device__ __forceinline__ double of_distance(int kernel, double gamma, double nu, double dist) {
    if (kernel != 2) return exp(-gamma * dist);
    const double r = gamma * dist;
    if (nu == 1.5) {
        const double t = 1.7320508075688772 * r;  // sqrt(3), as 3f64.sqrt()
        return (1.0 + t) * exp(-t);
    }
    if (nu == 2.5) {
        const double t = 2.23606797749979 * r;  // sqrt(5), as 5f64.sqrt()
        return (1.0 + t + t * t / 3.0) * exp(-t);
    }
    return exp(-r);
}

// Kernel value from the accumulated distance: d2 (squared Euclidean) or the L1 distance.
__device__ __forceinline__ double kernel_value(int kernel, double gamma, double nu, double acc) {
    if (kernel == 2) return of_distance(kernel, gamma, nu, sqrt(acc));
    return of_distance(kernel, gamma, nu, acc);
}

// Distances between rows i0 + ty + 16a (a < 4) of xi and rows j0 + tx + 16c (c < 4) of xj,
// (ty, tx) = (tid / 16, tid % 16), into acc[a][c] (f64; squared Euclidean, or L1 if l1).
// Rows past ni / nj read as zeros (their results are not written by the callers).
// Xs: 2 * EX_DK * EX_LD floats of shared memory. Ends with a barrier: Xs is free afterwards.
// Memory per chunk: 2 * 64 * 32 f32 global loads (a warp reads 32 consecutive dims of one row:
// coalesced), conflict-free shared stores thanks to the padding; per kk, a warp reads 2
// distinct X_I words (broadcast) and 16 consecutive X_J words.
__device__ __forceinline__ void dense_dist_tile(const float* __restrict__ xi, int ni, int i0,
                                                const float* __restrict__ xj, int nj, int j0,
                                                int d, bool l1, float* Xs, double (&acc)[4][4]) {
    const int tid = threadIdx.x, ty = tid / 16, tx = tid % 16;
    float* Xi = Xs;
    float* Xj = Xs + EX_DK * EX_LD;
#pragma unroll
    for (int a = 0; a < 4; ++a)
#pragma unroll
        for (int c = 0; c < 4; ++c) acc[a][c] = 0.0;
    for (int d0 = 0; d0 < d; d0 += EX_DK) {
        const int dk = min(EX_DK, d - d0);
        for (int e = tid; e < EX_T * EX_DK; e += EX_THREADS) {
            const int r = e / EX_DK, kk = e % EX_DK;
            float vi = 0.0f, vj = 0.0f;
            if (kk < dk) {
                if (i0 + r < ni) vi = __ldg(xi + (size_t)(i0 + r) * (size_t)d + (size_t)(d0 + kk));
                if (j0 + r < nj) vj = __ldg(xj + (size_t)(j0 + r) * (size_t)d + (size_t)(d0 + kk));
            }
            Xi[kk * EX_LD + r] = vi;
            Xj[kk * EX_LD + r] = vj;
        }
        __syncthreads();
        float part[4][4];
#pragma unroll
        for (int a = 0; a < 4; ++a)
#pragma unroll
            for (int c = 0; c < 4; ++c) part[a][c] = 0.0f;
        for (int kk = 0; kk < dk; ++kk) {
            float xa[4], xb[4];
#pragma unroll
            for (int a = 0; a < 4; ++a) xa[a] = Xi[kk * EX_LD + ty + 16 * a];
#pragma unroll
            for (int c = 0; c < 4; ++c) xb[c] = Xj[kk * EX_LD + tx + 16 * c];
            if (l1) {
#pragma unroll
                for (int a = 0; a < 4; ++a)
#pragma unroll
                    for (int c = 0; c < 4; ++c) part[a][c] += fabsf(xa[a] - xb[c]);
            } else {
#pragma unroll
                for (int a = 0; a < 4; ++a)
#pragma unroll
                    for (int c = 0; c < 4; ++c) {
                        const float df = xa[a] - xb[c];
                        part[a][c] = fmaf(df, df, part[a][c]);
                    }
            }
        }
#pragma unroll
        for (int a = 0; a < 4; ++a)
#pragma unroll
            for (int c = 0; c < 4; ++c) acc[a][c] += (double)part[a][c];
        __syncthreads();
    }
}

}  // namespace

// ==========================================================================================
// exact_tile: out[i*ldo + j] = K(X_I[i], X_J[j]) for i < ni, j < nj (f64), dense f32 inputs.
//
// Launch: grid = (ceil(nj/64), ceil(ni/64)), block = 256 threads, static shared memory
//   16,640 B, no dynamic shared memory. Thread (ty, tx) = (t/16, t%16) of block (bx, by)
//   computes rows by*64 + ty + 16a and columns bx*64 + tx + 16c, a, c < 4.
// Work: ni nj d (sub + fma) in f32 + ni nj f64 exp. Memory: each block reads 64 rows of each
//   input (2 * 64 * d * 4 B; X_I re-read by every column block, X_J by every row block, both
//   L2-resident for block-sized inputs) and writes 64 * 64 * 8 B; a warp's stores cover 2 rows
//   x 16 consecutive f64 (128 B segments).
// For K_BB (X_I = X_J) the full square is computed (both triangles, bit-identical by symmetry
// of the arithmetic: |x - y| and (x - y)^2 are symmetric in f32 and the chunk order is the same).
// ==========================================================================================
extern "C" __global__ void __launch_bounds__(EX_THREADS)
exact_tile(const float* __restrict__ xi, int ni, const float* __restrict__ xj, int nj, int d,
           int kernel, double gamma, double nu, double* __restrict__ out, int ldo) {
    __shared__ __align__(16) float Xs[2 * EX_DK * EX_LD];
    const int i0 = blockIdx.y * EX_T, j0 = blockIdx.x * EX_T;
    const int tid = threadIdx.x, ty = tid / 16, tx = tid % 16;
    double acc[4][4];
    dense_dist_tile(xi, ni, i0, xj, nj, j0, d, kernel == 1, Xs, acc);
#pragma unroll
    for (int a = 0; a < 4; ++a) {
        const int i = i0 + ty + 16 * a;
        if (i >= ni) continue;
#pragma unroll
        for (int c = 0; c < 4; ++c) {
            const int j = j0 + tx + 16 * c;
            if (j < nj) out[(size_t)i * (size_t)ldo + (size_t)j] = kernel_value(kernel, gamma, nu, acc[a][c]);
        }
    }
}

// ==========================================================================================
// exact_tile_csr: the same tile for CSR inputs (X_I: ip_i/ix_i/v_i with ni rows, X_J likewise).
//
//   out[i*ldo + j] = K(x_i, y_j), distance = sum over the union of the two index lists of
//   (x_k - y_k)^2 or |x_k - y_k| (a missing entry is 0), in f64, by a sorted merge.
//
// Launch: grid = (ceil(nj/32), ceil(ni/8)), block = 256 threads = 8 rows x 32 columns: the 32
//   lanes of a warp share row i (its entries are broadcast loads) and take 32 consecutive j.
//   No shared memory.
// Work: (nnz_i + nnz_j) per pair, branchy (the lanes of a warp diverge in the merge);
//   correctness first -- for wide sparse data a dense-tile variant over the union of a
//   block's columns, or the expansion with per-row norms, may be faster; not measured.
// Memory: row i and 32 rows of X_J per warp through the read-only cache; X_J rows are re-read
//   by every row block (L2-resident for block-sized inputs).
// ==========================================================================================
namespace {

// The distance between row i of (ip_i, ix_i, v_i) and row j of (ip_j, ix_j, v_j): the two
// sorted index lists merged, every stored coordinate contributing its own difference (a
// missing entry is 0), squared (or absolute, l1) and summed in f64.
__device__ __forceinline__ double csr_dist(const long long* __restrict__ ip_i,
                                           const int* __restrict__ ix_i,
                                           const float* __restrict__ v_i, int i,
                                           const long long* __restrict__ ip_j,
                                           const int* __restrict__ ix_j,
                                           const float* __restrict__ v_j, int j, bool l1) {
    long long p = __ldg(ip_i + i), pe = __ldg(ip_i + i + 1);
    long long q = __ldg(ip_j + j), qe = __ldg(ip_j + j + 1);
    double acc = 0.0;
    while (p < pe && q < qe) {
        const int ci = __ldg(ix_i + p), cj = __ldg(ix_j + q);
        double df;
        if (ci == cj) {
            df = (double)__ldg(v_i + p) - (double)__ldg(v_j + q);
            ++p;
            ++q;
        } else if (ci < cj) {
            df = (double)__ldg(v_i + p);
            ++p;
        } else {
            df = -(double)__ldg(v_j + q);
            ++q;
        }
        acc += l1 ? fabs(df) : df * df;
    }
    for (; p < pe; ++p) {
        const double df = (double)__ldg(v_i + p);
        acc += l1 ? fabs(df) : df * df;
    }
    for (; q < qe; ++q) {
        const double df = (double)__ldg(v_j + q);
        acc += l1 ? fabs(df) : df * df;
    }
    return acc;
}

// out[t*ldo + i0 + row] += sum_{jj < ncol} ktile[row*EX_KLD + jj] v[t*ldv + j0 + jj] for the
// block's 64 rows (those below n) and every target t < tcols: thread (row = tid % 64,
// part = tid / 64) sums 16 columns in f64, the 4 parts are added in a fixed order. ktile must
// be complete on entry (a barrier by the caller); two barriers per target.
__device__ __forceinline__ void tile_times_v(const double* ktile, const double* __restrict__ v,
                                             int ldv, int j0, int ncol, int tcols,
                                             double* __restrict__ out, int ldo, int i0, int n,
                                             double (&red)[4][EX_T]) {
    const int tid = threadIdx.x, row = tid % EX_T, part = tid / EX_T;
    for (int t = 0; t < tcols; ++t) {
        const double* vt = v + (size_t)t * (size_t)ldv + (size_t)j0;
        double sum = 0.0;
        for (int k = 0; k < 16; ++k) {
            const int jj = part * 16 + k;
            if (jj < ncol) sum += ktile[row * EX_KLD + jj] * __ldg(vt + jj);
        }
        red[part][row] = sum;
        __syncthreads();
        if (tid < EX_T && i0 + tid < n) {
            double* o = out + (size_t)t * (size_t)ldo + (size_t)(i0 + tid);
            *o += ((red[0][tid] + red[1][tid]) + red[2][tid]) + red[3][tid];
        }
        __syncthreads();
    }
}

}  // namespace

extern "C" __global__ void __launch_bounds__(EX_THREADS)
exact_tile_csr(const long long* __restrict__ ip_i, const int* __restrict__ ix_i,
               const float* __restrict__ v_i, int ni, const long long* __restrict__ ip_j,
               const int* __restrict__ ix_j, const float* __restrict__ v_j, int nj, int kernel,
               double gamma, double nu, double* __restrict__ out, int ldo) {
    const int i = blockIdx.y * 8 + threadIdx.x / 32;
    const int j = blockIdx.x * 32 + threadIdx.x % 32;
    if (i >= ni || j >= nj) return;
    const double acc = csr_dist(ip_i, ix_i, v_i, i, ip_j, ix_j, v_j, j, kernel == 1);
    out[(size_t)i * (size_t)ldo + (size_t)j] = kernel_value(kernel, gamma, nu, acc);
}

// ==========================================================================================
// exact_matvec: out[t*ldo + i] += sum_{j < nb} K(x_i, xb_j) v[t*ldv + j], i < n, t < tcols.
//
// The chunked product for beta = K alpha updates (X = all training rows, X_B = the block,
// v = delta alpha_B) and exact prediction (X = test rows, X_B = a chunk of support rows,
// v = alpha of that chunk); call it once per chunk of X_B (any nb; the host picks chunks that
// fit its buffers), it accumulates into out.
//
// Launch: grid = ceil(n/64) (1-D), block = 256 threads, static shared memory 35,328 B.
//   Block r owns rows r*64 .. r*64+63 of out for every target, so no two blocks touch the same
//   output and there are no atomics. Per 64-column chunk of X_B: the 64 x 64 kernel tile is
//   computed as in exact_tile (f32 direct-difference distances, f64 chunk sums and exp), stored
//   in shared memory as f64 (aliasing the X staging buffer), then for each target thread
//   (row = t%64, part = t/64) sums 16 columns of K times v in f64, the 4 parts are added in a
//   fixed order and row threads update out (read-modify-write, f64).
// Work: n nb d f32 (sub + fma) + n nb f64 exp + 2 n nb T f64 flops.
// Memory: X read once (64 rows per block), X_B read ceil(n/64) times (L2-resident for
//   block-sized chunks), v read ceil(n/64) times (L2), out read and written ceil(nb/64) times
//   per call (n T 8 B each); a target loop costs 2 barriers per chunk.
// ==========================================================================================
extern "C" __global__ void __launch_bounds__(EX_THREADS)
exact_matvec(const float* __restrict__ x, int n, const float* __restrict__ xb, int nb, int d,
             int kernel, double gamma, double nu, const double* __restrict__ v, int ldv, int tcols,
             double* __restrict__ out, int ldo) {
    // One buffer: the staged X tiles (2 * 32 * 65 f32 = 16,640 B) while distances are formed,
    // then the f64 kernel tile (64 * 65 f64 = 33,280 B).
    __shared__ __align__(16) double sbuf[EX_T * EX_KLD];
    __shared__ double red[4][EX_T];
    float* Xs = reinterpret_cast<float*>(sbuf);
    const int i0 = blockIdx.x * EX_T;
    const int tid = threadIdx.x, ty = tid / 16, tx = tid % 16;
    for (int j0 = 0; j0 < nb; j0 += EX_T) {
        double acc[4][4];
        dense_dist_tile(x, n, i0, xb, nb, j0, d, kernel == 1, Xs, acc);  // ends with a barrier
#pragma unroll
        for (int a = 0; a < 4; ++a)
#pragma unroll
            for (int c = 0; c < 4; ++c) {
                const int jj = tx + 16 * c;
                sbuf[(ty + 16 * a) * EX_KLD + jj] =
                    j0 + jj < nb ? kernel_value(kernel, gamma, nu, acc[a][c]) : 0.0;
            }
        __syncthreads();
        tile_times_v(sbuf, v, ldv, j0, min(EX_T, nb - j0), tcols, out, ldo, i0, n, red);
    }
}

// ==========================================================================================
// exact_matvec_csr: exact_matvec for CSR rows: X (ip/ix/vx, n rows) and X_B (ipb/ixb/vb, nb
// rows; indptr entries are absolute offsets into ixb/vb, so a block of consecutive rows of a
// larger CSR matrix is passed as ipb = ip + start with ixb = ix, vb = vx).
//
// Launch: grid = ceil(n/64) (1-D), block = 256 threads, static shared memory 35,328 B. Per
//   64-column chunk of X_B the 64 x 64 kernel tile is formed by the sorted merge of
//   exact_tile_csr (one pair per thread at a time; the 32 lanes of a warp share the row of X)
//   and stored in shared memory as f64, then multiplied with v exactly as in exact_matvec.
// Work: n nb (nnz_x + nnz_xb) merge steps + n nb f64 exp + 2 n nb T f64 flops; correctness
//   first (branchy merge, like exact_tile_csr), not measured.
// ==========================================================================================
extern "C" __global__ void __launch_bounds__(EX_THREADS)
exact_matvec_csr(const long long* __restrict__ ip, const int* __restrict__ ix,
                 const float* __restrict__ vx, int n, const long long* __restrict__ ipb,
                 const int* __restrict__ ixb, const float* __restrict__ vb, int nb, int kernel,
                 double gamma, double nu, const double* __restrict__ v, int ldv, int tcols,
                 double* __restrict__ out, int ldo) {
    __shared__ __align__(16) double sbuf[EX_T * EX_KLD];
    __shared__ double red[4][EX_T];
    const int i0 = blockIdx.x * EX_T;
    for (int j0 = 0; j0 < nb; j0 += EX_T) {
        for (int p = threadIdx.x; p < EX_T * EX_T; p += EX_THREADS) {
            const int r = p / EX_T, c = p % EX_T;
            const int i = i0 + r, j = j0 + c;
            sbuf[r * EX_KLD + c] =
                i < n && j < nb
                    ? kernel_value(kernel, gamma, nu,
                                   csr_dist(ip, ix, vx, i, ipb, ixb, vb, j, kernel == 1))
                    : 0.0;
        }
        __syncthreads();
        tile_times_v(sbuf, v, ldv, j0, min(EX_T, nb - j0), tcols, out, ldo, i0, n, red);
        __syncthreads();  // sbuf is rewritten by the next chunk (tile_times_v has none if T = 0)
    }
}

// trsolve.cu: the trust-region block solve (paper Algorithm 1) with the truncated, box-aware
// CG-Steihaug (Algorithm 2) on the device, one thread block per target column.
//
// Run on an H100 against the Rust solver (tests/suite/gpu.rs, docs/gpu-validation.md) and under the
// host emulator (cuda/hostemu/test_trsolve.cpp reads cuda/hostemu/tr_vectors.txt, which
// tests/suite/tr_vectors.rs regenerates from src/solver/trust_region.rs and checks is current).
// One column runs on one multiprocessor, so the engines call it only for 16 or more target
// columns (DEVICE_SOLVE_MIN_COLUMNS in src/backend/cuda/trsolve.rs) and solve fewer on the host.
//
// CPU twin: `solve_column` in src/solver/trust_region.rs, mirrored statement by statement
// (same gradient/orthant/free-set pass, same model matrix Q = K_BB + diag(h) rounded to f32,
// same CG-Steihaug with its stopped-vs-clipped box exits and restarts on the still-free
// coordinates, or, where every free coordinate's loss curvature is positive, the same
// projected CG (cg_projected) with its rounds, projected searches and held bounds, the same
// predicted and actual decrease computed directly, same radius rules,
// acceptance and stopping tests); the loss math is cuda/loss.cuh, a twin of src/loss.rs.
// The only intended differences are summation orders (block reductions instead of the CPU's
// 8-lane dots), so on well-conditioned problems both take the same accepted steps and
// differ by rounding. The Nystrom metric of the CPU solver (TrustRegion::nystrom_rank > 0):
// the host passes the factors of a rank-r Nystrom approximation U diag(Lambda) U^T of K_BB
// (tr_sketch below forms the sketch K_BB Omega on the device; the r-column QR and eigen
// decomposition stay on the host), and each trust-region iteration builds, like `Metric::new`,
// M = U_F Lambda U_F^T + diag(h_F + rho) on the free set with an r x r Cholesky of
// Lambda^-1 + U_F^T D^-1 U_F (D = diag(h_F + rho), rho the smallest eigenvalue floored at
// 1e-10 of the largest). CG is then preconditioned by M^-1 (Woodbury, `precond_apply`) and
// the radius is measured in the M-norm (the boundary root, the box-exit test and the
// boundary test of the radius rules). A failed Cholesky leaves that iteration unpreconditioned,
// as on the CPU. rank = 0: no Nystrom metric (u and lam are not read); with diag_shift > 0 the
// diagonal norm of TrNorm::Diagonal, M = diag(h_F + diag_shift) (the same code with r = 0:
// CG preconditioned by D^-1, the radius in the D-norm), else the identity.
//
// ------------------------------------------------------------------------------------------
// Math (per column t, block of b coordinates, gbar = K_{B,:} alpha):
//   repeat up to max_iter times:
//     g_i = gbar_i + f_i'(a_i) (+ SVR's epsilon sigma_i on the orthant sigma_i), step box
//     [slo_i, shi_i] = [lo_i - a_i, hi_i - a_i] (cut to the orthant for SVR); coordinates at a
//     bound whose gradient points outward are frozen; stop when max |g_free| < kkt_tol, or
//     when it is below kkt_rtol times its value at the first iteration.
//     s = CG-Steihaug on min g^T s + 1/2 s^T Q s, ||s|| <= radius, slo <= s <= shi over the
//     free coordinates, Q = (float)(K_BB + diag h) (products accumulated in f64); the
//     projected CG instead where h > 0 on every free coordinate.
//     pred = -(g.s + (s K s + s h s)/2); ared = -(s.gbar + sum [f_i(a_i+s_i) - f_i(a_i)] +
//     s K s / 2) (no difference of two objectives: no cancellation); rho = ared / pred; radius
//     rule Reference (0) or Paper (1); on acceptance alpha += s (clamped to the box) and
//     gbar += K_BB s.
//
// Launch: grid = T (one block per target column), block = TR_THREADS = 256 threads,
//   __launch_bounds__(256, 1) (ptxas: 241-248 registers, no spills; one block per SM), static
//   shared memory 13.8 KB, no dynamic shared memory. All threads follow the same control flow:
//   every scalar is the result of a block reduction in a fixed order (partials in shared
//   memory, 32 lanes add 8 each, every thread adds the 32 results: 3 barriers, no warp
//   shuffles), so the kernel is deterministic and every branch is block-uniform.
//   Vector loops are strided by thread (i = tid, tid + 256, ...). The products with K_BB use
//   its symmetry: thread r computes output r as a sequential f64 sum over the free columns,
//   reading kbb[free[c]*b + free[r]], so the lanes of a warp read consecutive addresses of one
//   row (coalesced where the free set is contiguous) with no cross-lane reduction. K_BB must
//   therefore be exactly symmetric (exact_tile and rff_block_gram_reduce write it so; the CPU
//   solver reads its rows, the same numbers). The free-set compaction is a serial pass by
//   thread 0 (b steps per trust-region iteration).
// Entry points: tr_solve (K_BB in f64) and tr_solve_f32 (K_BB in f32, as rff_block_gram_reduce
//   writes it; entries are converted to f64 when read).
// Arguments: kbb (b x b row-major, shared by all columns); y, lam, eps (b x T column-major:
//   the coordinates' Coord); alpha, gbar (b x T column-major, updated in place); the loss id
//   and parameter (loss.cuh); delta_max and the TrustRegion parameters; the Nystrom factors
//   ny_u (b x rank row-major), ny_lam (rank, descending) and rank (0: none); diag_shift (rho
//   of the diagonal norm when rank = 0; 0: the Euclidean norm); work
//   (T * tr_work_stride(b, rank) f64) and iwork (T * 2 * b int32) workspaces (no
//   initialisation needed); stats (T * 3 int32: tr_iters, accepted, cg_iters, as BlockStats). The host uploads K_BB and the coordinates,
//   launches, and reads back alpha, gbar and stats (the step is alpha_new - alpha_old).
// Work per CG iteration: one product with Q (nf^2 reads of K_BB converted to f32, f64 FMA;
//   nf / 256 sequential sums of nf terms per thread), ~8 vector passes and 3-4 block
//   reductions; per trust-region iteration one f64 product
//   K_BB s (b nf) and, at a box exit, one extra Q product.
// Memory: K_BB is read from global memory (L2-resident: b^2 8 B, 2 MB for b = 512) once per
//   Q product; the per-column vectors live in the global workspace (TR_NVEC b f64 = 160 B b,
//   L1/L2-resident). With T < #SMs most of the GPU idles: the kernel is latency-bound by
//   design (its point is to remove the host round trip per CG step); a multi-block-per-column
//   variant (cooperative groups) is the next step if the block solve shows up in profiles.
// ------------------------------------------------------------------------------------------
#include <stdint.h>
#include "loss.cuh"

using namespace joker;

#ifndef TR_THREADS
#define TR_THREADS 256  // a multiple of 32 (the emulator test also builds it with 64)
#endif
// |a| at most this counts as zero for SVR's orthant (loss::AT_ZERO in the Rust code)
#define TR_AT_ZERO 1e-13
#define TR_MAXRED 5     // most sums in one block reduction
#define TR_NVEC 20  // f64 vectors of length b per column in the workspace

// f64 workspace per column: TR_NVEC vectors of length b, then the metric's r x r matrix and
// three r-vectors.
__host__ __device__ inline size_t tr_work_stride(int b, int rank) {
    return (size_t)TR_NVEC * (size_t)b + (size_t)rank * (size_t)rank + 3 * (size_t)rank;
}

namespace {

struct Vecs {
    // full length b
    double *g, *slo, *shi, *ks;
    // compact, length nf (index c <-> coordinate free[c])
    double *gf, *lf, *hf, *hc, *sf;
    // CG state
    double *s, *r, *z, *d, *qd, *qs, *act, *st, *qst, *cl, *qcl;
};

// Block reductions without warp shuffles: every thread stores its partials in shared memory,
// 32 threads each add TR_THREADS/32 of them (entries lane, lane + 32, ...: conflict-free), and
// every thread adds the 32 results in order. Fixed order (deterministic), three barriers, no
// warp-level primitives (which also keeps the host emulator fast). N sums and, if EXT, one
// extreme (fmin, or fmax if want_max: NaN-ignoring like Rust's f64::min / f64::max).
struct RedBuf {
    double part[(TR_MAXRED + 1) * TR_THREADS];
    double lane[(TR_MAXRED + 1) * 32];
};

template <int N, bool EXT>
__device__ __forceinline__ void block_reduce(double (&v)[N], double& ext, bool want_max, RedBuf& rb) {
    const int tid = threadIdx.x;
#pragma unroll
    for (int k = 0; k < N; ++k) rb.part[k * TR_THREADS + tid] = v[k];
    if (EXT) rb.part[N * TR_THREADS + tid] = ext;
    __syncthreads();
    if (tid < 32) {
#pragma unroll
        for (int k = 0; k < N; ++k) {
            double s = 0.0;
            for (int q = 0; q < TR_THREADS / 32; ++q) s += rb.part[k * TR_THREADS + q * 32 + tid];
            rb.lane[k * 32 + tid] = s;
        }
        if (EXT) {
            double e = rb.part[N * TR_THREADS + tid];
            for (int q = 1; q < TR_THREADS / 32; ++q) {
                const double o = rb.part[N * TR_THREADS + q * 32 + tid];
                e = want_max ? fmax(e, o) : fmin(e, o);
            }
            rb.lane[N * 32 + tid] = e;
        }
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < N; ++k) {
        double s = 0.0;
        for (int l = 0; l < 32; ++l) s += rb.lane[k * 32 + l];
        v[k] = s;
    }
    if (EXT) {
        double e = rb.lane[N * 32];
        for (int l = 1; l < 32; ++l) e = want_max ? fmax(e, rb.lane[N * 32 + l]) : fmin(e, rb.lane[N * 32 + l]);
        ext = e;
    }
    __syncthreads();
}

template <int N>
__device__ __forceinline__ void block_sums(double (&v)[N], RedBuf& rb) {
    double unused = 0.0;
    block_reduce<N, false>(v, unused, false, rb);
}

__device__ __forceinline__ double block_sum(double x, RedBuf& rb) {
    double v[1] = {x};
    block_sums<1>(v, rb);
    return v[0];
}

__device__ __forceinline__ double block_max(double x, RedBuf& rb) {
    double v[1] = {0.0};
    block_reduce<1, true>(v, x, true, rb);
    return x;
}

// out[r] = sum_c Q[r, c] x[c] over the free set, Q[r, c] = (float)kbb[fr*b + fc],
// Q[r, r] = (float)(kbb[fr*b + fr] + h_r): the CPU's f32 model matrix, formed on the fly.
// K_BB is symmetric, so thread r reads column fr of the rows fc (Q[c, r] = Q[r, c]): the
// lanes of a warp read consecutive columns of one row (coalesced when the free set is
// contiguous), and each output is one thread's sequential f64 sum over c = 0, 1, ... (no
// shuffles). Barriers before (x complete) and after (out complete).
template <typename KT>
__device__ __forceinline__ void q_matvec(const KT* __restrict__ kbb, int b, const int* free_,
                                         int nf, const double* hc, const double* x, double* out) {
    __syncthreads();
    for (int r = threadIdx.x; r < nf; r += TR_THREADS) {
        const int fr = free_[r];
        double acc = 0.0;
        for (int c = 0; c < nf; ++c) {
            const double kv = (double)kbb[(size_t)free_[c] * (size_t)b + (size_t)fr];
            acc += (double)(float)(c == r ? kv + hc[r] : kv) * x[c];
        }
        out[r] = acc;
    }
    __syncthreads();
}

// ks[i] = sum_c kbb[free[c]*b + i] sf[c] (= (K_BB s)_i by symmetry, s zero off the free set)
// for every i < b, in f64; thread per row as in q_matvec. Barriers before and after.
template <typename KT>
__device__ __forceinline__ void k_matvec(const KT* __restrict__ kbb, int b, const int* free_,
                                         int nf, const double* sf, double* ks) {
    __syncthreads();
    for (int i = threadIdx.x; i < b; i += TR_THREADS) {
        double acc = 0.0;
        for (int c = 0; c < nf; ++c) acc += (double)kbb[(size_t)free_[c] * (size_t)b + (size_t)i] * sf[c];
        ks[i] = acc;
    }
    __syncthreads();
}

// The Nystrom metric of one trust-region iteration (twin of `Metric` in trust_region.rs):
// M = U_F diag(lam) U_F^T + diag(hc + rho) on the free set, with L the lower Cholesky factor
// of C = diag(1 / max(lam, 1e-12)) + U_F^T D^-1 U_F (Woodbury). on = false: the identity.
struct Metric {
    const double* u;    // b x r row-major (row free_[c] belongs to compact index c)
    const double* lam;  // r
    int r;
    double rho;
    double* c;          // r x r row-major: C, then its lower factor L in the lower triangle
    double *t, *tx, *ty;  // r-vectors
    bool on;
};

// D_c = hc[c] + rho and its inverse exactly as the CPU forms them.
__device__ __forceinline__ double m_dinv(const Metric& m, const double* hc, int c) {
    return 1.0 / (hc[c] + m.rho);
}

// out[k] = sum_c u[free_c, k] x[c] (U_F^T x), one thread per k, each a sequential sum in the
// CPU's order. Barriers before (x complete) and after.
__device__ __forceinline__ void m_ut(const Metric& m, const int* free_, int nf, const double* x,
                                     double* out) {
    __syncthreads();
    for (int k = threadIdx.x; k < m.r; k += TR_THREADS) {
        double acc = 0.0;
        for (int c = 0; c < nf; ++c) acc += m.u[(size_t)free_[c] * m.r + k] * x[c];
        out[k] = acc;
    }
    __syncthreads();
}

// Builds the metric for the free set and the curvature hc: C in f64 (lower triangle, each
// entry a sequential sum; the host forms it as one GEMM W^T W, W = D^-1/2 U_F, so the two
// differ by rounding), then a right-looking Cholesky (one column per step,
// the trailing update spread over the threads). A pivot that is not positive (or NaN) turns
// the metric off for this iteration, as `Metric::new` returning None does on the CPU.
__device__ void metric_build(Metric& m, const int* free_, int nf, const double* hc,
                             int* flag_sh) {
    const int tid = threadIdx.x, r = m.r;
    if (r == 0) { m.on = m.rho > 0.0; return; }  // the diagonal norm, or none
    // rho: the smallest retained eigenvalue, floored relative to the largest
    m.rho = fmax(m.lam[r - 1], 1e-10 * fmax(m.lam[0], 1e-300));
    __syncthreads();
    for (int idx = tid; idx < r * r; idx += TR_THREADS) {
        const int a = idx / r, bb = idx % r;
        if (bb > a) continue;
        double acc = 0.0;
        for (int c = 0; c < nf; ++c) {
            const double* row = m.u + (size_t)free_[c] * r;
            acc += row[a] * m_dinv(m, hc, c) * row[bb];
        }
        if (a == bb) acc += 1.0 / fmax(m.lam[a], 1e-12);
        m.c[idx] = acc;
    }
    __syncthreads();
    for (int k = 0; k < r; ++k) {
        if (tid == 0) {
            const double piv = m.c[k * r + k];
            const bool ok = piv > 0.0;
            if (ok) m.c[k * r + k] = sqrt(piv);
            *flag_sh = ok ? 1 : 0;
        }
        __syncthreads();
        if (!*flag_sh) { m.on = false; __syncthreads(); return; }
        const double lkk = m.c[k * r + k];
        for (int i = k + 1 + tid; i < r; i += TR_THREADS) m.c[i * r + k] /= lkk;
        __syncthreads();
        const int w = r - k - 1;
        for (int idx = tid; idx < w * w; idx += TR_THREADS) {
            const int i = k + 1 + idx / w, j = k + 1 + idx % w;
            if (j <= i) m.c[i * r + j] -= m.c[i * r + k] * m.c[j * r + k];
        }
        __syncthreads();
    }
    m.on = true;
}

// Preconditioner: z = M^-1 r restricted to the active coordinates (r is zero off them);
// the identity without a metric. With it: z = D^-1 r - D^-1 U_F L^-T L^-1 U_F^T D^-1 r, the
// two triangular solves by thread 0 (r^2 flops). Barriers before and after.
__device__ __forceinline__ void precond_apply(const Metric& m, const int* free_, const double* hc,
                                              const double* r, const double* act, double* z,
                                              int nf) {
    __syncthreads();
    if (!m.on) {
        for (int c = threadIdx.x; c < nf; c += TR_THREADS) z[c] = r[c];
        __syncthreads();
        return;
    }
    for (int c = threadIdx.x; c < nf; c += TR_THREADS) z[c] = r[c] * m_dinv(m, hc, c);
    m_ut(m, free_, nf, z, m.t);
    if (threadIdx.x == 0) {
        const int rr = m.r;
        for (int i = 0; i < rr; ++i) {  // L y = t
            double v = m.t[i];
            for (int j = 0; j < i; ++j) v -= m.c[i * rr + j] * m.t[j];
            m.t[i] = v / m.c[i * rr + i];
        }
        for (int i = rr - 1; i >= 0; --i) {  // L^T x = y
            double v = m.t[i];
            for (int j = i + 1; j < rr; ++j) v -= m.c[j * rr + i] * m.t[j];
            m.t[i] = v / m.c[i * rr + i];
        }
    }
    __syncthreads();
    for (int c = threadIdx.x; c < nf; c += TR_THREADS) {
        const double* row = m.u + (size_t)free_[c] * m.r;
        double acc = 0.0;
        for (int k = 0; k < m.r; ++k) acc += row[k] * m.t[k];
        z[c] = act[c] != 0.0 ? z[c] - m_dinv(m, hc, c) * acc : 0.0;
    }
    __syncthreads();
}

// The M-products of two or three vectors: with tx = U_F^T x, ty = U_F^T y,
// x.My = sum_c x_c y_c / dinv_c + sum_k lam_k tx_k ty_k. Sums over the free set are block
// reductions; the r-term sums are evaluated by every thread in the same order (block-uniform).
__device__ __forceinline__ double m_lam_dot(const Metric& m, const double* a, const double* b) {
    double acc = 0.0;
    for (int k = 0; k < m.r; ++k) acc += m.lam[k] * a[k] * b[k];
    return acc;
}

// ||x||_M^2 (||x||^2 without a metric).
__device__ double m_norm_sq(const Metric& m, const int* free_, const double* hc, const double* x,
                            int nf, RedBuf& red) {
    if (!m.on) {
        double p = 0.0;
        for (int c = threadIdx.x; c < nf; c += TR_THREADS) p += x[c] * x[c];
        return block_sum(p, red);
    }
    m_ut(m, free_, nf, x, m.tx);
    double p = 0.0;
    for (int c = threadIdx.x; c < nf; c += TR_THREADS) p += x[c] * x[c] / m_dinv(m, hc, c);
    return fmax(block_sum(p, red) + m_lam_dot(m, m.tx, m.tx), 0.0);
}

// Positive root tau of ||s + tau d|| = radius given a = d.d, sd = s.d, ss = s.s (twin of
// `to_boundary`, the numerically stable form).
__device__ __forceinline__ double to_boundary(double a, double sd, double ss, double radius) {
    const double bq = 2.0 * sd;
    const double cq = ss - radius * radius;
    if (a <= 0.0) return 0.0;
    const double disc = sqrt(fmax(bq * bq - 4.0 * a * cq, 0.0));
    double t;
    if (bq >= 0.0) t = (-2.0 * cq) / fmax(bq + disc, 2.2250738585072014e-308);  // f64::MIN_POSITIVE
    else t = (-bq + disc) / (2.0 * a);
    return fmax(t, 0.0);
}

// tau >= 0 with ||s + tau d|| = radius, in the M-norm with a metric (twin of `to_boundary_m`),
// given dd = d.d, sd = s.d and ss = s.s. All threads call it and return together.
__device__ double radius_root(const Metric& m, const int* free_, int nf, const Vecs& v,
                              double radius, double dd, double sd, double ss, RedBuf& red) {
    if (!m.on) return to_boundary(dd, sd, ss, radius);
    m_ut(m, free_, nf, v.d, m.tx);
    m_ut(m, free_, nf, v.s, m.ty);
    double w3[3] = {0.0, 0.0, 0.0};
    for (int c = threadIdx.x; c < nf; c += TR_THREADS) {
        const double dc = v.d[c], sc = v.s[c], di = m_dinv(m, v.hc, c);
        w3[0] += dc * dc / di;
        w3[1] += sc * dc / di;
        w3[2] += sc * sc / di;
    }
    block_sums<3>(w3, red);
    return to_boundary(w3[0] + m_lam_dot(m, m.tx, m.tx), w3[1] + m_lam_dot(m, m.ty, m.tx),
                       w3[2] + m_lam_dot(m, m.ty, m.ty), radius);
}

// Truncated, box-aware CG-Steihaug (twin of `cg_steihaug`); the step lands in v.s (length nf).
// Returns the CG iterations used. All threads call it and return together.
template <typename KT>
__device__ int cg_steihaug(const KT* __restrict__ kbb, int b, const int* free_, int nf,
                           const Vecs& v, const Metric& m, double radius, int max_cg_iter,
                           double cg_rtol, RedBuf& red) {
    const int tid = threadIdx.x;
    const double* g = v.gf;
    const double* slo = v.lf;
    const double* shi = v.hf;
    for (int c = tid; c < nf; c += TR_THREADS) {
        v.s[c] = 0.0;
        v.act[c] = 1.0;
        v.qs[c] = 0.0;
        v.r[c] = -g[c];
    }
    __syncthreads();
    precond_apply(m, free_, v.hc, v.r, v.act, v.z, nf);
    double p0 = 0.0, p1 = 0.0;
    for (int c = tid; c < nf; c += TR_THREADS) {
        v.d[c] = v.z[c];
        p0 += v.r[c] * v.z[c];
        p1 += v.r[c] * v.r[c];
    }
    double sums2[2] = {p0, p1};
    block_sums<2>(sums2, red);
    double rz = sums2[0];
    const double stop = sums2[1] * cg_rtol * cg_rtol;
    if (stop == 0.0) return 0;
    int it = 0;
    while (it < max_cg_iter) {
        ++it;
        q_matvec(kbb, b, free_, nf, v.hc, v.d, v.qd);
        double s4[4] = {0.0, 0.0, 0.0, 0.0};
        double tb = INFINITY;
        for (int c = tid; c < nf; c += TR_THREADS) {
            const double dc = v.d[c], sc = v.s[c];
            s4[0] += dc * v.qd[c];
            s4[1] += dc * dc;
            s4[2] += sc * dc;
            s4[3] += sc * sc;
            // to_box
            if (dc > 0.0) tb = fmin(tb, (shi[c] - sc) / dc);
            else if (dc < 0.0) tb = fmin(tb, (slo[c] - sc) / dc);
        }
        block_reduce<4, true>(s4, tb, false, red);
        const double dqd = s4[0], dd = s4[1];
        const double tau_radius = radius_root(m, free_, nf, v, radius, dd, s4[2], s4[3], red);
        const bool curved = dqd > 1e-14 * dd;
        const double omega = curved ? rz / dqd : INFINITY;
        const double tau = fmin(omega, tau_radius);
        const double tau_box = fmax(tb, 0.0);
        if (tau_box >= tau) {
            double rr = 0.0;
            for (int c = tid; c < nf; c += TR_THREADS) {
                v.s[c] += tau * v.d[c];
                v.qs[c] += tau * v.qd[c];
                if (!(tau >= tau_radius)) {
                    v.r[c] = v.act[c] != 0.0 ? v.r[c] - omega * v.qd[c] : 0.0;
                    rr += v.r[c] * v.r[c];
                }
            }
            if (tau >= tau_radius) {
                __syncthreads();
                return it;  // on the trust-region boundary
            }
            rr = block_sum(rr, red);
            if (rr <= stop) return it;
            precond_apply(m, free_, v.hc, v.r, v.act, v.z, nf);
            double rzn = 0.0;
            for (int c = tid; c < nf; c += TR_THREADS) rzn += v.r[c] * v.z[c];
            const double rz_new = block_sum(rzn, red);
            const double beta = rz_new / rz;
            for (int c = tid; c < nf; c += TR_THREADS) v.d[c] = v.z[c] + beta * v.d[c];
            rz = rz_new;
            continue;
        }
        // The move leaves the box: stopped at the first bound, or clipped.
        for (int c = tid; c < nf; c += TR_THREADS) {
            v.st[c] = joker_clamp(v.s[c] + tau_box * v.d[c], slo[c], shi[c]);
            v.qst[c] = v.qs[c] + tau_box * v.qd[c];
            v.cl[c] = joker_clamp(v.s[c] + tau * v.d[c], slo[c], shi[c]);
        }
        q_matvec(kbb, b, free_, nf, v.hc, v.cl, v.qcl);
        double m4[4] = {0.0, 0.0, 0.0, 0.0};
        for (int c = tid; c < nf; c += TR_THREADS) {
            m4[0] += g[c] * v.cl[c];
            m4[1] += v.cl[c] * v.qcl[c];
            m4[2] += g[c] * v.st[c];
            m4[3] += v.st[c] * v.qst[c];
        }
        block_sums<4>(m4, red);
        const bool take_clipped = m4[0] + 0.5 * m4[1] < m4[2] + 0.5 * m4[3];
        // Fix the coordinates at a bound whose model gradient points outward; restart CG on
        // the rest with the steepest-descent direction.
        double f3[3] = {0.0, 0.0, 0.0};  // any active, s.s, r.r
        for (int c = tid; c < nf; c += TR_THREADS) {
            if (take_clipped) {
                v.s[c] = v.cl[c];
                v.qs[c] = v.qcl[c];
            } else {
                v.s[c] = v.st[c];
                v.qs[c] = v.qst[c];
            }
            const double gi = g[c] + v.qs[c];
            // with a metric, a coordinate on a bound that the move pushed outward is fixed too
            // (M^-1 r may point out where the gradient points in: it would block every move)
            const bool pushed = m.on && ((v.d[c] < 0.0 && v.s[c] <= slo[c]) ||
                                         (v.d[c] > 0.0 && v.s[c] >= shi[c]));
            const bool at_lo = v.s[c] <= slo[c] && (gi > 0.0 || pushed);
            const bool at_hi = v.s[c] >= shi[c] && (gi < 0.0 || pushed);
            if (at_lo || at_hi) v.act[c] = 0.0;
            v.r[c] = v.act[c] != 0.0 ? -gi : 0.0;
            f3[0] += v.act[c];
            f3[1] += v.s[c] * v.s[c];
            f3[2] += v.r[c] * v.r[c];
        }
        block_sums<3>(f3, red);
        const double s_norm = m.on ? sqrt(m_norm_sq(m, free_, v.hc, v.s, nf, red)) : sqrt(f3[1]);
        if (!(f3[0] > 0.0) || s_norm >= radius * (1.0 - 1e-12)) return it;
        if (f3[2] <= stop) return it;
        precond_apply(m, free_, v.hc, v.r, v.act, v.z, nf);
        double rzn = 0.0;
        for (int c = tid; c < nf; c += TR_THREADS) {
            rzn += v.r[c] * v.z[c];
            v.d[c] = v.z[c];
        }
        rz = block_sum(rzn, red);
    }
    __syncthreads();
    return it;
}

// Projected CG (twin of `cg_projected`, Lin and More's TRON subspace step): rounds of CG on
// the coordinates not held at a bound, through the box, each ending at a tenth of its first
// residual (or cg_rtol of the solve's first; cg_rtol alone where no coordinate has a bound),
// the radius or the budget; then a search along
// the round's step w = s - base, P[base + t w] for t = 1, 1/2, ... (TR_PROJ_HALVINGS
// halvings), kept at the first sufficient decrease of the model; the coordinates it clamps
// are held on their bound for the later rounds (held: one int per compact coordinate). The
// product Q x of a trial point is always formed afresh here (the CPU adds the rows of the
// clamped coordinates when they are few); the budget counts a product where the CPU forms one.
// Where no trial decreases the model enough it returns -(products used + 1), and the caller
// runs cg_steihaug from the start. Otherwise the step lands in v.s; returns the products used. All threads call it and return together. Vectors: act
// (the round's free flags), st / qst (the round's base and Q base), cl / qcl (the trial point
// and its product), z (the trial's step for its M-norm once CG is done).
#define TR_PROJ_ROUND_RTOL 0.1
#define TR_PROJ_MU 0.01
#define TR_PROJ_HALVINGS 4
template <typename KT>
__device__ int cg_projected(const KT* __restrict__ kbb, int b, const int* free_, int nf,
                            const Vecs& v, const Metric& m, int* held, double radius,
                            int max_cg_iter, double cg_rtol, RedBuf& red) {
    const int tid = threadIdx.x;
    const double* g = v.gf;
    const double* slo = v.lf;
    const double* shi = v.hf;
    double gb[2] = {0.0, 0.0};  // g.g, coordinates with a bound
    for (int c = tid; c < nf; c += TR_THREADS) {
        v.s[c] = 0.0;
        v.qs[c] = 0.0;
        held[c] = 0;
        gb[0] += g[c] * g[c];
        if (isfinite(slo[c]) || isfinite(shi[c])) gb[1] += 1.0;
    }
    block_sums<2>(gb, red);
    const double stop = gb[0] * cg_rtol * cg_rtol;
    if (stop == 0.0) return 0;
    const bool boxed = gb[1] > 0.0;  // without a bound the rounds run to cg_rtol
    int it = 0;
    while (it < max_cg_iter) {
        // the round's coordinates: gradient into the box, not held on a bound
        double rr0 = 0.0;
        for (int c = tid; c < nf; c += TR_THREADS) {
            const double gi = g[c] + v.qs[c];
            const bool at_lo = v.s[c] <= slo[c] && (gi > 0.0 || held[c] != 0);
            const bool at_hi = v.s[c] >= shi[c] && (gi < 0.0 || held[c] != 0);
            v.act[c] = (at_lo || at_hi) ? 0.0 : 1.0;
            v.r[c] = v.act[c] != 0.0 ? -gi : 0.0;
            rr0 += v.r[c] * v.r[c];
            v.st[c] = v.s[c];
            v.qst[c] = v.qs[c];
        }
        const double rr_first = block_sum(rr0, red);
        if (rr_first <= stop) break;
        const double round_stop =
            boxed ? fmax(stop, rr_first * TR_PROJ_ROUND_RTOL * TR_PROJ_ROUND_RTOL) : stop;
        precond_apply(m, free_, v.hc, v.r, v.act, v.z, nf);
        double rz0 = 0.0;
        for (int c = tid; c < nf; c += TR_THREADS) {
            v.d[c] = v.z[c];
            rz0 += v.r[c] * v.z[c];
        }
        double rz = block_sum(rz0, red);
        bool on_radius = false;
        while (it < max_cg_iter) {
            ++it;
            q_matvec(kbb, b, free_, nf, v.hc, v.d, v.qd);
            double s4[4] = {0.0, 0.0, 0.0, 0.0};
            for (int c = tid; c < nf; c += TR_THREADS) {
                const double dc = v.d[c], sc = v.s[c];
                s4[0] += dc * v.qd[c];
                s4[1] += dc * dc;
                s4[2] += sc * dc;
                s4[3] += sc * sc;
            }
            block_sums<4>(s4, red);
            const double dqd = s4[0], dd = s4[1];
            const double tau_radius = radius_root(m, free_, nf, v, radius, dd, s4[2], s4[3], red);
            const bool curved = dqd > 1e-14 * dd;
            const double omega = curved ? rz / dqd : INFINITY;
            const double tau = fmin(omega, tau_radius);
            double rr = 0.0;
            for (int c = tid; c < nf; c += TR_THREADS) {
                v.s[c] += tau * v.d[c];
                v.qs[c] += tau * v.qd[c];
                if (!(tau >= tau_radius)) {
                    if (v.act[c] != 0.0) v.r[c] -= omega * v.qd[c];
                    rr += v.r[c] * v.r[c];
                }
            }
            if (tau >= tau_radius) {
                on_radius = true;
                __syncthreads();
                break;
            }
            rr = block_sum(rr, red);
            if (rr <= round_stop) break;
            precond_apply(m, free_, v.hc, v.r, v.act, v.z, nf);
            double rzn = 0.0;
            for (int c = tid; c < nf; c += TR_THREADS) rzn += v.r[c] * v.z[c];
            const double rz_new = block_sum(rzn, red);
            const double beta = rz_new / rz;
            for (int c = tid; c < nf; c += TR_THREADS) v.d[c] = v.z[c] + beta * v.d[c];
            rz = rz_new;
        }
        double outside = 0.0;
        for (int c = tid; c < nf; c += TR_THREADS)
            if (v.s[c] < slo[c] || v.s[c] > shi[c]) outside += 1.0;
        if (!(block_sum(outside, red) > 0.0)) break;  // no bound crossed: the step stands
        // The projected search along w = s - base.
        double mb[2] = {0.0, 0.0};
        for (int c = tid; c < nf; c += TR_THREADS) {
            mb[0] += g[c] * v.st[c];
            mb[1] += v.st[c] * v.qst[c];
        }
        block_sums<2>(mb, red);
        const double m_base = mb[0] + 0.5 * mb[1];
        double t = 1.0;
        bool found = false;
        for (int h = 0; h <= TR_PROJ_HALVINGS; ++h) {
            double moved = 0.0;
            for (int c = tid; c < nf; c += TR_THREADS) {
                const double y = v.st[c] + t * (v.s[c] - v.st[c]);
                v.cl[c] = joker_clamp(y, slo[c], shi[c]);
                if (v.cl[c] - y != 0.0) moved += 1.0;
                v.z[c] = v.cl[c] - v.st[c];
            }
            moved = block_sum(moved, red);
            q_matvec(kbb, b, free_, nf, v.hc, v.cl, v.qcl);
            if (moved * 4.0 > (double)nf) ++it;
            double p3[3] = {0.0, 0.0, 0.0};  // slope, g.x, x.Qx
            for (int c = tid; c < nf; c += TR_THREADS) {
                p3[0] += (g[c] + v.qst[c]) * v.z[c];
                p3[1] += g[c] * v.cl[c];
                p3[2] += v.cl[c] * v.qcl[c];
            }
            block_sums<3>(p3, red);
            const double mx = p3[1] + 0.5 * p3[2];
            const bool inside = !m.on || sqrt(m_norm_sq(m, free_, v.hc, v.z, nf, red)) <= radius;
            if (inside && mx < m_base && mx - m_base <= TR_PROJ_MU * p3[0]) {
                found = true;
                break;
            }
            t *= 0.5;
        }
        if (!found) return -(it + 1);  // the caller runs cg_steihaug (one inlined copy)
        for (int c = tid; c < nf; c += TR_THREADS) {
            const double y = v.st[c] + t * (v.s[c] - v.st[c]);
            if (v.cl[c] != y) held[c] = 1;
            v.s[c] = v.cl[c];
            v.qs[c] = v.qcl[c];
        }
        __syncthreads();
        if (on_radius) break;
    }
    __syncthreads();
    return it;
}

// ==========================================================================================
// tr_solve_body: one trust-region block solve per column (twin of solve_column); see the
// header. rule: 0 = RadiusRule::Reference, 1 = RadiusRule::Paper. KT: the storage of K_BB
// (every entry is converted to f64 when read, so an f32 K_BB gives exactly the results of the
// same values stored in f64).
// ==========================================================================================
template <typename KT>
__device__ __forceinline__ void tr_solve_body(
    const KT* __restrict__ kbb, int b, int loss, double lparam, const double* __restrict__ ycol,
    const double* __restrict__ lamcol, const double* __restrict__ epscol,
    double* __restrict__ alpha_all, double* __restrict__ gbar_all, double delta_max, double eta,
    int max_iter, int max_cg_iter, double cg_rtol, double kkt_tol, double kkt_rtol, int rule,
    const double* __restrict__ ny_u, const double* __restrict__ ny_lam, int rank,
    double diag_shift, double* __restrict__ work, int* __restrict__ iwork,
    int* __restrict__ stats) {
    __shared__ RedBuf red;
    __shared__ int nfree_sh;
    __shared__ int chol_ok_sh;
    const int tid = threadIdx.x;
    const size_t col = blockIdx.x;
    const double* y = ycol + col * (size_t)b;
    const double* lam = lamcol + col * (size_t)b;
    const double* eps = epscol + col * (size_t)b;
    double* alpha = alpha_all + col * (size_t)b;
    double* gbar = gbar_all + col * (size_t)b;
    double* w = work + col * tr_work_stride(b, rank);
    Vecs v;
    double** slots[TR_NVEC] = {&v.g,  &v.slo, &v.shi, &v.ks, &v.gf, &v.lf, &v.hf,
                               &v.hc, &v.sf,  &v.s,   &v.r,  &v.z,  &v.d,  &v.qd,
                               &v.qs, &v.act, &v.st,  &v.qst, &v.cl, &v.qcl};
    for (int k = 0; k < TR_NVEC; ++k) *slots[k] = w + (size_t)k * (size_t)b;
    v.sf = v.s;  // the CG step is the compact step
    Metric m;
    m.u = ny_u;
    m.lam = ny_lam;
    m.r = rank;
    m.rho = rank == 0 ? diag_shift : 0.0;
    m.c = w + (size_t)TR_NVEC * (size_t)b;
    m.t = m.c + (size_t)rank * (size_t)rank;
    m.tx = m.t + rank;
    m.ty = m.tx + rank;
    m.on = false;
    int* flag = iwork + col * 2 * (size_t)b;
    int* free_ = flag + b;

    const double l1 = loss_l1_weight(loss, lparam);
    int tr_iters = 0, accepted = 0, cg_iters = 0;
    double radius = 0.25 * delta_max;

    double kkt0 = -1.0;  // the block's KKT residual at its start (kkt_rtol is relative to it)
    for (int outer = 0; outer < max_iter; ++outer) {
        // Gradient, orthant, step box, and the free set.
        double kkt = 0.0;
        for (int i = tid; i < b; i += TR_THREADS) {
            const Coord k = {y[i], lam[i], eps[i]};
            const double a = alpha[i];
            const double gs = gbar[i] + loss_grad(loss, lparam, a, k);
            double lo, hi;
            loss_bounds(loss, lparam, k, lo, hi);
            double lo_s = lo - a, hi_s = hi - a;
            double gi = gs;
            if (l1 > 0.0) {
                double sigma;
                // within TR_AT_ZERO of zero the orthant follows the gradient, as at zero
                // (loss::AT_ZERO: an edge missed by a rounding error is not a sign)
                if (a > TR_AT_ZERO) sigma = 1.0;
                else if (a < -TR_AT_ZERO) sigma = -1.0;
                else if (gs < -l1) sigma = 1.0;
                else if (gs > l1) sigma = -1.0;
                else sigma = 0.0;
                gi = gs + l1 * sigma;
                if (sigma > 0.0) lo_s = fmax(lo_s, -a);
                else if (sigma < 0.0) hi_s = fmin(hi_s, -a);
                else { lo_s = 0.0; hi_s = 0.0; }
            }
            v.g[i] = gi;
            v.slo[i] = lo_s;
            v.shi[i] = hi_s;
            const double tol = 1e-13 * (1.0 + fabs(a));
            // is_frozen
            const bool frozen = (lo_s >= -tol && gi > 0.0) || (hi_s <= tol && gi < 0.0) ||
                                (lo_s >= -tol && hi_s <= tol);
            flag[i] = frozen ? 0 : 1;
            if (!frozen) kkt = fmax(kkt, fabs(gi));
        }
        __syncthreads();
        if (tid == 0) {
            int nf = 0;
            for (int i = 0; i < b; ++i)
                if (flag[i]) free_[nf++] = i;
            nfree_sh = nf;
        }
        kkt = block_max(kkt, red);  // its barriers also publish free_ and nfree_sh
        const int nf = nfree_sh;
        if (kkt0 < 0.0) kkt0 = kkt;
        if (kkt < kkt_tol || kkt < kkt_rtol * kkt0 || nf == 0) break;
        ++tr_iters;

        // The model restricted to the free coordinates.
        for (int c = tid; c < nf; c += TR_THREADS) {
            const int i = free_[c];
            const Coord k = {y[i], lam[i], eps[i]};
            v.hc[c] = loss_hess(loss, lparam, alpha[i], k);
            v.gf[c] = v.g[i];
            v.lf[c] = v.slo[i];
            v.hf[c] = v.shi[i];
        }
        __syncthreads();
        metric_build(m, free_, nf, v.hc, &chol_ok_sh);
        // the projected CG where the loss's curvature is positive on every free coordinate
        // (the device's model is always the objective's own curvature), as on the CPU; flag
        // is free once the free set is compacted and holds its held coordinates
        double flat = 0.0;
        for (int c = tid; c < nf; c += TR_THREADS)
            if (!(v.hc[c] > 0.0)) flat += 1.0;
        int used = -1;
        if (block_sum(flat, red) == 0.0)
            used = cg_projected(kbb, b, free_, nf, v, m, flag, radius, max_cg_iter, cg_rtol, red);
        if (used < 0)  // not projected, or its search failed (-(products + 1))
            used = -(used + 1) + cg_steihaug(kbb, b, free_, nf, v, m, radius, max_cg_iter, cg_rtol, red);
        cg_iters += used;

        // Predicted and actual decrease.
        k_matvec(kbb, b, free_, nf, v.sf, v.ks);
        double p5[5] = {0.0, 0.0, 0.0, 0.0, 0.0};  // g.s, s K s, s h s, sum dJ_i, s.s
        for (int c = tid; c < nf; c += TR_THREADS) {
            const int i = free_[c];
            const double sc = v.sf[c];
            const Coord k = {y[i], lam[i], eps[i]};
            p5[0] += v.gf[c] * sc;
            p5[1] += v.ks[i] * sc;
            p5[2] += v.hc[c] * sc * sc;
            p5[3] += sc * gbar[i] + loss_dual_change(loss, lparam, alpha[i], sc, k);
            p5[4] += sc * sc;
        }
        block_sums<5>(p5, red);
        const double gs_dot = p5[0], sks = p5[1], shs = p5[2];
        const double pred = -(gs_dot + 0.5 * (sks + shs));
        const double noise = 1e-13 * (fabs(gs_dot) + fabs(sks) + fabs(shs));
        if (!(pred > noise)) break;  // the model promises nothing measurable: solved
        const double dj = p5[3] + 0.5 * sks;
        const double ared = -dj;
        const double rho = ared / pred;
        const double norm_s = m.on ? sqrt(m_norm_sq(m, free_, v.hc, v.sf, nf, red)) : sqrt(p5[4]);
        const bool on_boundary = fabs(norm_s - radius) <= 1e-3 * radius;
        bool accept;
        if (rule == 0) {  // Reference
            if (!(ared > 0.0)) radius *= 0.25;
            else if (rho < 0.25) radius *= 0.5;
            else if (rho > 0.75 && on_boundary) radius = fmin(2.0 * radius, delta_max);
            accept = ared > 0.0 && rho > eta;
        } else {  // Paper
            if (!(rho >= 0.5)) radius *= 0.25;
            else if (rho > 0.75 && on_boundary) radius = fmin(2.0 * radius, delta_max);
            accept = rho > eta;
        }
        if (accept) {
            ++accepted;
            for (int c = tid; c < nf; c += TR_THREADS) {
                const int i = free_[c];
                const Coord k = {y[i], lam[i], eps[i]};
                double lo, hi;
                loss_bounds(loss, lparam, k, lo, hi);
                alpha[i] = joker_clamp(alpha[i] + v.sf[c], lo, hi);
            }
            for (int i = tid; i < b; i += TR_THREADS) gbar[i] += v.ks[i];
            __syncthreads();
        }
        double amax = 0.0;
        for (int i = tid; i < b; i += TR_THREADS) amax = fmax(amax, fabs(alpha[i]));
        const double scale = 1.0 + block_max(amax, red);
        if (radius < 1e-14 * scale) break;
    }
    if (tid == 0) {
        stats[3 * col + 0] = tr_iters;
        stats[3 * col + 1] = accepted;
        stats[3 * col + 2] = cg_iters;
    }
}

}  // namespace

// tr_solve: K_BB in f64 (as exact_tile writes it and the CPU solver reads it).
extern "C" __global__ void __launch_bounds__(TR_THREADS, 1)
tr_solve(const double* __restrict__ kbb, int b, int loss, double lparam,
         const double* __restrict__ y, const double* __restrict__ lam,
         const double* __restrict__ eps, double* __restrict__ alpha, double* __restrict__ gbar,
         double delta_max, double eta, int max_iter, int max_cg_iter, double cg_rtol,
         double kkt_tol, double kkt_rtol, int rule, const double* __restrict__ ny_u,
         const double* __restrict__ ny_lam, int rank, double diag_shift,
         double* __restrict__ work, int* __restrict__ iwork, int* __restrict__ stats) {
    tr_solve_body<double>(kbb, b, loss, lparam, y, lam, eps, alpha, gbar, delta_max, eta,
                          max_iter, max_cg_iter, cg_rtol, kkt_tol, kkt_rtol, rule, ny_u, ny_lam, rank,
                          diag_shift, work, iwork, stats);
}

// tr_solve_f32: the same with K_BB in f32, as rff_block_gram_reduce writes it (the CPU's
// feature path computes the Gram in the working precision too): no conversion pass needed.
extern "C" __global__ void __launch_bounds__(TR_THREADS, 1)
tr_solve_f32(const float* __restrict__ kbb, int b, int loss, double lparam,
             const double* __restrict__ y, const double* __restrict__ lam,
             const double* __restrict__ eps, double* __restrict__ alpha,
             double* __restrict__ gbar, double delta_max, double eta, int max_iter,
             int max_cg_iter, double cg_rtol, double kkt_tol, double kkt_rtol, int rule,
             const double* __restrict__ ny_u, const double* __restrict__ ny_lam, int rank,
             double diag_shift, double* __restrict__ work, int* __restrict__ iwork,
             int* __restrict__ stats) {
    tr_solve_body<float>(kbb, b, loss, lparam, y, lam, eps, alpha, gbar, delta_max, eta,
                         max_iter, max_cg_iter, cg_rtol, kkt_tol, kkt_rtol, rule, ny_u, ny_lam, rank,
                         diag_shift, work, iwork, stats);
}

// tr_sketch<<<(ceil(b/256), r + 1), 256>>>(kbb, b, omega, r, out): the Nystrom sketch
// out[k*b + i] = sum_j K_BB[i, j] omega[k*b + j] for k < r (omega and out b x r column-major,
// as faer stores them) and out[r*b + i] = K_BB[i, i] (the trace's terms), in f64 with a
// sequential sum per output. By symmetry thread i reads kbb[j*b + i]: the lanes of a warp read
// consecutive addresses. The host does the QR and the r x r eigendecomposition (nystrom.rs).
template <typename KT>
__device__ __forceinline__ void tr_sketch_body(const KT* __restrict__ kbb, int b,
                                               const double* __restrict__ omega, int r,
                                               double* __restrict__ out) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const int k = blockIdx.y;
    if (i >= b) return;
    if (k == r) {
        out[(size_t)r * b + i] = (double)kbb[(size_t)i * b + i];
        return;
    }
    const double* om = omega + (size_t)k * b;
    double acc = 0.0;
    for (int j = 0; j < b; ++j) acc += (double)kbb[(size_t)j * b + i] * om[j];
    out[(size_t)k * b + i] = acc;
}

extern "C" __global__ void tr_sketch(const double* __restrict__ kbb, int b,
                                     const double* __restrict__ omega, int r,
                                     double* __restrict__ out) {
    tr_sketch_body<double>(kbb, b, omega, r, out);
}

extern "C" __global__ void tr_sketch_f32(const float* __restrict__ kbb, int b,
                                         const double* __restrict__ omega, int r,
                                         double* __restrict__ out) {
    tr_sketch_body<float>(kbb, b, omega, r, out);
}

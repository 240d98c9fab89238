// trsolve.cu: the trust-region block solve (paper Algorithm 1) with the truncated, box-aware
// CG-Steihaug (Algorithm 2) on the device, one thread block per target column.
//
// Nothing here has run on a GPU yet: validated by ptxas and by the host emulator against the
// Rust solver (cuda/hostemu/test_trsolve.cpp reads cuda/hostemu/tr_vectors.txt, which
// tests/tr_vectors.rs regenerates from src/solver/trust_region.rs and checks is current).
//
// CPU twin: `solve_column` in src/solver/trust_region.rs, mirrored statement by statement
// (same gradient/orthant/free-set pass, same model matrix Q = K_BB + diag(h) rounded to f32,
// same CG-Steihaug with its stopped-vs-clipped box exits and restarts on the still-free
// coordinates, same predicted and actual decrease computed directly, same radius rules,
// acceptance and stopping tests); the loss math is cuda/loss.cuh, a twin of src/loss.rs.
// The only intended differences are summation orders (block reductions instead of the CPU's
// 8-lane dots), so on well-conditioned problems both take the same accepted steps and
// differ by rounding. The Nystrom metric of the CPU solver (TrustRegion::nystrom_rank > 0) is
// not implemented: the host must use this kernel only with nystrom_rank = 0. The hook for it
// is `precond_apply` (and `m_norm_sq` / the boundary root, which would need M-products).
//
// ------------------------------------------------------------------------------------------
// Math (per column t, block of b coordinates, gbar = K_{B,:} alpha):
//   repeat up to max_iter times:
//     g_i = gbar_i + f_i'(a_i) (+ SVR's epsilon sigma_i on the orthant sigma_i), step box
//     [slo_i, shi_i] = [lo_i - a_i, hi_i - a_i] (cut to the orthant for SVR); coordinates at a
//     bound whose gradient points outward are frozen; stop when max |g_free| < kkt_tol.
//     s = CG-Steihaug on min g^T s + 1/2 s^T Q s, ||s|| <= radius, slo <= s <= shi over the
//     free coordinates, Q = (float)(K_BB + diag h) (products accumulated in f64).
//     pred = -(g.s + (s K s + s h s)/2); ared = -(s.gbar + sum [f_i(a_i+s_i) - f_i(a_i)] +
//     s K s / 2) (no difference of two objectives: no cancellation); rho = ared / pred; radius
//     rule Reference (0) or Paper (1); on acceptance alpha += s (clamped to the box) and
//     gbar += K_BB s.
//
// Launch: grid = T (one block per target column), block = TR_THREADS = 256 threads,
//   __launch_bounds__(256, 1) (ptxas: ~190 registers, no spills; one block per SM), static
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
//   and parameter (loss.cuh); delta_max and the TrustRegion parameters; work (T * TR_NVEC * b
//   f64) and iwork (T * 2 * b int32) workspaces (no initialisation needed); stats (T * 3 int32:
//   tr_iters, accepted, cg_iters, as BlockStats). The host uploads K_BB and the coordinates,
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
#define TR_MAXRED 5     // most sums in one block reduction
#define TR_NVEC 20  // f64 vectors of length b per column in the workspace

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

// Preconditioner hook: z = M^-1 r restricted to the active coordinates. Identity for now
// (the CPU solver without a Nystrom metric returns r unchanged; r is already zero off the
// active set). A Nystrom preconditioner (Woodbury with a small Cholesky) goes here, together
// with the M-norm in the boundary root and the radius tests. Ends with a barrier.
__device__ __forceinline__ void precond_apply(const double* r, const double* act, double* z, int nf) {
    (void)act;
    for (int c = threadIdx.x; c < nf; c += TR_THREADS) z[c] = r[c];
    __syncthreads();
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

// Truncated, box-aware CG-Steihaug (twin of `cg_steihaug`); the step lands in v.s (length nf).
// Returns the CG iterations used. All threads call it and return together.
template <typename KT>
__device__ int cg_steihaug(const KT* __restrict__ kbb, int b, const int* free_, int nf,
                           const Vecs& v, double radius, int max_cg_iter, double cg_rtol,
                           RedBuf& red) {
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
    precond_apply(v.r, v.act, v.z, nf);
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
        const double tau_radius = to_boundary(dd, s4[2], s4[3], radius);
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
            precond_apply(v.r, v.act, v.z, nf);
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
            const bool at_lo = v.s[c] <= slo[c] && gi > 0.0;
            const bool at_hi = v.s[c] >= shi[c] && gi < 0.0;
            if (at_lo || at_hi) v.act[c] = 0.0;
            v.r[c] = v.act[c] != 0.0 ? -gi : 0.0;
            f3[0] += v.act[c];
            f3[1] += v.s[c] * v.s[c];
            f3[2] += v.r[c] * v.r[c];
        }
        block_sums<3>(f3, red);
        if (!(f3[0] > 0.0) || sqrt(f3[1]) >= radius * (1.0 - 1e-12)) return it;
        if (f3[2] <= stop) return it;
        precond_apply(v.r, v.act, v.z, nf);
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
    int max_iter, int max_cg_iter, double cg_rtol, double kkt_tol, int rule,
    double* __restrict__ work, int* __restrict__ iwork, int* __restrict__ stats) {
    __shared__ RedBuf red;
    __shared__ int nfree_sh;
    const int tid = threadIdx.x;
    const size_t col = blockIdx.x;
    const double* y = ycol + col * (size_t)b;
    const double* lam = lamcol + col * (size_t)b;
    const double* eps = epscol + col * (size_t)b;
    double* alpha = alpha_all + col * (size_t)b;
    double* gbar = gbar_all + col * (size_t)b;
    double* w = work + col * (size_t)TR_NVEC * (size_t)b;
    Vecs v;
    double** slots[TR_NVEC] = {&v.g,  &v.slo, &v.shi, &v.ks, &v.gf, &v.lf, &v.hf,
                               &v.hc, &v.sf,  &v.s,   &v.r,  &v.z,  &v.d,  &v.qd,
                               &v.qs, &v.act, &v.st,  &v.qst, &v.cl, &v.qcl};
    for (int k = 0; k < TR_NVEC; ++k) *slots[k] = w + (size_t)k * (size_t)b;
    v.sf = v.s;  // the CG step is the compact step
    int* flag = iwork + col * 2 * (size_t)b;
    int* free_ = flag + b;

    const double l1 = loss_l1_weight(loss, lparam);
    int tr_iters = 0, accepted = 0, cg_iters = 0;
    double radius = 0.25 * delta_max;

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
                if (a > 0.0) sigma = 1.0;
                else if (a < 0.0) sigma = -1.0;
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
        if (kkt < kkt_tol || nf == 0) break;
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
        cg_iters += cg_steihaug(kbb, b, free_, nf, v, radius, max_cg_iter, cg_rtol, red);

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
        const double norm_s = sqrt(p5[4]);
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
         double kkt_tol, int rule, double* __restrict__ work, int* __restrict__ iwork,
         int* __restrict__ stats) {
    tr_solve_body<double>(kbb, b, loss, lparam, y, lam, eps, alpha, gbar, delta_max, eta,
                          max_iter, max_cg_iter, cg_rtol, kkt_tol, rule, work, iwork, stats);
}

// tr_solve_f32: the same with K_BB in f32, as rff_block_gram_reduce writes it (the CPU's
// feature path computes the Gram in the working precision too): no conversion pass needed.
extern "C" __global__ void __launch_bounds__(TR_THREADS, 1)
tr_solve_f32(const float* __restrict__ kbb, int b, int loss, double lparam,
             const double* __restrict__ y, const double* __restrict__ lam,
             const double* __restrict__ eps, double* __restrict__ alpha,
             double* __restrict__ gbar, double delta_max, double eta, int max_iter,
             int max_cg_iter, double cg_rtol, double kkt_tol, int rule,
             double* __restrict__ work, int* __restrict__ iwork, int* __restrict__ stats) {
    tr_solve_body<float>(kbb, b, loss, lparam, y, lam, eps, alpha, gbar, delta_max, eta,
                         max_iter, max_cg_iter, cg_rtol, kkt_tol, rule, work, iwork, stats);
}

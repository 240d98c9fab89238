// loss.cuh: the dual coordinate functions of the eight losses, a line-by-line twin of
// src/loss.rs (Table 2 of the Joker paper). Used by trsolve.cu; compiled for the host by the
// emulator tests. Keep the two files in step: same formulas, same operation order, same
// clamps. Rust -> CUDA: `f64::min/max` -> fmin/fmax (NaN-ignoring in both), `clamp` ->
// joker_clamp (same comparisons), `signum` -> copysign(1, a) (Rust: +0.0 -> 1.0), `powf` ->
// pow, `ln` -> log, `ln_1p` -> log1p, `is_finite` -> isfinite.
//
// Loss ids (the Rust enum order):
//   0 SquaredError          param unused
//   1 Huber                 param = delta
//   2 EpsilonInsensitive    param = epsilon (SVR)
//   3 Absolute              param unused
//   4 Lp                    param = p (> 1)
//   5 Hinge                 param unused (L1-SVC)
//   6 SquaredHinge          param unused (L2-SVC)
//   7 Logistic              param unused (KLR)
// A coordinate is (y, lam, eps) as `Coord` in src/loss.rs: target, lambda_i = lambda / w_i,
// and KLR's box margin.
#pragma once
#include <math.h>

#define JOKER_LOSS_SQUARED 0
#define JOKER_LOSS_HUBER 1
#define JOKER_LOSS_EPS_INSENSITIVE 2
#define JOKER_LOSS_ABSOLUTE 3
#define JOKER_LOSS_LP 4
#define JOKER_LOSS_HINGE 5
#define JOKER_LOSS_SQUARED_HINGE 6
#define JOKER_LOSS_LOGISTIC 7

namespace joker {

struct Coord {
    double y, lam, eps;
};

// Rust's f64::clamp (min <= max assumed): NaN stays NaN.
__host__ __device__ __forceinline__ double joker_clamp(double x, double lo, double hi) {
    if (x < lo) x = lo;
    if (x > hi) x = hi;
    return x;
}

// Rust's f64::signum for non-NaN input (+0.0 -> 1.0, -0.0 -> -1.0).
__host__ __device__ __forceinline__ double joker_signum(double a) {
    return isnan(a) ? a : copysign(1.0, a);
}

// `x log x` with `0 log 0 = 0`.
__host__ __device__ __forceinline__ double xlogx(double x) { return x <= 0.0 ? 0.0 : x * log(x); }

// `(x + s) log(x + s) - x log x` without cancellation for small `s`.
__host__ __device__ __forceinline__ double xlogx_diff(double x, double s) {
    const double xs = x + s;
    if (x <= 0.0 || xs <= 0.0) return xlogx(xs) - xlogx(x);
    // (x+s) log(x+s) - x log x = x log(1 + s/x) + s log(x+s)
    return x * log1p(s / x) + s * log(xs);
}

// Weight of the non-smooth |a| term (SVR's epsilon), handled orthant-wise by the solver.
__host__ __device__ __forceinline__ double loss_l1_weight(int loss, double param) {
    return loss == JOKER_LOSS_EPS_INSENSITIVE ? param : 0.0;
}

// q = p / (p - 1), the conjugate exponent for Lp.
__host__ __device__ __forceinline__ double loss_q(double p) { return p / (p - 1.0); }

// The box [lo, hi] of a coordinate.
__host__ __device__ __forceinline__ void loss_bounds(int loss, double param, const Coord& k, double& lo,
                                                     double& hi) {
    const double c = 1.0 / k.lam;
    const double inf = INFINITY;
    double l, h;
    switch (loss) {
        case JOKER_LOSS_SQUARED:
        case JOKER_LOSS_LP: lo = -inf; hi = inf; return;
        case JOKER_LOSS_HUBER: lo = -param * c; hi = param * c; return;
        case JOKER_LOSS_EPS_INSENSITIVE:
        case JOKER_LOSS_ABSOLUTE: lo = -c; hi = c; return;
        case JOKER_LOSS_HINGE: l = 0.0; h = c; break;
        case JOKER_LOSS_SQUARED_HINGE: l = 0.0; h = inf; break;
        default: l = k.eps; h = c - k.eps; break;  // Logistic
    }
    // by_sign
    if (k.y > 0.0) { lo = l; hi = h; } else { lo = -h; hi = -l; }
}

// f_i(a), the dual coordinate function (including SVR's epsilon |a|).
__host__ __device__ __forceinline__ double loss_dual(int loss, double param, double a, const Coord& k) {
    const double y = k.y, lam = k.lam;
    switch (loss) {
        case JOKER_LOSS_SQUARED:
        case JOKER_LOSS_HUBER:
        case JOKER_LOSS_SQUARED_HINGE: return 0.5 * lam * a * a - y * a;
        case JOKER_LOSS_EPS_INSENSITIVE: return param * fabs(a) - y * a;
        case JOKER_LOSS_ABSOLUTE:
        case JOKER_LOSS_HINGE: return -y * a;
        case JOKER_LOSS_LP: {
            const double q = loss_q(param);
            return pow(lam, q - 1.0) * pow(fabs(a), q) / q - y * a;
        }
        default: {  // Logistic
            const double c = 1.0 / k.lam;
            const double ah = y * a;
            return xlogx(ah) + xlogx(c - ah) - xlogx(c);
        }
    }
}

// f_i(a + s) - f_i(a), computed without cancellation (the trust-region ratio needs it).
__host__ __device__ __forceinline__ double loss_dual_change(int loss, double param, double a, double s,
                                                            const Coord& k) {
    const double y = k.y, lam = k.lam;
    switch (loss) {
        case JOKER_LOSS_SQUARED:
        case JOKER_LOSS_HUBER:
        case JOKER_LOSS_SQUARED_HINGE: return s * (lam * (a + 0.5 * s) - y);
        case JOKER_LOSS_ABSOLUTE:
        case JOKER_LOSS_HINGE: return -y * s;
        case JOKER_LOSS_EPS_INSENSITIVE: return param * (fabs(a + s) - fabs(a)) - y * s;
        case JOKER_LOSS_LOGISTIC: {
            const double c = 1.0 / k.lam;
            const double ah = y * a;
            const double sh = y * s;
            return xlogx_diff(ah, sh) + xlogx_diff(c - ah, -sh);
        }
        default:  // Lp
            return loss_dual(loss, param, a + s, k) - loss_dual(loss, param, a, k);
    }
}

// Derivative of the smooth part of f_i at a (SVR's epsilon |a| excluded).
__host__ __device__ __forceinline__ double loss_grad(int loss, double param, double a, const Coord& k) {
    const double y = k.y, lam = k.lam;
    switch (loss) {
        case JOKER_LOSS_SQUARED:
        case JOKER_LOSS_HUBER:
        case JOKER_LOSS_SQUARED_HINGE: return lam * a - y;
        case JOKER_LOSS_EPS_INSENSITIVE:
        case JOKER_LOSS_ABSOLUTE:
        case JOKER_LOSS_HINGE: return -y;
        case JOKER_LOSS_LP: {
            const double q = loss_q(param);
            return pow(lam, q - 1.0) * joker_signum(a) * pow(fabs(a), q - 1.0) - y;
        }
        default: {  // Logistic
            const double c = 1.0 / k.lam;
            const double ah = y * a;
            return y * (log(ah) - log(c - ah));
        }
    }
}

// Second derivative used in the quadratic model, clamped where it is unbounded: KLR at
// eps^{-1/2} (paper Sec. 3.2), Lp with q < 2 at the same scale relative to lambda.
__host__ __device__ __forceinline__ double loss_hess(int loss, double param, double a, const Coord& k) {
    const double lam = k.lam;
    switch (loss) {
        case JOKER_LOSS_SQUARED:
        case JOKER_LOSS_HUBER:
        case JOKER_LOSS_SQUARED_HINGE: return lam;
        case JOKER_LOSS_EPS_INSENSITIVE:
        case JOKER_LOSS_ABSOLUTE:
        case JOKER_LOSS_HINGE: return 0.0;
        case JOKER_LOSS_LP: {
            const double q = loss_q(param);
            const double h = (q - 1.0) * pow(lam, q - 1.0) * pow(fabs(a), q - 2.0);
            return fmin(h, 1e6 * fmax(lam, 1.0));
        }
        default: {  // Logistic
            const double c = 1.0 / k.lam;
            const double ah = k.y * a;
            const double h = c / (ah * (c - ah));
            const double cap = 1.0 / sqrt(k.eps);
            return isfinite(h) ? fmin(h, cap) : cap;
        }
    }
}

}  // namespace joker

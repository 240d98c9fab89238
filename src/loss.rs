//! Losses and their dual coordinate functions (Table 2 of the Joker paper).
//!
//! With `c = 1/lambda`, the dual of `min 1/2 ||theta||^2 + c sum_i l(y_i, <theta, phi(x_i)>)`
//! is `min_a 1/2 a^T K a + sum_i f_i(a_i)` over a box, with
//! `f_i(a) = c xi*_{y_i}(-lambda a)`. For each loss this module gives `f_i`, its derivatives
//! (with the paper's Hessian cap for KLR), the box, the primal loss, and the optimality (KKT)
//! relation between a coordinate and its prediction. Sample weights enter as a per-sample
//! `lambda_i = lambda / w_i`, which is exactly the dual of the weighted loss `w_i l`.

use serde::{Deserialize, Serialize};

/// Where `|a|` is at most this, a coordinate of an `l1 |a|` term (SVR's `epsilon |a|`) counts
/// as at zero: the solver takes its orthant from its gradient, and its optimality is judged as
/// at zero. A move to the orthant's edge can stop a rounding error short of zero (`a = 1e-162`
/// was seen); the block solver's free set freezes a coordinate within `1e-13 (1 + |a|)` of its
/// step box's edge, so with the orthant taken from the sign of `a` it would never cross zero:
/// DBCD-TR stalled at a duality gap of 1e-3 with one SVR coordinate 0.31 beyond the tube.
pub const AT_ZERO: f64 = 1e-13;

/// The side of zero of a coordinate for an `l1 |a|` term: `1` or `-1`, or `0` within
/// [`AT_ZERO`] of zero.
pub fn l1_sign(a: f64) -> f64 {
    if a > AT_ZERO {
        1.0
    } else if a < -AT_ZERO {
        -1.0
    } else {
        0.0
    }
}

/// A loss function of the primal problem, with the model it defines.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "name", rename_all = "snake_case")]
pub enum Loss {
    /// Kernel ridge regression: `(y - u)^2 / 2`.
    SquaredError,
    /// Huber regression: quadratic within `delta` of the target, linear outside.
    Huber {
        /// Width of the quadratic zone (> 0).
        delta: f64,
    },
    /// Support vector regression: `max(0, |y - u| - epsilon)`.
    EpsilonInsensitive {
        /// Half-width of the insensitive tube (>= 0).
        epsilon: f64,
    },
    /// L1 regression: `|y - u|`.
    Absolute,
    /// Lp regression: `|y - u|^p / p` with `p > 1`.
    Lp {
        /// The exponent (> 1).
        p: f64,
    },
    /// L1-SVC: the hinge loss `max(0, 1 - y u)`.
    Hinge,
    /// L2-SVC: the squared hinge `max(0, 1 - y u)^2 / 2`.
    SquaredHinge,
    /// Kernel logistic regression: `log(1 + exp(-y u))`.
    Logistic,
}

/// The per-coordinate data a loss needs: target, effective `lambda_i`, and (KLR only) the
/// distance the box keeps from its ends, one unit in the last place of `c_i` in the working
/// precision (paper Sec. 3.2).
#[derive(Clone, Copy, Debug)]
pub struct Coord {
    /// Target: `+-1` for classifiers, a real value for regression.
    pub y: f64,
    /// `lambda / w_i`.
    pub lam: f64,
    /// KLR box margin `c_i - prevfloat(c_i)`; unused by the other losses.
    pub eps: f64,
}

impl Coord {
    /// `c_i = 1/lambda_i`.
    #[inline]
    pub fn c(&self) -> f64 {
        1.0 / self.lam
    }
}

/// `x log x` with `0 log 0 = 0`.
#[inline]
fn xlogx(x: f64) -> f64 {
    if x <= 0.0 { 0.0 } else { x * x.ln() }
}

/// `(x + s) log(x + s) - x log x` without cancellation for small `s`.
#[inline]
fn xlogx_diff(x: f64, s: f64) -> f64 {
    let xs = x + s;
    if x <= 0.0 || xs <= 0.0 {
        return xlogx(xs) - xlogx(x);
    }
    // (x+s) log(x+s) - x log x = x log(1 + s/x) + s log(x+s)
    x * (s / x).ln_1p() + s * xs.ln()
}

impl Loss {
    /// The loss's id and parameter in the CUDA kernels (`cuda/loss.cuh`).
    #[doc(hidden)]
    pub fn device_id(&self) -> (i32, f64) {
        match *self {
            Loss::SquaredError => (0, 0.0),
            Loss::Huber { delta } => (1, delta),
            Loss::EpsilonInsensitive { epsilon } => (2, epsilon),
            Loss::Absolute => (3, 0.0),
            Loss::Lp { p } => (4, p),
            Loss::Hinge => (5, 0.0),
            Loss::SquaredHinge => (6, 0.0),
            Loss::Logistic => (7, 0.0),
        }
    }

    /// Short name used by the CLI and in messages.
    pub fn name(&self) -> &'static str {
        match self {
            Loss::SquaredError => "krr",
            Loss::Huber { .. } => "huber",
            Loss::EpsilonInsensitive { .. } => "svr",
            Loss::Absolute => "l1",
            Loss::Lp { .. } => "lp",
            Loss::Hinge => "l1-svc",
            Loss::SquaredHinge => "l2-svc",
            Loss::Logistic => "klr",
        }
    }

    /// Whether the loss is a classification loss (targets must be `+-1`).
    pub fn is_classifier(&self) -> bool {
        matches!(self, Loss::Hinge | Loss::SquaredHinge | Loss::Logistic)
    }

    /// Checks the loss's own parameters.
    pub fn validate(&self) -> crate::Result<()> {
        use crate::error::invalid;
        match *self {
            Loss::Huber { delta } if !(delta > 0.0 && delta.is_finite()) => Err(invalid(
                "delta",
                format!("must be positive and finite, got {delta}"),
            )),
            Loss::EpsilonInsensitive { epsilon } if !(epsilon >= 0.0 && epsilon.is_finite()) => {
                Err(invalid(
                    "epsilon",
                    format!("must be >= 0 and finite, got {epsilon}"),
                ))
            }
            Loss::Lp { p } if !(p > 1.0 && p.is_finite()) => Err(invalid(
                "p",
                format!(
                    "Lp regression needs a finite p > 1, got {p} (use the absolute loss for p = 1)"
                ),
            )),
            _ => Ok(()),
        }
    }

    /// Weight of the non-smooth `|a|` term in `f_i` (SVR's `epsilon`), handled orthant-wise by
    /// the solver; zero for the other losses.
    pub fn l1_weight(&self) -> f64 {
        match *self {
            Loss::EpsilonInsensitive { epsilon } => epsilon,
            _ => 0.0,
        }
    }

    /// Whether the dual coordinates must start strictly inside the box (KLR's gradient is
    /// infinite at the ends).
    pub fn needs_interior_start(&self) -> bool {
        matches!(self, Loss::Logistic)
    }

    /// Whether the optimal dual is typically sparse: the SVM losses, whose coordinates stay at
    /// zero wherever the margin or the tube holds them (LIBSVM's non-support vectors), so that
    /// a fit reads the kernel rows of a fraction of the data. The others move every coordinate.
    pub fn sparse_dual(&self) -> bool {
        matches!(
            self,
            Loss::Hinge | Loss::SquaredHinge | Loss::EpsilonInsensitive { .. }
        )
    }

    /// Whether the dual has no curvature of its own (`f_i'' = 0` on the whole box: hinge,
    /// epsilon-insensitive and absolute loss), so that a block's model is its kernel alone and
    /// its solves run the box-stopped CG, one box exit at a time
    /// ([`crate::solver::dbcd::cached_block`]).
    pub fn flat_dual(&self) -> bool {
        matches!(
            self,
            Loss::Hinge | Loss::EpsilonInsensitive { .. } | Loss::Absolute
        )
    }

    /// Whether the dual's curvature `f_i''` varies along the box (KLR's grows without bound
    /// at both ends, Lp's as `|a|^(q-2)`), so that a block's coordinates can differ in it by
    /// orders of magnitude ([`TrNorm`](crate::solver::trust_region::TrNorm)).
    pub fn curvature_varies(&self) -> bool {
        match *self {
            Loss::Logistic => true,
            Loss::Lp { p } => p != 2.0,
            _ => false,
        }
    }

    /// `q = p / (p - 1)`, the conjugate exponent for Lp.
    fn q(p: f64) -> f64 {
        p / (p - 1.0)
    }

    /// The box `[lo, hi]` of coordinate `i`.
    pub fn bounds(&self, k: &Coord) -> (f64, f64) {
        let c = k.c();
        let inf = f64::INFINITY;
        let by_sign = |lo: f64, hi: f64| if k.y > 0.0 { (lo, hi) } else { (-hi, -lo) };
        match *self {
            Loss::SquaredError | Loss::Lp { .. } => (-inf, inf),
            Loss::Huber { delta } => (-delta * c, delta * c),
            Loss::EpsilonInsensitive { .. } | Loss::Absolute => (-c, c),
            Loss::Hinge => by_sign(0.0, c),
            Loss::SquaredHinge => by_sign(0.0, inf),
            Loss::Logistic => by_sign(k.eps, c - k.eps),
        }
    }

    /// `f_i(a)`, the dual coordinate function (including SVR's `epsilon |a|`).
    pub fn dual(&self, a: f64, k: &Coord) -> f64 {
        let (y, lam) = (k.y, k.lam);
        match *self {
            Loss::SquaredError | Loss::Huber { .. } | Loss::SquaredHinge => {
                0.5 * lam * a * a - y * a
            }
            Loss::EpsilonInsensitive { epsilon } => epsilon * a.abs() - y * a,
            Loss::Absolute | Loss::Hinge => -y * a,
            Loss::Lp { p } => {
                let q = Self::q(p);
                lam.powf(q - 1.0) * a.abs().powf(q) / q - y * a
            }
            Loss::Logistic => {
                let c = k.c();
                let ah = y * a;
                xlogx(ah) + xlogx(c - ah) - xlogx(c)
            }
        }
    }

    /// `f_i(a + s) - f_i(a)`, computed without cancellation (the trust-region ratio needs it
    /// accurate when `s` is small).
    pub fn dual_change(&self, a: f64, s: f64, k: &Coord) -> f64 {
        let (y, lam) = (k.y, k.lam);
        match *self {
            Loss::SquaredError | Loss::Huber { .. } | Loss::SquaredHinge => {
                s * (lam * (a + 0.5 * s) - y)
            }
            Loss::Absolute | Loss::Hinge => -y * s,
            Loss::EpsilonInsensitive { epsilon } => epsilon * ((a + s).abs() - a.abs()) - y * s,
            Loss::Logistic => {
                let c = k.c();
                let ah = y * a;
                let sh = y * s;
                xlogx_diff(ah, sh) + xlogx_diff(c - ah, -sh)
            }
            Loss::Lp { .. } => self.dual(a + s, k) - self.dual(a, k),
        }
    }

    /// Derivative of the smooth part of `f_i` at `a` (SVR's `epsilon |a|` excluded).
    pub fn grad(&self, a: f64, k: &Coord) -> f64 {
        let (y, lam) = (k.y, k.lam);
        match *self {
            Loss::SquaredError | Loss::Huber { .. } | Loss::SquaredHinge => lam * a - y,
            Loss::EpsilonInsensitive { .. } | Loss::Absolute | Loss::Hinge => -y,
            Loss::Lp { p } => {
                let q = Self::q(p);
                lam.powf(q - 1.0) * a.signum() * a.abs().powf(q - 1.0) - y
            }
            Loss::Logistic => {
                let c = k.c();
                let ah = y * a;
                y * (ah.ln() - (c - ah).ln())
            }
        }
    }

    /// How far the dual coordinate `a` is from optimal given the prediction `u = (K alpha)_i`:
    /// the magnitude of the dual's projected gradient `u + f_i'(a)` (SVR's `epsilon |a|` by its
    /// subgradient nearest zero), in the units of the prediction. It is zero exactly where `a`
    /// lies in [`kkt_interval`](Loss::kkt_interval)`(u)`; a greedy working set takes the
    /// coordinates where it is largest, as LIBSVM's maximal violating pair does.
    pub fn violation(&self, a: f64, u: f64, k: &Coord) -> f64 {
        let mut g = u + self.grad(a, k);
        let eps = self.l1_weight();
        if eps > 0.0 {
            let side = l1_sign(a);
            g = if side != 0.0 {
                g + eps * side
            } else {
                g.signum() * (g.abs() - eps).max(0.0)
            };
        }
        let (lo, hi) = self.bounds(k);
        if a <= lo {
            (-g).max(0.0)
        } else if a >= hi {
            g.max(0.0)
        } else {
            g.abs()
        }
    }

    /// Second derivative of `f_i` used in the quadratic model, clamped where it is unbounded:
    /// KLR at `eps^{-1/2}` (paper Sec. 3.2), Lp with `q < 2` at the same scale relative to
    /// `lambda`.
    pub fn hess(&self, a: f64, k: &Coord) -> f64 {
        let lam = k.lam;
        match *self {
            Loss::SquaredError | Loss::Huber { .. } | Loss::SquaredHinge => lam,
            Loss::EpsilonInsensitive { .. } | Loss::Absolute | Loss::Hinge => 0.0,
            Loss::Lp { p } => {
                let q = Self::q(p);
                let h = (q - 1.0) * lam.powf(q - 1.0) * a.abs().powf(q - 2.0);
                h.min(1e6 * lam.max(1.0))
            }
            Loss::Logistic => {
                let c = k.c();
                let ah = k.y * a;
                let h = c / (ah * (c - ah));
                let cap = 1.0 / k.eps.sqrt();
                if h.is_finite() { h.min(cap) } else { cap }
            }
        }
    }

    /// The primal loss `l(y, u)` at prediction `u`.
    pub fn primal(&self, u: f64, y: f64) -> f64 {
        let r = y - u;
        match *self {
            Loss::SquaredError => 0.5 * r * r,
            Loss::Huber { delta } => {
                if r.abs() <= delta {
                    0.5 * r * r
                } else {
                    delta * r.abs() - 0.5 * delta * delta
                }
            }
            Loss::EpsilonInsensitive { epsilon } => (r.abs() - epsilon).max(0.0),
            Loss::Absolute => r.abs(),
            Loss::Lp { p } => r.abs().powf(p) / p,
            Loss::Hinge => (1.0 - y * u).max(0.0),
            Loss::SquaredHinge => 0.5 * (1.0 - y * u).max(0.0).powi(2),
            Loss::Logistic => {
                // log(1 + exp(-yu)) without overflow
                let z = -y * u;
                if z > 0.0 {
                    z + (-z).exp().ln_1p()
                } else {
                    z.exp().ln_1p()
                }
            }
        }
    }

    /// The optimality relation `-lambda a in d l(y, u)`: the set of optimal `a` given the
    /// prediction `u`, as an interval `[lo, hi]` (a single point where `l` is differentiable).
    pub fn kkt_interval(&self, u: f64, k: &Coord) -> (f64, f64) {
        let (y, c) = (k.y, k.c());
        let r = y - u;
        let pt = |v: f64| (v, v);
        match *self {
            Loss::SquaredError => pt(r * c),
            Loss::Huber { delta } => pt(r.clamp(-delta, delta) * c),
            Loss::SquaredHinge => pt(y * (1.0 - y * u).max(0.0) * c),
            Loss::Logistic => pt(y * c / (1.0 + (y * u).exp())),
            Loss::Lp { p } => pt(r.signum() * r.abs().powf(p - 1.0) * c),
            Loss::Hinge => {
                let m = y * u;
                let (lo, hi) = if m < 1.0 {
                    (c, c)
                } else if m > 1.0 {
                    (0.0, 0.0)
                } else {
                    (0.0, c)
                };
                if y > 0.0 { (lo, hi) } else { (-hi, -lo) }
            }
            Loss::Absolute => {
                if r > 0.0 {
                    pt(c)
                } else if r < 0.0 {
                    pt(-c)
                } else {
                    (-c, c)
                }
            }
            Loss::EpsilonInsensitive { epsilon } => {
                if r.abs() > epsilon {
                    pt(r.signum() * c)
                } else if r.abs() < epsilon {
                    pt(0.0)
                } else if r > 0.0 {
                    (0.0, c)
                } else {
                    (-c, 0.0)
                }
            }
        }
    }

    /// A (sub)gradient `l'(u)` of the primal loss in the prediction `u`, read off the
    /// optimality relation `-lambda a in d l(y, u)` at `lambda = 1`: with `c = 1` the KKT
    /// interval is `-d l(y, u)`, so the derivative needs no formula of its own. Where `l` has
    /// a kink (hinge at `y u = 1`, SVR at `|y - u| = epsilon`, L1 at `y = u`) the subgradient
    /// of smallest magnitude is returned, which is zero whenever zero is a subgradient.
    /// Stochastic primal solvers ([`crate::solver::dsg`]) step along it.
    pub fn derivative(&self, u: f64, y: f64) -> f64 {
        let (lo, hi) = self.kkt_interval(
            u,
            &Coord {
                y,
                lam: 1.0,
                eps: 0.0,
            },
        );
        let a = if lo <= 0.0 && hi >= 0.0 {
            0.0
        } else if lo > 0.0 {
            lo
        } else {
            hi
        };
        -a
    }

    /// The dual starting point of a coordinate among `n`: zero, or for KLR (whose box excludes
    /// zero) `a_hat = min(c/2, 1/n)`, inside the box and small enough that every starting
    /// prediction `|f(x)| <= sum_i a_hat_i k(x_i, x)` is at most 1. (The reference code's
    /// uniform start in `(0, c)` makes the starting predictions of order `n c`, and the first
    /// pass over the data only undoes that.)
    pub fn start(&self, k: &Coord, n: usize) -> f64 {
        match self {
            Loss::Logistic => {
                let ah = (0.5 * k.c()).min(1.0 / n as f64).max(2.0 * k.eps);
                k.y * ah
            }
            _ => 0.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [Loss; 8] = [
        Loss::SquaredError,
        Loss::Huber { delta: 0.7 },
        Loss::EpsilonInsensitive { epsilon: 0.2 },
        Loss::Absolute,
        Loss::Lp { p: 1.5 },
        Loss::Hinge,
        Loss::SquaredHinge,
        Loss::Logistic,
    ];

    /// The losses without curvature are those whose model curvature is zero everywhere on
    /// their box; the others have some.
    #[test]
    fn flat_duals_are_those_without_curvature() {
        let k = coord(1.0);
        for loss in ALL {
            let (lo, hi) = loss.bounds(&k);
            let inside: Vec<f64> = [0.1, 0.5, 0.9]
                .iter()
                .map(|t| match (lo.is_finite(), hi.is_finite()) {
                    (true, true) => lo + t * (hi - lo),
                    (true, false) => lo + t,
                    (false, true) => hi - t,
                    (false, false) => t - 0.5,
                })
                .collect();
            let flat = inside.iter().all(|&a| loss.hess(a, &k) == 0.0);
            assert_eq!(loss.flat_dual(), flat, "{loss:?}");
        }
    }

    fn coord(y: f64) -> Coord {
        let lam: f64 = 0.37;
        Coord {
            y,
            lam,
            eps: <f32 as crate::Scalar>::gap_below(1.0 / lam),
        }
    }

    /// `violation` vanishes on the KKT interval of the prediction and nowhere else in the box:
    /// at the interval's ends and midpoint it is zero (to rounding), at points of the box off
    /// the interval it is positive, for every loss, both labels and predictions on both sides
    /// of every kink.
    #[test]
    fn violation_vanishes_exactly_on_the_kkt_interval() {
        for loss in ALL {
            for &y in &[1.0, -1.0] {
                let k = coord(y);
                let (lo, hi) = loss.bounds(&k);
                for u in [-2.5, -1.0, -0.4, 0.0, 0.3, 0.75, 1.0, 1.7, 3.0] {
                    let (a0, a1) = loss.kkt_interval(u, &k);
                    for a in [a0, 0.5 * (a0 + a1), a1] {
                        let a = a.clamp(lo, hi);
                        let v = loss.violation(a, u, &k);
                        assert!(
                            v <= 1e-7 * (1.0 + u.abs()),
                            "{loss:?} y {y} u {u} a {a}: {v}"
                        );
                    }
                    for a in [-3.0, -0.9, -0.2, 0.05, 0.6, 1.4, 2.9] {
                        if a <= lo || a >= hi || (a0 - 1e-6..=a1 + 1e-6).contains(&a) {
                            continue;
                        }
                        let v = loss.violation(a, u, &k);
                        assert!(v > 1e-9, "{loss:?} y {y} u {u} a {a}: {v} off [{a0}, {a1}]");
                    }
                }
            }
        }
    }

    /// Finite differences of `dual` agree with `grad`, and `dual_change` with `dual`.
    #[test]
    fn derivatives_match_finite_differences() {
        for loss in ALL {
            for &y in &[1.0, -1.0] {
                let k = coord(y);
                let (lo, hi) = loss.bounds(&k);
                for t in [0.13, 0.5, 0.81] {
                    let a = if lo.is_finite() && hi.is_finite() {
                        lo + t * (hi - lo)
                    } else {
                        (t - 0.4) * 3.0
                    };
                    if loss.l1_weight() > 0.0 && a.abs() < 1e-3 {
                        continue;
                    }
                    let h = 1e-6;
                    let fd = (loss.dual(a + h, &k) - loss.dual(a - h, &k)) / (2.0 * h);
                    let g = loss.grad(a, &k) + loss.l1_weight() * a.signum();
                    assert!(
                        (fd - g).abs() < 1e-5 * (1.0 + g.abs()),
                        "{loss:?} a={a}: {fd} vs {g}"
                    );
                    let s = 1e-3;
                    let exact = loss.dual(a + s, &k) - loss.dual(a, &k);
                    let stable = loss.dual_change(a, s, &k);
                    assert!(
                        (exact - stable).abs() < 1e-9,
                        "{loss:?}: {exact} vs {stable}"
                    );
                    let h2 = loss.hess(a, &k);
                    let fd2 = (loss.grad(a + h, &k) - loss.grad(a - h, &k)) / (2.0 * h);
                    assert!(
                        (fd2 - h2).abs() < 1e-4 * (1.0 + h2.abs()),
                        "{loss:?} a={a}: hess {h2} vs {fd2}"
                    );
                }
            }
        }
    }

    /// `derivative` agrees with central differences of `primal` away from the kinks.
    #[test]
    fn derivative_matches_finite_differences_of_the_primal() {
        for loss in ALL {
            for &y in &[1.0f64, -1.0, 0.35] {
                if loss.is_classifier() && y.abs() != 1.0 {
                    continue;
                }
                for u in [-2.3, -0.45, 0.1, 0.62, 1.9] {
                    let h = 1e-6;
                    let fd = (loss.primal(u + h, y) - loss.primal(u - h, y)) / (2.0 * h);
                    let g = loss.derivative(u, y);
                    assert!(
                        (fd - g).abs() < 1e-5 * (1.0 + g.abs()),
                        "{loss:?} y={y} u={u}: {fd} vs {g}"
                    );
                }
            }
        }
        // at a kink the subgradient of least magnitude
        assert_eq!(Loss::Hinge.derivative(1.0, 1.0), 0.0);
        assert_eq!(Loss::Absolute.derivative(0.5, 0.5), 0.0);
    }

    /// Fenchel-Young in dual-coordinate form: `c l(y, u) + f_i(a) + a u >= 0`, with equality
    /// exactly on the KKT interval.
    #[test]
    fn fenchel_young_equality_on_kkt_interval() {
        for loss in ALL {
            for &y in &[1.0, -1.0] {
                let k = coord(y);
                for u in [-2.0, -0.3, 0.4, 1.7] {
                    let (lo, hi) = loss.kkt_interval(u, &k);
                    let (blo, bhi) = loss.bounds(&k);
                    let a = 0.5 * (lo + hi);
                    let a = a.clamp(blo, bhi);
                    let val = k.c() * loss.primal(u, y) + loss.dual(a, &k) + a * u;
                    let tol = if loss == Loss::Logistic { 1e-5 } else { 1e-9 };
                    assert!(val.abs() < tol, "{loss:?} y={y} u={u}: {val}");
                    // any other feasible point gives a positive value
                    let other = (a + 0.3).clamp(blo, bhi);
                    if (other - a).abs() > 1e-9 && !(other >= lo && other <= hi) {
                        let v2 = k.c() * loss.primal(u, y) + loss.dual(other, &k) + other * u;
                        assert!(v2 > 0.0, "{loss:?}: {v2}");
                    }
                }
            }
        }
    }
}

//! An unregularised intercept for the regression losses, found around DBCD-TR.
//!
//! With an intercept `b` the model is `f(x) + b`, and for a fixed `b` the problem is the one
//! without an intercept on the targets `y - b`: the same box, the same kernel, only the
//! linear term of the dual moves. Its optimal value `V(b)` is convex in `b`, and by Danskin's
//! theorem (the dual optimum is unique, its quadratic term is `K` plus a ridge)
//! `V'(b) = -sum_i a_i(b)`: the best intercept is where the dual coefficients sum to zero,
//! LIBSVM's equality constraint `sum_i a_i = 0`. `g(b) = sum_i a_i(b)` falls as `b` rises
//! (lower targets, lower residuals), so the root is found by a secant search on `g`,
//! bracketed once `g` has changed sign (regula falsi, with the Illinois rule against a stale
//! end), each `g` read off the current solve, which goes on from where it is when `b` moves
//! (the coefficients stay feasible, and `beta = K a` is unchanged): at checks near the
//! solve's end, and finally after a converged or stalled solve that leaves `b` in place.
//!
//! The first step has no slope to go by; it takes the intercept that is best for the
//! current predictions, `argmin_b sum_i c_i l(y_i - b, u_i)`, which a no-intercept fit
//! biased towards zero leaves far from zero exactly when an intercept matters.

use super::{Problem, SolverConfig, State, engine_of};
use crate::distributed::Collective;
use crate::error::Result;
use crate::loss::Loss;
use crate::scalar::Scalar;

/// The first move where the best intercept for the predictions does not move it, relative to
/// the targets' root mean square.
const FIRST_STEP: f64 = 0.1;

/// At most this many moves of the intercept in one fit.
pub const MAX_MOVES: usize = 50;

/// `g` is zero enough when `|sum_i a_i|` is at most this fraction of `sum_i |a_i|`.
const BALANCE: f64 = 1e-3;

/// A move of the intercept shorter than this, relative to the targets' root mean square, is
/// not made: it moves every prediction by less than the fit's tolerance does.
const SHORTEST_MOVE: f64 = 1e-4;

/// The first step of a search started again from a stale bracket, in shortest moves: long
/// enough that the next reading's `g` differs from this one's by more than an inexact solve's
/// noise, short against the targets' spread.
const RESTART_STEP: f64 = 10.0;

/// One target column's search for its intercept.
#[derive(Clone, Debug, Default)]
struct Search {
    /// The latest `b` with `g(b) > 0`, and its `g` (inside a bracket, its largest such `b`;
    /// the latest reading wins over an earlier one of a less converged solve).
    below: Option<(f64, f64)>,
    /// The latest `b` with `g(b) < 0`, and its `g`.
    above: Option<(f64, f64)>,
    /// The previous point `(b, g)`, for the secant before a bracket exists.
    last: Option<(f64, f64)>,
    /// Which end the last bracketed step replaced (`1` below, `-1` above), for Illinois.
    side: i8,
}

/// The intercepts of a fit's target columns, kept as shifts of the targets (`State::shift`).
#[derive(Debug)]
pub(super) struct Intercept {
    cols: Vec<Search>,
    /// Moves made so far.
    pub moves: usize,
}

impl Intercept {
    /// The search of a fit of `prob` under `cfg`: one where the configuration asks for an
    /// intercept and the loss is a regression's, `None` otherwise.
    pub fn of_fit<T>(prob: &Problem<T>, cfg: &SolverConfig) -> Option<Self> {
        (cfg.intercept && !prob.loss.is_classifier()).then(|| Intercept::new(prob.targets))
    }

    /// A search for each of `targets` columns, from `b = 0`.
    pub fn new(targets: usize) -> Self {
        Intercept {
            cols: vec![Search::default(); targets],
            moves: 0,
        }
    }

    /// At a check: moves the shift of every column whose dual coefficients do not sum to
    /// zero, and says whether any moved (the fit then goes on from where it is; after a
    /// converged solve, none moving means the intercepts are found). The sums are read off
    /// the current coefficients, exact after a converged solve and close to it near one; over
    /// the ranks of `comm` (each holding its rows' coefficients), rank 0's sums on every
    /// rank, so that every rank moves alike.
    pub fn step<T: Scalar>(
        &mut self,
        st: &mut State<'_, T>,
        comm: &dyn Collective,
    ) -> Result<bool> {
        if self.moves >= MAX_MOVES {
            return Ok(false);
        }
        let (n, tt) = (st.n, self.cols.len());
        // per column: sum_i a_i, sum_i |a_i| and sum_i y_i^2; then the rows
        let mut sums = vec![0.0; 3 * tt + 1];
        for t in 0..tt {
            let a = &st.alpha[t * n..(t + 1) * n];
            sums[3 * t] = a.iter().sum();
            sums[3 * t + 1] = a.iter().map(|v| v.abs()).sum();
            sums[3 * t + 2] = st.prob.y[t * n..(t + 1) * n].iter().map(|v| v * v).sum();
        }
        sums[3 * tt] = n as f64;
        comm.agreed_sum(&mut sums)?;
        let rows = sums[3 * tt].max(1.0);
        // each column's proposal: a secant, or (at its first move) the best intercept for the
        // current predictions
        let mut proposed: Vec<Option<f64>> = vec![None; tt];
        let mut first = Vec::new();
        for (t, s) in self.cols.iter_mut().enumerate() {
            let (g, size) = (sums[3 * t], sums[3 * t + 1]);
            if g.abs() <= BALANCE * size {
                continue;
            }
            let shortest = SHORTEST_MOVE * rms_of(sums[3 * t + 2], rows);
            match s.next(st.shift[t], g, shortest) {
                Some(v) => proposed[t] = Some(v),
                None => first.push(t),
            }
        }
        if !first.is_empty() {
            let u = engine_of(&mut st.engine)?.decision()?;
            let best = best_for(st.prob.loss, (st.prob.y, &u), st.prob.lam, &first, comm)?;
            for (&t, best) in first.iter().zip(best) {
                let (g, b) = (sums[3 * t], st.shift[t]);
                let rms = rms_of(sums[3 * t + 2], rows);
                // where the loss is flat around the predictions (SVR's tube holds the free
                // coefficients) the best intercept is not unique, and may not move: a tenth
                // of the targets' spread, the way g points
                proposed[t] = Some(if (best - b) * g > SHORTEST_MOVE * rms * g.abs() {
                    best
                } else {
                    b + FIRST_STEP * rms * g.signum()
                });
            }
        }
        let mut moved = false;
        for (t, next) in proposed.into_iter().enumerate() {
            let Some(next) = next else { continue };
            let b = st.shift[t];
            let rms = rms_of(sums[3 * t + 2], rows);
            if !next.is_finite() || (next - b).abs() <= SHORTEST_MOVE * rms {
                continue;
            }
            st.shift[t] = next;
            moved = true;
        }
        if moved {
            self.moves += 1;
        }
        Ok(moved)
    }
}

/// The targets' root mean square from their sum of squares over `rows` rows.
fn rms_of(sum_sq: f64, rows: f64) -> f64 {
    (sum_sq / rows).sqrt().max(f64::MIN_POSITIVE)
}

impl Search {
    /// Records `g(b)` and proposes the next `b`: regula falsi inside a bracket, the secant on
    /// the last two points before one, `None` at the first point.
    ///
    /// Each `g` is read off a solve that is not exact yet, and a bracket's end read early can
    /// be on the wrong side by the time the solve is closer: the bracket then closes on that
    /// end while `g` here stays unbalanced. A bracketed step shorter than `shortest` (the
    /// caller's shortest move) is such a case, and the stale end is dropped: the search
    /// steps [`RESTART_STEP`] shortest moves the way `g` points and brackets again.
    fn next(&mut self, b: f64, g: f64, shortest: f64) -> Option<f64> {
        let prev = self.last.replace((b, g));
        if g > 0.0 {
            self.below = Some((b, g));
        } else {
            self.above = Some((b, g));
        }
        if let (Some((b0, mut g0)), Some((b1, mut g1))) = (self.below, self.above) {
            // Illinois: an end kept twice in a row counts half, so the bracket shrinks from
            // both sides
            let side = if g > 0.0 { 1 } else { -1 };
            if side == self.side {
                if side == 1 {
                    g1 *= 0.5;
                    self.above = Some((b1, g1));
                } else {
                    g0 *= 0.5;
                    self.below = Some((b0, g0));
                }
            }
            self.side = side;
            let falsi = b0 + g0 * (b1 - b0) / (g0 - g1);
            if (falsi - b).abs() > shortest {
                return Some(falsi);
            }
            // the other end is stale: only this reading (its own end, and `last`) stays, and
            // the search starts again from it
            if g > 0.0 {
                self.above = None;
            } else {
                self.below = None;
            }
            self.side = 0;
            return Some(b + RESTART_STEP * shortest * g.signum());
        }
        let (bp, gp) = prev?;
        let slope = (g - gp) / (b - bp);
        // g falls as b rises; a flat or rising secant (rounding, an inexact solve) is not
        // followed: the step doubles in the direction g points to
        Some(if slope < 0.0 && slope.is_finite() {
            let step = -g / slope;
            b + step.clamp(-16.0 * (b - bp).abs(), 16.0 * (b - bp).abs())
        } else {
            b + 2.0 * (b - bp).abs() * g.signum()
        })
    }
}

/// The intercepts best for the predictions of the target columns `cols` (`y` and `u`
/// column-major, `n x T`, over the rows of every rank of `comm`): each the root of the
/// nondecreasing `phi_t(b) = sum_i c_i dl(y_ti, u_ti + b)/du`, by bisection between the
/// residuals' extremes widened by one (beyond them every residual has one sign, and so has
/// `phi_t`), all columns in one sum over the ranks per halving.
fn best_for(
    loss: Loss,
    (y, u): (&[f64], &[f64]),
    lam: &[f64],
    cols: &[usize],
    comm: &dyn Collective,
) -> Result<Vec<f64>> {
    let n = lam.len();
    let column = |t: usize| (&y[t * n..(t + 1) * n], &u[t * n..(t + 1) * n]);
    // the residuals' extremes: max of -r and of r, over the ranks
    let mut ends = vec![f64::NEG_INFINITY; 2 * cols.len()];
    for (k, &t) in cols.iter().enumerate() {
        let (y, u) = column(t);
        for (y, u) in y.iter().zip(u) {
            ends[2 * k] = ends[2 * k].max(u - y);
            ends[2 * k + 1] = ends[2 * k + 1].max(y - u);
        }
    }
    // (a maximum rounds alike on every rank)
    comm.max(&mut ends)?;
    let mut brackets: Vec<(f64, f64)> = (0..cols.len())
        .map(|k| (-ends[2 * k] - 1.0, ends[2 * k + 1] + 1.0))
        .collect();
    let mut open: Vec<bool> = brackets
        .iter()
        .map(|(lo, hi)| lo.is_finite() && hi.is_finite())
        .collect();
    let mut phi = vec![0.0; cols.len()];
    for _ in 0..100 {
        for (k, &t) in cols.iter().enumerate() {
            phi[k] = 0.0;
            if open[k] {
                let (y, u) = column(t);
                let b = 0.5 * (brackets[k].0 + brackets[k].1);
                phi[k] = (y.iter().zip(u).zip(lam))
                    .map(|((&y, &u), &l)| loss.derivative(u + b, y) / l)
                    .sum();
            }
        }
        comm.agreed_sum(&mut phi)?;
        for k in 0..cols.len() {
            let (lo, hi) = brackets[k];
            let mid = 0.5 * (lo + hi);
            if !open[k] || mid <= lo || mid >= hi {
                open[k] = false;
            } else if phi[k] < 0.0 {
                brackets[k].0 = mid;
            } else {
                brackets[k].1 = mid;
            }
        }
        if !open.iter().any(|&o| o) {
            break;
        }
    }
    Ok(brackets
        .iter()
        .map(|&(lo, hi)| match lo.is_finite() && hi.is_finite() {
            true => 0.5 * (lo + hi),
            false => 0.0,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::distributed::Single;

    #[test]
    fn the_best_intercept_of_squared_error_is_the_mean_residual() {
        let y = [1.0, 2.0, 4.5, -0.5];
        let u = [0.5, 0.0, 1.0, 0.0];
        let b = best_for(Loss::SquaredError, (&y, &u), &[1.0; 4], &[0], &Single).unwrap()[0];
        let mean = (0.5 + 2.0 + 3.5 - 0.5) / 4.0;
        assert!((b - mean).abs() < 1e-9, "{b} against {mean}");
    }

    #[test]
    fn the_best_intercept_of_absolute_error_is_a_weighted_median() {
        // residuals 3, -1, 0, 10, 2 with weights c = 1 / lam: 1, 1, 1, 1, 5 (the last weighs
        // more than the others together, so it alone decides)
        let y = [3.0, -1.0, 0.0, 10.0, 2.0];
        let lam = [1.0, 1.0, 1.0, 1.0, 0.2];
        let b = best_for(Loss::Absolute, (&y, &[0.0; 5]), &lam, &[0], &Single).unwrap()[0];
        assert!((b - 2.0).abs() < 1e-9, "{b}");
    }

    #[test]
    fn the_search_brackets_a_falling_root_and_closes_on_it() {
        // g(b) = 3 - 2 b - b^3 / 4, falling, root near 1.2
        let g = |b: f64| 3.0 - 2.0 * b - b * b * b / 4.0;
        let mut s = Search::default();
        assert_eq!(s.next(0.0, g(0.0), 1e-12), None);
        let mut b = 0.3; // a first step that falls short
        for _ in 0..40 {
            match s.next(b, g(b), 1e-12) {
                Some(v) if (v - b).abs() > 1e-12 => b = v,
                _ => break,
            }
        }
        assert!(g(b).abs() < 1e-9, "g({b}) = {}", g(b));
    }

    #[test]
    fn a_stale_end_of_the_bracket_is_dropped_and_the_root_found_beyond_it() {
        // g(b) = 1.2 - b; an early, inexact reading put g(1) below zero, so the bracket
        // [0, 1] does not hold the root
        let g = |b: f64| 1.2 - b;
        let shortest = 1e-6;
        let mut s = Search::default();
        assert_eq!(s.next(0.0, g(0.0), shortest), None);
        let mut b = s.next(1.0, -0.5, shortest).unwrap();
        assert!(b > 0.0 && b < 1.0, "{b}");
        let mut beyond = false;
        for _ in 0..200 {
            beyond |= b > 1.0;
            match s.next(b, g(b), shortest) {
                Some(v) if (v - b).abs() > shortest => b = v,
                _ => break,
            }
        }
        assert!(beyond, "the search never left the stale bracket");
        assert!((b - 1.2).abs() < 1e-5, "{b}");
    }
}

//! One-vs-one: a binary problem per pair of classes, on the rows of its two classes only,
//! solved one after the other with the fit's features, kernel and settings. Each problem has
//! about `2 n / K` rows, so its cached kernel is `(2 n / K)^2` entries and its passes are short;
//! the `K (K - 1) / 2` columns together form one separable problem, whose objectives are the
//! sums of the pairs'. The model holds a decision column per pair (zero coefficients outside the
//! pair) and predicts by votes ([`crate::preprocess::vote`]).

use std::time::Instant;

use super::Joker;
use crate::backend::Backend;
use crate::backend::predict::Predictor;
use crate::error::Result;
use crate::kernel::Kernel;
use crate::memory::try_filled;
use crate::scalar::Scalar;
use crate::solver::dbcd::{Hooks, InterruptFn, Problem, ProgressFn, Repr};
use crate::solver::{Progress, Solution, SolverConfig, StopReason, Timings};

impl Joker {
    /// Solves the pair problems of `prob`, whose targets are one-vs-one columns
    /// ([`crate::preprocess::encode_pairs`]: `+-1` on the pair's rows, 0 elsewhere). The
    /// progress callback sees each pair's checks with the iterations and seconds counted from
    /// the start of the first pair; the interrupt, the time limit and a callback that asks to
    /// stop end the whole fit (pairs not reached keep zero coefficients). The last check is
    /// the whole problem's: summed objectives and, with a validation set, the voted metric.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn solve_pairs<T: Scalar>(
        &self,
        backend: &dyn Backend<T>,
        prob: &Problem<'_, T>,
        kernel: &Kernel,
        solver: &SolverConfig,
        alpha0: Option<Vec<f64>>,
        weighted: bool,
        hooks: &mut Hooks<'_, T>,
    ) -> Result<Solution> {
        let start = Instant::now();
        let (n, pairs) = (prob.x.nrows(), prob.targets);
        let mut alpha = try_filled(n.saturating_mul(pairs), 0.0, "one-vs-one coefficients")?;
        let mut theta: Vec<f64> = Vec::new();
        let mut out = Solution {
            alpha: Vec::new(),
            theta: None,
            iters: 0,
            stop: StopReason::Converged,
            history: Vec::new(),
            timings: Timings::default(),
            tr_model: String::new(),
            working_set: String::new(),
            fell_back: None,
        };
        let (mut primal, mut dual, mut epochs, mut accepted) = (0.0, 0.0, 0.0, 0);
        for p in 0..pairs {
            let col = &prob.y[p * n..(p + 1) * n];
            let rows: Vec<usize> = (0..n).filter(|&i| col[i] != 0.0).collect();
            let remaining = match solver.time_limit {
                Some(limit) => match limit.checked_sub(start.elapsed()) {
                    Some(left) if !left.is_zero() => Some(left),
                    _ => {
                        out.stop = StopReason::TimeLimit;
                        break;
                    }
                },
                None => None,
            };
            let x = prob.x.select_rows(&rows)?;
            let pick = |v: &[f64]| rows.iter().map(|&i| v[i]).collect::<Vec<f64>>();
            let (y, lam, eps) = (pick(col), pick(prob.lam), pick(prob.eps));
            let sub = Problem {
                x: &x,
                repr: match prob.repr {
                    Repr::Features(map) => Repr::Features(map),
                    Repr::Exact(k) => Repr::Exact(k),
                },
                loss: prob.loss,
                targets: 1,
                y: &y,
                lam: &lam,
                eps: &eps,
            };
            let cfg = SolverConfig {
                block_size: solver.block_size.min(rows.len()),
                time_limit: remaining,
                ..solver.clone()
            };
            let warm = alpha0.as_ref().map(|a| pick(&a[p * n..(p + 1) * n]));
            let (iters_before, accepted_before) = (out.iters, accepted);
            let seconds_before = start.elapsed().as_secs_f64();
            let shift = move |s: &Progress| Progress {
                iter: s.iter + iters_before,
                accepted: s.accepted + accepted_before,
                seconds: s.seconds + seconds_before,
                train_seconds: s.train_seconds + seconds_before,
                ..s.clone()
            };
            let mut seen: Vec<Progress> = Vec::new();
            let sol = {
                let (progress, interrupt) = (&mut hooks.progress, &mut hooks.interrupt);
                let mut pair_hooks = Hooks::<T> {
                    validate: None,
                    progress: Some(Box::new(|s: &Progress| {
                        let s = shift(s);
                        let go_on = progress.as_mut().is_none_or(|f| f(&s));
                        seen.push(s);
                        go_on
                    }) as ProgressFn<'_>),
                    interrupt: interrupt.as_mut().map(|f| Box::new(f) as InterruptFn<'_>),
                };
                self.solve_dual(
                    backend,
                    &sub,
                    &cfg,
                    warm,
                    &x,
                    kernel,
                    &y,
                    1,
                    weighted,
                    &mut pair_hooks,
                )?
            };
            for (k, &i) in rows.iter().enumerate() {
                alpha[p * n + i] = sol.alpha[k];
            }
            if let Some(t) = &sol.theta {
                theta.extend_from_slice(t);
            }
            if let Some(last) = sol.history.last() {
                primal += last.primal;
                dual += last.dual;
                epochs += last.epoch * rows.len() as f64 / n as f64;
                accepted += last.accepted;
            }
            out.history.append(&mut seen);
            out.iters += sol.iters;
            out.timings += sol.timings;
            if p == 0 {
                out.tr_model = sol.tr_model;
                out.working_set = sol.working_set;
            }
            out.fell_back = out.fell_back.or(sol.fell_back);
            out.stop = worse(out.stop, sol.stop);
            if matches!(sol.stop, StopReason::Cancelled | StopReason::TimeLimit) {
                break;
            }
        }
        if let Repr::Features(map) = prob.repr {
            // pairs not reached (a stopped fit) keep a zero column
            theta.resize(pairs * map.m(), 0.0);
            out.theta = Some(theta);
        }
        let validation = hooks.validate.as_mut().map(|f| {
            f(&match prob.repr {
                Repr::Features(map) => Predictor::Features {
                    map,
                    theta: out.theta.as_deref().unwrap_or(&[]),
                },
                Repr::Exact(kernel) => Predictor::Exact {
                    kernel,
                    support: prob.x,
                    rows: None,
                    alpha: &alpha,
                },
            })
        });
        let scale = f64::abs(primal).max(dual.abs()).max(f64::MIN_POSITIVE);
        let whole = Progress {
            iter: out.iters,
            epoch: epochs,
            seconds: start.elapsed().as_secs_f64(),
            train_seconds: out.history.last().map_or(0.0, |s| s.train_seconds),
            primal,
            dual,
            gap: ((primal - dual) / scale).max(0.0),
            validation,
            accepted,
            rel_residual: None,
        };
        if let Some(f) = hooks.progress.as_mut() {
            f(&whole);
        }
        out.history.push(whole);
        out.alpha = alpha;
        Ok(out)
    }
}

/// The stop reason of a fit made of solves: the one that says least about convergence.
fn worse(a: StopReason, b: StopReason) -> StopReason {
    let rank = |s: StopReason| match s {
        StopReason::Converged => 0,
        StopReason::Stalled => 1,
        StopReason::MaxIter => 2,
        StopReason::TimeLimit => 3,
        StopReason::Cancelled => 4,
    };
    if rank(b) > rank(a) { b } else { a }
}

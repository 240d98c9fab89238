//! Parallel block minimization (Hsieh, Si and Dhillon) with DBCD-TR as the local solver, over
//! random features.
//!
//! The rows are split among `K` ranks, rank `r` holding `S_r` and its dual variables
//! `alpha_r`; `theta = sum_r Phi_r^T alpha_r` is replicated. An outer step:
//!
//! 1. each rank runs DBCD-TR on its own rows from the current `alpha_r` and `theta`, which
//!    minimises the dual with the Hessian replaced by its block-diagonal part `Q_{S_r S_r}`
//!    (the first-order term `Phi_r theta` is exact), for `local_iters` blocks, giving
//!    `d_r = alpha_r' - alpha_r` and `Delta_r = Phi_r^T d_r`;
//! 2. one sum over the ranks gives the combined change `Delta = sum_r Delta_r` (`M x T`
//!    values: the only vector sent);
//! 3. the step `beta` in `[0, 1]` minimises the dual objective along the combined direction,
//!    `1/2 ||theta + beta Delta||^2 + sum_i f_i(alpha_i + beta d_i)`, whose quadratic part every
//!    rank knows and whose second part is a sum of per-rank scalars (three rounds of a nine-point
//!    grid on the convex line function, each one sum of nine numbers); every point of the
//!    segment is inside the box, since both ends are;
//! 4. `alpha_r += beta d_r`, `theta += beta Delta`.
//!
//! For KRR, whose dual is a quadratic without a box, step 3 minimises exactly over the plane
//! of the new direction and the last step (six sums over the ranks), which makes the
//! block-Jacobi iteration a conjugate-direction one; [`Combine::Add`] is CoCoA+ instead.
//! With [`PbmConfig::checkpoint`] the dual coefficients are written in global row order, and
//! [`PbmConfig::resume`] starts from them on any number of ranks.
//!
//! Then the objectives and the duality gap are summed over the ranks, and rank 0 decides
//! whether to stop, for everyone. On one rank the block-diagonal model is the whole problem:
//! the step is 1 and the iterates are those of [`super::solve`].

use std::path::PathBuf;
use std::time::Instant;

use super::{
    Hooks, Problem, Progress, Repr, Schedule, Solution, SolverConfig, StopReason, Terms, Timings,
    apply_update, check_shapes, coord, engine_of, start_state, tally,
};
use crate::backend::Backend;
use crate::distributed::Collective;
use crate::distributed::checkpoint::{self, CheckpointConfig};
use crate::distributed::partition::Partition;
use crate::error::{JokerError, Result};
use crate::loss::Loss;

use crate::scalar::Scalar;

/// Settings of the outer loop of a distributed fit.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PbmConfig {
    /// DBCD-TR iterations (blocks) each rank runs on its own rows per outer step; 0 means one
    /// pass over the rank's rows (`ceil(n_r / block_size)`). More local work per step sends
    /// fewer messages but solves more of the block-diagonal model, which is only a model.
    pub local_iters: usize,
    /// Budget of outer steps (the solver's `max_iter` still caps the local iterations).
    pub max_outer: usize,
    /// How the ranks' changes are combined.
    #[serde(default)]
    pub combine: Combine,
    /// Where the rows live during the fit (moved between the ranks before it, except for
    /// [`Partition::File`]; applied by `Joker::fit_distributed`).
    #[serde(default)]
    pub partition: Partition,
    /// Write checkpoints (the dual coefficients in global row order) here, this often.
    #[serde(default)]
    pub checkpoint: Option<CheckpointConfig>,
    /// Start from the last complete checkpoint in this folder (written with any number of
    /// ranks; the rows must be the same, in the same order).
    #[serde(default)]
    pub resume: Option<PathBuf>,
}

/// How the ranks' local changes become one step.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Combine {
    /// [`Add`](Combine::Add) for losses whose duals have a box (the classifiers, Huber, SVR,
    /// L1), [`LineSearch`](Combine::LineSearch) for KRR and Lp regression: measured, the line
    /// search's iterates are poor classifiers for the first outer steps (the summed changes
    /// overshoot), while without a box it converges where adding does not
    /// (`docs/distributed.md`).
    #[default]
    Auto,
    /// Parallel block minimization: the local model is the block-diagonal part of the
    /// Hessian, and the step along the sum of the changes comes from a line search (for duals
    /// quadratic on their box, exact, in the plane of the new direction and the last step).
    LineSearch,
    /// CoCoA+: the local model's curvature is scaled by the number of ranks `K` (safe for
    /// adding), and the changes are added (step 1).
    Add,
}

impl Default for PbmConfig {
    fn default() -> Self {
        PbmConfig {
            local_iters: 0,
            max_outer: 1000,
            combine: Combine::Auto,
            partition: Partition::File,
            checkpoint: None,
            resume: None,
        }
    }
}

impl Combine {
    /// The way of combining for `loss` ([`Combine::Auto`] resolved).
    pub fn resolve(self, loss: Loss) -> Combine {
        match self {
            Combine::Auto if matches!(loss, Loss::SquaredError | Loss::Lp { .. }) => {
                Combine::LineSearch
            }
            Combine::Auto => Combine::Add,
            other => other,
        }
    }
}

/// What rank 0 decided after an outer step's check, sent to every rank as a number.
#[derive(Clone, Copy, PartialEq)]
enum Decision {
    GoOn = 0,
    Converged = 1,
    Cancelled = 2,
    TimeLimit = 3,
    MaxIter = 4,
    NonFinite = 5,
}

impl Decision {
    fn from_code(c: f64) -> Decision {
        match c as i64 {
            1 => Decision::Converged,
            2 => Decision::Cancelled,
            3 => Decision::TimeLimit,
            4 => Decision::MaxIter,
            5 => Decision::NonFinite,
            _ => Decision::GoOn,
        }
    }
}

/// Points of each round of the line search.
const GRID: usize = 9;
/// Rounds of the line search; each narrows the interval to two grid steps around the best.
const ROUNDS: usize = 3;

/// The seed of rank `r`'s block partition and block choice: the fit's seed on rank 0, so that
/// one rank reproduces the single-process fit.
fn rank_seed(seed: u64, rank: usize) -> u64 {
    seed.wrapping_add((rank as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

/// Runs parallel block minimization over `comm`: `prob` holds this rank's rows. Every rank
/// calls it with the same settings. Returns this rank's dual coefficients and the common
/// `theta`; the history (objectives over all ranks) is the same on every rank, and only rank
/// 0's hooks run (the validation and progress callbacks), so only rank 0 needs them.
///
/// A failure on this rank is reported to the others ([`Collective::fail`]) before it is
/// returned, so that no rank waits for it.
pub fn solve<T: Scalar>(
    backend: &dyn Backend<T>,
    prob: &Problem<T>,
    cfg: &SolverConfig,
    pbm: &PbmConfig,
    comm: &dyn Collective,
    hooks: &mut Hooks<T>,
) -> Result<Solution> {
    let out = run(backend, prob, cfg, pbm, comm, hooks);
    if let Err(e) = &out
        && !matches!(e, JokerError::Distributed(_))
    {
        comm.fail(&e.to_string());
    }
    out
}

fn run<T: Scalar>(
    backend: &dyn Backend<T>,
    prob: &Problem<T>,
    cfg: &SolverConfig,
    pbm: &PbmConfig,
    comm: &dyn Collective,
    hooks: &mut Hooks<T>,
) -> Result<Solution> {
    let start = Instant::now();
    if !matches!(prob.repr, Repr::Features(_)) {
        return Err(JokerError::Unsupported(
            "distributed fits need random features (n_components); exact kernels are not distributed"
                .into(),
        ));
    }
    let (n, tt) = (prob.x.nrows(), prob.targets);
    let b = cfg.block_size.min(n);
    check_shapes(prob, b)?;
    let (rank, ranks) = (comm.rank(), comm.size());
    let adding = ranks > 1 && pbm.combine.resolve(prob.loss) == Combine::Add;
    let mut local = SolverConfig {
        block_size: b,
        seed: rank_seed(cfg.seed, rank),
        ..cfg.clone()
    };
    if adding {
        // the scaled model is formed from the Gram
        local.trust_region.model = super::TrModel::Gram;
    }
    let perm = super::block_order(prob.x, &local);
    // this rank's first row in the global (file) order: the ranks hold consecutive shares
    let first_row: usize = comm.gather(&[n as f64])?[..rank]
        .iter()
        .map(|v| v[0] as usize)
        .sum();
    let (alpha0, mut outer) = match &pbm.resume {
        Some(dir) => {
            let (a, outer) = checkpoint::read(dir, first_row, n, tt)?;
            (Some(a), outer)
        }
        None => (None, 0),
    };
    let mut st = start_state(backend, prob, alpha0, &perm, (b, cfg.kernel_cache))?;
    if adding {
        st.scale = ranks as f64;
    }
    let mut timings = Timings::default();
    let mut last_checkpoint = Instant::now();

    // theta over all ranks; the engine keeps it, shifted by the other ranks' part
    let tc = Instant::now();
    st.pull_theta()?;
    let mut theta = st.theta.clone();
    comm.sum(&mut theta)?;
    if ranks > 1 {
        let shift: Vec<f64> = theta.iter().zip(&st.theta).map(|(g, l)| g - l).collect();
        engine_of(&mut st.engine)?.shift_theta(&shift)?;
        st.theta.copy_from_slice(&theta);
    }
    timings.communicate += tc.elapsed().as_secs_f64();

    let per_step = if pbm.local_iters == 0 {
        n.div_ceil(b)
    } else {
        pbm.local_iters
    };
    let mut schedule = Schedule::new(&mut st, &local, &perm, tt)?;
    let (mut delta_max, mut accepted, mut iter) = (cfg.delta_max, 0usize, 0usize);
    let mut history = Vec::new();
    let mut stop = StopReason::MaxIter;
    // the step of the last outer step (`alpha` on this rank, `theta`), for the momentum of
    // KRR fits
    let mut last_step: Option<(Vec<f64>, Vec<f64>)> = None;
    for _ in 0..pbm.max_outer {
        outer += 1;
        let alpha0 = st.alpha.clone();
        let theta0 = theta.clone();
        let mut interrupted = false;
        for _ in 0..per_step {
            if iter >= cfg.max_iter {
                break;
            }
            let last = iter + 1 >= cfg.max_iter;
            let (block, cols) =
                schedule.step(&mut st, backend, &local, delta_max, last, &mut timings)?;
            let t2 = Instant::now();
            apply_update(&mut st, &block, &cols, iter)?;
            accepted += tally(&cols, &mut timings);
            timings.update += t2.elapsed().as_secs_f64();
            iter += 1;
            if cfg.shrink_every > 0 && iter % cfg.shrink_every == 0 {
                delta_max *= cfg.shrink_rate;
            }
            if hooks.interrupt.as_mut().is_some_and(|f| f()) {
                interrupted = true;
                break;
            }
        }
        st.pull_theta()?;
        if ranks > 1 {
            let tc = Instant::now();
            theta = combine(&mut st, (&alpha0, &theta0), comm, adding, &mut last_step)?;
            timings.communicate += tc.elapsed().as_secs_f64();
        } else {
            theta.copy_from_slice(&st.theta);
        }
        if let Some(c) = &pbm.checkpoint
            && c.due(outer, last_checkpoint.elapsed().as_secs_f64(), comm)?
        {
            let tc = Instant::now();
            checkpoint::write(c, comm, (first_row, outer, tt), &st.alpha)?;
            timings.check += tc.elapsed().as_secs_f64();
            last_checkpoint = Instant::now();
        }

        let tc = Instant::now();
        let p = check(&mut st, comm, hooks, (iter, accepted, b), start, &timings)?;
        timings.check += tc.elapsed().as_secs_f64();
        // rank 0 decides for everyone
        let mut code = [Decision::GoOn as i64 as f64];
        if rank == 0 {
            let go_on = hooks.progress.as_mut().is_none_or(|f| f(&p));
            code[0] = decide(&p, cfg, go_on && !interrupted, start, iter) as i64 as f64;
        }
        comm.decide(&mut code)?;
        history.push(p);
        stop = match Decision::from_code(code[0]) {
            Decision::GoOn => continue,
            Decision::Converged => StopReason::Converged,
            Decision::Cancelled => StopReason::Cancelled,
            Decision::TimeLimit => StopReason::TimeLimit,
            Decision::MaxIter => StopReason::MaxIter,
            Decision::NonFinite => {
                return Err(JokerError::Numerical(
                    "the objective became non-finite; check the scaling of the data and lambda"
                        .into(),
                ));
            }
        };
        break;
    }
    // every rank leaves with rank 0's theta, bit for bit
    comm.broadcast(0, &mut theta)?;
    Ok(Solution {
        theta: Some(theta),
        alpha: st.alpha,
        iters: iter,
        stop,
        history,
        timings,
        tr_model: schedule.curvature.note,
        working_set: schedule.choice.note,
        fell_back: None,
    })
}

/// Step 2 to 4 of an outer step: sums the ranks' changes of `theta`, finds the step along the
/// combined direction and moves `alpha` and the engine's `theta` there. Returns the new
/// `theta` (also in `st.theta`). For KRR, whose dual is a quadratic without a box, the step
/// is taken in the plane of the new direction and the last step (`last`, updated here).
fn combine<T: Scalar>(
    st: &mut super::State<T>,
    (alpha0, theta0): (&[f64], &[f64]),
    comm: &dyn Collective,
    adding: bool,
    last: &mut Option<(Vec<f64>, Vec<f64>)>,
) -> Result<Vec<f64>> {
    // the engine moved theta by `scale` times this rank's change
    let s = st.scale;
    let mut dtheta: Vec<f64> = st
        .theta
        .iter()
        .zip(theta0)
        .map(|(a, b)| (a - b) / s)
        .collect();
    comm.sum(&mut dtheta)?;
    let d: Vec<f64> = st.alpha.iter().zip(alpha0).map(|(a, b)| a - b).collect();
    let (beta, gamma) = if adding {
        (1.0, 0.0)
    } else if quadratic_dual(st.prob.loss) {
        let last = last.as_ref().map(|(a, t)| (&a[..], &t[..]));
        plane_search(st, (alpha0, theta0), (&d, &dtheta), last, comm)?
    } else {
        (line_search(st, alpha0, theta0, &dtheta, comm)?, 0.0)
    };
    let (n, prob) = (st.n, st.prob);
    let mut step_alpha = vec![0.0; d.len()];
    for (k, (a, &a0)) in st.alpha.iter_mut().zip(alpha0).enumerate() {
        let from_last = last.as_ref().map_or(0.0, |(sa, _)| gamma * sa[k]);
        let step = beta * d[k] + from_last;
        if step != 0.0 {
            let (lo, hi) = prob.loss.bounds(&coord(prob, k % n, k / n));
            *a = (a0 + step).clamp(lo, hi);
        } else {
            *a = a0;
        }
        step_alpha[k] = *a - a0;
    }
    let step_theta: Vec<f64> = dtheta
        .iter()
        .enumerate()
        .map(|(j, dt)| beta * dt + last.as_ref().map_or(0.0, |(_, sth)| gamma * sth[j]))
        .collect();
    let theta: Vec<f64> = theta0.iter().zip(&step_theta).map(|(t, d)| t + d).collect();
    let shift: Vec<f64> = theta.iter().zip(&st.theta).map(|(g, l)| g - l).collect();
    engine_of(&mut st.engine)?.shift_theta(&shift)?;
    st.theta.copy_from_slice(&theta);
    *last = Some((step_alpha, step_theta));
    Ok(theta)
}

/// Whether the loss's dual terms are quadratic (or linear) on their box, so that the dual
/// objective is a quadratic on any segment or plane inside the box.
fn quadratic_dual(loss: Loss) -> bool {
    matches!(
        loss,
        Loss::SquaredError | Loss::Huber { .. } | Loss::SquaredHinge | Loss::Absolute | Loss::Hinge
    )
}

/// For duals quadratic on their box ([`quadratic_dual`]): the step `(beta, gamma)` along the
/// new direction `d` and the last step `s` (`None`: the first step, along `d` only). The
/// minimiser over the plane comes from five sums over the ranks (the dual terms' gradient
/// and curvature along `d` and `s`); where it leaves the box it is shortened to the box's
/// edge, and the better of that and the exact minimiser along `d` on `[0, 1]` (inside the
/// box, since both ends are) is taken. Rank 0's choice, on every rank.
fn plane_search<T: Scalar>(
    st: &super::State<T>,
    (alpha0, theta0): (&[f64], &[f64]),
    (d, dtheta): (&[f64], &[f64]),
    last: Option<(&[f64], &[f64])>,
    comm: &dyn Collective,
) -> Result<(f64, f64)> {
    let (n, prob) = (st.n, st.prob);
    let zero = vec![0.0; d.len()];
    let (s, stheta) = last.unwrap_or((&zero, &zero[..0]));
    // sums of the dual terms' gradient and curvature along d and s
    let mut t = [0.0; 5];
    for k in 0..d.len() {
        if d[k] == 0.0 && s[k] == 0.0 {
            continue;
        }
        let c = coord(prob, k % n, k / n);
        let (g, h) = (prob.loss.grad(alpha0[k], &c), prob.loss.hess(alpha0[k], &c));
        t[0] += g * d[k];
        t[1] += g * s[k];
        t[2] += h * d[k] * d[k];
        t[3] += h * d[k] * s[k];
        t[4] += h * s[k] * s[k];
    }
    comm.sum(&mut t)?;
    let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>();
    let (g_d, h_dd) = (t[0] + dot(theta0, dtheta), t[2] + dot(dtheta, dtheta));
    let value = |b: f64, gm: f64, g_s: f64, h_ds: f64, h_ss: f64| {
        b * g_d + gm * g_s + 0.5 * (b * b * h_dd + 2.0 * b * gm * h_ds + gm * gm * h_ss)
    };
    // along d on [0, 1]
    let along = if h_dd > 0.0 {
        (-g_d / h_dd).clamp(0.0, 1.0)
    } else if g_d < 0.0 {
        1.0
    } else {
        0.0
    };
    let mut best = (along, 0.0);
    if last.is_some() {
        let (g_s, h_ds, h_ss) = (
            t[1] + dot(theta0, stheta),
            t[3] + dot(dtheta, stheta),
            t[4] + dot(stheta, stheta),
        );
        let det = h_dd * h_ss - h_ds * h_ds;
        if h_dd > 0.0 && det > 1e-12 * h_dd * h_ss {
            let b = -(h_ss * g_d - h_ds * g_s) / det;
            let gm = -(h_dd * g_s - h_ds * g_d) / det;
            // the longest part of that step inside the box, over all ranks
            let mut reach = f64::INFINITY;
            for k in 0..d.len() {
                let v = b * d[k] + gm * s[k];
                if v != 0.0 {
                    let (lo, hi) = prob.loss.bounds(&coord(prob, k % n, k / n));
                    let r = if v > 0.0 {
                        (hi - alpha0[k]) / v
                    } else {
                        (lo - alpha0[k]) / v
                    };
                    reach = reach.min(r.max(0.0));
                }
            }
            let mut neg = [-reach];
            comm.max(&mut neg)?;
            let f = (-neg[0]).min(1.0);
            let plane = (f * b, f * gm);
            if value(plane.0, plane.1, g_s, h_ds, h_ss) < value(along, 0.0, g_s, h_ds, h_ss) {
                best = plane;
            }
        }
    }
    let mut step = [best.0, best.1];
    comm.decide(&mut step)?;
    Ok((step[0], step[1]))
}

/// The step `beta` in `[0, 1]` that minimises the dual objective along `alpha0 + beta d`,
/// `theta0 + beta dtheta` (`d = st.alpha - alpha0` on this rank), rank 0's value on every
/// rank; 0 when no point of the segment decreases the objective.
fn line_search<T: Scalar>(
    st: &super::State<T>,
    alpha0: &[f64],
    theta0: &[f64],
    dtheta: &[f64],
    comm: &dyn Collective,
) -> Result<f64> {
    let (n, prob) = (st.n, st.prob);
    let moving: Vec<(usize, f64, f64)> = st
        .alpha
        .iter()
        .zip(alpha0)
        .enumerate()
        .filter(|(_, (a, a0))| a != a0)
        .map(|(k, (a, a0))| (k, *a0, a - a0))
        .collect();
    let lin: f64 = theta0.iter().zip(dtheta).map(|(t, d)| t * d).sum();
    let quad: f64 = dtheta.iter().map(|d| d * d).sum();
    // the change of the dual terms at beta on this rank
    let terms = |beta: f64| -> f64 {
        moving
            .iter()
            .map(|&(k, a0, d)| {
                let c = coord(prob, k % n, k / n);
                prob.loss.dual(a0 + beta * d, &c) - prob.loss.dual(a0, &c)
            })
            .sum()
    };
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    let mut best = (0.0, 0.0);
    for _ in 0..ROUNDS {
        let betas: Vec<f64> = (0..GRID)
            .map(|j| lo + (hi - lo) * j as f64 / (GRID - 1) as f64)
            .collect();
        let mut vals: Vec<f64> = betas.iter().map(|&bt| terms(bt)).collect();
        comm.sum(&mut vals)?;
        let (j, v) = vals
            .iter()
            .enumerate()
            .map(|(j, v)| (j, v + lin * betas[j] + 0.5 * quad * betas[j] * betas[j]))
            .filter(|(_, v)| v.is_finite())
            .fold(
                (0, f64::INFINITY),
                |acc, x| if x.1 < acc.1 { x } else { acc },
            );
        if v < best.1 {
            best = (betas[j], v);
        }
        lo = betas[j.saturating_sub(1)];
        hi = betas[(j + 1).min(GRID - 1)];
    }
    let mut beta = [best.0];
    comm.decide(&mut beta)?;
    Ok(beta[0])
}

/// The objectives and gap over all ranks, and rank 0's validation metric.
fn check<T: Scalar>(
    st: &mut super::State<T>,
    comm: &dyn Collective,
    hooks: &mut Hooks<T>,
    (iter, accepted, b): (usize, usize, usize),
    start: Instant,
    timings: &Timings,
) -> Result<Progress> {
    let train_seconds = start.elapsed().as_secs_f64() - timings.check;
    let local = st.objective_terms()?;
    let mut sums = [local.lsum, local.fsum];
    comm.sum(&mut sums)?;
    let (primal, dual, gap) = Terms {
        sq: local.sq,
        lsum: sums[0],
        fsum: sums[1],
    }
    .objectives();
    let validation = hooks.validate.as_mut().map(|f| f(&st.predictor()));
    Ok(Progress {
        iter,
        epoch: (iter * b) as f64 / st.n as f64,
        seconds: start.elapsed().as_secs_f64(),
        train_seconds,
        primal,
        dual,
        gap,
        validation,
        accepted,
        rel_residual: None,
    })
}

/// Rank 0's verdict after a check.
fn decide(p: &Progress, cfg: &SolverConfig, go_on: bool, start: Instant, iter: usize) -> Decision {
    if !(p.primal.is_finite() && p.dual.is_finite()) {
        Decision::NonFinite
    } else if p.gap <= cfg.tol {
        Decision::Converged
    } else if !go_on {
        Decision::Cancelled
    } else if cfg.time_limit.is_some_and(|lim| start.elapsed() >= lim) {
        Decision::TimeLimit
    } else if iter >= cfg.max_iter {
        Decision::MaxIter
    } else {
        Decision::GoOn
    }
}

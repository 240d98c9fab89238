//! Parallel block minimization (Hsieh, Si and Dhillon) with DBCD-TR as the local solver, over
//! random features or exact kernels.
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
//! Exact kernels keep `beta_r = (K alpha)_{S_r}` on each rank instead of `theta`. Every rank
//! holds all the rows (gathered once, in rank order: `n d` values, the paper's setting, where
//! any machine can form any kernel entry), so that step 2 is `u = K(X_{S_q}, X_{S_r}) d_r` for
//! the other ranks' rows on each rank (`n_r (n - n_r)` kernel values; `K_{S_r S_r} d_r` is
//! what its engine applied) and one sum of the `n x T` vectors, of which rank `r` keeps its
//! rows: `(K d)_{S_r}`, the paper's reduce-scatter of `Q d`. The quadratic part along the direction is then a sum over the ranks too
//! (`alpha^T K d = sum_r beta_r^T d_r`, `d^T K d = sum_r d_r^T (K d)_{S_r}`), and step 4 is
//! `beta_r += beta (K d)_{S_r}`.
//!
//! Then the objectives and the duality gap are summed over the ranks, and rank 0 decides
//! whether to stop, for everyone. A regression's intercept moves at such a check as in one
//! process (src/solver/dbcd/intercept.rs), from sums over the ranks. On one rank the
//! block-diagonal model is the whole problem: the step is 1 and the iterates are those of
//! [`super::solve`].

use std::path::PathBuf;
use std::time::Instant;

use super::intercept::Intercept;
use super::{
    Hooks, INTERCEPT_GAP, Problem, Progress, Repr, Schedule, Solution, SolverConfig, StopReason,
    Terms, Timings, apply_update, check_shapes, engine_of, shifted, start_state, tally,
};
use crate::backend::Backend;
use crate::backend::predict::Predictor;
use crate::data::{DenseMatrix, Features};
use crate::distributed::Collective;
use crate::distributed::checkpoint::{self, CheckpointConfig};
use crate::distributed::partition::Partition;
use crate::error::{JokerError, Result};
use crate::kernel::Kernel;
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
///
/// Exact kernels need `everyone`, every rank's rows in rank order ([`all_rows`]; `None` on one
/// rank), and return the dual coefficients of every rank, in that order.
pub fn solve<T: Scalar>(
    backend: &dyn Backend<T>,
    prob: &Problem<T>,
    everyone: Option<&Features<T>>,
    cfg: &SolverConfig,
    pbm: &PbmConfig,
    comm: &dyn Collective,
    hooks: &mut Hooks<T>,
) -> Result<Solution> {
    let out = run(backend, prob, everyone, cfg, pbm, comm, hooks);
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
    everyone: Option<&Features<T>>,
    cfg: &SolverConfig,
    pbm: &PbmConfig,
    comm: &dyn Collective,
    hooks: &mut Hooks<T>,
) -> Result<Solution> {
    let start = Instant::now();
    let (n, tt) = (prob.x.nrows(), prob.targets);
    let b = cfg.block_size.min(n);
    check_shapes(prob, b)?;
    let (rank, ranks) = (comm.rank(), comm.size());
    // exact kernels: the kernel and every rank's rows (this rank's own on one rank)
    let exact = match prob.repr {
        Repr::Exact(kernel) => Some(Exact {
            kernel,
            everyone: match everyone {
                Some(all) => all,
                None if ranks == 1 => prob.x,
                None => {
                    return Err(JokerError::Unsupported(
                        "a distributed exact-kernel fit needs every rank's rows".into(),
                    ));
                }
            },
        }),
        Repr::Features(_) => None,
    };
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
    let (alpha0, mut outer, shift) = match &pbm.resume {
        Some(dir) => {
            let (a, outer, shift) = checkpoint::read(dir, first_row, n, tt)?;
            (Some(a), outer, shift)
        }
        None => (None, 0, Vec::new()),
    };
    let mut st = start_state(backend, prob, alpha0, &perm, (b, cfg.kernel_cache))?;
    // the intercept, searched as in one process with its sums over the ranks; a resumed fit
    // goes on from the checkpoint's
    let mut intercept = Intercept::of_fit(prob, cfg);
    if intercept.is_some() && shift.len() == tt {
        st.shift = shift;
    }
    if adding {
        st.scale = ranks as f64;
    }
    let mut timings = Timings::default();
    let mut last_checkpoint = Instant::now();
    // the products' own time, apart from the communication they are part of
    let products = std::cell::Cell::new(0.0);
    let cross = |v: &[f64], own: &[f64]| -> Result<Vec<f64>> {
        let e = exact.as_ref().expect("exact kernels only");
        e.own_rows_of_product(backend, prob.x, (v, own), tt, (first_row, &products), comm)
    };

    // theta over all ranks, or beta = (K alpha)_{S_r}; the engine keeps it, shifted by the
    // other ranks' part
    let tc = Instant::now();
    st.pull_theta()?;
    let mut theta = st.theta.clone();
    comm.sum(&mut theta)?;
    if ranks > 1 {
        match &exact {
            None => {
                let shift: Vec<f64> = theta.iter().zip(&st.theta).map(|(g, l)| g - l).collect();
                engine_of(&mut st.engine)?.shift_theta(&shift)?;
                st.theta.copy_from_slice(&theta);
            }
            Some(_) => {
                // the engine holds its own rows' part, K_{S_r S_r} alpha_r
                let own = engine_of(&mut st.engine)?.decision()?;
                let beta = cross(&st.alpha, &own)?;
                let shift: Vec<f64> = beta.iter().zip(&own).map(|(g, l)| g - l).collect();
                engine_of(&mut st.engine)?.shift_beta(&shift)?;
            }
        }
    }
    // every rank needs all the dual coefficients where rank 0 validates an exact model
    let mut validating = [f64::from(u8::from(hooks.validate.is_some()))];
    comm.decide(&mut validating)?;
    let validating = exact.is_some() && ranks > 1 && validating[0] != 0.0;
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
        // beta at the start of the step (exact kernels on several ranks)
        let beta0 = match &exact {
            Some(_) if ranks > 1 => engine_of(&mut st.engine)?.decision()?,
            _ => Vec::new(),
        };
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
            let global = match &exact {
                None => Global::Theta(&theta0),
                Some(_) => Global::Beta {
                    beta0: &beta0,
                    product: &cross,
                },
            };
            theta = combine(&mut st, &alpha0, global, comm, adding, &mut last_step)?;
            timings.communicate += tc.elapsed().as_secs_f64();
        } else {
            theta.copy_from_slice(&st.theta);
        }
        if let Some(c) = &pbm.checkpoint
            && c.due(outer, last_checkpoint.elapsed().as_secs_f64(), comm)?
        {
            let tc = Instant::now();
            let shift = match intercept {
                Some(_) => &st.shift[..],
                None => &[],
            };
            checkpoint::write(c, comm, (first_row, outer, tt), (&st.alpha, shift))?;
            timings.check += tc.elapsed().as_secs_f64();
            last_checkpoint = Instant::now();
        }

        let tc = Instant::now();
        let everything = match &exact {
            Some(e) if validating => Some((e, gather_alpha(&st.alpha, tt, comm)?)),
            _ => None,
        };
        let p = check(
            &mut st,
            comm,
            hooks,
            everything.as_ref().map(|(e, a)| e.predictor(a)),
            (iter, accepted, b),
            start,
            &timings,
        )?;
        timings.check += tc.elapsed().as_secs_f64();
        // rank 0 decides for everyone, and whether the gap is near enough the tolerance for
        // the intercept to move
        let mut code = [Decision::GoOn as i64 as f64, 0.0];
        if rank == 0 {
            let go_on = hooks.progress.as_mut().is_none_or(|f| f(&p));
            code[0] = decide(&p, cfg, go_on && !interrupted, start, iter) as i64 as f64;
            code[1] = f64::from(u8::from(p.gap <= INTERCEPT_GAP * cfg.tol));
        }
        comm.decide(&mut code)?;
        history.push(p);
        let decision = Decision::from_code(code[0]);
        // a converged solve, or one near it, moves the intercept; the fit goes on from where
        // it is, and the plane search starts afresh (the objective has moved)
        let searching = matches!(decision, Decision::Converged)
            || matches!(decision, Decision::GoOn) && code[1] != 0.0;
        if let Some(search) = intercept.as_mut().filter(|_| searching)
            && search.step(&mut st, comm)?
        {
            last_step = None;
            schedule = Schedule::new(&mut st, &local, &perm, tt)?;
            continue;
        }
        stop = match decision {
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
    // every rank leaves with rank 0's theta, bit for bit; an exact fit with every rank's dual
    // coefficients
    let (theta, alpha) = match &exact {
        None => {
            comm.broadcast(0, &mut theta)?;
            (Some(theta), st.alpha)
        }
        Some(_) if ranks > 1 => (None, gather_alpha(&st.alpha, tt, comm)?),
        Some(_) => (None, st.alpha),
    };
    timings.products = products.get();
    timings.communicate -= timings.products;
    Ok(Solution {
        theta,
        alpha,
        iters: iter,
        stop,
        history,
        timings,
        tr_model: schedule.curvature.note,
        working_set: schedule.choice.note,
        fell_back: None,
        pairs_at_once: 0,
        passes: None,
        intercept: match intercept {
            Some(_) => st.shift,
            None => Vec::new(),
        },
        start: String::new(),
    })
}

/// An exact-kernel fit's kernel and every rank's rows, in rank order.
struct Exact<'e, T> {
    kernel: &'e Kernel,
    everyone: &'e Features<T>,
}

/// Columns of this rank's rows per product tile of [`Exact::own_rows_of_product`].
const CROSS_COLUMNS: usize = 512;
/// Rows of all the ranks' rows per product tile.
const CROSS_ROWS: usize = 2048;

impl<T: Scalar> Exact<'_, T> {
    /// `(K v)_{S_r}` for `v` given on every rank's own rows (`n_r x T`, column-major), with
    /// this rank's own part `own = K_{S_r S_r} v_r` known (its engine applied it): this rank
    /// forms `K(X_{S_q}, X_{S_r}) v_r` for the other ranks' rows `S_q`, the ranks sum those
    /// `n x T` vectors, and this rank keeps its rows `first .. first + n_r` plus `own`.
    fn own_rows_of_product(
        &self,
        backend: &dyn Backend<T>,
        mine: &Features<T>,
        (v, own): (&[f64], &[f64]),
        tt: usize,
        (first, seconds): (usize, &std::cell::Cell<f64>),
        comm: &dyn Collective,
    ) -> Result<Vec<f64>> {
        let started = Instant::now();
        let all = self.everyone;
        let (n, nr, d) = (all.nrows(), mine.nrows(), all.ncols());
        // the other ranks' rows: before and after this rank's
        let others = [(0, first), (first + nr, n)];
        let mut out = vec![0.0; n * tt];
        let mut xb = vec![T::default(); CROSS_COLUMNS.min(nr) * d];
        let mut xc = vec![T::default(); CROSS_ROWS.min(n) * d];
        for c0 in (0..nr).step_by(CROSS_COLUMNS) {
            let nb = CROSS_COLUMNS.min(nr - c0);
            let vb: Vec<f64> = (0..tt)
                .flat_map(|t| v[t * nr + c0..t * nr + c0 + nb].iter().copied())
                .collect();
            if vb.iter().all(|&x| x == 0.0) {
                continue;
            }
            mine.gather_range(c0, &mut xb[..nb * d]);
            let starts = others
                .iter()
                .flat_map(|&(lo, hi)| (lo..hi).step_by(CROSS_ROWS).map(move |r0| (r0, hi)));
            for (r0, hi) in starts {
                let rows = CROSS_ROWS.min(hi - r0);
                all.gather_range(r0, &mut xc[..rows * d]);
                backend.kernel_matvec(
                    self.kernel,
                    &xc[..rows * d],
                    rows,
                    &xb[..nb * d],
                    nb,
                    d,
                    &vb,
                    tt,
                    &mut out[r0..],
                    n,
                );
            }
        }
        seconds.set(seconds.get() + started.elapsed().as_secs_f64());
        comm.sum(&mut out)?;
        Ok((0..tt)
            .flat_map(|t| out[t * n + first..t * n + first + nr].iter().copied())
            .zip(own)
            .map(|(o, s)| o + s)
            .collect())
    }

    /// The predictor of the whole model from every rank's dual coefficients `alpha`.
    fn predictor<'p>(&'p self, alpha: &'p [f64]) -> Predictor<'p, T> {
        Predictor::Exact {
            kernel: self.kernel,
            support: self.everyone,
            rows: None,
            alpha,
        }
    }
}

/// Every rank's rows, in rank order, on every rank (an exact-kernel fit forms `K(X, X_{S_r})`):
/// `n d` values each, sent once; sparse rows are sent and kept dense.
pub fn all_rows<T: Scalar>(x: &Features<T>, comm: &dyn Collective) -> Result<Features<T>> {
    let (nr, d) = (x.nrows(), x.ncols());
    let mut mine = vec![T::default(); nr * d];
    x.gather_range(0, &mut mine);
    let local: Vec<f64> = mine.iter().map(|v| v.to_f64()).collect();
    let parts = comm.gather(&local)?;
    let values: Vec<T> = parts.iter().flatten().map(|&v| T::from_f64(v)).collect();
    let n = values.len() / d.max(1);
    Ok(Features::Dense(DenseMatrix::new(n, d, values)?))
}

/// Every rank's dual coefficients (`n_r x T` column-major each) as one `n x T` column-major
/// array in rank order, on every rank.
fn gather_alpha(alpha: &[f64], tt: usize, comm: &dyn Collective) -> Result<Vec<f64>> {
    let parts = comm.gather(alpha)?;
    let mut out = Vec::with_capacity(parts.iter().map(Vec::len).sum());
    for t in 0..tt {
        for part in &parts {
            let n_q = part.len() / tt.max(1);
            out.extend_from_slice(&part[t * n_q..(t + 1) * n_q]);
        }
    }
    Ok(out)
}

/// `(v, K_{S_r S_r} v_r) -> (K v)_{S_r}` over the ranks ([`Exact::own_rows_of_product`]).
type Product<'p> = dyn Fn(&[f64], &[f64]) -> Result<Vec<f64>> + 'p;

/// What the ranks share besides the dual coefficients: `theta` (random features; the value at
/// the step's start, the same on every rank), or for exact kernels `beta0 = (K alpha)_{S_r}`
/// at the step's start and the product `(v, K_{S_r S_r} v_r) -> (K v)_{S_r}` over the ranks.
enum Global<'g> {
    Theta(&'g [f64]),
    Beta {
        beta0: &'g [f64],
        product: &'g Product<'g>,
    },
}

/// Step 2 to 4 of an outer step: combines the ranks' changes `d = alpha - alpha0` (of `theta`
/// for random features, of `K alpha` for exact kernels), finds the step along the combined
/// direction and moves `alpha` and the engine's `theta` or `beta` there. Returns the new
/// `theta` (also in `st.theta`; empty for exact kernels). For KRR, whose dual is a quadratic
/// without a box, the step is taken in the plane of the new direction and the last step
/// (`last`: its change of `alpha` and its image, of `theta` or of `K alpha`, updated here).
fn combine<T: Scalar>(
    st: &mut super::State<T>,
    alpha0: &[f64],
    global: Global<'_>,
    comm: &dyn Collective,
    adding: bool,
    last: &mut Option<(Vec<f64>, Vec<f64>)>,
) -> Result<Vec<f64>> {
    let d: Vec<f64> = st.alpha.iter().zip(alpha0).map(|(a, b)| a - b).collect();
    // an exact engine's beta: beta0 moved by `scale K_{S_r S_r} d_r` in the local solves
    let now = match &global {
        Global::Theta(_) => Vec::new(),
        Global::Beta { .. } => engine_of(&mut st.engine)?.decision()?,
    };
    // the direction's image: the summed change of theta (the engine moved it by `scale`
    // times this rank's), or (K d)_{S_r}
    let image = match &global {
        Global::Theta(theta0) => {
            let s = st.scale;
            let mut dtheta: Vec<f64> = st
                .theta
                .iter()
                .zip(theta0.iter())
                .map(|(a, b)| (a - b) / s)
                .collect();
            comm.sum(&mut dtheta)?;
            dtheta
        }
        Global::Beta { beta0, product } => {
            // this rank's own part, which its engine applied
            let s = st.scale;
            let own: Vec<f64> = now
                .iter()
                .zip(beta0.iter())
                .map(|(a, b)| (a - b) / s)
                .collect();
            product(&d, &own)?
        }
    };
    let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>();
    // the quadratic part 1/2 alpha^T K alpha along d and the last step s: its gradient at
    // alpha0 and its curvature, over all ranks
    let quadratic = |s_image: &[f64], s: &[f64]| -> Result<[f64; 5]> {
        match &global {
            Global::Theta(theta0) => Ok([
                dot(theta0, &image),
                dot(theta0, s_image),
                dot(&image, &image),
                dot(&image, s_image),
                dot(s_image, s_image),
            ]),
            Global::Beta { beta0, .. } => {
                let mut q = [
                    dot(beta0, &d),
                    dot(beta0, s),
                    dot(&d, &image),
                    dot(s, &image),
                    dot(s, s_image),
                ];
                comm.sum(&mut q)?;
                Ok(q)
            }
        }
    };
    let (beta, gamma) = if adding {
        (1.0, 0.0)
    } else if quadratic_dual(st.prob.loss) {
        let zero = vec![0.0; d.len()];
        let (s, s_image) = last
            .as_ref()
            .map_or((&zero[..], &[][..]), |(a, t)| (&a[..], &t[..]));
        let q = if last.is_some() {
            quadratic(s_image, s)?
        } else {
            let q = quadratic(&[], &zero)?;
            [q[0], 0.0, q[2], 0.0, 0.0]
        };
        plane_search(st, alpha0, &d, last.as_ref().map(|(a, _)| &a[..]), q, comm)?
    } else {
        let q = quadratic(&[], &vec![0.0; d.len()])?;
        (line_search(st, alpha0, (q[0], q[2]), comm)?, 0.0)
    };
    let (n, prob, shift) = (st.n, st.prob, &st.shift);
    let mut step_alpha = vec![0.0; d.len()];
    for (k, (a, &a0)) in st.alpha.iter_mut().zip(alpha0).enumerate() {
        let from_last = last.as_ref().map_or(0.0, |(sa, _)| gamma * sa[k]);
        let step = beta * d[k] + from_last;
        if step != 0.0 {
            let (lo, hi) = prob.loss.bounds(&shifted(prob, shift, k % n, k / n));
            *a = (a0 + step).clamp(lo, hi);
        } else {
            *a = a0;
        }
        step_alpha[k] = *a - a0;
    }
    let step_image: Vec<f64> = image
        .iter()
        .enumerate()
        .map(|(j, v)| beta * v + last.as_ref().map_or(0.0, |(_, si)| gamma * si[j]))
        .collect();
    let engine = engine_of(&mut st.engine)?;
    let theta = match global {
        Global::Theta(theta0) => {
            let theta: Vec<f64> = theta0.iter().zip(&step_image).map(|(t, d)| t + d).collect();
            let shift: Vec<f64> = theta.iter().zip(&st.theta).map(|(g, l)| g - l).collect();
            engine.shift_theta(&shift)?;
            st.theta.copy_from_slice(&theta);
            theta
        }
        Global::Beta { beta0, .. } => {
            let shift: Vec<f64> = beta0
                .iter()
                .zip(&step_image)
                .zip(&now)
                .map(|((b0, s), b)| b0 + s - b)
                .collect();
            engine.shift_beta(&shift)?;
            Vec::new()
        }
    };
    *last = Some((step_alpha, step_image));
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
/// and curvature along `d` and `s`) and the quadratic part's `q` (`alpha0^T K d`,
/// `alpha0^T K s`, `d^T K d`, `d^T K s`, `s^T K s`, over all ranks); where it leaves the box
/// it is shortened to the box's edge, and the better of that and the exact minimiser along `d`
/// on `[0, 1]` (inside the box, since both ends are) is taken. Rank 0's choice, on every rank.
fn plane_search<T: Scalar>(
    st: &super::State<T>,
    alpha0: &[f64],
    d: &[f64],
    last: Option<&[f64]>,
    q: [f64; 5],
    comm: &dyn Collective,
) -> Result<(f64, f64)> {
    let (n, prob) = (st.n, st.prob);
    let zero = vec![0.0; d.len()];
    let s = last.unwrap_or(&zero);
    // sums of the dual terms' gradient and curvature along d and s
    let mut t = [0.0; 5];
    for k in 0..d.len() {
        if d[k] == 0.0 && s[k] == 0.0 {
            continue;
        }
        let c = st.coord(k % n, k / n);
        let (g, h) = (prob.loss.grad(alpha0[k], &c), prob.loss.hess(alpha0[k], &c));
        t[0] += g * d[k];
        t[1] += g * s[k];
        t[2] += h * d[k] * d[k];
        t[3] += h * d[k] * s[k];
        t[4] += h * s[k] * s[k];
    }
    comm.sum(&mut t)?;
    let (g_d, h_dd) = (t[0] + q[0], t[2] + q[2]);
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
        let (g_s, h_ds, h_ss) = (t[1] + q[1], t[3] + q[3], t[4] + q[4]);
        let det = h_dd * h_ss - h_ds * h_ds;
        if h_dd > 0.0 && det > 1e-12 * h_dd * h_ss {
            let b = -(h_ss * g_d - h_ds * g_s) / det;
            let gm = -(h_dd * g_s - h_ds * g_d) / det;
            // the longest part of that step inside the box, over all ranks
            let mut reach = f64::INFINITY;
            for k in 0..d.len() {
                let v = b * d[k] + gm * s[k];
                if v != 0.0 {
                    let (lo, hi) = prob.loss.bounds(&st.coord(k % n, k / n));
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

/// The step `beta` in `[0, 1]` that minimises the dual objective along `alpha0 + beta d`
/// (`d = st.alpha - alpha0` on this rank), whose quadratic part `1/2 alpha^T K alpha` changes
/// by `beta lin + beta^2 quad / 2` (`lin = alpha0^T K d`, `quad = d^T K d`, over all ranks);
/// rank 0's value on every rank; 0 when no point of the segment decreases the objective.
fn line_search<T: Scalar>(
    st: &super::State<T>,
    alpha0: &[f64],
    (lin, quad): (f64, f64),
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
    // the change of the dual terms at beta on this rank
    let terms = |beta: f64| -> f64 {
        moving
            .iter()
            .map(|&(k, a0, d)| {
                let c = st.coord(k % n, k / n);
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
/// `whole`: the predictor of the whole model where this rank's own is not (an exact kernel
/// on several ranks).
fn check<T: Scalar>(
    st: &mut super::State<T>,
    comm: &dyn Collective,
    hooks: &mut Hooks<T>,
    whole: Option<Predictor<'_, T>>,
    (iter, accepted, b): (usize, usize, usize),
    start: Instant,
    timings: &Timings,
) -> Result<Progress> {
    let train_seconds = start.elapsed().as_secs_f64() - timings.check;
    let local = st.objective_terms()?;
    // ||w||^2 is theta^T theta on every rank, or the sum of the ranks' alpha_r^T beta_r
    let exact = matches!(st.prob.repr, Repr::Exact(_));
    let mut sums = [local.lsum, local.fsum, if exact { local.sq } else { 0.0 }];
    comm.sum(&mut sums)?;
    let (primal, dual, gap) = Terms {
        sq: if exact { sums[2] } else { local.sq },
        lsum: sums[0],
        fsum: sums[1],
    }
    .objectives();
    let validation = hooks.validate.as_mut().map(|f| match &whole {
        Some(p) => f(p, &st.shift),
        None => f(&st.predictor(), &st.shift),
    });
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
        pairs: None,
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

//! Doubly stochastic functional gradients (DSG; Dai et al., NIPS 2014) in mini-batch form, and
//! the two ways of Li and Poczos to reuse old random features: UDSG (uniform revisits) and CDSG
//! (revisits checked by an expected line search).
//!
//! DSG minimises the average-loss objective `R(f) = 1/n sum_i w_i l(f(x_i), y_i) + nu/2
//! ||f||_H^2` with `nu = lambda / n`, which is joker's `1/2 ||theta||^2 + c sum_i w_i l` divided
//! by `c n`. Step `t = 1, 2, ...` draws a mini-batch `S` of `b` rows (uniformly, with
//! replacement) and a block `J` of `r` random features, and moves along the doubly stochastic
//! gradient:
//!
//! ```text
//! g_i     = w_i l'(f_t(x_i), y_i)                       (i in S; the loss's own derivative)
//! phi_j   = sqrt(2/r) cos(w_j^T x + b_j)                (j in J; sum_j phi_j phi_j ~ k)
//! D_j     = 1/b sum_{i in S} g_i phi_j(x_i)             (the block's gradient)
//! f_{t+1} = (1 - gamma_t nu) f_t - gamma_t sum_{j in J} D_j phi_j
//! ```
//!
//! so `f_t = sum_j a_j phi_j` and the model is the seed plus the coefficients `a`: feature `j` is
//! feature `j` of the crate's [`RandomMap`], regenerated from the seed. The decay of every old
//! coefficient is kept lazily, `a = c s` with one scalar `c`, so a step costs `O(b m d)` for the
//! batch's features and nothing per old coefficient; `c` is folded into `s` when it falls below
//! `1e-100`.
//!
//! Which block a step updates:
//! - **DSG** opens a new block every step (feature indices `(t-1) r .. t r`);
//! - **UDSG** repeats `new_steps` steps on new blocks and `old_steps` steps on a block drawn
//!   uniformly from the opened ones;
//! - **CDSG** updates the old block `k` whose expected line search (Li and Poczos, eq. 9)
//!   admits the largest step `eta_k`, if `eta_k > gamma_t`, with step `min(eta_k, cap gamma_t)`;
//!   otherwise it opens a new block (see [`cdsg_step`]).
//!
//! **The cap.** The feature map has `M` features (`n_components`), i.e. `floor(M / r)` blocks.
//! Once every block is open, a step that would open one revisits a block drawn uniformly from
//! all blocks instead (the reference code's `revisit`), so memory stays `O(M (d + T))`.
//!
//! **The model.** After `m` features are open, `f(x) = sum_{j < m} a_j sqrt(2/r) cos(..) =
//! sum_{j < m} theta_j psi_j(x)` with joker's `psi_j = sqrt(2/m) cos(..)` and
//! `theta_j = a_j sqrt(m / r)`: a DSG model is an ordinary random-feature model of `m` features.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::backend::predict::Predictor;
use crate::data::{Features, RowStream};
use crate::error::{JokerError, Result, invalid};
use crate::features::{FeatureMap, RandomMap};
use crate::loss::Loss;
use crate::rng::{Stream, streams};
use crate::scalar::Scalar;
use crate::solver::dbcd::{Hooks, Progress, Solution, StopReason, Timings};

/// Which coordinates the steps update.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "name", rename_all = "snake_case")]
pub enum DsgVariant {
    /// Every step opens a new feature block (Dai et al.).
    Dsg,
    /// `new_steps` steps on new blocks, then `old_steps` steps on uniformly drawn opened blocks,
    /// repeated (Li and Poczos's UDSG; their experiments use 1 and 1).
    Udsg {
        /// Steps on new blocks per cycle (>= 1).
        new_steps: usize,
        /// Steps on old blocks per cycle.
        old_steps: usize,
    },
    /// An old block is updated when its expected line search allows a step larger than the
    /// DSG step `gamma_t` (Li and Poczos's CDSG); `step_cap` bounds that step at
    /// `step_cap gamma_t` (their `theta'`, no value given: 2 by default).
    Cdsg {
        /// The largest step as a multiple of `gamma_t` (>= 1).
        step_cap: f64,
    },
}

impl DsgVariant {
    /// `dsg`, `udsg` or `cdsg`.
    pub fn name(&self) -> &'static str {
        match self {
            DsgVariant::Dsg => "dsg",
            DsgVariant::Udsg { .. } => "udsg",
            DsgVariant::Cdsg { .. } => "cdsg",
        }
    }
}

/// The step size `gamma_t = theta / (t + t0)`, `t = 1, 2, ...` (Dai et al.'s `theta / t`
/// shifted by `t0` so that the first steps stay small; only `t0 = 0` is covered by their
/// theorems).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepSize {
    /// `theta > 0`.
    pub theta: f64,
    /// `t0 >= 0`.
    pub t0: f64,
}

impl StepSize {
    /// `gamma_t`.
    pub fn at(&self, t: usize) -> f64 {
        self.theta / (t as f64 + self.t0)
    }
}

/// Settings of the doubly stochastic solvers. The iteration budget (`max_iter`, in steps), the
/// time limit, the check period and the seed are those of [`super::SolverConfig`]; the cap on
/// the features is the model's `n_components`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DsgConfig {
    /// DSG, UDSG or CDSG.
    pub variant: DsgVariant,
    /// Rows per step `b` (>= 1; capped at the number of samples).
    pub batch_size: usize,
    /// Features per block `r` (>= 1, at most `n_components`).
    pub feature_block: usize,
    /// The step-size schedule.
    pub step: StepSize,
    /// Batches of consecutive rows, sweeping the data in file order pass after pass, instead
    /// of rows drawn uniformly with replacement. `None` (the default) sweeps rows mapped from a
    /// file, which are then read sequentially once per pass (the file's rows should be in
    /// random order), and draws otherwise.
    #[serde(default)]
    pub sequential: Option<bool>,
}

impl Default for DsgConfig {
    /// DSG with batches of 256 rows, blocks of 64 features and `gamma_t = 1000 / (t + 1000)`:
    /// about 1 for the first thousand steps, then `1/t`. A step of `gamma` moves a batch's
    /// predictions by about `gamma` times the derivative (`phi_j = sqrt(2/r) cos` makes
    /// `k_hat(x, x) ~ 1`), so steps up to 1 are stable for losses whose `l''` is at most 1
    /// (squared error, Huber, squared hinge, logistic); larger steps diverge on the squared
    /// error (measured in `docs/dsg.md`).
    fn default() -> Self {
        DsgConfig {
            variant: DsgVariant::Dsg,
            batch_size: 256,
            feature_block: 64,
            step: StepSize {
                theta: 1000.0,
                t0: 1000.0,
            },
            sequential: None,
        }
    }
}

impl DsgConfig {
    /// A default configuration for a variant named `dsg`, `udsg` (1 new, 1 old step) or `cdsg`
    /// (cap 2).
    pub fn named(name: &str) -> Option<Self> {
        let variant = match name {
            "dsg" => DsgVariant::Dsg,
            "udsg" => DsgVariant::Udsg {
                new_steps: 1,
                old_steps: 1,
            },
            "cdsg" => DsgVariant::Cdsg { step_cap: 2.0 },
            _ => return None,
        };
        Some(DsgConfig {
            variant,
            ..DsgConfig::default()
        })
    }

    /// Checks the settings that do not depend on the data.
    pub fn validate(&self) -> Result<()> {
        if self.batch_size == 0 {
            return Err(invalid("batch_size", "DSG needs at least one row per step"));
        }
        if self.feature_block == 0 {
            return Err(invalid(
                "feature_block",
                "DSG needs at least one random feature per step",
            ));
        }
        let StepSize { theta, t0 } = self.step;
        if !(theta > 0.0 && theta.is_finite()) {
            return Err(invalid(
                "step",
                format!("theta must be positive and finite, got {theta}"),
            ));
        }
        if !(t0 >= 0.0 && t0.is_finite()) {
            return Err(invalid(
                "step",
                format!("t0 must be >= 0 and finite, got {t0}"),
            ));
        }
        match self.variant {
            DsgVariant::Dsg => {}
            DsgVariant::Udsg { new_steps: 0, .. } => {
                return Err(invalid(
                    "udsg",
                    "UDSG needs at least one step on new features per cycle",
                ));
            }
            DsgVariant::Udsg { .. } => {}
            DsgVariant::Cdsg { step_cap } if !(step_cap >= 1.0 && step_cap.is_finite()) => {
                return Err(invalid(
                    "step_cap",
                    format!("CDSG's step cap must be >= 1 and finite, got {step_cap}"),
                ));
            }
            DsgVariant::Cdsg { .. } => {}
        }
        Ok(())
    }

    /// The largest multiple of `gamma_t` one step may take.
    fn step_factor(&self) -> f64 {
        match self.variant {
            DsgVariant::Cdsg { step_cap } => step_cap,
            _ => 1.0,
        }
    }
}

/// The losses DSG can train: those whose derivative is bounded or Lipschitz as the papers
/// assume (every loss but Lp, whose derivative grows as `|y - u|^(p-1)`).
pub fn supports(loss: &Loss) -> bool {
    !matches!(loss, Loss::Lp { .. })
}

/// The data of one fit.
#[doc(hidden)]
pub struct DsgProblem<'a, T> {
    /// Preprocessed rows, their targets and weights.
    pub rows: DsgRows<'a, T>,
    /// The feature map: its `M` features are the cap (random features only: a feature is
    /// regenerated from the seed).
    pub map: &'a FeatureMap<T>,
    /// The loss.
    pub loss: Loss,
    /// Target columns `T`.
    pub targets: usize,
    /// joker's `lambda` (summed loss); DSG's `nu = lambda / n`.
    pub lambda: f64,
}

/// How a streamed row's label becomes its `T` targets (written to the slice) and its weight
/// (returned).
#[doc(hidden)]
pub type Encode<'a> = &'a (dyn Fn(f64, &mut [f64]) -> Result<f64> + Sync);

/// Where a doubly stochastic fit reads its rows.
#[doc(hidden)]
pub enum DsgRows<'a, T> {
    /// Rows in memory or mapped from a file: batches are drawn by index, or swept in order.
    Features {
        /// The rows.
        x: &'a Features<T>,
        /// Targets, column-major `n x T`.
        y: &'a [f64],
        /// Per-sample weight `w_i` (sample and class weights).
        weight: &'a [f64],
    },
    /// Rows streamed from a file in order, pass after pass: batches are swept in order, and
    /// each row's targets and weight come from its label.
    Stream {
        /// The rows and their labels.
        rows: &'a dyn RowStream<T>,
        /// A label's targets and weight.
        encode: Encode<'a>,
    },
}

impl<T: Scalar> DsgRows<'_, T> {
    fn nrows(&self) -> usize {
        match self {
            DsgRows::Features { x, .. } => x.nrows(),
            DsgRows::Stream { rows, .. } => rows.nrows(),
        }
    }

    fn ncols(&self) -> usize {
        match self {
            DsgRows::Features { x, .. } => x.ncols(),
            DsgRows::Stream { rows, .. } => rows.ncols(),
        }
    }

    /// Whether batches sweep the rows in order by default: mapped rows (read sequentially)
    /// and streams (which can only be read in order).
    fn sweeps(&self) -> bool {
        match self {
            DsgRows::Features { x, .. } => x.is_mapped(),
            DsgRows::Stream { .. } => true,
        }
    }

    /// The rows `rows` (consecutive, from `rows[0]`, for a stream), dense into `xb`, their
    /// targets into `yb` (row-major `b x T`) and weights into `wb`. `labels` is room for the
    /// batch's labels.
    fn gather(
        &self,
        rows: &[usize],
        (xb, yb, wb): (&mut [T], &mut [f64], &mut [f64]),
        labels: &mut [f64],
    ) -> Result<()> {
        let tt = yb.len() / rows.len().max(1);
        match self {
            DsgRows::Features { x, y, weight } => {
                x.gather_dense(rows, xb);
                let n = x.nrows();
                for (i, &row) in rows.iter().enumerate() {
                    for t in 0..tt {
                        yb[i * tt + t] = y[t * n + row];
                    }
                    wb[i] = weight[row];
                }
                Ok(())
            }
            DsgRows::Stream { rows: s, encode } => {
                s.read(rows.first().copied().unwrap_or(0), xb, labels)?;
                for (i, &label) in labels.iter().enumerate() {
                    wb[i] = encode(label, &mut yb[i * tt..(i + 1) * tt])?;
                }
                Ok(())
            }
        }
    }
}

/// The run's budgets, from [`super::SolverConfig`].
#[doc(hidden)]
pub struct DsgRun {
    /// Steps.
    pub max_iter: usize,
    /// Wall-clock budget.
    pub time_limit: Option<Duration>,
    /// Steps between checks (0: one pass over the data, `ceil(n / b)`).
    pub check_every: usize,
    /// Seed of the batch draws and revisits (the features use the map's seed).
    pub seed: u64,
}

impl DsgRun {
    /// The budgets of a fit with solver settings `s`.
    pub fn of(s: &super::SolverConfig) -> Self {
        DsgRun {
            max_iter: s.max_iter,
            time_limit: s.time_limit,
            check_every: s.check_every,
            seed: s.seed,
        }
    }
}

/// The coefficients `a = c s`, feature-major (`s[j T + t]`), with the lazy decay `c`, and
/// CDSG's accumulated coefficient `beta` of each block's batch-mean derivative (also `c` times
/// the stored value: it decays with the coefficients).
#[derive(Clone, Debug)]
pub struct Coefficients {
    /// Stored `s`, `M x T` feature-major.
    s: Vec<f64>,
    /// Stored `beta`, `blocks x T`.
    beta: Vec<f64>,
    /// The common scale `c`.
    c: f64,
    /// Target columns.
    tt: usize,
}

/// Below this the scale `c` is folded into the stored values (far from underflow, far from
/// any loss of precision: the product `c s` is what is used).
const RENORMALISE_BELOW: f64 = 1e-100;

impl Coefficients {
    /// All zero: `f_1 = 0`.
    pub fn zeros(m: usize, blocks: usize, tt: usize) -> Self {
        Coefficients {
            s: vec![0.0; m * tt],
            beta: vec![0.0; blocks * tt],
            c: 1.0,
            tt,
        }
    }

    /// The effective coefficient `a_{j,t} = c s_{j,t}`.
    pub fn a(&self, j: usize, t: usize) -> f64 {
        self.c * self.s[j * self.tt + t]
    }

    /// The effective `beta` of block `k`.
    pub fn beta(&self, k: usize) -> Vec<f64> {
        let tt = self.tt;
        self.beta[k * tt..(k + 1) * tt]
            .iter()
            .map(|v| self.c * v)
            .collect()
    }

    /// One step of size `eta` on features `cols` (block `k`): every coefficient decays by
    /// `1 - eta nu`, then `a_J -= eta D` and `beta_k -= eta gbar`. `O(|J| T)` work.
    pub fn step(
        &mut self,
        eta: f64,
        nu: f64,
        k: usize,
        cols: std::ops::Range<usize>,
        grad: &[f64],
        gbar: &[f64],
    ) {
        let tt = self.tt;
        self.c *= 1.0 - eta * nu;
        let f = eta / self.c;
        for (j, dj) in cols.zip(grad.chunks_exact(tt)) {
            for (sj, d) in self.s[j * tt..(j + 1) * tt].iter_mut().zip(dj) {
                *sj -= f * d;
            }
        }
        for (bk, g) in self.beta[k * tt..(k + 1) * tt].iter_mut().zip(gbar) {
            *bk -= f * g;
        }
        if self.c < RENORMALISE_BELOW {
            self.fold_scale();
        }
    }

    /// `s <- c s`, `beta <- c beta`, `c <- 1`: the lazy decay made explicit before `c` could
    /// underflow (the products `c s` are unchanged up to rounding).
    fn fold_scale(&mut self) {
        let c = self.c;
        self.s
            .iter_mut()
            .chain(self.beta.iter_mut())
            .for_each(|v| *v *= c);
        self.c = 1.0;
    }

    /// `f(x) = c sum_j s_{j,t} phi_j(x)` for target `t` over the first `phi.len()` features of
    /// one row: the sum over the stored values, then the scale once.
    fn predict(&self, phi: &[f64], t: usize) -> f64 {
        let tt = self.tt;
        (0..phi.len())
            .map(|j| phi[j] * self.s[j * tt + t])
            .sum::<f64>()
            * self.c
    }

    /// `theta` of the first `m` features over features scaled by `sqrt(2/m_model)`, column-major
    /// `m x T`, zero beyond the opened `opened` features: `theta_j = a_j sqrt(m_model / r)`.
    pub fn theta(&self, m: usize, opened: usize, r: usize) -> Vec<f64> {
        let tt = self.tt;
        let k = (m as f64 / r as f64).sqrt();
        let mut theta = vec![0.0; m * tt];
        for t in 0..tt {
            for j in 0..opened.min(m) {
                theta[t * m + j] = k * self.a(j, t);
            }
        }
        theta
    }
}

/// `Phi[i, j'] = sqrt(2/r) cos(w_j^T x_i + b_j)` for the features `j in cols` of `map`, over
/// the dense rows `x` (row-major, `d` columns), in `f64`; row-major `rows x |cols|`.
pub fn feature_block<T: Scalar>(
    map: &RandomMap<T>,
    x: &[T],
    cols: std::ops::Range<usize>,
    r: usize,
) -> Vec<f64> {
    use rayon::prelude::*;
    let (m_all, d) = (map.m(), map.d());
    let width = cols.len();
    let scale = (2.0 / r as f64).sqrt();
    let (wt, b) = (map.wt(), map.b());
    let mut out = vec![0.0; (x.len() / d.max(1)) * width];
    if width == 0 || x.is_empty() {
        return out;
    }
    out.par_chunks_mut(width)
        .zip(x.par_chunks(d.max(1)))
        .for_each(|(z, xi)| {
            for (zj, bj) in z.iter_mut().zip(&b[cols.clone()]) {
                *zj = bj.to_f64();
            }
            for (k, xk) in xi.iter().enumerate() {
                let xk = xk.to_f64();
                if xk == 0.0 {
                    continue;
                }
                let row = &wt[k * m_all + cols.start..k * m_all + cols.end];
                for (zj, w) in z.iter_mut().zip(row) {
                    *zj += w.to_f64() * xk;
                }
            }
            for zj in z.iter_mut() {
                *zj = scale * zj.cos();
            }
        });
    out
}

/// CDSG's expected line search for one old block (Li and Poczos, eq. 9, in the notes' reading):
/// the most negative coefficient `eta` with
///
/// ```text
/// 2 ||beta + eta g||^2 + 2 eta^2 T s2 <= ||beta||^2 + gamma^2 ||g||^2
/// ```
///
/// where `beta` is the block's accumulated coefficient of the batch-mean derivative, `g` the
/// batch-mean derivative now (`T` values each) and `s2 = M^2 sigma^2 / b` the variance term.
/// The left side bounds the variance of the old and the new contribution added together, the
/// right side that of the two kept apart (what a new block would cost). Returns the step's
/// magnitude `-eta` where the feasible set holds a negative `eta` (the DSG coefficient is
/// `-gamma`), `None` otherwise (an empty set, or only non-negative steps).
pub fn cdsg_step(beta: &[f64], g: &[f64], gamma: f64, s2: f64) -> Option<f64> {
    let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>();
    let (gg, bg, bb) = (dot(g, g), dot(beta, g), dot(beta, beta));
    let a2 = 2.0 * (gg + g.len() as f64 * s2);
    let a1 = 4.0 * bg;
    let a0 = bb - gamma * gamma * gg;
    let disc = a1 * a1 - 4.0 * a2 * a0;
    if a2 <= 0.0 || disc < 0.0 {
        return None;
    }
    let eta_lo = (-a1 - disc.sqrt()) / (2.0 * a2);
    (eta_lo < 0.0).then_some(-eta_lo)
}

/// CDSG's choice among the opened blocks (`betas[k]`): the block `k` with the largest
/// [`cdsg_step`], with that step, if it exceeds `gamma`; `None` means "open a new block".
pub fn cdsg_choice(betas: &[Vec<f64>], g: &[f64], gamma: f64, s2: f64) -> Option<(usize, f64)> {
    betas
        .iter()
        .enumerate()
        .filter_map(|(k, beta)| cdsg_step(beta, g, gamma, s2).map(|eta| (k, eta)))
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .filter(|&(_, eta)| eta > gamma)
}

/// `sigma^2` of CDSG's variance term: the variance of `2 cos(u + p) cos(v + p)` over a uniform
/// phase `p`, i.e. of `cos(u + v + 2p)`, is `1/2`. Li and Poczos leave `sigma` unspecified;
/// this is the random-feature part of `Var(phi_w(x) phi_w(y) - k(x, y))`.
const CDSG_SIGMA2: f64 = 0.5;

/// Runs DSG, UDSG or CDSG. `Solution::alpha` is empty (there are no dual variables) and
/// `Solution::theta` is `theta` over the `m` opened features (column-major `m x T`, `m` a
/// multiple of the block size). `Progress::primal` is `1/2 ||theta||^2 + sum_i c_i l` with the
/// loss sum estimated from the batches since the previous check; `dual` and `gap` are NaN.
#[doc(hidden)]
pub fn solve_dsg<T: Scalar>(
    p: &DsgProblem<'_, T>,
    cfg: &DsgConfig,
    run: &DsgRun,
    hooks: &mut Hooks<'_, T>,
) -> Result<Solution> {
    cfg.validate()?;
    let start = Instant::now();
    let shape = Shape::of(p, cfg, run)?;
    let rmap = p.map.random().ok_or_else(|| {
        invalid(
            "feature_map",
            "the doubly stochastic solvers regenerate random features from the seed; a Nystrom map is for DBCD-TR",
        )
    })?;
    let mut fit = Fit::start(p, rmap, cfg, shape, run.seed);
    let mut history = Vec::new();
    let mut timings = Timings::default();
    let mut stop = StopReason::MaxIter;
    let mut iters = 0;

    for t in 1..=run.max_iter {
        if let Some(poll) = hooks.interrupt.as_mut()
            && poll()
        {
            stop = StopReason::Cancelled;
            break;
        }
        let t_step = Instant::now();
        fit.step(t)?;
        timings.update += t_step.elapsed().as_secs_f64();
        iters = t;

        let out_of_time = run.time_limit.is_some_and(|lim| start.elapsed() >= lim);
        if t % shape.check_every == 0 || t == run.max_iter || out_of_time {
            let t_check = Instant::now();
            let prog = fit.check(t, start, &timings, hooks);
            timings.check += t_check.elapsed().as_secs_f64();
            let go_on = hooks.progress.as_mut().is_none_or(|f| f(&prog));
            history.push(prog);
            if !go_on {
                stop = StopReason::Cancelled;
                break;
            }
        }
        if out_of_time {
            stop = StopReason::TimeLimit;
            break;
        }
    }
    Ok(fit.solution(iters, stop, history, timings))
}

/// The sizes and constants of one fit, fixed before the first step.
#[derive(Clone, Copy)]
struct Shape {
    /// Rows `n`.
    n: usize,
    /// Input columns `d`.
    d: usize,
    /// Target columns `T`.
    tt: usize,
    /// Features per block `r`.
    r: usize,
    /// Blocks in the map, `floor(M / r)`: the cap.
    blocks: usize,
    /// Rows per step `b` (at most `n`).
    b: usize,
    /// The regulariser of the average loss, `nu = lambda / n`.
    nu: f64,
    /// Steps between checks.
    check_every: usize,
}

impl Shape {
    /// The fit's sizes, or the error that rules the problem out: no rows, a loss without a
    /// bounded derivative, a block wider than the map, or a first step too large.
    fn of<T: Scalar>(p: &DsgProblem<'_, T>, cfg: &DsgConfig, run: &DsgRun) -> Result<Self> {
        let (n, d, tt) = (p.rows.nrows(), p.rows.ncols(), p.targets);
        if n == 0 {
            return Err(JokerError::EmptyData("the training set has no rows".into()));
        }
        if !supports(&p.loss) {
            return Err(invalid(
                "loss",
                format!(
                    "the doubly stochastic solvers need a loss with a bounded derivative; {} has none",
                    p.loss.name()
                ),
            ));
        }
        let r = cfg.feature_block;
        let blocks = p.map.m() / r;
        if blocks == 0 {
            return Err(invalid(
                "feature_block",
                format!(
                    "a block of {r} features does not fit in n_components = {}",
                    p.map.m()
                ),
            ));
        }
        if matches!(p.rows, DsgRows::Stream { .. }) && cfg.sequential == Some(false) {
            return Err(invalid(
                "sequential",
                "streamed rows are read in file order: batches drawn at random need the rows in memory or mapped from a .npy file",
            ));
        }
        let b = cfg.batch_size.min(n);
        let nu = p.lambda / n as f64;
        check_first_decay(cfg, nu)?;
        let check_every = if run.check_every == 0 {
            n.div_ceil(b)
        } else {
            run.check_every
        };
        Ok(Shape {
            n,
            d,
            tt,
            r,
            blocks,
            b,
            nu,
            check_every,
        })
    }
}

/// Every step scales the old coefficients by `1 - eta nu`, and the largest step is the first
/// (`gamma_1`, times CDSG's cap): a factor `<= 0` would flip the iterate's sign or erase it.
fn check_first_decay(cfg: &DsgConfig, nu: f64) -> Result<()> {
    let max_factor = cfg.step.at(1) * cfg.step_factor() * nu;
    if max_factor >= 1.0 {
        return Err(invalid(
            "step",
            format!(
                "the first step decays every coefficient by 1 - gamma_1 nu = {:.3e} <= 0 (gamma_1 = {}, nu = lambda/n = {nu:.3e}): lower theta or raise t0",
                1.0 - max_factor,
                cfg.step.at(1)
            ),
        ));
    }
    Ok(())
}

/// A run in progress: the iterate `f_t` (its coefficients and the number of opened blocks), the
/// stream of batch draws and revisits, the batch's buffers, and the loss summed over the
/// batches since the last check (the objective's estimate).
struct Fit<'a, T> {
    p: &'a DsgProblem<'a, T>,
    /// `p.map`'s random features.
    rmap: &'a RandomMap<T>,
    cfg: &'a DsgConfig,
    shape: Shape,
    coef: Coefficients,
    /// Blocks opened so far: features `0 .. opened r` are in the model.
    opened: usize,
    rng: Stream,
    /// The batch's row indices.
    rows: Vec<usize>,
    /// The batch's rows, dense row-major `b x d`, their targets (`b x T`), weights and labels
    /// (streams).
    xb: Vec<T>,
    yb: Vec<f64>,
    wb: Vec<f64>,
    labels: Vec<f64>,
    /// `sum_i w_i l(f_t(x_i), y_i)` over the batches since the last check.
    loss_sum: f64,
    /// Rows in `loss_sum`.
    loss_rows: usize,
}

impl<'a, T: Scalar> Fit<'a, T> {
    /// `f_1 = 0`: no block opened, every coefficient zero.
    fn start(
        p: &'a DsgProblem<'a, T>,
        rmap: &'a RandomMap<T>,
        cfg: &'a DsgConfig,
        shape: Shape,
        seed: u64,
    ) -> Self {
        let Shape {
            d,
            tt,
            r,
            blocks,
            b,
            ..
        } = shape;
        Fit {
            p,
            rmap,
            cfg,
            shape,
            coef: Coefficients::zeros(blocks * r, blocks, tt),
            opened: 0,
            rng: Stream::new(seed, streams::DSG_BATCH),
            rows: vec![0usize; b],
            xb: vec![T::default(); b * d],
            yb: vec![0.0; b * tt],
            wb: vec![0.0; b],
            labels: vec![0.0; b],
            loss_sum: 0.0,
            loss_rows: 0,
        }
    }

    /// Step `t`: a batch, the derivatives `g` at `f_t` on it, the block `J` and step `eta` of the
    /// variant's rule, and `f_{t+1} = (1 - eta nu) f_t - eta sum_{j in J} D_j phi_j`.
    fn step(&mut self, t: usize) -> Result<()> {
        let Shape { tt, r, b, nu, .. } = self.shape;
        self.draw_batch(t)?;
        let phi = feature_block(self.rmap, &self.xb, 0..self.opened * r, r);
        let grad = self.derivatives(&phi, t)?;
        let gbar = batch_mean(&grad, b, tt);
        let gamma = self.cfg.step.at(t);
        let (k, eta) = choose_block(
            self.cfg,
            t,
            self.opened,
            self.shape.blocks,
            &self.coef,
            &grad,
            &gbar,
            gamma,
            &mut self.rng,
        );
        let phi_k = self.block_features(&phi, k);
        let dgrad = block_gradient(&phi_k, &grad, b, r, tt);
        self.coef
            .step(eta, nu, k, k * r..(k + 1) * r, &dgrad, &gbar);
        if k == self.opened {
            self.opened += 1;
        }
        Ok(())
    }

    /// The batch of step `t`: `b` rows drawn uniformly with replacement, or the next `b` rows
    /// of the sweep (rows `(t - 1) b ..` modulo `n`), gathered dense.
    fn draw_batch(&mut self, t: usize) -> Result<()> {
        let n = self.shape.n;
        if self.cfg.sequential.unwrap_or_else(|| self.p.rows.sweeps()) {
            let first = (t - 1).wrapping_mul(self.shape.b) % n;
            for (k, ri) in self.rows.iter_mut().enumerate() {
                *ri = (first + k) % n;
            }
        } else {
            for ri in self.rows.iter_mut() {
                *ri = self.rng.below(n);
            }
        }
        let out = (&mut self.xb[..], &mut self.yb[..], &mut self.wb[..]);
        self.p.rows.gather(&self.rows, out, &mut self.labels)
    }

    /// `g_i = w_i l'(f_t(x_i), y_i)` on the batch (row-major `b x T`) from its opened features
    /// `phi` (`b x m`); the losses at `f_t` join the objective's estimate. A prediction that is
    /// not finite means the iterate diverged.
    fn derivatives(&mut self, phi: &[f64], t: usize) -> Result<Vec<f64>> {
        let Shape { tt, r, b, .. } = self.shape;
        let p = self.p;
        let m = self.opened * r;
        let mut grad = vec![0.0; b * tt];
        for i in 0..b {
            let phi_i = &phi[i * m..(i + 1) * m];
            let w = self.wb[i];
            for t_ in 0..tt {
                let f = self.coef.predict(phi_i, t_);
                if !f.is_finite() {
                    return Err(diverged(t, self.cfg));
                }
                let y = self.yb[i * tt + t_];
                grad[i * tt + t_] = w * p.loss.derivative(f, y);
                self.loss_sum += w * p.loss.primal(f, y);
            }
        }
        self.loss_rows += b;
        Ok(grad)
    }

    /// `Phi_J` of block `k` on the batch, row-major `b x r`: an opened block's columns are
    /// already in `phi` (`b x m`), a new block's are evaluated.
    fn block_features(&self, phi: &[f64], k: usize) -> Vec<f64> {
        let Shape { r, b, .. } = self.shape;
        let cols = k * r..(k + 1) * r;
        if k < self.opened {
            let m = self.opened * r;
            (0..b)
                .flat_map(|i| phi[i * m + cols.start..i * m + cols.end].iter().copied())
                .collect()
        } else {
            feature_block(self.rmap, &self.xb, cols, r)
        }
    }

    /// The snapshot after step `t` ([`Fit::progress`]); the objective's estimate then starts
    /// afresh from the next batch.
    fn check(
        &mut self,
        t: usize,
        start: Instant,
        timings: &Timings,
        hooks: &mut Hooks<'_, T>,
    ) -> Progress {
        let prog = self.progress(t, start, timings, hooks);
        (self.loss_sum, self.loss_rows) = (0.0, 0);
        prog
    }

    /// The snapshot at a check: validation on the current model, the estimated primal
    /// objective.
    fn progress(
        &self,
        t: usize,
        start: Instant,
        timings: &Timings,
        hooks: &mut Hooks<'_, T>,
    ) -> Progress {
        let Shape { n, r, b, .. } = self.shape;
        let m_all = self.p.map.m();
        let theta = self.coef.theta(m_all, self.opened * r, r);
        let validation = hooks.validate.as_mut().map(|v| {
            v(
                &Predictor::Features {
                    map: self.p.map,
                    theta: &theta,
                },
                &[],
            )
        });
        let m = self.opened * r;
        let reg = 0.5 * self.coef.theta(m, m, r).iter().map(|v| v * v).sum::<f64>();
        let mean_loss = self.loss_sum / self.loss_rows.max(1) as f64;
        let seconds = start.elapsed().as_secs_f64();
        Progress {
            iter: t,
            epoch: (t * b) as f64 / n as f64,
            seconds,
            train_seconds: seconds - timings.check,
            primal: reg + n as f64 * mean_loss / self.p.lambda,
            dual: f64::NAN,
            gap: f64::NAN,
            validation,
            accepted: 0,
            rel_residual: None,
            pairs: None,
        }
    }

    /// The fit's answer: `theta` over the opened features; there are no dual variables.
    fn solution(
        self,
        iters: usize,
        stop: StopReason,
        history: Vec<Progress>,
        timings: Timings,
    ) -> Solution {
        let r = self.shape.r;
        let m = self.opened * r;
        Solution {
            alpha: Vec::new(),
            theta: Some(self.coef.theta(m, m, r)),
            iters,
            stop,
            history,
            timings,
            tr_model: String::new(),
            working_set: String::new(),
            fell_back: None,
            pairs_at_once: 0,
            passes: None,
            intercept: Vec::new(),
            start: String::new(),
        }
    }
}

/// `gbar = 1/b sum_{i in S} g_i` per target: the batch-mean derivative, CDSG's `g`.
fn batch_mean(grad: &[f64], b: usize, tt: usize) -> Vec<f64> {
    (0..tt)
        .map(|t_| (0..b).map(|i| grad[i * tt + t_]).sum::<f64>() / b as f64)
        .collect()
}

/// `D = Phi_J^T g / b`, feature-major `r x T`: the block's gradient, a mean over the batch.
fn block_gradient(phi_k: &[f64], grad: &[f64], b: usize, r: usize, tt: usize) -> Vec<f64> {
    let mut dgrad = vec![0.0; r * tt];
    for i in 0..b {
        for (jj, pj) in phi_k[i * r..(i + 1) * r].iter().enumerate() {
            for t_ in 0..tt {
                dgrad[jj * tt + t_] += pj * grad[i * tt + t_];
            }
        }
    }
    dgrad.iter_mut().for_each(|v| *v /= b as f64);
    dgrad
}

/// The error of an iterate whose predictions are no longer finite: the steps were too large.
fn diverged(t: usize, cfg: &DsgConfig) -> JokerError {
    JokerError::Numerical(format!(
        "the doubly stochastic iterate diverged at step {t} (a prediction is not finite): the step size theta / (t + t0) = {} / (t + {}) is too large for this loss and kernel; lower theta or raise t0",
        cfg.step.theta, cfg.step.t0
    ))
}

/// The block step `t` updates and its step size: a new block (index `opened`) with `gamma_t`,
/// or an old one by the variant's rule. Past the cap, a new block is replaced by a uniform
/// draw among all blocks.
#[allow(clippy::too_many_arguments)]
fn choose_block(
    cfg: &DsgConfig,
    t: usize,
    opened: usize,
    blocks: usize,
    coef: &Coefficients,
    grad: &[f64],
    gbar: &[f64],
    gamma: f64,
    rng: &mut Stream,
) -> (usize, f64) {
    let fresh = |rng: &mut Stream| {
        if opened < blocks {
            (opened, gamma)
        } else {
            (rng.below(blocks), gamma)
        }
    };
    if opened == 0 {
        return fresh(rng);
    }
    match cfg.variant {
        DsgVariant::Dsg => fresh(rng),
        DsgVariant::Udsg {
            new_steps,
            old_steps,
        } => {
            if (t - 1) % (new_steps + old_steps) < new_steps {
                fresh(rng)
            } else {
                (rng.below(opened), gamma)
            }
        }
        DsgVariant::Cdsg { step_cap } => {
            let b = grad.len() / gbar.len().max(1);
            let big_m = grad.iter().fold(0.0f64, |a, g| a.max(g.abs()));
            let s2 = big_m * big_m * CDSG_SIGMA2 / b as f64;
            let betas: Vec<Vec<f64>> = (0..opened).map(|k| coef.beta(k)).collect();
            match cdsg_choice(&betas, gbar, gamma, s2) {
                Some((k, eta)) => (k, eta.min(step_cap * gamma)),
                None => fresh(rng),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::DenseMatrix;
    use crate::features::FeatureSpec;
    use crate::kernel::{Kernel, KernelKind};

    /// A fresh pseudo-random value in `[-1, 1)` per `(i, salt)`.
    fn noise(i: usize, salt: u32) -> f64 {
        let mut s = Stream::new(0xF00D + i as u64, salt);
        2.0 * s.uniform() - 1.0
    }

    /// Three DSG steps equal the iterate written out by hand: `f_1 = 0`, and at step `t` the
    /// derivatives at `f_t`, the decay `(1 - gamma_t nu)` of every old coefficient and the new
    /// block `-gamma_t Phi_J^T g / b`, with the features evaluated by the map's own `f64`
    /// reference path and the rows drawn from the documented stream.
    #[test]
    fn three_steps_equal_the_closed_form() {
        let (n, d, r, b) = (5, 2, 2, 3);
        let rows: Vec<Vec<f64>> = (0..n)
            .map(|i| (0..d).map(|k| noise(i * d + k, 1)).collect())
            .collect();
        let y: Vec<f64> = (0..n).map(|i| noise(i, 2)).collect();
        let weight: Vec<f64> = (0..n).map(|i| 1.0 + 0.5 * noise(i, 3).abs()).collect();
        let x = Features::Dense(DenseMatrix::from_rows(&rows).unwrap());
        let spec = FeatureSpec {
            kernel: Kernel {
                kind: KernelKind::Gaussian,
                gamma: 0.7,
            },
            n_components: 3 * r,
            dim: d,
            seed: 11,
        };
        let map = RandomMap::<f64>::new(spec).unwrap();
        let lambda = 0.9;
        for loss in [
            Loss::SquaredError,
            Loss::Logistic,
            Loss::Huber { delta: 0.3 },
        ] {
            let yl: Vec<f64> = if loss.is_classifier() {
                y.iter().map(|v| v.signum()).collect()
            } else {
                y.clone()
            };
            let cfg = DsgConfig {
                variant: DsgVariant::Dsg,
                batch_size: b,
                feature_block: r,
                step: StepSize {
                    theta: 2.0,
                    t0: 1.5,
                },
                sequential: None,
            };
            let run = DsgRun {
                max_iter: 3,
                time_limit: None,
                check_every: 0,
                seed: 5,
            };
            let p = DsgProblem {
                rows: DsgRows::Features {
                    x: &x,
                    y: &yl,
                    weight: &weight,
                },
                map: &FeatureMap::Random(map.clone()),
                loss,
                targets: 1,
                lambda,
            };
            let sol = solve_dsg(&p, &cfg, &run, &mut Hooks::default()).unwrap();
            let theta = sol.theta.unwrap();
            assert_eq!(theta.len(), 3 * r);

            // by hand: phi_j(x) = sqrt(2/r) cos(w_j x + b_j) = psi_j(x) sqrt(M/r), M = 3r
            let phi = |x: &[f64]| -> Vec<f64> {
                let up = ((3 * r) as f64 / r as f64).sqrt();
                map.eval_f64(x).iter().map(|v| v * up).collect()
            };
            let nu = lambda / n as f64;
            let gamma = |t: f64| 2.0 / (t + 1.5);
            let mut draws = Stream::new(5, streams::DSG_BATCH);
            let mut a = vec![0.0; 3 * r];
            for t in 1..=3usize {
                let batch: Vec<usize> = (0..b).map(|_| draws.below(n)).collect();
                let f = |x: &[f64], a: &[f64]| -> f64 {
                    phi(x).iter().zip(a).map(|(p, a)| p * a).sum()
                };
                let g: Vec<f64> = batch
                    .iter()
                    .map(|&i| weight[i] * loss.derivative(f(&rows[i], &a), yl[i]))
                    .collect();
                let gm = gamma(t as f64);
                for v in a.iter_mut() {
                    *v *= 1.0 - gm * nu;
                }
                for (j, aj) in a.iter_mut().enumerate().take(t * r).skip((t - 1) * r) {
                    let dj: f64 = batch
                        .iter()
                        .zip(&g)
                        .map(|(&i, gi)| gi * phi(&rows[i])[j])
                        .sum::<f64>()
                        / b as f64;
                    *aj -= gm * dj;
                }
            }
            // theta_j = a_j sqrt(m/r) with m = 3r
            for j in 0..3 * r {
                let want = a[j] * 3f64.sqrt();
                assert!(
                    (theta[j] - want).abs() < 1e-12 * (1.0 + want.abs()),
                    "{loss:?} feature {j}: {} vs {want}",
                    theta[j]
                );
                assert!(want != 0.0);
            }
        }
    }

    /// The lazy decay with renormalisation equals the literal `O(m)` decay loop of Algorithm 1.
    #[test]
    fn lazy_decay_equals_the_literal_loop() {
        let (m, r, tt) = (12, 3, 2);
        let mut lazy = Coefficients::zeros(m, m / r, tt);
        let mut literal = vec![0.0; m * tt];
        let nu = 0.37;
        for step in 0..400 {
            let k = step % (m / r);
            let eta = 2.5 + noise(step, 4); // (1 - eta nu) as small as 0.07: forces renormalising
            let grad: Vec<f64> = (0..r * tt).map(|q| noise(step * 31 + q, 5)).collect();
            let gbar = vec![noise(step, 6); tt];
            lazy.step(eta, nu, k, k * r..(k + 1) * r, &grad, &gbar);
            literal.iter_mut().for_each(|v| *v *= 1.0 - eta * nu);
            for (jj, j) in (k * r..(k + 1) * r).enumerate() {
                for t in 0..tt {
                    literal[j * tt + t] -= eta * grad[jj * tt + t];
                }
            }
            for j in 0..m {
                for t in 0..tt {
                    let (a, l) = (lazy.a(j, t), literal[j * tt + t]);
                    assert!(
                        (a - l).abs() <= 1e-9 * l.abs() + 1e-300,
                        "{step} {j}: {a} vs {l}"
                    );
                }
            }
        }
    }

    /// The most negative `eta` satisfying eq. 9, found by scanning a fine grid.
    fn scan(beta: &[f64], g: &[f64], gamma: f64, s2: f64) -> Option<f64> {
        let sq = |v: f64| v * v;
        let lhs = |eta: f64| {
            2.0 * beta
                .iter()
                .zip(g)
                .map(|(b, g)| sq(b + eta * g))
                .sum::<f64>()
                + 2.0 * eta * eta * g.len() as f64 * s2
        };
        let rhs = beta.iter().map(|b| b * b).sum::<f64>()
            + gamma * gamma * g.iter().map(|g| g * g).sum::<f64>();
        (0..=400_000)
            .map(|i| -20.0 + i as f64 * 1e-4)
            .find(|&eta| lhs(eta) <= rhs)
            .filter(|&eta| eta < 0.0)
            .map(|eta| -eta)
    }

    /// CDSG picks the block the paper's inequality picks: the largest feasible step, taken only
    /// when it beats `gamma`.
    #[test]
    fn cdsg_check_picks_the_coordinate_the_inequality_picks() {
        let g = [0.8, -0.3];
        let gamma = 0.5;
        let s2 = 0.05;
        // block 0: beta = 0 (never qualifies); block 1: beta against g (small steps);
        // blocks 2 and 3: beta along g, block 3 larger (largest step); block 4: random
        let betas = vec![
            vec![0.0, 0.0],
            vec![-1.2, 0.45],
            vec![0.9, -0.35],
            vec![2.4, -0.85],
            vec![noise(1, 7), noise(2, 7)],
        ];
        for (k, beta) in betas.iter().enumerate() {
            let closed = cdsg_step(beta, &g, gamma, s2);
            let grid = scan(beta, &g, gamma, s2);
            match (closed, grid) {
                (Some(c), Some(s)) => assert!((c - s).abs() < 2e-4, "block {k}: {c} vs {s}"),
                (None, None) => {}
                other => panic!("block {k}: {other:?}"),
            }
        }
        let zero = cdsg_step(&betas[0], &g, gamma, s2).unwrap();
        assert!(zero < gamma, "beta = 0 must not qualify: {zero}");
        let by_grid = (0..betas.len())
            .filter_map(|k| scan(&betas[k], &g, gamma, s2).map(|e| (k, e)))
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .unwrap();
        let (k, eta) = cdsg_choice(&betas, &g, gamma, s2).unwrap();
        assert_eq!(k, by_grid.0);
        assert_eq!(k, 3);
        assert!(eta > gamma && (eta - by_grid.1).abs() < 2e-4);
        // no old block beats gamma: a new block
        assert_eq!(cdsg_choice(&betas[..2], &g, gamma, s2), None);
        // an empty feasible set
        assert_eq!(cdsg_step(&[0.0], &[1.0], 0.0, 0.0), None);
    }

    /// Bad settings are errors that name them.
    #[test]
    fn bad_settings_are_errors() {
        let ok = DsgConfig::default();
        assert!(ok.validate().is_ok());
        for (cfg, what) in [
            (
                DsgConfig {
                    batch_size: 0,
                    ..ok.clone()
                },
                "batch_size",
            ),
            (
                DsgConfig {
                    feature_block: 0,
                    ..ok.clone()
                },
                "feature_block",
            ),
            (
                DsgConfig {
                    step: StepSize {
                        theta: f64::NAN,
                        t0: 1.0,
                    },
                    ..ok.clone()
                },
                "theta",
            ),
            (
                DsgConfig {
                    variant: DsgVariant::Udsg {
                        new_steps: 0,
                        old_steps: 1,
                    },
                    ..ok.clone()
                },
                "UDSG",
            ),
            (
                DsgConfig {
                    variant: DsgVariant::Cdsg { step_cap: 0.5 },
                    ..ok.clone()
                },
                "cap",
            ),
        ] {
            let e = cfg.validate().unwrap_err().to_string();
            assert!(e.contains(what), "{e}");
        }
    }
}

//! Dual block coordinate descent with a trust region (paper Algorithm 3).
//!
//! The training set is partitioned once into fixed blocks (after one seeded shuffle); each
//! iteration picks a block uniformly at random, forms `K_BB` and `gbar = K_{B,:} alpha`,
//! solves the block subproblem per target column, and folds the accepted change back:
//! - random features: `theta += Phi_B^T delta_alpha` in `f64`, with `gbar = Phi_B theta`;
//! - exact kernels: `beta += K(X, X_B) delta_alpha` in row chunks, with `gbar = beta_B`.
//!
//! Every `check_every` iterations the primal and dual objectives and the relative duality gap
//! are computed (one pass over the data), a validation metric is evaluated if asked for, the
//! progress callback runs, and the stopping rules are applied.
//!
//! Every fit goes through the backend's [`BlockEngine`], which keeps `theta` or `beta` and the
//! current block: the host composition of the primitives on the CPU, fused kernels with the
//! state (and, where it fits, the rows) in device memory on a GPU. The solver keeps a host copy
//! of `theta` that it refreshes at every check and at the end. Where the engine stages blocks
//! (the host ones), the next block is drawn ahead and its features and `K_BB` are formed while
//! the current block is solved ([`SolverConfig::overlap`]): they depend on the rows only, so
//! the iterates are the same as with the stages in sequence.

mod direct;
mod intercept;
mod newton;
pub mod pbm;

pub use direct::MAX_FEATURES as DIRECT_KRR_MAX_FEATURES;
pub use newton::{fits as newton_fits, memory as newton_memory};

use crate::memory::try_filled;
use std::cell::Cell;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rayon::prelude::*;

use super::trust_region::{
    BlockProblem, BlockStats, CurvatureFactor, TrModel, TrustRegion, solve_column,
};
use crate::backend::cached::{CachedExact, Formation, caches_kernel};
use crate::backend::nystrom::HostNystrom;
use crate::backend::predict::{CHUNK_ROWS, Predictor};
use crate::backend::stored::{StoredFeatures, stores_features};
use crate::backend::{
    Backend, BlockEngine, BlockFeatures, BlockSolve, FeatureProducts, HostExact, HostProducts,
    HostRff,
};
use crate::data::Features;
use crate::error::{JokerError, Result, invalid};
use crate::features::FeatureMap;
use crate::kernel::Kernel;
use crate::loss::{Coord, Loss};
use crate::rng::{Stream, streams};
use crate::scalar::Scalar;
use intercept::Intercept;

/// Outer-loop settings.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SolverConfig {
    /// Block size `|B|` (paper: 512; 1024 for KLR).
    pub block_size: usize,
    /// `block_size` is the default, not the caller's: the solver then takes blocks of
    /// [`cached_block`] on a cached exact kernel, where a block costs no kernel values.
    #[serde(default)]
    pub block_auto: bool,
    /// Iteration budget.
    pub max_iter: usize,
    /// Stop when the relative duality gap `(P - D) / max(|P|, |D|)` is at most this.
    pub tol: f64,
    /// Wall-clock budget.
    pub time_limit: Option<Duration>,
    /// Evaluate objectives, gap and validation every this many iterations (0: once per pass
    /// over the data, `ceil(n / block_size)`, or four times a pass where an intercept is
    /// searched on the cached exact kernel without a validation set: a check costs `O(n)`
    /// there and moves the intercept).
    pub check_every: usize,
    /// Initial `Delta_max` (reference code: 64).
    pub delta_max: f64,
    /// `Delta_max` is multiplied by `shrink_rate` every `shrink_every` iterations (reference
    /// code: 0.9 every 1000); `shrink_every = 0` disables the annealing.
    pub shrink_every: usize,
    /// See `shrink_every`.
    pub shrink_rate: f64,
    /// The block solver.
    pub trust_region: TrustRegion,
    /// Seed of the block partition and block choice.
    pub seed: u64,
    /// Form the next block's random features (or gathered rows) and `K_BB` while the current
    /// block is solved (host engines). The result is the same either way; off, the stages run
    /// one after the other. On costs one more block of features (`block x M`) or rows and one
    /// more `K_BB` in memory (and some allocator slack): turn it off where memory is tighter
    /// than time.
    #[serde(default = "overlap_default")]
    pub overlap: bool,
    /// Bytes the exact kernel matrix `K(X, X)` may take when it is formed once and kept
    /// ([`CachedExact`]: `n^2` values in the working precision, in host memory, formed by the
    /// backend's kernel tiles, on a GPU by the device's); larger problems evaluate the kernel
    /// block by block (on a GPU, by the device's resident engine). A Nystrom map's features
    /// `psi(X)` (`n M` values, [`StoredFeatures`]) are kept under the same budget. 0 never
    /// caches. The fit's memory limit applies to the cache too.
    #[serde(default = "kernel_cache_default")]
    pub kernel_cache: usize,
    /// Blocks of consecutive rows instead of rows drawn by the seeded shuffle. `None` (the
    /// default) takes consecutive rows for rows mapped from a file, where a block is then one
    /// sequential read of the file instead of `b` scattered ones (so the file's rows should be
    /// in random order), and the shuffle otherwise.
    #[serde(default)]
    pub contiguous_blocks: Option<bool>,
    /// How each iteration's block is chosen.
    #[serde(default)]
    pub working_set: WorkingSet,
    /// Also stop (as [`StopReason::Stalled`]) once the relative duality gap is within
    /// `10 tol` and the dual objective rose by less than `tol / 10` of the objectives' size
    /// per pass over the last [`STALL_PASSES`] passes: the gap then closes only by the primal
    /// value's noise, which moves the test metric less than the noise of its own passes
    /// (measured in `docs/solver.md`). Off, a fit runs until the gap reaches `tol`.
    #[serde(default = "stall_default")]
    pub stall: bool,
    /// Kernel ridge regression on a feature map of at most [`DIRECT_KRR_MAX_FEATURES`] features
    /// starts from its exact optimum, solved in the primal (`(I + Phi^T C Phi) theta =
    /// Phi^T C y`, one pass over the data and an `M x M` Cholesky factor); DBCD-TR then only
    /// certifies it (the first check's gap) or polishes what rounding left. Off, DBCD-TR
    /// solves it from zero.
    #[serde(default = "direct_krr_default")]
    pub direct_krr: bool,
    /// L2-SVC on a feature map of at most [`DIRECT_KRR_MAX_FEATURES`] features starts from
    /// its optimum, found in the primal by a finite Newton method (each step a ridge solve on
    /// the rows inside the margin, an `M x M` Cholesky factor kept up to date row by row, and
    /// an exact line search); DBCD-TR then only certifies it (the first check's gap) or
    /// polishes from there. Off, DBCD-TR solves it from zero.
    #[serde(default = "newton_start_default")]
    pub newton_start: bool,
    /// On rows mapped from a file larger than the memory the page cache can have, every pass
    /// over the rows is a read of the file: the fit stops after this many passes (if it has
    /// not converged before), whatever [`max_iter`](Self::max_iter) says. `None`: no such
    /// bound. Default one pass, the out-of-core setting of the Joker paper.
    #[serde(default = "passes_beyond_memory_default")]
    pub passes_beyond_memory: Option<usize>,
    /// Fit an unregularised intercept `b` beside the dual coefficients (regression losses
    /// only): the model is `f(x) + b` with `b` where the dual coefficients sum to zero
    /// (LIBSVM's SVR), found by a secant search on that sum around the solves for fixed `b`.
    /// [`Solution::intercept`] holds it.
    #[serde(default)]
    pub intercept: bool,
}

fn direct_krr_default() -> bool {
    true
}

fn newton_start_default() -> bool {
    true
}

fn passes_beyond_memory_default() -> Option<usize> {
    Some(1)
}

/// How DBCD-TR chooses each iteration's block.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WorkingSet {
    /// [`Shrinking`](WorkingSet::Shrinking) where the engine keeps every row's decision value
    /// at no cost (the cached exact kernel), random otherwise.
    #[default]
    Auto,
    /// One of the fixed blocks, drawn uniformly at random (the paper's rule).
    Random,
    /// A block drawn uniformly from the coordinates that violate their optimality conditions
    /// ([`Loss::violation`] > 0): a coordinate that sits at a bound where it belongs (an
    /// SVM's non-support vectors) is left out until the others move it off its condition,
    /// as LIBSVM's shrinking does, with nothing to undo. Needs an engine that keeps every
    /// decision value (the cached exact kernel); elsewhere the fit takes random blocks and
    /// says so.
    Shrinking,
    /// The `b` coordinates whose conditions are violated most (Gauss-Southwell); same needs.
    /// Measured slower than both other rules (the largest violations belong to the same
    /// stubborn coordinates iteration after iteration); kept for comparison.
    Greedy,
}

impl WorkingSet {
    /// The name used by the CLI and the bindings.
    pub fn name(self) -> &'static str {
        match self {
            WorkingSet::Auto => "auto",
            WorkingSet::Random => "random",
            WorkingSet::Shrinking => "shrinking",
            WorkingSet::Greedy => "greedy",
        }
    }
}

/// The rows in block order: block `k` is `order[k b..(k + 1) b]`. A seeded shuffle, or the
/// rows as they are where `cfg.contiguous_blocks` asks for consecutive rows (by default for
/// rows mapped from a file).
pub(crate) fn block_order<T: Scalar>(x: &Features<T>, cfg: &SolverConfig) -> Vec<usize> {
    let mut order: Vec<usize> = (0..x.nrows()).collect();
    if !cfg.contiguous_blocks.unwrap_or_else(|| x.is_mapped()) {
        Stream::new(cfg.seed, streams::BLOCK_PARTITION).shuffle(&mut order);
    }
    order
}

fn kernel_cache_default() -> usize {
    DEFAULT_KERNEL_CACHE
}

/// The default [`SolverConfig::kernel_cache`]: 2 GiB (23,170 rows in f32, 16,384 in f64).
pub const DEFAULT_KERNEL_CACHE: usize = 2 << 30;

fn overlap_default() -> bool {
    true
}

fn stall_default() -> bool {
    true
}

/// Passes over the data over which [`SolverConfig::stall`] measures the dual's rise.
pub const STALL_PASSES: f64 = 3.0;

impl Default for SolverConfig {
    fn default() -> Self {
        SolverConfig {
            block_size: 512,
            block_auto: true,
            max_iter: 10_000,
            tol: 1e-3,
            time_limit: None,
            check_every: 0,
            delta_max: 64.0,
            shrink_every: 1000,
            shrink_rate: 0.9,
            trust_region: TrustRegion::default(),
            seed: 42,
            overlap: overlap_default(),
            kernel_cache: kernel_cache_default(),
            contiguous_blocks: None,
            working_set: WorkingSet::Auto,
            stall: stall_default(),
            direct_krr: direct_krr_default(),
            newton_start: newton_start_default(),
            passes_beyond_memory: passes_beyond_memory_default(),
            intercept: false,
        }
    }
}

/// A snapshot of the optimisation, passed to the progress callback.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Progress {
    /// Iterations done.
    pub iter: usize,
    /// Passes over the data (`iter * |B| / n`).
    pub epoch: f64,
    /// Seconds since the start of the fit.
    pub seconds: f64,
    /// Seconds spent training so far: `seconds` less the monitoring (objectives, gap,
    /// validation) done at the checks, for time-to-accuracy curves.
    pub train_seconds: f64,
    /// Primal objective `1/2 ||theta||^2 + sum_i c_i l(y_i, f(x_i))` (summed over targets).
    pub primal: f64,
    /// Dual objective `-(1/2 a^T K a + sum_i f_i(a_i))`.
    pub dual: f64,
    /// Relative duality gap.
    pub gap: f64,
    /// Validation metric (accuracy for classifiers, RMSE for regression), if a validation set
    /// was given.
    pub validation: Option<f64>,
    /// Trust-region steps accepted so far.
    pub accepted: usize,
    /// `||(K + lambda I) a - y|| / ||y||` (full-KRR methods only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rel_residual: Option<f64>,
    /// A one-vs-one fit's pairs: `[finished, in all]`; `gap` is then the largest of the
    /// pairs' latest gaps, and the objectives are the reporting pair's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pairs: Option<[usize; 2]>,
}

/// Why the solver stopped; in model files and the C ABI by its [`name`](Self::name).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The duality gap reached the tolerance.
    Converged,
    /// The gap came within ten times the tolerance and the dual objective stopped rising
    /// ([`SolverConfig::stall`]).
    Stalled,
    /// The iteration budget ran out.
    #[default]
    MaxIter,
    /// The time budget ran out.
    TimeLimit,
    /// The progress callback asked to stop.
    Cancelled,
}

impl StopReason {
    /// `converged`, `stalled`, `max_iter`, `time_limit` or `cancelled`.
    pub fn name(self) -> &'static str {
        match self {
            StopReason::Converged => "converged",
            StopReason::Stalled => "stalled",
            StopReason::MaxIter => "max_iter",
            StopReason::TimeLimit => "time_limit",
            StopReason::Cancelled => "cancelled",
        }
    }
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Where the time of a fit went, in seconds. A one-vs-one fit sums its pairs' timings, so
/// where pairs run side by side the sums exceed the fit's wall time.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Timings {
    /// Forming `K_BB` and `gbar` (feature block, Gram, projection; or exact kernel tiles).
    /// With [`SolverConfig::overlap`], only the first block's features and Gram and the
    /// projections count here; the later blocks are formed during `solve`.
    pub block: f64,
    /// Trust-region block solves (wall time, including the next block formed beside them
    /// where the solver overlaps the two).
    pub solve: f64,
    /// Folding the change back (`theta` or `beta` update).
    pub update: f64,
    /// Monitoring: objectives, gap, validation.
    pub check: f64,
    /// Trust-region iterations, summed over blocks and target columns.
    #[serde(default)]
    pub tr_iters: usize,
    /// CG iterations, summed over blocks and target columns.
    #[serde(default)]
    pub cg_iters: usize,
    /// Collective communication of a distributed fit (sums over the ranks, the line search,
    /// the decisions); 0 in a single process.
    #[serde(default)]
    pub communicate: f64,
    /// A distributed exact fit's kernel products `K(X, X_{S_r}) v_r` for the ranks' combined
    /// changes (counted apart from `communicate`, which their sum over the ranks is in); 0
    /// otherwise.
    #[serde(default)]
    pub products: f64,
    /// Block solves (per target column) of the kernel model ([`TrModel::Kernel`]) whose
    /// ratio test kept rejecting, solved again with the Gram.
    #[serde(default)]
    pub gram_fallbacks: usize,
}

impl Timings {
    /// Seconds per iteration spent in the iteration proper (block, solve, update).
    pub fn per_iteration(&self, iters: usize) -> f64 {
        (self.block + self.solve + self.update) / iters.max(1) as f64
    }
}

impl std::ops::AddAssign for Timings {
    /// The time of two solves run one after the other (the binary problems of one-vs-one).
    fn add_assign(&mut self, o: Timings) {
        self.block += o.block;
        self.solve += o.solve;
        self.update += o.update;
        self.check += o.check;
        self.tr_iters += o.tr_iters;
        self.cg_iters += o.cg_iters;
        self.communicate += o.communicate;
        self.products += o.products;
        self.gram_fallbacks += o.gram_fallbacks;
    }
}

/// The solver's result.
#[derive(Clone, Debug)]
pub struct Solution {
    /// Dual coefficients, column-major `n x T`.
    pub alpha: Vec<f64>,
    /// Primal weights (`M x T`), for random-feature models.
    pub theta: Option<Vec<f64>>,
    /// Iterations run.
    pub iters: usize,
    /// Why it stopped.
    pub stop: StopReason,
    /// Every check, in order (the last is the final state).
    pub history: Vec<Progress>,
    /// Where the time went.
    pub timings: Timings,
    /// The trust region's model curvature, and why (`exact kernel`, `gram`, `kernel`, ...).
    pub tr_model: String,
    /// How the blocks were chosen, and why (`shrinking (auto: ...)`, `random`, ...).
    pub working_set: String,
    /// Where and why the fit left its device for the fallback backend, if it did.
    pub fell_back: Option<String>,
    /// One-vs-one: how many pairs were solved side by side (0 for other fits).
    pub pairs_at_once: usize,
    /// Where the fit started when not from zero or a given model: the primal solve on a
    /// feature map (`direct KRR solve`, `finite Newton ...`); empty otherwise.
    pub start: String,
    /// The intercept of each target column (in the units of the targets the solver saw),
    /// when [`SolverConfig::intercept`] asked for one; empty otherwise.
    pub intercept: Vec<f64>,
    /// The passes over the rows of the start, the blocks and the checks (the statistics are
    /// the caller's); `None` where not counted (one-vs-one's pairs, distributed fits, other
    /// solvers).
    pub passes: Option<crate::model::Passes>,
}

/// How the kernel is represented.
#[doc(hidden)]
pub enum Repr<'a, T> {
    /// Random Fourier features.
    Features(&'a FeatureMap<T>),
    /// The exact kernel.
    Exact(&'a Kernel),
}

/// The problem data: features, loss, targets (`n x T` column-major, `+-1` for classifiers)
/// and per-sample `lambda_i` and KLR box margins.
#[doc(hidden)]
pub struct Problem<'a, T> {
    /// Training features.
    pub x: &'a Features<T>,
    /// Kernel representation.
    pub repr: Repr<'a, T>,
    /// The loss.
    pub loss: Loss,
    /// Number of target columns.
    pub targets: usize,
    /// Targets, column-major `n x T`.
    pub y: &'a [f64],
    /// `lambda / w_i`.
    pub lam: &'a [f64],
    /// KLR box margins (one ulp of `c_i` in the working precision).
    pub eps: &'a [f64],
}

/// A progress callback: sees every check; returning `false` stops the fit.
pub type ProgressFn<'a> = Box<dyn FnMut(&Progress) -> bool + 'a>;

/// An interruption poll: asked once per iteration (one block solve); `true` stops the fit
/// at once, without the final check (so a Ctrl-C handler is honoured within an iteration).
pub type InterruptFn<'a> = Box<dyn FnMut() -> bool + 'a>;

/// A validation callback: the metric of the current predictor plus each target column's
/// intercept (an empty slice: none).
pub type ValidateFn<'a, T> = Box<dyn FnMut(&Predictor<T>, &[f64]) -> f64 + 'a>;

/// Optional hooks into the loop.
#[doc(hidden)]
#[derive(Default)]
pub struct Hooks<'a, T> {
    /// Returns the validation metric for the current predictor.
    pub validate: Option<ValidateFn<'a, T>>,
    /// Sees every check; returning `false` stops the fit.
    pub progress: Option<ProgressFn<'a>>,
    /// Polled every iteration; returning `true` stops the fit.
    pub interrupt: Option<InterruptFn<'a>>,
}

/// Bytes the solver will allocate for a problem (checked before allocating).
pub fn memory_estimate(
    n: usize,
    d: usize,
    m: Option<usize>,
    targets: usize,
    block: usize,
) -> usize {
    // in u128, so that absurd sizes saturate instead of wrapping
    let (n, d, tt, b, c) = (
        n as u128,
        d as u128,
        targets as u128,
        block as u128,
        CHUNK_ROWS as u128,
    );
    let f64s = n * tt * 2 + n * 2; // alpha, beta or y, lam/eps
    let block_bytes = b * b * 8 * 2 + b * d * 8;
    // Random features: the map, theta, the current and the staged block's features and
    // K_BB (see `SolverConfig::overlap`), and a chunk of features for the checks.
    let feat = m.map_or(0, |m| {
        let m = m as u128;
        m * d * 8 + m * tt * 8 + 2 * b * m * 8 + b * b * 8 + c * m * 8
    });
    // Exact kernels: the row-chunk tiles of the beta update, and the staged block's rows and
    // K_BB.
    let exact_tile = if m.is_none() {
        c * b * 8 * 2 + b * d * 8 + b * b * 8
    } else {
        0
    };
    usize::try_from(f64s * 8 + block_bytes + feat + exact_tile).unwrap_or(usize::MAX)
}

struct State<'a, T: Scalar> {
    prob: &'a Problem<'a, T>,
    n: usize,
    alpha: Vec<f64>,
    /// `theta` (features; a host copy of the engine's, current at checks).
    theta: Vec<f64>,
    /// The engine that keeps `theta` or `beta = K alpha` and the current block.
    engine: Option<Box<dyn BlockEngine<T> + 'a>>,
    /// The block model's curvature is `scale K_BB`, and the engine's `theta` moves by
    /// `scale Phi_B^T delta`: 1, except in a distributed fit that adds the ranks' changes
    /// (CoCoA+'s safe local scaling, [`pbm`]).
    scale: f64,
    /// Each target column's intercept, by which its targets are shifted down (zeros unless
    /// the fit has an intercept).
    shift: Vec<f64>,
    /// Checks leave out the objectives (a pass over the training rows): rows mapped from a
    /// file beyond the page cache, under the pass budget, where each check would read the
    /// file again. The validation set is still scored.
    light_checks: bool,
    /// Checks that computed the objectives (a pass over the rows each).
    full_checks: usize,
}

/// Sample `i`'s coordinate data for target column `t`.
fn coord<T>(prob: &Problem<T>, i: usize, t: usize) -> Coord {
    let n = prob.lam.len();
    Coord {
        y: prob.y[t * n + i],
        lam: prob.lam[i],
        eps: prob.eps[i],
    }
}

/// Sample `i`'s coordinate data for target column `t`, the column's target shifted down by
/// its intercept `shift[t]` (zero without one).
fn shifted<T>(prob: &Problem<T>, shift: &[f64], i: usize, t: usize) -> Coord {
    let k = coord(prob, i, t);
    Coord {
        y: k.y - shift[t],
        ..k
    }
}

/// `Phi_B` as the factor of the block's true curvature under the kernel model. A product that
/// fails (a device error) is kept here and poisons its result with NaN, which the ratio test
/// rejects; the block solve then reports the error ([`Factor::outcome`]) and its result is
/// dropped.
struct Factor<'s> {
    products: &'s dyn FeatureProducts,
    error: Mutex<Option<JokerError>>,
}

impl<'s> Factor<'s> {
    fn new(products: &'s dyn FeatureProducts) -> Self {
        Factor {
            products,
            error: Mutex::new(None),
        }
    }

    /// Whether a product has failed.
    fn failed(&self) -> bool {
        self.error.lock().map_or(true, |e| e.is_some())
    }

    /// Keeps the first error.
    fn keep(&self, e: JokerError) {
        if let Ok(mut slot) = self.error.lock() {
            slot.get_or_insert(e);
        }
    }

    /// The first product error, if any.
    fn outcome(self) -> Result<()> {
        match self.error.into_inner() {
            Ok(None) => Ok(()),
            Ok(Some(e)) => Err(e),
            Err(_) => Err(JokerError::Device(
                "a block solve panicked while multiplying by the block's features".into(),
            )),
        }
    }
}

impl CurvatureFactor for Factor<'_> {
    fn t_times(&self, s: &[f64]) -> Vec<f64> {
        if !self.failed() {
            match self.products.transpose_times(s) {
                Ok(u) => return u,
                Err(e) => self.keep(e),
            }
        }
        vec![f64::NAN; s.len()]
    }

    fn times(&self, u: &[f64], out: &mut [f64]) {
        if !self.failed() {
            match self.products.times(u, out) {
                Ok(()) => return,
                Err(e) => self.keep(e),
            }
        }
        out.fill(f64::NAN);
    }
}

/// Each target column's new `alpha_B` and counters, after a block solve.
type ColumnSolves = Vec<(Vec<f64>, BlockStats)>;

/// One target column's block solve: the new `alpha_B` and the counters.
struct Column {
    a: Vec<f64>,
    stats: BlockStats,
}

/// Solves the block's subproblem on the host, one target column per task. With `features`,
/// `kbb` is the kernel model and the ratio test runs on `Phi_B Phi_B^T`.
fn solve_on_host<T: Scalar>(
    prob: &Problem<T>,
    (alpha, shift): (&[f64], &[f64]),
    s: &HostSolve,
) -> Result<Vec<Column>> {
    let (n, nb) = (prob.lam.len(), s.block.len());
    let factor = s.features.map(Factor::new);
    let cols = (0..prob.targets)
        .into_par_iter()
        .map(|t| {
            let coords: Vec<Coord> = s
                .block
                .iter()
                .map(|&i| shifted(prob, shift, i, t))
                .collect();
            let mut a: Vec<f64> = s.block.iter().map(|&i| alpha[t * n + i]).collect();
            let mut g = s.gbar[t * nb..(t + 1) * nb].to_vec();
            let bp = BlockProblem {
                kbb: s.kbb,
                loss: prob.loss,
                coords: &coords,
                exact: factor.as_ref().map(|f| f as &dyn CurvatureFactor),
            };
            let stats = solve_column(&bp, &mut a, &mut g, s.delta_max, s.p);
            Column { a, stats }
        })
        .collect();
    factor.map_or(Ok(()), Factor::outcome)?;
    Ok(cols)
}

/// Whether a kernel-model column solve kept failing the ratio test: at least half of the
/// block's trust-region budget went to rejected steps.
fn kept_rejecting(stats: &BlockStats, p: &TrustRegion) -> bool {
    2 * (stats.tr_iters - stats.accepted) >= p.max_iter.max(2)
}

/// The kernel model's safeguard: the columns whose solve kept rejecting are solved on from
/// where they stopped with the block's Gram (formed once, into `gram`), from the exact
/// `gbar = gbar_0 + Gram (alpha_B - alpha_B0)`. Returns how many.
fn gram_fallback<T: Scalar>(
    prob: &Problem<T>,
    (alpha, shift): (&[f64], &[f64]),
    s: &HostSolve,
    gram: &mut Vec<f64>,
    cols: &mut [Column],
) -> Result<usize> {
    let Some(features) = s.features else {
        return Ok(0);
    };
    let failing: Vec<usize> = (0..cols.len())
        .filter(|&t| kept_rejecting(&cols[t].stats, s.p))
        .collect();
    if failing.is_empty() {
        return Ok(0);
    }
    let nb = s.block.len();
    if gram.len() < nb * nb {
        *gram = try_filled(nb * nb, 0.0, "the block's Gram (kernel-model fallback)")?;
    }
    features.gram(gram)?;
    let kbb = &gram[..nb * nb];
    let n = prob.lam.len();
    for &t in &failing {
        let coords: Vec<Coord> = s
            .block
            .iter()
            .map(|&i| shifted(prob, shift, i, t))
            .collect();
        let c = &mut cols[t];
        let moved: Vec<f64> = (s.block.iter().zip(&c.a))
            .map(|(&i, a)| a - alpha[t * n + i])
            .collect();
        let mut g = vec![0.0; nb];
        crate::linalg::matvec(kbb, &moved, &mut g);
        g.iter_mut()
            .zip(&s.gbar[t * nb..(t + 1) * nb])
            .for_each(|(g, g0)| *g += g0);
        let bp = BlockProblem {
            kbb,
            loss: prob.loss,
            coords: &coords,
            exact: None,
        };
        let more = solve_column(&bp, &mut c.a, &mut g, s.delta_max, s.p);
        c.stats += more;
    }
    Ok(failing.len())
}

/// The trust region's model curvature over a fit: how the engine forms `K_BB` now, how it
/// formed the staged block's, and the automatic choice's switch back to the Gram.
#[derive(Default)]
struct Curvature {
    /// [`TrModel::Auto`] chose the kernel model (and may switch back).
    auto: bool,
    /// The engine forms the exact kernel block.
    engine_kernel: bool,
    /// The staged block's `K_BB` is the exact kernel block.
    staged_kernel: bool,
    /// Column solves under the kernel model and how many of them fell back to the Gram.
    solves: usize,
    fallbacks: usize,
    /// The block's Gram for the fallback (allocated at the first).
    gram: Vec<f64>,
    /// Which model, and why.
    note: String,
}

impl Curvature {
    /// The model for this fit: `Gram` always for exact kernels and device block solvers.
    fn choose<T: Scalar>(
        prob: &Problem<T>,
        p: &TrustRegion,
        b: usize,
        engine: &mut dyn BlockEngine<T>,
        on_device: bool,
    ) -> Curvature {
        let gram = |note: String| Curvature {
            note,
            ..Default::default()
        };
        let map = match prob.repr {
            Repr::Exact(_) => return gram("exact kernel".into()),
            Repr::Features(map) => map,
        };
        let (m, d, tt) = (map.m(), prob.x.ncols(), prob.targets);
        let auto = p.model == TrModel::Auto;
        let columns = if tt == 1 {
            "one target column".to_string()
        } else {
            format!("{tt} target columns")
        };
        // a Nystrom map's Gram in the centres' coefficients needs the block's features, `b r^2`
        // flops to form, where the kernel model's block is `b^2 d` and its products `b r + r^2`
        let nystrom = engine.gram_needs_features();
        let wanted = match p.model {
            TrModel::Auto if nystrom => true,
            model => model.uses_kernel(b, m, d, tt, std::mem::size_of::<T>()),
        };
        if !wanted {
            return gram(if auto {
                format!("gram (auto: cheaper than the kernel model at M = {m}, d = {d}, {columns})")
            } else {
                "gram".into()
            });
        }
        if auto && engine.gram_is_cheap() {
            return gram(
                "gram (auto: on a GPU the fused Gram costs less than the kernel model's products)"
                    .into(),
            );
        }
        if on_device || !engine.set_kernel_model(true) {
            return gram(if auto {
                "gram (auto: this engine forms only the Gram)".into()
            } else {
                "gram (the kernel model was asked for; this engine forms only the Gram)".into()
            });
        }
        Curvature {
            auto,
            engine_kernel: true,
            staged_kernel: true,
            note: if auto && nystrom {
                format!("kernel (auto: a Nystrom map's Gram costs b r^2 per block, r = {m})")
            } else if auto {
                format!("kernel (auto: cheaper than the Gram at M = {m}, d = {d}, {columns})")
            } else {
                "kernel".into()
            },
            ..Default::default()
        }
    }

    /// The block solve on the host (see [`solve_here`]) with the block's model: under the
    /// kernel model the engine's block features are lent for the ratio test and the Gram
    /// fallback, and the fallbacks counted. Returns the columns and how many fell back.
    fn solve<'s, T: Scalar>(
        &mut self,
        st: &mut State<'s, T>,
        backend: &'s dyn Backend<T>,
        solve: HostSolve<'_>,
        ready: bool,
        (ahead, kbb_next): (Option<(usize, usize)>, &mut [f64]),
    ) -> Result<(ColumnSolves, usize)> {
        let kernel = self.block_is_kernel(ready);
        // the block staged during this solve is formed with the engine's model of now
        self.staged_kernel = self.engine_kernel;
        let engine = engine_of(&mut st.engine)?;
        let (cols, fallbacks) = if kernel && engine.block_products().is_some() {
            // The engine multiplies by its block's features itself (a device): nothing is
            // lent, and it stages nothing beside the solve.
            if ahead.is_some() {
                return Err(JokerError::Device(
                    "an engine that forms its own feature products cannot stage blocks".into(),
                ));
            }
            let products = st.engine.as_deref().and_then(|e| e.block_products());
            let solve = HostSolve {
                features: products,
                ..solve
            };
            let mut cols = solve_on_host(st.prob, (&st.alpha, &st.shift), &solve)?;
            let fallbacks = gram_fallback(
                st.prob,
                (&st.alpha, &st.shift),
                &solve,
                &mut self.gram,
                &mut cols,
            )?;
            (cols, fallbacks)
        } else {
            let lent = lend_if(kernel, engine)?;
            let host = lent
                .as_ref()
                .map(|features| HostProducts { features, backend });
            let solve = HostSolve {
                features: host.as_ref().map(|h| h as &dyn FeatureProducts),
                ..solve
            };
            let mut cols = solve_here(st, &solve, ahead, kbb_next)?;
            let fallbacks = gram_fallback(
                st.prob,
                (&st.alpha, &st.shift),
                &solve,
                &mut self.gram,
                &mut cols,
            )?;
            if let Some(f) = lent {
                engine_of(&mut st.engine)?.return_features(f);
            }
            (cols, fallbacks)
        };
        if kernel {
            self.record(st.prob.targets, fallbacks, engine_of(&mut st.engine)?);
        }
        Ok((
            cols.into_iter().map(|c| (c.a, c.stats)).collect(),
            fallbacks,
        ))
    }

    /// Whether the current block's `K_BB` is the kernel model (`ready`: it was staged).
    fn block_is_kernel(&self, ready: bool) -> bool {
        if ready {
            self.staged_kernel
        } else {
            self.engine_kernel
        }
    }

    /// Counts a kernel-model block's column solves and fallbacks. The automatic choice goes
    /// back to the Gram for the rest of the fit once more than 5% of at least 32 column solves
    /// fell back: the model is too poor there (seen on KRR with small `lambda`).
    fn record<T>(&mut self, solves: usize, fallbacks: usize, engine: &mut dyn BlockEngine<T>) {
        self.solves += solves;
        self.fallbacks += fallbacks;
        if self.auto && self.engine_kernel && self.solves >= 32 && self.fallbacks * 20 > self.solves
        {
            engine.set_kernel_model(false);
            self.engine_kernel = false;
            self.note = format!(
                "gram (auto: the kernel model was left after {} of {} block solves fell back to the Gram)",
                self.fallbacks, self.solves
            );
        }
    }
}

impl<T: Scalar> State<'_, T> {
    fn coord(&self, i: usize, t: usize) -> Coord {
        shifted(self.prob, &self.shift, i, t)
    }

    fn predictor(&self) -> Predictor<'_, T> {
        match self.prob.repr {
            Repr::Features(map) => Predictor::Features {
                map,
                theta: &self.theta,
            },
            Repr::Exact(kernel) => Predictor::Exact {
                kernel,
                support: self.prob.x,
                rows: None,
                alpha: &self.alpha,
            },
        }
    }

    /// Builds `theta` or `beta` from scratch (needed when `alpha != 0` at the start).
    fn sync_from_alpha(&mut self) -> Result<()> {
        if self.alpha.iter().all(|&a| a == 0.0) {
            return Ok(());
        }
        engine_of(&mut self.engine)?.set_alpha(&self.alpha)
    }

    /// Refreshes the host copy of `theta` from the engine.
    fn pull_theta(&mut self) -> Result<()> {
        if let Some(e) = self.engine.as_mut() {
            e.theta(&mut self.theta)?;
        }
        Ok(())
    }

    /// Primal, dual and relative gap (`theta` must be pulled).
    fn objectives(&mut self) -> Result<(f64, f64, f64)> {
        let terms = self.objective_terms()?;
        Ok(terms.objectives())
    }

    /// The three sums the objectives are made of (`theta` must be pulled).
    fn objective_terms(&mut self) -> Result<Terms> {
        let (n, tt) = (self.n, self.prob.targets);
        let loss = self.prob.loss;
        let u = engine_of(&mut self.engine)?.decision()?;
        // ||w||^2: theta^T theta, or alpha^T K alpha = alpha^T beta (u is beta)
        let sq: f64 = match self.prob.repr {
            Repr::Features(_) => self.theta.iter().map(|v| v * v).sum(),
            Repr::Exact(_) => self.alpha.iter().zip(&u).map(|(a, b)| a * b).sum(),
        };
        let (mut lsum, mut fsum) = (0.0, 0.0);
        for t in 0..tt {
            for i in 0..n {
                let k = self.coord(i, t);
                lsum += k.c() * loss.primal(u[t * n + i], k.y);
                fsum += loss.dual(self.alpha[t * n + i], &k);
            }
        }
        Ok(Terms { sq, lsum, fsum })
    }
}

/// The sums the objectives are made of: `||w||^2`, the weighted primal losses
/// `sum_i c_i l(y_i, f(x_i))` and the dual terms `sum_i f_i(a_i)`.
#[derive(Clone, Copy, Debug)]
struct Terms {
    sq: f64,
    lsum: f64,
    fsum: f64,
}

impl Terms {
    /// Primal `1/2 ||w||^2 + lsum`, dual `-(1/2 ||w||^2 + fsum)` and the relative gap.
    fn objectives(self) -> (f64, f64, f64) {
        let primal = 0.5 * self.sq + self.lsum;
        let dual = -(0.5 * self.sq + self.fsum);
        let scale = primal.abs().max(dual.abs()).max(f64::MIN_POSITIVE);
        let gap = ((primal - dual) / scale).max(0.0);
        (primal, dual, gap)
    }
}

/// The block size where the exact kernel is cached and the block size is the default: a block
/// there gathers `K_BB` instead of forming `|B| x n` kernel values, so its cost is the CG
/// products (`|B|^2` each) and the update of `beta`, and smaller blocks, chosen by their
/// violations, reach the tolerance sooner (measured against 128 and 512 on the shared
/// exact-kernel sets: docs/bench/defaults.md). Half of it for the losses without curvature
/// ([`cached_block`]).
pub const CACHED_BLOCK: usize = 256;

/// The block size on a cached exact kernel for a loss without curvature of its own
/// ([`Loss::flat_dual`]: hinge, SVR, L1).
pub const CACHED_BLOCK_FLAT: usize = 128;

/// The block size on a cached exact kernel for `loss` when the caller left it to the solver:
/// [`CACHED_BLOCK`], or [`CACHED_BLOCK_FLAT`] where the loss has no curvature. There every block
/// solve runs the box-stopped CG, whose box exits grow with the block and each restart it
/// from steepest descent at `|B|^2` a product: with blocks of 128 the fits took 6-42% less
/// time on every shared regression set (SVR) and L1-SVC and L1 fits 11-41% less, where
/// L2-SVC's pendigits and HIGGS 7k took 8-23% more (docs/solver.md).
pub fn cached_block(loss: Loss) -> usize {
    if loss.flat_dual() {
        CACHED_BLOCK_FLAT
    } else {
        CACHED_BLOCK
    }
}

/// Checks per pass over the data for a fit that searches its intercept on the cached exact
/// kernel. There a check costs `O(n)` (the decision values are kept, so it is the objectives'
/// sums) against a block's update of `b n` kernel products, and the intercept moves at a
/// check: four a pass move it a quarter pass after a solve has settled, not a pass, and stop
/// SVR, whose active set settles within a pass, sooner (measured on the shared regression
/// sets: docs/solver.md; the classifiers gained no time from it and keep one a pass).
const SEARCH_CHECKS_PER_PASS: usize = 4;

/// Iterations between checks by default: one pass over the `n` rows in blocks of `b`, or a
/// [`SEARCH_CHECKS_PER_PASS`]th of one (`often`: an intercept searched on the cached exact
/// kernel, no validation set to score).
fn checks_apart(n: usize, b: usize, often: bool) -> usize {
    let pass = n.div_ceil(b.max(1)).max(1);
    if often {
        pass.div_ceil(SEARCH_CHECKS_PER_PASS)
    } else {
        pass
    }
}

/// Whether the fit keeps its exact kernel matrix ([`crate::backend::cached::CachedExact`]).
fn kernel_cached<T: Scalar>(prob: &Problem<T>, cfg: &SolverConfig) -> bool {
    matches!(prob.repr, Repr::Exact(_))
        && crate::backend::cached::caches_kernel::<T>(prob.x.nrows(), cfg.kernel_cache)
}

/// The block size the fit uses: [`cached_block`] under a cached exact kernel when the caller
/// left the block size to the solver (and a trust-region metric of lower rank fits in it), the
/// configured one otherwise.
fn block_for<T: Scalar>(prob: &Problem<T>, cfg: &SolverConfig) -> usize {
    let cached = cached_block(prob.loss);
    if cfg.block_auto && kernel_cached(prob, cfg) && cfg.trust_region.nystrom_rank < cached {
        cfg.block_size.min(cached)
    } else {
        cfg.block_size
    }
}

/// The iteration budget of a fit with blocks of `b`, and why it is not `cfg.max_iter` where it
/// is not: on rows mapped from a file that the memory left for the page cache cannot hold,
/// each pass over the rows reads the file again, so the fit makes at most
/// [`SolverConfig::passes_beyond_memory`] passes.
/// The third value says whether the budget applies (the rows are beyond the page cache), even
/// where `cfg.max_iter` is the smaller one.
fn pass_budget<T: Scalar>(
    prob: &Problem<T>,
    cfg: &SolverConfig,
    b: usize,
) -> (usize, String, bool) {
    let Some(passes) = cfg.passes_beyond_memory else {
        return (cfg.max_iter, String::new(), false);
    };
    if !prob.x.beyond_page_cache() {
        return (cfg.max_iter, String::new(), false);
    }
    let iters = passes
        .max(1)
        .saturating_mul(prob.x.nrows().div_ceil(b.max(1)));
    if iters >= cfg.max_iter {
        return (cfg.max_iter, String::new(), true);
    }
    let (file, room) = (
        prob.x.stored_bytes(),
        crate::memory::cache_room().unwrap_or(0),
    );
    let human = crate::memory::human;
    (
        iters,
        format!(
            "{passes} pass{} over the rows ({iters} iterations): they are mapped from {} of \
             file, more than the {} of memory the page cache can have, so each pass reads the \
             file again (a larger iteration budget, --max-iter, makes more)",
            if passes == 1 { "" } else { "es" },
            human(file),
            human(room)
        ),
        true,
    )
}

/// Runs DBCD-TR. `alpha0` (column-major `n x T`) warm-starts the dual; it is projected into the
/// box (strictly inside for KLR). With `fallback`, a device failure ([`JokerError::Device`])
/// in the middle of the fit moves it onto `fallback` from the current dual iterate instead of
/// failing, and [`Solution::fell_back`] says where and why.
pub fn solve<T: Scalar>(
    backend: &dyn Backend<T>,
    prob: &Problem<T>,
    cfg: &SolverConfig,
    alpha0: Option<Vec<f64>>,
    hooks: &mut Hooks<T>,
    fallback: Option<&dyn Backend<T>>,
) -> Result<Solution> {
    let start = Instant::now();
    let (n, tt) = (prob.x.nrows(), prob.targets);
    let b = block_for(prob, cfg);
    let lowered = b < cfg.block_size;
    let (max_iter, budget_note, budgeted) = pass_budget(prob, cfg, b);
    let cfg = &SolverConfig {
        block_size: b,
        max_iter,
        ..cfg.clone()
    };
    check_shapes(prob, b)?;
    // Fixed blocks over one seeded shuffle (or consecutive rows).
    let perm = block_order(prob.x, cfg);
    let mut st = start_state(backend, prob, alpha0, &perm, (b, cfg.kernel_cache))?;
    let mut backend = backend;
    let mut resume = Resume {
        fallback,
        note: None,
        kernel_cache: cfg.kernel_cache,
    };
    let mut intercept = Intercept::of_fit(prob, cfg);
    let check_every = match cfg.check_every {
        0 => checks_apart(
            n,
            b,
            intercept.is_some() && kernel_cached(prob, cfg) && hooks.validate.is_none(),
        ),
        k => k,
    };

    let mut delta_max = cfg.delta_max;
    let mut history = Vec::new();
    let mut accepted = 0usize;
    let mut stop = StopReason::MaxIter;
    let mut interrupted = false;
    let mut iter = 0;
    let mut checked_at = usize::MAX;
    let mut timings = Timings::default();
    let mut schedule = Schedule::new(&mut st, cfg, &perm, tt)?;
    // with an intercept, a stop is a solve for the current one: the checks since it moved
    // (`since`) judge the fit, and a converged or stalled solve moves it until it is found
    let mut since = 0;

    // KRR and L2-SVC on a small feature map start at their optimum, solved in the primal;
    // the first check certifies it
    let mut done = false;
    let mut start_note = budget_note;
    let cold = st.alpha.iter().all(|&a| a == 0.0);
    let krr = cfg.direct_krr && direct::applies(prob);
    let krr_exact = cfg.direct_krr && direct::applies_exact(prob);
    // each finite Newton step is a pass over the rows: on rows mapped from a file a pass is a
    // read of the file, and the steps would read it many times where DBCD-TR reads it once
    // a pass, so the start is left out there (the direct KRR solve is one pass, and kept)
    let newton = cfg.newton_start && newton::applies(prob);
    let svc = newton && !prob.x.is_mapped();
    if cold && newton && prob.x.is_mapped() {
        let skipped = "DBCD-TR from zero: the finite Newton start is left out on rows mapped \
                       from a file (each of its steps would read the file again)";
        start_note = match start_note.as_str() {
            "" => skipped.to_string(),
            budget => format!("{skipped}; {budget}"),
        };
    }
    let mut start_passes = 0.0;
    if cold && (krr || krr_exact || svc) {
        let tc = Instant::now();
        let mut halted = None;
        // the direct solves read the rows once; Newton's steps once each (the sample's steps
        // a share of a pass)
        start_passes = 1.0;
        start_note = if krr_exact {
            direct::krr_exact_optimum(&mut st, intercept.is_some())?;
            match intercept {
                Some(_) => "direct KRR solve with the intercept (the n x n kernel system by Cholesky, the intercept by its Schur complement)",
                None => "direct KRR solve (the n x n kernel system by Cholesky)",
            }
            .to_string()
        } else if krr {
            direct::krr_optimum(&mut st, backend, intercept.is_some())?;
            match intercept {
                Some(_) => {
                    "direct KRR solve with the intercept (the bordered M + 1 system by Cholesky)"
                }
                None => "direct KRR solve (the M x M system by Cholesky)",
            }
            .to_string()
        } else {
            // the Newton steps honour the interruption poll and the time limit between steps
            let interrupt = &mut hooks.interrupt;
            let deadline = cfg.time_limit.map(|lim| start + lim);
            let mut halt = || {
                if interrupt.as_mut().is_some_and(|f| f()) {
                    Some(newton::Halt::Interrupted)
                } else if deadline.is_some_and(|d| Instant::now() >= d) {
                    Some(newton::Halt::TimeLimit)
                } else {
                    None
                }
            };
            let steps = newton::squared_hinge_optimum(&mut st, backend, cfg.seed, &mut halt)?;
            halted = steps.halted;
            start_passes = steps.whole as f64
                + (steps.sample * steps.sample_rows) as f64 / prob.x.nrows().max(1) as f64;
            steps.describe()
        };
        timings.update += tc.elapsed().as_secs_f64();
        if halted == Some(newton::Halt::Interrupted) {
            stop = StopReason::Cancelled;
            interrupted = true;
            done = true;
        } else {
            checked_at = 0;
            let tc = Instant::now();
            let p = monitor(&mut st, hooks, 0, 0, start, timings.check, b)?;
            timings.check += tc.elapsed().as_secs_f64();
            if let Some(reason) = judge(p, hooks, &mut history, since, cfg)? {
                if moves_intercept(&mut intercept, Some(reason), &mut st)? {
                    since = history.len();
                    schedule = Schedule::new(&mut st, cfg, &perm, tt)?;
                } else {
                    stop = reason;
                    done = true;
                }
            } else if halted == Some(newton::Halt::TimeLimit) {
                stop = StopReason::TimeLimit;
                done = true;
            }
        }
    }

    // under the pass budget of rows beyond the page cache, a check's objectives would read
    // the file once more: left out unless checks were asked for
    if budgeted && cfg.check_every == 0 {
        st.light_checks = true;
        let light = "no duality gap: computing it would read the file again (--check-every \
                     asks for checks)";
        start_note = match start_note.as_str() {
            "" => light.to_string(),
            before => format!("{before}; {light}"),
        };
    }
    let reads = BlockReads::of(prob.x);
    while iter < cfg.max_iter && !done {
        let last = iter + 1 >= cfg.max_iter;
        let t2 = Cell::new(Instant::now());
        let step = schedule
            .step(&mut st, backend, cfg, delta_max, last, &mut timings)
            .and_then(|(block, cols)| {
                t2.set(Instant::now());
                apply_update(&mut st, &block, &cols, iter)?;
                Ok(cols)
            });
        let cols = match step {
            Ok(cols) => cols,
            Err(e) => {
                backend = resume.recover(e, iter, prob, &mut st, &perm, b)?;
                schedule = Schedule::new(&mut st, cfg, &perm, tt)?;
                continue;
            }
        };
        accepted += tally(&cols, &mut timings);
        timings.update += t2.get().elapsed().as_secs_f64();
        iter += 1;
        if cfg.shrink_every > 0 && iter % cfg.shrink_every == 0 {
            delta_max *= cfg.shrink_rate;
        }
        if iter % check_every == 0 {
            checked_at = iter;
            let tc = Instant::now();
            // a check reads every row in order: the default read-around serves it
            reads.pause();
            let p = match monitor(&mut st, hooks, iter, accepted, start, timings.check, b) {
                Ok(p) => p,
                Err(e) => {
                    backend = resume.recover(e, iter, prob, &mut st, &perm, b)?;
                    schedule = Schedule::new(&mut st, cfg, &perm, tt)?;
                    monitor(&mut st, hooks, iter, accepted, start, timings.check, b)?
                }
            };
            reads.resume();
            timings.check += tc.elapsed().as_secs_f64();
            // near a solve's end the intercept moves already (within INTERCEPT_GAP times the
            // tolerance): a solve that only stalls would otherwise spend its stall passes on
            // every move
            let near = p.gap <= INTERCEPT_GAP * cfg.tol;
            let reason = judge(p, hooks, &mut history, since, cfg)?;
            if (near || reason.is_some()) && moves_intercept(&mut intercept, reason, &mut st)? {
                since = history.len();
                schedule = Schedule::new(&mut st, cfg, &perm, tt)?;
            } else if let Some(reason) = reason {
                stop = reason;
                break;
            }
        }
        if cfg.time_limit.is_some_and(|lim| start.elapsed() >= lim) {
            stop = StopReason::TimeLimit;
            break;
        }
        if hooks.interrupt.as_mut().is_some_and(|f| f()) {
            stop = StopReason::Cancelled;
            interrupted = true;
            break;
        }
    }
    drop(reads);
    if checked_at != iter && !interrupted {
        let tc = Instant::now();
        let p = match monitor(&mut st, hooks, iter, accepted, start, timings.check, b) {
            Ok(p) => p,
            Err(e) => {
                resume.recover(e, iter, prob, &mut st, &perm, b)?;
                monitor(&mut st, hooks, iter, accepted, start, timings.check, b)?
            }
        };
        timings.check += tc.elapsed().as_secs_f64();
        stop = final_verdict(&p, hooks, cfg.tol, stop);
        history.push(p);
    }
    if let Err(e) = st.pull_theta() {
        resume.recover(e, iter, prob, &mut st, &perm, b)?;
        st.pull_theta()?;
    }
    Ok(Solution {
        theta: match prob.repr {
            Repr::Features(_) => Some(std::mem::take(&mut st.theta)),
            Repr::Exact(_) => None,
        },
        alpha: st.alpha,
        iters: iter,
        stop,
        history,
        timings,
        tr_model: schedule.curvature.note,
        working_set: if lowered {
            format!(
                "{}; blocks of {b} (auto: the cached kernel's blocks cost only their products{})",
                schedule.choice.note,
                match prob.loss.flat_dual() {
                    true => "; smaller where the loss has no curvature",
                    false => "",
                }
            )
        } else {
            schedule.choice.note
        },
        fell_back: resume.note,
        pairs_at_once: 0,
        start: start_note,
        passes: Some(crate::model::Passes {
            statistics: 0.0,
            start: start_passes,
            blocks: (iter * b) as f64 / n.max(1) as f64,
            checks: st.full_checks as f64,
        }),
        intercept: match intercept {
            Some(_) => st.shift,
            None => Vec::new(),
        },
    })
}

/// At a check that would stop the fit for `reason` (`None`: one that goes on, within
/// [`INTERCEPT_GAP`] times the tolerance): whether the intercept moved, and the fit goes on.
/// A budget or a cancellation ends the fit with the intercept where it is.
fn moves_intercept<T: Scalar>(
    intercept: &mut Option<Intercept>,
    reason: Option<StopReason>,
    st: &mut State<'_, T>,
) -> Result<bool> {
    match (intercept, reason) {
        (Some(search), None | Some(StopReason::Converged | StopReason::Stalled)) => {
            search.step(st, &crate::distributed::Single)
        }
        _ => Ok(false),
    }
}

/// The intercept moves at every check whose gap is within this many times the tolerance, not
/// only when a solve for it has converged or stalled: a slow solve (SVR on a feature map)
/// otherwise reaches its first move only at its stall (measured on keggdirected: at the 33rd
/// pass at 10 times the tolerance, the 5th at 100 times; the sum of the coefficients is close
/// enough there for the secant, and the last moves come from the converged solves).
const INTERCEPT_GAP: f64 = 100.0;

/// Adds a block's trust-region and CG iterations to the fit's timings; returns its accepted
/// steps.
fn tally(cols: &ColumnSolves, timings: &mut Timings) -> usize {
    cols.iter()
        .map(|(_, s)| {
            timings.tr_iters += s.tr_iters;
            timings.cg_iters += s.cg_iters;
            s.accepted
        })
        .sum()
}

/// Where a fit goes on when its device fails ([`solve`]'s `fallback`), and whether it has.
struct Resume<'a, T> {
    fallback: Option<&'a dyn Backend<T>>,
    note: Option<String>,
    /// The fit's [`SolverConfig::kernel_cache`], for the fallback's engine.
    kernel_cache: usize,
}

impl<'a, T: Scalar> Resume<'a, T> {
    /// After the device error `e` at iteration `iter`, restarts the fit's state on the
    /// fallback from the current dual iterate (which is in the box whether or not the failed
    /// step reached it) and returns the fallback; any other error, or a second failure, is
    /// returned as it is.
    fn recover(
        &mut self,
        e: JokerError,
        iter: usize,
        prob: &'a Problem<'a, T>,
        st: &mut State<'a, T>,
        perm: &'a [usize],
        b: usize,
    ) -> Result<&'a dyn Backend<T>> {
        let JokerError::Device(why) = &e else {
            return Err(e);
        };
        let Some(next) = self.fallback.take() else {
            return Err(e);
        };
        self.note = Some(format!(
            "the device failed at iteration {iter} ({why}); the fit went on on the {} from that iterate",
            next.name()
        ));
        let alpha = std::mem::take(&mut st.alpha);
        *st = start_state(next, prob, Some(alpha), perm, (b, self.kernel_cache))?;
        Ok(next)
    }
}

/// The block schedule of a fit and its buffers: the fixed blocks, the random choice (drawn
/// one ahead where the engine forms the next block during the current solve) or the working
/// set from the violations, `K_BB` and `gbar`, the staged block's `K_BB`, and the trust
/// region's model.
struct Schedule<'p> {
    blocks: Vec<&'p [usize]>,
    b: usize,
    chooser: Stream,
    /// The block staged during the last solve, if any.
    next: Option<usize>,
    /// The engine solves the blocks where `K_BB` is (then `K_BB` never comes to the host).
    on_device: bool,
    /// The engine forms the next block's features and `K_BB` while the host solves the
    /// current block (the two are independent: only the projection needs the new `theta`).
    staged: bool,
    kbb: Vec<f64>,
    kbb_next: Vec<f64>,
    gbar: Vec<f64>,
    curvature: Curvature,
    choice: Choice<'p>,
}

/// How the blocks are chosen, and why.
struct Choice<'p> {
    /// The working set from the violations, where the fit takes it.
    violations: Option<Violations<'p>>,
    note: String,
}

impl<'p> Choice<'p> {
    /// A working set chosen from the violations where asked for (by default: shrinking), the
    /// engine keeps every decision value and the model is not scaled (CoCoA+ adding); random
    /// blocks otherwise.
    fn choose<T>(
        asked: WorkingSet,
        engine: &dyn BlockEngine<T>,
        scaled: bool,
        perm: &'p [usize],
    ) -> Choice<'p> {
        let random = |note: String| Choice {
            violations: None,
            note,
        };
        let able = !scaled && engine.positioned_decision().is_some();
        let rule = match asked {
            WorkingSet::Random => return random("random".into()),
            WorkingSet::Auto if !able => {
                return random(
                    "random (auto: this engine does not keep every row's decision value)".into(),
                );
            }
            _ if !able => {
                return random(format!(
                    "random ({} was asked for; only the cached exact kernel keeps every row's decision value)",
                    asked.name()
                ));
            }
            WorkingSet::Auto | WorkingSet::Shrinking => WorkingSet::Shrinking,
            WorkingSet::Greedy => WorkingSet::Greedy,
        };
        Choice {
            violations: Some(Violations {
                perm,
                largest: rule == WorkingSet::Greedy,
                score: vec![0.0; perm.len()],
                positions: Vec::new(),
            }),
            note: if asked == WorkingSet::Auto {
                "shrinking (auto: the cached kernel keeps every row's decision value)".into()
            } else {
                rule.name().into()
            },
        }
    }
}

/// A working set chosen from the violations of the optimality conditions, read off the
/// engine's decision values: `b` positions (of the block order) drawn uniformly from the
/// violating coordinates (shrinking), or the `b` largest violations (greedy).
struct Violations<'p> {
    perm: &'p [usize],
    /// The largest violations (Gauss-Southwell) instead of a uniform draw among them.
    largest: bool,
    score: Vec<f64>,
    positions: Vec<usize>,
}

impl Violations<'_> {
    /// Chooses the working set (sorted positions; empty where no coordinate violates).
    fn select<T: Scalar>(
        &mut self,
        st: &State<'_, T>,
        b: usize,
        chooser: &mut Stream,
    ) -> Result<&[usize]> {
        let (n, tt, loss) = (st.n, st.prob.targets, st.prob.loss);
        let u = st
            .engine
            .as_deref()
            .and_then(|e| e.positioned_decision())
            .ok_or_else(|| JokerError::Device("the engine lost its decision values".into()))?;
        let (perm, alpha) = (self.perm, &st.alpha);
        self.score.par_iter_mut().enumerate().for_each(|(p, s)| {
            let i = perm[p];
            *s = (0..tt)
                .map(|t| loss.violation(alpha[t * n + i], u[t * n + p], &st.coord(i, t)))
                .fold(0.0, f64::max);
        });
        let score = &self.score;
        let pos = &mut self.positions;
        pos.clear();
        pos.extend((0..n).filter(|&p| score[p] > 0.0));
        if pos.len() > b {
            if self.largest {
                pos.select_nth_unstable_by(b - 1, |&p, &q| score[q].total_cmp(&score[p]));
            } else {
                // the first b of a partial shuffle
                for j in 0..b {
                    let k = j + chooser.below(pos.len() - j);
                    pos.swap(j, k);
                }
            }
            pos.truncate(b);
        }
        pos.sort_unstable();
        Ok(pos)
    }
}

impl<'p> Schedule<'p> {
    fn new<T: Scalar>(
        st: &mut State<'_, T>,
        cfg: &SolverConfig,
        perm: &'p [usize],
        targets: usize,
    ) -> Result<Self> {
        let b = cfg.block_size;
        // a scaled model (CoCoA+ adding, `scale != 1`) is scaled on the host: the device's
        // solver reads K_BB as the engine formed it
        let scaled = st.scale != 1.0;
        let engine = engine_of(&mut st.engine)?;
        let choice = Choice::choose(cfg.working_set, engine, scaled, perm);
        let on_device = !scaled && engine.solves_blocks(&cfg.trust_region);
        let staged = cfg.overlap && !on_device && engine.stages() && choice.violations.is_none();
        let curvature = Curvature::choose(st.prob, &cfg.trust_region, b, engine, on_device);
        Ok(Schedule {
            blocks: perm.chunks(b).collect(),
            b,
            chooser: Stream::new(cfg.seed, streams::BLOCK_CHOICE),
            next: None,
            on_device,
            staged,
            kbb: try_filled(b * b, 0.0, "the block's kernel matrix K_BB")?,
            kbb_next: if staged {
                try_filled(b * b, 0.0, "the staged block's K_BB")?
            } else {
                Vec::new()
            },
            gbar: vec![0.0; b * targets],
            curvature,
            choice,
        })
    }

    /// This iteration's block: the working set from the violations (loaded into the engine,
    /// `K_BB` and `gbar` formed), or `None` where the blocks are drawn at random (or no
    /// coordinate violates: then a random block, which changes nothing but lets the checks
    /// run).
    fn violating_block<T: Scalar>(&mut self, st: &mut State<'_, T>) -> Result<Option<Vec<usize>>> {
        let Some(g) = self.choice.violations.as_mut() else {
            return Ok(None);
        };
        let perm = g.perm;
        let positions = g.select(st, self.b, &mut self.chooser)?;
        if positions.is_empty() {
            return Ok(None);
        }
        let (nb, tt) = (positions.len(), st.prob.targets);
        let block = positions.iter().map(|&p| perm[p]).collect();
        let engine = engine_of(&mut st.engine)?;
        engine.load_positions(positions)?;
        engine.block_gram(Some(&mut self.kbb[..nb * nb]), &mut self.gbar[..nb * tt])?;
        Ok(Some(block))
    }

    /// One iteration's block, formed and solved (`last`: no block after it). Returns the
    /// block and each column's solve; the times go to `timings.block` and `timings.solve`.
    fn step<'s, T: Scalar>(
        &mut self,
        st: &mut State<'s, T>,
        backend: &'s dyn Backend<T>,
        cfg: &SolverConfig,
        delta_max: f64,
        last: bool,
        timings: &mut Timings,
    ) -> Result<(Vec<usize>, ColumnSolves)> {
        let t0 = Instant::now();
        let tt = st.prob.targets;
        let (block, ready) = match self.violating_block(st)? {
            Some(block) => (block, false),
            None => {
                let (bi, ready) = match self.next.take() {
                    Some(bi) => (bi, true),
                    None => (self.chooser.below(self.blocks.len()), false),
                };
                let block = self.blocks[bi];
                prefetch_block(st.prob.x, block);
                let stage = Staging {
                    staged: self.staged,
                    ready,
                    on_device: self.on_device,
                };
                let nb = block.len();
                form_block(
                    engine_of(&mut st.engine)?,
                    (bi * self.b, nb),
                    stage,
                    &mut self.kbb,
                    &mut self.kbb_next,
                    &mut self.gbar[..nb * tt],
                )?;
                (block.to_vec(), ready)
            }
        };
        let (b, nb) = (self.b, block.len());
        if st.scale != 1.0 {
            self.kbb[..nb * nb].iter_mut().for_each(|v| *v *= st.scale);
        }
        let t1 = Instant::now();
        timings.block += (t1 - t0).as_secs_f64();
        // Block solve: on the engine's device where it has a block solver (K_BB stayed
        // there), else on the host, one column per task, with the next block staged beside
        // it where the engine stages.
        let gb = &self.gbar[..nb * tt];
        let cols = if self.on_device {
            solve_on_device(st, &block, gb, delta_max, &cfg.trust_region)?
        } else {
            // the next block is drawn now where the engine forms it during this solve
            self.next = (self.staged && !last).then(|| self.chooser.below(self.blocks.len()));
            if let Some(nbi) = self.next {
                prefetch_block(st.prob.x, self.blocks[nbi]);
            }
            let ahead = self.next.map(|nbi| (nbi * b, self.blocks[nbi].len()));
            let solve = HostSolve {
                block: &block,
                kbb: &self.kbb[..nb * nb],
                gbar: gb,
                delta_max,
                p: &cfg.trust_region,
                features: None,
            };
            let (cols, fallbacks) =
                self.curvature
                    .solve(st, backend, solve, ready, (ahead, &mut self.kbb_next))?;
            timings.gram_fallbacks += fallbacks;
            cols
        };
        timings.solve += t1.elapsed().as_secs_f64();
        Ok((block, cols))
    }
}

/// DBCD-TR's reads of rows mapped from a file, block by block: while it lives a fault fetches
/// its page alone (no read-around), and each block's rows are asked for as one read of
/// exactly their bytes ([`prefetch_block`]). With the default read-around a fault fetches the
/// device's read-ahead window (8 MiB on the build machine's virtual disk, against 1.5 MiB for
/// a block of 512 rows of 784 f32), which a memory cap evicts before another block uses it:
/// a pass over a 0.94 GB file under a 512 MiB cap read the file twice.
struct BlockReads<'x, T: Scalar>(Option<&'x Features<T>>);

impl<'x, T: Scalar> BlockReads<'x, T> {
    /// The reads of `x`: block by block where it is mapped, as they are otherwise.
    fn of(x: &'x Features<T>) -> Self {
        let mapped = x.is_mapped().then_some(x);
        if let Some(x) = mapped {
            x.advise_random(true);
        }
        BlockReads(mapped)
    }

    /// The default read-around again, for a pass over every row in order (a check).
    fn pause(&self) {
        if let Some(x) = self.0 {
            x.advise_random(false);
        }
    }

    /// Block by block again after [`pause`](Self::pause).
    fn resume(&self) {
        if let Some(x) = self.0 {
            x.advise_random(true);
        }
    }
}

impl<T: Scalar> Drop for BlockReads<'_, T> {
    fn drop(&mut self) {
        self.pause();
    }
}

/// Asks for a block's rows ahead of their gather ([`Features::prefetch_rows`]) where they are
/// mapped and consecutive (blocks of mapped rows are, [`SolverConfig::contiguous_blocks`]).
fn prefetch_block<T: Scalar>(x: &Features<T>, block: &[usize]) {
    if let (Some(&first), Some(&last)) = (block.first(), block.last())
        && x.is_mapped()
        && last >= first
        && last - first + 1 == block.len()
    {
        x.prefetch_rows(first..last + 1);
    }
}

/// The engine's block features, lent for the kernel model's ratio test.
fn lend_if<T>(
    kernel_model: bool,
    engine: &mut dyn BlockEngine<T>,
) -> Result<Option<BlockFeatures<T>>> {
    if !kernel_model {
        return Ok(None);
    }
    engine
        .lend_features()
        .map(Some)
        .ok_or_else(|| JokerError::Device("the engine did not lend its block features".into()))
}

/// The last check's word on the stop reason (the progress callback sees it, and cannot
/// stop what has stopped): converged where the gap is within the tolerance, unless cancelled.
fn final_verdict<T>(p: &Progress, hooks: &mut Hooks<T>, tol: f64, stop: StopReason) -> StopReason {
    if let Some(f) = hooks.progress.as_mut() {
        f(p);
    }
    if p.gap <= tol && stop != StopReason::Cancelled {
        StopReason::Converged
    } else {
        stop
    }
}

/// Passes a check to the progress callback and records it in `history`; what it says of
/// stopping ([`verdict`]), judged against the checks from `since` on (those of the current
/// problem: an intercept that moves changes the objectives).
fn judge<T>(
    p: Progress,
    hooks: &mut Hooks<T>,
    history: &mut Vec<Progress>,
    since: usize,
    cfg: &SolverConfig,
) -> Result<Option<StopReason>> {
    let go_on = hooks.progress.as_mut().is_none_or(|f| f(&p));
    let verdict = verdict(&p, &history[since.min(history.len())..], cfg, go_on);
    history.push(p);
    verdict
}

/// How far (relative) the dual may pass the least primal value seen before the fit is called
/// broken: far beyond the rounding of either objective.
const DUALITY_BREACH: f64 = 1e-2;

/// What a check says: stop (converged, stalled, or the progress callback asked to), go on,
/// or fail on a non-finite objective or on a dual above a primal value. `history` holds the
/// earlier checks.
fn verdict(
    p: &Progress,
    history: &[Progress],
    cfg: &SolverConfig,
    go_on: bool,
) -> Result<Option<StopReason>> {
    // a check without objectives (State::light_checks: all three NaN) judges nothing but
    // the progress callback's answer
    if p.primal.is_nan() && p.dual.is_nan() && p.gap.is_nan() {
        return Ok((!go_on).then_some(StopReason::Cancelled));
    }
    if !(p.primal.is_finite() && p.dual.is_finite()) {
        return Err(JokerError::Numerical(
            "the objective became non-finite; check the scaling of the data and lambda".into(),
        ));
    }
    // Weak duality: every dual value is at most every primal value. A dual beyond the least
    // primal seen means the problem as formed is not convex (a kernel matrix indefinite by
    // more than the ridge 1/C in the working precision), and the coefficients are garbage.
    let least = history.iter().map(|q| q.primal).fold(p.primal, f64::min);
    if p.dual > least + DUALITY_BREACH * least.abs() {
        return Err(JokerError::Numerical(format!(
            "the dual objective ({:.6e}) rose above a primal value ({least:.6e}): the kernel \
             matrix is not positive semi-definite to the working precision against the ridge \
             1/C; fit in f64 (--precision f64), with a smaller C, or with a wider kernel",
            p.dual
        )));
    }
    Ok(if p.gap <= cfg.tol {
        Some(StopReason::Converged)
    } else if cfg.stall && stalled(p, history, cfg.tol) {
        Some(StopReason::Stalled)
    } else if !go_on {
        Some(StopReason::Cancelled)
    } else {
        None
    })
}

/// The gap is within `10 tol` and the dual objective rose by at most `tol / 10` of the
/// objectives' size per pass since the last check at least [`STALL_PASSES`] passes back.
fn stalled(p: &Progress, history: &[Progress], tol: f64) -> bool {
    let Some(back) = history
        .iter()
        .rev()
        .find(|q| q.epoch <= p.epoch - STALL_PASSES)
    else {
        return false;
    };
    let scale = p.primal.abs().max(p.dual.abs());
    let rise = (p.dual - back.dual) / (p.epoch - back.epoch);
    p.gap <= 10.0 * tol && rise <= tol / 10.0 * scale
}

/// The block size and the target arrays fit the problem.
fn check_shapes<T: Scalar>(prob: &Problem<T>, b: usize) -> Result<()> {
    let (n, tt) = (prob.x.nrows(), prob.targets);
    if b == 0 || b > n {
        return Err(invalid(
            "block_size",
            format!("must be between 1 and the number of samples ({n}), got {b}"),
        ));
    }
    if prob.y.len() != n * tt || prob.lam.len() != n || prob.eps.len() != n {
        return Err(JokerError::ShapeMismatch(format!(
            "{n} samples and {tt} targets need {} target values, got {}",
            n * tt,
            prob.y.len()
        )));
    }
    Ok(())
}

/// The state at the start: the warm start or the loss's own starting point, inside the box,
/// and the backend's engine (or the host's: the cached exact kernel where it fits
/// `kernel_cache`) in sync with it.
fn start_state<'a, T: Scalar>(
    backend: &'a dyn Backend<T>,
    prob: &'a Problem<'a, T>,
    alpha0: Option<Vec<f64>>,
    perm: &'a [usize],
    (b, kernel_cache): (usize, usize),
) -> Result<State<'a, T>> {
    let (n, d, tt) = (prob.x.nrows(), prob.x.ncols(), prob.targets);
    let mut st = State {
        prob,
        n,
        alpha: try_filled(n * tt, 0.0, "the dual coefficients")?,
        theta: Vec::new(),
        engine: None,
        scale: 1.0,
        shift: vec![0.0; tt],
        light_checks: false,
        full_checks: 0,
    };
    for t in 0..tt {
        for i in 0..n {
            let k = st.coord(i, t);
            let (lo, hi) = prob.loss.bounds(&k);
            let a0 = match &alpha0 {
                Some(a) => a[t * n + i],
                None => prob.loss.start(&k, n),
            };
            st.alpha[t * n + i] = a0.clamp(lo, hi);
        }
    }
    match prob.repr {
        Repr::Features(map) => {
            if map.d() != d {
                return Err(JokerError::ShapeMismatch(format!(
                    "feature map built for {} inputs, data has {d}",
                    map.d()
                )));
            }
            st.theta = vec![0.0; map.m() * tt];
            // A Nystrom map's features are formed once where they fit the kernel cache: a
            // block is then a slice, where forming it costs `b M d + b M^2` (or, in the
            // centres' coefficients, several passes over the `M x M` factor).
            let store = stores_features::<T>(n, map.m(), kernel_cache);
            st.engine = Some(match (backend.rff_engine(map, prob.x, perm, tt, b)?, map) {
                (Some(e), _) => e,
                (None, FeatureMap::Nystrom(_)) if store => {
                    Box::new(StoredFeatures::new(backend, map, prob.x, perm, tt, b)?)
                }
                (None, FeatureMap::Nystrom(ny)) => {
                    Box::new(HostNystrom::new(backend, ny, prob.x, perm, tt, b)?)
                }
                (None, FeatureMap::Random(_)) => {
                    Box::new(HostRff::new(backend, map, prob.x, perm, tt, b)?)
                }
            });
        }
        Repr::Exact(kernel) => {
            // A kernel that fits the cache is formed once, by the backend's tiles (on a GPU, the
            // device's), and kept in host memory: an iteration then reads `b` of its columns
            // instead of evaluating `b x n` kernel values, and the working set can follow the
            // violations (measured on a GPU: 5x faster than the device's streamed engine at
            // 7,494 rows).
            st.engine = Some(if caches_kernel::<T>(n, kernel_cache) {
                // An SVM's dual leaves most coordinates at zero: their rows are never read,
                // so the matrix is formed a row at a time as coordinates first move. Device
                // tiles pay a launch per call: there the whole matrix at once.
                let formation = if prob.loss.sparse_dual() && backend.name() == "cpu" {
                    Formation::OnDemand
                } else {
                    Formation::Whole
                };
                Box::new(CachedExact::new(
                    backend, kernel, prob.x, perm, tt, formation,
                )?)
            } else {
                match backend.exact_engine(kernel, prob.x, perm, tt, b)? {
                    Some(e) => e,
                    None => Box::new(HostExact::new(backend, kernel, prob.x, perm, tt, b)?),
                }
            });
        }
    }
    st.sync_from_alpha()?;
    Ok(st)
}

/// How the engine forms the current block.
#[derive(Clone, Copy)]
struct Staging {
    /// The engine forms the next block during the current solve.
    staged: bool,
    /// The current block was staged during the last solve.
    ready: bool,
    /// The engine keeps `K_BB` where it solves the block.
    on_device: bool,
}

/// Forms the block of rows `start..start + nb`: `gbar`, and `K_BB` into `kbb` unless the
/// engine keeps it; a staged engine promotes the block staged during the last solve (staging
/// it now if it was not).
fn form_block<T>(
    engine: &mut dyn BlockEngine<T>,
    (start, nb): (usize, usize),
    how: Staging,
    kbb: &mut Vec<f64>,
    kbb_next: &mut Vec<f64>,
    gbar: &mut [f64],
) -> Result<()> {
    if how.staged {
        if !how.ready {
            engine.stage(start, nb, &mut kbb_next[..nb * nb])?;
        }
        std::mem::swap(kbb, kbb_next);
        engine.promote()?;
        engine.block_gram(None, gbar)
    } else {
        engine.load_block(start, nb)?;
        engine.block_gram((!how.on_device).then_some(&mut kbb[..nb * nb]), gbar)
    }
}

/// The block solve on the engine's device, where `K_BB` already is.
fn solve_on_device<T: Scalar>(
    st: &mut State<T>,
    block: &[usize],
    gbar: &[f64],
    delta_max: f64,
    p: &TrustRegion,
) -> Result<ColumnSolves> {
    let (n, nb, tt) = (st.n, block.len(), st.prob.targets);
    let coords: Vec<Coord> = (0..tt)
        .flat_map(|t| block.iter().map(move |&i| (i, t)))
        .map(|(i, t)| st.coord(i, t))
        .collect();
    let mut a: Vec<f64> = (0..tt)
        .flat_map(|t| block.iter().map(move |&i| t * n + i))
        .map(|k| st.alpha[k])
        .collect();
    let mut g = gbar.to_vec();
    let solve = BlockSolve {
        loss: st.prob.loss,
        coords: &coords,
        delta_max,
        p,
    };
    let stats = engine_of(&mut st.engine)?.solve_block(&solve, &mut a, &mut g)?;
    Ok(a.chunks_exact(nb)
        .zip(stats)
        .map(|(col, s)| (col.to_vec(), s))
        .collect())
}

/// A block solve on the host.
struct HostSolve<'s> {
    block: &'s [usize],
    kbb: &'s [f64],
    gbar: &'s [f64],
    delta_max: f64,
    p: &'s TrustRegion,
    /// Under the kernel model: the products with the block's features.
    features: Option<&'s dyn FeatureProducts>,
}

/// The block solve on the host, one column per task; with `ahead = Some((start, len))` the
/// engine forms that block's features and `K_BB` (into `kbb_next`) beside it.
fn solve_here<T: Scalar>(
    st: &mut State<T>,
    s: &HostSolve,
    ahead: Option<(usize, usize)>,
    kbb_next: &mut [f64],
) -> Result<Vec<Column>> {
    let (prob, alpha, shift) = (st.prob, &st.alpha, &st.shift);
    let host = || solve_on_host(prob, (alpha, shift), s);
    match ahead {
        Some((start, len)) => {
            let e = engine_of(&mut st.engine)?;
            let kn = &mut kbb_next[..len * len];
            let (cols, formed) = rayon::join(host, || e.stage(start, len, kn));
            formed?;
            cols
        }
        None => host(),
    }
}

/// Folds the block's new duals into `alpha` and the engine's state (`theta` or `beta`).
fn apply_update<T: Scalar>(
    st: &mut State<T>,
    block: &[usize],
    cols: &[(Vec<f64>, BlockStats)],
    iter: usize,
) -> Result<()> {
    let (n, nb) = (st.n, block.len());
    let mut delta = vec![0.0; nb * cols.len()];
    let mut changed = false;
    for (t, (a, _)) in cols.iter().enumerate() {
        for (r, &i) in block.iter().enumerate() {
            let dv = a[r] - st.alpha[t * n + i];
            if dv != 0.0 {
                if !dv.is_finite() {
                    return Err(JokerError::Numerical(format!(
                        "non-finite dual update at sample {i}, iteration {iter}"
                    )));
                }
                changed = true;
                delta[t * nb + r] = dv;
                st.alpha[t * n + i] = a[r];
            }
        }
    }
    if changed {
        if st.scale != 1.0 {
            delta.iter_mut().for_each(|v| *v *= st.scale);
        }
        engine_of(&mut st.engine)?.update(&delta)?;
    }
    Ok(())
}

/// One check: objectives and gap, the validation metric, and the times so far
/// (`monitored`: seconds spent in earlier checks, which training time excludes).
fn monitor<T: Scalar>(
    st: &mut State<T>,
    hooks: &mut Hooks<T>,
    iter: usize,
    accepted: usize,
    start: Instant,
    monitored: f64,
    b: usize,
) -> Result<Progress> {
    let train_seconds = start.elapsed().as_secs_f64() - monitored;
    st.pull_theta()?;
    let (primal, dual, gap) = match st.light_checks {
        true => (f64::NAN, f64::NAN, f64::NAN),
        false => {
            st.full_checks += 1;
            st.objectives()?
        }
    };
    let validation = hooks
        .validate
        .as_mut()
        .map(|f| f(&st.predictor(), &st.shift));
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

/// The fit's engine, which every fit has once it has started.
fn engine_of<'e, 'a, T>(
    engine: &'e mut Option<Box<dyn BlockEngine<T> + 'a>>,
) -> Result<&'e mut (dyn BlockEngine<T> + 'a)> {
    engine
        .as_deref_mut()
        .ok_or_else(|| JokerError::Device("a fit without an engine".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A check at `epoch` passes with the given objectives (gap as `Progress` defines it).
    fn check(epoch: f64, primal: f64, dual: f64) -> Progress {
        Progress {
            iter: 0,
            epoch,
            seconds: 0.0,
            train_seconds: 0.0,
            primal,
            dual,
            gap: (primal - dual) / primal.abs().max(dual.abs()),
            validation: None,
            accepted: 0,
            rel_residual: None,
            pairs: None,
        }
    }

    /// A dual above a primal value seen earlier (weak duality broken) fails the fit; a dual
    /// within rounding of the primal does not.
    #[test]
    fn a_dual_above_an_earlier_primal_fails_the_fit() {
        let cfg = SolverConfig::default();
        let past = [check(1.0, 1000.0, 500.0), check(2.0, 1200.0, 900.0)];
        let broken = check(3.0, 2000.0, 1011.0);
        match verdict(&broken, &past, &cfg, true) {
            Err(JokerError::Numerical(m)) => assert!(m.contains("positive semi-definite"), "{m}"),
            other => panic!("a broken duality went on: {other:?}"),
        }
        let fine = check(3.0, 1000.0, 1000.0 + 1e-6);
        assert!(matches!(
            verdict(&fine, &past, &cfg, true),
            Ok(Some(StopReason::Converged))
        ));
        let rising = check(3.0, 1000.0, 990.0);
        assert!(matches!(verdict(&rising, &past, &cfg, true), Ok(None)));
    }

    #[test]
    fn a_fit_stalls_only_near_the_tolerance_with_a_flat_dual() {
        let tol = 1e-3;
        // the dual rises 0.05 per pass on a scale of 1000: 5e-5 < tol / 10 per pass
        let flat: Vec<_> = (1..=6)
            .map(|e| check(e as f64, 1005.0, 999.0 + 0.05 * e as f64))
            .collect();
        let (now, past) = flat.split_last().unwrap();
        assert!(now.gap > tol && now.gap <= 10.0 * tol);
        assert!(stalled(now, past, tol));
        // fewer than STALL_PASSES passes of history: no verdict yet
        assert!(!stalled(&flat[2], &flat[..2], tol));
        // the same flat dual with a gap beyond 10 tol goes on
        let far = check(6.0, 1020.0, 999.3);
        assert!(far.gap > 10.0 * tol && !stalled(&far, past, tol));
        // a dual still rising by 2e-4 of its size per pass goes on
        let rising: Vec<_> = (1..=6)
            .map(|e| check(e as f64, 1005.0, 999.0 + 0.2 * e as f64))
            .collect();
        let (now, past) = rising.split_last().unwrap();
        assert!(now.gap <= 10.0 * tol && !stalled(now, past, tol));
        // checks every half pass: the rise is measured per pass
        let halves: Vec<_> = (1..=12)
            .map(|h| check(h as f64 / 2.0, 1005.0, 999.0 + 0.06 * h as f64))
            .collect();
        let (now, past) = halves.split_last().unwrap();
        assert!(
            !stalled(now, past, tol),
            "0.12 per pass is 1.2e-4 of 1005 per pass"
        );
    }
}

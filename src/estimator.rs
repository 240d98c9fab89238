//! The estimator: validated parameters, `fit`, and the preprocessing around the solver.
//!
//! ```no_run
//! use joker::{Joker, Loss, io};
//! # fn main() -> joker::Result<()> {
//! let train = io::read_libsvm::<f32>("ijcnn1".as_ref(), &Default::default())?;
//! let model = Joker::builder()
//!     .loss(Loss::SquaredHinge)
//!     .c(32.0)
//!     .n_components(10_000)
//!     .build()?
//!     .fit(&train)?;
//! model.save("ijcnn1.joker.json")?;
//! # Ok(()) }
//! ```

use std::any::TypeId;
use std::time::Duration;

mod calibrate;
mod distributed;
mod grow;
mod one_vs_one;
mod search;
mod stream;
use distributed::Dist;
pub use grow::{GrowthStage, MIN_ACCURACY_GAIN, MIN_RMSE_GAIN};
pub use search::SearchGrid;
pub use stream::ReadingFn;

use crate::backend::Backend;
use crate::backend::cached::cached_kernel_bytes;
use crate::backend::cpu::Cpu;
use crate::backend::predict::Predictor;
use crate::backend::stored::stored_feature_bytes;
use crate::data::{Dataset, Features};
use crate::device::{Device, Placement, Resolved, resolve};
use crate::distributed::{Collective, Single, union_sorted};
use crate::error::{JokerError, Result, invalid};
use crate::features::{Centers, FeatureKind, FeatureMap, FeatureSpec, NystromMap, RandomMap};
use crate::kernel::{Bandwidth, Kernel, KernelKind, RowSums, gamma_of_sums, resolve_gamma};
use crate::loss::Loss;
use crate::memory::MemoryLimit;
use crate::model::{
    FORMAT_NAME, FORMAT_VERSION_BIAS, FORMAT_VERSION_DUAL, FORMAT_VERSION_OVO,
    FORMAT_VERSION_STOCHASTIC, Model, Passes, Precision, Representation, Task, TrainingInfo,
    accuracy, rmse,
};
use crate::preprocess::{
    Multiclass, Standardizer, TargetScaler, classes_of, encode_labels, encode_pairs, vote,
};
use crate::scalar::Scalar;
use crate::solver::dbcd::pbm::{self, PbmConfig};
use crate::solver::dbcd::{
    Hooks, InterruptFn, Problem, ProgressFn, Repr, ValidateFn, WorkingSet, memory_estimate, solve,
};
use crate::solver::dsg::{DsgConfig, DsgProblem, DsgRows, DsgRun, solve_dsg};
use crate::solver::krr::{KrrConfig, KrrProblem, solve_krr};
use crate::solver::{Progress, RadiusRule, Solution, SolverConfig, StopReason, TrModel, TrNorm};

/// Per-class weights for classifiers (they multiply the sample weights).
#[derive(Clone, Debug, Default, PartialEq)]
pub enum ClassWeight {
    /// All classes weigh 1.
    #[default]
    None,
    /// `n / (K n_k)` for class `k`, as in scikit-learn.
    Balanced,
    /// Explicit `(label, weight)` pairs; unlisted classes weigh 1.
    Custom(Vec<(f64, f64)>),
}

/// Validated Joker parameters; [`Joker::fit`] trains a [`Model`].
#[derive(Clone, Debug, PartialEq)]
pub struct Joker {
    /// The loss (and so the model: KRR, SVC, KLR, ...).
    pub loss: Loss,
    /// Kernel family.
    pub kernel: KernelKind,
    /// Kernel scale.
    pub bandwidth: Bandwidth,
    /// Regularisation `lambda > 0` (`C = 1/lambda`).
    pub lambda: f64,
    /// Features `M` (random features, or Nystrom centres), or `None` for the exact kernel.
    pub n_components: Option<usize>,
    /// Which map turns the kernel into `n_components` features (random Fourier features by
    /// default, or a Nystrom map, which needs `n_components` and DBCD-TR).
    pub feature_map: FeatureKind,
    /// `B` of a constant feature appended to the random features (0, the default: none): the
    /// decision function gains an intercept, regularised like the other weights (LIBLINEAR's
    /// `-B`; [`RandomMap::with_bias`]). Random-feature fits by DBCD-TR only; an exact kernel
    /// chosen by [`auto_exact`](Joker::auto_exact) has no intercept and leaves it out.
    pub bias: f64,
    /// Fit an unregularised intercept `b` beside the kernel expansion (regression losses,
    /// DBCD-TR, in one process or across MPI ranks): the model is `f(x) + b`, as LIBSVM's SVR,
    /// with `b` where the dual coefficients sum to zero ([`SolverConfig::intercept`]).
    /// Recorded in [`TrainingInfo::intercept`](crate::model::TrainingInfo) and folded into the
    /// target scaler's mean. `None` (the default) fits one for SVR, Huber, L1 and Lp, whose
    /// best constant is not the targets' mean that the target scaling removes, where the fit
    /// runs DBCD-TR; KRR (scikit-learn's `KernelRidge` has none, and the mean is
    /// KRR's own constant) and the other solvers fit none. See [`Joker::fits_intercept`].
    pub intercept: Option<bool>,
    /// Working precision.
    pub precision: Precision,
    /// Classification or regression (`None`: from the loss).
    pub task: Option<Task>,
    /// Z-score the features with training statistics.
    pub standardize: bool,
    /// Z-score regression targets (predictions are returned in the original units; `epsilon`
    /// and `delta` are then in standardised units).
    pub normalize_target: bool,
    /// Class weights.
    pub class_weight: ClassWeight,
    /// How a classifier with more than two classes is split into binary problems. `None`
    /// (the default) chooses: one-vs-one where the fit takes the exact kernel with DBCD-TR in
    /// one process (the pairs are small problems whose kernels are cached), one-vs-rest
    /// otherwise (one feature block serves every class). One-vs-one needs DBCD-TR in one
    /// process; the iteration cap and the tolerance apply to each pair, the time limit to
    /// the whole fit.
    pub multiclass: Option<Multiclass>,
    /// Solver settings.
    pub solver: SolverConfig,
    /// Refuse to fit when the estimated memory exceeds this limit (default: a fraction of the
    /// available memory, see [`MemoryLimit`]).
    pub max_memory: MemoryLimit,
    /// Solve full KRR with Skotch, ASkotch or Nystrom-PCG instead of DBCD-TR (squared loss
    /// and the exact kernel only).
    pub full_krr: Option<KrrConfig>,
    /// Train by doubly stochastic gradients (DSG, UDSG or CDSG; [`crate::solver::dsg`])
    /// instead of DBCD-TR: a streaming primal solver that opens random features as it goes,
    /// `n_components` of them at most. Random features on the CPU only.
    pub dsg: Option<DsgConfig>,
    /// Where to fit (default [`Device::Auto`]; see [`crate::device`]). The GPU covers
    /// random-feature models in f32 trained with DBCD-TR; `max_memory` also caps the device
    /// memory there.
    pub device: Device,
    /// Train on the exact kernel instead of `n_components` random features where the whole
    /// kernel matrix fits the kernel cache ([`SolverConfig::kernel_cache`] and the memory
    /// limit): there the exact fit is both more accurate and faster (`docs/solver.md`).
    /// Beyond, a Nystrom map of `n_components` leverage-score centres where its `n x M`
    /// features fit the cache and the fit runs on the CPU (closer to the kernel than random
    /// features; `docs/bench/defaults.md`), and the random features otherwise. Applies to
    /// DBCD-TR fits with random features in one process; the choice and why is recorded in
    /// [`TrainingInfo::representation`](crate::model::TrainingInfo).
    pub auto_exact: bool,
    /// For a regression, the loss follows the kernel's representation (default off in the
    /// library, on in `joker train` where neither a loss nor a loss parameter is given): SVR
    /// (epsilon-insensitive with `epsilon` [`AUTO_EPSILON`] and its intercept, LIBSVM's
    /// `epsilon-SVR`) on the exact kernel, where DBCD-TR fits it in about KRR's time; KRR on a
    /// feature map, where it is one direct solve and SVR takes thousands of iterations. It
    /// replaces [`loss`](Joker::loss) in fits by DBCD-TR through [`fit`](Joker::fit) and
    /// [`fit_with`](Joker::fit_with) (a warm start or a growing map: the map's KRR); the
    /// choice and why is recorded in
    /// [`TrainingInfo::loss_choice`](crate::model::TrainingInfo). Measured over the shared
    /// regression sets in `docs/bench/defaults.md`.
    pub auto_loss: bool,
    /// Calibrate class probabilities for a classifier trained with another loss than the
    /// logistic one (the SVMs): after the fit, Platt's sigmoid per decision column is fitted
    /// on decision values from [`CALIBRATION_FOLDS`](crate::calibration::CALIBRATION_FOLDS)
    /// cross-validation folds (LIBSVM's `-b 1`, scikit-learn's `SVC(probability=True)`), which
    /// costs about that many more fits on 4/5 of the rows. The model then gives
    /// [`Model::predict_proba`]. Off by default; a KLR fit has probabilities without it.
    pub probability: bool,
}

/// The tube's half-width of the SVR that [`Joker::auto_loss`] takes on the exact kernel, in
/// units of the standardised targets: LIBSVM's and scikit-learn's default `epsilon`.
pub const AUTO_EPSILON: f64 = 0.1;

/// What [`Joker::auto_exact`] chose for a fit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AutoRepr {
    /// The exact kernel, cached.
    Exact,
    /// A Nystrom map of `n_components` leverage-score centres, its features kept.
    Nystrom,
    /// `n_components` random Fourier features.
    Random,
}

impl AutoRepr {
    /// The choice in words, with `m` features: `exact kernel`, `2048 Nystrom centres`, ...
    fn describe(self, m: usize) -> String {
        match self {
            AutoRepr::Exact => "exact kernel".to_string(),
            AutoRepr::Nystrom => format!("{m} Nystrom centres"),
            AutoRepr::Random => format!("{m} random features"),
        }
    }
}

/// Builder for [`Joker`]; [`JokerBuilder::build`] validates.
#[derive(Clone, Debug)]
pub struct JokerBuilder {
    p: Joker,
}

impl Default for JokerBuilder {
    fn default() -> Self {
        JokerBuilder {
            p: Joker {
                loss: Loss::SquaredError,
                kernel: KernelKind::Gaussian,
                bandwidth: Bandwidth::Auto,
                lambda: 1.0,
                n_components: Some(2048),
                feature_map: FeatureKind::Random,
                bias: 0.0,
                intercept: None,
                precision: Precision::F32,
                task: None,
                standardize: true,
                normalize_target: true,
                class_weight: ClassWeight::None,
                multiclass: None,
                solver: SolverConfig::default(),
                max_memory: MemoryLimit::Auto,
                full_krr: None,
                dsg: None,
                device: Device::Auto,
                auto_exact: false,
                auto_loss: false,
                probability: false,
            },
        }
    }
}

impl From<Joker> for JokerBuilder {
    /// Starts a builder from existing parameters (for changing a few and validating again).
    fn from(p: Joker) -> Self {
        JokerBuilder { p }
    }
}

impl JokerBuilder {
    /// Calibrated class probabilities by Platt scaling (default off; [`Joker::probability`]).
    pub fn probability(mut self, on: bool) -> Self {
        self.p.probability = on;
        self
    }

    /// The loss (default: squared error, i.e. KRR).
    pub fn loss(mut self, loss: Loss) -> Self {
        self.p.loss = loss;
        self
    }
    /// The kernel family (default: Gaussian).
    pub fn kernel(mut self, kind: KernelKind) -> Self {
        self.p.kernel = kind;
        self
    }
    /// An explicit kernel scale `gamma`.
    pub fn gamma(mut self, gamma: f64) -> Self {
        self.p.bandwidth = Bandwidth::Gamma(gamma);
        self
    }
    /// How to choose the kernel scale (default: the median heuristic).
    pub fn bandwidth(mut self, b: Bandwidth) -> Self {
        self.p.bandwidth = b;
        self
    }
    /// Regularisation `lambda` (default 1).
    pub fn lambda(mut self, lambda: f64) -> Self {
        self.p.lambda = lambda;
        self
    }
    /// `C = 1/lambda`, as in LIBSVM and scikit-learn.
    pub fn c(mut self, c: f64) -> Self {
        self.p.lambda = 1.0 / c;
        self
    }
    /// Number of features: random features, or Nystrom centres (default 2048).
    pub fn n_components(mut self, m: usize) -> Self {
        self.p.n_components = Some(m);
        self
    }
    /// `B` of a constant feature after the random features, an intercept of the decision
    /// function (default 0: none; see [`Joker::bias`]).
    pub fn bias(mut self, b: f64) -> Self {
        self.p.bias = b;
        self
    }
    /// Fit an unregularised intercept (regression losses; see [`Joker::intercept`]).
    pub fn intercept(mut self, on: bool) -> Self {
        self.p.intercept = Some(on);
        self
    }
    /// The feature map (default random Fourier features): `FeatureKind::Nystrom(centers)`
    /// approximates the kernel on the span of `n_components` centres chosen from the
    /// training rows.
    pub fn feature_map(mut self, kind: FeatureKind) -> Self {
        self.p.feature_map = kind;
        self
    }
    /// Use the exact kernel instead of random features.
    pub fn exact(mut self) -> Self {
        self.p.n_components = None;
        self
    }
    /// The exact kernel where its matrix fits the kernel cache, a Nystrom map or random
    /// features of `n_components` beyond (default off in the library, on in `joker train`; see
    /// [`Joker::auto_exact`]).
    pub fn auto_exact(mut self, on: bool) -> Self {
        self.p.auto_exact = on;
        self
    }
    /// For a regression, SVR on the exact kernel and KRR on a feature map (default off in the
    /// library, on in `joker train` when no loss is named; see [`Joker::auto_loss`]).
    pub fn auto_loss(mut self, on: bool) -> Self {
        self.p.auto_loss = on;
        self
    }
    /// Working precision (default f32).
    pub fn precision(mut self, p: Precision) -> Self {
        self.p.precision = p;
        self
    }
    /// Force classification or regression.
    pub fn task(mut self, t: Task) -> Self {
        self.p.task = Some(t);
        self
    }
    /// Z-score the features (default true).
    pub fn standardize(mut self, yes: bool) -> Self {
        self.p.standardize = yes;
        self
    }
    /// Z-score regression targets (default true).
    pub fn normalize_target(mut self, yes: bool) -> Self {
        self.p.normalize_target = yes;
        self
    }
    /// Class weights.
    pub fn class_weight(mut self, w: ClassWeight) -> Self {
        self.p.class_weight = w;
        self
    }

    /// How more than two classes are split into binary problems: one-vs-rest or one-vs-one
    /// (DBCD-TR in one process); without it, the choice of [`Joker::multiclass`].
    pub fn multiclass(mut self, m: Multiclass) -> Self {
        self.p.multiclass = Some(m);
        self
    }

    /// Block size `|B|` (default 512, 256 on a cached exact kernel, 128 there for hinge, SVR and
    /// L1; capped at the number of samples).
    pub fn block_size(mut self, b: usize) -> Self {
        self.p.solver.block_size = b;
        self.p.solver.block_auto = false;
        self
    }
    /// Bytes the exact kernel matrix (or a Nystrom map's features) may take when formed once
    /// and kept (default 2 GiB; 0 forms them block by block always). See
    /// `SolverConfig::kernel_cache`.
    pub fn kernel_cache(mut self, bytes: usize) -> Self {
        self.p.solver.kernel_cache = bytes;
        self
    }

    /// Blocks of consecutive rows (`true`) or of rows drawn by the seeded shuffle (`false`).
    /// Default: consecutive for rows mapped from a file, shuffled otherwise. See
    /// `SolverConfig::contiguous_blocks`.
    pub fn contiguous_blocks(mut self, yes: bool) -> Self {
        self.p.solver.contiguous_blocks = Some(yes);
        self
    }
    /// Iteration budget (default 10,000).
    pub fn max_iter(mut self, n: usize) -> Self {
        self.p.solver.max_iter = n;
        self
    }
    /// Relative duality gap tolerance (default 1e-3).
    pub fn tol(mut self, tol: f64) -> Self {
        self.p.solver.tol = tol;
        self
    }
    /// Wall-clock budget.
    pub fn time_limit(mut self, d: Duration) -> Self {
        self.p.solver.time_limit = Some(d);
        self
    }
    /// Rank of the Nystrom preconditioner of the block solver's CG (default 0: none; see
    /// [`TrustRegion::nystrom_rank`](crate::solver::trust_region::TrustRegion::nystrom_rank)).
    /// Fewer CG iterations per block, each dearer: measured in `docs/solver.md`. Must be below
    /// the block size; a last block smaller than the rank is solved without it.
    pub fn nystrom_rank(mut self, r: usize) -> Self {
        self.p.solver.trust_region.nystrom_rank = r;
        self
    }
    /// Monitoring period in iterations (0: once per pass over the data, four times a pass for
    /// an intercept searched on the cached exact kernel without a validation set).
    pub fn check_every(mut self, k: usize) -> Self {
        self.p.solver.check_every = k;
        self
    }
    /// Seed of the random features and of the block choice (default 42).
    pub fn seed(mut self, seed: u64) -> Self {
        self.p.solver.seed = seed;
        self
    }
    /// The curvature of the trust region's model in random-feature fits (default: the Gram
    /// `Phi_B Phi_B^T`; see [`TrModel`]).
    pub fn tr_model(mut self, model: TrModel) -> Self {
        self.p.solver.trust_region.model = model;
        self
    }
    /// The norm of the block solves' steps (default: diagonal for KLR and Lp, Euclidean
    /// otherwise; see [`TrNorm`]).
    pub fn tr_norm(mut self, norm: TrNorm) -> Self {
        self.p.solver.trust_region.norm = norm;
        self
    }
    /// Whether DBCD-TR also stops where the fit has stalled near the tolerance (default on;
    /// see [`SolverConfig::stall`]).
    pub fn stall(mut self, on: bool) -> Self {
        self.p.solver.stall = on;
        self
    }
    /// Whether KRR on a feature map of at most 4,096 features starts from its exact optimum,
    /// solved in the primal (default on; see [`SolverConfig::direct_krr`]).
    pub fn direct_krr(mut self, on: bool) -> Self {
        self.p.solver.direct_krr = on;
        self
    }
    /// The most passes over rows mapped from a file larger than the page cache can hold, where
    /// each pass reads the file (default one; `None`: no such bound; see
    /// [`SolverConfig::passes_beyond_memory`]).
    pub fn passes_beyond_memory(mut self, passes: Option<usize>) -> Self {
        self.p.solver.passes_beyond_memory = passes;
        self
    }
    /// Whether L2-SVC on a feature map of at most 4,096 features starts from its optimum,
    /// found in the primal by a finite Newton method (default on; see
    /// [`SolverConfig::newton_start`]).
    pub fn newton_start(mut self, on: bool) -> Self {
        self.p.solver.newton_start = on;
        self
    }
    /// How DBCD-TR chooses each block (default: from the violating coordinates where the exact
    /// kernel is cached, random otherwise; see [`WorkingSet`]).
    pub fn working_set(mut self, rule: WorkingSet) -> Self {
        self.p.solver.working_set = rule;
        self
    }
    /// Trust-region radius rule (default: the reference code's).
    pub fn radius_rule(mut self, r: RadiusRule) -> Self {
        self.p.solver.trust_region.rule = r;
        self
    }
    /// All solver settings at once.
    pub fn solver(mut self, s: SolverConfig) -> Self {
        self.p.solver = s;
        self
    }
    /// Solve full KRR (squared loss, exact kernel) with Skotch, ASkotch or Nystrom-PCG. The
    /// method's own budgets (`cfg.max_iter`, `cfg.tol` on the relative residual) apply; a time
    /// limit set here with [`time_limit`](Self::time_limit) bounds it too.
    pub fn full_krr(mut self, cfg: KrrConfig) -> Self {
        self.p.full_krr = Some(cfg);
        self
    }
    /// Train with a doubly stochastic gradient solver (DSG, UDSG or CDSG) instead of DBCD-TR.
    /// `n_components` is then the cap on the random features; `max_iter` counts steps (one
    /// mini-batch each), and `time_limit`, `check_every` and `seed` apply as for DBCD-TR. No
    /// duality gap exists, so the fit runs its budget. See [`crate::solver::dsg`].
    pub fn dsg(mut self, cfg: DsgConfig) -> Self {
        self.p.dsg = Some(cfg);
        self
    }
    /// Memory limit in bytes (0: none). The default is [`MemoryLimit::Auto`].
    pub fn max_memory(mut self, bytes: usize) -> Self {
        self.p.max_memory = MemoryLimit::from_bytes_or_none(bytes);
        self
    }
    /// The memory limit (default [`MemoryLimit::Auto`]).
    pub fn memory_limit(mut self, limit: MemoryLimit) -> Self {
        self.p.max_memory = limit;
        self
    }
    /// The device to fit on (default [`Device::Auto`]).
    pub fn device(mut self, device: Device) -> Self {
        self.p.device = device;
        self
    }

    /// Validates every parameter that does not depend on the data.
    pub fn build(self) -> Result<Joker> {
        let p = self.p;
        if !(p.lambda > 0.0 && p.lambda.is_finite()) {
            return Err(invalid(
                "lambda",
                format!(
                    "must be positive and finite (C = 1/lambda), got {}",
                    p.lambda
                ),
            ));
        }
        p.loss.validate()?;
        if let Bandwidth::Gamma(g) = p.bandwidth {
            Kernel {
                kind: p.kernel,
                gamma: g,
            }
            .validate()?;
        }
        if p.n_components == Some(0) {
            return Err(invalid(
                "n_components",
                "the number of random features M must be >= 1 (or use the exact kernel)",
            ));
        }
        validate_solver(&p.solver)?;
        validate_bias(&p)?;
        validate_intercept(&p)?;
        if let FeatureKind::Nystrom(_) = p.feature_map {
            if p.n_components.is_none() {
                return Err(invalid(
                    "feature_map",
                    "a Nystrom map needs a number of centres (n_components), not the exact kernel",
                ));
            }
            if p.dsg.is_some() {
                return Err(invalid(
                    "feature_map",
                    "the doubly stochastic solvers regenerate random features from the seed; a Nystrom map is for DBCD-TR",
                ));
            }
        }
        if let Some(k) = &p.full_krr {
            if p.loss != Loss::SquaredError || p.n_components.is_some() {
                return Err(invalid(
                    "full_krr",
                    "Skotch, ASkotch and Nystrom-PCG solve exact kernel ridge regression: use the squared loss and the exact kernel (.exact())",
                ));
            }
            k.validate()?;
        }
        if let Some(cfg) = &p.dsg {
            validate_dsg(&p, cfg)?;
        }
        if p.multiclass == Some(Multiclass::OneVsOne) && (p.dsg.is_some() || p.full_krr.is_some()) {
            return Err(invalid(
                "multiclass",
                "one-vs-one trains its pairs with DBCD-TR; the doubly stochastic solvers and full KRR take one-vs-rest",
            ));
        }
        if p.auto_loss && p.task() == Task::Classification {
            return Err(invalid(
                "auto_loss",
                format!(
                    "the automatic loss is a regression loss; this fit is a classification (the {} loss)",
                    p.loss.name()
                ),
            ));
        }
        if p.probability && p.task == Some(Task::Regression) {
            return Err(invalid(
                "probability",
                "class probabilities need a classification (a regression predicts values)",
            ));
        }
        if p.loss.is_classifier() && p.task == Some(Task::Regression) {
            return Err(invalid(
                "task",
                format!(
                    "the {} loss is a classifier; it cannot do regression",
                    p.loss.name()
                ),
            ));
        }
        Ok(p)
    }
}

/// The bias feature: finite and `>= 0`, and only where a random map is trained by DBCD-TR.
fn validate_bias(p: &Joker) -> Result<()> {
    crate::features::check_bias(p.bias)?;
    if p.bias == 0.0 {
        return Ok(());
    }
    let refusal = if p.n_components.is_none() {
        Some(
            "an exact-kernel fit has no feature to append: the bias feature is for random features",
        )
    } else if p.feature_map != FeatureKind::Random {
        Some("the bias feature is appended to random features, not to a Nystrom map")
    } else if p.dsg.is_some() {
        Some(
            "the doubly stochastic solvers regenerate random features from the seed; the bias feature is for DBCD-TR",
        )
    } else {
        None
    };
    match refusal {
        Some(why) => Err(invalid("bias", why)),
        None => Ok(()),
    }
}

/// The intercept: for the regression losses, solved by DBCD-TR.
fn validate_intercept(p: &Joker) -> Result<()> {
    if p.intercept != Some(true) {
        return Ok(());
    }
    let refusal = if p.loss.is_classifier() || p.task == Some(Task::Classification) {
        Some(
            "the intercept is fitted for the regression losses; a classifier's decision function has none",
        )
    } else if p.dsg.is_some() {
        Some("the doubly stochastic solvers fit no intercept; it is found by DBCD-TR")
    } else if p.full_krr.is_some() {
        Some("Skotch, ASkotch and Nystrom-PCG fit no intercept; it is found by DBCD-TR")
    } else {
        None
    };
    match refusal {
        Some(why) => Err(invalid("intercept", why)),
        None => Ok(()),
    }
}

/// The solver settings' ranges (the block, iteration caps, tolerances, trust region).
fn validate_solver(s: &SolverConfig) -> Result<()> {
    if s.block_size == 0 {
        return Err(invalid("block_size", "must be >= 1"));
    }
    if s.max_iter == 0 {
        return Err(invalid("max_iter", "must be >= 1"));
    }
    if !(s.tol >= 0.0) {
        return Err(invalid("tol", format!("must be >= 0, got {}", s.tol)));
    }
    if !(s.delta_max > 0.0 && s.delta_max.is_finite()) {
        return Err(invalid(
            "delta_max",
            format!("must be positive, got {}", s.delta_max),
        ));
    }
    if !(s.shrink_rate > 0.0 && s.shrink_rate <= 1.0) {
        return Err(invalid(
            "shrink_rate",
            format!("must be in (0, 1], got {}", s.shrink_rate),
        ));
    }
    let tr = &s.trust_region;
    if !(tr.eta >= 0.0 && tr.eta < 0.25) {
        return Err(invalid(
            "eta",
            format!("must be in [0, 1/4), got {}", tr.eta),
        ));
    }
    if !(tr.kkt_rtol >= 0.0 && tr.kkt_rtol < 1.0) {
        return Err(invalid(
            "kkt_rtol",
            format!("must be in [0, 1), got {}", tr.kkt_rtol),
        ));
    }
    if tr.max_iter == 0 || tr.max_cg_iter == 0 {
        return Err(invalid(
            "max_cg_iter",
            "trust-region and CG iteration caps must be >= 1",
        ));
    }
    if tr.nystrom_rank > 0 && tr.nystrom_rank >= s.block_size {
        return Err(invalid(
            "nystrom_rank",
            format!(
                "must be below the block size {}, got {}",
                s.block_size, tr.nystrom_rank
            ),
        ));
    }
    Ok(())
}

/// The doubly stochastic solvers' settings and what they need of the rest: random features,
/// a loss with a bounded derivative, the CPU.
fn validate_dsg(p: &Joker, cfg: &DsgConfig) -> Result<()> {
    cfg.validate()?;
    if p.full_krr.is_some() {
        return Err(invalid(
            "dsg",
            "choose one solver: doubly stochastic gradients or full KRR",
        ));
    }
    let Some(m) = p.n_components else {
        return Err(invalid(
            "dsg",
            "the doubly stochastic solvers train random-feature models: set n_components (the cap on the features)",
        ));
    };
    if cfg.feature_block > m {
        return Err(invalid(
            "feature_block",
            format!(
                "a block of {} features exceeds the cap n_components = {m}",
                cfg.feature_block
            ),
        ));
    }
    if !crate::solver::dsg::supports(&p.loss) {
        return Err(invalid(
            "loss",
            format!(
                "the doubly stochastic solvers need a loss with a bounded derivative; {} has none",
                p.loss.name()
            ),
        ));
    }
    if matches!(p.device, Device::Cuda(_)) {
        return Err(JokerError::Unsupported(
            "the doubly stochastic solvers run on the CPU; use device auto or cpu".into(),
        ));
    }
    Ok(())
}

/// Options of one fit beyond the parameters.
#[derive(Default)]
pub struct FitOptions<'a, U> {
    /// Positive weight per sample: a row of weight `k` counts as `k` copies of it, in its box
    /// (`lambda_i = lambda / w_i`) and in the standardisation, the target scaling and the
    /// data-wide width rules (`scale`, `msd`; the median looks at unweighted rows). Class
    /// weights multiply it in the box only, as LIBSVM's `-wi` scales `C` per class.
    pub sample_weight: Option<&'a [f64]>,
    /// A validation set, scored at every check.
    pub validation: Option<&'a Dataset<U>>,
    /// Called at every check; return `false` to stop.
    pub progress: Option<ProgressFn<'a>>,
    /// Start from this model's dual coefficients (same training set, same targets).
    pub warm_start: Option<&'a Model>,
    /// Polled once per iteration; `true` stops the fit at once (stop reason "cancelled",
    /// the model so far returned). Full KRR polls it at its checks. For example
    /// `Some(Box::new(|| flag.load(Ordering::Relaxed)))` with a flag a Ctrl-C handler sets.
    pub interrupt: Option<InterruptFn<'a>>,
}

impl Joker {
    /// Starts a builder with the defaults.
    pub fn builder() -> JokerBuilder {
        JokerBuilder::default()
    }

    /// Whether a fit has an intercept: as asked, or by default for SVR, Huber, L1 and Lp
    /// regression solved by DBCD-TR, in one process or across the ranks of an MPI job
    /// ([`Joker::intercept`]).
    pub fn fits_intercept(&self) -> bool {
        let regression = !self.loss.is_classifier() && self.task() == Task::Regression;
        let robust = matches!(
            self.loss,
            Loss::EpsilonInsensitive { .. } | Loss::Huber { .. } | Loss::Absolute | Loss::Lp { .. }
        );
        let dbcd = self.dsg.is_none() && self.full_krr.is_none();
        regression && dbcd && self.intercept.unwrap_or(robust)
    }

    /// The task these parameters train for.
    pub fn task(&self) -> Task {
        self.task.unwrap_or(if self.loss.is_classifier() {
            Task::Classification
        } else {
            Task::Regression
        })
    }

    /// Trains on `data`.
    pub fn fit<U: Scalar>(&self, data: &Dataset<U>) -> Result<Model> {
        self.fit_with(data, FitOptions::default())
    }

    /// The cap on device memory: an explicit limit only (the device's own free memory is
    /// checked by the engine's memory plan).
    #[cfg(feature = "cuda")]
    fn device_memory_limit(&self) -> Option<usize> {
        match self.max_memory {
            MemoryLimit::Bytes(b) => Some(b),
            _ => None,
        }
    }

    /// Whether these parameters can be fitted on a GPU, or why not.
    pub fn gpu_support(&self) -> std::result::Result<(), String> {
        if self.dsg.is_some() {
            return Err("the doubly stochastic solvers run on the CPU".into());
        }
        if self.n_components.is_none() && !matches!(self.device, Device::Cuda(_)) {
            // Exact kernels use the GPU only when it is asked for by name: the device path
            // for them is validated separately (docs/gpu-validation.md).
            return Err(
                "exact kernels use the GPU only when it is asked for (device cuda:N)".into(),
            );
        }
        if matches!(self.feature_map, FeatureKind::Nystrom(_))
            && self.n_components.is_some()
            && !matches!(self.device, Device::Cuda(_))
        {
            // measured on an H100 with 16 host cores (docs/gpu-validation.md): 10.6 and 19.1
            // ms per iteration on the device at M = 2000 and 4000 against 7.1 and 12.6 on the
            // host, whose factor solves run there either way
            return Err(
                "Nystrom maps use the GPU only when it is asked for (device cuda:N): their factor's solves run on the host, which is faster than the device's kernel tiles"
                    .into(),
            );
        }
        if self.precision != Precision::F32 {
            return Err("the CUDA kernels compute in f32; f64 fits run on the CPU".into());
        }
        Ok(())
    }

    /// Where a fit with these parameters runs, and why (see [`crate::device`]). Fails with
    /// [`JokerError::Device`] only for an explicit [`Device::Cuda`] that cannot be honoured.
    pub fn resolve_device(&self) -> Result<Resolved> {
        resolve(self.device, self.gpu_support())
    }

    /// The multi-class scheme of a fit (`distributed`: over MPI): the one asked for, or the
    /// automatic choice of [`Joker::multiclass`]. It applies to more than two classes only.
    fn scheme(&self, distributed: bool) -> Multiclass {
        match self.multiclass {
            Some(m) => m,
            None if self.n_components.is_none()
                && !distributed
                && self.dsg.is_none()
                && self.full_krr.is_none() =>
            {
                Multiclass::OneVsOne
            }
            None => Multiclass::OneVsRest,
        }
    }

    /// The multi-class scheme of a fit in words, with why (empty for fewer than three classes);
    /// `at_once`: one-vs-one's pairs solved side by side.
    fn describe_scheme(&self, targets: &Targets, distributed: bool, at_once: usize) -> String {
        let k = targets.classes.as_ref().map_or(0, |c| c.len());
        if k < 3 {
            return String::new();
        }
        let what = match targets.multiclass {
            Multiclass::OneVsOne => {
                format!("one-vs-one, {} pairs, {at_once} at a time", k * (k - 1) / 2)
            }
            Multiclass::OneVsRest => format!("one-vs-rest, {k} columns"),
        };
        let why = match (self.multiclass, targets.multiclass) {
            (Some(_), _) => "requested",
            (None, Multiclass::OneVsOne) => {
                "auto: the exact kernel, whose pair problems are small and cached"
            }
            (None, _) if distributed => "auto: one-vs-one is not distributed",
            (None, _) if self.dsg.is_some() || self.full_krr.is_some() => {
                "auto: one-vs-one needs DBCD-TR"
            }
            (None, _) => "auto: a feature map, whose blocks serve every class at once",
        };
        format!("{what} ({why})")
    }

    /// The scheme a fit would take on the exact kernel: the automatic choice of
    /// [`representation_for`](Self::representation_for) sizes the kernel by it.
    fn exact_scheme(&self) -> Multiclass {
        match self.multiclass {
            Some(m) => m,
            None => Multiclass::OneVsOne,
        }
    }

    /// Target columns the solver works on at once for `k` classes under `scheme`: one per
    /// class for one-vs-rest, one for binary problems and for one-vs-one (a pair at a time).
    fn solver_columns(scheme: Multiclass, k: usize) -> usize {
        match scheme {
            Multiclass::OneVsOne => 1,
            Multiclass::OneVsRest => Multiclass::OneVsRest.columns(k),
        }
    }

    /// Rows of the largest kernel matrix a fit on labels `y` forms under `scheme`: all of
    /// them, or under one-vs-one those of the two largest classes.
    fn kernel_rows(&self, y: &[f64], scheme: Multiclass) -> usize {
        let classes = match self.task() {
            Task::Classification => classes_of(y).ok(),
            Task::Regression => None,
        };
        match classes {
            Some(c) if scheme == Multiclass::OneVsOne && c.len() > 2 => {
                let mut counts = class_counts(&c, y);
                counts.sort_by(|a, b| b.total_cmp(a));
                (counts[0] + counts[1]) as usize
            }
            _ => y.len(),
        }
    }

    /// Trains on `data` with weights, a validation set, a progress callback or a warm start.
    pub fn fit_with<U: Scalar>(&self, data: &Dataset<U>, opts: FitOptions<'_, U>) -> Result<Model> {
        // The solvers are compiled in this crate, once per precision, and not again in every
        // crate that calls `fit` (a generic body is compiled where it is used): this wrapper
        // only picks the compiled one. `Scalar` is sealed: `U` is f32 or f64.
        if TypeId::of::<U>() == TypeId::of::<f32>() {
            // SAFETY: `U` is `f32` (equal type ids).
            let (data, opts) = unsafe { same_precision::<U, f32>(data, opts) };
            self.fit_single(data, opts)
        } else {
            // SAFETY: `U` is `f64`: the only other `Scalar`.
            let (data, opts) = unsafe { same_precision::<U, f64>(data, opts) };
            self.fit_double(data, opts)
        }
    }

    /// [`fit_with`](Joker::fit_with) in f32, compiled here.
    #[inline(never)]
    fn fit_single(&self, data: &Dataset<f32>, opts: FitOptions<'_, f32>) -> Result<Model> {
        self.fit_any(data, opts)
    }

    /// [`fit_with`](Joker::fit_with) in f64, compiled here.
    #[inline(never)]
    fn fit_double(&self, data: &Dataset<f64>, opts: FitOptions<'_, f64>) -> Result<Model> {
        self.fit_any(data, opts)
    }

    /// [`fit_with`](Joker::fit_with) in either precision.
    fn fit_any<U: Scalar>(&self, data: &Dataset<U>, opts: FitOptions<'_, U>) -> Result<Model> {
        if data.x.ncols() == 0 {
            return Err(JokerError::EmptyData(format!(
                "the {} rows have no features (0 columns): nothing to fit a kernel on",
                data.len()
            )));
        }
        let chosen = match opts.warm_start {
            Some(_) => None,
            None => self.representation_for(data),
        };
        let exact = match &chosen {
            Some((choice, _)) => *choice == AutoRepr::Exact,
            None => self.n_components.is_none(),
        };
        let (est, loss_choice) = self.loss_for(exact);
        let (est, representation) = match chosen {
            None => (est, String::new()),
            Some((AutoRepr::Exact, why)) => (
                Joker {
                    n_components: None,
                    ..est
                },
                why,
            ),
            Some((AutoRepr::Nystrom, why)) => (
                Joker {
                    feature_map: FeatureKind::Nystrom(Centers::default()),
                    ..est
                },
                why,
            ),
            Some((AutoRepr::Random, why)) => (est, why),
        };
        let weights = opts.sample_weight;
        let mut model = est.fit_on(data, opts, None)?;
        model.training.representation = representation;
        model.training.loss_choice = loss_choice;
        if self.probability && model.loss != Loss::Logistic {
            est.calibrate(&mut model, data, weights)?;
        }
        Ok(model)
    }

    /// Under [`auto_loss`](Joker::auto_loss): these parameters with the regression loss for a
    /// fit on the exact kernel (`exact`) or a feature map, and why; unchanged (and an empty
    /// reason) otherwise.
    fn loss_for(&self, exact: bool) -> (Joker, String) {
        let dbcd = self.dsg.is_none() && self.full_krr.is_none();
        if !self.auto_loss || !dbcd || self.task() != Task::Regression {
            return (self.clone(), String::new());
        }
        let (loss, why) = if exact {
            (
                Loss::EpsilonInsensitive {
                    epsilon: AUTO_EPSILON,
                },
                "the exact kernel: LIBSVM's epsilon-SVR with its intercept, fitted in about KRR's time",
            )
        } else {
            (
                Loss::SquaredError,
                "a feature map: one direct solve, where SVR takes thousands of iterations",
            )
        };
        let why = format!("{} (auto: {why})", loss.name());
        (
            Joker {
                loss,
                ..self.clone()
            },
            why,
        )
    }

    /// Under [`auto_exact`](Joker::auto_exact): the representation this fit takes, and why.
    /// `None` where the choice is not automatic (off, the exact kernel or a Nystrom map asked
    /// for, another solver, or a warm start).
    /// The kernel's representation that a fit on `data` will choose, in words (`exact kernel`,
    /// `2048 Nystrom centres`, `2048 random features`); `None` where the fit does not choose
    /// ([`auto_exact`](Joker::auto_exact) off, or a solver with a fixed representation).
    pub fn chosen_representation<U: Scalar>(&self, data: &Dataset<U>) -> Option<String> {
        let m = self.n_components?;
        self.representation_for(data)
            .map(|(choice, _)| choice.describe(m))
    }

    fn representation_for<U: Scalar>(&self, data: &Dataset<U>) -> Option<(AutoRepr, String)> {
        let m = self.n_components?;
        if !self.auto_exact
            || self.feature_map != FeatureKind::Random
            || self.dsg.is_some()
            || self.full_krr.is_some()
        {
            return None;
        }
        let (n, d) = (data.x.nrows(), data.x.ncols());
        let scheme = self.exact_scheme();
        let nk = self.kernel_rows(&data.y, scheme);
        // the matrix and the rows it is formed from, gathered dense
        let rows = |size: usize| nk.saturating_mul(d).saturating_mul(size);
        let (bytes, precision) = match self.precision {
            Precision::F32 => (
                cached_kernel_bytes::<f32>(nk).saturating_add(rows(4)),
                "f32",
            ),
            Precision::F64 => (
                cached_kernel_bytes::<f64>(nk).saturating_add(rows(8)),
                "f64",
            ),
        };
        let mib = |b: usize| format!("{:.0} MiB", b as f64 / (1u64 << 20) as f64);
        let b = self.solver.block_size.min(n.max(1));
        // the exact fit's other memory, with a target column per class
        let columns = match self.task() {
            Task::Classification => {
                classes_of(&data.y).map_or(1, |c| Self::solver_columns(scheme, c.len()))
            }
            Task::Regression => 1,
        };
        let rest = memory_estimate(n, d, None, columns, b);
        let limit = self.max_memory.bytes();
        let within_limit = limit.is_none_or(|l| rest.saturating_add(bytes) <= l);
        let why = |choice: AutoRepr, reason: String| {
            Some((choice, format!("{} (auto: {reason})", choice.describe(m))))
        };
        let pair = if nk < n { " of the largest pair" } else { "" };
        let matrix = format!(
            "the {nk} x {nk} kernel matrix{pair} and the {nk} x {d} rows in {precision}, {}",
            mib(bytes)
        );
        let beyond = if bytes > self.solver.kernel_cache {
            Some(format!(
                "{matrix}, exceeds the kernel cache of {}",
                mib(self.solver.kernel_cache)
            ))
        } else if !within_limit {
            Some(format!("{matrix}, would exceed the memory limit"))
        } else {
            None
        };
        if let Some(beyond) = beyond {
            let (choice, reason) = self.features_beyond_exact(n, d, m, columns, b);
            why(choice, format!("{beyond}; {reason}"))
        } else {
            let bias = if self.bias > 0.0 {
                "; no bias feature: it is for random features"
            } else {
                ""
            };
            why(
                AutoRepr::Exact,
                format!(
                    "{matrix}, fits the kernel cache of {}{bias}",
                    mib(self.solver.kernel_cache)
                ),
            )
        }
    }

    /// Where the exact kernel does not fit: a Nystrom map of `m` centres where its `n x m`
    /// features fit the kernel cache and the memory limit and the fit runs on the CPU, random
    /// features otherwise, and why. Measured over the shared sets beyond the exact kernel's
    /// cache (`docs/bench/defaults.md`): the Nystrom map was as accurate or more on six of seven
    /// (kin40k's RMSE 6% lower) and faster on five (w8a, whose 300 sparse columns make random
    /// features dear, and the regression sets, where KRR on it is solved directly), 6% slower
    /// on ijcnn1.
    fn features_beyond_exact(
        &self,
        n: usize,
        d: usize,
        m: usize,
        columns: usize,
        b: usize,
    ) -> (AutoRepr, String) {
        let mib = |b: usize| format!("{:.0} MiB", b as f64 / (1u64 << 20) as f64);
        let size = match self.precision {
            Precision::F32 => 4,
            Precision::F64 => 8,
        };
        let bytes = n.saturating_mul(m).saturating_mul(size);
        let features = format!("its {n} x {m} Nystrom features, {}", mib(bytes));
        if self.bias > 0.0 {
            return (
                AutoRepr::Random,
                "random features for the bias feature asked for".into(),
            );
        }
        if matches!(
            self.resolve_device().map(|r| r.placement),
            Ok(Placement::Cuda(_))
        ) {
            return (
                AutoRepr::Random,
                "random features, which the GPU forms and multiplies itself".into(),
            );
        }
        if bytes > self.solver.kernel_cache {
            return (
                AutoRepr::Random,
                format!(
                    "{features}, exceed the kernel cache of {} too",
                    mib(self.solver.kernel_cache)
                ),
            );
        }
        let rest = memory_estimate(n, d, Some(m), columns, b)
            .saturating_add(crate::features::nystrom::memory(n, m, d));
        if self
            .max_memory
            .bytes()
            .is_some_and(|l| rest.saturating_add(bytes) > l)
        {
            return (
                AutoRepr::Random,
                format!("{features}, would exceed the memory limit"),
            );
        }
        (
            AutoRepr::Nystrom,
            format!("{features}, fit it: formed once, closer to the kernel than random features"),
        )
    }

    /// A fit on the device these parameters resolve to (one rank's share under `dist`).
    fn fit_on<U: Scalar>(
        &self,
        data: &Dataset<U>,
        opts: FitOptions<'_, U>,
        dist: Option<Dist<'_>>,
    ) -> Result<Model> {
        let resolved = self.resolve_device()?;
        match (self.precision, resolved.placement) {
            (Precision::F32, Placement::Cuda(i)) => self.fit_gpu(data, opts, i, resolved, dist),
            (Precision::F32, _) => {
                self.fit_in::<U, f32>(data, opts, &Cpu, resolved.to_string(), dist)
            }
            (Precision::F64, _) => {
                self.fit_in::<U, f64>(data, opts, &Cpu, resolved.to_string(), dist)
            }
        }
    }

    /// A fit on CUDA device `index`. Under [`Device::Auto`], a device that cannot be opened,
    /// fails its self-check ([`crate::backend::selfcheck`], once per process) or whose memory
    /// cannot hold the fit sends it back to the CPU (with the reason recorded); under
    /// [`Device::Cuda`] that is an error.
    #[cfg(feature = "cuda")]
    fn fit_gpu<U: Scalar>(
        &self,
        data: &Dataset<U>,
        opts: FitOptions<'_, U>,
        index: usize,
        resolved: Resolved,
        dist: Option<Dist<'_>>,
    ) -> Result<Model> {
        use crate::backend::cuda::Cuda;
        let (n, d) = (data.x.nrows(), data.x.ncols());
        let m = self.n_components.unwrap_or(0);
        let tt = match self.task() {
            Task::Classification => {
                Self::solver_columns(self.scheme(dist.is_some()), classes_of(&data.y)?.len())
            }
            Task::Regression => 1,
        };
        let b = self.solver.block_size.min(n.max(1));
        if self.n_components.is_none() {
            // Exact kernels run only under an explicit Device::Cuda (see gpu_support).
            let g = Cuda::new(index)?.with_memory_limit(self.device_memory_limit());
            g.trusted()
                .map_err(|why| JokerError::Device(format!("cuda:{index}: {why}")))?;
            // the kernel cache the fit will get (fit_in), so that the note says what it runs
            let need = self.check_memory::<U, f32>(&data.x, tt, b, 0)?;
            let nk = self.kernel_rows(&data.y, self.scheme(dist.is_some()));
            let cache = self.kernel_cache_for::<f32>(nk, need);
            let note = if self.full_krr.is_some() {
                format!(
                    "{resolved}; exact kernel tiles and products on the device (rows sent per call), Nystrom factorisations and steps on the host"
                )
            } else if crate::backend::cached::caches_kernel::<f32>(nk, cache) {
                format!(
                    "{resolved}; the kernel matrix formed by the device's tiles and kept in host memory ({} MiB), block solve on the host",
                    cached_kernel_bytes::<f32>(nk) >> 20
                )
            } else {
                let solve = if !crate::backend::cuda::device_solves(tt) {
                    "block solve on the host"
                } else if self.solver.trust_region.nystrom_rank == 0 {
                    "block solve on the device"
                } else {
                    "block solve on the device (Nystrom metric: sketch on the device, factors on the host)"
                };
                let fits = match &data.x {
                    crate::data::Features::Sparse(c) => g.exact_memory_sparse(n, c.nnz(), tt, b)?,
                    crate::data::Features::Dense(_) => g.exact_memory(n, d, tt, b)?,
                };
                match fits {
                    Some(bytes) => format!(
                        "{resolved}; exact kernels with the rows, beta and K_BB resident ({} MiB), {solve}",
                        bytes >> 20
                    ),
                    None => format!(
                        "{resolved}; exact kernel tiles and products on the device, rows sent per call (the resident engine does not fit), block solve on the host"
                    ),
                }
            };
            let mut model = self.fit_in::<U, f32>(data, opts, &g, note, dist)?;
            if let Some(why) = g.exact_fallback() {
                model.training.device += &format!("; exact kernels fell back to the CPU: {why}");
            }
            return Ok(model);
        }
        let gpu = Cuda::new(index).and_then(|g| {
            let g = g.with_memory_limit(self.device_memory_limit());
            g.trusted()
                .map_err(|why| JokerError::Device(format!("cuda:{index}: {why}")))?;
            g.memory_plan(n, d, m, tt, b).map(|plan| (g, plan))
        });
        match gpu {
            Ok((g, plan)) => {
                let note = format!(
                    "{resolved}; {} MiB of device memory, data {}, block solve on the {}",
                    plan.total() >> 20,
                    if plan.resident {
                        "resident"
                    } else {
                        "streamed per block"
                    },
                    if crate::backend::cuda::device_solves(tt) {
                        "device"
                    } else {
                        "host"
                    }
                );
                self.fit_in::<U, f32>(data, opts, &g, note, dist)
            }
            Err(e) if self.device == Device::Auto => {
                let note = format!("cpu (auto: cuda:{index} not used: {e})");
                self.fit_in::<U, f32>(data, opts, &Cpu, note, dist)
            }
            Err(e) => Err(e),
        }
    }

    #[cfg(not(feature = "cuda"))]
    fn fit_gpu<U: Scalar>(
        &self,
        _data: &Dataset<U>,
        _opts: FitOptions<'_, U>,
        index: usize,
        _resolved: Resolved,
        _dist: Option<Dist<'_>>,
    ) -> Result<Model> {
        Err(JokerError::Device(format!(
            "cuda:{index}: this build of joker has no CUDA support"
        )))
    }

    /// A fit on `backend` in the working precision `T`, in named steps: targets, per-sample
    /// regularisation, the memory check, features, warm start, validation, the solve and the
    /// model. With `dist`, `data` is this rank's share and the statistics of the data
    /// (classes, scalings, bandwidth) are taken over all ranks.
    fn fit_in<U: Scalar, T: Scalar>(
        &self,
        data: &Dataset<U>,
        mut opts: FitOptions<'_, U>,
        backend: &dyn Backend<T>,
        device_note: String,
        dist: Option<Dist<'_>>,
    ) -> Result<Model> {
        let start = std::time::Instant::now();
        let comm: &dyn Collective = dist.as_ref().map_or(&Single, |d| d.comm);
        let device_note = match &dist {
            Some(d) => format!(
                "{device_note}; {} ranks, parallel block minimization, {:?} partition",
                comm.size(),
                d.pbm.partition
            ),
            None => device_note,
        };
        let (n, d) = (data.x.nrows(), data.x.ncols());
        // A block never holds more than the whole data set: the default of 512 works on small
        // sets too, in every front end.
        let b = self.solver.block_size.min(n.max(1));
        let scheme = self.scheme(dist.is_some());
        // the weights first: the scalings and the width below count them
        check_weights(opts.sample_weight, n)?;
        let targets = self.encode_targets(&data.y, opts.sample_weight, comm, scheme)?;
        let tt = targets.y.len() / n;
        let pairs = targets.multiclass == Multiclass::OneVsOne;
        if pairs && dist.is_some() {
            return Err(invalid(
                "multiclass",
                "one-vs-one is not distributed: train with one-vs-rest over MPI",
            ));
        }
        // a row of weight k counts as k copies of it: in its box (lambda_i = lambda / w_i) and,
        // for sample weights, in the standardisation and the width below
        let weights = self.row_weights(
            &data.y,
            targets.classes.as_deref(),
            opts.sample_weight,
            comm,
        )?;
        let lam: Vec<f64> = weights.iter().map(|w| self.lambda / w).collect();
        // the statistics count the sample weights (repetition); class weights scale the boxes
        // only, as LIBSVM's -wi (and a streamed fit, which knows the classes only after its
        // first pass, takes the same statistics)
        let weighted = opts.sample_weight;
        let eps: Vec<f64> = lam.iter().map(|l| T::gap_below(1.0 / l)).collect();
        // one-vs-one solves one column at a time and keeps every pair's coefficients
        let need = match pairs {
            true => self.check_memory::<U, T>(&data.x, 1, b, n.saturating_mul(tt) * 16)?,
            false => self.check_memory::<U, T>(&data.x, tt, b, 0)?,
        };
        let solver = SolverConfig {
            block_size: b,
            kernel_cache: self.kernel_cache_for::<T>(self.kernel_rows(&data.y, scheme), need),
            intercept: self.fits_intercept(),
            ..self.solver.clone()
        };

        // the statistics' passes over the rows: the standardisation, and a data-wide width rule
        // whose sums were not taken when a mapped file was opened
        let rule = self.bandwidth.for_fit(
            self.n_components.is_some() && self.feature_map == FeatureKind::Random,
            self.dsg.is_some(),
        );
        let sums_kept = weighted.is_none()
            && matches!(&data.x, Features::Dense(m) if m.opening_sums().is_some());
        let data_wide = matches!(rule, Bandwidth::MeanSquaredDistance | Bandwidth::Scale);
        let statistics =
            f64::from(u8::from(self.standardize)) + f64::from(u8::from(data_wide && !sums_kept));
        let (standardizer, x, kernel, map) =
            self.prepared_features::<U, T>(&data.x, weighted, comm, backend)?;
        let alpha0 = self.warm_start_duals(opts.warm_start, n, tt, d)?;
        let mut hooks = fit_hooks::<U, T>(&mut opts, &standardizer, d, &targets, tt)?;
        let prob = Problem {
            x: &x,
            repr: match &map {
                Some(m) => Repr::Features(m),
                None => Repr::Exact(&kernel),
            },
            loss: self.loss,
            targets: tt,
            y: &targets.y,
            lam: &lam,
            eps: &eps,
        };
        // an exact kernel on several ranks: every rank's rows, on every rank
        let everyone = match (&map, &dist) {
            (None, Some(d)) if d.comm.size() > 1 => Some(pbm::all_rows(&x, d.comm)?),
            _ => None,
        };
        let (sol, solver_name) = match (&self.dsg, &map) {
            _ if dist.is_some() => {
                let cfg = dist
                    .as_ref()
                    .map_or(&PbmConfig::default(), |d| d.pbm)
                    .clone();
                let sol = pbm::solve(
                    backend,
                    &prob,
                    everyone.as_ref(),
                    &solver,
                    &cfg,
                    comm,
                    &mut hooks,
                )?;
                (sol, "")
            }
            (Some(cfg), Some(map)) => {
                if alpha0.is_some() {
                    return Err(invalid(
                        "warm_start",
                        "the doubly stochastic solvers have no dual coefficients to start from",
                    ));
                }
                let sol = self.solve_stochastic(cfg, &x, map, &targets.y, &lam, &mut hooks)?;
                (sol, cfg.variant.name())
            }
            _ if pairs => {
                let weighted = opts.sample_weight.is_some();
                let sol = self.solve_pairs(
                    backend, &prob, &kernel, &solver, alpha0, weighted, &mut hooks,
                )?;
                (sol, "")
            }
            _ => (
                self.solve_dual(
                    backend,
                    &prob,
                    &solver,
                    alpha0,
                    &x,
                    &kernel,
                    &targets.y,
                    tt,
                    opts.sample_weight.is_some(),
                    &mut hooks,
                )?,
                "",
            ),
        };
        // how a Nystrom map's features are kept (the doubly stochastic solvers refuse one)
        let map_note = match &map {
            Some(FeatureMap::Nystrom(ny)) => {
                let rows = self.kernel_rows(&data.y, scheme);
                crate::backend::stored::storage_note::<T>(rows, ny.m(), solver.kernel_cache)
            }
            _ => String::new(),
        };
        let fitted = Fitted {
            sol,
            tt,
            map_note,
            solver_name,
            kernel,
            standardizer,
            targets,
            n_total: comm.sum_one(n as f64)? as usize,
            distributed: dist.is_some(),
            seconds: start.elapsed().as_secs_f64(),
            device_note,
            statistics,
        };
        // a distributed exact model's support rows are every rank's
        Ok(self.assemble(fitted, map.as_ref(), everyone.as_ref().unwrap_or(&x)))
    }

    /// The training rows as the fit sees them (standardised where asked for, dense where that
    /// takes no more memory), the kernel with its resolved bandwidth, and the random-feature map
    /// unless the kernel is exact.
    #[allow(clippy::type_complexity)]
    fn prepared_features<U: Scalar, T: Scalar>(
        &self,
        x: &Features<U>,
        weights: Option<&[f64]>,
        comm: &dyn Collective,
        backend: &dyn Backend<T>,
    ) -> Result<(Standardizer, Features<T>, Kernel, Option<FeatureMap<T>>)> {
        let d = x.ncols();
        if self.standardize && x.is_mapped() {
            return Err(invalid(
                "standardize",
                "rows mapped from a file are used as they are, not standardised during the fit (that would copy them into memory): turn standardisation off (`--no-standardize`), scaling the rows beforehand if they need it",
            ));
        }
        let standardizer = if self.standardize {
            Standardizer::fit_weighted(x, weights, comm)?
        } else {
            Standardizer::identity(d)
        };
        let x: Features<T> = match x {
            // half-full sparse rows made dense as they are scaled, in one pass
            Features::Sparse(c) if dense_is_smaller::<U, T>(c) => {
                Features::Dense(standardizer.transform_to_dense(c)?)
            }
            _ => dense_if_smaller(standardizer.transform(x)?),
        };
        let random = self.n_components.is_some() && self.feature_map == FeatureKind::Random;
        let rule = self.bandwidth.for_fit(random, self.dsg.is_some());
        let gamma = match rule {
            // the data-wide rules from sums over every rank's rows, as one process would
            Bandwidth::MeanSquaredDistance | Bandwidth::Scale => {
                let mut sums = RowSums::of_weighted(&x, weights).packed();
                comm.sum(&mut sums)?;
                gamma_of_sums(self.kernel, rule, &RowSums::unpacked(&sums))?
            }
            // the median looks at a subsample of rows: rank 0's, for every rank
            _ => {
                let mut gamma = [0.0];
                if comm.rank() == 0 {
                    gamma[0] = resolve_gamma(self.kernel, rule, &x, self.solver.seed)?;
                }
                comm.broadcast(0, &mut gamma)?;
                gamma[0]
            }
        };
        let kernel = Kernel {
            kind: self.kernel,
            gamma,
        };
        let map = match (self.n_components, self.feature_map) {
            (Some(m), FeatureKind::Random) => Some(FeatureMap::Random(
                RandomMap::<T>::new(FeatureSpec {
                    kernel,
                    n_components: m,
                    dim: d,
                    seed: self.solver.seed,
                })?
                .with_bias(self.bias)?,
            )),
            (Some(m), FeatureKind::Nystrom(rule)) => Some(FeatureMap::Nystrom(
                self.nystrom_map(rule, m, kernel, &x, comm, backend)?,
            )),
            (None, _) => None,
        };
        Ok((standardizer, x, kernel, map))
    }

    /// The Nystrom map of a fit: centres chosen from rank 0's rows (every rank's, without
    /// `dist`) and sent to every rank, each of which factorises the same kernel matrix.
    fn nystrom_map<T: Scalar>(
        &self,
        rule: Centers,
        m: usize,
        kernel: Kernel,
        x: &Features<T>,
        comm: &dyn Collective,
        backend: &dyn Backend<T>,
    ) -> Result<NystromMap<T>> {
        let seed = self.solver.seed;
        if comm.size() == 1 {
            return NystromMap::fit(kernel, rule, m, x, self.lambda, seed, backend);
        }
        let d = x.ncols();
        let mut count = [0.0];
        let mut centers: Vec<f64> = Vec::new();
        if comm.rank() == 0 {
            let map = NystromMap::fit(kernel, rule, m, x, self.lambda, seed, backend)?;
            centers = map.centers().iter().map(|v| v.to_f64()).collect();
            count[0] = (centers.len() / d.max(1)) as f64;
        }
        comm.broadcast(0, &mut count)?;
        centers.resize(count[0] as usize * d, 0.0);
        comm.broadcast(0, &mut centers)?;
        let centers = centers.into_iter().map(T::from_f64).collect();
        let mut map = NystromMap::from_centers(kernel, centers, d, backend)?;
        map.set_rule(rule, m);
        Ok(map)
    }

    /// A doubly stochastic fit (DSG, UDSG or CDSG) in the average-loss form, each sample's
    /// loss weighted by `lambda / lambda_i`.
    fn solve_stochastic<T: Scalar>(
        &self,
        cfg: &DsgConfig,
        x: &Features<T>,
        map: &FeatureMap<T>,
        y: &[f64],
        lam: &[f64],
        hooks: &mut Hooks<T>,
    ) -> Result<Solution> {
        let weight: Vec<f64> = lam.iter().map(|l| self.lambda / l).collect();
        let problem = DsgProblem {
            rows: DsgRows::Features {
                x,
                y,
                weight: &weight,
            },
            map,
            loss: self.loss,
            targets: y.len() / x.nrows().max(1),
            lambda: self.lambda,
        };
        solve_dsg(&problem, cfg, &DsgRun::of(&self.solver), hooks)
    }

    /// The model of a finished fit. A doubly stochastic fit has no dual coefficients (and so
    /// no gap): it is written in the model format that allows their absence.
    fn assemble<T: Scalar>(
        &self,
        f: Fitted,
        map: Option<&FeatureMap<T>>,
        x: &Features<T>,
    ) -> Model {
        let Fitted { mut sol, .. } = f;
        let tt = f.tt;
        // the intercept, found in the scaled targets' units, moves the scaler's mean
        let mut target_scaler = f.targets.scaler;
        let intercept = sol.intercept.first().map(|&b| {
            target_scaler.mean += b * target_scaler.scale;
            b * target_scaler.scale
        });
        let doubly_stochastic = !f.solver_name.is_empty();
        let multiclass = f.targets.multiclass;
        let scheme = self.describe_scheme(&f.targets, f.distributed, sol.pairs_at_once);
        let theta = sol.theta.take();
        let representation = representation_of(theta, &sol.alpha, map, x, self.solver.seed, tt);
        let last = sol.history.last().cloned();
        Model {
            format: FORMAT_NAME.into(),
            version: if map.and_then(FeatureMap::bias).is_some() {
                FORMAT_VERSION_BIAS
            } else if doubly_stochastic || last.as_ref().is_some_and(|p| p.gap.is_nan()) {
                // version 2 allows the `null` gap of a fit that computed none
                FORMAT_VERSION_STOCHASTIC
            } else if multiclass == Multiclass::OneVsOne {
                FORMAT_VERSION_OVO
            } else {
                FORMAT_VERSION_DUAL
            },
            joker_version: env!("CARGO_PKG_VERSION").into(),
            loss: self.loss,
            kernel: f.kernel,
            lambda: self.lambda,
            precision: self.precision,
            task: self.task(),
            classes: f.targets.classes,
            multiclass,
            n_features: x.ncols(),
            n_targets: tt,
            standardizer: f.standardizer,
            target_scaler,
            representation,
            dual: (!doubly_stochastic && !f.distributed).then_some(sol.alpha),
            data: None,
            calibration: None,
            training: TrainingInfo {
                iterations: sol.iters,
                stop: sol.stop,
                gap: last.as_ref().map_or(f64::NAN, |p| p.gap),
                primal: last.as_ref().map_or(f64::NAN, |p| p.primal),
                dual: last.as_ref().map_or(f64::NAN, |p| p.dual),
                seconds: f.seconds,
                n_samples: f.n_total,
                timings: sol.timings,
                device: match sol.fell_back {
                    Some(why) => format!("{}; {why}", f.device_note),
                    None => f.device_note,
                },
                tr_model: sol.tr_model,
                working_set: sol.working_set,
                start: sol.start,
                intercept,
                representation: String::new(),
                loss_choice: String::new(),
                multiclass: scheme,
                solver: f.solver_name.into(),
                feature_map: match map {
                    Some(FeatureMap::Nystrom(ny)) if f.map_note.is_empty() => ny.describe(),
                    Some(FeatureMap::Nystrom(ny)) => format!("{}; {}", ny.describe(), f.map_note),
                    _ => String::new(),
                },
                search: None,
                passes: sol.passes.clone().map(|p| Passes {
                    statistics: f.statistics,
                    ..p
                }),
            },
            history: sol.history,
        }
    }

    /// The dual solve of a fit: DBCD-TR (under [`Device::Auto`] a device that fails mid-fit
    /// hands it to the CPU), or full KRR when asked for.
    #[allow(clippy::too_many_arguments)]
    fn solve_dual<T: Scalar>(
        &self,
        backend: &dyn Backend<T>,
        prob: &Problem<'_, T>,
        solver: &SolverConfig,
        alpha0: Option<Vec<f64>>,
        x: &Features<T>,
        kernel: &Kernel,
        y: &[f64],
        tt: usize,
        weighted: bool,
        hooks: &mut Hooks<'_, T>,
    ) -> Result<Solution> {
        match &self.full_krr {
            None => {
                let cpu: &dyn Backend<T> = &Cpu;
                let fallback =
                    (self.device == Device::Auto && backend.name() != cpu.name()).then_some(cpu);
                solve(backend, prob, solver, alpha0, hooks, fallback)
            }
            Some(cfg) => {
                let cfg = self.krr_config(cfg, tt, weighted)?;
                full_krr(backend, x, kernel, y, self.lambda, &cfg, hooks)
            }
        }
    }

    /// The full-KRR settings of a fit with `tt` target columns (`weighted`: sample weights
    /// given): one unweighted column only, and the fit's time limit bounds full KRR too (the
    /// shorter one applies).
    fn krr_config(&self, cfg: &KrrConfig, tt: usize, weighted: bool) -> Result<KrrConfig> {
        if tt != 1 || weighted || self.class_weight != ClassWeight::None {
            return Err(invalid(
                "full_krr",
                "full KRR solves one target column without sample or class weights",
            ));
        }
        Ok(KrrConfig {
            time_limit: match (cfg.time_limit, self.solver.time_limit) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            },
            ..cfg.clone()
        })
    }

    /// The targets the solver sees: `+-1` columns for classifiers (one per class, or per pair
    /// of classes under one-vs-one, beyond two classes), scaled values for regression.
    fn encode_targets(
        &self,
        labels: &[f64],
        weights: Option<&[f64]>,
        comm: &dyn Collective,
        scheme: Multiclass,
    ) -> Result<Targets> {
        Ok(match self.task() {
            Task::Classification => {
                let classes = union_sorted(comm, &classes_of(labels)?)?;
                check_class_count(&classes, comm.sum_one(labels.len() as f64)? as usize)?;
                let multiclass = match classes.len() {
                    3.. => scheme,
                    _ => Multiclass::OneVsRest,
                };
                let y = match multiclass {
                    Multiclass::OneVsOne => encode_pairs(labels, &classes)?,
                    Multiclass::OneVsRest => encode_labels(labels, &classes)?,
                };
                Targets {
                    classes: Some(classes),
                    multiclass,
                    y,
                    scaler: TargetScaler::identity(),
                }
            }
            Task::Regression => {
                let scaler = if self.normalize_target {
                    TargetScaler::fit_weighted(labels, weights, comm)?
                } else {
                    TargetScaler::identity()
                };
                Targets {
                    classes: None,
                    multiclass: Multiclass::OneVsRest,
                    y: labels.iter().map(|&v| scaler.forward(v)).collect(),
                    scaler,
                }
            }
        })
    }

    /// The weight of each row, `w_i`: its sample weight times its class weight (all 1 without
    /// either).
    fn row_weights(
        &self,
        labels: &[f64],
        classes: Option<&[f64]>,
        sample_weight: Option<&[f64]>,
        comm: &dyn Collective,
    ) -> Result<Vec<f64>> {
        let n = labels.len();
        let mut w = vec![1.0; n];
        check_weights(sample_weight, n)?;
        if let Some(sw) = sample_weight {
            w.copy_from_slice(sw);
        }
        if let Some(classes) = classes {
            let mut counts = class_counts(classes, labels);
            comm.sum(&mut counts)?;
            let cw = class_weights(&self.class_weight, classes, &counts)?;
            for (wi, yi) in w.iter_mut().zip(labels) {
                let k = classes.binary_search_by(|c| c.total_cmp(yi)).unwrap_or(0);
                *wi *= cw[k];
            }
        } else if self.class_weight != ClassWeight::None {
            return Err(invalid(
                "class_weight",
                "class weights apply to classifiers only",
            ));
        }
        Ok(w)
    }

    /// Refuses a fit whose estimated memory is over the limit, before the big allocations
    /// (`kept`: bytes held beside the solve, such as one-vs-one's finished pairs).
    fn check_memory<U: Scalar, T: Scalar>(
        &self,
        x: &Features<U>,
        tt: usize,
        b: usize,
        kept: usize,
    ) -> Result<usize> {
        let (n, d) = (x.nrows(), x.ncols());
        // the standardised copy of the rows in the working precision (none for rows that stay
        // mapped from a file: the page cache holds those)
        let stays_mapped =
            x.is_mapped() && std::any::TypeId::of::<U>() == std::any::TypeId::of::<T>();
        let data_bytes = match x {
            Features::Dense(_) if stays_mapped => 0,
            Features::Dense(_) => n.saturating_mul(d).saturating_mul(std::mem::size_of::<T>()),
            Features::Sparse(c) => c.nnz() * (std::mem::size_of::<T>() + 4) + (n + 1) * 8,
        };
        let need = match &self.full_krr {
            Some(k) => k.memory(n, d, std::mem::size_of::<T>()),
            None => memory_estimate(n, d, self.n_components, tt, b),
        }
        .saturating_add(data_bytes)
        .saturating_add(kept)
        .saturating_add(match (self.n_components, self.feature_map) {
            (Some(m), FeatureKind::Nystrom(_)) => crate::features::nystrom::memory(n, m, d),
            _ => 0,
        })
        .saturating_add(match self.n_components {
            // the direct KRR solve's system and right-hand sides, in f64
            Some(m) if self.direct_krr_applies(m) => m.saturating_mul(m + tt).saturating_mul(8),
            // the finite Newton start's systems, sample and per-row state
            Some(m) if self.newton_start_applies(n, m, tt) => {
                crate::solver::dbcd::newton_memory(n, m, tt, std::mem::size_of::<T>())
            }
            _ => 0,
        });
        self.max_memory.check(need, || {
            let what = match &self.full_krr {
                Some(k) => format!(
                    "{:?}, {} blocks, rank {}{}",
                    k.method,
                    k.blocks,
                    k.rank,
                    if k.store_preconditioners {
                        ", stored preconditioners"
                    } else {
                        ""
                    }
                ),
                None => match self.n_components {
                    Some(m) => match self.feature_map {
                        FeatureKind::Random => {
                            format!("{m} random features, {tt} target(s), block {b}")
                        }
                        FeatureKind::Nystrom(_) => {
                            format!("{m} Nystrom centres, {tt} target(s), block {b}")
                        }
                    },
                    None => format!("exact kernel, {tt} target(s), block {b}"),
                },
            };
            format!("the fit (n = {n}, d = {d}, {what})")
        })?;
        Ok(need)
    }

    /// The kernel cache this fit may use: the configured budget capped at what the memory
    /// limit leaves beside the fit (`need` bytes without the cache), or none where what it
    /// would keep there does not fit that. Exact DBCD-TR fits keep the `n x n` kernel of `n`
    /// rows (on a GPU too, in host memory; one-vs-one as many pairs' kernels at once as the
    /// cache holds), Nystrom maps their `n x M` features.
    fn kernel_cache_for<T>(&self, n: usize, need: usize) -> usize {
        let bytes = match (self.n_components, self.feature_map) {
            (Some(m), FeatureKind::Nystrom(_)) => stored_feature_bytes::<T>(n, m),
            _ => cached_kernel_bytes::<T>(n),
        };
        match self.max_memory.bytes() {
            None => self.solver.kernel_cache,
            Some(limit) if need.saturating_add(bytes) <= limit => {
                self.solver.kernel_cache.min(limit - need)
            }
            Some(_) => 0,
        }
    }

    /// Whether a DBCD-TR fit with `m` features starts KRR at its exact optimum
    /// ([`SolverConfig::direct_krr`]).
    fn direct_krr_applies(&self, m: usize) -> bool {
        self.solver.direct_krr
            && self.loss == Loss::SquaredError
            && self.dsg.is_none()
            && m <= crate::solver::dbcd::DIRECT_KRR_MAX_FEATURES
    }

    /// Whether a DBCD-TR fit with `m` features and `targets` columns starts L2-SVC at its
    /// primal optimum ([`SolverConfig::newton_start`]).
    fn newton_start_applies(&self, n: usize, m: usize, targets: usize) -> bool {
        self.solver.newton_start
            && self.loss == Loss::SquaredHinge
            && self.dsg.is_none()
            && crate::solver::dbcd::newton_fits(n, m, targets)
    }

    /// The dual coefficients of a warm-start model, checked to belong to this problem.
    fn warm_start_duals(
        &self,
        warm: Option<&Model>,
        n: usize,
        tt: usize,
        d: usize,
    ) -> Result<Option<Vec<f64>>> {
        let Some(m) = warm else {
            return Ok(None);
        };
        let dual = m
            .dual
            .as_ref()
            .ok_or_else(|| invalid("warm_start", "the model holds no dual coefficients"))?;
        if dual.len() != n * tt || m.loss != self.loss || m.n_features != d {
            return Err(invalid(
                "warm_start",
                format!(
                    "the model was trained on other data ({} duals for {} targets, loss {}), this fit has {n} samples, {tt} targets, loss {}",
                    dual.len(),
                    m.n_targets,
                    m.loss.name(),
                    self.loss.name()
                ),
            ));
        }
        Ok(Some(dual.clone()))
    }
}

/// What a finished solve leaves for the model besides the estimator's own settings.
struct Fitted {
    sol: Solution,
    /// Target columns `T`.
    tt: usize,
    /// The doubly stochastic solver's name; empty for a dual (DBCD-TR or full KRR) fit.
    solver_name: &'static str,
    /// How the fit kept its feature map's features, where that is worth saying (a Nystrom
    /// map's), else empty.
    map_note: String,
    kernel: Kernel,
    standardizer: Standardizer,
    targets: Targets,
    seconds: f64,
    device_note: String,
    /// Rows over all ranks (`n` in a single process).
    n_total: usize,
    /// A distributed fit: this rank's dual coefficients are not the model's.
    distributed: bool,
    /// Passes of the statistics over the rows ([`Passes::statistics`]).
    statistics: f64,
}

/// The targets of a fit as the solver sees them.
struct Targets {
    /// Sorted class labels (classifiers).
    classes: Option<Vec<f64>>,
    /// The columns' scheme: one-vs-one for more than two classes split so, else one-vs-rest.
    multiclass: Multiclass,
    /// `n x T`, column-major.
    y: Vec<f64>,
    /// The regression targets' scaling (the identity for classifiers).
    scaler: TargetScaler,
}

/// Sparse rows at least this full are trained on as dense rows: dense storage then takes no
/// more memory (`size_of::<T>()` bytes per entry against `size_of::<T>() + 4` per stored
/// entry: half full in f32, two thirds in f64) and the dense kernels run over contiguous rows.
/// The values are the same, and so is the model.
fn dense_if_smaller<T: Scalar>(x: Features<T>) -> Features<T> {
    match &x {
        Features::Sparse(c) if dense_is_smaller::<T, T>(c) => Features::Dense(c.to_dense()),
        _ => x,
    }
}

/// Whether the sparse rows `c`, held in memory (densifying rows mapped from a file would copy
/// the file into memory), take no more memory stored densely in precision `T`
/// ([`dense_if_smaller`]).
fn dense_is_smaller<U: Scalar, T: Scalar>(c: &crate::data::CsrMatrix<U>) -> bool {
    let size = std::mem::size_of::<T>();
    let entries = c.nrows().saturating_mul(c.ncols());
    !c.is_mapped() && entries.saturating_mul(size) <= c.nnz() * (size + 4)
}

/// The hooks of a fit: its validation set scored as the targets are decoded, the caller's
/// progress callback and interrupt (taken from `opts`).
fn fit_hooks<'a, U: Scalar, T: Scalar>(
    opts: &mut FitOptions<'a, U>,
    standardizer: &Standardizer,
    d: usize,
    targets: &Targets,
    tt: usize,
) -> Result<Hooks<'a, T>> {
    Ok(Hooks {
        validate: validation_hook(
            opts.validation,
            standardizer,
            d,
            targets.classes.clone(),
            targets.scaler,
            tt,
            targets.multiclass,
        )?,
        progress: opts.progress.take(),
        interrupt: opts.interrupt.take(),
    })
}

/// The validation metric of a predictor (accuracy, or RMSE in the original units) on the
/// validation set in the training's preprocessing. Dense validation rows must have the
/// training width (zero-padding them would score something else); sparse rows may omit
/// trailing zero features.
fn validation_hook<'a, U: Scalar, T: Scalar>(
    validation: Option<&Dataset<U>>,
    standardizer: &Standardizer,
    d: usize,
    classes: Option<Vec<f64>>,
    scaler: TargetScaler,
    tt: usize,
    multiclass: Multiclass,
) -> Result<Option<ValidateFn<'a, T>>> {
    let Some(v) = validation else {
        return Ok(None);
    };
    if matches!(v.x, Features::Dense(_)) && v.x.ncols() != d {
        return Err(JokerError::ShapeMismatch(format!(
            "the validation set has {} columns, the training set {d}",
            v.x.ncols()
        )));
    }
    if v.y.len() != v.x.nrows() {
        return Err(JokerError::ShapeMismatch(format!(
            "the validation set has {} rows but {} labels",
            v.x.nrows(),
            v.y.len()
        )));
    }
    let xv: Features<T> = standardizer.transform(&v.x)?;
    let yv = v.y.clone();
    Ok(Some(Box::new(move |pred, intercept| {
        let cols = pred.decision(&Cpu, &xv, tt);
        let nv = xv.nrows();
        match &classes {
            Some(c) => {
                let labels: Vec<f64> = (0..nv)
                    .map(|i| {
                        if tt == 1 {
                            if cols[i] >= 0.0 { c[1] } else { c[0] }
                        } else if multiclass == Multiclass::OneVsOne {
                            let row: Vec<f64> = (0..tt).map(|t| cols[t * nv + i]).collect();
                            c[vote(&row, c.len())]
                        } else {
                            let k = (0..tt)
                                .max_by(|&a, &b| cols[a * nv + i].total_cmp(&cols[b * nv + i]))
                                .unwrap_or(0);
                            c[k]
                        }
                    })
                    .collect();
                accuracy(&labels, &yv)
            }
            None => {
                let b = |k: usize| intercept.get(k / nv.max(1)).copied().unwrap_or(0.0);
                let z: Vec<f64> = cols
                    .iter()
                    .enumerate()
                    .map(|(k, &z)| scaler.inverse(z + b(k)))
                    .collect();
                rmse(&z, &yv)
            }
        }
    })))
}

/// The model's representation of a solution: `theta` for random features, the support rows
/// (nonzero duals in any column) with their coefficients for exact kernels.
fn representation_of<T: Scalar>(
    theta: Option<Vec<f64>>,
    dual: &[f64],
    map: Option<&FeatureMap<T>>,
    x: &Features<T>,
    seed: u64,
    tt: usize,
) -> Representation {
    let (n, d) = (x.nrows(), x.ncols());
    match (theta, map) {
        // `psi(x)^T theta = k(x, C) u`: an exact-kernel model over the centres
        (Some(theta), Some(FeatureMap::Nystrom(ny))) => Representation::Exact {
            n_support: ny.m(),
            support: ny.centers().iter().map(|v| v.to_f64()).collect(),
            alpha: ny.center_coefficients(&theta, tt),
        },
        // A doubly stochastic fit keeps only the features it opened (at most `m.m()`); the
        // bias feature's weight is the last of each column.
        (Some(theta), Some(map)) => Representation::RandomFeatures {
            n_components: theta.len() / tt.max(1) - usize::from(map.bias().is_some()),
            seed,
            theta,
            bias: map.bias().unwrap_or(0.0),
        },
        _ => {
            let rows: Vec<usize> = (0..n)
                .filter(|&i| (0..tt).any(|t| dual[t * n + i] != 0.0))
                .collect();
            let mut sup = vec![T::default(); rows.len() * d];
            x.gather_dense(&rows, &mut sup);
            let mut alpha = Vec::with_capacity(rows.len() * tt);
            for t in 0..tt {
                alpha.extend(rows.iter().map(|&i| dual[t * n + i]));
            }
            Representation::Exact {
                n_support: rows.len(),
                support: sup.iter().map(|v| v.to_f64()).collect(),
                alpha,
            }
        }
    }
}

/// Runs a full-KRR method and reports it like a DBCD-TR solve (objectives, relative gap,
/// relative residual and validation at every check).
fn full_krr<T: Scalar>(
    backend: &dyn Backend<T>,
    x: &Features<T>,
    kernel: &Kernel,
    y: &[f64],
    lambda: f64,
    cfg: &KrrConfig,
    hooks: &mut Hooks<T>,
) -> Result<Solution> {
    let start = std::time::Instant::now();
    let prob = KrrProblem {
        x,
        kernel,
        y,
        lambda,
    };
    let mut history = Vec::new();
    let mut stopped = false;
    let sol = solve_krr(backend, &prob, cfg, |kp, w| {
        let scale = kp.primal.abs().max(kp.dual.abs()).max(f64::MIN_POSITIVE);
        let p = Progress {
            iter: kp.iter,
            epoch: f64::NAN,
            seconds: start.elapsed().as_secs_f64(),
            train_seconds: kp.seconds,
            primal: kp.primal,
            dual: kp.dual,
            gap: ((kp.primal - kp.dual) / scale).max(0.0),
            validation: hooks.validate.as_mut().map(|f| {
                f(
                    &Predictor::Exact {
                        kernel,
                        support: x,
                        rows: None,
                        alpha: w,
                    },
                    &[],
                )
            }),
            accepted: kp.iter,
            rel_residual: Some(kp.rel_residual),
            pairs: None,
        };
        let go = hooks.progress.as_mut().is_none_or(|f| f(&p))
            && !hooks.interrupt.as_mut().is_some_and(|f| f());
        stopped |= !go;
        history.push(p);
        go
    })?;
    // The validation metric needs the coefficients: evaluate it once, at the end.
    if let (Some(f), Some(last)) = (hooks.validate.as_mut(), history.last_mut()) {
        let pred = Predictor::Exact {
            kernel,
            support: x,
            rows: None,
            alpha: &sol.w,
        };
        last.validation = Some(f(&pred, &[]));
    }
    let stop = if sol.converged {
        StopReason::Converged
    } else if stopped {
        StopReason::Cancelled
    } else if cfg.time_limit.is_some_and(|l| start.elapsed() >= l) {
        StopReason::TimeLimit
    } else {
        StopReason::MaxIter
    };
    Ok(Solution {
        alpha: sol.w,
        theta: None,
        iters: sol.iters,
        stop,
        fell_back: None,
        pairs_at_once: 0,
        passes: None,
        intercept: Vec::new(),
        start: String::new(),
        history,
        timings: Default::default(),
        tr_model: "none (full KRR has no trust region)".into(),
        working_set: String::new(),
    })
}

/// Classifiers accept any set of label values, but a label set that looks like regression
/// targets (more than 1000 classes, or more classes than half the samples) is refused rather
/// than turned into a huge one-vs-rest problem.
/// Sample weights: one per row, each finite and positive.
fn check_weights(sample_weight: Option<&[f64]>, n: usize) -> Result<()> {
    let Some(sw) = sample_weight else {
        return Ok(());
    };
    if sw.len() != n {
        return Err(JokerError::ShapeMismatch(format!(
            "{n} samples but {} sample weights",
            sw.len()
        )));
    }
    for (i, &v) in sw.iter().enumerate() {
        if !v.is_finite() {
            return Err(JokerError::NonFinite {
                what: "sample weights",
                row: i,
                col: 0,
            });
        }
        if v <= 0.0 {
            return Err(invalid(
                "sample_weight",
                format!("weights must be positive, sample {i} has {v}"),
            ));
        }
    }
    Ok(())
}

fn check_class_count(classes: &[f64], n: usize) -> Result<()> {
    let k = classes.len();
    if k > 1000 || (k > 2 && 2 * k > n) {
        return Err(JokerError::InvalidLabels(format!(
            "{k} distinct labels in {n} samples look like regression targets, not classes; use a regression loss (krr, huber, svr, l1, lp) or set the task to regression"
        )));
    }
    Ok(())
}

/// How many of the labels `y` are each of `classes`.
fn class_counts(classes: &[f64], y: &[f64]) -> Vec<f64> {
    let mut counts = vec![0.0; classes.len()];
    for v in y {
        if let Ok(k) = classes.binary_search_by(|c| c.total_cmp(v)) {
            counts[k] += 1.0;
        }
    }
    counts
}

/// Weight per class (in the order of `classes`), from the class counts.
fn class_weights(cw: &ClassWeight, classes: &[f64], counts: &[f64]) -> Result<Vec<f64>> {
    Ok(match cw {
        ClassWeight::None => vec![1.0; classes.len()],
        ClassWeight::Balanced => {
            let (n, k) = (counts.iter().sum::<f64>(), classes.len() as f64);
            counts.iter().map(|&c| n / (k * c)).collect()
        }
        ClassWeight::Custom(pairs) => {
            let mut w = vec![1.0; classes.len()];
            for &(label, weight) in pairs {
                if !(weight > 0.0 && weight.is_finite()) {
                    return Err(invalid(
                        "class_weight",
                        format!("weight of class {label} must be positive, got {weight}"),
                    ));
                }
                let k = classes
                    .binary_search_by(|c| c.total_cmp(&label))
                    .map_err(|_| {
                        invalid(
                            "class_weight",
                            format!("class {label} does not occur in the labels {classes:?}"),
                        )
                    })?;
                w[k] = weight;
            }
            w
        }
    })
}

/// `data` and `opts` as the same values of precision `T`.
///
/// # Safety
/// `U` and `T` must be the same type: the casts below then change only the name of the type.
unsafe fn same_precision<'a, 'o, U: Scalar, T: Scalar>(
    data: &'a Dataset<U>,
    opts: FitOptions<'o, U>,
) -> (&'a Dataset<T>, FitOptions<'o, T>) {
    debug_assert_eq!(TypeId::of::<U>(), TypeId::of::<T>());
    let opts = std::mem::ManuallyDrop::new(opts);
    // SAFETY: `U == T` (the caller's guarantee), so both pointers point at values of their
    // target type; `opts` is read once and its original is never dropped (ManuallyDrop).
    unsafe {
        (
            &*(data as *const Dataset<U>).cast::<Dataset<T>>(),
            std::ptr::read((&*opts as *const FitOptions<'o, U>).cast::<FitOptions<'o, T>>()),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::CsrMatrix;

    /// Rows whose dense storage is no larger are made dense with the same values; sparser
    /// ones stay sparse. In f32 the line is half full, in f64 two thirds.
    #[test]
    fn half_full_rows_are_trained_dense() {
        // 3 rows x 4 columns; `full` of the 12 entries stored.
        let csr = |full: usize| {
            let (mut indptr, mut indices, mut values) = (vec![0], vec![], vec![]);
            for k in 0..full {
                indices.push((k % 4) as u32);
                values.push(k as f64 + 0.5);
                if k % 4 == 3 || k + 1 == full {
                    indptr.push(values.len());
                }
            }
            while indptr.len() < 4 {
                indptr.push(values.len());
            }
            Features::Sparse(CsrMatrix::new(3, 4, indptr, indices, values).unwrap())
        };
        let as32 = |x: Features<f64>| x.cast::<f32>();
        assert!(matches!(dense_if_smaller(as32(csr(6))), Features::Dense(_)));
        assert!(matches!(
            dense_if_smaller(as32(csr(5))),
            Features::Sparse(_)
        ));
        assert!(matches!(dense_if_smaller(csr(8)), Features::Dense(_)));
        assert!(matches!(dense_if_smaller(csr(7)), Features::Sparse(_)));
        let Features::Dense(m) = dense_if_smaller(csr(8)) else {
            unreachable!()
        };
        assert_eq!(m.row(0), &[0.5, 1.5, 2.5, 3.5]);
        assert_eq!(m.row(2), &[0.0; 4]);
    }
}

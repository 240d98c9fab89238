//! The command line, declared with clap's derive API.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

const TRAIN_EXAMPLES: &str = "\
Examples:
  joker train -l svc -c 32 -k laplacian -m 20000 a9a
      L2-SVC with 20,000 random Laplacian features; writes a9a.joker.json
  joker train --exact --lambda 1 -b 2048 --max-iter 10000 YearPredictionMSD msd.model
      exact kernel ridge regression
  joker train -l klr --lambda 0.125 -v higgs.val higgs.train higgs.model
      kernel logistic regression, scored on a validation set at every check
  joker train --format csv --label-column first -l huber --delta 2 data.csv
      Huber regression on a CSV file whose first column is the target
  joker train -l klr --solver cdsg -m 4096 --max-iter 2000 a9a
      kernel logistic regression by doubly stochastic gradients with checked revisits";

const PREDICT_EXAMPLES: &str = "\
Examples:
  joker predict a9a.t a9a.joker.json a9a.predictions
  joker predict --decision test.svm model.json          decision values on stdout
  joker predict --proba test.svm klr.model probs.txt    class probabilities (KLR, or train --proba)";

const CONVERT_EXAMPLES: &str = "\
Examples:
  joker convert higgs.svm higgs.npy       writes higgs.npy (float32 rows) and higgs.labels.npy
  joker train --no-standardize -l svc -m 4000 higgs.npy
      trains on the rows mapped from the file; memory holds the model, not the data";

const DEMO_EXAMPLES: &str = "\
Examples:
  joker demo                        20,000 + 5,000 points, L2-SVC, 2048 random features
  joker demo --n 100000 -m 4096     a larger run
  joker demo -l klr --exact --n 4000";

/// Large-scale kernel machines: dual block coordinate descent with a trust region (Joker),
/// over exact kernels or random Fourier features.
#[derive(Parser, Debug)]
#[command(
    name = "joker",
    version,
    about,
    after_help = "Run `joker demo` for a self-contained example, `joker help <command>` for the options of each command."
)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Subcommand, Debug)]
#[allow(clippy::large_enum_variant)] // parsed once
pub enum Command {
    /// Train a model on a LIBSVM or CSV file and save it.
    #[command(after_help = TRAIN_EXAMPLES, allow_negative_numbers = true)]
    Train(TrainArgs),
    /// Predict with a saved model; reports accuracy or RMSE when the file has labels.
    #[command(after_help = PREDICT_EXAMPLES)]
    Predict(PredictArgs),
    /// Print a summary of a saved model.
    Info(InfoArgs),
    /// Convert a LIBSVM or CSV file into .npy rows and labels, which `train` maps instead of
    /// reading (data larger than memory).
    #[command(after_help = CONVERT_EXAMPLES)]
    Convert(ConvertArgs),
    /// Train on a built-in synthetic problem (two noisy interleaved spirals); needs no files.
    #[command(after_help = DEMO_EXAMPLES, allow_negative_numbers = true)]
    Demo(DemoArgs),
}

/// The loss, and so the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LossArg {
    /// Kernel ridge regression, squared error (alias mse).
    #[value(alias = "mse")]
    Krr,
    /// Huber regression (see --delta).
    Huber,
    /// Support vector regression, epsilon-insensitive (see --epsilon).
    Svr,
    /// Least absolute deviations.
    L1,
    /// |y - f|^p / p regression (see --p).
    Lp,
    /// SVM classifier, hinge loss (alias hinge).
    #[value(name = "l1-svc", alias = "hinge")]
    L1Svc,
    /// SVM classifier, squared hinge loss (alias svc).
    #[value(name = "l2-svc", alias = "svc")]
    L2Svc,
    /// Kernel logistic regression; probabilities with `predict --proba` (alias logistic).
    #[value(alias = "logistic", alias = "log")]
    Klr,
}

/// Kernel family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum KernelArg {
    /// exp(-gamma ||x - x'||^2) (alias rbf).
    #[value(alias = "rbf")]
    Gaussian,
    /// exp(-gamma ||x - x'||_1) (alias lap).
    #[value(alias = "lap", alias = "laplace")]
    Laplacian,
    /// Matern with smoothness --nu and length scale 1/gamma.
    Matern,
}

/// How more than two classes are split into binary problems.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum MulticlassArg {
    /// One-vs-one where the fit takes the exact kernel (DBCD-TR, one process), else
    /// one-vs-rest.
    Auto,
    /// One-vs-rest: a column per class, on all the rows.
    Ovr,
    /// One-vs-one: a column per pair of classes, on the pair's rows; votes.
    Ovo,
}

/// Matern smoothness.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum NuArg {
    /// nu = 1/2 (exponential kernel).
    #[value(name = "0.5")]
    Half,
    /// nu = 3/2.
    #[value(name = "1.5")]
    ThreeHalves,
    /// nu = 5/2.
    #[value(name = "2.5")]
    FiveHalves,
}

/// The map from the kernel to features.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum FeaturesArg {
    /// Random Fourier features.
    Rff,
    /// A Nystrom map over M centres chosen from the training rows (see --centers).
    Nystrom,
}

/// How a Nystrom map's centres are chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum CentersArg {
    /// Uniformly at random.
    Uniform,
    /// k-means++ seeding and Lloyd iterations on a sample of rows (cluster means).
    Kmeans,
    /// Approximate ridge leverage scores from a uniform pilot.
    Leverage,
}

/// Kernel scale heuristic.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum BandwidthArg {
    /// By the representation: scale on the exact kernel and Nystrom maps, msd on random
    /// features (chosen on the tuning half of the shared sets; docs/bench/sets.md).
    Auto,
    /// Median pairwise distance of a subsample.
    Median,
    /// Mean squared distance (the Joker reference code's rule).
    Msd,
    /// scikit-learn's "scale": 1 / (d Var X) for the Gaussian.
    Scale,
}

/// Working precision.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum PrecisionArg {
    /// Single precision (faster, half the memory).
    F32,
    /// Double precision.
    F64,
}

/// The solver (`--solver`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SolverArg {
    /// Dual block coordinate descent with a trust region (the default).
    Dbcd,
    /// Doubly stochastic gradients (Dai et al.).
    Dsg,
    /// DSG with uniformly revisited old features (Li and Poczos).
    Udsg,
    /// DSG with checked revisits of old features (Li and Poczos).
    Cdsg,
}

/// Full kernel ridge regression methods (`--full-krr`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum KrrMethodArg {
    /// Accelerated Nystrom-preconditioned block coordinate descent (the paper's method).
    Askotch,
    /// The same without acceleration.
    Skotch,
    /// Conjugate gradients with a rank-r Nystrom preconditioner.
    Pcg,
}

/// The curvature of the trust region's model (random features).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum TrModelArg {
    /// The block Gram Phi_B Phi_B^T (b^2 M flops per block).
    Gram,
    /// The exact kernel block K(X_B, X_B) (b^2 d flops), with the exact ratio test.
    Kernel,
    /// The kernel model where it is predicted to be cheaper (one target column, f32, M at
    /// least twice the block size and well above d), the Gram elsewhere.
    #[default]
    Auto,
}

/// The norm of the block solves' steps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum TrNormArg {
    /// ||s||_2, CG without a preconditioner (the paper's).
    Euclidean,
    /// ||s||_D with D the loss curvature plus the mean kernel diagonal, Jacobi-preconditioned
    /// CG.
    Diagonal,
    /// Diagonal for KLR and Lp (whose curvature varies by orders of magnitude within a block),
    /// Euclidean otherwise.
    #[default]
    Auto,
}

/// How DBCD-TR chooses each block.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum WorkingSetArg {
    /// A block drawn from the coordinates that violate their optimality conditions (needs
    /// the cached exact kernel).
    Shrinking,
    /// The coordinates that violate their optimality conditions most (needs the cached exact
    /// kernel; slower than shrinking, kept for comparison).
    Greedy,
    /// A fixed block drawn at random.
    Random,
    /// Shrinking where the exact kernel is cached, random otherwise.
    #[default]
    Auto,
}

/// Task override.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum TaskArg {
    /// Labels are classes (beyond two, split as --multiclass says: one-vs-one on the exact
    /// kernel, one-vs-rest on features, by default).
    Classification,
    /// Real-valued targets.
    Regression,
}

/// Data file format.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum FormatArg {
    /// Guess from the first data line.
    #[default]
    Auto,
    /// `label index:value ...` (SVMlight); gzip and bzip2 are read transparently.
    Libsvm,
    /// Delimited numbers (comma, tab, semicolon or whitespace), optional header.
    Csv,
    /// Rows in a float32 or float64 `.npy` file, mapped rather than read, with their labels in
    /// `NAME.labels.npy` beside it (written by `joker convert`, or by numpy).
    Npy,
}

/// Where a data file's labels are and how it is laid out.
#[derive(Args, Clone, Debug, Default)]
pub struct DataArgs {
    /// Data file format.
    #[arg(long, value_enum, default_value_t = FormatArg::Auto, help_heading = "Data files")]
    pub format: FormatArg,
    /// CSV: the column holding the label: `first`, `last` or a zero-based index (implies CSV).
    #[arg(long, value_name = "first|last|N", value_parser = parse_label_column, help_heading = "Data files")]
    pub label_column: Option<joker::io::LabelColumn>,
    /// LIBSVM: whether feature indices start at 0 or 1 (default: 0 if any index 0 appears;
    /// implies LIBSVM).
    #[arg(long, value_name = "0|1", value_parser = parse_index_base, help_heading = "Data files")]
    pub index_base: Option<bool>,
}

/// `--combine`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum CombineArg {
    /// Adding for losses with a box, the line search for krr and lp.
    Auto,
    /// Line search along the sum of the ranks' changes.
    LineSearch,
    /// Add the changes (CoCoA+).
    Add,
}

/// `--partition`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum PartitionArg {
    /// Contiguous shares of the file, as read.
    File,
    /// Spread by a seeded hash of the row number.
    Random,
    /// Grouped by k-means.
    Kmeans,
}

/// `joker train`.
#[derive(Args, Debug)]
pub struct TrainArgs {
    /// Training data (LIBSVM or CSV, optionally gzip or bzip2 compressed).
    #[arg(value_name = "TRAIN_FILE")]
    pub train_file: PathBuf,
    /// Where to save the model (`-`: standard output, with the summary on stderr) [default:
    /// <train file name>.joker.json in the current directory].
    #[arg(value_name = "MODEL_FILE")]
    pub model_file: Option<PathBuf>,

    /// Loss (and so the model) [default: from --task, from --delta (huber), --epsilon (svr)
    /// or --p (lp), else from the labels: l2-svc when they are class labels (integers, 2 to 32
    /// distinct values), krr otherwise].
    #[arg(short, long, value_enum, alias = "criterion", help_heading = "Model")]
    pub loss: Option<LossArg>,
    /// Huber: width of the quadratic zone [default: 1].
    #[arg(long, help_heading = "Model")]
    pub delta: Option<f64>,
    /// SVR: half-width of the insensitive tube, in standardised target units [default: 0.1].
    #[arg(long, help_heading = "Model")]
    pub epsilon: Option<f64>,
    /// Lp: the exponent p > 1 [default: 1.5].
    #[arg(long, help_heading = "Model")]
    pub p: Option<f64>,
    /// Regularisation as C = 1/lambda (as in LIBSVM).
    #[arg(
        short = 'c',
        long = "C",
        alias = "c",
        value_name = "C",
        conflicts_with = "lambda",
        help_heading = "Model"
    )]
    pub c: Option<f64>,
    /// Regularisation lambda > 0 [default: 1].
    #[arg(long, help_heading = "Model")]
    pub lambda: Option<f64>,
    /// Force classification or regression [default: from the loss, else from the labels].
    #[arg(long, value_enum, help_heading = "Model")]
    pub task: Option<TaskArg>,
    /// Class weights: `balanced` (n / (K n_k)) or `LABEL:WEIGHT,...` (others weigh 1).
    #[arg(long, value_name = "balanced|LABEL:W,...", value_parser = parse_class_weight, help_heading = "Model")]
    pub class_weight: Option<joker::ClassWeight>,
    /// More than two classes: one-vs-rest, one-vs-one (DBCD-TR in one process), or auto.
    #[arg(long, value_enum, default_value_t = MulticlassArg::Auto, help_heading = "Model")]
    pub multiclass: MulticlassArg,
    /// Calibrate class probabilities (Platt scaling on 5-fold cross-validated decision values,
    /// as LIBSVM's -b 1; about 5 more fits on 4/5 of the rows) for `joker predict --proba`.
    /// KLR models have probabilities without it.
    #[arg(long, conflicts_with_all = ["mpi", "stream", "grow"], help_heading = "Model")]
    pub proba: bool,

    /// Kernel family.
    #[arg(short, long, value_enum, default_value_t = KernelArg::Gaussian, help_heading = "Kernel")]
    pub kernel: KernelArg,
    /// Matern smoothness [default: 1.5].
    #[arg(long, value_enum, help_heading = "Kernel")]
    pub nu: Option<NuArg>,
    /// Explicit kernel scale gamma (features are standardised first unless --no-standardize).
    #[arg(short, long, conflicts_with = "bandwidth", help_heading = "Kernel")]
    pub gamma: Option<f64>,
    /// Kernel scale heuristic when no --gamma is given.
    #[arg(long, value_enum, default_value_t = BandwidthArg::Auto, help_heading = "Kernel")]
    pub bandwidth: BandwidthArg,
    /// Number of features M: random Fourier features, or Nystrom centres [default: 2048].
    /// Without -m, --exact, --features or --grow, the fit takes the exact kernel where its n x n
    /// matrix fits --kernel-cache; beyond, 2048 Nystrom centres (leverage scores) where their
    /// n x 2048 features fit it, and 2048 random features beyond that or on a GPU.
    #[arg(
        short = 'm',
        long,
        alias = "n-rff",
        alias = "n_rff",
        conflicts_with = "exact",
        help_heading = "Kernel"
    )]
    pub n_components: Option<usize>,
    /// The feature map: random Fourier features, or a Nystrom map (psi(x) = L^-1 k(C, x) over
    /// M centres C chosen from the training rows; closer to the exact kernel at equal M)
    /// [default: rff with -m or --grow; else chosen, see -m].
    #[arg(
        long = "features",
        value_enum,
        conflicts_with = "exact",
        help_heading = "Kernel"
    )]
    pub feature_map: Option<FeaturesArg>,
    /// A constant feature B after the random features: an intercept of the decision function,
    /// regularised like the other weights (LIBLINEAR's -B). 0: none. Random features with
    /// DBCD-TR only; an exact kernel chosen automatically has none.
    #[arg(
        long,
        value_name = "B",
        conflicts_with = "exact",
        help_heading = "Kernel"
    )]
    pub bias: Option<f64>,
    /// Fit an unregularised intercept b beside the kernel expansion, the model f(x) + b, as
    /// LIBSVM's SVR [default: for svr, huber, l1 and lp trained by DBCD-TR, also over MPI;
    /// not for krr, whose constant is the targets' mean]
    #[arg(long, conflicts_with = "no_intercept", help_heading = "Loss")]
    pub intercept: bool,
    /// Fit no intercept (the model is the kernel expansion around the targets' mean).
    #[arg(long, help_heading = "Loss")]
    pub no_intercept: bool,
    /// How the Nystrom centres are chosen (with --features nystrom).
    #[arg(long, value_enum, default_value_t = CentersArg::Leverage, help_heading = "Kernel")]
    pub centers: CentersArg,
    /// Use the exact kernel instead of random features (memory and time grow with n).
    #[arg(long, help_heading = "Kernel")]
    pub exact: bool,
    /// Grow the features (random features or Nystrom centres) through these sizes (e.g.
    /// 1000,4000,16000), each fit
    /// warm-started from the last; with -v, stop at the first size that does not improve the
    /// validation metric and keep the best model.
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "M1,M2,...",
        conflicts_with_all = ["exact", "n_components"],
        help_heading = "Kernel"
    )]
    pub grow: Vec<usize>,

    /// Choose C and the kernel width by cross-validation (--folds) over --search-c and
    /// --search-gamma, then fit the winner on all rows; the candidates' table is printed and
    /// saved in the model file.
    #[arg(long, conflicts_with_all = ["grow", "mpi", "stream", "c", "lambda", "gamma"], help_heading = "Model selection")]
    pub search: bool,
    /// Values of C the search tries.
    #[arg(long, value_delimiter = ',', value_name = "C1,C2,...", default_values_t = [0.1, 1.0, 10.0, 100.0], help_heading = "Model selection")]
    pub search_c: Vec<f64>,
    /// Kernel widths the search tries, as factors of the default width's gamma (1: the
    /// default).
    #[arg(long, value_delimiter = ',', value_name = "F1,F2,...", default_values_t = [0.25, 0.5, 1.0, 2.0, 4.0], help_heading = "Model selection")]
    pub search_gamma: Vec<f64>,
    /// Cross-validation folds of the search.
    #[arg(long, default_value_t = 3, help_heading = "Model selection")]
    pub folds: usize,

    /// Train across the processes of an MPI job (`mpirun -n K joker train --mpi ...`): each
    /// rank reads its share of TRAIN_FILE (uncompressed), parallel block minimization trains
    /// one model, rank 0 prints and writes it. Needs a build with `--features mpi`, random
    /// features and an explicit loss (-l).
    #[arg(long, help_heading = "Distributed")]
    pub mpi: bool,
    /// DBCD-TR blocks each rank solves per outer step [default: one pass over its rows].
    #[arg(long, value_name = "N", requires = "mpi", help_heading = "Distributed")]
    pub local_iters: Option<usize>,
    /// Budget of outer steps of the distributed fit.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 1000,
        help_heading = "Distributed"
    )]
    pub max_outer: usize,
    /// How the ranks' changes are combined: a line search along their sum (parallel block
    /// minimization), or adding them with a local model scaled by the number of ranks
    /// (CoCoA+); auto: adding for losses with a box (classifiers, huber, svr, l1), the line
    /// search for krr and lp.
    #[arg(long, value_enum, default_value_t = CombineArg::Auto, help_heading = "Distributed")]
    pub combine: CombineArg,
    /// Where the rows live during the fit: as read (contiguous shares of the file), spread
    /// by a seeded hash, or grouped by k-means (one centre per rank; similar rows together).
    #[arg(long, value_enum, default_value_t = PartitionArg::File, help_heading = "Distributed")]
    pub partition: PartitionArg,
    /// Write a checkpoint of the distributed fit into this folder every --checkpoint-every
    /// outer steps (the dual coefficients in file row order; resumable on any number of
    /// ranks).
    #[arg(
        long,
        value_name = "DIR",
        requires = "mpi",
        help_heading = "Distributed"
    )]
    pub checkpoint: Option<PathBuf>,
    /// Outer steps between checkpoints (0: by time only, see --checkpoint-seconds).
    #[arg(
        long,
        value_name = "N",
        default_value_t = 10,
        help_heading = "Distributed"
    )]
    pub checkpoint_every: usize,
    /// Also write a checkpoint when this many seconds have passed since the last one
    /// (whichever of the two comes first).
    #[arg(long, value_name = "S", help_heading = "Distributed")]
    pub checkpoint_seconds: Option<f64>,
    /// Continue from the last complete checkpoint in this folder (same training file; any
    /// number of ranks).
    #[arg(
        long,
        value_name = "DIR",
        requires = "mpi",
        help_heading = "Distributed"
    )]
    pub resume: Option<PathBuf>,

    /// Memory for what is formed once and kept when it fits: the exact kernel matrix (n^2
    /// values) or a Nystrom map's features (n x M); 0 forms them block by block [default: 2048].
    #[arg(long, value_name = "MiB", help_heading = "Solver")]
    pub kernel_cache: Option<usize>,
    /// Block size |B| [default: 512, 256 on a cached exact kernel (128 for l1-svc, svr and l1), or the number of samples if smaller].
    #[arg(short, long, alias = "blksz", help_heading = "Solver")]
    pub block_size: Option<usize>,
    /// Iteration budget [default: 10000; on rows mapped from a file larger than the memory
    /// the page cache can have, one pass over the rows, since each pass reads the file].
    #[arg(long, alias = "max_iter", help_heading = "Solver")]
    pub max_iter: Option<usize>,
    /// Stop when the relative duality gap is at most this.
    #[arg(long, default_value_t = 1e-3, help_heading = "Solver")]
    pub tol: f64,
    /// Run until the gap reaches --tol, also where the fit has stalled (by default a fit
    /// within 10 x --tol whose dual objective rose by less than --tol / 10 per pass over the
    /// last 3 passes stops, as "stalled"; distributed fits, --mpi, always run to --tol).
    #[arg(long, help_heading = "Solver")]
    pub no_stall: bool,
    /// Solve KRR on features (M up to 4096) by DBCD-TR from zero instead of starting from the
    /// exact optimum of the M x M primal system (one pass over the data).
    #[arg(long, help_heading = "Solver")]
    pub no_direct_krr: bool,
    /// Solve L2-SVC on features (M up to 4096) by DBCD-TR from zero instead of starting from
    /// its optimum found in the primal by a finite Newton method.
    #[arg(long, help_heading = "Solver")]
    pub no_newton_start: bool,
    /// Stop after this many seconds.
    #[arg(long, value_name = "SECONDS", help_heading = "Solver")]
    pub time_limit: Option<f64>,
    /// Check the gap (a full pass over the data) every this many iterations [default: once
    /// per pass, n / block size; four times a pass for an intercept searched on the cached
    /// exact kernel without -v].
    #[arg(long, value_name = "ITERS", help_heading = "Solver")]
    pub check_every: Option<usize>,
    /// Rank of a Nystrom preconditioner for the block solver's CG (0: none). Fewer CG
    /// iterations per block, each dearer (see docs/solver.md); must be below the block size.
    #[arg(long, default_value_t = 0, value_name = "R", help_heading = "Solver")]
    pub nystrom_rank: usize,
    /// The trust region's model curvature with random features: the block Gram, or the exact
    /// kernel block with the exact ratio test (fewer flops per iteration at large M; see
    /// docs/solver.md).
    #[arg(long, value_enum, default_value_t = TrModelArg::Auto, value_name = "MODEL", help_heading = "Solver")]
    pub tr_model: TrModelArg,
    /// The norm in which the block solves measure their steps (see docs/solver.md); ignored
    /// with --nystrom-rank, whose metric has its own diagonal.
    #[arg(long, value_enum, default_value_t = TrNormArg::Auto, value_name = "NORM", help_heading = "Solver")]
    pub tr_norm: TrNormArg,
    /// How each block is chosen: drawn from the coordinates that violate their optimality
    /// conditions (shrinking) or the worst of them (greedy), both with the cached exact kernel,
    /// which keeps every decision value; or a fixed block drawn at random.
    #[arg(long, value_enum, default_value_t = WorkingSetArg::Auto, value_name = "RULE", help_heading = "Solver")]
    pub working_set: WorkingSetArg,
    /// Seed of the random features and of the block order.
    #[arg(long, default_value_t = 42, help_heading = "Solver")]
    pub seed: u64,

    /// The solver: DBCD-TR (dual block coordinate descent with a trust region), or doubly
    /// stochastic gradients: dsg (a new random-feature block every step), udsg (alternating
    /// new and uniformly revisited blocks), cdsg (old blocks revisited when their checked step
    /// is larger). The doubly stochastic solvers open at most -m features, count --max-iter in
    /// mini-batch steps and have no duality gap (--tol does not apply); see docs/dsg.md.
    #[arg(long, value_enum, default_value_t = SolverArg::Dbcd, help_heading = "Doubly stochastic gradients")]
    pub solver: SolverArg,
    /// Rows per step of the doubly stochastic solvers [default: 256].
    #[arg(long, value_name = "B", help_heading = "Doubly stochastic gradients")]
    pub batch_size: Option<usize>,
    /// Random features opened per step [default: 64].
    #[arg(long, value_name = "R", help_heading = "Doubly stochastic gradients")]
    pub feature_block: Option<usize>,
    /// theta of the step size theta / (t + t0) [default: 1000].
    #[arg(
        long,
        value_name = "THETA",
        help_heading = "Doubly stochastic gradients"
    )]
    pub step_theta: Option<f64>,
    /// t0 of the step size theta / (t + t0) [default: 1000].
    #[arg(long, value_name = "T0", help_heading = "Doubly stochastic gradients")]
    pub step_t0: Option<f64>,

    /// Solve exact kernel ridge regression with ASkotch, Skotch or Nystrom-PCG instead of
    /// DBCD-TR (needs --exact and --loss krr). It stops at --krr-tol, --max-iter or
    /// --time-limit; --check-every sets how often the residual is computed [default: 50].
    #[arg(long, value_enum, value_name = "METHOD", help_heading = "Full KRR")]
    pub full_krr: Option<KrrMethodArg>,
    /// Number of blocks B of ASkotch and Skotch [default: 10].
    #[arg(
        long,
        value_name = "B",
        requires = "full_krr",
        help_heading = "Full KRR"
    )]
    pub krr_blocks: Option<usize>,
    /// Rank r of the Nystrom preconditioners [default: 100].
    #[arg(
        long,
        value_name = "R",
        requires = "full_krr",
        help_heading = "Full KRR"
    )]
    pub krr_rank: Option<usize>,
    /// Stop when the relative residual ||(K + lambda I) w - y|| / ||y|| is at most this
    /// [default: 1e-6].
    #[arg(
        long,
        value_name = "TOL",
        requires = "full_krr",
        help_heading = "Full KRR"
    )]
    pub krr_tol: Option<f64>,
    /// ASkotch, Skotch: keep the B block preconditioners (O(n r) memory) instead of a fresh
    /// sketch per step.
    #[arg(long, requires = "full_krr", help_heading = "Full KRR")]
    pub krr_store_preconditioners: bool,
    /// Working precision.
    #[arg(long, value_enum, default_value_t = PrecisionArg::F32, help_heading = "Solver")]
    pub precision: PrecisionArg,
    /// Where to fit: auto (a GPU when one is usable and the model runs there: random features
    /// in f32), cpu, cuda or cuda:N.
    #[arg(
        long,
        default_value = "auto",
        value_name = "DEVICE",
        help_heading = "Solver"
    )]
    pub device: joker::Device,

    /// Do not z-score the features.
    #[arg(long, help_heading = "Preprocessing")]
    pub no_standardize: bool,
    /// Do not z-score regression targets.
    #[arg(long, help_heading = "Preprocessing")]
    pub no_normalize_target: bool,

    /// Data format options (apply to the training and the validation file).
    #[command(flatten)]
    pub data: DataArgs,
    /// LIBSVM: the number of features (default: the largest index found; implies LIBSVM).
    #[arg(long, value_name = "N", help_heading = "Data files")]
    pub n_features: Option<usize>,
    /// Stream the training file: read it a part at a time on every pass instead of into
    /// memory, so that memory holds one part's rows and 8 bytes a row (with --solver dsg, udsg
    /// or cdsg, and -l; an uncompressed LIBSVM or CSV file whose rows are in random order). The
    /// file is read once before the fit (labels, standardisation), once more for the median
    /// bandwidth, and a LIBSVM file without --n-features and --index-base once more for its
    /// width. Standard input (`-`) is first copied beside the model file (MODEL.stdin.tmp,
    /// removed at the end).
    #[arg(long, help_heading = "Data files")]
    pub stream: bool,
    /// With --stream: text read at a time, in MiB.
    #[arg(
        long,
        value_name = "MIB",
        default_value_t = 64,
        requires = "stream",
        help_heading = "Data files"
    )]
    pub chunk_mib: u64,

    /// A validation file, scored at every check (accuracy or RMSE).
    #[arg(short, long, value_name = "FILE", help_heading = "Output")]
    pub validation: Option<PathBuf>,
    /// No progress output (the final summary is still printed).
    #[arg(short, long, help_heading = "Output")]
    pub quiet: bool,
    /// Replace MODEL_FILE even when it holds something other than a joker model.
    #[arg(long, help_heading = "Output")]
    pub force: bool,
    /// Refuse a fit whose estimated memory is larger: bytes, or with a unit (`512M`, `16G`);
    /// `0` for no limit [default: 80% of the available memory].
    #[arg(long, value_name = "SIZE", value_parser = parse_size, help_heading = "Solver")]
    pub max_memory: Option<usize>,
}

/// `joker predict`.
#[derive(Args, Debug)]
pub struct PredictArgs {
    /// Data to predict (same layout as the training file; labels, if meaningful, are scored).
    #[arg(value_name = "DATA_FILE")]
    pub data_file: PathBuf,
    /// A model saved by `joker train`.
    #[arg(value_name = "MODEL_FILE")]
    pub model_file: PathBuf,
    /// Where to write the predictions, one line per sample [default: stdout; `-` too].
    #[arg(value_name = "OUTPUT_FILE")]
    pub output_file: Option<PathBuf>,
    /// Write decision values instead of labels (space-separated for one-vs-rest).
    #[arg(long, conflicts_with = "proba")]
    pub decision: bool,
    /// Write class probabilities (KLR models, and classifiers trained with --proba),
    /// space-separated in the order of the model's classes (see `joker info`).
    #[arg(long)]
    pub proba: bool,
    /// Do not print the score on stderr.
    #[arg(short, long)]
    pub quiet: bool,
    /// Write OUTPUT_FILE even when it is one of the input files.
    #[arg(long)]
    pub force: bool,
    /// Read DATA_FILE a part at a time and write each part's predictions before reading the
    /// next, so that memory holds one part (an uncompressed LIBSVM or CSV file; a LIBSVM file
    /// without --index-base is read once more first, for its index base).
    #[arg(long)]
    pub stream: bool,
    /// With --stream: text read at a time, in MiB.
    #[arg(long, value_name = "MIB", default_value_t = 64, requires = "stream")]
    pub chunk_mib: u64,
    /// Data format options.
    #[command(flatten)]
    pub data: DataArgs,
}

/// `joker convert`.
#[derive(Args, Debug)]
pub struct ConvertArgs {
    /// An uncompressed LIBSVM or CSV file on disk.
    #[arg(value_name = "DATA_FILE")]
    pub input: PathBuf,
    /// The rows file to write (`.npy`); the labels go to the same name with `.labels.npy`.
    /// With `--csr`, a directory of CSR arrays with `labels.npy` inside. Default: DATA_FILE
    /// with the extension `.npy` (`.csr` with `--csr`).
    #[arg(value_name = "ROWS_FILE")]
    pub output: Option<PathBuf>,
    /// Write the rows as CSR arrays (`data.npy`, `indices.npy`, `indptr.npy`, `shape.npy`, as
    /// numpy saves a scipy matrix) in a directory: only the stored entries, for sparse data.
    #[arg(long)]
    pub csr: bool,
    /// Data format options.
    #[command(flatten)]
    pub data: DataArgs,
    /// LIBSVM: the number of features (default: the largest index found, which costs a
    /// second pass over the file; implies LIBSVM).
    #[arg(long, value_name = "N", help_heading = "Data files")]
    pub n_features: Option<usize>,
    /// Text read at a time, in MiB.
    #[arg(long, value_name = "MIB", default_value_t = 64)]
    pub chunk_mib: u64,
    /// Overwrite existing output files.
    #[arg(long)]
    pub force: bool,
    /// No progress output.
    #[arg(short, long)]
    pub quiet: bool,
}

/// `joker info`.
#[derive(Args, Debug)]
pub struct InfoArgs {
    /// A model saved by `joker train`.
    #[arg(value_name = "MODEL_FILE")]
    pub model_file: PathBuf,
}

/// `joker demo`.
#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Training points (a quarter as many test points are added).
    #[arg(long, default_value_t = 20_000)]
    pub n: usize,
    /// Input dimension (for more than 2 the spirals lie on a random plane, plus noise).
    #[arg(short, long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(2..=10))]
    pub dim: u16,
    /// Loss.
    #[arg(short, long, value_enum, default_value_t = LossArg::L2Svc)]
    pub loss: LossArg,
    /// Number of random Fourier features M.
    #[arg(short = 'm', long, default_value_t = 2048, conflicts_with = "exact")]
    pub n_components: usize,
    /// Use the exact kernel (slow beyond a few thousand points).
    #[arg(long)]
    pub exact: bool,
    /// Regularisation lambda.
    #[arg(long, default_value_t = 1.0)]
    pub lambda: f64,
    /// Gaussian kernel scale on the standardised inputs [default: 8 / dim].
    #[arg(short, long)]
    pub gamma: Option<f64>,
    /// Iteration budget.
    #[arg(long, default_value_t = 2000)]
    pub max_iter: usize,
    /// Seed of the data, the random features and the block order.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// No progress output.
    #[arg(short, long)]
    pub quiet: bool,
}

/// Parses `--label-column`: `first`, `last` or a zero-based index.
fn parse_label_column(s: &str) -> Result<joker::io::LabelColumn, String> {
    s.parse()
}

/// Parses `--index-base`: `0` gives `true` (zero-based), `1` gives `false`.
fn parse_index_base(s: &str) -> Result<bool, String> {
    match s {
        "0" => Ok(true),
        "1" => Ok(false),
        _ => Err(format!("expected 0 or 1, got `{s}`")),
    }
}

/// Parses `--class-weight`: `balanced`, `none` or `LABEL:WEIGHT,...`.
fn parse_class_weight(s: &str) -> Result<joker::ClassWeight, String> {
    use joker::ClassWeight;
    match s {
        "balanced" => return Ok(ClassWeight::Balanced),
        "none" => return Ok(ClassWeight::None),
        _ => {}
    }
    let mut pairs = Vec::new();
    for part in s.split(',') {
        let (l, w) = part
            .split_once(':')
            .ok_or_else(|| format!("expected `balanced` or `LABEL:WEIGHT,...`, got `{part}`"))?;
        let label: f64 = l
            .trim()
            .parse()
            .map_err(|_| format!("bad label `{l}` in `{part}`"))?;
        let weight: f64 = w
            .trim()
            .parse()
            .map_err(|_| format!("bad weight `{w}` in `{part}`"))?;
        pairs.push((label, weight));
    }
    Ok(ClassWeight::Custom(pairs))
}

/// A size in bytes: a number with an optional unit K, M, G or T (powers of 1024, an optional
/// trailing `B` or `iB`).
fn parse_size(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let t = t
        .strip_suffix("iB")
        .or_else(|| t.strip_suffix('B'))
        .unwrap_or(t);
    let (num, unit) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => (&t[..i], c.to_ascii_uppercase()),
        _ => (t, ' '),
    };
    let shift = match unit {
        ' ' => 0,
        'K' => 10,
        'M' => 20,
        'G' => 30,
        'T' => 40,
        _ => {
            return Err(format!(
                "unknown unit in `{s}`; use K, M, G or T (e.g. 16G)"
            ));
        }
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("expected a size such as 4096, 512M or 16G, got `{s}`"))?;
    let bytes = v * (1u64 << shift) as f64;
    if !(bytes >= 0.0 && bytes < usize::MAX as f64) {
        return Err(format!("`{s}` is not a size in bytes"));
    }
    Ok(bytes as usize)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn aliases_and_defaults() {
        let cli =
            Cli::try_parse_from(["joker", "train", "-l", "svc", "--c", "4", "a.svm"]).unwrap();
        let Command::Train(t) = cli.command else {
            panic!()
        };
        assert_eq!(t.loss, Some(LossArg::L2Svc));
        assert_eq!(t.c, Some(4.0));
        assert_eq!(t.n_components, None);
        assert!(
            Cli::try_parse_from(["joker", "train", "-c", "1", "--lambda", "1", "a"]).is_err(),
            "C and lambda conflict"
        );
        assert!(Cli::try_parse_from(["joker", "train", "-m", "10", "--exact", "a"]).is_err());
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("512M"), Ok(512 << 20));
        assert_eq!(parse_size("1.5GiB"), Ok(3 << 29));
        assert_eq!(parse_size("0"), Ok(0));
        assert!(parse_size("12X").is_err() && parse_size("-1").is_err());
        assert_eq!(
            parse_class_weight("1:2, -1:0.5"),
            Ok(joker::ClassWeight::Custom(vec![(1.0, 2.0), (-1.0, 0.5)]))
        );
    }
}

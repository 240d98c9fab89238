//! `joker train`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use joker::io::stream::TextStream;
use joker::solver::dbcd::{CACHED_BLOCK, CACHED_BLOCK_FLAT};
use joker::solver::dsg::DsgConfig;
use joker::solver::krr::{KrrConfig, KrrMethod};
use joker::{
    AUTO_EPSILON, Bandwidth, Centers, Dataset, FeatureKind, FitOptions, GrowthStage, Joker,
    KernelKind, Loss, MaternNu, Model, Multiclass, Precision, Scalar, Task, TrModel, TrNorm,
    WorkingSet,
};

use super::args::{
    BandwidthArg, CentersArg, FeaturesArg, KernelArg, KrrMethodArg, LossArg, MulticlassArg, NuArg,
    PrecisionArg, SolverArg, TaskArg, TrModelArg, TrNormArg, TrainArgs, WorkingSetArg,
};
use super::info::{describe_classes, describe_kernel, describe_kind, describe_lambda};
use super::progress::Reporter;
use super::{CliResult, Score, fail, labels, read_data, read_data_with_layout, sig};

/// `--max-iter` when not given.
const DEFAULT_MAX_ITER: usize = 10_000;
/// More classes than this is almost surely a regression target given to a classifier.
const MAX_CLASSES: usize = 1000;
/// More classes than this with a non-integral label is taken for a regression target.
const MAX_FRACTIONAL_CLASSES: usize = 20;
/// The loss of `--loss` with its parameters; a parameter of another loss is an error.
pub fn loss_of(
    loss: LossArg,
    delta: Option<f64>,
    epsilon: Option<f64>,
    p: Option<f64>,
) -> CliResult<Loss> {
    let name = |l: LossArg| {
        clap::ValueEnum::to_possible_value(&l).map_or_else(String::new, |v| v.get_name().into())
    };
    for (flag, given, owner) in [
        ("--delta", delta.is_some(), LossArg::Huber),
        ("--epsilon", epsilon.is_some(), LossArg::Svr),
        ("--p", p.is_some(), LossArg::Lp),
    ] {
        if given && loss != owner {
            return fail(format!(
                "{flag} applies to the {} loss only (the loss is {})",
                name(owner),
                name(loss)
            ));
        }
    }
    Ok(match loss {
        LossArg::Krr => Loss::SquaredError,
        LossArg::Huber => Loss::Huber {
            delta: delta.unwrap_or(1.0),
        },
        LossArg::Svr => Loss::EpsilonInsensitive {
            epsilon: epsilon.unwrap_or(0.1),
        },
        LossArg::L1 => Loss::Absolute,
        LossArg::Lp => Loss::Lp {
            p: p.unwrap_or(1.5),
        },
        LossArg::L1Svc => Loss::Hinge,
        LossArg::L2Svc => Loss::SquaredHinge,
        LossArg::Klr => Loss::Logistic,
    })
}

/// The kernel family of `--kernel` and `--nu`.
pub fn kernel_of(kernel: KernelArg, nu: Option<NuArg>) -> CliResult<KernelKind> {
    if nu.is_some() && kernel != KernelArg::Matern {
        return fail("--nu applies to the matern kernel only");
    }
    Ok(match kernel {
        KernelArg::Gaussian => KernelKind::Gaussian,
        KernelArg::Laplacian => KernelKind::Laplacian,
        KernelArg::Matern => KernelKind::Matern {
            nu: match nu.unwrap_or(NuArg::ThreeHalves) {
                NuArg::Half => MaternNu::Half,
                NuArg::ThreeHalves => MaternNu::ThreeHalves,
                NuArg::FiveHalves => MaternNu::FiveHalves,
            },
        },
    })
}

/// Labels with at most this many distinct values, all integers, are class labels when neither
/// the loss nor the task is given (LIBSVM's `svm-train` always fits a classifier; 32 covers
/// the 26 letters of the largest multi-class set in common use).
const MAX_INFERRED_CLASSES: usize = 32;

/// The loss the command line names, directly or through a loss parameter or the task; `None`
/// when it is left to the labels ([`inferred_loss`]).
fn named_loss(a: &TrainArgs) -> Option<LossArg> {
    a.loss.or(if a.delta.is_some() {
        Some(LossArg::Huber)
    } else if a.epsilon.is_some() {
        Some(LossArg::Svr)
    } else if a.p.is_some() {
        Some(LossArg::Lp)
    } else {
        match a.task {
            Some(TaskArg::Classification) => Some(LossArg::L2Svc),
            Some(TaskArg::Regression) => Some(LossArg::Krr),
            None => None,
        }
    })
}

/// Whether the command line gives neither a loss nor a loss parameter (`--task` aside).
fn loss_left_open(a: &TrainArgs) -> bool {
    a.loss.is_none() && a.delta.is_none() && a.epsilon.is_none() && a.p.is_none()
}

/// The loss for labels `y` when the command line names none: the L2-SVM for class labels
/// (integers, 2 to [`MAX_INFERRED_CLASSES`] distinct values), KRR otherwise; and why. Labels
/// that all hold one value are an error: nothing to classify, and a regression on a constant
/// target is more likely a mistake than a wish.
fn inferred_loss(y: &[f64]) -> Result<(LossArg, String), String> {
    let values = distinct(y);
    if let [v] = values.as_slice() {
        return Err(format!(
            "every label is {}: one class is nothing to classify (is the label column right? see --label-column); to fit a regression on a constant target, give --task regression",
            super::fmt_num(*v)
        ));
    }
    Ok(
        if (2..=MAX_INFERRED_CLASSES).contains(&values.len())
            && values.iter().all(|v| v.fract() == 0.0)
        {
            (
                LossArg::L2Svc,
                format!(
                    "classification (l2-svc), inferred from the labels: {} integer values; --loss krr or --task regression fits a regression",
                    values.len()
                ),
            )
        } else {
            (
                LossArg::Krr,
                format!(
                    "regression, inferred from the labels: {} distinct values{}; --task classification or --loss fits a classifier",
                    values.len(),
                    if values.iter().any(|v| v.fract() != 0.0) {
                        ", not all integers"
                    } else {
                        ""
                    }
                ),
            )
        },
    )
}

/// The validated estimator of the command line, with `loss` (named or inferred).
fn estimator(a: &TrainArgs, loss: LossArg) -> CliResult<Joker> {
    let mut b = Joker::builder()
        .loss(loss_of(loss, a.delta, a.epsilon, a.p)?)
        .kernel(kernel_of(a.kernel, a.nu)?)
        .bandwidth(match (a.gamma, a.bandwidth) {
            (Some(g), _) => Bandwidth::Gamma(g),
            (None, BandwidthArg::Auto) => Bandwidth::Auto,
            (None, BandwidthArg::Median) => Bandwidth::Median,
            (None, BandwidthArg::Scale) => Bandwidth::Scale,
            (None, BandwidthArg::Msd) => Bandwidth::MeanSquaredDistance,
        })
        .precision(match a.precision {
            PrecisionArg::F32 => Precision::F32,
            PrecisionArg::F64 => Precision::F64,
        })
        .standardize(!a.no_standardize)
        .normalize_target(!a.no_normalize_target)
        .bias(a.bias.unwrap_or(0.0))
        .kernel_cache(
            a.kernel_cache
                .map_or(joker::solver::dbcd::DEFAULT_KERNEL_CACHE, |mb| {
                    mb.saturating_mul(1 << 20)
                }),
        )
        .max_iter(a.max_iter.unwrap_or(DEFAULT_MAX_ITER))
        // an iteration budget given is the budget, on mapped rows too
        .passes_beyond_memory(match a.max_iter {
            Some(_) => None,
            None => joker::SolverConfig::default().passes_beyond_memory,
        })
        .tol(a.tol)
        .check_every(a.check_every.unwrap_or(0))
        .nystrom_rank(a.nystrom_rank)
        .tr_model(match a.tr_model {
            TrModelArg::Gram => TrModel::Gram,
            TrModelArg::Kernel => TrModel::Kernel,
            TrModelArg::Auto => TrModel::Auto,
        })
        .tr_norm(match a.tr_norm {
            TrNormArg::Euclidean => TrNorm::Euclidean,
            TrNormArg::Diagonal => TrNorm::Diagonal,
            TrNormArg::Auto => TrNorm::Auto,
        })
        .working_set(match a.working_set {
            WorkingSetArg::Shrinking => WorkingSet::Shrinking,
            WorkingSetArg::Greedy => WorkingSet::Greedy,
            WorkingSetArg::Random => WorkingSet::Random,
            WorkingSetArg::Auto => WorkingSet::Auto,
        })
        .seed(a.seed)
        .stall(!a.no_stall)
        .direct_krr(!a.no_direct_krr)
        .newton_start(!a.no_newton_start)
        .device(a.device);
    if let Some(size) = a.block_size {
        b = b.block_size(size);
    }
    if a.intercept || a.no_intercept {
        b = b.intercept(a.intercept);
    }
    b = match (a.c, a.lambda) {
        (Some(c), _) => {
            if !(c > 0.0 && c.is_finite()) {
                return fail(format!(
                    "invalid parameter `C`: must be positive and finite (lambda = 1/C), got {c}"
                ));
            }
            b.c(c)
        }
        (None, Some(l)) => b.lambda(l),
        (None, None) => b,
    };
    b = if a.exact {
        b.exact()
    } else {
        // the exact kernel where it fits the cache, unless features were asked for
        let auto = a.n_components.is_none()
            && a.grow.is_empty()
            && a.feature_map.is_none()
            && a.solver == SolverArg::Dbcd;
        let map = a.feature_map.unwrap_or(FeaturesArg::Rff);
        b.n_components(a.n_components.unwrap_or(DEFAULT_COMPONENTS))
            .feature_map(feature_kind(map, a.centers))
            .auto_exact(auto)
    };
    // a regression left open takes its loss from the representation (SVR on the exact
    // kernel, KRR on a feature map); one process, DBCD-TR
    let open = loss_left_open(a)
        && loss == LossArg::Krr
        && a.solver == SolverArg::Dbcd
        && a.full_krr.is_none()
        && !a.mpi
        && !a.stream;
    b = b.auto_loss(open);
    if let Some(t) = a.task {
        b = b.task(match t {
            TaskArg::Classification => Task::Classification,
            TaskArg::Regression => Task::Regression,
        });
    }
    if let Some(w) = &a.class_weight {
        b = b.class_weight(w.clone());
    }
    b = b.probability(a.proba);
    match a.multiclass {
        MulticlassArg::Auto => {}
        MulticlassArg::Ovr => b = b.multiclass(Multiclass::OneVsRest),
        MulticlassArg::Ovo => b = b.multiclass(Multiclass::OneVsOne),
    }
    if a.solver != SolverArg::Dbcd {
        if a.full_krr.is_some() {
            return fail("--full-krr and --solver dsg|udsg|cdsg are two solvers: choose one");
        }
        let name = match a.solver {
            SolverArg::Dsg => "dsg",
            SolverArg::Udsg => "udsg",
            _ => "cdsg",
        };
        let mut cfg = DsgConfig::named(name).unwrap_or_default();
        cfg.batch_size = a.batch_size.unwrap_or(cfg.batch_size);
        cfg.feature_block = a.feature_block.unwrap_or(cfg.feature_block);
        cfg.step.theta = a.step_theta.unwrap_or(cfg.step.theta);
        cfg.step.t0 = a.step_t0.unwrap_or(cfg.step.t0);
        b = b.dsg(cfg);
    } else if a.batch_size.is_some()
        || a.feature_block.is_some()
        || a.step_theta.is_some()
        || a.step_t0.is_some()
    {
        return fail(
            "--batch-size, --feature-block, --step-theta and --step-t0 set the doubly stochastic solvers: add --solver dsg, udsg or cdsg",
        );
    }
    if let Some(m) = a.full_krr {
        if !a.exact || named_loss(a) != Some(LossArg::Krr) {
            return fail(
                "--full-krr solves exact kernel ridge regression: add --exact and --loss krr",
            );
        }
        let d = KrrConfig::default();
        b = b.full_krr(KrrConfig {
            method: match m {
                KrrMethodArg::Askotch => KrrMethod::ASkotch,
                KrrMethodArg::Skotch => KrrMethod::Skotch,
                KrrMethodArg::Pcg => KrrMethod::NystromPcg,
            },
            blocks: a.krr_blocks.unwrap_or(d.blocks),
            rank: a.krr_rank.unwrap_or(d.rank),
            tol: a.krr_tol.unwrap_or(d.tol),
            max_iter: a.max_iter.unwrap_or(DEFAULT_MAX_ITER),
            check_every: a.check_every.unwrap_or(d.check_every),
            store_preconditioners: a.krr_store_preconditioners,
            seed: a.seed,
            ..d
        });
    }
    if let Some(s) = a.time_limit {
        // up to about 31,000 years: beyond that a limit is a typo, not a plan
        match Duration::try_from_secs_f64(s) {
            Ok(d) if s > 0.0 && s <= 1e12 => b = b.time_limit(d),
            _ => {
                return fail(format!(
                    "--time-limit must be a positive number of seconds up to 1e12, got {}",
                    super::fmt_num(s)
                ));
            }
        }
    }
    if let Some(bytes) = a.max_memory {
        b = b.max_memory(bytes);
    }
    Ok(b.build()?)
}

/// `<train file name>.joker.json` in the current directory.
fn default_model_path(train: &Path) -> CliResult<PathBuf> {
    match train.file_name() {
        Some(name) => {
            let mut s = name.to_os_string();
            s.push(".joker.json");
            Ok(PathBuf::from(s))
        }
        None => fail(format!(
            "cannot name the model after {}; give MODEL_FILE",
            train.display()
        )),
    }
}

/// Fails now, rather than after training, if the model cannot be written to `path`.
fn check_writable(path: &Path) -> CliResult<()> {
    let err = |e: std::io::Error| {
        super::CliError::Message(format!("cannot write the model to {}: {e}", path.display()))
    };
    if path.is_dir() {
        return fail(format!(
            "cannot write the model to {}: it is a directory",
            path.display()
        ));
    }
    let existed = path.exists();
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .map_err(err)?;
    if !existed {
        match std::fs::remove_file(path) {
            // the ranks of `--mpi` all check the path at once: another one removed it
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            other => other.map_err(err)?,
        }
    }
    Ok(())
}

/// Refuses a model path that would destroy something: an input file, or an existing file that
/// is not a joker model (`joker train TRAIN TEST` must not replace the test set).
fn check_model_path(a: &TrainArgs, model_path: &Path) -> CliResult<()> {
    let mut inputs = vec![("training file", a.train_file.as_path())];
    if let Some(v) = &a.validation {
        inputs.push(("validation file", v.as_path()));
    }
    super::refuse_overwriting_inputs(model_path, "model file", &inputs, a.force)?;
    if !a.force && model_path.is_file() && !super::looks_like_model(model_path) {
        return fail(format!(
            "{} exists and is not a joker model; refusing to replace it (the second file of `joker train` is where the model is written; use -v FILE for a validation set, or --force to replace the file)",
            model_path.display()
        ));
    }
    Ok(())
}

/// Runs `joker train`.
pub fn run(a: TrainArgs) -> CliResult<()> {
    // Checked before reading the data; a loss left to the labels is settled in `train`.
    let est = estimator(&a, named_loss(&a).unwrap_or(LossArg::Krr))?;
    let model_path = match &a.model_file {
        Some(p) => p.clone(),
        None if a.train_file == Path::new("-") => {
            return fail(
                "the training data comes from standard input: give MODEL_FILE, where the model is written",
            );
        }
        None => default_model_path(&a.train_file)?,
    };
    if a.train_file == Path::new("-") && a.validation.as_deref() == Some(Path::new("-")) {
        return fail(
            "standard input (`-`) can hold the training data or the validation data, not both",
        );
    }
    if model_path == Path::new("-") {
        if a.mpi {
            return fail(
                "--mpi writes the model to a file: give MODEL_FILE (`-`, standard output, is not shared by the ranks)",
            );
        }
        super::take_stdout();
    } else {
        check_model_path(&a, &model_path)?;
        check_writable(&model_path)?;
    }
    if a.mpi {
        return train_mpi(&a, &est, &model_path);
    }
    if a.stream {
        return match est.precision {
            Precision::F32 => train_stream::<f32>(&a, &est, &model_path),
            Precision::F64 => train_stream::<f64>(&a, &est, &model_path),
        };
    }
    match est.precision {
        Precision::F32 => train::<f32>(&a, &est, &model_path),
        Precision::F64 => train::<f64>(&a, &est, &model_path),
    }
}

/// A distributed fit over MPI ([`super::distributed`]).
#[cfg(feature = "mpi")]
fn train_mpi(a: &TrainArgs, est: &Joker, model_path: &Path) -> CliResult<()> {
    if named_loss(a).is_none() {
        return fail("give the loss with -l in distributed training (--mpi)");
    }
    super::distributed::train(a, est, model_path)
}

#[cfg(not(feature = "mpi"))]
fn train_mpi(_a: &TrainArgs, _est: &Joker, _model_path: &Path) -> CliResult<()> {
    fail(
        "this build of joker has no MPI support: build it with `cargo build --release --features mpi` (needs an MPI and libclang)",
    )
}

/// Reads the data in the input precision `U`, trains, saves and prints the summary.
fn train<U: Scalar>(a: &TrainArgs, est: &Joker, model_path: &Path) -> CliResult<()> {
    let (train, layout): (Dataset<U>, _) =
        read_data_with_layout(&a.train_file, &a.data, a.n_features, None)?;
    let (n, d) = (train.x.nrows(), train.x.ncols());
    let mut est = est.clone();
    if named_loss(a).is_none() {
        let (loss, why) = inferred_loss(&train.y).map_err(|why| {
            super::CliError::Message(format!("{}: {why}", a.train_file.display()))
        })?;
        est = estimator(a, loss)?;
        if !a.quiet {
            eprintln!("task: {why}");
        }
    }
    // the library caps the block at n as well; capped here, the summary shows the real block
    est.solver.block_size = est.solver.block_size.min(n);
    let task = est.task();
    let classes = match task {
        Task::Classification => Some(distinct(&train.y)),
        Task::Regression => None,
    };
    if let Some(c) = &classes
        && (c.len() > MAX_CLASSES
            || (c.len() > MAX_FRACTIONAL_CLASSES && c.iter().any(|v| v.fract() != 0.0)))
    {
        // a delimited file read with the label in the last column (the default) whose real
        // label is the first column looks exactly like this
        let column_hint =
            if matches!(train.x, joker::Features::Dense(_)) && a.data.label_column.is_none() {
                "; if the label is the first column of the file, say so with --label-column first"
            } else {
                ""
            };
        return fail(format!(
            "{}: the labels hold {} distinct values, too many classes for the {} loss{column_hint}; if they are regression targets, use a regression loss (e.g. -l krr)",
            a.train_file.display(),
            c.len(),
            est.loss.name()
        ));
    }
    let val: Option<Dataset<U>> = match &a.validation {
        Some(p) => Some(read_data(p, &a.data, None, Some(d))?),
        None => None,
    };

    if !a.quiet
        && let Some(column) = layout.label_column
    {
        eprintln!(
            "labels: {} of the file (--label-column first|last|N to change)",
            labels::describe(column, d)
        );
        if task == Task::Classification
            && let Some(w) = labels::other_label_column(&train, column)
        {
            eprintln!("warning: {w}");
        }
    }
    if !a.quiet {
        // how full sparse rows are decides how they are trained: at least half stored, as
        // dense rows, centred when standardised
        let storage = match &train.x {
            joker::Features::Sparse(c) => format!(
                "sparse, {:.0}% of the entries stored",
                100.0 * c.nnz() as f64 / (n as f64 * d as f64).max(1.0)
            ),
            joker::Features::Dense(_) => "dense".to_string(),
        };
        eprintln!(
            "data: {n} samples x {d} features ({storage}){}",
            match &classes {
                Some(c) => format!(", classes {}", describe_classes(c)),
                None => String::new(),
            }
        );
        let solver = match &est.full_krr {
            Some(k) => {
                let blocks = match k.method {
                    KrrMethod::NystromPcg => String::new(),
                    _ => format!("{} blocks, ", k.blocks),
                };
                format!(
                    "{:?}, {blocks}rank {}, max {} iterations, residual tol {}",
                    k.method, k.rank, k.max_iter, k.tol
                )
            }
            None => match &est.dsg {
                Some(g) => format!(
                    "{}, batch {}, feature block {}, step {}/(t + {}), max {} steps",
                    g.variant.name(),
                    g.batch_size.min(n),
                    g.feature_block,
                    g.step.theta,
                    g.step.t0,
                    est.solver.max_iter
                ),
                None => format!(
                    "block {}{}, max {} iterations, tol {}",
                    est.solver.block_size,
                    if est.solver.block_auto && est.solver.block_size > CACHED_BLOCK {
                        format!(
                            " ({CACHED_BLOCK} on a cached exact kernel, \
                             {CACHED_BLOCK_FLAT} there for hinge, SVR and L1)"
                        )
                    } else {
                        String::new()
                    },
                    est.solver.max_iter,
                    est.solver.tol
                ),
            },
        };
        let loss = if est.auto_loss {
            format!(
                "{} (epsilon {AUTO_EPSILON}) on the exact kernel, else {}",
                Loss::EpsilonInsensitive {
                    epsilon: AUTO_EPSILON
                }
                .name(),
                Loss::SquaredError.name()
            )
        } else {
            est.loss.name().to_string()
        };
        eprintln!(
            "fit: {loss}, {} kernel ({}), {}, {}, {solver}",
            describe_kind(est.kernel),
            match est.bandwidth {
                Bandwidth::Gamma(g) => format!("gamma {}", sig(g, 6)),
                Bandwidth::Median => "median bandwidth".into(),
                Bandwidth::Scale => "scale bandwidth".into(),
                Bandwidth::MeanSquaredDistance => "mean squared distance bandwidth".into(),
                Bandwidth::Auto => "auto bandwidth (scale on the exact kernel and Nystrom maps, msd on random features)".into(),
            },
            match (est.n_components, a.grow.as_slice()) {
                (Some(_), [_, ..]) => format!(
                    "{} grown through M = {}",
                    describe_map(est.feature_map),
                    a.grow
                        .iter()
                        .map(|m| m.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                (Some(m), []) if est.auto_exact => match est.chosen_representation(&train) {
                    Some(chosen) => format!("{chosen} (auto)"),
                    None => format!("M = {m} {}", describe_map(est.feature_map)),
                },
                (Some(m), []) => format!("M = {m} {}", describe_map(est.feature_map)),
                (None, _) => "exact kernel".into(),
            },
            if a.search {
                format!(
                    "C and the width by {}-fold cross-validation (C in {}; widths {} times the default)",
                    a.folds,
                    list(&a.search_c),
                    list(&a.search_gamma)
                )
            } else {
                describe_lambda(est.lambda)
            },
        );
    }

    let reporter = Reporter::new(est.solver.max_iter, task, a.quiet);
    let opts = FitOptions {
        validation: val.as_ref(),
        progress: Some(reporter.callback()),
        ..FitOptions::default()
    };
    let model = if a.search {
        drop(opts);
        let model = est.search(
            &train,
            &joker::SearchGrid {
                c: a.search_c.clone(),
                gamma_factors: a.search_gamma.clone(),
                folds: a.folds,
                seed: a.seed,
            },
            |done, total| {
                if !a.quiet && std::io::IsTerminal::is_terminal(&std::io::stderr()) {
                    super::progress::progress_line(&format!("search: {done}/{total} candidates"));
                }
            },
        );
        super::progress::end_line();
        let model = model?;
        if !a.quiet
            && let Some(s) = &model.training.search
        {
            report_search(s);
        }
        model
    } else if a.grow.is_empty() {
        est.fit_with(&train, opts)?
    } else {
        let (model, stages) = est.fit_growing(&train, &a.grow, opts)?;
        reporter.finish();
        if !a.quiet {
            report_growth(&stages, task, model.n_components());
        }
        model
    };
    reporter.finish();
    if !a.quiet {
        eprintln!("device: {}", model.training.device);
        if train.x.is_mapped() {
            let tt = model
                .classes
                .as_ref()
                .map_or(1, |c| if c.len() > 2 { c.len() } else { 1 });
            let resident = joker::solver::dbcd::memory_estimate(
                n,
                d,
                model.n_components(),
                tt,
                est.solver.block_size,
            );
            eprintln!(
                "data: {n} x {d} rows mapped from {} ({:.2} GiB in the page cache as they are read); the fit's own memory was estimated at {} MiB",
                a.train_file.display(),
                (n * d * std::mem::size_of::<U>()) as f64 / (1u64 << 30) as f64,
                resident >> 20
            );
        }
        if !model.training.tr_model.is_empty() {
            eprintln!("trust-region model: {}", model.training.tr_model);
        }
        if !model.training.representation.is_empty() {
            eprintln!("representation: {}", model.training.representation);
        }
        if !model.training.loss_choice.is_empty() {
            eprintln!("loss: {}", model.training.loss_choice);
        }
        if !model.training.feature_map.is_empty() {
            eprintln!("feature map: {}", model.training.feature_map);
        }
        if !model.training.multiclass.is_empty() {
            eprintln!("multiclass: {}", model.training.multiclass);
        }
        if !model.training.working_set.is_empty() {
            eprintln!("working set: {}", model.training.working_set);
        }
        if !model.training.start.is_empty() {
            eprintln!("start: {}", model.training.start);
        }
        if let Some(p) = &model.training.passes {
            eprintln!(
                "passes: {:.2} over the rows (statistics {}, start {:.2}, blocks {:.2}, checks {})",
                p.total(),
                p.statistics,
                p.start,
                p.blocks,
                p.checks
            );
        }
        if let Some(c) = &model.calibration {
            eprintln!(
                "probabilities: Platt's sigmoid per decision column, fitted on {}-fold cross-validated decision values",
                c.folds
            );
        }
    }
    let mut model = model;
    model.data = Some(layout);
    super::save_model(&model, model_path)?;
    summary(&model, Some(&train), val.as_ref(), model_path)
}

/// A doubly stochastic fit on the training file streamed a part at a time
/// ([`Joker::fit_stream`]): the training rows are not scored afterwards (that would be
/// another pass; the validation set is).
fn train_stream<U: Scalar>(a: &TrainArgs, est: &Joker, model_path: &Path) -> CliResult<()> {
    if named_loss(a).is_none() {
        return fail(
            "give the loss with -l when streaming (--stream): the labels are not read before the fit is set up",
        );
    }
    if est.dsg.is_none() {
        return fail(
            "--stream reads the training file in order, a part at a time: add --solver dsg, udsg or cdsg (DBCD-TR reads blocks of rows at random: `joker convert` the file to .npy and train on the mapped rows)",
        );
    }
    if !a.grow.is_empty() {
        return fail("--grow refits DBCD-TR on rows in memory; it does not apply to --stream");
    }
    let quiet = a.quiet;
    // standard input can be read once only: it is copied beside the model file, read from
    // there pass after pass and removed at the end (memory holds one part either way)
    let spool = match a.train_file == Path::new("-") {
        true => Some(Spool::of_stdin(model_path, quiet)?),
        false => None,
    };
    let train_file = spool
        .as_ref()
        .map_or(a.train_file.as_path(), |s| s.0.as_path());
    let format = super::text_format(train_file, &a.data, a.n_features, None)?;
    let stream = TextStream::open(train_file, &format, a.chunk_mib.max(1) << 20, |k, parts| {
        if !quiet {
            super::progress::progress_line(&format!("reading: width {k}/{parts} parts"));
            if k == parts {
                super::progress::end_line();
            }
        }
    })?;
    let val: Option<Dataset<U>> = match &a.validation {
        Some(p) => Some(read_data(p, &a.data, None, None)?),
        None => None,
    };
    let reporter = Reporter::new(est.solver.max_iter, est.task(), a.quiet);
    let reading: joker::ReadingFn<'_> = Box::new(move |pass: &str, k: usize, parts: usize| {
        if !quiet {
            super::progress::progress_line(&format!("reading: {pass} {k}/{parts} parts"));
            if k == parts {
                super::progress::end_line();
            }
        }
    });
    let opts = FitOptions {
        validation: val.as_ref(),
        progress: Some(reporter.callback()),
        ..FitOptions::default()
    };
    if !quiet {
        eprintln!(
            "data: {} streamed in {} parts of about {} MiB",
            train_file.display(),
            stream.parts(),
            a.chunk_mib.max(1)
        );
    }
    let model = est.fit_stream(&stream, opts, Some(reading))?;
    reporter.finish();
    if !quiet {
        eprintln!("device: {}", model.training.device);
        if !model.training.multiclass.is_empty() {
            eprintln!("multiclass: {}", model.training.multiclass);
        }
    }
    super::save_model(&model, model_path)?;
    summary(&model, None, val.as_ref(), model_path)
}

/// Standard input copied to a file beside the model (`MODEL.stdin.tmp`), removed when dropped.
struct Spool(PathBuf);

impl Spool {
    fn of_stdin(model_path: &Path, quiet: bool) -> CliResult<Spool> {
        let mut name = model_path.as_os_str().to_owned();
        name.push(".stdin.tmp");
        let spool = Spool(PathBuf::from(name));
        let copied = std::fs::File::create(&spool.0).and_then(|f| {
            let mut out = std::io::BufWriter::new(f);
            let n = std::io::copy(&mut std::io::stdin().lock(), &mut out)?;
            out.flush().map(|_| n)
        });
        match copied {
            Ok(n) if !quiet => eprintln!(
                "data: standard input copied to {} ({:.1} MiB) to be read pass after pass",
                spool.0.display(),
                n as f64 / (1u64 << 20) as f64
            ),
            Ok(_) => {}
            Err(e) => {
                return fail(format!(
                    "cannot copy standard input to {}: {e}",
                    spool.0.display()
                ));
            }
        }
        Ok(spool)
    }
}

impl Drop for Spool {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Random features (or Nystrom centres) where `-m` is not given.
const DEFAULT_COMPONENTS: usize = 2048;

/// The library's feature map for the CLI's choice.
fn feature_kind(f: FeaturesArg, c: CentersArg) -> FeatureKind {
    match f {
        FeaturesArg::Rff => FeatureKind::Random,
        FeaturesArg::Nystrom => FeatureKind::Nystrom(match c {
            CentersArg::Uniform => Centers::Uniform,
            CentersArg::Kmeans => Centers::KMeans,
            CentersArg::Leverage => Centers::Leverage,
        }),
    }
}

/// The features of a map, for the fit line.
fn describe_map(f: FeatureKind) -> String {
    match f {
        FeatureKind::Random => "random features".into(),
        FeatureKind::Nystrom(c) => format!("Nystrom centres ({})", c.name()),
    }
}

/// One line per stage of a growing fit, and the stage kept.
fn report_growth(stages: &[GrowthStage], task: Task, kept: Option<usize>) {
    for s in stages {
        let metric = match (s.validation, task) {
            (Some(v), Task::Classification) => format!(", validation accuracy {:.2}%", 100.0 * v),
            (Some(v), Task::Regression) => format!(", validation RMSE {}", sig(v, 5)),
            (None, _) => String::new(),
        };
        eprintln!(
            "grow: M = {}: {} iterations, {:.2} s{metric} ({})",
            s.n_components, s.iterations, s.seconds, s.stop
        );
    }
    let total: f64 = stages.iter().map(|s| s.seconds).sum();
    eprintln!("grow: {} fits in {total:.2} s", stages.len());
    if let Some(m) = kept {
        eprintln!("grow: kept the model with M = {m}");
    }
}

/// Numbers separated by commas.
fn list(v: &[f64]) -> String {
    v.iter()
        .map(|x| super::fmt_num(*x))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The candidates of a search, one line each, the winner marked.
fn report_search(s: &joker::SearchRecord) {
    eprintln!(
        "search: {} folds, held-out {} (mean +- spread), the winner refitted on all rows:",
        s.folds, s.metric
    );
    eprintln!(
        "       C   width x        gamma   {:>17}  iterations  seconds",
        s.metric
    );
    for (k, c) in s.candidates.iter().enumerate() {
        eprintln!(
            "{} {:>7} {:>9} {:>12} {:>8.4} +- {:.4} {:>11} {:>8.2}",
            if k == s.best { "*" } else { " " },
            super::fmt_num(c.c),
            super::fmt_num(c.gamma_factor),
            sig(c.gamma, 6),
            c.mean,
            c.spread,
            c.iterations,
            c.seconds
        );
    }
}

/// Sorted distinct values.
fn distinct(y: &[f64]) -> Vec<f64> {
    let mut c = y.to_vec();
    c.sort_by(|a, b| a.total_cmp(b));
    c.dedup();
    c
}

/// Prints the training summary and the scores on the training (`None`: streamed, not kept)
/// and validation sets.
pub(super) fn summary<U: Scalar>(
    model: &Model,
    train: Option<&Dataset<U>>,
    val: Option<&Dataset<U>>,
    model_path: &Path,
) -> CliResult<()> {
    let t = &model.training;
    let last = model.history.last();
    match last.and_then(|p| p.rel_residual) {
        Some(r) => outln!(
            "iterations  {} (stopped: {}, relative residual {r:.3e})",
            t.iterations,
            t.stop
        ),
        None => outln!(
            "iterations  {} (stopped: {}, {:.1} epochs)",
            t.iterations,
            t.stop,
            last.map_or(0.0, |p| p.epoch)
        ),
    }
    if t.solver.is_empty() && t.gap.is_nan() {
        outln!("gap         not computed (it would read the rows mapped from the file again)");
    } else if t.solver.is_empty() {
        outln!(
            "gap         {:.3e} (primal {}, dual {})",
            t.gap,
            sig(t.primal, 8),
            sig(t.dual, 8)
        );
    } else {
        outln!(
            "solver      {} (primal ~{}, estimated from the last mini-batches; no duality gap)",
            t.solver,
            sig(t.primal, 8)
        );
    }
    outln!("time        {:.2} s", t.seconds);
    outln!("kernel      {}", describe_kernel(&model.kernel));
    if let Some(b) = t.intercept {
        outln!(
            "intercept   {} (where the dual coefficients sum to zero)",
            sig(b, 6)
        );
    }
    match train {
        // a score would be one more read of the file
        Some(train) if train.x.beyond_page_cache() => outln!(
            "train       not scored: the rows are mapped from a file larger than the page cache can hold, which a score would read again (score them with joker predict)"
        ),
        Some(train) => outln!("train       {}", Score::of_model(model, train)?),
        None => outln!("train       {} rows streamed, not scored", t.n_samples),
    }
    if let Some(v) = val {
        outln!("validation  {}", Score::of_model(model, v)?);
    }
    if model_path == Path::new("-") {
        outln!("model       written to standard output");
    } else {
        outln!("model       saved to {}", model_path.display());
    }
    Ok(())
}

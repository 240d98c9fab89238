//! `joker info`: a model file's summary.

use joker::model::Representation;
use joker::{Kernel, KernelKind, Loss, Model, Multiclass, Precision, Task};

use super::args::InfoArgs;
use super::{CliResult, fmt_num, sig};

/// The loss with its parameters, e.g. `huber (delta 2)`.
pub fn describe_loss(loss: &Loss) -> String {
    let what = match loss {
        Loss::SquaredError => "kernel ridge regression".to_string(),
        Loss::Huber { delta } => format!("Huber regression, delta {}", fmt_num(*delta)),
        Loss::EpsilonInsensitive { epsilon } => {
            format!("support vector regression, epsilon {}", fmt_num(*epsilon))
        }
        Loss::Absolute => "least absolute deviations".to_string(),
        Loss::Lp { p } => format!("Lp regression, p {}", fmt_num(*p)),
        Loss::Hinge => "SVM classifier, hinge loss".to_string(),
        Loss::SquaredHinge => "SVM classifier, squared hinge loss".to_string(),
        Loss::Logistic => "kernel logistic regression".to_string(),
    };
    format!("{} ({what})", loss.name())
}

/// The kernel family, e.g. `matern (nu 1.5)`.
pub fn describe_kind(kind: KernelKind) -> String {
    match kind {
        KernelKind::Gaussian => "gaussian".into(),
        KernelKind::Laplacian => "laplacian".into(),
        KernelKind::Matern { nu } => format!("matern (nu {})", nu.value()),
    }
}

/// The kernel with its scale.
pub fn describe_kernel(k: &Kernel) -> String {
    format!("{}, gamma {}", describe_kind(k.kind), sig(k.gamma, 6))
}

/// `lambda 0.125 (C 8)`.
pub fn describe_lambda(lambda: f64) -> String {
    format!("lambda {} (C {})", sig(lambda, 6), sig(1.0 / lambda, 6))
}

/// Class labels, space-separated.
pub fn describe_classes(classes: &[f64]) -> String {
    const SHOWN: usize = 20;
    let mut s: Vec<String> = classes.iter().take(SHOWN).map(|&c| fmt_num(c)).collect();
    if classes.len() > SHOWN {
        s.push(format!("... ({} in all)", classes.len()));
    }
    s.join(" ")
}

/// Runs `joker info`.
pub fn run(a: InfoArgs) -> CliResult<()> {
    let m = Model::load(&a.model_file)?;
    print_model(&m, &a.model_file.display().to_string())
}

/// Prints the summary of `m`, loaded from `name`.
fn print_model(m: &Model, name: &str) -> CliResult<()> {
    outln!("model file      {name}");
    outln!(
        "format          {} version {} (written by joker {})",
        m.format,
        m.version,
        m.joker_version
    );
    outln!("loss            {}", describe_loss(&m.loss));
    if !m.training.loss_choice.is_empty() {
        outln!("loss chosen     {}", m.training.loss_choice);
    }
    outln!("kernel          {}", describe_kernel(&m.kernel));
    outln!("regularisation  {}", describe_lambda(m.lambda));
    if let Some(b) = m.training.intercept {
        outln!("intercept       {b}");
    }
    match &m.representation {
        Representation::RandomFeatures {
            n_components,
            seed,
            bias,
            ..
        } => {
            let bias = if *bias > 0.0 {
                format!(" and a bias feature B = {bias}")
            } else {
                String::new()
            };
            outln!("representation  {n_components} random Fourier features (seed {seed}){bias}")
        }
        Representation::Exact { n_support, .. } => outln!(
            "representation  exact kernel, {n_support} support vectors of {} training samples",
            m.training.n_samples
        ),
    }
    outln!(
        "precision       {}",
        match m.precision {
            Precision::F32 => "f32",
            Precision::F64 => "f64",
        }
    );
    match (&m.task, &m.classes) {
        (Task::Classification, Some(c)) => outln!(
            "task            classification, {} classes: {}{}",
            c.len(),
            describe_classes(c),
            match (c.len(), m.multiclass) {
                (0..=2, _) => String::new(),
                (_, Multiclass::OneVsRest) => " (one-vs-rest)".to_string(),
                (k, Multiclass::OneVsOne) => format!(" (one-vs-one, {} pairs)", k * (k - 1) / 2),
            }
        ),
        (Task::Classification, None) => outln!("task            classification"),
        (Task::Regression, _) => {
            let s = &m.target_scaler;
            if s.mean == 0.0 && s.scale == 1.0 {
                outln!("task            regression");
            } else {
                outln!(
                    "task            regression (targets standardised: mean {}, sd {})",
                    sig(s.mean, 6),
                    sig(s.scale, 6)
                );
            }
        }
    }
    let st = &m.standardizer;
    let standardized = st.center.iter().any(|&c| c != 0.0) || st.scale.iter().any(|&s| s != 1.0);
    outln!(
        "features        {}{}",
        m.n_features,
        if standardized { " (standardised)" } else { "" }
    );
    let t = &m.training;
    if t.solver.is_empty() {
        outln!(
            "training        {} samples, {} iterations, stopped: {}, gap {:.3e}, {:.2} s",
            t.n_samples,
            t.iterations,
            t.stop,
            t.gap,
            t.seconds
        );
    } else {
        outln!(
            "training        {} samples, {} {} steps, stopped: {}, {:.2} s",
            t.n_samples,
            t.iterations,
            t.solver,
            t.stop,
            t.seconds
        );
    }
    outln!(
        "objectives      primal {} dual {}",
        sig(t.primal, 8),
        sig(t.dual, 8)
    );
    outln!(
        "warm start      {}",
        if m.dual.is_some() {
            "dual coefficients stored"
        } else {
            "no dual coefficients stored"
        }
    );
    Ok(())
}

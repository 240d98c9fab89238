//! `joker predict`.

use std::io::{BufWriter, Write};
use std::path::Path;

use joker::{Dataset, Model, Precision, Scalar, Task};

use super::args::PredictArgs;
use super::{CliError, CliResult, Score, fmt_num, read_data, sig, write_error};

/// Runs `joker predict`.
pub fn run(a: PredictArgs) -> CliResult<()> {
    if let Some(out) = a.output_file.as_deref().filter(|p| *p != Path::new("-")) {
        super::refuse_overwriting_inputs(
            out,
            "output file",
            &[
                ("data file", a.data_file.as_path()),
                ("model file", a.model_file.as_path()),
            ],
            a.force,
        )?;
    }
    let model = Model::load(&a.model_file)?;
    if a.proba && model.loss != joker::Loss::Logistic {
        return Err(CliError::Message(format!(
            "--proba needs a kernel logistic regression model (trained with -l klr); {} was trained with the {} loss (use --decision for decision values)",
            a.model_file.display(),
            model.loss.name()
        )));
    }
    match model.precision {
        Precision::F32 => predict::<f32>(&a, &model),
        Precision::F64 => predict::<f64>(&a, &model),
    }
}

/// Reads the data in the model's precision `U` and writes the predictions.
fn predict<U: Scalar>(a: &PredictArgs, model: &Model) -> CliResult<()> {
    let data: Dataset<U> = read_data(&a.data_file, &a.data, None, Some(model.n_features))?;
    let n = data.len();
    let decision = model.decision_function(&data.x)?;
    let pred = model.labels_from_decision(&decision);

    // The rows to write.
    let proba = if a.proba {
        Some(model.predict_proba(&data.x)?)
    } else {
        None
    };
    let (values, per_row): (&[f64], usize) = match &proba {
        Some(p) => (p, model.classes.as_ref().map_or(2, Vec::len)),
        None if a.decision => (&decision, model.n_targets),
        None => (&pred, 1),
    };

    let rows = |out: &mut dyn Write| -> std::io::Result<()> {
        let mut line = String::new();
        for row in values.chunks_exact(per_row.max(1)) {
            line.clear();
            for (k, v) in row.iter().enumerate() {
                if k > 0 {
                    line.push(' ');
                }
                line.push_str(&fmt_num(*v));
            }
            line.push('\n');
            out.write_all(line.as_bytes())?;
        }
        out.flush()
    };
    match &a.output_file {
        // a file is replaced whole or not at all
        Some(p) if p != Path::new("-") => joker::atomic_file::write_atomically(p, rows)?,
        _ => rows(&mut BufWriter::new(std::io::stdout().lock()))
            .map_err(|e| write_error("standard output", e))?,
    }

    if !a.quiet {
        report_score(model, &pred, &data.y, n);
    }
    Ok(())
}

/// Prints the score on stderr, like LIBSVM's svm-predict, when the labels mean something.
fn report_score(model: &Model, pred: &[f64], truth: &[f64], n: usize) {
    match (model.task, &model.classes) {
        (Task::Classification, Some(classes)) => {
            let known = truth
                .iter()
                .filter(|y| classes.binary_search_by(|c| c.total_cmp(y)).is_ok())
                .count();
            if known == 0 {
                eprintln!(
                    "no accuracy: none of the {n} labels in the file is one of the model's classes"
                );
                return;
            }
            let s = Score::of(Task::Classification, pred, truth);
            if let Score::Accuracy { hits, n } = s {
                eprintln!(
                    "Accuracy = {}% ({hits}/{n}) (classification)",
                    sig(100.0 * hits as f64 / n.max(1) as f64, 6)
                );
            }
            if known < n {
                eprintln!(
                    "note: {} of the {n} labels are not among the model's classes",
                    n - known
                );
            }
        }
        _ => {
            if let Score::Regression { rmse, r2, n } = Score::of(Task::Regression, pred, truth) {
                eprintln!(
                    "RMSE = {} (regression), R^2 = {} ({n} samples)",
                    sig(rmse, 6),
                    sig(r2, 6)
                );
            }
        }
    }
}

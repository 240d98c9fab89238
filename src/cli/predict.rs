//! `joker predict`.

use std::io::{BufWriter, Write};
use std::path::Path;

use joker::io::stream::TextStream;
use joker::{Dataset, Model, Precision, Scalar, Task};

use joker::io::LabelColumn;

use super::args::{DataArgs, FormatArg, PredictArgs};
use super::{CliError, CliResult, Score, fmt_num, is_npy, read_data, sig, write_error};

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
    if a.proba && !model.has_probabilities() {
        return Err(CliError::Message(format!(
            "--proba needs a kernel logistic regression model (trained with -l klr) or a classifier trained with --proba; {} was trained with the {} loss without probabilities (use --decision for decision values)",
            a.model_file.display(),
            model.loss.name()
        )));
    }
    match model.precision {
        Precision::F32 => predict::<f32>(&a, &model),
        Precision::F64 => predict::<f64>(&a, &model),
    }
}

/// The data options to read the file with: the command line's, else the label column the
/// model's training file had (CSV), so that a label-first file's test file is read label first.
fn data_args(a: &PredictArgs, model: &Model) -> DataArgs {
    let mut opts = a.data.clone();
    let recorded = model.data.and_then(|l| l.label_column);
    let told = opts.label_column.is_some() || opts.index_base.is_some();
    let may_be_csv = match opts.format {
        FormatArg::Csv => true,
        FormatArg::Auto if is_npy(&a.data_file) => false,
        // standard input is read once: take it to be laid out as the training file was
        FormatArg::Auto if a.data_file == Path::new("-") => true,
        FormatArg::Auto => !joker::io::looks_like_libsvm_file(&a.data_file).unwrap_or(true),
        FormatArg::Libsvm | FormatArg::Npy => false,
    };
    if let Some(column) = recorded
        && !told
        && may_be_csv
        && column != LabelColumn::default()
    {
        if !a.quiet {
            eprintln!(
                "labels: column `{column}` of each row, as in the training file (--label-column to change)"
            );
        }
        opts.label_column = Some(column);
    }
    opts
}

/// Refuses labelled data most of whose labels are not among the model's classes: its scores
/// and its label column would both be wrong (a label-first file read label last, say). One
/// value throughout is taken for a placeholder of unlabelled rows, and passes.
fn check_labels(model: &Model, path: &Path, y: &[f64]) -> CliResult<()> {
    let Some(classes) = &model.classes else {
        return Ok(());
    };
    let unknown = y.len() - known_labels(classes, y);
    let placeholder = y.windows(2).all(|w| w[0] == w[1]);
    if 2 * unknown > y.len() && !placeholder {
        return Err(CliError::Message(format!(
            "{}: {unknown} of the {} labels are not among the model's classes ({}): is the label column the one of the training file? (see --label-column; the model's file records the training file's layout)",
            path.display(),
            y.len(),
            super::info::describe_classes(classes)
        )));
    }
    Ok(())
}

/// How many of the labels `y` are among the (sorted) `classes`.
fn known_labels(classes: &[f64], y: &[f64]) -> usize {
    y.iter()
        .filter(|v| classes.binary_search_by(|c| c.total_cmp(v)).is_ok())
        .count()
}

/// Reads the data in the model's precision `U` and writes the predictions.
fn predict<U: Scalar>(a: &PredictArgs, model: &Model) -> CliResult<()> {
    let opts = data_args(a, model);
    if a.stream {
        return predict_stream::<U>(a, &opts, model);
    }
    let data: Dataset<U> = read_data(&a.data_file, &opts, None, Some(model.n_features))?;
    check_labels(model, &a.data_file, &data.y)?;
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
        write_rows(out, values, per_row)?;
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

/// One line per row of `values` (`per_row` values each, space-separated).
fn write_rows(out: &mut dyn Write, values: &[f64], per_row: usize) -> std::io::Result<()> {
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
    Ok(())
}

/// `joker predict --stream`: the file a part at a time, each part's predictions written
/// before the next part is read; the score is tallied as the parts go.
fn predict_stream<U: Scalar>(a: &PredictArgs, opts: &DataArgs, model: &Model) -> CliResult<()> {
    if a.data_file == Path::new("-") {
        return Err(CliError::Message(
            "--stream reads a file on disk a part at a time; standard input is read whole (leave out --stream)".into(),
        ));
    }
    let format = super::text_format(&a.data_file, opts, None, Some(model.n_features))?;
    let stream = TextStream::open(&a.data_file, &format, a.chunk_mib.max(1) << 20, |_, _| {})?;
    let mut tally = Tally::default();
    let mut failed = None;
    let mut refused = None;
    let mut rows = |out: &mut dyn Write| -> std::io::Result<()> {
        for k in 0..stream.parts() {
            let data = match stream.part::<U>(k) {
                Ok(Some(data)) => data,
                Ok(None) => continue,
                Err(e) => {
                    failed = Some(e);
                    return Err(std::io::Error::other("prediction failed"));
                }
            };
            // the first part's labels stand for the file's
            if k == 0
                && let Err(e) = check_labels(model, &a.data_file, &data.y)
            {
                refused = Some(e);
                return Err(std::io::Error::other("labels refused"));
            }
            let (values, per_row, pred) = match part_values(a, model, &data) {
                Ok(v) => v,
                Err(e) => {
                    failed = Some(e);
                    return Err(std::io::Error::other("prediction failed"));
                }
            };
            write_rows(out, &values, per_row)?;
            tally.add(model, &pred, &data.y);
        }
        out.flush()
    };
    let written = match &a.output_file {
        Some(p) if p != Path::new("-") => {
            joker::atomic_file::write_atomically(p, &mut rows).map_err(CliError::from)
        }
        _ => rows(&mut BufWriter::new(std::io::stdout().lock()))
            .map_err(|e| write_error("standard output", e)),
    };
    if let Some(e) = refused {
        return Err(e);
    }
    if let Some(e) = failed {
        return Err(e.into());
    }
    written?;
    if !a.quiet {
        tally.report(model);
    }
    Ok(())
}

/// A part's rows to write (`values`, `per_row` each) and its predicted labels or values.
fn part_values<U: Scalar>(
    a: &PredictArgs,
    model: &Model,
    data: &Dataset<U>,
) -> joker::Result<(Vec<f64>, usize, Vec<f64>)> {
    let decision = model.decision_function(&data.x)?;
    let pred = model.labels_from_decision(&decision);
    Ok(if a.proba {
        let per_row = model.classes.as_ref().map_or(2, Vec::len);
        (model.predict_proba(&data.x)?, per_row, pred)
    } else if a.decision {
        (decision, model.n_targets, pred)
    } else {
        (pred.clone(), 1, pred)
    })
}

/// The score of predictions made a part at a time: hits and known labels (classification),
/// or the sums that give RMSE and R^2 (regression).
#[derive(Default)]
struct Tally {
    n: usize,
    hits: usize,
    known: usize,
    ss_res: f64,
    sum_y: f64,
    sum_y2: f64,
}

impl Tally {
    fn add(&mut self, model: &Model, pred: &[f64], truth: &[f64]) {
        self.n += truth.len();
        if let Some(classes) = &model.classes {
            self.known += known_labels(classes, truth);
        }
        for (p, y) in pred.iter().zip(truth) {
            self.hits += usize::from(p == y);
            self.ss_res += (p - y).powi(2);
            self.sum_y += y;
            self.sum_y2 += y * y;
        }
    }

    /// The score on stderr, as [`report_score`] prints it.
    fn report(&self, model: &Model) {
        let n = self.n;
        match (model.task, &model.classes) {
            (Task::Classification, Some(_)) if self.known == 0 => eprintln!(
                "no accuracy: none of the {n} labels in the file is one of the model's classes"
            ),
            (Task::Classification, Some(_)) => {
                eprintln!(
                    "Accuracy = {}% ({}/{n}) (classification)",
                    sig(100.0 * self.hits as f64 / n.max(1) as f64, 6),
                    self.hits
                );
                if self.known < n {
                    eprintln!(
                        "note: {} of the {n} labels are not among the model's classes",
                        n - self.known
                    );
                }
            }
            _ => {
                let nf = n.max(1) as f64;
                let ss_tot = self.sum_y2 - self.sum_y * self.sum_y / nf;
                let r2 = if ss_tot > 0.0 {
                    1.0 - self.ss_res / ss_tot
                } else {
                    f64::NAN
                };
                eprintln!(
                    "RMSE = {} (regression), R^2 = {} ({n} samples)",
                    sig((self.ss_res / nf).sqrt(), 6),
                    super::r_squared(r2, 6)
                );
            }
        }
    }
}

/// Prints the score on stderr, like LIBSVM's svm-predict, when the labels mean something.
fn report_score(model: &Model, pred: &[f64], truth: &[f64], n: usize) {
    match (model.task, &model.classes) {
        (Task::Classification, Some(classes)) => {
            let known = known_labels(classes, truth);
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
                    super::r_squared(r2, 6)
                );
            }
        }
    }
}

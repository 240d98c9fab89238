//! The `joker` program's commands and their shared helpers (not part of the library API).

/// Writes a line to stdout, stopping quietly if the reader went away; to stderr when stdout
/// carries the command's output (`joker train DATA -` writes the model there).
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        if $crate::cli::stdout_taken() {
            eprintln!($($arg)*);
        } else {
            writeln!(std::io::stdout(), $($arg)*)
                .map_err(|e| $crate::cli::write_error("standard output", e))?;
        }
    }};
}

pub mod args;
pub mod convert;
pub mod demo;
#[cfg(feature = "mpi")]
pub mod distributed;
pub mod info;
pub mod labels;
pub mod predict;
pub mod progress;
pub mod train;

use std::io::IsTerminal;
use std::path::Path;

use joker::io::npy::read_npy;
use joker::io::{
    CsvOptions, DataLayout, FileFormat, LabelColumn, LibsvmOptions, read_auto, read_csv,
    read_libsvm,
};
use joker::{Dataset, Features, JokerError, Model, Scalar, Task};

use args::{DataArgs, FormatArg};

/// Whether standard output carries a command's output file, so that messages go to stderr.
static STDOUT_TAKEN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether standard output carries a command's output file (see [`take_stdout`]).
pub fn stdout_taken() -> bool {
    STDOUT_TAKEN.load(std::sync::atomic::Ordering::Relaxed)
}

/// Says that standard output carries the command's output (`-` as an output file): the
/// messages that would go there go to stderr.
pub fn take_stdout() {
    STDOUT_TAKEN.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// Writes the model to `path`, or to standard output for `-` (as every output file of the
/// program takes `-`).
pub fn save_model(model: &Model, path: &Path) -> CliResult<()> {
    if path != Path::new("-") {
        return Ok(model.save(path)?);
    }
    use std::io::Write as _;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    serde_json::to_writer(&mut out, model)
        .map_err(std::io::Error::from)
        .and_then(|()| writeln!(out))
        .and_then(|()| out.flush())
        .map_err(|e| write_error("standard output", e))
}

/// Why a command failed.
#[derive(Debug)]
pub enum CliError {
    /// A message for the user (printed as `error: <message>`).
    Message(String),
    /// Standard output was closed by its reader; stop quietly.
    BrokenPipe,
}

/// The result of a command.
pub type CliResult<T> = Result<T, CliError>;

impl From<JokerError> for CliError {
    /// The library's message in the command line's words: parameters become flags.
    fn from(e: JokerError) -> Self {
        CliError::Message(match e {
            JokerError::InvalidParameter { name, reason } => {
                format!("invalid {}: {reason}", flag_of(name))
            }
            other => other
                .to_string()
                .replace("with max_memory", "with --max-memory"),
        })
    }
}

/// The flag that sets a library parameter (the parameter's own name where none does).
fn flag_of(param: &str) -> String {
    let flag = match param {
        "lambda" => "--lambda (or -c)",
        "c" => "-c",
        "n_components" => "-m/--n-components",
        "block_size" => "-b/--block-size",
        "max_iter" => "--max-iter",
        "tol" => "--tol",
        "gamma" => "--gamma",
        "delta" => "--delta",
        "epsilon" => "--epsilon",
        "p" => "--p",
        "nu" => "--nu",
        "loss" => "--loss",
        "kernel" => "--kernel",
        "task" => "--task",
        "class_weight" => "--class-weight",
        "multiclass" => "--multiclass",
        "nystrom_rank" => "--nystrom-rank",
        "tr_model" => "--tr-model",
        "full_krr" | "method" => "--full-krr",
        "krr_blocks" => "--krr-blocks",
        "krr_rank" => "--krr-rank",
        "krr_tol" => "--krr-tol",
        "precision" => "--precision",
        "device" => "--device",
        "n_features" => "--n-features",
        "seed" => "--seed",
        "check_every" => "--check-every",
        "search_c" => "--search-c",
        "search_gamma" => "--search-gamma",
        "folds" => "--folds",
        "path" => "data file",
        other => return format!("parameter `{other}`"),
    };
    flag.to_string()
}

/// A failure with this message.
pub fn fail<T>(msg: impl Into<String>) -> CliResult<T> {
    Err(CliError::Message(msg.into()))
}

/// Maps a write error on `what` (a path, or "standard output") to a [`CliError`].
pub fn write_error(what: &str, e: std::io::Error) -> CliError {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        CliError::BrokenPipe
    } else {
        CliError::Message(format!("cannot write {what}: {e}"))
    }
}

/// Prints `error: <message>` on stderr, in red on a terminal.
pub fn report(msg: &str) {
    progress::end_line();
    if std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none() {
        eprintln!("\x1b[1;31merror:\x1b[0m {msg}");
    } else {
        eprintln!("error: {msg}");
    }
}

/// A number in its shortest exact form: `1` and `-1` for integral labels, `0.25`, and an
/// exponent for very large or very small magnitudes (`1.5e-7`, `3e20`).
pub fn fmt_num(v: f64) -> String {
    let a = v.abs();
    if v == 0.0 {
        "0".into()
    } else if (1e-4..1e15).contains(&a) || !a.is_finite() {
        format!("{v}")
    } else {
        format!("{v:e}")
    }
}

/// Whether two paths name the same existing file (same device and inode on Unix).
pub fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        #[cfg(unix)]
        (Ok(x), Ok(y)) => {
            use std::os::unix::fs::MetadataExt;
            x.dev() == y.dev() && x.ino() == y.ino()
        }
        #[cfg(not(unix))]
        (Ok(_), Ok(_)) => a.canonicalize().ok() == b.canonicalize().ok(),
        _ => false,
    }
}

/// Refuses, before any work, to write `output` over one of the `inputs` (`-`, standard input,
/// is no file), unless the user said `--force`.
pub fn refuse_overwriting_inputs(
    output: &Path,
    what: &str,
    inputs: &[(&str, &Path)],
    force: bool,
) -> CliResult<()> {
    if force {
        return Ok(());
    }
    for (role, input) in inputs {
        if *input != Path::new("-") && same_file(output, input) {
            return fail(format!(
                "the {what} {} is the {role} {}: writing it would destroy the input; give another output file (or --force)",
                output.display(),
                input.display()
            ));
        }
    }
    Ok(())
}

/// Whether `path` holds a joker model file (or is empty), judged by its first bytes: the
/// `format` field comes first in every model file joker writes.
pub fn looks_like_model(path: &Path) -> bool {
    use std::io::Read;
    let mut head = Vec::with_capacity(4096);
    let Ok(f) = std::fs::File::open(path) else {
        return false;
    };
    if f.take(4096).read_to_end(&mut head).is_err() {
        return false;
    }
    let text = String::from_utf8_lossy(&head);
    let t = text.trim_start();
    t.is_empty()
        || (t.starts_with('{')
            && t.contains("\"format\"")
            && t.contains(&format!("\"{}\"", joker::model::FORMAT_NAME)))
}

/// Whether `path` names `.npy` rows: a `.npy` file of dense rows, or a directory of CSR arrays.
pub fn is_npy(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "npy") || path.is_dir()
}
/// The format of a text file read a chunk at a time (`joker convert`, `joker train
/// --stream`, `joker predict --stream`), from the options or the first data line.
/// `n_features` is `--n-features` (a LIBSVM option); `width`, the model's number of features
/// a LIBSVM test file is read at, is no option of the user's and names no format.
pub fn text_format(
    path: &Path,
    data: &DataArgs,
    n_features: Option<usize>,
    width: Option<usize>,
) -> CliResult<joker::io::npy::TextFormat> {
    use joker::io::npy::TextFormat;
    let libsvm = LibsvmOptions {
        zero_based: data.index_base,
        n_features: n_features.or(width),
    };
    let csv = CsvOptions {
        label_column: data.label_column.unwrap_or_default(),
        ..CsvOptions::default()
    };
    Ok(match data_format(path, data, n_features)? {
        FormatArg::Npy => {
            return fail(format!(
                "{}: .npy rows are mapped, not read as text",
                path.display()
            ));
        }
        FormatArg::Libsvm => TextFormat::Libsvm(libsvm),
        FormatArg::Csv => TextFormat::Csv(csv),
        FormatArg::Auto if joker::io::looks_like_libsvm_file(path)? => TextFormat::Libsvm(libsvm),
        FormatArg::Auto => TextFormat::Csv(csv),
    })
}

/// The format the options and the path say (`Auto` left for the first data line to decide),
/// refusing options of one format given for another. `n_features` is `--n-features`.
pub fn data_format(
    path: &Path,
    opts: &DataArgs,
    n_features: Option<usize>,
) -> CliResult<FormatArg> {
    let wants_csv = opts.label_column.is_some();
    let wants_libsvm = opts.index_base.is_some() || n_features.is_some();
    let is_npy = is_npy(path);
    Ok(match opts.format {
        FormatArg::Auto | FormatArg::Npy if is_npy && (wants_csv || wants_libsvm) => {
            return fail(
                "--label-column, --index-base and --n-features are text-file options; a .npy file's labels are in NAME.labels.npy",
            );
        }
        FormatArg::Auto if is_npy => FormatArg::Npy,
        FormatArg::Auto if wants_csv && wants_libsvm => {
            return fail(
                "--label-column is a CSV option, --index-base and --n-features are LIBSVM options: give --format",
            );
        }
        FormatArg::Auto if wants_csv => FormatArg::Csv,
        FormatArg::Auto if wants_libsvm => FormatArg::Libsvm,
        FormatArg::Csv if wants_libsvm => {
            return fail("--index-base and --n-features apply to LIBSVM files, not CSV");
        }
        FormatArg::Libsvm if wants_csv => {
            return fail("--label-column applies to CSV files, not LIBSVM");
        }
        f => f,
    })
}

/// Reads a data file as the format options say.
///
/// `width`, when given, is the number of features the data must have (the model's or the
/// training set's): narrower LIBSVM data is widened to it (test files need not mention the
/// last features), anything else that differs is an error. `n_features` is the explicit
/// LIBSVM width of `joker train --n-features`.
pub fn read_data<U: Scalar>(
    path: &Path,
    opts: &DataArgs,
    n_features: Option<usize>,
    width: Option<usize>,
) -> CliResult<Dataset<U>> {
    read_data_with_layout(path, opts, n_features, width).map(|(data, _)| data)
}

/// [`read_data`], and the layout the file was read with (the format detected where the options
/// leave it open, and a CSV file's label column), for the model file to record.
pub fn read_data_with_layout<U: Scalar>(
    path: &Path,
    opts: &DataArgs,
    n_features: Option<usize>,
    width: Option<usize>,
) -> CliResult<(Dataset<U>, DataLayout)> {
    if path == Path::new("-") && std::io::stdin().is_terminal() {
        return fail(
            "the data file `-` is standard input, which is a terminal here: pipe the data in (e.g. `cat data.svm | joker train - model.json`)",
        );
    }
    check_data_path(path)?;
    let format = data_format(path, opts, n_features)?;
    let csv_layout = |c: LabelColumn| DataLayout {
        format: FileFormat::Csv,
        label_column: Some(c),
    };
    let other = |format| DataLayout {
        format,
        label_column: None,
    };
    let (data, layout): (Dataset<U>, DataLayout) = match format {
        FormatArg::Auto => {
            // standard input is read once, so its format is told from the rows read
            let data: Dataset<U> = read_auto(path)?;
            let layout = match data.x {
                Features::Sparse(_) => other(FileFormat::Libsvm),
                Features::Dense(_) => csv_layout(LabelColumn::default()),
            };
            (data, layout)
        }
        FormatArg::Npy => (read_npy(path, None)?, other(FileFormat::Npy)),
        FormatArg::Libsvm => {
            let o = LibsvmOptions {
                zero_based: opts.index_base,
                n_features: n_features.or(width),
            };
            (read_libsvm(path, &o)?, other(FileFormat::Libsvm))
        }
        FormatArg::Csv => {
            let column = opts.label_column.unwrap_or_default();
            let o = CsvOptions {
                label_column: column,
                ..CsvOptions::default()
            };
            (read_csv(path, &o)?, csv_layout(column))
        }
    };
    Ok((check_width(path, data, width)?, layout))
}

/// A data path that cannot be read as a file, said in its own words: a directory that is not
/// a folder of CSR arrays, or a path that does not exist.
fn check_data_path(path: &Path) -> CliResult<()> {
    if path == Path::new("-") {
        return Ok(());
    }
    if path.is_dir() && !path.join("shape.npy").is_file() {
        return fail(format!(
            "{} is a directory, not a data file (a directory is read only when it holds the CSR arrays written by `joker convert --csr`: shape.npy, indptr.npy, indices.npy, data.npy, labels.npy)",
            path.display()
        ));
    }
    Ok(())
}

/// The data at the width `width` asks for (see [`read_data`]).
fn check_width<U: Scalar>(
    path: &Path,
    data: Dataset<U>,
    width: Option<usize>,
) -> CliResult<Dataset<U>> {
    if data.x.ncols() == 0 && width.is_none() {
        return fail(format!(
            "{}: the {} rows have no features (0 columns)",
            path.display(),
            data.len()
        ));
    }
    let Some(d) = width else {
        return Ok(data);
    };
    let have = data.x.ncols();
    if have == d {
        return Ok(data);
    }
    match data.x {
        Features::Sparse(_) if have < d => {
            let Dataset { x, y } = data;
            Ok(Dataset::new(x.with_ncols(d)?, y)?)
        }
        _ => fail(format!(
            "{}: the data has {have} features, the model expects {d}{}",
            path.display(),
            if matches!(data.x, Features::Dense(_)) {
                " (is the label column the same as in training? see --label-column)"
            } else {
                ""
            }
        )),
    }
}

/// How well a model does on labelled data.
#[derive(Clone, Copy, Debug)]
pub enum Score {
    /// Classification: correct and total.
    Accuracy {
        /// Correct predictions.
        hits: usize,
        /// Samples.
        n: usize,
    },
    /// Regression: root mean squared error and R^2.
    Regression {
        /// Root mean squared error.
        rmse: f64,
        /// Coefficient of determination.
        r2: f64,
        /// Samples.
        n: usize,
    },
}

impl Score {
    /// Scores predictions (labels or values) against the truth.
    pub fn of(task: Task, pred: &[f64], truth: &[f64]) -> Score {
        let n = truth.len();
        match task {
            Task::Classification => Score::Accuracy {
                hits: pred.iter().zip(truth).filter(|(p, y)| p == y).count(),
                n,
            },
            Task::Regression => {
                let mean = truth.iter().sum::<f64>() / n.max(1) as f64;
                let ss_res: f64 = pred.iter().zip(truth).map(|(p, y)| (p - y).powi(2)).sum();
                let ss_tot: f64 = truth.iter().map(|y| (y - mean).powi(2)).sum();
                Score::Regression {
                    rmse: (ss_res / n.max(1) as f64).sqrt(),
                    r2: if ss_tot > 0.0 {
                        1.0 - ss_res / ss_tot
                    } else {
                        f64::NAN
                    },
                    n,
                }
            }
        }
    }

    /// Predicts `data` with `model` and scores it.
    pub fn of_model<U: Scalar>(model: &Model, data: &Dataset<U>) -> CliResult<Score> {
        let pred = model.predict(&data.x)?;
        Ok(Score::of(model.task, &pred, &data.y))
    }
}

/// `R^2` to `digits` significant digits, or why it has none: it is undefined (`NaN` from
/// [`Score::of`] and the streamed sums) where the targets are all equal.
pub(crate) fn r_squared(r2: f64, digits: usize) -> String {
    if r2.is_nan() {
        "undefined (constant targets)".to_string()
    } else {
        sig(r2, digits)
    }
}

impl std::fmt::Display for Score {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Score::Accuracy { hits, n } => write!(
                f,
                "accuracy {}% ({hits}/{n})",
                sig(100.0 * hits as f64 / n.max(1) as f64, 4)
            ),
            Score::Regression { rmse, r2, n } => {
                write!(
                    f,
                    "RMSE {} R^2 {} ({n} samples)",
                    sig(rmse, 6),
                    r_squared(r2, 4)
                )
            }
        }
    }
}

/// `v` with at most `digits` significant digits (trailing zeros dropped), in exponent form
/// for very large or small magnitudes.
pub fn sig(v: f64, digits: usize) -> String {
    let a = v.abs();
    let trim = |s: String| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        }
    };
    if v == 0.0 || !v.is_finite() {
        format!("{v}")
    } else if (1e-3..1e6).contains(&a) {
        let decimals = (digits as i32 - 1 - a.log10().floor() as i32).max(0) as usize;
        trim(format!("{v:.decimals$}"))
    } else {
        let s = format!("{v:.prec$e}", prec = digits.saturating_sub(1));
        match s.split_once('e') {
            Some((m, e)) => format!("{}e{e}", trim(m.to_string())),
            None => s,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_print_shortest() {
        assert_eq!(fmt_num(1.0), "1");
        assert_eq!(fmt_num(-1.0), "-1");
        assert_eq!(fmt_num(-0.0), "0");
        assert_eq!(fmt_num(0.1 + 0.2), "0.30000000000000004");
        assert_eq!(fmt_num(1.5e-7), "1.5e-7");
        assert_eq!(fmt_num(3e20), "3e20");
        assert_eq!(fmt_num(2.0), "2");
        assert_eq!(sig(0.012345678, 3), "0.0123");
        assert_eq!(sig(12345.678, 3), "12346");
        assert_eq!(sig(1.5e9, 3), "1.5e9");
        assert_eq!(sig(1.0, 6), "1");
        assert_eq!(sig(100.0, 3), "100");
        assert_eq!(sig(0.125, 6), "0.125");
    }

    #[test]
    fn scores() {
        let s = Score::of(Task::Classification, &[1.0, -1.0, 1.0], &[1.0, 1.0, 1.0]);
        assert_eq!(s.to_string(), "accuracy 66.67% (2/3)");
        let s = Score::of(Task::Classification, &[1.0, 1.0], &[1.0, 1.0]);
        assert_eq!(s.to_string(), "accuracy 100% (2/2)");
        let Score::Regression { rmse, r2, .. } =
            Score::of(Task::Regression, &[1.0, 2.0], &[1.0, 3.0])
        else {
            panic!()
        };
        assert!((rmse - 0.5f64.sqrt()).abs() < 1e-12);
        assert!((r2 - 0.5).abs() < 1e-12);
    }
}

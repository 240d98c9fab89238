//! LIBSVM / SVMlight text: `label index:value index:value ... [# comment]`.

use std::fmt::{Display, LowerExp};
use std::io::{BufRead, Write};
use std::path::Path;

use super::{
    Lines, note_misnamed, open, parse_err, parse_number, show, source_name, strip_comment, tokens,
};
use crate::data::{CsrMatrix, Dataset, Features};
use crate::error::{JokerError, Result, invalid};
use crate::scalar::Scalar;

/// Options of [`read_libsvm`]; the default detects everything from the file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LibsvmOptions {
    /// Whether feature indices start at 0 (`Some(true)`) or at 1 (`Some(false)`). `None`
    /// detects: the file is 0-based if any index 0 appears in it, otherwise 1-based. Column
    /// `j` of the result is index `j` of a 0-based file and index `j + 1` of a 1-based one.
    pub zero_based: Option<bool>,
    /// Number of feature columns. `None` takes one more than the largest column found; give
    /// it to read a test file that does not mention the last features with the training
    /// width. A column index at or above it is an error.
    pub n_features: Option<usize>,
}

/// Reads a LIBSVM / SVMlight file into sparse features and one target per line.
///
/// Each data line is `label index:value index:value ...`: the label is any finite number
/// (`-1`, `+1`, `1.0`, `2`, `3.5`, ...); indices are non-negative integers, strictly
/// increasing within a line; values are finite numbers, and zeros are not stored. Blank
/// lines, comments (from `#` to the end of a line) and `qid:` tokens are skipped. Multi-label
/// lines (`1,3 5:1`) are not supported. Indices are 0- or 1-based as
/// [`LibsvmOptions::zero_based`] says or detection finds. The file may be gzip or bzip2
/// compressed, and the path `-` reads standard input (see
/// [the module documentation](crate::io)).
///
/// # Errors
/// [`JokerError::Parse`] naming the line of the first malformed token, [`JokerError::Io`]
/// if the file cannot be opened or read (or decompressed), [`JokerError::EmptyData`] if it
/// has no data line or no feature at all (without `n_features`), and
/// [`JokerError::InvalidParameter`] for `n_features` of 0 or above the column index range
/// (`u32::MAX`).
pub fn read_libsvm<T: Scalar>(path: &Path, opts: &LibsvmOptions) -> Result<Dataset<T>> {
    check_n_features(opts.n_features)?;
    let (reader, compression) = open(path)?;
    parse_libsvm(reader, path, opts).map_err(|e| note_misnamed(e, path, compression))
}

/// A width the sparse matrix can hold: at least one column, column indices in `u32`.
pub(super) fn check_n_features(n: Option<usize>) -> Result<()> {
    match n {
        Some(0) => Err(invalid("n_features", "must be at least 1")),
        Some(n) if n > MAX_COLUMNS => Err(invalid(
            "n_features",
            format!("{n} is more columns than a sparse matrix holds (at most {MAX_COLUMNS})"),
        )),
        _ => Ok(()),
    }
}

/// Most columns a sparse matrix holds: its column indices are `u32`.
const MAX_COLUMNS: usize = u32::MAX as usize;

/// [`read_libsvm`] on an open reader; `path` names the source in errors.
pub(crate) fn parse_libsvm<T: Scalar, R: BufRead>(
    reader: R,
    path: &Path,
    opts: &LibsvmOptions,
) -> Result<Dataset<T>> {
    let raw = parse_raw(reader, path)?;
    if raw.y.is_empty() {
        return Err(super::empty(path));
    }
    let zero_based = opts.zero_based.unwrap_or(raw.first_zero.is_some());
    raw.into_dataset(path, zero_based, opts.n_features)
}

/// LIBSVM lines as written, before the index base and the width are settled: kept apart so
/// that a part of a file can be parsed alone and settled once the parts agree.
#[derive(Clone, Debug)]
pub(super) struct RawLibsvm<T> {
    /// One label per data line.
    pub(super) y: Vec<f64>,
    /// CSR row pointers into `indices` and `values`.
    pub(super) indptr: Vec<usize>,
    /// The indices as written (not yet shifted for a 1-based file).
    pub(super) indices: Vec<u32>,
    /// The non-zero values.
    pub(super) values: Vec<T>,
    /// The smallest index written, also with a zero value.
    pub(super) min_index: Option<u32>,
    /// The largest index written, also with a zero value, and the line where it first appears.
    pub(super) max_index: Option<(u32, usize)>,
    /// The first line with an index 0.
    pub(super) first_zero: Option<usize>,
}

/// Parses every line of `reader` without deciding the index base or the width; a source
/// without data lines gives no rows, not an error.
pub(super) fn parse_raw<T: Scalar, R: BufRead>(reader: R, path: &Path) -> Result<RawLibsvm<T>> {
    let mut lines = Lines::new(reader, path);
    let mut raw = RawLibsvm {
        y: Vec::new(),
        indptr: vec![0usize],
        indices: Vec::new(),
        values: Vec::new(),
        min_index: None,
        max_index: None,
        first_zero: None,
    };

    while let Some((ln, line)) = lines.next_line()? {
        let line = strip_comment(line);
        let mut toks = tokens(line);
        let Some(label_tok) = toks.next() else {
            continue; // blank or comment line
        };
        let label = parse_label(label_tok).map_err(|r| parse_err(path, ln, r))?;
        let mut prev: Option<u32> = None;
        for tok in toks {
            if tok.starts_with(b"qid:") {
                continue;
            }
            let (index, value) = parse_pair::<T>(tok).map_err(|r| parse_err(path, ln, r))?;
            if let Some(p) = prev
                && index <= p
            {
                let reason = if index == p {
                    format!("duplicate feature index {index} in `{}`", show(tok))
                } else {
                    format!(
                        "feature indices must be strictly increasing within a line: \
                         {index} comes after {p}"
                    )
                };
                return Err(parse_err(path, ln, reason));
            }
            prev = Some(index);
            if index == 0 && raw.first_zero.is_none() {
                raw.first_zero = Some(ln);
            }
            if raw.min_index.is_none_or(|m| index < m) {
                raw.min_index = Some(index);
            }
            if raw.max_index.is_none_or(|(m, _)| index > m) {
                raw.max_index = Some((index, ln));
            }
            // Zeros are not stored, also those that a value too small for `T` becomes.
            let value = T::from_f64(value);
            if value.to_f64() != 0.0 {
                raw.indices.push(index);
                raw.values.push(value);
            }
        }
        raw.y.push(label);
        raw.indptr.push(raw.indices.len());
    }
    Ok(raw)
}

impl<T: Scalar> RawLibsvm<T> {
    /// The dataset with indices shifted to 0-based and `n_features` columns (`None`: one more
    /// than the largest index); errors name the line of an index that does not fit. Needs at
    /// least one row.
    pub(super) fn into_dataset(
        self,
        path: &Path,
        zero_based: bool,
        n_features: Option<usize>,
    ) -> Result<Dataset<T>> {
        let RawLibsvm {
            y,
            indptr,
            mut indices,
            values,
            max_index,
            first_zero,
            ..
        } = self;
        if !zero_based {
            if let Some(ln) = first_zero {
                return Err(parse_err(
                    path,
                    ln,
                    "feature index 0 in a file read as 1-based: its indices start at 0, so read \
                     it as 0-based (--index-base 0 on the command line, or leave the option out \
                     to detect it; `LibsvmOptions { zero_based: Some(true), .. }` in Rust)",
                ));
            }
            for j in &mut indices {
                *j -= 1;
            }
        }
        let shift = usize::from(!zero_based);
        let base = if zero_based { "0-based" } else { "1-based" };
        let ncols = match (n_features, max_index) {
            (Some(n), Some((m, ln))) if m as usize - shift >= n => {
                let largest = n - 1 + shift;
                return Err(parse_err(
                    path,
                    ln,
                    format!(
                        "feature index {m} is out of range for {n} features (indices are \
                         {base}, so the largest allowed is {largest}): the file has more \
                         features than asked for with --n-features, or than the model was \
                         trained on; `LibsvmOptions::n_features` in Rust"
                    ),
                ));
            }
            (Some(n), _) => n,
            (None, Some((m, ln))) if m as usize - shift >= MAX_COLUMNS => {
                return Err(parse_err(
                    path,
                    ln,
                    format!(
                        "feature index {m} is too large: with {base} indices the largest is {}",
                        MAX_COLUMNS - 1 + shift
                    ),
                ));
            }
            (None, Some((m, _))) => m as usize - shift + 1,
            (None, None) => {
                return Err(JokerError::EmptyData(format!(
                    "{}: no line has a feature (`index:value`), only labels; if every feature \
                     is zero, give their number (--n-features N on the command line, \
                     `LibsvmOptions {{ n_features: Some(N), .. }}` in Rust)",
                    source_name(path).display()
                )));
            }
        };
        let nrows = y.len();
        let x = CsrMatrix::new(nrows, ncols, indptr, indices, values)?;
        Dataset::new(Features::Sparse(x), y)
    }
}

fn parse_label(tok: &[u8]) -> std::result::Result<f64, String> {
    if tok.contains(&b':') {
        return Err(format!(
            "missing label: the line starts with `{}`; expected `label index:value ...`",
            show(tok)
        ));
    }
    if tok.contains(&b',') {
        return Err(format!(
            "multi-label line (label `{}`) is not supported: expected a single numeric label",
            show(tok)
        ));
    }
    // Labels are kept in f64, so only finiteness matters, not the range of T.
    parse_number::<f64>(tok, "label", tok)
}

/// Parses `index:value`, the index as written in the file.
fn parse_pair<T: Scalar>(tok: &[u8]) -> std::result::Result<(u32, f64), String> {
    let Some(colon) = tok.iter().position(|&b| b == b':') else {
        return Err(format!(
            "expected `index:value`, got `{}` (multi-label lines are not supported)",
            show(tok)
        ));
    };
    let (idx, val) = (&tok[..colon], &tok[colon + 1..]);
    if idx.is_empty() {
        return Err(format!("missing index in `{}`", show(tok)));
    }
    if idx[0] == b'-' {
        return Err(format!("negative feature index in `{}`", show(tok)));
    }
    let mut index: u64 = 0;
    for &b in idx {
        if !b.is_ascii_digit() {
            return Err(format!(
                "bad feature index `{}` in `{}`: expected a non-negative integer",
                show(idx),
                show(tok)
            ));
        }
        index = index * 10 + u64::from(b - b'0');
        if index > u64::from(u32::MAX) {
            return Err(format!(
                "feature index in `{}` is too large (at most {})",
                show(tok),
                u32::MAX
            ));
        }
    }
    if val.is_empty() {
        return Err(format!("missing value in `{}`", show(tok)));
    }
    let value = parse_number::<T>(val, "value", tok)?;
    Ok((index as u32, value))
}

/// Writes `data` in LIBSVM format, 1-based, one line per row: the target, then the non-zero
/// features as `index:value`. Numbers are written in their shortest form that reads back to
/// the same value, so [`read_libsvm`] with `n_features = Some(data.x.ncols())` (needed when
/// the last columns are all zero) returns the same dataset. A path ending in `.gz` or `.bz2`
/// is compressed accordingly.
///
/// # Errors
/// [`JokerError::Io`] if the file cannot be created or written.
pub fn write_libsvm<T: Scalar>(path: &Path, data: &Dataset<T>) -> Result<()> {
    let ext = path.extension().and_then(|e| e.to_str());
    // a file is replaced whole or not at all (the old one stays on any failure)
    crate::atomic_file::write_atomically(path, |w| {
        let mut out = match ext {
            Some(e) if e.eq_ignore_ascii_case("gz") => Sink::Gz(flate2::write::GzEncoder::new(
                w,
                flate2::Compression::default(),
            )),
            Some(e) if e.eq_ignore_ascii_case("bz2") => Sink::Bz(bzip2::write::BzEncoder::new(
                w,
                bzip2::Compression::default(),
            )),
            _ => Sink::Plain(w),
        };
        write_rows(&mut out, data)?;
        out.finish()
    })
}

fn write_rows<T: Scalar>(w: &mut impl Write, data: &Dataset<T>) -> std::io::Result<()> {
    for (i, &label) in data.y.iter().enumerate() {
        write_num(w, label, label)?;
        match &data.x {
            Features::Sparse(m) => {
                let (idx, val) = m.row(i);
                for (&j, &v) in idx.iter().zip(val) {
                    write_pair(w, j as usize, v)?;
                }
            }
            Features::Dense(m) => {
                for (j, &v) in m.row(i).iter().enumerate() {
                    write_pair(w, j, v)?;
                }
            }
        }
        w.write_all(b"\n")?;
    }
    Ok(())
}

/// ` index:value` with a 1-based index, nothing for a zero value.
fn write_pair<T: Scalar>(w: &mut impl Write, j: usize, v: T) -> std::io::Result<()> {
    let x = v.to_f64();
    if x == 0.0 {
        return Ok(());
    }
    write!(w, " {}:", j + 1)?;
    if std::mem::size_of::<T>() == 4 {
        // The shortest decimal form of the f32 itself, not of its f64 widening.
        write_num(w, x as f32, x)
    } else {
        write_num(w, x, x)
    }
}

/// Shortest round-trip form; scientific notation for very small or large magnitudes.
fn write_num<W: Write + ?Sized, F: Display + LowerExp>(
    w: &mut W,
    x: F,
    x64: f64,
) -> std::io::Result<()> {
    let a = x64.abs();
    if a == 0.0 || (1e-4..1e16).contains(&a) {
        write!(w, "{x}")
    } else {
        write!(w, "{x:e}")
    }
}

/// Plain or compressing output.
enum Sink<'w> {
    Plain(&'w mut dyn Write),
    Gz(flate2::write::GzEncoder<&'w mut dyn Write>),
    Bz(bzip2::write::BzEncoder<&'w mut dyn Write>),
}

impl Sink<'_> {
    fn finish(self) -> std::io::Result<()> {
        let buf = match self {
            Sink::Plain(b) => b,
            Sink::Gz(e) => e.finish()?,
            Sink::Bz(e) => e.finish()?,
        };
        buf.flush()
    }
}

impl Write for Sink<'_> {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        match self {
            Sink::Plain(w) => w.write(b),
            Sink::Gz(w) => w.write(b),
            Sink::Bz(w) => w.write(b),
        }
    }
    fn write_all(&mut self, b: &[u8]) -> std::io::Result<()> {
        match self {
            Sink::Plain(w) => w.write_all(b),
            Sink::Gz(w) => w.write_all(b),
            Sink::Bz(w) => w.write_all(b),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Sink::Plain(w) => w.flush(),
            Sink::Gz(w) => w.flush(),
            Sink::Bz(w) => w.flush(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::{TempPath, assert_parse_err};
    use super::*;
    use crate::data::DenseMatrix;

    fn parse<T: Scalar>(text: &str, opts: &LibsvmOptions) -> Result<Dataset<T>> {
        parse_libsvm(text.as_bytes(), Path::new("mem.svm"), opts)
    }

    fn sparse<T: Scalar>(d: &Dataset<T>) -> &CsrMatrix<T> {
        match &d.x {
            Features::Sparse(m) => m,
            Features::Dense(_) => panic!("expected sparse features"),
        }
    }

    #[test]
    fn parses_labels_comments_blank_lines_qid_and_crlf() {
        let text = "# header comment\r\n\
                    -1 3:1 11:0.5 # trailing comment\r\n\
                    \r\n\
                    +1 qid:7 1:2.5e-1\t2:-3\n\
                    1.0 2:0 4:1\n\
                    2\n\
                    0 1:1\n\
                    3.5 4:+2\n";
        let d = parse::<f64>(text, &LibsvmOptions::default()).unwrap();
        assert_eq!(d.y, vec![-1.0, 1.0, 1.0, 2.0, 0.0, 3.5]);
        let m = sparse(&d);
        assert_eq!(
            (m.nrows(), m.ncols()),
            (6, 11),
            "1-based: index 11 is column 10"
        );
        assert_eq!(m.row(0), (&[2u32, 10][..], &[1.0, 0.5][..]));
        assert_eq!(m.row(1), (&[0u32, 1][..], &[0.25, -3.0][..]));
        assert_eq!(m.row(2), (&[3u32][..], &[1.0][..]), "explicit zero dropped");
        assert_eq!(m.row(3).0.len(), 0, "label-only row");
        assert_eq!(m.row(5), (&[3u32][..], &[2.0][..]));
    }

    #[test]
    fn detects_zero_and_one_based_indices() {
        let one = "1 1:1 3:3\n-1 2:2\n";
        let d = parse::<f64>(one, &LibsvmOptions::default()).unwrap();
        let m = sparse(&d);
        assert_eq!(m.ncols(), 3);
        assert_eq!(m.row(0), (&[0u32, 2][..], &[1.0, 3.0][..]));

        let zero = "1 1:1 3:3\n-1 0:5 2:2\n";
        let d = parse::<f64>(zero, &LibsvmOptions::default()).unwrap();
        let m = sparse(&d);
        assert_eq!(m.ncols(), 4, "0-based: index 3 is column 3");
        assert_eq!(m.row(0), (&[1u32, 3][..], &[1.0, 3.0][..]));
        assert_eq!(m.row(1), (&[0u32, 2][..], &[5.0, 2.0][..]));

        // An index 0 with value 0 still marks the file as 0-based.
        let d = parse::<f64>("1 0:0 2:1\n", &LibsvmOptions::default()).unwrap();
        assert_eq!(sparse(&d).row(0), (&[2u32][..], &[1.0][..]));

        // Forcing 0-based on a file without index 0 keeps the indices.
        let opts = LibsvmOptions {
            zero_based: Some(true),
            ..Default::default()
        };
        let d = parse::<f64>(one, &opts).unwrap();
        assert_eq!(sparse(&d).ncols(), 4);
        assert_eq!(sparse(&d).row(0).0, &[1u32, 3]);

        // Forcing 1-based on a file with index 0 is an error on the line of the first 0.
        let opts = LibsvmOptions {
            zero_based: Some(false),
            ..Default::default()
        };
        assert_parse_err(
            parse::<f64>(zero, &opts),
            2,
            "feature index 0 in a file read as 1-based: its indices start at 0, so read it as \
             0-based (--index-base 0",
        );
    }

    #[test]
    fn n_features_widens_or_rejects() {
        let text = "1 1:1\n\n-1 2:1 5:2\n1 3:1\n";
        let opts = |n| LibsvmOptions {
            n_features: Some(n),
            ..Default::default()
        };
        let d = parse::<f32>(text, &opts(8)).unwrap();
        assert_eq!(sparse(&d).ncols(), 8);
        let d = parse::<f32>(text, &opts(5)).unwrap();
        assert_eq!(sparse(&d).ncols(), 5);
        assert_parse_err(
            parse::<f32>(text, &opts(4)),
            3,
            "index 5 is out of range for 4 features (indices are 1-based, so the largest \
             allowed is 4)",
        );
        // 0-based: index 5 needs 6 columns.
        let zero = LibsvmOptions {
            zero_based: Some(true),
            n_features: Some(5),
        };
        assert_parse_err(parse::<f32>(text, &zero), 3, "largest allowed is 4");
        let t = TempPath::write("nf0.svm", text.as_bytes());
        assert!(matches!(
            read_libsvm::<f32>(&t.0, &opts(0)),
            Err(JokerError::InvalidParameter {
                name: "n_features",
                ..
            })
        ));
    }

    #[test]
    fn malformed_lines_name_the_line_and_the_problem() {
        let cases: &[(&str, &str)] = &[
            ("1 abc:1", "bad feature index `abc`"),
            ("1 3", "expected `index:value`, got `3`"),
            ("1 3:", "missing value in `3:`"),
            ("1 :1", "missing index"),
            ("1 -3:1", "negative feature index"),
            ("1 +3:1", "bad feature index"),
            ("1 1.5:1", "bad feature index"),
            ("1 3:abc", "bad value `abc` in `3:abc`"),
            ("1 3:nan", "non-finite value"),
            ("1 3:inf", "non-finite value"),
            ("1 3:-Infinity", "non-finite value"),
            ("1 3:1:2", "bad value"),
            ("1 5:1 3:1", "strictly increasing"),
            ("1 3:1 3:2", "duplicate feature index 3"),
            ("1 99999999999:1", "too large"),
            ("abc 1:1", "bad label `abc`"),
            ("nan 1:1", "non-finite label"),
            ("3:1 4:1", "missing label"),
            ("1,2 3:1", "multi-label"),
            ("1 2 3:1", "expected `index:value`"),
        ];
        for (bad, needle) in cases {
            let text = format!("# comment\n1 1:1\n\n{bad}\n-1 2:1\n");
            assert_parse_err(parse::<f64>(&text, &LibsvmOptions::default()), 4, needle);
        }
        // Out of the f32 range, but fine in f64.
        let text = "1 1:1\n1 2:1e300\n";
        assert_parse_err(
            parse::<f32>(text, &LibsvmOptions::default()),
            2,
            "out of range for f32",
        );
        assert!(parse::<f64>(text, &LibsvmOptions::default()).is_ok());
        // Too small for f32: a zero, so not stored.
        let d = parse::<f32>("1 1:1e-50 2:1\n", &LibsvmOptions::default()).unwrap();
        assert_eq!(sparse(&d).row(0), (&[1u32][..], &[1.0f32][..]));
        // Invalid UTF-8 in a value.
        let bytes = b"1 1:1\n1 2:\xff\n";
        assert_parse_err(
            parse_libsvm::<f64, _>(&bytes[..], Path::new("x"), &LibsvmOptions::default()),
            2,
            "bad value",
        );
    }

    #[test]
    fn indices_beyond_the_column_range_are_parse_errors() {
        let e = parse::<f64>("1 0:1\n1 4294967295:1\n", &LibsvmOptions::default());
        assert_parse_err(
            e,
            2,
            "feature index 4294967295 is too large: with 0-based indices the largest is \
             4294967294",
        );
        // 1-based, the same index is the last column there is.
        let d = parse::<f64>("1 4294967295:1\n", &LibsvmOptions::default()).unwrap();
        assert_eq!(d.x.ncols(), u32::MAX as usize);
        let t = TempPath::write("wide.svm", b"1 1:1\n");
        let opts = LibsvmOptions {
            n_features: Some(u32::MAX as usize + 1),
            ..Default::default()
        };
        assert!(matches!(
            read_libsvm::<f32>(&t.0, &opts),
            Err(JokerError::InvalidParameter {
                name: "n_features",
                ..
            })
        ));
    }

    #[test]
    fn parse_error_display_names_path_and_line() {
        let e = parse::<f64>("1 1:1\n1 x:1\n", &LibsvmOptions::default()).unwrap_err();
        let msg = e.to_string();
        assert!(msg.starts_with("mem.svm:2: bad feature index `x`"), "{msg}");
    }

    #[test]
    fn labels_only_needs_n_features() {
        let r = parse::<f64>("1\n-1\n", &LibsvmOptions::default());
        assert!(
            matches!(&r, Err(JokerError::EmptyData(m)) if m.ends_with(
                "no line has a feature (`index:value`), only labels; if every feature is zero, \
                 give their number (--n-features N on the command line, \
                 `LibsvmOptions { n_features: Some(N), .. }` in Rust)"
            )),
            "{r:?}"
        );
        let opts = LibsvmOptions {
            n_features: Some(2),
            ..Default::default()
        };
        let d = parse::<f64>("1\n-1\n", &opts).unwrap();
        assert_eq!((d.len(), d.x.ncols()), (2, 2));
    }

    fn sample_sparse() -> Dataset<f64> {
        let x = CsrMatrix::new(
            4,
            6,
            vec![0, 2, 2, 5, 6],
            vec![0, 4, 1, 2, 3, 5],
            vec![0.1, -2.5, 1e-7, 3.0e20, 1.0 / 3.0, -0.0001],
        )
        .unwrap();
        Dataset::new(Features::Sparse(x), vec![-1.0, 1.0, 2.5, 1e-9]).unwrap()
    }

    #[test]
    fn write_then_read_round_trips() {
        let data = sample_sparse();
        let opts = LibsvmOptions {
            n_features: Some(6),
            ..Default::default()
        };
        for name in ["rt.svm", "rt.svm.gz", "rt.svm.bz2"] {
            let t = TempPath::new(name);
            write_libsvm(&t.0, &data).unwrap();
            let back = read_libsvm::<f64>(&t.0, &opts).unwrap();
            assert_eq!(back, data, "{name}");
            // Without n_features the width comes from the largest index (6, 1-based).
            let back = read_libsvm::<f64>(&t.0, &LibsvmOptions::default()).unwrap();
            assert_eq!(back.x.ncols(), 6);
        }
        let raw = {
            let t = TempPath::new("rt-text.svm");
            write_libsvm(&t.0, &data).unwrap();
            std::fs::read_to_string(&t.0).unwrap()
        };
        assert!(raw.starts_with("-1 1:0.1 5:-2.5\n1\n"), "{raw}");

        // f32 values are written in their own shortest form and read back exactly.
        let d32 = Dataset::new(data.x.cast::<f32>(), data.y.clone()).unwrap();
        let t = TempPath::new("rt32.svm");
        write_libsvm(&t.0, &d32).unwrap();
        let text = std::fs::read_to_string(&t.0).unwrap();
        assert!(text.contains(" 4:0.33333334\n"), "{text}");
        assert_eq!(read_libsvm::<f32>(&t.0, &opts).unwrap(), d32);
    }

    #[test]
    fn dense_datasets_round_trip_through_libsvm() {
        let x = DenseMatrix::new(2, 3, vec![0.0, 1.5, 0.0, -2.0, 0.0, 0.0]).unwrap();
        let data = Dataset::new(Features::Dense(x), vec![0.0, 1.0]).unwrap();
        let t = TempPath::new("dense.svm");
        write_libsvm(&t.0, &data).unwrap();
        assert_eq!(std::fs::read_to_string(&t.0).unwrap(), "0 2:1.5\n1 1:-2\n");
        let opts = LibsvmOptions {
            n_features: Some(3),
            ..Default::default()
        };
        let back = read_libsvm::<f64>(&t.0, &opts).unwrap();
        let mut got = vec![0.0; 6];
        back.x.gather_range(0, &mut got);
        assert_eq!(got, vec![0.0, 1.5, 0.0, -2.0, 0.0, 0.0]);
        assert_eq!(back.y, data.y);
    }
}

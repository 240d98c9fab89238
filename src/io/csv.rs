//! Delimited numeric text (CSV, TSV, semicolon- or whitespace-separated) into dense features.

use std::io::BufRead;
use std::path::Path;

use super::{
    Lines, is_blank_or_comment, note_misnamed, open, parse_err, parse_number, show, source_name,
};
use crate::data::{Dataset, DenseMatrix, Features};
use crate::error::{JokerError, Result, invalid};
use crate::scalar::Scalar;

/// Which field of a row holds the target. Written `first`, `last` or a zero-based index, on
/// the command line (`--label-column`) and in model files.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum LabelColumn {
    /// The first field.
    First,
    /// The last field (the default).
    #[default]
    Last,
    /// The field with this zero-based index.
    Index(usize),
}

impl LabelColumn {
    /// The zero-based field of a row of `n` fields (`None` for an index past the row).
    pub fn resolve(self, n: usize) -> Option<usize> {
        match self {
            LabelColumn::First if n > 0 => Some(0),
            LabelColumn::Last if n > 0 => Some(n - 1),
            LabelColumn::Index(k) if k < n => Some(k),
            _ => None,
        }
    }
}

impl std::fmt::Display for LabelColumn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LabelColumn::First => f.write_str("first"),
            LabelColumn::Last => f.write_str("last"),
            LabelColumn::Index(k) => write!(f, "{k}"),
        }
    }
}

impl std::str::FromStr for LabelColumn {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "first" => Ok(LabelColumn::First),
            "last" => Ok(LabelColumn::Last),
            _ => s.parse::<usize>().map(LabelColumn::Index).map_err(|_| {
                format!("expected `first`, `last` or a zero-based column index, got `{s}`")
            }),
        }
    }
}

impl From<LabelColumn> for String {
    fn from(c: LabelColumn) -> String {
        c.to_string()
    }
}

impl TryFrom<String> for LabelColumn {
    type Error = String;

    fn try_from(s: String) -> std::result::Result<Self, String> {
        s.parse()
    }
}

/// Options of [`read_csv`]; the default detects the delimiter and the header and takes the
/// target from the last column.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CsvOptions {
    /// The field separator. `None` detects it from the first two lines: the first of tab,
    /// `;` and `,` that occurs equally often (and at least once) in both, otherwise one that
    /// occurs in the first line, otherwise runs of whitespace. `Some(b' ')` also means runs of
    /// whitespace (spaces and tabs).
    pub delimiter: Option<u8>,
    /// Whether the first non-blank line is a header of column names. `None` detects: it is a
    /// header if any of its fields is not a number.
    pub has_header: Option<bool>,
    /// The column of the target; the other columns, in order, are the features.
    pub label_column: LabelColumn,
}

/// How fields are separated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Delim {
    Byte(u8),
    Whitespace,
}

impl Delim {
    fn describe(self) -> String {
        match self {
            Delim::Byte(b'\t') => "tab".into(),
            Delim::Byte(b) => format!("`{}`", b as char),
            Delim::Whitespace => "whitespace".into(),
        }
    }
}

/// Reads delimited numeric text into dense features and a target column.
///
/// Every row must have the same number of fields (at least two: the target and one
/// feature), each a finite number; fields may be padded with spaces and wrapped in double
/// quotes. Blank lines and lines starting with `#` are skipped; lines may end in `\r\n` or
/// `\r`. The file may be gzip or bzip2 compressed, and the path `-` reads standard input
/// (see [the module documentation](crate::io)).
///
/// # Errors
/// [`JokerError::Parse`](crate::JokerError::Parse) naming the line of a row with a bad,
/// empty or missing field or a field count different from the first row (or header),
/// [`JokerError::Io`](crate::JokerError::Io) if the file cannot be opened or read,
/// [`JokerError::EmptyData`](crate::JokerError::EmptyData) if there is no data row, and
/// [`JokerError::InvalidParameter`](crate::JokerError::InvalidParameter) for a delimiter
/// that can be part of a number (a digit, `.`, `+`, `-`, `e`, ...), a quote or a line end.
pub fn read_csv<T: Scalar>(path: &Path, opts: &CsvOptions) -> Result<Dataset<T>> {
    check_delimiter(opts)?;
    let (reader, compression) = open(path)?;
    parse_csv(reader, path, opts).map_err(|e| note_misnamed(e, path, compression))
}

/// Rejects a delimiter that could be part of a number, a quote or a line end: fields could
/// not be told apart.
pub(super) fn check_delimiter(opts: &CsvOptions) -> Result<()> {
    match opts.delimiter {
        Some(d) if d.is_ascii_alphanumeric() || b".+-\"\r\n".contains(&d) || !d.is_ascii() => {
            Err(invalid(
                "delimiter",
                format!(
                    "`{}` cannot separate numeric fields; use e.g. b',', b'\\t', b';' or b' '",
                    (d as char).escape_default()
                ),
            ))
        }
        _ => Ok(()),
    }
}

/// [`read_csv`] on an open reader; `path` names the source in errors.
pub(crate) fn parse_csv<T: Scalar, R: BufRead>(
    reader: R,
    path: &Path,
    opts: &CsvOptions,
) -> Result<Dataset<T>> {
    let mut lines = Lines::new(reader, path);
    let head = read_head(&mut lines)?;
    let Some((first_ln, first)) = head.first() else {
        return Err(super::empty(path));
    };
    let (delim, header) = detect(&head, opts);
    let mut rows = Rows::new(path, delim, opts.label_column);
    for (k, (ln, line)) in head.iter().enumerate() {
        if k == 0 && header {
            rows.set_shape(*first_ln, first, true)?;
        } else {
            rows.push(*ln, line)?;
        }
    }
    while let Some((ln, line)) = lines.next_line()? {
        if !is_blank_or_comment(line) {
            rows.push(ln, line)?;
        }
    }
    if rows.y.is_empty() {
        return Err(header_only(path, &head, opts, delim));
    }
    rows.into_dataset()
}

/// The first two non-blank lines with their numbers: what detection looks at.
pub(super) type Head = Vec<(usize, Vec<u8>)>;

/// Reads the first two non-blank lines (fewer if the source has fewer).
pub(super) fn read_head<R: BufRead>(lines: &mut Lines<'_, R>) -> Result<Head> {
    let mut head = Vec::with_capacity(2);
    while head.len() < 2 {
        match lines.next_line()? {
            None => break,
            Some((_, l)) if is_blank_or_comment(l) => {}
            Some((ln, l)) => head.push((ln, l.to_vec())),
        }
    }
    Ok(head)
}

/// The delimiter, and whether the first line of `head` (not empty) is a header, as the
/// options say or the head shows.
pub(super) fn detect(head: &Head, opts: &CsvOptions) -> (Delim, bool) {
    let first = &head[0].1;
    let delim = match opts.delimiter {
        Some(b' ') => Delim::Whitespace,
        Some(d) => Delim::Byte(d),
        None => detect_delimiter(first, head.get(1).map(|(_, l)| &l[..])),
    };
    let header = opts
        .has_header
        .unwrap_or_else(|| looks_like_header(first, delim));
    (delim, header)
}

/// The rows read so far and what every row must look like.
pub(super) struct Rows<'p, T> {
    path: &'p Path,
    /// Said after the line number of the first row (or header) in messages: where that
    /// number counts from, when not from where the other lines' numbers do.
    shape_origin: &'static str,
    delim: Delim,
    label_column: LabelColumn,
    /// Number of fields, the label's field, and the line that fixed them (and whether it
    /// was the header).
    shape: Option<(usize, usize, (usize, bool))>,
    /// Field boundaries of the current line, reused.
    fields: Vec<(usize, usize)>,
    pub(super) y: Vec<f64>,
    data: Vec<T>,
}

impl<'p, T: Scalar> Rows<'p, T> {
    pub(super) fn new(path: &'p Path, delim: Delim, label_column: LabelColumn) -> Self {
        Rows {
            path,
            shape_origin: "",
            delim,
            label_column,
            shape: None,
            fields: Vec::new(),
            y: Vec::new(),
            data: Vec::new(),
        }
    }

    /// Says that the line number of the first row (or header) counts from `origin` (as in
    /// " of the file"), not from where the rows pushed later count.
    pub(super) fn shape_origin(&mut self, origin: &'static str) {
        self.shape_origin = origin;
    }

    /// Number of features of every row (the fields less the target), once the shape is set.
    pub(super) fn n_features(&self) -> Option<usize> {
        self.shape.map(|(n, _, _)| n - 1)
    }

    /// The rows read as a dataset; needs at least one.
    pub(super) fn into_dataset(self) -> Result<Dataset<T>> {
        let (nfields, _, _) = self.shape.expect("set with the first row");
        let x = DenseMatrix::new(self.y.len(), nfields - 1, self.data)?;
        Dataset::new(Features::Dense(x), self.y)
    }

    /// Fixes the number of fields and the label field from the header or first row.
    pub(super) fn set_shape(&mut self, ln: usize, line: &[u8], is_header: bool) -> Result<()> {
        split_fields(line, self.delim, &mut self.fields);
        let n = self.fields.len();
        if n < 2 {
            return Err(parse_err(
                self.path,
                ln,
                format!(
                    "found one field, `{}`, with {} as the delimiter, but a row needs at least \
                     two, the target and a feature: separate the fields by commas, tabs, \
                     semicolons or spaces (in Rust, `CsvOptions {{ delimiter: Some(b'|'), .. }}` \
                     names any other delimiter)",
                    show(line),
                    self.delim.describe()
                ),
            ));
        }
        let label = match self.label_column {
            LabelColumn::First => 0,
            LabelColumn::Last => n - 1,
            LabelColumn::Index(k) if k < n => k,
            LabelColumn::Index(k) => {
                return Err(parse_err(
                    self.path,
                    ln,
                    format!(
                        "label column index {k} is out of range: the line has {n} fields, so \
                         the label column is `first`, `last` or an index from 0 to {} \
                         (--label-column on the command line, `CsvOptions::label_column` in \
                         Rust)",
                        n - 1
                    ),
                ));
            }
        };
        self.shape = Some((n, label, (ln, is_header)));
        Ok(())
    }

    /// Parses one data row.
    pub(super) fn push(&mut self, ln: usize, line: &[u8]) -> Result<()> {
        if self.shape.is_none() {
            self.set_shape(ln, line, false)?;
        } else {
            split_fields(line, self.delim, &mut self.fields);
        }
        let (n, label, (first_ln, is_header)) = self.shape.expect("just set");
        if self.fields.len() != n {
            return Err(parse_err(
                self.path,
                ln,
                format!(
                    "found {} fields, expected {n} as on line {first_ln}{}{} (delimiter: {})",
                    self.fields.len(),
                    self.shape_origin,
                    if is_header { " (the header)" } else { "" },
                    self.delim.describe()
                ),
            ));
        }
        for (k, &(a, b)) in self.fields.iter().enumerate() {
            let field = unquote(&line[a..b]);
            if field.is_empty() {
                return Err(parse_err(
                    self.path,
                    ln,
                    format!(
                        "field {} is empty: missing values are not supported, so fill them in \
                         or drop the row",
                        k + 1
                    ),
                ));
            }
            // Targets are kept in f64, so only the features must fit T.
            let v = if k == label {
                parse_number::<f64>(field, "target", field)
            } else {
                parse_number::<T>(field, "value", field)
            }
            .map_err(|r| parse_err(self.path, ln, format!("field {}: {r}", k + 1)))?;
            if k == label {
                self.y.push(v);
            } else {
                self.data.push(T::from_f64(v));
            }
        }
        Ok(())
    }
}

/// Splits a line into field ranges (trimmed of surrounding whitespace).
fn split_fields(line: &[u8], delim: Delim, out: &mut Vec<(usize, usize)>) {
    out.clear();
    match delim {
        Delim::Whitespace => {
            let mut start = None;
            for (i, b) in line.iter().enumerate() {
                match (b.is_ascii_whitespace(), start) {
                    (true, Some(s)) => {
                        out.push((s, i));
                        start = None;
                    }
                    (false, None) => start = Some(i),
                    _ => {}
                }
            }
            if let Some(s) = start {
                out.push((s, line.len()));
            }
        }
        Delim::Byte(d) => {
            let mut start = 0;
            for (i, &b) in line.iter().enumerate() {
                if b == d {
                    out.push(trim_range(line, start, i));
                    start = i + 1;
                }
            }
            out.push(trim_range(line, start, line.len()));
        }
    }
}

fn trim_range(line: &[u8], mut a: usize, mut b: usize) -> (usize, usize) {
    while a < b && line[a].is_ascii_whitespace() {
        a += 1;
    }
    while b > a && line[b - 1].is_ascii_whitespace() {
        b -= 1;
    }
    (a, b)
}

/// A field without surrounding double quotes.
fn unquote(f: &[u8]) -> &[u8] {
    match f {
        [b'"', inner @ .., b'"'] => inner.trim_ascii(),
        _ => f,
    }
}

/// Picks the delimiter from the first line and, if there is one, the second.
fn detect_delimiter(first: &[u8], second: Option<&[u8]>) -> Delim {
    const CANDIDATES: [u8; 3] = [b'\t', b';', b','];
    let count = |l: &[u8], d: u8| l.iter().filter(|&&b| b == d).count();
    let consistent = CANDIDATES.iter().find(|&&d| {
        let c = count(first, d);
        c > 0 && second.is_none_or(|s| count(s, d) == c)
    });
    let present = || CANDIDATES.iter().find(|&&d| count(first, d) > 0);
    match consistent.or_else(present) {
        Some(&d) => Delim::Byte(d),
        None => Delim::Whitespace,
    }
}

/// The first non-empty field of a line that is not a number, as its zero-based position
/// and text: a line with one is a header (unless told otherwise).
fn first_non_number(line: &[u8], delim: Delim) -> Option<(usize, &[u8])> {
    let mut fields = Vec::new();
    split_fields(line, delim, &mut fields);
    fields.iter().enumerate().find_map(|(k, &(a, b))| {
        let f = unquote(&line[a..b]);
        let number = std::str::from_utf8(f).is_ok_and(|s| s.parse::<f64>().is_ok());
        (!f.is_empty() && !number).then_some((k, f))
    })
}

/// Whether a first line is a header of column names: most of its non-empty fields are not
/// numbers. A row of numbers with a stray token (`1,2,x`) is a data row, so its error is
/// reported on its own line rather than on the next one after it was passed over as a header.
fn looks_like_header(line: &[u8], delim: Delim) -> bool {
    let mut fields = Vec::new();
    split_fields(line, delim, &mut fields);
    let (mut words, mut filled) = (0usize, 0usize);
    for &(a, b) in &fields {
        let f = unquote(&line[a..b]);
        if f.is_empty() {
            continue;
        }
        filled += 1;
        words += usize::from(!std::str::from_utf8(f).is_ok_and(|s| s.parse::<f64>().is_ok()));
    }
    2 * words > filled
}

/// The error for a source whose only data line was read as a header: says why it was taken
/// for one, since a line of text that is not data at all ends up here too.
pub(super) fn header_only(path: &Path, head: &Head, opts: &CsvOptions, delim: Delim) -> JokerError {
    let name = source_name(path).display();
    let (ln, line) = &head[0];
    JokerError::EmptyData(match (opts.has_header, first_non_number(line, delim)) {
        (None, Some((k, field))) => format!(
            "{name}: no data rows: line {ln}, `{}`, is the only non-blank line, and it was \
             read as a header because its field {}, `{}`, is not a number; a data row holds \
             only numbers (the target and the features)",
            show(line),
            k + 1,
            show(field)
        ),
        _ => format!("{name}: no data rows after the header on line {ln}"),
    })
}

#[cfg(test)]
mod tests {
    use super::super::test_util::{TempPath, assert_parse_err, bzip2, gzip};
    use super::*;
    use crate::error::JokerError;

    fn parse(text: &str, opts: &CsvOptions) -> Result<Dataset<f64>> {
        parse_csv(text.as_bytes(), Path::new("mem.csv"), opts)
    }

    /// Rows of the dense features.
    fn rows(d: &Dataset<f64>) -> Vec<Vec<f64>> {
        match &d.x {
            Features::Dense(m) => (0..m.nrows()).map(|i| m.row(i).to_vec()).collect(),
            Features::Sparse(_) => panic!("expected dense features"),
        }
    }

    const TABLE: [[f64; 3]; 3] = [[1.0, 2.0, 3.0], [4.0, -5.5, 6.0], [7.0, 8e-3, 9.0]];

    fn expect_table(d: &Dataset<f64>, label: usize) {
        let want_y: Vec<f64> = TABLE.iter().map(|r| r[label]).collect();
        let want_x: Vec<Vec<f64>> = TABLE
            .iter()
            .map(|r| (0..3).filter(|&k| k != label).map(|k| r[k]).collect())
            .collect();
        assert_eq!(d.y, want_y);
        assert_eq!(rows(d), want_x);
    }

    #[test]
    fn detects_delimiters() {
        let bodies = [
            "1,2,3\n4,-5.5,6\n7,8e-3,9\n",
            "1\t2\t3\n4\t-5.5\t6\n7\t8e-3\t9\n",
            "1;2;3\r\n4;-5.5;6\r\n7;8e-3;9\r\n",
            "  1   2 3\n4\t -5.5  6  \n7 8e-3 9\n",
            "1, 2, 3\n4, -5.5, 6\n7, 8e-3, 9\n",
            "# comment\n\n\"1\",\"2\",\"3\"\n4,-5.5,6\n\n7 ,8e-3, 9\n",
        ];
        for body in bodies {
            let d = parse(body, &CsvOptions::default()).unwrap_or_else(|e| panic!("{e}"));
            expect_table(&d, 2);
        }
        // Consistency across the two lines beats the order of preference.
        assert_eq!(
            detect_delimiter(b"a\tb,c,d", Some(b"1,2,3")),
            Delim::Byte(b',')
        );
        assert_eq!(
            detect_delimiter(b"1;2,5", Some(b"1;3,5")),
            Delim::Byte(b';')
        );
        assert_eq!(detect_delimiter(b"1 2", None), Delim::Whitespace);
    }

    #[test]
    fn detects_headers() {
        let d = parse(
            "a,b,target\n1,2,3\n4,-5.5,6\n7,8e-3,9\n",
            &CsvOptions::default(),
        )
        .unwrap();
        expect_table(&d, 2);
        let d = parse(
            "\"x 1\"\t\"x 2\"\ty\n1\t2\t3\n4\t-5.5\t6\n7\t8e-3\t9\n",
            &CsvOptions::default(),
        )
        .unwrap();
        expect_table(&d, 2);
        // A numeric first line is data unless told otherwise.
        let d = parse("0,0,0\n1,2,3\n4,-5.5,6\n7,8e-3,9\n", &CsvOptions::default()).unwrap();
        assert_eq!(d.len(), 4);
        let opts = CsvOptions {
            has_header: Some(true),
            ..Default::default()
        };
        let d = parse("0,0,0\n1,2,3\n4,-5.5,6\n7,8e-3,9\n", &opts).unwrap();
        expect_table(&d, 2);
        // A row of numbers with one stray token is a data row: its error is on line 1, not
        // on line 2 after it was passed over as a header.
        assert_parse_err(
            parse("1,2,x\n3,4,5\n6,7,8\n", &CsvOptions::default()),
            1,
            "bad target `x`",
        );
        // Told there is no header, a non-numeric first line is an error on line 1.
        let opts = CsvOptions {
            has_header: Some(false),
            ..Default::default()
        };
        assert_parse_err(parse("a,b,c\n1,2,3\n", &opts), 1, "bad value `a`");
    }

    #[test]
    fn label_column_choices() {
        let body = "1,2,3\n4,-5.5,6\n7,8e-3,9\n";
        for (label_column, k) in [
            (LabelColumn::First, 0),
            (LabelColumn::Last, 2),
            (LabelColumn::Index(0), 0),
            (LabelColumn::Index(1), 1),
            (LabelColumn::Index(2), 2),
        ] {
            let opts = CsvOptions {
                label_column,
                ..Default::default()
            };
            expect_table(&parse(body, &opts).unwrap(), k);
        }
        let opts = CsvOptions {
            label_column: LabelColumn::Index(3),
            ..Default::default()
        };
        assert_parse_err(
            parse(body, &opts),
            1,
            "label column index 3 is out of range",
        );
        assert_parse_err(parse(&format!("h,i,j\n{body}"), &opts), 1, "out of range");
    }

    #[test]
    fn malformed_rows_name_the_line() {
        let cases: &[(&str, usize, &str)] = &[
            ("1,2,3\n4,5\n", 2, "found 2 fields, expected 3 as on line 1"),
            (
                "a,b,c\n\n1,2,3\n4,5,6,7\n",
                4,
                "expected 3 as on line 1 (the header)",
            ),
            ("1,2,3\n4,,6\n", 2, "field 2 is empty"),
            ("1,2,3\n4,5,\n", 2, "field 3 is empty"),
            ("1,2,3\n4,x,6\n", 2, "field 2: bad value `x`"),
            ("1,2,3\n4,5,y\n", 2, "field 3: bad target `y`"),
            ("1,2,3\n# c\n4,nan,6\n", 3, "non-finite value"),
            ("1,2,3\n4,5,inf\n", 2, "non-finite target"),
            ("1\n2\n", 1, "needs at least two, the target and a feature"),
            (
                "1|2|3\n4|5|6\n",
                1,
                "found one field, `1|2|3`, with whitespace as the delimiter",
            ),
        ];
        for (body, line, needle) in cases {
            assert_parse_err(parse(body, &CsvOptions::default()), *line, needle);
        }
        // Out of the f32 range.
        let r = parse_csv::<f32, _>(&b"1,2\n1e300,3\n"[..], Path::new("x"), &Default::default());
        assert_parse_err(r, 2, "out of range for f32");
        // A header alone, or only comments, is no data.
        let r = parse("a,b\n\n", &CsvOptions::default());
        assert!(matches!(r, Err(JokerError::EmptyData(_))), "{r:?}");
    }

    #[test]
    fn explicit_delimiters() {
        let opts = |d| CsvOptions {
            delimiter: Some(d),
            ..Default::default()
        };
        // Space means runs of whitespace.
        let d = parse("1  2 3\n4 -5.5\t6\n7 8e-3 9\n", &opts(b' ')).unwrap();
        expect_table(&d, 2);
        let d = parse("1|2|3\n4|-5.5|6\n7|8e-3|9\n", &opts(b'|')).unwrap();
        expect_table(&d, 2);
        let t = TempPath::write("bad-delim.csv", b"1,2\n");
        for bad in [b'.', b'-', b'e', b'7', b'"', b'\n'] {
            let r = read_csv::<f64>(&t.0, &opts(bad));
            assert!(
                matches!(
                    r,
                    Err(JokerError::InvalidParameter {
                        name: "delimiter",
                        ..
                    })
                ),
                "{r:?}"
            );
        }
    }

    #[test]
    fn compressed_csv_files() {
        let body = b"a,b,c\n1,2,3\n4,-5.5,6\n7,8e-3,9\n";
        for (name, bytes) in [
            ("t.csv.gz", gzip(body)),
            ("t.csv.bz2", bzip2(body)),
            ("t-gz.csv", gzip(body)),
        ] {
            let t = TempPath::write(name, &bytes);
            let d = read_csv::<f64>(&t.0, &CsvOptions::default()).unwrap();
            expect_table(&d, 2);
            let d32 = read_csv::<f32>(&t.0, &CsvOptions::default()).unwrap();
            assert_eq!(d32.x.ncols(), 2);
            assert_eq!(d32.y, d.y);
        }
    }
}

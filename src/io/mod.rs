//! Readers (and a writer) for data files: LIBSVM / SVMlight sparse text and delimited text
//! (CSV, TSV, whitespace), plain or compressed with gzip or bzip2.
//!
//! * [`read_libsvm`] reads `label index:value ...` lines into sparse features,
//! * [`read_csv`] reads delimited numeric tables into dense features,
//! * [`read_auto`] looks at the first data line and picks one of the two,
//! * [`write_libsvm`] writes any [`Dataset`] in LIBSVM format (1-based indices).
//!
//! Compression is recognised by the leading magic bytes of the file, so `data.gz`,
//! `data.bz2` and a compressed file with no telling extension all read transparently;
//! concatenated gzip members and bzip2 streams are read to the end. A file named `.gz` or
//! `.bz2` whose content is plain text (as some downloaders leave it) is read as plain text.
//!
//! Every malformed line gives [`JokerError::Parse`] with the file, the one-based line number
//! and the reason; failures to open or read give [`JokerError::Io`]; a file without any data
//! line gives [`JokerError::EmptyData`].

mod csv;
mod libsvm;

pub use self::csv::{CsvOptions, LabelColumn, read_csv};
pub use self::libsvm::{LibsvmOptions, read_libsvm, write_libsvm};

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use crate::data::Dataset;
use crate::error::{JokerError, Result};
use crate::scalar::Scalar;

/// Buffer size of the readers: large enough that a system call or a decompression step
/// serves many lines.
const BUF_SIZE: usize = 1 << 17;

/// Reads a data file whose format is guessed from its first data line (blank lines and lines
/// starting with `#` are passed over): [`read_libsvm`] with default options if it looks like
/// `label index:value ...` (or is a lone number, a label with no features), otherwise
/// [`read_csv`] with delimiter and header detection and the label in the last column.
pub fn read_auto<T: Scalar>(path: &Path) -> Result<Dataset<T>> {
    let mut lines = Lines::new(open(path)?, path);
    let mut is_libsvm = None;
    while let Some((_, line)) = lines.next_line()? {
        if is_blank_or_comment(line) {
            continue;
        }
        is_libsvm = Some(looks_like_libsvm(line));
        break;
    }
    drop(lines);
    match is_libsvm {
        None => Err(empty(path)),
        Some(true) => read_libsvm(path, &LibsvmOptions::default()),
        Some(false) => read_csv(path, &CsvOptions::default()),
    }
}

/// Whether a (non-blank) line has the shape of a LIBSVM line: its first feature token (after
/// the label and any `qid:`) is `digits:number`, or the line is a lone number.
fn looks_like_libsvm(line: &[u8]) -> bool {
    let line = strip_comment(line);
    let mut toks = tokens(line);
    let Some(first) = toks.next() else {
        return false;
    };
    if is_pair(first) {
        // A feature where the label should be: a malformed LIBSVM line, best reported as such.
        return true;
    }
    match toks.find(|t| !t.starts_with(b"qid:")) {
        Some(t) => is_pair(t),
        None => std::str::from_utf8(first).is_ok_and(|s| s.parse::<f64>().is_ok()),
    }
}

/// `digits:number`.
fn is_pair(tok: &[u8]) -> bool {
    let Some(colon) = tok.iter().position(|&b| b == b':') else {
        return false;
    };
    let (idx, val) = (&tok[..colon], &tok[colon + 1..]);
    !idx.is_empty()
        && idx.iter().all(u8::is_ascii_digit)
        && std::str::from_utf8(val).is_ok_and(|s| s.parse::<f64>().is_ok())
}

/// The compression of a stream, from its first bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Compression {
    None,
    Gzip,
    Bzip2,
}

impl Compression {
    fn sniff(head: &[u8]) -> Self {
        // gzip: ID1 ID2 and CM = 8 (deflate), RFC 1952.
        if head.starts_with(&[0x1f, 0x8b, 0x08]) {
            return Compression::Gzip;
        }
        // bzip2: "BZh" and a block size digit, then a block header (the BCD digits of pi)
        // or, for an empty stream, the end-of-stream marker (those of sqrt(pi)).
        if head.len() >= 10
            && head.starts_with(b"BZh")
            && (b'1'..=b'9').contains(&head[3])
            && (head[4..10] == [0x31, 0x41, 0x59, 0x26, 0x53, 0x59]
                || head[4..10] == [0x17, 0x72, 0x45, 0x38, 0x50, 0x90])
        {
            return Compression::Bzip2;
        }
        Compression::None
    }
}

pub(crate) fn io_err(path: &Path, source: std::io::Error) -> JokerError {
    JokerError::Io {
        path: path.to_path_buf(),
        source,
    }
}

pub(crate) fn parse_err(path: &Path, line: usize, reason: impl Into<String>) -> JokerError {
    JokerError::Parse {
        path: path.to_path_buf(),
        line,
        reason: reason.into(),
    }
}

fn empty(path: &Path) -> JokerError {
    JokerError::EmptyData(format!("{}: no data lines", path.display()))
}

/// Opens `path` for buffered reading, decompressing gzip or bzip2 content. An empty file is
/// [`JokerError::EmptyData`].
pub(crate) fn open(path: &Path) -> Result<Box<dyn BufRead>> {
    let file = File::open(path).map_err(|e| io_err(path, e))?;
    let mut raw = BufReader::with_capacity(BUF_SIZE, file);
    let head = raw.fill_buf().map_err(|e| io_err(path, e))?;
    if head.is_empty() {
        return Err(JokerError::EmptyData(format!(
            "{}: the file is empty",
            path.display()
        )));
    }
    Ok(match Compression::sniff(head) {
        Compression::None => Box::new(raw),
        Compression::Gzip => Box::new(BufReader::with_capacity(
            BUF_SIZE,
            flate2::bufread::MultiGzDecoder::new(raw),
        )),
        Compression::Bzip2 => Box::new(BufReader::with_capacity(
            BUF_SIZE,
            bzip2::bufread::MultiBzDecoder::new(raw),
        )),
    })
}

/// Line-by-line reading into one reused buffer, counting lines from 1; strips the line end
/// (`\n` or `\r\n`) and a UTF-8 byte-order mark on the first line.
pub(crate) struct Lines<'p, R> {
    reader: R,
    path: &'p Path,
    buf: Vec<u8>,
    line: usize,
}

impl<'p, R: BufRead> Lines<'p, R> {
    pub(crate) fn new(reader: R, path: &'p Path) -> Self {
        Lines {
            reader,
            path,
            buf: Vec::with_capacity(1024),
            line: 0,
        }
    }

    /// The next line and its one-based number, or `None` at the end.
    pub(crate) fn next_line(&mut self) -> Result<Option<(usize, &[u8])>> {
        self.buf.clear();
        let n = self
            .reader
            .read_until(b'\n', &mut self.buf)
            .map_err(|e| io_err(self.path, e))?;
        if n == 0 {
            return Ok(None);
        }
        self.line += 1;
        let mut s = &self.buf[..];
        if let Some(rest) = s.strip_suffix(b"\n") {
            s = rest;
        }
        if let Some(rest) = s.strip_suffix(b"\r") {
            s = rest;
        }
        if self.line == 1
            && let Some(rest) = s.strip_prefix(b"\xEF\xBB\xBF")
        {
            s = rest;
        }
        Ok(Some((self.line, s)))
    }
}

/// The part of a line before a `#`.
pub(crate) fn strip_comment(line: &[u8]) -> &[u8] {
    match line.iter().position(|&b| b == b'#') {
        Some(p) => &line[..p],
        None => line,
    }
}

/// Whether a line is empty, all whitespace, or a comment (first non-blank byte `#`).
pub(crate) fn is_blank_or_comment(line: &[u8]) -> bool {
    line.trim_ascii_start().first().is_none_or(|&b| b == b'#')
}

/// The whitespace-separated tokens of a line.
pub(crate) fn tokens(line: &[u8]) -> impl Iterator<Item = &[u8]> {
    line.split(|b| b.is_ascii_whitespace())
        .filter(|t| !t.is_empty())
}

/// A token for an error message: lossy UTF-8, cut after 40 characters.
pub(crate) fn show(tok: &[u8]) -> String {
    let s = String::from_utf8_lossy(tok);
    if s.chars().count() > 40 {
        let mut t: String = s.chars().take(40).collect();
        t.push_str("...");
        t
    } else {
        s.into_owned()
    }
}

/// Parses a token as a finite `f64` that also fits `T`, or says why not (`what` names the
/// token in the message: "value", "label", ...).
pub(crate) fn parse_number<T: Scalar>(
    tok: &[u8],
    what: &str,
    context: &[u8],
) -> std::result::Result<f64, String> {
    let v = std::str::from_utf8(tok)
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .ok_or_else(|| {
            format!(
                "bad {what} `{}` in `{}`: expected a number",
                show(tok),
                show(context)
            )
        })?;
    if !v.is_finite() {
        return Err(format!(
            "non-finite {what} `{}` in `{}`",
            show(tok),
            show(context)
        ));
    }
    if !T::from_f64(v).to_f64().is_finite() {
        return Err(format!(
            "{what} `{}` in `{}` is out of range for {}",
            show(tok),
            show(context),
            T::NAME
        ));
    }
    Ok(v)
}

#[cfg(test)]
pub(crate) mod test_util {
    /// Asserts a `Parse` error on `line` whose reason contains `needle`.
    pub fn assert_parse_err<T: std::fmt::Debug>(
        r: crate::error::Result<T>,
        line: usize,
        needle: &str,
    ) {
        match r {
            Err(crate::error::JokerError::Parse {
                line: l, reason, ..
            }) => {
                assert_eq!(l, line, "wrong line for `{reason}`");
                assert!(
                    reason.contains(needle),
                    "reason `{reason}` lacks `{needle}`"
                );
            }
            other => panic!("expected a parse error on line {line}, got {other:?}"),
        }
    }

    use std::path::PathBuf;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A temporary file path, unique in this process and across processes, removed on drop.
    pub(crate) struct TempPath(pub PathBuf);

    impl TempPath {
        pub(crate) fn new(name: &str) -> Self {
            static COUNTER: AtomicUsize = AtomicUsize::new(0);
            let k = COUNTER.fetch_add(1, Ordering::Relaxed);
            TempPath(
                std::env::temp_dir().join(format!("joker-io-{}-{k}-{name}", std::process::id())),
            )
        }

        pub(crate) fn write(name: &str, bytes: &[u8]) -> Self {
            let t = Self::new(name);
            std::fs::write(&t.0, bytes).unwrap();
            t
        }
    }

    impl Drop for TempPath {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    pub(crate) fn gzip(bytes: &[u8]) -> Vec<u8> {
        use std::io::Write;
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(bytes).unwrap();
        e.finish().unwrap()
    }

    pub(crate) fn bzip2(bytes: &[u8]) -> Vec<u8> {
        use std::io::Write;
        let mut e = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::default());
        e.write_all(bytes).unwrap();
        e.finish().unwrap()
    }
}

#[cfg(test)]
mod tests {
    use super::test_util::{TempPath, bzip2, gzip};
    use super::*;
    use crate::data::Features;

    const SVM: &[u8] = b"1 1:0.5 3:2\n-1 2:1\n+1 1:-1 2:3 3:4\n";

    fn check_svm(d: &Dataset<f64>) {
        assert_eq!(d.y, vec![1.0, -1.0, 1.0]);
        let Features::Sparse(m) = &d.x else {
            panic!("expected sparse features")
        };
        assert_eq!((m.nrows(), m.ncols()), (3, 3));
        assert_eq!(m.row(0), (&[0u32, 2][..], &[0.5, 2.0][..]));
        assert_eq!(m.row(2), (&[0u32, 1, 2][..], &[-1.0, 3.0, 4.0][..]));
    }

    #[test]
    fn gzip_and_bzip2_by_extension_and_by_magic() {
        for (name, bytes) in [
            ("a.svm", SVM.to_vec()),
            ("a.svm.gz", gzip(SVM)),
            ("a.svm.bz2", bzip2(SVM)),
            ("gz-without-extension.svm", gzip(SVM)),
            ("bz2-without-extension", bzip2(SVM)),
            ("plain-but-named.gz", SVM.to_vec()),
        ] {
            let t = TempPath::write(name, &bytes);
            let d = read_libsvm::<f64>(&t.0, &LibsvmOptions::default())
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            check_svm(&d);
            let d = read_auto::<f64>(&t.0).unwrap_or_else(|e| panic!("{name}: {e}"));
            check_svm(&d);
        }
    }

    #[test]
    fn concatenated_members_are_read_to_the_end() {
        // Split inside the second line, so both members are needed for any of it.
        let (a, b) = SVM.split_at(16);
        let gz = [gzip(a), gzip(b)].concat();
        let bz = [bzip2(a), bzip2(b)].concat();
        for (name, bytes) in [("multi.gz", gz), ("multi.bz2", bz)] {
            let t = TempPath::write(name, &bytes);
            let d = read_libsvm::<f64>(&t.0, &LibsvmOptions::default()).unwrap();
            check_svm(&d);
        }
    }

    #[test]
    fn io_errors_and_empty_files() {
        let missing = TempPath::new("does-not-exist.svm");
        assert!(matches!(
            read_libsvm::<f64>(&missing.0, &LibsvmOptions::default()),
            Err(JokerError::Io { .. })
        ));
        assert!(matches!(
            read_csv::<f64>(&missing.0, &CsvOptions::default()),
            Err(JokerError::Io { .. })
        ));

        // Truncated streams, and a gzip stream whose CRC does not match its content.
        let gz = gzip(SVM);
        let bz = bzip2(SVM);
        let mut bad_crc = gz.clone();
        let n = bad_crc.len();
        bad_crc[n - 8] ^= 0xff;
        for (name, bytes) in [
            ("cut-trailer.gz", &gz[..gz.len() - 6]),
            ("cut-half.gz", &gz[..gz.len() / 2]),
            ("cut-half.bz2", &bz[..bz.len() / 2]),
            ("bad-crc.gz", &bad_crc[..]),
        ] {
            let t = TempPath::write(name, bytes);
            let r = read_libsvm::<f64>(&t.0, &LibsvmOptions::default());
            assert!(matches!(r, Err(JokerError::Io { .. })), "{name}: {r:?}");
        }

        for (name, bytes) in [
            ("empty.svm", Vec::new()),
            ("empty.gz", gzip(b"")),
            ("empty.bz2", bzip2(b"")),
            ("comments.svm", b"# nothing here\n\n   \n".to_vec()),
        ] {
            let t = TempPath::write(name, &bytes);
            let r = read_libsvm::<f64>(&t.0, &LibsvmOptions::default());
            assert!(matches!(r, Err(JokerError::EmptyData(_))), "{name}: {r:?}");
            let r = read_csv::<f64>(&t.0, &CsvOptions::default());
            assert!(matches!(r, Err(JokerError::EmptyData(_))), "{name}: {r:?}");
            let r = read_auto::<f64>(&t.0);
            assert!(matches!(r, Err(JokerError::EmptyData(_))), "{name}: {r:?}");
        }
    }

    #[test]
    fn sniffing_needs_the_full_magic() {
        assert_eq!(Compression::sniff(b"BZh9 not bzip2"), Compression::None);
        assert_eq!(Compression::sniff(b"\x1f\x8b"), Compression::None);
        assert_eq!(Compression::sniff(&gzip(b"x")), Compression::Gzip);
        assert_eq!(Compression::sniff(&bzip2(b"x")), Compression::Bzip2);
        assert_eq!(Compression::sniff(&bzip2(b"")), Compression::Bzip2);
    }

    #[test]
    fn auto_detection_of_the_format() {
        assert!(looks_like_libsvm(b"-1 3:1 11:1"));
        assert!(looks_like_libsvm(b"1 qid:3 3:1"));
        assert!(looks_like_libsvm(b"2.5"));
        assert!(
            looks_like_libsvm(b"3:1 4:1"),
            "missing label is still LIBSVM"
        );
        assert!(looks_like_libsvm(b"1,2 3:1 # multi-label"));
        assert!(!looks_like_libsvm(b"1,2,3"));
        assert!(!looks_like_libsvm(b"1\t0.5\t0.25"));
        assert!(!looks_like_libsvm(b"a b c"));
        assert!(!looks_like_libsvm(b"2020-01-01 10:00:00,1,2"));

        let t = TempPath::write("auto.tsv", b"# a comment\n\n1\t0.5\t0.25\n0\t1.5\t2\n");
        let d = read_auto::<f32>(&t.0).unwrap();
        assert_eq!(d.y, vec![0.25, 2.0], "default label column is the last");
        assert!(matches!(&d.x, Features::Dense(m) if m.ncols() == 2 && m.row(1) == [0.0, 1.5]));

        let t = TempPath::write("auto.csv", b"a,b,target\n1,2,3\n4,5,6\n");
        let d = read_auto::<f64>(&t.0).unwrap();
        assert_eq!(d.y, vec![3.0, 6.0]);
    }
}

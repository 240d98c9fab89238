//! Readers (and a writer) for data files: LIBSVM / SVMlight sparse text and delimited text
//! (CSV, TSV, whitespace), plain or compressed with gzip or bzip2.
//!
//! * [`read_libsvm`] reads `label index:value ...` lines into sparse features,
//! * [`read_csv`] reads delimited numeric tables into dense features,
//! * [`read_auto`] looks at the first data line and picks one of the two,
//! * [`write_libsvm`] writes any [`Dataset`] in LIBSVM format (1-based indices),
//! * [`read_libsvm_shard`] and [`read_csv_shard`] read one part of a file, cut at line
//!   boundaries, so that each process of a distributed job holds only its share.
//!
//! The path `-` reads standard input (name a file called `-` as `./-`), so data can be
//! piped in: `zcat train.gz | joker train -`. Standard input is read once, front to back.
//!
//! Compression is recognised by the leading magic bytes of the file, so `data.gz`,
//! `data.bz2` and a compressed file with no telling extension all read transparently;
//! concatenated gzip members and bzip2 streams are read to the end. A file named `.gz` or
//! `.bz2` whose content is plain text (as some downloaders leave it) is read as plain text,
//! and its errors say so. Lines may end in `\n`, `\r\n` or a lone `\r`.
//!
//! Every malformed line gives [`JokerError::Parse`] with the file, the one-based line number
//! and the reason; failures to open or read give [`JokerError::Io`]; a file without any data
//! line gives [`JokerError::EmptyData`]. Messages name standard input as such, and say what
//! to change, both as a `joker` command-line flag and as a Rust option.

mod csv;
mod libsvm;
pub mod npy;
mod shard;
pub mod stream;

pub use self::csv::{CsvOptions, LabelColumn, read_csv};
pub use self::libsvm::{LibsvmOptions, read_libsvm, write_libsvm};
pub use self::shard::{
    CsvShard, LibsvmShard, Shard, agreed_layout, read_csv_shard, read_libsvm_shard, shard_range,
};

use std::fs::File;
use std::io::{BufRead, BufReader, Cursor, Read};
use std::path::Path;

use self::csv::parse_csv;
use self::libsvm::parse_libsvm;
use crate::data::Dataset;
use crate::error::{JokerError, Result};
use crate::scalar::Scalar;

/// Buffer size of the readers: large enough that a system call or a decompression step
/// serves many lines.
const BUF_SIZE: usize = 1 << 17;

/// The path that means standard input.
const STDIN: &str = "-";

/// Whether `path` means standard input.
fn is_stdin(path: &Path) -> bool {
    path.as_os_str() == STDIN
}

/// How messages name a source: its path, or "standard input" for `-`.
fn source_name(path: &Path) -> &Path {
    if is_stdin(path) {
        Path::new("standard input")
    } else {
        path
    }
}

/// Bytes free to an unprivileged writer on the file system that holds `dir` (`None` where it
/// cannot be told).
pub(crate) fn free_space(dir: &Path) -> Option<u64> {
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
        let mut st = std::mem::MaybeUninit::<libc::statvfs>::uninit();
        // SAFETY: `path` is a NUL-terminated string that outlives the call, and `st` points to
        // storage of the struct's size, which statvfs fills on success (return value 0).
        if unsafe { libc::statvfs(path.as_ptr(), st.as_mut_ptr()) } != 0 {
            return None;
        }
        // SAFETY: statvfs returned 0, so it wrote the whole struct.
        let st = unsafe { st.assume_init() };
        // the field types differ between platforms (u32 or u64): widened as they come
        #[allow(clippy::unnecessary_cast)]
        let (blocks, size) = (st.f_bavail as u64, st.f_frsize as u64);
        Some(blocks.saturating_mul(size))
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        None
    }
}

/// The kind of file a dataset was read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FileFormat {
    /// `label index:value ...` text ([`read_libsvm`]).
    Libsvm,
    /// Delimited numeric text ([`read_csv`]).
    Csv,
    /// `.npy` rows with their labels beside them ([`npy::read_npy`]).
    Npy,
}

impl FileFormat {
    /// The name used on the command line (`--format`) and in model files.
    pub fn name(self) -> &'static str {
        match self {
            FileFormat::Libsvm => "libsvm",
            FileFormat::Csv => "csv",
            FileFormat::Npy => "npy",
        }
    }
}

/// How the training file was laid out: recorded in a model file so that test files are read
/// the same way (a label-first CSV must not be scored with its label taken from the last
/// column).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DataLayout {
    /// The training file's format.
    pub format: FileFormat,
    /// The column of the labels (CSV only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_column: Option<LabelColumn>,
}

/// Reads a data file whose format is guessed from its first data line (blank lines and lines
/// starting with `#` are passed over): [`read_libsvm`] with default options if it looks like
/// `label index:value ...` (or is a lone number, a label with no features), otherwise
/// [`read_csv`] with delimiter and header detection and the label in the last column.
/// The path `-` reads standard input.
pub fn read_auto<T: Scalar>(path: &Path) -> Result<Dataset<T>> {
    let (reader, compression) = open(path)?;
    parse_auto(reader, path).map_err(|e| note_misnamed(e, path, compression))
}

/// [`read_auto`] on an open reader, which is read once: the lines looked at to pick the
/// format are replayed to the parser. `path` names the source in errors.
pub(crate) fn parse_auto<T: Scalar, R: BufRead>(mut reader: R, path: &Path) -> Result<Dataset<T>> {
    let (head, is_libsvm) = sniff_format(&mut reader, path)?;
    let reader = Cursor::new(head).chain(reader);
    match is_libsvm {
        None => Err(empty(path)),
        Some(true) => parse_libsvm(reader, path, &LibsvmOptions::default()),
        Some(false) => parse_csv(reader, path, &CsvOptions::default()),
    }
}

/// Whether the file's first data line looks like LIBSVM rather than CSV, the guess
/// [`read_auto`] makes (reads only up to that line).
///
/// # Errors
/// [`JokerError::Io`] if the file cannot be read; [`JokerError::EmptyData`] if it has no data
/// line.
pub fn looks_like_libsvm_file(path: &Path) -> Result<bool> {
    let (mut reader, _) = open(path)?;
    sniff_format(&mut reader, path)?
        .1
        .ok_or_else(|| empty(path))
}

/// Reads up to the end of the first data line and says whether it looks like LIBSVM
/// (`None`: the stream has no data line); returns the bytes read with the answer.
fn sniff_format<R: BufRead>(reader: &mut R, path: &Path) -> Result<(Vec<u8>, Option<bool>)> {
    let mut head = Vec::new();
    loop {
        let start = head.len();
        let n = reader
            .read_until(b'\n', &mut head)
            .map_err(|e| io_err(path, e))?;
        if n == 0 {
            return Ok((head, None));
        }
        let chunk = if start == 0 {
            strip_bom(&head)
        } else {
            &head[start..]
        };
        // Blank segments are skipped, so splitting at every line-end byte covers `\n`,
        // `\r\n` and a lone `\r` alike.
        let first = chunk
            .split(|&b| b == b'\n' || b == b'\r')
            .find(|l| !is_blank_or_comment(l))
            .map(looks_like_libsvm);
        if first.is_some() {
            return Ok((head, first));
        }
    }
}

/// Whether a (non-blank) line has the shape of a LIBSVM line: its first feature token (after
/// the label and any `qid:`) is `digits:value`, or the line is a lone number.
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

/// `digits:value`, where the value may be malformed (`1:x` is a LIBSVM line with a bad value,
/// best reported as such) but holds no `:` or `,` (`10:00:00,1` is a time in a table).
fn is_pair(tok: &[u8]) -> bool {
    let Some(colon) = tok.iter().position(|&b| b == b':') else {
        return false;
    };
    let (idx, val) = (&tok[..colon], &tok[colon + 1..]);
    !idx.is_empty()
        && idx.iter().all(u8::is_ascii_digit)
        && !val.iter().any(|&b| b == b':' || b == b',')
}

/// The compression of a stream, from its first bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Compression {
    None,
    Gzip,
    Bzip2,
}

/// Bytes needed to recognise every compression (bzip2's magic is the longest).
const MAGIC_LEN: usize = 10;

impl Compression {
    fn sniff(head: &[u8]) -> Self {
        // gzip: ID1 ID2 and CM = 8 (deflate), RFC 1952.
        if head.starts_with(&[0x1f, 0x8b, 0x08]) {
            return Compression::Gzip;
        }
        // bzip2: "BZh" and a block size digit, then a block header (the BCD digits of pi)
        // or, for an empty stream, the end-of-stream marker (those of sqrt(pi)).
        if head.len() >= MAGIC_LEN
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

/// A read error, naming the source as the user gave it.
pub(crate) fn io_err(path: &Path, source: std::io::Error) -> JokerError {
    JokerError::Io {
        path: source_name(path).to_path_buf(),
        source,
    }
}

/// A malformed line, naming the source as the user gave it.
pub(crate) fn parse_err(path: &Path, line: usize, reason: impl Into<String>) -> JokerError {
    JokerError::Parse {
        path: source_name(path).to_path_buf(),
        line,
        reason: reason.into(),
    }
}

/// A source with bytes but no data line.
fn empty(path: &Path) -> JokerError {
    JokerError::EmptyData(format!(
        "{}: no data lines, only blank lines and `#` comments",
        source_name(path).display()
    ))
}

/// Adds a note to a parse or empty-data error of a plain-text file named `.gz` or `.bz2`:
/// the name promised compressed data, so the content may not be the data meant (a failed
/// download, for one, leaves an error page under the data's name).
fn note_misnamed(e: JokerError, path: &Path, compression: Compression) -> JokerError {
    let ext = path.extension().and_then(|e| e.to_str());
    let promised = match ext.map(str::to_ascii_lowercase).as_deref() {
        Some("gz") => "gzip",
        Some("bz2") => "bzip2",
        _ => return e,
    };
    if compression != Compression::None {
        return e;
    }
    let note = format!(
        "; note: the file is named .{} but is plain text, not {promised} data: check that it \
         is the file you meant",
        ext.unwrap_or_default()
    );
    match e {
        JokerError::Parse { path, line, reason } => JokerError::Parse {
            path,
            line,
            reason: reason + &note,
        },
        JokerError::EmptyData(m) => JokerError::EmptyData(m + &note),
        other => other,
    }
}

/// Opens a data source for buffered reading, decompressing gzip or bzip2 content; `-` is
/// standard input. Also says how the content was stored. An empty source is
/// [`JokerError::EmptyData`].
pub(crate) fn open(path: &Path) -> Result<(Box<dyn BufRead>, Compression)> {
    if is_stdin(path) {
        decompress(BufReader::with_capacity(BUF_SIZE, std::io::stdin()), path)
    } else {
        let file = File::open(path).map_err(|e| io_err(path, e))?;
        decompress(BufReader::with_capacity(BUF_SIZE, file), path)
    }
}

/// Wraps a raw stream in the decompressor its first bytes call for, reading it only once
/// (the bytes looked at are replayed), so that it works on pipes.
fn decompress<R: BufRead + 'static>(
    mut raw: R,
    path: &Path,
) -> Result<(Box<dyn BufRead>, Compression)> {
    // A pipe may deliver the magic bytes over several reads, so read until there are enough.
    let mut head = Vec::with_capacity(MAGIC_LEN);
    raw.by_ref()
        .take(MAGIC_LEN as u64)
        .read_to_end(&mut head)
        .map_err(|e| io_err(path, e))?;
    if head.is_empty() {
        return Err(JokerError::EmptyData(if is_stdin(path) {
            "standard input is empty: no data was piped in".into()
        } else {
            format!("{}: the file is empty", path.display())
        }));
    }
    let compression = Compression::sniff(&head);
    let raw = Cursor::new(head).chain(raw);
    let reader: Box<dyn BufRead> = match compression {
        Compression::None => Box::new(raw),
        Compression::Gzip => Box::new(BufReader::with_capacity(
            BUF_SIZE,
            flate2::bufread::MultiGzDecoder::new(raw),
        )),
        Compression::Bzip2 => Box::new(BufReader::with_capacity(
            BUF_SIZE,
            bzip2::bufread::MultiBzDecoder::new(raw),
        )),
    };
    Ok((reader, compression))
}

/// A line without a leading UTF-8 byte-order mark.
fn strip_bom(line: &[u8]) -> &[u8] {
    line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line)
}

/// Line-by-line reading into one reused buffer, counting lines from 1. A line ends at `\n`,
/// `\r\n` or a lone `\r` (old Mac text), which is not part of it; a UTF-8 byte-order mark
/// on the first line is dropped.
pub(crate) struct Lines<'p, R> {
    reader: R,
    path: &'p Path,
    buf: Vec<u8>,
    /// Where the next line starts in `buf` when a lone `\r` ended the last one early.
    rest: Option<usize>,
    line: usize,
}

impl<'p, R: BufRead> Lines<'p, R> {
    pub(crate) fn new(reader: R, path: &'p Path) -> Self {
        Lines {
            reader,
            path,
            buf: Vec::with_capacity(1024),
            rest: None,
            line: 0,
        }
    }

    /// The next line and its one-based number, or `None` at the end.
    pub(crate) fn next_line(&mut self) -> Result<Option<(usize, &[u8])>> {
        let start = match self.rest.take() {
            Some(start) => start,
            None => {
                self.buf.clear();
                let n = self
                    .reader
                    .read_until(b'\n', &mut self.buf)
                    .map_err(|e| io_err(self.path, e))?;
                if n == 0 {
                    return Ok(None);
                }
                let end = trim_line_end(&self.buf).len();
                self.buf.truncate(end);
                0
            }
        };
        self.line += 1;
        let mut s = &self.buf[start..];
        if let Some(cr) = s.iter().position(|&b| b == b'\r') {
            self.rest = Some(start + cr + 1);
            s = &s[..cr];
        }
        if self.line == 1 {
            s = strip_bom(s);
        }
        Ok(Some((self.line, s)))
    }
}

/// A line read up to `\n` without that `\n` or a `\r\n`.
fn trim_line_end(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
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
            "non-finite {what} `{}` in `{}`: missing or infinite values are not supported",
            show(tok),
            show(context)
        ));
    }
    if !T::from_f64(v).to_f64().is_finite() {
        return Err(format!(
            "{what} `{}` in `{}` is out of range for {}: rescale it, or work in double \
             precision (train with --precision f64 on the command line, read into f64 in Rust)",
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
        assert!(!looks_like_libsvm(b"1 10:00:00 2"));
        // Malformed values are still LIBSVM, so the LIBSVM reader names them.
        assert!(looks_like_libsvm(b"1 1:x"));
        assert!(looks_like_libsvm(b"1 3:"));
        test_util::assert_parse_err(auto_stdin(b"1 1:x\n"), 1, "bad value `x` in `1:x`");

        let t = TempPath::write("auto.tsv", b"# a comment\n\n1\t0.5\t0.25\n0\t1.5\t2\n");
        let d = read_auto::<f32>(&t.0).unwrap();
        assert_eq!(d.y, vec![0.25, 2.0], "default label column is the last");
        assert!(matches!(&d.x, Features::Dense(m) if m.ncols() == 2 && m.row(1) == [0.0, 1.5]));

        let t = TempPath::write("auto.csv", b"a,b,target\n1,2,3\n4,5,6\n");
        let d = read_auto::<f64>(&t.0).unwrap();
        assert_eq!(d.y, vec![3.0, 6.0]);
    }

    /// A stream that hands out one byte per read, as a slow pipe may.
    struct Trickle(Vec<u8>, usize);

    impl Read for Trickle {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            match (self.0.get(self.1), buf.first_mut()) {
                (Some(&b), Some(out)) => {
                    *out = b;
                    self.1 += 1;
                    Ok(1)
                }
                _ => Ok(0),
            }
        }
    }

    /// [`read_auto`] on standard input holding `bytes`, delivered one byte per read.
    fn auto_stdin(bytes: &[u8]) -> Result<Dataset<f64>> {
        let stdin = Path::new(STDIN);
        let pipe = BufReader::with_capacity(1, Trickle(bytes.to_vec(), 0));
        let (reader, _) = decompress(pipe, stdin)?;
        parse_auto(reader, stdin)
    }

    #[test]
    fn standard_input_is_read_once_compressed_or_not() {
        for bytes in [SVM.to_vec(), gzip(SVM), bzip2(SVM)] {
            check_svm(&auto_stdin(&bytes).unwrap());
        }
        let csv = b"# comment\na,b,y\n1,2,3\n4,5,6\n";
        for bytes in [csv.to_vec(), gzip(csv), bzip2(csv)] {
            assert_eq!(auto_stdin(&bytes).unwrap().y, vec![3.0, 6.0]);
        }
        assert!(is_stdin(Path::new("-")));
        assert!(
            !is_stdin(Path::new("./-")),
            "a file named `-` is still reachable"
        );
    }

    #[test]
    fn messages_name_standard_input() {
        let e = auto_stdin(b"1 1:0.5\n-1 2:x\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "standard input:2: bad value `x` in `2:x`: expected a number"
        );
        let e = auto_stdin(b"").unwrap_err();
        assert_eq!(
            e.to_string(),
            "empty data: standard input is empty: no data was piped in"
        );
        let e = auto_stdin(&gzip(b"# only a comment\n")).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("empty data: standard input: no data lines"),
            "{e}"
        );
        let e = auto_stdin(&gzip(SVM)[..20]).unwrap_err();
        assert!(
            matches!(&e, JokerError::Io { path, .. } if path == Path::new("standard input")),
            "{e:?}"
        );
    }

    #[test]
    fn lines_may_end_in_a_lone_carriage_return() {
        check_svm(&auto_stdin(b"1 1:0.5 3:2\r-1 2:1\r\r+1 1:-1 2:3 3:4\r").unwrap());
        let d = auto_stdin(b"a,b,y\r1,2,3\r\n4,5,6\r").unwrap();
        assert_eq!(d.y, vec![3.0, 6.0]);
        // Each segment is a line of its own, so errors point at the right one.
        let mut lines = Lines::new(&b"\xEF\xBB\xBFa\rb\r\rc\r\nd\n\r"[..], Path::new("x"));
        let mut got = Vec::new();
        while let Some((ln, l)) = lines.next_line().unwrap() {
            got.push((ln, String::from_utf8(l.to_vec()).unwrap()));
        }
        let want = [(1, "a"), (2, "b"), (3, ""), (4, "c"), (5, "d"), (6, "")];
        assert_eq!(got, want.map(|(ln, l)| (ln, l.to_string())));
        let r = auto_stdin(b"1 1:1\r1 2:y\r");
        test_util::assert_parse_err(r, 2, "bad value `y`");
    }

    #[test]
    fn plain_text_named_like_a_compressed_file_says_so() {
        // A line of text alone is taken as a CSV header; the message says why.
        let t = TempPath::write("x.gz", b"hello world\n");
        let e = read_auto::<f64>(&t.0).unwrap_err().to_string();
        assert!(
            e.contains(
                "no data rows: line 1, `hello world`, is the only non-blank line, and it was \
                 read as a header because its field 1, `hello`, is not a number"
            ),
            "{e}"
        );
        assert!(
            e.ends_with(
                "note: the file is named .gz but is plain text, not gzip data: check that it is \
                 the file you meant"
            ),
            "{e}"
        );
        let t = TempPath::write("y.BZ2", b"1 2:x\n");
        let e = read_libsvm::<f32>(&t.0, &LibsvmOptions::default()).unwrap_err();
        assert!(
            e.to_string()
                .ends_with("not bzip2 data: check that it is the file you meant")
        );
        // No note when the name tells nothing or the content is compressed as named.
        for (name, bytes) in [
            ("x.txt", b"hello world\n".to_vec()),
            ("x.gz", gzip(b"hello world\n")),
        ] {
            let t = TempPath::write(name, &bytes);
            let e = read_csv::<f64>(&t.0, &CsvOptions::default())
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("read as a header") && !e.contains("note"),
                "{name}: {e}"
            );
        }
    }
}

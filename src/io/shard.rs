//! Sharded reading: one part of an uncompressed data file, cut at line boundaries, so that
//! each process of a distributed job (an MPI rank, say) reads only its share and none holds
//! the whole training set.
//!
//! [`shard_range`] says which bytes a part covers; [`read_libsvm_shard`] and
//! [`read_csv_shard`] parse them with the same parsers as [`read_libsvm`](super::read_libsvm)
//! and [`read_csv`](super::read_csv), so the parts' rows, in order, are the rows of the whole
//! file. Only the file's own bytes decide the cut, so every rank computes every part's range
//! alike, without communication.
//!
//! Lines may end in `\n`, `\r\n` or a lone `\r`, as in ordinary reads; all three are line
//! ends for the cut too. A part's errors number its lines from the part's first byte, and say
//! so.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Take};
use std::ops::Range;
use std::path::{Path, PathBuf};

use super::csv::{Rows, check_delimiter, detect, header_only, read_head};
use super::libsvm::{RawLibsvm, check_n_features, parse_raw};
use super::{
    BUF_SIZE, Compression, CsvOptions, LibsvmOptions, Lines, MAGIC_LEN, io_err,
    is_blank_or_comment, is_stdin, note_misnamed,
};
use crate::data::Dataset;
use crate::error::{JokerError, Result, invalid};
use crate::scalar::Scalar;

/// One part of a file split into `count` parts: part `index` (0-based). Every rank of a job
/// names its own part with the same `count`, so the parts cover the file once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    /// Which part, from 0 to `count - 1` (an MPI rank).
    pub index: usize,
    /// How many parts (the number of ranks).
    pub count: usize,
}

impl Shard {
    /// Fails unless `index < count` (so `count` is at least 1).
    fn check(self) -> Result<()> {
        if self.count == 0 {
            return Err(invalid("shard", "count must be at least 1"));
        }
        if self.index >= self.count {
            return Err(invalid(
                "shard",
                format!(
                    "index {} is out of range for {} parts: it must be below the count, from \
                     0 to {}",
                    self.index,
                    self.count,
                    self.count - 1
                ),
            ));
        }
        Ok(())
    }

    /// Where part `k` of a file of `len` bytes nominally starts: `floor(len * k / count)`.
    fn nominal_start(self, len: u64, k: usize) -> u64 {
        // In u128, so that `len * k` cannot overflow.
        (u128::from(len) * k as u128 / self.count as u128) as u64
    }
}

/// The byte range of `shard` in the file at `path`.
///
/// Part `i` nominally starts at `floor(len * i / count)`. Its real start is the first line
/// start at or after that: a line that starts exactly there belongs to the part, one that
/// straddles it belongs to the part before. A part ends where the next one starts, the last
/// one at the end of the file. So every line lies in exactly one part, and a part may be
/// empty (when there are more parts than lines, or a line is longer than a part). `\n`,
/// `\r\n` and a lone `\r` all end a line. Finding a cut reads from the nominal start to the
/// next line end, nothing more.
///
/// # Errors
/// [`JokerError::InvalidParameter`] for `count == 0`, `index >= count`, standard input
/// (`-`) or a gzip or bzip2 file: a part is found by seeking, which needs an uncompressed
/// file on disk. [`JokerError::Io`] if the file cannot be opened or read.
pub fn shard_range(path: &Path, shard: Shard) -> Result<Range<u64>> {
    locate(path, shard).map(|part| part.range)
}

/// An open file and the range of one of its parts.
struct Part {
    file: File,
    /// The length of the whole file.
    len: u64,
    range: Range<u64>,
}

/// Checks the request, opens the file and finds the part's range.
fn locate(path: &Path, shard: Shard) -> Result<Part> {
    shard.check()?;
    if is_stdin(path) {
        return Err(invalid(
            "path",
            "a sharded read needs an uncompressed file on disk, to seek to its part; standard \
             input (`-`) cannot be sought: save the data to a file first, decompressed",
        ));
    }
    let mut file = File::open(path).map_err(|e| io_err(path, e))?;
    let len = file.metadata().map_err(|e| io_err(path, e))?.len();
    let mut head = Vec::with_capacity(MAGIC_LEN);
    (&file)
        .take(MAGIC_LEN as u64)
        .read_to_end(&mut head)
        .map_err(|e| io_err(path, e))?;
    let (kind, tool) = match Compression::sniff(&head) {
        Compression::None => ("", ""),
        Compression::Gzip => ("gzip", "gunzip -k"),
        Compression::Bzip2 => ("bzip2", "bunzip2 -k"),
    };
    if !kind.is_empty() {
        return Err(invalid(
            "path",
            format!(
                "{} is {kind}-compressed, but a sharded read needs an uncompressed file on \
                 disk, to seek to its part: decompress it first (`{tool} FILE`) and read the \
                 decompressed file",
                path.display()
            ),
        ));
    }
    let start = line_start_at(&mut file, len, shard.nominal_start(len, shard.index))
        .map_err(|e| io_err(path, e))?;
    let end = if shard.index + 1 == shard.count {
        len
    } else {
        line_start_at(&mut file, len, shard.nominal_start(len, shard.index + 1))
            .map_err(|e| io_err(path, e))?
    };
    Ok(Part {
        file,
        len,
        range: start..end,
    })
}

/// The first line start at or after byte `p` of a file of `len` bytes: `p` itself if the
/// byte before it ends a line (`\n`, or a `\r` not followed by `\n`), otherwise the byte
/// after the next line end, or `len` if no line end follows.
fn line_start_at(file: &mut File, len: u64, p: u64) -> std::io::Result<u64> {
    if p == 0 || p >= len {
        return Ok(p.min(len));
    }
    // Start one byte early: that byte tells whether a line starts at `p`.
    file.seek(SeekFrom::Start(p - 1))?;
    let mut reader = BufReader::with_capacity(BUF_SIZE, file.take(len - (p - 1)));
    // The position of the next byte, and whether the byte before it was a `\r`.
    let mut pos = p - 1;
    let mut after_cr = false;
    loop {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            return Ok(len);
        }
        for &b in buf {
            if after_cr && b != b'\n' && pos >= p {
                return Ok(pos);
            }
            if b == b'\n' {
                return Ok(pos + 1);
            }
            after_cr = b == b'\r';
            pos += 1;
        }
        let n = buf.len();
        reader.consume(n);
    }
}

/// A buffered reader of `range` of `file`.
fn open_range<'f>(
    file: &'f File,
    path: &Path,
    range: &Range<u64>,
) -> Result<BufReader<Take<&'f File>>> {
    let mut f = file;
    f.seek(SeekFrom::Start(range.start))
        .map_err(|e| io_err(path, e))?;
    Ok(BufReader::with_capacity(
        BUF_SIZE,
        f.take(range.end - range.start),
    ))
}

/// Says in a parse error that its line number counts from the start of the part, not of the
/// file (the same for the first part, so left as it is).
fn in_part(e: JokerError, start: u64) -> JokerError {
    match e {
        JokerError::Parse { path, line, reason } if start > 0 => JokerError::Parse {
            path,
            line,
            reason: format!("line {line} of the part starting at byte {start}: {reason}"),
        },
        other => other,
    }
}

/// The error of an empty file, as an ordinary read gives it: every rank sees it alike.
fn empty_file(path: &Path) -> JokerError {
    JokerError::EmptyData(format!("{}: the file is empty", path.display()))
}

/// A LIBSVM part as parsed, before the ranks agree on the index base and the width: a part
/// alone cannot tell whether the file is 0-based (the index 0 may be in another part) nor how
/// many features it has.
///
/// The ranks agree by combining [`min_index`](Self::min_index) and
/// [`max_index`](Self::max_index) over all parts (an all-reduce): the file is 0-based if the
/// smallest index is 0 (as [`read_libsvm`](super::read_libsvm) detects it), and has
/// `largest + 1` features if 0-based, `largest` if 1-based; then each calls
/// [`finish`](Self::finish) with the result.
#[derive(Clone, Debug)]
pub struct LibsvmShard<T> {
    raw: RawLibsvm<T>,
    path: PathBuf,
    start: u64,
}

impl<T: Scalar> LibsvmShard<T> {
    /// The number of rows (data lines) of the part, possibly 0.
    pub fn len(&self) -> usize {
        self.raw.y.len()
    }

    /// Whether the part holds no row (more parts than data lines).
    pub fn is_empty(&self) -> bool {
        self.raw.y.is_empty()
    }

    /// The smallest feature index written in the part, also with a zero value (`None`: no
    /// feature): 0 in any part makes the file 0-based.
    pub fn min_index(&self) -> Option<u32> {
        self.raw.min_index
    }

    /// The largest feature index written in the part, also with a zero value (`None`: no
    /// feature): the largest over all parts gives the width.
    pub fn max_index(&self) -> Option<u32> {
        self.raw.max_index.map(|(m, _)| m)
    }

    /// The part's labels, one per row.
    pub fn labels(&self) -> &[f64] {
        &self.raw.y
    }

    /// The part's rows once every rank agrees: `zero_based` (if false, every index is
    /// shifted down by one) and the width `n_features`, the same on every rank so that the
    /// parts' features line up. `None` for a part without rows: a dataset has at least one.
    ///
    /// # Errors
    /// [`JokerError::Parse`] naming the file and the line (counted in the part) of an index
    /// 0 when not `zero_based`, or of an index at or above `n_features` (after the shift);
    /// [`JokerError::InvalidParameter`] for `n_features` of 0 or above `u32::MAX`.
    pub fn finish(self, zero_based: bool, n_features: usize) -> Result<Option<Dataset<T>>> {
        check_n_features(Some(n_features))?;
        if self.is_empty() {
            return Ok(None);
        }
        let (path, start) = (self.path, self.start);
        self.raw
            .into_dataset(&path, zero_based, Some(n_features))
            .map(Some)
            .map_err(|e| note_misnamed(in_part(e, start), &path, Compression::None))
    }
}

/// The index base and the width that every part of a LIBSVM file uses, from the smallest and
/// the largest feature index over all parts (`None`: no feature anywhere) and the options: what
/// [`read_libsvm`](super::read_libsvm) decides for the whole file. 0-based if any index is 0
/// (unless `opts` says); `largest + 1` features if 0-based, `largest` if 1-based, at least 1
/// (unless `opts` gives the width).
pub fn agreed_layout(
    opts: &LibsvmOptions,
    min_index: Option<u32>,
    max_index: Option<u32>,
) -> (bool, usize) {
    let zero_based = opts.zero_based.unwrap_or(min_index == Some(0));
    let largest = max_index.unwrap_or(0) as usize;
    let width = opts.n_features.unwrap_or(if zero_based {
        largest + 1
    } else {
        largest.max(1)
    });
    (zero_based, width)
}

/// Reads part `shard` of an uncompressed LIBSVM / SVMlight file (see [`shard_range`] for the
/// cut): the lines as [`read_libsvm`](super::read_libsvm) reads them, but with the index base
/// and the width left open until the ranks agree ([`LibsvmShard::finish`]).
///
/// # Errors
/// Those of [`shard_range`]; [`JokerError::Parse`] for a malformed line, numbered from the
/// start of the part ("line N of the part starting at byte B"); [`JokerError::EmptyData`]
/// for an empty file (a part without data lines is no error, but an empty shard).
pub fn read_libsvm_shard<T: Scalar>(path: &Path, shard: Shard) -> Result<LibsvmShard<T>> {
    let part = locate(path, shard)?;
    if part.len == 0 {
        return Err(empty_file(path));
    }
    let start = part.range.start;
    let reader = open_range(&part.file, path, &part.range)?;
    let raw = parse_raw(reader, path)
        .map_err(|e| note_misnamed(in_part(e, start), path, Compression::None))?;
    Ok(LibsvmShard {
        raw,
        path: path.to_path_buf(),
        start,
    })
}

/// A CSV part: its rows, and the width that all parts share.
#[derive(Clone, Debug, PartialEq)]
pub struct CsvShard<T> {
    /// The part's rows; `None` for a part without data rows, since a dataset has at least one.
    pub data: Option<Dataset<T>>,
    /// The number of features of every row (the fields of the file's first row less the
    /// target), known also to a rank without rows.
    pub n_features: usize,
}

/// Reads part `shard` of an uncompressed delimited file (see [`shard_range`] for the cut)
/// as [`read_csv`](super::read_csv) reads the whole file.
///
/// The delimiter and the header are detected from the first two non-blank lines of the file,
/// not of the part: every rank peeks at the file's start, so all agree without
/// communication. The header line, if any, is skipped only by the part that holds it, and
/// every row must have the field count of the file's first row (or header).
///
/// # Errors
/// Those of [`shard_range`] and of [`read_csv`](super::read_csv) (bad options, a first row
/// with one field, no data row in the whole file); a malformed row in the part gives
/// [`JokerError::Parse`] numbered from the start of the part ("line N of the part starting
/// at byte B").
pub fn read_csv_shard<T: Scalar>(
    path: &Path,
    opts: &CsvOptions,
    shard: Shard,
) -> Result<CsvShard<T>> {
    check_delimiter(opts)?;
    let part = locate(path, shard)?;
    if part.len == 0 {
        return Err(empty_file(path));
    }
    read_csv_part(&part, path, opts).map_err(|e| note_misnamed(e, path, Compression::None))
}

fn read_csv_part<T: Scalar>(part: &Part, path: &Path, opts: &CsvOptions) -> Result<CsvShard<T>> {
    let start = part.range.start;
    let file_start = open_range(&part.file, path, &(0..part.len))?;
    let head = read_head(&mut Lines::new(file_start, path))?;
    let Some((first_ln, first)) = head.first() else {
        return Err(super::empty(path));
    };
    let (delim, header) = detect(&head, opts);
    let mut rows = Rows::new(path, delim, opts.label_column);
    if start > 0 {
        rows.shape_origin(" of the file");
    }
    rows.set_shape(*first_ln, first, header)?;
    if header && head.len() == 1 {
        // The header is the only non-blank line: no part has rows.
        return Err(header_only(path, &head, opts, delim));
    }
    // The header is the file's first non-blank line, so it is this part's first one if no
    // non-blank line comes before the part.
    let mut skip_header = header && !data_line_before(&part.file, path, start)?;
    let mut lines = Lines::new(open_range(&part.file, path, &part.range)?, path);
    while let Some((ln, line)) = lines.next_line()? {
        if is_blank_or_comment(line) {
            continue;
        }
        if skip_header {
            skip_header = false;
            continue;
        }
        rows.push(ln, line).map_err(|e| in_part(e, start))?;
    }
    let n_features = rows.n_features().expect("set from the file's first row");
    let data = if rows.y.is_empty() {
        None
    } else {
        Some(rows.into_dataset()?)
    };
    Ok(CsvShard { data, n_features })
}

/// Whether a non-blank, non-comment line starts before byte `start` (a line start); reads
/// only up to the first such line.
fn data_line_before(file: &File, path: &Path, start: u64) -> Result<bool> {
    if start == 0 {
        return Ok(false);
    }
    let mut lines = Lines::new(open_range(file, path, &(0..start))?, path);
    while let Some((_, line)) = lines.next_line()? {
        if !is_blank_or_comment(line) {
            return Ok(true);
        }
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::super::test_util::{TempPath, assert_parse_err, bzip2, gzip};
    use super::*;
    use crate::io::{LibsvmOptions, read_csv, read_libsvm};

    /// The first line start at or after `p`, straight from the definition.
    fn line_start_naive(bytes: &[u8], p: usize) -> usize {
        let starts = |s: usize| {
            s == 0
                || s == bytes.len()
                || bytes[s - 1] == b'\n'
                || (bytes[s - 1] == b'\r' && bytes[s] != b'\n')
        };
        (p..=bytes.len()).find(|&s| starts(s)).unwrap()
    }

    #[test]
    fn cuts_fall_on_line_starts_for_every_line_end() {
        let texts: [&[u8]; 7] = [
            b"a\nbb\nccc\n",
            b"a\r\nbb\r\n\r\nccc",
            b"a\rbb\r\rccc\r",
            b"\n\n\r\r\n\r",
            b"x",
            b"ab\r\r\ncd\n\rq",
            b"",
        ];
        for text in texts {
            let t = TempPath::write("cuts.txt", text);
            let mut f = File::open(&t.0).unwrap();
            let len = text.len() as u64;
            for p in 0..=text.len() {
                let got = line_start_at(&mut f, len, p as u64).unwrap();
                assert_eq!(got as usize, line_start_naive(text, p), "{text:?} at {p}");
            }
        }
    }

    #[test]
    fn parts_tile_the_file() {
        let text = b"1 1:1\n\n-1 2:1\r\n1 3:1\r1 1:2 2:2 3:2 4:2 5:2\n1\n";
        let t = TempPath::write("tile.svm", text);
        for count in 1..=60 {
            let mut next = 0;
            for index in 0..count {
                let r = shard_range(&t.0, Shard { index, count }).unwrap();
                assert_eq!(r.start, next, "parts {count}, part {index}");
                assert!(r.start <= r.end);
                let s = r.start as usize;
                assert_eq!(
                    line_start_naive(text, s),
                    s,
                    "a part starts on a line start"
                );
                next = r.end;
            }
            assert_eq!(next, text.len() as u64);
        }
    }

    #[test]
    fn bad_shards_and_sources_are_named_errors() {
        let t = TempPath::write("bad.svm", b"1 1:1\n");
        for (index, count) in [(0, 0), (1, 1), (5, 3)] {
            let r = shard_range(&t.0, Shard { index, count });
            assert!(
                matches!(r, Err(JokerError::InvalidParameter { name: "shard", .. })),
                "{r:?}"
            );
        }
        for (name, bytes, tool) in [
            ("bad.svm.gz", gzip(b"1 1:1\n"), "gunzip"),
            ("bad.svm.bz2", bzip2(b"1 1:1\n"), "bunzip2"),
        ] {
            let t = TempPath::write(name, &bytes);
            let e = read_libsvm_shard::<f64>(&t.0, Shard { index: 0, count: 2 }).unwrap_err();
            let msg = e.to_string();
            assert!(
                matches!(e, JokerError::InvalidParameter { name: "path", .. })
                    && msg.contains("needs an uncompressed file on disk")
                    && msg.contains("decompress it first")
                    && msg.contains(tool),
                "{msg}"
            );
        }
        let e = shard_range(Path::new("-"), Shard { index: 0, count: 1 }).unwrap_err();
        assert!(e.to_string().contains("standard input"), "{e}");
        let missing = TempPath::new("missing.svm");
        assert!(matches!(
            shard_range(&missing.0, Shard { index: 0, count: 1 }),
            Err(JokerError::Io { .. })
        ));
        let empty = TempPath::write("empty.csv", b"");
        let r = read_csv_shard::<f64>(
            &empty.0,
            &CsvOptions::default(),
            Shard { index: 0, count: 1 },
        );
        assert!(matches!(r, Err(JokerError::EmptyData(_))), "{r:?}");
        let r = read_libsvm_shard::<f64>(&empty.0, Shard { index: 1, count: 2 });
        assert!(matches!(r, Err(JokerError::EmptyData(_))), "{r:?}");
    }

    #[test]
    fn errors_count_lines_in_the_part() {
        // 10 lines of 6 bytes; the bad one is line 8 of the file, line 3 of the part from
        // byte 30.
        let mut text = b"1 1:1\n".repeat(10);
        text[7 * 6 + 2] = b'x';
        let t = TempPath::write("lines.svm", &text);
        let r = read_libsvm_shard::<f64>(&t.0, Shard { index: 1, count: 2 });
        assert_parse_err(
            r,
            3,
            "line 3 of the part starting at byte 30: bad feature index `x`",
        );
        // The first part's lines are the file's, so its messages are as in ordinary reads.
        let mut text = b"1 1:1\n".repeat(10);
        text[6 + 2] = b'x';
        let t = TempPath::write("lines.svm", &text);
        let e = read_libsvm_shard::<f64>(&t.0, Shard { index: 0, count: 2 }).unwrap_err();
        let whole = read_libsvm::<f64>(&t.0, &LibsvmOptions::default()).unwrap_err();
        assert_eq!(e.to_string(), whole.to_string());

        let text = b"a,b,c\n1,2,3\n4,5,6\n7,8,9\n1,2\n";
        let t = TempPath::write("lines.csv", text);
        let r = read_csv_shard::<f64>(&t.0, &CsvOptions::default(), Shard { index: 1, count: 2 });
        assert_parse_err(
            r,
            2,
            "line 2 of the part starting at byte 18: found 2 fields, expected 3 as on line 1 \
             of the file (the header)",
        );
        let whole = read_csv::<f64>(&t.0, &CsvOptions::default()).unwrap_err();
        assert!(
            whole
                .to_string()
                .ends_with("expected 3 as on line 1 (the header) (delimiter: `,`)"),
            "{whole}"
        );
    }

    #[test]
    fn finish_settles_the_base_and_the_width() {
        let t = TempPath::write("finish.svm", b"1 1:1 3:0.5\n-1 0:2\n1\n");
        let part = |index| read_libsvm_shard::<f64>(&t.0, Shard { index, count: 3 }).unwrap();
        let (a, b) = (part(0), part(1));
        assert_eq!(
            (a.len(), a.min_index(), a.max_index()),
            (1, Some(1), Some(3))
        );
        assert_eq!(
            (b.len(), b.min_index(), b.max_index()),
            (1, Some(0), Some(0))
        );
        assert_eq!(b.labels(), &[-1.0]);
        let c = part(2);
        assert_eq!((c.len(), c.min_index(), c.max_index()), (1, None, None));

        let d = a.clone().finish(true, 4).unwrap().unwrap();
        assert_eq!(d.x.ncols(), 4);
        let e = a.clone().finish(true, 3).unwrap_err();
        assert!(
            e.to_string()
                .contains("feature index 3 is out of range for 3 features"),
            "{e}"
        );
        assert!(a.clone().finish(false, 3).is_ok());
        assert!(matches!(
            a.finish(false, 0),
            Err(JokerError::InvalidParameter {
                name: "n_features",
                ..
            })
        ));
        let e = b.finish(false, 4).unwrap_err();
        assert!(
            matches!(&e, JokerError::Parse { path, .. } if *path == t.0)
                && e.to_string()
                    .contains("feature index 0 in a file read as 1-based"),
            "{e}"
        );
        assert_eq!(c.finish(false, 3).unwrap().unwrap().x.ncols(), 3);
    }
}

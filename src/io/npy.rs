//! Training data in numpy's `.npy` format, mapped rather than read: the rows of a
//! `rows.npy` (row-major float32 or float64, shape `(n, d)`) stay in the file and the
//! operating system's page cache holds the ones being read, so a data set larger than memory
//! can be trained on. The labels lie beside the rows in `rows.labels.npy` (shape `(n,)`, any
//! numeric type). Mapped rows are used as they are: a fit on them does not standardise them
//! (scale them when writing the file).
//!
//! The format (numpy's `NEP 1`): the magic `\x93NUMPY`, a version byte pair, the header's
//! length (2 bytes little-endian in version 1, 4 in versions 2 and 3), and a Python dict
//! literal with `descr`, `fortran_order` and `shape`, padded so that the data start aligned.
//! The file must not change while a model trains on it.

use std::fs::File;
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::data::{CsrMatrix, Dataset, DenseMatrix, Features, Mapped, Values};
use crate::error::{JokerError, Result};
use crate::scalar::Scalar;

use super::stream::TextStream;

const MAGIC: &[u8] = b"\x93NUMPY";

/// An error about the `.npy` file at `path`.
fn bad(path: &Path, reason: impl Into<String>) -> JokerError {
    JokerError::Io {
        path: path.to_path_buf(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, reason.into()),
    }
}

fn io_err(path: &Path) -> impl Fn(std::io::Error) -> JokerError + '_ {
    move |source| JokerError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// What a `.npy` header says.
#[derive(Clone, Debug, PartialEq)]
pub struct Header {
    /// The element type, as numpy writes it (`<f4`, `<f8`, `<i8`, `|u1`, ...).
    pub descr: String,
    /// Whether the array is stored column by column (joker reads row-major arrays only).
    pub fortran_order: bool,
    /// The array's shape.
    pub shape: Vec<usize>,
    /// Where the data start, in bytes from the file's start.
    pub data_offset: usize,
}

/// Parses the header at the start of `bytes` (a `.npy` file's first bytes).
pub fn parse_header(bytes: &[u8], path: &Path) -> Result<Header> {
    if bytes.len() < 10 || &bytes[..6] != MAGIC {
        return Err(bad(path, "not a .npy file (no \\x93NUMPY magic)"));
    }
    let (len, start) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 if bytes.len() >= 12 => (
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
            12,
        ),
        v => {
            return Err(bad(
                path,
                format!(".npy format version {v} is not supported"),
            ));
        }
    };
    let end = start + len;
    if bytes.len() < end {
        return Err(bad(path, "the .npy header is truncated"));
    }
    let text = std::str::from_utf8(&bytes[start..end])
        .map_err(|_| bad(path, "the .npy header is not text"))?;
    let field = |key: &str| -> Result<&str> {
        let at = text
            .find(&format!("'{key}'"))
            .ok_or_else(|| bad(path, format!("the .npy header has no '{key}'")))?;
        let rest = text[at + key.len() + 2..].trim_start();
        rest.strip_prefix(':')
            .map(str::trim_start)
            .ok_or_else(|| bad(path, format!("the .npy header's '{key}' has no value")))
    };
    let descr = field("descr")?;
    let descr = descr
        .strip_prefix('\'')
        .and_then(|r| r.split('\'').next())
        .ok_or_else(|| {
            bad(
                path,
                "the .npy header's 'descr' is not a simple type string",
            )
        })?
        .to_string();
    let fortran_order = match field("fortran_order")? {
        f if f.starts_with("False") => false,
        f if f.starts_with("True") => true,
        _ => {
            return Err(bad(
                path,
                "the .npy header's 'fortran_order' is not True or False",
            ));
        }
    };
    let shape_text = field("shape")?;
    let inner = shape_text
        .strip_prefix('(')
        .and_then(|r| r.split(')').next())
        .ok_or_else(|| bad(path, "the .npy header's 'shape' is not a tuple"))?;
    let shape = inner
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(|t| {
            t.trim_end_matches('L')
                .parse::<usize>()
                .map_err(|_| bad(path, format!("the .npy shape has a bad size `{t}`")))
        })
        .collect::<Result<Vec<usize>>>()?;
    Ok(Header {
        descr,
        fortran_order,
        shape,
        data_offset: end,
    })
}

/// The file at `path`, mapped read-only, with its header.
fn map(path: &Path) -> Result<(Arc<memmap2::Mmap>, Header)> {
    let file = File::open(path).map_err(io_err(path))?;
    // SAFETY: the mapping is read-only; the module's contract (documented on every public
    // function that maps) is that the file does not change while it is mapped. A file changed
    // anyway gives wrong values, not unsafety in joker's own code beyond what memmap2 states.
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(io_err(path))?;
    let header = parse_header(&map[..map.len().min(1 << 20)], path)?;
    Ok((Arc::new(map), header))
}

/// The rows of a 2-D `.npy` array of float32 or float64 in C order, mapped, as `U` (mapped
/// when `U` is the file's type, else converted into memory). Every value is checked to be
/// finite, in one pass over the file. The file must not change while the matrix is in use.
///
/// # Errors
/// [`JokerError::Io`] naming the file for a missing or unreadable file, a header that is not
/// `.npy`, a type other than little-endian float32/float64, Fortran order, a shape that is not
/// 2-D, a file shorter than its shape; [`JokerError::NonFinite`] for NaN or infinite values.
pub fn map_rows<U: Scalar>(path: &Path) -> Result<DenseMatrix<U>> {
    map_rows_in(path, None)
}

/// Refuses a share of rows that is empty or runs past the `n` rows of `path`.
fn check_range(path: &Path, rows: &Range<usize>, n: usize) -> Result<()> {
    if rows.start >= rows.end || rows.end > n {
        return Err(bad(
            path,
            format!("rows {rows:?} are not a non-empty range of its {n} rows"),
        ));
    }
    Ok(())
}

/// Rows `range` of a 2-D `.npy` array, mapped as [`map_rows`] maps all of them (a rank of a
/// distributed fit maps its own share); `None`: every row.
///
/// # Errors
/// Those of [`map_rows`], and a range beyond the array's rows or empty.
pub fn map_rows_in<U: Scalar>(path: &Path, range: Option<Range<usize>>) -> Result<DenseMatrix<U>> {
    let (map, h) = map(path)?;
    if h.fortran_order {
        return Err(bad(
            path,
            "the array is in Fortran (column-major) order; joker reads rows: save it with np.ascontiguousarray",
        ));
    }
    let [n, d] = h.shape[..] else {
        return Err(bad(
            path,
            format!(
                "the array has shape {:?}; rows need a 2-D (n, d) array",
                h.shape
            ),
        ));
    };
    n.checked_mul(d)
        .ok_or_else(|| bad(path, "the shape overflows"))?;
    let rows = range.unwrap_or(0..n);
    check_range(path, &rows, n)?;
    let (first, count) = (rows.start, rows.end - rows.start);
    let m: Features<U> = match h.descr.as_str() {
        "<f4" => {
            let at = h.data_offset + first * d * 4;
            let v = Mapped::<f32>::new(map, at, count * d).map_err(|e| bad(path, e))?;
            Features::Dense(DenseMatrix::mapped(count, d, v)?).cast()
        }
        "<f8" => {
            let at = h.data_offset + first * d * 8;
            let v = Mapped::<f64>::new(map, at, count * d).map_err(|e| bad(path, e))?;
            Features::Dense(DenseMatrix::mapped(count, d, v)?).cast()
        }
        other => {
            return Err(bad(
                path,
                format!(
                    "the array's type is '{other}'; rows must be little-endian float32 ('<f4') or float64 ('<f8')"
                ),
            ));
        }
    };
    match m {
        Features::Dense(m) => Ok(m),
        Features::Sparse(_) => unreachable!("a dense matrix casts to a dense matrix"),
    }
}

/// The CSR offsets: a 1-D array of `<i8` (or `<u8`) mapped as `usize`, or of 4-byte integers
/// read into memory.
fn map_offsets(path: &Path) -> Result<Values<usize>> {
    let (map, h) = map(path)?;
    let [n] = h.shape[..] else {
        return Err(bad(
            path,
            format!("the array has shape {:?}; indptr is 1-D", h.shape),
        ));
    };
    match h.descr.as_str() {
        "<i8" | "<u8" if cfg!(target_pointer_width = "64") => {
            let v = Mapped::<usize>::new(map, h.data_offset, n).map_err(|e| bad(path, e))?;
            Ok(Values::Mapped(v))
        }
        "<i4" | "<u4" => Ok(Values::Owned(
            read_vector(path)?.into_iter().map(|v| v as usize).collect(),
        )),
        other => Err(bad(
            path,
            format!("the array's type is '{other}'; indptr must be '<i8' or '<i4'"),
        )),
    }
}

/// Sparse rows mapped from a directory holding the CSR arrays as numpy writes them for a scipy
/// matrix `X`: `data.npy` (float32 or float64), `indices.npy` (`<i4`, column indices strictly
/// increasing within a row), `indptr.npy` (`<i8` mapped, or `<i4` read into memory) and
/// `shape.npy` (`(n, d)`), e.g. `for k in ("data", "indices", "indptr", "shape"):
/// np.save(f"{dir}/{k}.npy", getattr(X, k))`. Every array is checked (one pass). The files must
/// not change while the matrix is in use.
pub fn map_csr<U: Scalar>(dir: &Path) -> Result<CsrMatrix<U>> {
    map_csr_in(dir, None)
}

/// The shape `(n, d)` from `shape.npy` of a CSR directory ([`map_csr`]).
fn csr_shape(dir: &Path) -> Result<(usize, usize)> {
    let shape = read_vector(&dir.join("shape.npy"))?;
    let [n, d] = shape[..] else {
        return Err(bad(
            &dir.join("shape.npy"),
            format!("holds {} values; the shape is (rows, columns)", shape.len()),
        ));
    };
    let size = |v: f64| (v >= 0.0 && v < u32::MAX as f64 * u32::MAX as f64).then_some(v as usize);
    let (Some(n), Some(d)) = (size(n), size(d)) else {
        return Err(bad(
            &dir.join("shape.npy"),
            format!("the shape ({n}, {d}) is out of range"),
        ));
    };
    Ok((n, d))
}

/// Rows `range` of the sparse matrix in a CSR directory ([`map_csr`]; `None`: all rows): the
/// indices and values of those rows are mapped, their offsets (8 bytes a row) copied and
/// rebased to start at 0. A rank of a distributed fit maps its own share this way.
///
/// # Errors
/// Those of [`map_csr`], and a range that is empty or runs past the last row.
pub fn map_csr_in<U: Scalar>(dir: &Path, range: Option<Range<usize>>) -> Result<CsrMatrix<U>> {
    let (n, d) = csr_shape(dir)?;
    let ppath = dir.join("indptr.npy");
    let mut indptr = map_offsets(&ppath)?;
    let nnz = indptr.last().copied().unwrap_or(0);
    // the share's rows and the span of their entries
    let (rows, first, last) = match &range {
        None => (n, 0, nnz),
        Some(r) => {
            check_range(dir, r, n)?;
            if indptr.len() != n + 1 {
                return Err(bad(
                    &ppath,
                    format!("indptr has {} entries for {n} rows", indptr.len()),
                ));
            }
            let (first, last) = (indptr[r.start], indptr[r.end]);
            let share = &indptr[r.start..=r.end];
            if share.windows(2).any(|w| w[1] < w[0]) || last > nnz {
                return Err(bad(&ppath, "the offsets of the rows decrease"));
            }
            indptr = Values::Owned(share.iter().map(|v| v - first).collect());
            (r.len(), first, last)
        }
    };
    let ipath = dir.join("indices.npy");
    let (imap, ih) = map(&ipath)?;
    if !matches!(ih.descr.as_str(), "<i4" | "<u4") || ih.shape != [nnz] {
        return Err(bad(
            &ipath,
            format!(
                "indices must be a 1-D '<i4' array of indptr[-1] = {nnz} values, got '{}' of shape {:?}",
                ih.descr, ih.shape
            ),
        ));
    }
    let span = last - first;
    let indices =
        Mapped::<u32>::new(imap, ih.data_offset + 4 * first, span).map_err(|e| bad(&ipath, e))?;
    let vpath = dir.join("data.npy");
    let (vmap, vh) = map(&vpath)?;
    if vh.shape != [nnz] {
        return Err(bad(
            &vpath,
            format!("data has shape {:?}, indptr[-1] is {nnz}", vh.shape),
        ));
    }
    let m: Features<U> = match vh.descr.as_str() {
        "<f4" => {
            let v = Mapped::<f32>::new(vmap, vh.data_offset + 4 * first, span)
                .map_err(|e| bad(&vpath, e))?;
            Features::Sparse(CsrMatrix::mapped(rows, d, indptr, indices, v)?).cast()
        }
        "<f8" => {
            let v = Mapped::<f64>::new(vmap, vh.data_offset + 8 * first, span)
                .map_err(|e| bad(&vpath, e))?;
            Features::Sparse(CsrMatrix::mapped(rows, d, indptr, indices, v)?).cast()
        }
        other => {
            return Err(bad(
                &vpath,
                format!("the array's type is '{other}'; values must be '<f4' or '<f8'"),
            ));
        }
    };
    match m {
        Features::Sparse(m) => Ok(m),
        Features::Dense(_) => unreachable!("a sparse matrix casts to a sparse matrix"),
    }
}

/// The values of a 1-D `.npy` array (or an `(n, 1)` one) of any real or integer type, as f64.
pub fn read_vector(path: &Path) -> Result<Vec<f64>> {
    read_vector_in(path, None)
}

/// Values `range` of a 1-D `.npy` array, as [`read_vector`] reads all of them; `None`: every
/// value.
///
/// # Errors
/// Those of [`read_vector`], and a range beyond the array's length.
pub fn read_vector_in(path: &Path, range: Option<Range<usize>>) -> Result<Vec<f64>> {
    let (map, h) = map(path)?;
    let n = match h.shape[..] {
        [n] | [n, 1] => n,
        _ => {
            return Err(bad(
                path,
                format!(
                    "the array has shape {:?}; labels need a 1-D (n,) array",
                    h.shape
                ),
            ));
        }
    };
    let bytes = &map[h.data_offset.min(map.len())..];
    // `<f8` and the like: the byte order, then the kind and the size
    let kind = h.descr.get(1..).unwrap_or("");
    let size = match kind {
        "f4" | "i4" | "u4" => 4,
        "f8" | "i8" | "u8" => 8,
        "i2" | "u2" => 2,
        "i1" | "u1" | "b1" => 1,
        _ => 0,
    };
    if size == 0 || (size > 1 && !h.descr.starts_with('<')) {
        return Err(bad(
            path,
            format!(
                "the array's type is '{}'; labels must be little-endian numbers",
                h.descr
            ),
        ));
    }
    let need = n.saturating_mul(size);
    if bytes.len() < need {
        return Err(bad(
            path,
            format!(
                "the file holds {} bytes of data, its shape needs {need} (truncated?)",
                bytes.len()
            ),
        ));
    }
    let at = |i: usize| -> [u8; 8] {
        let mut b = [0u8; 8];
        b[..size].copy_from_slice(&bytes[i * size..(i + 1) * size]);
        b
    };
    let values = range.unwrap_or(0..n);
    if values.end > n {
        return Err(bad(
            path,
            format!("values {values:?} lie beyond its {n} values"),
        ));
    }
    Ok(values
        .map(|i| {
            let b = at(i);
            match kind {
                "f4" => f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
                "f8" => f64::from_le_bytes(b),
                "i1" => b[0] as i8 as f64,
                "u1" | "b1" => b[0] as f64,
                "i2" => i16::from_le_bytes([b[0], b[1]]) as f64,
                "u2" => u16::from_le_bytes([b[0], b[1]]) as f64,
                "i4" => i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
                "u4" => u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
                "i8" => i64::from_le_bytes(b) as f64,
                _ => u64::from_le_bytes(b) as f64,
            }
        })
        .collect())
}

/// The length of a 1-D `.npy` array (its header only).
fn read_vector_len(path: &Path) -> Result<usize> {
    let (_, h) = map(path)?;
    match h.shape[..] {
        [n] | [n, 1] => Ok(n),
        _ => Err(bad(
            path,
            format!(
                "the array has shape {:?}; labels need a 1-D (n,) array",
                h.shape
            ),
        )),
    }
}

/// Where the labels of `rows.npy` lie: `rows.labels.npy`; for a directory of CSR arrays
/// ([`map_csr`]), `labels.npy` inside it.
pub fn labels_path(rows: &Path) -> PathBuf {
    if rows.is_dir() {
        rows.join("labels.npy")
    } else {
        rows.with_extension("labels.npy")
    }
}

/// A data set whose rows are mapped from `rows.npy` (dense, [`map_rows`]) or from a directory
/// of CSR arrays (sparse, [`map_csr`]), and whose labels are read from `labels` (default
/// [`labels_path`]). The files must not change while in use.
///
/// # Errors
/// Those of [`map_rows`] and [`read_vector`], a missing labels file (named), and a label count
/// that differs from the row count.
pub fn read_npy<U: Scalar>(rows: &Path, labels: Option<&Path>) -> Result<Dataset<U>> {
    read_npy_in(rows, labels, None)
}

/// The number of rows of the 2-D `.npy` array `rows` (its header only), or of the CSR
/// directory `rows` (its `shape.npy`).
///
/// # Errors
/// Those of [`map_rows`] for the header, or of [`map_csr`] for the shape.
pub fn npy_rows(rows: &Path) -> Result<usize> {
    if rows.is_dir() {
        return csr_shape(rows).map(|(n, _)| n);
    }
    let (_, h) = map(rows)?;
    match h.shape[..] {
        [n, _] => Ok(n),
        _ => Err(bad(
            rows,
            format!(
                "the array has shape {:?}; rows need a 2-D (n, d) array",
                h.shape
            ),
        )),
    }
}

/// Rows `range` of a dense `.npy` file or a CSR directory and their labels (`None`: all
/// rows), as [`read_npy`] reads them: a rank of a distributed fit maps its own share and reads
/// only its labels.
///
/// # Errors
/// Those of [`read_npy`], [`map_rows_in`] and [`map_csr_in`].
pub fn read_npy_in<U: Scalar>(
    rows: &Path,
    labels: Option<&Path>,
    range: Option<Range<usize>>,
) -> Result<Dataset<U>> {
    let x = if rows.is_dir() {
        Features::Sparse(map_csr_in::<U>(rows, range.clone())?)
    } else {
        Features::Dense(map_rows_in::<U>(rows, range.clone())?)
    };
    let lpath = labels.map_or_else(|| labels_path(rows), Path::to_path_buf);
    if !lpath.exists() {
        return Err(bad(
            rows,
            format!(
                "the labels of these rows are expected in {} (one per row, a 1-D .npy array)",
                lpath.display()
            ),
        ));
    }
    if let Some(r) = &range {
        // the labels file must have a label for every row, not just this share's
        let all = read_vector_len(&lpath)?;
        let n = npy_rows(rows)?;
        if all != n {
            return Err(JokerError::ShapeMismatch(format!(
                "{} has {n} rows, {} has {all} labels",
                rows.display(),
                lpath.display(),
            )));
        }
        let y = read_vector_in(&lpath, Some(r.clone()))?;
        return Dataset::new(x, y);
    }
    let y = read_vector(&lpath)?;
    if y.len() != x.nrows() {
        return Err(JokerError::ShapeMismatch(format!(
            "{} has {} rows, {} has {} labels",
            rows.display(),
            x.nrows(),
            lpath.display(),
            y.len()
        )));
    }
    Dataset::new(x, y)
}

/// The header of a C-order array of `shape` and type `descr`, padded to `len` bytes in all
/// (a multiple of 64), so that it can be rewritten in place once the row count is known.
fn header_bytes(descr: &str, shape: &[usize], len: usize) -> Vec<u8> {
    let dims = match shape {
        [n] => format!("({n},)"),
        _ => format!(
            "({})",
            shape
                .iter()
                .map(usize::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {dims}, }}");
    let mut out = MAGIC.to_vec();
    out.extend_from_slice(&[1, 0]);
    let body = len - 10;
    out.extend_from_slice(&(body as u16).to_le_bytes());
    out.extend_from_slice(dict.as_bytes());
    out.resize(len - 1, b' ');
    out.push(b'\n');
    out
}

/// The header length used by the writers: room for any shape.
const HEADER_LEN: usize = 128;

/// Writes a float32 `.npy` row by row, without knowing the row count in advance.
pub struct RowWriter {
    out: BufWriter<File>,
    path: PathBuf,
    ncols: usize,
    nrows: usize,
}

/// Creates `path` with a header of `shape` (its length still unknown: 0), for the values to
/// follow.
fn start_array(path: &Path, descr: &str, shape: &[usize]) -> Result<BufWriter<File>> {
    let mut out = BufWriter::with_capacity(1 << 20, File::create(path).map_err(io_err(path))?);
    out.write_all(&header_bytes(descr, shape, HEADER_LEN))
        .map_err(io_err(path))?;
    Ok(out)
}

/// Flushes `out`, writes the final `shape` into the header (of the same length as the first)
/// and syncs the file.
fn finish_array(out: BufWriter<File>, path: &Path, descr: &str, shape: &[usize]) -> Result<()> {
    let mut file = out.into_inner().map_err(|e| JokerError::Io {
        path: path.to_path_buf(),
        source: e.into_error(),
    })?;
    file.seek(SeekFrom::Start(0)).map_err(io_err(path))?;
    file.write_all(&header_bytes(descr, shape, HEADER_LEN))
        .map_err(io_err(path))?;
    file.sync_all().map_err(io_err(path))
}

impl RowWriter {
    /// Starts `path` for rows of `ncols` values.
    pub fn create(path: &Path, ncols: usize) -> Result<Self> {
        Ok(RowWriter {
            out: start_array(path, "<f4", &[0, ncols])?,
            path: path.to_path_buf(),
            ncols,
            nrows: 0,
        })
    }

    /// Appends one row (`ncols` values).
    pub fn push(&mut self, row: &[f32]) -> Result<()> {
        if row.len() != self.ncols {
            return Err(JokerError::ShapeMismatch(format!(
                "a row of {} values for a file of {} columns",
                row.len(),
                self.ncols
            )));
        }
        for v in row {
            self.out
                .write_all(&v.to_le_bytes())
                .map_err(io_err(&self.path))?;
        }
        self.nrows += 1;
        Ok(())
    }

    /// Rows written so far.
    pub fn nrows(&self) -> usize {
        self.nrows
    }

    /// Writes the final shape into the header and closes the file.
    pub fn finish(self) -> Result<usize> {
        let RowWriter {
            out,
            path,
            ncols,
            nrows,
            ..
        } = self;
        finish_array(out, &path, "<f4", &[nrows, ncols])?;
        Ok(nrows)
    }
}

/// Writes a 1-D `.npy` array of little-endian values value by value, without knowing the
/// count in advance (the header's shape is written at the end).
struct VectorWriter {
    out: BufWriter<File>,
    path: PathBuf,
    descr: &'static str,
    len: usize,
}

impl VectorWriter {
    fn create(path: &Path, descr: &'static str) -> Result<Self> {
        Ok(VectorWriter {
            out: start_array(path, descr, &[0])?,
            path: path.to_path_buf(),
            descr,
            len: 0,
        })
    }

    /// Appends the bytes of one value.
    fn push(&mut self, bytes: &[u8]) -> Result<()> {
        self.out.write_all(bytes).map_err(io_err(&self.path))?;
        self.len += 1;
        Ok(())
    }

    fn finish(self) -> Result<usize> {
        let VectorWriter {
            out,
            path,
            descr,
            len,
        } = self;
        finish_array(out, &path, descr, &[len])?;
        Ok(len)
    }
}

/// Writes sparse rows as the CSR arrays [`map_csr`] reads (`data.npy` float32, `indices.npy`
/// int32, `indptr.npy` int64, `shape.npy` int64) in a directory, row by row.
struct CsrWriter {
    dir: PathBuf,
    data: VectorWriter,
    indices: VectorWriter,
    indptr: VectorWriter,
    ncols: usize,
    nnz: usize,
}

impl CsrWriter {
    fn create(dir: &Path, ncols: usize) -> Result<Self> {
        std::fs::create_dir_all(dir).map_err(io_err(dir))?;
        let mut indptr = VectorWriter::create(&dir.join("indptr.npy"), "<i8")?;
        indptr.push(&0i64.to_le_bytes())?;
        Ok(CsrWriter {
            dir: dir.to_path_buf(),
            data: VectorWriter::create(&dir.join("data.npy"), "<f4")?,
            indices: VectorWriter::create(&dir.join("indices.npy"), "<i4")?,
            indptr,
            ncols,
            nnz: 0,
        })
    }

    /// Appends one row given by its stored entries (columns strictly increasing).
    fn push(&mut self, entries: impl Iterator<Item = (u32, f32)>) -> Result<()> {
        for (j, v) in entries {
            self.indices.push(&(j as i32).to_le_bytes())?;
            self.data.push(&v.to_le_bytes())?;
            self.nnz += 1;
        }
        self.indptr.push(&(self.nnz as i64).to_le_bytes())
    }

    /// Closes the arrays and writes `shape.npy`; returns the row count.
    fn finish(self) -> Result<usize> {
        self.data.finish()?;
        self.indices.finish()?;
        let n = self.indptr.finish()? - 1;
        let mut shape = VectorWriter::create(&self.dir.join("shape.npy"), "<i8")?;
        shape.push(&(n as i64).to_le_bytes())?;
        shape.push(&(self.ncols as i64).to_le_bytes())?;
        shape.finish()?;
        Ok(n)
    }
}

/// The files [`convert`] writes into a CSR directory (the arrays and the labels).
pub const CSR_FILES: [&str; 5] = [
    "data.npy",
    "indices.npy",
    "indptr.npy",
    "shape.npy",
    "labels.npy",
];

/// Writes `values` as a 1-D float64 `.npy` array.
pub fn write_vector(path: &Path, values: &[f64]) -> Result<()> {
    let mut out = BufWriter::new(File::create(path).map_err(io_err(path))?);
    out.write_all(&header_bytes("<f8", &[values.len()], HEADER_LEN))
        .map_err(io_err(path))?;
    for v in values {
        out.write_all(&v.to_le_bytes()).map_err(io_err(path))?;
    }
    out.flush().map_err(io_err(path))
}

/// How [`convert`] stores the rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// One float32 `n x d` `.npy` file, the labels beside it ([`labels_path`]).
    Dense,
    /// A directory of CSR arrays ([`map_csr`]) with `labels.npy` inside: only the stored
    /// entries of each row are written (zeros of CSV rows are left out), for sparse data
    /// whose dense form would be many times larger.
    Csr,
}

/// Where a conversion's rows go, open.
enum Sink {
    Dense(RowWriter),
    // boxed: three buffered files against one
    Csr(Box<CsrWriter>),
}

impl Sink {
    fn create(layout: Layout, path: &Path, ncols: usize) -> Result<Sink> {
        Ok(match layout {
            Layout::Dense => Sink::Dense(RowWriter::create(path, ncols)?),
            Layout::Csr => Sink::Csr(Box::new(CsrWriter::create(path, ncols)?)),
        })
    }

    fn ncols(&self) -> usize {
        match self {
            Sink::Dense(w) => w.ncols,
            Sink::Csr(w) => w.ncols,
        }
    }

    /// Appends every row of `x`.
    fn push_rows(&mut self, x: &Features<f32>) -> Result<()> {
        let d = x.ncols();
        // one dense row, where a row is made dense (not for sparse rows written as CSR)
        let mut row = Vec::new();
        if !(matches!(self, Sink::Csr(_)) && matches!(x, Features::Sparse(_))) {
            row = crate::memory::try_filled(d, 0.0f32, "a row being converted")?;
        }
        for i in 0..x.nrows() {
            match (&mut *self, x) {
                (Sink::Csr(w), Features::Sparse(m)) => {
                    let (idx, val) = m.row(i);
                    w.push(idx.iter().copied().zip(val.iter().copied()))?;
                }
                (Sink::Csr(w), _) => {
                    x.gather_range(i, &mut row);
                    let stored = row.iter().enumerate().filter(|(_, v)| **v != 0.0);
                    w.push(stored.map(|(j, v)| (j as u32, *v)))?;
                }
                (Sink::Dense(w), _) => {
                    x.gather_range(i, &mut row);
                    w.push(&row)?;
                }
            }
        }
        Ok(())
    }

    fn finish(self) -> Result<usize> {
        match self {
            Sink::Dense(w) => w.finish(),
            Sink::Csr(w) => w.finish(),
        }
    }
}

pub use super::stream::TextFormat;

/// Writes the rows of the uncompressed LIBSVM or CSV file `input` in `layout`: as `rows` (dense
/// float32 `.npy`) with their labels in [`labels_path`]`(rows)`, or as the CSR directory `rows`
/// with `labels.npy` inside. Reads about `chunk` bytes of text at a time, so that memory holds
/// one chunk's rows and the labels (8 bytes a row), never the data set. A LIBSVM file without
/// a given width and index base is read twice: once for the largest index and the base, once
/// to write. The files appear under their names only when complete (a CSR directory is
/// written as `rows.partial` and renamed). `progress(done, total)` is called after each
/// chunk. Returns the rows and columns written.
///
/// # Errors
/// Those of the sharded readers ([`read_libsvm_shard`](super::read_libsvm_shard),
/// [`read_csv_shard`](super::read_csv_shard)): compressed files and standard input cannot be
/// cut into chunks and give a named error; a malformed line names its place. And I/O errors
/// writing the output.
pub fn convert(
    input: &Path,
    format: &TextFormat,
    rows: &Path,
    layout: Layout,
    chunk: u64,
    mut progress: impl FnMut(u64, u64),
) -> Result<(usize, usize)> {
    // written under temporary names and renamed at the end: a failed conversion leaves no
    // half-written file under the final names
    let partial = |p: &Path| {
        let mut name = p.as_os_str().to_owned();
        name.push(".partial");
        PathBuf::from(name)
    };
    if layout == Layout::Csr {
        let tmp = partial(rows);
        let out = convert_into(
            input,
            format,
            &tmp,
            &tmp.join("labels.npy"),
            layout,
            chunk,
            &mut progress,
        );
        if out.is_err() {
            let _ = std::fs::remove_dir_all(&tmp);
            return out;
        }
        std::fs::rename(&tmp, rows).map_err(io_err(rows))?;
        return out;
    }
    let (final_rows, final_labels) = (rows.to_path_buf(), labels_path(rows));
    let (rows, labels_tmp) = (&partial(&final_rows), partial(&final_labels));
    let out = convert_into(
        input,
        format,
        rows,
        &labels_tmp,
        layout,
        chunk,
        &mut progress,
    );
    if out.is_err() {
        let _ = std::fs::remove_file(rows);
        let _ = std::fs::remove_file(&labels_tmp);
        return out;
    }
    std::fs::rename(rows, &final_rows).map_err(io_err(&final_rows))?;
    std::fs::rename(&labels_tmp, &final_labels).map_err(io_err(&final_labels))?;
    out
}

fn convert_into(
    input: &Path,
    format: &TextFormat,
    rows: &Path,
    labels_out: &Path,
    layout: Layout,
    chunk: u64,
    progress: &mut impl FnMut(u64, u64),
) -> Result<(usize, usize)> {
    // a LIBSVM file without its index base and width is read twice
    let passes = match format {
        TextFormat::Libsvm(o) if o.zero_based.is_none() || o.n_features.is_none() => 2,
        _ => 1,
    };
    let stream = TextStream::open(input, format, chunk, |k, parts| {
        progress(k as u64, (passes * parts) as u64)
    })?;
    let (done, total) = ((passes - 1) * stream.parts(), passes * stream.parts());
    let mut labels = Vec::new();
    let mut writer: Option<Sink> = None;
    for k in 0..stream.parts() {
        if let Some(data) = stream.part::<f32>(k)? {
            let w = match &mut writer {
                Some(w) => w,
                None => {
                    let rows_est = stream
                        .rows()
                        .unwrap_or(data.len().saturating_mul(stream.parts() - k));
                    check_output_size(rows, layout, &data.x, rows_est)?;
                    writer.insert(Sink::create(layout, rows, data.x.ncols())?)
                }
            };
            w.push_rows(&data.x)?;
            labels.extend_from_slice(&data.y);
        }
        progress((done + k + 1) as u64, total as u64);
    }
    let Some(w) = writer else {
        return Err(JokerError::EmptyData(format!(
            "{} has no data rows",
            input.display()
        )));
    };
    let d = w.ncols();
    let n = w.finish()?;
    write_vector(labels_out, &labels)?;
    Ok((n, d))
}

/// The bytes a conversion writes: `rows` rows of `d` float32 values (dense), or their stored
/// values with their indices and the row offsets (CSR), `stored` being the fraction of the
/// entries stored; with the labels (8 bytes a row).
pub fn output_bytes(layout: Layout, rows: u64, d: u64, stored: f64) -> u64 {
    let entries = rows.saturating_mul(d);
    let body = match layout {
        Layout::Dense => entries.saturating_mul(4),
        Layout::Csr => ((entries as f64 * stored) as u64)
            .saturating_mul(8)
            .saturating_add(rows.saturating_mul(8)),
    };
    body.saturating_add(rows.saturating_mul(8))
}

/// Refuses, before anything is written, a conversion whose output would not fit the free space
/// of the file system it goes to: the estimate from the first part's rows (`first`, of about
/// `rows` rows in all), against the space left. Sparse rows
/// written dense are the usual cause (one LIBSVM index of 1e9 makes every row 4 GB), so the
/// message says how full the rows are and names the CSR layout. The memory the conversion
/// holds is checked first, against the memory available (the address-space and cgroup limits
/// included).
fn check_output_size(out: &Path, layout: Layout, first: &Features<f32>, rows: usize) -> Result<()> {
    let (n, d) = (first.nrows().max(1), first.ncols());
    let stored = match first {
        Features::Sparse(c) => c.nnz() as f64 / (n as f64 * d.max(1) as f64),
        Features::Dense(_) => 1.0,
    };
    let need = output_bytes(layout, rows as u64, d as u64, stored);
    let dir = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let size = |b: u64| crate::memory::human(usize::try_from(b).unwrap_or(usize::MAX));
    // the memory the conversion holds: the labels (8 bytes a row, written at the end) and one
    // row made dense where rows are written dense or read dense
    let row = match (layout, first) {
        (Layout::Csr, Features::Sparse(_)) => 0,
        _ => 4 * d as u64,
    };
    let held = 8 * rows as u64 + row;
    if let Some(room) = crate::memory::available()
        && held > room as u64
    {
        let name = out.to_string_lossy();
        let name = name.strip_suffix(".partial").unwrap_or(&name);
        return Err(JokerError::Io {
            path: PathBuf::from(name),
            source: std::io::Error::new(
                std::io::ErrorKind::OutOfMemory,
                format!(
                    "the conversion would hold about {} in memory (the labels, 8 bytes for each \
                     of {rows} rows, and a row of {d} columns made dense), and {} is available: \
                     nothing was written{}",
                    size(held),
                    size(room as u64),
                    if row > 0 && layout == Layout::Dense {
                        "; as CSR arrays (`joker convert --csr`) sparse rows stay sparse"
                    } else {
                        ""
                    }
                ),
            ),
        });
    }
    let Some(free) = super::free_space(dir) else {
        return Ok(());
    };
    if need <= free {
        return Ok(());
    }
    let hint = if layout == Layout::Dense && stored < 0.5 {
        format!(
            "; the rows are sparse ({stored:.2e} of the entries stored): as CSR arrays \
             (`joker convert --csr`, `Layout::Csr`) they take about {}",
            size(output_bytes(Layout::Csr, rows as u64, d as u64, stored))
        )
    } else {
        String::new()
    };
    // named by the output's final name, not the temporary one written first
    let name = out.to_string_lossy();
    let name = name.strip_suffix(".partial").unwrap_or(&name);
    Err(JokerError::Io {
        path: PathBuf::from(name),
        source: std::io::Error::new(
            std::io::ErrorKind::StorageFull,
            format!(
                "the output would take about {} ({rows} rows of {d} columns), and its file \
                 system has {} free: nothing was written{hint}",
                size(need),
                size(free)
            ),
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_sizes() {
        assert_eq!(
            output_bytes(Layout::Dense, 40, 1_000_000_000, 1.0),
            160_000_000_320
        );
        // two stored values a row: 16 bytes of them, 8 of the row offset, 8 of the label
        assert_eq!(output_bytes(Layout::Csr, 40, 1_000_000_000, 2e-9), 40 * 32);
    }

    #[test]
    fn headers_round_trip_and_keep_their_length() {
        let p = Path::new("x.npy");
        for shape in [vec![0usize, 7], vec![123_456_789_012, 784], vec![5]] {
            let b = header_bytes("<f4", &shape, HEADER_LEN);
            assert_eq!(b.len(), HEADER_LEN);
            let h = parse_header(&b, p).unwrap();
            assert_eq!(h.shape, shape);
            assert_eq!(h.descr, "<f4");
            assert!(!h.fortran_order);
            assert_eq!(h.data_offset, HEADER_LEN);
        }
    }

    #[test]
    fn numpy_headers_parse() {
        // as numpy writes them (version 1, padded to a multiple of 64 bytes)
        let dict = b"{'descr': '<f8', 'fortran_order': True, 'shape': (3, 2), }";
        let mut b = MAGIC.to_vec();
        b.extend_from_slice(&[1, 0]);
        let len = 128 - 10;
        b.extend_from_slice(&(len as u16).to_le_bytes());
        b.extend_from_slice(dict);
        b.resize(127, b' ');
        b.push(b'\n');
        let h = parse_header(&b, Path::new("a.npy")).unwrap();
        assert_eq!((h.descr.as_str(), h.fortran_order), ("<f8", true));
        assert_eq!(h.shape, vec![3, 2]);
        assert!(parse_header(b"\x93NUMPX\x01\x00\x00\x00", Path::new("a.npy")).is_err());
    }
}

//! Input data: dense row-major and sparse CSR feature matrices, and labelled datasets.
//!
//! Both layouts are validated once (shapes, finiteness, sorted in-range CSR indices) at
//! construction, so the solvers never see malformed input.

use crate::error::{JokerError, Result};
use crate::scalar::Scalar;

mod values;
pub(crate) use values::{Mapped, Values};

/// A dense matrix stored row by row: entry `(i, j)` is `data[i * ncols + j]`. The values are
/// held in memory, or mapped read-only from a file ([`crate::io::npy`]).
#[derive(Clone, Debug, PartialEq)]
pub struct DenseMatrix<T> {
    nrows: usize,
    ncols: usize,
    data: Values<T>,
}

/// A sparse matrix in compressed sparse row form: row `i` holds the entries
/// `values[indptr[i]..indptr[i + 1]]` at columns `indices[..]` (strictly increasing).
/// The arrays are held in memory, or mapped read-only from files ([`crate::io::npy`]).
#[derive(Clone, Debug, PartialEq)]
pub struct CsrMatrix<T> {
    nrows: usize,
    ncols: usize,
    indptr: Values<usize>,
    indices: Values<u32>,
    values: Values<T>,
}

/// Features of `n` samples in `d` dimensions, dense or sparse.
#[derive(Clone, Debug, PartialEq)]
pub enum Features<T> {
    /// Dense row-major storage.
    Dense(DenseMatrix<T>),
    /// Compressed sparse rows.
    Sparse(CsrMatrix<T>),
}

/// Features with one target per row (a class label or a real value).
#[derive(Clone, Debug, PartialEq)]
pub struct Dataset<T> {
    /// The samples.
    pub x: Features<T>,
    /// One target per sample: class labels (any numbers) or regression targets.
    pub y: Vec<f64>,
}

/// Rows read in order, a run of consecutive rows at a time, pass after pass: a file too large
/// for memory streamed a chunk at a time ([`crate::io::stream`]). A solver that sweeps its rows
/// in order (the doubly stochastic solvers) reads them through this instead of [`Features`].
pub trait RowStream<T> {
    /// Rows per pass `n`.
    fn nrows(&self) -> usize;
    /// Columns `d`.
    fn ncols(&self) -> usize;
    /// Fills `out` (dense row-major) and `labels` with the `labels.len()` rows from `first`
    /// on, wrapping from the last row to the first (the next pass). `first` must be where the
    /// previous read ended (0 at the start): a stream is read in order only.
    ///
    /// # Errors
    /// A read out of order, the source's read and parse errors, and a pass whose row count
    /// is not `n` (the file changed).
    fn read(&self, first: usize, out: &mut [T], labels: &mut [f64]) -> Result<()>;
}

fn check_finite<T: Scalar>(what: &'static str, v: T, row: usize, col: usize) -> Result<()> {
    if v.to_f64().is_finite() {
        Ok(())
    } else {
        Err(JokerError::NonFinite { what, row, col })
    }
}

impl<T: Scalar> DenseMatrix<T> {
    /// Wraps row-major `data` of `nrows x ncols`, checking the length and that every value
    /// is finite.
    pub fn new(nrows: usize, ncols: usize, data: Vec<T>) -> Result<Self> {
        if nrows == 0 || ncols == 0 {
            return Err(JokerError::EmptyData(format!(
                "a dense matrix needs at least one row and one column, got {nrows} x {ncols}"
            )));
        }
        let want = nrows.checked_mul(ncols).ok_or_else(|| {
            JokerError::ShapeMismatch(format!("{nrows} x {ncols} overflows usize"))
        })?;
        if data.len() != want {
            return Err(JokerError::ShapeMismatch(format!(
                "dense matrix of {nrows} x {ncols} needs {want} values, got {}",
                data.len()
            )));
        }
        Self::checked(nrows, ncols, Values::Owned(data))
    }

    /// Wraps `nrows x ncols` values mapped from a file, checking that every value is finite
    /// (one pass over the file).
    pub(crate) fn mapped(nrows: usize, ncols: usize, data: Mapped<T>) -> Result<Self> {
        let data = Values::Mapped(data);
        // the same pass sums the rows for the data-wide width rules, which would read the file
        // again: `[rows, sum of squares, column sums...]`, added in the order of
        // `kernel::RowSums::of`, so the rule's gamma is the same to the bit
        let mut packed = vec![0.0f64; 2 + ncols];
        packed[0] = nrows as f64;
        for (i, row) in data.chunks_exact(ncols.max(1)).enumerate() {
            for (j, &v) in row.iter().enumerate() {
                check_finite("features", v, i, j)?;
                let v = v.to_f64();
                packed[2 + j] += v;
                packed[1] += v * v;
            }
        }
        data.set_sums(packed);
        Ok(DenseMatrix { nrows, ncols, data })
    }

    /// The rows' sums of mapped rows, taken when the file was opened (`[rows, sum of squares,
    /// column sums...]`, as `kernel::RowSums::packed`); `None` for rows in memory.
    pub(crate) fn opening_sums(&self) -> Option<&[f64]> {
        self.data.sums().filter(|s| s.len() == 2 + self.ncols)
    }

    fn checked(nrows: usize, ncols: usize, data: Values<T>) -> Result<Self> {
        for (k, &v) in data.iter().enumerate() {
            check_finite("features", v, k / ncols, k % ncols)?;
        }
        Ok(DenseMatrix { nrows, ncols, data })
    }

    /// Builds a matrix from rows of equal length.
    pub fn from_rows(rows: &[Vec<T>]) -> Result<Self> {
        let ncols = rows.first().map_or(0, Vec::len);
        if let Some((i, r)) = rows.iter().enumerate().find(|(_, r)| r.len() != ncols) {
            return Err(JokerError::ShapeMismatch(format!(
                "row {i} has {} values, row 0 has {ncols}",
                r.len()
            )));
        }
        Self::new(rows.len(), ncols, rows.concat())
    }

    /// Number of rows.
    pub fn nrows(&self) -> usize {
        self.nrows
    }
    /// Number of columns.
    pub fn ncols(&self) -> usize {
        self.ncols
    }
    /// The row-major values.
    pub fn as_slice(&self) -> &[T] {
        &self.data
    }
    /// Row `i`.
    pub fn row(&self, i: usize) -> &[T] {
        &self.data[i * self.ncols..(i + 1) * self.ncols]
    }
    /// Consumes the matrix, returning its row-major values (a copy when they are mapped).
    pub fn into_vec(self) -> Vec<T> {
        self.data.into_vec()
    }
    /// Whether the values are mapped from a file rather than held in memory.
    pub fn is_mapped(&self) -> bool {
        self.data.is_mapped()
    }
}

impl<T: Scalar> CsrMatrix<T> {
    /// Wraps CSR arrays, checking that `indptr` is monotone with `nrows + 1` entries, that
    /// the column indices of each row are strictly increasing and below `ncols`, and that
    /// every value is finite.
    pub fn new(
        nrows: usize,
        ncols: usize,
        indptr: Vec<usize>,
        indices: Vec<u32>,
        values: Vec<T>,
    ) -> Result<Self> {
        Self::checked(
            nrows,
            ncols,
            Values::Owned(indptr),
            Values::Owned(indices),
            Values::Owned(values),
        )
    }

    /// Wraps CSR arrays mapped from files (or `indptr` in memory), with the checks of
    /// [`new`](Self::new) (one pass over the arrays).
    pub(crate) fn mapped(
        nrows: usize,
        ncols: usize,
        indptr: Values<usize>,
        indices: Mapped<u32>,
        values: Mapped<T>,
    ) -> Result<Self> {
        Self::checked(
            nrows,
            ncols,
            indptr,
            Values::Mapped(indices),
            Values::Mapped(values),
        )
    }

    fn checked(
        nrows: usize,
        ncols: usize,
        indptr: Values<usize>,
        indices: Values<u32>,
        values: Values<T>,
    ) -> Result<Self> {
        if nrows == 0 || ncols == 0 {
            return Err(JokerError::EmptyData(format!(
                "a sparse matrix needs at least one row and one column, got {nrows} x {ncols}"
            )));
        }
        if indptr.len() != nrows + 1 || indptr[0] != 0 {
            return Err(JokerError::ShapeMismatch(format!(
                "CSR indptr must have nrows + 1 = {} entries starting at 0, got {}",
                nrows + 1,
                indptr.len()
            )));
        }
        if indices.len() != values.len() || indptr[nrows] != values.len() {
            return Err(JokerError::ShapeMismatch(format!(
                "CSR has {} indices and {} values but indptr ends at {}",
                indices.len(),
                values.len(),
                indptr[nrows]
            )));
        }
        if ncols > u32::MAX as usize {
            return Err(JokerError::ShapeMismatch(format!(
                "{ncols} columns exceed the CSR index range"
            )));
        }
        for i in 0..nrows {
            let (a, b) = (indptr[i], indptr[i + 1]);
            if a > b || b > values.len() {
                return Err(JokerError::ShapeMismatch(format!(
                    "CSR indptr is not monotone at row {i}"
                )));
            }
            for k in a..b {
                let j = indices[k] as usize;
                if j >= ncols {
                    return Err(JokerError::ShapeMismatch(format!(
                        "CSR row {i} has column {j}, but there are {ncols} columns"
                    )));
                }
                if k > a && indices[k - 1] >= indices[k] {
                    return Err(JokerError::ShapeMismatch(format!(
                        "CSR row {i}: column indices must be strictly increasing"
                    )));
                }
                check_finite("features", values[k], i, j)?;
            }
        }
        Ok(CsrMatrix {
            nrows,
            ncols,
            indptr,
            indices,
            values,
        })
    }

    /// Number of rows.
    pub fn nrows(&self) -> usize {
        self.nrows
    }
    /// Number of columns.
    pub fn ncols(&self) -> usize {
        self.ncols
    }
    /// Number of stored entries.
    pub fn nnz(&self) -> usize {
        self.values.len()
    }
    /// Row `i` as (column indices, values).
    pub fn row(&self, i: usize) -> (&[u32], &[T]) {
        let (a, b) = (self.indptr[i], self.indptr[i + 1]);
        (&self.indices[a..b], &self.values[a..b])
    }
    /// The row pointer array.
    pub fn indptr(&self) -> &[usize] {
        &self.indptr
    }
    /// The column index array.
    pub fn indices(&self) -> &[u32] {
        &self.indices
    }
    /// The value array.
    pub fn values(&self) -> &[T] {
        &self.values
    }
    /// Mutable values (shape-preserving rescaling; mapped values are copied first).
    pub(crate) fn values_mut(&mut self) -> &mut [T] {
        self.values.make_mut()
    }
    /// Whether the arrays are mapped from files rather than held in memory.
    pub fn is_mapped(&self) -> bool {
        self.values.is_mapped()
    }

    /// The same rows stored densely (`nrows x ncols`, zeros where nothing is stored).
    pub fn to_dense(&self) -> DenseMatrix<T> {
        let mut data = vec![T::from_f64(0.0); self.nrows * self.ncols];
        for i in 0..self.nrows {
            let (idx, val) = self.row(i);
            let row = &mut data[i * self.ncols..(i + 1) * self.ncols];
            for (&j, &v) in idx.iter().zip(val) {
                row[j as usize] = v;
            }
        }
        DenseMatrix {
            nrows: self.nrows,
            ncols: self.ncols,
            data: Values::Owned(data),
        }
    }
}

impl<T: Scalar> Features<T> {
    /// Number of samples.
    pub fn nrows(&self) -> usize {
        match self {
            Features::Dense(m) => m.nrows(),
            Features::Sparse(m) => m.nrows(),
        }
    }

    /// Input dimension.
    pub fn ncols(&self) -> usize {
        match self {
            Features::Dense(m) => m.ncols(),
            Features::Sparse(m) => m.ncols(),
        }
    }

    /// Whether the rows are mapped from a file rather than held in memory.
    pub fn is_mapped(&self) -> bool {
        match self {
            Features::Dense(m) => m.is_mapped(),
            Features::Sparse(m) => m.is_mapped(),
        }
    }

    /// The bytes of the rows as stored (dense values, or CSR values with their indices).
    pub fn stored_bytes(&self) -> usize {
        let size = std::mem::size_of::<T>();
        match self {
            Features::Dense(m) => m.nrows().saturating_mul(m.ncols()).saturating_mul(size),
            Features::Sparse(c) => c.nnz().saturating_mul(size + 4),
        }
    }

    /// Whether the rows are mapped from a file that the page cache cannot hold
    /// ([`crate::memory::cache_room`]): then every pass over them reads the file from disk
    /// again, and a pass costs what reading the file costs.
    pub fn beyond_page_cache(&self) -> bool {
        self.is_mapped() && crate::memory::cache_room().is_some_and(|r| self.stored_bytes() > r)
    }

    /// Runs `f`, which reads rows drawn at random (a sample), with mapped rows advised as read
    /// at random: the kernel then reads the pages of each row drawn, not the megabytes around
    /// it (a sample of 2,000 rows of a 0.94 GB file under a 512 MiB memory cap read 5.7 GB
    /// with the default read-around). Rows in memory are unaffected.
    pub fn sampled<R>(&self, f: impl FnOnce() -> R) -> R {
        if !self.is_mapped() {
            return f();
        }
        self.advise_random(true);
        let r = f();
        self.advise_random(false);
        r
    }

    /// Mapped rows only: reads that fault a page fetch that page alone (`random`, no
    /// read-around), or the default read-around again. Only a hint; rows in memory are
    /// unaffected.
    pub fn advise_random(&self, random: bool) {
        match self {
            Features::Dense(m) => m.data.advise_random(random),
            Features::Sparse(c) => {
                c.indptr.advise_random(random);
                c.indices.advise_random(random);
                c.values.advise_random(random);
            }
        }
    }

    /// Mapped rows only: asks the kernel to read rows `rows` now, exactly those
    /// (`MADV_WILLNEED`), before they are gathered. Together with
    /// [`advise_random`](Self::advise_random) a block of rows costs one read of its own bytes,
    /// where a fault's default read-around fetches the device's read-ahead window around it (8
    /// MiB on a virtual disk, against 1.5 MiB for a block of 512 rows of 784 f32), most of which
    /// a memory cap evicts before another block uses it. Only a hint.
    pub fn prefetch_rows(&self, rows: std::ops::Range<usize>) {
        if !self.is_mapped() || rows.is_empty() || rows.end > self.nrows() {
            return;
        }
        match self {
            Features::Dense(m) => {
                let d = m.ncols();
                m.data.will_need(rows.start * d, rows.len() * d);
            }
            Features::Sparse(c) => {
                let (a, b) = (c.indptr[rows.start], c.indptr[rows.end]);
                c.indices.will_need(a, b - a);
                c.values.will_need(a, b - a);
            }
        }
    }

    /// Writes the given rows, densified, row-major into `out` (`rows.len() * ncols` values).
    pub fn gather_dense(&self, rows: &[usize], out: &mut [T]) {
        let d = self.ncols();
        debug_assert_eq!(out.len(), rows.len() * d);
        for (dst, &i) in out.chunks_exact_mut(d).zip(rows) {
            self.write_row(i, dst);
        }
    }

    /// The given rows, in that order, in memory and in the same storage (dense rows stay
    /// dense, sparse rows sparse): the training set of a sub-problem.
    pub fn select_rows(&self, rows: &[usize]) -> Result<Features<T>> {
        let d = self.ncols();
        match self {
            Features::Dense(_) => {
                let len = rows.len().saturating_mul(d);
                let mut data = crate::memory::try_filled(len, T::default(), "the selected rows")?;
                self.gather_dense(rows, &mut data);
                Ok(Features::Dense(DenseMatrix::new(rows.len(), d, data)?))
            }
            Features::Sparse(c) => {
                let nnz: usize = rows.iter().map(|&i| c.row(i).0.len()).sum();
                let mut indptr = crate::memory::try_reserved(rows.len() + 1, "the selected rows")?;
                let mut indices = crate::memory::try_reserved(nnz, "the selected rows")?;
                let mut values = crate::memory::try_reserved(nnz, "the selected rows")?;
                indptr.push(0);
                for &i in rows {
                    let (idx, val) = c.row(i);
                    indices.extend_from_slice(idx);
                    values.extend_from_slice(val);
                    indptr.push(indices.len());
                }
                let m = CsrMatrix::new(rows.len(), d, indptr, indices, values)?;
                Ok(Features::Sparse(m))
            }
        }
    }

    /// Writes rows `start..start + out.len() / ncols` densified into `out`.
    pub fn gather_range(&self, start: usize, out: &mut [T]) {
        let d = self.ncols();
        for (k, dst) in out.chunks_exact_mut(d).enumerate() {
            self.write_row(start + k, dst);
        }
    }

    fn write_row(&self, i: usize, dst: &mut [T]) {
        match self {
            Features::Dense(m) => dst.copy_from_slice(m.row(i)),
            Features::Sparse(m) => {
                dst.fill(T::default());
                let (idx, val) = m.row(i);
                for (&j, &v) in idx.iter().zip(val) {
                    dst[j as usize] = v;
                }
            }
        }
    }

    /// Converts to another precision (mapped values in their own precision stay mapped).
    pub fn cast<U: Scalar>(&self) -> Features<U> {
        match self {
            Features::Dense(m) => Features::Dense(DenseMatrix {
                nrows: m.nrows,
                ncols: m.ncols,
                data: m.data.cast(),
            }),
            Features::Sparse(m) => Features::Sparse(CsrMatrix {
                nrows: m.nrows,
                ncols: m.ncols,
                indptr: m.indptr.clone(),
                indices: m.indices.clone(),
                values: m.values.cast(),
            }),
        }
    }

    /// The same features with `ncols` widened to `d` (sparse files may not mention the last
    /// columns); fails if the data already has more than `d` columns.
    pub fn with_ncols(self, d: usize) -> Result<Self> {
        let have = self.ncols();
        if have > d {
            return Err(JokerError::ShapeMismatch(format!(
                "data has {have} features, the model expects {d}"
            )));
        }
        if have == d {
            return Ok(self);
        }
        match self {
            Features::Sparse(mut m) => {
                m.ncols = d;
                Ok(Features::Sparse(m))
            }
            Features::Dense(m) => {
                let mut data = Vec::with_capacity(m.nrows * d);
                for i in 0..m.nrows {
                    data.extend_from_slice(m.row(i));
                    data.resize((i + 1) * d, T::default());
                }
                Ok(Features::Dense(DenseMatrix {
                    nrows: m.nrows,
                    ncols: d,
                    data: Values::Owned(data),
                }))
            }
        }
    }

    /// Mutable access for in-place column scaling (used by standardisation).
    pub(crate) fn for_each_mut(&mut self, mut f: impl FnMut(usize, &mut T)) {
        match self {
            Features::Dense(m) => {
                let d = m.ncols;
                for (k, v) in m.data.make_mut().iter_mut().enumerate() {
                    f(k % d, v);
                }
            }
            Features::Sparse(m) => {
                let idx = m.indices.clone();
                for (v, &j) in m.values_mut().iter_mut().zip(idx.iter()) {
                    f(j as usize, v);
                }
            }
        }
    }
}

impl<T: Scalar> Dataset<T> {
    /// Pairs features with targets, checking that there is one finite target per row.
    pub fn new(x: Features<T>, y: Vec<f64>) -> Result<Self> {
        if y.len() != x.nrows() {
            return Err(JokerError::ShapeMismatch(format!(
                "{} rows of features but {} targets",
                x.nrows(),
                y.len()
            )));
        }
        if let Some(i) = y.iter().position(|v| !v.is_finite()) {
            return Err(JokerError::NonFinite {
                what: "targets",
                row: i,
                col: 0,
            });
        }
        Ok(Dataset { x, y })
    }

    /// Number of samples.
    pub fn len(&self) -> usize {
        self.y.len()
    }

    /// Whether there are no samples (never true for a validated dataset).
    pub fn is_empty(&self) -> bool {
        self.y.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dense_rejects_bad_shapes_and_nan() {
        assert!(matches!(
            DenseMatrix::<f64>::new(2, 2, vec![1.0; 3]),
            Err(JokerError::ShapeMismatch(_))
        ));
        assert!(matches!(
            DenseMatrix::<f64>::new(0, 2, vec![]),
            Err(JokerError::EmptyData(_))
        ));
        assert!(matches!(
            DenseMatrix::new(2, 2, vec![1.0, 2.0, f64::NAN, 0.0]),
            Err(JokerError::NonFinite { row: 1, col: 0, .. })
        ));
    }

    #[test]
    fn csr_validates_and_gathers() {
        assert!(CsrMatrix::<f32>::new(2, 3, vec![0, 1, 2], vec![0, 3], vec![1.0, 2.0]).is_err());
        assert!(
            CsrMatrix::<f32>::new(1, 3, vec![0, 2], vec![2, 1], vec![1.0, 2.0]).is_err(),
            "unsorted"
        );
        let m =
            CsrMatrix::<f32>::new(2, 3, vec![0, 1, 3], vec![1, 0, 2], vec![5.0, 1.0, 2.0]).unwrap();
        let f = Features::Sparse(m);
        let mut out = vec![-9.0; 6];
        f.gather_dense(&[1, 0], &mut out);
        assert_eq!(out, vec![1.0, 0.0, 2.0, 0.0, 5.0, 0.0]);
    }
}

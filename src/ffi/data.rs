//! `JokerData`: features (dense row-major or CSR, f32 or f64) with optional labels, copied
//! into Rust-owned storage.

use super::handle::{Kind, get, impl_handle, register, release};
use super::{Failure, FfiResult, JokerStatus, guard, input_slice, write_out};
use crate::data::{CsrMatrix, Dataset, DenseMatrix, Features};
use crate::error::JokerError;
use crate::scalar::Scalar;

/// A data set: an opaque handle made by a `joker_data_from_*` function (which copies the
/// arrays) and freed by `joker_data_free`. It holds features and, optionally, one label or
/// target per row; training and scoring need labels, prediction does not.
pub struct JokerData {
    tag: u64,
    pub(crate) set: DataSet,
    /// Whether the caller gave labels (`set`'s targets are zeros otherwise).
    pub(crate) labelled: bool,
}

impl_handle!(JokerData, Kind::Data, 0x4a4b_5244_4154_4153); // "JKRDATAS"

/// The features in the precision the caller gave them.
pub(crate) enum DataSet {
    F32(Dataset<f32>),
    F64(Dataset<f64>),
}

impl DataSet {
    pub(crate) fn nrows(&self) -> usize {
        match self {
            DataSet::F32(d) => d.x.nrows(),
            DataSet::F64(d) => d.x.nrows(),
        }
    }
    pub(crate) fn ncols(&self) -> usize {
        match self {
            DataSet::F32(d) => d.x.ncols(),
            DataSet::F64(d) => d.x.ncols(),
        }
    }
}

/// Pairs copied features with copied labels (zeros when there are none).
///
/// # Safety
/// `y` must be NULL or point to `x.nrows()` readable doubles.
unsafe fn with_labels<T: Scalar>(x: Features<T>, y: *const f64) -> FfiResult<(Dataset<T>, bool)> {
    let n = x.nrows();
    if y.is_null() {
        return Ok((Dataset { x, y: vec![0.0; n] }, false));
    }
    // SAFETY: `y` is non-NULL and points to `n` doubles (function contract).
    let labels = unsafe { input_slice(y, n, "y") }?.to_vec();
    Ok((Dataset::new(x, labels)?, true))
}

fn empty_check(n_rows: usize, n_cols: usize) -> FfiResult<()> {
    if n_rows == 0 || n_cols == 0 {
        return Err(JokerError::EmptyData(format!(
            "data needs at least one row and one column, got {n_rows} x {n_cols}"
        ))
        .into());
    }
    Ok(())
}

/// # Safety
/// See `joker_data_from_dense_f64`.
unsafe fn dense<T: Scalar>(
    x: *const T,
    n_rows: usize,
    n_cols: usize,
    y: *const f64,
    wrap: fn(Dataset<T>) -> DataSet,
    out: *mut *mut JokerData,
) -> FfiResult<()> {
    // SAFETY: `out` is NULL (rejected) or writable (function contract).
    unsafe { write_out(out, std::ptr::null_mut(), "out") }?;
    empty_check(n_rows, n_cols)?;
    let len = n_rows.checked_mul(n_cols).ok_or_else(|| {
        Failure::new(
            JokerStatus::ShapeMismatch,
            format!("{n_rows} x {n_cols} overflows size_t"),
        )
    })?;
    // SAFETY: `x` points to `n_rows * n_cols` readable values (function contract).
    let values = unsafe { input_slice(x, len, "x") }?.to_vec();
    let feats = Features::Dense(DenseMatrix::new(n_rows, n_cols, values)?);
    // SAFETY: `y` is NULL or holds `n_rows` doubles (function contract).
    let (set, labelled) = unsafe { with_labels(feats, y) }?;
    let h = register(JokerData {
        tag: 0,
        set: wrap(set),
        labelled,
    });
    // SAFETY: as above.
    unsafe { write_out(out, h, "out") }
}

/// # Safety
/// See `joker_data_from_csr_f64`.
#[allow(clippy::too_many_arguments)]
unsafe fn csr<T: Scalar>(
    n_rows: usize,
    n_cols: usize,
    indptr: *const usize,
    indices: *const u32,
    values: *const T,
    y: *const f64,
    wrap: fn(Dataset<T>) -> DataSet,
    out: *mut *mut JokerData,
) -> FfiResult<()> {
    // SAFETY: `out` is NULL (rejected) or writable (function contract).
    unsafe { write_out(out, std::ptr::null_mut(), "out") }?;
    empty_check(n_rows, n_cols)?;
    let n1 = n_rows
        .checked_add(1)
        .ok_or_else(|| Failure::new(JokerStatus::ShapeMismatch, "n_rows + 1 overflows size_t"))?;
    // SAFETY: `indptr` holds `n_rows + 1` values (function contract).
    let ptr = unsafe { input_slice(indptr, n1, "indptr") }?.to_vec();
    let nnz = ptr[n_rows];
    if nnz > n_rows.saturating_mul(n_cols) {
        // checked before reading `indices` and `values`: a garbage `indptr` must not make
        // the library read far past the caller's arrays
        return Err(Failure::new(
            JokerStatus::ShapeMismatch,
            format!(
                "CSR indptr[n_rows] = {nnz} entries, more than n_rows x n_cols = {n_rows} x {n_cols} can hold"
            ),
        ));
    }
    // SAFETY: `indices` and `values` hold `indptr[n_rows]` values (function contract).
    let idx = unsafe { input_slice(indices, nnz, "indices") }?.to_vec();
    // SAFETY: as above.
    let val = unsafe { input_slice(values, nnz, "values") }?.to_vec();
    let feats = Features::Sparse(CsrMatrix::new(n_rows, n_cols, ptr, idx, val)?);
    // SAFETY: `y` is NULL or holds `n_rows` doubles (function contract).
    let (set, labelled) = unsafe { with_labels(feats, y) }?;
    let h = register(JokerData {
        tag: 0,
        set: wrap(set),
        labelled,
    });
    // SAFETY: as above.
    unsafe { write_out(out, h, "out") }
}

/// Copies a dense row-major `n_rows x n_cols` matrix of doubles (entry `(i, j)` at
/// `x[i * n_cols + j]`) and, if `y` is not NULL, `n_rows` labels (class labels of any values,
/// or regression targets) into a new data set. Every value must be finite.
///
/// `*out` receives the handle (owned by the caller: free it with `joker_data_free`); the
/// arrays stay the caller's and may be freed when the call returns.
///
/// # Safety
/// `x` must point to `n_rows * n_cols` readable doubles, `y` must be NULL or point to `n_rows`
/// readable doubles, and `out` must be NULL or valid for writing one pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_data_from_dense_f64(
    x: *const f64,
    n_rows: usize,
    n_cols: usize,
    y: *const f64,
    out: *mut *mut JokerData,
) -> JokerStatus {
    // SAFETY: forwarded contract.
    guard(|| unsafe { dense(x, n_rows, n_cols, y, DataSet::F64, out) })
}

/// As `joker_data_from_dense_f64`, for single-precision features (labels stay doubles).
///
/// # Safety
/// `x` must point to `n_rows * n_cols` readable floats; `y` and `out` as for
/// `joker_data_from_dense_f64`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_data_from_dense_f32(
    x: *const f32,
    n_rows: usize,
    n_cols: usize,
    y: *const f64,
    out: *mut *mut JokerData,
) -> JokerStatus {
    // SAFETY: forwarded contract.
    guard(|| unsafe { dense(x, n_rows, n_cols, y, DataSet::F32, out) })
}

/// Copies a sparse `n_rows x n_cols` matrix in compressed sparse row form: row `i` holds the
/// entries `values[indptr[i] .. indptr[i + 1]]` at the 0-based columns
/// `indices[indptr[i] .. indptr[i + 1]]`, strictly increasing within a row; `indptr` has
/// `n_rows + 1` entries starting at 0. Labels as for `joker_data_from_dense_f64`.
///
/// # Safety
/// `indptr` must point to `n_rows + 1` readable `size_t`, `indices` and `values` to
/// `indptr[n_rows]` readable values each (they may be NULL when that is 0); `y` and `out` as
/// for `joker_data_from_dense_f64`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_data_from_csr_f64(
    n_rows: usize,
    n_cols: usize,
    indptr: *const usize,
    indices: *const u32,
    values: *const f64,
    y: *const f64,
    out: *mut *mut JokerData,
) -> JokerStatus {
    // SAFETY: forwarded contract.
    guard(|| unsafe {
        csr(
            n_rows,
            n_cols,
            indptr,
            indices,
            values,
            y,
            DataSet::F64,
            out,
        )
    })
}

/// As `joker_data_from_csr_f64`, for single-precision values.
///
/// # Safety
/// As for `joker_data_from_csr_f64`, with `values` pointing to floats.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_data_from_csr_f32(
    n_rows: usize,
    n_cols: usize,
    indptr: *const usize,
    indices: *const u32,
    values: *const f32,
    y: *const f64,
    out: *mut *mut JokerData,
) -> JokerStatus {
    // SAFETY: forwarded contract.
    guard(|| unsafe {
        csr(
            n_rows,
            n_cols,
            indptr,
            indices,
            values,
            y,
            DataSet::F32,
            out,
        )
    })
}

/// Frees a data set. NULL does nothing; a handle that is not a live `JokerData` is rejected
/// with `JOKER_STATUS_INVALID_HANDLE` and nothing is freed.
///
/// # Safety
/// `data` must not be used by another thread during or after the call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_data_free(data: *mut JokerData) -> JokerStatus {
    // SAFETY: no concurrent use (function contract); `release` checks the handle.
    guard(|| unsafe { release(data, "data") })
}

/// Writes the number of rows (samples) to `*out`.
///
/// # Safety
/// `data` must be NULL or a handle not freed by another thread during the call; `out` must
/// be NULL or valid for writing one `size_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_data_n_rows(data: *const JokerData, out: *mut usize) -> JokerStatus {
    guard(|| {
        // SAFETY: see the function's contract.
        let d = unsafe { get(data, "data") }?;
        // SAFETY: as above.
        unsafe { write_out(out, d.set.nrows(), "out") }
    })
}

/// Writes the number of columns (features) to `*out`.
///
/// # Safety
/// As for `joker_data_n_rows`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_data_n_cols(data: *const JokerData, out: *mut usize) -> JokerStatus {
    guard(|| {
        // SAFETY: see the function's contract.
        let d = unsafe { get(data, "data") }?;
        // SAFETY: as above.
        unsafe { write_out(out, d.set.ncols(), "out") }
    })
}

/// Borrows a data set.
///
/// # Safety
/// `data` must be NULL or a handle not changed or freed by another thread during the returned
/// lifetime.
pub(crate) unsafe fn data_ref<'a>(data: *const JokerData, arg: &str) -> FfiResult<&'a JokerData> {
    // SAFETY: see the function's contract.
    unsafe { get(data, arg) }
}

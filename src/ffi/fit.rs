//! `joker_fit`: training with optional sample weights, a validation set and a progress
//! callback.

use std::any::Any;
use std::borrow::Cow;
use std::ffi::c_void;

use super::data::{DataSet, data_ref};
use super::model::{JokerModel, new_model};
use super::params::params_ref;
use super::{Failure, JokerStatus, guard, input_slice, write_out};
use crate::data::Dataset;
use crate::error::JokerError;
use crate::estimator::{FitOptions, Joker};
use crate::model::Model;
use crate::scalar::Scalar;
use crate::solver::Progress;
use crate::solver::dbcd::{InterruptFn, ProgressFn};

/// A snapshot of the optimisation, passed to the progress callback. It is valid only during
/// the callback; copy what you need.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct JokerProgress {
    /// Iterations done.
    pub iter: usize,
    /// Passes over the data (`iter * block_size / n`).
    pub epoch: f64,
    /// Seconds since the start of the fit.
    pub seconds: f64,
    /// Primal objective.
    pub primal: f64,
    /// Dual objective.
    pub dual: f64,
    /// Relative duality gap `(primal - dual) / max(|primal|, |dual|)`.
    pub gap: f64,
    /// Validation metric (accuracy for classifiers, RMSE for regression), or NaN when no
    /// validation set was given.
    pub validation: f64,
    /// Trust-region steps accepted so far.
    pub accepted: usize,
    /// Full KRR (`joker_params_set_full_krr`): the relative residual
    /// `||(K + lambda I) w - y|| / ||y||`; NaN for DBCD-TR fits.
    pub rel_residual: f64,
}

/// The progress callback: called at every check (see `joker_params_set_check_every`) on the
/// thread that called `joker_fit`, with a snapshot and the `user_data` given to `joker_fit`.
/// Return 0 to continue, any other value to stop the fit early (the model is still returned,
/// with stop reason "cancelled"). The callback must not unwind (throw a C++ exception or
/// `longjmp`) out of the call, and must not free handles that the fit is using.
pub type JokerProgressFn =
    Option<unsafe extern "C" fn(progress: *const JokerProgress, user_data: *mut c_void) -> i32>;

/// The data set as `Dataset<U>`: borrowed when it already has that precision, converted
/// otherwise.
fn view<U: Scalar>(set: &DataSet) -> Cow<'_, Dataset<U>> {
    let any: &dyn Any = match set {
        DataSet::F32(d) => d,
        DataSet::F64(d) => d,
    };
    if let Some(d) = any.downcast_ref::<Dataset<U>>() {
        return Cow::Borrowed(d);
    }
    Cow::Owned(match set {
        DataSet::F32(d) => Dataset {
            x: d.x.cast::<U>(),
            y: d.y.clone(),
        },
        DataSet::F64(d) => Dataset {
            x: d.x.cast::<U>(),
            y: d.y.clone(),
        },
    })
}

/// The C snapshot of a check.
fn snapshot_of(pr: &Progress) -> JokerProgress {
    JokerProgress {
        iter: pr.iter,
        epoch: pr.epoch,
        seconds: pr.seconds,
        primal: pr.primal,
        dual: pr.dual,
        gap: pr.gap,
        validation: pr.validation.unwrap_or(f64::NAN),
        accepted: pr.accepted,
        rel_residual: pr.rel_residual.unwrap_or(f64::NAN),
    }
}

/// The training set of a fit, which must have labels.
///
/// # Safety
/// `train` must be NULL or a handle not freed or changed by another thread during the fit.
pub(crate) unsafe fn labelled_train<'a>(
    train: *const super::JokerData,
) -> super::FfiResult<&'a super::JokerData> {
    // SAFETY: NULL (rejected) or valid for the fit (function contract).
    let tr = unsafe { data_ref(train, "train") }?;
    if !tr.labelled {
        return Err(Failure::new(
            JokerStatus::InvalidLabels,
            "`train` has no labels: pass y to joker_data_from_* for training data",
        ));
    }
    Ok(tr)
}

/// The validation set of a fit, which must have labels (`None` for NULL).
///
/// # Safety
/// `validation` must be NULL or a handle not freed or changed by another thread during the
/// fit.
unsafe fn labelled_validation<'a>(
    validation: *const super::JokerData,
) -> super::FfiResult<Option<&'a DataSet>> {
    if validation.is_null() {
        return Ok(None);
    }
    // SAFETY: non-NULL and valid for the call (function contract).
    let v = unsafe { data_ref(validation, "validation") }?;
    if !v.labelled {
        return Err(Failure::new(
            JokerStatus::InvalidLabels,
            "`validation` has no labels: pass y to joker_data_from_* for validation data",
        ));
    }
    Ok(Some(&v.set))
}

/// The fit's progress callback over the C one: the snapshot of each check and `user_data`
/// passed on, a non-zero answer stopping the fit.
fn callback_of<'a>(progress: JokerProgressFn, user_data: *mut c_void) -> Option<ProgressFn<'a>> {
    progress.map(|f| {
        Box::new(move |pr: &Progress| {
            let snapshot = snapshot_of(pr);
            // SAFETY: the caller of `joker_fit` / `joker_fit_stream` supplied a function safe
            // to call with a valid snapshot pointer (alive for the call) and its own
            // `user_data` (their contract).
            unsafe { f(&snapshot, user_data) == 0 }
        }) as ProgressFn<'a>
    })
}

fn fit_as<U: Scalar>(
    params: &Joker,
    train: &Dataset<U>,
    sample_weight: Option<&[f64]>,
    validation: Option<&DataSet>,
    progress: Option<ProgressFn<'_>>,
    interrupt: Option<InterruptFn<'_>>,
) -> crate::Result<Model> {
    let val = validation.map(view::<U>);
    params.fit_with(
        train,
        FitOptions {
            sample_weight,
            validation: val.as_deref(),
            progress,
            warm_start: None,
            interrupt,
        },
    )
}

/// Trains a model.
///
/// * `params`: the parameters (unchanged; may be reused).
/// * `train`: the training data, with labels.
/// * `sample_weight`: NULL, or `n_weights` positive weights, one per training row (copied).
/// * `validation`: NULL, or a labelled data set scored at every check (the metric is passed
///   to `progress` and kept in the model's history).
/// * `progress`, `user_data`: NULL, or a callback (see `JokerProgressFn`) and a pointer passed
///   to it unchanged.
/// * `*out`: receives the new model (owned by the caller: free it with `joker_model_free`).
///
/// Errors: `JOKER_STATUS_INVALID_LABELS` for unlabelled training or validation data or
/// labels that do not fit the loss, `JOKER_STATUS_SHAPE_MISMATCH` for a weight count that is
/// not the row count, `JOKER_STATUS_NON_FINITE` / `JOKER_STATUS_INVALID_ARGUMENT` for bad
/// weights, `JOKER_STATUS_MEMORY` over the memory limit.
///
/// # Safety
/// Handles must be NULL or not freed or changed by another thread during the call;
/// `sample_weight` must be NULL or point to `n_weights` readable doubles; `out` must be NULL
/// or valid for writing one pointer; `progress` must be NULL or a function that is safe to
/// call with a valid `JokerProgress` pointer and `user_data`.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn joker_fit(
    params: *const super::JokerParams,
    train: *const super::JokerData,
    sample_weight: *const f64,
    n_weights: usize,
    validation: *const super::JokerData,
    progress: JokerProgressFn,
    user_data: *mut c_void,
    out: *mut *mut JokerModel,
) -> JokerStatus {
    guard(|| {
        // SAFETY: `out` is NULL (rejected) or writable (function contract).
        unsafe { write_out(out, std::ptr::null_mut(), "out") }?;
        // SAFETY: handles are not freed or changed concurrently (function contract).
        let p = unsafe { params_ref(params) }?;
        // SAFETY: as above.
        let tr = unsafe { labelled_train(train) }?;
        // SAFETY: as above.
        let val = unsafe { labelled_validation(validation) }?;
        let weights = if sample_weight.is_null() {
            if n_weights != 0 {
                return Err(Failure::null("sample_weight"));
            }
            None
        } else {
            if n_weights != tr.set.nrows() {
                return Err(JokerError::ShapeMismatch(format!(
                    "`train` has {} rows but n_weights is {n_weights}",
                    tr.set.nrows()
                ))
                .into());
            }
            // SAFETY: `sample_weight` points to `n_weights` doubles (function contract).
            Some(unsafe { input_slice(sample_weight, n_weights, "sample_weight") }?)
        };
        let callback = callback_of(progress, user_data);
        // SAFETY: the flag outlives the fit (joker_params_set_interrupt's contract).
        let interrupt = unsafe { super::params::interrupt_of(params) }?;
        let model = match &tr.set {
            DataSet::F32(d) => fit_as(p, d, weights, val, callback, interrupt),
            DataSet::F64(d) => fit_as(p, d, weights, val, callback, interrupt),
        }?;
        let h = new_model(model);
        // SAFETY: as above.
        unsafe { write_out(out, h, "out") }
    })
}

/// Chooses `C` and the kernel width by cross-validation and trains the winner on all rows
/// (`joker train --search`): every value of `c_values` with every width `gamma_factors[k]`
/// times the width the parameters' rule gives (1: that width), scored by `folds`-fold
/// cross-validation on the rows shuffled by `seed` (accuracy, or R^2 for regression); the
/// winner has the best mean score (the smaller `C`, then the width nearer 1, on ties). The
/// parameters' own `C` and `gamma` are replaced by the candidates'. `joker_model_lambda`
/// (`1 / C`) and `joker_model_gamma` give the winner; `joker_model_save` writes every
/// candidate's scores under `training.search`.
///
/// Errors: `JOKER_STATUS_INVALID_ARGUMENT` for no values, a value that is not positive, fewer
/// than 2 folds or more folds than rows; those of `joker_fit`.
///
/// # Safety
/// As for `joker_fit`; `c_values` and `gamma_factors` must point to `n_c` and `n_gamma`
/// readable doubles.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn joker_fit_search(
    params: *const super::JokerParams,
    train: *const super::JokerData,
    c_values: *const f64,
    n_c: usize,
    gamma_factors: *const f64,
    n_gamma: usize,
    folds: usize,
    seed: u64,
    out: *mut *mut JokerModel,
) -> JokerStatus {
    guard(|| {
        // SAFETY: `out` is NULL (rejected) or writable (function contract).
        unsafe { write_out(out, std::ptr::null_mut(), "out") }?;
        // SAFETY: handles are not freed or changed concurrently (function contract).
        let p = unsafe { params_ref(params) }?;
        // SAFETY: as above.
        let tr = unsafe { labelled_train(train) }?;
        // SAFETY: the arrays hold `n_c` and `n_gamma` doubles (function contract).
        let c = unsafe { input_slice(c_values, n_c, "c_values") }?.to_vec();
        // SAFETY: as above.
        let gamma_factors =
            unsafe { input_slice(gamma_factors, n_gamma, "gamma_factors") }?.to_vec();
        let grid = crate::estimator::SearchGrid {
            c,
            gamma_factors,
            folds,
            seed,
        };
        let model = match &tr.set {
            DataSet::F32(d) => p.search(d, &grid, |_, _| {}),
            DataSet::F64(d) => p.search(d, &grid, |_, _| {}),
        }?;
        let h = new_model(model);
        // SAFETY: as above.
        unsafe { write_out(out, h, "out") }
    })
}

/// The text format of a file streamed by `joker_fit_stream`.
#[repr(i32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JokerTextFormat {
    /// LIBSVM when the first data line looks like LIBSVM (`label index:value ...`), else CSV.
    Auto = 0,
    /// LIBSVM / SVMlight lines (index base and width found by a first pass).
    Libsvm = 1,
    /// Delimited numbers, the label in the last column (delimiter and header detected).
    Csv = 2,
}

/// Trains a doubly stochastic model (the parameters must name one:
/// `joker_params_set_solver` with DSG, UDSG or CDSG) on an uncompressed LIBSVM or CSV file read
/// a part of about `chunk_bytes` bytes at a time, pass after pass: memory holds one part's rows,
/// never the data set. The batches sweep the file in order (its rows should be in random
/// order). The same fit as `joker_fit` on the file's rows with the batches swept in file
/// order.
///
/// * `params`: the parameters (unchanged).
/// * `path`: the training file (NUL-terminated).
/// * `format`: a `JokerTextFormat` value.
/// * `chunk_bytes`: the size of a part (0: 64 MiB).
/// * `validation`, `progress`, `user_data`, `out`: as for `joker_fit`.
///
/// Errors: `JOKER_STATUS_INVALID_ARGUMENT` for parameters without a doubly stochastic solver
/// or with a bandwidth heuristic other than the median, an unknown format, a compressed file;
/// `JOKER_STATUS_IO` and `JOKER_STATUS_PARSE` for the file.
///
/// # Safety
/// As for `joker_fit`; `path` must be NULL or a NUL-terminated string.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn joker_fit_stream(
    params: *const super::JokerParams,
    path: *const std::ffi::c_char,
    format: i32,
    chunk_bytes: u64,
    validation: *const super::JokerData,
    progress: JokerProgressFn,
    user_data: *mut c_void,
    out: *mut *mut JokerModel,
) -> JokerStatus {
    guard(|| {
        // SAFETY: `out` is NULL (rejected) or writable (function contract).
        unsafe { write_out(out, std::ptr::null_mut(), "out") }?;
        // SAFETY: handles are not freed or changed concurrently (function contract).
        let p = unsafe { params_ref(params) }?;
        // SAFETY: `path` is NULL (rejected) or NUL-terminated (function contract).
        let path = unsafe { super::path_arg(path, "path") }?;
        let libsvm = crate::io::stream::TextFormat::Libsvm(Default::default());
        let text = match format {
            0 if crate::io::looks_like_libsvm_file(&path)? => libsvm,
            0 | 2 => crate::io::stream::TextFormat::Csv(Default::default()),
            1 => libsvm,
            _ => {
                return Err(Failure::invalid(
                    "format",
                    format!("{format} is not a JOKER_TEXT_FORMAT_* value (0, 1 or 2)"),
                ));
            }
        };
        let chunk = if chunk_bytes == 0 {
            64 << 20
        } else {
            chunk_bytes
        };
        // SAFETY: handles are not freed or changed concurrently (function contract).
        let val = unsafe { labelled_validation(validation) }?.map(view::<f32>);
        let stream = crate::io::stream::TextStream::open(&path, &text, chunk, |_, _| {})?;
        let callback = callback_of(progress, user_data);
        // SAFETY: the flag outlives the fit (joker_params_set_interrupt's contract).
        let interrupt = unsafe { super::params::interrupt_of(params) }?;
        let opts = FitOptions {
            sample_weight: None,
            validation: val.as_deref(),
            progress: callback,
            warm_start: None,
            interrupt,
        };
        let model = p.fit_stream(&stream, opts, None)?;
        let h = new_model(model);
        // SAFETY: as above.
        unsafe { write_out(out, h, "out") }
    })
}

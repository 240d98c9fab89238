//! `JokerModel`: prediction, files and introspection.

use std::ffi::{CString, c_char};

use super::data::{DataSet, JokerData, data_ref};
use super::handle::{Kind, get, impl_handle, register, release};
use super::params::{JokerMulticlass, JokerTask, kernel_code, loss_code};
use super::{Failure, FfiResult, JokerStatus, guard, output_slice, path_arg, write_out};
use crate::data::Features;
use crate::error::JokerError;
use crate::model::{Model, Task};
use crate::preprocess::Multiclass;
use crate::scalar::Scalar;

/// A trained model: an opaque handle made by `joker_fit` or `joker_model_load`, freed by
/// `joker_model_free`. A model is immutable: several threads may predict with it at once.
pub struct JokerModel {
    tag: u64,
    pub(crate) model: Model,
    /// The stop reason as a C string, owned by the handle.
    stop: CString,
    /// Where the model was trained, and why there, as a C string owned by the handle.
    device: CString,
    /// The trust region's model curvature, as a C string owned by the handle.
    tr_model: CString,
}

impl_handle!(JokerModel, Kind::Model, 0x4a4b_524d_4f44_454c); // "JKRMODEL"

/// What a prediction function writes, for `joker_model_output_size`.
#[repr(i32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JokerOutput {
    /// `joker_model_predict`: one value per row (a class label, or a regression value).
    Predict = 0,
    /// `joker_model_decision_function`: `n_rows x n_targets` values, row-major.
    Decision = 1,
    /// `joker_model_predict_proba`: `n_rows x n_classes` values, row-major (KLR, or calibrated by `joker_params_set_probability`).
    Proba = 2,
}

pub(crate) fn new_model(model: Model) -> *mut JokerModel {
    let c_string = |s: &str| CString::new(s.replace('\0', "?")).unwrap_or_default();
    let stop = c_string(model.training.stop.name());
    let device = c_string(&model.training.device);
    let tr_model = c_string(&model.training.tr_model);
    register(JokerModel {
        tag: 0,
        model,
        stop,
        device,
        tr_model,
    })
}

/// # Safety
/// `model` must be NULL or a handle not freed by another thread during the returned lifetime.
unsafe fn model_ref<'a>(model: *const JokerModel) -> FfiResult<&'a JokerModel> {
    // SAFETY: see the function's contract.
    unsafe { get(model, "model") }
}

/// Frees a model. NULL does nothing; a handle that is not a live `JokerModel` is rejected with
/// `JOKER_STATUS_INVALID_HANDLE` and nothing is freed. Strings the model returned
/// (`joker_model_stop_reason`, `joker_model_device`, `joker_model_tr_model`) become
/// invalid.
///
/// # Safety
/// `model` must not be used by another thread during or after the call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_model_free(model: *mut JokerModel) -> JokerStatus {
    // SAFETY: no concurrent use (function contract); `release` checks the handle.
    guard(|| unsafe { release(model, "model") })
}

/// Writes the model file (JSON, see docs/model-format.md) at the NUL-terminated `path`.
///
/// The file is written whole or not at all (a temporary file renamed over `path`). An existing
/// file at `path` is replaced whatever it holds: this function does not check that it is a
/// joker model file, so a caller that must not destroy other files checks first. The `joker`
/// program, Python's `Model.save` and R's `joker_save` refuse to replace an existing file that
/// is not a joker model file unless told to (`--force`, `overwrite=True`, `overwrite = TRUE`).
///
/// # Safety
/// `model` must be NULL or a live handle not freed during the call; `path` must be NULL or a
/// NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_model_save(
    model: *const JokerModel,
    path: *const c_char,
) -> JokerStatus {
    guard(|| {
        // SAFETY: see the function's contract.
        let m = unsafe { model_ref(model) }?;
        // SAFETY: as above.
        let p = unsafe { path_arg(path, "path") }?;
        Ok(m.model.save(p)?)
    })
}

/// Reads a model file written by `joker_model_save` (or the `joker` program, or the Rust
/// API). `*out` receives the new model, owned by the caller.
///
/// # Safety
/// `path` must be NULL or a NUL-terminated string; `out` must be NULL or valid for writing one
/// pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_model_load(
    path: *const c_char,
    out: *mut *mut JokerModel,
) -> JokerStatus {
    guard(|| {
        // SAFETY: see the function's contract.
        unsafe { write_out(out, std::ptr::null_mut(), "out") }?;
        // SAFETY: as above.
        let p = unsafe { path_arg(path, "path") }?;
        let m = Model::load(p)?;
        // SAFETY: as above.
        unsafe { write_out(out, new_model(m), "out") }
    })
}

/// Reads one property of a model into `*out`.
///
/// # Safety
/// `model` must be NULL or a live handle not freed during the call; `out` must be NULL or
/// valid for one write.
unsafe fn model_get<T>(
    model: *const JokerModel,
    out: *mut T,
    f: impl FnOnce(&Model) -> T,
) -> JokerStatus {
    guard(|| {
        // SAFETY: see the function's contract.
        let m = &unsafe { model_ref(model) }?.model;
        let v = f(m);
        // SAFETY: as above.
        unsafe { write_out(out, v, "out") }
    })
}

/// Writes the number of input features the model expects.
///
/// # Safety
/// `model` must be NULL or a live handle not freed during the call; `out` must be NULL or
/// valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_model_n_features(
    model: *const JokerModel,
    out: *mut usize,
) -> JokerStatus {
    // SAFETY: forwarded contract.
    unsafe { model_get(model, out, |m| m.n_features) }
}

/// Writes the number of decision columns `T`: 1 for regression and binary classifiers, the
/// number of classes for one-vs-rest.
///
/// # Safety
/// `model` must be NULL or a live handle not freed during the call; `out` must be NULL or
/// valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_model_n_targets(
    model: *const JokerModel,
    out: *mut usize,
) -> JokerStatus {
    // SAFETY: forwarded contract.
    unsafe { model_get(model, out, |m| m.n_targets) }
}

/// Writes the number of classes (0 for regression).
///
/// # Safety
/// `model` must be NULL or a live handle not freed during the call; `out` must be NULL or
/// valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_model_n_classes(
    model: *const JokerModel,
    out: *mut usize,
) -> JokerStatus {
    // SAFETY: forwarded contract.
    unsafe { model_get(model, out, |m| m.classes.as_ref().map_or(0, Vec::len)) }
}

/// Writes 1 when the model gives class probabilities (`joker_model_predict_proba`): a kernel
/// logistic regression, or a classifier trained with `joker_params_set_probability`; else 0.
///
/// # Safety
/// `model` must be NULL or a live handle not freed during the call; `out` must be NULL or
/// valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_model_has_probabilities(
    model: *const JokerModel,
    out: *mut i32,
) -> JokerStatus {
    // SAFETY: forwarded contract.
    unsafe { model_get(model, out, |m| i32::from(m.has_probabilities())) }
}

/// Writes the number of random features `M` (0 for an exact-kernel model).
///
/// # Safety
/// `model` must be NULL or a live handle not freed during the call; `out` must be NULL or
/// valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_model_n_components(
    model: *const JokerModel,
    out: *mut usize,
) -> JokerStatus {
    // SAFETY: forwarded contract.
    unsafe { model_get(model, out, |m| m.n_components().unwrap_or(0)) }
}

/// Writes the task: `JOKER_TASK_CLASSIFICATION` or `JOKER_TASK_REGRESSION`.
///
/// # Safety
/// `model` must be NULL or a live handle not freed during the call; `out` must be NULL or
/// valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_model_task(model: *const JokerModel, out: *mut i32) -> JokerStatus {
    // SAFETY: forwarded contract.
    unsafe {
        model_get(model, out, |m| match m.task {
            Task::Classification => JokerTask::Classification as i32,
            Task::Regression => JokerTask::Regression as i32,
        })
    }
}

/// Writes how the classes were split: `JOKER_MULTICLASS_OVR` or `JOKER_MULTICLASS_OVO`
/// (one-vs-rest for binary classifiers and regression).
///
/// # Safety
/// `model` must be NULL or a live handle not freed during the call; `out` must be NULL or
/// valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_model_multiclass(
    model: *const JokerModel,
    out: *mut i32,
) -> JokerStatus {
    // SAFETY: forwarded contract.
    unsafe {
        model_get(model, out, |m| match m.multiclass {
            Multiclass::OneVsRest => JokerMulticlass::Ovr as i32,
            Multiclass::OneVsOne => JokerMulticlass::Ovo as i32,
        })
    }
}

/// Writes the loss, a `JOKER_LOSS_*` value.
///
/// # Safety
/// `model` must be NULL or a live handle not freed during the call; `out` must be NULL or
/// valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_model_loss(model: *const JokerModel, out: *mut i32) -> JokerStatus {
    // SAFETY: forwarded contract.
    unsafe { model_get(model, out, |m| loss_code(&m.loss) as i32) }
}

/// Writes the kernel family, a `JOKER_KERNEL_*` value.
///
/// # Safety
/// `model` must be NULL or a live handle not freed during the call; `out` must be NULL or
/// valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_model_kernel(
    model: *const JokerModel,
    out: *mut i32,
) -> JokerStatus {
    // SAFETY: forwarded contract.
    unsafe { model_get(model, out, |m| kernel_code(&m.kernel.kind) as i32) }
}

/// Writes the resolved kernel scale `gamma`.
///
/// # Safety
/// `model` must be NULL or a live handle not freed during the call; `out` must be NULL or
/// valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_model_gamma(model: *const JokerModel, out: *mut f64) -> JokerStatus {
    // SAFETY: forwarded contract.
    unsafe { model_get(model, out, |m| m.kernel.gamma) }
}

/// Writes the regularisation `lambda` (`C = 1/lambda`).
///
/// # Safety
/// `model` must be NULL or a live handle not freed during the call; `out` must be NULL or
/// valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_model_lambda(
    model: *const JokerModel,
    out: *mut f64,
) -> JokerStatus {
    // SAFETY: forwarded contract.
    unsafe { model_get(model, out, |m| m.lambda) }
}

/// Writes the number of training iterations run.
///
/// # Safety
/// `model` must be NULL or a live handle not freed during the call; `out` must be NULL or
/// valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_model_iterations(
    model: *const JokerModel,
    out: *mut usize,
) -> JokerStatus {
    // SAFETY: forwarded contract.
    unsafe { model_get(model, out, |m| m.training.iterations) }
}

/// Writes the final relative duality gap (NaN if it was never computed).
///
/// # Safety
/// `model` must be NULL or a live handle not freed during the call; `out` must be NULL or
/// valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_model_gap(model: *const JokerModel, out: *mut f64) -> JokerStatus {
    // SAFETY: forwarded contract.
    unsafe { model_get(model, out, |m| m.training.gap) }
}

/// Writes the sorted class labels into `out` (`len >= n_classes`; see
/// `joker_model_n_classes`). A regression model has no classes and writes nothing.
///
/// # Safety
/// `model` must be NULL or a live handle not freed during the call; `out` must be NULL or
/// point to `len` writable doubles.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_model_classes(
    model: *const JokerModel,
    out: *mut f64,
    len: usize,
) -> JokerStatus {
    guard(|| {
        // SAFETY: see the function's contract.
        let m = &unsafe { model_ref(model) }?.model;
        let classes = m.classes.as_deref().unwrap_or(&[]);
        // SAFETY: as above.
        let dst = unsafe { output_slice(out, len, classes.len(), "out") }?;
        dst.copy_from_slice(classes);
        Ok(())
    })
}

/// Writes in `*out` why training stopped: "converged", "stalled", "max_iter", "time_limit" or
/// "cancelled". The string belongs to the model and is valid until the model is freed.
///
/// # Safety
/// `model` must be NULL or a live handle not freed during the call; `out` must be NULL or
/// valid for writing one pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_model_stop_reason(
    model: *const JokerModel,
    out: *mut *const c_char,
) -> JokerStatus {
    guard(|| {
        // SAFETY: see the function's contract.
        let h = unsafe { model_ref(model) }?;
        // SAFETY: as above.
        unsafe { write_out(out, h.stop.as_ptr(), "out") }
    })
}

/// Writes in `*out` where the model was trained and why there, e.g. `"cpu (auto: no CUDA
/// driver found)"` or `"cuda:0 (NVIDIA H100 ...)"`. The string belongs to the model and is
/// valid until the model is freed.
///
/// # Safety
/// As for `joker_model_stop_reason`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_model_device(
    model: *const JokerModel,
    out: *mut *const c_char,
) -> JokerStatus {
    guard(|| {
        // SAFETY: see the function's contract.
        let h = unsafe { model_ref(model) }?;
        // SAFETY: as above.
        unsafe { write_out(out, h.device.as_ptr(), "out") }
    })
}

/// Writes in `*out` the trust region's model curvature of the fit and why, e.g. `"gram"`,
/// `"kernel"` or `"exact kernel"` (see `joker_params_set_tr_model`). The string belongs to
/// the model and is valid until the model is freed.
///
/// # Safety
/// As for `joker_model_stop_reason`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_model_tr_model(
    model: *const JokerModel,
    out: *mut *const c_char,
) -> JokerStatus {
    guard(|| {
        // SAFETY: see the function's contract.
        let h = unsafe { model_ref(model) }?;
        // SAFETY: as above.
        unsafe { write_out(out, h.tr_model.as_ptr(), "out") }
    })
}

fn output_len(m: &Model, n: usize, kind: i32) -> FfiResult<usize> {
    let per_row = match kind {
        0 => 1,
        1 => m.n_targets,
        2 => {
            proba_supported(m)?;
            m.classes.as_ref().map_or(0, Vec::len)
        }
        _ => {
            return Err(Failure::invalid(
                "kind",
                format!("{kind} is not a JOKER_OUTPUT_* value (0 to 2)"),
            ));
        }
    };
    n.checked_mul(per_row).ok_or_else(|| {
        Failure::new(
            JokerStatus::ShapeMismatch,
            format!("{n} rows x {per_row} outputs overflows size_t"),
        )
    })
}

fn proba_supported(m: &Model) -> FfiResult<()> {
    if !m.has_probabilities() {
        return Err(JokerError::Unsupported(format!(
            "probabilities need the logistic loss (KLR) or a classifier trained with joker_params_set_probability; this model uses the {} loss without them",
            m.loss.name()
        ))
        .into());
    }
    Ok(())
}

/// Writes in `*out` the number of values a prediction function writes for `data`: `kind` is
/// `JOKER_OUTPUT_PREDICT` (rows), `JOKER_OUTPUT_DECISION` (rows x targets) or
/// `JOKER_OUTPUT_PROBA` (rows x classes; `JOKER_STATUS_UNSUPPORTED` unless KLR or calibrated).
///
/// # Safety
/// Handles must be NULL or live and not freed during the call; `out` must be NULL or valid for
/// one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_model_output_size(
    model: *const JokerModel,
    data: *const JokerData,
    kind: i32,
    out: *mut usize,
) -> JokerStatus {
    guard(|| {
        // SAFETY: see the function's contract.
        let m = &unsafe { model_ref(model) }?.model;
        // SAFETY: as above.
        let d = unsafe { data_ref(data, "data") }?;
        let need = output_len(m, d.set.nrows(), kind)?;
        // SAFETY: as above.
        unsafe { write_out(out, need, "out") }
    })
}

/// Dense data must have exactly the model's feature count; sparse data may have fewer
/// columns (the missing ones are zero).
fn check_columns<U: Scalar>(m: &Model, x: &Features<U>, arg: &str) -> FfiResult<()> {
    let (have, want) = (x.ncols(), m.n_features);
    let ok = match x {
        Features::Dense(_) => have == want,
        Features::Sparse(_) => have <= want,
    };
    if !ok {
        return Err(JokerError::ShapeMismatch(format!(
            "`{arg}` has {have} columns, the model was trained on {want} features"
        ))
        .into());
    }
    Ok(())
}

fn compute(m: &Model, set: &DataSet, kind: i32) -> FfiResult<Vec<f64>> {
    fn go<U: Scalar>(m: &Model, x: &Features<U>, kind: i32) -> FfiResult<Vec<f64>> {
        check_columns(m, x, "data")?;
        Ok(match kind {
            0 => m.predict(x)?,
            1 => m.decision_function(x)?,
            _ => m.predict_proba(x)?,
        })
    }
    match set {
        DataSet::F32(d) => go(m, &d.x, kind),
        DataSet::F64(d) => go(m, &d.x, kind),
    }
}

/// # Safety
/// See `joker_model_predict`.
unsafe fn predict_into(
    model: *const JokerModel,
    data: *const JokerData,
    out: *mut f64,
    len: usize,
    kind: i32,
) -> FfiResult<()> {
    // SAFETY: see the caller's contract.
    let m = &unsafe { model_ref(model) }?.model;
    // SAFETY: as above.
    let d = unsafe { data_ref(data, "data") }?;
    let need = output_len(m, d.set.nrows(), kind)?;
    // Check the buffer before the work, so that a wrong size fails fast.
    // SAFETY: `out` is NULL or holds `len` writable doubles (caller's contract).
    unsafe { output_slice(out, len, need, "out") }?;
    let values = compute(m, &d.set, kind)?;
    // SAFETY: as above.
    let dst = unsafe { output_slice(out, len, need, "out") }?;
    dst.copy_from_slice(&values);
    Ok(())
}

/// Predicts one value per row of `data` into `out` (`len >= n_rows`): class labels (the sign
/// of the decision value for two classes, the argmax for one-vs-rest), or regression values in
/// the original units. `data` needs no labels; its column count must be the model's
/// (`joker_model_n_features`; CSR data may have fewer columns).
///
/// # Safety
/// Handles must be NULL or live and not freed during the call; `out` must be NULL or point to
/// `len` writable doubles that do not overlap any input.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_model_predict(
    model: *const JokerModel,
    data: *const JokerData,
    out: *mut f64,
    len: usize,
) -> JokerStatus {
    // SAFETY: forwarded contract.
    guard(|| unsafe { predict_into(model, data, out, len, JokerOutput::Predict as i32) })
}

/// Writes the decision values, row-major `n_rows x n_targets` (`len` at least that), in target
/// units for regression.
///
/// # Safety
/// As for `joker_model_predict`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_model_decision_function(
    model: *const JokerModel,
    data: *const JokerData,
    out: *mut f64,
    len: usize,
) -> JokerStatus {
    // SAFETY: forwarded contract.
    guard(|| unsafe { predict_into(model, data, out, len, JokerOutput::Decision as i32) })
}

/// Writes class probabilities, row-major `n_rows x n_classes` in the order of
/// `joker_model_classes`: for KLR models, and for classifiers trained with
/// `joker_params_set_probability` (Platt scaling); others give `JOKER_STATUS_UNSUPPORTED`.
///
/// # Safety
/// As for `joker_model_predict`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_model_predict_proba(
    model: *const JokerModel,
    data: *const JokerData,
    out: *mut f64,
    len: usize,
) -> JokerStatus {
    // SAFETY: forwarded contract.
    guard(|| unsafe { predict_into(model, data, out, len, JokerOutput::Proba as i32) })
}

/// Writes in `*out` the accuracy (classifiers) or the coefficient of determination R^2
/// (regression) of the model on the labelled `data`.
///
/// # Safety
/// Handles must be NULL or live and not freed during the call; `out` must be NULL or valid for
/// one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_model_score(
    model: *const JokerModel,
    data: *const JokerData,
    out: *mut f64,
) -> JokerStatus {
    guard(|| {
        // SAFETY: see the function's contract.
        let m = &unsafe { model_ref(model) }?.model;
        // SAFETY: as above.
        let d = unsafe { data_ref(data, "data") }?;
        if !d.labelled {
            return Err(Failure::new(
                JokerStatus::InvalidLabels,
                "`data` has no labels: scoring needs y",
            ));
        }
        let s = match &d.set {
            DataSet::F32(ds) => {
                check_columns(m, &ds.x, "data")?;
                m.score(ds)?
            }
            DataSet::F64(ds) => {
                check_columns(m, &ds.x, "data")?;
                m.score(ds)?
            }
        };
        // SAFETY: as above.
        unsafe { write_out(out, s, "out") }
    })
}

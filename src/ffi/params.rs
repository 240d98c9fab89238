//! `JokerParams`: create, set each field (validated at once), free.

use std::time::Duration;

use super::handle::{Kind, get, get_mut, impl_handle, register, release};
use super::{Failure, FfiResult, JokerStatus, guard, input_slice, write_out};
use crate::device::Device;
use crate::estimator::{ClassWeight, Joker, JokerBuilder};
use crate::features::{Centers, FeatureKind};
use crate::kernel::{Bandwidth, KernelKind, MaternNu};
use crate::loss::Loss;
use crate::memory::MemoryLimit;
use crate::model::{Precision, Task};
use crate::preprocess::Multiclass;
use crate::solver::{TrModel, TrNorm, WorkingSet};

/// Training parameters: an opaque handle made by `joker_params_new`, freed by
/// `joker_params_free`.
pub struct JokerParams {
    tag: u64,
    pub(crate) inner: Joker,
    /// The address of the caller's interrupt flag (0: none); see `joker_params_set_interrupt`.
    pub(crate) interrupt: usize,
}

impl_handle!(JokerParams, Kind::Params, 0x4a4b_5250_4152_4d53); // "JKRPARMS"

/// Loss functions (the model they define), for `joker_params_set_loss`.
#[repr(i32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JokerLoss {
    /// Kernel ridge regression, `(y - u)^2 / 2`.
    Krr = 0,
    /// Huber regression; parameter `delta > 0`.
    Huber = 1,
    /// Support vector regression, `max(0, |y - u| - epsilon)`; parameter `epsilon >= 0`.
    Svr = 2,
    /// L1 regression, `|y - u|`.
    L1 = 3,
    /// Lp regression, `|y - u|^p / p`; parameter `p > 1`.
    Lp = 4,
    /// L1-SVC, the hinge loss.
    L1Svc = 5,
    /// L2-SVC, the squared hinge loss.
    L2Svc = 6,
    /// Kernel logistic regression (gives probabilities).
    Klr = 7,
}

/// Kernel families, for `joker_params_set_kernel`.
#[repr(i32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JokerKernel {
    /// `exp(-gamma ||x - z||^2)`.
    Gaussian = 0,
    /// `exp(-gamma ||x - z||_1)`.
    Laplacian = 1,
    /// Matern, nu = 1/2, length scale `1/gamma`.
    Matern12 = 2,
    /// Matern, nu = 3/2.
    Matern32 = 3,
    /// Matern, nu = 5/2.
    Matern52 = 4,
}

/// Data-driven kernel scale rules, for `joker_params_set_bandwidth` (an explicit scale is set
/// with `joker_params_set_gamma`).
#[repr(i32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JokerBandwidth {
    /// The median heuristic.
    Median = 0,
    /// The reference code's rule: `gamma = 1 / mean squared distance`.
    MeanSquaredDistance = 1,
    /// scikit-learn's `"scale"`: `gamma = 1 / (d Var X)` for the Gaussian.
    Scale = 2,
    /// The default: `Scale` on the exact kernel and Nystrom maps, `MeanSquaredDistance` on
    /// random Fourier features (the median for a streamed fit).
    Auto = 3,
}

/// Working precision, for `joker_params_set_precision`.
#[repr(i32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JokerPrecision {
    /// Single precision (the default).
    F32 = 0,
    /// Double precision.
    F64 = 1,
}

/// How more than two classes are split into binary problems, for
/// `joker_params_set_multiclass` and `joker_model_multiclass`.
#[repr(i32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JokerMulticlass {
    /// The library's choice (the default): one-vs-one where the fit takes the exact kernel
    /// with DBCD-TR in one process, one-vs-rest otherwise.
    Auto = 0,
    /// One-vs-rest: a decision column per class, the largest wins.
    Ovr = 1,
    /// One-vs-one: a decision column per pair of classes, `K (K - 1) / 2` in the order
    /// `(0,1), (0,2), ..., (1,2), ...`, positive for the pair's second class; votes decide.
    Ovo = 2,
}

/// Task, for `joker_params_set_task` and `joker_model_task`.
#[repr(i32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JokerTask {
    /// From the loss: classification for the SVC and KLR losses, regression otherwise.
    Auto = 0,
    /// Labels are classes; predictions are labels.
    Classification = 1,
    /// Targets are real values.
    Regression = 2,
}

/// Class weighting modes, for `joker_params_set_class_weight`.
#[repr(i32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JokerClassWeight {
    /// Every class weighs 1 (the default).
    None = 0,
    /// `n / (K n_k)` for class `k`, as in scikit-learn.
    Balanced = 1,
}

/// Solvers, for `joker_params_set_solver`.
#[repr(i32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JokerSolver {
    /// DBCD-TR (the default).
    Dbcd = 0,
    /// Doubly stochastic gradients: a new random-feature block every step.
    Dsg = 1,
    /// DSG alternating one step on a new block and one on a uniformly drawn old one.
    Udsg = 2,
    /// DSG updating an old block when its checked step beats the DSG step (cap 2).
    Cdsg = 3,
}

/// Full kernel ridge regression methods, for `joker_params_set_full_krr`.
#[repr(i32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JokerKrrMethod {
    /// No full-KRR method: DBCD-TR fits the model (the default).
    None = 0,
    /// ASkotch: accelerated Nystrom-preconditioned block coordinate descent.
    Askotch = 1,
    /// Skotch: the same without acceleration.
    Skotch = 2,
    /// Conjugate gradients with a rank-r Nystrom preconditioner.
    Pcg = 3,
}

pub(crate) fn loss_from(code: i32, param: f64) -> FfiResult<Loss> {
    Ok(match code {
        0 => Loss::SquaredError,
        1 => Loss::Huber { delta: param },
        2 => Loss::EpsilonInsensitive { epsilon: param },
        3 => Loss::Absolute,
        4 => Loss::Lp { p: param },
        5 => Loss::Hinge,
        6 => Loss::SquaredHinge,
        7 => Loss::Logistic,
        _ => {
            return Err(Failure::invalid(
                "loss",
                format!("{code} is not a JOKER_LOSS_* value (0 to 7)"),
            ));
        }
    })
}

pub(crate) fn loss_code(loss: &Loss) -> JokerLoss {
    match loss {
        Loss::SquaredError => JokerLoss::Krr,
        Loss::Huber { .. } => JokerLoss::Huber,
        Loss::EpsilonInsensitive { .. } => JokerLoss::Svr,
        Loss::Absolute => JokerLoss::L1,
        Loss::Lp { .. } => JokerLoss::Lp,
        Loss::Hinge => JokerLoss::L1Svc,
        Loss::SquaredHinge => JokerLoss::L2Svc,
        Loss::Logistic => JokerLoss::Klr,
    }
}

pub(crate) fn kernel_code(kind: &KernelKind) -> JokerKernel {
    match kind {
        KernelKind::Gaussian => JokerKernel::Gaussian,
        KernelKind::Laplacian => JokerKernel::Laplacian,
        KernelKind::Matern { nu } => match nu {
            MaternNu::Half => JokerKernel::Matern12,
            MaternNu::ThreeHalves => JokerKernel::Matern32,
            MaternNu::FiveHalves => JokerKernel::Matern52,
        },
    }
}

/// Applies `change` to a copy of the parameters, validates the whole set, and keeps it only if
/// it is valid.
///
/// # Safety
/// `params` must be NULL or a handle not used by another thread during the call.
unsafe fn update(params: *mut JokerParams, change: impl FnOnce(&mut Joker)) -> FfiResult<()> {
    // SAFETY: exclusive use during the call is the caller's contract.
    let h = unsafe { get_mut(params, "params") }?;
    let mut cand = h.inner.clone();
    change(&mut cand);
    h.inner = JokerBuilder::from(cand).build()?;
    Ok(())
}

/// As `update`, for changes that may themselves fail.
///
/// # Safety
/// As for `update`.
unsafe fn try_update(
    params: *mut JokerParams,
    change: impl FnOnce(&mut Joker) -> FfiResult<()>,
) -> FfiResult<()> {
    // SAFETY: exclusive use during the call is the caller's contract.
    let h = unsafe { get_mut(params, "params") }?;
    let mut cand = h.inner.clone();
    change(&mut cand)?;
    h.inner = JokerBuilder::from(cand).build()?;
    Ok(())
}

/// Creates parameters with the defaults: KRR (squared loss), Gaussian kernel with the median
/// heuristic, `lambda = 1`, 2048 random features, f32, standardised features, block 512,
/// 10,000 iterations, tolerance 1e-3, seed 42.
///
/// `*out` receives the new handle (owned by the caller: free it with `joker_params_free`).
///
/// # Safety
/// `out` must be NULL or valid for writing one pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_params_new(out: *mut *mut JokerParams) -> JokerStatus {
    guard(|| {
        // SAFETY: `out` is NULL (rejected) or writable (function contract).
        unsafe { write_out(out, std::ptr::null_mut(), "out") }?;
        let p = register(JokerParams {
            tag: 0,
            inner: Joker::builder().build()?,
            interrupt: 0,
        });
        // SAFETY: as above.
        unsafe { write_out(out, p, "out") }
    })
}

/// Frees parameters made by `joker_params_new`. NULL does nothing; a handle that is not a live
/// `JokerParams` (for example one freed already) is rejected with
/// `JOKER_STATUS_INVALID_HANDLE` and nothing is freed.
///
/// # Safety
/// `params` must not be used by another thread during or after the call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_params_free(params: *mut JokerParams) -> JokerStatus {
    // SAFETY: no concurrent use (function contract); `release` checks the handle.
    guard(|| unsafe { release(params, "params") })
}

/// Sets the loss, one of `JOKER_LOSS_*`. `param` is the loss's own parameter: `delta` for
/// Huber, `epsilon` for SVR, `p` for Lp; it is ignored by the other losses.
///
/// Like every `joker_params_set_*` function, this validates the whole parameter set and leaves
/// the parameters unchanged on error (`JOKER_STATUS_INVALID_ARGUMENT`), so a change that
/// conflicts with another setting (a classification loss with `JOKER_TASK_REGRESSION`) is
/// refused until that setting is changed.
///
/// # Safety
/// `params` must be NULL or a handle that no other thread uses during the call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_params_set_loss(
    params: *mut JokerParams,
    loss: i32,
    param: f64,
) -> JokerStatus {
    guard(|| {
        let loss = loss_from(loss, param)?;
        // SAFETY: see the function's contract.
        unsafe { update(params, |j| j.loss = loss) }
    })
}

/// Sets the kernel family, one of `JOKER_KERNEL_*` (default Gaussian).
///
/// # Safety
/// As for `joker_params_set_loss`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_params_set_kernel(
    params: *mut JokerParams,
    kernel: i32,
) -> JokerStatus {
    guard(|| {
        let kind = match kernel {
            0 => KernelKind::Gaussian,
            1 => KernelKind::Laplacian,
            2 => KernelKind::Matern { nu: MaternNu::Half },
            3 => KernelKind::Matern {
                nu: MaternNu::ThreeHalves,
            },
            4 => KernelKind::Matern {
                nu: MaternNu::FiveHalves,
            },
            _ => {
                return Err(Failure::invalid(
                    "kernel",
                    format!("{kernel} is not a JOKER_KERNEL_* value (0 to 4)"),
                ));
            }
        };
        // SAFETY: see the function's contract.
        unsafe { update(params, |j| j.kernel = kind) }
    })
}

/// Sets an explicit kernel scale `gamma > 0` (replacing the bandwidth rule).
///
/// # Safety
/// As for `joker_params_set_loss`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_params_set_gamma(
    params: *mut JokerParams,
    gamma: f64,
) -> JokerStatus {
    // SAFETY: see the function's contract.
    guard(|| unsafe { update(params, |j| j.bandwidth = Bandwidth::Gamma(gamma)) })
}

/// Chooses the kernel scale from the data, one of `JOKER_BANDWIDTH_*` (replacing an explicit
/// `gamma`).
///
/// # Safety
/// As for `joker_params_set_loss`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_params_set_bandwidth(
    params: *mut JokerParams,
    rule: i32,
) -> JokerStatus {
    guard(|| {
        let b = match rule {
            0 => Bandwidth::Median,
            1 => Bandwidth::MeanSquaredDistance,
            2 => Bandwidth::Scale,
            3 => Bandwidth::Auto,
            _ => {
                return Err(Failure::invalid(
                    "rule",
                    format!(
                        "{rule} is not a JOKER_BANDWIDTH_* value (0 to 3); set an explicit scale with joker_params_set_gamma"
                    ),
                ));
            }
        };
        // SAFETY: see the function's contract.
        unsafe { update(params, |j| j.bandwidth = b) }
    })
}

/// Sets the regularisation `lambda > 0` (`C = 1/lambda`; default 1).
///
/// # Safety
/// As for `joker_params_set_loss`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_params_set_lambda(
    params: *mut JokerParams,
    lambda: f64,
) -> JokerStatus {
    // SAFETY: see the function's contract.
    guard(|| unsafe { update(params, |j| j.lambda = lambda) })
}

/// Sets `C = 1/lambda > 0`, as in LIBSVM and scikit-learn.
///
/// # Safety
/// As for `joker_params_set_loss`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_params_set_c(params: *mut JokerParams, c: f64) -> JokerStatus {
    guard(|| {
        if !(c > 0.0 && c.is_finite()) {
            return Err(Failure::invalid(
                "c",
                format!("must be positive and finite, got {c}"),
            ));
        }
        // SAFETY: see the function's contract.
        unsafe { update(params, |j| j.lambda = 1.0 / c) }
    })
}

/// Uses `m >= 1` features: random Fourier features, or Nystrom centres (default 2048).
///
/// # Safety
/// As for `joker_params_set_loss`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_params_set_n_components(
    params: *mut JokerParams,
    m: usize,
) -> JokerStatus {
    // SAFETY: see the function's contract.
    guard(|| unsafe { update(params, |j| j.n_components = Some(m)) })
}

/// `joker_params_set_feature_map`: random Fourier features (the default).
pub const JOKER_FEATURES_RFF: i32 = 0;

/// `joker_params_set_feature_map`: a Nystrom map over `n_components` centres chosen from the
/// training rows by the `JOKER_CENTERS_*` rule given with it.
pub const JOKER_FEATURES_NYSTROM: i32 = 1;

/// Nystrom centres drawn uniformly.
pub const JOKER_CENTERS_UNIFORM: i32 = 0;

/// Nystrom centres by k-means++ seeding and Lloyd iterations (cluster means).
pub const JOKER_CENTERS_KMEANS: i32 = 1;

/// Nystrom centres drawn by approximate ridge leverage scores.
pub const JOKER_CENTERS_LEVERAGE: i32 = 2;

/// Chooses the feature map, one of `JOKER_FEATURES_*`; `centers` (one of `JOKER_CENTERS_*`)
/// is read for `JOKER_FEATURES_NYSTROM` only. A Nystrom model predicts as an exact-kernel
/// model over its centres.
///
/// # Safety
/// As for `joker_params_set_loss`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_params_set_feature_map(
    params: *mut JokerParams,
    features: i32,
    centers: i32,
) -> JokerStatus {
    guard(|| {
        let kind = match features {
            JOKER_FEATURES_RFF => FeatureKind::Random,
            JOKER_FEATURES_NYSTROM => FeatureKind::Nystrom(match centers {
                JOKER_CENTERS_UNIFORM => Centers::Uniform,
                JOKER_CENTERS_KMEANS => Centers::KMeans,
                JOKER_CENTERS_LEVERAGE => Centers::Leverage,
                _ => {
                    return Err(Failure::invalid(
                        "centers",
                        format!("{centers} is not a JOKER_CENTERS_* value (0 to 2)"),
                    ));
                }
            }),
            _ => {
                return Err(Failure::invalid(
                    "feature_map",
                    format!("{features} is not a JOKER_FEATURES_* value (0 or 1)"),
                ));
            }
        };
        // SAFETY: see the function's contract.
        unsafe { update(params, |j| j.feature_map = kind) }
    })
}

/// Uses the exact kernel instead of random features (`joker_params_set_n_components` switches
/// back).
///
/// # Safety
/// As for `joker_params_set_loss`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_params_set_exact(params: *mut JokerParams) -> JokerStatus {
    // SAFETY: see the function's contract.
    guard(|| unsafe { update(params, |j| j.n_components = None) })
}

/// Sets the working precision, one of `JOKER_PRECISION_*` (default f32). Inputs of either
/// precision are accepted whatever this setting.
///
/// # Safety
/// As for `joker_params_set_loss`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_params_set_precision(
    params: *mut JokerParams,
    precision: i32,
) -> JokerStatus {
    guard(|| {
        let p = match precision {
            0 => Precision::F32,
            1 => Precision::F64,
            _ => {
                return Err(Failure::invalid(
                    "precision",
                    format!("{precision} is not a JOKER_PRECISION_* value (0 or 1)"),
                ));
            }
        };
        // SAFETY: see the function's contract.
        unsafe { update(params, |j| j.precision = p) }
    })
}

/// Sets how more than two classes are split, one of `JOKER_MULTICLASS_*` (default
/// `JOKER_MULTICLASS_AUTO`).
/// One-vs-one trains with DBCD-TR in one process (`joker_fit`): parameters that also name a
/// doubly stochastic solver or full KRR are refused with `JOKER_STATUS_INVALID_ARGUMENT`, and so
/// is a distributed fit (`joker_fit_mpi`) of more than two classes.
///
/// # Safety
/// As for `joker_params_set_loss`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_params_set_multiclass(
    params: *mut JokerParams,
    multiclass: i32,
) -> JokerStatus {
    guard(|| {
        let m = match multiclass {
            0 => None,
            1 => Some(Multiclass::OneVsRest),
            2 => Some(Multiclass::OneVsOne),
            _ => {
                return Err(Failure::invalid(
                    "multiclass",
                    format!("{multiclass} is not a JOKER_MULTICLASS_* value (0, 1 or 2)"),
                ));
            }
        };
        // SAFETY: see the function's contract.
        unsafe { update(params, |j| j.multiclass = m) }
    })
}

/// Forces classification or regression, one of `JOKER_TASK_*` (default `JOKER_TASK_AUTO`: from
/// the loss).
///
/// # Safety
/// As for `joker_params_set_loss`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_params_set_task(params: *mut JokerParams, task: i32) -> JokerStatus {
    guard(|| {
        let t = match task {
            0 => None,
            1 => Some(Task::Classification),
            2 => Some(Task::Regression),
            _ => {
                return Err(Failure::invalid(
                    "task",
                    format!("{task} is not a JOKER_TASK_* value (0 to 2)"),
                ));
            }
        };
        // SAFETY: see the function's contract.
        unsafe { update(params, |j| j.task = t) }
    })
}

/// Z-scores the features with training statistics (non-zero: yes; default yes).
///
/// # Safety
/// As for `joker_params_set_loss`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_params_set_standardize(
    params: *mut JokerParams,
    yes: i32,
) -> JokerStatus {
    // SAFETY: see the function's contract.
    guard(|| unsafe { update(params, |j| j.standardize = yes != 0) })
}

/// Z-scores regression targets (non-zero: yes; default yes). Predictions are always in the
/// original units.
///
/// # Safety
/// As for `joker_params_set_loss`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_params_set_normalize_target(
    params: *mut JokerParams,
    yes: i32,
) -> JokerStatus {
    // SAFETY: see the function's contract.
    guard(|| unsafe { update(params, |j| j.normalize_target = yes != 0) })
}

/// Sets the class weighting, one of `JOKER_CLASS_WEIGHT_*` (classifiers only).
///
/// # Safety
/// As for `joker_params_set_loss`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_params_set_class_weight(
    params: *mut JokerParams,
    mode: i32,
) -> JokerStatus {
    guard(|| {
        let w = match mode {
            0 => ClassWeight::None,
            1 => ClassWeight::Balanced,
            _ => {
                return Err(Failure::invalid(
                    "mode",
                    format!(
                        "{mode} is not a JOKER_CLASS_WEIGHT_* value (0 or 1); explicit weights use joker_params_set_class_weights"
                    ),
                ));
            }
        };
        // SAFETY: see the function's contract.
        unsafe { update(params, |j| j.class_weight = w) }
    })
}

/// Sets explicit class weights: class `labels[k]` weighs `weights[k] > 0`, unlisted classes
/// weigh 1 (`n = 0` clears them). Both arrays hold `n` values and are copied.
///
/// # Safety
/// `params` as for `joker_params_set_loss`; `labels` and `weights` must each be NULL or point
/// to `n` readable doubles.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_params_set_class_weights(
    params: *mut JokerParams,
    labels: *const f64,
    weights: *const f64,
    n: usize,
) -> JokerStatus {
    guard(|| {
        // SAFETY: NULL or `n` readable values (function contract).
        let l = unsafe { input_slice(labels, n, "labels") }?;
        // SAFETY: as above.
        let w = unsafe { input_slice(weights, n, "weights") }?;
        if let Some(k) = w.iter().position(|v| !(*v > 0.0 && v.is_finite())) {
            return Err(Failure::invalid(
                "weights",
                format!("weights[{k}] = {} must be positive and finite", w[k]),
            ));
        }
        if let Some(k) = l.iter().position(|v| !v.is_finite()) {
            return Err(Failure::new(
                JokerStatus::NonFinite,
                format!("`labels`: labels[{k}] is not finite"),
            ));
        }
        let cw = if n == 0 {
            ClassWeight::None
        } else {
            ClassWeight::Custom(l.iter().copied().zip(w.iter().copied()).collect())
        };
        // SAFETY: see the function's contract.
        unsafe { update(params, |j| j.class_weight = cw) }
    })
}

/// Sets the block size `|B| >= 1` (default 512, 256 on a cached exact kernel, 128 there for
/// hinge, SVR and L1; it must not exceed the number of samples).
///
/// # Safety
/// As for `joker_params_set_loss`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_params_set_block_size(
    params: *mut JokerParams,
    block_size: usize,
) -> JokerStatus {
    // SAFETY: see the function's contract.
    guard(|| unsafe {
        update(params, |j| {
            j.solver.block_size = block_size;
            j.solver.block_auto = false;
        })
    })
}

/// Sets the iteration budget (>= 1; default 10,000, and one pass over rows mapped from a file
/// larger than the memory the page cache can have, where each pass reads the file). A budget
/// set here is the budget on such rows too.
///
/// # Safety
/// As for `joker_params_set_loss`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_params_set_max_iter(
    params: *mut JokerParams,
    max_iter: usize,
) -> JokerStatus {
    // SAFETY: see the function's contract.
    guard(|| unsafe {
        update(params, |j| {
            j.solver.max_iter = max_iter;
            j.solver.passes_beyond_memory = None;
        })
    })
}

/// Sets the relative duality gap tolerance (>= 0; default 1e-3).
///
/// # Safety
/// As for `joker_params_set_loss`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_params_set_tol(params: *mut JokerParams, tol: f64) -> JokerStatus {
    // SAFETY: see the function's contract.
    guard(|| unsafe { update(params, |j| j.solver.tol = tol) })
}

/// With `on` zero, a fit runs until the relative duality gap reaches the tolerance; by default
/// (nonzero) it also stops, as "stalled", once the gap is within ten times the tolerance and
/// the dual objective rose by less than a tenth of the tolerance (relative) per pass over the
/// last three passes.
///
/// # Safety
/// As for `joker_params_set_loss`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_params_set_stall(params: *mut JokerParams, on: i32) -> JokerStatus {
    // SAFETY: see the function's contract.
    guard(|| unsafe { update(params, |j| j.solver.stall = on != 0) })
}

/// Sets a wall-clock budget in seconds; 0 or infinity removes it (the default).
///
/// # Safety
/// As for `joker_params_set_loss`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_params_set_time_limit(
    params: *mut JokerParams,
    seconds: f64,
) -> JokerStatus {
    guard(|| {
        let limit = if seconds == 0.0 || seconds == f64::INFINITY {
            None
        } else {
            Some(Duration::try_from_secs_f64(seconds).map_err(|_| {
                Failure::invalid(
                    "seconds",
                    format!("must be >= 0 (0 or infinity: no limit), got {seconds}"),
                )
            })?)
        };
        // SAFETY: see the function's contract.
        unsafe {
            try_update(params, |j| {
                j.solver.time_limit = limit;
                Ok(())
            })
        }
    })
}

/// Sets the monitoring period in iterations (0: once per pass over the data, the default, four
/// times a pass for an intercept searched on the cached exact kernel without a validation set;
/// every 50 iterations for full KRR). The progress callback and the validation set are evaluated at
/// every check.
///
/// # Safety
/// As for `joker_params_set_loss`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_params_set_check_every(
    params: *mut JokerParams,
    every: usize,
) -> JokerStatus {
    // SAFETY: see the function's contract.
    guard(|| unsafe {
        update(params, |j| {
            j.solver.check_every = every;
            if let Some(k) = &mut j.full_krr {
                k.check_every = if every == 0 { 50 } else { every };
            }
        })
    })
}

/// Sets the seed of the random features, of the block choice and of full KRR's sketches
/// (default 42).
///
/// # Safety
/// As for `joker_params_set_loss`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_params_set_seed(params: *mut JokerParams, seed: u64) -> JokerStatus {
    // SAFETY: see the function's contract.
    guard(|| unsafe {
        update(params, |j| {
            j.solver.seed = seed;
            if let Some(k) = &mut j.full_krr {
                k.seed = seed;
            }
        })
    })
}

/// Refuses fits whose estimated memory exceeds `bytes` (0: no limit). Without this call the
/// limit is 80% of the memory available when the fit starts (the smallest of the system's
/// available memory, the cgroup's allowance and the address-space limit).
///
/// # Safety
/// As for `joker_params_set_loss`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_params_set_max_memory(
    params: *mut JokerParams,
    bytes: usize,
) -> JokerStatus {
    // SAFETY: see the function's contract.
    guard(|| unsafe {
        update(params, |j| {
            j.max_memory = MemoryLimit::from_bytes_or_none(bytes)
        })
    })
}

/// Sets the rank of the Nystrom preconditioner of the block solver's CG (0: none, the
/// default; otherwise below the block size). Fewer CG iterations per block, each dearer: it
/// pays on ill-conditioned blocks (small `lambda`).
///
/// # Safety
/// As for `joker_params_set_loss`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_params_set_nystrom_rank(
    params: *mut JokerParams,
    rank: usize,
) -> JokerStatus {
    // SAFETY: see the function's contract.
    guard(|| unsafe { update(params, |j| j.solver.trust_region.nystrom_rank = rank) })
}

/// Sets the memory (bytes) the exact kernel matrix `K(X, X)`, or a Nystrom map's features
/// `psi(X)`, may take when formed once and kept (default 2 GiB; 0: formed block by block
/// always). A fit keeps them only where their `n^2` (or `n M`) values fit this and the memory
/// limit.
///
/// # Safety
/// As for `joker_params_set_loss`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_params_set_kernel_cache(
    params: *mut JokerParams,
    bytes: usize,
) -> JokerStatus {
    // SAFETY: see the function's contract.
    guard(|| unsafe { update(params, |j| j.solver.kernel_cache = bytes) })
}

/// `joker_params_set_tr_model`: the block Gram `Phi_B Phi_B^T`.
pub const JOKER_TR_MODEL_GRAM: i32 = 0;

/// `joker_params_set_tr_model`: the exact kernel block `K(X_B, X_B)`, with the exact ratio test.
pub const JOKER_TR_MODEL_KERNEL: i32 = 1;

/// `joker_params_set_tr_model`: the kernel model where it is predicted to be cheaper (the
/// default).
pub const JOKER_TR_MODEL_AUTO: i32 = 2;

/// Chooses the curvature of the trust region's model in random-feature fits, one of
/// `JOKER_TR_MODEL_*`. The kernel model costs `b^2 d` flops per block instead of the Gram's
/// `b^2 M`, and two products with the block's features per trust-region iteration; every
/// accepted step still decreases the random-feature objective. Exact-kernel fits ignore it.
///
/// # Safety
/// As for `joker_params_set_loss`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_params_set_tr_model(
    params: *mut JokerParams,
    model: i32,
) -> JokerStatus {
    guard(|| {
        let model = match model {
            JOKER_TR_MODEL_GRAM => TrModel::Gram,
            JOKER_TR_MODEL_KERNEL => TrModel::Kernel,
            JOKER_TR_MODEL_AUTO => TrModel::Auto,
            _ => {
                return Err(Failure::invalid(
                    "tr_model",
                    format!("{model} is not a JOKER_TR_MODEL_* value (0 to 2)"),
                ));
            }
        };
        // SAFETY: see the function's contract.
        unsafe { update(params, |j| j.solver.trust_region.model = model) }
    })
}

/// `joker_params_set_working_set`: shrinking where the exact kernel is cached, random blocks
/// otherwise (the default).
pub const JOKER_WORKING_SET_AUTO: i32 = 0;

/// `joker_params_set_working_set`: one of the fixed blocks, drawn at random.
pub const JOKER_WORKING_SET_RANDOM: i32 = 1;

/// `joker_params_set_working_set`: a block drawn from the coordinates that violate their
/// optimality conditions (needs the cached exact kernel).
pub const JOKER_WORKING_SET_SHRINKING: i32 = 2;

/// `joker_params_set_working_set`: the coordinates whose conditions are violated most (needs
/// the cached exact kernel; slower than shrinking, for comparison).
pub const JOKER_WORKING_SET_GREEDY: i32 = 3;

/// How DBCD-TR chooses each block, one of `JOKER_WORKING_SET_*`. Where the rule needs the
/// cached exact kernel and the fit has none, it takes random blocks and says so
/// (the model file's `training.working_set`).
///
/// # Safety
/// As for `joker_params_set_loss`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_params_set_working_set(
    params: *mut JokerParams,
    rule: i32,
) -> JokerStatus {
    guard(|| {
        let rule = match rule {
            JOKER_WORKING_SET_AUTO => WorkingSet::Auto,
            JOKER_WORKING_SET_RANDOM => WorkingSet::Random,
            JOKER_WORKING_SET_SHRINKING => WorkingSet::Shrinking,
            JOKER_WORKING_SET_GREEDY => WorkingSet::Greedy,
            _ => {
                return Err(Failure::invalid(
                    "working_set",
                    format!("{rule} is not a JOKER_WORKING_SET_* value (0 to 3)"),
                ));
            }
        };
        // SAFETY: see the function's contract.
        unsafe { update(params, |j| j.solver.working_set = rule) }
    })
}

/// With `on` nonzero, a fit with random features trains on the exact kernel instead where the
/// whole kernel matrix fits the kernel cache (`joker_params_set_kernel_cache`) and the memory
/// limit; beyond, on a Nystrom map of `n_components` leverage-score centres where its
/// `n x n_components` features fit them and the fit runs on the CPU; on the random features
/// otherwise. The model file's `training.representation` says which it took and why. Default
/// off.
///
/// # Safety
/// As for `joker_params_set_loss`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_params_set_auto_exact(
    params: *mut JokerParams,
    on: i32,
) -> JokerStatus {
    // SAFETY: see the function's contract.
    guard(|| unsafe { update(params, |j| j.auto_exact = on != 0) })
}

/// With `on` nonzero, a classifier trained with another loss than the logistic one (the SVMs)
/// is calibrated for class probabilities after the fit: Platt's sigmoid per decision column,
/// fitted on decision values from 5 stratified cross-validation folds (LIBSVM's `-b 1`), which
/// costs about 5 more fits on 4/5 of the rows. `joker_model_predict_proba` then works on the
/// model. A regression with it on is refused at the fit (`JOKER_STATUS_INVALID_PARAMETER`), and
/// so is an MPI fit (`joker_fit_mpi`). Default off.
///
/// # Safety
/// As for `joker_params_set_loss`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_params_set_probability(
    params: *mut JokerParams,
    on: i32,
) -> JokerStatus {
    // SAFETY: see the function's contract.
    guard(|| unsafe { update(params, |j| j.probability = on != 0) })
}

/// With `on` nonzero (the default), kernel ridge regression on a feature map of at most 4,096
/// features (random features or Nystrom centres) starts from its exact optimum: one pass forms
/// the primal system `(I + Phi^T C Phi) theta = Phi^T C y` (sample weights in `C`), a Cholesky
/// factor solves it, and DBCD-TR's first check certifies the result by the duality gap (the
/// model then reports 0 iterations) or polishes it. Zero runs DBCD-TR from zero instead.
///
/// # Safety
/// As for `joker_params_set_loss`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_params_set_direct_krr(
    params: *mut JokerParams,
    on: i32,
) -> JokerStatus {
    // SAFETY: see the function's contract.
    guard(|| unsafe { update(params, |j| j.solver.direct_krr = on != 0) })
}

/// With `on` nonzero (the default), L2-SVC (`JOKER_LOSS_L2_SVC`) on a feature map of at most
/// 4,096 features starts from its optimum, found in the primal by a finite Newton method (each
/// step a ridge solve on the rows inside the margin, then an exact line search); DBCD-TR's
/// first check certifies the result by the duality gap (the model then reports 0 iterations)
/// or polishes it. Zero runs DBCD-TR from zero instead.
///
/// # Safety
/// As for `joker_params_set_loss`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_params_set_newton_start(
    params: *mut JokerParams,
    on: i32,
) -> JokerStatus {
    // SAFETY: see the function's contract.
    guard(|| unsafe { update(params, |j| j.solver.newton_start = on != 0) })
}

/// `joker_params_set_tr_norm`: steps measured in the Euclidean norm (CG without a
/// preconditioner).
pub const JOKER_TR_NORM_EUCLIDEAN: i32 = 0;

/// `joker_params_set_tr_norm`: steps measured in the norm of the block curvature's diagonal
/// (Jacobi-preconditioned CG).
pub const JOKER_TR_NORM_DIAGONAL: i32 = 1;

/// `joker_params_set_tr_norm`: the diagonal norm for the losses whose curvature varies along
/// the box (KLR, Lp), the Euclidean norm otherwise (the default).
pub const JOKER_TR_NORM_AUTO: i32 = 2;

/// Chooses the norm in which the block solves measure their trust-region steps, one of
/// `JOKER_TR_NORM_*`.
///
/// # Safety
/// As for `joker_params_set_loss`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_params_set_tr_norm(
    params: *mut JokerParams,
    norm: i32,
) -> JokerStatus {
    guard(|| {
        let norm = match norm {
            JOKER_TR_NORM_EUCLIDEAN => TrNorm::Euclidean,
            JOKER_TR_NORM_DIAGONAL => TrNorm::Diagonal,
            JOKER_TR_NORM_AUTO => TrNorm::Auto,
            _ => {
                return Err(Failure::invalid(
                    "tr_norm",
                    format!("{norm} is not a JOKER_TR_NORM_* value (0 to 2)"),
                ));
            }
        };
        // SAFETY: see the function's contract.
        unsafe { update(params, |j| j.solver.trust_region.norm = norm) }
    })
}

/// `joker_params_set_intercept`: no intercept (the kernel expansion around the targets' mean).
pub const JOKER_INTERCEPT_OFF: i32 = 0;

/// `joker_params_set_intercept`: an unregularised intercept `b`, the model `f(x) + b`.
pub const JOKER_INTERCEPT_ON: i32 = 1;

/// `joker_params_set_intercept`: an intercept for SVR, Huber, L1 and Lp regression trained by
/// DBCD-TR (also by `joker_fit_mpi`), none for KRR and elsewhere (the default).
pub const JOKER_INTERCEPT_AUTO: i32 = 2;

/// Chooses whether a regression fits an unregularised intercept `b` beside the kernel
/// expansion, one of `JOKER_INTERCEPT_*`: the model is `f(x) + b` with `b` where the dual
/// coefficients sum to zero (LIBSVM's SVR). The intercept is kept in the model's target
/// scaling, so predictions include it. `JOKER_INTERCEPT_ON` with a classifier, a doubly
/// stochastic solver or full KRR is refused with JOKER_STATUS_INVALID_ARGUMENT, whichever of
/// the settings comes last; `joker_fit_mpi` searches it over the ranks.
///
/// # Safety
/// As for `joker_params_set_loss`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_params_set_intercept(
    params: *mut JokerParams,
    mode: i32,
) -> JokerStatus {
    guard(|| {
        let intercept = match mode {
            JOKER_INTERCEPT_OFF => Some(false),
            JOKER_INTERCEPT_ON => Some(true),
            JOKER_INTERCEPT_AUTO => None,
            _ => {
                return Err(Failure::invalid(
                    "intercept",
                    format!("{mode} is not a JOKER_INTERCEPT_* value (0 to 2)"),
                ));
            }
        };
        // SAFETY: see the function's contract.
        unsafe { update(params, |j| j.intercept = intercept) }
    })
}

/// With `on` nonzero, a regression takes its loss from the representation the fit trains on:
/// SVR (epsilon 0.1, with its intercept: LIBSVM's epsilon-SVR) on the exact kernel, KRR on a
/// feature map, where it is one direct solve; the loss set by `joker_params_set_loss` is then
/// the one fitted only by the other solvers. `joker train` does this when no loss is named.
/// The model file's `training.loss_choice` says which it took and why. Default off. Refused
/// with JOKER_STATUS_INVALID_ARGUMENT for a classification (a classifier loss, or the task
/// set to classification), whichever of the settings comes last.
///
/// # Safety
/// As for `joker_params_set_loss`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_params_set_auto_loss(
    params: *mut JokerParams,
    on: i32,
) -> JokerStatus {
    // SAFETY: see the function's contract.
    guard(|| unsafe { update(params, |j| j.auto_loss = on != 0) })
}

/// Appends a constant feature of value `b >= 0` to the random features, so that the decision
/// function has an intercept (as LIBLINEAR's `-B`; its weight is regularised with the rest). 0,
/// the default, appends none. Only random-feature fits by DBCD-TR take it: a fit on the exact
/// kernel or a Nystrom map, or by a doubly stochastic solver, is refused with
/// JOKER_STATUS_INVALID_ARGUMENT, whichever of the settings comes last.
///
/// # Safety
/// As for `joker_params_set_loss`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_params_set_bias(params: *mut JokerParams, b: f64) -> JokerStatus {
    // SAFETY: see the function's contract.
    guard(|| unsafe { update(params, |j| j.bias = b) })
}

/// Solves exact kernel ridge regression with a full-KRR method, one of `JOKER_KRR_METHOD_*`,
/// instead of DBCD-TR (`JOKER_KRR_METHOD_NONE` switches back). Needs the squared loss and the
/// exact kernel (`joker_params_set_exact`), so set those first.
///
/// `blocks` (ASkotch, Skotch; ignored by PCG) and the Nystrom `rank` are `>= 1` (defaults of
/// the paper: 10 and 100); the solve stops after `max_iter >= 1` iterations, when the relative
/// residual `||(K + lambda I) w - y|| / ||y||` is at most `tol >= 0`, or at the time limit of
/// `joker_params_set_time_limit`. The residual is computed every `joker_params_set_check_every`
/// iterations (0, the default: every 50). `store_preconditioners` non-zero keeps the block preconditioners
/// (`O(n rank)` memory) instead of a fresh sketch per step.
///
/// # Safety
/// As for `joker_params_set_loss`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_params_set_full_krr(
    params: *mut JokerParams,
    method: i32,
    blocks: usize,
    rank: usize,
    max_iter: usize,
    tol: f64,
    store_preconditioners: i32,
) -> JokerStatus {
    use crate::solver::krr::{KrrConfig, KrrMethod};
    guard(|| {
        let method = match method {
            0 => None,
            1 => Some(KrrMethod::ASkotch),
            2 => Some(KrrMethod::Skotch),
            3 => Some(KrrMethod::NystromPcg),
            _ => {
                return Err(Failure::invalid(
                    "method",
                    format!("{method} is not a JOKER_KRR_METHOD_* value (0 to 3)"),
                ));
            }
        };
        // SAFETY: see the function's contract.
        unsafe {
            update(params, |j| {
                let d = KrrConfig::default();
                let every = j.solver.check_every;
                j.full_krr = method.map(|method| KrrConfig {
                    method,
                    blocks,
                    rank,
                    max_iter,
                    tol,
                    check_every: if every == 0 { d.check_every } else { every },
                    seed: j.solver.seed,
                    store_preconditioners: store_preconditioners != 0,
                    ..d
                });
            })
        }
    })
}

/// Chooses the solver, one of `JOKER_SOLVER_*`: DBCD-TR (the default) or a doubly stochastic
/// gradient solver (random features on the CPU; `n_components` caps the features opened,
/// `joker_params_set_max_iter` counts steps, and there is no duality gap, so the fit runs its
/// step or time budget). For the doubly stochastic solvers, `batch_size >= 1` rows and
/// `feature_block >= 1` new features per step (at most `n_components`), and the step size
/// `theta / (t + t0)` with `theta > 0`, `t0 >= 0`. `0` for `batch_size` or `feature_block` and
/// NaN for `theta` or `t0` take the default (256, 64, 1000, 1000). DBCD-TR ignores them.
///
/// # Safety
/// As for `joker_params_set_loss`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_params_set_solver(
    params: *mut JokerParams,
    solver: i32,
    batch_size: usize,
    feature_block: usize,
    theta: f64,
    t0: f64,
) -> JokerStatus {
    use crate::solver::dsg::DsgConfig;
    guard(|| {
        let name = match solver {
            0 => None,
            1 => Some("dsg"),
            2 => Some("udsg"),
            3 => Some("cdsg"),
            _ => {
                return Err(Failure::invalid(
                    "solver",
                    format!("{solver} is not a JOKER_SOLVER_* value (0 to 3)"),
                ));
            }
        };
        let cfg = name.and_then(DsgConfig::named).map(|mut c| {
            let or = |v: usize, d: usize| if v == 0 { d } else { v };
            let orf = |v: f64, d: f64| if v.is_nan() { d } else { v };
            c.batch_size = or(batch_size, c.batch_size);
            c.feature_block = or(feature_block, c.feature_block);
            c.step.theta = orf(theta, c.step.theta);
            c.step.t0 = orf(t0, c.step.t0);
            c
        });
        // SAFETY: see the function's contract.
        unsafe { update(params, |j| j.dsg = cfg) }
    })
}

/// `joker_params_set_device`: a GPU when one is usable and the model runs there (random
/// features in f32), else the CPU. The default.
pub const JOKER_DEVICE_AUTO: i32 = -1;

/// `joker_params_set_device`: always the CPU.
pub const JOKER_DEVICE_CPU: i32 = -2;

/// Chooses where fits with these parameters run: `JOKER_DEVICE_AUTO` (the default),
/// `JOKER_DEVICE_CPU`, or a CUDA device ordinal `>= 0`. The choice is checked when fitting: a
/// GPU that cannot be used (no driver, no such device, or a model the GPU does not cover:
/// f64) makes `joker_fit` fail with `JOKER_STATUS_DEVICE`, while `JOKER_DEVICE_AUTO` falls
/// back to the CPU. Exact kernels use the GPU only when a device ordinal is given.
///
/// # Safety
/// As for `joker_params_set_loss`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_params_set_device(
    params: *mut JokerParams,
    device: i32,
) -> JokerStatus {
    guard(|| {
        let dev = match device {
            JOKER_DEVICE_AUTO => Device::Auto,
            JOKER_DEVICE_CPU => Device::Cpu,
            i if i >= 0 => Device::Cuda(i as usize),
            _ => {
                return Err(Failure::invalid(
                    "device",
                    format!(
                        "{device} is neither JOKER_DEVICE_AUTO (-1), JOKER_DEVICE_CPU (-2) nor a CUDA device ordinal (>= 0)"
                    ),
                ));
            }
        };
        // SAFETY: see the function's contract.
        unsafe { update(params, |j| j.device = dev) }
    })
}

/// Sets an interrupt flag: while a fit with these parameters runs, it reads `*flag` once per
/// iteration (one block solve; full KRR at its checks) and stops as soon as it is nonzero,
/// returning the model so far with stop reason "cancelled" (like a progress callback that
/// returns nonzero, but without waiting for the next check). This is how a Ctrl-C handler, or
/// another thread, stops a long fit within a second. NULL removes the flag (the default).
///
/// # Safety
/// As for `joker_params_set_loss`; `flag` must be NULL or point to a 4-byte-aligned `int32_t`
/// that stays valid while any fit with these parameters runs, and that other threads or signal
/// handlers change only by plain aligned stores (atomic in effect on every supported target).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_params_set_interrupt(
    params: *mut JokerParams,
    flag: *const i32,
) -> JokerStatus {
    guard(|| {
        if !flag.is_null() && (flag as usize) % std::mem::align_of::<i32>() != 0 {
            return Err(Failure::invalid(
                "flag",
                "the interrupt flag must be a 4-byte-aligned int32_t",
            ));
        }
        // SAFETY: exclusive use during the call is the caller's contract.
        let h = unsafe { get_mut(params, "params") }?;
        h.interrupt = flag as usize;
        Ok(())
    })
}

/// The interrupt flag of a handle as a poll for the solver, if one is set.
///
/// # Safety
/// The flag set by `joker_params_set_interrupt` must stay valid while the returned closure is
/// used (that function's contract).
pub(crate) unsafe fn interrupt_of(
    params: *const JokerParams,
) -> FfiResult<Option<crate::solver::dbcd::InterruptFn<'static>>> {
    // SAFETY: see the function's contract.
    let addr = unsafe { get(params, "params") }?.interrupt;
    if addr == 0 {
        return Ok(None);
    }
    Ok(Some(Box::new(move || {
        // SAFETY: `addr` is a live, aligned i32 (the setter checked the alignment; the
        // caller keeps it alive during the fit), written by others only with aligned stores,
        // so an atomic load reads a whole value.
        let flag = unsafe { std::sync::atomic::AtomicI32::from_ptr(addr as *mut i32) };
        flag.load(std::sync::atomic::Ordering::Relaxed) != 0
    })))
}

/// Borrows the validated parameters of a handle.
///
/// # Safety
/// `params` must be NULL or a handle not changed or freed by another thread during the
/// returned lifetime.
pub(crate) unsafe fn params_ref<'a>(params: *const JokerParams) -> FfiResult<&'a Joker> {
    // SAFETY: see the function's contract.
    Ok(&unsafe { get(params, "params") }?.inner)
}

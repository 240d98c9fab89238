//! The C ABI: `libjoker.so` / `libjoker.a` and the header `include/joker.h`.
//!
//! Every function is `extern "C"`, returns a [`JokerStatus`] (except the few infallible
//! queries) and never lets a panic cross the boundary: each entry point runs inside
//! `catch_unwind`, and a panic becomes [`JokerStatus::Panic`] with a message.
//!
//! # Handles
//!
//! Parameters ([`JokerParams`]), data ([`JokerData`]) and models ([`JokerModel`]) are opaque
//! handles made by a `joker_*_new` / `joker_data_from_*` / `joker_fit` / `joker_model_load`
//! call and released by the matching `joker_*_free`. The library keeps a registry of the live
//! handles, and every handle carries a type tag (cleared on free): a handle that was freed,
//! never created, or is of another type is rejected with [`JokerStatus::InvalidHandle`]
//! before it is dereferenced. (A freed address that is reused by a new handle of the same
//! type cannot be told apart: set freed pointers to `NULL`.) Freeing `NULL` does nothing.
//!
//! # Buffers and ownership
//!
//! * Input arrays are borrowed for the duration of the call only: the library copies what it
//!   keeps (data is copied into Rust-owned datasets, weights and labels are copied). The
//!   caller keeps ownership and may free them as soon as the call returns.
//! * Outputs are written into caller-allocated buffers whose length (in elements) the caller
//!   passes; a buffer that is too small gives [`JokerStatus::BufferTooSmall`] and nothing is
//!   written. `joker_model_output_size` tells the needed length.
//! * Out-pointers for handles (`JokerModel **out`) are set to `NULL` first, then to the new
//!   handle on success; the caller owns the handle and frees it exactly once.
//! * Strings returned by the library are never freed by the caller: `joker_version`,
//!   `joker_status_name` and `joker_device_name` return static strings; `joker_last_error`
//!   returns a thread-local buffer valid until the next joker call on the same thread;
//!   `joker_model_stop_reason` returns a string owned by the model, valid until it is freed.
//! * Strings passed in (paths) are NUL-terminated and borrowed for the call.
//!
//! # Errors
//!
//! A failing call returns a non-zero [`JokerStatus`] and stores a message (naming the argument
//! and the problem) in a thread-local buffer that `joker_last_error` returns. Every call that
//! returns a status first clears the message, so after a successful call it is empty.
//! (Like any Rust library, joker aborts the process if memory allocation itself fails;
//! `joker_params_set_max_memory` refuses fits whose estimated size exceeds a limit.)
//!
//! # Threads
//!
//! Handles are not synchronised. Several threads may use the same handle at once through
//! functions that take it as `const` (fitting with the same parameters or data, predicting
//! with the same model); a handle must not be changed (`joker_params_set_*`) or freed while
//! another thread uses it. The progress callback runs on the thread that called `joker_fit`.
//!
//! # GPUs
//!
//! `joker_gpu_available`, `joker_device_count` and `joker_device_name` answer from the device
//! probe (`crate::device`); `joker_params_set_device` chooses where a fit runs (default
//! `JOKER_DEVICE_AUTO`: a GPU when usable, else the CPU).

use std::cell::RefCell;
use std::ffi::{CStr, c_char};
use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::error::JokerError;

// The header lists the items of these modules in this order (blank lines keep rustfmt from
// sorting them).
mod info;

mod params;

mod data;

mod fit;

mod model;

mod export;
#[cfg(feature = "mpi")]
mod mpi;

mod handle;

pub use data::*;
pub use export::*;
pub use fit::*;
pub use info::*;
pub use model::*;
pub use params::*;

/// Version of the C ABI; the shared library's SONAME is `libjoker.so.<JOKER_ABI_VERSION>`.
/// It changes only when a function's signature or meaning changes incompatibly.
pub const JOKER_ABI_VERSION: u32 = 0;

/// The result of every fallible call. `JOKER_STATUS_OK` (0) is success; any other value is an
/// error whose message `joker_last_error` returns.
#[repr(i32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JokerStatus {
    /// Success.
    Ok = 0,
    /// A required pointer argument is `NULL`.
    NullPointer = 1,
    /// A handle is not a live handle of the expected type (freed, never created, or another
    /// type).
    InvalidHandle = 2,
    /// An argument is outside its valid range (a parameter value, an enum value, a flag).
    InvalidArgument = 3,
    /// An output buffer is shorter than the result; nothing was written.
    BufferTooSmall = 4,
    /// Sizes that must agree do not (rows and labels, features of the data and of the model,
    /// CSR arrays).
    ShapeMismatch = 5,
    /// A NaN or infinity in features, labels or weights.
    NonFinite = 6,
    /// Data with no rows or no columns.
    EmptyData = 7,
    /// Labels that do not fit the loss, or missing labels.
    InvalidLabels = 8,
    /// A data file could not be parsed.
    Parse = 9,
    /// A file could not be read or written.
    Io = 10,
    /// A model file is malformed or from a newer format version.
    ModelFormat = 11,
    /// The fit would need more memory than allowed.
    Memory = 12,
    /// The solver produced a non-finite value.
    Numerical = 13,
    /// The requested device cannot be used.
    Device = 14,
    /// The model does not support the request (for example probabilities from an SVM).
    Unsupported = 15,
    /// An internal error (a panic inside the library, caught at the boundary): a bug.
    Panic = 16,
    /// A distributed fit failed across its processes (another rank failed or left).
    Distributed = 17,
}

impl JokerStatus {
    /// The constant's name as written in the header.
    pub(crate) fn name(self) -> &'static CStr {
        match self {
            JokerStatus::Ok => c"JOKER_STATUS_OK",
            JokerStatus::NullPointer => c"JOKER_STATUS_NULL_POINTER",
            JokerStatus::InvalidHandle => c"JOKER_STATUS_INVALID_HANDLE",
            JokerStatus::InvalidArgument => c"JOKER_STATUS_INVALID_ARGUMENT",
            JokerStatus::BufferTooSmall => c"JOKER_STATUS_BUFFER_TOO_SMALL",
            JokerStatus::ShapeMismatch => c"JOKER_STATUS_SHAPE_MISMATCH",
            JokerStatus::NonFinite => c"JOKER_STATUS_NON_FINITE",
            JokerStatus::EmptyData => c"JOKER_STATUS_EMPTY_DATA",
            JokerStatus::InvalidLabels => c"JOKER_STATUS_INVALID_LABELS",
            JokerStatus::Parse => c"JOKER_STATUS_PARSE",
            JokerStatus::Io => c"JOKER_STATUS_IO",
            JokerStatus::ModelFormat => c"JOKER_STATUS_MODEL_FORMAT",
            JokerStatus::Memory => c"JOKER_STATUS_MEMORY",
            JokerStatus::Numerical => c"JOKER_STATUS_NUMERICAL",
            JokerStatus::Device => c"JOKER_STATUS_DEVICE",
            JokerStatus::Unsupported => c"JOKER_STATUS_UNSUPPORTED",
            JokerStatus::Panic => c"JOKER_STATUS_PANIC",
            JokerStatus::Distributed => c"JOKER_STATUS_DISTRIBUTED",
        }
    }

    /// All statuses, in order of value.
    pub(crate) const ALL: [JokerStatus; 18] = [
        JokerStatus::Ok,
        JokerStatus::NullPointer,
        JokerStatus::InvalidHandle,
        JokerStatus::InvalidArgument,
        JokerStatus::BufferTooSmall,
        JokerStatus::ShapeMismatch,
        JokerStatus::NonFinite,
        JokerStatus::EmptyData,
        JokerStatus::InvalidLabels,
        JokerStatus::Parse,
        JokerStatus::Io,
        JokerStatus::ModelFormat,
        JokerStatus::Memory,
        JokerStatus::Numerical,
        JokerStatus::Device,
        JokerStatus::Unsupported,
        JokerStatus::Panic,
        JokerStatus::Distributed,
    ];
}

/// A failed call: the status and the message for `joker_last_error`.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) status: JokerStatus,
    pub(crate) message: String,
}

pub(crate) type FfiResult<T> = std::result::Result<T, Failure>;

impl Failure {
    pub(crate) fn new(status: JokerStatus, message: impl Into<String>) -> Self {
        Failure {
            status,
            message: message.into(),
        }
    }
    /// A required pointer argument is NULL.
    pub(crate) fn null(arg: &str) -> Self {
        Failure::new(
            JokerStatus::NullPointer,
            format!("`{arg}` is NULL, a valid pointer is required"),
        )
    }
    /// An argument out of range.
    pub(crate) fn invalid(arg: &str, reason: impl std::fmt::Display) -> Self {
        Failure::new(JokerStatus::InvalidArgument, format!("`{arg}`: {reason}"))
    }
}

impl From<JokerError> for Failure {
    fn from(e: JokerError) -> Self {
        let status = match &e {
            JokerError::InvalidParameter { .. } => JokerStatus::InvalidArgument,
            JokerError::EmptyData(_) => JokerStatus::EmptyData,
            JokerError::NonFinite { .. } => JokerStatus::NonFinite,
            JokerError::ShapeMismatch(_) => JokerStatus::ShapeMismatch,
            JokerError::InvalidLabels(_) => JokerStatus::InvalidLabels,
            JokerError::Parse { .. } => JokerStatus::Parse,
            JokerError::Io { .. } => JokerStatus::Io,
            JokerError::ModelFormat(_) => JokerStatus::ModelFormat,
            JokerError::Memory(_) => JokerStatus::Memory,
            JokerError::Numerical(_) => JokerStatus::Numerical,
            JokerError::Device(_) => JokerStatus::Device,
            JokerError::Unsupported(_) => JokerStatus::Unsupported,
            JokerError::Distributed(_) => JokerStatus::Distributed,
        };
        let message = match &e {
            JokerError::InvalidParameter { name, .. } => match setter_of(name) {
                Some(f) => format!("{e} (set with {f})"),
                None => e.to_string(),
            },
            _ => e
                .to_string()
                .replace("with max_memory", "with joker_params_set_max_memory"),
        };
        Failure::new(status, message)
    }
}

/// The C function that sets a library parameter, named in messages about it.
fn setter_of(param: &str) -> Option<&'static str> {
    Some(match param {
        "lambda" => "joker_params_set_lambda",
        "c" => "joker_params_set_c",
        "n_components" => "joker_params_set_n_components",
        "block_size" => "joker_params_set_block_size",
        "max_iter" => "joker_params_set_max_iter",
        "tol" => "joker_params_set_tol",
        "gamma" => "joker_params_set_gamma",
        "delta" | "epsilon" | "p" | "loss" => "joker_params_set_loss",
        "nu" | "kernel" => "joker_params_set_kernel",
        "task" => "joker_params_set_task",
        "class_weight" => "joker_params_set_class_weights",
        "nystrom_rank" => "joker_params_set_nystrom_rank",
        "tr_model" => "joker_params_set_tr_model",
        "full_krr" | "method" | "krr_blocks" | "krr_rank" | "krr_tol" | "alpha" | "power_iters" => {
            "joker_params_set_full_krr"
        }
        "dsg" | "batch_size" | "feature_block" | "step" | "udsg" | "step_cap" | "solver" => {
            "joker_params_set_solver"
        }
        "precision" => "joker_params_set_precision",
        "device" => "joker_params_set_device",
        "seed" => "joker_params_set_seed",
        "check_every" => "joker_params_set_check_every",
        "time_limit" => "joker_params_set_time_limit",
        "search_c" | "search_gamma" | "folds" => "joker_fit_search",
        _ => return None,
    })
}

thread_local! {
    /// The last error message of this thread, NUL-terminated (just `[0]` when empty).
    static LAST_ERROR: RefCell<Vec<u8>> = RefCell::new(vec![0]);
}

fn set_last_error(message: &str) {
    LAST_ERROR.with(|b| {
        let mut b = b.borrow_mut();
        b.clear();
        // an interior NUL would cut the C string short
        b.extend(message.bytes().map(|c| if c == 0 { b'?' } else { c }));
        b.push(0);
    });
}

/// The pointer `joker_last_error` returns: valid until this thread's buffer is changed.
pub(crate) fn last_error_ptr() -> *const c_char {
    LAST_ERROR.with(|b| b.borrow().as_ptr().cast())
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic payload".to_string()
    }
}

/// Runs the body of an entry point that returns a status: clears the last error, catches
/// panics, and records the message of a failure.
pub(crate) fn guard(body: impl FnOnce() -> FfiResult<()>) -> JokerStatus {
    set_last_error("");
    let outcome = catch_unwind(AssertUnwindSafe(body));
    let failure = match outcome {
        Ok(Ok(())) => return JokerStatus::Ok,
        Ok(Err(f)) => f,
        Err(payload) => Failure::new(
            JokerStatus::Panic,
            format!(
                "internal error: the library panicked ({}); this is a bug in joker, please report it",
                panic_message(&*payload)
            ),
        ),
    };
    set_last_error(&failure.message);
    failure.status
}

/// Runs the body of an infallible query, returning `fallback` if it panics.
pub(crate) fn guard_value<T>(fallback: T, body: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or(fallback)
}

/// Largest element count of a slice of `T` (`from_raw_parts` needs `len * size <= isize::MAX`).
fn max_len<T>() -> usize {
    isize::MAX as usize / std::mem::size_of::<T>().max(1)
}

/// Borrows `len` elements at `ptr` for the duration of a call.
///
/// # Safety
/// When `ptr` is not NULL and `len > 0`, `ptr` must point to `len` initialised, readable
/// values of `T` that stay valid and unmodified for the returned lifetime (the call): the
/// documented contract of every function taking an array.
pub(crate) unsafe fn input_slice<'a, T>(
    ptr: *const T,
    len: usize,
    arg: &str,
) -> FfiResult<&'a [T]> {
    if len == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        return Err(Failure::null(arg));
    }
    if !ptr.is_aligned() {
        return Err(Failure::invalid(
            arg,
            "the pointer is not aligned for its type",
        ));
    }
    if len > max_len::<T>() {
        return Err(Failure::invalid(
            arg,
            format!("{len} elements exceed the address space"),
        ));
    }
    // SAFETY: non-NULL, aligned, `len * size_of::<T>() <= isize::MAX`, and the caller
    // guarantees `len` readable values that outlive the call (function contract).
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

/// Borrows a caller-provided output buffer of `len` elements, of which the first `need` will
/// be written; fails (writing nothing) when `len < need`.
///
/// # Safety
/// When `ptr` is not NULL and `len > 0`, `ptr` must point to `len` writable values of `T`,
/// not aliased by any other argument, valid for the call.
pub(crate) unsafe fn output_slice<'a, T>(
    ptr: *mut T,
    len: usize,
    need: usize,
    arg: &str,
) -> FfiResult<&'a mut [T]> {
    if len < need {
        return Err(Failure::new(
            JokerStatus::BufferTooSmall,
            format!("`{arg}` holds {len} values, the result needs {need}"),
        ));
    }
    if need == 0 {
        return Ok(&mut []);
    }
    if ptr.is_null() {
        return Err(Failure::null(arg));
    }
    if !ptr.is_aligned() {
        return Err(Failure::invalid(
            arg,
            "the pointer is not aligned for its type",
        ));
    }
    if need > max_len::<T>() {
        return Err(Failure::invalid(
            arg,
            format!("{need} elements exceed the address space"),
        ));
    }
    // SAFETY: non-NULL, aligned, size in range; the caller guarantees at least `len >= need`
    // writable, unaliased elements for the call (function contract).
    Ok(unsafe { std::slice::from_raw_parts_mut(ptr, need) })
}

/// Writes `value` through an out-pointer.
///
/// # Safety
/// `out`, when not NULL, must be valid for a write of one `T` (function contract).
pub(crate) unsafe fn write_out<T>(out: *mut T, value: T, arg: &str) -> FfiResult<()> {
    if out.is_null() {
        return Err(Failure::null(arg));
    }
    if !out.is_aligned() {
        return Err(Failure::invalid(
            arg,
            "the pointer is not aligned for its type",
        ));
    }
    // SAFETY: non-NULL and aligned; the caller guarantees it is valid for writes.
    unsafe { out.write(value) };
    Ok(())
}

/// Reads a NUL-terminated string argument (a path) as an OS path.
///
/// # Safety
/// `s`, when not NULL, must point to a NUL-terminated string valid for the call.
pub(crate) unsafe fn path_arg(s: *const c_char, arg: &str) -> FfiResult<std::path::PathBuf> {
    if s.is_null() {
        return Err(Failure::null(arg));
    }
    // SAFETY: non-NULL, and the caller guarantees a NUL-terminated string (function contract).
    let bytes = unsafe { CStr::from_ptr(s) }.to_bytes();
    if bytes.is_empty() {
        return Err(Failure::invalid(arg, "the path is empty"));
    }
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        Ok(std::path::PathBuf::from(std::ffi::OsStr::from_bytes(bytes)))
    }
    #[cfg(not(unix))]
    {
        std::str::from_utf8(bytes)
            .map(std::path::PathBuf::from)
            .map_err(|_| Failure::invalid(arg, "the path is not valid UTF-8"))
    }
}

#[cfg(test)]
mod tests;

//! Version, capability and error queries.

use std::ffi::c_char;

use super::{
    Failure, JOKER_ABI_VERSION, JokerStatus, guard, guard_value, last_error_ptr, write_out,
};

static VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), "\0");

/// The library version, for example "0.1.0" (a static string: never free it).
#[unsafe(no_mangle)]
pub extern "C" fn joker_version() -> *const c_char {
    guard_value(c"".as_ptr(), || VERSION.as_ptr().cast())
}

/// The C ABI version this library implements (`JOKER_ABI_VERSION` of its header). A program
/// can compare it with the header it was compiled against.
#[unsafe(no_mangle)]
pub extern "C" fn joker_abi_version() -> u32 {
    guard_value(JOKER_ABI_VERSION, || JOKER_ABI_VERSION)
}

/// The message of the last failed call on this thread, or "" if the last call succeeded. The
/// string lives in a thread-local buffer: it is valid until the next joker call on the same
/// thread (copy it to keep it), and must not be freed.
#[unsafe(no_mangle)]
pub extern "C" fn joker_last_error() -> *const c_char {
    guard_value(c"".as_ptr(), last_error_ptr)
}

/// The name of a status value, for example "JOKER_STATUS_SHAPE_MISMATCH" (a static string), or
/// "JOKER_STATUS_UNKNOWN" for a value that is not a status.
#[unsafe(no_mangle)]
pub extern "C" fn joker_status_name(status: i32) -> *const c_char {
    guard_value(c"JOKER_STATUS_UNKNOWN".as_ptr(), || {
        JokerStatus::ALL
            .iter()
            .find(|s| **s as i32 == status)
            .map_or(c"JOKER_STATUS_UNKNOWN".as_ptr(), |s| s.name().as_ptr())
    })
}

/// Whether a GPU can be used: 1 or 0. Always 0 in this version: the CUDA kernels exist but the
/// CUDA backend is not wired into the library yet, so every fit and prediction runs on the
/// CPU.
#[unsafe(no_mangle)]
pub extern "C" fn joker_gpu_available() -> i32 {
    guard_value(0, || 0)
}

/// The number of usable CUDA devices. Always 0 in this version (see `joker_gpu_available`).
#[unsafe(no_mangle)]
pub extern "C" fn joker_device_count() -> i32 {
    guard_value(0, || 0)
}

/// Writes in `*out` the name of CUDA device `index` (a static string). With no usable device
/// (always, in this version) every index gives `JOKER_STATUS_DEVICE`.
///
/// # Safety
/// `out` must be NULL or valid for writing one pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_device_name(index: i32, out: *mut *const c_char) -> JokerStatus {
    guard(|| {
        // SAFETY: `out` is NULL (rejected) or writable (function contract).
        unsafe { write_out(out, std::ptr::null(), "out") }?;
        Err(Failure::new(
            JokerStatus::Device,
            format!(
                "no CUDA device {index}: this build sees {} devices (the CUDA backend is not wired into the library yet)",
                joker_device_count()
            ),
        ))
    })
}

//! Version, capability and error queries.

use std::ffi::{CString, c_char};
use std::sync::OnceLock;

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

/// Whether a GPU can be used: 1 or 0. Answers from the device probe (run once per process):
/// 0 when the library was built without CUDA support, no NVIDIA driver library can be loaded,
/// the driver is too old for the embedded kernels, or no device of compute capability 8.0 or newer
/// is present.
#[unsafe(no_mangle)]
pub extern "C" fn joker_gpu_available() -> i32 {
    guard_value(0, || i32::from(crate::device::probe().available()))
}

/// The number of usable CUDA devices (0 when `joker_gpu_available` is 0).
#[unsafe(no_mangle)]
pub extern "C" fn joker_device_count() -> i32 {
    guard_value(0, || {
        i32::try_from(crate::device::probe().devices.len()).unwrap_or(i32::MAX)
    })
}

/// The device names as C strings, made once (they live for the whole process).
fn device_names() -> &'static [(usize, CString)] {
    static NAMES: OnceLock<Vec<(usize, CString)>> = OnceLock::new();
    NAMES.get_or_init(|| {
        crate::device::probe()
            .devices
            .iter()
            .map(|g| {
                let name = CString::new(g.name.replace('\0', "")).unwrap_or_default();
                (g.index, name)
            })
            .collect()
    })
}

/// Writes in `*out` the name of usable CUDA device `index` (its CUDA ordinal), a static string
/// valid for the life of the process. An index that is not a usable device gives
/// `JOKER_STATUS_DEVICE` with the reason (for example that no driver library was found) and
/// `*out` is set to NULL.
///
/// # Safety
/// `out` must be NULL or valid for writing one pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_device_name(index: i32, out: *mut *const c_char) -> JokerStatus {
    guard(|| {
        // SAFETY: `out` is NULL (rejected) or writable (function contract).
        unsafe { write_out(out, std::ptr::null(), "out") }?;
        let found = usize::try_from(index)
            .ok()
            .and_then(|i| device_names().iter().find(|(j, _)| *j == i));
        match found {
            Some((_, name)) => {
                // SAFETY: as above; the string is owned by a process-wide static.
                unsafe { write_out(out, name.as_ptr(), "out") }
            }
            None => {
                let p = crate::device::probe();
                Err(Failure::new(
                    JokerStatus::Device,
                    if p.available() {
                        format!(
                            "no usable CUDA device {index}: the usable devices are {:?}",
                            p.devices.iter().map(|g| g.index).collect::<Vec<_>>()
                        )
                    } else {
                        format!("no usable CUDA device {index}: {}", p.reason())
                    },
                ))
            }
        }
    })
}

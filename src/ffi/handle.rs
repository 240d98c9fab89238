//! Opaque handles: boxed values with a type tag, tracked in a registry of live handles so that a
//! freed, foreign or mistyped pointer is rejected before it is dereferenced.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

use super::{Failure, FfiResult, JokerStatus};

/// The kinds of handle, for the registry and for messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Params,
    Data,
    Model,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Params => "JokerParams",
            Kind::Data => "JokerData",
            Kind::Model => "JokerModel",
        }
    }
}

/// A value behind an opaque handle. The first field of every handle struct is its tag.
pub(crate) trait Handle: Sized {
    /// The handle's kind.
    const KIND: Kind;
    /// The tag a live handle of this kind carries.
    const MAGIC: u64;
    /// The tag field.
    fn tag_mut(&mut self) -> &mut u64;
    /// The tag's value.
    fn tag(&self) -> u64;
}

/// Addresses of the live handles and their kinds.
static LIVE: Mutex<BTreeMap<usize, Kind>> = Mutex::new(BTreeMap::new());

fn live() -> MutexGuard<'static, BTreeMap<usize, Kind>> {
    // The map is only inserted into and removed from; a panic elsewhere cannot leave it
    // inconsistent, so a poisoned lock is still usable.
    LIVE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Boxes `value`, registers it and returns the handle.
pub(crate) fn register<T: Handle>(mut value: T) -> *mut T {
    *value.tag_mut() = T::MAGIC;
    let ptr = Box::into_raw(Box::new(value));
    live().insert(ptr as usize, T::KIND);
    ptr
}

/// Checks that `ptr` is a live handle of type `T`, without dereferencing it unless it is.
fn check<T: Handle>(ptr: *const T, arg: &str) -> FfiResult<()> {
    if ptr.is_null() {
        return Err(Failure::null(arg));
    }
    match live().get(&(ptr as usize)) {
        Some(&k) if k == T::KIND => Ok(()),
        Some(&k) => Err(Failure::new(
            JokerStatus::InvalidHandle,
            format!(
                "`{arg}` is a {} handle, a {} is required",
                k.name(),
                T::KIND.name()
            ),
        )),
        None => Err(Failure::new(
            JokerStatus::InvalidHandle,
            format!(
                "`{arg}` is not a live {} handle (already freed, never created by joker, or corrupted)",
                T::KIND.name()
            ),
        )),
    }
}

fn tag_ok<T: Handle>(h: &T, arg: &str) -> FfiResult<()> {
    if h.tag() == T::MAGIC {
        Ok(())
    } else {
        Err(Failure::new(
            JokerStatus::InvalidHandle,
            format!(
                "`{arg}`: the {} handle's tag is damaged (memory corruption?)",
                T::KIND.name()
            ),
        ))
    }
}

/// Borrows a live handle.
///
/// # Safety
/// The handle must not be freed or changed by another thread during the returned lifetime
/// (the documented threading contract).
pub(crate) unsafe fn get<'a, T: Handle>(ptr: *const T, arg: &str) -> FfiResult<&'a T> {
    check(ptr, arg)?;
    // SAFETY: `ptr` is in the registry as a `T`, so it came from `Box::into_raw` in `register`
    // and has not been passed to `release` since: it points to a live, aligned `T`. Nothing
    // mutates it concurrently (caller contract).
    let h = unsafe { &*ptr };
    tag_ok(h, arg)?;
    Ok(h)
}

/// Borrows a live handle mutably.
///
/// # Safety
/// No other thread may use the handle during the returned lifetime (threading contract).
pub(crate) unsafe fn get_mut<'a, T: Handle>(ptr: *mut T, arg: &str) -> FfiResult<&'a mut T> {
    check(ptr, arg)?;
    // SAFETY: registered, so a live `Box<T>` allocation (see `get`); exclusive by the
    // threading contract.
    let h = unsafe { &mut *ptr };
    tag_ok(h, arg)?;
    Ok(h)
}

/// Frees a handle; NULL is accepted and does nothing.
///
/// # Safety
/// No other thread may use the handle during or after the call (threading contract).
pub(crate) unsafe fn release<T: Handle>(ptr: *mut T, arg: &str) -> FfiResult<()> {
    if ptr.is_null() {
        return Ok(());
    }
    {
        let mut map = live();
        match map.get(&(ptr as usize)) {
            Some(&k) if k == T::KIND => {
                map.remove(&(ptr as usize));
            }
            _ => {
                drop(map);
                return check(ptr, arg);
            }
        }
    }
    // SAFETY: the address was registered as a `T` (from `Box::into_raw` in `register`) and has
    // just been removed from the registry under the lock, so this is the only release.
    let mut b = unsafe { Box::from_raw(ptr) };
    // SAFETY: a valid, exclusive `&mut u64`; volatile so that the store is not elided before
    // the deallocation (a stale pointer then shows a cleared tag until the memory is reused).
    unsafe { std::ptr::write_volatile(b.tag_mut(), 0) };
    drop(b);
    Ok(())
}

/// Implements [`Handle`] for a struct whose `tag: u64` field is its tag.
macro_rules! impl_handle {
    ($t:ty, $kind:expr, $magic:expr) => {
        impl $crate::ffi::handle::Handle for $t {
            const KIND: $crate::ffi::handle::Kind = $kind;
            const MAGIC: u64 = $magic;
            fn tag_mut(&mut self) -> &mut u64 {
                &mut self.tag
            }
            fn tag(&self) -> u64 {
                self.tag
            }
        }
    };
}
pub(crate) use impl_handle;

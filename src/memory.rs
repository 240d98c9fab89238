//! Memory limits and fallible allocation.
//!
//! A fit estimates its memory before it allocates and refuses to start when the estimate is
//! over the limit; the default limit is a fraction of the memory this process can still get,
//! so that a typo such as `M = 10,000,000` is an error and not an abort. The large buffers are
//! then reserved fallibly, so that an allocation refused by the system (an address-space
//! limit, a container limit) is an error too.

use crate::error::{JokerError, Result};

/// The share of the available memory that [`MemoryLimit::Auto`] allows a fit.
pub const AUTO_FRACTION: f64 = 0.8;

/// How much memory a fit may use, judged by its estimate before it allocates.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MemoryLimit {
    /// [`AUTO_FRACTION`] of the memory available when the fit starts: the smallest of the
    /// system's available memory, the cgroup's remaining allowance and the address-space
    /// limit. No limit where none of these can be read (outside Linux).
    #[default]
    Auto,
    /// No limit.
    Unlimited,
    /// At most this many bytes.
    Bytes(usize),
}

impl MemoryLimit {
    /// The limit in bytes now, or `None` for no limit.
    pub fn bytes(self) -> Option<usize> {
        match self {
            MemoryLimit::Auto => available().map(|a| (a as f64 * AUTO_FRACTION) as usize),
            MemoryLimit::Unlimited => None,
            MemoryLimit::Bytes(b) => Some(b),
        }
    }

    /// The limit of the C ABI and the bindings: 0 means none, anything else bytes.
    pub fn from_bytes_or_none(bytes: usize) -> Self {
        if bytes == 0 {
            MemoryLimit::Unlimited
        } else {
            MemoryLimit::Bytes(bytes)
        }
    }

    /// Fails with [`JokerError::Memory`] when `need` bytes (for `what`) exceed the limit.
    pub fn check(self, need: usize, what: impl FnOnce() -> String) -> Result<()> {
        match self.bytes() {
            Some(limit) if need > limit => Err(JokerError::Memory(format!(
                "{} needs about {}, over the limit of {}{}",
                what(),
                human(need),
                human(limit),
                match self {
                    MemoryLimit::Auto => format!(
                        " ({:.0}% of the available memory; set a larger limit, or none, with max_memory)",
                        AUTO_FRACTION * 100.0
                    ),
                    _ => String::new(),
                }
            ))),
            _ => Ok(()),
        }
    }
}

/// Bytes this process can still allocate, where the system says (Linux): the smallest of
/// `MemAvailable`, the cgroup v2 allowance left and the address-space limit left.
pub fn available() -> Option<usize> {
    [meminfo_available(), cgroup_left(), address_space_left()]
        .into_iter()
        .flatten()
        .min()
}

fn meminfo_available() -> Option<usize> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kb = text
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse::<usize>()
        .ok()?;
    Some(kb.saturating_mul(1024))
}

fn cgroup_left() -> Option<usize> {
    let (max, used) = cgroup_memory()?;
    Some(max.saturating_sub(used))
}

/// Bytes the page cache can hold for this process: the memory available now (the page cache
/// of other files included, which it gives up) capped by this process's cgroup memory limit,
/// which counts the cached pages of the files it reads. A file larger than this is read from
/// disk again on every pass over it.
///
/// `JOKER_CACHE_ROOM=BYTES` in the environment replaces the measurement: to see, without a
/// memory cap, what a fit does with a file beyond the page cache (the tests use it).
pub fn cache_room() -> Option<usize> {
    if let Some(bytes) = std::env::var("JOKER_CACHE_ROOM")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
    {
        return Some(bytes);
    }
    let limit = cgroup_memory().map(|(max, _)| max);
    [meminfo_available(), limit].into_iter().flatten().min()
}

/// The memory limit and use of this process's cgroup, where it has a limit: cgroup v2
/// (`memory.max`, `memory.current`) or v1's memory controller (`memory.limit_in_bytes`,
/// `memory.usage_in_bytes`), found through `/proc/self/cgroup`; the v2 files at the root of
/// the hierarchy (a container's own) otherwise. The use leaves out the page cache of files
/// (`file` or `total_cache` in `memory.stat`), which the kernel gives up when memory is asked
/// for.
fn cgroup_memory() -> Option<(usize, usize)> {
    let (max, used, dir) = cgroup_files()?;
    let stat = std::fs::read_to_string(format!("{dir}/memory.stat")).unwrap_or_default();
    let cache = stat
        .lines()
        .find_map(|l| {
            let (key, value) = l.split_once(' ')?;
            matches!(key, "file" | "total_cache")
                .then(|| value.trim().parse::<usize>().ok())
                .flatten()
        })
        .unwrap_or(0);
    Some((max, used.saturating_sub(cache)))
}

/// The limit, the use and the folder of this process's cgroup memory files (see
/// [`cgroup_memory`]).
fn cgroup_files() -> Option<(usize, usize, String)> {
    let number = |path: String| {
        std::fs::read_to_string(path)
            .ok()
            .and_then(|s| s.trim().parse::<usize>().ok())
    };
    // v1 reports no limit as a number near 2^63
    let limited = |max: usize| max < (1usize << 60);
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    for line in own.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next(), parts.next(), parts.next());
        let (Some(controllers), Some(path)) = (controllers, path) else {
            continue;
        };
        let path = path.trim_end_matches('/');
        if controllers.split(',').any(|c| c == "memory") {
            let dir = format!("/sys/fs/cgroup/memory{path}");
            if let Some(max) = number(format!("{dir}/memory.limit_in_bytes"))
                && limited(max)
            {
                let used = number(format!("{dir}/memory.usage_in_bytes")).unwrap_or(0);
                return Some((max, used, dir));
            }
        } else if controllers.is_empty() && !path.is_empty() {
            let dir = format!("/sys/fs/cgroup{path}");
            if let Some(max) = number(format!("{dir}/memory.max")) {
                let used = number(format!("{dir}/memory.current")).unwrap_or(0);
                return Some((max, used, dir));
            }
        }
    }
    let dir = "/sys/fs/cgroup".to_string();
    let max = number(format!("{dir}/memory.max"))?;
    let used = number(format!("{dir}/memory.current")).unwrap_or(0);
    Some((max, used, dir))
}

fn address_space_left() -> Option<usize> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let soft = limits
        .lines()
        .find_map(|l| l.strip_prefix("Max address space"))?
        .split_whitespace()
        .next()?
        .parse::<usize>()
        .ok()?;
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let used_kb = status
        .lines()
        .find_map(|l| l.strip_prefix("VmSize:"))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(0);
    Some(soft.saturating_sub(used_kb.saturating_mul(1024)))
}

/// `bytes` as MB or GB for messages.
pub fn human(bytes: usize) -> String {
    let mb = bytes as f64 / (1u64 << 20) as f64;
    if mb >= 10_240.0 {
        format!("{:.1} GB", mb / 1024.0)
    } else {
        format!("{mb:.0} MB")
    }
}

thread_local! {
    /// Whether this thread is inside one of the fallible allocations below.
    static FALLIBLE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether the allocation this thread is making is one of this module's fallible ones, whose
/// refusal becomes [`JokerError::Memory`]. A global allocator that ends the process on any
/// other refusal (the `joker` program's, which exits with a message instead of aborting) must
/// return null for these instead.
pub fn in_fallible_allocation() -> bool {
    FALLIBLE.with(|f| f.get())
}

/// Runs `f` marked as a fallible allocation ([`in_fallible_allocation`]).
fn fallibly<R>(f: impl FnOnce() -> R) -> R {
    let outer = FALLIBLE.with(|c| c.replace(true));
    let r = f();
    FALLIBLE.with(|c| c.set(outer));
    r
}

/// An empty vector with room for `len` values, or [`JokerError::Memory`] naming `what` when
/// the system refuses the allocation (instead of aborting the process).
pub fn try_reserved<T>(len: usize, what: &str) -> Result<Vec<T>> {
    let mut v = Vec::new();
    fallibly(|| v.try_reserve_exact(len)).map_err(|_| {
        JokerError::Memory(format!(
            "cannot allocate {} for {what}",
            human(len.saturating_mul(std::mem::size_of::<T>()))
        ))
    })?;
    Ok(v)
}

/// A vector of `len` copies of `value`, or [`JokerError::Memory`] naming `what` when the
/// system refuses the allocation (instead of aborting the process).
pub fn try_filled<T: Clone>(len: usize, value: T, what: &str) -> Result<Vec<T>> {
    let mut v = try_reserved(len, what)?;
    v.resize(len, value);
    Ok(v)
}

/// [`try_filled`] with the copies written by all threads: a large buffer's pages are then
/// faulted in and zeroed in parallel instead of by one thread. The pages are the system's
/// default: asking for transparent huge pages (`madvise`) made fits after an idle moment
/// slower on the machine measured (docs/bench/defaults.md#small-pages).
pub fn try_filled_par<T: Clone + Send + Sync>(len: usize, value: T, what: &str) -> Result<Vec<T>> {
    use rayon::prelude::*;
    let mut v = try_reserved(len, what)?;
    v.par_extend(rayon::iter::repeat_n(value, len));
    Ok(v)
}

/// A vector of `len` zeros allocated zeroed by the system, or [`JokerError::Memory`] naming
/// `what`. A large buffer comes as fresh pages that cost nothing until first written: a
/// matrix filled in parts ([`crate::backend::cached`]'s kernel formed on demand) pays for the
/// pages it writes, when it writes them, instead of a fill before its first use.
pub fn try_zeroed<T: crate::scalar::Scalar>(len: usize, what: &str) -> Result<Vec<T>> {
    if len == 0 || std::mem::size_of::<T>() == 0 {
        return Ok(Vec::new());
    }
    let refused = || {
        JokerError::Memory(format!(
            "cannot allocate {} for {what}",
            human(len.saturating_mul(std::mem::size_of::<T>()))
        ))
    };
    let layout = std::alloc::Layout::array::<T>(len).map_err(|_| refused())?;
    // SAFETY: the layout has a non-zero size (len > 0, T is f32 or f64).
    let ptr = fallibly(|| unsafe { std::alloc::alloc_zeroed(layout) }) as *mut T;
    if ptr.is_null() {
        return Err(refused());
    }
    // SAFETY: `ptr` comes from the global allocator with the layout of `[T; len]`, which is
    // the layout a `Vec<T>` of capacity `len` frees it with; all `len` values are initialised,
    // since zero bits are the value 0.0 of the floating-point types `Scalar` is sealed to.
    Ok(unsafe { Vec::from_raw_parts(ptr, len, len) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explicit_limits_refuse_larger_estimates_and_name_the_sizes() {
        let l = MemoryLimit::Bytes(100 << 20);
        assert!(l.check(50 << 20, || "x".into()).is_ok());
        let e = l.check(200 << 20, || "the fit".into()).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("200 MB") && msg.contains("100 MB"), "{msg}");
        assert!(
            MemoryLimit::Unlimited
                .check(usize::MAX, || "x".into())
                .is_ok()
        );
        assert_eq!(MemoryLimit::from_bytes_or_none(0), MemoryLimit::Unlimited);
        assert_eq!(MemoryLimit::from_bytes_or_none(7), MemoryLimit::Bytes(7));
    }

    #[test]
    fn the_automatic_limit_is_a_fraction_of_what_is_available() {
        // Linux: /proc/meminfo is always there, so the automatic limit is finite and below
        // the available memory.
        if cfg!(target_os = "linux") {
            let avail = available().expect("MemAvailable");
            let auto = MemoryLimit::Auto.bytes().expect("a limit");
            assert!(auto > 0 && auto < avail, "{auto} vs {avail}");
            assert!(
                MemoryLimit::Auto
                    .check(usize::MAX / 2, || "x".into())
                    .is_err()
            );
        }
    }

    #[test]
    fn refused_allocations_are_errors() {
        let e = try_filled(usize::MAX / 8, 0.0f64, "the test buffer").unwrap_err();
        assert!(e.to_string().contains("the test buffer"), "{e}");
        assert_eq!(try_filled(3, 1u8, "x").unwrap(), vec![1, 1, 1]);
        let e = try_zeroed::<f64>(usize::MAX / 16, "the zeroed buffer").unwrap_err();
        assert!(e.to_string().contains("the zeroed buffer"), "{e}");
    }

    #[test]
    fn zeroed_buffers_are_zeros_and_writable() {
        for len in [0, 1, 1000, 3 << 20] {
            let mut v = try_zeroed::<f32>(len, "x").unwrap();
            assert_eq!(v.len(), len);
            assert!(v.iter().all(|&x| x == 0.0));
            if let Some(last) = v.last_mut() {
                *last = 2.5;
            }
            v.push(1.0);
            assert_eq!(v.len(), len + 1);
        }
        assert!(
            try_zeroed::<f64>(4097, "x")
                .unwrap()
                .iter()
                .all(|&x| x == 0.0)
        );
    }
}

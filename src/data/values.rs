//! The values of a dense matrix: owned in memory, or mapped read-only from a file so that the
//! operating system's page cache holds only the rows being read.

use std::fmt;
use std::marker::PhantomData;
use std::ops::Deref;
use std::sync::Arc;

use crate::scalar::Scalar;

/// Row-major values, owned or mapped. Reads see a plain slice either way.
pub(crate) enum Values<T> {
    Owned(Vec<T>),
    Mapped(Mapped<T>),
}

/// Element types a file's bytes can be read as directly: every bit pattern is a value.
pub(crate) trait Plain: Copy + Send + Sync + 'static + sealed::Sealed {
    /// Name used in messages.
    const NAME: &'static str;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
    impl Sealed for u32 {}
    impl Sealed for usize {}
}

impl Plain for f32 {
    const NAME: &'static str = "f32";
}
impl Plain for f64 {
    const NAME: &'static str = "f64";
}
impl Plain for u32 {
    const NAME: &'static str = "u32";
}
impl Plain for usize {
    const NAME: &'static str = "usize";
}

/// `len` values of type `T` at byte `offset` of a read-only file mapping.
pub(crate) struct Mapped<T> {
    map: Arc<memmap2::Mmap>,
    offset: usize,
    len: usize,
    /// The rows' sums taken in the opening pass that checks every value (see
    /// [`Mapped::sums`]), shared by the clones: the data-wide width rules read them instead of
    /// the file again.
    sums: Arc<std::sync::OnceLock<Vec<f64>>>,
    _t: PhantomData<T>,
}

impl<T: Plain> Mapped<T> {
    /// `len` values at byte `offset` of `map`; fails unless they lie inside the mapping and the
    /// offset is aligned for `T`.
    pub(crate) fn new(
        map: Arc<memmap2::Mmap>,
        offset: usize,
        len: usize,
    ) -> std::result::Result<Self, String> {
        let bytes = len
            .checked_mul(std::mem::size_of::<T>())
            .and_then(|b| b.checked_add(offset))
            .ok_or_else(|| format!("{len} values overflow usize"))?;
        if bytes > map.len() {
            return Err(format!(
                "the file holds {} bytes, but {len} values of {} from byte {offset} need {bytes} (truncated?)",
                map.len(),
                T::NAME
            ));
        }
        if (map.as_ptr() as usize + offset) % std::mem::align_of::<T>() != 0 {
            return Err(format!(
                "the values start at byte {offset}, not aligned for {}",
                T::NAME
            ));
        }
        Ok(Mapped {
            map,
            offset,
            len,
            sums: Arc::default(),
            _t: PhantomData,
        })
    }
}

impl<T: 'static> Mapped<T> {
    /// The same mapping read as `U`, when `U` is `T` (no copy).
    fn retyped<U: 'static>(&self) -> Option<Mapped<U>> {
        (std::any::TypeId::of::<T>() == std::any::TypeId::of::<U>()).then(|| Mapped {
            map: Arc::clone(&self.map),
            offset: self.offset,
            len: self.len,
            sums: Arc::clone(&self.sums),
            _t: PhantomData,
        })
    }
}

impl<T> Deref for Mapped<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // SAFETY: a `Mapped<T>` is made only by `new` or `retyped`, with `T: Plain`. `new`
        // checked that `offset + len * size_of::<T>()` lies inside the mapping
        // and that the start is aligned for `T`; `T` is f32, f64, u32 or usize (sealed
        // `Plain`), for which every bit pattern is a value; the mapping is read-only and kept alive by the
        // `Arc`. The file must not change while it is mapped (the callers' documented contract).
        unsafe {
            std::slice::from_raw_parts(self.map.as_ptr().add(self.offset).cast::<T>(), self.len)
        }
    }
}

impl<T> Mapped<T> {
    /// Tells the kernel how the mapping will be read: `random` (rows drawn here and there: no
    /// read-around of the pages near each one, which fetches megabytes for a row of a few
    /// kilobytes) or, with `false`, the default. Only a hint: its failure changes nothing read.
    fn advise_random(&self, random: bool) {
        #[cfg(unix)]
        {
            let advice = if random {
                memmap2::Advice::Random
            } else {
                memmap2::Advice::Normal
            };
            let _ = self.map.advise(advice);
        }
        #[cfg(not(unix))]
        let _ = random;
    }
}

impl<T> Mapped<T> {
    /// Asks the kernel to read values `start..start + len` now (`MADV_WILLNEED`): one read of
    /// exactly that range, started before the values are touched. Only a hint.
    fn will_need(&self, start: usize, len: usize) {
        #[cfg(unix)]
        {
            let size = std::mem::size_of::<T>();
            let end = (start + len).min(self.len);
            if start < end {
                let _ = self.map.advise_range(
                    memmap2::Advice::WillNeed,
                    self.offset + start * size,
                    (end - start) * size,
                );
            }
        }
        #[cfg(not(unix))]
        let _ = (start, len);
    }
}

impl<T> Values<T> {
    /// The sums stored by [`set_sums`](Self::set_sums), where the values are mapped.
    pub(crate) fn sums(&self) -> Option<&[f64]> {
        match self {
            Values::Mapped(m) => m.sums.get().map(Vec::as_slice),
            Values::Owned(_) => None,
        }
    }

    /// Keeps sums over mapped values (the first ones stay; nothing for owned values).
    pub(crate) fn set_sums(&self, sums: Vec<f64>) {
        if let Values::Mapped(m) = self {
            let _ = m.sums.set(sums);
        }
    }

    /// [`Mapped::will_need`] where the values are mapped; nothing otherwise.
    pub(crate) fn will_need(&self, start: usize, len: usize) {
        if let Values::Mapped(m) = self {
            m.will_need(start, len);
        }
    }

    /// [`Mapped::advise_random`] where the values are mapped; nothing otherwise.
    pub(crate) fn advise_random(&self, random: bool) {
        if let Values::Mapped(m) = self {
            m.advise_random(random);
        }
    }
}

impl<T: Copy> Values<T> {
    /// Whether the values are mapped from a file rather than held in memory.
    pub(crate) fn is_mapped(&self) -> bool {
        matches!(self, Values::Mapped(_))
    }

    /// The values as a vector (a copy when mapped).
    pub(crate) fn into_vec(self) -> Vec<T> {
        match self {
            Values::Owned(v) => v,
            Values::Mapped(m) => m.to_vec(),
        }
    }

    /// Mutable values: mapped values are first copied into memory.
    pub(crate) fn make_mut(&mut self) -> &mut Vec<T> {
        if let Values::Mapped(m) = self {
            *self = Values::Owned(m.to_vec());
        }
        match self {
            Values::Owned(v) => v,
            Values::Mapped(_) => unreachable!("copied above"),
        }
    }
}

impl<T: Scalar> Values<T> {
    /// The values converted to `U`: shared, not copied, when mapped and `U` is `T`.
    pub(crate) fn cast<U: Scalar>(&self) -> Values<U> {
        if let Values::Mapped(m) = self
            && let Some(same) = m.retyped::<U>()
        {
            return Values::Mapped(same);
        }
        Values::Owned(self.iter().map(|x| U::from_f64(x.to_f64())).collect())
    }
}

impl<T> Deref for Values<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        match self {
            Values::Owned(v) => v,
            Values::Mapped(m) => m,
        }
    }
}

impl<T: Clone> Clone for Values<T> {
    /// Owned values are copied; a mapping is shared.
    fn clone(&self) -> Self {
        match self {
            Values::Owned(v) => Values::Owned(v.clone()),
            Values::Mapped(m) => Values::Mapped(Mapped {
                map: Arc::clone(&m.map),
                offset: m.offset,
                len: m.len,
                sums: Arc::clone(&m.sums),
                _t: PhantomData,
            }),
        }
    }
}

impl<T: PartialEq> PartialEq for Values<T> {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl<T: fmt::Debug> fmt::Debug for Values<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Values::Owned(v) => v.fmt(f),
            Values::Mapped(m) => write!(f, "<{} values mapped from a file>", m.len),
        }
    }
}

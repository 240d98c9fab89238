//! Minimal `.npy` (NumPy format 1.0) reading and writing of C-order `f32`/`f64` arrays: the
//! exchange format between the benchmark and its Python peers.

use std::io::{Read, Write};
use std::path::Path;

/// An element type `.npy` can carry here.
pub trait Elem: Copy {
    /// NumPy's dtype descriptor (little-endian).
    const DESCR: &'static str;
    /// Appends the little-endian bytes.
    fn put(self, out: &mut Vec<u8>);
    /// Reads from little-endian bytes.
    fn get(b: &[u8]) -> Self;
}

impl Elem for f32 {
    const DESCR: &'static str = "<f4";
    fn put(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
    fn get(b: &[u8]) -> Self {
        f32::from_le_bytes(b.try_into().expect("4 bytes"))
    }
}

impl Elem for f64 {
    const DESCR: &'static str = "<f8";
    fn put(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
    fn get(b: &[u8]) -> Self {
        f64::from_le_bytes(b.try_into().expect("8 bytes"))
    }
}

fn shape_text(shape: &[usize]) -> String {
    match shape {
        [n] => format!("({n},)"),
        _ => format!(
            "({})",
            shape
                .iter()
                .map(|s| s.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// Writes `data` (C order) with the given shape.
pub fn write<T: Elem>(path: &Path, shape: &[usize], data: &[T]) -> std::io::Result<()> {
    assert_eq!(shape.iter().product::<usize>(), data.len(), "npy shape");
    let mut header = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}",
        T::DESCR,
        shape_text(shape)
    );
    // magic (6) + version (2) + header length (2) + header, padded with spaces to a multiple
    // of 64 and ended by a newline
    let unpadded = 10 + header.len() + 1;
    header.push_str(&" ".repeat(unpadded.next_multiple_of(64) - unpadded));
    header.push('\n');
    let mut out = Vec::with_capacity(10 + header.len() + std::mem::size_of_val(data));
    out.extend_from_slice(b"\x93NUMPY\x01\x00");
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    for &v in data {
        v.put(&mut out);
    }
    std::fs::File::create(path)?.write_all(&out)
}

/// Reads an array written by [`write`] (or NumPy, same dtype, C order): `(shape, data)`.
/// The body is converted in chunks, so the peak memory is the array itself.
pub fn read<T: Elem>(path: &Path) -> std::io::Result<(Vec<usize>, Vec<T>)> {
    let bad = |m: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, m.to_string());
    let mut f = std::io::BufReader::new(std::fs::File::open(path)?);
    let mut pre = [0u8; 10];
    f.read_exact(&mut pre)?;
    if &pre[..6] != b"\x93NUMPY" || pre[6] != 1 {
        return Err(bad("not a version 1 .npy file"));
    }
    let mut header = vec![0u8; u16::from_le_bytes([pre[8], pre[9]]) as usize];
    f.read_exact(&mut header)?;
    let header = String::from_utf8(header).map_err(|_| bad("header"))?;
    if !header.contains(T::DESCR) || header.contains("'fortran_order': True") {
        return Err(bad("unexpected dtype or order"));
    }
    let inner = header
        .split("'shape': (")
        .nth(1)
        .and_then(|s| s.split(')').next())
        .ok_or_else(|| bad("no shape"))?;
    let shape: Vec<usize> = inner
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().map_err(|_| bad("shape")))
        .collect::<std::io::Result<_>>()?;
    let n: usize = shape.iter().product();
    let w = size_of::<T>();
    let mut data = Vec::with_capacity(n);
    let mut chunk = vec![0u8; (1 << 20) * w];
    while data.len() < n {
        let k = (n - data.len()).min(1 << 20);
        f.read_exact(&mut chunk[..k * w])?;
        data.extend(chunk[..k * w].chunks_exact(w).map(T::get));
    }
    if f.read(&mut [0u8; 1])? != 0 {
        return Err(bad("size does not match the shape"));
    }
    Ok((shape, data))
}

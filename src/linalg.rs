//! Small dense kernels of the block solver (dot products and matrix-vector products in `f64`),
//! compiled twice: for the baseline target and for AVX2 + FMA, chosen at run time.

use rayon::prelude::*;

#[inline(always)]
fn dot_body(a: &[f64], b: &[f64]) -> f64 {
    let mut acc = [0.0f64; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f64 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ca.zip(cb) {
        for l in 0..8 {
            acc[l] = x[l].mul_add(y[l], acc[l]);
        }
    }
    (acc[0] + acc[4]) + (acc[1] + acc[5]) + (acc[2] + acc[6]) + (acc[3] + acc[7]) + tail
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn dot_avx2(a: &[f64], b: &[f64]) -> f64 {
    dot_body(a, b)
}

fn dot_portable(a: &[f64], b: &[f64]) -> f64 {
    // without hardware FMA, mul_add would be a slow library call
    let mut acc = [0.0f64; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f64 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ca.zip(cb) {
        for l in 0..8 {
            acc[l] += x[l] * y[l];
        }
    }
    (acc[0] + acc[4]) + (acc[1] + acc[5]) + (acc[2] + acc[6]) + (acc[3] + acc[7]) + tail
}

#[inline]
fn has_avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// `sum_i a_i b_i`.
#[inline]
pub fn dot(a: &[f64], b: &[f64]) -> f64 {
    #[cfg(target_arch = "x86_64")]
    {
        if has_avx2() {
            // SAFETY: the CPU supports the features the function is compiled for.
            return unsafe { dot_avx2(a, b) };
        }
    }
    dot_portable(a, b)
}

#[inline(always)]
fn dot_mixed_body(a: &[f32], b: &[f64]) -> f64 {
    let mut acc = [0.0f64; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f64 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| *x as f64 * y)
        .sum();
    for (x, y) in ca.zip(cb) {
        for l in 0..8 {
            acc[l] += x[l] as f64 * y[l];
        }
    }
    (acc[0] + acc[4]) + (acc[1] + acc[5]) + (acc[2] + acc[6]) + (acc[3] + acc[7]) + tail
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn dot_mixed_avx2(a: &[f32], b: &[f64]) -> f64 {
    dot_mixed_body(a, b)
}

/// `sum_i a_i b_i` with `a` in `f32`, accumulated in `f64`.
#[inline]
pub fn dot_mixed(a: &[f32], b: &[f64]) -> f64 {
    #[cfg(target_arch = "x86_64")]
    {
        if has_avx2() {
            // SAFETY: the CPU supports the features the function is compiled for.
            return unsafe { dot_mixed_avx2(a, b) };
        }
    }
    dot_mixed_body(a, b)
}

/// `out = A v` for a row-major `f32` matrix `A` (half the memory traffic of `f64`; the
/// products are accumulated in `f64`).
pub fn matvec_mixed(a: &[f32], v: &[f64], out: &mut [f64]) {
    rows_dot(a, v, out, dot_mixed);
}

/// Rows per parallel task of [`matvec`] and [`matvec_mixed`]; below two tasks' worth they run
/// serially.
const MATVEC_ROWS: usize = 128;

/// `out = A v` for a row-major `A` of `out.len() x v.len()`.
pub fn matvec(a: &[f64], v: &[f64], out: &mut [f64]) {
    rows_dot(a, v, out, dot);
}

/// `out_i = dot(A_i, v)` over the rows of a row-major `A`, in parallel for large matrices.
fn rows_dot<A: Sync>(a: &[A], v: &[f64], out: &mut [f64], dot: fn(&[A], &[f64]) -> f64) {
    let n = v.len();
    debug_assert_eq!(a.len(), out.len() * n);
    if out.len() >= 2 * MATVEC_ROWS && n >= 128 {
        out.par_chunks_mut(MATVEC_ROWS)
            .enumerate()
            .for_each(|(c, o)| {
                crate::backend::cpu::clear_upper_state();
                for (k, x) in o.iter_mut().enumerate() {
                    let i = c * MATVEC_ROWS + k;
                    *x = dot(&a[i * n..(i + 1) * n], v);
                }
            });
    } else {
        for (i, x) in out.iter_mut().enumerate() {
            *x = dot(&a[i * n..(i + 1) * n], v);
        }
    }
}

/// The machine's measured `f32` GEMM rate in GFLOP/s: the median of five timed
/// `n x n x n` products with faer on all rayon threads (after one warm-up). Benchmarks report
/// their rates as a fraction of this ceiling, measured in the same run.
pub fn gemm_gflops_f32(n: usize) -> f64 {
    use faer::{Accum, Mat, Par};
    let a = Mat::<f32>::from_fn(n, n, |i, j| ((i * 7 + j * 3) % 11) as f32 * 0.1);
    let b = Mat::<f32>::from_fn(n, n, |i, j| ((i * 5 + j) % 13) as f32 * 0.1);
    let mut c = Mat::<f32>::zeros(n, n);
    let mut times: Vec<f64> = (0..6)
        .map(|_| {
            let t = std::time::Instant::now();
            faer::linalg::matmul::matmul(
                c.as_mut(),
                Accum::Replace,
                a.as_ref(),
                b.as_ref(),
                1.0,
                Par::rayon(0),
            );
            t.elapsed().as_secs_f64()
        })
        .skip(1)
        .collect();
    std::hint::black_box(&c);
    times.sort_by(f64::total_cmp);
    2.0 * (n as f64).powi(3) / times[times.len() / 2] / 1e9
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_and_matvec_match_naive_sums() {
        for n in [0, 1, 7, 8, 9, 300, 517] {
            let a: Vec<f64> = (0..n * n)
                .map(|i| ((i * 37 % 101) as f64 - 50.0) / 7.0)
                .collect();
            let v: Vec<f64> = (0..n).map(|i| ((i * 13 % 17) as f64 - 8.0) / 3.0).collect();
            let mut out = vec![f64::NAN; n];
            matvec(&a, &v, &mut out);
            for i in 0..n {
                let want: f64 = (0..n).map(|j| a[i * n + j] * v[j]).sum();
                assert!(
                    (out[i] - want).abs() < 1e-9 * (1.0 + want.abs()),
                    "n={n} i={i}"
                );
            }
            assert!((dot(&v, &v) - v.iter().map(|x| x * x).sum::<f64>()).abs() < 1e-9);
            let a32: Vec<f32> = a.iter().map(|&x| x as f32).collect();
            let mut out32 = vec![f64::NAN; n];
            matvec_mixed(&a32, &v, &mut out32);
            for i in 0..n {
                let want: f64 = (0..n).map(|j| a32[j + i * n] as f64 * v[j]).sum();
                assert!(
                    (out32[i] - want).abs() < 1e-9 * (1.0 + want.abs()),
                    "mixed n={n} i={i}"
                );
            }
        }
    }
}

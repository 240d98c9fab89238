//! Small dense kernels of the block solver (dot products and matrix-vector products in `f64`),
//! compiled twice: for the baseline target and for AVX2 + FMA, chosen at run time.

use rayon::prelude::*;

use crate::simd::has_avx2;

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

/// `sum_i term(a_i, b_i)` in eight interleaved partial sums (so that the compiler vectorises
/// it), combined in a fixed order.
#[inline(always)]
fn lane_sum<A: Copy>(a: &[A], b: &[f64], term: impl Fn(A, f64) -> f64) -> f64 {
    let mut acc = [0.0f64; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f64 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| term(*x, *y))
        .sum();
    for (x, y) in ca.zip(cb) {
        for l in 0..8 {
            acc[l] += term(x[l], y[l]);
        }
    }
    (acc[0] + acc[4]) + (acc[1] + acc[5]) + (acc[2] + acc[6]) + (acc[3] + acc[7]) + tail
}

fn dot_portable(a: &[f64], b: &[f64]) -> f64 {
    // without hardware FMA, mul_add would be a slow library call
    lane_sum(a, b, |x, y| x * y)
}

/// Parallelism for a product of `m x k` by `k x n`: serial below a few hundred kflops, where
/// thread start-up costs more than it saves.
pub(crate) fn par_for(m: usize, n: usize, k: usize) -> faer::Par {
    if m.saturating_mul(n).saturating_mul(k) < 1 << 18 {
        faer::Par::Seq
    } else {
        faer::Par::rayon(0)
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

/// `sum_i f(a_i - b_i)`.
#[inline(always)]
fn difference_sum_body(a: &[f64], b: &[f64], f: impl Fn(f64) -> f64) -> f64 {
    lane_sum(a, b, |x, y| f(x - y))
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn squared_distance_avx2(a: &[f64], b: &[f64]) -> f64 {
    difference_sum_body(a, b, |t| t * t)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn l1_distance_avx2(a: &[f64], b: &[f64]) -> f64 {
    difference_sum_body(a, b, f64::abs)
}

/// `||a - b||^2`.
#[inline]
pub fn squared_distance(a: &[f64], b: &[f64]) -> f64 {
    #[cfg(target_arch = "x86_64")]
    {
        if has_avx2() {
            // SAFETY: the CPU supports the features the function is compiled for.
            return unsafe { squared_distance_avx2(a, b) };
        }
    }
    difference_sum_body(a, b, |t| t * t)
}

/// `||a - b||_1`.
#[inline]
pub fn l1_distance(a: &[f64], b: &[f64]) -> f64 {
    #[cfg(target_arch = "x86_64")]
    {
        if has_avx2() {
            // SAFETY: the CPU supports the features the function is compiled for.
            return unsafe { l1_distance_avx2(a, b) };
        }
    }
    difference_sum_body(a, b, f64::abs)
}

#[inline(always)]
fn dot_mixed_body(a: &[f32], b: &[f64]) -> f64 {
    lane_sum(a, b, |x, y| x as f64 * y)
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

/// Fewest rows per parallel task of [`matvec`] and [`matvec_mixed`].
const MATVEC_ROWS: usize = 128;

/// Rows per task: one share per thread (a multiple of four, at least [`MATVEC_ROWS`]). With
/// equal shares the caller always runs the first and the same workers take the others, so
/// repeated products with one matrix (the CG iterations) find their rows in their own cache.
fn rows_per_task(rows: usize) -> usize {
    rows.div_ceil(rayon::current_num_threads())
        .next_multiple_of(4)
        .max(MATVEC_ROWS)
}

/// Whether a product of `work` multiply-adds over `rows` rows should be split over the pool.
/// From a pool worker (where the block solver runs) the other workers are awake and a split
/// pays from about 64k multiply-adds (a 256 x 256 block); from outside the pool the caller
/// sleeps on a latch until the pool finishes, which costs tens of microseconds per call, so
/// only large products are split.
fn split_rows(rows: usize, work: usize) -> bool {
    let threshold = if rayon::current_thread_index().is_some() {
        1 << 16
    } else {
        1 << 20
    };
    rows >= 2 * MATVEC_ROWS && work >= threshold && rayon::current_num_threads() > 1
}

/// `out = A v` for a row-major `A` of `out.len() x v.len()`.
pub fn matvec(a: &[f64], v: &[f64], out: &mut [f64]) {
    split_products(a, v, out, rows_serial);
}

/// `out_i = dot(A_i, v)` over the rows of a row-major `f64` matrix, on the calling thread.
pub fn rows_serial(a: &[f64], v: &[f64], out: &mut [f64]) {
    let n = v.len();
    for (i, x) in out.iter_mut().enumerate() {
        *x = dot(&a[i * n..(i + 1) * n], v);
    }
}

/// `out = A v` with `rows` (a serial product of a block of rows) run on one share of the rows
/// per thread when [`split_rows`] says so, else on the calling thread.
fn split_products<A: Sync>(
    a: &[A],
    v: &[f64],
    out: &mut [f64],
    rows: fn(&[A], &[f64], &mut [f64]),
) {
    let n = v.len();
    debug_assert_eq!(a.len(), out.len() * n);
    if split_rows(out.len(), out.len() * n) {
        let per = rows_per_task(out.len());
        out.par_chunks_mut(per).enumerate().for_each(|(c, o)| {
            crate::simd::clear_upper_state();
            rows(&a[c * per * n..(c * per + o.len()) * n], v, o);
        });
    } else {
        rows(a, v, out);
    }
}

/// Four rows of an `f32` matrix against one `f64` vector: every loaded element of `v` serves
/// four rows, and eight independent accumulators hide the latency of the fused multiply-add
/// (one row at a time is bound by that latency, not by memory). Written with intrinsics: the
/// compiler's own vectorisation of the loop picks 128-bit registers and spills.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn rows4_mixed_avx2(a: [&[f32]; 4], v: &[f64]) -> [f64; 4] {
    use std::arch::x86_64::*;
    let n = v.len();
    let full = n - n % 8;
    assert!(a.iter().all(|r| r.len() >= n));
    let mut acc = [_mm256_setzero_pd(); 8];
    let mut j = 0;
    while j < full {
        // SAFETY: j + 8 <= full <= n, and every row and v hold at least n elements (asserted
        // above), so each unaligned load reads inside its slice.
        unsafe {
            let v0 = _mm256_loadu_pd(v.as_ptr().add(j));
            let v1 = _mm256_loadu_pd(v.as_ptr().add(j + 4));
            for r in 0..4 {
                let x = _mm256_loadu_ps(a[r].as_ptr().add(j));
                let lo = _mm256_cvtps_pd(_mm256_castps256_ps128(x));
                let hi = _mm256_cvtps_pd(_mm256_extractf128_ps::<1>(x));
                acc[2 * r] = _mm256_fmadd_pd(lo, v0, acc[2 * r]);
                acc[2 * r + 1] = _mm256_fmadd_pd(hi, v1, acc[2 * r + 1]);
            }
        }
        j += 8;
    }
    let mut out = [0.0; 4];
    for (r, row) in a.iter().enumerate() {
        let mut lanes = [0.0f64; 4];
        // SAFETY: `lanes` holds four f64, the width of one register.
        unsafe {
            _mm256_storeu_pd(
                lanes.as_mut_ptr(),
                _mm256_add_pd(acc[2 * r], acc[2 * r + 1]),
            )
        };
        let tail: f64 = (full..n).map(|k| row[k] as f64 * v[k]).sum();
        out[r] = (lanes[0] + lanes[2]) + (lanes[1] + lanes[3]) + tail;
    }
    out
}

/// `out[r] = dot(A_r, v)` for a row-major `f32` block `A` of `out.len() x v.len()`, four rows
/// at a time, on the calling thread.
pub fn rows_mixed_serial(a: &[f32], v: &[f64], out: &mut [f64]) {
    let n = v.len();
    let done = out.len() - out.len() % 4;
    let mut quads = out.chunks_exact_mut(4);
    for (q, o) in (&mut quads).enumerate() {
        let row = |k: usize| &a[(4 * q + k) * n..(4 * q + k + 1) * n];
        let rows = [row(0), row(1), row(2), row(3)];
        #[cfg(target_arch = "x86_64")]
        if has_avx2() {
            // SAFETY: the CPU supports the features the function is compiled for.
            o.copy_from_slice(&unsafe { rows4_mixed_avx2(rows, v) });
            continue;
        }
        // without hardware FMA, mul_add would be a slow library call: one row at a time
        for (x, r) in o.iter_mut().zip(rows) {
            *x = dot_mixed(r, v);
        }
    }
    for (i, x) in out.iter_mut().enumerate().skip(done) {
        *x = dot_mixed(&a[i * n..(i + 1) * n], v);
    }
}

/// `out = A v` for a row-major `f32` matrix `A` (half the memory traffic of `f64`; the
/// products are accumulated in `f64`).
pub fn matvec_mixed(a: &[f32], v: &[f64], out: &mut [f64]) {
    split_products(a, v, out, rows_mixed_serial);
}

/// `out += sum_r coef_r rows_r` for `f32` rows (each at least `out.len()` long), accumulated
/// in `f64`: the update `theta += Phi_B^T delta` one column chunk at a time. Four rows share
/// each load and store of `out`.
pub fn add_rows_mixed(rows: &[&[f32]], coef: &[f64], out: &mut [f64]) {
    assert_eq!(rows.len(), coef.len());
    assert!(rows.iter().all(|r| r.len() >= out.len()));
    let mut quads = rows.chunks_exact(4).zip(coef.chunks_exact(4));
    for (r, c) in &mut quads {
        #[cfg(target_arch = "x86_64")]
        if has_avx2() {
            // SAFETY: the CPU supports the features the function is compiled for, and every
            // row holds at least out.len() elements (asserted above).
            unsafe {
                add_rows4_mixed_avx2([r[0], r[1], r[2], r[3]], [c[0], c[1], c[2], c[3]], out)
            };
            continue;
        }
        for (row, &a) in r.iter().zip(c) {
            add_row_mixed(row, a, out);
        }
    }
    let done = rows.len() - rows.len() % 4;
    for (row, &a) in rows[done..].iter().zip(&coef[done..]) {
        add_row_mixed(row, a, out);
    }
}

/// `out += a row` with `row` in `f32`.
fn add_row_mixed(row: &[f32], a: f64, out: &mut [f64]) {
    for (o, &p) in out.iter_mut().zip(row) {
        *o += a * p as f64;
    }
}

/// Four rows of [`add_rows_mixed`] with AVX2 intrinsics.
///
/// # Safety
/// The CPU must support AVX2 and FMA, and every row must hold at least `out.len()` elements.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn add_rows4_mixed_avx2(rows: [&[f32]; 4], coef: [f64; 4], out: &mut [f64]) {
    use std::arch::x86_64::*;
    let n = out.len();
    let full = n - n % 8;
    let c = coef.map(|v| _mm256_set1_pd(v));
    let mut j = 0;
    while j < full {
        // SAFETY: j + 8 <= n and every row holds at least n elements (the caller's contract).
        unsafe {
            let o = out.as_mut_ptr().add(j);
            let mut lo = _mm256_loadu_pd(o);
            let mut hi = _mm256_loadu_pd(o.add(4));
            for r in 0..4 {
                let x = _mm256_loadu_ps(rows[r].as_ptr().add(j));
                lo = _mm256_fmadd_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(x)), c[r], lo);
                hi = _mm256_fmadd_pd(_mm256_cvtps_pd(_mm256_extractf128_ps::<1>(x)), c[r], hi);
            }
            _mm256_storeu_pd(o, lo);
            _mm256_storeu_pd(o.add(4), hi);
        }
        j += 8;
    }
    for k in full..n {
        out[k] += (0..4).map(|r| coef[r] * rows[r][k] as f64).sum::<f64>();
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
    fn distances_match_naive_sums() {
        for n in [0, 1, 7, 8, 9, 180, 517] {
            let a: Vec<f64> = (0..n)
                .map(|i| ((i * 37 % 101) as f64 - 50.0) / 7.0)
                .collect();
            let b: Vec<f64> = (0..n).map(|i| ((i * 13 % 17) as f64 - 8.0) / 3.0).collect();
            let sq: f64 = a.iter().zip(&b).map(|(x, y)| (x - y) * (x - y)).sum();
            let l1: f64 = a.iter().zip(&b).map(|(x, y)| (x - y).abs()).sum();
            assert!(
                (squared_distance(&a, &b) - sq).abs() <= 1e-12 * sq.max(1.0),
                "n = {n}"
            );
            assert!(
                (l1_distance(&a, &b) - l1).abs() <= 1e-12 * l1.max(1.0),
                "n = {n}"
            );
            assert_eq!(squared_distance(&a, &a), 0.0);
        }
    }

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

    #[test]
    fn add_rows_mixed_matches_naive_sums() {
        for (rows, n) in [(0, 5), (1, 9), (4, 8), (7, 17), (13, 300)] {
            let a: Vec<f32> = (0..rows * (n + 3))
                .map(|i| ((i * 29 % 97) as f32 - 48.0) / 11.0)
                .collect();
            // rows longer than out (a column chunk of a wider matrix)
            let r: Vec<&[f32]> = (0..rows)
                .map(|i| &a[i * (n + 3)..(i + 1) * (n + 3)])
                .collect();
            let coef: Vec<f64> = (0..rows).map(|i| (i as f64 - 3.5) / 3.0).collect();
            let start: Vec<f64> = (0..n).map(|j| (j % 5) as f64 - 2.0).collect();
            let mut out = start.clone();
            add_rows_mixed(&r, &coef, &mut out);
            for j in 0..n {
                let want = start[j] + (0..rows).map(|i| coef[i] * r[i][j] as f64).sum::<f64>();
                assert!(
                    (out[j] - want).abs() < 1e-12 * (1.0 + want.abs()),
                    "rows={rows} n={n} j={j}: {} vs {want}",
                    out[j]
                );
            }
        }
    }
}

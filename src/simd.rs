//! The CPU's vector kernels and feature checks, at the bottom of the dependency order: plain
//! `f32`/`f64` slices in, no crate types. The fused random-feature block, the `f32` cosine it
//! evaluates, the AVX2 check and the register-state reset after faer's kernels.

/// Whether the CPU has AVX2 and FMA (the vector kernels' requirement).
#[inline]
pub fn has_avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Clears the upper halves of the vector registers after a faer kernel.
///
/// faer's kernels use AVX-512 where the CPU has it and can return with the upper register
/// state dirty; every later SSE instruction (including glibc's `exp`, called per kernel entry)
/// then pays a state-transition penalty (`exp` costs about 30 times as much).
#[inline]
pub fn clear_upper_state() {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx") {
            // SAFETY: `vzeroupper` only zeroes bits 128 and up of the vector registers, which
            // hold no live values between Rust statements; the feature check above guarantees
            // the instruction exists.
            unsafe { std::arch::x86_64::_mm256_zeroupper() };
        }
    }
}

/// Branch-free `cos` for `f32` with absolute error below 1e-6 for |x| < 2e7: reduction by
/// 2 pi in two parts (Cody-Waite), then the Taylor series to x^16 on [-pi, pi]. Written so the
/// compiler vectorises it; the random-feature map evaluates `b M` of these per block.
#[inline(always)]
pub fn cos_f32(x: f32) -> f32 {
    const INV_TAU: f32 = 0.159_154_94;
    const TAU_HI: f32 = 6.281_25; // exact in few bits, so k * TAU_HI is exact
    const TAU_LO: f32 = 1.935_307_2e-3; // 2 pi - TAU_HI
    // round to nearest by the 1.5 * 2^23 trick (valid for |x| < 2^22 * 2 pi; plain `round`
    // does not vectorise without SSE4.1)
    const MAGIC: f32 = 12_582_912.0;
    let k = (x * INV_TAU + MAGIC) - MAGIC;
    let r = (x - k * TAU_HI) - k * TAU_LO;
    let r2 = r * r;
    // cos r = sum (-1)^n r^(2n) / (2n)!, n = 0..8, in Horner form.
    let mut p = 1.0 / 20_922_789_888_000.0; // 1/16!
    p = p * r2 - 1.0 / 87_178_291_200.0; // 1/14!
    p = p * r2 + 1.0 / 479_001_600.0; // 1/12!
    p = p * r2 - 1.0 / 3_628_800.0; // 1/10!
    p = p * r2 + 1.0 / 40_320.0; // 1/8!
    p = p * r2 - 1.0 / 720.0;
    p = p * r2 + 1.0 / 24.0;
    p = p * r2 - 0.5;
    p * r2 + 1.0
}

/// `exp(x)` in `f64` without a library call, so that a loop over a slice vectorises: with
/// `x = k ln 2 + r` and `|r| <= ln 2 / 2` (Cody-Waite, `ln 2` in two parts), `e^r` by its Taylor
/// series to `r^13` (truncation below 2e-17 relative), times `2^k` built in the exponent bits
/// (`k` read off the rounding by `1.5 * 2^52`). Relative error within a few units in the last
/// place for `x` in `[-708, 708]`; `x` is clamped to that range (below it `exp` is 0 to within
/// 1e-307: kernel values of far pairs).
/// `1/j!` for `j = 13` down to 2: the series of [`exp_f64`] in Horner order.
const EXP_SERIES: [f64; 12] = [
    1.0 / 6_227_020_800.0,
    1.0 / 479_001_600.0,
    1.0 / 39_916_800.0,
    1.0 / 3_628_800.0,
    1.0 / 362_880.0,
    1.0 / 40_320.0,
    1.0 / 5_040.0,
    1.0 / 720.0,
    1.0 / 120.0,
    1.0 / 24.0,
    1.0 / 6.0,
    0.5,
];

#[inline(always)]
pub fn exp_f64(x: f64) -> f64 {
    const LN2_HI: f64 = 6.931_471_803_691_238e-1;
    const LN2_LO: f64 = 1.908_214_929_270_587_7e-10;
    const ROUND: f64 = 6_755_399_441_055_744.0;
    let x = x.clamp(-708.0, 708.0);
    let t = x * std::f64::consts::LOG2_E + ROUND;
    let k = t - ROUND;
    let r = (x - k * LN2_HI) - k * LN2_LO;
    let mut p = EXP_SERIES[0];
    for c in &EXP_SERIES[1..] {
        p = p * r + c;
    }
    let er = (p * r + 1.0) * r + 1.0;
    let k = (t.to_bits() as i64).wrapping_sub(ROUND.to_bits() as i64);
    er * f64::from_bits(((k + 1023) as u64) << 52)
}

/// `v = exp(v)` for every entry ([`exp_f64`]), with AVX2 and FMA where the CPU has them.
pub fn exp_in_place(v: &mut [f64]) {
    #[cfg(target_arch = "x86_64")]
    {
        if has_avx2() {
            // SAFETY: the CPU supports the features the function is compiled for.
            unsafe { exp_in_place_avx2(v) };
            return;
        }
    }
    v.iter_mut().for_each(|x| *x = exp_f64(*x));
}

/// [`exp_in_place`] compiled for AVX2 and FMA.
///
/// # Safety
/// The CPU must support AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn exp_in_place_avx2(v: &mut [f64]) {
    // 16 values a step: four independent 4-wide chains of the series, so the fused
    // multiply-adds overlap instead of waiting on each other's latency
    let mut chunks = v.chunks_exact_mut(EXP_LANES);
    for c in &mut chunks {
        exp_lanes(
            c.try_into()
                .expect("chunks_exact_mut gives EXP_LANES values"),
        );
    }
    chunks
        .into_remainder()
        .iter_mut()
        .for_each(|x| *x = exp_f64(*x));
}

/// Values per step of [`exp_in_place_avx2`].
const EXP_LANES: usize = 16;

/// [`exp_f64`] of `EXP_LANES` values, written step by step across the lanes (the same
/// operations in the same order for each value, so the results are bit for bit
/// [`exp_f64`]'s).
#[inline(always)]
fn exp_lanes(v: &mut [f64; EXP_LANES]) {
    const LN2_HI: f64 = 6.931_471_803_691_238e-1;
    const LN2_LO: f64 = 1.908_214_929_270_587_7e-10;
    const ROUND: f64 = 6_755_399_441_055_744.0;
    let mut t = [0.0; EXP_LANES];
    let mut r = [0.0; EXP_LANES];
    for i in 0..EXP_LANES {
        let x = v[i].clamp(-708.0, 708.0);
        t[i] = x * std::f64::consts::LOG2_E + ROUND;
        let k = t[i] - ROUND;
        r[i] = (x - k * LN2_HI) - k * LN2_LO;
    }
    let mut p = [EXP_SERIES[0]; EXP_LANES];
    for c in &EXP_SERIES[1..] {
        for i in 0..EXP_LANES {
            p[i] = p[i] * r[i] + c;
        }
    }
    for i in 0..EXP_LANES {
        let er = (p[i] * r[i] + 1.0) * r[i] + 1.0;
        let k = (t[i].to_bits() as i64).wrapping_sub(ROUND.to_bits() as i64);
        v[i] = er * f64::from_bits(((k + 1023) as u64) << 52);
    }
}

/// `ln 2` in two parts for [`exp_single`]'s reduction: `0.693359375` has few bits, so
/// `k * EXP_LN2_HI_SINGLE` is exact.
const EXP_LN2_HI_SINGLE: f32 = 0.693_359_4;
/// `ln 2 - EXP_LN2_HI_SINGLE`.
const EXP_LN2_LO_SINGLE: f32 = -2.121_944_4e-4;
/// `1.5 * 2^23`: adding it rounds an `f32` to an integer and leaves the integer in the low
/// bits.
const EXP_ROUND_SINGLE: f32 = 12_582_912.0;

/// `exp(x)` to single precision, for kernel values kept in `f32`: the scheme of [`exp_f64`]
/// in `f32` fused multiply-adds (`ln 2` in two parts, the Taylor series to `r^7`, truncation
/// below 5e-9 relative), within about one unit in the last place of `f32`. `x` is clamped to `[-87, 88]`
/// (below it `exp` is under `f32`'s smallest normal number; the result there is within 2e-38
/// of it).
#[inline(always)]
pub fn exp_single(x: f64) -> f64 {
    let x = (x as f32).clamp(-87.0, 88.0);
    let t = x.mul_add(std::f32::consts::LOG2_E, EXP_ROUND_SINGLE);
    let k = t - EXP_ROUND_SINGLE;
    let r = (-k).mul_add(EXP_LN2_LO_SINGLE, (-k).mul_add(EXP_LN2_HI_SINGLE, x));
    let mut p = EXP_SERIES_SINGLE[0];
    for c in &EXP_SERIES_SINGLE[1..] {
        p = p.mul_add(r, *c);
    }
    let er = p.mul_add(r, 1.0).mul_add(r, 1.0);
    let k = (t.to_bits() as i32).wrapping_sub(EXP_ROUND_SINGLE.to_bits() as i32);
    f64::from(er * f32::from_bits(((k + 127) as u32) << 23))
}

/// A row of a Gaussian kernel tile from its dot products in `f32`:
/// `out[j] = exp(-gamma max(na + nb[j] - 2 dots[j], 0))` with the argument in `f64` and
/// [`exp_single`], in one pass (AVX2 and FMA where the CPU has them); the same values as the
/// argument's loop followed by [`exp_in_place_single`].
pub fn gaussian_row_single(dots: &[f32], na: f64, nb: &[f64], gamma: f64, out: &mut [f64]) {
    assert!(dots.len() >= out.len() && nb.len() >= out.len());
    #[cfg(target_arch = "x86_64")]
    {
        if has_avx2() {
            // SAFETY: the CPU supports the features the function is compiled for.
            unsafe { gaussian_row_single_avx2(dots, na, nb, gamma, out) };
            return;
        }
    }
    for ((o, &b), &dot) in out.iter_mut().zip(nb).zip(dots) {
        *o = exp_single(gaussian_argument(na, b, dot, gamma));
    }
}

/// `-gamma max(na + nb - 2 dot, 0)`, the exponent of a Gaussian kernel value from the squared
/// norms and the dot product (clamped at zero against rounding).
#[inline(always)]
fn gaussian_argument(na: f64, nb: f64, dot: f32, gamma: f64) -> f64 {
    -gamma * (na + nb - 2.0 * f64::from(dot)).max(0.0)
}

/// [`gaussian_row_single`] compiled for AVX2 and FMA: eight entries a step, the argument in
/// two 4-wide `f64` halves and the exponential in one 8-wide `f32` register
/// ([`exp8_single`]).
///
/// # Safety
/// The CPU must support AVX2 and FMA, and `dots` and `nb` must be at least `out.len()` long.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn gaussian_row_single_avx2(dots: &[f32], na: f64, nb: &[f64], gamma: f64, out: &mut [f64]) {
    use std::arch::x86_64::*;
    let len = out.len();
    let done = len - len % 8;
    let (na8, neg_gamma, two, zero) = (
        _mm256_set1_pd(na),
        _mm256_set1_pd(-gamma),
        _mm256_set1_pd(2.0),
        _mm256_setzero_pd(),
    );
    // -gamma max(na + nb - 2 dot, 0), as `gaussian_argument` rounds it (no contraction)
    let argument = |dot: __m128, b: __m256d| {
        let dist = _mm256_sub_pd(
            _mm256_add_pd(na8, b),
            _mm256_mul_pd(two, _mm256_cvtps_pd(dot)),
        );
        _mm256_cvtpd_ps(_mm256_mul_pd(neg_gamma, _mm256_max_pd(dist, zero)))
    };
    for j in (0..done).step_by(8) {
        // SAFETY: j + 8 <= out.len() <= dots.len(), nb.len() (the caller's contract).
        let (dt, b, o) = unsafe {
            (
                _mm256_loadu_ps(dots.as_ptr().add(j)),
                (
                    _mm256_loadu_pd(nb.as_ptr().add(j)),
                    _mm256_loadu_pd(nb.as_ptr().add(j + 4)),
                ),
                out.as_mut_ptr().add(j),
            )
        };
        let lo = argument(_mm256_castps256_ps128(dt), b.0);
        let hi = argument(_mm256_extractf128_ps(dt, 1), b.1);
        let e = exp8_single(_mm256_set_m128(hi, lo));
        // SAFETY: `o` points at out[j..j + 8] (above).
        unsafe { store8_f64(o, e) };
    }
    for (j, x) in out[done..].iter_mut().enumerate() {
        *x = exp_single(gaussian_argument(na, nb[done + j], dots[done + j], gamma));
    }
}

/// [`exp_single`] of eight `f32` lanes: the same operations in the same order, so each lane
/// is bit for bit the scalar's value (the clamp is a max then a min, which agree with `clamp`
/// on every number).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn exp8_single(x: std::arch::x86_64::__m256) -> std::arch::x86_64::__m256 {
    use std::arch::x86_64::*;
    let round = _mm256_set1_ps(EXP_ROUND_SINGLE);
    let x = _mm256_min_ps(
        _mm256_max_ps(x, _mm256_set1_ps(-87.0)),
        _mm256_set1_ps(88.0),
    );
    let t = _mm256_fmadd_ps(x, _mm256_set1_ps(std::f32::consts::LOG2_E), round);
    let k = _mm256_sub_ps(t, round);
    // fnmadd(k, c, y) = fma(-k, c, y): the negation is exact
    let r = _mm256_fnmadd_ps(k, _mm256_set1_ps(EXP_LN2_HI_SINGLE), x);
    let r = _mm256_fnmadd_ps(k, _mm256_set1_ps(EXP_LN2_LO_SINGLE), r);
    let mut p = _mm256_set1_ps(EXP_SERIES_SINGLE[0]);
    for c in &EXP_SERIES_SINGLE[1..] {
        p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(*c));
    }
    let one = _mm256_set1_ps(1.0);
    let er = _mm256_fmadd_ps(_mm256_fmadd_ps(p, r, one), r, one);
    let k = _mm256_sub_epi32(
        _mm256_castps_si256(t),
        _mm256_set1_epi32(EXP_ROUND_SINGLE.to_bits() as i32),
    );
    let scale = _mm256_slli_epi32::<23>(_mm256_add_epi32(k, _mm256_set1_epi32(127)));
    _mm256_mul_ps(er, _mm256_castsi256_ps(scale))
}

/// Writes the eight `f32` lanes of `v`, widened to `f64`, at `out[0..8]`.
///
/// # Safety
/// The CPU must support AVX2, and `out` must point at eight writable `f64`s.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn store8_f64(out: *mut f64, v: std::arch::x86_64::__m256) {
    use std::arch::x86_64::*;
    // SAFETY: `out[0..8]` is writable (the caller's contract).
    unsafe {
        _mm256_storeu_pd(out, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
        _mm256_storeu_pd(out.add(4), _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
    }
}

/// `1/j!` for `j = 7` down to 2: the series of [`exp_single`] in Horner order.
const EXP_SERIES_SINGLE: [f32; 6] = [
    1.0 / 5_040.0,
    1.0 / 720.0,
    1.0 / 120.0,
    1.0 / 24.0,
    1.0 / 6.0,
    0.5,
];

/// `v = exp(v)` to single precision for every entry ([`exp_single`]), with AVX2 and FMA where
/// the CPU has them: for kernel values that are kept in `f32`, at about twice the rate of
/// [`exp_in_place`].
pub fn exp_in_place_single(v: &mut [f64]) {
    #[cfg(target_arch = "x86_64")]
    {
        if has_avx2() {
            // SAFETY: the CPU supports the features the function is compiled for.
            unsafe { exp_in_place_single_avx2(v) };
            return;
        }
    }
    v.iter_mut().for_each(|x| *x = exp_single(*x));
}

/// [`exp_in_place_single`] compiled for AVX2 and FMA.
///
/// # Safety
/// The CPU must support AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn exp_in_place_single_avx2(v: &mut [f64]) {
    use std::arch::x86_64::*;
    // eight values a step, in f64 halves around one f32 register
    let mut chunks = v.chunks_exact_mut(8);
    for c in &mut chunks {
        let p = c.as_mut_ptr();
        // SAFETY: `p` points at the chunk's eight values.
        unsafe {
            let x = _mm256_set_m128(
                _mm256_cvtpd_ps(_mm256_loadu_pd(p.add(4))),
                _mm256_cvtpd_ps(_mm256_loadu_pd(p)),
            );
            store8_f64(p, exp8_single(x));
        }
    }
    chunks
        .into_remainder()
        .iter_mut()
        .for_each(|x| *x = exp_single(*x));
}

/// Columns per tile of [`fused_features_f32`]: the tile's slice of `W^T` (`d x 256`) stays
/// in L1/L2 while every row group of the task passes over it.
const FUSED_COLS: usize = 256;

/// `out = scale cos(X W^T + b)` for `f32` rows `x` (`n x d`), `wt = W^T` (`d x M`) and
/// `shift = b`: the fused random-feature block (the CPU twin of `rff_block_gram`'s feature
/// stage). `false` where the CPU lacks AVX2 and FMA: the caller then takes the GEMM path.
/// Each `z = sum_k x_k W[j, k]` is a chain of `f32` fused multiply-adds in `k` order.
pub fn fused_features_f32(
    x: &[f32],
    d: usize,
    wt: &[f32],
    shift: &[f32],
    scale: f32,
    out: &mut [f32],
) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        if d > 0 && has_avx2() {
            let m = shift.len();
            let n = x.len() / d;
            assert!(x.len() == n * d && wt.len() == d * m && out.len() == n * m);
            // SAFETY: the CPU supports the features the function is compiled for, and the
            // lengths are those it reads and writes (asserted above).
            unsafe { fused_features_avx2(x, n, d, wt, m, shift, scale, out) };
            return true;
        }
    }
    let _ = (x, d, wt, shift, scale, out);
    false
}

/// The kernel of [`fused_features_f32`]: tiles of 4 rows x 16 features in eight registers,
/// `W^T` loaded once per tile row and shared by the four rows.
///
/// # Safety
/// The CPU must support AVX2 and FMA; `x` is `n x d`, `wt` is `d x m`, `shift` has `m`
/// entries and `out` is `n x m`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)]
unsafe fn fused_features_avx2(
    x: &[f32],
    n: usize,
    d: usize,
    wt: &[f32],
    m: usize,
    shift: &[f32],
    scale: f32,
    out: &mut [f32],
) {
    use std::arch::x86_64::*;
    let mut tile = [0.0f32; 4 * FUSED_COLS];
    let mut pad = vec![0.0f32; 4 * d];
    // the tile's columns of W^T as 16-wide panels, [panel][k][16]: the inner loop then reads
    // consecutive cache lines instead of d rows M apart
    let mut panels = vec![0.0f32; FUSED_COLS * d];
    for c0 in (0..m).step_by(FUSED_COLS) {
        let w = FUSED_COLS.min(m - c0);
        let full = w - w % 16;
        for (p, panel) in panels[..full * d].chunks_exact_mut(16 * d).enumerate() {
            for (k, dst) in panel.chunks_exact_mut(16).enumerate() {
                let src = k * m + c0 + 16 * p;
                dst.copy_from_slice(&wt[src..src + 16]);
            }
        }
        for g in 0..n.div_ceil(4) {
            let rows = 4.min(n - 4 * g);
            let xg: &[f32] = if rows == 4 {
                &x[4 * g * d..(4 * g + 4) * d]
            } else {
                pad[..rows * d].copy_from_slice(&x[4 * g * d..]);
                pad[rows * d..].fill(0.0);
                &pad
            };
            let (x0, x1, x2, x3) = (&xg[..d], &xg[d..2 * d], &xg[2 * d..3 * d], &xg[3 * d..]);
            let mut j = 0;
            while j < full {
                let mut acc = [_mm256_setzero_ps(); 8];
                let panel = &panels[j * d..(j + 16) * d];
                for k in 0..d {
                    // SAFETY: 16 k + 16 <= 16 d = panel.len(), so both loads read inside it.
                    let (w0, w1) = unsafe {
                        let p = panel.as_ptr().add(16 * k);
                        (_mm256_loadu_ps(p), _mm256_loadu_ps(p.add(8)))
                    };
                    for (r, xr) in [x0[k], x1[k], x2[k], x3[k]].into_iter().enumerate() {
                        let xb = _mm256_set1_ps(xr);
                        acc[2 * r] = _mm256_fmadd_ps(xb, w0, acc[2 * r]);
                        acc[2 * r + 1] = _mm256_fmadd_ps(xb, w1, acc[2 * r + 1]);
                    }
                }
                for r in 0..4 {
                    // SAFETY: j + 16 <= w <= FUSED_COLS, inside tile row r.
                    unsafe {
                        let p = tile.as_mut_ptr().add(r * FUSED_COLS + j);
                        _mm256_storeu_ps(p, acc[2 * r]);
                        _mm256_storeu_ps(p.add(8), acc[2 * r + 1]);
                    }
                }
                j += 16;
            }
            for j in full..w {
                for r in 0..4 {
                    let mut z = 0.0f32;
                    for k in 0..d {
                        z = xg[r * d + k].mul_add(wt[k * m + c0 + j], z);
                    }
                    tile[r * FUSED_COLS + j] = z;
                }
            }
            let sh = &shift[c0..c0 + w];
            for r in 0..rows {
                let o = &mut out[(4 * g + r) * m + c0..(4 * g + r) * m + c0 + w];
                let z = &tile[r * FUSED_COLS..r * FUSED_COLS + w];
                for ((o, z), s) in o.iter_mut().zip(z).zip(sh) {
                    *o = scale * cos_f32(z + s);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_fused_gaussian_row_equals_the_argument_then_the_exponential() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (state >> 11) as f64 / (1u64 << 53) as f64
        };
        for len in [0, 1, 15, 16, 17, 33, 100] {
            let dots: Vec<f32> = (0..len).map(|_| (8.0 * next() - 4.0) as f32).collect();
            let nb: Vec<f64> = (0..len).map(|_| 6.0 * next()).collect();
            let (na, gamma) = (3.0 * next(), 0.05 + next());
            let mut fused = vec![f64::NAN; len];
            gaussian_row_single(&dots, na, &nb, gamma, &mut fused);
            let mut two: Vec<f64> = (0..len)
                .map(|j| -gamma * (na + nb[j] - 2.0 * f64::from(dots[j])).max(0.0))
                .collect();
            exp_in_place_single(&mut two);
            for j in 0..len {
                assert_eq!(fused[j].to_bits(), two[j].to_bits(), "len {len}, entry {j}");
                assert!(fused[j] > 0.0 && fused[j] <= 1.0);
            }
        }
    }

    use super::*;

    /// `exp_f64` and `exp_in_place` agree with the library's `exp` to 4 units in the last place
    /// over the kernels' range (and a little beyond), and give 0 far below it.
    #[test]
    fn exp_matches_the_library() {
        let mut xs: Vec<f64> = (0..200_001)
            .map(|i| -708.0 + 716.0 * i as f64 / 200_000.0)
            .collect();
        xs.extend([
            0.0,
            -0.0,
            1e-300,
            -1e-12,
            0.5 * std::f64::consts::LN_2,
            700.0,
        ]);
        let mut v = xs.clone();
        exp_in_place(&mut v);
        for (&x, &e) in xs.iter().zip(&v) {
            let want = x.exp();
            assert!(
                (e - want).abs() <= 4.0 * f64::EPSILON * want,
                "exp({x}) = {e}, not {want}"
            );
            assert_eq!(e, exp_f64(x), "{x}");
        }
        assert!(exp_f64(-1e6) < 1e-300 && exp_f64(-1e6) >= 0.0);
    }

    /// `exp_single` and `exp_in_place_single` agree with the library's `exp` of the `f32`
    /// argument to 1.5e-7 relative (about one unit in the last place of `f32`) over `f32`'s
    /// range, with each other bit for bit, and give a value below 1e-37 far below it.
    #[test]
    fn single_precision_exp_matches_the_library() {
        let mut xs: Vec<f64> = (0..=100_000)
            .map(|i| -87.0 + 175.0 * i as f64 / 100_000.0)
            .collect();
        xs.extend([0.0, -0.0, -1e-12, 0.3465, -0.3466]);
        let mut v = xs.clone();
        exp_in_place_single(&mut v);
        for (&x, &e) in xs.iter().zip(&v) {
            let want = f64::from(x as f32).exp();
            assert!(
                (e - want).abs() <= 1.5e-7 * want,
                "exp({x}) = {e}, not {want}"
            );
            assert_eq!(e, exp_single(x), "{x}");
        }
        for far in [-100.0, -1e6, f64::NEG_INFINITY] {
            let e = exp_single(far);
            assert!((0.0..1e-37).contains(&e), "exp({far}) = {e}");
        }
    }
}

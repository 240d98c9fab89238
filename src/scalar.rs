//! The floating-point types joker computes in: `f32` (the default, as in the paper) and `f64`.

pub use crate::simd::cos_f32;
use std::fmt::Debug;

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
}

/// A working-precision float: storage type of features, random features and Gram blocks.
/// Accumulations that need it (theta, `K alpha`, objectives) are always kept in `f64`.
pub trait Scalar:
    faer::traits::RealField
    + Copy
    + Default
    + PartialOrd
    + Debug
    + Send
    + Sync
    + 'static
    + std::ops::Add<Output = Self>
    + std::ops::Sub<Output = Self>
    + std::ops::Mul<Output = Self>
    + std::ops::AddAssign
    + sealed::Sealed
{
    /// Name used in messages and model files.
    const NAME: &'static str;
    /// The smallest positive normal value: below it arithmetic runs on subnormals, which x86
    /// cores execute up to a hundred times slower.
    const MIN_NORMAL: f64;
    /// Converts from `f64` (rounding to nearest).
    fn from_f64(x: f64) -> Self;
    /// Converts to `f64` (exact).
    fn to_f64(self) -> f64;
    /// `z[i] = scale * cos(z[i] + shift[i])` for a whole slice, vectorisable.
    fn scaled_cos(z: &mut [Self], shift: &[Self], scale: Self);
    /// Distance from `x` to the next smaller representable value (`x - prevfloat(x)`).
    fn gap_below(x: f64) -> f64;
    /// `v = exp(v)` to this precision, for kernel values that are kept in it
    /// ([`crate::simd::exp_in_place`], [`crate::simd::exp_in_place_single`]).
    fn exp_in_place(v: &mut [f64]);
    /// A row of a Gaussian kernel tile: `out[j] = exp(-gamma max(na + nb[j] - 2 dots[j], 0))`,
    /// the argument in `f64` and the exponential by [`Scalar::exp_in_place`] (in `f32`, one
    /// fused pass: [`crate::simd::gaussian_row_single`]).
    fn gaussian_row(dots: &[Self], na: f64, nb: &[f64], gamma: f64, out: &mut [f64]) {
        for ((o, &b), dot) in out.iter_mut().zip(nb).zip(dots) {
            *o = -gamma * (na + b - 2.0 * dot.to_f64()).max(0.0);
        }
        Self::exp_in_place(out);
    }
    /// `out_i = sum_j a_ij v_j` for a row-major `a` of `out.len() x v.len()`, accumulated in
    /// `f64`, on the calling thread.
    fn rows_dot(a: &[Self], v: &[f64], out: &mut [f64]);
    /// `out += sum_r coef_r rows_r` (each row at least `out.len()` long), in `f64`.
    fn add_rows(rows: &[&[Self]], coef: &[f64], out: &mut [f64]);
    /// The fused random-feature block `out = scale cos(X W^T + b)` on the calling thread
    /// (`x` is `n x d`, `wt = W^T` is `d x M`, `shift = b`), where a kernel exists for this
    /// type and CPU; `false` sends the caller to the GEMM path.
    fn fused_features(
        x: &[Self],
        d: usize,
        wt: &[Self],
        shift: &[Self],
        scale: Self,
        out: &mut [Self],
    ) -> bool {
        let _ = (x, d, wt, shift, scale, out);
        false
    }
}

impl Scalar for f64 {
    const NAME: &'static str = "f64";
    const MIN_NORMAL: f64 = f64::MIN_POSITIVE;
    #[inline]
    fn from_f64(x: f64) -> Self {
        x
    }
    #[inline]
    fn to_f64(self) -> f64 {
        self
    }
    fn scaled_cos(z: &mut [f64], shift: &[f64], scale: f64) {
        for (v, s) in z.iter_mut().zip(shift) {
            *v = scale * (*v + s).cos();
        }
    }
    fn gap_below(x: f64) -> f64 {
        x - f64::from_bits(x.to_bits() - 1)
    }
    fn exp_in_place(v: &mut [f64]) {
        crate::simd::exp_in_place(v);
    }
    fn rows_dot(a: &[f64], v: &[f64], out: &mut [f64]) {
        crate::linalg::rows_serial(a, v, out);
    }
    fn add_rows(rows: &[&[f64]], coef: &[f64], out: &mut [f64]) {
        for (row, &c) in rows.iter().zip(coef) {
            for (o, p) in out.iter_mut().zip(*row) {
                *o = c.mul_add(*p, *o);
            }
        }
    }
}

impl Scalar for f32 {
    const NAME: &'static str = "f32";
    const MIN_NORMAL: f64 = f32::MIN_POSITIVE as f64;
    #[inline]
    fn from_f64(x: f64) -> Self {
        x as f32
    }
    #[inline]
    fn to_f64(self) -> f64 {
        self as f64
    }
    fn scaled_cos(z: &mut [f32], shift: &[f32], scale: f32) {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma")
            {
                // SAFETY: the CPU supports the features the function is compiled for.
                unsafe { scaled_cos_avx2(z, shift, scale) };
                return;
            }
        }
        scaled_cos_portable(z, shift, scale);
    }
    fn gap_below(x: f64) -> f64 {
        let xf = x as f32;
        (xf - f32::from_bits(xf.to_bits() - 1)) as f64
    }
    fn exp_in_place(v: &mut [f64]) {
        crate::simd::exp_in_place_single(v);
    }
    fn gaussian_row(dots: &[f32], na: f64, nb: &[f64], gamma: f64, out: &mut [f64]) {
        crate::simd::gaussian_row_single(dots, na, nb, gamma, out);
    }
    fn rows_dot(a: &[f32], v: &[f64], out: &mut [f64]) {
        crate::linalg::rows_mixed_serial(a, v, out);
    }
    fn add_rows(rows: &[&[f32]], coef: &[f64], out: &mut [f64]) {
        crate::linalg::add_rows_mixed(rows, coef, out);
    }
    fn fused_features(
        x: &[f32],
        d: usize,
        wt: &[f32],
        shift: &[f32],
        scale: f32,
        out: &mut [f32],
    ) -> bool {
        crate::simd::fused_features_f32(x, d, wt, shift, scale, out)
    }
}

fn scaled_cos_portable(z: &mut [f32], shift: &[f32], scale: f32) {
    for (v, s) in z.iter_mut().zip(shift) {
        *v = scale * cos_f32(*v + s);
    }
}

/// The same loop compiled for AVX2 and FMA (8 lanes), chosen at run time.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn scaled_cos_avx2(z: &mut [f32], shift: &[f32], scale: f32) {
    for (v, s) in z.iter_mut().zip(shift) {
        *v = scale * cos_f32(*v + s);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_cos_matches_f64_cos() {
        let mut worst: f64 = 0.0;
        let mut x = -2000.0f32;
        while x < 2000.0 {
            let err = (cos_f32(x) as f64 - (x as f64).cos()).abs();
            worst = worst.max(err);
            x += 0.013_7;
        }
        assert!(worst < 1e-6, "worst abs error {worst}");
    }

    #[test]
    fn gap_below_is_one_ulp() {
        assert_eq!(f32::gap_below(1.0), 2f64.powi(-24));
        assert_eq!(f64::gap_below(1.0), 2f64.powi(-53));
        assert!((f32::gap_below(128.0) - 7.63e-6).abs() < 1e-8);
    }
}

//! CPU backend: faer GEMMs for the projections and Gram blocks, rayon for the rest.

use faer::linalg::matmul::triangular::BlockStructure;
use faer::{Accum, MatMut, MatRef, Par};
use rayon::prelude::*;

use super::Backend;
use crate::features::FeatureMap;
use crate::kernel::{Kernel, KernelKind};
use crate::scalar::Scalar;

/// The CPU backend (multi-threaded through rayon's global pool).
#[derive(Clone, Copy, Debug, Default)]
pub struct Cpu;

/// Parallelism for a product of `m x k` by `k x n`: serial below a few hundred kflops, where
/// thread start-up costs more than it saves.
fn par_for(m: usize, n: usize, k: usize) -> Par {
    if m.saturating_mul(n).saturating_mul(k) < 1 << 18 {
        Par::Seq
    } else {
        Par::rayon(0)
    }
}

/// `sum_i a_i b_i` with `a` in the working precision and `b` in `f64`, accumulated in `f64`
/// over eight lanes so it vectorises.
#[inline]
pub fn dot_mixed<T: Scalar>(a: &[T], b: &[f64]) -> f64 {
    let mut acc = [0.0f64; 8];
    let ca = a.chunks_exact(8);
    let cb = b.chunks_exact(8);
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for l in 0..8 {
            acc[l] += x[l].to_f64() * y[l];
        }
    }
    let tail: f64 = ra.iter().zip(rb).map(|(x, y)| x.to_f64() * y).sum();
    acc.iter().sum::<f64>() + tail
}

/// Clears the upper halves of the vector registers after a faer kernel.
///
/// faer's kernels use AVX-512 where the CPU has it and can return with the upper register
/// state dirty; every later SSE instruction (including glibc's `exp`, called per kernel entry)
/// then pays a state-transition penalty: measured here, `exp` took 250 ns instead of 8 ns.
#[inline]
pub(crate) fn clear_upper_state() {
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

/// Rows per parallel task in the elementwise passes.
const ROWS_PER_TASK: usize = 16;

impl<T: Scalar> Backend<T> for Cpu {
    fn name(&self) -> &'static str {
        "cpu"
    }

    fn features(&self, map: &FeatureMap<T>, x: &[T], n: usize, out: &mut [T]) {
        let (m, d) = (map.m(), map.d());
        debug_assert_eq!(x.len(), n * d);
        debug_assert_eq!(out.len(), n * m);
        // Z = X W^T, then psi = sqrt(2/M) cos(Z + b) row by row.
        let xr = MatRef::from_row_major_slice(x, n, d);
        let wt = MatRef::from_row_major_slice(map.w(), m, d).transpose();
        let z = MatMut::from_row_major_slice_mut(out, n, m);
        faer::linalg::matmul::matmul(
            z,
            Accum::Replace,
            xr,
            wt,
            T::from_f64(1.0),
            par_for(n, m, d),
        );
        clear_upper_state();
        let scale = T::from_f64((2.0 / m as f64).sqrt());
        let b = map.b();
        out.par_chunks_mut(m * ROWS_PER_TASK).for_each(|rows| {
            clear_upper_state();
            for row in rows.chunks_exact_mut(m) {
                T::scaled_cos(row, b, scale);
            }
        });
    }

    fn gram(&self, phi: &[T], n: usize, m: usize, out: &mut [f64]) {
        debug_assert_eq!(out.len(), n * n);
        // Only the lower triangle is computed (half the flops of a GEMM), then mirrored.
        let mut lower = vec![T::default(); n * n];
        let p = MatRef::from_row_major_slice(phi, n, m);
        let dst = MatMut::from_row_major_slice_mut(&mut lower, n, n);
        faer::linalg::matmul::triangular::matmul(
            dst,
            BlockStructure::TriangularLower,
            Accum::Replace,
            p,
            BlockStructure::Rectangular,
            p.transpose(),
            BlockStructure::Rectangular,
            T::from_f64(1.0),
            par_for(n, n, m),
        );
        clear_upper_state();
        for i in 0..n {
            for j in 0..=i {
                let v = lower[i * n + j].to_f64();
                out[i * n + j] = v;
                out[j * n + i] = v;
            }
        }
    }

    fn project(
        &self,
        phi: &[T],
        n: usize,
        m: usize,
        theta: &[f64],
        targets: usize,
        out: &mut [f64],
    ) {
        debug_assert_eq!(theta.len(), m * targets);
        debug_assert_eq!(out.len(), n * targets);
        let rows: Vec<Vec<f64>> = (0..n)
            .into_par_iter()
            .with_min_len(ROWS_PER_TASK)
            .map(|i| {
                clear_upper_state();
                let row = &phi[i * m..(i + 1) * m];
                (0..targets)
                    .map(|t| dot_mixed(row, &theta[t * m..(t + 1) * m]))
                    .collect()
            })
            .collect();
        for (i, r) in rows.iter().enumerate() {
            for t in 0..targets {
                out[t * n + i] = r[t];
            }
        }
    }

    fn accumulate(
        &self,
        phi: &[T],
        n: usize,
        m: usize,
        delta: &[f64],
        targets: usize,
        theta: &mut [f64],
    ) {
        debug_assert_eq!(delta.len(), n * targets);
        const COLS: usize = 2048;
        for t in 0..targets {
            let dt = &delta[t * n..(t + 1) * n];
            let active: Vec<usize> = (0..n).filter(|&i| dt[i] != 0.0).collect();
            if active.is_empty() {
                continue;
            }
            theta[t * m..(t + 1) * m]
                .par_chunks_mut(COLS)
                .enumerate()
                .for_each(|(c, th)| {
                    clear_upper_state();
                    let j0 = c * COLS;
                    for &i in &active {
                        let row = &phi[i * m + j0..i * m + j0 + th.len()];
                        let a = dt[i];
                        for (v, p) in th.iter_mut().zip(row) {
                            *v += a * p.to_f64();
                        }
                    }
                });
        }
    }

    fn kernel_tile(
        &self,
        kernel: &Kernel,
        xi: &[T],
        ni: usize,
        xj: &[T],
        nj: usize,
        d: usize,
        out: &mut [f64],
    ) {
        debug_assert_eq!(out.len(), ni * nj);
        match kernel.kind {
            KernelKind::Laplacian => {
                out.par_chunks_mut(nj).enumerate().for_each(|(i, row)| {
                    clear_upper_state();
                    let a = &xi[i * d..(i + 1) * d];
                    for (j, o) in row.iter_mut().enumerate() {
                        let b = &xj[j * d..(j + 1) * d];
                        let dist: f64 = a
                            .iter()
                            .zip(b)
                            .map(|(p, q)| (p.to_f64() - q.to_f64()).abs())
                            .sum();
                        *o = kernel.of_distance(dist);
                    }
                });
            }
            KernelKind::Gaussian | KernelKind::Matern { .. } => {
                // ||a - b||^2 = ||a||^2 + ||b||^2 - 2 a.b with the dot products from a GEMM,
                // clamped at zero against rounding.
                let mut dots = vec![T::default(); ni * nj];
                faer::linalg::matmul::matmul(
                    MatMut::from_row_major_slice_mut(&mut dots, ni, nj),
                    Accum::Replace,
                    MatRef::from_row_major_slice(xi, ni, d),
                    MatRef::from_row_major_slice(xj, nj, d).transpose(),
                    T::from_f64(1.0),
                    par_for(ni, nj, d),
                );
                clear_upper_state();
                let sq = |x: &[T], k: usize| -> Vec<f64> {
                    (0..k)
                        .map(|i| {
                            x[i * d..(i + 1) * d]
                                .iter()
                                .map(|v| v.to_f64().powi(2))
                                .sum()
                        })
                        .collect()
                };
                let (na, nb) = (sq(xi, ni), sq(xj, nj));
                let euclid = !matches!(kernel.kind, KernelKind::Gaussian);
                out.par_chunks_mut(nj).enumerate().for_each(|(i, row)| {
                    clear_upper_state();
                    for (j, o) in row.iter_mut().enumerate() {
                        let d2 = (na[i] + nb[j] - 2.0 * dots[i * nj + j].to_f64()).max(0.0);
                        *o = kernel.of_distance(if euclid { d2.sqrt() } else { d2 });
                    }
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::features::FeatureSpec;
    use crate::kernel::MaternNu;
    use crate::rng::Stream;

    fn random(n: usize, seed: u64) -> Vec<f64> {
        let mut s = Stream::new(seed, 1);
        (0..n).map(|_| 4.0 * s.uniform() - 2.0).collect()
    }

    /// Every primitive against a direct `f64` evaluation, on sizes that are not multiples of
    /// any blocking, with outputs poisoned beforehand.
    #[test]
    fn primitives_match_direct_evaluation() {
        let (n, d, m, t) = (37, 5, 301, 3);
        let x = random(n * d, 1);
        let spec = FeatureSpec {
            kernel: Kernel {
                kind: KernelKind::Gaussian,
                gamma: 0.2,
            },
            n_components: m,
            dim: d,
            seed: 9,
        };
        let map = FeatureMap::<f64>::new(spec).unwrap();
        let mut phi = vec![f64::NAN; n * m];
        Cpu.features(&map, &x, n, &mut phi);
        for i in 0..n {
            let want = map.eval_f64(&x[i * d..(i + 1) * d]);
            for j in 0..m {
                assert!((phi[i * m + j] - want[j]).abs() < 1e-12);
            }
        }
        let mut k = vec![f64::NAN; n * n];
        Cpu.gram(&phi, n, m, &mut k);
        for i in 0..n {
            for j in 0..n {
                let want: f64 = (0..m).map(|c| phi[i * m + c] * phi[j * m + c]).sum();
                assert!((k[i * n + j] - want).abs() < 1e-12);
            }
        }
        let theta = random(m * t, 2);
        let mut g = vec![f64::NAN; n * t];
        Cpu.project(&phi, n, m, &theta, t, &mut g);
        for c in 0..t {
            for i in 0..n {
                let want: f64 = (0..m).map(|j| phi[i * m + j] * theta[c * m + j]).sum();
                assert!((g[c * n + i] - want).abs() < 1e-12);
            }
        }
        let mut delta = random(n * t, 3);
        delta[4] = 0.0;
        let mut th = theta.clone();
        Cpu.accumulate(&phi, n, m, &delta, t, &mut th);
        for c in 0..t {
            for j in 0..m {
                let want = theta[c * m + j]
                    + (0..n)
                        .map(|i| phi[i * m + j] * delta[c * n + i])
                        .sum::<f64>();
                assert!((th[c * m + j] - want).abs() < 1e-12);
            }
        }
    }

    #[test]
    fn kernel_tiles_match_kernel_eval() {
        let (ni, nj, d) = (13, 7, 4);
        let (a, b) = (random(ni * d, 4), random(nj * d, 5));
        for kind in [
            KernelKind::Gaussian,
            KernelKind::Laplacian,
            KernelKind::Matern {
                nu: MaternNu::ThreeHalves,
            },
        ] {
            let kernel = Kernel { kind, gamma: 0.4 };
            let mut out = vec![f64::NAN; ni * nj];
            Cpu.kernel_tile(&kernel, &a, ni, &b, nj, d, &mut out);
            for i in 0..ni {
                for j in 0..nj {
                    let want = kernel.eval(&a[i * d..(i + 1) * d], &b[j * d..(j + 1) * d]);
                    assert!((out[i * nj + j] - want).abs() < 1e-12, "{kind:?}");
                }
            }
        }
    }
}

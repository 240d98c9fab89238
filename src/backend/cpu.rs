//! CPU backend: faer GEMMs for the projections and Gram blocks, rayon for the rest.

use faer::linalg::matmul::triangular::BlockStructure;
use faer::{Accum, MatMut, MatRef};

use crate::linalg::par_for;
use rayon::prelude::*;

use super::Backend;
use crate::features::{FeatureMap, RandomMap};
use crate::kernel::{Kernel, KernelKind, MaternNu};
use crate::scalar::Scalar;
pub(crate) use crate::simd::clear_upper_state;

/// The CPU backend (multi-threaded through rayon's global pool).
#[derive(Clone, Copy, Debug, Default)]
pub struct Cpu;

/// `out = L + L^T - diag(L)` in `f64` from the lower triangle `L` of a symmetric `n x n`
/// matrix, in square tiles so the transposed writes stay in cache.
fn mirror_lower<T: Scalar>(lower: &[T], n: usize, out: &mut [f64]) {
    const TILE: usize = 32;
    for i0 in (0..n).step_by(TILE) {
        let i1 = (i0 + TILE).min(n);
        for j0 in (0..=i0).step_by(TILE) {
            for i in i0..i1 {
                for j in j0..(j0 + TILE).min(i + 1) {
                    out[i * n + j] = lower[i * n + j].to_f64();
                }
            }
            for j in j0..(j0 + TILE).min(i1) {
                for i in i0.max(j)..i1 {
                    out[j * n + i] = lower[i * n + j].to_f64();
                }
            }
        }
    }
}

/// Rows per parallel task of the fused feature kernel: each task streams all of `W^T` once.
const FUSED_ROWS_PER_TASK: usize = 64;

/// Rows per parallel task in the elementwise passes.
const ROWS_PER_TASK: usize = 16;

/// `out (n x M) = psi(X)` for random Fourier features: the fused kernel where the CPU has one,
/// else a GEMM and a cosine pass.
pub(crate) fn random_features<T: Scalar>(map: &RandomMap<T>, x: &[T], n: usize, out: &mut [T]) {
    let (m, d) = (map.m(), map.d());
    debug_assert_eq!(x.len(), n * d);
    debug_assert_eq!(out.len(), n * m);
    let scale = T::from_f64((2.0 / m as f64).sqrt());
    let b = map.b();
    if d > 0 {
        // The fused kernel where there is one: projection and cosine per tile, W^T read
        // from cache, each feature written once.
        // (whether a kernel exists depends on the type and CPU only, so either every
        // task runs it or none writes anything)
        let fused = out
            .par_chunks_mut(m * FUSED_ROWS_PER_TASK)
            .zip(x.par_chunks(d * FUSED_ROWS_PER_TASK))
            .all(|(o, xs)| {
                clear_upper_state();
                T::fused_features(xs, d, map.wt(), b, scale, o)
            });
        if fused {
            return;
        }
    }
    // Z = X W^T, then psi = sqrt(2/M) cos(Z + b) row by row.
    let xr = MatRef::from_row_major_slice(x, n, d);
    let wt = MatRef::from_row_major_slice(map.wt(), d, m);
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
    out.par_chunks_mut(m * ROWS_PER_TASK).for_each(|rows| {
        clear_upper_state();
        for row in rows.chunks_exact_mut(m) {
            T::scaled_cos(row, b, scale);
        }
    });
}

/// `out = [psi, B]`: the rows of `psi` (`m` features each) with the constant `b` appended.
fn with_constant<T: Scalar>(psi: &[T], m: usize, b: T, out: &mut [T]) {
    // m >= 1: a random map has at least one feature
    debug_assert_eq!(psi.len() / m * (m + 1), out.len());
    out.par_chunks_mut((m + 1) * ROWS_PER_TASK)
        .zip(psi.par_chunks(m * ROWS_PER_TASK))
        .for_each(|(o, p)| {
            for (row, src) in o.chunks_exact_mut(m + 1).zip(p.chunks_exact(m)) {
                row[..m].copy_from_slice(src);
                row[m] = b;
            }
        });
}

impl<T: Scalar> Backend<T> for Cpu {
    fn name(&self) -> &'static str {
        "cpu"
    }

    fn features(&self, map: &FeatureMap<T>, x: &[T], n: usize, out: &mut [T]) {
        match map {
            FeatureMap::Random(r) => match r.bias() {
                None => random_features(r, x, n, out),
                Some(bias) => {
                    let m = r.m();
                    let mut psi = vec![T::default(); n * m];
                    random_features(r, x, n, &mut psi);
                    with_constant(&psi, m, T::from_f64(bias), out);
                }
            },
            FeatureMap::Nystrom(ny) => ny.features(self, x, n, out),
        }
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
        mirror_lower(&lower, n, out);
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
        if targets == 0 {
            return;
        }
        // One task per chunk of rows; the chunk's products land in a row-major n x targets
        // scratch, transposed into `out` afterwards.
        let fill = |block: &[T], r: &mut [f64]| {
            let mut col = vec![0.0; r.len() / targets];
            for t in 0..targets {
                T::rows_dot(block, &theta[t * m..(t + 1) * m], &mut col);
                for (i, v) in col.iter().enumerate() {
                    r[i * targets + t] = *v;
                }
            }
        };
        let mut rows = vec![0.0; n * targets];
        if n <= ROWS_PER_TASK {
            fill(phi, &mut rows);
        } else {
            rows.par_chunks_mut(ROWS_PER_TASK * targets)
                .enumerate()
                .for_each(|(c, r)| {
                    clear_upper_state();
                    let nr = r.len() / targets;
                    fill(&phi[c * ROWS_PER_TASK * m..(c * ROWS_PER_TASK + nr) * m], r);
                });
        }
        for i in 0..n {
            for t in 0..targets {
                out[t * n + i] = rows[i * targets + t];
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
                    let rows: Vec<&[T]> = active
                        .iter()
                        .map(|&i| &phi[i * m + j0..i * m + j0 + th.len()])
                        .collect();
                    let coef: Vec<f64> = active.iter().map(|&i| dt[i]).collect();
                    T::add_rows(&rows, &coef, th);
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
        let tile = Tile {
            xi,
            ni,
            xj,
            nj,
            d,
            norms: None,
        };
        kernel_tile_on(kernel, &tile, out, &mut Vec::new(), true);
    }
}

/// The operands of one kernel tile: the rows `xi` (`ni x d`) against the rows `xj` (`nj x d`),
/// with their squared norms ([`squared_norms`]) where the caller keeps them for many tiles.
#[derive(Clone, Copy)]
pub(crate) struct Tile<'a, T> {
    pub xi: &'a [T],
    pub ni: usize,
    pub xj: &'a [T],
    pub nj: usize,
    pub d: usize,
    /// `||x||^2` of the rows of `xi` and of `xj`, or `None` to compute them here.
    pub norms: Option<(&'a [f64], &'a [f64])>,
}

/// The squared norms, in f64, of the first `rows` rows of `x` (`d` values each), as the
/// Gaussian and Matern tiles take them.
pub(crate) fn squared_norms<T: Scalar>(x: &[T], rows: usize, d: usize) -> Vec<f64> {
    (0..rows)
        .map(|i| {
            x[i * d..(i + 1) * d]
                .iter()
                .map(|v| v.to_f64().powi(2))
                .sum()
        })
        .collect()
}

/// [`Backend::kernel_tile`] on the host: `out (ni x nj) = k(xi, xj)`, its rows in parallel
/// where `parallel`, else all in the calling thread (for callers that run tiles in parallel
/// themselves: a tile then costs no fork and join). `dots` is scratch for the GEMM's dot
/// products, kept between the tiles of one caller.
pub(crate) fn kernel_tile_on<T: Scalar>(
    kernel: &Kernel,
    tile: &Tile<'_, T>,
    out: &mut [f64],
    dots: &mut Vec<T>,
    parallel: bool,
) {
    let Tile {
        xi,
        ni,
        xj,
        nj,
        d,
        norms,
    } = *tile;
    // a public trait method's work: a wrong buffer is a caller's bug, said plainly (once per
    // tile)
    assert!(
        out.len() == ni * nj && xi.len() >= ni * d && xj.len() >= nj * d,
        "kernel_tile: out must hold ni x nj = {ni} x {nj} values (has {}), xi and xj ni x d and nj x d",
        out.len()
    );
    let rows = |finish: &(dyn Fn(usize, &mut [f64]) + Sync), out: &mut [f64]| {
        if parallel {
            out.par_chunks_mut(nj)
                .enumerate()
                .for_each(|(i, row)| finish(i, row));
        } else {
            out.chunks_mut(nj)
                .enumerate()
                .for_each(|(i, row)| finish(i, row));
        }
    };
    match kernel.kind {
        KernelKind::Laplacian => {
            let finish = |i: usize, row: &mut [f64]| {
                clear_upper_state();
                let a = &xi[i * d..(i + 1) * d];
                for (j, o) in row.iter_mut().enumerate() {
                    let b = &xj[j * d..(j + 1) * d];
                    *o = a
                        .iter()
                        .zip(b)
                        .map(|(p, q)| (p.to_f64() - q.to_f64()).abs())
                        .sum();
                }
                of_distances::<T>(kernel, row);
            };
            rows(&finish, out);
        }
        KernelKind::Gaussian | KernelKind::Matern { .. } => {
            // ||a - b||^2 = ||a||^2 + ||b||^2 - 2 a.b with the dot products from a GEMM,
            // clamped at zero against rounding.
            dots.clear();
            dots.resize(ni * nj, T::default());
            faer::linalg::matmul::matmul(
                MatMut::from_row_major_slice_mut(dots, ni, nj),
                Accum::Replace,
                MatRef::from_row_major_slice(xi, ni, d),
                MatRef::from_row_major_slice(xj, nj, d).transpose(),
                T::from_f64(1.0),
                if parallel {
                    par_for(ni, nj, d)
                } else {
                    faer::Par::Seq
                },
            );
            clear_upper_state();
            let owned;
            let (na, nb) = match norms {
                Some(norms) => norms,
                None => {
                    owned = (squared_norms(xi, ni, d), squared_norms(xj, nj, d));
                    (&owned.0[..], &owned.1[..])
                }
            };
            let euclid = !matches!(kernel.kind, KernelKind::Gaussian);
            let gamma = kernel.gamma;
            let norms_b: Vec<f64> = nb.iter().map(|v| v.sqrt()).collect();
            let widest_b = norms_b.iter().fold(0.0f64, |m, &v| m.max(v));
            let dots = &dots[..];
            let finish = |i: usize, row: &mut [f64]| {
                clear_upper_state();
                let dots = &dots[i * nj..(i + 1) * nj];
                if euclid {
                    for ((o, &nbj), dot) in row.iter_mut().zip(nb).zip(dots) {
                        *o = (na[i] + nbj - 2.0 * dot.to_f64()).max(0.0).sqrt();
                    }
                    of_distances::<T>(kernel, row);
                } else {
                    // exp(-gamma d^2) by the vectorised exp to the working precision, a
                    // row at a time
                    T::gaussian_row(dots, na[i], nb, gamma, row);
                }
                let a = &xi[i * d..(i + 1) * d];
                let exact = |j: usize| {
                    let squared = squared_distance(a, &xj[j * d..(j + 1) * d]);
                    kernel.of_distance(if euclid { squared.sqrt() } else { squared })
                };
                redo_cancelled::<T>(kernel, na[i].sqrt(), &norms_b, widest_b, exact, row);
            };
            rows(&finish, out);
        }
    }
}

/// The largest error a kernel value may take from the rounding of its dot product, `2^-21`:
/// eight units of `f32` rounding at 1.
const CANCELLED_KERNEL_ERROR: f64 = 1.0 / (1u64 << 21) as f64;

/// Recomputes, from the rows' differences in `f64`, the values of a kernel row whose distance
/// `||a||^2 + ||b||^2 - 2 a.b` lost more than [`CANCELLED_KERNEL_ERROR`] to cancellation.
///
/// A dot product in the working precision errs by about `eps ||a|| ||b||`, so a Gaussian value
/// `k = exp(-gamma d^2)` by `2 gamma k eps ||a|| ||b||`: negligible between rows of typical norm,
/// large between close rows far from the origin (outlying rows after standardizing). Those
/// errors line up among near-duplicate outliers, and on such data the `f32` kernel matrix
/// was indefinite by more than a small ridge (`1/C` at C = 100). The test needs the formed
/// value and the norms only; `norm_a = ||a||`, `norms_b[j] = ||b_j||`, `widest_b` their
/// maximum, `exact(j)` the value at column `j` from the rows' differences in `f64`.
fn redo_cancelled<T: Scalar>(
    kernel: &Kernel,
    norm_a: f64,
    norms_b: &[f64],
    widest_b: f64,
    exact: impl Fn(usize) -> f64,
    row: &mut [f64],
) {
    let eps = T::gap_below(1.0);
    // a value k at column j is redone when 2 gamma k eps ||a|| ||b_j|| > the bound
    let reach = CANCELLED_KERNEL_ERROR / (2.0 * kernel.gamma * eps * norm_a);
    if widest_b <= reach {
        return; // no value (each at most 1) can pass it
    }
    for (j, (k, &norm_b)) in row.iter_mut().zip(norms_b).enumerate() {
        if *k * norm_b > reach {
            *k = exact(j);
        }
    }
}

/// `||a - b||^2` in `f64`.
fn squared_distance<T: Scalar>(a: &[T], b: &[T]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(p, q)| (p.to_f64() - q.to_f64()).powi(2))
        .sum()
}

/// `row = k(r)` in place for the distances `r` of a Laplacian or Matern kernel (Euclidean for
/// Matern, L1 for the Laplacian), the exponential by the vectorised exp of the working
/// precision: `exp(-gamma r)`, times `1 + t` or `1 + t + t^2 / 3` of `t = sqrt(3) gamma r` or
/// `sqrt(5) gamma r` for Matern 3/2 and 5/2 ([`Kernel::of_distance`]).
fn of_distances<T: Scalar>(kernel: &Kernel, row: &mut [f64]) {
    let g = kernel.gamma;
    let (c, poly): (f64, fn(f64) -> f64) = match kernel.kind {
        KernelKind::Matern {
            nu: MaternNu::ThreeHalves,
        } => (3f64.sqrt(), |t| 1.0 + t),
        KernelKind::Matern {
            nu: MaternNu::FiveHalves,
        } => (5f64.sqrt(), |t| 1.0 + t + t * t / 3.0),
        _ => (1.0, |_| 1.0),
    };
    let mut poly_t = Vec::new();
    if c != 1.0 {
        poly_t.extend(row.iter().map(|&r| poly(c * g * r)));
    }
    row.iter_mut().for_each(|r| *r *= -c * g);
    T::exp_in_place(row);
    if c != 1.0 {
        row.iter_mut().zip(&poly_t).for_each(|(v, p)| *v *= p);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::features::FeatureSpec;
    use crate::rng::Stream;
    use crate::simd::fused_features_f32;

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
        let rm = RandomMap::<f64>::new(spec).unwrap();
        let map = FeatureMap::Random(rm.clone());
        let mut phi = vec![f64::NAN; n * m];
        Cpu.features(&map, &x, n, &mut phi);
        for i in 0..n {
            let want = rm.eval_f64(&x[i * d..(i + 1) * d]);
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

    /// The `f32` paths (the fused feature kernel where the CPU has one, the four-row products
    /// and updates) against `f64` evaluations, on sizes that cross every blocking: rows not a
    /// multiple of 4 and more than one task, features past one 256-wide tile and not a
    /// multiple of 16.
    #[test]
    fn f32_primitives_match_f64_reference() {
        for (n, d, m) in [(37, 5, 301), (70, 28, 600), (3, 1, 16)] {
            let x: Vec<f32> = random(n * d, 11).iter().map(|&v| v as f32).collect();
            let spec = FeatureSpec {
                kernel: Kernel {
                    kind: KernelKind::Gaussian,
                    gamma: 0.3,
                },
                n_components: m,
                dim: d,
                seed: 4,
            };
            let rm = RandomMap::<f32>::new(spec).unwrap();
            let map = FeatureMap::Random(rm.clone());
            let mut phi = vec![f32::NAN; n * m];
            Cpu.features(&map, &x, n, &mut phi);
            let s = (2.0 / m as f64).sqrt();
            let eps = f32::EPSILON as f64;
            for i in 0..n {
                let xi: Vec<f64> = x[i * d..(i + 1) * d].iter().map(|&v| v as f64).collect();
                let want = rm.eval_f64(&xi);
                for j in 0..m {
                    let mag = 1.0
                        + (rm.b()[j] as f64).abs()
                        + (0..d)
                            .map(|k| (rm.w_at(j, k) as f64 * xi[k]).abs())
                            .sum::<f64>();
                    let tol = s * (d as f64 + 4.0) * eps * mag;
                    let got = phi[i * m + j] as f64;
                    assert!(
                        (got - want[j]).abs() <= tol,
                        "n={n} d={d} m={m} phi[{i},{j}] = {got}, want {} (tol {tol})",
                        want[j]
                    );
                }
            }
            // the products and updates accumulate the f32 features in f64
            let t = 2;
            let theta = random(m * t, 12);
            let mut g = vec![f64::NAN; n * t];
            Cpu.project(&phi, n, m, &theta, t, &mut g);
            for c in 0..t {
                for i in 0..n {
                    let want: f64 = (0..m)
                        .map(|j| phi[i * m + j] as f64 * theta[c * m + j])
                        .sum();
                    assert!((g[c * n + i] - want).abs() < 1e-12, "project {c} {i}");
                }
            }
            let mut delta = random(n * t, 13);
            delta[1] = 0.0;
            let mut th = theta.clone();
            Cpu.accumulate(&phi, n, m, &delta, t, &mut th);
            for c in 0..t {
                for j in 0..m {
                    let want = theta[c * m + j]
                        + (0..n)
                            .map(|i| phi[i * m + j] as f64 * delta[c * n + i])
                            .sum::<f64>();
                    assert!((th[c * m + j] - want).abs() < 1e-12, "accumulate {c} {j}");
                }
            }
        }
    }

    /// Where the CPU has AVX2 and FMA the fused kernel runs (and is what the test above
    /// checked); elsewhere it declines and the GEMM path runs.
    #[test]
    fn fused_kernel_runs_where_the_cpu_has_it() {
        let (x, wt, b) = ([0.5f32, -1.0], [1.0f32, 2.0], [0.0f32]);
        let mut out = [f32::NAN; 2];
        let ran = fused_features_f32(&x, 1, &wt[..1], &b, 1.0, &mut out);
        #[cfg(target_arch = "x86_64")]
        assert_eq!(
            ran,
            std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma")
        );
        if ran {
            assert!((out[0] - 0.5f32.cos()).abs() < 1e-6 && (out[1] - 1.0f32.cos()).abs() < 1e-6);
        }
    }

    /// Every kernel's tiles against `Kernel::eval` in f64: to 1e-12 from f64 rows, to 2e-6
    /// from f32 rows (the f32 dot products and the single-precision exp), on rows of 37
    /// columns so that the vectorised exp's lanes and remainder both run.
    #[test]
    fn kernel_tiles_match_kernel_eval() {
        let (ni, nj, d) = (13, 37, 4);
        let (a, b) = (random(ni * d, 4), random(nj * d, 5));
        let (af, bf): (Vec<f32>, Vec<f32>) = (
            a.iter().map(|&v| v as f32).collect(),
            b.iter().map(|&v| v as f32).collect(),
        );
        let (ar, br): (Vec<f64>, Vec<f64>) = (
            af.iter().map(|&v| f64::from(v)).collect(),
            bf.iter().map(|&v| f64::from(v)).collect(),
        );
        for kind in [
            KernelKind::Gaussian,
            KernelKind::Laplacian,
            KernelKind::Matern { nu: MaternNu::Half },
            KernelKind::Matern {
                nu: MaternNu::ThreeHalves,
            },
            KernelKind::Matern {
                nu: MaternNu::FiveHalves,
            },
        ] {
            let kernel = Kernel { kind, gamma: 0.4 };
            let mut out = vec![f64::NAN; ni * nj];
            Cpu.kernel_tile(&kernel, &a, ni, &b, nj, d, &mut out);
            let mut single = vec![f64::NAN; ni * nj];
            Cpu.kernel_tile(&kernel, &af, ni, &bf, nj, d, &mut single);
            for i in 0..ni {
                for j in 0..nj {
                    let want = kernel.eval(&a[i * d..(i + 1) * d], &b[j * d..(j + 1) * d]);
                    assert!((out[i * nj + j] - want).abs() < 1e-12, "{kind:?}");
                    let want = kernel.eval(&ar[i * d..(i + 1) * d], &br[j * d..(j + 1) * d]);
                    let got = single[i * nj + j];
                    assert!((got - want).abs() < 2e-6, "{kind:?} f32: {got} vs {want}");
                }
            }
        }
    }

    /// Rows close to each other and far from the origin (an outlying cluster, or columns that
    /// are not centred): the f32 tile keeps its values to f32 precision although the dot
    /// products are 1e4 times larger than the distances (they erred by 1e-4 before the
    /// cancelled values were redone).
    #[test]
    fn close_rows_far_from_the_origin_keep_their_kernel_values() {
        let (ni, nj, d) = (9, 40, 8);
        let far =
            |v: Vec<f64>| -> Vec<f32> { v.iter().map(|&x| (60.0 + 0.3 * x) as f32).collect() };
        let (af, bf) = (far(random(ni * d, 11)), far(random(nj * d, 12)));
        let wide = |v: &[f32]| -> Vec<f64> { v.iter().map(|&x| f64::from(x)).collect() };
        let (ar, br) = (wide(&af), wide(&bf));
        for kind in [
            KernelKind::Gaussian,
            KernelKind::Matern {
                nu: MaternNu::FiveHalves,
            },
        ] {
            let kernel = Kernel { kind, gamma: 0.5 };
            let mut single = vec![f64::NAN; ni * nj];
            Cpu.kernel_tile(&kernel, &af, ni, &bf, nj, d, &mut single);
            let mut worst = 0.0f64;
            for i in 0..ni {
                for j in 0..nj {
                    let want = kernel.eval(&ar[i * d..(i + 1) * d], &br[j * d..(j + 1) * d]);
                    worst = worst.max((single[i * nj + j] - want).abs());
                }
            }
            assert!(worst < 1e-6, "{kind:?}: worst error {worst:e}");
        }
    }
}

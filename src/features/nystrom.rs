//! Nystrom feature maps: `psi(x) = L^-1 k(C, x)` for centres `C` with `K_CC = L L^T`, so that
//! `psi(x)^T psi(z) = k(x, C) K_CC^-1 k(C, z)`, the kernel projected on the span of the centres.
//!
//! The factor comes from a Cholesky factorisation that skips dependent centres: centre `j` is
//! kept only while its residual `k(c_j, c_j) - ||L^-1 k(C_<j, c_j)||^2` (its squared distance,
//! in the kernel's feature space, from the span of the centres kept before it) is above a floor.
//! Duplicate rows (common in binary data) and near-duplicates would otherwise make `K_CC`
//! singular. The floor is `eps^(2/3)` of the working precision: kernel tiles computed from rows
//! in that precision carry errors of order `eps`, which `L^-1` amplifies by at most
//! `1/sqrt(floor)`; `eps^(2/3)` makes the residual dropped and the noise admitted equal.
//! The features' triangular solve runs in the working precision for the same reason: its
//! rounding is a relative perturbation of `L` of order `eps`, amplified as the tile's is.
//!
//! Because the factorisation is sequential, a map of the first `m1` of an ordered set of
//! centres is a prefix of the map of the first `m2 > m1`: its features are the same numbers.
//!
//! A trained model needs neither `L` nor `theta`: `f(x) = psi(x)^T theta = k(x, C) u` with
//! `u = L^-T theta`, an exact-kernel model over the centres.

use faer::linalg::matmul::triangular::BlockStructure;
use faer::{Accum, Mat, MatMut, MatRef, Par};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::backend::Backend;
use crate::data::Features;
use crate::error::{JokerError, Result, invalid};
use crate::kernel::Kernel;
use crate::rng::{Stream, streams};
use crate::scalar::Scalar;

/// How the centres of a Nystrom map are chosen from the training rows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Centers {
    /// Uniformly without replacement (seeded).
    Uniform,
    /// k-means++ seeding then Lloyd iterations on a sample of rows: the centres are cluster
    /// means (Zhang and Kwok's clustered Nystrom), not training rows.
    KMeans,
    /// Rows drawn by approximate ridge leverage scores, from a uniform pilot map. The default:
    /// first or within 0.1 points of the first on ijcnn1, a9a, w8a and cpusmall over two
    /// seeds, where each other rule fell behind on one of them (`docs/nystrom.md`).
    #[default]
    Leverage,
}

impl Centers {
    /// The name used by the CLI and the model's training record.
    pub fn name(self) -> &'static str {
        match self {
            Centers::Uniform => "uniform",
            Centers::KMeans => "kmeans",
            Centers::Leverage => "leverage",
        }
    }
}

/// Rows the k-means and leverage rules look at: every row up to this many, else a uniform
/// sample of this many (or of `CANDIDATES_PER_CENTER` per centre, whichever is more).
pub const CANDIDATE_ROWS: usize = 50_000;
/// Candidate rows per centre at least (for large `m`).
pub const CANDIDATES_PER_CENTER: usize = 10;
/// Lloyd iterations after the k-means++ seeding.
pub const KMEANS_ITERS: usize = 5;
/// Centres per panel of the blocked factorisation.
const PANEL: usize = 128;

/// A Nystrom map in working precision `T`.
#[derive(Clone, Debug)]
pub struct NystromMap<T> {
    kernel: Kernel,
    rule: Centers,
    /// Centres asked for.
    requested: usize,
    /// The kept centres, row-major `r x d`.
    centers: Vec<T>,
    d: usize,
    /// `L`, lower triangular `r x r`.
    l: Mat<f64>,
    /// `L` rounded to the working precision, for the features' triangular solve.
    lw: Mat<T>,
}

/// `v` in precision `T`, zero where it is below the square root of the smallest normal value.
/// Such values (kernel values of far rows of sparse data, factor entries between far centres,
/// what the solve makes of them) are zero to this precision beside the features' scale, and
/// their products would be subnormal: x86 cores run those up to a hundred times slower, and a
/// few hundred thousand of them in w8a's features made every product with them slower by half.
fn flushed<T: Scalar>(v: f64) -> T {
    T::from_f64(if v.abs() < T::MIN_NORMAL.sqrt() {
        0.0
    } else {
        v
    })
}

/// Bytes a Nystrom map of `m` centres over `n` rows of `d` features takes at its peak: the
/// centres' kernel matrix, its factor and the factor in the working precision (`m^2` values
/// each, counted in f64, all alive while the map is formed), the centres, and the candidate
/// rows of the k-means and leverage rules.
pub fn memory(n: usize, m: usize, d: usize) -> usize {
    let m = m.min(n) as u128;
    let cand = (n as u128).min(CANDIDATE_ROWS.max(CANDIDATES_PER_CENTER * m as usize) as u128);
    let bytes = 3 * m * m * 8 + m * (d as u128) * 8 + cand * (d as u128) * 8;
    usize::try_from(bytes).unwrap_or(usize::MAX)
}

/// The residual floor of the factorisation in precision `T` (see the module documentation).
pub fn residual_floor<T: Scalar>() -> f64 {
    T::gap_below(1.0).powf(2.0 / 3.0)
}

impl<T: Scalar> NystromMap<T> {
    /// The map of `m` centres chosen from the rows of `x` by `rule` (seeded by `seed`;
    /// `lambda` is the ridge of the leverage scores), factorised with `backend`'s kernel tiles.
    pub fn fit(
        kernel: Kernel,
        rule: Centers,
        m: usize,
        x: &Features<T>,
        lambda: f64,
        seed: u64,
        backend: &dyn Backend<T>,
    ) -> Result<Self> {
        kernel.validate()?;
        let (n, d) = (x.nrows(), x.ncols());
        if m == 0 {
            return Err(invalid(
                "n_components",
                "a Nystrom map needs at least one centre",
            ));
        }
        if n == 0 {
            return Err(JokerError::EmptyData(
                "Nystrom centres are chosen from the training rows; there are none".into(),
            ));
        }
        let m = m.min(n);
        let centers = match rule {
            Centers::Uniform => rows_of(x, &uniform_rows(n, m, seed)),
            Centers::KMeans => kmeans(x, m, seed),
            Centers::Leverage => rows_of(x, &leverage_rows(x, m, kernel, lambda, seed, backend)?),
        };
        let mut map = Self::from_centers(kernel, centers, d, backend)?;
        map.rule = rule;
        map.requested = m;
        Ok(map)
    }

    /// The map of the given centres (row-major, `d` wide), in their order, dependent centres
    /// dropped.
    pub fn from_centers(
        kernel: Kernel,
        centers: Vec<T>,
        d: usize,
        backend: &dyn Backend<T>,
    ) -> Result<Self> {
        kernel.validate()?;
        let m = centers.len().checked_div(d).unwrap_or(0);
        if m == 0 || centers.len() != m * d {
            return Err(invalid(
                "centers",
                format!(
                    "{} values are not a whole number of {d}-wide centres",
                    centers.len()
                ),
            ));
        }
        let mut kcc = vec![0.0; m * m];
        backend.kernel_tile(&kernel, &centers, m, &centers, m, d, &mut kcc);
        let (kept, l) = factor_skipping_dependent(&kcc, m, residual_floor::<T>())?;
        let centers: Vec<T> = kept
            .iter()
            .flat_map(|&j| centers[j * d..(j + 1) * d].iter().copied())
            .collect();
        let lw = Mat::from_fn(l.nrows(), l.ncols(), |i, j| flushed::<T>(l[(i, j)]));
        Ok(NystromMap {
            kernel,
            rule: Centers::Uniform,
            requested: m,
            centers,
            d,
            l,
            lw,
        })
    }

    /// Records the rule and the number of centres asked for (for a map made from centres
    /// chosen elsewhere).
    pub fn set_rule(&mut self, rule: Centers, requested: usize) {
        self.rule = rule;
        self.requested = requested;
    }

    /// Number of features: the kept centres `r`.
    pub fn m(&self) -> usize {
        self.l.nrows()
    }
    /// Input dimension `d`.
    pub fn d(&self) -> usize {
        self.d
    }
    /// The kernel.
    pub fn kernel(&self) -> &Kernel {
        &self.kernel
    }
    /// How the centres were chosen.
    pub fn rule(&self) -> Centers {
        self.rule
    }
    /// Centres asked for (before dependent ones were dropped).
    pub fn requested(&self) -> usize {
        self.requested
    }
    /// The kept centres, row-major `r x d`.
    pub fn centers(&self) -> &[T] {
        &self.centers
    }
    /// The factor `L` (`K_CC = L L^T` over the kept centres).
    pub fn factor(&self) -> MatRef<'_, f64> {
        self.l.as_ref()
    }

    /// `out (n x r) = psi(X) = K(X, C) L^-T` for the `n` rows of `x`: the tile from the
    /// backend in `f64`, rounded once to `T`, then the triangular solve in `T`, in place. In
    /// `f32` the solve (`n r^2` flops, most of a map's set-up) runs at twice the f64 rate,
    /// and its rounding is of the order the f32 tile already carries (module documentation).
    pub fn features(&self, backend: &dyn Backend<T>, x: &[T], n: usize, out: &mut [T]) {
        let (r, d) = (self.m(), self.d);
        debug_assert_eq!(out.len(), n * r);
        if n == 0 {
            return;
        }
        let mut tile = vec![0.0; n * r];
        backend.kernel_tile(&self.kernel, x, n, &self.centers, r, d, &mut tile);
        out.par_chunks_mut(r.max(1) * 64)
            .zip(tile.par_chunks(r.max(1) * 64))
            .for_each(|(o, t)| {
                for (o, &t) in o.iter_mut().zip(t) {
                    *o = flushed(t);
                }
            });
        drop(tile);
        // a row-major `n x r` buffer is `psi^T` column-major: `psi^T = L^-1 K^T`
        faer::linalg::triangular_solve::solve_lower_triangular_in_place(
            self.lw.as_ref(),
            MatMut::from_column_major_slice_mut(out, r, n),
            crate::linalg::par_for(n, r, r),
        );
        crate::backend::cpu::clear_upper_state();
        out.par_chunks_mut(r.max(1) * 64).for_each(|o| {
            for v in o {
                *v = flushed(v.to_f64());
            }
        });
    }

    /// The coefficients `u = L^-T theta` on the centres (`theta` column-major `r x T`): the
    /// model `f(x) = psi(x)^T theta = k(x, C) u`.
    pub fn center_coefficients(&self, theta: &[f64], targets: usize) -> Vec<f64> {
        let mut u = theta[..self.m() * targets].to_vec();
        self.solve_lt(&mut u, targets);
        u
    }

    /// `v <- K_CC^-1 v = L^-T L^-1 v` for `v` of `r x T` (column-major).
    pub fn solve_kcc(&self, v: &mut [f64], targets: usize) {
        self.solve_l(v, targets);
        self.solve_lt(v, targets);
    }

    /// `v <- L^-1 v` for `v` of `r x T` (column-major).
    pub fn solve_l(&self, v: &mut [f64], targets: usize) {
        let r = self.m();
        let v = MatMut::from_column_major_slice_mut(&mut v[..r * targets], r, targets);
        faer::linalg::triangular_solve::solve_lower_triangular_in_place(
            self.l.as_ref(),
            v,
            crate::linalg::par_for(r, targets, r),
        );
        crate::simd::clear_upper_state();
    }

    /// `v <- L^-T v` for `v` of `r x T` (column-major).
    pub fn solve_lt(&self, v: &mut [f64], targets: usize) {
        let r = self.m();
        let v = MatMut::from_column_major_slice_mut(&mut v[..r * targets], r, targets);
        faer::linalg::triangular_solve::solve_upper_triangular_in_place(
            self.l.transpose(),
            v,
            crate::linalg::par_for(r, targets, r),
        );
        crate::simd::clear_upper_state();
    }

    /// `v <- L^T v` for `v` of `r x T` (column-major).
    pub fn times_lt(&self, v: &mut [f64], targets: usize) {
        let r = self.m();
        let mut out = vec![0.0; r * targets];
        faer::linalg::matmul::triangular::matmul(
            MatMut::from_column_major_slice_mut(&mut out, r, targets),
            BlockStructure::Rectangular,
            Accum::Replace,
            self.l.transpose(),
            BlockStructure::TriangularUpper,
            MatRef::from_column_major_slice(&v[..r * targets], r, targets),
            BlockStructure::Rectangular,
            1.0,
            Par::Seq,
        );
        v[..r * targets].copy_from_slice(&out);
    }

    /// `psi = K L^-T` (`n x r`, row-major, `f64`) of a kernel tile `K = K(X, C)`: one
    /// triangular solve `psi^T = L^-1 K^T` (a row-major `n x r` buffer is `K^T` column-major).
    pub fn features_of_tile(&self, tile: &[f64], n: usize) -> Vec<f64> {
        let r = self.m();
        let mut psi = tile[..n * r].to_vec();
        faer::linalg::triangular_solve::solve_lower_triangular_in_place(
            self.l.as_ref(),
            MatMut::from_column_major_slice_mut(&mut psi, r, n),
            crate::linalg::par_for(n, r, r),
        );
        crate::backend::cpu::clear_upper_state();
        psi
    }

    /// One line for the training record: rule, centres kept of asked for.
    pub fn describe(&self) -> String {
        let dropped = self.requested.saturating_sub(self.m());
        let mut s = format!("nystrom, {} {} centres", self.m(), self.rule.name());
        if dropped > 0 {
            s.push_str(&format!(
                " ({dropped} of {} dropped as dependent: residual below {:.1e})",
                self.requested,
                residual_floor::<T>()
            ));
        }
        s
    }
}

/// Rows `idx` of `x`, dense and row-major.
fn rows_of<T: Scalar>(x: &Features<T>, idx: &[usize]) -> Vec<T> {
    let mut out = vec![T::default(); idx.len() * x.ncols()];
    x.gather_dense(idx, &mut out);
    out
}

/// The first `m` entries of a seeded uniform permutation of `0..n` (a partial Fisher-Yates
/// over a virtual array, so memory is `O(m)` and a shorter prefix is a prefix of a longer).
pub fn uniform_rows(n: usize, m: usize, seed: u64) -> Vec<usize> {
    uniform_rows_on(n, m, Stream::new(seed, streams::NYSTROM_CENTERS))
}

fn uniform_rows_on(n: usize, m: usize, mut rng: Stream) -> Vec<usize> {
    let m = m.min(n);
    let mut moved = std::collections::HashMap::<usize, usize>::new();
    (0..m)
        .map(|i| {
            let j = i + rng.below(n - i);
            let at_j = *moved.get(&j).unwrap_or(&j);
            let at_i = *moved.get(&i).unwrap_or(&i);
            moved.insert(j, at_i);
            at_j
        })
        .collect()
}

/// The candidate rows of the k-means and leverage rules: all rows, or a seeded sample.
fn candidates(n: usize, m: usize, seed: u64) -> Vec<usize> {
    let want = CANDIDATE_ROWS.max(CANDIDATES_PER_CENTER.saturating_mul(m));
    if n <= want {
        (0..n).collect()
    } else {
        uniform_rows_on(n, want, Stream::new(seed, streams::NYSTROM_CANDIDATES))
    }
}

fn sq_dist(a: &[f64], b: &[f64]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(p, q)| {
            let t = p - q;
            t * t
        })
        .sum()
}

/// `m` centres by k-means++ seeding (each next centre a candidate drawn with probability
/// proportional to its squared distance from the nearest centre so far) and
/// [`KMEANS_ITERS`] Lloyd iterations; empty clusters keep their centre.
fn kmeans<T: Scalar>(x: &Features<T>, m: usize, seed: u64) -> Vec<T> {
    let d = x.ncols();
    let idx = candidates(x.nrows(), m, seed);
    let pts: Vec<f64> = rows_of(x, &idx).iter().map(|v| v.to_f64()).collect();
    let nc = idx.len();
    let m = m.min(nc);
    let mut rng = Stream::new(seed, streams::NYSTROM_CENTERS);
    let row = |i: usize| &pts[i * d..(i + 1) * d];
    let mut c: Vec<f64> = Vec::with_capacity(m * d);
    c.extend_from_slice(row(rng.below(nc)));
    let mut near: Vec<f64> = (0..nc)
        .into_par_iter()
        .map(|i| sq_dist(row(i), &c[..d]))
        .collect();
    for _ in 1..m {
        let total: f64 = near.iter().sum();
        let pick = if total > 0.0 {
            let mut target = rng.uniform() * total;
            let mut pick = nc - 1;
            for (i, &w) in near.iter().enumerate() {
                if target < w {
                    pick = i;
                    break;
                }
                target -= w;
            }
            pick
        } else {
            rng.below(nc) // every candidate sits on a centre: any row will do
        };
        let new = row(pick).to_vec();
        near.par_chunks_mut(1024)
            .enumerate()
            .for_each(|(k, chunk)| {
                for (j, v) in chunk.iter_mut().enumerate() {
                    *v = v.min(sq_dist(row(k * 1024 + j), &new));
                }
            });
        c.extend(new);
    }
    for _ in 0..KMEANS_ITERS {
        let assign = nearest_centres(&pts, nc, &c, m, d);
        let mut sum = vec![0.0; m * d];
        let mut count = vec![0usize; m];
        for (i, &a) in assign.iter().enumerate() {
            count[a] += 1;
            for (s, v) in sum[a * d..(a + 1) * d].iter_mut().zip(row(i)) {
                *s += v;
            }
        }
        for j in (0..m).filter(|&j| count[j] > 0) {
            for t in 0..d {
                c[j * d + t] = sum[j * d + t] / count[j] as f64;
            }
        }
    }
    c.into_iter().map(T::from_f64).collect()
}

/// The nearest of the `m` centres `c` to each of the `n` points `pts` (both row-major, `d`
/// wide), by `||c||^2 - 2 x.c` from one product per chunk of points.
fn nearest_centres(pts: &[f64], n: usize, c: &[f64], m: usize, d: usize) -> Vec<usize> {
    const CHUNK: usize = 2048;
    let cn: Vec<f64> = (0..m)
        .map(|j| c[j * d..(j + 1) * d].iter().map(|v| v * v).sum())
        .collect();
    let cm = MatRef::from_row_major_slice(c, m, d);
    let mut out = Vec::with_capacity(n);
    let mut dots = vec![0.0; CHUNK * m];
    for start in (0..n).step_by(CHUNK) {
        let rows = CHUNK.min(n - start);
        let xm = MatRef::from_row_major_slice(&pts[start * d..(start + rows) * d], rows, d);
        faer::linalg::matmul::matmul(
            MatMut::from_row_major_slice_mut(&mut dots[..rows * m], rows, m),
            Accum::Replace,
            xm,
            cm.transpose(),
            1.0,
            crate::linalg::par_for(rows, m, d),
        );
        crate::backend::cpu::clear_upper_state();
        let part: Vec<usize> = dots[..rows * m]
            .par_chunks(m)
            .map(|dr| {
                let mut best = (f64::INFINITY, 0);
                for (j, (&dot, &n2)) in dr.iter().zip(&cn).enumerate() {
                    let v = n2 - 2.0 * dot;
                    if v < best.0 {
                        best = (v, j);
                    }
                }
                best.1
            })
            .collect();
        out.extend(part);
    }
    out
}

/// The largest uniform pilot of the leverage scores. Scoring costs `n s^2`; measured on
/// ijcnn1, a9a, w8a and cpusmall at `M` = 2000 and 4000 (docs/nystrom.md), a pilot of 1024
/// rows instead of `M` changed test accuracy by at most 0.03 points (RMSE by -1.8%) and cut
/// the fit time by up to 40%; 512 instead of 1024 at `M` = 2000, two seeds, by at most 0.07
/// points (RMSE within 0.7%), well inside the spread over seeds, for 13-19% less fit time.
const LEVERAGE_PILOT: usize = 512;

/// `m` rows drawn without replacement with probability proportional to approximate ridge
/// leverage scores `l_i = (k_ii - k_iS (K_SS + lambda s/n I)^-1 k_Si) / lambda` (Alaoui and
/// Mahoney), from a uniform pilot `S` of `s = min(m, LEVERAGE_PILOT)` candidate rows; drawn by the smallest
/// exponential keys `-ln(u_i) / l_i` (Efraimidis and Spirakis).
fn leverage_rows<T: Scalar>(
    x: &Features<T>,
    m: usize,
    kernel: Kernel,
    lambda: f64,
    seed: u64,
    backend: &dyn Backend<T>,
) -> Result<Vec<usize>> {
    let (n, d) = (x.nrows(), x.ncols());
    let idx = candidates(n, m, seed);
    let nc = idx.len();
    let s = m.min(LEVERAGE_PILOT).min(nc);
    let pilot = rows_of(
        x,
        &uniform_rows(nc, s, seed)
            .iter()
            .map(|&i| idx[i])
            .collect::<Vec<_>>(),
    );
    let mut kss = vec![0.0; s * s];
    backend.kernel_tile(&kernel, &pilot, s, &pilot, s, d, &mut kss);
    let ridge = (lambda * s as f64 / n as f64).max(residual_floor::<T>());
    let mut a = Mat::<f64>::from_fn(s, s, |i, j| {
        kss[i * s + j] + if i == j { ridge } else { 0.0 }
    });
    a = a
        .llt(faer::Side::Lower)
        .map_err(|_| {
            JokerError::Numerical("the leverage pilot's kernel is not positive definite".into())
        })?
        .L()
        .to_owned();
    // k(x, x), the same for every row of a stationary kernel
    let kii = kernel.of_distance(0.0);
    let mut score = vec![0.0; nc];
    let chunk = 2048;
    let mut xc = vec![T::default(); chunk * d];
    for start in (0..nc).step_by(chunk) {
        let rows = chunk.min(nc - start);
        x.gather_dense(&idx[start..start + rows], &mut xc[..rows * d]);
        let mut tile = vec![0.0; rows * s];
        backend.kernel_tile(&kernel, &xc[..rows * d], rows, &pilot, s, d, &mut tile);
        // columns of `z` are L^-1 k_S(x_i)
        let mut z = Mat::<f64>::from_fn(s, rows, |j, i| tile[i * s + j]);
        faer::linalg::triangular_solve::solve_lower_triangular_in_place(
            a.as_ref(),
            z.as_mut(),
            Par::rayon(0),
        );
        for i in 0..rows {
            let proj: f64 = (0..s).map(|j| z[(j, i)] * z[(j, i)]).sum();
            score[start + i] = ((kii - proj) / lambda).max(0.0);
        }
    }
    // a floor keeps every candidate possible (a score can round to zero)
    let floor = score.iter().cloned().fold(0.0, f64::max) * 1e-12 + f64::MIN_POSITIVE;
    let mut rng = Stream::new(seed, streams::NYSTROM_CENTERS);
    let mut keys: Vec<(f64, usize)> = score
        .iter()
        .enumerate()
        .map(|(i, &l)| (-rng.uniform().ln() / l.max(floor), i))
        .collect();
    keys.sort_by(|a, b| a.0.total_cmp(&b.0));
    Ok(keys.iter().take(m).map(|&(_, i)| idx[i]).collect())
}

/// The Cholesky factor of the `m x m` matrix `k` (row-major, symmetric positive
/// semi-definite) over the indices it keeps: in order, index `j` is kept when its residual
/// diagonal exceeds `floor`. Blocked: each panel of 128 candidates is brought up to date
/// with the kept rows before it by one triangular solve and one product, then factorised
/// sequentially.
pub fn factor_skipping_dependent(
    k: &[f64],
    m: usize,
    floor: f64,
) -> Result<(Vec<usize>, Mat<f64>)> {
    if let Some(bad) = k.iter().position(|v| !v.is_finite()) {
        return Err(JokerError::Numerical(format!(
            "the centres' kernel matrix has a non-finite entry at ({}, {})",
            bad / m,
            bad % m
        )));
    }
    let mut kept: Vec<usize> = Vec::new();
    // rows of L for the kept indices, grown panel by panel (capacity m x m)
    let mut l = Mat::<f64>::zeros(m, m);
    for p0 in (0..m).step_by(PANEL) {
        let p1 = (p0 + PANEL).min(m);
        let np = p1 - p0;
        let r = kept.len();
        // g (r x np) = L^-1 K[kept, panel]
        let mut g = Mat::<f64>::from_fn(r, np, |a, j| k[kept[a] * m + p0 + j]);
        if r > 0 {
            faer::linalg::triangular_solve::solve_lower_triangular_in_place(
                l.as_ref().submatrix(0, 0, r, r),
                g.as_mut(),
                Par::rayon(0),
            );
        }
        // the panel's residual matrix K[P, P] - g^T g
        let mut res = Mat::<f64>::from_fn(np, np, |i, j| k[(p0 + i) * m + p0 + j]);
        if r > 0 {
            faer::linalg::matmul::matmul(
                res.as_mut(),
                Accum::Add,
                g.transpose(),
                g.as_ref(),
                -1.0,
                Par::rayon(0),
            );
        }
        // sequential factorisation of the panel, skipping dependent candidates;
        // h[i][q] is the panel's q-th kept column at candidate i
        let mut h: Vec<Vec<f64>> = vec![Vec::new(); np];
        let mut panel_kept: Vec<usize> = Vec::new();
        for j in 0..np {
            let dj = res[(j, j)] - h[j].iter().map(|v| v * v).sum::<f64>();
            if dj <= floor {
                continue;
            }
            let ljj = dj.sqrt();
            for i in j + 1..np {
                let dot: f64 = h[i].iter().zip(&h[j]).map(|(a, b)| a * b).sum();
                let v = (res[(i, j)] - dot) / ljj;
                h[i].push(v);
            }
            h[j].push(ljj);
            panel_kept.push(j);
        }
        for (q, &j) in panel_kept.iter().enumerate() {
            let row = kept.len();
            for a in 0..r {
                l[(row, a)] = g[(a, j)];
            }
            // h[j] holds the entries for the panel's kept columns up to and including j
            for (t, &v) in h[j].iter().enumerate().take(q + 1) {
                l[(row, r + t)] = v;
            }
            kept.push(p0 + j);
        }
    }
    let r = kept.len();
    if r == 0 {
        return Err(JokerError::Numerical(
            "every Nystrom centre is dependent (the kernel vanishes on them)".into(),
        ));
    }
    Ok((kept, l.as_ref().submatrix(0, 0, r, r).to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::cpu::Cpu;
    use crate::data::DenseMatrix;
    use crate::kernel::KernelKind;
    use faer::prelude::Solve;

    fn random(n: usize, seed: u64) -> Vec<f64> {
        let mut s = Stream::new(seed, 1);
        (0..n).map(|_| s.uniform() * 2.0 - 1.0).collect()
    }

    #[test]
    fn the_factor_reproduces_the_kernel_and_skips_duplicates() {
        let (m, d) = (300, 3);
        let mut c = random(m * d, 7);
        // centre 5 repeated at 200 and 250: both copies must be dropped
        for dup in [200, 250] {
            let row: Vec<f64> = c[5 * d..6 * d].to_vec();
            c[dup * d..(dup + 1) * d].copy_from_slice(&row);
        }
        let kernel = Kernel {
            kind: KernelKind::Gaussian,
            gamma: 2.0,
        };
        let mut k = vec![0.0; m * m];
        Cpu.kernel_tile(&kernel, &c, m, &c, m, d, &mut k);
        let (kept, l) = factor_skipping_dependent(&k, m, 1e-11).unwrap();
        assert!(
            !kept.contains(&200) && !kept.contains(&250),
            "duplicates kept"
        );
        assert!(kept.contains(&5));
        let llt = &l * l.transpose();
        for (a, &i) in kept.iter().enumerate() {
            for (b, &j) in kept.iter().enumerate() {
                assert!((llt[(a, b)] - k[i * m + j]).abs() < 1e-12, "({i}, {j})");
            }
            for b in a + 1..kept.len() {
                assert_eq!(l[(a, b)], 0.0);
            }
        }
    }

    #[test]
    fn uniform_rows_are_distinct_and_prefixes_agree() {
        let a = uniform_rows(1000, 300, 9);
        let b = uniform_rows(1000, 500, 9);
        assert_eq!(a[..], b[..300]);
        let mut s = b.clone();
        s.sort();
        s.dedup();
        assert_eq!(s.len(), 500);
        assert!(s.iter().all(|&i| i < 1000));
        assert_eq!(uniform_rows(5, 10, 1).len(), 5);
    }

    /// With every training row a centre, `Psi Psi^T` is the kernel matrix, whatever the
    /// rule's order; with fewer it is `K_XC K_CC^-1 K_CX`, computed here by a dense solve.
    #[test]
    fn features_give_the_projected_kernel() {
        let (n, d) = (120, 4);
        let xs = random(n * d, 3);
        let x = Features::Dense(DenseMatrix::new(n, d, xs.clone()).unwrap());
        for kind in [KernelKind::Gaussian, KernelKind::Laplacian] {
            let kernel = Kernel { kind, gamma: 3.0 };
            let mut kxx = vec![0.0; n * n];
            Cpu.kernel_tile(&kernel, &xs, n, &xs, n, d, &mut kxx);
            for rule in [Centers::Uniform, Centers::KMeans, Centers::Leverage] {
                for m in [n, 40] {
                    let map = NystromMap::<f64>::fit(kernel, rule, m, &x, 1e-3, 5, &Cpu).unwrap();
                    let r = map.m();
                    let mut psi = vec![f64::NAN; n * r];
                    map.features(&Cpu, &xs, n, &mut psi);
                    let p = MatRef::from_row_major_slice(&psi, n, r);
                    let got = p * p.transpose();
                    // reference: K_XC K_CC^+ K_CX by a dense eigen-free solve over the kept centres
                    let c = map.centers();
                    let mut kxc = vec![0.0; n * r];
                    Cpu.kernel_tile(&kernel, &xs, n, c, r, d, &mut kxc);
                    let mut kcc = vec![0.0; r * r];
                    Cpu.kernel_tile(&kernel, c, r, c, r, d, &mut kcc);
                    let kcc = Mat::<f64>::from_fn(r, r, |i, j| kcc[i * r + j]);
                    let kxc = Mat::<f64>::from_fn(n, r, |i, j| kxc[i * r + j]);
                    let want = &kxc * kcc.partial_piv_lu().solve(kxc.transpose());
                    let tol = if m == n && rule != Centers::KMeans {
                        1e-8
                    } else {
                        1e-6
                    };
                    for i in 0..n {
                        for j in 0..n {
                            assert!(
                                (got[(i, j)] - want[(i, j)]).abs() < tol,
                                "{kind:?} {rule:?} m={m}: ({i},{j}) {} vs {}",
                                got[(i, j)],
                                want[(i, j)]
                            );
                            if m == n && rule != Centers::KMeans {
                                assert!((got[(i, j)] - kxx[i * n + j]).abs() < 1e-8);
                            }
                        }
                    }
                }
            }
        }
    }

    /// The f32 map's features (its solve in f32) equal the f64 solve of the same kernel tile
    /// to f32 accuracy times the factor's conditioning, and hold no subnormal values: the rows
    /// here include far ones, whose kernel values with most centres are below f32's normal
    /// range.
    #[test]
    fn single_precision_features_match_the_double_solve_and_hold_no_subnormals() {
        let (n, d) = (300, 6);
        let mut xs: Vec<f32> = random(n * d, 11).iter().map(|&v| v as f32).collect();
        // a third of the rows far out, in clusters of their own
        for (i, v) in xs.iter_mut().enumerate() {
            if (i / d) % 3 == 0 {
                *v += 6.0 * ((i / d) % 5) as f32;
            }
        }
        let x = Features::Dense(DenseMatrix::new(n, d, xs.clone()).unwrap());
        let kernel = Kernel {
            kind: KernelKind::Gaussian,
            gamma: 2.0,
        };
        let map = NystromMap::<f32>::fit(kernel, Centers::Uniform, 80, &x, 1e-3, 7, &Cpu).unwrap();
        let r = map.m();
        let mut got = vec![f32::NAN; n * r];
        map.features(&Cpu, &xs, n, &mut got);
        let mut tile = vec![0.0; n * r];
        Cpu.kernel_tile(&kernel, &xs, n, map.centers(), r, d, &mut tile);
        let want = map.features_of_tile(&tile, n);
        let tiny = f64::from(f32::MIN_POSITIVE).sqrt();
        let mut flushed = 0;
        for i in 0..n {
            let (a, b) = (&got[i * r..(i + 1) * r], &want[i * r..(i + 1) * r]);
            let diff: f64 = a
                .iter()
                .zip(b)
                .map(|(&a, &b)| (f64::from(a) - b).powi(2))
                .sum();
            let norm: f64 = b.iter().map(|v| v * v).sum();
            assert!(
                diff.sqrt() <= 1e-5 * norm.sqrt().max(1e-3),
                "row {i}: features off by {:.2e} (norm {:.2e})",
                diff.sqrt(),
                norm.sqrt()
            );
            for &v in a {
                let v = f64::from(v).abs();
                assert!(v == 0.0 || v >= tiny, "row {i}: {v:e} kept below {tiny:e}");
                flushed += usize::from(v == 0.0);
            }
        }
        // the far rows did reach the flush (else the test would not test it)
        assert!(flushed > 0);
    }

    #[test]
    fn center_coefficients_give_the_same_decision_values() {
        let (n, d) = (60, 2);
        let xs = random(n * d, 11);
        let x = Features::Dense(DenseMatrix::new(n, d, xs.clone()).unwrap());
        let kernel = Kernel {
            kind: KernelKind::Gaussian,
            gamma: 1.5,
        };
        let map = NystromMap::<f64>::fit(kernel, Centers::Uniform, 25, &x, 1e-2, 2, &Cpu).unwrap();
        let r = map.m();
        let theta = random(r * 2, 12);
        let u = map.center_coefficients(&theta, 2);
        let mut psi = vec![0.0; n * r];
        map.features(&Cpu, &xs, n, &mut psi);
        let mut kxc = vec![0.0; n * r];
        Cpu.kernel_tile(&kernel, &xs, n, map.centers(), r, d, &mut kxc);
        for t in 0..2 {
            for i in 0..n {
                let a: f64 = (0..r).map(|j| psi[i * r + j] * theta[t * r + j]).sum();
                let b: f64 = (0..r).map(|j| kxc[i * r + j] * u[t * r + j]).sum();
                assert!((a - b).abs() < 1e-10, "{a} vs {b}");
            }
        }
    }

    #[test]
    fn bad_input_is_refused() {
        let kernel = Kernel {
            kind: KernelKind::Gaussian,
            gamma: 1.0,
        };
        assert!(NystromMap::<f64>::from_centers(kernel, vec![1.0; 5], 2, &Cpu).is_err());
        let k = vec![1.0, f64::NAN, f64::NAN, 1.0];
        assert!(factor_skipping_dependent(&k, 2, 1e-10).is_err());
        let x = Features::Dense(DenseMatrix::new(3, 1, vec![0.0, 1.0, 2.0]).unwrap());
        assert!(NystromMap::<f64>::fit(kernel, Centers::Uniform, 0, &x, 1.0, 1, &Cpu).is_err());
        // more centres than rows: every row, once
        let map = NystromMap::<f64>::fit(kernel, Centers::Uniform, 10, &x, 1.0, 1, &Cpu).unwrap();
        assert_eq!(map.m(), 3);
    }
}

//! Preprocessing stored in the model: feature standardisation, target scaling, and the label
//! encoding of classifiers (binary `+-1`, one-vs-rest, or one-vs-one with its votes).

use serde::{Deserialize, Serialize};

use rayon::prelude::*;

use crate::data::{CsrMatrix, DenseMatrix, Features};
use crate::distributed::{Collective, Single};
use crate::error::{JokerError, Result};
use crate::scalar::Scalar;

/// Per-feature affine map `x -> (x - center) / scale`, fitted on training data.
///
/// Dense data is z-scored. Sparse data is only scaled (centring would destroy sparsity; the
/// kernels are shift-invariant, so centring changes nothing but rounding).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Standardizer {
    /// Subtracted from each feature (all zero for sparse data).
    pub center: Vec<f64>,
    /// Each feature is divided by this (its standard deviation, or 1 for constant features).
    pub scale: Vec<f64>,
}

impl Standardizer {
    /// Fits on `x`: standard deviations, and means where the rows are dense data (see
    /// [`Moments::standardizer`]).
    pub fn fit<T: Scalar>(x: &Features<T>) -> Self {
        Self::fit_over(x, &Single).unwrap_or_else(|_| Self::identity(x.ncols()))
    }

    /// Fits on the rows of every rank of `comm` (`x` holds this rank's): the column sums are
    /// summed over the ranks, so every rank gets the same map, the one a single process
    /// would fit on all the rows.
    pub fn fit_over<T: Scalar>(x: &Features<T>, comm: &dyn Collective) -> Result<Self> {
        Self::fit_weighted(x, None, comm)
    }

    /// [`fit_over`](Self::fit_over) with a weight per row (`None`: all 1): weighted means and
    /// standard deviations, so that a row of weight `k` counts as `k` copies of it.
    pub fn fit_weighted<T: Scalar>(
        x: &Features<T>,
        weights: Option<&[f64]>,
        comm: &dyn Collective,
    ) -> Result<Self> {
        let mut m = Moments::new(x.ncols());
        m.add_weighted(x, weights);
        m.standardizer(comm)
    }

    /// The identity map on `d` features.
    pub fn identity(d: usize) -> Self {
        Standardizer {
            center: vec![0.0; d],
            scale: vec![1.0; d],
        }
    }

    /// Whether the map is the identity (every centre 0, every scale 1).
    pub fn is_identity(&self) -> bool {
        self.center.iter().all(|&c| c == 0.0) && self.scale.iter().all(|&s| s == 1.0)
    }

    /// Applies the map while converting to precision `T`.
    pub fn transform<U: Scalar, T: Scalar>(&self, x: &Features<U>) -> Result<Features<T>> {
        let d = self.width_for(x.ncols())?;
        let mut out: Features<T> = x.cast::<T>().with_ncols(d)?;
        if let Features::Sparse(_) = out {
            if self.center.iter().any(|&c| c != 0.0) {
                // A dense-trained model applied to sparse input: densify to centre correctly.
                let n = out.nrows();
                let len = n.saturating_mul(d);
                let mut data = crate::memory::try_filled(len, T::default(), "the densified rows")?;
                out.gather_range(0, &mut data);
                out = Features::Dense(crate::data::DenseMatrix::new(n, d, data)?);
            }
        }
        if self.is_identity() {
            // nothing to do; rows mapped from a file stay mapped
            return Ok(out);
        }
        let (c, s) = (&self.center, &self.scale);
        out.for_each_mut(|j, v| *v = T::from_f64((v.to_f64() - c[j]) / s[j]));
        Ok(out)
    }

    /// The map's number of features, which rows of `ncols` features may not exceed.
    fn width_for(&self, ncols: usize) -> Result<usize> {
        let d = self.scale.len();
        if ncols > d {
            return Err(JokerError::ShapeMismatch(format!(
                "data has {ncols} features, the model was trained on {d}"
            )));
        }
        Ok(d)
    }

    /// [`Standardizer::transform`] of sparse rows stored densely (`nrows x d`, the entries not
    /// stored mapped as zeros are), in one pass over the stored entries: the same values as
    /// the transform followed by [`CsrMatrix::to_dense`], without the sparse copy in between.
    pub fn transform_to_dense<U: Scalar, T: Scalar>(
        &self,
        x: &CsrMatrix<U>,
    ) -> Result<DenseMatrix<T>> {
        let d = self.width_for(x.ncols())?;
        let n = x.nrows();
        let (c, s) = (&self.center, &self.scale);
        // the value in precision T, then mapped, as the transform of the cast rows gives it
        let map = |j: usize, v: f64| T::from_f64((T::from_f64(v).to_f64() - c[j]) / s[j]);
        let unstored: Vec<T> = (0..d).map(|j| map(j, 0.0)).collect();
        let zero = unstored.iter().all(|v| v.to_f64() == 0.0);
        let mut data = crate::memory::try_zeroed::<T>(n.saturating_mul(d), "the dense rows")?;
        data.par_chunks_mut(d.max(1))
            .enumerate()
            .with_min_len(ROWS_PER_TASK)
            .for_each(|(i, row)| {
                if !zero {
                    row.copy_from_slice(&unstored);
                }
                let (idx, val) = x.row(i);
                for (&j, &v) in idx.iter().zip(val) {
                    row[j as usize] = map(j as usize, v.to_f64());
                }
            });
        DenseMatrix::new(n, d, data)
    }
}

/// Rows per task of [`Standardizer::transform_to_dense`].
const ROWS_PER_TASK: usize = 512;

/// The column sums and sums of squares a [`Standardizer`] is fitted from, gathered a part of
/// the rows at a time (a file read in chunks) in row order, so that the map is the one fitted
/// on all the rows at once.
#[derive(Clone, Debug)]
pub struct Moments {
    s1: Vec<f64>,
    s2: Vec<f64>,
    /// The rows' weights summed (their number where unweighted).
    rows: f64,
    /// Entries stored: every entry of a dense part, the stored ones of a sparse part.
    stored: f64,
    /// The rows added, unweighted.
    count: f64,
}

impl Moments {
    /// No rows yet, `d` columns.
    pub fn new(d: usize) -> Self {
        Moments {
            s1: vec![0.0; d],
            s2: vec![0.0; d],
            rows: 0.0,
            stored: 0.0,
            count: 0.0,
        }
    }

    /// Columns `d`.
    pub fn ncols(&self) -> usize {
        self.s1.len()
    }

    /// Adds the rows of `x` (of the same `d` columns).
    pub fn add<T: Scalar>(&mut self, x: &Features<T>) {
        self.add_weighted(x, None);
    }

    /// Adds the rows of `x`, row `i` counted `weights[i]` times (`None`: once each).
    pub fn add_weighted<T: Scalar>(&mut self, x: &Features<T>, weights: Option<&[f64]>) {
        let (s1, s2) = (&mut self.s1, &mut self.s2);
        let w = |i: usize| weights.map_or(1.0, |w| w[i]);
        match x {
            Features::Dense(m) => {
                for i in 0..m.nrows() {
                    let wi = w(i);
                    for (j, v) in m.row(i).iter().enumerate() {
                        let v = v.to_f64();
                        s1[j] += wi * v;
                        s2[j] += wi * v * v;
                    }
                }
                self.stored += (m.nrows() * m.ncols()) as f64;
            }
            Features::Sparse(m) => {
                for i in 0..m.nrows() {
                    let wi = w(i);
                    let (idx, val) = m.row(i);
                    for (j, v) in idx.iter().zip(val) {
                        let v = v.to_f64();
                        s1[*j as usize] += wi * v;
                        s2[*j as usize] += wi * v * v;
                    }
                }
                self.stored += m.nnz() as f64;
            }
        }
        self.count += x.nrows() as f64;
        self.rows += match weights {
            Some(w) => w.iter().sum::<f64>(),
            None => x.nrows() as f64,
        };
    }

    /// The map of the rows added here and on every other rank of `comm`: z-scores where the
    /// rows are dense data (dense parts, or sparse parts with at least half of their entries
    /// stored, which the fit trains as dense rows), else
    /// scales only, keeping zeros zero. Dense data is centred because the kernels do not
    /// change under a shift while their distances, formed as `||a||^2 + ||b||^2 - 2 a.b`, lose
    /// less to cancellation near the origin; so a LIBSVM file and a CSV file of the same rows
    /// give the same model.
    pub fn standardizer(mut self, comm: &dyn Collective) -> Result<Standardizer> {
        let d = self.s1.len();
        let mut counts = [self.rows, self.stored, self.count];
        comm.sum(&mut counts)?;
        comm.sum(&mut self.s1)?;
        comm.sum(&mut self.s2)?;
        let n = counts[0];
        // stored entries against all entries (of the final width), counted unweighted
        let dense = 2.0 * counts[1] >= counts[2] * d as f64;
        let mut center = vec![0.0; d];
        let mut scale = vec![1.0; d];
        for j in 0..d {
            let mean = self.s1[j] / n;
            let var = (self.s2[j] / n - mean * mean).max(0.0);
            let sd = var.sqrt();
            if dense {
                center[j] = mean;
            }
            scale[j] = if sd > 1e-12 * (1.0 + mean.abs()) {
                sd
            } else {
                1.0
            };
        }
        Ok(Standardizer { center, scale })
    }
}

/// Affine map of regression targets: `y -> (y - mean) / scale`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct TargetScaler {
    /// Mean of the training targets.
    pub mean: f64,
    /// Standard deviation of the training targets (1 if constant).
    pub scale: f64,
}

impl TargetScaler {
    /// Fits on `y`.
    pub fn fit(y: &[f64]) -> Self {
        Self::fit_over(y, &Single).unwrap_or_else(|_| Self::identity())
    }

    /// Fits on the targets of every rank of `comm` (`y` holds this rank's), in two passes
    /// like a single process: the mean, then the spread around it.
    pub fn fit_over(y: &[f64], comm: &dyn Collective) -> Result<Self> {
        Self::fit_weighted(y, None, comm)
    }

    /// [`fit_over`](Self::fit_over) with a weight per target (`None`: all 1): the weighted
    /// mean and standard deviation, so that a target of weight `k` counts as `k` copies.
    pub fn fit_weighted(y: &[f64], weights: Option<&[f64]>, comm: &dyn Collective) -> Result<Self> {
        let w = |i: usize| weights.map_or(1.0, |w| w[i]);
        let total: f64 = (0..y.len()).map(w).sum();
        let mut first = [
            total,
            y.iter().enumerate().map(|(i, v)| w(i) * v).sum::<f64>(),
        ];
        comm.sum(&mut first)?;
        let (n, mean) = (first[0], first[1] / first[0]);
        let squares = comm.sum_one(
            y.iter()
                .enumerate()
                .map(|(i, v)| w(i) * (v - mean).powi(2))
                .sum::<f64>(),
        )?;
        Ok(Self::of_spread(mean, squares, n))
    }

    /// The map of `n` targets with mean `mean` and squared deviations `squares` summed (a
    /// constant target keeps scale 1).
    pub fn of_spread(mean: f64, squares: f64, n: f64) -> Self {
        let sd = (squares / n).sqrt();
        TargetScaler {
            mean,
            scale: if sd > 0.0 { sd } else { 1.0 },
        }
    }
    /// The identity.
    pub fn identity() -> Self {
        TargetScaler {
            mean: 0.0,
            scale: 1.0,
        }
    }
    /// Forward map.
    pub fn forward(&self, y: f64) -> f64 {
        (y - self.mean) / self.scale
    }
    /// Inverse map.
    pub fn inverse(&self, z: f64) -> f64 {
        z * self.scale + self.mean
    }
}

/// The sorted distinct labels of a classification target.
pub fn classes_of(y: &[f64]) -> Result<Vec<f64>> {
    let mut c: Vec<f64> = y.to_vec();
    c.sort_by(|a, b| a.total_cmp(b));
    c.dedup();
    if c.len() < 2 {
        return Err(JokerError::InvalidLabels(format!(
            "a classifier needs at least two classes, the labels hold {} distinct value(s){}",
            c.len(),
            c.first().map_or(String::new(), |v| format!(" ({v})"))
        )));
    }
    Ok(c)
}

/// Encodes labels as target columns: two classes give one column (`classes[0] -> -1`,
/// `classes[1] -> +1`); more give one-vs-rest columns. Column-major `n x T`.
pub fn encode_labels(y: &[f64], classes: &[f64]) -> Result<Vec<f64>> {
    let n = y.len();
    let idx = |v: f64| {
        classes.binary_search_by(|c| c.total_cmp(&v)).map_err(|_| {
            JokerError::InvalidLabels(format!("label {v} is not one of the classes {classes:?}"))
        })
    };
    if classes.len() == 2 {
        y.iter()
            .map(|&v| Ok(if idx(v)? == 1 { 1.0 } else { -1.0 }))
            .collect()
    } else {
        let k = classes.len();
        let mut out = vec![-1.0; n * k];
        for (i, &v) in y.iter().enumerate() {
            out[idx(v)? * n + i] = 1.0;
        }
        Ok(out)
    }
}

/// How a classifier with more than two classes is split into binary problems.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Multiclass {
    /// One column per class, each class against all the others, on all the rows; the
    /// prediction is the class of the largest decision value. The columns share every kernel
    /// block.
    #[default]
    #[serde(rename = "ovr")]
    OneVsRest,
    /// One column per pair of classes (`K (K - 1) / 2`), each trained on the rows of its two
    /// classes only; the prediction is the class with the most votes (LIBSVM's scheme). The
    /// sub-problems are small: about `2 n / K` rows each.
    #[serde(rename = "ovo")]
    OneVsOne,
}

impl Multiclass {
    /// The name in model files and on the command line: `ovr` or `ovo`.
    pub fn name(self) -> &'static str {
        match self {
            Multiclass::OneVsRest => "ovr",
            Multiclass::OneVsOne => "ovo",
        }
    }

    /// Number of decision columns for `k` classes: one for two classes, otherwise `k` or
    /// `k (k - 1) / 2`.
    pub fn columns(self, k: usize) -> usize {
        match (k, self) {
            (0..=2, _) => 1,
            (_, Multiclass::OneVsRest) => k,
            (_, Multiclass::OneVsOne) => k * (k - 1) / 2,
        }
    }
}

/// The pairs of class indices of one-vs-one, in column order: `(0, 1), (0, 2), ..., (0, k-1),
/// (1, 2), ...`. A column's decision value is positive for the second class of its pair (as
/// a binary model's is for `classes[1]`).
pub fn class_pairs(k: usize) -> Vec<(usize, usize)> {
    (0..k)
        .flat_map(|a| (a + 1..k).map(move |b| (a, b)))
        .collect()
}

/// The one-vs-one prediction from one row of pair decision values: the class with the most
/// votes; ties go to the class whose decision values lean furthest its way (the sum of
/// `+-f` over its pairs), then to the lower class.
pub fn vote(row: &[f64], k: usize) -> usize {
    let mut votes = vec![0usize; k];
    let mut lean = vec![0.0f64; k];
    for (&(a, b), &f) in class_pairs(k).iter().zip(row) {
        votes[if f >= 0.0 { b } else { a }] += 1;
        lean[b] += f;
        lean[a] -= f;
    }
    (0..k).fold(0, |best, c| {
        let better = votes[c] > votes[best] || (votes[c] == votes[best] && lean[c] > lean[best]);
        if better { c } else { best }
    })
}

/// One-vs-one class probabilities from pairwise ones: `r[p]` is the probability of the second
/// class of pair `p` against the first. Pairwise coupling by the second method of Wu, Lin and
/// Weng (2004), as LIBSVM's: the `p` on the simplex that best satisfies
/// `r_ji p_i = r_ij p_j` for every pair in least squares, i.e. `min 1/2 p^T Q p` subject to
/// `sum p = 1` with `Q_ii = sum_{j != i} r_ji^2` and `Q_ij = -r_ji r_ij`; its optimality
/// conditions `[Q e; e^T 0] [p; b] = [0; 1]` are solved directly (an LU factor with partial
/// pivoting of the `(k + 1)`-square system). Exact when the pairwise probabilities come
/// from one distribution (`r_ij = p_i / (p_i + p_j)`); the pairwise values are kept within
/// `[1e-7, 1 - 1e-7]`, and any round-off below zero is clipped before normalising.
pub fn couple(r: &[f64], k: usize) -> Vec<f64> {
    let eps = 1e-7;
    let mut a = faer::Mat::<f64>::zeros(k + 1, k + 1);
    for (&(i, j), &rj) in class_pairs(k).iter().zip(r) {
        // r_ij = P(i | i or j) = 1 - r[p]; r_ji = r[p]
        let rj = rj.clamp(eps, 1.0 - eps);
        let ri = 1.0 - rj;
        a[(i, i)] += rj * rj;
        a[(j, j)] += ri * ri;
        a[(i, j)] -= rj * ri;
        a[(j, i)] -= rj * ri;
    }
    for i in 0..k {
        a[(i, k)] = 1.0;
        a[(k, i)] = 1.0;
    }
    let rhs = faer::Mat::<f64>::from_fn(k + 1, 1, |i, _| if i == k { 1.0 } else { 0.0 });
    let x = faer::linalg::solvers::Solve::solve(&a.partial_piv_lu(), &rhs);
    let p: Vec<f64> = (0..k).map(|i| x[(i, 0)].max(0.0)).collect();
    // a singular system (non-finite values) falls back to the uniform distribution
    let total: f64 = p.iter().sum();
    if total > 0.0 && total.is_finite() {
        p.into_iter().map(|v| v / total).collect()
    } else {
        vec![1.0 / k as f64; k]
    }
}

/// One-vs-one targets: column `p` of pair `(a, b)` is `-1` on the rows of class `a`, `+1` on
/// those of class `b` and `0` (not in the sub-problem) elsewhere. Column-major `n x P`.
pub fn encode_pairs(y: &[f64], classes: &[f64]) -> Result<Vec<f64>> {
    let n = y.len();
    let k = classes.len();
    let mut idx = Vec::with_capacity(n);
    for &v in y {
        idx.push(classes.binary_search_by(|c| c.total_cmp(&v)).map_err(|_| {
            JokerError::InvalidLabels(format!("label {v} is not one of the classes {classes:?}"))
        })?);
    }
    let pairs = class_pairs(k);
    let mut out = vec![0.0; n * pairs.len()];
    for (p, &(a, b)) in pairs.iter().enumerate() {
        for (i, &c) in idx.iter().enumerate() {
            if c == a {
                out[p * n + i] = -1.0;
            } else if c == b {
                out[p * n + i] = 1.0;
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::DenseMatrix;

    /// Integer weights count as repeated rows: the weighted standardiser, target scaler and
    /// bandwidth sums equal those of the rows repeated, dense and sparse, to rounding.
    #[test]
    fn weights_mean_repetition() {
        let mut s = crate::rng::Stream::new(5, 2);
        let (n, d) = (9, 4);
        let x: Vec<f64> = (0..n * d)
            .map(|k| {
                if k % 3 == 0 {
                    0.0
                } else {
                    4.0 * s.uniform() - 1.0
                }
            })
            .collect();
        let y: Vec<f64> = (0..n).map(|_| 10.0 * s.uniform()).collect();
        let w: Vec<f64> = (0..n).map(|i| (1 + i % 3) as f64).collect();
        let (mut xr, mut yr) = (Vec::new(), Vec::new());
        for i in 0..n {
            for _ in 0..w[i] as usize {
                xr.extend_from_slice(&x[i * d..(i + 1) * d]);
                yr.push(y[i]);
            }
        }
        let dense =
            |v: &[f64], rows| Features::Dense(DenseMatrix::new(rows, d, v.to_vec()).unwrap());
        let sparse = |v: &[f64], rows: usize| {
            let (mut indptr, mut indices, mut values) = (vec![0usize], Vec::new(), Vec::new());
            for r in 0..rows {
                for j in 0..d {
                    if v[r * d + j] != 0.0 {
                        indices.push(j as u32);
                        values.push(v[r * d + j]);
                    }
                }
                indptr.push(indices.len());
            }
            Features::Sparse(CsrMatrix::new(rows, d, indptr, indices, values).unwrap())
        };
        let nr = yr.len();
        let close = |a: &[f64], b: &[f64]| {
            a.iter()
                .zip(b)
                .all(|(u, v)| (u - v).abs() < 1e-12 * (1.0 + v.abs()))
        };
        for (a, b) in [
            (dense(&x, n), dense(&xr, nr)),
            (sparse(&x, n), sparse(&xr, nr)),
        ] {
            let sw = Standardizer::fit_weighted(&a, Some(&w), &Single).unwrap();
            let sr = Standardizer::fit(&b);
            assert!(
                close(&sw.center, &sr.center) && close(&sw.scale, &sr.scale),
                "{sw:?} vs {sr:?}"
            );
            let (rw, rr) = (
                crate::kernel::RowSums::of_weighted(&a, Some(&w)),
                crate::kernel::RowSums::of(&b),
            );
            assert!(close(&rw.packed(), &rr.packed()), "{rw:?} vs {rr:?}");
        }
        let tw = TargetScaler::fit_weighted(&y, Some(&w), &Single).unwrap();
        let tr = TargetScaler::fit(&yr);
        assert!((tw.mean - tr.mean).abs() < 1e-12 && (tw.scale - tr.scale).abs() < 1e-12);
        // unweighted, they differ
        assert!((TargetScaler::fit(&y).mean - tr.mean).abs() > 1e-6);
    }

    #[test]
    fn standardizer_zscores_dense_and_scales_sparse() {
        let x = Features::Dense(
            DenseMatrix::<f64>::from_rows(&[vec![1.0, 5.0], vec![3.0, 5.0]]).unwrap(),
        );
        let s = Standardizer::fit(&x);
        assert_eq!(s.center, vec![2.0, 5.0]);
        assert_eq!(s.scale, vec![1.0, 1.0]); // sd of {1,3} is 1; constant column keeps 1
        let z: Features<f32> = s.transform(&x).unwrap();
        let Features::Dense(m) = z else { panic!() };
        assert_eq!(m.as_slice(), &[-1.0, 0.0, 1.0, 0.0]);
    }

    /// A sparse matrix with at least half of its entries stored is dense data: centred like
    /// the same rows read dense; a sparser one is scaled only.
    #[test]
    fn half_full_sparse_rows_are_centred_like_dense_rows() {
        use crate::data::CsrMatrix;
        // 3 x 2: rows (1, 5), (3, .), (., 4) with `stored` of the 6 entries
        let sparse = |rows: &[&[(u32, f64)]]| {
            let mut indptr = vec![0];
            let (mut indices, mut values) = (vec![], vec![]);
            for r in rows {
                for &(j, v) in *r {
                    indices.push(j);
                    values.push(v);
                }
                indptr.push(indices.len());
            }
            Features::Sparse(CsrMatrix::new(3, 2, indptr, indices, values).unwrap())
        };
        let half = sparse(&[&[(0, 1.0), (1, 5.0)], &[(0, 3.0)], &[]]);
        let dense = Features::Dense(
            DenseMatrix::<f64>::from_rows(&[vec![1.0, 5.0], vec![3.0, 0.0], vec![0.0, 0.0]])
                .unwrap(),
        );
        let (s, t) = (Standardizer::fit(&half), Standardizer::fit(&dense));
        assert_eq!(s, t);
        assert!((s.center[0] - 4.0 / 3.0).abs() < 1e-15 && (s.center[1] - 5.0 / 3.0).abs() < 1e-15);
        let z: Features<f64> = s.transform(&half).unwrap();
        let Features::Dense(m) = z else {
            panic!("centred rows are dense")
        };
        assert!((m.row(2)[0] + (4.0 / 3.0) / s.scale[0]).abs() < 1e-12);
        let sparser = sparse(&[&[(0, 1.0), (1, 5.0)], &[], &[]]);
        let s = Standardizer::fit(&sparser);
        assert_eq!(s.center, vec![0.0, 0.0]);
        assert!(s.scale.iter().all(|&v| v > 0.0));
    }

    /// Sparse rows made dense as they are standardised hold, bit for bit, the values of the
    /// transform followed by densifying: fresh random rows of every fullness (half full and
    /// more centred, sparser scaled only), read in f64 and kept in f32 or f64, a column the
    /// rows never mention, the identity map, and more columns than the map has refused.
    #[test]
    fn sparse_rows_made_dense_as_they_are_scaled_match_the_transform() {
        use crate::data::CsrMatrix;
        let mut rng = crate::rng::Stream::new(17, 0);
        let (n, d) = (1100, 9);
        for fullness in [0.2, 0.7, 0.95] {
            let mut indptr = vec![0];
            let (mut indices, mut values) = (vec![], vec![]);
            for _ in 0..n {
                // column 8 is never stored
                for j in 0..d - 1 {
                    if rng.uniform() < fullness {
                        indices.push(j as u32);
                        values.push(3.0 + 10.0 * rng.uniform() - 2.0 * j as f64);
                    }
                }
                indptr.push(indices.len());
            }
            let c = CsrMatrix::new(n, d, indptr, indices, values).unwrap();
            let x = Features::Sparse(c.clone());
            for st in [Standardizer::fit(&x), Standardizer::identity(d)] {
                assert_eq!(
                    st.center.iter().any(|&v| v != 0.0),
                    fullness > 0.5 && !st.is_identity()
                );
                let dense = |f: Features<f32>| match f {
                    Features::Sparse(m) => m.to_dense(),
                    Features::Dense(m) => m,
                };
                let want = dense(st.transform::<f64, f32>(&x).unwrap());
                let got: DenseMatrix<f32> = st.transform_to_dense(&c).unwrap();
                assert_eq!((got.nrows(), got.ncols()), (n, d));
                let bits = |m: &DenseMatrix<f32>| {
                    m.as_slice().iter().map(|v| v.to_bits()).collect::<Vec<_>>()
                };
                assert_eq!(bits(&got), bits(&want), "fullness {fullness}");
                let want64 = match st.transform::<f64, f64>(&x).unwrap() {
                    Features::Sparse(m) => m.to_dense(),
                    Features::Dense(m) => m,
                };
                let got64: DenseMatrix<f64> = st.transform_to_dense(&c).unwrap();
                assert_eq!(got64.as_slice(), want64.as_slice());
            }
        }
        let wide = CsrMatrix::new(1, 3, vec![0, 1], vec![2], vec![1.0f64]).unwrap();
        assert!(
            Standardizer::identity(2)
                .transform_to_dense::<f64, f64>(&wide)
                .is_err()
        );
    }

    #[test]
    fn labels_encode_binary_and_one_vs_rest() {
        let y = [2.0, 1.0, 2.0];
        let c = classes_of(&y).unwrap();
        assert_eq!(encode_labels(&y, &c).unwrap(), vec![1.0, -1.0, 1.0]);
        let y3 = [0.0, 2.0, 1.0];
        let c3 = classes_of(&y3).unwrap();
        assert_eq!(
            encode_labels(&y3, &c3).unwrap(),
            vec![1.0, -1.0, -1.0, -1.0, -1.0, 1.0, -1.0, 1.0, -1.0]
        );
        assert!(classes_of(&[1.0, 1.0]).is_err());
    }

    #[test]
    fn pairs_vote_and_couple() {
        assert_eq!(class_pairs(3), vec![(0, 1), (0, 2), (1, 2)]);
        assert_eq!(class_pairs(4).len(), Multiclass::OneVsOne.columns(4));
        assert_eq!(Multiclass::OneVsOne.columns(2), 1);
        // class 2 beats 0 and 1: two votes
        assert_eq!(vote(&[0.5, 0.3, 0.2], 3), 2);
        // a three-way tie (0 > 1, 1 > 2, 2 > 0) goes to the class leaning furthest its way
        assert_eq!(vote(&[-1.0, 0.2, -0.1], 3), 0);
        assert_eq!(vote(&[-0.1, 0.2, -1.0], 3), 1);
        // coupling recovers a distribution from its exact pairwise probabilities
        let p = [0.5, 0.3, 0.15, 0.05];
        let r: Vec<f64> = class_pairs(4)
            .iter()
            .map(|&(a, b)| p[b] / (p[a] + p[b]))
            .collect();
        let q = couple(&r, 4);
        for (u, v) in p.iter().zip(&q) {
            assert!((u - v).abs() < 1e-9, "{p:?} vs {q:?}");
        }
        // inconsistent pairs: a distribution, and the least-squares optimum (the objective
        // rises along every direction that keeps the sum)
        let r = [0.9, 0.2, 0.6, 0.7, 0.1, 0.45];
        let q = couple(&r, 4);
        assert!((q.iter().sum::<f64>() - 1.0).abs() < 1e-12 && q.iter().all(|&v| v >= 0.0));
        let obj = |p: &[f64]| -> f64 {
            class_pairs(4)
                .iter()
                .zip(&r)
                .map(|(&(i, j), &rj)| ((rj * p[i]) - ((1.0 - rj) * p[j])).powi(2))
                .sum()
        };
        for (u, v) in [(0, 1), (1, 3), (2, 0)] {
            let mut w = q.clone();
            w[u] += 1e-4;
            w[v] -= 1e-4;
            assert!(obj(&w) > obj(&q), "{q:?} not optimal along ({u}, {v})");
        }
        let y = [2.0, 0.0, 1.0, 2.0];
        let c = classes_of(&y).unwrap();
        assert_eq!(
            encode_pairs(&y, &c).unwrap(),
            vec![
                0.0, -1.0, 1.0, 0.0, 1.0, -1.0, 0.0, 1.0, 1.0, 0.0, -1.0, 1.0
            ]
        );
    }
}

//! Shift-invariant kernels: exact evaluation, spectral sampling for random features, and
//! bandwidth heuristics.
//!
//! Parametrisation (one scale `gamma` per kernel, as in scikit-learn):
//! - Gaussian `exp(-gamma ||x - x'||^2)`, spectral density `N(0, 2 gamma I)`;
//! - Laplacian (L1) `exp(-gamma ||x - x'||_1)`, spectral density iid `Cauchy(0, gamma)`;
//! - Matern with `nu` in {1/2, 3/2, 5/2} and length scale `1/gamma`, `r = gamma ||x - x'||_2`:
//!   `exp(-r)`, `(1 + sqrt3 r) exp(-sqrt3 r)`, `(1 + sqrt5 r + 5 r^2 / 3) exp(-sqrt5 r)`;
//!   spectral density a multivariate Student-t with `2 nu` degrees of freedom and scale `gamma`.

use serde::{Deserialize, Serialize};

use rayon::prelude::*;

use crate::data::Features;
use crate::error::{JokerError, Result, invalid};
use crate::linalg::{dot, l1_distance};
use crate::rng::{Stream, streams};
use crate::scalar::Scalar;

/// Smoothness of a Matern kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum MaternNu {
    /// nu = 1/2 (the exponential kernel).
    #[serde(rename = "0.5")]
    Half,
    /// nu = 3/2.
    #[serde(rename = "1.5")]
    ThreeHalves,
    /// nu = 5/2.
    #[serde(rename = "2.5")]
    FiveHalves,
}

impl MaternNu {
    /// The value of nu.
    pub fn value(self) -> f64 {
        match self {
            MaternNu::Half => 0.5,
            MaternNu::ThreeHalves => 1.5,
            MaternNu::FiveHalves => 2.5,
        }
    }

    /// Parses 0.5, 1.5 or 2.5.
    pub fn from_value(nu: f64) -> Result<Self> {
        match nu {
            0.5 => Ok(MaternNu::Half),
            1.5 => Ok(MaternNu::ThreeHalves),
            2.5 => Ok(MaternNu::FiveHalves),
            _ => Err(invalid(
                "nu",
                format!("Matern nu must be 0.5, 1.5 or 2.5, got {nu}"),
            )),
        }
    }
}

/// The family of a kernel, without its scale.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "family", rename_all = "snake_case")]
pub enum KernelKind {
    /// `exp(-gamma ||x - x'||^2)`.
    Gaussian,
    /// `exp(-gamma ||x - x'||_1)`.
    Laplacian,
    /// Matern with smoothness `nu` and length scale `1/gamma`.
    Matern {
        /// Smoothness.
        nu: MaternNu,
    },
}

/// A kernel with its scale.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Kernel {
    /// The family.
    pub kind: KernelKind,
    /// The scale `gamma > 0` (see the module documentation for each family's meaning).
    pub gamma: f64,
}

/// How the kernel scale is chosen.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub enum Bandwidth {
    /// An explicit `gamma`.
    Gamma(f64),
    /// The median heuristic: the median pairwise distance `m` of (a subsample of) the
    /// training rows sets `gamma = 1/(2 m^2)` (Gaussian, `m` Euclidean), `1/m` (Laplacian, `m`
    /// in L1), `1/m` (Matern, Euclidean).
    Median,
    /// The Joker reference code's rule: `gamma = 1/s` with `s` the mean squared Euclidean
    /// distance between training rows (computed exactly), for every family (for Matern
    /// `1/sqrt(s)`).
    MeanSquaredDistance,
    /// scikit-learn's `gamma = "scale"`: `gamma = 1/(d v)` with `v` the variance of all
    /// `n d` entries of the training rows (1 for z-scored features without constant columns),
    /// for the Gaussian; `1/(d sqrt(v))` for the Laplacian (its L1 distance grows as `d`) and
    /// `1/sqrt(d v)` for Matern (Euclidean distance). Better than the median heuristic on 7 of
    /// 11 exact fits of the shared sets (by up to 2.1x in RMSE), worse with random features at
    /// fixed `M` (`docs/solver.md`).
    Scale,
    /// The default: by the representation the fit trains on, [`Scale`](Self::Scale) on the
    /// exact kernel and on Nystrom maps, [`MeanSquaredDistance`](Self::MeanSquaredDistance) on
    /// random Fourier features, as chosen on the tuning half of the shared sets
    /// (`docs/bench/sets.md`); the median heuristic where a streamed fit sees one sample.
    Auto,
}

impl Bandwidth {
    /// The rule [`Auto`](Self::Auto) stands for on a fit over random Fourier features
    /// (`random_features`) or over the exact kernel or a Nystrom map (otherwise), and for the
    /// doubly stochastic solvers (`stochastic`: the median, as their streamed fits, which see a
    /// sample of the rows, so that a streamed fit is the fit in memory); any other rule as it
    /// is.
    pub fn for_fit(self, random_features: bool, stochastic: bool) -> Bandwidth {
        match self {
            Bandwidth::Auto if stochastic => Bandwidth::Median,
            Bandwidth::Auto if random_features => Bandwidth::MeanSquaredDistance,
            Bandwidth::Auto => Bandwidth::Scale,
            other => other,
        }
    }

    /// The rule's name on the command line and in messages.
    pub fn name(self) -> &'static str {
        match self {
            Bandwidth::Gamma(_) => "gamma",
            Bandwidth::Median => "median",
            Bandwidth::MeanSquaredDistance => "msd",
            Bandwidth::Scale => "scale",
            Bandwidth::Auto => "auto",
        }
    }
}

impl Kernel {
    /// Checks `gamma`.
    pub fn validate(&self) -> Result<()> {
        if !(self.gamma > 0.0 && self.gamma.is_finite()) {
            return Err(invalid(
                "gamma",
                format!(
                    "the kernel scale must be positive and finite, got {}",
                    self.gamma
                ),
            ));
        }
        Ok(())
    }

    /// The kernel as a function of the distance it is defined on: the squared Euclidean
    /// distance (Gaussian), the L1 distance (Laplacian) or the Euclidean distance (Matern).
    #[inline]
    pub fn of_distance(&self, dist: f64) -> f64 {
        let g = self.gamma;
        match self.kind {
            KernelKind::Gaussian | KernelKind::Laplacian => (-g * dist).exp(),
            KernelKind::Matern { nu } => {
                let r = g * dist;
                match nu {
                    MaternNu::Half => (-r).exp(),
                    MaternNu::ThreeHalves => {
                        let t = 3f64.sqrt() * r;
                        (1.0 + t) * (-t).exp()
                    }
                    MaternNu::FiveHalves => {
                        let t = 5f64.sqrt() * r;
                        (1.0 + t + t * t / 3.0) * (-t).exp()
                    }
                }
            }
        }
    }

    /// Whether the kernel works on the L1 distance.
    pub fn uses_l1(&self) -> bool {
        self.kind == KernelKind::Laplacian
    }

    /// Exact kernel value between two points, in `f64`.
    pub fn eval(&self, x: &[f64], z: &[f64]) -> f64 {
        let dist = match self.kind {
            KernelKind::Gaussian => x.iter().zip(z).map(|(a, b)| (a - b) * (a - b)).sum(),
            KernelKind::Laplacian => x.iter().zip(z).map(|(a, b)| (a - b).abs()).sum(),
            KernelKind::Matern { .. } => x
                .iter()
                .zip(z)
                .map(|(a, b)| (a - b) * (a - b))
                .sum::<f64>()
                .sqrt(),
        };
        self.of_distance(dist)
    }
}

/// Rows used by the bandwidth heuristics (a deterministic subsample beyond this).
const HEURISTIC_ROWS: usize = 2000;

/// Resolves a [`Bandwidth`] to `gamma` for the given kernel family on the given data.
pub fn resolve_gamma<T: Scalar>(
    kind: KernelKind,
    bandwidth: Bandwidth,
    x: &Features<T>,
    seed: u64,
) -> Result<f64> {
    let gamma = match bandwidth {
        Bandwidth::Gamma(g) => g,
        // a caller that knows no representation: the exact kernel's rule
        Bandwidth::Auto => return resolve_gamma(kind, Bandwidth::Scale, x, seed),
        Bandwidth::MeanSquaredDistance | Bandwidth::Scale => {
            return gamma_of_sums(kind, bandwidth, &RowSums::of(x));
        }
        Bandwidth::Median => {
            let m = median_distance(x, kind == KernelKind::Laplacian, seed);
            if !(m > 0.0) {
                return Err(no_scale(x.nrows(), "median pairwise distance"));
            }
            match kind {
                KernelKind::Gaussian => 0.5 / (m * m),
                _ => 1.0 / m,
            }
        }
    };
    let k = Kernel { kind, gamma };
    k.validate()?;
    Ok(gamma)
}

/// The sums over the rows that the data-wide bandwidth rules need: the rows, each column's
/// sum, and the sum of the squares of all entries. Sums add over ranks, so a distributed fit
/// resolves the rule on all its rows as one process would.
#[derive(Clone, Debug, PartialEq)]
pub struct RowSums {
    /// The number of rows.
    pub rows: f64,
    /// The columns' sums.
    pub columns: Vec<f64>,
    /// The sum of the squares of all entries.
    pub squares: f64,
}

impl RowSums {
    /// The sums of the rows of `x` (zeros of sparse rows included).
    pub fn of<T: Scalar>(x: &Features<T>) -> RowSums {
        Self::of_weighted(x, None)
    }

    /// The sums of the rows of `x`, row `i` counted `weights[i]` times (`None`: once each), so
    /// that the rules give a row of weight `k` the say of `k` copies of it.
    pub fn of_weighted<T: Scalar>(x: &Features<T>, weights: Option<&[f64]>) -> RowSums {
        // rows mapped from a file were summed when it was opened: no second read
        if let (None, Features::Dense(m)) = (weights, x)
            && let Some(packed) = m.opening_sums()
        {
            return RowSums::unpacked(packed);
        }
        let d = x.ncols();
        let mut columns = vec![0.0f64; d];
        let mut squares = 0.0f64;
        let mut row = vec![T::default(); d];
        for i in 0..x.nrows() {
            let w = weights.map_or(1.0, |w| w[i]);
            x.gather_range(i, &mut row);
            for (s, v) in columns.iter_mut().zip(&row) {
                let v = v.to_f64();
                *s += w * v;
                squares += w * v * v;
            }
        }
        RowSums {
            rows: weights.map_or(x.nrows() as f64, |w| w.iter().sum()),
            columns,
            squares,
        }
    }

    /// The sums as one vector (`[rows, squares, columns...]`), to be summed over ranks.
    pub fn packed(&self) -> Vec<f64> {
        let mut v = vec![self.rows, self.squares];
        v.extend_from_slice(&self.columns);
        v
    }

    /// The sums of a [`packed`](Self::packed) vector.
    pub fn unpacked(v: &[f64]) -> RowSums {
        RowSums {
            rows: v.first().copied().unwrap_or(0.0),
            squares: v.get(1).copied().unwrap_or(0.0),
            columns: v.get(2..).unwrap_or(&[]).to_vec(),
        }
    }

    /// The mean squared Euclidean distance between distinct rows:
    /// `2 n / (n - 1) (mean ||x||^2 - ||mean x||^2)`.
    pub fn mean_squared_distance(&self) -> f64 {
        let n = self.rows;
        if n < 2.0 {
            return 0.0;
        }
        let norm_mean: f64 = self.columns.iter().map(|s| (s / n) * (s / n)).sum();
        (2.0 * n / (n - 1.0) * (self.squares / n - norm_mean)).max(0.0)
    }

    /// The variance of all `n d` entries, as numpy's `X.var()`.
    pub fn entry_variance(&self) -> f64 {
        let count = self.rows * self.columns.len() as f64;
        if count == 0.0 {
            return 0.0;
        }
        let mean = self.columns.iter().sum::<f64>() / count;
        (self.squares / count - mean * mean).max(0.0)
    }
}

/// `gamma` of the data-wide rules ([`Bandwidth::MeanSquaredDistance`], [`Bandwidth::Scale`])
/// from the rows' sums; other rules are refused.
pub fn gamma_of_sums(kind: KernelKind, bandwidth: Bandwidth, sums: &RowSums) -> Result<f64> {
    let n = sums.rows as usize;
    let gamma = match bandwidth {
        Bandwidth::MeanSquaredDistance => {
            let s = sums.mean_squared_distance();
            if !(s > 0.0) {
                return Err(no_scale(n, "mean squared distance"));
            }
            match kind {
                KernelKind::Matern { .. } => 1.0 / s.sqrt(),
                _ => 1.0 / s,
            }
        }
        Bandwidth::Scale => {
            let v = sums.entry_variance();
            if n < 2 || !(v > 0.0) {
                return Err(no_scale(n, "entries' variance"));
            }
            let d = sums.columns.len() as f64;
            match kind {
                KernelKind::Gaussian => 1.0 / (d * v),
                KernelKind::Laplacian => 1.0 / (d * v.sqrt()),
                KernelKind::Matern { .. } => 1.0 / (d * v).sqrt(),
            }
        }
        other => {
            return Err(invalid(
                "bandwidth",
                format!(
                    "the {} rule is not resolved from the rows' sums",
                    other.name()
                ),
            ));
        }
    };
    Kernel { kind, gamma }.validate()?;
    Ok(gamma)
}

/// The error of a bandwidth heuristic that finds no distance to scale by.
fn no_scale(n: usize, heuristic: &str) -> JokerError {
    let why = if n < 2 {
        format!(
            "the training data has {n} row, so there are no distances to take the {heuristic} of"
        )
    } else {
        format!("the {heuristic} of the training rows is zero (most rows are identical)")
    };
    invalid(
        "gamma",
        format!("{why}; give the kernel scale gamma explicitly"),
    )
}

/// Mean of `||x_i - x_j||^2` over all ordered pairs `i != j`, exactly, in `O(n d)`:
/// `2 n/(n-1) (mean ||x||^2 - ||mean x||^2)`.
pub fn mean_squared_distance<T: Scalar>(x: &Features<T>) -> f64 {
    RowSums::of(x).mean_squared_distance()
}

/// The variance of all `n d` entries of `x` (zeros of sparse rows included), as numpy's
/// `X.var()`.
pub fn entry_variance<T: Scalar>(x: &Features<T>) -> f64 {
    RowSums::of(x).entry_variance()
}

/// The rows of `n` the median heuristic looks at, in the order it reads them: all of them up
/// to `HEURISTIC_ROWS`, a seeded draw without replacement beyond: the head of a shuffle of
/// all rows up to `FLOYD_ROWS` (8 bytes a row, while the rows are in memory anyway), Floyd's
/// draw beyond (memory for the draw only: a file streamed a part at a time may have any
/// number of rows).
pub fn heuristic_rows(n: usize, seed: u64) -> Vec<usize> {
    let mut rng = Stream::new(seed, streams::BANDWIDTH_SUBSAMPLE);
    if n > FLOYD_ROWS {
        let k = HEURISTIC_ROWS;
        let mut seen = std::collections::HashSet::with_capacity(k);
        let mut idx = Vec::with_capacity(k);
        for j in n - k..n {
            let t = rng.below(j + 1);
            let pick = if seen.contains(&t) { j } else { t };
            seen.insert(pick);
            idx.push(pick);
        }
        return idx;
    }
    let mut idx: Vec<usize> = (0..n).collect();
    if n > HEURISTIC_ROWS {
        rng.shuffle(&mut idx);
        idx.truncate(HEURISTIC_ROWS);
    }
    idx
}

/// Rows beyond which [`heuristic_rows`] draws by Floyd's algorithm instead of a shuffle.
const FLOYD_ROWS: usize = 1 << 24;

/// Median pairwise distance (Euclidean or L1) over the pairs within groups of a deterministic
/// subsample of at most `HEURISTIC_ROWS` rows ([`median_groups`]).
pub fn median_distance<T: Scalar>(x: &Features<T>, l1: bool, seed: u64) -> f64 {
    x.sampled(|| median_of_sample(x, l1, seed))
}

/// [`median_distance`] on rows read as they are.
fn median_of_sample<T: Scalar>(x: &Features<T>, l1: bool, seed: u64) -> f64 {
    let d = x.ncols();
    let idx = heuristic_rows(x.nrows(), seed);
    let groups = median_groups(idx.len(), seed);
    // one buffer for every group's pairs, each group writing its own part (fresh pages,
    // faulted in by the thread that writes them, and no copy into one list at the end)
    let mut dists = vec![0.0f64; groups.iter().map(|g| pairs_below(g.len())).sum()];
    let mut parts = Vec::with_capacity(groups.len());
    let mut rest = dists.as_mut_slice();
    for g in &groups {
        let (part, tail) = rest.split_at_mut(pairs_below(g.len()));
        parts.push(part);
        rest = tail;
    }
    // the groups run in parallel; a single group (up to 256 rows) parallelises within
    let par = groups.len() == 1;
    groups.par_iter().zip(parts).for_each(|(group, out)| {
        let picked: Vec<usize> = group.iter().map(|&r| idx[r]).collect();
        let mut own = vec![T::default(); picked.len() * d];
        x.gather_dense(&picked, &mut own);
        let own: Vec<f64> = own.iter().map(|v| v.to_f64()).collect();
        if l1 {
            l1_distances_below(&own, group.len(), d, out)
        } else {
            squared_distances_below(&own, group.len(), d, par, out)
        }
    });
    if l1 {
        upper_median(&mut dists)
    } else {
        // the square root is monotone: the median of the squares, rooted once
        upper_median(&mut dists).sqrt()
    }
}

/// The pairs among `k` rows, `k (k - 1) / 2`.
fn pairs_below(k: usize) -> usize {
    k * k.saturating_sub(1) / 2
}

/// Rows per group of [`median_groups`] (at most).
const MEDIAN_GROUP_ROWS: usize = 256;

/// The groups of the `k` subsample rows whose pairs the median heuristic takes: all `k` rows
/// up to 256 (`MEDIAN_GROUP_ROWS`), beyond them `ceil(k / 256)` groups of near-equal size
/// (consecutive runs of a seeded shuffle). Every row takes part in as many pairs as the
/// others, so the median of the grouped pairs estimates the median of all pairs about as well
/// (the rows' own spread dominates the error once there are many pairs per row) at an eighth
/// of the distances for 2,000 rows: 255,000 instead of 2 million, a GEMM of 1/8 the flops and
/// a selection over 2 MB instead of 16 (on 2,309 x 128 rows that was 17 ms of a 58 ms fit).
pub fn median_groups(k: usize, seed: u64) -> Vec<Vec<usize>> {
    let mut order: Vec<usize> = (0..k).collect();
    if k <= MEDIAN_GROUP_ROWS {
        return vec![order];
    }
    Stream::new(seed, streams::MEDIAN_GROUPS).shuffle(&mut order);
    let g = k.div_ceil(MEDIAN_GROUP_ROWS);
    (0..g)
        .map(|t| order[t * k / g..(t + 1) * k / g].to_vec())
        .collect()
}

/// The element of rank `len / 2` of non-negative, non-NaN values (0 for none): the upper
/// median, as a sort would give it. Non-negative floats order as their bit patterns do, so the
/// selection runs on integer keys: a histogram of the keys' top bits finds the bucket that
/// holds the rank (one pass), and only that bucket's values are selected among (distances
/// spread over a few octaves fill many buckets, so it holds a small share of them).
fn upper_median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let mid = v.len() / 2;
    if v.len() < SELECT_BY_BUCKETS {
        let (_, m, _) = v.select_nth_unstable_by_key(mid, |x| x.to_bits());
        return *m;
    }
    let bucket = |x: &f64| (x.to_bits() >> MEDIAN_KEY_SHIFT) as usize;
    let mut counts = vec![0usize; 1 << (64 - MEDIAN_KEY_SHIFT - 1)];
    v.iter().for_each(|x| counts[bucket(x)] += 1);
    let (mut target, mut below) = (0, 0);
    for (b, &c) in counts.iter().enumerate() {
        if below + c > mid {
            target = b;
            break;
        }
        below += c;
    }
    let mut inside: Vec<u64> = v
        .iter()
        .filter(|x| bucket(x) == target)
        .map(|x| x.to_bits())
        .collect();
    let (_, m, _) = inside.select_nth_unstable(mid - below);
    f64::from_bits(*m)
}

/// Values from which [`upper_median`] selects within a bucket of the keys' top bits.
const SELECT_BY_BUCKETS: usize = 1 << 14;

/// The keys' bits below a bucket of [`upper_median`]: the top 16 bits of a non-negative f64
/// (its exponent and four bits of its mantissa, a sixteenth of an octave per bucket) make
/// 2^15 buckets, a 256 KB histogram.
const MEDIAN_KEY_SHIFT: u32 = 48;

/// The `k` rows' pairwise L1 distances into `dists` (`k (k - 1) / 2` values): row `i`'s to
/// rows `0..i` at `i (i - 1) / 2` onwards.
fn l1_distances_below(rows: &[f64], k: usize, d: usize, dists: &mut [f64]) {
    below_rows(dists, k)
        .into_par_iter()
        .enumerate()
        .for_each(|(i, out)| {
            let xi = &rows[i * d..(i + 1) * d];
            for (j, o) in out.iter_mut().enumerate() {
                *o = l1_distance(xi, &rows[j * d..(j + 1) * d]);
            }
        });
}

/// The `k` rows' pairwise squared Euclidean distances into `dists`, laid out as [`l1_distances_below`]'s,
/// from `||x_i||^2 + ||x_j||^2 - 2 x_i.x_j` with the products from GEMMs: the median bandwidth's
/// `k^2 d / 2` multiply-adds at the machine's GEMM rate rather than pair by pair (on 2,000
/// rows of 100-200 features that was a third of a small set's fit). The products are formed a
/// band of `DISTANCE_BAND` rows at a time against the rows before the band's end, so the
/// buffer holds a band rather than all `k^2` products, and the bands take about the triangle's
/// products (64 rows of bands: 40,600 products for 250 rows instead of 62,500). With `par` the
/// GEMM and the band's rows run in parallel, otherwise on the calling thread (the median's
/// groups run in parallel already). A squared distance within rounding of the norms
/// (duplicate rows) counts as zero, as the differences would give.
fn squared_distances_below(rows: &[f64], k: usize, d: usize, par: bool, dists: &mut [f64]) {
    if d == 0 {
        dists.fill(0.0);
        return;
    }
    use faer::linalg::matmul::matmul;
    use faer::{Accum, MatMut, MatRef};
    let norms: Vec<f64> = rows.chunks_exact(d).map(|r| dot(r, r)).collect();
    let mut products = vec![0.0f64; DISTANCE_BAND.min(k) * k];
    let mut below = below_rows(dists, k);
    for r0 in (0..k).step_by(DISTANCE_BAND) {
        let r1 = (r0 + DISTANCE_BAND).min(k);
        let band = &mut products[..(r1 - r0) * r1];
        matmul(
            MatMut::from_row_major_slice_mut(band, r1 - r0, r1),
            Accum::Replace,
            MatRef::from_row_major_slice(&rows[r0 * d..r1 * d], r1 - r0, d),
            MatRef::from_row_major_slice(&rows[..r1 * d], r1, d).transpose(),
            1.0,
            match par {
                true => crate::linalg::par_for(r1 - r0, r1, d),
                false => faer::Par::Seq,
            },
        );
        let band = &*band;
        let row = |(t, out): (usize, &mut &mut [f64])| {
            let i = r0 + t;
            let products = &band[t * r1..t * r1 + i];
            let ni = norms[i];
            for ((o, &p), &nj) in out.iter_mut().zip(products).zip(&norms[..i]) {
                let scale = ni + nj;
                let sq = scale - 2.0 * p;
                // a select, not a branch, so that the loop runs in vector lanes
                *o = if sq > ROUNDING_OF_NORMS * scale {
                    sq
                } else {
                    0.0
                };
            }
        };
        match par {
            true => below[r0..r1].par_iter_mut().enumerate().for_each(row),
            false => below[r0..r1].iter_mut().enumerate().for_each(row),
        }
    }
}

/// Rows of products per GEMM in [`squared_distances_below`].
const DISTANCE_BAND: usize = 64;

/// `dists` (`k (k - 1) / 2` values) cut into row `i`'s distances to rows `0..i`, `i` values
/// each.
fn below_rows(dists: &mut [f64], k: usize) -> Vec<&mut [f64]> {
    let mut tri = Vec::with_capacity(k);
    let mut rest = dists;
    for i in 0..k {
        let (row, tail) = rest.split_at_mut(i);
        tri.push(row);
        rest = tail;
    }
    tri
}

/// Relative to `||x_i||^2 + ||x_j||^2`, the rounding below which a squared distance formed
/// from norms and a product is taken as zero (a few units of f64 rounding per term).
const ROUNDING_OF_NORMS: f64 = 16.0 * f64::EPSILON;

#[cfg(test)]
mod tests {
    use super::*;

    /// The median heuristic's rows are distinct and in range, a shuffle's head up to
    /// `FLOYD_ROWS` and Floyd's draw beyond; the same seed gives the same rows.
    #[test]
    fn heuristic_rows_are_distinct_draws() {
        assert_eq!(heuristic_rows(5, 1), vec![0, 1, 2, 3, 4]);
        for n in [HEURISTIC_ROWS + 1, 100_000, FLOYD_ROWS + 7, 150_000_000] {
            let rows = heuristic_rows(n, 3);
            assert_eq!(rows.len(), HEURISTIC_ROWS);
            let set: std::collections::HashSet<_> = rows.iter().copied().collect();
            assert_eq!(set.len(), HEURISTIC_ROWS, "n = {n}");
            assert!(rows.iter().all(|&r| r < n));
            assert_eq!(rows, heuristic_rows(n, 3));
            assert_ne!(rows, heuristic_rows(n, 4));
            // spread over the rows, not bunched at either end
            let low = rows.iter().filter(|&&r| r < n / 2).count();
            assert!(
                (800..1200).contains(&low),
                "n = {n}: {low} in the lower half"
            );
        }
    }
    use crate::data::DenseMatrix;

    #[test]
    fn the_scale_rule_is_one_over_d_times_the_entries_variance() {
        // entries 0, 1, 2, -1, 3, 5, 0, 4: mean 14/8, mean square 56/8
        let rows = vec![vec![0.0, 1.0, 2.0, -1.0], vec![3.0, 5.0, 0.0, 4.0]];
        let dense = Features::Dense(DenseMatrix::<f64>::from_rows(&rows).unwrap());
        let var = 56.0 / 8.0 - (14.0f64 / 8.0).powi(2);
        assert!((entry_variance(&dense) - var).abs() < 1e-12);
        for (kind, want) in [
            (KernelKind::Gaussian, 1.0 / (4.0 * var)),
            (KernelKind::Laplacian, 1.0 / (4.0 * var.sqrt())),
            (
                KernelKind::Matern {
                    nu: MaternNu::FiveHalves,
                },
                1.0 / (4.0 * var).sqrt(),
            ),
        ] {
            let g = resolve_gamma(kind, Bandwidth::Scale, &dense, 1).unwrap();
            assert!((g - want).abs() < 1e-12, "{kind:?}: {g} vs {want}");
        }
        let flat = Features::Dense(DenseMatrix::<f64>::from_rows(&[vec![2.0, 2.0]]).unwrap());
        assert!(resolve_gamma(KernelKind::Gaussian, Bandwidth::Scale, &flat, 1).is_err());
    }

    #[test]
    fn mean_squared_distance_is_exact() {
        let rows = vec![vec![0.0, 1.0], vec![2.0, -1.0], vec![3.0, 5.0]];
        let x = Features::Dense(DenseMatrix::<f64>::from_rows(&rows).unwrap());
        let mut brute = 0.0;
        for i in 0..3 {
            for j in 0..3 {
                if i != j {
                    brute += rows[i]
                        .iter()
                        .zip(&rows[j])
                        .map(|(a, b)| (a - b) * (a - b))
                        .sum::<f64>();
                }
            }
        }
        brute /= 6.0;
        assert!((mean_squared_distance(&x) - brute).abs() < 1e-12);
        // distances sqrt 8, 5, sqrt 37: the median is 5
        assert!((median_distance(&x, false, 1) - 5.0).abs() < 1e-12);
    }

    /// The selection returns what a sort gives at rank `len / 2`, on fresh random
    /// values of several magnitudes, with ties, zeros, one value and none, and on values
    /// that all fall in one bucket of its histogram, below and above the size where it
    /// selects by buckets.
    #[test]
    fn upper_median_is_the_sorted_rank() {
        let mut rng = Stream::new(5, 1);
        for len in [1usize, 2, 3, 10, 1001, 16_383, 16_384, 50_000, 300_001] {
            let mut v: Vec<f64> = (0..len)
                .map(|i| match i % 7 {
                    0 => 0.0,
                    1 => 3.5,
                    _ => rng.uniform() * 10f64.powi((i % 5) as i32 - 2),
                })
                .collect();
            // and values within one bucket of the histogram (a sixteenth of an octave)
            let mut narrow: Vec<f64> = (0..len).map(|_| 1.0 + 0.05 * rng.uniform()).collect();
            for v in [&mut v, &mut narrow] {
                let mut sorted = v.clone();
                sorted.sort_by(f64::total_cmp);
                assert_eq!(upper_median(v), sorted[len / 2], "len {len}");
            }
        }
        assert_eq!(upper_median(&mut []), 0.0);
    }

    /// The squared distances from norms and GEMMs agree with the rows' differences (relative 1e-10
    /// on fresh random rows, offset from the origin so that the norms exceed the distances),
    /// duplicate rows are at distance exactly 0, and the median is the differences' median.
    #[test]
    fn gemm_distances_match_the_differences() {
        use crate::linalg::squared_distance;
        let (k, d) = (301, 37);
        let mut rng = Stream::new(11, 0);
        let mut rows: Vec<f64> = (0..k * d)
            .map(|_| 3.0 + 2.0 * rng.uniform() - 1.0)
            .collect();
        for dup in [5, 77, 300] {
            let (src, dst) = (dup - 1, dup);
            rows.copy_within(src * d..(src + 1) * d, dst * d);
        }
        let below = |par: bool| {
            let mut out = vec![f64::NAN; pairs_below(k)];
            squared_distances_below(&rows, k, d, par, &mut out);
            out
        };
        let got = below(true);
        assert_eq!(got, below(false));
        let mut want = Vec::with_capacity(got.len());
        for i in 0..k {
            for j in 0..i {
                want.push(squared_distance(
                    &rows[i * d..(i + 1) * d],
                    &rows[j * d..(j + 1) * d],
                ));
            }
        }
        assert_eq!(got.len(), want.len());
        for (g, w) in got.iter().zip(&want) {
            assert!((g - w).abs() <= 1e-10 * w.max(1.0), "{g} vs {w}");
            assert_eq!(*g == 0.0, *w == 0.0, "{g} vs {w}");
        }
        assert_eq!(got.iter().filter(|&&v| v == 0.0).count(), 3);
        // the median heuristic: the differences' median over the pairs within its groups
        let mut grouped = Vec::new();
        for group in median_groups(k, 1) {
            for (a, &i) in group.iter().enumerate() {
                for &j in &group[..a] {
                    grouped.push(squared_distance(
                        &rows[i * d..(i + 1) * d],
                        &rows[j * d..(j + 1) * d],
                    ));
                }
            }
        }
        let x = Features::Dense(DenseMatrix::new(k, d, rows).unwrap());
        grouped.sort_by(f64::total_cmp);
        let median = median_distance(&x, false, 1);
        let wanted = grouped[grouped.len() / 2].sqrt();
        assert!(
            (median - wanted).abs() < 1e-10 * median,
            "{median} vs {wanted}"
        );
        let mut none = vec![f64::NAN; pairs_below(4)];
        squared_distances_below(&[], 4, 0, true, &mut none);
        assert!(none.iter().all(|&v| v == 0.0));
    }

    /// The median heuristic's groups: one of all rows up to 256, beyond that near-equal groups
    /// of at most 256 that cover every row once, the same for the same seed; and their
    /// median is close to the median of all pairs (2,000 fresh rows of a skewed distribution,
    /// within 1%, Euclidean and L1).
    #[test]
    fn median_groups_cover_the_rows_and_estimate_the_all_pairs_median() {
        assert_eq!(median_groups(256, 3), vec![(0..256).collect::<Vec<_>>()]);
        for k in [257, 1000, 2000] {
            let groups = median_groups(k, 3);
            assert_eq!(groups.len(), k.div_ceil(256));
            assert!(
                groups
                    .iter()
                    .all(|g| g.len() <= 256 && g.len() + 1 >= k / groups.len())
            );
            let mut all: Vec<usize> = groups.concat();
            all.sort_unstable();
            assert_eq!(all, (0..k).collect::<Vec<_>>());
            assert_eq!(groups, median_groups(k, 3));
            assert_ne!(groups, median_groups(k, 4));
        }
        let (k, d) = (2000, 6);
        let mut rng = Stream::new(21, 0);
        let rows: Vec<f64> = (0..k * d).map(|_| (3.0 * rng.uniform()).exp()).collect();
        let x = Features::Dense(DenseMatrix::new(k, d, rows.clone()).unwrap());
        for l1 in [false, true] {
            let mut all = Vec::with_capacity(k * (k - 1) / 2);
            for i in 0..k {
                for j in 0..i {
                    let (a, b) = (&rows[i * d..(i + 1) * d], &rows[j * d..(j + 1) * d]);
                    all.push(if l1 {
                        l1_distance(a, b)
                    } else {
                        crate::linalg::squared_distance(a, b).sqrt()
                    });
                }
            }
            all.sort_by(f64::total_cmp);
            let exact = all[all.len() / 2];
            let got = median_distance(&x, l1, 1);
            assert!(
                (got / exact - 1.0).abs() < 0.01,
                "l1 {l1}: {got} against {exact}"
            );
        }
    }

    #[test]
    fn matern_half_is_exponential_and_all_start_at_one() {
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
            let k = Kernel { kind, gamma: 0.7 };
            assert_eq!(k.eval(&[1.0, 2.0], &[1.0, 2.0]), 1.0);
            assert!(k.eval(&[0.0, 0.0], &[1.0, 2.0]) < 1.0);
        }
        let k = Kernel {
            kind: KernelKind::Matern { nu: MaternNu::Half },
            gamma: 0.7,
        };
        assert!((k.eval(&[0.0, 0.0], &[3.0, 4.0]) - (-3.5f64).exp()).abs() < 1e-15);
    }
}

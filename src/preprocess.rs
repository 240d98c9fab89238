//! Preprocessing stored in the model: feature standardisation, target scaling, and the label
//! encoding of classifiers (binary `+-1` or one-vs-rest).

use serde::{Deserialize, Serialize};

use crate::data::Features;
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
    /// Fits on `x`: means (dense only) and standard deviations.
    pub fn fit<T: Scalar>(x: &Features<T>) -> Self {
        Self::fit_over(x, &Single).unwrap_or_else(|_| Self::identity(x.ncols()))
    }

    /// Fits on the rows of every rank of `comm` (`x` holds this rank's): the column sums are
    /// summed over the ranks, so every rank gets the same map, the one a single process
    /// would fit on all the rows.
    pub fn fit_over<T: Scalar>(x: &Features<T>, comm: &dyn Collective) -> Result<Self> {
        let d = x.ncols();
        let (mut s1, mut s2) = (vec![0.0; d], vec![0.0; d]);
        match x {
            Features::Dense(m) => {
                for i in 0..m.nrows() {
                    for (j, v) in m.row(i).iter().enumerate() {
                        let v = v.to_f64();
                        s1[j] += v;
                        s2[j] += v * v;
                    }
                }
            }
            Features::Sparse(m) => {
                for (j, v) in m.indices().iter().zip(m.values()) {
                    let v = v.to_f64();
                    s1[*j as usize] += v;
                    s2[*j as usize] += v * v;
                }
            }
        }
        let mut n = [x.nrows() as f64];
        comm.sum(&mut n)?;
        comm.sum(&mut s1)?;
        comm.sum(&mut s2)?;
        let n = n[0];
        let dense = matches!(x, Features::Dense(_));
        let mut center = vec![0.0; d];
        let mut scale = vec![1.0; d];
        for j in 0..d {
            let mean = s1[j] / n;
            let var = (s2[j] / n - mean * mean).max(0.0);
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
        let d = self.scale.len();
        if x.ncols() > d {
            return Err(JokerError::ShapeMismatch(format!(
                "data has {} features, the model was trained on {d}",
                x.ncols()
            )));
        }
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
        let mut first = [y.len() as f64, y.iter().sum::<f64>()];
        comm.sum(&mut first)?;
        let (n, mean) = (first[0], first[1] / first[0]);
        let var = comm.sum_one(y.iter().map(|v| (v - mean).powi(2)).sum::<f64>())? / n;
        let sd = var.sqrt();
        Ok(TargetScaler {
            mean,
            scale: if sd > 0.0 { sd } else { 1.0 },
        })
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::DenseMatrix;

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
}

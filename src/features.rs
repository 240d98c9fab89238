//! Random Fourier features `psi(x) = sqrt(2/M) cos(W x + b)` (Rahimi and Recht), with every
//! entry of `W` and `b` a pure function of `(seed, index)` through Philox-4x32-10.
//!
//! The generator below is the single definition of the map; the CUDA kernels in `cuda/rff.cu`
//! implement the same formulas (see `cuda/philox.cuh`). For feature `j` and input dimension `k`
//! with key `key_of(seed)`:
//! - Gaussian: `W[j,k] = sqrt(2 gamma) * normal(philox([j, k, 0, 0]))`;
//! - Laplacian: `W[j,k] = gamma * tan(pi (u - 1/2))`, `u` uniform from `philox([j, k, 0, 0])`;
//! - Matern: `W[j,k] = gamma * normal(philox([j, k, 0, 0])) * sqrt(2 nu / chi2_j)` with
//!   `chi2_j = sum_{i < 2 nu} normal(philox([j, i, 1, 0]))^2`;
//! - `b_j = 2 pi u`, `u` uniform from `philox([j, 0, 2, 0])`.
//!
//! Values are computed in `f64` and rounded once to the working precision.
//!
//! [`FeatureMap`] is either this map or a Nystrom map ([`nystrom`]); the solvers and backends
//! see the map only through `psi(X)` of a block of rows.

use serde::{Deserialize, Serialize};

pub mod nystrom;

pub use nystrom::{Centers, NystromMap};

use crate::error::{Result, invalid};
use crate::kernel::{Kernel, KernelKind};
use crate::rng::{key_of, normal_from, philox4x32_10, uniform_open};
use crate::scalar::Scalar;

/// Which feature map approximates the kernel in a feature-space fit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FeatureKind {
    /// Random Fourier features, every entry a function of the seed.
    #[default]
    Random,
    /// A Nystrom map over `n_components` centres chosen from the training rows.
    Nystrom(Centers),
}

/// A feature map `psi` of `m` features: random Fourier features or a Nystrom map.
#[derive(Clone, Debug)]
pub enum FeatureMap<T> {
    /// Random Fourier features.
    Random(RandomMap<T>),
    /// A Nystrom map.
    Nystrom(NystromMap<T>),
}

impl<T: Scalar> FeatureMap<T> {
    /// The random-feature map of `spec` (see [`RandomMap::new`]).
    pub fn new(spec: FeatureSpec) -> Result<Self> {
        RandomMap::new(spec).map(FeatureMap::Random)
    }

    /// Number of features: `M`, plus the constant feature of a random map's bias.
    pub fn m(&self) -> usize {
        match self {
            FeatureMap::Random(r) => r.m() + usize::from(r.bias().is_some()),
            FeatureMap::Nystrom(n) => n.m(),
        }
    }
    /// The value `B` of the constant last feature, if the map has one ([`RandomMap::with_bias`]).
    pub fn bias(&self) -> Option<f64> {
        self.random().and_then(RandomMap::bias)
    }
    /// Input dimension `d`.
    pub fn d(&self) -> usize {
        match self {
            FeatureMap::Random(r) => r.d(),
            FeatureMap::Nystrom(n) => n.d(),
        }
    }
    /// The kernel approximated.
    pub fn kernel(&self) -> &Kernel {
        match self {
            FeatureMap::Random(r) => &r.spec().kernel,
            FeatureMap::Nystrom(n) => n.kernel(),
        }
    }
    /// The random-feature map, if this is one.
    pub fn random(&self) -> Option<&RandomMap<T>> {
        match self {
            FeatureMap::Random(r) => Some(r),
            FeatureMap::Nystrom(_) => None,
        }
    }
}

/// What defines a random-feature map; a model file stores this, never `W`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct FeatureSpec {
    /// The kernel being approximated.
    pub kernel: Kernel,
    /// Number of features `M`.
    pub n_components: usize,
    /// Input dimension `d`.
    pub dim: usize,
    /// Seed of the Philox stream.
    pub seed: u64,
}

/// One frequency `W[j, k]` of the map, in `f64`.
pub fn frequency(spec: &FeatureSpec, j: usize, k: usize) -> f64 {
    let key = key_of(spec.seed);
    let g = spec.kernel.gamma;
    let blk = philox4x32_10([j as u32, k as u32, 0, 0], key);
    match spec.kernel.kind {
        KernelKind::Gaussian => (2.0 * g).sqrt() * normal_from(blk),
        KernelKind::Laplacian => {
            let u = uniform_open(blk[0], blk[1]);
            g * (std::f64::consts::PI * (u - 0.5)).tan()
        }
        KernelKind::Matern { nu } => {
            let dof = 2.0 * nu.value();
            g * normal_from(blk) * (dof / chi2(key, j, dof as u32)).sqrt()
        }
    }
}

/// `chi2_j` of the Matern sampler: a sum of `dof` squared normals of feature `j`.
fn chi2(key: [u32; 2], j: usize, dof: u32) -> f64 {
    (0..dof)
        .map(|i| normal_from(philox4x32_10([j as u32, i, 1, 0], key)).powi(2))
        .sum()
}

/// The phase `b_j` in `[0, 2 pi)`.
pub fn phase(spec: &FeatureSpec, j: usize) -> f64 {
    let blk = philox4x32_10([j as u32, 0, 2, 0], key_of(spec.seed));
    std::f64::consts::TAU * uniform_open(blk[0], blk[1])
}

/// Refuses a bias feature `B` ([`RandomMap::with_bias`]) that is negative or not finite.
pub fn check_bias(bias: f64) -> Result<()> {
    if bias.is_finite() && bias >= 0.0 {
        Ok(())
    } else {
        Err(invalid(
            "bias",
            format!("the bias feature B must be finite and >= 0, got {bias}"),
        ))
    }
}

/// A feature map with `W` and `b` materialised in the working precision (the CPU caches
/// them: `M d` values, far smaller than a feature block).
#[derive(Clone, Debug)]
pub struct RandomMap<T> {
    spec: FeatureSpec,
    /// `W^T`, row-major `d x M`: a row of it is one input coordinate's weight in every
    /// feature, the layout the fused CPU kernel streams (8 features per register).
    wt: Vec<T>,
    /// `b`, length `M`.
    b: Vec<T>,
    /// `B` of the constant feature appended after the `M` random ones, if any.
    bias: Option<f64>,
}

impl<T: Scalar> RandomMap<T> {
    /// Generates the map of `spec` (after validating it).
    pub fn new(spec: FeatureSpec) -> Result<Self> {
        spec.kernel.validate()?;
        if spec.n_components == 0 {
            return Err(invalid(
                "n_components",
                "the number of random features M must be >= 1",
            ));
        }
        if spec.n_components > u32::MAX as usize || spec.dim > u32::MAX as usize {
            return Err(invalid("n_components", "M and d must fit in 32 bits"));
        }
        let (m, d) = (spec.n_components, spec.dim);
        let len = d.saturating_mul(m);
        let mut wt =
            crate::memory::try_filled(len, T::default(), "the random-feature frequencies")?;
        use rayon::prelude::*;
        wt.par_chunks_mut(m).enumerate().for_each(|(k, row)| {
            for (j, v) in row.iter_mut().enumerate() {
                *v = T::from_f64(frequency(&spec, j, k));
            }
        });
        let b = (0..m).map(|j| T::from_f64(phase(&spec, j))).collect();
        Ok(RandomMap {
            spec,
            wt,
            b,
            bias: None,
        })
    }

    /// The map with a constant feature `B` after the `M` random ones: `psi'(x) = [psi(x); B]`,
    /// the kernel `k(x, z) + B^2`. Its weight is an intercept `B theta_B` of the decision
    /// function, regularised like the other weights (LIBLINEAR's `-B`); `B = 0` leaves the map
    /// as it is.
    ///
    /// # Errors
    /// `B` negative or not finite.
    pub fn with_bias(mut self, bias: f64) -> Result<Self> {
        check_bias(bias)?;
        self.bias = (bias > 0.0).then_some(bias);
        Ok(self)
    }

    /// `B` of the constant feature, if the map has one.
    pub fn bias(&self) -> Option<f64> {
        self.bias
    }

    /// The defining spec.
    pub fn spec(&self) -> &FeatureSpec {
        &self.spec
    }
    /// Number of random features `M` (without the constant feature of [`bias`](Self::bias)).
    pub fn m(&self) -> usize {
        self.spec.n_components
    }
    /// Input dimension `d`.
    pub fn d(&self) -> usize {
        self.spec.dim
    }
    /// `W^T`, row-major `d x M` (entry `(k, j)` is `W[j, k]`).
    pub fn wt(&self) -> &[T] {
        &self.wt
    }
    /// `W[j, k]`: coordinate `k` of frequency `j`.
    pub fn w_at(&self, j: usize, k: usize) -> T {
        self.wt[k * self.m() + j]
    }
    /// `W`, row-major `M x d` (a copy, for export).
    pub fn w(&self) -> Vec<T> {
        let (m, d) = (self.m(), self.d());
        (0..m * d).map(|i| self.w_at(i / d, i % d)).collect()
    }
    /// `b`.
    pub fn b(&self) -> &[T] {
        &self.b
    }

    /// `psi(x)` of one point, in `f64` (reference path for tests).
    pub fn eval_f64(&self, x: &[f64]) -> Vec<f64> {
        let (m, d) = (self.m(), self.d());
        let s = (2.0 / m as f64).sqrt();
        (0..m)
            .map(|j| {
                let z: f64 = (0..d).map(|k| self.w_at(j, k).to_f64() * x[k]).sum::<f64>()
                    + self.b[j].to_f64();
                s * z.cos()
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::MaternNu;

    fn spec(kind: KernelKind, m: usize, seed: u64) -> FeatureSpec {
        FeatureSpec {
            kernel: Kernel { kind, gamma: 0.3 },
            n_components: m,
            dim: 3,
            seed,
        }
    }

    #[test]
    fn features_are_a_pure_function_of_the_seed() {
        let a = RandomMap::<f32>::new(spec(KernelKind::Gaussian, 64, 5)).unwrap();
        let b = RandomMap::<f32>::new(spec(KernelKind::Gaussian, 64, 5)).unwrap();
        let c = RandomMap::<f32>::new(spec(KernelKind::Gaussian, 64, 6)).unwrap();
        assert_eq!(a.w(), b.w());
        assert_eq!(a.b(), b.b());
        assert_ne!(a.w(), c.w());
        // a prefix of a larger map is the smaller map: entries depend on (j, k) only
        let big = RandomMap::<f32>::new(spec(KernelKind::Gaussian, 128, 5)).unwrap();
        for j in 0..64 {
            for k in 0..3 {
                assert_eq!(big.w_at(j, k), a.w_at(j, k));
            }
        }
    }

    /// `psi(x)^T psi(z)` approaches `k(x, z)` with error shrinking like `1/sqrt(M)`.
    #[test]
    fn rff_gram_converges_to_the_kernel_at_rate_one_over_sqrt_m() {
        let pts: Vec<Vec<f64>> = (0..12)
            .map(|i| {
                let t = i as f64;
                vec![(0.7 * t).sin() * 2.0, (1.3 * t).cos(), 0.25 * t - 1.5]
            })
            .collect();
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
            let rms = |m: usize| {
                // average over seeds to measure the typical error, not one draw
                let mut acc = 0.0;
                let mut cnt = 0.0;
                for seed in 0..4 {
                    let map = RandomMap::<f64>::new(spec(kind, m, seed)).unwrap();
                    let feats: Vec<Vec<f64>> = pts.iter().map(|p| map.eval_f64(p)).collect();
                    for i in 0..pts.len() {
                        for j in 0..i {
                            let approx: f64 =
                                feats[i].iter().zip(&feats[j]).map(|(a, b)| a * b).sum();
                            let exact = map.spec().kernel.eval(&pts[i], &pts[j]);
                            acc += (approx - exact).powi(2);
                            cnt += 1.0;
                        }
                    }
                }
                (acc / cnt).sqrt()
            };
            let (e1, e2) = (rms(256), rms(4096));
            let ratio = e1 / e2; // 16x more features: expect about 4x less error
            assert!(
                ratio > 2.5 && ratio < 6.5,
                "{kind:?}: rms error {e1} at M=256, {e2} at M=4096, ratio {ratio}"
            );
            assert!(e2 < 0.03, "{kind:?}: rms error {e2} at M=4096");
        }
    }
}

//! A feature map's features formed once: [`StoredFeatures`] keeps `Phi = psi(X)` (`n x M`, in
//! the working precision) in memory, so that a block's `Phi_B` is a slice instead of a new
//! evaluation of the map.
//!
//! It pays where forming a block's features costs far more than reading them: a Nystrom map's
//! `psi(X_B) = K(X_B, C) L^-T` costs `b M d` kernel values and `b M^2` flops of triangular
//! solve, and the coefficient-space engine ([`HostNystrom`](super::nystrom::HostNystrom))
//! that avoids the solve still reads the `M x M` factor several times per block (memory-bound
//! once the factor leaves the cache). Stored, the map is evaluated once (`n M d + n M^2`) and a
//! block costs what random features cost without their generation. A fit takes it where
//! `n M` values fit its kernel cache ([`SolverConfig::kernel_cache`](crate::solver::SolverConfig)).

use super::{Backend, BlockEngine, FeatureProducts, check_order, check_shift};
use crate::data::Features;
use crate::error::Result;
use crate::features::FeatureMap;
use crate::memory::{try_filled, try_filled_par};
use crate::scalar::Scalar;

/// Rows of `Phi` formed per call of the backend's feature map.
const FORM_ROWS: usize = 1024;

/// Bytes of the stored features of `n` rows and `m` features in precision `T`.
pub fn stored_feature_bytes<T>(n: usize, m: usize) -> usize {
    n.saturating_mul(m).saturating_mul(std::mem::size_of::<T>())
}

/// Whether a fit of `n` rows and `m` features in precision `T` keeps its features
/// ([`StoredFeatures`]) under the kernel cache `budget` in bytes.
pub fn stores_features<T>(n: usize, m: usize, budget: usize) -> bool {
    stored_feature_bytes::<T>(n, m) <= budget
}

/// How a fit of `n` rows keeps a Nystrom map of `m` centres under the kernel cache `budget`,
/// for the training record.
pub fn storage_note<T>(n: usize, m: usize, budget: usize) -> String {
    let mib = |b: usize| format!("{:.0} MiB", b as f64 / (1u64 << 20) as f64);
    let bytes = stored_feature_bytes::<T>(n, m);
    if stores_features::<T>(n, m, budget) {
        format!("features formed once and kept ({n} x {m}, {})", mib(bytes))
    } else {
        format!(
            "features formed per block ({n} x {m} would take {}, above the kernel cache of {})",
            mib(bytes),
            mib(budget)
        )
    }
}

/// [`BlockEngine`] over stored features. Positions are those of `order`: row `p` of `Phi` is
/// `psi(x_order[p])`, so a block of consecutive positions is a contiguous slice.
pub struct StoredFeatures<'a, T> {
    backend: &'a dyn Backend<T>,
    map: &'a FeatureMap<T>,
    x: &'a Features<T>,
    order: &'a [usize],
    targets: usize,
    /// `Phi` in `order`'s positions, row-major `n x M`.
    phi: Vec<T>,
    theta: Vec<f64>,
    /// The current block: its first position and length.
    start: usize,
    nb: usize,
    /// The block's rows, gathered for the kernel model's `K_BB`.
    xb: Vec<T>,
    kernel_model: bool,
}

impl<'a, T: Scalar> StoredFeatures<'a, T> {
    /// Forms `Phi` for the rows of `x` in the order `order` (`theta = 0`), with room for
    /// blocks of `block` rows.
    pub fn new(
        backend: &'a dyn Backend<T>,
        map: &'a FeatureMap<T>,
        x: &'a Features<T>,
        order: &'a [usize],
        targets: usize,
        block: usize,
    ) -> Result<Self> {
        check_order(order, x.nrows())?;
        let (n, m, d) = (x.nrows(), map.m(), x.ncols());
        // faulted in by all threads, not one: zeroing the fresh pages of ijcnn1's 389 MB was
        // 15% of its fit (docs/nystrom.md)
        let mut phi = try_filled_par(n * m, T::default(), "the stored features")?;
        let rows = FORM_ROWS.min(n.max(1));
        let mut xc = try_filled(rows * d, T::default(), "rows for the features")?;
        for (k, out) in phi.chunks_mut(rows * m.max(1)).enumerate() {
            let start = k * rows;
            let len = rows.min(n - start);
            x.gather_dense(&order[start..start + len], &mut xc[..len * d]);
            backend.features(map, &xc[..len * d], len, &mut out[..len * m]);
        }
        Ok(StoredFeatures {
            backend,
            map,
            x,
            order,
            targets,
            phi,
            theta: try_filled(m * targets, 0.0, "theta")?,
            start: 0,
            nb: 0,
            xb: try_filled(block * d, T::default(), "the block's rows")?,
            kernel_model: false,
        })
    }

    /// The current block's features `Phi_B` (`nb x M`, row-major).
    fn block(&self) -> &[T] {
        let m = self.map.m();
        &self.phi[self.start * m..(self.start + self.nb) * m]
    }
}

impl<T: Scalar> BlockEngine<T> for StoredFeatures<'_, T> {
    fn load_block(&mut self, start: usize, len: usize) -> Result<()> {
        if start + len > self.order.len() || len * self.x.ncols() > self.xb.len() {
            return Err(crate::error::JokerError::ShapeMismatch(format!(
                "block {start}..{} of {} rows (blocks of at most {})",
                start + len,
                self.order.len(),
                self.xb.len() / self.x.ncols().max(1)
            )));
        }
        self.start = start;
        self.nb = len;
        if self.kernel_model {
            let d = self.x.ncols();
            let rows = &self.order[start..start + len];
            self.x.gather_dense(rows, &mut self.xb[..len * d]);
        }
        Ok(())
    }

    fn block_gram(&mut self, kbb: Option<&mut [f64]>, g: &mut [f64]) -> Result<()> {
        let (nb, m, d) = (self.nb, self.map.m(), self.x.ncols());
        if let Some(kbb) = kbb {
            let kbb = &mut kbb[..nb * nb];
            if self.kernel_model {
                let xb = &self.xb[..nb * d];
                self.backend
                    .kernel_tile(self.map.kernel(), xb, nb, xb, nb, d, kbb);
                // the constant feature's kernel: k(x, z) + B^2
                if let Some(b) = self.map.bias() {
                    kbb.iter_mut().for_each(|v| *v += b * b);
                }
            } else {
                self.backend.gram(self.block(), nb, m, kbb);
            }
        }
        self.backend
            .project(self.block(), nb, m, &self.theta, self.targets, g);
        Ok(())
    }

    fn update(&mut self, delta: &[f64]) -> Result<()> {
        let (nb, m, tt) = (self.nb, self.map.m(), self.targets);
        let (start, phi) = (self.start, &self.phi);
        let block = &phi[start * m..(start + nb) * m];
        self.backend
            .accumulate(block, nb, m, delta, tt, &mut self.theta);
        Ok(())
    }

    fn set_alpha(&mut self, alpha: &[f64]) -> Result<()> {
        let (n, m, tt) = (self.x.nrows(), self.map.m(), self.targets);
        // alpha in `order`'s positions, the rows of `Phi`
        let mut delta = try_filled(n * tt, 0.0, "the dual coefficients in block order")?;
        for t in 0..tt {
            for (p, &i) in self.order.iter().enumerate() {
                delta[t * n + p] = alpha[t * n + i];
            }
        }
        self.theta.fill(0.0);
        self.backend
            .accumulate(&self.phi, n, m, &delta, tt, &mut self.theta);
        Ok(())
    }

    fn decision(&mut self) -> Result<Vec<f64>> {
        let (n, m, tt) = (self.x.nrows(), self.map.m(), self.targets);
        let mut positioned = try_filled(n * tt, 0.0, "the decision values")?;
        self.backend
            .project(&self.phi, n, m, &self.theta, tt, &mut positioned);
        let mut out = try_filled(n * tt, 0.0, "the decision values")?;
        for t in 0..tt {
            for (p, &i) in self.order.iter().enumerate() {
                out[t * n + i] = positioned[t * n + p];
            }
        }
        Ok(out)
    }

    fn theta(&mut self, out: &mut [f64]) -> Result<()> {
        out.copy_from_slice(&self.theta);
        Ok(())
    }

    fn shift_theta(&mut self, by: &[f64]) -> Result<()> {
        check_shift(by.len(), self.theta.len())?;
        for (t, v) in self.theta.iter_mut().zip(by) {
            *t += v;
        }
        Ok(())
    }

    fn set_kernel_model(&mut self, on: bool) -> bool {
        if on && !self.kernel_model && self.nb > 0 {
            // the current block's rows, which load_block gathers only under the kernel model
            let d = self.x.ncols();
            let rows = &self.order[self.start..self.start + self.nb];
            self.x.gather_dense(rows, &mut self.xb[..self.nb * d]);
        }
        self.kernel_model = on;
        true
    }

    fn block_products(&self) -> Option<&dyn FeatureProducts> {
        self.kernel_model.then_some(self as &dyn FeatureProducts)
    }

    fn stored_features(&self) -> Option<(&[T], &[usize])> {
        Some((&self.phi, self.order))
    }
}

impl<T: Scalar> FeatureProducts for StoredFeatures<'_, T> {
    fn transpose_times(&self, s: &[f64]) -> Result<Vec<f64>> {
        let (nb, m) = (self.nb, self.map.m());
        let mut u = vec![0.0; m];
        self.backend
            .accumulate(self.block(), nb, m, &s[..nb], 1, &mut u);
        Ok(u)
    }

    fn times(&self, u: &[f64], out: &mut [f64]) -> Result<()> {
        let (nb, m) = (self.nb, self.map.m());
        self.backend
            .project(self.block(), nb, m, &u[..m], 1, &mut out[..nb]);
        Ok(())
    }

    fn gram(&self, out: &mut [f64]) -> Result<()> {
        let (nb, m) = (self.nb, self.map.m());
        self.backend.gram(self.block(), nb, m, &mut out[..nb * nb]);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::HostRff;
    use crate::backend::agreement::engines_agree;
    use crate::backend::cpu::Cpu;
    use crate::data::DenseMatrix;
    use crate::features::{Centers, FeatureSpec, NystromMap, RandomMap};
    use crate::kernel::{Kernel, KernelKind};
    use crate::rng::Stream;

    /// Every operation on stored features equals the same operation of the engine that forms
    /// each block's features anew, for a Nystrom map and for random features with a bias, over
    /// a shuffled order and a short last block.
    #[test]
    fn stored_features_match_features_formed_per_block() {
        let (n, d, b, tt) = (90, 3, 16, 2);
        let mut s = Stream::new(5, 3);
        let xs: Vec<f64> = (0..n * d).map(|_| 2.0 * s.uniform() - 1.0).collect();
        let x = Features::Dense(DenseMatrix::new(n, d, xs).unwrap());
        let kernel = Kernel {
            kind: KernelKind::Gaussian,
            gamma: 1.3,
        };
        let ny = NystromMap::<f64>::fit(kernel, Centers::Uniform, 40, &x, 0.1, 1, &Cpu).unwrap();
        let spec = FeatureSpec {
            kernel,
            n_components: 50,
            dim: d,
            seed: 7,
        };
        let rff = RandomMap::<f64>::new(spec).unwrap().with_bias(0.5).unwrap();
        for map in [FeatureMap::Nystrom(ny), FeatureMap::Random(rff)] {
            let m = map.m();
            let mut order: Vec<usize> = (0..n).collect();
            s.shuffle(&mut order);
            let mut e = StoredFeatures::new(&Cpu, &map, &x, &order, tt, b).unwrap();
            let mut h = HostRff::new(&Cpu, &map, &x, &order, tt, b).unwrap();
            engines_agree(&mut e, &mut h, (n, b, tt, m), &mut s);
            let shift = vec![0.5; m * tt];
            assert!(e.shift_theta(&shift[1..]).is_err());
            assert!(e.load_block(n - 4, 8).is_err());
            assert!(e.load_block(0, b + 1).is_err());
        }
    }

    #[test]
    fn the_budget_counts_n_times_m_values() {
        assert_eq!(stored_feature_bytes::<f32>(1000, 500), 2_000_000);
        assert!(stores_features::<f64>(1000, 500, 4_000_000));
        assert!(!stores_features::<f64>(1000, 501, 4_000_000));
        assert!(!stores_features::<f32>(usize::MAX, 2, usize::MAX - 1));
    }
}

//! The DBCD-TR engine of a Nystrom map, in the centres' coefficients.
//!
//! With `psi(x) = L^-1 k(C, x)` every product with a block's features goes through the kernel
//! tile `K_BC = K(X_B, C)` and the factor:
//! - `Phi_B theta = K_BC u` with `u = L^-T theta` (the engine keeps `u`, not `theta`);
//! - `theta += Phi_B^T delta` is `u += L^-T L^-1 K_CB delta`;
//! - `Phi_B^T s = L^-1 K_CB s` and `Phi_B v = K_BC L^-T v` (the ratio test's products).
//!
//! A block then costs its tile (`b r d`) and a few `b r + r^2` products, where forming
//! `Phi_B = K_BC L^-T` costs `b r^2`. Only the Gram `Phi_B Phi_B^T` needs `Phi_B`; under the
//! kernel model (`K_BB = K(X_B, X_B)`, [`TrModel::Kernel`](crate::solver::trust_region::TrModel))
//! it is formed only when a block solve falls back to it.

use super::predict::{Predictor, chunk_rows};
use super::{Backend, BlockEngine, FeatureProducts, check_order};
use crate::data::{DenseMatrix, Features};
use crate::error::Result;
use crate::features::NystromMap;
use crate::memory::try_filled;
use crate::scalar::Scalar;

/// [`BlockEngine`] of a Nystrom map on the host, its kernel tiles from the backend.
pub struct HostNystrom<'a, T> {
    backend: &'a dyn Backend<T>,
    map: &'a NystromMap<T>,
    x: &'a Features<T>,
    order: &'a [usize],
    targets: usize,
    /// `u = L^-T theta`, `r x T` column-major.
    u: Vec<f64>,
    /// The centres as rows (for predictions through the exact-kernel path).
    centers: Features<T>,
    /// The current block's rows and `K_BC` (`nb x r`, row-major).
    xb: Vec<T>,
    kbc: Vec<f64>,
    nb: usize,
    kernel_model: bool,
}

impl<'a, T: Scalar> HostNystrom<'a, T> {
    /// An engine with `theta = 0` and room for blocks of `block` rows.
    pub fn new(
        backend: &'a dyn Backend<T>,
        map: &'a NystromMap<T>,
        x: &'a Features<T>,
        order: &'a [usize],
        targets: usize,
        block: usize,
    ) -> Result<Self> {
        check_order(order, x.nrows())?;
        let (r, d) = (map.m(), x.ncols());
        Ok(HostNystrom {
            backend,
            map,
            x,
            order,
            targets,
            u: try_filled(r * targets, 0.0, "theta")?,
            centers: Features::Dense(DenseMatrix::new(r, d, map.centers().to_vec())?),
            xb: try_filled(block * d, T::default(), "the block's rows")?,
            kbc: try_filled(block * r, 0.0, "the block's kernel tile with the centres")?,
            nb: 0,
            kernel_model: false,
        })
    }

    /// `out (nb x T) = K_BC v` for `v` of `r x T`.
    fn tile_times(&self, v: &[f64], targets: usize, out: &mut [f64]) {
        let (nb, r) = (self.nb, self.map.m());
        let kbc = faer::MatRef::from_row_major_slice(&self.kbc[..nb * r], nb, r);
        let v = faer::MatRef::from_column_major_slice(&v[..r * targets], r, targets);
        let out = faer::MatMut::from_column_major_slice_mut(&mut out[..nb * targets], nb, targets);
        let par = crate::linalg::par_for(nb, targets, r);
        faer::linalg::matmul::matmul(out, faer::Accum::Replace, kbc, v, 1.0, par);
        crate::simd::clear_upper_state();
    }

    /// `K_CB s` (`r x T`) for `s` of `nb x T`.
    fn tile_transpose_times(&self, s: &[f64], targets: usize) -> Vec<f64> {
        let (nb, r) = (self.nb, self.map.m());
        let mut out = vec![0.0; r * targets];
        let kbc = faer::MatRef::from_row_major_slice(&self.kbc[..nb * r], nb, r);
        let s = faer::MatRef::from_column_major_slice(&s[..nb * targets], nb, targets);
        faer::linalg::matmul::matmul(
            faer::MatMut::from_column_major_slice_mut(&mut out, r, targets),
            faer::Accum::Replace,
            kbc.transpose(),
            s,
            1.0,
            crate::linalg::par_for(r, targets, nb),
        );
        crate::simd::clear_upper_state();
        out
    }

    /// `Phi_B Phi_B^T` (`nb x nb`, row-major) from `Phi_B = K_BC L^-T`.
    fn block_gram_of_features(&self, out: &mut [f64]) {
        let (nb, r) = (self.nb, self.map.m());
        let psi = self.map.features_of_tile(&self.kbc, nb);
        let p = faer::MatRef::from_row_major_slice(&psi, nb, r);
        faer::linalg::matmul::matmul(
            faer::MatMut::from_row_major_slice_mut(&mut out[..nb * nb], nb, nb),
            faer::Accum::Replace,
            p,
            p.transpose(),
            1.0,
            crate::linalg::par_for(nb, nb, r),
        );
        super::cpu::clear_upper_state();
    }
}

impl<T: Scalar> BlockEngine<T> for HostNystrom<'_, T> {
    fn load_block(&mut self, start: usize, len: usize) -> Result<()> {
        let (r, d) = (self.map.m(), self.x.ncols());
        let rows = &self.order[start..start + len];
        self.x.gather_dense(rows, &mut self.xb[..len * d]);
        self.backend.kernel_tile(
            self.map.kernel(),
            &self.xb[..len * d],
            len,
            self.map.centers(),
            r,
            d,
            &mut self.kbc[..len * r],
        );
        self.nb = len;
        Ok(())
    }

    fn block_gram(&mut self, kbb: Option<&mut [f64]>, g: &mut [f64]) -> Result<()> {
        let (nb, d) = (self.nb, self.x.ncols());
        if let Some(kbb) = kbb {
            if self.kernel_model {
                let xb = &self.xb[..nb * d];
                self.backend
                    .kernel_tile(self.map.kernel(), xb, nb, xb, nb, d, &mut kbb[..nb * nb]);
            } else {
                self.block_gram_of_features(kbb);
            }
        }
        self.tile_times(&self.u, self.targets, g);
        Ok(())
    }

    fn update(&mut self, delta: &[f64]) -> Result<()> {
        let tt = self.targets;
        let mut s = self.tile_transpose_times(delta, tt);
        self.map.solve_kcc(&mut s, tt);
        for (u, v) in self.u.iter_mut().zip(&s) {
            *u += v;
        }
        Ok(())
    }

    fn set_alpha(&mut self, alpha: &[f64]) -> Result<()> {
        let (n, d, r, tt) = (self.x.nrows(), self.x.ncols(), self.map.m(), self.targets);
        let chunk = chunk_rows(d + r, 8).min(n.max(1));
        let mut xc = vec![T::default(); chunk * d];
        let mut tile = vec![0.0; chunk * r];
        let mut s = vec![0.0; r * tt];
        for start in (0..n).step_by(chunk) {
            let rows = chunk.min(n - start);
            self.x.gather_range(start, &mut xc[..rows * d]);
            self.backend.kernel_tile(
                self.map.kernel(),
                &xc[..rows * d],
                rows,
                self.map.centers(),
                r,
                d,
                &mut tile[..rows * r],
            );
            let k = faer::MatRef::from_row_major_slice(&tile[..rows * r], rows, r);
            let a = faer::MatRef::from_column_major_slice_with_stride(&alpha[start..], rows, tt, n);
            faer::linalg::matmul::matmul(
                faer::MatMut::from_column_major_slice_mut(&mut s, r, tt),
                faer::Accum::Add,
                k.transpose(),
                a,
                1.0,
                crate::linalg::par_for(r, tt, rows),
            );
            super::cpu::clear_upper_state();
        }
        self.map.solve_kcc(&mut s, tt);
        self.u = s;
        Ok(())
    }

    fn decision(&mut self) -> Result<Vec<f64>> {
        let pred = Predictor::Exact {
            kernel: self.map.kernel(),
            support: &self.centers,
            rows: None,
            alpha: &self.u,
        };
        Ok(pred.decision(self.backend, self.x, self.targets))
    }

    fn theta(&mut self, out: &mut [f64]) -> Result<()> {
        out.copy_from_slice(&self.u);
        self.map.times_lt(out, self.targets);
        Ok(())
    }

    fn shift_theta(&mut self, by: &[f64]) -> Result<()> {
        if by.len() != self.u.len() {
            return Err(crate::error::JokerError::ShapeMismatch(format!(
                "a theta shift of {} values for a theta of {}",
                by.len(),
                self.u.len()
            )));
        }
        let mut s = by.to_vec();
        self.map.solve_lt(&mut s, self.targets);
        for (u, v) in self.u.iter_mut().zip(&s) {
            *u += v;
        }
        Ok(())
    }

    fn set_kernel_model(&mut self, on: bool) -> bool {
        self.kernel_model = on;
        true
    }

    fn gram_needs_features(&self) -> bool {
        true
    }

    fn block_products(&self) -> Option<&dyn FeatureProducts> {
        self.kernel_model.then_some(self as &dyn FeatureProducts)
    }
}

impl<T: Scalar> FeatureProducts for HostNystrom<'_, T> {
    fn transpose_times(&self, s: &[f64]) -> Result<Vec<f64>> {
        let mut v = self.tile_transpose_times(s, 1);
        self.map.solve_l(&mut v, 1);
        Ok(v)
    }

    fn times(&self, u: &[f64], out: &mut [f64]) -> Result<()> {
        let mut v = u[..self.map.m()].to_vec();
        self.map.solve_lt(&mut v, 1);
        self.tile_times(&v, 1, out);
        Ok(())
    }

    fn gram(&self, out: &mut [f64]) -> Result<()> {
        self.block_gram_of_features(out);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::HostRff;
    use crate::backend::agreement::engines_agree;
    use crate::backend::cpu::Cpu;
    use crate::features::{Centers, FeatureMap};
    use crate::kernel::{Kernel, KernelKind};
    use crate::rng::Stream;

    /// Every operation of the coefficient-space engine equals the same operation on the
    /// explicit features (the host random-feature engine run on the Nystrom map).
    #[test]
    fn the_engine_matches_explicit_features() {
        let (n, d, m, b, tt) = (90, 3, 40, 16, 2);
        let mut s = Stream::new(4, 3);
        let xs: Vec<f64> = (0..n * d).map(|_| 2.0 * s.uniform() - 1.0).collect();
        let x = Features::Dense(DenseMatrix::new(n, d, xs).unwrap());
        let kernel = Kernel {
            kind: KernelKind::Gaussian,
            gamma: 1.3,
        };
        let ny = NystromMap::<f64>::fit(kernel, Centers::Uniform, m, &x, 0.1, 1, &Cpu).unwrap();
        let r = ny.m();
        let fm = FeatureMap::Nystrom(ny.clone());
        let mut order: Vec<usize> = (0..n).collect();
        s.shuffle(&mut order);
        let mut e = HostNystrom::new(&Cpu, &ny, &x, &order, tt, b).unwrap();
        let mut h = HostRff::new(&Cpu, &fm, &x, &order, tt, b).unwrap();
        engines_agree(&mut e, &mut h, (n, b, tt, r), &mut s);
    }
}

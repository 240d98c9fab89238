//! Randomized Nystrom approximation of a positive semi-definite operator known only through
//! products, and the preconditioner it defines (Rathore, Frangella and Udell: the paper's
//! Algorithm 2 after Tropp et al. 2017, with its stabilising shift; what the code follows is
//! in `docs/papers/askotch.md`).
//!
//! `M ~ U diag(Lambda) U^T` with `U` of `p x r`; the preconditioner is `P + rho I`.

use faer::{Mat, MatRef, Side};

use crate::error::{JokerError, Result};
use crate::rng::{Stream, normal_from, streams};

/// A rank-`r` Nystrom approximation `U diag(Lambda) U^T` with its shift `rho`.
#[derive(Clone, Debug)]
pub struct Nystrom {
    /// `p x r`, orthonormal columns in exact arithmetic.
    u: Mat<f64>,
    /// Approximate eigenvalues, descending, `>= 0`.
    lambda: Vec<f64>,
    /// The damping of the preconditioner `P + rho I`.
    rho: f64,
    /// Lower Cholesky factor of `rho diag(Lambda)^-1 + U^T U` (the Woodbury form that does not
    /// assume `U^T U = I`).
    chol: Mat<f64>,
}

/// Eigenvalues below this are replaced by it before inversion (as in the reference code),
/// keeping `Lambda^-1` finite.
const EIG_FLOOR: f64 = 1e-4;

impl Nystrom {
    /// Builds the approximation of the `p x p` operator `apply` (which maps a `p x r` matrix
    /// `X` to `M X`) from an `r`-column Gaussian sketch drawn from `seed`; `trace` is `Tr(M)`
    /// (for the stabilising shift `nu = eps Tr(M)`), `rho` the damping.
    pub fn new(
        p: usize,
        r: usize,
        trace: f64,
        rho: f64,
        seed: u64,
        mut apply: impl FnMut(MatRef<'_, f64>) -> Mat<f64>,
    ) -> Result<Self> {
        if r == 0 || r > p {
            return Err(crate::error::invalid(
                "rank",
                format!("must be between 1 and {p}, got {r}"),
            ));
        }
        if !(rho > 0.0) {
            return Err(crate::error::invalid(
                "rho",
                format!("the damping must be positive, got {rho}"),
            ));
        }
        let mut s = Stream::new(seed, streams::NYSTROM_SKETCH);
        let omega = Mat::<f64>::from_fn(p, r, |_, _| {
            normal_from([s.next_u32(), s.next_u32(), s.next_u32(), s.next_u32()])
        });
        let q = omega.qr().compute_thin_Q();
        let y0 = apply(q.as_ref());
        if y0.nrows() != p || y0.ncols() != r {
            return Err(JokerError::ShapeMismatch(format!(
                "operator returned {} x {}, expected {p} x {r}",
                y0.nrows(),
                y0.ncols()
            )));
        }
        // C C^T = Q^T Y_nu = sym(Q^T Y) + nu I (Q has orthonormal columns), B = Y_nu C^-T.
        let q_y = q.transpose() * &y0;
        let trace = trace.max(f64::MIN_POSITIVE);
        // The shift starts at the f64 rounding level of the paper. An operator evaluated in
        // f32 (the f32 kernel tiles) is indefinite at the 1e-7 level where its spectrum
        // decays fast (low-dimensional data), so a failed factorisation retries with a shift
        // 100 times larger, up to 1e-2 Tr(M); the shift is taken off the eigenvalues after.
        let mut nu = f64::EPSILON * trace;
        let l = loop {
            let core = Mat::<f64>::from_fn(r, r, |i, j| {
                0.5 * (q_y[(i, j)] + q_y[(j, i)]) + if i == j { nu } else { 0.0 }
            });
            match core.llt(Side::Lower) {
                Ok(llt) => break llt.L().to_owned(),
                Err(_) if nu < 1e-4 * trace => nu *= 100.0,
                Err(_) => {
                    return Err(JokerError::Numerical(format!(
                        "Nystrom core matrix is not positive definite even with a shift of {nu:.1e} (trace {trace:.3e}): is the operator positive semi-definite?"
                    )));
                }
            }
        };
        let y = y0 + &q * faer::Scale(nu);
        // B^T = C^-1 Y^T
        let mut bt = y.transpose().to_owned();
        faer::linalg::triangular_solve::solve_lower_triangular_in_place(
            l.as_ref(),
            bt.as_mut(),
            faer::Par::Seq,
        );
        let b = bt.transpose().to_owned();
        let svd = b.thin_svd().map_err(|_| {
            JokerError::Numerical("SVD of the Nystrom sketch did not converge".into())
        })?;
        let u = svd.U().to_owned();
        let sv = svd.S().column_vector();
        let lambda: Vec<f64> = (0..r).map(|i| (sv[i] * sv[i] - nu).max(0.0)).collect();
        Self::with_factors(u, lambda, rho)
    }

    fn with_factors(u: Mat<f64>, lambda: Vec<f64>, rho: f64) -> Result<Self> {
        let r = lambda.len();
        let utu = u.transpose() * &u;
        let m = Mat::<f64>::from_fn(r, r, |i, j| {
            utu[(i, j)]
                + if i == j {
                    rho / lambda[i].max(EIG_FLOOR)
                } else {
                    0.0
                }
        });
        let chol = m
            .llt(Side::Lower)
            .map_err(|_| {
                JokerError::Numerical("preconditioner core is not positive definite".into())
            })?
            .L()
            .to_owned();
        Ok(Nystrom {
            u,
            lambda,
            rho,
            chol,
        })
    }

    /// The factor `U` (`p x r`).
    pub fn u(&self) -> &Mat<f64> {
        &self.u
    }

    /// The approximate eigenvalues, descending.
    pub fn eigenvalues(&self) -> &[f64] {
        &self.lambda
    }

    /// The damping `rho`.
    pub fn rho(&self) -> f64 {
        self.rho
    }

    /// The same approximation with another damping.
    pub fn with_rho(&self, rho: f64) -> Result<Self> {
        Self::with_factors(self.u.clone(), self.lambda.clone(), rho)
    }

    /// `P v` with `P = U diag(Lambda) U^T` (no damping).
    pub fn apply(&self, v: &[f64]) -> Vec<f64> {
        let ut_v = self.ut(v);
        let scaled: Vec<f64> = ut_v.iter().zip(&self.lambda).map(|(a, l)| a * l).collect();
        self.u_times(&scaled)
    }

    /// `(P + rho I)^-1 v` through `(1/rho) (v - U L^-T L^-1 U^T v)` with
    /// `L L^T = rho Lambda^-1 + U^T U`: exact Woodbury without assuming orthonormal `U`.
    pub fn solve(&self, v: &[f64]) -> Vec<f64> {
        let utv = self.ut(v);
        let mut t = Mat::<f64>::from_fn(utv.len(), 1, |i, _| utv[i]);
        let llt_solve = |t: &mut Mat<f64>| {
            faer::linalg::triangular_solve::solve_lower_triangular_in_place(
                self.chol.as_ref(),
                t.as_mut(),
                faer::Par::Seq,
            );
            faer::linalg::triangular_solve::solve_upper_triangular_in_place(
                self.chol.transpose(),
                t.as_mut(),
                faer::Par::Seq,
            );
        };
        llt_solve(&mut t);
        let coef: Vec<f64> = (0..t.nrows()).map(|i| t[(i, 0)]).collect();
        let ut = self.u_times(&coef);
        v.iter().zip(&ut).map(|(a, b)| (a - b) / self.rho).collect()
    }

    /// `(P + rho I)^{-1/2} v = U (Lambda + rho)^{-1/2} U^T v + (v - U U^T v) / sqrt(rho)`.
    pub fn solve_sqrt(&self, v: &[f64]) -> Vec<f64> {
        let ut_v = self.ut(v);
        let inner: Vec<f64> = ut_v
            .iter()
            .zip(&self.lambda)
            .map(|(a, l)| a * ((l + self.rho).powf(-0.5) - self.rho.powf(-0.5)))
            .collect();
        let corr = self.u_times(&inner);
        v.iter()
            .zip(&corr)
            .map(|(a, c)| a / self.rho.sqrt() + c)
            .collect()
    }

    fn ut(&self, v: &[f64]) -> Vec<f64> {
        (0..self.u.ncols())
            .map(|k| (0..self.u.nrows()).map(|i| self.u[(i, k)] * v[i]).sum())
            .collect()
    }

    fn u_times(&self, c: &[f64]) -> Vec<f64> {
        (0..self.u.nrows())
            .map(|i| (0..self.u.ncols()).map(|k| self.u[(i, k)] * c[k]).sum())
            .collect()
    }
}

/// The preconditioned smoothness `lambda_max((P + rho I)^{-1/2} H (P + rho I)^{-1/2})` by
/// `iters` power steps (the paper's Algorithm 3, returning the Rayleigh quotient of the last
/// unit vector rather than the printed dot product of two normalised vectors, which tends to
/// 1). `h` applies `H` to a vector; `precond` of `None` means the identity.
pub fn smoothness(
    p: usize,
    precond: Option<&Nystrom>,
    iters: usize,
    seed: u64,
    mut h: impl FnMut(&[f64]) -> Vec<f64>,
) -> f64 {
    let mut s = Stream::new(seed, streams::POWER_ITERATION);
    let mut v: Vec<f64> = (0..p)
        .map(|_| normal_from([s.next_u32(), s.next_u32(), s.next_u32(), s.next_u32()]))
        .collect();
    let norm = |v: &[f64]| v.iter().map(|x| x * x).sum::<f64>().sqrt();
    let n0 = norm(&v);
    v.iter_mut().for_each(|x| *x /= n0);
    let op = |v: &[f64], h: &mut dyn FnMut(&[f64]) -> Vec<f64>| match precond {
        Some(pc) => pc.solve_sqrt(&h(&pc.solve_sqrt(v))),
        None => h(v),
    };
    let mut rq = 0.0;
    for _ in 0..iters.max(1) {
        let av = op(&v, &mut h);
        rq = v.iter().zip(&av).map(|(a, b)| a * b).sum();
        let nv = norm(&av);
        if !(nv > 0.0) {
            return rq.max(0.0);
        }
        v = av.into_iter().map(|x| x / nv).collect();
    }
    rq
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `Q diag(spec) Q^T` for a random orthogonal `Q`.
    fn with_spectrum(spec: &[f64], seed: u64) -> Mat<f64> {
        let p = spec.len();
        let mut s = Stream::new(seed, 9);
        let g = Mat::<f64>::from_fn(p, p, |_, _| {
            normal_from([s.next_u32(), s.next_u32(), s.next_u32(), s.next_u32()])
        });
        let q = g.qr().compute_Q();
        let d = Mat::<f64>::from_fn(p, p, |i, j| if i == j { spec[i] } else { 0.0 });
        &q * &d * q.transpose()
    }

    /// With a fast-decaying spectrum, rank r captures the top eigenvalues from below and the
    /// spectral-norm error follows the randomized-SVD bound and falls with the rank. An exactly
    /// rank-r matrix is reproduced exactly.
    #[test]
    fn nystrom_error_follows_the_spectrum() {
        let p = 120;
        let spec: Vec<f64> = (0..p).map(|i| 0.5f64.powi(i as i32)).collect();
        let a = with_spectrum(&spec, 1);
        let mut errs = Vec::new();
        for r in [5, 10, 20] {
            let ny = Nystrom::new(p, r, spec.iter().sum(), 1e-3, 7, |x| &a * x).unwrap();
            // Nystrom eigenvalues never exceed the true ones, and miss them by about the tail
            for k in 0..r.min(5) {
                let gap = spec[k] - ny.eigenvalues()[k];
                assert!(
                    gap > -1e-12 && gap <= 10.0 * spec[r],
                    "r={r} k={k}: gap {gap}"
                );
            }
            // spectral-norm error by power iteration on A - P
            let err = smoothness(p, None, 60, 3, |v| {
                let av: Vec<f64> = (0..p)
                    .map(|i| (0..p).map(|j| a[(i, j)] * v[j]).sum())
                    .collect();
                let pv = ny.apply(v);
                // (A - P) is psd: its largest eigenvalue is its norm
                av.iter().zip(&pv).map(|(x, y)| x - y).collect()
            });
            // Halko-Martinsson-Tropp: E||A - A_r|| <= (1 + k/(r - k - 1)) lambda_{k+1} + tail terms,
            // for any k < r - 1; with k = r/2 and a factor 3 for the deviation from the mean
            let k = r / 2;
            let bound = 3.0 * (1.0 + k as f64 / (r - k - 1) as f64) * spec[k];
            assert!(
                err >= 0.0 && err <= bound,
                "r={r}: error {err}, bound {bound}"
            );
            errs.push(err);
        }
        assert!(
            errs[2] < errs[0] / 100.0,
            "errors {errs:?} do not fall with the rank"
        );
        let low: Vec<f64> = (0..p)
            .map(|i| if i < 8 { 1.0 + i as f64 } else { 0.0 })
            .collect();
        let b = with_spectrum(&low, 2);
        let ny = Nystrom::new(p, 8, low.iter().sum(), 1e-3, 5, |x| &b * x).unwrap();
        let v: Vec<f64> = (0..p).map(|i| (i as f64).sin()).collect();
        let bv: Vec<f64> = (0..p)
            .map(|i| (0..p).map(|j| b[(i, j)] * v[j]).sum())
            .collect();
        let pv = ny.apply(&v);
        assert!(bv.iter().zip(&pv).all(|(x, y)| (x - y).abs() < 1e-8));
    }

    /// An operator that is psd only up to f32 rounding (a fast-decaying spectrum plus a
    /// symmetric perturbation of 1e-7, as f32 kernel tiles of low-dimensional data are) still
    /// gives a preconditioner, with its top eigenvalues right to well within 1e-4; an
    /// indefinite operator is refused with a message.
    #[test]
    fn nearly_psd_operators_are_shifted_and_indefinite_ones_refused() {
        let p = 200;
        let spec: Vec<f64> = (0..p).map(|i| 20.0 * 0.7f64.powi(i as i32)).collect();
        let mut a = with_spectrum(&spec, 5);
        let mut s = Stream::new(6, 1);
        for i in 0..p {
            for j in 0..=i {
                let e = 1e-7 * (2.0 * s.uniform() - 1.0);
                a[(i, j)] += e;
                if i != j {
                    a[(j, i)] += e;
                }
            }
        }
        let ny = Nystrom::new(p, 100, spec.iter().sum(), 1e-3, 3, |x| &a * x).unwrap();
        for (k, (want, got)) in spec.iter().zip(ny.eigenvalues()).take(10).enumerate() {
            let gap = (want - got).abs();
            assert!(gap < 1e-4, "k={k}: eigenvalue off by {gap}");
        }
        assert!(ny.eigenvalues().iter().all(|&l| l >= 0.0));
        let v: Vec<f64> = (0..p).map(|i| (0.1 * i as f64).sin()).collect();
        assert!(ny.solve(&v).iter().all(|x| x.is_finite()));

        let neg = Mat::<f64>::from_fn(p, p, |i, j| if i == j { -1.0 } else { 0.0 });
        let err = Nystrom::new(p, 10, 1.0, 1e-3, 3, |x| &neg * x).unwrap_err();
        assert!(err.to_string().contains("positive semi-definite"), "{err}");
    }

    /// `solve` inverts `P + rho I`, and `solve_sqrt` applied twice equals `solve`.
    #[test]
    fn preconditioner_solves_are_inverses() {
        let p = 60;
        let spec: Vec<f64> = (0..p).map(|i| 10.0 / (1.0 + i as f64)).collect();
        let a = with_spectrum(&spec, 3);
        let ny = Nystrom::new(p, 12, spec.iter().sum(), 0.3, 1, |x| &a * x).unwrap();
        let v: Vec<f64> = (0..p).map(|i| (0.3 * i as f64).cos()).collect();
        let x = ny.solve(&v);
        let back: Vec<f64> = ny
            .apply(&x)
            .iter()
            .zip(&x)
            .map(|(a, b)| a + 0.3 * b)
            .collect();
        assert!(back.iter().zip(&v).all(|(a, b)| (a - b).abs() < 1e-10));
        let x2 = ny.solve_sqrt(&ny.solve_sqrt(&v));
        assert!(x2.iter().zip(&x).all(|(a, b)| (a - b).abs() < 1e-10));
    }

    #[test]
    fn smoothness_is_the_largest_eigenvalue() {
        let spec: Vec<f64> = (0..50).map(|i| 1.0 + 0.1 * i as f64).collect();
        let a = with_spectrum(&spec, 4);
        let l = smoothness(50, None, 200, 1, |v| {
            (0..50)
                .map(|i| (0..50).map(|j| a[(i, j)] * v[j]).sum())
                .collect()
        });
        assert!((l - 5.9).abs() < 1e-3, "{l}");
    }
}

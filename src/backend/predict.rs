//! Decision values `f(x)` of a (partial or final) solution, streamed in row chunks so that no
//! `n x M` or `n x n` matrix is ever formed.

use super::Backend;
use crate::data::{DenseMatrix, Features};
use crate::features::FeatureMap;
use crate::kernel::Kernel;
use crate::scalar::Scalar;

/// Rows per chunk when streaming over data.
pub const CHUNK_ROWS: usize = 1024;

/// The most bytes one chunk's buffers take: very wide rows (a huge `M`, or sparse data with a
/// huge index) are streamed in fewer rows at a time rather than allocated 1024 at a time.
const CHUNK_BYTES: usize = 256 << 20;

/// Rows per chunk for buffers of `width` values of `elem` bytes per row: [`CHUNK_ROWS`], or
/// fewer (at least one) where that would take more than `CHUNK_BYTES` (256 MB).
pub fn chunk_rows(width: usize, elem: usize) -> usize {
    (CHUNK_BYTES / width.saturating_mul(elem).max(1)).clamp(1, CHUNK_ROWS)
}

/// What a decision function is made of.
pub enum Predictor<'a, T> {
    /// `f_t(x) = psi(x)^T theta_t` (`theta` column-major `M x T`).
    Features {
        /// The feature map.
        map: &'a FeatureMap<T>,
        /// Primal weights.
        theta: &'a [f64],
    },
    /// `f_t(x) = sum_i alpha_it k(s_i, x)` over support rows `s` (`alpha` column-major).
    Exact {
        /// The kernel.
        kernel: &'a Kernel,
        /// Support rows (training rows with a non-zero coefficient).
        support: &'a Features<T>,
        /// Which rows of `support` to use (`None`: all).
        rows: Option<&'a [usize]>,
        /// Coefficients, column-major `n_support x T` over all rows of `support`.
        alpha: &'a [f64],
    },
}

/// Values of the gathered support rows per pass of an exact prediction (64 MiB in f32).
const SUP_VALUES: usize = 1 << 24;

impl<T: Scalar> Predictor<'_, T> {
    /// Decision values for every row of `x`, column-major `n x T`.
    pub fn decision(&self, backend: &dyn Backend<T>, x: &Features<T>, targets: usize) -> Vec<f64> {
        if let Predictor::Features {
            map: FeatureMap::Nystrom(ny),
            theta,
        } = self
        {
            // `psi(x)^T theta = k(x, C) u` with `u = L^-T theta`: no `b r^2` feature product
            let u = ny.center_coefficients(theta, targets);
            let centers = DenseMatrix::new(ny.m(), ny.d(), ny.centers().to_vec());
            let Ok(centers) = centers.map(Features::Dense) else {
                return vec![f64::NAN; x.nrows() * targets];
            };
            let exact = Predictor::Exact {
                kernel: ny.kernel(),
                support: &centers,
                rows: None,
                alpha: &u,
            };
            return exact.decision(backend, x, targets);
        }
        let (n, d) = (x.nrows(), x.ncols());
        let mut out = vec![0.0; n * targets];
        let width = match self {
            Predictor::Features { map, .. } => d + map.m(),
            Predictor::Exact { .. } => d,
        };
        let chunk = chunk_rows(width, std::mem::size_of::<T>()).min(n.max(1));
        let mut xc = vec![T::default(); chunk * d];
        match self {
            Predictor::Features { map, theta } => {
                let m = map.m();
                let mut phi = vec![T::default(); chunk * m];
                let mut part = vec![0.0; chunk * targets];
                for start in (0..n).step_by(chunk) {
                    let rows = chunk.min(n - start);
                    x.gather_range(start, &mut xc[..rows * d]);
                    backend.features(map, &xc[..rows * d], rows, &mut phi[..rows * m]);
                    backend.project(
                        &phi[..rows * m],
                        rows,
                        m,
                        theta,
                        targets,
                        &mut part[..rows * targets],
                    );
                    for t in 0..targets {
                        out[t * n + start..t * n + start + rows]
                            .copy_from_slice(&part[t * rows..(t + 1) * rows]);
                    }
                }
            }
            Predictor::Exact {
                kernel,
                support,
                rows,
                alpha,
            } => {
                let ns = support.nrows();
                let all: Vec<usize>;
                let sel: &[usize] = match rows {
                    Some(r) => r,
                    None => {
                        all = (0..ns).collect();
                        &all
                    }
                };
                // support rows per pass: 2048, fewer where the rows are wide
                let sup = (SUP_VALUES / d.max(1)).clamp(1, 2048).min(sel.len().max(1));
                let mut sc = vec![T::default(); sup * d];
                let mut a = vec![0.0; sup * targets];
                for jstart in (0..sel.len()).step_by(sup) {
                    let js = &sel[jstart..(jstart + sup).min(sel.len())];
                    let nb = js.len();
                    support.gather_dense(js, &mut sc[..nb * d]);
                    for t in 0..targets {
                        for (o, &j) in a[t * nb..(t + 1) * nb].iter_mut().zip(js) {
                            *o = alpha[t * ns + j];
                        }
                    }
                    for start in (0..n).step_by(chunk) {
                        let rows = chunk.min(n - start);
                        x.gather_range(start, &mut xc[..rows * d]);
                        backend.kernel_matvec(
                            kernel,
                            &xc[..rows * d],
                            rows,
                            &sc[..nb * d],
                            nb,
                            d,
                            &a[..nb * targets],
                            targets,
                            &mut out[start..],
                            n,
                        );
                    }
                }
            }
        }
        out
    }
}

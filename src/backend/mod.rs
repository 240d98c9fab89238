//! The heavy primitives of an iteration, behind one trait so that devices can be swapped.
//!
//! Layout conventions shared by every implementation:
//! - point sets `X` are row-major `n x d` slices in the working precision `T`;
//! - feature blocks `Phi = psi(X)` are row-major `n x M`;
//! - multi-target arrays (`theta`, `g`, `delta`) are column-major `f64`: column `t` of an
//!   `r x T` array is `v[t * r..(t + 1) * r]`;
//! - Gram and kernel tiles are row-major `f64`.
//!
//! The CPU implementation is [`cpu::Cpu`]; the CUDA kernels in `cuda/` are twins of these
//! functions with the same names and meanings.

pub mod cpu;

use crate::features::FeatureMap;
use crate::kernel::Kernel;
use crate::scalar::Scalar;

/// The primitives a DBCD-TR iteration and prediction need.
pub trait Backend<T: Scalar>: Send + Sync {
    /// Name for logs and benchmark tables.
    fn name(&self) -> &'static str;

    /// `out (n x M) = psi(X)` for the `n` rows of `x`.
    fn features(&self, map: &FeatureMap<T>, x: &[T], n: usize, out: &mut [T]);

    /// `out (n x n) = Phi Phi^T` (symmetric, both triangles written).
    fn gram(&self, phi: &[T], n: usize, m: usize, out: &mut [f64]);

    /// `out (n x T) = Phi theta` for `theta` of `M x T`, accumulated in `f64`.
    fn project(
        &self,
        phi: &[T],
        n: usize,
        m: usize,
        theta: &[f64],
        targets: usize,
        out: &mut [f64],
    );

    /// `theta (M x T) += Phi^T delta` for `delta` of `n x T`, accumulated in `f64`.
    fn accumulate(
        &self,
        phi: &[T],
        n: usize,
        m: usize,
        delta: &[f64],
        targets: usize,
        theta: &mut [f64],
    );

    /// `out (ni x nj) = K(X_I, X_J)` for the exact kernel.
    #[allow(clippy::too_many_arguments)]
    fn kernel_tile(
        &self,
        kernel: &Kernel,
        xi: &[T],
        ni: usize,
        xj: &[T],
        nj: usize,
        d: usize,
        out: &mut [f64],
    );
}

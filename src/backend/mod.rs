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
//!
//! A DBCD-TR fit goes through a [`BlockEngine`]: it owns the fit's running state (`theta` for
//! random features, `beta = K alpha` for exact kernels) and the current block, so that a device
//! backend can keep them (and the data) in device memory and use fused kernels.
//! [`Backend::rff_engine`] and [`Backend::exact_engine`] give a backend's own engines; backends
//! without them (the CPU) get [`HostRff`], which composes `features`, `gram`, `project` and
//! `accumulate`, and [`HostExact`], which composes `kernel_tile` and `kernel_matvec`. A Nystrom
//! map runs in [`nystrom::HostNystrom`], in the centres' coefficients, on the backend's
//! kernel tiles.

pub mod cached;
pub mod cpu;
#[cfg(feature = "cuda")]
pub mod cuda;
pub mod nystrom;
pub mod predict;
pub mod selfcheck;
pub mod stored;

use crate::data::Features;
use crate::error::Result;
use crate::features::FeatureMap;
use crate::kernel::Kernel;
use crate::loss::{Coord, Loss};
use crate::memory::try_filled;
use crate::scalar::Scalar;
use crate::solver::trust_region::{BlockStats, TrustRegion};
use predict::{CHUNK_ROWS, Predictor, chunk_rows};

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

    /// `out (ni x nj, row-major) = K(X_I, X_J)` for the exact kernel. `out` holds exactly
    /// `ni * nj` values; the CPU backend panics with a message on any other length.
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

    /// `out[t * ldo + i] += sum_j K(x_i, xb_j) v[t * nb + j]` for the `n` rows of `x`, the
    /// `nb` rows of `xb` (both `d` wide) and `targets` columns of `v` (`nb x T`, column-major).
    /// The exact model's `beta = K alpha` updates, predictions and Nystrom sketches
    /// `K(X_B, X_B) Omega`. The default forms the `n x nb` tile with
    /// [`kernel_tile`](Backend::kernel_tile) and multiplies it by `v` in `f64` (one product for
    /// all columns).
    #[allow(clippy::too_many_arguments)]
    fn kernel_matvec(
        &self,
        kernel: &Kernel,
        x: &[T],
        n: usize,
        xb: &[T],
        nb: usize,
        d: usize,
        v: &[f64],
        targets: usize,
        out: &mut [f64],
        ldo: usize,
    ) {
        debug_assert!(v.len() >= nb * targets);
        debug_assert!(targets == 0 || out.len() >= (targets - 1) * ldo + n);
        if n == 0 || nb == 0 || targets == 0 {
            return;
        }
        let mut tile = vec![0.0; n * nb];
        self.kernel_tile(kernel, x, n, xb, nb, d, &mut tile);
        let k = faer::MatRef::from_row_major_slice(&tile, n, nb);
        let v = faer::MatRef::from_column_major_slice(&v[..nb * targets], nb, targets);
        let len = (targets - 1) * ldo + n;
        let out =
            faer::MatMut::from_column_major_slice_with_stride_mut(&mut out[..len], n, targets, ldo);
        faer::linalg::matmul::matmul(
            out,
            faer::Accum::Add,
            k,
            v,
            1.0,
            crate::linalg::par_for(n, targets, nb),
        );
        cpu::clear_upper_state();
    }

    /// The backend's own random-feature engine for a fit on the rows of `x`, visited in
    /// blocks of at most `block` consecutive entries of `order` (see [`BlockEngine`]), or `None`
    /// for the host composition [`HostRff`] (the default).
    fn rff_engine<'a>(
        &'a self,
        map: &'a FeatureMap<T>,
        x: &'a Features<T>,
        order: &'a [usize],
        targets: usize,
        block: usize,
    ) -> Result<Option<Box<dyn BlockEngine<T> + 'a>>> {
        let _ = (map, x, order, targets, block);
        Ok(None)
    }

    /// The backend's own exact-kernel engine (same addressing as
    /// [`rff_engine`](Backend::rff_engine)), or `None` for the host composition [`HostExact`]
    /// (the default).
    fn exact_engine<'a>(
        &'a self,
        kernel: &'a Kernel,
        x: &'a Features<T>,
        order: &'a [usize],
        targets: usize,
        block: usize,
    ) -> Result<Option<Box<dyn BlockEngine<T> + 'a>>> {
        let _ = (kernel, x, order, targets, block);
        Ok(None)
    }
}

/// The running state of a DBCD-TR fit and its current block, wherever the backend keeps them.
/// The state is what turns a dual step into decision values: `theta = Phi^T alpha` (`M x T`)
/// for random features, `beta = K alpha` (`n x T`) for exact kernels, both `f64` and
/// column-major. Below, `Phi_B Phi_B^T` and `Phi_B theta` read `K(X_B, X_B)` and `beta_B` for an
/// exact engine, and `Phi_B^T delta` reads `K(X, X_B) delta`.
///
/// Rows are addressed by position in the `order` the engine was made with: a block is the
/// rows `order[start..start + len]` (`len <= block`). The fused operations are the ones the
/// CUDA kernels of `cuda/rff.cu` implement (`rff_block_gram`, `rff_update_theta`,
/// `rff_predict`), and for exact kernels those of `cuda/exact.cu`.
pub trait BlockEngine<T>: Send + Sync {
    /// Makes `order[start..start + len]` the current block.
    fn load_block(&mut self, start: usize, len: usize) -> Result<()>;

    /// `kbb (len x len, row-major) = Phi_B Phi_B^T` and `g (len x T) = Phi_B theta` for the
    /// current block. `kbb` is `None` when the caller does not read `K_BB` (the engine's own
    /// block solver uses it where it is).
    fn block_gram(&mut self, kbb: Option<&mut [f64]>, g: &mut [f64]) -> Result<()>;

    /// `theta += Phi_B^T delta` for the current block (`delta`: `len x T`).
    fn update(&mut self, delta: &[f64]) -> Result<()>;

    /// `theta = Phi^T alpha` over all rows (`alpha`: `n x T` in the rows' own order).
    fn set_alpha(&mut self, alpha: &[f64]) -> Result<()>;

    /// Decision values `psi(X) theta` (or `beta`) of every row of `x`, column-major `n x T`
    /// in the rows' own order.
    fn decision(&mut self) -> Result<Vec<f64>>;

    /// Copies `theta` into `out` (`M x T`); an exact engine has no `theta` and leaves `out`
    /// alone.
    fn theta(&mut self, out: &mut [f64]) -> Result<()>;

    /// `theta += by` (`M x T`): the part of `theta` that rows outside this engine contribute
    /// (a distributed fit's other ranks). Engines without a `theta` (exact kernels) cannot.
    fn shift_theta(&mut self, by: &[f64]) -> Result<()> {
        let _ = by;
        Err(crate::error::JokerError::Unsupported(
            "this engine has no theta to shift (exact kernels)".into(),
        ))
    }

    /// `beta += by` (`n x T`, column-major, in the rows' own order): the part of `beta = K
    /// alpha` that rows outside this engine contribute (a distributed fit's other ranks).
    /// Engines without a `beta` (feature maps) cannot.
    fn shift_beta(&mut self, by: &[f64]) -> Result<()> {
        let _ = by;
        Err(crate::error::JokerError::Unsupported(
            "this engine keeps no beta = K alpha to shift".into(),
        ))
    }

    /// The decision values of every row (`n x T`, column-major, in the positions of `order`)
    /// where the engine keeps them all at no cost (`beta` of a cached exact kernel): what a
    /// greedy working set is chosen from. `None` where a row's value needs its own product.
    fn positioned_decision(&self) -> Option<&[f64]> {
        None
    }

    /// Makes the rows at `positions` (of `order`; distinct, any order) the current block.
    /// Only engines with [`positioned_decision`](BlockEngine::positioned_decision) form such
    /// blocks.
    fn load_positions(&mut self, positions: &[usize]) -> Result<()> {
        let _ = positions;
        Err(crate::error::JokerError::Unsupported(
            "this engine forms blocks of consecutive positions only".into(),
        ))
    }

    /// Whether [`solve_block`](BlockEngine::solve_block) solves blocks with these solver
    /// parameters (then [`block_gram`](BlockEngine::block_gram) need not return `K_BB`).
    fn solves_blocks(&self, p: &TrustRegion) -> bool {
        let _ = p;
        false
    }

    /// Solves the current block's subproblem for every column where `K_BB` already is (the
    /// last [`block_gram`](BlockEngine::block_gram)), without a host round trip per CG step:
    /// `alpha` and `gbar` (`len x T`, column-major) and `block.coords` (the same layout) as
    /// for [`solve_column`](crate::solver::trust_region::solve_column), updated in place.
    /// Only called where [`solves_blocks`](BlockEngine::solves_blocks) is true.
    fn solve_block(
        &mut self,
        block: &BlockSolve<'_>,
        alpha: &mut [f64],
        gbar: &mut [f64],
    ) -> Result<Vec<BlockStats>> {
        let _ = (block, alpha, gbar);
        Err(crate::error::JokerError::Device(
            "this engine has no block solver".into(),
        ))
    }

    /// Whether [`stage`](BlockEngine::stage) can form the next block while the caller solves
    /// the current one. The features and `K_BB` of a block depend on its rows only, not on
    /// `theta`, so the solver overlaps them with the previous block's solve.
    fn stages(&self) -> bool {
        false
    }

    /// Forms the features of `order[start..start + len]` and `kbb = Phi_B Phi_B^T` into a
    /// second buffer, leaving the current block (and `theta`) untouched;
    /// [`promote`](BlockEngine::promote) makes it current. Only called where
    /// [`stages`](BlockEngine::stages) is true.
    fn stage(&mut self, start: usize, len: usize, kbb: &mut [f64]) -> Result<()> {
        let _ = (start, len, kbb);
        Err(crate::error::JokerError::Device(
            "this engine does not stage blocks".into(),
        ))
    }

    /// Makes the last staged block the current one (then `block_gram(None, g)` projects it).
    fn promote(&mut self) -> Result<()> {
        Err(crate::error::JokerError::Device(
            "this engine does not stage blocks".into(),
        ))
    }

    /// Makes [`block_gram`](BlockEngine::block_gram) and [`stage`](BlockEngine::stage) return
    /// the exact kernel block `K(X_B, X_B)` in place of `Phi_B Phi_B^T` (`on = true`), the
    /// model curvature of [`TrModel::Kernel`](crate::solver::trust_region::TrModel), or the
    /// Gram again. Returns whether the engine does it; one that does also lends its block
    /// features ([`lend_features`](BlockEngine::lend_features)).
    fn set_kernel_model(&mut self, on: bool) -> bool {
        let _ = on;
        false
    }

    /// Whether the Gram `Phi_B Phi_B^T` costs this engine less than the kernel model's block
    /// and products at any size: on a GPU the fused Gram runs near the GEMM rate while each
    /// product with `Phi_B` regenerates the features, and the block solve stays on the host
    /// either way (measured in `docs/solver.md`). [`TrModel::Auto`](crate::solver::trust_region::TrModel)
    /// keeps the Gram on such an engine.
    fn gram_is_cheap(&self) -> bool {
        false
    }

    /// Every row's features where the engine keeps them ([`stored::StoredFeatures`]): `Phi`
    /// row-major `n x M`, row `p` the features of row `order[p]`, with that order. `None`
    /// where features are formed per block.
    fn stored_features(&self) -> Option<(&[T], &[usize])> {
        None
    }

    /// Whether the block Gram `Phi_B Phi_B^T` first has to form the block's features, at a
    /// cost above the kernel model's at any size (a Nystrom map in the centres' coefficients:
    /// `b M^2` flops). [`TrModel::Auto`](crate::solver::trust_region::TrModel) then takes the
    /// kernel model.
    fn gram_needs_features(&self) -> bool {
        false
    }

    /// Lends the current block's features to the block solver, which measures the objective's
    /// true change with them; [`return_features`](BlockEngine::return_features) gives them back
    /// before the next [`update`](BlockEngine::update). `None` where the engine keeps them
    /// elsewhere.
    fn lend_features(&mut self) -> Option<BlockFeatures<T>> {
        None
    }

    /// Takes back what [`lend_features`](BlockEngine::lend_features) lent.
    fn return_features(&mut self, features: BlockFeatures<T>) {
        let _ = features;
    }

    /// The products with the current block's features, where the engine forms them itself (a
    /// device, whose block features never reach the host) instead of lending them: the block
    /// solver then borrows the engine for the solve. `None` where the engine lends its
    /// features ([`lend_features`](BlockEngine::lend_features)) or the kernel model is off.
    fn block_products(&self) -> Option<&dyn FeatureProducts> {
        None
    }
}

/// Products with a block's random features `Phi_B` (`nb x M`), accumulated in `f64`: what the
/// kernel model's ratio test ([`TrModel::Kernel`](crate::solver::trust_region::TrModel)) and
/// its Gram fallback need from the block's true curvature `Phi_B Phi_B^T`.
pub trait FeatureProducts: Sync {
    /// `Phi_B^T s` (length `M`; `s` has length `nb`).
    fn transpose_times(&self, s: &[f64]) -> Result<Vec<f64>>;
    /// `out[..nb] = Phi_B u` (`u` has length `M`).
    fn times(&self, u: &[f64], out: &mut [f64]) -> Result<()>;
    /// `out[..nb * nb] = Phi_B Phi_B^T` (row-major).
    fn gram(&self, out: &mut [f64]) -> Result<()>;
}

/// Lent host features and the backend that multiplies by them, as [`FeatureProducts`].
pub struct HostProducts<'a, T> {
    /// The block's features.
    pub features: &'a BlockFeatures<T>,
    /// The backend whose `accumulate`, `project` and `gram` form the products.
    pub backend: &'a dyn Backend<T>,
}

impl<T: Scalar> FeatureProducts for HostProducts<'_, T> {
    fn transpose_times(&self, s: &[f64]) -> Result<Vec<f64>> {
        Ok(self.features.transpose_times(self.backend, s))
    }

    fn times(&self, u: &[f64], out: &mut [f64]) -> Result<()> {
        self.features.times(self.backend, u, out);
        Ok(())
    }

    fn gram(&self, out: &mut [f64]) -> Result<()> {
        self.features.gram(self.backend, out);
        Ok(())
    }
}

/// An engine's block order covers the `n` rows once each in length.
/// Refuses a shift of `got` values for an engine that keeps `want`.
pub(crate) fn check_shift(got: usize, want: usize) -> Result<()> {
    if got != want {
        return Err(crate::error::JokerError::ShapeMismatch(format!(
            "a shift of {got} values for an engine that keeps {want}"
        )));
    }
    Ok(())
}

pub(crate) fn check_order(order: &[usize], n: usize) -> Result<()> {
    if order.len() == n {
        Ok(())
    } else {
        Err(crate::error::JokerError::ShapeMismatch(format!(
            "block order has {} entries for {n} rows",
            order.len()
        )))
    }
}

/// A block's random features `Phi_B` (`nb x M`, row-major), lent by an engine to the block
/// solver.
pub struct BlockFeatures<T> {
    phi: Vec<T>,
    nb: usize,
    m: usize,
}

impl<T: Scalar> BlockFeatures<T> {
    /// `Phi_B^T s` (`2 nb M` flops over the rows where `s` is not zero, accumulated in
    /// `f64`): what the Gram `Phi_B Phi_B^T` does to `s`, without the Gram.
    pub fn transpose_times(&self, backend: &dyn Backend<T>, s: &[f64]) -> Vec<f64> {
        let (nb, m) = (self.nb, self.m);
        let mut u = vec![0.0; m];
        backend.accumulate(&self.phi[..nb * m], nb, m, &s[..nb], 1, &mut u);
        u
    }

    /// `out = Phi_B u` (accumulated in `f64`).
    pub fn times(&self, backend: &dyn Backend<T>, u: &[f64], out: &mut [f64]) {
        let (nb, m) = (self.nb, self.m);
        backend.project(&self.phi[..nb * m], nb, m, &u[..m], 1, &mut out[..nb]);
    }

    /// `out (nb x nb) = Phi_B Phi_B^T`.
    pub fn gram(&self, backend: &dyn Backend<T>, out: &mut [f64]) {
        let (nb, m) = (self.nb, self.m);
        backend.gram(&self.phi[..nb * m], nb, m, &mut out[..nb * nb]);
    }
}

/// What [`BlockEngine::solve_block`] needs besides the iterates.
pub struct BlockSolve<'a> {
    /// The loss.
    pub loss: Loss,
    /// The block's coordinates, `len x T` column-major.
    pub coords: &'a [Coord],
    /// Largest trust-region radius.
    pub delta_max: f64,
    /// Solver parameters.
    pub p: &'a TrustRegion,
}

/// [`BlockEngine`] on the host, composing a backend's unfused primitives: `Phi_B` is formed
/// once per block and reused by the update.
pub struct HostRff<'a, T> {
    backend: &'a dyn Backend<T>,
    map: &'a FeatureMap<T>,
    x: &'a Features<T>,
    order: &'a [usize],
    targets: usize,
    theta: Vec<f64>,
    xb: Vec<T>,
    phi: Vec<T>,
    nb: usize,
    /// The staged block's features and length (allocated at the first
    /// [`stage`](BlockEngine::stage)).
    next_phi: Vec<T>,
    next_nb: usize,
    /// Rows per block at most.
    block: usize,
    /// `K_BB` is the exact kernel block (see [`BlockEngine::set_kernel_model`]).
    kernel_model: bool,
}

impl<'a, T: Scalar> HostRff<'a, T> {
    /// An engine with `theta = 0` and room for blocks of `block` rows.
    pub fn new(
        backend: &'a dyn Backend<T>,
        map: &'a FeatureMap<T>,
        x: &'a Features<T>,
        order: &'a [usize],
        targets: usize,
        block: usize,
    ) -> Result<Self> {
        let (m, d) = (map.m(), x.ncols());
        Ok(HostRff {
            backend,
            map,
            x,
            order,
            targets,
            theta: try_filled(m * targets, 0.0, "theta")?,
            xb: try_filled(block * d, T::default(), "the block's rows")?,
            phi: try_filled(block * m, T::default(), "the block's random features")?,
            nb: 0,
            next_phi: Vec::new(),
            next_nb: 0,
            block,
            kernel_model: false,
        })
    }

    /// `kbb = K_BB` of the `len` rows in `xb` and their features `phi`: the Gram, or the exact
    /// kernel block under the kernel model.
    fn block_model(&self, xb: &[T], phi: &[T], len: usize, kbb: &mut [f64]) {
        let (m, d) = (self.map.m(), self.x.ncols());
        if self.kernel_model {
            let xb = &xb[..len * d];
            let kernel = self.map.kernel();
            self.backend.kernel_tile(kernel, xb, len, xb, len, d, kbb);
            // the constant feature's kernel: k(x, z) + B^2
            if let Some(b) = self.map.bias() {
                kbb.iter_mut().for_each(|v| *v += b * b);
            }
        } else {
            self.backend.gram(&phi[..len * m], len, m, kbb);
        }
    }
}

impl<T: Scalar> BlockEngine<T> for HostRff<'_, T> {
    fn load_block(&mut self, start: usize, len: usize) -> Result<()> {
        let (m, d) = (self.map.m(), self.x.ncols());
        let rows = &self.order[start..start + len];
        self.x.gather_dense(rows, &mut self.xb[..len * d]);
        self.backend
            .features(self.map, &self.xb[..len * d], len, &mut self.phi[..len * m]);
        self.nb = len;
        Ok(())
    }

    fn block_gram(&mut self, kbb: Option<&mut [f64]>, g: &mut [f64]) -> Result<()> {
        let (nb, m) = (self.nb, self.map.m());
        if let Some(kbb) = kbb {
            self.block_model(&self.xb, &self.phi, nb, kbb);
        }
        let phi = &self.phi[..nb * m];
        self.backend
            .project(phi, nb, m, &self.theta, self.targets, g);
        Ok(())
    }

    fn update(&mut self, delta: &[f64]) -> Result<()> {
        let (nb, m) = (self.nb, self.map.m());
        self.backend.accumulate(
            &self.phi[..nb * m],
            nb,
            m,
            delta,
            self.targets,
            &mut self.theta,
        );
        Ok(())
    }

    fn set_alpha(&mut self, alpha: &[f64]) -> Result<()> {
        let (n, d, m, tt) = (self.x.nrows(), self.x.ncols(), self.map.m(), self.targets);
        self.theta.fill(0.0);
        let chunk = chunk_rows(d + m, std::mem::size_of::<T>()).min(n.max(1));
        let mut xc = vec![T::default(); chunk * d];
        let mut phi = vec![T::default(); chunk * m];
        for start in (0..n).step_by(chunk) {
            let rows = chunk.min(n - start);
            self.x.gather_range(start, &mut xc[..rows * d]);
            self.backend
                .features(self.map, &xc[..rows * d], rows, &mut phi[..rows * m]);
            let mut delta = vec![0.0; rows * tt];
            for t in 0..tt {
                delta[t * rows..(t + 1) * rows]
                    .copy_from_slice(&alpha[t * n + start..t * n + start + rows]);
            }
            self.backend
                .accumulate(&phi[..rows * m], rows, m, &delta, tt, &mut self.theta);
        }
        Ok(())
    }

    fn decision(&mut self) -> Result<Vec<f64>> {
        let pred = Predictor::Features {
            map: self.map,
            theta: &self.theta,
        };
        Ok(pred.decision(self.backend, self.x, self.targets))
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

    fn stages(&self) -> bool {
        true
    }

    fn stage(&mut self, start: usize, len: usize, kbb: &mut [f64]) -> Result<()> {
        let (m, d) = (self.map.m(), self.x.ncols());
        let mut phi = std::mem::take(&mut self.next_phi);
        phi.resize(self.block * m, T::default());
        let rows = &self.order[start..start + len];
        self.x.gather_dense(rows, &mut self.xb[..len * d]);
        self.backend
            .features(self.map, &self.xb[..len * d], len, &mut phi[..len * m]);
        self.block_model(&self.xb, &phi, len, kbb);
        self.next_phi = phi;
        self.next_nb = len;
        Ok(())
    }

    fn promote(&mut self) -> Result<()> {
        std::mem::swap(&mut self.phi, &mut self.next_phi);
        self.nb = self.next_nb;
        Ok(())
    }

    fn set_kernel_model(&mut self, on: bool) -> bool {
        self.kernel_model = on;
        true
    }

    fn lend_features(&mut self) -> Option<BlockFeatures<T>> {
        Some(BlockFeatures {
            phi: std::mem::take(&mut self.phi),
            nb: self.nb,
            m: self.map.m(),
        })
    }

    fn return_features(&mut self, features: BlockFeatures<T>) {
        self.phi = features.phi;
    }
}

/// [`BlockEngine`] for exact kernels on the host, composing a backend's
/// [`kernel_tile`](Backend::kernel_tile) and [`kernel_matvec`](Backend::kernel_matvec):
/// `beta = K alpha` (`n x T`) stays in the rows' own order and the block's rows are gathered
/// once per block.
pub struct HostExact<'a, T> {
    backend: &'a dyn Backend<T>,
    kernel: &'a Kernel,
    x: &'a Features<T>,
    order: &'a [usize],
    targets: usize,
    beta: Vec<f64>,
    /// The current block's rows (`len x d`) and its `(start, len)` in `order`.
    xb: Vec<T>,
    cur: (usize, usize),
    /// The staged block's rows and position (allocated at the first
    /// [`stage`](BlockEngine::stage)).
    next_xb: Vec<T>,
    next: (usize, usize),
}

impl<'a, T: Scalar> HostExact<'a, T> {
    /// An engine with `beta = 0` and room for blocks of `block` rows.
    pub fn new(
        backend: &'a dyn Backend<T>,
        kernel: &'a Kernel,
        x: &'a Features<T>,
        order: &'a [usize],
        targets: usize,
        block: usize,
    ) -> Result<Self> {
        Ok(HostExact {
            backend,
            kernel,
            x,
            order,
            targets,
            beta: try_filled(x.nrows() * targets, 0.0, "beta = K alpha")?,
            xb: try_filled(block * x.ncols(), T::default(), "the block's rows")?,
            cur: (0, 0),
            next_xb: Vec::new(),
            next: (0, 0),
        })
    }
}

impl<T: Scalar> BlockEngine<T> for HostExact<'_, T> {
    fn load_block(&mut self, start: usize, len: usize) -> Result<()> {
        let d = self.x.ncols();
        self.x
            .gather_dense(&self.order[start..start + len], &mut self.xb[..len * d]);
        self.cur = (start, len);
        Ok(())
    }

    fn block_gram(&mut self, kbb: Option<&mut [f64]>, g: &mut [f64]) -> Result<()> {
        let ((start, nb), d, n) = (self.cur, self.x.ncols(), self.x.nrows());
        let xb = &self.xb[..nb * d];
        if let Some(kbb) = kbb {
            self.backend
                .kernel_tile(self.kernel, xb, nb, xb, nb, d, kbb);
        }
        for t in 0..self.targets {
            for (r, &i) in self.order[start..start + nb].iter().enumerate() {
                g[t * nb + r] = self.beta[t * n + i];
            }
        }
        Ok(())
    }

    /// `beta += K(X, X_B) delta`, streaming `X` in chunks of [`CHUNK_ROWS`] rows.
    fn update(&mut self, delta: &[f64]) -> Result<()> {
        let ((_, nb), d, n) = (self.cur, self.x.ncols(), self.x.nrows());
        let mut xc = vec![T::default(); CHUNK_ROWS.min(n) * d];
        for start in (0..n).step_by(CHUNK_ROWS) {
            let rows = CHUNK_ROWS.min(n - start);
            self.x.gather_range(start, &mut xc[..rows * d]);
            self.backend.kernel_matvec(
                self.kernel,
                &xc[..rows * d],
                rows,
                &self.xb[..nb * d],
                nb,
                d,
                delta,
                self.targets,
                &mut self.beta[start..],
                n,
            );
        }
        Ok(())
    }

    fn set_alpha(&mut self, alpha: &[f64]) -> Result<()> {
        let pred = Predictor::Exact {
            kernel: self.kernel,
            support: self.x,
            rows: None,
            alpha,
        };
        self.beta = pred.decision(self.backend, self.x, self.targets);
        Ok(())
    }

    fn decision(&mut self) -> Result<Vec<f64>> {
        Ok(self.beta.clone())
    }

    fn shift_beta(&mut self, by: &[f64]) -> Result<()> {
        check_shift(by.len(), self.beta.len())?;
        self.beta.iter_mut().zip(by).for_each(|(b, v)| *b += v);
        Ok(())
    }

    fn theta(&mut self, _out: &mut [f64]) -> Result<()> {
        Ok(())
    }

    fn stages(&self) -> bool {
        true
    }

    fn stage(&mut self, start: usize, len: usize, kbb: &mut [f64]) -> Result<()> {
        let d = self.x.ncols();
        self.next_xb.resize(self.xb.len(), T::default());
        let xb = &mut self.next_xb[..len * d];
        self.x.gather_dense(&self.order[start..start + len], xb);
        self.backend
            .kernel_tile(self.kernel, xb, len, xb, len, d, kbb);
        self.next = (start, len);
        Ok(())
    }

    fn promote(&mut self) -> Result<()> {
        std::mem::swap(&mut self.xb, &mut self.next_xb);
        self.cur = self.next;
        Ok(())
    }
}

/// What the engine tests share: one engine's operations against another's on the same map.
#[cfg(test)]
pub(crate) mod agreement {
    use super::BlockEngine;
    use crate::backend::cpu::Cpu;
    use crate::rng::Stream;

    /// Asserts `a` and `b` equal to 1e-9 relative.
    pub(crate) fn close(a: &[f64], b: &[f64], what: &str) {
        assert_eq!(a.len(), b.len(), "{what}: lengths");
        for (i, (p, q)) in a.iter().zip(b).enumerate() {
            assert!(
                (p - q).abs() < 1e-9 * (1.0 + q.abs()),
                "{what}[{i}]: {p} vs {q}"
            );
        }
    }

    /// Every operation of `e` equals the same operation of `h`, an engine that lends its block
    /// features (the host random-feature engine) over `n` rows, blocks of `b`, `tt` targets
    /// and a map of `m` features, on random coefficients from `s`: theta, each block's Gram
    /// and `g` (the kernel model switched on after the block is loaded, with the ratio test's
    /// products), updates, a shift of theta and the decision values.
    pub(crate) fn engines_agree(
        e: &mut dyn BlockEngine<f64>,
        h: &mut dyn BlockEngine<f64>,
        (n, b, tt, m): (usize, usize, usize, usize),
        s: &mut Stream,
    ) {
        let alpha: Vec<f64> = (0..n * tt).map(|_| s.uniform() - 0.5).collect();
        e.set_alpha(&alpha).unwrap();
        h.set_alpha(&alpha).unwrap();
        let (mut te, mut th) = (vec![f64::NAN; m * tt], vec![f64::NAN; m * tt]);
        e.theta(&mut te).unwrap();
        h.theta(&mut th).unwrap();
        close(&te, &th, "theta");
        for start in [0, b, n - n % b] {
            let len = b.min(n - start);
            e.load_block(start, len).unwrap();
            h.load_block(start, len).unwrap();
            let (mut ke, mut kh) = (vec![f64::NAN; len * len], vec![f64::NAN; len * len]);
            let (mut ge, mut gh) = (vec![f64::NAN; len * tt], vec![f64::NAN; len * tt]);
            e.block_gram(Some(&mut ke), &mut ge).unwrap();
            h.block_gram(Some(&mut kh), &mut gh).unwrap();
            close(&ke, &kh, "gram");
            close(&ge, &gh, "g");
            // kernel model, switched on after the block was loaded
            assert!(e.set_kernel_model(true) && h.set_kernel_model(true));
            e.block_gram(Some(&mut ke), &mut ge).unwrap();
            h.block_gram(Some(&mut kh), &mut gh).unwrap();
            close(&ke, &kh, "kernel block");
            let lent = h.lend_features().expect("the reference lends its features");
            let sv: Vec<f64> = (0..len).map(|_| s.uniform() - 0.5).collect();
            let uv: Vec<f64> = (0..m).map(|_| s.uniform() - 0.5).collect();
            let p = e.block_products().expect("products under the kernel model");
            close(
                &p.transpose_times(&sv).unwrap(),
                &lent.transpose_times(&Cpu, &sv),
                "Phi^T s",
            );
            let (mut oe, mut oh) = (vec![f64::NAN; len], vec![f64::NAN; len]);
            p.times(&uv, &mut oe).unwrap();
            lent.times(&Cpu, &uv, &mut oh);
            close(&oe, &oh, "Phi u");
            let (mut pe, mut ph) = (vec![f64::NAN; len * len], vec![f64::NAN; len * len]);
            p.gram(&mut pe).unwrap();
            lent.gram(&Cpu, &mut ph);
            close(&pe, &ph, "gram of the products");
            h.return_features(lent);
            let delta: Vec<f64> = (0..len * tt).map(|_| s.uniform() - 0.5).collect();
            e.update(&delta).unwrap();
            h.update(&delta).unwrap();
            e.theta(&mut te).unwrap();
            h.theta(&mut th).unwrap();
            close(&te, &th, "theta after update");
            e.set_kernel_model(false);
            h.set_kernel_model(false);
        }
        let shift: Vec<f64> = (0..m * tt).map(|_| s.uniform() - 0.5).collect();
        e.shift_theta(&shift).unwrap();
        h.shift_theta(&shift).unwrap();
        close(&e.decision().unwrap(), &h.decision().unwrap(), "decision");
    }
}

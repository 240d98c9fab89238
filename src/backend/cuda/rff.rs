//! The random-feature engine on the device: `theta` resident for the whole fit, the training
//! rows resident in block order when they fit the memory plan or gathered and copied per block
//! otherwise; and the host-input twins of its kernels for tests and benchmarks.

use std::sync::{Arc, Mutex, MutexGuard};

use cudarc::driver::{CudaSlice, CudaStream, CudaView};

use super::context::{Cuda, PREDICT_ROWS};
use super::launch::{self, GT, MapArgs, gram_shape};
use super::trsolve::TrWorkspace;
use super::{add_by_blocks, check_len, drv, int, shield, zeros};
use crate::backend::{BlockEngine, BlockSolve, FeatureProducts};
use crate::data::Features;
use crate::error::{JokerError, Result, invalid};
use crate::features::RandomMap;
use crate::kernel::Kernel;
use crate::solver::trust_region::{BlockStats, TrustRegion};

/// The `K_BB` / `g` workspace of `rff_block_gram` for blocks of up to `b` rows.
pub(super) struct GramWorkspace {
    pub(super) b: usize,
    /// Feature slices the partial buffers hold.
    pub(super) nsplit: usize,
    pub(super) kpart: CudaSlice<f32>,
    pub(super) gpart: CudaSlice<f64>,
    pub(super) kbb: CudaSlice<f32>,
    pub(super) g: CudaSlice<f64>,
}

impl GramWorkspace {
    /// Device bytes for blocks of `b` rows, `m` features and `targets` columns on a GPU with
    /// `slots` concurrent `rff_block_gram` blocks.
    pub(super) fn bytes(b: usize, m: usize, targets: usize, slots: usize) -> usize {
        let (ntiles, s) = gram_shape(b, m, slots);
        s * ntiles * GT * GT * 4 + s * targets * b * 8 + b * b * 4 + b * targets * 8
    }
}

impl Cuda {
    /// A zeroed workspace for blocks of up to `b` rows.
    fn workspace(&self, b: usize, m: usize, targets: usize) -> Result<GramWorkspace> {
        let (ntiles, s) = gram_shape(b, m, self.gram_slots);
        Ok(GramWorkspace {
            b,
            nsplit: s,
            kpart: zeros(&self.stream, s * ntiles * GT * GT)?,
            gpart: zeros(&self.stream, s * targets * b)?,
            kbb: zeros(&self.stream, b * b)?,
            g: zeros(&self.stream, b * targets)?,
        })
    }

    /// A workspace whose every buffer holds NaN: the kernels must overwrite all of it
    /// (the host wrappers use it so that tests catch unwritten entries).
    fn poisoned_workspace(&self, b: usize, m: usize, targets: usize) -> Result<GramWorkspace> {
        let (ntiles, s) = gram_shape(b, m, self.gram_slots);
        Ok(GramWorkspace {
            b,
            nsplit: s,
            kpart: self.upload(&vec![f32::NAN; s * ntiles * GT * GT])?,
            gpart: self.upload(&vec![f64::NAN; s * targets * b])?,
            kbb: self.upload(&vec![f32::NAN; b * b])?,
            g: self.upload(&vec![f64::NAN; b * targets])?,
        })
    }

    /// `K_BB = Phi_B Phi_B^T` into `ws.kbb` (`nb x nb` f32, row-major) and `g = Phi_B theta`
    /// into `ws.g` (`nb x T`) for the `nb <= ws.b` rows `xb`: partial sums over feature slices,
    /// then their reduction.
    fn gram_block(
        &self,
        a: &MapArgs,
        xb: &CudaView<'_, f32>,
        nb: usize,
        theta: &CudaSlice<f64>,
        targets: i32,
        ws: &mut GramWorkspace,
    ) -> Result<()> {
        launch::rff_block_gram(self, a, xb, nb, theta, targets, ws)?;
        launch::rff_block_gram_reduce(self, a, nb, targets, ws)
    }

    /// Fused random-feature block on host inputs: `(K_BB (nb x nb f32 row-major), g (nb x T))`
    /// for the rows `xb` (`nb x d`) and `theta` (`M x T`). The GPU twin of
    /// `Cpu::features` + `Cpu::gram` + `Cpu::project` (tests and benchmarks).
    ///
    /// The host wrappers (`block_gram`, `predict`, `features`, `weights`) fill every device
    /// output and workspace with NaN before the launch, so an entry a kernel fails to write
    /// shows up in the result.
    pub fn block_gram(
        &self,
        map: &RandomMap<f32>,
        xb: &[f32],
        nb: usize,
        theta: &[f64],
        targets: usize,
    ) -> Result<(Vec<f32>, Vec<f64>)> {
        shield("rff_block_gram", || {
            let a = MapArgs::of(map)?;
            check_len("xb", xb.len(), nb * a.d as usize)?;
            check_len("theta", theta.len(), a.m as usize * targets)?;
            let tt = int("targets", targets)?;
            if nb == 0 || targets == 0 {
                return Ok((Vec::new(), Vec::new()));
            }
            let xd = self.upload(xb)?;
            let th = self.upload(theta)?;
            let mut ws = self.poisoned_workspace(nb, a.m as usize, targets)?;
            self.gram_block(&a, &xd.slice(..), nb, &th, tt, &mut ws)?;
            let mut k = vec![0.0f32; nb * nb];
            let mut g = vec![0.0f64; nb * targets];
            self.download(&ws.kbb, &mut k)?;
            self.download(&ws.g, &mut g)?;
            Ok((k, g))
        })
    }

    /// Fused update on host inputs: `theta (M x T) += Phi_B^T delta` for the rows `xb`. The
    /// GPU twin of `Cpu::features` + `Cpu::accumulate`.
    pub fn update_theta(
        &self,
        map: &RandomMap<f32>,
        xb: &[f32],
        nb: usize,
        delta: &[f64],
        targets: usize,
        theta: &mut [f64],
    ) -> Result<()> {
        shield("rff_update_theta", || {
            let a = MapArgs::of(map)?;
            check_len("xb", xb.len(), nb * a.d as usize)?;
            check_len("delta", delta.len(), nb * targets)?;
            check_len("theta", theta.len(), a.m as usize * targets)?;
            let tt = int("targets", targets)?;
            if nb == 0 || targets == 0 {
                return Ok(());
            }
            let xd = self.upload(xb)?;
            let dd = self.upload(delta)?;
            let mut th = self.upload(theta)?;
            launch::rff_update_theta(self, &a, &xd.slice(..), nb, &dd, tt, &mut th)?;
            self.download(&th, theta)
        })
    }

    /// Streaming prediction on host inputs: `psi(X) theta`, column-major `n x T`. The GPU twin
    /// of the CPU's chunked `features` + `project`.
    pub fn predict(
        &self,
        map: &RandomMap<f32>,
        x: &[f32],
        n: usize,
        theta: &[f64],
        targets: usize,
    ) -> Result<Vec<f64>> {
        shield("rff_predict", || {
            let a = MapArgs::of(map)?;
            let d = a.d as usize;
            check_len("x", x.len(), n * d)?;
            check_len("theta", theta.len(), a.m as usize * targets)?;
            let tt = int("targets", targets)?;
            if n == 0 || targets == 0 {
                return Ok(Vec::new());
            }
            let th = self.upload(theta)?;
            let pr = PREDICT_ROWS.min(n.max(1));
            let mut out_d = self.upload(&vec![f64::NAN; pr * targets])?;
            let mut part = vec![0.0; pr * targets];
            let mut out = vec![0.0; n * targets];
            for start in (0..n).step_by(PREDICT_ROWS) {
                let rows = PREDICT_ROWS.min(n - start);
                let xd = self.upload(&x[start * d..(start + rows) * d])?;
                launch::rff_predict(self, &a, &xd.slice(..), rows, &th, tt, &mut out_d)?;
                self.download(&out_d, &mut part[..rows * targets])?;
                for t in 0..targets {
                    out[t * n + start..t * n + start + rows]
                        .copy_from_slice(&part[t * rows..(t + 1) * rows]);
                }
            }
            Ok(out)
        })
    }

    /// `psi(X)` (`n x M` f32, row-major) with the debug kernel `rff_features` (one thread per
    /// entry; for differential tests).
    pub fn features(&self, map: &RandomMap<f32>, x: &[f32], n: usize) -> Result<Vec<f32>> {
        shield("rff_features", || {
            let a = MapArgs::of(map)?;
            check_len("x", x.len(), n * a.d as usize)?;
            int("n_samples", n)?;
            let total = n * a.m as usize;
            if total == 0 {
                return Ok(Vec::new());
            }
            let xd = self.upload(x)?;
            let mut phi = self.upload(&vec![f32::NAN; total])?;
            launch::rff_features(self, &a, &xd, n, &mut phi)?;
            let mut out = vec![0.0f32; total];
            self.download(&phi, &mut out)?;
            Ok(out)
        })
    }

    /// `(W (M x d f32, row-major), b (M f32))` with the debug kernel `rff_weights`.
    pub fn weights(&self, map: &RandomMap<f32>) -> Result<(Vec<f32>, Vec<f32>)> {
        shield("rff_weights", || {
            let a = MapArgs::of(map)?;
            let (m, d) = (a.m as usize, a.d as usize);
            let mut w = self.upload(&vec![f32::NAN; m * d])?;
            let mut b = self.upload(&vec![f32::NAN; m])?;
            launch::rff_weights(self, &a, &mut w, &mut b)?;
            let mut wh = vec![0.0f32; m * d];
            let mut bh = vec![0.0f32; m];
            self.download(&w, &mut wh)?;
            self.download(&b, &mut bh)?;
            Ok((wh, bh))
        })
    }

    /// Times the fused kernels on device-resident inputs with CUDA events: mean milliseconds
    /// of `rff_block_gram` + `_reduce` and of `rff_update_theta` over `reps` launches
    /// (after one warm-up), for the rows `xb` (`nb x d`) and `targets` columns.
    pub fn time_fused(
        &self,
        map: &RandomMap<f32>,
        xb: &[f32],
        nb: usize,
        targets: usize,
        reps: usize,
    ) -> Result<(f64, f64)> {
        shield("timing the fused kernels", || {
            let a = MapArgs::of(map)?;
            check_len("xb", xb.len(), nb * a.d as usize)?;
            let tt = int("targets", targets)?;
            let xd = self.upload(xb)?;
            let mut th = zeros::<f64>(&self.stream, a.m as usize * targets)?;
            let delta = self.upload(&vec![1e-3; nb * targets])?;
            let mut ws = self.workspace(nb, a.m as usize, targets)?;
            let reps = reps.max(1);
            let ev = |s: &Arc<CudaStream>| {
                s.record_event(Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT))
                    .map_err(drv("cuEventRecord"))
            };
            let xv = xd.slice(..);
            self.gram_block(&a, &xv, nb, &th, tt, &mut ws)?;
            launch::rff_update_theta(self, &a, &xv, nb, &delta, tt, &mut th)?;
            let e0 = ev(&self.stream)?;
            for _ in 0..reps {
                self.gram_block(&a, &xv, nb, &th, tt, &mut ws)?;
            }
            let e1 = ev(&self.stream)?;
            for _ in 0..reps {
                launch::rff_update_theta(self, &a, &xv, nb, &delta, tt, &mut th)?;
            }
            let e2 = ev(&self.stream)?;
            let g = e0.elapsed_ms(&e1).map_err(drv("cuEventElapsedTime"))? as f64;
            let u = e1.elapsed_ms(&e2).map_err(drv("cuEventElapsedTime"))? as f64;
            Ok((g / reps as f64, u / reps as f64))
        })
    }
}

/// The device buffers of the kernel model (the trust region's model curvature is the exact
/// kernel block, [`TrModel::Kernel`](crate::solver::trust_region::TrModel)): `K(X_B, X_B)`
/// from `exact_tile`, and the operands of the products with `Phi_B` that its ratio test and
/// Gram fallback ask for. The products regenerate the block's features in the fused kernels
/// (`rff_update_theta` for `Phi_B^T s`, `rff_predict` for `Phi_B u`, `rff_block_gram` for the
/// Gram), so `Phi_B` itself never takes device memory.
pub(super) struct ProductBuffers {
    /// `s` (block rows).
    s: CudaSlice<f64>,
    /// `u` (`M`).
    u: CudaSlice<f64>,
    /// `Phi_B u` (block rows).
    out: CudaSlice<f64>,
    /// `K(X_B, X_B)` (block x block, f64).
    kbb: CudaSlice<f64>,
    /// The Gram fallback's `K_BB` on the host (f32, as `rff_block_gram` forms it).
    k32: Vec<f32>,
}

impl ProductBuffers {
    /// Device bytes for blocks of `b` rows and `m` features.
    pub(super) fn bytes(b: usize, m: usize) -> usize {
        (2 * b + m + b * b) * 8
    }

    fn new(stream: &Arc<CudaStream>, b: usize, m: usize) -> Result<Self> {
        Ok(ProductBuffers {
            s: zeros(stream, b)?,
            u: zeros(stream, m)?,
            out: zeros(stream, b)?,
            kbb: zeros(stream, b * b)?,
            k32: vec![0.0; b * b],
        })
    }
}

/// Locks a buffer set of an engine; a panic while it was held (a failed CUDA call inside
/// [`shield`]) leaves buffers that the next call overwrites, so the lock is taken back.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The DBCD-TR random-feature engine on the device.
pub(super) struct CudaRff<'a> {
    gpu: &'a Cuda,
    a: MapArgs,
    /// The map's kernel, which `exact_tile` evaluates under the kernel model.
    kernel: Kernel,
    /// `block_gram` returns `K(X_B, X_B)` (the kernel model) in place of the Gram.
    kernel_model: bool,
    products: Mutex<ProductBuffers>,
    x: &'a Features<f32>,
    order: &'a [usize],
    targets: usize,
    tt: i32,
    theta: CudaSlice<f64>,
    /// Rows in `order` order, when resident.
    x_dev: Option<CudaSlice<f32>>,
    xb_dev: CudaSlice<f32>,
    xb_host: Vec<f32>,
    cur: (usize, usize),
    /// Rows per block at most.
    block: usize,
    /// Behind a lock because the kernel model's Gram fallback forms the Gram through
    /// [`FeatureProducts`], which borrows the engine shared.
    ws: Mutex<GramWorkspace>,
    tr: TrWorkspace,
    delta_dev: CudaSlice<f64>,
    k_host: Vec<f32>,
    pred_x: CudaSlice<f32>,
    pred_out: CudaSlice<f64>,
    pred_host: Vec<f64>,
    pred_xh: Vec<f32>,
}

impl<'a> CudaRff<'a> {
    /// The engine for a fit on the rows of `x` visited in blocks of at most `block` entries of
    /// `order`, its buffers allocated after [`Cuda::memory_plan`] accepted them.
    pub(super) fn new(
        gpu: &'a Cuda,
        map: &'a RandomMap<f32>,
        x: &'a Features<f32>,
        order: &'a [usize],
        targets: usize,
        block: usize,
    ) -> Result<Self> {
        let a = MapArgs::of(map)?;
        let (n, d, m) = (x.nrows(), x.ncols(), map.m());
        crate::backend::check_order(order, n)?;
        let plan = gpu.memory_plan(n, d, m, targets, block)?;
        let s = &gpu.stream;
        let x_dev = if plan.resident {
            Some(gpu.upload_rows(x, order)?)
        } else {
            None
        };
        let pr = PREDICT_ROWS.min(n.max(1));
        Ok(CudaRff {
            gpu,
            a,
            kernel: map.spec().kernel,
            kernel_model: false,
            products: Mutex::new(ProductBuffers::new(s, block, m)?),
            x,
            order,
            targets,
            tt: int("targets", targets)?,
            theta: zeros(s, m * targets)?,
            x_dev,
            xb_dev: zeros(s, block * d)?,
            xb_host: vec![0.0; block * d],
            cur: (0, 0),
            block,
            ws: Mutex::new(gpu.workspace(block, m, targets)?),
            tr: TrWorkspace::new(s, block, targets)?,
            delta_dev: zeros(s, block * targets)?,
            k_host: vec![0.0; block * block],
            pred_x: zeros(s, pr * d)?,
            pred_out: zeros(s, pr * targets)?,
            pred_host: vec![0.0; pr * targets],
            pred_xh: vec![0.0; pr * d],
        })
    }

    fn d(&self) -> usize {
        self.a.d as usize
    }

    /// The kernel model's block: `kbb = K(X_B, X_B)` (`exact_tile`, `b^2 d` flops in place of
    /// the Gram's `b^2 M`) and `g = Phi_B theta` (`rff_predict` on the block's rows).
    fn kernel_block(&mut self, kbb: Option<&mut [f64]>, g: &mut [f64]) -> Result<()> {
        let (_, nb) = self.cur;
        let (gpu, a, tt, d) = (self.gpu, self.a, self.tt, self.d());
        let xb = block_view(&self.x_dev, &self.xb_dev, self.cur, d);
        let ws = self.ws.get_mut().unwrap_or_else(|p| p.into_inner());
        let p = self.products.get_mut().unwrap_or_else(|p| p.into_inner());
        let (kernel, theta) = (&self.kernel, &self.theta);
        shield("the kernel model's block (exact_tile, rff_predict)", || {
            if let Some(kbb) = kbb {
                launch::exact_tile(gpu, kernel, &xb, nb, &xb, nb, d, &mut p.kbb, nb)?;
                gpu.download(&p.kbb, &mut kbb[..nb * nb])?;
            }
            launch::rff_predict(gpu, &a, &xb, nb, theta, tt, &mut ws.g)?;
            gpu.download(&ws.g, &mut g[..nb * tt as usize])
        })
    }
}

/// The products with the current block's features on the device, for the kernel model's
/// ratio test and Gram fallback; each regenerates `Phi_B` from the block's rows in a fused
/// kernel and copies `M` (or `nb`) values back.
impl FeatureProducts for CudaRff<'_> {
    fn transpose_times(&self, s: &[f64]) -> Result<Vec<f64>> {
        let (_, nb) = self.cur;
        let s = s.get(..nb).ok_or_else(|| {
            JokerError::ShapeMismatch(format!("`s` has {} values, {nb} expected", s.len()))
        })?;
        let (gpu, a) = (self.gpu, self.a);
        let xb = block_view(&self.x_dev, &self.xb_dev, self.cur, self.d());
        let mut guard = lock(&self.products);
        let p = &mut *guard;
        let mut u = vec![0.0; a.m as usize];
        shield("rff_update_theta (the kernel model's Phi_B^T s)", || {
            gpu.stream
                .memcpy_htod(s, &mut p.s.slice_mut(0..nb))
                .map_err(drv("cuMemcpyHtoD"))?;
            gpu.stream
                .memset_zeros(&mut p.u)
                .map_err(drv("cuMemsetD8"))?;
            launch::rff_update_theta(gpu, &a, &xb, nb, &p.s, 1, &mut p.u)?;
            gpu.download(&p.u, &mut u)
        })?;
        Ok(u)
    }

    fn times(&self, u: &[f64], out: &mut [f64]) -> Result<()> {
        let (_, nb) = self.cur;
        let (gpu, a) = (self.gpu, self.a);
        check_len("u", u.len(), a.m as usize)?;
        if out.len() < nb {
            return Err(JokerError::ShapeMismatch(format!(
                "`out` has {} values, {nb} expected",
                out.len()
            )));
        }
        let xb = block_view(&self.x_dev, &self.xb_dev, self.cur, self.d());
        let mut guard = lock(&self.products);
        let p = &mut *guard;
        shield("rff_predict (the kernel model's Phi_B u)", || {
            gpu.stream
                .memcpy_htod(u, &mut p.u)
                .map_err(drv("cuMemcpyHtoD"))?;
            launch::rff_predict(gpu, &a, &xb, nb, &p.u, 1, &mut p.out)?;
            gpu.download(&p.out, &mut out[..nb])
        })
    }

    fn gram(&self, out: &mut [f64]) -> Result<()> {
        let (_, nb) = self.cur;
        let (gpu, a, tt) = (self.gpu, self.a, self.tt);
        if out.len() < nb * nb {
            return Err(JokerError::ShapeMismatch(format!(
                "`out` has {} values, {} expected",
                out.len(),
                nb * nb
            )));
        }
        let xb = block_view(&self.x_dev, &self.xb_dev, self.cur, self.d());
        let mut ws = lock(&self.ws);
        let mut p = lock(&self.products);
        let k32 = &mut p.k32[..nb * nb];
        shield("rff_block_gram (the kernel model's Gram fallback)", || {
            gpu.gram_block(&a, &xb, nb, &self.theta, tt, &mut ws)?;
            gpu.download(&ws.kbb, k32)
        })?;
        for (o, v) in out[..nb * nb].iter_mut().zip(k32.iter()) {
            *o = *v as f64;
        }
        Ok(())
    }
}

/// The rows of block `(start, len)` on the device: a slice of the resident rows `x_dev`, or
/// the block buffer `xb_dev` that `load_block` filled.
fn block_view<'x>(
    x_dev: &'x Option<CudaSlice<f32>>,
    xb_dev: &'x CudaSlice<f32>,
    (start, len): (usize, usize),
    d: usize,
) -> CudaView<'x, f32> {
    match x_dev {
        Some(x) => x.slice(start * d..(start + len) * d),
        None => xb_dev.slice(0..len * d),
    }
}

impl BlockEngine<f32> for CudaRff<'_> {
    fn load_block(&mut self, start: usize, len: usize) -> Result<()> {
        if len > self.block || start + len > self.order.len() {
            return Err(invalid(
                "block",
                format!("rows {start}..{} exceed the engine's blocks", start + len),
            ));
        }
        self.cur = (start, len);
        if self.x_dev.is_none() {
            let d = self.d();
            let (gpu, x, order) = (self.gpu, self.x, self.order);
            let host = &mut self.xb_host[..len * d];
            x.gather_dense(&order[start..start + len], host);
            let dev = &mut self.xb_dev;
            shield("copying a block", || {
                gpu.stream
                    .memcpy_htod(&*host, &mut dev.slice_mut(0..len * d))
                    .map_err(drv("cuMemcpyHtoD"))?;
                gpu.sync()
            })?;
        }
        Ok(())
    }

    fn block_gram(&mut self, kbb: Option<&mut [f64]>, g: &mut [f64]) -> Result<()> {
        if self.kernel_model {
            return self.kernel_block(kbb, g);
        }
        let (_, nb) = self.cur;
        let (gpu, a, tt) = (self.gpu, self.a, self.tt);
        let want_k = kbb.is_some();
        let xb = block_view(&self.x_dev, &self.xb_dev, self.cur, self.d());
        let ws = self.ws.get_mut().unwrap_or_else(|p| p.into_inner());
        let (theta, kh) = (&self.theta, &mut self.k_host);
        shield("rff_block_gram", || {
            gpu.gram_block(&a, &xb, nb, theta, tt, ws)?;
            if want_k {
                gpu.download(&ws.kbb, &mut kh[..nb * nb])?;
            }
            gpu.download(&ws.g, &mut g[..nb * tt as usize])
        })?;
        if let Some(kbb) = kbb {
            for (o, v) in kbb[..nb * nb].iter_mut().zip(&self.k_host[..nb * nb]) {
                *o = *v as f64;
            }
        }
        Ok(())
    }

    fn update(&mut self, delta: &[f64]) -> Result<()> {
        let (_, nb) = self.cur;
        let (gpu, a, tt) = (self.gpu, self.a, self.tt);
        check_len("delta", delta.len(), nb * tt as usize)?;
        let xb = block_view(&self.x_dev, &self.xb_dev, self.cur, self.d());
        let (dd, theta) = (&mut self.delta_dev, &mut self.theta);
        shield("rff_update_theta", || {
            gpu.stream
                .memcpy_htod(delta, &mut dd.slice_mut(0..delta.len()))
                .map_err(drv("cuMemcpyHtoD"))?;
            launch::rff_update_theta(gpu, &a, &xb, nb, dd, tt, theta)?;
            super::settle(gpu, "rff_update_theta (the update step)")
        })
    }

    fn set_alpha(&mut self, alpha: &[f64]) -> Result<()> {
        let (n, tt) = (self.order.len(), self.targets);
        check_len("alpha", alpha.len(), n * tt)?;
        let gpu = self.gpu;
        let theta = &mut self.theta;
        shield("clearing theta", || {
            gpu.stream.memset_zeros(theta).map_err(drv("cuMemsetD8"))
        })?;
        let (order, b) = (self.order, self.block);
        add_by_blocks(self, order, alpha, tt, b)
    }

    fn decision(&mut self) -> Result<Vec<f64>> {
        let (n, d, tt) = (self.order.len(), self.d(), self.targets);
        let mut out = vec![0.0; n * tt];
        let gpu = self.gpu;
        let (a, tti) = (self.a, self.tt);
        for start in (0..n).step_by(PREDICT_ROWS) {
            let rows = PREDICT_ROWS.min(n - start);
            let (theta, po, ph) = (&self.theta, &mut self.pred_out, &mut self.pred_host);
            match &self.x_dev {
                // Resident rows are in block order: scatter back through `order`.
                Some(x) => {
                    let xv = x.slice(start * d..(start + rows) * d);
                    shield("rff_predict", || {
                        launch::rff_predict(gpu, &a, &xv, rows, theta, tti, po)?;
                        gpu.download(po, &mut ph[..rows * tt])
                    })?;
                    for t in 0..tt {
                        for r in 0..rows {
                            out[t * n + self.order[start + r]] = ph[t * rows + r];
                        }
                    }
                }
                None => {
                    let xh = &mut self.pred_xh[..rows * d];
                    self.x.gather_range(start, xh);
                    let px = &mut self.pred_x;
                    shield("rff_predict", || {
                        gpu.stream
                            .memcpy_htod(&*xh, &mut px.slice_mut(0..rows * d))
                            .map_err(drv("cuMemcpyHtoD"))?;
                        let xv = px.slice(0..rows * d);
                        launch::rff_predict(gpu, &a, &xv, rows, theta, tti, po)?;
                        gpu.download(po, &mut ph[..rows * tt])
                    })?;
                    for t in 0..tt {
                        out[t * n + start..t * n + start + rows]
                            .copy_from_slice(&ph[t * rows..(t + 1) * rows]);
                    }
                }
            }
        }
        Ok(out)
    }

    fn theta(&mut self, out: &mut [f64]) -> Result<()> {
        let gpu = self.gpu;
        let theta = &self.theta;
        shield("copying theta", || gpu.download(theta, out))
    }

    /// Through the host: rare (once per outer step of a distributed fit) and `M x T` values.
    fn shift_theta(&mut self, by: &[f64]) -> Result<()> {
        let mut host = vec![0.0; self.theta.len()];
        check_len("theta shift", by.len(), host.len())?;
        let gpu = self.gpu;
        shield("copying theta", || gpu.download(&self.theta, &mut host))?;
        for (t, v) in host.iter_mut().zip(by) {
            *t += v;
        }
        let theta = &mut self.theta;
        shield("writing theta", || {
            gpu.stream
                .memcpy_htod(&host[..], theta)
                .map_err(drv("cuMemcpyHtoD"))?;
            gpu.sync()
        })
    }

    fn set_kernel_model(&mut self, on: bool) -> bool {
        self.kernel_model = on;
        true
    }

    fn gram_is_cheap(&self) -> bool {
        true
    }

    fn block_products(&self) -> Option<&dyn FeatureProducts> {
        self.kernel_model.then_some(self as &dyn FeatureProducts)
    }

    /// Blocks of many columns are solved on the device (with the Nystrom metric when one is
    /// asked for), a few columns on the host ([`device_solves`](super::trsolve::device_solves)).
    fn solves_blocks(&self, _p: &TrustRegion) -> bool {
        super::trsolve::device_solves(self.targets)
    }

    fn solve_block(
        &mut self,
        block: &BlockSolve<'_>,
        alpha: &mut [f64],
        gbar: &mut [f64],
    ) -> Result<Vec<BlockStats>> {
        let (_, nb) = self.cur;
        if self.kernel_model {
            return Err(JokerError::Device(
                "the device block solver runs on the Gram, not the kernel model".into(),
            ));
        }
        let ws = self.ws.get_mut().unwrap_or_else(|p| p.into_inner());
        self.gpu
            .solve_resident(&ws.kbb, nb, block, alpha, gbar, &mut self.tr)
    }
}

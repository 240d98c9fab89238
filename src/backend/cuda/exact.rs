//! The exact-kernel engine on the device: the rows (in block order, dense or CSR),
//! `beta = K alpha` and `K_BB` (f64) resident; and the host-input twins of the dense kernels
//! behind [`Backend::kernel_tile`](crate::backend::Backend::kernel_tile) and
//! [`Backend::kernel_matvec`](crate::backend::Backend::kernel_matvec).

use cudarc::driver::CudaSlice;

use super::context::Cuda;
use super::launch;
use super::trsolve::TrWorkspace;
use super::{add_by_blocks, check_len, drv, int, shield, zeros};
use crate::backend::{BlockEngine, BlockSolve};
use crate::data::{CsrMatrix, Features};
use crate::error::{Result, invalid};
use crate::kernel::Kernel;
use crate::solver::trust_region::{BlockStats, TrustRegion};

/// CSR rows on the device: indptr (`n + 1` absolute offsets), indices, values. `ix` and `v`
/// hold at least one element (an all-zero matrix has `nnz = 0`).
pub(super) struct CsrRows {
    pub(super) ip: CudaSlice<i64>,
    pub(super) ix: CudaSlice<i32>,
    pub(super) v: CudaSlice<f32>,
}

impl CsrRows {
    /// Rows held.
    pub(super) fn nrows(&self) -> usize {
        self.ip.len() - 1
    }
}

/// Training rows on the device in block order: dense (`n x d` f32) or CSR.
enum DeviceRows {
    Dense(CudaSlice<f32>),
    Csr(CsrRows),
}

impl Cuda {
    /// The CSR rows `order[0], order[1], ...` of `c` on the device (indptr with absolute
    /// offsets, so a block of consecutive positions is a slice of it).
    fn upload_csr_rows(&self, c: &CsrMatrix<f32>, order: &[usize]) -> Result<CsrRows> {
        int("n_features", c.ncols())?;
        let nnz: usize = order.iter().map(|&i| c.row(i).0.len()).sum();
        let (mut ip, mut ix, mut v) = (
            Vec::with_capacity(order.len() + 1),
            Vec::with_capacity(nnz),
            Vec::with_capacity(nnz),
        );
        ip.push(0i64);
        for &i in order {
            let (idx, val) = c.row(i);
            ix.extend(idx.iter().map(|&k| k as i32));
            v.extend_from_slice(val);
            ip.push(ix.len() as i64);
        }
        Ok(CsrRows {
            ip: self.upload(&ip)?,
            ix: self.upload(&ix)?,
            v: self.upload(&v)?,
        })
    }

    /// `K(X_I, X_J)` (`ni x nj`, row-major f64) with `exact_tile`, for dense f32 host inputs
    /// (`ni x d` and `nj x d`, row-major). The GPU twin of the CPU's
    /// [`kernel_tile`](crate::backend::Backend::kernel_tile); the device output is poisoned
    /// with NaN first.
    pub fn exact_tile(
        &self,
        kernel: &Kernel,
        xi: &[f32],
        ni: usize,
        xj: &[f32],
        nj: usize,
        d: usize,
    ) -> Result<Vec<f64>> {
        shield("exact_tile", || {
            check_len("xi", xi.len(), ni * d)?;
            check_len("xj", xj.len(), nj * d)?;
            if ni == 0 || nj == 0 {
                return Ok(Vec::new());
            }
            let a = self.upload(xi)?;
            let b = self.upload(xj)?;
            let mut out = self.upload(&vec![f64::NAN; ni * nj])?;
            let (av, bv) = (a.slice(..), b.slice(..));
            launch::exact_tile(self, kernel, &av, ni, &bv, nj, d, &mut out, nj)?;
            let mut h = vec![0.0; ni * nj];
            self.download(&out, &mut h)?;
            Ok(h)
        })
    }

    /// `out[t * ldo + i] += sum_j K(x_i, xb_j) v[t * nb + j]` with `exact_matvec`, for dense
    /// f32 host inputs. The GPU twin of the CPU's
    /// [`kernel_matvec`](crate::backend::Backend::kernel_matvec).
    #[allow(clippy::too_many_arguments)]
    pub fn exact_matvec(
        &self,
        kernel: &Kernel,
        x: &[f32],
        n: usize,
        xb: &[f32],
        nb: usize,
        d: usize,
        v: &[f64],
        targets: usize,
        out: &mut [f64],
        ldo: usize,
    ) -> Result<()> {
        shield("exact_matvec", || {
            check_len("x", x.len(), n * d)?;
            check_len("xb", xb.len(), nb * d)?;
            if v.len() < nb * targets {
                return Err(invalid(
                    "v",
                    format!("{} values for {nb} x {targets}", v.len()),
                ));
            }
            if n == 0 || nb == 0 || targets == 0 {
                return Ok(());
            }
            if ldo < n || out.len() < (targets - 1) * ldo + n {
                return Err(invalid(
                    "out",
                    format!(
                        "{} values cannot hold {targets} columns of {n} at stride {ldo}",
                        out.len()
                    ),
                ));
            }
            // the output columns, packed (stride n) on the device
            let mut packed = vec![0.0; n * targets];
            for t in 0..targets {
                packed[t * n..(t + 1) * n].copy_from_slice(&out[t * ldo..t * ldo + n]);
            }
            let xd = self.upload(x)?;
            let bd = self.upload(xb)?;
            let vd = self.upload(&v[..nb * targets])?;
            let mut od = self.upload(&packed)?;
            let (xv, bv) = (xd.slice(..), bd.slice(..));
            launch::exact_matvec(
                self, kernel, &xv, n, &bv, nb, d, &vd, nb, targets, &mut od, n,
            )?;
            self.download(&od, &mut packed)?;
            for t in 0..targets {
                out[t * ldo..t * ldo + n].copy_from_slice(&packed[t * n..(t + 1) * n]);
            }
            Ok(())
        })
    }
}

/// The DBCD-TR exact-kernel engine on the device: the rows (in block order, so a block is a
/// slice; dense or CSR), `beta = K alpha` (`n x T`, rows in block order, column stride `n`)
/// and `K_BB` (f64) stay in device memory; the block solve reads `K_BB` where it is.
pub(super) struct CudaExact<'a> {
    gpu: &'a Cuda,
    kernel: &'a Kernel,
    order: &'a [usize],
    d: usize,
    targets: usize,
    x: DeviceRows,
    beta: CudaSlice<f64>,
    kbb: CudaSlice<f64>,
    delta: CudaSlice<f64>,
    tr: TrWorkspace,
    block: usize,
    cur: (usize, usize),
}

impl<'a> CudaExact<'a> {
    /// The engine for a fit on the rows of `x` visited in blocks of at most `block` entries of
    /// `order` (the caller checked [`Cuda::exact_memory`] first).
    pub(super) fn new(
        gpu: &'a Cuda,
        kernel: &'a Kernel,
        x: &'a Features<f32>,
        order: &'a [usize],
        targets: usize,
        block: usize,
    ) -> Result<Self> {
        let (n, d) = (x.nrows(), x.ncols());
        crate::backend::check_order(order, n)?;
        let s = &gpu.stream;
        Ok(CudaExact {
            gpu,
            kernel,
            order,
            d,
            targets,
            x: match x {
                Features::Sparse(c) => DeviceRows::Csr(gpu.upload_csr_rows(c, order)?),
                Features::Dense(_) => DeviceRows::Dense(gpu.upload_rows(x, order)?),
            },
            beta: zeros(s, n * targets)?,
            kbb: zeros(s, block * block)?,
            delta: zeros(s, block * targets)?,
            tr: TrWorkspace::new(s, block, targets)?,
            block,
            cur: (0, 0),
        })
    }

    fn n(&self) -> usize {
        self.order.len()
    }
}

impl BlockEngine<f32> for CudaExact<'_> {
    fn load_block(&mut self, start: usize, len: usize) -> Result<()> {
        if len > self.block || start + len > self.n() {
            return Err(invalid(
                "block",
                format!("rows {start}..{} exceed the engine's blocks", start + len),
            ));
        }
        self.cur = (start, len);
        Ok(())
    }

    fn block_gram(&mut self, kbb: Option<&mut [f64]>, g: &mut [f64]) -> Result<()> {
        let ((start, nb), d, n, tt) = (self.cur, self.d, self.n(), self.targets);
        check_len("g", g.len(), nb * tt)?;
        let (gpu, kernel) = (self.gpu, self.kernel);
        let (x, k, beta) = (&self.x, &mut self.kbb, &self.beta);
        shield("exact_tile", || {
            match x {
                DeviceRows::Dense(x) => {
                    let xb = x.slice(start * d..(start + nb) * d);
                    launch::exact_tile(gpu, kernel, &xb, nb, &xb, nb, d, k, nb)?;
                }
                DeviceRows::Csr(c) => {
                    launch::exact_tile_csr(gpu, kernel, c, start, nb, start, nb, k, nb)?;
                }
            }
            if let Some(kbb) = kbb {
                check_len("kbb", kbb.len(), nb * nb)?;
                gpu.download(k, kbb)?;
            }
            // g = beta_B: the block's rows are consecutive in every column of beta
            for t in 0..tt {
                let col = beta.slice(t * n + start..t * n + start + nb);
                gpu.stream
                    .memcpy_dtoh(&col, &mut g[t * nb..(t + 1) * nb])
                    .map_err(drv("cuMemcpyDtoH"))?;
            }
            gpu.sync()
        })
    }

    fn update(&mut self, delta: &[f64]) -> Result<()> {
        let ((start, nb), d, n, tt) = (self.cur, self.d, self.n(), self.targets);
        check_len("delta", delta.len(), nb * tt)?;
        let (gpu, kernel) = (self.gpu, self.kernel);
        let (x, dd, beta) = (&self.x, &mut self.delta, &mut self.beta);
        shield("exact_matvec", || {
            gpu.stream
                .memcpy_htod(delta, &mut dd.slice_mut(0..delta.len()))
                .map_err(drv("cuMemcpyHtoD"))?;
            match x {
                DeviceRows::Dense(x) => {
                    let (all, xb) = (x.slice(0..n * d), x.slice(start * d..(start + nb) * d));
                    launch::exact_matvec(gpu, kernel, &all, n, &xb, nb, d, dd, nb, tt, beta, n)
                }
                DeviceRows::Csr(c) => {
                    launch::exact_matvec_csr(gpu, kernel, c, start, nb, dd, nb, tt, beta, n)
                }
            }?;
            super::settle(gpu, "exact_matvec (the update step)")
        })
    }

    fn set_alpha(&mut self, alpha: &[f64]) -> Result<()> {
        let (n, tt, b) = (self.n(), self.targets, self.block);
        check_len("alpha", alpha.len(), n * tt)?;
        let (gpu, beta) = (self.gpu, &mut self.beta);
        shield("clearing beta", || {
            gpu.stream.memset_zeros(beta).map_err(drv("cuMemsetD8"))
        })?;
        let order = self.order;
        add_by_blocks(self, order, alpha, tt, b)
    }

    fn decision(&mut self) -> Result<Vec<f64>> {
        let (n, tt) = (self.n(), self.targets);
        let mut h = vec![0.0; n * tt];
        let (gpu, beta) = (self.gpu, &self.beta);
        shield("copying beta", || gpu.download(beta, &mut h))?;
        // rows are in block order on the device: scatter back through `order`
        let mut out = vec![0.0; n * tt];
        for t in 0..tt {
            for (p, &i) in self.order.iter().enumerate() {
                out[t * n + i] = h[t * n + p];
            }
        }
        Ok(out)
    }

    fn theta(&mut self, _out: &mut [f64]) -> Result<()> {
        Ok(())
    }

    /// `beta += by` through the host: one download and one upload of `beta`.
    fn shift_beta(&mut self, by: &[f64]) -> Result<()> {
        let (n, tt, order) = (self.n(), self.targets, self.order);
        crate::backend::check_shift(by.len(), n * tt)?;
        let mut h = vec![0.0; n * tt];
        let (gpu, beta) = (self.gpu, &mut self.beta);
        shield("copying beta", || gpu.download(beta, &mut h))?;
        for t in 0..tt {
            for (p, &i) in order.iter().enumerate() {
                h[t * n + p] += by[t * n + i];
            }
        }
        shield("shifting beta", || {
            gpu.stream
                .memcpy_htod(&h, beta)
                .map_err(drv("cuMemcpyHtoD"))
        })
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
        self.gpu
            .solve_resident(&self.kbb, nb, block, alpha, gbar, &mut self.tr)
    }
}

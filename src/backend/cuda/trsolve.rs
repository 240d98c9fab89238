//! The trust-region block solve on the device (`cuda/trsolve.cu`), shared by both engines: it
//! reads `K_BB` where the engine's Gram step left it (f32 for random features, f64 for exact
//! kernels), so per block only the coordinates and iterates cross the bus.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream};

use super::context::Cuda;
use super::launch::{self, KbbElem};
use super::{check_len, drv, shield, zeros};
use crate::backend::BlockSolve;
use crate::error::{Result, invalid};
use crate::loss::{Coord, Loss};
use crate::solver::trust_region::{BlockStats, TrustRegion, block_nystrom, diagonal_shift};

/// Target columns from which the device solves the blocks (`tr_solve*`, one thread block per
/// column) instead of the host (one task per column).
///
/// One column runs on one multiprocessor, so the device is slower than the host for a single
/// column (an exact b = 2048 MSD block: 617 ms against 44 ms on an H100 machine), and its
/// columns run side by side while the host's compete for memory bandwidth. Measured on an H100
/// with 16 host threads (`bench_gpu`, "block solve by target columns", docs/gpu-validation.md),
/// device time over host time: at b = 512, 1.24 for one column, 1.03 for 16, 0.48 for 64; at
/// b = 2048, 2.62, 0.90 and 0.25. With 4 host threads 16 columns already give 0.45 and 0.31.
/// So 16 columns are where the device stops losing on a 16-core machine and wins on smaller
/// ones.
pub const DEVICE_SOLVE_MIN_COLUMNS: usize = 16;

/// Whether the engines solve blocks of `targets` columns on the device
/// ([`DEVICE_SOLVE_MIN_COLUMNS`]).
pub fn device_solves(targets: usize) -> bool {
    targets >= DEVICE_SOLVE_MIN_COLUMNS
}

/// f64 work vectors of length `b` per column (`TR_NVEC` in `trsolve.cu`).
const TR_NVEC: usize = 20;

/// f64 workspace per column of the device block solve (`tr_work_stride` of `trsolve.cu`):
/// `TR_NVEC` vectors of length `b`, the metric's `rank x rank` matrix and three `rank`-vectors.
fn tr_work_stride(b: usize, rank: usize) -> usize {
    TR_NVEC * b + rank * rank + 3 * rank
}

/// The buffers of `tr_solve_f32` for blocks of up to `b` rows and `targets` columns: the
/// coordinates (`y`, `lam`, `eps`), the iterates (`alpha`, `gbar`), both `b x T` column-major,
/// the kernel's work space and its counters.
pub(super) struct TrWorkspace {
    pub(super) b: usize,
    pub(super) targets: usize,
    pub(super) y: CudaSlice<f64>,
    pub(super) lam: CudaSlice<f64>,
    pub(super) eps: CudaSlice<f64>,
    pub(super) alpha: CudaSlice<f64>,
    pub(super) gbar: CudaSlice<f64>,
    /// `T tr_work_stride(b, rank)` f64 for the largest Nystrom rank `rank` seen so far.
    pub(super) work: CudaSlice<f64>,
    pub(super) rank: usize,
    pub(super) iwork: CudaSlice<i32>,
    pub(super) stats: CudaSlice<i32>,
    /// The Nystrom factors of the current block (`b x rank` row-major, `rank`), and the
    /// sketch `K_BB Omega` (`b x (rank + 1)`, the diagonal last); one element while unused.
    pub(super) ny_u: CudaSlice<f64>,
    pub(super) ny_lam: CudaSlice<f64>,
    sketch: CudaSlice<f64>,
}

impl TrWorkspace {
    /// Device bytes without a Nystrom metric (a metric of rank `r` adds
    /// `(T (r^2 + 3 r) + 2 b r + b + r) 8` B when first used).
    pub(super) fn bytes(b: usize, targets: usize) -> usize {
        5 * b * targets * 8 + TR_NVEC * b * targets * 8 + 2 * b * targets * 4 + 3 * targets * 4
    }

    /// Zeroed buffers for blocks of up to `b` rows and `targets` columns, without a metric.
    pub(super) fn new(stream: &Arc<CudaStream>, b: usize, targets: usize) -> Result<Self> {
        let bt = b * targets;
        Ok(TrWorkspace {
            b,
            targets,
            y: zeros(stream, bt)?,
            lam: zeros(stream, bt)?,
            eps: zeros(stream, bt)?,
            alpha: zeros(stream, bt)?,
            gbar: zeros(stream, bt)?,
            work: zeros(stream, TR_NVEC * bt)?,
            rank: 0,
            iwork: zeros(stream, 2 * bt)?,
            stats: zeros(stream, 3 * targets)?,
            ny_u: zeros(stream, 1)?,
            ny_lam: zeros(stream, 1)?,
            sketch: zeros(stream, 1)?,
        })
    }

    /// Makes room for a Nystrom metric of rank `rank` (buffers only grow).
    fn reserve_rank(&mut self, stream: &Arc<CudaStream>, rank: usize) -> Result<()> {
        if rank > self.rank {
            self.work = zeros(stream, self.targets * tr_work_stride(self.b, rank))?;
            self.ny_u = zeros(stream, self.b * rank)?;
            self.ny_lam = zeros(stream, rank)?;
            self.sketch = zeros(stream, self.b * (rank + 1))?;
            self.rank = rank;
        }
        Ok(())
    }
}

impl Cuda {
    /// The metric of the block solve: the Nystrom factors of [`TrustRegion::nystrom_rank`]
    /// (the sketch `K_BB Omega` and the diagonal on the device (`tr_sketch`), the QR and the
    /// small eigendecomposition on the host ([`block_nystrom`], the same seed and arithmetic as
    /// the host solver), uploaded into `ws`), or else `rho` of the diagonal norm
    /// ([`TrNorm`](crate::solver::trust_region::TrNorm)) from the same diagonal. Returns the
    /// rank and the shift to launch with: `(0, 0.0)` for the Euclidean norm, `(0, rho)` for
    /// the diagonal norm (also where the Nystrom approximation fails, as on the host).
    fn block_metric<K: KbbElem>(
        &self,
        kbb: &CudaSlice<K>,
        nb: usize,
        p: &TrustRegion,
        loss: Loss,
        ws: &mut TrWorkspace,
    ) -> Result<(usize, f64)> {
        let rank = p.nystrom_rank;
        let nystrom = rank > 0 && rank < nb;
        let diagonal = p.norm.is_diagonal(loss);
        if !nystrom && !diagonal {
            return Ok((0, 0.0));
        }
        if nb > ws.b || nb * nb > kbb.len() {
            return Err(invalid(
                "block_size",
                format!("{nb} rows exceed the workspace's {}", ws.b),
            ));
        }
        if nystrom {
            ws.reserve_rank(&self.stream, rank)?;
        } else if ws.sketch.len() < nb {
            ws.sketch = zeros(&self.stream, ws.b)?;
        }
        // out[k nb + i] = (K_BB Omega)[i, k] for k < r, out[r nb + i] = K_BB[i, i]
        let sketch = |omega: &[f64], r: usize, out: &mut CudaSlice<f64>| -> Result<Vec<f64>> {
            let om = self.upload(omega)?;
            launch::tr_sketch(self, kbb, nb, &om, r, out)?;
            let mut h = vec![0.0; nb * (r + 1)];
            self.download(out, &mut h)?;
            Ok(h)
        };
        let diag = sketch(&[0.0], 0, &mut ws.sketch)?;
        let trace: f64 = diag.iter().sum();
        let shift = if diagonal {
            diagonal_shift(trace, nb)
        } else {
            0.0
        };
        if !nystrom {
            return Ok((0, shift));
        }
        let mut failure = None;
        let ny = block_nystrom(nb, rank, trace, |om| {
            let r = om.ncols();
            let omega: Vec<f64> = (0..r)
                .flat_map(|k| (0..nb).map(move |i| om[(i, k)]))
                .collect();
            match sketch(&omega, r, &mut ws.sketch) {
                Ok(y) => faer::Mat::from_fn(nb, r, |i, k| y[k * nb + i]),
                Err(e) => {
                    failure.get_or_insert(e);
                    faer::Mat::zeros(nb, r)
                }
            }
        });
        if let Some(e) = failure {
            return Err(e);
        }
        let Some(ny) = ny else {
            return Ok((0, shift));
        };
        let lam = ny.eigenvalues();
        let r = lam.len();
        let u = ny.u();
        let flat: Vec<f64> = (0..nb)
            .flat_map(|i| (0..r).map(move |k| u[(i, k)]))
            .collect();
        self.stream
            .memcpy_htod(&flat, &mut ws.ny_u)
            .map_err(drv("cuMemcpyHtoD"))?;
        self.stream
            .memcpy_htod(lam, &mut ws.ny_lam)
            .map_err(drv("cuMemcpyHtoD"))?;
        Ok((r, 0.0))
    }

    /// The block solve on a `K_BB` already on the device (the engines' `solve_block`):
    /// coordinates and iterates up, the Nystrom factors if asked for, one launch, iterates and
    /// counters back.
    pub(super) fn solve_resident<K: KbbElem>(
        &self,
        kbb: &CudaSlice<K>,
        nb: usize,
        block: &BlockSolve<'_>,
        alpha: &mut [f64],
        gbar: &mut [f64],
        tr: &mut TrWorkspace,
    ) -> Result<Vec<BlockStats>> {
        let tt = tr.targets;
        check_len("coords", block.coords.len(), nb * tt)?;
        shield(K::SOLVE, || {
            let (loss, dmax, p) = (block.loss, block.delta_max, block.p);
            let metric = self.block_metric(kbb, nb, p, loss, tr)?;
            self.upload_block(block.coords, alpha, gbar, tr)?;
            launch::tr_solve(self, kbb, nb, tt, loss, dmax, p, metric, tr)?;
            self.download_block(tr, tt, alpha, gbar)
        })
    }

    /// Copies a block's coordinates and iterates (`nb x T`, column-major) into `ws`.
    fn upload_block(
        &self,
        coords: &[Coord],
        alpha: &[f64],
        gbar: &[f64],
        ws: &mut TrWorkspace,
    ) -> Result<()> {
        let n = coords.len();
        check_len("alpha", alpha.len(), n)?;
        check_len("gbar", gbar.len(), n)?;
        if n > ws.y.len() {
            return Err(invalid(
                "block_size",
                "the block exceeds the solver's workspace",
            ));
        }
        let y: Vec<f64> = coords.iter().map(|k| k.y).collect();
        let lam: Vec<f64> = coords.iter().map(|k| k.lam).collect();
        let eps: Vec<f64> = coords.iter().map(|k| k.eps).collect();
        for (src, dst) in [
            (&y[..], &mut ws.y),
            (&lam[..], &mut ws.lam),
            (&eps[..], &mut ws.eps),
            (alpha, &mut ws.alpha),
            (gbar, &mut ws.gbar),
        ] {
            if n > 0 {
                self.stream
                    .memcpy_htod(src, &mut dst.slice_mut(0..n))
                    .map_err(drv("cuMemcpyHtoD"))?;
            }
        }
        Ok(())
    }

    /// Reads back what `tr_solve_f32` left in `ws` for `targets` columns of `alpha.len() /
    /// targets` rows.
    fn download_block(
        &self,
        ws: &TrWorkspace,
        targets: usize,
        alpha: &mut [f64],
        gbar: &mut [f64],
    ) -> Result<Vec<BlockStats>> {
        self.download(&ws.alpha, alpha)?;
        self.download(&ws.gbar, gbar)?;
        let mut st = vec![0i32; 3 * targets];
        self.download(&ws.stats, &mut st)?;
        Ok(st
            .chunks_exact(3)
            .map(|c| BlockStats {
                tr_iters: c[0].max(0) as usize,
                accepted: c[1].max(0) as usize,
                cg_iters: c[2].max(0) as usize,
            })
            .collect())
    }

    /// The trust-region block solve on host inputs: `kbb` (`b x b` f32, row-major, exactly
    /// symmetric), `coords`, `alpha` and `gbar` (`b x T` column-major, updated in place). The
    /// GPU twin of [`solve_column`](crate::solver::trust_region::solve_column) for each column
    /// (tests and benchmarks); the work space is poisoned with NaN first.
    #[allow(clippy::too_many_arguments)]
    pub fn tr_solve(
        &self,
        kbb: &[f32],
        b: usize,
        loss: Loss,
        coords: &[Coord],
        alpha: &mut [f64],
        gbar: &mut [f64],
        delta_max: f64,
        p: &TrustRegion,
    ) -> Result<Vec<BlockStats>> {
        shield("tr_solve_f32", || {
            check_len("kbb", kbb.len(), b * b)?;
            if b == 0 || coords.len() % b != 0 {
                return Err(invalid(
                    "coords",
                    format!(
                        "{} coordinates are not a whole number of columns of {b}",
                        coords.len()
                    ),
                ));
            }
            let targets = coords.len() / b;
            let kd = self.upload(kbb)?;
            let mut ws = TrWorkspace::new(&self.stream, b, targets)?;
            let metric = self.block_metric(&kd, b, p, loss, &mut ws)?;
            ws.work = self.upload(&vec![f64::NAN; tr_work_stride(b, ws.rank) * targets])?;
            self.upload_block(coords, alpha, gbar, &mut ws)?;
            launch::tr_solve(self, &kd, b, targets, loss, delta_max, p, metric, &mut ws)?;
            self.download_block(&ws, targets, alpha, gbar)
        })
    }
}

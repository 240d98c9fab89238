//! CUDA backend: the host side of the kernels in `cuda/rff.cu`, `cuda/trsolve.cu` and
//! `cuda/exact.cu`, through cudarc with the driver library loaded at run time (only with the
//! `cuda` feature).
//!
//! On machines without a GPU every entry point fails cleanly (see [`crate::device`]); the
//! differential tests in `tests/suite/gpu.rs` and the benchmark `examples/bench_gpu.rs` check it
//! against the CPU twins on a GPU machine (where it has run: `docs/gpu-validation.md`).
//!
//! The layers follow cudarc's:
//! - `context`: the device context and stream, the embedded kernel modules, the memory plan and
//!   limits, host/device copies;
//! - `launch`: one typed launch function per kernel (argument order, grid, bounds checks);
//! - `trsolve`: the trust-region block solve on a device-resident `K_BB`, shared by both
//!   engines ([`BlockEngine::solve_block`]);
//! - `rff`: the random-feature engine ([`Backend::rff_engine`]): `K_BB = Phi_B Phi_B^T` and
//!   `g = Phi_B theta` without forming `W` or `Phi_B` (`rff_block_gram` + `_reduce`),
//!   `theta += Phi_B^T delta` (`rff_update_theta`), `psi(X) theta` in chunks of rows
//!   (`rff_predict`);
//! - `exact`: the exact-kernel engine ([`Backend::exact_engine`]): the rows (dense or CSR),
//!   `beta = K alpha` and `K_BB` resident (`exact_tile`, `exact_matvec` and their CSR twins).
//!
//! For random features `theta` stays in device memory for the whole fit. The training rows are
//! copied to the device once, in block order, when they fit in the memory budget ("resident":
//! a block is then a contiguous slice and needs no copy); otherwise each block is gathered on
//! the host and copied per iteration, and the objectives stream the data in chunks
//! ("streamed"). Per iteration the host sends the block's coordinates, `alpha` and `gbar`
//! (`40 b T` bytes) and reads back `alpha`, `gbar` and the counters; `K_BB` is copied back only
//! when the trust-region solve runs on the host.
//!
//! Memory is estimated before anything is allocated ([`Cuda::memory_plan`],
//! [`Cuda::exact_memory`]); a request over the free device memory (less a margin) or over the
//! user's limit fails with [`JokerError::Memory`] and the estimate.
//!
//! Of the unfused primitives of [`Backend`], `features`, `gram`, `project` and `accumulate`
//! delegate to the CPU backend; `kernel_tile` and `kernel_matvec` run `exact.cu` and move to
//! the CPU for good after the first failure, whose reason [`Cuda::exact_fallback`] returns.
//!
//! Every call into the driver runs behind `catch_unwind`; a panic inside cudarc becomes
//! [`JokerError::Device`].

mod check;
mod context;
mod exact;
mod launch;
mod rff;
mod trsolve;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DeviceRepr, DriverError, ValidAsZeroBits};

pub use context::{Cuda, EXACT_FATBIN, MemoryPlan, PREDICT_ROWS, RFF_FATBIN, TRSOLVE_FATBIN};
pub use trsolve::{DEVICE_SOLVE_MIN_COLUMNS, device_solves};

use self::exact::CudaExact;
use self::rff::CudaRff;
use super::cpu::Cpu;
use super::{Backend, BlockEngine};
use crate::data::Features;
use crate::error::{JokerError, Result, invalid};
use crate::features::FeatureMap;
use crate::kernel::Kernel;

/// Runs `f`, turning a panic (cudarc panics on some driver-library failures) into an error.
fn shield<R>(what: &str, f: impl FnOnce() -> Result<R>) -> Result<R> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| p.downcast_ref::<&str>().copied())
                .unwrap_or("unknown panic");
            Err(JokerError::Device(format!(
                "{what}: CUDA call panicked: {msg}"
            )))
        }
    }
}

/// Waits for the stream's work, so that a failure the driver reports asynchronously is
/// named by the engine step that launched it (`what`), not by a later call.
fn settle(gpu: &Cuda, what: &'static str) -> Result<()> {
    gpu.stream.synchronize().map_err(drv(what))
}

/// Maps a driver error to [`JokerError::Device`] with context.
fn drv(what: &'static str) -> impl Fn(DriverError) -> JokerError {
    move |e| JokerError::Device(format!("{what}: {e}"))
}

/// A size as the kernels' 32-bit `int`.
fn int(name: &'static str, v: usize) -> Result<i32> {
    i32::try_from(v).map_err(|_| {
        invalid(
            name,
            format!("{v} exceeds the CUDA kernels' 32-bit limit (2^31 - 1)"),
        )
    })
}

/// A host slice of the length a device call expects.
fn check_len(name: &'static str, got: usize, want: usize) -> Result<()> {
    if got == want {
        Ok(())
    } else {
        Err(JokerError::ShapeMismatch(format!(
            "`{name}` has {got} values, {want} expected"
        )))
    }
}

/// Allocates `n` elements (at least one) of zeroed device memory.
fn zeros<T: DeviceRepr + ValidAsZeroBits>(
    stream: &Arc<CudaStream>,
    n: usize,
) -> Result<CudaSlice<T>> {
    stream.alloc_zeros::<T>(n.max(1)).map_err(drv("cuMemAlloc"))
}

/// Adds the effect of `alpha` (`n x T`, rows in their own order) to a device engine's state
/// block by block, through its own `load_block` + `update` (the state must be cleared first).
fn add_by_blocks(
    e: &mut dyn BlockEngine<f32>,
    order: &[usize],
    alpha: &[f64],
    targets: usize,
    block: usize,
) -> Result<()> {
    let n = order.len();
    let mut delta = vec![0.0; block * targets];
    for start in (0..n).step_by(block) {
        let len = block.min(n - start);
        for t in 0..targets {
            for r in 0..len {
                delta[t * len + r] = alpha[t * n + order[start + r]];
            }
        }
        e.load_block(start, len)?;
        e.update(&delta[..len * targets])?;
    }
    Ok(())
}

impl Backend<f32> for Cuda {
    fn name(&self) -> &'static str {
        "cuda"
    }

    /// Random features on the CPU (the device engine generates its own); a Nystrom map's
    /// kernel tile on the device (through [`kernel_tile`](Self::kernel_tile)), its product
    /// with the factor on the host.
    fn features(&self, map: &FeatureMap<f32>, x: &[f32], n: usize, out: &mut [f32]) {
        match map {
            FeatureMap::Random(_) => Cpu.features(map, x, n, out),
            FeatureMap::Nystrom(ny) => ny.features(self, x, n, out),
        }
    }

    fn gram(&self, phi: &[f32], n: usize, m: usize, out: &mut [f64]) {
        Cpu.gram(phi, n, m, out)
    }

    fn project(
        &self,
        phi: &[f32],
        n: usize,
        m: usize,
        theta: &[f64],
        targets: usize,
        out: &mut [f64],
    ) {
        Cpu.project(phi, n, m, theta, targets, out)
    }

    fn accumulate(
        &self,
        phi: &[f32],
        n: usize,
        m: usize,
        delta: &[f64],
        targets: usize,
        theta: &mut [f64],
    ) {
        Cpu.accumulate(phi, n, m, delta, targets, theta)
    }

    /// On the device until an exact kernel fails; then on the CPU, with the reason kept for
    /// [`Cuda::exact_fallback`] (this method cannot return it).
    fn kernel_tile(
        &self,
        kernel: &Kernel,
        xi: &[f32],
        ni: usize,
        xj: &[f32],
        nj: usize,
        d: usize,
        out: &mut [f64],
    ) {
        if self.exact_on_device() {
            match self.exact_tile(kernel, xi, ni, xj, nj, d) {
                Ok(t) if t.len() == out.len() => {
                    out.copy_from_slice(&t);
                    return;
                }
                Ok(t) => self.exact_fell_back(
                    "exact_tile",
                    &invalid(
                        "out",
                        format!("{} values for a tile of {}", out.len(), t.len()),
                    ),
                ),
                Err(e) => self.exact_fell_back("exact_tile", &e),
            }
        }
        Cpu.kernel_tile(kernel, xi, ni, xj, nj, d, out)
    }

    /// On the device until an exact kernel fails, like [`kernel_tile`](Self::kernel_tile).
    fn kernel_matvec(
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
    ) {
        // on failure `out` is untouched (it is written only after a complete download)
        if self.exact_on_device() {
            match self.exact_matvec(kernel, x, n, xb, nb, d, v, targets, out, ldo) {
                Ok(()) => return,
                Err(e) => self.exact_fell_back("exact_matvec", &e),
            }
        }
        Cpu.kernel_matvec(kernel, x, n, xb, nb, d, v, targets, out, ldo)
    }

    fn rff_engine<'a>(
        &'a self,
        map: &'a FeatureMap<f32>,
        x: &'a Features<f32>,
        order: &'a [usize],
        targets: usize,
        block: usize,
    ) -> Result<Option<Box<dyn BlockEngine<f32> + 'a>>> {
        // a Nystrom map, or a random map with a constant feature, runs in the host engine,
        // with its kernel tiles on the device
        let Some(map) = map.random().filter(|r| r.bias().is_none()) else {
            return Ok(None);
        };
        let e = shield("creating the GPU engine", || {
            CudaRff::new(self, map, x, order, targets, block)
        })?;
        Ok(Some(Box::new(e)))
    }

    /// The resident engine where its memory fits and the exact kernels have not failed;
    /// otherwise `None` (the host engine, whose tiles and products still run here with rows
    /// sent per call).
    fn exact_engine<'a>(
        &'a self,
        kernel: &'a Kernel,
        x: &'a Features<f32>,
        order: &'a [usize],
        targets: usize,
        block: usize,
    ) -> Result<Option<Box<dyn BlockEngine<f32> + 'a>>> {
        if !self.exact_on_device() || self.exact_memory_of(x, targets, block)?.is_none() {
            return Ok(None);
        }
        let e = shield("creating the GPU exact engine", || {
            CudaExact::new(self, kernel, x, order, targets, block)
        })?;
        Ok(Some(Box::new(e)))
    }
}

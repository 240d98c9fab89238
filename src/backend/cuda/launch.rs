//! One typed launch function per kernel of `cuda/rff.cu`, `cuda/trsolve.cu` and
//! `cuda/exact.cu`, named after the kernel. Each converts sizes to the kernels' 32-bit `int`,
//! checks the buffer sizes its `SAFETY` argument relies on, picks the grid and pushes the
//! arguments in the order of the kernel's signature, so that the engines call kernels with
//! Rust types only.

use cudarc::driver::{CudaFunction, CudaSlice, CudaView, DeviceRepr, LaunchConfig, PushKernelArg};

use super::context::{Cuda, Kernels};
use super::exact::CsrRows;
use super::rff::GramWorkspace;
use super::trsolve::TrWorkspace;
use super::{drv, int};
use crate::error::{Result, invalid};
use crate::features::RandomMap;
use crate::kernel::{Kernel, KernelKind};
use crate::loss::Loss;
use crate::solver::trust_region::{RadiusRule, TrustRegion};

/// A launch of kernel `$f` on `$gpu`'s stream with `$arg`s pushed in order: references to
/// device buffers or to scalars that outlive the launch, in the kernel's parameter order.
/// Launching the builder stays `unsafe` at the call site, next to the argument that makes it
/// sound.
macro_rules! kernel_args {
    ($gpu:expr, $f:expr; $($arg:expr),+ $(,)?) => {{
        let mut l = $gpu.stream.launch_builder($f);
        $(l.arg($arg);)+
        l
    }};
}

/// Threads per block of every kernel in `rff.cu` (`RFF_THREADS`), of `exact_tile` and of
/// `exact_matvec`.
pub(super) const THREADS: u32 = 256;
/// Output tile of `rff_block_gram` (`RFF_GT`).
pub(super) const GT: usize = 128;
/// Features per chunk (`RFF_MC`).
pub(super) const MC: usize = 32;
/// Output tile edge of `exact_tile` and row tile of `exact_matvec` (`EX_T` in `exact.cu`).
const EX_T: usize = 64;
/// Threads per block of `tr_solve_f32` (`TR_THREADS`; its `__launch_bounds__`).
const TR_THREADS: u32 = 256;

/// The feature-map arguments every kernel of `rff.cu` takes.
#[derive(Clone, Copy, Debug)]
pub(super) struct MapArgs {
    pub(super) m: i32,
    pub(super) d: i32,
    seed: u64,
    kernel: i32,
    gamma: f64,
    nu: f64,
}

impl MapArgs {
    /// The arguments of `map`, its sizes checked against the 32-bit limit.
    pub(super) fn of(map: &RandomMap<f32>) -> Result<Self> {
        let spec = map.spec();
        let (kernel, nu) = kernel_id(&spec.kernel);
        Ok(MapArgs {
            m: int("n_components", spec.n_components)?,
            d: int("n_features", spec.dim)?,
            seed: spec.seed,
            kernel,
            gamma: spec.kernel.gamma,
            nu,
        })
    }
}

/// The kernel id and Matern `nu` of `rff.cu` and `exact.cu` (0 Gaussian, 1 Laplacian,
/// 2 Matern).
fn kernel_id(k: &Kernel) -> (i32, f64) {
    match k.kind {
        KernelKind::Gaussian => (0, 0.0),
        KernelKind::Laplacian => (1, 0.0),
        KernelKind::Matern { nu } => (2, nu.value()),
    }
}

/// One 1-D launch configuration with 256-thread blocks.
fn cfg1(blocks: usize) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (blocks.clamp(1, i32::MAX as usize) as u32, 1, 1),
        block_dim: (THREADS, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// Row tiles, lower-triangle tiles and M-slices of `rff_block_gram` for `b` rows, `m`
/// features on a GPU that runs `slots` of its blocks at once (multiprocessors times the
/// occupancy; cuda/README.md, "Launching rff_block_gram").
///
/// The grid is `ntiles x S` blocks of equal work, so it runs in `ceil(S ntiles / slots)` waves
/// and the last one idles the slots it leaves empty: `S` is the smallest slice count whose
/// waves are at least 95% as full as the best `S <= max(8, 4 slots / ntiles)` allows (more
/// slices mean more partial tiles to store and reduce), and never more than the `ceil(m / 32)` feature chunks.
pub(super) fn gram_shape(b: usize, m: usize, slots: usize) -> (usize, usize) {
    let nt = b.div_ceil(GT);
    let ntiles = nt * (nt + 1) / 2;
    let nchunks = m.div_ceil(MC).max(1);
    let slots = slots.max(1);
    let fill = |s: usize| {
        let blocks = s * ntiles;
        blocks as f64 / (blocks.div_ceil(slots) * slots) as f64
    };
    let most = (4 * slots / ntiles).max(8).min(nchunks);
    let best = (1..=most).map(fill).fold(0.0, f64::max);
    let s = (1..=most).find(|&s| fill(s) >= 0.95 * best).unwrap_or(1);
    (ntiles, s)
}

/// `(ntiles, s)` of the Gram launches on `nb` rows: the tiles for `nb`, and at most the
/// `ws.nsplit` feature slices `ws` holds. Fails when `nb` exceeds the workspace's block.
fn gram_split(gpu: &Cuda, a: &MapArgs, nb: usize, ws: &GramWorkspace) -> Result<(usize, usize)> {
    if nb > ws.b {
        return Err(invalid(
            "block_size",
            format!("{nb} rows exceed the workspace's {}", ws.b),
        ));
    }
    let (ntiles, _) = gram_shape(nb, a.m as usize, gpu.gram_slots);
    let s = ws.nsplit.min((a.m as usize).div_ceil(MC).max(1));
    Ok((ntiles, s))
}

/// `rff_block_gram`: the partial sums over `s` feature slices of the `K_BB` tiles and of
/// `g = Phi_B theta` for the `nb` rows `xb`, into `ws.kpart` and `ws.gpart`.
pub(super) fn rff_block_gram(
    gpu: &Cuda,
    a: &MapArgs,
    xb: &CudaView<'_, f32>,
    nb: usize,
    theta: &CudaSlice<f64>,
    targets: i32,
    ws: &mut GramWorkspace,
) -> Result<()> {
    let (ntiles, s) = gram_split(gpu, a, nb, ws)?;
    let b = int("block_size", nb)?;
    let cfg = LaunchConfig {
        grid_dim: (ntiles as u32, s as u32, 1),
        block_dim: (THREADS, 1, 1),
        shared_mem_bytes: 0,
    };
    let (x, th, kpart, gpart) = (xb, theta, &mut ws.kpart, &mut ws.gpart);
    let mut l = kernel_args!(gpu, &gpu.k.gram;
        x, th, &b, &a.d, &a.m, &targets, &a.seed, &a.kernel, &a.gamma, &a.nu, kpart, gpart);
    // SAFETY: the arguments match `rff_block_gram`'s signature in order and type; xb holds
    // nb * d f32, theta M * T f64; kpart holds S * ntiles * 128^2 f32 and gpart S * T * b
    // f64 for this nb (the workspace was sized for ws.b >= nb with S >= s, and tiles and
    // partial strides shrink with nb), so every index the kernel writes is in bounds.
    unsafe { l.launch(cfg) }.map_err(drv("rff_block_gram"))?;
    Ok(())
}

/// `rff_block_gram_reduce`: sums the partials of [`rff_block_gram`] on the same `nb` rows into
/// `ws.kbb` (`nb x nb` f32, row-major) and `ws.g` (`nb x T`).
pub(super) fn rff_block_gram_reduce(
    gpu: &Cuda,
    a: &MapArgs,
    nb: usize,
    targets: i32,
    ws: &mut GramWorkspace,
) -> Result<()> {
    let (ntiles, s) = gram_split(gpu, a, nb, ws)?;
    let b = int("block_size", nb)?;
    let nsplit = s as i32;
    let total = ntiles * GT * GT + targets as usize * nb;
    let (kpart, gpart, kbb, g) = (&ws.kpart, &ws.gpart, &mut ws.kbb, &mut ws.g);
    let mut l = kernel_args!(gpu, &gpu.k.reduce; kpart, gpart, &b, &targets, &nsplit, kbb, g);
    // SAFETY: arguments match `rff_block_gram_reduce`; it reads the s partials written by
    // rff_block_gram and writes nb * nb f32 into kbb (sized b * b >= nb * nb) and T * nb f64
    // into g.
    unsafe { l.launch(cfg1(total.div_ceil(THREADS as usize))) }
        .map_err(drv("rff_block_gram_reduce"))?;
    Ok(())
}

/// `rff_update_theta`: `theta += Phi_B^T delta` for the `nb` rows `xb`.
pub(super) fn rff_update_theta(
    gpu: &Cuda,
    a: &MapArgs,
    xb: &CudaView<'_, f32>,
    nb: usize,
    delta: &CudaSlice<f64>,
    targets: i32,
    theta: &mut CudaSlice<f64>,
) -> Result<()> {
    let b = int("block_size", nb)?;
    let mut l = kernel_args!(gpu, &gpu.k.update;
        xb, delta, &b, &a.d, &a.m, &targets, &a.seed, &a.kernel, &a.gamma, &a.nu, theta);
    // SAFETY: arguments match `rff_update_theta`; xb holds nb * d f32, delta >= nb * T f64
    // (column stride nb), theta M * T f64; one block per 32 features.
    unsafe { l.launch(cfg1((a.m as usize).div_ceil(MC))) }.map_err(drv("rff_update_theta"))?;
    Ok(())
}

/// `rff_predict`: `out (n x T, column stride n) = psi(X) theta` for the `n` rows `x`.
pub(super) fn rff_predict(
    gpu: &Cuda,
    a: &MapArgs,
    x: &CudaView<'_, f32>,
    n: usize,
    theta: &CudaSlice<f64>,
    targets: i32,
    out: &mut CudaSlice<f64>,
) -> Result<()> {
    let nn = int("n_samples", n)?;
    let mut l = kernel_args!(gpu, &gpu.k.predict;
        x, theta, &nn, &a.d, &a.m, &targets, &a.seed, &a.kernel, &a.gamma, &a.nu, out);
    // SAFETY: arguments match `rff_predict`; x holds n * d f32, theta M * T f64 and out
    // >= n * T f64; one thread per row.
    unsafe { l.launch(cfg1(n.div_ceil(THREADS as usize))) }.map_err(drv("rff_predict"))?;
    Ok(())
}

/// `rff_features`: `phi (n x M f32, row-major) = psi(X)` for the `n` rows `x`, one thread per
/// entry (the debug kernel of the differential tests).
pub(super) fn rff_features(
    gpu: &Cuda,
    a: &MapArgs,
    x: &CudaSlice<f32>,
    n: usize,
    phi: &mut CudaSlice<f32>,
) -> Result<()> {
    let nn = int("n_samples", n)?;
    let total = n * a.m as usize;
    let mut l = kernel_args!(gpu, &gpu.k.features;
        x, &nn, &a.d, &a.m, &a.seed, &a.kernel, &a.gamma, &a.nu, phi);
    // SAFETY: arguments match `rff_features`; x holds n * d f32 and phi n * M f32; the
    // kernel's grid-stride loop stays below n * M.
    unsafe { l.launch(cfg1(total.div_ceil(THREADS as usize).min(1 << 16))) }
        .map_err(drv("rff_features"))?;
    Ok(())
}

/// `rff_weights`: the map's `W` (`M x d` f32, row-major) into `w` and `b` (`M` f32) into `b`
/// (the debug kernel of the differential tests).
pub(super) fn rff_weights(
    gpu: &Cuda,
    a: &MapArgs,
    w: &mut CudaSlice<f32>,
    b: &mut CudaSlice<f32>,
) -> Result<()> {
    let (m, d) = (a.m as usize, a.d as usize);
    let mut l = kernel_args!(gpu, &gpu.k.weights;
        &a.m, &a.d, &a.seed, &a.kernel, &a.gamma, &a.nu, w, b);
    // SAFETY: arguments match `rff_weights`; w holds M * d f32 and b M f32.
    unsafe { l.launch(cfg1((m * d).div_ceil(THREADS as usize).min(1 << 16))) }
        .map_err(drv("rff_weights"))?;
    Ok(())
}

/// The element type of a `K_BB` the device block solve reads: f32 (random features) or f64
/// (exact kernels). It picks the variant of each `trsolve.cu` kernel whose first parameter
/// points to it.
pub(super) trait KbbElem: DeviceRepr {
    /// `tr_solve_f32` or `tr_solve`.
    const SOLVE: &'static str;
    /// `tr_sketch_f32` or `tr_sketch`.
    const SKETCH: &'static str;
    /// The kernel named [`SOLVE`](Self::SOLVE).
    fn solve(k: &Kernels) -> &CudaFunction;
    /// The kernel named [`SKETCH`](Self::SKETCH).
    fn sketch(k: &Kernels) -> &CudaFunction;
}

impl KbbElem for f32 {
    const SOLVE: &'static str = "tr_solve_f32";
    const SKETCH: &'static str = "tr_sketch_f32";
    fn solve(k: &Kernels) -> &CudaFunction {
        &k.tr_solve
    }
    fn sketch(k: &Kernels) -> &CudaFunction {
        &k.sketch
    }
}

impl KbbElem for f64 {
    const SOLVE: &'static str = "tr_solve";
    const SKETCH: &'static str = "tr_sketch";
    fn solve(k: &Kernels) -> &CudaFunction {
        &k.tr_solve64
    }
    fn sketch(k: &Kernels) -> &CudaFunction {
        &k.sketch64
    }
}

/// `tr_sketch_f32` / `tr_sketch`: `out[k nb + i] = (K_BB Omega)[i, k]` for `k < r` and
/// `out[r nb + i] = K_BB[i, i]`, for the `nb x nb` `K_BB` in `kbb` (row-major) and `Omega`
/// (`nb x r`, column-major) in `omega`.
pub(super) fn tr_sketch<K: KbbElem>(
    gpu: &Cuda,
    kbb: &CudaSlice<K>,
    nb: usize,
    omega: &CudaSlice<f64>,
    r: usize,
    out: &mut CudaSlice<f64>,
) -> Result<()> {
    let b = int("block_size", nb)?;
    let ri = int("nystrom_rank", r)?;
    if kbb.len() < nb * nb || omega.len() < nb * r || out.len() < nb * (r + 1) {
        return Err(invalid(
            "nystrom_rank",
            format!("buffers too small for a sketch of rank {r} of a block of {nb}"),
        ));
    }
    let cfg = LaunchConfig {
        grid_dim: (nb.div_ceil(256) as u32, r as u32 + 1, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    };
    let mut l = kernel_args!(gpu, K::sketch(&gpu.k); kbb, &b, omega, &ri, out);
    // SAFETY: the arguments match `tr_sketch_f32(const float*, int, const double*, int,
    // double*)` or `tr_sketch` (f64 K_BB), chosen by K, the element type of kbb. kbb holds at
    // least nb^2 values, omega nb * r f64 (one element read by no thread when r = 0), out
    // nb * (r + 1) f64 (all checked above); threads with i >= nb return before any access.
    unsafe { l.launch(cfg) }.map_err(drv(K::SKETCH))?;
    Ok(())
}

/// `tr_solve_f32` / `tr_solve`: the trust-region solve of `targets` columns on the `nb x nb`
/// `K_BB` in `kbb` (row-major, stride `nb`), whose coordinates and iterates are in `ws`, with
/// the Nystrom metric of rank `rank` already there (0: none) or the diagonal norm's `rho`
/// (`metric = (0, rho)`; 0: the Euclidean norm); the results stay in `ws.alpha`,
/// `ws.gbar` and `ws.stats`.
#[allow(clippy::too_many_arguments)]
pub(super) fn tr_solve<K: KbbElem>(
    gpu: &Cuda,
    kbb: &CudaSlice<K>,
    nb: usize,
    targets: usize,
    loss: Loss,
    delta_max: f64,
    p: &TrustRegion,
    (rank, diag_shift): (usize, f64),
    ws: &mut TrWorkspace,
) -> Result<()> {
    if nb > ws.b {
        return Err(invalid(
            "block_size",
            format!("{nb} rows exceed the workspace's {}", ws.b),
        ));
    }
    if targets > ws.targets || nb * nb > kbb.len() {
        return Err(invalid(
            "targets",
            format!("{targets} columns of {nb} exceed the workspace or K_BB"),
        ));
    }
    if rank > ws.rank || rank >= nb.max(1) {
        return Err(invalid(
            "nystrom_rank",
            format!("rank {rank} without its factors (block of {nb})"),
        ));
    }
    let b = int("block_size", nb)?;
    let rank_i = int("nystrom_rank", rank)?;
    let (loss_id, lparam) = loss.device_id();
    let max_iter = int("max_iter", p.max_iter)?;
    let max_cg = int("max_cg_iter", p.max_cg_iter)?;
    let rule: i32 = match p.rule {
        RadiusRule::Reference => 0,
        RadiusRule::Paper => 1,
    };
    let cfg = LaunchConfig {
        grid_dim: (int("targets", targets)? as u32, 1, 1),
        block_dim: (TR_THREADS, 1, 1),
        shared_mem_bytes: 0,
    };
    let mut l = kernel_args!(gpu, K::solve(&gpu.k);
        kbb, &b, &loss_id, &lparam, &ws.y, &ws.lam, &ws.eps, &mut ws.alpha, &mut ws.gbar,
        &delta_max, &p.eta, &max_iter, &max_cg, &p.cg_rtol, &p.kkt_tol, &p.kkt_rtol, &rule,
        &ws.ny_u, &ws.ny_lam, &rank_i, &diag_shift, &mut ws.work, &mut ws.iwork, &mut ws.stats);
    // SAFETY: the arguments match the signature of `tr_solve_f32` (f32 K_BB) or `tr_solve`
    // (f64 K_BB), chosen by K, the element type of kbb, in order and type. kbb holds at
    // least nb * nb values (the kernel reads kbb[i * nb + j], i, j < nb); y, lam, eps,
    // alpha and gbar hold ws.b * T >= nb * T f64 and the kernel addresses column t at
    // t * nb; ny_u holds ws.b * ws.rank >= nb * rank f64 and ny_lam ws.rank >= rank (not
    // read when rank = 0); work holds T * tr_work_stride(ws.b, ws.rank) f64 and iwork
    // 2 * ws.b * T i32 (the kernel uses tr_work_stride(nb, rank) and 2 * nb per column,
    // and tr_work_stride grows with both); stats holds 3 * T i32. One block of
    // TR_THREADS threads per column, as its __launch_bounds__ requires; no dynamic shared
    // memory.
    unsafe { l.launch(cfg) }.map_err(drv(K::SOLVE))?;
    Ok(())
}

/// `exact_tile`: `out[i * ldo + j] = K(x_i, x_j)` for the `ni` rows of `xi` and the `nj`
/// rows of `xj` (both `d` wide, row-major f32 on the device).
#[allow(clippy::too_many_arguments)]
pub(super) fn exact_tile(
    gpu: &Cuda,
    kernel: &Kernel,
    xi: &CudaView<'_, f32>,
    ni: usize,
    xj: &CudaView<'_, f32>,
    nj: usize,
    d: usize,
    out: &mut CudaSlice<f64>,
    ldo: usize,
) -> Result<()> {
    if ni == 0 || nj == 0 {
        return Ok(());
    }
    let (rows, cols) = (ni.div_ceil(EX_T), nj.div_ceil(EX_T));
    if rows > 65_535 {
        return Err(invalid(
            "rows",
            format!("{ni} rows exceed one exact_tile launch (65,535 x 64)"),
        ));
    }
    let fits =
        xi.len() >= ni * d && xj.len() >= nj * d && ldo >= nj && out.len() >= (ni - 1) * ldo + nj;
    if !fits {
        return Err(invalid(
            "exact_tile",
            format!("buffers too small for a {ni} x {nj} tile of dimension {d}"),
        ));
    }
    let (kid, nu) = kernel_id(kernel);
    let (ni32, nj32, d32) = (int("rows", ni)?, int("rows", nj)?, int("n_features", d)?);
    let ldo32 = int("ldo", ldo)?;
    let cfg = LaunchConfig {
        grid_dim: (int("rows", cols)? as u32, rows as u32, 1),
        block_dim: (THREADS, 1, 1),
        shared_mem_bytes: 0,
    };
    let mut l = kernel_args!(gpu, &gpu.k.exact_tile;
        xi, &ni32, xj, &nj32, &d32, &kid, &kernel.gamma, &nu, out, &ldo32);
    // SAFETY: the arguments match `exact_tile`'s signature in order and type. xi holds
    // >= ni * d and xj >= nj * d f32 (checked above; the kernel reads rows < ni and < nj
    // only); out holds >= (ni - 1) * ldo + nj f64 and is written at i * ldo + j for i < ni,
    // j < nj. The grid covers ceil(nj / 64) x ceil(ni / 64) tiles of 64 x 64 with 256
    // threads per block, as the kernel's __launch_bounds__ and tiling assume; static
    // shared memory only.
    unsafe { l.launch(cfg) }.map_err(drv("exact_tile"))?;
    Ok(())
}

/// `exact_matvec`: `out[t * ldo + i] += sum_j K(x_i, xb_j) v[t * ldv + j]` for the `n`
/// rows of `x`, the `nb` rows of `xb` (device f32) and `targets` columns.
#[allow(clippy::too_many_arguments)]
pub(super) fn exact_matvec(
    gpu: &Cuda,
    kernel: &Kernel,
    x: &CudaView<'_, f32>,
    n: usize,
    xb: &CudaView<'_, f32>,
    nb: usize,
    d: usize,
    v: &CudaSlice<f64>,
    ldv: usize,
    targets: usize,
    out: &mut CudaSlice<f64>,
    ldo: usize,
) -> Result<()> {
    if n == 0 || nb == 0 || targets == 0 {
        return Ok(());
    }
    let fits = x.len() >= n * d
        && xb.len() >= nb * d
        && ldv >= nb
        && v.len() >= (targets - 1) * ldv + nb
        && ldo >= n
        && out.len() >= (targets - 1) * ldo + n;
    if !fits {
        return Err(invalid(
            "exact_matvec",
            format!("buffers too small for {n} x {nb} rows of dimension {d}, {targets} columns"),
        ));
    }
    let (kid, nu) = kernel_id(kernel);
    let (n32, nb32, d32) = (int("rows", n)?, int("rows", nb)?, int("n_features", d)?);
    let (ldv32, ldo32, tt) = (int("ldv", ldv)?, int("ldo", ldo)?, int("targets", targets)?);
    let mut l = kernel_args!(gpu, &gpu.k.exact_matvec;
        x, &n32, xb, &nb32, &d32, &kid, &kernel.gamma, &nu, v, &ldv32, &tt, out, &ldo32);
    // SAFETY: the arguments match `exact_matvec`'s signature in order and type. x holds
    // >= n * d and xb >= nb * d f32 (x and xb may overlap: both are only read); v holds
    // >= (T - 1) ldv + nb f64 read at t * ldv + j (j < nb); out holds >= (T - 1) ldo + n
    // f64 read and written at t * ldo + i (i < n), each element by one thread of the block
    // owning its 64-row tile (all checked above). One block of 256 threads per 64 rows, as
    // the kernel's __launch_bounds__ and layout assume.
    unsafe { l.launch(cfg1(n.div_ceil(EX_T))) }.map_err(drv("exact_matvec"))?;
    Ok(())
}

/// `exact_tile_csr`: `out[i ldo + j] = K(x_i, x_j)` for the CSR rows `si .. si + ni` and
/// `sj .. sj + nj` of `rows`.
#[allow(clippy::too_many_arguments)]
pub(super) fn exact_tile_csr(
    gpu: &Cuda,
    kernel: &Kernel,
    rows: &CsrRows,
    si: usize,
    ni: usize,
    sj: usize,
    nj: usize,
    out: &mut CudaSlice<f64>,
    ldo: usize,
) -> Result<()> {
    if ni == 0 || nj == 0 {
        return Ok(());
    }
    let nrows = rows.nrows();
    if si + ni > nrows || sj + nj > nrows || ldo < nj || out.len() < (ni - 1) * ldo + nj {
        return Err(invalid(
            "exact_tile_csr",
            format!("rows {si}+{ni} / {sj}+{nj} of {nrows}, or the output, out of range"),
        ));
    }
    let (kid, nu) = kernel_id(kernel);
    let (ni32, nj32, ldo32) = (int("rows", ni)?, int("rows", nj)?, int("ldo", ldo)?);
    let (ipi, ipj) = (
        rows.ip.slice(si..si + ni + 1),
        rows.ip.slice(sj..sj + nj + 1),
    );
    let cfg = LaunchConfig {
        grid_dim: (nj.div_ceil(32) as u32, ni.div_ceil(8) as u32, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    };
    let (ix, vals) = (&rows.ix, &rows.v);
    let mut l = kernel_args!(gpu, &gpu.k.exact_tile_csr;
        &ipi, ix, vals, &ni32, &ipj, ix, vals, &nj32, &kid, &kernel.gamma, &nu, out, &ldo32);
    // SAFETY: the arguments match `exact_tile_csr`'s signature in order and type. ipi and
    // ipj hold ni + 1 and nj + 1 i64 offsets (ranges checked above); every offset lies in
    // 0..=nnz of ix (i32) and v (f32), which upload_csr_rows built together, with indices
    // strictly increasing within a row (as CsrMatrix guarantees). out holds
    // (ni - 1) ldo + nj f64, each written by one thread. Grid (ceil(nj/32), ceil(ni/8)) of
    // 256 threads, as the kernel's layout assumes.
    unsafe { l.launch(cfg) }.map_err(drv("exact_tile_csr"))?;
    Ok(())
}

/// `exact_matvec_csr`: `out[t ldo + i] += sum_j K(x_i, x_{sb + j}) v[t ldv + j]` over all `n`
/// CSR rows of `rows` and the block rows `sb .. sb + nb`.
#[allow(clippy::too_many_arguments)]
pub(super) fn exact_matvec_csr(
    gpu: &Cuda,
    kernel: &Kernel,
    rows: &CsrRows,
    sb: usize,
    nb: usize,
    v: &CudaSlice<f64>,
    ldv: usize,
    targets: usize,
    out: &mut CudaSlice<f64>,
    ldo: usize,
) -> Result<()> {
    let n = rows.nrows();
    if n == 0 || nb == 0 || targets == 0 {
        return Ok(());
    }
    let fits = sb + nb <= n
        && ldv >= nb
        && v.len() >= (targets - 1) * ldv + nb
        && ldo >= n
        && out.len() >= (targets - 1) * ldo + n;
    if !fits {
        return Err(invalid(
            "exact_matvec_csr",
            format!("buffers too small for {n} x {nb} rows, {targets} columns"),
        ));
    }
    let (kid, nu) = kernel_id(kernel);
    let (n32, nb32) = (int("rows", n)?, int("rows", nb)?);
    let (ldv32, ldo32, tt) = (int("ldv", ldv)?, int("ldo", ldo)?, int("targets", targets)?);
    let ipb = rows.ip.slice(sb..sb + nb + 1);
    let (ip, ix, vals) = (&rows.ip, &rows.ix, &rows.v);
    let mut l = kernel_args!(gpu, &gpu.k.exact_matvec_csr;
        ip, ix, vals, &n32, &ipb, ix, vals, &nb32, &kid, &kernel.gamma, &nu,
        v, &ldv32, &tt, out, &ldo32);
    // SAFETY: the arguments match `exact_matvec_csr`'s signature in order and type. ip
    // holds n + 1 and ipb nb + 1 i64 offsets into ix (i32) and v (f32), all in 0..=nnz
    // (upload_csr_rows); v holds >= (T - 1) ldv + nb f64 read at t ldv + j (j < nb); out
    // holds >= (T - 1) ldo + n f64, element (t, i) read and written by one thread of the
    // block owning its 64-row tile (checked above). One block of 256 threads per 64 rows.
    unsafe { l.launch(cfg1(n.div_ceil(EX_T))) }.map_err(drv("exact_matvec_csr"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The launch shape of the README's worked example (b = 512, M = 1e5, H100: 132 SMs,
    /// two blocks of `rff_block_gram` each): 260 blocks in one wave of 264 slots.
    #[test]
    fn gram_shape_matches_the_readme() {
        let (ntiles, s) = gram_shape(512, 100_000, 264);
        assert_eq!((ntiles, s), (10, 26));
        // b = 2048: 136 tiles on 132 slots; one slice fills 2 waves to 52%, six fill 7 waves to
        // 88% (the best of S <= 8 is 92%, at S = 8).
        assert_eq!(gram_shape(2048, 100_000, 132), (136, 6));
        // Small M: S never exceeds the number of 32-feature chunks.
        assert_eq!(gram_shape(100, 40, 264), (1, 2));
        assert_eq!(gram_shape(1, 1, 1), (1, 1));
    }

    /// Every shape fills its waves to within 95% of the best fill on offer.
    #[test]
    fn gram_shape_fills_waves() {
        for slots in [1, 46, 132, 264, 528] {
            for b in [1, 100, 129, 512, 1000, 2048, 4096] {
                for m in [1, 40, 1000, 100_000] {
                    let (ntiles, s) = gram_shape(b, m, slots);
                    let nchunks = m.div_ceil(MC);
                    assert!(
                        s >= 1 && s <= nchunks.max(1),
                        "b={b} m={m} slots={slots}: S={s}"
                    );
                    let fill = |s: usize| {
                        let n = s * ntiles;
                        n as f64 / (n.div_ceil(slots) * slots) as f64
                    };
                    let best = (1..=(4 * slots / ntiles).max(8).min(nchunks.max(1)))
                        .map(fill)
                        .fold(0.0, f64::max);
                    assert!(fill(s) >= 0.95 * best, "b={b} m={m} slots={slots}: S={s}");
                }
            }
        }
    }
}

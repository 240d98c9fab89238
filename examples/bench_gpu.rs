//! GPU benchmark of the fused random-feature kernels and of a DBCD-TR iteration, for the
//! setting b = 512, M = 100,000, d = 28 (HIGGS-like), T = 1.
//!
//! ```sh
//! cargo run --release --example bench_gpu [-- --n 200000 --iters 50 --reps 20 --cpu 0 --exact-n 1000000]
//! ```
//!
//! Reports (measured on an H100 in docs/gpu-validation.md):
//! - device time per call of `rff_block_gram` + `_reduce` and of `rff_update_theta`, with CUDA
//!   events over `reps` launches on device-resident inputs;
//! - the same flops `2 b^2 M` as one cuBLAS SGEMM (`Phi_B Phi_B^T` from an explicit `Phi_B`),
//!   timed with events: the fused Gram's rate as a fraction of that GEMM rate;
//! - the time of an iteration of the GPU engine without the trust-region solve (block, fused
//!   Gram, copies of `K_BB` and `g` back, delta up, fused update), between two CUDA events on
//!   the stream (host gaps between the calls included), on resident data;
//! - wall-clock seconds per DBCD-TR iteration of a real fit on the GPU (host trust-region
//!   solve included) with the Gram and with the kernel block as the trust region's model, next
//!   to the same fit on the CPU with the automatic choice (`--cpu 0` skips it), from the
//!   solver's own timings;
//! - device memory: joker's estimate and the measured growth of used memory when the engine is
//!   created (`cuMemGetInfo`);
//! - exact kernels in the paper's MSD setting (n = 1e6, d = 90, b = 2048, Gaussian; `--exact-n`
//!   sets n, 0 skips): device time of the resident engine's block (`exact_tile` of `K_BB`, `g`
//!   back) and of its `beta += K(X, X_B) delta` update (`exact_matvec` over all n rows), the
//!   latter against a cuBLAS SGEMM of the same `2 n d b` distance flops; then a real exact fit
//!   on the GPU (block solve on the device) in seconds per iteration (the paper reports about
//!   210 ms per iteration on an RTX 3080).
//!
//! Without a usable GPU it prints why and exits with status 2.

use std::process::exit;

use cudarc::cublas::{CudaBlas, Gemm, GemmConfig, sys as blas_sys};
use cudarc::driver::sys::CUevent_flags;
use joker::backend::Backend;
use joker::backend::cuda::Cuda;
use joker::device::probe;
use joker::features::{FeatureMap, FeatureSpec};
use joker::rng::Stream;
use joker::{Dataset, DenseMatrix, Device, Features, Joker, Kernel, KernelKind, Loss, TrModel};

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let p = probe();
    if !p.available() {
        eprintln!("bench_gpu: no usable GPU: {}", p.reason());
        exit(2);
    }
    if let Err(e) = run() {
        eprintln!("bench_gpu: {e}");
        exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let (b, m, d, tt) = (512usize, 100_000usize, 28usize, 1usize);
    let n = arg("--n", 200_000);
    let iters = arg("--iters", 50);
    let reps = arg("--reps", 20);
    let gpu = Cuda::new(probe().devices[0].index)?;
    let info = gpu.info().clone();
    println!(
        "device: cuda:{} {} ({} SMs, {:.1} GiB, cc {}.{})",
        info.index,
        info.name,
        gpu.sm_count(),
        info.total_memory as f64 / (1u64 << 30) as f64,
        info.compute_capability.0,
        info.compute_capability.1
    );
    println!("setting: b = {b}, M = {m}, d = {d}, T = {tt}, n = {n}");

    // Data: uniform in [-2, 2)^d, labels from a smooth rule (HIGGS-like sizes, not values).
    let mut s = Stream::new(1, 2);
    let xs: Vec<f32> = (0..n * d)
        .map(|_| (4.0 * s.uniform() - 2.0) as f32)
        .collect();
    let y: Vec<f64> = (0..n)
        .map(|i| {
            let r = &xs[i * d..i * d + 3];
            if (r[0] * r[1] + r[2]).sin() > 0.0 {
                1.0
            } else {
                -1.0
            }
        })
        .collect();
    let map = FeatureMap::<f32>::new(FeatureSpec {
        kernel: Kernel {
            kind: KernelKind::Gaussian,
            gamma: 1.0 / d as f64,
        },
        n_components: m,
        dim: d,
        seed: 42,
    })?;

    // 1. Fused kernels with events.
    let rmap = map.random().ok_or("a random-feature map")?;
    let (gram_ms, upd_ms) = gpu.time_fused(rmap, &xs[..b * d], b, tt, reps)?;
    let gram_flops = 2.0 * (b * b) as f64 * m as f64;
    println!(
        "rff_block_gram+reduce  {gram_ms:9.3} ms  {:7.2} TFLOP/s (2 b^2 M)",
        gram_flops / gram_ms * 1e-9
    );
    println!(
        "rff_update_theta       {upd_ms:9.3} ms  {:7.2} TFLOP/s (2 b M d + 2 b M T)",
        2.0 * (b * m * (d + tt)) as f64 / upd_ms * 1e-9
    );

    // 2. The GEMM ceiling: cuBLAS SGEMM with the same flops, C (b x b) = A^T A, A = Phi_B^T
    // (M x b, column-major).
    // SAFETY: `is_culib_present` only tries to dlopen libcublas by its usual names.
    if !unsafe { blas_sys::is_culib_present() } {
        println!("sgemm: skipped, libcublas could not be loaded");
    } else {
        let stream = gpu.stream().clone();
        let blas = CudaBlas::new(stream.clone())?;
        let a = stream.clone_htod(&vec![0.01f32; m * b])?;
        let mut c = stream.alloc_zeros::<f32>(b * b)?;
        let cfg = GemmConfig {
            transa: blas_sys::cublasOperation_t::CUBLAS_OP_T,
            transb: blas_sys::cublasOperation_t::CUBLAS_OP_N,
            m: b as i32,
            n: b as i32,
            k: m as i32,
            alpha: 1.0f32,
            lda: m as i32,
            ldb: m as i32,
            beta: 0.0f32,
            ldc: b as i32,
        };
        // SAFETY: A holds M * b f32 (lda = M, k = M rows used), C holds b * b (ldc = b).
        unsafe { blas.gemm(cfg, &a, &a, &mut c) }?;
        let e0 = stream.record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))?;
        for _ in 0..reps {
            // SAFETY: as above.
            unsafe { blas.gemm(cfg, &a, &a, &mut c) }?;
        }
        let e1 = stream.record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))?;
        let gemm_ms = e0.elapsed_ms(&e1)? as f64 / reps as f64;
        println!(
            "cublas sgemm (same flops) {gemm_ms:6.3} ms  {:7.2} TFLOP/s",
            gram_flops / gemm_ms * 1e-9
        );
        println!(
            "fused Gram rate / SGEMM rate: {:.2}",
            gemm_ms / gram_ms.max(1e-12)
        );
    }

    // 3. Engine iteration on the device, and memory.
    let x = Features::Dense(DenseMatrix::new(n, d, xs.clone())?);
    let order: Vec<usize> = (0..n).collect();
    let plan = gpu.memory_plan(n, d, m, tt, b)?;
    let (free0, total) = gpu.memory_info()?;
    {
        let mut eng = gpu
            .rff_engine(&map, &x, &order, tt, b)?
            .ok_or("the CUDA backend gave no engine")?;
        let (free1, _) = gpu.memory_info()?;
        println!(
            "device memory: estimate {:.1} MiB (data {}), measured growth {:.1} MiB, used {:.1} of {:.1} GiB",
            plan.total() as f64 / (1 << 20) as f64,
            if plan.resident {
                "resident"
            } else {
                "streamed"
            },
            free0.saturating_sub(free1) as f64 / (1 << 20) as f64,
            (total - free1) as f64 / (1u64 << 30) as f64,
            total as f64 / (1u64 << 30) as f64
        );
        let mut k = vec![0.0; b * b];
        let mut g = vec![0.0; b * tt];
        let delta = vec![1e-6; b * tt];
        let nblocks = n / b;
        let stream = gpu.stream().clone();
        let e0 = stream.record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))?;
        for i in 0..iters {
            eng.load_block((i % nblocks) * b, b)?;
            eng.block_gram(Some(&mut k), &mut g)?;
            eng.update(&delta)?;
        }
        let e1 = stream.record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))?;
        println!(
            "engine iteration (events around block copy + fused Gram + K/g copy back + delta + fused update; host gaps included, no TR solve): {:.3} ms",
            e0.elapsed_ms(&e1)? as f64 / iters as f64
        );
    }

    // 4. Exact kernels, MSD setting.
    let ne = arg("--exact-n", 1_000_000);
    if ne > 0 {
        exact_msd(&gpu, ne, iters.min(20), reps)?;
    }

    // 5. The block solve by target columns: the device (one thread block per column) against
    //    the host (one rayon task per column), the crossover behind DEVICE_SOLVE_MIN_COLUMNS.
    if arg("--solve-columns", 1) != 0 {
        solve_by_columns(&gpu)?;
    }

    // 6. Real fits: seconds per iteration from the solver's timings.
    let data = Dataset::new(x, y)?;
    // the GPU with either trust-region model, the CPU with the automatic choice
    let mut runs = vec![
        (Device::Cuda(info.index), TrModel::Gram),
        (Device::Cuda(info.index), TrModel::Kernel),
    ];
    if arg("--cpu", 1) != 0 {
        runs.push((Device::Cpu, TrModel::Auto));
    }
    for (dev, tr_model) in runs {
        let model = Joker::builder()
            .loss(Loss::SquaredHinge)
            .n_components(m)
            .block_size(b)
            .max_iter(iters)
            .check_every(iters)
            .tol(0.0)
            .tr_model(tr_model)
            .device(dev)
            .build()?
            .fit(&data)?;
        let t = &model.training.timings;
        println!(
            "fit on {:<8} {:.3} ms/iteration (block {:.3}, solve {:.3} (on the device for cuda), update {:.3} ms; {:.1} trust-region and {:.1} CG iterations per block) [{}; trust-region model {}]",
            dev.to_string(),
            1e3 * t.per_iteration(model.training.iterations),
            1e3 * t.block / model.training.iterations.max(1) as f64,
            1e3 * t.solve / model.training.iterations.max(1) as f64,
            1e3 * t.update / model.training.iterations.max(1) as f64,
            t.tr_iters as f64 / model.training.iterations.max(1) as f64,
            t.cg_iters as f64 / model.training.iterations.max(1) as f64,
            model.training.device,
            model.training.tr_model
        );
    }
    Ok(())
}

/// Section 4: the exact-kernel engine and fit in the MSD setting (`d = 90`, `b = 2048`).
fn exact_msd(
    gpu: &Cuda,
    n: usize,
    iters: usize,
    reps: usize,
) -> Result<(), Box<dyn std::error::Error>> {
    let (d, b) = (90usize, 2048usize);
    println!("exact setting: n = {n}, d = {d}, b = {b}, Gaussian, T = 1");
    let mut s = Stream::new(5, 6);
    let xs: Vec<f32> = (0..n * d).map(|_| s.uniform() as f32).collect();
    let y: Vec<f64> = (0..n).map(|i| xs[i * d] as f64 - 0.5).collect();
    let x = Features::Dense(DenseMatrix::new(n, d, xs)?);
    let kernel = Kernel {
        kind: KernelKind::Gaussian,
        gamma: 1.0 / d as f64,
    };
    let order: Vec<usize> = (0..n).collect();
    let stream = gpu.stream().clone();
    let Some(bytes) = gpu.exact_memory(n, d, 1, b)? else {
        println!("exact engine: does not fit in device memory, skipped");
        return Ok(());
    };
    let (update_ms, block_ms) = {
        let mut eng = gpu
            .exact_engine(&kernel, &x, &order, 1, b)?
            .ok_or("the CUDA backend gave no exact engine")?;
        println!(
            "exact engine: {:.1} MiB resident (rows, beta, K_BB, solver)",
            bytes as f64 / (1 << 20) as f64
        );
        let mut g = vec![0.0; b];
        let delta = vec![1e-6; b];
        let nblocks = n / b;
        let e0 = stream.record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))?;
        for i in 0..reps {
            eng.load_block((i % nblocks) * b, b)?;
            eng.block_gram(None, &mut g)?;
        }
        let e1 = stream.record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))?;
        for _ in 0..reps {
            eng.update(&delta)?;
        }
        let e2 = stream.record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))?;
        (
            e1.elapsed_ms(&e2)? as f64 / reps as f64,
            e0.elapsed_ms(&e1)? as f64 / reps as f64,
        )
    };
    let flops = 2.0 * (n * d * b) as f64;
    println!("exact block (K_BB by exact_tile, g back) {block_ms:9.3} ms");
    println!(
        "exact update (beta += K(X, X_B) delta)  {update_ms:9.3} ms  {:7.2} TFLOP/s of distance flops (2 n d b)",
        flops / update_ms * 1e-9
    );
    // SAFETY: `is_culib_present` only tries to dlopen libcublas by its usual names.
    if unsafe { blas_sys::is_culib_present() } {
        // C (b x n) = B^T A with A = X^T (d x n) and B = X_B^T (d x b), column-major.
        let blas = CudaBlas::new(stream.clone())?;
        let a = stream.clone_htod(&vec![0.01f32; d * n])?;
        let bm = stream.clone_htod(&vec![0.01f32; d * b])?;
        let mut c = stream.alloc_zeros::<f32>(b * n)?;
        let cfg = GemmConfig {
            transa: blas_sys::cublasOperation_t::CUBLAS_OP_T,
            transb: blas_sys::cublasOperation_t::CUBLAS_OP_N,
            m: b as i32,
            n: n as i32,
            k: d as i32,
            alpha: 1.0f32,
            lda: d as i32,
            ldb: d as i32,
            beta: 0.0f32,
            ldc: b as i32,
        };
        // SAFETY: bm holds d * b f32 (lda = d), a holds d * n (ldb = d), c holds b * n (ldc = b).
        unsafe { blas.gemm(cfg, &bm, &a, &mut c) }?;
        let e0 = stream.record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))?;
        for _ in 0..reps {
            // SAFETY: as above.
            unsafe { blas.gemm(cfg, &bm, &a, &mut c) }?;
        }
        let e1 = stream.record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))?;
        let gemm_ms = e0.elapsed_ms(&e1)? as f64 / reps as f64;
        println!(
            "cublas sgemm X_B X^T (same 2 n d b flops) {gemm_ms:6.3} ms  {:7.2} TFLOP/s; exact update / SGEMM time: {:.2}",
            flops / gemm_ms * 1e-9,
            update_ms / gemm_ms.max(1e-12)
        );
    }
    let data = Dataset::new(x, y)?;
    let model = Joker::builder()
        .loss(Loss::SquaredError)
        .exact()
        .lambda(1e-3)
        .block_size(b)
        .max_iter(iters)
        .check_every(iters)
        .tol(0.0)
        .device(Device::Cuda(gpu.info().index))
        .build()?
        .fit(&data)?;
    let t = &model.training.timings;
    let it = model.training.iterations.max(1) as f64;
    println!(
        "exact fit on the GPU: {:.3} ms/iteration (block {:.3}, solve {:.3}, update {:.3} ms; {:.1} trust-region and {:.1} CG iterations per block) [{}]",
        1e3 * t.per_iteration(model.training.iterations),
        1e3 * t.block / it,
        1e3 * t.solve / it,
        1e3 * t.update / it,
        t.tr_iters as f64 / it,
        t.cg_iters as f64 / it,
        model.training.device
    );
    Ok(())
}

/// Section 5: wall time of one block solve of `T` columns on the device (`Cuda::tr_solve`,
/// `K_BB` uploaded per call: 1 MB at b = 512, 16 MB at b = 2048) and on the host
/// (`solve_column` per column in parallel, as `dbcd` does), on a Gaussian kernel block of
/// random points with squared-hinge coordinates (`lam = 0.01`).
fn solve_by_columns(gpu: &Cuda) -> Result<(), Box<dyn std::error::Error>> {
    use joker::loss::Coord;
    use joker::solver::trust_region::{BlockProblem, TrustRegion, solve_column};
    use rayon::prelude::*;
    let threads = rayon::current_num_threads();
    println!(
        "block solve by target columns (device: one thread block per column on {} SMs; host: {threads} threads)",
        gpu.sm_count()
    );
    for b in [512usize, 2048] {
        let d = 28;
        let mut s = Stream::new(17, b as u32);
        let x: Vec<f64> = (0..b * d).map(|_| s.uniform()).collect();
        let gamma = 1.0 / d as f64;
        let mut k32 = vec![0.0f32; b * b];
        for i in 0..b {
            for j in 0..=i {
                let d2: f64 = (0..d).map(|k| (x[i * d + k] - x[j * d + k]).powi(2)).sum();
                let v = (-gamma * d2).exp() as f32;
                k32[i * b + j] = v;
                k32[j * b + i] = v;
            }
        }
        let k64: Vec<f64> = k32.iter().map(|&v| v as f64).collect();
        let p = TrustRegion::default();
        let loss = Loss::SquaredHinge;
        for tt in [1usize, 16, 64, 132, 264] {
            let coords: Vec<Coord> = (0..b * tt)
                .map(|_| Coord {
                    y: if s.uniform() < 0.5 { -1.0 } else { 1.0 },
                    lam: 0.01,
                    eps: 0.0,
                })
                .collect();
            let alpha0 = vec![0.0; b * tt];
            let gbar0 = vec![0.0; b * tt];
            let (mut ad, mut gd) = (alpha0.clone(), gbar0.clone());
            gpu.tr_solve(
                &k32,
                b,
                loss,
                &coords[..b],
                &mut ad[..b],
                &mut gd[..b],
                4.0,
                &p,
            )?;
            let t0 = std::time::Instant::now();
            let st = gpu.tr_solve(&k32, b, loss, &coords, &mut ad, &mut gd, 4.0, &p)?;
            let dev = t0.elapsed().as_secs_f64();
            let t0 = std::time::Instant::now();
            let host: Vec<_> = (0..tt)
                .into_par_iter()
                .map(|t| {
                    let col = t * b..(t + 1) * b;
                    let (mut a, mut g) =
                        (alpha0[col.clone()].to_vec(), gbar0[col.clone()].to_vec());
                    let bp = BlockProblem {
                        kbb: &k64,
                        loss,
                        coords: &coords[col],
                        exact: None,
                    };
                    solve_column(&bp, &mut a, &mut g, 4.0, &p)
                })
                .collect();
            let hst = t0.elapsed().as_secs_f64();
            let cg: usize = st.iter().map(|s| s.cg_iters).sum();
            let cg_host: usize = host.iter().map(|s| s.cg_iters).sum();
            println!(
                "  b = {b:4}, T = {tt:3}: device {:8.2} ms, host {:8.2} ms, device/host {:5.2} (CG iterations per column: device {:.0}, host {:.0})",
                1e3 * dev,
                1e3 * hst,
                dev / hst,
                cg as f64 / tt as f64,
                cg_host as f64 / tt as f64
            );
        }
    }
    Ok(())
}

//! GPU tests: every CUDA kernel against its CPU twin, the device engine against the host one,
//! and an end-to-end fit on the GPU against the same fit on the CPU.
//!
//! The tests that need a GPU are ignored by default, so that a run without one reports them
//! as ignored rather than passed; `cargo test --release --test suite -- gpu:: --ignored` runs them,
//! and each fails loudly when it finds no usable GPU. The one test that runs everywhere
//! checks that asking for a GPU that is not there is a clean error and that `Device::Auto`
//! then trains on the CPU and says why.
//!
//! Tolerances (f32 features, `s = sqrt(2/M)`):
//! - `W`: within 1 f32 ulp of the CPU's (libdevice vs glibc `log`/`cos`/`tan`); `b`: exact.
//! - features: `|gpu - ref| <= s (d + 4) eps32 (1 + |b_j| + sum_k |W_jk x_k|)`, against the
//!   f64 evaluation of the same f32 `W` (the f32 FMA chain's rounding bound).
//! - `K_BB`: `|gpu - cpu| <= 1e-5 + 2e-6 sqrt(M)` (entries are O(1): f32 sums over M with
//!   different orders on each side), and exactly symmetric on the GPU.
//! - `g`, `theta` updates, predictions: `|gpu - cpu| <= 1e-5 sum |terms|` (f64 accumulation of
//!   f32 features that differ by a few ulp).

#![cfg(feature = "cuda")]

use crate::common;

use joker::backend::cpu::Cpu;
use joker::backend::cuda::Cuda;
use joker::backend::{Backend, BlockEngine, HostExact, HostRff};
use joker::device::probe;
use joker::distributed::Threads;
use joker::features::{FeatureMap, FeatureSpec, RandomMap};
use joker::rng::Stream;
use joker::{
    CsrMatrix, Dataset, DenseMatrix, Device, Features, FitOptions, Joker, JokerError, Kernel,
    KernelKind, Loss, MaternNu, Model, PbmConfig, StopReason,
};

/// The GPU; a test that needs one fails loudly without it (these tests are ignored unless
/// asked for with `--ignored`, so a failure here means a GPU run that found none).
fn gpu(test: &str) -> Cuda {
    let p = probe();
    if !p.available() {
        panic!("{test}: no usable GPU: {}", p.reason());
    }
    match Cuda::new(p.devices[0].index) {
        Ok(g) => g,
        Err(e) => panic!("{test}: the probe found a GPU but it could not be opened: {e}"),
    }
}

/// `a` (the GPU's) within `tol` of `b` (the CPU's) relative to `b`'s largest magnitude.
fn close_to(a: &[f64], b: &[f64], tol: f64, what: &str) {
    let scale = b.iter().fold(1e-30f64, |s, v| s.max(v.abs()));
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!((x - y).abs() <= tol * scale, "{what}[{i}]: gpu {x} cpu {y}");
    }
}

/// Fresh random values in [-2, 2) (a new seed per call site).
fn random(n: usize, seed: u64) -> Vec<f64> {
    let mut s = Stream::new(seed, 77);
    (0..n).map(|_| 4.0 * s.uniform() - 2.0).collect()
}

fn f32s(v: &[f64]) -> Vec<f32> {
    v.iter().map(|&x| x as f32).collect()
}

fn kernels() -> [KernelKind; 3] {
    [
        KernelKind::Gaussian,
        KernelKind::Laplacian,
        KernelKind::Matern {
            nu: MaternNu::ThreeHalves,
        },
    ]
}

fn map(kind: KernelKind, m: usize, d: usize, seed: u64) -> RandomMap<f32> {
    RandomMap::new(FeatureSpec {
        kernel: Kernel {
            kind,
            gamma: 0.5 / d as f64,
        },
        n_components: m,
        dim: d,
        seed,
    })
    .unwrap()
}

/// Seeds for fresh inputs on every run (the test prints them for reproduction).
fn run_seed() -> u64 {
    let s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64);
    eprintln!("input seed {s}");
    s
}

fn ulp_diff(a: f32, b: f32) -> u32 {
    if a == b {
        return 0;
    }
    (a.to_bits() as i64 - b.to_bits() as i64).unsigned_abs() as u32
}

/// The rounding bound of one f32 feature `phi_j(x)` against its f64 value:
/// `s (d + 4) eps32 (1 + |b_j| + sum_k |W_jk x_k|)` (the f32 FMA chain of `W_j . x + b_j`, then
/// `cos`). It grows with `|W_j . x|`: the Laplacian's Cauchy weights reach thousands, where one
/// ulp of the argument is 1e-3 and the GPU's FMA-contracted sum and the CPU's separate
/// products round differently.
fn feature_tol(mp: &RandomMap<f32>, x: &[f32], j: usize) -> f64 {
    let d = x.len();
    let s = (2.0 / mp.b().len() as f64).sqrt();
    let mag: f64 = 1.0
        + (mp.b()[j] as f64).abs()
        + (0..d)
            .map(|k| (mp.w_at(j, k) as f64 * x[k] as f64).abs())
            .sum::<f64>();
    s * (d as f64 + 4.0) * f32::EPSILON as f64 * mag
}

/// Sizes not multiples of the tiles (128 rows, 32 features, 32 input dimensions).
const SHAPES: [(usize, usize, usize); 5] = [
    // (rows, M, d)
    (1, 1, 1),
    (37, 33, 5),
    (130, 1001, 28),
    (300, 257, 33),
    (129, 4099, 3),
];

#[test]
#[ignore = "needs an NVIDIA GPU: cargo test --release --test suite -- gpu:: --ignored"]
fn weights_match_the_cpu_map() {
    let g = gpu("weights_match_the_cpu_map");
    let seed = run_seed();
    for kind in kernels() {
        for &(_, m, d) in &SHAPES {
            let mp = map(kind, m, d, seed);
            let (w, b) = g.weights(&mp).unwrap();
            assert_eq!(b, mp.b(), "{kind:?} b");
            for (i, (x, y)) in w.iter().zip(&mp.w()).enumerate() {
                assert!(ulp_diff(*x, *y) <= 1, "{kind:?} W[{i}]: gpu {x} cpu {y}");
            }
        }
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: cargo test --release --test suite -- gpu:: --ignored"]
fn features_match_the_f64_reference() {
    let g = gpu("features_match_the_f64_reference");
    let seed = run_seed();
    for kind in kernels() {
        for &(n, m, d) in &SHAPES {
            let mp = map(kind, m, d, seed);
            let x = random(n * d, seed ^ 1);
            let phi = g.features(&mp, &f32s(&x), n).unwrap();
            let s = (2.0 / m as f64).sqrt();
            let eps = f32::EPSILON as f64;
            for i in 0..n {
                let xi: Vec<f64> = f32s(&x[i * d..(i + 1) * d])
                    .iter()
                    .map(|&v| v as f64)
                    .collect();
                let want = mp.eval_f64(&xi);
                for j in 0..m {
                    let mag: f64 = 1.0
                        + (mp.b()[j] as f64).abs()
                        + (0..d)
                            .map(|k| (mp.w_at(j, k) as f64 * xi[k]).abs())
                            .sum::<f64>();
                    let tol = s * (d as f64 + 4.0) * eps * mag;
                    let got = phi[i * m + j] as f64;
                    assert!(
                        (got - want[j]).abs() <= tol,
                        "{kind:?} n={n} M={m} d={d} phi[{i},{j}]: gpu {got} ref {} tol {tol}",
                        want[j]
                    );
                }
            }
        }
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: cargo test --release --test suite -- gpu:: --ignored"]
fn block_gram_matches_features_gram_project() {
    let g = gpu("block_gram_matches_features_gram_project");
    let seed = run_seed();
    for kind in kernels() {
        for &(nb, m, d) in &SHAPES {
            for tt in [1, 3] {
                let mp = map(kind, m, d, seed);
                let fm = FeatureMap::Random(mp.clone());
                let xb = f32s(&random(nb * d, seed ^ 2));
                let theta = random(m * tt, seed ^ 3);
                let (k, gv) = g.block_gram(&mp, &xb, nb, &theta, tt).unwrap();
                let mut phi = vec![f32::NAN; nb * m];
                Cpu.features(&fm, &xb, nb, &mut phi);
                let mut kc = vec![f64::NAN; nb * nb];
                Cpu.gram(&phi, nb, m, &mut kc);
                let mut gc = vec![f64::NAN; nb * tt];
                Cpu.project(&phi, nb, m, &theta, tt, &mut gc);
                let ktol = 1e-5 + 2e-6 * (m as f64).sqrt();
                for i in 0..nb {
                    for j in 0..nb {
                        let v = k[i * nb + j];
                        assert_eq!(v.to_bits(), k[j * nb + i].to_bits(), "K not symmetric");
                        assert!(
                            (v as f64 - kc[i * nb + j]).abs() <= ktol,
                            "{kind:?} b={nb} M={m} d={d} K[{i},{j}]: gpu {v} cpu {}",
                            kc[i * nb + j]
                        );
                    }
                }
                for t in 0..tt {
                    for i in 0..nb {
                        let mag: f64 = (0..m)
                            .map(|j| (phi[i * m + j] as f64 * theta[t * m + j]).abs())
                            .sum();
                        let feat: f64 = (0..m)
                            .map(|j| {
                                theta[t * m + j].abs()
                                    * 2.0
                                    * feature_tol(&mp, &xb[i * d..(i + 1) * d], j)
                            })
                            .sum();
                        let (a, b) = (gv[t * nb + i], gc[t * nb + i]);
                        assert!(
                            (a - b).abs() <= feat + 1e-5 * mag + 1e-12,
                            "{kind:?} b={nb} M={m} d={d} g[{i},{t}]: gpu {a} cpu {b}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: cargo test --release --test suite -- gpu:: --ignored"]
fn update_theta_matches_features_accumulate() {
    let g = gpu("update_theta_matches_features_accumulate");
    let seed = run_seed();
    for kind in kernels() {
        for &(nb, m, d) in &SHAPES {
            for tt in [1, 2] {
                let mp = map(kind, m, d, seed);
                let fm = FeatureMap::Random(mp.clone());
                let xb = f32s(&random(nb * d, seed ^ 4));
                let mut delta = random(nb * tt, seed ^ 5);
                delta[0] = 0.0;
                let theta0 = random(m * tt, seed ^ 6);
                let mut tg = theta0.clone();
                g.update_theta(&mp, &xb, nb, &delta, tt, &mut tg).unwrap();
                let mut phi = vec![f32::NAN; nb * m];
                Cpu.features(&fm, &xb, nb, &mut phi);
                let mut tc = theta0.clone();
                Cpu.accumulate(&phi, nb, m, &delta, tt, &mut tc);
                // Both sides' features are within `feature_tol` of the f64 value; the sums
                // are f64 on both sides.
                for t in 0..tt {
                    for j in 0..m {
                        let mag: f64 = theta0[t * m + j].abs()
                            + (0..nb)
                                .map(|i| (phi[i * m + j] as f64 * delta[t * nb + i]).abs())
                                .sum::<f64>();
                        let feat: f64 = (0..nb)
                            .map(|i| {
                                delta[t * nb + i].abs()
                                    * 2.0
                                    * feature_tol(&mp, &xb[i * d..(i + 1) * d], j)
                            })
                            .sum();
                        let (a, b) = (tg[t * m + j], tc[t * m + j]);
                        let tol = feat + 1e-9 * mag + 1e-12;
                        assert!(
                            (a - b).abs() <= tol,
                            "{kind:?} b={nb} M={m} d={d} theta[{j},{t}]: gpu {a} cpu {b} tol {tol}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: cargo test --release --test suite -- gpu:: --ignored"]
fn predict_matches_the_cpu_across_chunks() {
    let g = gpu("predict_matches_the_cpu_across_chunks");
    let seed = run_seed();
    // 70,001 rows: more than one 65,536-row launch, and not a multiple of 256.
    for &(n, m, d, tt) in &[(70_001usize, 65usize, 7usize, 2usize), (300, 1001, 28, 1)] {
        let mp = map(KernelKind::Gaussian, m, d, seed);
        let fm = FeatureMap::Random(mp.clone());
        let x = f32s(&random(n * d, seed ^ 7));
        let theta = random(m * tt, seed ^ 8);
        let got = g.predict(&mp, &x, n, &theta, tt).unwrap();
        let mut phi = vec![f32::NAN; n * m];
        Cpu.features(&fm, &x, n, &mut phi);
        let mut want = vec![f64::NAN; n * tt];
        Cpu.project(&phi, n, m, &theta, tt, &mut want);
        for t in 0..tt {
            for i in 0..n {
                let mag: f64 = (0..m)
                    .map(|j| (phi[i * m + j] as f64 * theta[t * m + j]).abs())
                    .sum();
                let (a, b) = (got[t * n + i], want[t * n + i]);
                assert!(
                    (a - b).abs() <= 1e-5 * mag + 1e-12,
                    "n={n} M={m} d={d} out[{i},{t}]: gpu {a} cpu {b}"
                );
            }
        }
    }
}

/// The device engine, resident and streamed, against the host engine through the same
/// sequence of blocks, updates and decisions; and an over-limit request fails with the
/// estimate.
#[test]
#[ignore = "needs an NVIDIA GPU: cargo test --release --test suite -- gpu:: --ignored"]
fn device_engine_matches_host_engine() {
    let g = gpu("device_engine_matches_host_engine");
    let seed = run_seed();
    let (n, d, m, tt, b) = (1000usize, 6usize, 517usize, 2usize, 130usize);
    let xv = f32s(&random(n * d, seed ^ 9));
    let x = Features::Dense(DenseMatrix::new(n, d, xv).unwrap());
    let mp = map(KernelKind::Gaussian, m, d, seed);
    let fm = FeatureMap::Random(mp.clone());
    let mut order: Vec<usize> = (0..n).collect();
    Stream::new(seed, 3).shuffle(&mut order);
    let plan = g.memory_plan(n, d, m, tt, b).unwrap();
    assert!(plan.resident, "{plan:?}");
    let streamed = Cuda::new(g.info().index)
        .unwrap()
        .with_memory_limit(Some(plan.fixed + plan.data / 2));
    let splan = streamed.memory_plan(n, d, m, tt, b).unwrap();
    assert!(!splan.resident, "{splan:?}");
    let over = Cuda::new(g.info().index)
        .unwrap()
        .with_memory_limit(Some(plan.fixed / 2));
    match over.memory_plan(n, d, m, tt, b) {
        Err(JokerError::Memory(msg)) => assert!(msg.contains("MiB"), "{msg}"),
        other => panic!("expected a memory error, got {other:?}"),
    }

    let mut host = HostRff::new(&Cpu, &fm, &x, &order, tt, b).unwrap();
    let mut engines: Vec<Box<dyn BlockEngine<f32> + '_>> = vec![
        g.rff_engine(&fm, &x, &order, tt, b).unwrap().unwrap(),
        streamed
            .rff_engine(&fm, &x, &order, tt, b)
            .unwrap()
            .unwrap(),
    ];
    let alpha = random(n * tt, seed ^ 10);
    host.set_alpha(&alpha).unwrap();
    for e in engines.iter_mut() {
        e.set_alpha(&alpha).unwrap();
    }
    let close = |a: &[f64], b: &[f64], what: &str| close_to(a, b, 1e-4, what);
    for step in 0..6 {
        let start = (step * 3 % 8) * b;
        let len = b.min(n - start);
        let mut kh = vec![f64::NAN; len * len];
        let mut gh = vec![f64::NAN; len * tt];
        host.load_block(start, len).unwrap();
        host.block_gram(Some(&mut kh), &mut gh).unwrap();
        let delta = random(len * tt, seed ^ (20 + step as u64));
        host.update(&delta).unwrap();
        for (ei, e) in engines.iter_mut().enumerate() {
            let mut k = vec![f64::NAN; len * len];
            let mut gv = vec![f64::NAN; len * tt];
            e.load_block(start, len).unwrap();
            e.block_gram(Some(&mut k), &mut gv).unwrap();
            close(&k, &kh, &format!("engine {ei} step {step} K"));
            close(&gv, &gh, &format!("engine {ei} step {step} g"));
            e.update(&delta).unwrap();
        }
    }
    let want = host.decision().unwrap();
    let mut th = vec![f64::NAN; m * tt];
    host.theta(&mut th).unwrap();
    for (ei, e) in engines.iter_mut().enumerate() {
        close(
            &e.decision().unwrap(),
            &want,
            &format!("engine {ei} decision"),
        );
        let mut t = vec![f64::NAN; m * tt];
        e.theta(&mut t).unwrap();
        close(&t, &th, &format!("engine {ei} theta"));
    }
    // a distributed fit's shift of theta by the other ranks' part
    let by = random(m * tt, seed ^ 40);
    host.shift_theta(&by).unwrap();
    host.theta(&mut th).unwrap();
    let want = host.decision().unwrap();
    for (ei, e) in engines.iter_mut().enumerate() {
        e.shift_theta(&by).unwrap();
        let mut t = vec![f64::NAN; m * tt];
        e.theta(&mut t).unwrap();
        close(&t, &th, &format!("engine {ei} shifted theta"));
        close(
            &e.decision().unwrap(),
            &want,
            &format!("engine {ei} shifted decision"),
        );
    }
}

/// Under the kernel model the device engine's block (`K(X_B, X_B)` and `Phi_B theta`) and its
/// products with `Phi_B` (`Phi_B^T s`, `Phi_B u`, the Gram) match the host engine's, with the
/// rows resident and sent per block.
#[test]
#[ignore = "needs an NVIDIA GPU: cargo test --release --test suite -- gpu:: --ignored"]
fn kernel_model_engine_matches_host_engine() {
    let g = gpu("kernel_model_engine_matches_host_engine");
    let seed = run_seed();
    let (n, d, m, tt, b) = (900usize, 5usize, 613usize, 1usize, 140usize);
    let xv = f32s(&random(n * d, seed ^ 31));
    let x = Features::Dense(DenseMatrix::new(n, d, xv).unwrap());
    let mut order: Vec<usize> = (0..n).collect();
    Stream::new(seed, 5).shuffle(&mut order);
    let close = |a: &[f64], b: &[f64], tol: f64, what: &str| {
        assert_eq!(a.len(), b.len(), "{what}: lengths");
        close_to(a, b, tol, what);
    };
    for kind in kernels() {
        let mp = map(kind, m, d, seed ^ 7);
        let fm = FeatureMap::Random(mp.clone());
        let plan = g.memory_plan(n, d, m, tt, b).unwrap();
        let streamed = Cuda::new(g.info().index)
            .unwrap()
            .with_memory_limit(Some(plan.fixed + plan.data / 2));
        let mut host = HostRff::new(&Cpu, &fm, &x, &order, tt, b).unwrap();
        assert!(host.set_kernel_model(true));
        let mut engines: Vec<Box<dyn BlockEngine<f32> + '_>> = vec![
            g.rff_engine(&fm, &x, &order, tt, b).unwrap().unwrap(),
            streamed
                .rff_engine(&fm, &x, &order, tt, b)
                .unwrap()
                .unwrap(),
        ];
        let alpha = random(n * tt, seed ^ 32);
        host.set_alpha(&alpha).unwrap();
        for e in engines.iter_mut() {
            assert!(
                e.block_products().is_none(),
                "{kind:?}: products before the model"
            );
            assert!(e.set_kernel_model(true), "{kind:?}");
            e.set_alpha(&alpha).unwrap();
        }
        for step in 0..4 {
            let start = (step * 5 % 7) * b;
            let len = b.min(n - start);
            let what = |ei: usize, q: &str| format!("{kind:?} engine {ei} step {step} {q}");
            let mut kh = vec![f64::NAN; len * len];
            let mut gh = vec![f64::NAN; len * tt];
            host.load_block(start, len).unwrap();
            host.block_gram(Some(&mut kh), &mut gh).unwrap();
            // a step with zeros (the free set of an SVM) and a vector of M values
            let mut sv = random(len, seed ^ (40 + step as u64));
            sv.iter_mut().step_by(3).for_each(|v| *v = 0.0);
            let uv = random(m, seed ^ (50 + step as u64));
            let lent = host.lend_features().unwrap();
            let hp = joker::backend::HostProducts {
                features: &lent,
                backend: &Cpu,
            };
            use joker::backend::FeatureProducts;
            let ut_h = hp.transpose_times(&sv).unwrap();
            let mut pu_h = vec![f64::NAN; len];
            hp.times(&uv, &mut pu_h).unwrap();
            let mut gram_h = vec![f64::NAN; len * len];
            hp.gram(&mut gram_h).unwrap();
            host.return_features(lent);
            let delta = random(len * tt, seed ^ (60 + step as u64));
            host.update(&delta).unwrap();
            for (ei, e) in engines.iter_mut().enumerate() {
                let mut k = vec![f64::NAN; len * len];
                let mut gv = vec![f64::NAN; len * tt];
                e.load_block(start, len).unwrap();
                e.block_gram(Some(&mut k), &mut gv).unwrap();
                // the exact tile in f32 arithmetic against the host's f64 tile
                close(&k, &kh, 1e-4, &what(ei, "K(X_B, X_B)"));
                close(&gv, &gh, 1e-4, &what(ei, "g"));
                let p = e.block_products().expect("products under the kernel model");
                close(
                    &p.transpose_times(&sv).unwrap(),
                    &ut_h,
                    1e-4,
                    &what(ei, "Phi^T s"),
                );
                let mut pu = vec![f64::NAN; len];
                p.times(&uv, &mut pu).unwrap();
                close(&pu, &pu_h, 1e-4, &what(ei, "Phi u"));
                let mut gram = vec![f64::NAN; len * len];
                p.gram(&mut gram).unwrap();
                close(&gram, &gram_h, 1e-4, &what(ei, "Gram"));
                assert!(
                    p.transpose_times(&sv[..len - 1]).is_err(),
                    "{}",
                    what(ei, "short s")
                );
                e.update(&delta).unwrap();
            }
        }
        let want = host.decision().unwrap();
        for (ei, e) in engines.iter_mut().enumerate() {
            close(
                &e.decision().unwrap(),
                &want,
                1e-4,
                &format!("{kind:?} engine {ei} decision"),
            );
            assert!(e.set_kernel_model(false));
            assert!(e.block_products().is_none());
        }
    }
}

/// A fit under the kernel model on the GPU (exact tile on the device, the products there, the
/// block solve on the host) reaches the CPU's solution, and says which model it ran.
#[test]
#[ignore = "needs an NVIDIA GPU: cargo test --release --test suite -- gpu:: --ignored"]
fn kernel_model_fit_on_the_gpu_matches_the_cpu() {
    let data = two_moons(3001, 9);
    for loss in [Loss::SquaredHinge, Loss::SquaredError] {
        let est = |dev: Device| {
            Joker::builder()
                .loss(loss)
                .c(0.1)
                .n_components(1031)
                .block_size(257)
                .tr_model(joker::TrModel::Kernel)
                .max_iter(3000)
                .tol(1e-6)
                .stall(false)
                .device(dev)
                .build()
                .unwrap()
        };
        let (cpu, gpu) =
            cpu_and_gpu_fits("kernel_model_fit_on_the_gpu_matches_the_cpu", est, &data);
        assert_eq!(cpu.training.tr_model, "kernel", "{loss:?}");
        assert_eq!(gpu.training.tr_model, "kernel", "{loss:?}");
        let rel = (gpu.training.primal - cpu.training.primal).abs() / cpu.training.primal.abs();
        assert!(rel <= 1e-4, "{loss:?}: primal objectives differ by {rel}");
    }
    // The automatic choice: the kernel model on the CPU at b = 512, M = 2048, the Gram on the GPU.
    let auto = |dev: Device| {
        Joker::builder()
            .loss(Loss::SquaredHinge)
            .n_components(2048)
            .block_size(512)
            .max_iter(4)
            .tol(0.0)
            .device(dev)
            .build()
            .unwrap()
            .fit(&data)
            .unwrap()
    };
    let (cpu, gpu) = (auto(Device::Cpu), auto(Device::Cuda(0)));
    assert!(
        cpu.training.tr_model.starts_with("kernel (auto"),
        "{}",
        cpu.training.tr_model
    );
    assert!(
        gpu.training.tr_model.contains("on a GPU the fused Gram"),
        "{}",
        gpu.training.tr_model
    );
}

fn two_moons(n: usize, seed: u64) -> Dataset<f32> {
    let mut s = Stream::new(seed, 9);
    let (mut x, mut y) = (Vec::new(), Vec::new());
    for i in 0..n {
        let t = std::f64::consts::PI * s.uniform();
        let (cx, cy, lab) = if i % 2 == 0 {
            (t.cos(), t.sin(), 1.0)
        } else {
            (1.0 - t.cos(), 0.5 - t.sin(), -1.0)
        };
        x.push((cx + 0.1 * (s.uniform() - 0.5)) as f32);
        x.push((cy + 0.1 * (s.uniform() - 0.5)) as f32);
        x.push(s.uniform() as f32);
        y.push(lab);
    }
    Dataset::new(Features::Dense(DenseMatrix::new(n, 3, x).unwrap()), y).unwrap()
}

/// A fit on the GPU reaches the same solution as the same fit on the CPU.
/// The CPU and GPU fits of one estimator, checked to agree.
fn cpu_and_gpu_fits(
    test: &str,
    est: impl Fn(Device) -> Joker,
    data: &Dataset<f32>,
) -> (Model, Model) {
    let _g = gpu(test);
    let cpu = est(Device::Cpu).fit(data).unwrap();
    let gpu = est(Device::Cuda(0)).fit(data).unwrap();
    assert!(
        gpu.training.device.starts_with("cuda:0"),
        "{}",
        gpu.training.device
    );
    assert!(
        cpu.training.gap <= 1e-6 && gpu.training.gap <= 1e-6,
        "gaps: cpu {:e} ({:?}), gpu {:e} ({:?})",
        cpu.training.gap,
        cpu.training.stop,
        gpu.training.gap,
        gpu.training.stop
    );
    let (fc, fg) = (
        cpu.decision_function(&data.x).unwrap(),
        gpu.decision_function(&data.x).unwrap(),
    );
    let scale = fc.iter().fold(0.0f64, |s, v| s.max(v.abs()));
    for (i, (a, b)) in fg.iter().zip(&fc).enumerate() {
        assert!(
            (a - b).abs() <= 1e-2 * scale,
            "decision value {i}: gpu {a} cpu {b}"
        );
    }
    (cpu, gpu)
}

#[test]
#[ignore = "needs an NVIDIA GPU: cargo test --release --test suite -- gpu:: --ignored"]
fn end_to_end_fit_matches_the_cpu() {
    let data = two_moons(3001, 5);
    let est = |dev: Device| {
        Joker::builder()
            .loss(Loss::SquaredHinge)
            // C = 0.1 converges to gap 1e-6 in about 500 iterations on the CPU; at C = 10 the
            // dual is too ill-conditioned to get there in 3000.
            .c(0.1)
            .n_components(1031)
            .block_size(257)
            .max_iter(3000)
            .tol(1e-6)
            .stall(false)
            .device(dev)
            .build()
            .unwrap()
    };
    let (cpu, gpu) = cpu_and_gpu_fits("end_to_end_fit_matches_the_cpu", est, &data);
    let rel = (gpu.training.primal - cpu.training.primal).abs() / cpu.training.primal.abs();
    assert!(rel <= 1e-4, "primal objectives differ by {rel}");
}

/// A Nystrom map's features on the GPU (its kernel tile by the exact-tile kernel, the product
/// with the factor on the host) against the CPU twin's, for every kernel family.
#[test]
#[ignore = "needs an NVIDIA GPU: cargo test --release --test suite -- gpu:: --ignored"]
fn nystrom_features_match_the_cpu() {
    let g = gpu("nystrom_features_match_the_cpu");
    let (n, m, d, seed) = (700, 300, 5, run_seed());
    let x = f32s(&random(n * d, seed ^ 21));
    let rows = Features::Dense(DenseMatrix::new(n, d, x.clone()).unwrap());
    for kind in kernels() {
        let kernel = Kernel { kind, gamma: 0.8 };
        for rule in [joker::Centers::Uniform, joker::Centers::KMeans] {
            let ny =
                joker::features::NystromMap::<f32>::fit(kernel, rule, m, &rows, 1e-2, seed, &Cpu)
                    .unwrap();
            let r = ny.m();
            let fm = FeatureMap::Nystrom(ny);
            let (mut on_gpu, mut on_cpu) = (vec![f32::NAN; n * r], vec![f32::NAN; n * r]);
            Backend::features(&g, &fm, &x, n, &mut on_gpu);
            Cpu.features(&fm, &x, n, &mut on_cpu);
            let a: Vec<f64> = on_gpu.iter().map(|&v| v as f64).collect();
            let b: Vec<f64> = on_cpu.iter().map(|&v| v as f64).collect();
            assert!(
                a.iter().all(|v| v.is_finite()),
                "{kind:?} {rule:?}: non-finite"
            );
            // both tiles carry f32 distance errors, amplified by L^-1 (residual floor 2.4e-5)
            close_to(&a, &b, 2e-3, &format!("{kind:?} {rule:?} psi"));
            assert!(g.exact_fallback().is_none(), "{:?}", g.exact_fallback());
        }
    }
}

/// A Nystrom fit under `Device::Cuda` (tiles on the device, the host engine) reaches the
/// CPU fit's solution.
#[test]
#[ignore = "needs an NVIDIA GPU: cargo test --release --test suite -- gpu:: --ignored"]
fn nystrom_fit_on_the_gpu_matches_the_cpu() {
    let data = two_moons(2001, 6);
    let est = |dev: Device| {
        Joker::builder()
            .loss(Loss::SquaredHinge)
            .c(0.1)
            .n_components(400)
            .feature_map(joker::FeatureKind::Nystrom(joker::Centers::KMeans))
            .block_size(257)
            .max_iter(3000)
            .tol(1e-6)
            .stall(false)
            .device(dev)
            .build()
            .unwrap()
    };
    let (cpu, gpu) = cpu_and_gpu_fits("nystrom_fit_on_the_gpu_matches_the_cpu", est, &data);
    let rel = (gpu.training.primal - cpu.training.primal).abs() / cpu.training.primal.abs();
    assert!(rel <= 1e-3, "primal objectives differ by {rel}");
}

/// Two ranks (threads) fit `data`, each on half of the rows, with `est` on `dev`.
fn two_rank_fit(est: impl Fn(Device) -> Joker, data: &Dataset<f32>, dev: Device) -> Vec<Model> {
    let (n, d) = (data.len(), data.x.ncols());
    let Features::Dense(m) = &data.x else {
        unreachable!("dense test data")
    };
    let half = |lo: usize, hi: usize| {
        let x = DenseMatrix::new(hi - lo, d, m.as_slice()[lo * d..hi * d].to_vec()).unwrap();
        Dataset::new(Features::Dense(x), data.y[lo..hi].to_vec()).unwrap()
    };
    let parts = [half(0, n / 2), half(n / 2, n)];
    let est = est(dev);
    let (group, pbm) = (Threads::group(2), PbmConfig::default());
    std::thread::scope(|s| {
        let hs: Vec<_> = group
            .iter()
            .zip(&parts)
            .map(|(c, part)| {
                let (est, pbm) = (&est, &pbm);
                s.spawn(move || est.fit_distributed(part, c, pbm, FitOptions::default()))
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap().unwrap()).collect()
    })
}

/// A distributed fit (two ranks as threads, parallel block minimization) on the GPU reaches
/// the same solution as on the CPU: the device engine's `theta` shift by the other rank's part
/// is what the CPU engine does, and the CoCoA+ scaled model is solved alike with one target
/// column (host block solve) and with many (where a single-process fit solves on the device).
#[test]
#[ignore = "needs an NVIDIA GPU: cargo test --release --test suite -- gpu:: --ignored"]
fn distributed_fit_on_the_gpu_matches_the_cpu() {
    let _g = gpu("distributed_fit_on_the_gpu_matches_the_cpu");
    let classes = joker::backend::cuda::DEVICE_SOLVE_MIN_COLUMNS;
    for data in [two_moons(3000, 6), blobs(40 * classes, classes, 9)] {
        let est = |dev: Device| {
            Joker::builder()
                .loss(Loss::SquaredHinge)
                .c(0.1)
                .n_components(521)
                .block_size(128)
                .tol(1e-4)
                .stall(false)
                .device(dev)
                .build()
                .unwrap()
        };
        let cpu = two_rank_fit(est, &data, Device::Cpu);
        let gpu = two_rank_fit(est, &data, Device::Cuda(0));
        for m in &gpu {
            assert!(
                m.training.device.starts_with("cuda:0"),
                "{}",
                m.training.device
            );
        }
        for m in cpu.iter().chain(&gpu) {
            assert_eq!(
                m.training.stop,
                StopReason::Converged,
                "gap {:e}",
                m.training.gap
            );
        }
        let (fc, fg) = (
            cpu[0].decision_function(&data.x).unwrap(),
            gpu[1].decision_function(&data.x).unwrap(),
        );
        let scale = fc.iter().fold(0.0f64, |s, v| s.max(v.abs()));
        for (i, (a, b)) in fg.iter().zip(&fc).enumerate() {
            assert!(
                (a - b).abs() <= 2e-2 * scale,
                "decision value {i}: gpu {a} cpu {b}"
            );
        }
        let (sc, sg) = (cpu[0].score(&data).unwrap(), gpu[0].score(&data).unwrap());
        assert!((sg - sc).abs() <= 0.005, "accuracy: gpu {sg} cpu {sc}");
    }
}

/// Rows mapped from a `.npy` file train on the GPU as on the CPU (the device engine reads the
/// mapped slice: uploaded whole when it fits, per block otherwise).
#[test]
#[ignore = "needs an NVIDIA GPU: cargo test --release --test suite -- gpu:: --ignored"]
fn mapped_rows_fit_on_the_gpu_as_on_the_cpu() {
    let data = two_moons(3001, 7);
    let dir = std::env::temp_dir().join(format!("joker-gpu-npy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("rows.npy");
    common::write_npy(&path, &data);
    let mapped = joker::io::npy::read_npy::<f32>(&path, None).unwrap();
    assert!(mapped.x.is_mapped());
    let est = |dev: Device| {
        Joker::builder()
            .loss(Loss::SquaredHinge)
            .c(0.1)
            .n_components(1031)
            .block_size(257)
            .max_iter(3000)
            .tol(1e-6)
            .stall(false)
            .standardize(false)
            .device(dev)
            .build()
            .unwrap()
    };
    cpu_and_gpu_fits("mapped_rows_fit_on_the_gpu_as_on_the_cpu", est, &mapped);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Sixteen Gaussian blobs in 3-d, one class each.
fn blobs(n: usize, classes: usize, seed: u64) -> Dataset<f32> {
    let mut s = Stream::new(seed, 11);
    let centres: Vec<f64> = (0..classes * 3).map(|_| 6.0 * s.uniform() - 3.0).collect();
    let (mut x, mut y) = (Vec::new(), Vec::new());
    for i in 0..n {
        let c = i % classes;
        for k in 0..3 {
            x.push((centres[c * 3 + k] + 0.6 * (s.uniform() - 0.5)) as f32);
        }
        y.push(c as f64);
    }
    Dataset::new(Features::Dense(DenseMatrix::new(n, 3, x).unwrap()), y).unwrap()
}

/// With [`DEVICE_SOLVE_MIN_COLUMNS`](joker::backend::cuda::DEVICE_SOLVE_MIN_COLUMNS) or more
/// target columns the blocks are solved on the device (`tr_solve_f32` for random features,
/// `tr_solve` for exact kernels), one thread block per class: the fits match the CPU's.
#[test]
#[ignore = "needs an NVIDIA GPU: cargo test --release --test suite -- gpu:: --ignored"]
fn many_columns_are_solved_on_the_device() {
    let classes = joker::backend::cuda::DEVICE_SOLVE_MIN_COLUMNS;
    let data = blobs(40 * classes, classes, 8);
    for exact in [false, true] {
        let est = |dev: Device| {
            let b = Joker::builder()
                .loss(Loss::SquaredHinge)
                .multiclass(joker::Multiclass::OneVsRest) // a column per class in each block
                .c(0.1)
                .block_size(64)
                .max_iter(3000)
                .tol(1e-6)
                .stall(false)
                .device(dev);
            if exact {
                // the device's engine, not the kernel cached in host memory
                b.exact().kernel_cache(0)
            } else {
                b.n_components(257)
            }
            .build()
            .unwrap()
        };
        let (_, gpu) = cpu_and_gpu_fits("many_columns_are_solved_on_the_device", est, &data);
        assert!(
            gpu.training.device.contains("block solve on the device"),
            "{}",
            gpu.training.device
        );
    }
}

/// The KKT residual of a block result `(alpha, gbar)`: `v_i = g_i` on the coordinates the
/// solver leaves free (`g = gbar + f'(alpha)` with SVR's orthant term) and `0` on a coordinate
/// at a bound whose gradient points out, i.e. the smallest element of the block objective's
/// subdifferential (box included). The gradient, orthant and frozen tests are those of
/// `solve_column` (and `trsolve.cu`), evaluated in f64. Returns `(||v||_2, max |v_i|)`.
fn kkt_residual(
    loss: Loss,
    coords: &[joker::loss::Coord],
    alpha: &[f64],
    gbar: &[f64],
) -> (f64, f64) {
    let l1 = loss.l1_weight();
    let (mut sq, mut max) = (0.0f64, 0.0f64);
    for ((k, &a), &gb) in coords.iter().zip(alpha).zip(gbar) {
        let (lo, hi) = loss.bounds(k);
        let gs = gb + loss.grad(a, k);
        let (gi, lo_s, hi_s) = joker::solver::trust_region::orthant_step(gs, a, (lo, hi), l1);
        let tol = 1e-13 * (1.0 + a.abs());
        let frozen = (lo_s >= -tol && gi > 0.0)
            || (hi_s <= tol && gi < 0.0)
            || (lo_s >= -tol && hi_s <= tol);
        if !frozen {
            sq += gi * gi;
            max = max.max(gi.abs());
        }
    }
    (sq.sqrt(), max)
}

/// The block objective's change `s.gbar0 + s K s / 2 + sum_i [f_i(a0_i + s_i) - f_i(a0_i)]`,
/// `s = alpha - alpha0`, in f64.
fn block_change(
    kbb: &[f64],
    loss: Loss,
    coords: &[joker::loss::Coord],
    alpha0: &[f64],
    gbar0: &[f64],
    alpha: &[f64],
) -> f64 {
    let b = alpha.len();
    let s: Vec<f64> = alpha.iter().zip(alpha0).map(|(a, a0)| a - a0).collect();
    let mut sum = 0.0;
    for i in 0..b {
        let ks: f64 = (0..b).map(|j| kbb[i * b + j] * s[j]).sum();
        sum += s[i] * gbar0[i] + loss.dual_change(alpha0[i], s[i], &coords[i]) + 0.5 * s[i] * ks;
    }
    sum
}

/// One column's block solve: the final `alpha`, `gbar` and the counters.
struct Solved<'a> {
    alpha: &'a [f64],
    gbar: &'a [f64],
    stats: joker::solver::trust_region::BlockStats,
}

/// The device's block solve of one column against the host's on a block whose `K_BB` has
/// smallest eigenvalue at least `mu > 0`, by the rule of the host-emulator test
/// (`cuda/hostemu/test_trsolve.cpp`, run without and with FMA contraction by
/// `scripts/emu-cuda.sh`): the bookkeeping `gbar = gbar0 + K s` to `1e-10`; trust-region and
/// accepted counts within one, CG counts within one per trust-region iteration; the objective
/// changes within `1e-8` (relative) plus what the KKT residuals `v` certify; and the iterates
/// either (a) equal up to rounding, `1e-9` of `1 + max |x|` over `alpha` and `gbar`, or (b),
/// when both solves converged (every `|v_i| < kkt_tol`), within the certified distance.
///
/// Why: the block objective `J` is `mu`-strongly convex, so a point with residual `v` lies
/// within `||v||_2 / mu` of the unique minimiser and `J - J* <= ||v||_2^2 / (2 mu)`; two
/// converged results are that close whatever path they took. Summation orders alone keep the
/// two solvers on one path (`2e-14` in the emulator), but nvcc's FMA contraction can flip a
/// rounding tie (a coordinate that stops CG at its bound lands one ulp inside it, and CG takes
/// one more box exit): one decision in one trust-region iteration, hence counts within one
/// (one CG iteration per trust-region iteration), and iterates that differ by up to the
/// residual of the solve (the emulator with contraction: `1.9e-8` on one of 40 problems, with
/// the same counts and the same objective change to `6e-16`).
#[allow(clippy::too_many_arguments)]
fn check_block_result(
    what: &str,
    kbb: &[f64],
    mu: f64,
    kkt_tol: f64,
    loss: Loss,
    coords: &[joker::loss::Coord],
    (alpha0, gbar0): (&[f64], &[f64]),
    dev: Solved,
    host: Solved,
) {
    let b = alpha0.len();
    let (sd, sh) = (dev.stats, host.stats);
    assert!(
        sd.tr_iters.abs_diff(sh.tr_iters) <= 1 && sd.accepted.abs_diff(sh.accepted) <= 1,
        "{what}: trust-region/accepted counts {}/{} vs host {}/{}",
        sd.tr_iters,
        sd.accepted,
        sh.tr_iters,
        sh.accepted
    );
    assert!(
        sd.cg_iters.abs_diff(sh.cg_iters) <= sd.tr_iters.max(sh.tr_iters),
        "{what}: CG iterations {} vs host {}",
        sd.cg_iters,
        sh.cg_iters
    );
    let gmax = host.gbar.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    for i in 0..b {
        let ks: f64 = gbar0[i]
            + (0..b)
                .map(|j| kbb[i * b + j] * (dev.alpha[j] - alpha0[j]))
                .sum::<f64>();
        assert!(
            (ks - dev.gbar[i]).abs() <= 1e-10 * (1.0 + gmax),
            "{what}: gbar[{i}] = {} out of sync with gbar0 + K s = {ks}",
            dev.gbar[i]
        );
    }
    let (vd, vd_max) = kkt_residual(loss, coords, dev.alpha, dev.gbar);
    let (vh, vh_max) = kkt_residual(loss, coords, host.alpha, host.gbar);
    let jd = block_change(kbb, loss, coords, alpha0, gbar0, dev.alpha);
    let jh = block_change(kbb, loss, coords, alpha0, gbar0, host.alpha);
    let cert_j = vd.max(vh).powi(2) / (2.0 * mu);
    assert!(
        jd < 0.0 && (jd - jh).abs() <= 1e-8 * jh.abs() + cert_j,
        "{what}: objective change {jd} vs host {jh} (certified {cert_j:.3e})"
    );
    let amax = host.alpha.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let scale = 1.0 + amax.max(gmax);
    let err = dev
        .alpha
        .iter()
        .chain(dev.gbar)
        .zip(host.alpha.iter().chain(host.gbar))
        .fold(0.0f64, |m, (x, y)| m.max((x - y).abs()));
    if err <= 1e-9 * scale {
        return; // (a) the same path
    }
    let dist = dev
        .alpha
        .iter()
        .zip(host.alpha)
        .map(|(x, y)| (x - y) * (x - y))
        .sum::<f64>()
        .sqrt();
    let cert = (vd + vh) / mu + 1e-9 * (1.0 + amax);
    eprintln!(
        "{what}: iterates {:.2e} of 1 + max apart; ||alpha - alpha_host||_2 = {dist:.2e}, certified {cert:.2e} (residuals {vd:.2e}, {vh:.2e}; largest entries {vd_max:.2e}, {vh_max:.2e})",
        err / scale
    );
    assert!(
        vd_max < kkt_tol && vh_max < kkt_tol,
        "{what}: iterates {:.3e} of 1 + max apart, beyond rounding, and a solve has not converged (largest residual entries {vd_max:.3e}, host {vh_max:.3e}; kkt_tol {kkt_tol:.0e})",
        err / scale
    );
    assert!(
        dist <= cert,
        "{what}: iterates {dist:.3e} apart, more than the KKT residuals certify ({cert:.3e})"
    );
}

/// The device trust-region block solve (`tr_solve_f32`) against the host solver
/// (`solve_column`) for every loss, two columns per launch, blocks smaller and larger than the
/// 256 threads, without and with the Nystrom metric (rank 8; the sketch on the device, the
/// factors from the host's code), on fresh random well-conditioned blocks
/// (`K = A A^T / m + I / 2`) with enough trust-region iterations to converge: compared by
/// [`check_block_result`], the rule of the host-emulator test (counts within one, iterates
/// equal up to rounding or within what the KKT residuals certify).
#[test]
#[ignore = "needs an NVIDIA GPU: cargo test --release --test suite -- gpu:: --ignored"]
fn tr_solve_matches_the_host_solver() {
    use joker::Scalar;
    use joker::loss::Coord;
    use joker::solver::trust_region::{BlockProblem, TrustRegion, solve_column};
    let g = gpu("tr_solve_matches_the_host_solver");
    let seed = run_seed();
    let losses = [
        Loss::SquaredError,
        Loss::Huber { delta: 0.5 },
        Loss::EpsilonInsensitive { epsilon: 0.25 },
        Loss::Absolute,
        Loss::Lp { p: 1.5 },
        Loss::Hinge,
        Loss::SquaredHinge,
        Loss::Logistic,
    ];
    let plain = TrustRegion {
        max_iter: 100,
        ..TrustRegion::default()
    };
    let metric = TrustRegion {
        nystrom_rank: 8,
        ..plain
    };
    for p in [plain, metric] {
        for (li, &loss) in losses.iter().enumerate() {
            for &b in &[37usize, 300] {
                let (tt, m) = (2, 24);
                let a = random(b * m, seed ^ (li * 1000 + b) as u64);
                // K = A A^T / m + I / 2 in f32, exactly symmetric; its smallest eigenvalue is
                // at least 1/2 less the f32 rounding (Gershgorin on the rounding errors)
                let mut k32 = vec![f32::NAN; b * b];
                let mut rounding = vec![0.0f64; b];
                for i in 0..b {
                    for j in 0..=i {
                        let dot: f64 = (0..m).map(|c| a[i * m + c] * a[j * m + c]).sum();
                        let exact = dot / m as f64 + if i == j { 0.5 } else { 0.0 };
                        let v = exact as f32;
                        k32[i * b + j] = v;
                        k32[j * b + i] = v;
                        let e = (v as f64 - exact).abs();
                        rounding[i] += e;
                        if j != i {
                            rounding[j] += e;
                        }
                    }
                }
                let mu = 0.5 - rounding.iter().fold(0.0f64, |m, &v| m.max(v)) - 1e-12;
                let k64: Vec<f64> = k32.iter().map(|&v| v as f64).collect();
                let r = random(b * tt, seed ^ 0xC0 ^ li as u64);
                let coords: Vec<Coord> = r
                    .iter()
                    .map(|&u| {
                        let y = if loss.is_classifier() { u.signum() } else { u };
                        let lam = 0.5;
                        let eps = if loss == Loss::Logistic {
                            <f32 as Scalar>::gap_below(1.0 / lam)
                        } else {
                            0.0
                        };
                        Coord { y, lam, eps }
                    })
                    .collect();
                let alpha0: Vec<f64> = coords.iter().map(|k| loss.start(k, b)).collect();
                let mut gbar0 = vec![0.0; b * tt];
                for t in 0..tt {
                    for i in 0..b {
                        gbar0[t * b + i] = (0..b).map(|j| k64[i * b + j] * alpha0[t * b + j]).sum();
                    }
                }
                let (mut ad, mut gd) = (alpha0.clone(), gbar0.clone());
                let stats = g
                    .tr_solve(&k32, b, loss, &coords, &mut ad, &mut gd, 4.0, &p)
                    .unwrap();
                for (t, &st) in stats.iter().enumerate() {
                    let col = t * b..(t + 1) * b;
                    let (mut ah, mut gh) =
                        (alpha0[col.clone()].to_vec(), gbar0[col.clone()].to_vec());
                    let prob = BlockProblem {
                        kbb: &k64,
                        loss,
                        coords: &coords[col.clone()],
                        exact: None,
                    };
                    let sh = solve_column(&prob, &mut ah, &mut gh, 4.0, &p);
                    check_block_result(
                        &format!("{loss:?} b={b} rank {} column {t}", p.nystrom_rank),
                        &k64,
                        mu,
                        p.kkt_tol,
                        loss,
                        &coords[col.clone()],
                        (&alpha0[col.clone()], &gbar0[col.clone()]),
                        Solved {
                            alpha: &ad[col.clone()],
                            gbar: &gd[col.clone()],
                            stats: st,
                        },
                        Solved {
                            alpha: &ah,
                            gbar: &gh,
                            stats: sh,
                        },
                    );
                }
            }
        }
    }
}

/// `k(x, y)` in f64 by direct differences (the reference of the exact kernels).
fn kernel_f64(kernel: &Kernel, x: &[f32], y: &[f32]) -> f64 {
    let dist = match kernel.kind {
        KernelKind::Laplacian => x
            .iter()
            .zip(y)
            .map(|(a, b)| (*a as f64 - *b as f64).abs())
            .sum::<f64>(),
        KernelKind::Gaussian => x
            .iter()
            .zip(y)
            .map(|(a, b)| (*a as f64 - *b as f64).powi(2))
            .sum::<f64>(),
        KernelKind::Matern { .. } => x
            .iter()
            .zip(y)
            .map(|(a, b)| (*a as f64 - *b as f64).powi(2))
            .sum::<f64>()
            .sqrt(),
    };
    kernel.of_distance(dist)
}

/// `exact_tile` and `exact_matvec` (cuda/exact.cu) against f64 direct sums, for the three
/// kernels, sizes across the 64-row tiles and 32-dimension chunks, points far from the origin
/// (where the CPU's expansion loses digits and the device's direct differences do not), an
/// output stride wider than the rows and an output that already holds values. Tolerance:
/// `1e-5` on kernel values (32 f32 ulps of a distance, times `|dk/ddist| <= 1`), `1e-5` of
/// `sum |k v|` on the products. The `Backend` methods (the ones the solver calls) must agree
/// with the wrappers.
#[test]
#[ignore = "needs an NVIDIA GPU: cargo test --release --test suite -- gpu:: --ignored"]
fn exact_kernels_match_f64_direct_sums() {
    let g = gpu("exact_kernels_match_f64_direct_sums");
    let seed = run_seed();
    for (ni, nj, d) in [(1, 1, 1), (70, 130, 37), (64, 64, 32), (129, 5, 90)] {
        for kind in kernels() {
            let kernel = Kernel {
                kind,
                gamma: 0.7 / d as f64,
            };
            let off = 30.0;
            let xi: Vec<f32> = random(ni * d, seed ^ 1)
                .iter()
                .map(|v| (v + off) as f32)
                .collect();
            let xj: Vec<f32> = random(nj * d, seed ^ 2)
                .iter()
                .map(|v| (v + off) as f32)
                .collect();
            let tile = g.exact_tile(&kernel, &xi, ni, &xj, nj, d).unwrap();
            assert_eq!(tile.len(), ni * nj);
            for i in 0..ni {
                for j in 0..nj {
                    let want =
                        kernel_f64(&kernel, &xi[i * d..(i + 1) * d], &xj[j * d..(j + 1) * d]);
                    let got = tile[i * nj + j];
                    assert!(
                        (got - want).abs() <= 1e-5,
                        "{kind:?} {ni}x{nj}x{d} ({i}, {j}): gpu {got} f64 {want}"
                    );
                }
            }
            let mut via_trait = vec![f64::NAN; ni * nj];
            g.kernel_tile(&kernel, &xi, ni, &xj, nj, d, &mut via_trait);
            assert_eq!(
                via_trait, tile,
                "Backend::kernel_tile differs from exact_tile"
            );

            let (targets, ldo) = (2, ni + 3);
            let v = random(nj * targets, seed ^ 3);
            let start = random(targets * ldo, seed ^ 4);
            let mut out = start.clone();
            g.exact_matvec(&kernel, &xi, ni, &xj, nj, d, &v, targets, &mut out, ldo)
                .unwrap();
            let mut via_trait = start.clone();
            g.kernel_matvec(
                &kernel,
                &xi,
                ni,
                &xj,
                nj,
                d,
                &v,
                targets,
                &mut via_trait,
                ldo,
            );
            assert_eq!(
                via_trait, out,
                "Backend::kernel_matvec differs from exact_matvec"
            );
            for t in 0..targets {
                for i in 0..ldo {
                    let k = t * ldo + i;
                    if i >= ni {
                        assert_eq!(out[k], start[k], "padding row {i} was written");
                        continue;
                    }
                    let (mut want, mut size) = (start[k], start[k].abs());
                    for j in 0..nj {
                        let kv =
                            kernel_f64(&kernel, &xi[i * d..(i + 1) * d], &xj[j * d..(j + 1) * d])
                                * v[t * nj + j];
                        want += kv;
                        size += kv.abs();
                    }
                    assert!(
                        (out[k] - want).abs() <= 1e-5 * size.max(1.0),
                        "{kind:?} {ni}x{nj}x{d} product ({t}, {i}): gpu {} f64 {want}",
                        out[k]
                    );
                }
            }
        }
    }
}

/// An exact-kernel fit on the GPU (rows, `beta` and `K_BB` resident, tiles and `beta` updates
/// by exact.cu, the block solve by the f64 trust-region kernel) against the same fit on the
/// CPU: the same accuracy of the dual and close decision values. Without a GPU, asking for one fails cleanly and Auto explains why it stayed on the
/// CPU.
#[test]
#[ignore = "needs an NVIDIA GPU: cargo test --release --test suite -- gpu:: --ignored"]
fn exact_fit_on_the_gpu_matches_the_cpu() {
    let data = two_moons(600, 9);
    let est = |dev: Device| {
        Joker::builder()
            .loss(Loss::SquaredHinge)
            .c(1.0)
            .exact()
            // the device's resident engine (a cached kernel is tested below)
            .kernel_cache(0)
            .block_size(200)
            .max_iter(3000)
            .tol(1e-6)
            .stall(false)
            .device(dev)
            .build()
            .unwrap()
    };
    // Auto keeps exact fits on the CPU even where a GPU is usable
    let auto = est(Device::Auto).fit(&data).unwrap();
    assert!(
        auto.training
            .device
            .starts_with("cpu (auto: exact kernels use the GPU only"),
        "{}",
        auto.training.device
    );
    // the setting converges (checked on the CPU, also without a GPU)
    assert!(auto.training.gap <= 1e-6, "gap {}", auto.training.gap);
    cpu_and_gpu_fits("exact_fit_on_the_gpu_matches_the_cpu", est, &data);
    // the same rows as CSR (the third coordinate dropped where below 0.3): rows kept sparse
    // on the device
    let Features::Dense(dm) = &data.x else {
        unreachable!()
    };
    let (mut ip, mut ix, mut vals) = (vec![0usize], Vec::new(), Vec::new());
    for i in 0..data.x.nrows() {
        for (k, &v) in dm.row(i).iter().enumerate() {
            if k < 2 || v >= 0.3 {
                ix.push(k as u32);
                vals.push(v);
            }
        }
        ip.push(ix.len());
    }
    let sparse = Dataset::new(
        Features::Sparse(CsrMatrix::new(data.x.nrows(), 3, ip, ix, vals).unwrap()),
        data.y.clone(),
    )
    .unwrap();
    cpu_and_gpu_fits("exact_fit_on_the_gpu_matches_the_cpu (csr)", est, &sparse);
}

/// An exact fit whose kernel fits the cache, on the GPU: the kernel matrix formed by the
/// device's tiles (f32 arithmetic on the device) and kept in host memory, the working set read
/// off the violations; the same fit as on the CPU (whose tiles are formed in f64), for dense
/// rows and two target columns.
#[test]
#[ignore = "needs an NVIDIA GPU: cargo test --release --test suite -- gpu:: --ignored"]
fn cached_exact_fit_on_the_gpu_matches_the_cpu() {
    for (classes, data) in [(2, two_moons(900, 21)), (3, blobs(600, 3, 8))] {
        let est = |dev: Device| {
            Joker::builder()
                .loss(Loss::SquaredHinge)
                .c(1.0)
                .exact()
                .block_size(128)
                .max_iter(5000)
                .tol(1e-6)
                .stall(false)
                .device(dev)
                .build()
                .unwrap()
        };
        let (cpu, gpu) =
            cpu_and_gpu_fits("cached_exact_fit_on_the_gpu_matches_the_cpu", est, &data);
        assert!(
            gpu.training.device.contains("formed by the device's tiles"),
            "{classes} classes: {}",
            gpu.training.device
        );
        for m in [&cpu, &gpu] {
            assert!(
                m.training.working_set.starts_with("shrinking"),
                "{classes} classes: {}",
                m.training.working_set
            );
        }
    }
}

/// SVR with its intercept (the regression default on the exact kernel) on the GPU against the
/// CPU, on the three device paths: the cached kernel formed by the device's tiles, the resident
/// exact engine (`kernel_cache(0)`) and random features. The intercept is searched at the
/// checks (four a pass on the cached kernel): the decision values and the intercept agree to
/// 1e-2 of the largest decision value, and the duals sum to zero (1e-3 of their absolute sum:
/// the search moves the intercept at checks, the CPU's fits end at 3e-4) on both devices.
#[test]
#[ignore = "needs an NVIDIA GPU: cargo test --release --test suite -- gpu:: --ignored"]
fn intercept_fit_on_the_gpu_matches_the_cpu() {
    let raw = common::regression(700, 4, 17);
    let Features::Dense(dm) = &raw.x else {
        unreachable!()
    };
    let x = f32s(dm.as_slice());
    // a level that the intercept carries (its optimum is near 1.5 here, the expansion the rest)
    let y: Vec<f64> = raw.y.iter().map(|v| v + 3.0).collect();
    let data = Dataset::new(Features::Dense(DenseMatrix::new(700, 4, x).unwrap()), y).unwrap();
    for (what, cache, m) in [
        ("cached exact kernel", 64usize << 20, None),
        ("resident exact engine", 0, None),
        ("random features", 64 << 20, Some(257usize)),
    ] {
        let est = |dev: Device| {
            let b = Joker::builder()
                .loss(Loss::EpsilonInsensitive { epsilon: 0.1 })
                .intercept(true)
                .normalize_target(false)
                .c(1.0)
                .kernel_cache(cache)
                .block_size(128)
                .max_iter(20_000)
                .tol(1e-6)
                .stall(false)
                .device(dev);
            match m {
                Some(m) => b.n_components(m),
                None => b.exact(),
            }
            .build()
            .unwrap()
        };
        let (cpu, gpu) = cpu_and_gpu_fits("intercept_fit_on_the_gpu_matches_the_cpu", est, &data);
        let (bc, bg) = (
            cpu.training.intercept.expect("an intercept on the CPU"),
            gpu.training.intercept.expect("an intercept on the GPU"),
        );
        let scale = cpu
            .decision_function(&data.x)
            .unwrap()
            .iter()
            .fold(0.0f64, |s, v| s.max(v.abs()));
        assert!(
            bc > 0.5 && (bc - bg).abs() <= 1e-2 * scale,
            "{what}: intercept cpu {bc}, gpu {bg}"
        );
        if cache > 0 && m.is_none() {
            assert!(
                gpu.training.device.contains("formed by the device's tiles"),
                "{what}: {}",
                gpu.training.device
            );
        }
        for (dev, model) in [("cpu", &cpu), ("gpu", &gpu)] {
            if let Some(alpha) = model.dual.as_ref() {
                let (sum, size) = common::dual_balance(alpha);
                assert!(
                    sum.abs() <= 1e-3 * size,
                    "{what} on the {dev}: duals sum to {sum} of {size}"
                );
            }
        }
    }
}

/// The resident exact engine (`CudaExact`: rows, `beta = K alpha` and `K_BB` on the device)
/// against the host composition `HostExact` on the CPU, for dense and CSR rows (kept sparse on
/// the device: `exact_tile_csr`, `exact_matvec_csr`) and the three kernels: `K_BB`, `g =
/// beta_B`, the `beta` updates and the decision values after several blocks, including a last
/// short block. Tolerance: `1e-5` of the largest entry (f32 distances on both sides, f64
/// accumulation). A memory limit below the engine's need makes `exact_engine` decline (the fit
/// then sends rows per call) instead of failing.
#[test]
#[ignore = "needs an NVIDIA GPU: cargo test --release --test suite -- gpu:: --ignored"]
fn exact_engine_matches_host_exact() {
    let g = gpu("exact_engine_matches_host_exact");
    let seed = run_seed();
    let (n, d, tt, b) = (1000usize, 7usize, 2usize, 130usize);
    let dense = f32s(&random(n * d, seed ^ 31));
    // the same kind of rows as CSR, about 40% of the entries stored, every 9th row empty
    let mut keep = Stream::new(seed, 5);
    let (mut ip, mut ix, mut vals) = (vec![0usize], Vec::new(), Vec::new());
    for i in 0..n {
        for k in 0..d {
            if i % 9 != 4 && keep.uniform() < 0.4 {
                ix.push(k as u32);
                vals.push(dense[i * d + k]);
            }
        }
        ip.push(ix.len());
    }
    let nnz = ix.len();
    let inputs = [
        Features::Dense(DenseMatrix::new(n, d, dense).unwrap()),
        Features::Sparse(CsrMatrix::new(n, d, ip, ix, vals).unwrap()),
    ];
    let mut order: Vec<usize> = (0..n).collect();
    Stream::new(seed, 4).shuffle(&mut order);
    let need = g
        .exact_memory(n, d, tt, b)
        .unwrap()
        .expect("a small engine fits");
    let tight = Cuda::new(g.info().index)
        .unwrap()
        .with_memory_limit(Some(need / 2));
    assert!(tight.exact_memory(n, d, tt, b).unwrap().is_none());
    // CSR rows cost indptr + (index, value) pairs instead of n d f32
    let sparse_need = g.exact_memory_sparse(n, nnz, tt, b).unwrap().unwrap();
    assert_eq!(sparse_need + n * d * 4, need + (n + 1) * 8 + nnz * 8);
    for (x, kind) in inputs
        .iter()
        .flat_map(|x| kernels().into_iter().map(move |k| (x, k)))
    {
        let rows = if matches!(x, Features::Sparse(_)) {
            "csr"
        } else {
            "dense"
        };
        let kernel = Kernel {
            kind,
            gamma: 0.5 / d as f64,
        };
        assert!(
            tight
                .exact_engine(&kernel, x, &order, tt, b)
                .unwrap()
                .is_none(),
            "{kind:?} {rows}: the engine must decline under a tight limit"
        );
        let mut host = HostExact::new(&Cpu, &kernel, x, &order, tt, b).unwrap();
        let mut dev = g
            .exact_engine(&kernel, x, &order, tt, b)
            .unwrap()
            .expect("the resident engine fits");
        let alpha = random(n * tt, seed ^ 32);
        host.set_alpha(&alpha).unwrap();
        dev.set_alpha(&alpha).unwrap();
        let close = |a: &[f64], b: &[f64], what: &str| {
            close_to(a, b, 1e-5, &format!("{kind:?} {rows} {what}"))
        };
        close(
            &dev.decision().unwrap(),
            &host.decision().unwrap(),
            "decision after set_alpha",
        );
        for step in 0..6 {
            let start = (step * 5 % 8) * b;
            let len = b.min(n - start);
            let (mut kh, mut gh) = (vec![f64::NAN; len * len], vec![f64::NAN; len * tt]);
            let (mut kd, mut gd) = (vec![f64::NAN; len * len], vec![f64::NAN; len * tt]);
            host.load_block(start, len).unwrap();
            host.block_gram(Some(&mut kh), &mut gh).unwrap();
            dev.load_block(start, len).unwrap();
            dev.block_gram(Some(&mut kd), &mut gd).unwrap();
            close(&kd, &kh, &format!("step {step} K_BB"));
            close(&gd, &gh, &format!("step {step} g"));
            let delta = random(len * tt, seed ^ (40 + step as u64));
            host.update(&delta).unwrap();
            dev.update(&delta).unwrap();
        }
        close(
            &dev.decision().unwrap(),
            &host.decision().unwrap(),
            "decision",
        );
    }
}

/// Full KRR (ASkotch and Nystrom-PCG) with its kernel tiles and sketches on the GPU reaches
/// the same model as on the CPU: both converge to the relative residual asked for and their
/// predictions agree within `1e-3` of the largest (f32 kernel values on both sides). Without a
/// GPU, naming one fails cleanly.
#[test]
#[ignore = "needs an NVIDIA GPU: cargo test --release --test suite -- gpu:: --ignored"]
fn full_krr_on_the_gpu_matches_the_cpu() {
    use joker::solver::krr::{KrrConfig, KrrMethod};
    let data = two_moons(800, 21);
    for method in [KrrMethod::ASkotch, KrrMethod::NystromPcg] {
        let est = |dev: Device| {
            Joker::builder()
                .loss(Loss::SquaredError)
                .exact()
                .gamma(1.0)
                .lambda(1.0)
                .full_krr(KrrConfig {
                    method,
                    blocks: 2,
                    rank: 100,
                    tol: 1e-6,
                    max_iter: 4000,
                    check_every: 20,
                    ..Default::default()
                })
                .device(dev)
                .build()
                .unwrap()
        };
        gpu("full_krr_on_the_gpu_matches_the_cpu");
        let cpu = est(Device::Cpu).fit(&data).unwrap();
        let gpu = est(Device::Cuda(0)).fit(&data).unwrap();
        assert!(
            gpu.training.device.starts_with("cuda:0") && gpu.training.device.contains("Nystrom"),
            "{}",
            gpu.training.device
        );
        for m in [&cpu, &gpu] {
            assert_eq!(m.training.stop, joker::StopReason::Converged, "{method:?}");
        }
        let (pc, pg) = (cpu.predict(&data.x).unwrap(), gpu.predict(&data.x).unwrap());
        let scale = pc.iter().fold(0.0f64, |s, v| s.max(v.abs()));
        for (i, (a, b)) in pg.iter().zip(&pc).enumerate() {
            assert!(
                (a - b).abs() <= 1e-3 * scale,
                "{method:?} prediction {i}: gpu {a} cpu {b}"
            );
        }
    }
}

/// Runs everywhere: a CUDA ordinal that does not exist is a clean [`JokerError::Device`] for
/// random-feature, exact and full-KRR fits, and `Device::Auto` without a usable GPU trains on
/// the CPU and records why.
#[test]
fn a_missing_gpu_is_a_clean_error() {
    use joker::solver::krr::KrrConfig;
    let p = probe();
    let missing = p.devices.len() + 7;
    let data = two_moons(300, 3);
    let rff = Joker::builder().loss(Loss::SquaredHinge).n_components(64);
    let exact = Joker::builder().loss(Loss::SquaredHinge).exact();
    let krr = Joker::builder()
        .loss(Loss::SquaredError)
        .exact()
        .full_krr(KrrConfig {
            blocks: 2,
            rank: 20,
            ..Default::default()
        });
    for b in [rff.clone(), exact, krr] {
        let est = b.clone().device(Device::Cuda(missing)).build().unwrap();
        match est.fit(&data) {
            Err(JokerError::Device(msg)) => {
                assert!(msg.contains(&format!("cuda:{missing}")), "{msg}")
            }
            other => panic!("expected a device error, got {:?}", other.map(|_| ())),
        }
    }
    if !p.available() {
        let m = rff.max_iter(20).build().unwrap().fit(&data).unwrap();
        assert!(
            m.training.device.starts_with("cpu (auto"),
            "{}",
            m.training.device
        );
    }
}

/// Runs everywhere: the GPU tests fail, never skip, when they are run and find no usable GPU.
/// On a machine without one this runs the ignored GPU tests of this very binary in a child
/// process with `JOKER_REQUIRE_GPU=1` (as `scripts/gpu-validate.sh` does) and checks that
/// every one of them fails with the probe's reason and none passes. With a GPU it checks
/// nothing here: the GPU tests themselves then run.
#[test]
fn gpu_tests_fail_without_a_gpu() {
    let p = probe();
    if p.available() {
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new(exe)
        .args([
            // this module's tests only: the binary holds every integration test
            "gpu::",
            "--ignored",
            "--test-threads=2",
            "--skip",
            "cpu_fit_in_a_fresh_process",
        ])
        .env("JOKER_REQUIRE_GPU", "1")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !out.status.success(),
        "the GPU tests passed without a GPU:\n{text}"
    );
    let failed = text.matches("... FAILED").count();
    let passed = text.matches("... ok").count();
    let ran = text
        .lines()
        .find_map(|l| {
            l.strip_prefix("running ")?
                .strip_suffix(" tests")?
                .parse()
                .ok()
        })
        .unwrap_or(0usize);
    assert!(
        ran >= 13 && failed == ran,
        "{failed} of {ran} GPU tests failed, expected all:\n{text}"
    );
    assert_eq!(passed, 0, "GPU tests passed without a GPU:\n{text}");
    assert!(
        text.contains(&p.reason()),
        "the probe's reason is missing:\n{text}"
    );
}

/// Under `JOKER_REQUIRE_GPU=1` (the validation command) a machine without a usable GPU is a
/// failure here too, so that a validation run cannot report success on the CPU.
#[test]
fn a_required_gpu_is_there() {
    if std::env::var("JOKER_REQUIRE_GPU").as_deref() == Ok("1") {
        let p = probe();
        assert!(
            p.available(),
            "JOKER_REQUIRE_GPU=1 but no usable GPU: {}",
            p.reason()
        );
    }
}

/// Runs everywhere: a fit on `Device::Cpu` (random features and exact, then a prediction)
/// never queries the CUDA driver. The fit runs in a child process (this binary, the ignored
/// test below), where nothing else has probed.
#[test]
fn a_cpu_fit_does_not_touch_the_driver() {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", "gpu::cpu_fit_in_a_fresh_process"])
        .env("JOKER_CPU_FIT_CHILD", "1")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("1 passed"),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
#[ignore = "run by a_cpu_fit_does_not_touch_the_driver in a fresh process"]
fn cpu_fit_in_a_fresh_process() {
    if std::env::var_os("JOKER_CPU_FIT_CHILD").is_none() {
        return;
    }
    let data = two_moons(200, 4);
    for exact in [false, true] {
        let b = Joker::builder()
            .loss(Loss::SquaredHinge)
            .max_iter(20)
            .device(Device::Cpu);
        let est = if exact { b.exact() } else { b.n_components(64) };
        let m = est.build().unwrap().fit(&data).unwrap();
        m.predict(&data.x).unwrap();
    }
    assert!(
        !joker::device::probed(),
        "a CPU fit queried the CUDA driver"
    );
}

/// The self-check that `Device::Auto` and `Device::Cuda` fits run first passes on this GPU.
#[test]
#[ignore = "needs an NVIDIA GPU: cargo test --release --test suite -- gpu:: --ignored"]
fn the_gpu_passes_its_self_check() {
    use joker::backend::selfcheck::{Problem, compare};
    let g = gpu("the_gpu_passes_its_self_check");
    let p = Problem::new();
    let (cpu, k32) = p.cpu();
    let dev = g.self_check_answers(&p, &k32).unwrap();
    assert_eq!(compare(&dev, &cpu), Ok(()));
    assert_eq!(g.trusted(), Ok(()));
}

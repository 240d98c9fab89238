//! Criterion benchmarks of the hot primitives at the paper's inexact setting scaled to a
//! laptop (block 512, M = 10,000, d = 28, f32): feature block, Gram, projection, feature
//! update, the trust-region block solve, exact kernel tiles, the cached exact kernel of a
//! 4,096-row fit, the median bandwidth's pairwise distances, and prediction (random-feature and
//! exact). The machine's ceiling, an f32 GEMM with faer, is measured in the same run,
//! and a closing table gives each primitive's rate (its flop count over criterion's mean
//! time) as a fraction of it; the trust-region solve is reported in time only (its work
//! depends on the iterates).
//!
//! `cargo bench --bench primitives` (the summary is also written to
//! `<target>/criterion/joker-summary.json`)

use criterion::{Criterion, Throughput};
use joker::backend::cached::{CachedExact, Formation};
use joker::backend::predict::Predictor;
use joker::backend::{Backend, cpu::Cpu};
use joker::features::{FeatureMap, FeatureSpec};
use joker::loss::{Coord, Loss};
use joker::rng::Stream;
use joker::solver::trust_region::{BlockProblem, TrustRegion, solve_column};
use joker::{DenseMatrix, Features};
use joker::{Kernel, KernelKind};

const B: usize = 512;
const M: usize = 10_000;
const D: usize = 28;

fn inputs() -> (Vec<f32>, FeatureMap<f32>) {
    let mut s = Stream::new(1, 1);
    let x = (0..B * D)
        .map(|_| (s.uniform() * 4.0 - 2.0) as f32)
        .collect();
    let spec = FeatureSpec {
        kernel: Kernel {
            kind: KernelKind::Gaussian,
            gamma: 1.0 / (2.0 * D as f64),
        },
        n_components: M,
        dim: D,
        seed: 3,
    };
    (x, FeatureMap::new(spec).unwrap())
}

/// Rows predicted in the prediction benchmarks.
const NP: usize = 10_000;
/// Support rows of the exact prediction benchmark.
const NS: usize = 2048;
/// Size of the GEMM ceiling.
const NG: usize = 2048;

fn primitives(c: &mut Criterion) {
    let mut g = c.benchmark_group("gemm_ceiling");
    g.sample_size(10);
    g.throughput(Throughput::Elements((2 * NG * NG * NG) as u64));
    {
        use faer::{Accum, Mat, Par};
        let a = Mat::<f32>::from_fn(NG, NG, |i, j| ((i * 7 + j * 3) % 11) as f32 * 0.1);
        let b = Mat::<f32>::from_fn(NG, NG, |i, j| ((i * 5 + j) % 13) as f32 * 0.1);
        let mut cm = Mat::<f32>::zeros(NG, NG);
        g.bench_function("f32_faer", |bn| {
            bn.iter(|| {
                faer::linalg::matmul::matmul(
                    cm.as_mut(),
                    Accum::Replace,
                    a.as_ref(),
                    b.as_ref(),
                    1.0,
                    Par::rayon(0),
                )
            })
        });
    }
    g.finish();

    let (x, map) = inputs();
    let mut phi = vec![0f32; B * M];
    let mut g = c.benchmark_group("rff_block_512x10000x28_f32");
    g.sample_size(20);
    g.throughput(Throughput::Elements((2 * B * M * D) as u64));
    g.bench_function("features", |b| {
        b.iter(|| Cpu.features(&map, &x, B, &mut phi))
    });
    let mut kbb = vec![0f64; B * B];
    g.throughput(Throughput::Elements((B * (B + 1) * M) as u64));
    g.bench_function("gram", |b| b.iter(|| Cpu.gram(&phi, B, M, &mut kbb)));
    let theta: Vec<f64> = (0..M).map(|j| (j as f64).sin()).collect();
    let mut out = vec![0f64; B];
    g.throughput(Throughput::Elements((2 * B * M) as u64));
    g.bench_function("project", |b| {
        b.iter(|| Cpu.project(&phi, B, M, &theta, 1, &mut out))
    });
    let delta: Vec<f64> = (0..B).map(|i| (i as f64).cos()).collect();
    let mut th = theta.clone();
    g.bench_function("accumulate", |b| {
        b.iter(|| Cpu.accumulate(&phi, B, M, &delta, 1, &mut th))
    });
    g.finish();

    let mut g = c.benchmark_group("exact_tile_2048x512x28_f32");
    g.sample_size(20);
    let mut s = Stream::new(2, 1);
    let xa: Vec<f32> = (0..2048 * D).map(|_| s.uniform() as f32).collect();
    let mut tile = vec![0f64; 2048 * B];
    g.throughput(Throughput::Elements((2048 * B) as u64));
    for kind in [KernelKind::Gaussian, KernelKind::Laplacian] {
        let kernel = Kernel { kind, gamma: 0.05 };
        g.bench_function(format!("{kind:?}"), |b| {
            b.iter(|| Cpu.kernel_tile(&kernel, &xa, 2048, &x, B, D, &mut tile))
        });
    }
    g.finish();

    // one row of a Gaussian kernel tile from its f32 dot products (a pair of one-vs-one's
    // cached kernels on 15,000 rows and 10 classes), and the exponential alone: the kernel
    // values' cost once the GEMM has given the dot products
    let mut g = c.benchmark_group("gaussian_row_1536");
    let nr = 1536;
    let dots: Vec<f32> = (0..nr).map(|_| (4.0 * s.uniform() - 2.0) as f32).collect();
    let nb: Vec<f64> = (0..nr).map(|_| 5.0 * s.uniform()).collect();
    let mut row = vec![0f64; nr];
    g.throughput(Throughput::Elements(nr as u64));
    g.bench_function("fused_f32", |b| {
        b.iter(|| joker::simd::gaussian_row_single(&dots, 3.0, &nb, 0.1, &mut row))
    });
    let args: Vec<f64> = nb.iter().map(|v| -v).collect();
    g.bench_function("exp_single", |b| {
        b.iter(|| {
            row.copy_from_slice(&args);
            joker::simd::exp_in_place_single(&mut row)
        })
    });
    g.finish();

    // the cached exact kernel of a 4,096-row fit (64 MiB of f32), formed once per fit: half
    // the kernel values, each written twice (its row and, transposed, its column)
    let mut g = c.benchmark_group("cached_kernel_4096x28_f32");
    g.sample_size(10);
    let nc = 4096;
    let xc: Vec<f32> = (0..nc * D).map(|_| s.uniform() as f32).collect();
    let xc = Features::Dense(DenseMatrix::new(nc, D, xc).expect("a dense matrix"));
    let order: Vec<usize> = (0..nc).collect();
    g.throughput(Throughput::Elements((nc * nc) as u64));
    let kernel = Kernel {
        kind: KernelKind::Gaussian,
        gamma: 0.05,
    };
    g.bench_function("Gaussian", |b| {
        b.iter(|| {
            CachedExact::new(&Cpu, &kernel, &xc, &order, 1, Formation::Whole)
                .expect("the cached kernel")
        })
    });
    g.finish();

    // the median bandwidth's distances: all pairs of a 2,000-row sample (dna's 180 features),
    // once per fit whose bandwidth is left to the median rule
    let mut g = c.benchmark_group("median_bandwidth_2000x180");
    g.sample_size(10);
    let (nm, dm) = (2000, 180);
    let xm: Vec<f64> = (0..nm * dm).map(|_| s.uniform()).collect();
    let xm = Features::Dense(DenseMatrix::new(nm, dm, xm).expect("a dense matrix"));
    g.throughput(Throughput::Elements((nm * (nm - 1) / 2) as u64));
    g.bench_function("Euclidean", |b| {
        b.iter(|| joker::kernel::median_distance(&xm, false, 1))
    });
    g.finish();

    let mut g = c.benchmark_group("trust_region_block_512");
    g.sample_size(20);
    Cpu.features(&map, &x, B, &mut phi);
    Cpu.gram(&phi, B, M, &mut kbb);
    let mut st = Stream::new(4, 1);
    for (name, loss) in [
        ("krr", Loss::SquaredError),
        ("l2_svc", Loss::SquaredHinge),
        ("klr", Loss::Logistic),
    ] {
        let coords: Vec<Coord> = (0..B)
            .map(|_| Coord {
                y: if st.uniform() < 0.5 { 1.0 } else { -1.0 },
                lam: 1.0 / 32.0,
                eps: <f32 as joker::Scalar>::gap_below(32.0),
            })
            .collect();
        let prob = BlockProblem {
            kbb: &kbb,
            loss,
            coords: &coords,
            exact: None,
        };
        let start: Vec<f64> = coords.iter().map(|k| loss.start(k, 50_000)).collect();
        g.bench_function(name, |b| {
            b.iter(|| {
                let mut a = start.clone();
                let mut gbar = vec![0.0; B];
                solve_column(&prob, &mut a, &mut gbar, 64.0, &TrustRegion::default())
            })
        });
    }
    g.finish();

    let mut g = c.benchmark_group("predict_10000_rows");
    g.sample_size(10);
    let mut s = Stream::new(5, 1);
    let xp = Features::Dense(
        DenseMatrix::new(
            NP,
            D,
            (0..NP * D)
                .map(|_| (s.uniform() * 4.0 - 2.0) as f32)
                .collect(),
        )
        .unwrap(),
    );
    let theta: Vec<f64> = (0..M).map(|j| (j as f64 * 0.37).sin()).collect();
    g.throughput(Throughput::Elements((NP * M * (2 * D + 2)) as u64));
    g.bench_function("rff_m10000", |b| {
        b.iter(|| {
            Predictor::Features {
                map: &map,
                theta: &theta,
            }
            .decision(&Cpu, &xp, 1)
        })
    });
    let support = Features::Dense(DenseMatrix::new(NS, D, xa[..NS * D].to_vec()).unwrap());
    let alpha: Vec<f64> = (0..NS).map(|i| (i as f64 * 0.11).cos()).collect();
    let kernel = Kernel {
        kind: KernelKind::Gaussian,
        gamma: 0.05,
    };
    g.throughput(Throughput::Elements((NP * NS * (3 * D + 2)) as u64));
    g.bench_function("exact_gaussian_2048_support", |b| {
        b.iter(|| {
            Predictor::Exact {
                kernel: &kernel,
                support: &support,
                rows: None,
                alpha: &alpha,
            }
            .decision(&Cpu, &xp, 1)
        })
    });
    g.finish();
}

/// Flop counts of the benchmarks with a meaningful rate: (group, function, flops, what).
fn flop_counts() -> Vec<(&'static str, String, f64, &'static str)> {
    let (b, m, d) = (B as f64, M as f64, D as f64);
    let mut v = vec![
        (
            "rff_block_512x10000x28_f32",
            "features".to_string(),
            2.0 * b * m * d,
            "2 b M d",
        ),
        (
            "rff_block_512x10000x28_f32",
            "gram".into(),
            b * (b + 1.0) * m,
            "b (b + 1) M (one triangle)",
        ),
        (
            "rff_block_512x10000x28_f32",
            "project".into(),
            2.0 * b * m,
            "2 b M",
        ),
        (
            "rff_block_512x10000x28_f32",
            "accumulate".into(),
            2.0 * b * m,
            "2 b M",
        ),
    ];
    for k in ["Gaussian", "Laplacian"] {
        v.push((
            "exact_tile_2048x512x28_f32",
            k.into(),
            2048.0 * b * 3.0 * d,
            "3 d per entry",
        ));
    }
    v.push((
        "cached_kernel_4096x28_f32",
        "Gaussian".into(),
        4096.0 * 4096.0 / 2.0 * 3.0 * d,
        "3 d per value formed (n^2 / 2)",
    ));
    v.push((
        "median_bandwidth_2000x180",
        "Euclidean".into(),
        2000.0 * 1999.0 / 2.0 * 2.0 * 180.0,
        "2 d per pair (f64)",
    ));
    let np = NP as f64;
    v.push((
        "predict_10000_rows",
        "rff_m10000".into(),
        np * m * (2.0 * d + 2.0),
        "n M (2 d + 2)",
    ));
    v.push((
        "predict_10000_rows",
        "exact_gaussian_2048_support".into(),
        np * NS as f64 * (3.0 * d + 2.0),
        "n s (3 d + 2)",
    ));
    v
}

/// Criterion's output folder (as criterion itself resolves it).
fn criterion_dir() -> std::path::PathBuf {
    if let Some(h) = std::env::var_os("CRITERION_HOME") {
        return h.into();
    }
    std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| "target".into())
        .join("criterion")
}

/// Mean time in seconds of one benchmark, from criterion's `estimates.json`.
fn mean_seconds(group: &str, function: &str) -> Option<f64> {
    let path = criterion_dir()
        .join(group)
        .join(function)
        .join("new/estimates.json");
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()?;
    Some(v["mean"]["point_estimate"].as_f64()? * 1e-9)
}

/// The closing table: each primitive's rate as a fraction of the GEMM measured in this run.
fn summary() {
    let Some(gemm_t) = mean_seconds("gemm_ceiling", "f32_faer") else {
        eprintln!("(no GEMM ceiling in this run: no fraction table)");
        return;
    };
    let ceiling = 2.0 * (NG as f64).powi(3) / gemm_t / 1e9;
    println!(
        "\nGEMM ceiling: f32 {NG}^3 with faer on {} threads: {ceiling:.1} GFLOP/s",
        rayon::current_num_threads()
    );
    println!("| primitive | mean time | flops | GFLOP/s | fraction of GEMM |");
    println!("|---|---|---|---|---|");
    let mut rows = Vec::new();
    for (group, function, flops, what) in flop_counts() {
        let Some(t) = mean_seconds(group, &function) else {
            continue;
        };
        let rate = flops / t / 1e9;
        println!(
            "| {group}/{function} | {:.3} ms | {what} | {rate:.1} | {:.1}% |",
            t * 1e3,
            100.0 * rate / ceiling
        );
        rows.push(
            serde_json::json!({"benchmark": format!("{group}/{function}"), "seconds": t,
            "flops": flops, "gflops": rate, "fraction_of_gemm": rate / ceiling}),
        );
    }
    for loss in ["krr", "l2_svc", "klr"] {
        if let Some(t) = mean_seconds("trust_region_block_512", loss) {
            println!(
                "| trust_region_block_512/{loss} | {:.3} ms | (iterative) | - | - |",
                t * 1e3
            );
            rows.push(serde_json::json!({"benchmark": format!("trust_region_block_512/{loss}"), "seconds": t}));
        }
    }
    let out = serde_json::json!({"gemm_gflops": ceiling, "threads": rayon::current_num_threads(), "rows": rows});
    let _ = std::fs::write(
        criterion_dir().join("joker-summary.json"),
        serde_json::to_string_pretty(&out).unwrap_or_default(),
    );
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    primitives(&mut c);
    c.final_summary();
    summary();
}

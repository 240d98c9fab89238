//! Criterion benchmarks of the hot primitives at the paper's inexact setting scaled to a
//! laptop (block 512, M = 10,000, d = 28, f32), and of the exact kernel tile and the block
//! solver. Throughput is reported in elements so that criterion prints rates; the GEMM
//! fraction is printed by `examples/bench_iteration.rs`, which measures the ceiling in the
//! same run.
//!
//! `cargo bench --bench primitives`

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use joker::backend::{Backend, cpu::Cpu};
use joker::features::{FeatureMap, FeatureSpec};
use joker::loss::{Coord, Loss};
use joker::rng::Stream;
use joker::solver::trust_region::{BlockProblem, TrustRegion, solve_column};
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

fn primitives(c: &mut Criterion) {
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
}

criterion_group!(benches, primitives);
criterion_main!(benches);

//! Time of one DBCD-TR iteration at the reference setting (block 512, M = 10,000, d = 28, f32)
//! and the rate of the feature + Gram part as a fraction of this machine's f32 GEMM rate,
//! measured in the same run. The fit runs twice: with the stages in sequence (for the breakdown)
//! and with the next block formed during the current solve (the default); both give the same
//! iterates.
//!
//! `cargo run --release --example bench_iteration [-- --block 512 --m 10000 --d 28 --iters 200
//! --tr-model gram|kernel|auto]` (default: the library's, `auto`)
//! Writes `bench-out/iteration.json`.

use std::time::Instant;

use joker::backend::{Backend, cpu::Cpu};
use joker::features::{FeatureMap, FeatureSpec};
use joker::rng::Stream;
use joker::*;

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map_or(default, |v| v.parse().expect("integer argument"))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> joker::Result<()> {
    let (b, m, d) = (arg("--block", 512), arg("--m", 10_000), arg("--d", 28));
    let iters = arg("--iters", 200);
    let n = arg("--n", 50_000);
    let threads = rayon::current_num_threads();
    let gemm = joker::linalg::gemm_gflops_f32(2048);

    // Primitive rates on one block.
    let mut s = Stream::new(7, 1);
    let xb: Vec<f32> = (0..b * d)
        .map(|_| (s.uniform() * 4.0 - 2.0) as f32)
        .collect();
    let spec = FeatureSpec {
        kernel: Kernel {
            kind: KernelKind::Gaussian,
            gamma: 1.0 / (2.0 * d as f64),
        },
        n_components: m,
        dim: d,
        seed: 3,
    };
    let map = FeatureMap::<f32>::new(spec)?;
    let mut phi = vec![0f32; b * m];
    let mut kbb = vec![0f64; b * b];
    let (mut tf, mut tg) = (Vec::new(), Vec::new());
    for _ in 0..11 {
        let t0 = Instant::now();
        Cpu.features(&map, &xb, b, &mut phi);
        let t1 = Instant::now();
        Cpu.gram(&phi, b, m, &mut kbb);
        tf.push((t1 - t0).as_secs_f64());
        tg.push(t1.elapsed().as_secs_f64());
    }
    let (tf, tg) = (median(tf), median(tg));
    // flops actually needed: projection 2 b M d; lower triangle of Phi Phi^T: b (b + 1) M
    let flops = 2.0 * (b * m * d) as f64 + (b * (b + 1) * m) as f64;
    let rate = flops / (tf + tg) / 1e9;

    // A fit on HIGGS-shaped synthetic data, timing iterations only (no monitoring inside).
    let mut x = Vec::with_capacity(n * d);
    let mut y = Vec::with_capacity(n);
    for _ in 0..n {
        let row: Vec<f64> = (0..d).map(|_| s.uniform() * 2.0 - 1.0).collect();
        let score: f64 = row
            .iter()
            .enumerate()
            .map(|(k, v)| ((k + 1) as f64 * v).sin())
            .sum::<f64>();
        y.push(if score > 0.0 { 1.0 } else { -1.0 });
        x.extend(row);
    }
    let data = Dataset::new(Features::Dense(DenseMatrix::new(n, d, x)?), y)?;
    let mut cfg = SolverConfig::default();
    if let Ok(v) = std::env::var("JOKER_CG_RTOL") {
        cfg.trust_region.cg_rtol = v.parse().expect("float");
    }
    if let Some(v) = std::env::args().skip_while(|a| a != "--tr-model").nth(1) {
        cfg.trust_region.model = TrModel::parse(&v).expect("--tr-model: gram, kernel or auto");
    }
    if let Ok(v) = std::env::var("JOKER_MAX_CG") {
        cfg.trust_region.max_cg_iter = v.parse().expect("integer");
    }
    let fit = |overlap: bool| {
        let cfg = SolverConfig {
            overlap,
            ..cfg.clone()
        };
        Joker::builder()
            .solver(cfg)
            .loss(Loss::SquaredHinge)
            .c(32.0)
            .n_components(m)
            .block_size(b)
            .max_iter(iters)
            .check_every(usize::MAX)
            .build()?
            .fit(&data)
    };
    // Stages one after the other first (for the breakdown), then with the next block's
    // features and Gram formed during the current solve (the default).
    let seq = fit(false)?;
    let model = fit(true)?;
    let ts = seq.training.timings;
    let per_seq = ts.per_iteration(seq.training.iterations);
    let t = model.training.timings;
    let per_iter = t.per_iteration(model.training.iterations);

    println!("machine: {threads} threads; f32 GEMM (faer, 2048^3): {gemm:.1} GFLOP/s");
    println!(
        "setting: block {b}, M {m}, d {d}, f32, n = {n}, L2-SVC, {} iterations",
        model.training.iterations
    );
    println!(
        "features {:.2} ms + Gram {:.2} ms = {:.1} GFLOP/s = {:.0}% of GEMM",
        tf * 1e3,
        tg * 1e3,
        rate,
        100.0 * rate / gemm
    );
    let ms = |v: f64| v / iters as f64 * 1e3;
    println!(
        "iteration, stages in sequence: {:.2} ms (block {:.2} ms, trust-region solve {:.2} ms, \
         theta update {:.2} ms)",
        per_seq * 1e3,
        ms(ts.block),
        ms(ts.solve),
        ms(ts.update)
    );
    println!(
        "iteration, next block formed during the solve (default): {:.2} ms (projection {:.2} ms, \
         solve with the next block beside it {:.2} ms, theta update {:.2} ms)",
        per_iter * 1e3,
        ms(t.block),
        ms(t.solve),
        ms(t.update)
    );
    assert_eq!(
        seq.dual, model.dual,
        "overlapping the stages changed the iterates"
    );
    println!(
        "default iteration / Gram alone (the Gram floor): {:.2}",
        per_iter / tg
    );
    println!(
        "final relative duality gap {:.4e} after {:.1} s",
        model.training.gap,
        t.block + t.solve + t.update
    );
    println!(
        "per block solve: {:.1} trust-region iterations, {:.1} CG iterations; model {}, {} Gram fallbacks",
        t.tr_iters as f64 / iters as f64,
        t.cg_iters as f64 / iters as f64,
        model.training.tr_model,
        t.gram_fallbacks
    );
    std::fs::create_dir_all("bench-out").ok();
    let out = serde_json::json!({
        "threads": threads, "gemm_f32_gflops": gemm, "block": b, "m": m, "d": d, "n": n,
        "features_ms": tf * 1e3, "gram_ms": tg * 1e3, "feature_gram_gflops": rate,
        "feature_gram_fraction_of_gemm": rate / gemm, "iteration_ms": per_iter * 1e3,
        "block_ms": t.block / iters as f64 * 1e3, "solve_ms": t.solve / iters as f64 * 1e3,
        "update_ms": t.update / iters as f64 * 1e3,
        "sequential_iteration_ms": per_seq * 1e3, "sequential_block_ms": ms(ts.block),
        "sequential_solve_ms": ms(ts.solve), "sequential_update_ms": ms(ts.update),
        "tr_model": model.training.tr_model, "gram_fallbacks": t.gram_fallbacks,
        "gap": model.training.gap, "iteration_over_gram_floor": per_iter / tg,
    });
    std::fs::write(
        "bench-out/iteration.json",
        serde_json::to_string_pretty(&out).unwrap(),
    )
    .ok();
    Ok(())
}

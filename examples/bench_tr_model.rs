//! The trust region's model curvature for random-feature fits, side by side: the Gram
//! `Phi_B Phi_B^T` against the exact kernel block `K(X_B, X_B)` (`TrModel::Kernel`), on the same
//! split, seed, kernel width and C, in one run. For each set and `M`: time per iteration,
//! Gram fallbacks, the duality gap and test metric reached, and the training time to reach a
//! duality gap and a test metric (within 0.1 points of accuracy or 0.5% of RMSE of the better
//! final metric of the two fits).
//!
//! ```sh
//! cargo run --release --example bench_tr_model                       # the real sets, M 2000 and 10000
//! cargo run --release --example bench_tr_model -- --sets ijcnn1 --m 2000,10000,100000 --seconds 120
//! cargo run --release --example bench_tr_model -- --sets HIGGS-like,SUSY-like,MSD-like --n 100000
//! cargo run --release --example bench_tr_model -- --device cuda:0    # both models on a GPU
//! ```
//! Writes `bench-out/tr_model.json`. Sets: `ijcnn1`, `a9a`, `w8a`, `cadata`, `covtype`,
//! `higgs`, `cpusmall` (from `JOKER_DATA_DIR`, default `../shared/datasets`) and the synthetic
//! `HIGGS-like`, `SUSY-like`, `MSD-like` (`--n` rows).

// the end-to-end benchmark's data preparation, of which this program uses a part
#[allow(dead_code)]
#[path = "bench/data.rs"]
mod data;
#[allow(dead_code)]
#[path = "bench/npy.rs"]
mod npy;

use std::path::PathBuf;
use std::time::Duration;

use data::{SHAPES, Split, Task};
use joker::*;

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

/// C of the classifiers and lambda of the regressors, as in the end-to-end benchmark.
fn regularisation(name: &str) -> f64 {
    match name {
        "ijcnn1" | "covtype" => 32.0,
        "w8a" => 8.0,
        "a9a" | "higgs" | "HIGGS-like" | "SUSY-like" => 1.0,
        _ => 0.1,
    }
}

fn dataset(x: &[f32], y: &[f64], d: usize) -> joker::Result<Dataset<f32>> {
    Dataset::new(
        Features::Dense(DenseMatrix::new(y.len(), d, x.to_vec())?),
        y.to_vec(),
    )
}

/// One fit's record: per-check `(train seconds, gap, metric)` and the totals.
#[derive(serde::Serialize)]
struct Fit {
    model: String,
    iterations: usize,
    ms_per_iteration: f64,
    tr_iters_per_block: f64,
    gram_fallbacks: usize,
    gap: f64,
    metric: f64,
    seconds: f64,
    history: Vec<(f64, f64, f64)>,
}

fn fit(
    split: &Split,
    name: &str,
    m: usize,
    model: TrModel,
    (seconds, device): (f64, Device),
) -> joker::Result<Fit> {
    let train = dataset(&split.xtr, &split.ytr, split.d)?;
    let test = dataset(&split.xte, &split.yte, split.d)?;
    let reg = regularisation(name);
    let mut cfg = SolverConfig::default();
    cfg.trust_region.model = model;
    let builder = Joker::builder().solver(cfg);
    let builder = match split.task {
        Task::Classification => builder.loss(Loss::SquaredHinge).c(reg),
        Task::Regression => builder.loss(Loss::SquaredError).lambda(reg),
    };
    let joker = builder
        .gamma(split.gamma)
        .n_components(m)
        .block_size(512.min(split.ntr()))
        .max_iter(1_000_000)
        .time_limit(Duration::from_secs_f64(seconds))
        .device(device)
        .build()?;
    let mut history = Vec::new();
    let fitted = joker.fit_with(
        &train,
        FitOptions {
            validation: Some(&test),
            progress: Some(Box::new(|p: &Progress| {
                // accuracy in percent, RMSE as it is
                let scale = if split.task == Task::Classification {
                    100.0
                } else {
                    1.0
                };
                let metric = p.validation.unwrap_or(f64::NAN) * scale;
                history.push((p.train_seconds, p.gap, metric));
                true
            })),
            ..Default::default()
        },
    )?;
    let t = &fitted.training;
    let last = history.last().copied().unwrap_or((0.0, f64::NAN, f64::NAN));
    Ok(Fit {
        model: t.tr_model.clone(),
        iterations: t.iterations,
        ms_per_iteration: t.timings.per_iteration(t.iterations) * 1e3,
        tr_iters_per_block: t.timings.tr_iters as f64 / t.iterations.max(1) as f64,
        gram_fallbacks: t.timings.gram_fallbacks,
        gap: last.1,
        metric: last.2,
        seconds: last.0,
        history,
    })
}

/// First training time at which `ok(gap, metric)` holds.
fn time_to(f: &Fit, ok: impl Fn(f64, f64) -> bool) -> Option<f64> {
    f.history.iter().find(|h| ok(h.1, h.2)).map(|h| h.0)
}

fn show(v: Option<f64>) -> String {
    v.map_or("-".into(), |s| format!("{s:.1} s"))
}

fn main() -> joker::Result<()> {
    let dir = PathBuf::from(
        std::env::var("JOKER_DATA_DIR").unwrap_or_else(|_| "../shared/datasets".into()),
    );
    let sets = arg("--sets").unwrap_or_else(|| "ijcnn1,a9a,w8a,cadata".into());
    let ms: Vec<usize> = arg("--m")
        .unwrap_or_else(|| "2000,10000".into())
        .split(',')
        .map(|v| v.parse().expect("--m: integers"))
        .collect();
    let seconds: f64 = arg("--seconds").map_or(60.0, |v| v.parse().expect("--seconds"));
    let n: usize = arg("--n").map_or(100_000, |v| v.parse().expect("--n"));
    let device: Device = arg("--device").map_or(Device::Cpu, |v| v.parse().expect("--device"));
    let gemm = joker::linalg::gemm_gflops_f32(2048);
    println!(
        "{} threads, f32 GEMM {gemm:.0} GFLOP/s; time limit {seconds} s per fit; device {device:?}",
        rayon::current_num_threads()
    );
    println!(
        "| set | M | model | ms / iteration | TR iters / block | Gram fallbacks | iterations | \
         final gap | final metric | time to gap 1e-2 | time to metric |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    let mut out = Vec::new();
    for name in sets.split(',') {
        let split = if let Some(shape) = SHAPES.iter().find(|s| s.name == name) {
            data::synthetic(*shape, n, 10_000, 1)?
        } else {
            match data::real(&dir, name, task_of(name)) {
                Some(s) => s?,
                None => {
                    eprintln!("{name}: not found in {}, skipped", dir.display());
                    continue;
                }
            }
        };
        for &m in &ms {
            let fits = [
                fit(&split, name, m, TrModel::Gram, (seconds, device))?,
                fit(&split, name, m, TrModel::Kernel, (seconds, device))?,
            ];
            let classification = split.task == Task::Classification;
            let best = if classification {
                fits.iter().map(|f| f.metric).fold(f64::MIN, f64::max)
            } else {
                fits.iter().map(|f| f.metric).fold(f64::MAX, f64::min)
            };
            for f in &fits {
                let metric_ok = |v: f64| {
                    if classification {
                        v >= best - 0.1
                    } else {
                        v <= best * 1.005
                    }
                };
                println!(
                    "| {name} | {m} | {} | {:.1} | {:.1} | {} | {} | {:.2e} | {:.4} | {} | {} |",
                    f.model,
                    f.ms_per_iteration,
                    f.tr_iters_per_block,
                    f.gram_fallbacks,
                    f.iterations,
                    f.gap,
                    f.metric,
                    show(time_to(f, |g, _| g <= 1e-2)),
                    show(time_to(f, |_, v| metric_ok(v))),
                );
            }
            out.push(serde_json::json!({"set": name, "m": m, "fits": fits}));
        }
    }
    std::fs::create_dir_all("bench-out").ok();
    std::fs::write(
        "bench-out/tr_model.json",
        serde_json::to_string_pretty(&out).expect("json"),
    )
    .ok();
    Ok(())
}

fn task_of(name: &str) -> Task {
    match name {
        "cadata" | "cpusmall" => Task::Regression,
        _ => Task::Classification,
    }
}

//! The doubly stochastic solvers (DSG, UDSG, CDSG) beside DBCD-TR on the same split, kernel
//! width, C and number of random features `M` (for DSG the cap on the opened features). For
//! each set: DBCD-TR runs to its duality-gap tolerance (or the time budget) and its final test
//! accuracy is the reference; each doubly stochastic solver runs for the time budget. Reported:
//! training seconds (checks excluded) to a test accuracy within 0.5 points of the reference,
//! the best and final test accuracy, and the steps or iterations done.
//!
//! ```sh
//! cargo run --release --example bench_dsg                         # a9a and ijcnn1, M 2048, 60 s
//! cargo run --release --example bench_dsg -- --sets a9a --m 4096 --seconds 120 --loss klr
//! cargo run --release --example bench_dsg -- --sets ijcnn1 --theta 10000 --t0 1000 --block 64
//! ```
//! `--theta`, `--t0` (step `theta / (t + t0)`), `--block` (features per step) and `--batch`
//! (rows per step) set the doubly stochastic solvers; their defaults are `DsgConfig`'s.
//! Sets: `a9a`, `ijcnn1` (LIBSVM files under `JOKER_DATA_DIR`, default `../shared/datasets`,
//! read in place). Writes `bench-out/dsg.json`.

use std::path::PathBuf;
use std::time::Duration;

use joker::io::{LibsvmOptions, read_libsvm};
use joker::*;

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

/// C of the classifiers, as in the other benchmarks.
fn c_of(name: &str) -> f64 {
    match name {
        "ijcnn1" => 32.0,
        _ => 1.0,
    }
}

/// One fit's record.
#[derive(serde::Serialize)]
struct Fit {
    solver: String,
    iterations: usize,
    seconds: f64,
    /// `(training seconds, test accuracy)` at every check.
    curve: Vec<(f64, f64)>,
    final_accuracy: f64,
    best_accuracy: f64,
    /// Training seconds to within 0.5 points of DBCD-TR's final accuracy.
    seconds_to_target: Option<f64>,
}

fn fit(est: &Joker, train: &Dataset<f32>, test: &Dataset<f32>, solver: &str) -> joker::Result<Fit> {
    let mut curve = Vec::new();
    let model = est.fit_with(
        train,
        FitOptions {
            validation: Some(test),
            progress: Some(Box::new(|p: &Progress| {
                curve.push((p.train_seconds, p.validation.unwrap_or(f64::NAN)));
                true
            })),
            ..FitOptions::default()
        },
    )?;
    let final_accuracy = model.score(test)?;
    Ok(Fit {
        solver: solver.into(),
        iterations: model.training.iterations,
        seconds: model.training.seconds,
        best_accuracy: curve.iter().map(|c| c.1).fold(final_accuracy, f64::max),
        curve,
        final_accuracy,
        seconds_to_target: None,
    })
}

fn main() -> joker::Result<()> {
    let dir = PathBuf::from(
        std::env::var("JOKER_DATA_DIR").unwrap_or_else(|_| "../shared/datasets".into()),
    )
    .join("libsvm");
    let sets = arg("--sets").unwrap_or_else(|| "a9a,ijcnn1".into());
    let m: usize = arg("--m").map_or(2048, |v| v.parse().expect("--m"));
    let seconds: f64 = arg("--seconds").map_or(60.0, |v| v.parse().expect("--seconds"));
    let loss = match arg("--loss").as_deref() {
        Some("klr") => Loss::Logistic,
        Some("l1-svc") => Loss::Hinge,
        _ => Loss::SquaredHinge,
    };
    let mut out = Vec::new();
    println!(
        "| set | solver | iterations | test accuracy (final / best) | s to within 0.5 pt of DBCD-TR |"
    );
    println!("|---|---|---|---|---|");
    for name in sets.split(',') {
        let train: Dataset<f32> = read_libsvm(&dir.join(name), &LibsvmOptions::default())?;
        let d = train.x.ncols();
        let test: Dataset<f32> = read_libsvm(
            &dir.join(format!("{name}.t")),
            &LibsvmOptions {
                n_features: Some(d),
                ..Default::default()
            },
        )?;
        let base = || {
            Joker::builder()
                .loss(loss)
                .c(c_of(name))
                .n_components(m)
                .time_limit(Duration::from_secs_f64(seconds))
                .device(Device::Cpu)
        };
        let mut fits = vec![fit(
            &base().max_iter(1_000_000).build()?,
            &train,
            &test,
            "dbcd",
        )?];
        for v in ["dsg", "udsg", "cdsg"] {
            let mut cfg = DsgConfig::named(v).expect("a variant");
            let num = |name: &str| arg(name).map(|v| v.parse::<f64>().expect(name));
            cfg.step.theta = num("--theta").unwrap_or(cfg.step.theta);
            cfg.step.t0 = num("--t0").unwrap_or(cfg.step.t0);
            cfg.feature_block = num("--block").map_or(cfg.feature_block, |v| v as usize);
            cfg.batch_size = num("--batch").map_or(cfg.batch_size, |v| v as usize);
            let est = base()
                .dsg(cfg)
                .max_iter(1_000_000)
                .check_every(100)
                .build()?;
            fits.push(fit(&est, &train, &test, v)?);
        }
        let target = fits[0].final_accuracy - 0.005;
        for f in fits.iter_mut() {
            f.seconds_to_target = f.curve.iter().find(|c| c.1 >= target).map(|c| c.0);
            println!(
                "| {name} | {} | {} | {:.2}% / {:.2}% | {} |",
                f.solver,
                f.iterations,
                100.0 * f.final_accuracy,
                100.0 * f.best_accuracy,
                f.seconds_to_target
                    .map_or("not reached".into(), |s| format!("{s:.1}"))
            );
        }
        out.push(serde_json::json!({ "set": name, "m": m, "loss": loss.name(), "seconds": seconds, "fits": fits }));
    }
    std::fs::create_dir_all("bench-out").ok();
    std::fs::write(
        "bench-out/dsg.json",
        serde_json::to_string_pretty(&out).expect("json"),
    )
    .ok();
    Ok(())
}

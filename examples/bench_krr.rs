//! Exact KRR on the UCI regression sets: ASkotch, Nystrom-PCG and DBCD-TR (Joker-KRR) side by
//! side with scikit-learn's `KernelRidge` (dense solve), on the same preprocessed split.
//!
//! `JOKER_PYTHON=.venv-peers/bin/python cargo run --release --example bench_krr [-- --n 8000]`
//!
//! Per data set (cadata with rows `i % 5 == 0` as the test set; `uci_gp/<name>` with split 0
//! of `test_mask`; training rows subsampled to `--n`
//! with a fixed seed, features and target z-scored with training statistics, Gaussian kernel
//! with the median heuristic, `lambda = 1e-6 n` as in Falkon-style normalisation): time until
//! the relative residual `||(K + lambda I) w - y|| / ||y||` falls below 1e-2 and 1e-4 (checked
//! every few iterations, checks excluded from the time), and the test RMSE at the end of the
//! budget. Writes `bench-out/krr.json` and prints a markdown table.

use std::io::Write;
use std::time::{Duration, Instant};

use joker::backend::cpu::Cpu;
use joker::io::{CsvOptions, read_csv};
use joker::kernel::{KernelKind, median_distance};
use joker::solver::decision::Predictor;
use joker::solver::krr::{KrrConfig, KrrMethod, KrrProblem, solve_krr};
use joker::{Dataset, DenseMatrix, Features, Kernel};

fn arg(name: &str, default: usize) -> usize {
    let a: Vec<String> = std::env::args().collect();
    a.iter()
        .position(|x| x == name)
        .and_then(|i| a.get(i + 1))
        .map_or(default, |v| v.parse().unwrap())
}

struct Split {
    xtr: Features<f64>,
    ytr: Vec<f64>,
    xte: Features<f64>,
    yte: Vec<f64>,
}

fn prepare(dir: &std::path::Path, name: &str, nmax: usize) -> joker::Result<Split> {
    // cadata: its own CSV with a header, rows i % 5 == 0 are the test set (as in the tests);
    // the UCI sets: split 0 of test_mask (its first column).
    let (data, is_test): (Dataset<f64>, Vec<bool>) = if name == "cadata" {
        let d = read_csv(
            &dir.join("../cadata/cal_housing.data"),
            &CsvOptions::default(),
        )?;
        let t = (0..d.len()).map(|i| i % 5 == 0).collect();
        (d, t)
    } else {
        let no_header = CsvOptions {
            has_header: Some(false),
            ..Default::default()
        };
        let d = read_csv(&dir.join(name).join("data.csv.gz"), &no_header)?;
        let first = CsvOptions {
            label_column: joker::io::LabelColumn::First,
            ..no_header
        };
        let mask = read_csv::<f64>(&dir.join(name).join("test_mask.csv.gz"), &first)?;
        (d, mask.y.iter().map(|&v| v != 0.0).collect())
    };
    let Features::Dense(x) = &data.x else {
        unreachable!()
    };
    let d = x.ncols();
    let (mut tr, mut te): (Vec<usize>, Vec<usize>) = (0..data.len()).partition(|&i| !is_test[i]);
    joker::rng::Stream::new(7, 1).shuffle(&mut tr);
    tr.truncate(nmax);
    te.truncate(nmax / 2);
    let (mut mean, mut sd) = (vec![0.0; d], vec![0.0; d]);
    let nt = tr.len() as f64;
    for &i in &tr {
        for (m, v) in mean.iter_mut().zip(x.row(i)) {
            *m += v / nt;
        }
    }
    for &i in &tr {
        for ((s, v), m) in sd.iter_mut().zip(x.row(i)).zip(&mean) {
            *s += (v - m).powi(2) / nt;
        }
    }
    let sd: Vec<f64> = sd
        .iter()
        .map(|v| if *v > 0.0 { v.sqrt() } else { 1.0 })
        .collect();
    let ym = tr.iter().map(|&i| data.y[i]).sum::<f64>() / tr.len() as f64;
    let ys = (tr.iter().map(|&i| (data.y[i] - ym).powi(2)).sum::<f64>() / tr.len() as f64).sqrt();
    let take = |rows: &[usize]| -> joker::Result<(Features<f64>, Vec<f64>)> {
        let (mean, sd) = (&mean, &sd);
        let v = rows
            .iter()
            .flat_map(|&i| (0..d).map(move |j| (x.row(i)[j] - mean[j]) / sd[j]))
            .collect();
        Ok((
            Features::Dense(DenseMatrix::new(rows.len(), d, v)?),
            rows.iter().map(|&i| (data.y[i] - ym) / ys).collect(),
        ))
    };
    let (xtr, ytr) = take(&tr)?;
    let (xte, yte) = take(&te)?;
    Ok(Split { xtr, ytr, xte, yte })
}

fn write_csv(path: &std::path::Path, x: &Features<f64>, y: &[f64]) {
    let Features::Dense(m) = x else {
        unreachable!()
    };
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    for (i, yi) in y.iter().enumerate() {
        let row: Vec<String> = m
            .row(i)
            .iter()
            .chain(std::iter::once(yi))
            .map(|v| format!("{v}"))
            .collect();
        writeln!(f, "{}", row.join(",")).unwrap();
    }
}

fn main() -> joker::Result<()> {
    let nmax = arg("--n", 8000);
    let budget = Duration::from_secs(arg("--seconds", 60) as u64);
    let dir = std::env::var("JOKER_DATA_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| "../shared/datasets".into())
        .join("uci_gp");
    let mut rows = Vec::new();
    println!(
        "| data | n train / test | d | method | time to residual 1e-2 | time to 1e-4 | test RMSE (z units) | fit time |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for name in ["cadata", "kin40k", "protein", "keggundirected"] {
        let present =
            dir.join(name).exists() || (name == "cadata" && dir.join("../cadata").exists());
        if !present {
            continue;
        }
        let s = prepare(&dir, name, nmax)?;
        let n = s.ytr.len();
        let gamma = {
            let m = median_distance(&s.xtr, false, 1);
            0.5 / (m * m)
        };
        let kernel = Kernel {
            kind: KernelKind::Gaussian,
            gamma,
        };
        let lambda = 1e-6 * n as f64;
        let prob = KrrProblem {
            x: &s.xtr,
            kernel: &kernel,
            y: &s.ytr,
            lambda,
        };
        let rmse = |w: &[f64]| {
            let p = Predictor::Exact {
                kernel: &kernel,
                support: &s.xtr,
                rows: None,
                alpha: w,
            }
            .decision(&Cpu, &s.xte, 1);
            joker::model::rmse(&p, &s.yte)
        };
        let configs = [
            (
                "ASkotch (B 10, r 100)",
                KrrConfig {
                    method: KrrMethod::ASkotch,
                    blocks: 10,
                    rank: 100,
                    ..Default::default()
                },
            ),
            (
                "ASkotch (B 10, r 100, stored preconditioners)",
                KrrConfig {
                    method: KrrMethod::ASkotch,
                    blocks: 10,
                    rank: 100,
                    store_preconditioners: true,
                    ..Default::default()
                },
            ),
            (
                "Skotch (B 10, r 100)",
                KrrConfig {
                    method: KrrMethod::Skotch,
                    blocks: 10,
                    rank: 100,
                    ..Default::default()
                },
            ),
            (
                "Nystrom-PCG (r 100)",
                KrrConfig {
                    method: KrrMethod::NystromPcg,
                    rank: 100,
                    ..Default::default()
                },
            ),
        ];
        for (label, mut cfg) in configs {
            cfg.max_iter = 1_000_000;
            cfg.tol = 1e-4;
            cfg.check_every = if cfg.method == KrrMethod::NystromPcg {
                1
            } else {
                10
            };
            cfg.time_limit = Some(budget);
            let start = Instant::now();
            let (mut t2, mut t4) = (None, None);
            let sol = solve_krr(&Cpu, &prob, &cfg, |p, _| {
                // p.seconds leaves out the residual checks (each a full pass over K)
                let t = p.seconds;
                if p.rel_residual <= 1e-2 && t2.is_none() {
                    t2 = Some(t);
                }
                if p.rel_residual <= 1e-4 && t4.is_none() {
                    t4 = Some(t);
                }
                true
            })?;
            let fit = start.elapsed().as_secs_f64();
            let e = rmse(&sol.w);
            let f = |t: Option<f64>| t.map_or("not reached".to_string(), |v| format!("{v:.1} s"));
            println!(
                "| {name} | {n} / {} | {} | {label} | {} | {} | {e:.4} | {fit:.1} s |",
                s.yte.len(),
                s.xtr.ncols(),
                f(t2),
                f(t4)
            );
            rows.push(serde_json::json!({"data": name, "n": n, "method": label, "t_1e-2": t2, "t_1e-4": t4, "rmse": e, "fit_s": fit, "iters": sol.iters}));
        }
        // Joker-KRR (DBCD-TR, exact kernel)
        let start = Instant::now();
        let model = joker::Joker::builder()
            .loss(joker::Loss::SquaredError)
            .exact()
            .gamma(gamma)
            .lambda(lambda)
            .precision(joker::Precision::F64)
            .standardize(false)
            .normalize_target(false)
            .block_size(1024.min(n))
            .tol(0.0)
            .time_limit(budget)
            .max_iter(1_000_000)
            .build()?
            .fit(&Dataset::new(s.xtr.clone(), s.ytr.clone())?)?;
        let fit = start.elapsed().as_secs_f64();
        let w = model.dual.clone().unwrap_or_default();
        let (res, _, _) = prob.assess(&Cpu, &w);
        let e = rmse(&w);
        println!(
            "| {name} | {n} / {} | {} | Joker-KRR DBCD-TR (block 1024) | - | - (residual {res:.1e} at the end) | {e:.4} | {fit:.1} s |",
            s.yte.len(),
            s.xtr.ncols()
        );
        rows.push(serde_json::json!({"data": name, "n": n, "method": "joker-dbcd", "final_residual": res, "rmse": e, "fit_s": fit}));
        // scikit-learn KernelRidge
        if let Ok(py) = std::env::var("JOKER_PYTHON") {
            let tmp = std::env::temp_dir().join(format!("joker-krr-{}", std::process::id()));
            std::fs::create_dir_all(&tmp).ok();
            write_csv(&tmp.join("tr.csv"), &s.xtr, &s.ytr);
            write_csv(&tmp.join("te.csv"), &s.xte, &s.yte);
            let out = std::process::Command::new(py)
                .arg("scripts/peers/kernel_ridge.py")
                .arg(tmp.join("tr.csv"))
                .arg(tmp.join("te.csv"))
                .args([gamma.to_string(), lambda.to_string()])
                .output();
            if let Some(o) = out.ok().filter(|o| o.status.success()) {
                let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_default();
                println!(
                    "| {name} | {n} / {} | {} | scikit-learn KernelRidge (dense) | - | exact | {:.4} | {:.1} s |",
                    s.yte.len(),
                    s.xtr.ncols(),
                    v["rmse"].as_f64().unwrap_or(f64::NAN),
                    v["fit_s"].as_f64().unwrap_or(f64::NAN)
                );
                rows.push(serde_json::json!({"data": name, "n": n, "method": "sklearn-kernel-ridge", "peer": v}));
            }
        }
    }
    std::fs::create_dir_all("bench-out").ok();
    std::fs::write(
        "bench-out/krr.json",
        serde_json::to_string_pretty(&rows).unwrap(),
    )
    .ok();
    Ok(())
}

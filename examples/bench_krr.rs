//! Exact KRR on the UCI regression sets: ASkotch, Nystrom-PCG and DBCD-TR (Joker-KRR) side by
//! side with scikit-learn's `KernelRidge` (dense solve), on the same preprocessed split.
//!
//! `JOKER_PYTHON=.venv-peers/bin/python cargo run --release --example bench_krr [-- --n 8000]
//! [--seconds 60] [--data kin40k] [--methods askotch,askotch-stored,skotch,pcg,dbcd,sklearn]`
//!
//! The dense Cholesky row always runs (it sets the target); scikit-learn is skipped, with a
//! row that says so, where its two `n x n` matrices would not fit in the memory available.
//!
//! Per data set (cadata with rows `i % 5 == 0` as the test set; `uci_gp/<name>` with split 0
//! of `test_mask`; training rows subsampled to `--n`
//! with a fixed seed, features and target z-scored with training statistics, Gaussian kernel
//! with the median heuristic, `lambda = 1e-6 n` as in Falkon-style normalisation; test rows
//! capped at 5,000; a budget of `--seconds` of solver time per method, the checks excluded): time until
//! the relative residual `||(K + lambda I) w - y|| / ||y||` falls below 1e-2 and 1e-4 (checked
//! every few iterations, checks excluded from the time), until the test RMSE comes within 1% of
//! the exact solution's (a dense Cholesky solve in f64, also timed), and the test RMSE at the
//! end of the budget. Writes `bench-out/krr.json` and prints a markdown table.

use std::io::Write;
use std::time::{Duration, Instant};

use faer::dyn_stack::{MemBuffer, MemStack};
use faer::linalg::cholesky::llt::factor::{cholesky_in_place, cholesky_in_place_scratch};
use joker::backend::Backend;
use joker::backend::cpu::Cpu;
use joker::backend::predict::Predictor;
use joker::io::{CsvOptions, read_csv};
use joker::kernel::{KernelKind, median_distance};
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
    te.truncate((nmax / 2).min(5000));
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

/// One method's line of the table.
struct Line {
    method: String,
    t2: Option<f64>,
    t4: Option<f64>,
    t_rmse: Option<f64>,
    /// Replaces the residual columns (methods that do not report the residual as they go).
    residual_note: Option<String>,
    rmse: f64,
    fit_s: f64,
    iters: Option<usize>,
    /// Why the method did not run (its memory would not fit), printed in place of its results.
    skipped: Option<String>,
}

/// Bytes of memory available now (`MemAvailable` of `/proc/meminfo`), if known: the dense
/// rows are skipped where their `n x n` matrix would not fit.
fn available_bytes() -> Option<f64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024.0)
}

/// Test RMSE of the exact solution `(K + lambda I)^-1 y`, by a dense Cholesky solve in f64.
/// `K + lambda I` is formed in place, a slab of rows at a time, so the peak is one `n x n`
/// matrix (12.8 GB at n = 40,000) and not two.
fn dense_rmse(s: &Split, kernel: &Kernel, lambda: f64) -> f64 {
    let n = s.ytr.len();
    let d = s.xtr.ncols();
    let mut x = vec![0.0; n * d];
    s.xtr.gather_dense(&(0..n).collect::<Vec<_>>(), &mut x);
    let mut a = faer::Mat::<f64>::zeros(n, n);
    let slab = 512.min(n);
    let mut k = vec![0.0; slab * n];
    for i0 in (0..n).step_by(slab) {
        let rows = slab.min(n - i0);
        Cpu.kernel_tile(
            kernel,
            &x[i0 * d..(i0 + rows) * d],
            rows,
            &x,
            n,
            d,
            &mut k[..rows * n],
        );
        // K is symmetric: row i of the slab is column i of the column-major matrix
        for r in 0..rows {
            let col = a.col_as_slice_mut(i0 + r);
            col.copy_from_slice(&k[r * n..(r + 1) * n]);
            col[i0 + r] += lambda;
        }
    }
    drop(k);
    // factor in place (faer's `llt` would copy): L overwrites the lower triangle, which is all
    // the triangular solves below read
    let par = faer::Par::rayon(0);
    let mut mem = MemBuffer::new(cholesky_in_place_scratch::<f64>(n, par, Default::default()));
    let factored = cholesky_in_place(
        a.as_mut(),
        Default::default(),
        par,
        MemStack::new(&mut mem),
        Default::default(),
    );
    if factored.is_err() {
        return f64::NAN;
    }
    let l = a.as_ref();
    let mut w = faer::Mat::<f64>::from_fn(n, 1, |i, _| s.ytr[i]);
    faer::linalg::triangular_solve::solve_lower_triangular_in_place(l, w.as_mut(), par);
    faer::linalg::triangular_solve::solve_upper_triangular_in_place(l.transpose(), w.as_mut(), par);
    let w: Vec<f64> = (0..n).map(|i| w[(i, 0)]).collect();
    let p = Predictor::Exact {
        kernel,
        support: &s.xtr,
        rows: None,
        alpha: &w,
    }
    .decision(&Cpu, &s.xte, 1);
    joker::model::rmse(&p, &s.yte)
}

/// The wall-clock guard of a method, in budgets: the budget itself is solver time, and at large
/// `n` the checks (a full pass over `K` for the residual) take longer than the steps between
/// them.
const WALL_GUARD: u32 = 10;

fn main() -> joker::Result<()> {
    let nmax = arg("--n", 8000);
    let budget = Duration::from_secs(arg("--seconds", 60) as u64);
    let dir = std::env::var("JOKER_DATA_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| "../shared/datasets".into())
        .join("uci_gp");
    let mut rows = Vec::new();
    println!(
        "| data | n train / test | d | method | time to residual 1e-2 | time to 1e-4 | time to test RMSE within 1% of exact | test RMSE (z units) | fit time |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    let only = std::env::args().skip_while(|a| a != "--data").nth(1);
    let methods = std::env::args().skip_while(|a| a != "--methods").nth(1);
    let wanted = |key: &str| {
        methods
            .as_deref()
            .is_none_or(|m| m.split(',').any(|k| k == key))
    };
    for name in ["cadata", "kin40k", "protein", "keggundirected"] {
        if only.as_deref().is_some_and(|o| o != name) {
            continue;
        }
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
        // The exact solution by a dense Cholesky solve (f64): its test RMSE sets the target
        // "within 1% of the exact test RMSE" of the time-to-accuracy column.
        let t0 = Instant::now();
        let exact_rmse = dense_rmse(&s, &kernel, lambda);
        let dense_s = t0.elapsed().as_secs_f64();
        let target = exact_rmse * 1.01;
        let mut results: Vec<Line> = Vec::new();
        let configs = [
            (
                "askotch",
                "ASkotch (B 10, r 100)",
                KrrConfig {
                    method: KrrMethod::ASkotch,
                    blocks: 10,
                    rank: 100,
                    ..Default::default()
                },
            ),
            (
                "askotch-stored",
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
                "skotch",
                "Skotch (B 10, r 100)",
                KrrConfig {
                    method: KrrMethod::Skotch,
                    blocks: 10,
                    rank: 100,
                    ..Default::default()
                },
            ),
            (
                "pcg",
                "Nystrom-PCG (r 100)",
                KrrConfig {
                    method: KrrMethod::NystromPcg,
                    rank: 100,
                    ..Default::default()
                },
            ),
        ];
        for (key, label, mut cfg) in configs {
            if !wanted(key) {
                continue;
            }
            cfg.max_iter = 1_000_000;
            cfg.tol = 1e-4;
            cfg.check_every = if cfg.method == KrrMethod::NystromPcg {
                1
            } else {
                10
            };
            // the budget is solver time (checks excluded), enforced by the callback; the wall
            // limit only guards against a method that stops checking
            cfg.time_limit = Some(WALL_GUARD * budget);
            let start = Instant::now();
            let (mut t2, mut t4, mut tr) = (None, None, None);
            let sol = solve_krr(&Cpu, &prob, &cfg, |p, w| {
                // p.seconds leaves out the checks: the residual (a full pass over K) and this
                // callback's test RMSE
                let t = p.seconds;
                if p.rel_residual <= 1e-2 && t2.is_none() {
                    t2 = Some(t);
                }
                if p.rel_residual <= 1e-4 && t4.is_none() {
                    t4 = Some(t);
                }
                if tr.is_none() && rmse(w) <= target {
                    tr = Some(t);
                }
                t < budget.as_secs_f64()
            })?;
            results.push(Line {
                method: label.into(),
                t2,
                t4,
                t_rmse: tr,
                residual_note: None,
                rmse: rmse(&sol.w),
                fit_s: start.elapsed().as_secs_f64(),
                iters: Some(sol.iters),
                skipped: None,
            });
        }
        if wanted("dbcd") {
            // Joker-KRR (DBCD-TR, exact kernel), scored on the test set at every check
            let start = Instant::now();
            let test = Dataset::new(s.xte.clone(), s.yte.clone())?;
            let mut tr = None;
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
                .time_limit(WALL_GUARD * budget)
                .max_iter(1_000_000)
                .build()?
                .fit_with(
                    &Dataset::new(s.xtr.clone(), s.ytr.clone())?,
                    joker::FitOptions {
                        validation: Some(&test),
                        progress: Some(Box::new(|p: &joker::Progress| {
                            if tr.is_none() && p.validation.is_some_and(|v| v <= target) {
                                tr = Some(p.train_seconds);
                            }
                            p.train_seconds < budget.as_secs_f64()
                        })),
                        ..Default::default()
                    },
                )?;
            let fit = start.elapsed().as_secs_f64();
            let w = model.dual.clone().unwrap_or_default();
            let (res, _, _) = prob.assess(&Cpu, &w);
            results.push(Line {
                method: "Joker-KRR DBCD-TR (block 1024)".into(),
                t2: None,
                t4: None,
                t_rmse: tr,
                residual_note: Some(format!("residual {res:.1e} at the end")),
                rmse: rmse(&w),
                fit_s: fit,
                iters: Some(model.training.iterations),
                skipped: None,
            });
        }
        results.push(Line {
            method: "dense Cholesky (f64, joker's own reference)".into(),
            t2: None,
            t4: None,
            t_rmse: Some(dense_s),
            residual_note: Some("exact".into()),
            rmse: exact_rmse,
            fit_s: dense_s,
            iters: None,
            skipped: None,
        });
        // scikit-learn KernelRidge;
        // KernelRidge holds K and the copy scipy's solve makes: two n x n matrices in f64
        let sk_bytes = 2.0 * (n as f64).powi(2) * 8.0;
        let sk_fits = available_bytes().is_none_or(|a| sk_bytes * 1.1 < a);
        let python = std::env::var("JOKER_PYTHON")
            .ok()
            .filter(|_| wanted("sklearn"));
        if python.is_some() && !sk_fits {
            results.push(Line {
                method: "scikit-learn KernelRidge (dense)".into(),
                t2: None,
                t4: None,
                t_rmse: None,
                residual_note: None,
                rmse: f64::NAN,
                fit_s: f64::NAN,
                iters: None,
                skipped: Some(format!(
                    "skipped: needs about {:.0} GB, {:.0} GB available",
                    sk_bytes / 1e9,
                    available_bytes().unwrap_or(0.0) / 1e9
                )),
            });
        }
        if let Some(py) = python.filter(|_| sk_fits) {
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
                let fit_s = v["fit_s"].as_f64().unwrap_or(f64::NAN);
                results.push(Line {
                    method: "scikit-learn KernelRidge (dense)".into(),
                    t2: None,
                    t4: None,
                    t_rmse: Some(fit_s),
                    residual_note: Some("exact".into()),
                    rmse: v["rmse"].as_f64().unwrap_or(f64::NAN),
                    fit_s,
                    iters: None,
                    skipped: None,
                });
            }
        }
        let f = |t: Option<f64>| t.map_or("not reached".to_string(), |v| format!("{v:.1} s"));
        for r in &results {
            if let Some(why) = &r.skipped {
                println!(
                    "| {name} | {n} / {} | {} | {} | - | - | {why} | - | - |",
                    s.yte.len(),
                    s.xtr.ncols(),
                    r.method
                );
                rows.push(serde_json::json!({"data": name, "n": n, "method": r.method,
                    "skipped": why}));
                continue;
            }
            let (c2, c4) = match &r.residual_note {
                Some(note) => ("-".to_string(), format!("- ({note})")),
                None => (f(r.t2), f(r.t4)),
            };
            println!(
                "| {name} | {n} / {} | {} | {} | {c2} | {c4} | {} | {:.4} | {:.1} s |",
                s.yte.len(),
                s.xtr.ncols(),
                r.method,
                f(r.t_rmse),
                r.rmse,
                r.fit_s
            );
            rows.push(serde_json::json!({"data": name, "n": n, "method": r.method,
                "t_1e-2": r.t2, "t_1e-4": r.t4, "t_rmse_1pct": r.t_rmse, "rmse": r.rmse,
                "exact_rmse": exact_rmse, "fit_s": r.fit_s, "iters": r.iters}));
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

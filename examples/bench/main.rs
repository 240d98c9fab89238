//! End-to-end benchmark: test metric, fit time, predict time and peak resident memory of joker
//! and of the systems users would otherwise reach for, side by side in one run, on the real
//! sets in `../shared/datasets` and on synthetic sets with the shapes of the paper's large data.
//!
//! ```sh
//! bash scripts/peers/install-bench.sh             # the peers, pinned, in .venv-bench
//! cargo run --release --example bench             # everything (about an hour on 2 cores)
//! cargo run --release --example bench -- --suites real --datasets ijcnn1,a9a
//! cargo run --release --example bench -- --smoke  # seconds: a tiny synthetic set (CI)
//! cargo run --release --example bench -- --suites converge   # time to accuracy at 100k rows
//! ```
//!
//! Every fit runs in its own process (joker: this program with `--job`; peers:
//! `scripts/peers/bench_peer.py`), so that peak RSS (`VmHWM`, whole process,
//! data included) belongs to one fit. All systems read the same prepared `.npy` split (dense,
//! z-scored with training statistics) and get the same Gaussian kernel width (median
//! heuristic on the training set) and the same C or lambda. Fit and predict times cover the
//! fit and predict calls only; joker's fit time leaves out its monitoring passes (objective,
//! duality gap, test metric at checks), which do not change its iterates. Results go to
//! `<out>/results.json` (written after every job: nothing is lost to an interruption),
//! `<out>/results.md` (the tables, medians over `--repeats` runs) and SVG figures.

mod data;
mod npy;
mod svg;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clap::Parser;
use data::{SHAPES, Split, Task};
use serde::{Deserialize, Serialize};

#[derive(Parser, Debug)]
#[command(about = "joker's end-to-end benchmark against its peers")]
struct Args {
    /// Suites to run: real (the real data sets), memory (memory and time versus M on ijcnn1),
    /// scaling (synthetic HIGGS/SUSY/MSD shapes, time and memory versus n); converge (not in
    /// the default: joker with a budget of many passes on the synthetic shapes at
    /// `--converge-n` rows, its test metric along the fit, against the peers).
    #[arg(long, value_delimiter = ',', default_value = "real,memory,scaling")]
    suites: Vec<String>,
    /// Restrict the real suite to these data sets (ijcnn1, a9a, w8a, covtype, higgs, cadata,
    /// cpusmall).
    #[arg(long, value_delimiter = ',')]
    datasets: Option<Vec<String>>,
    /// Runs per job of the real suite (the tables show medians).
    #[arg(long, default_value_t = 3)]
    repeats: usize,
    /// Runs per job of the memory and scaling suites.
    #[arg(long, default_value_t = 1)]
    sweep_repeats: usize,
    /// A peer whose first fit and prediction take longer than this many seconds runs once.
    #[arg(long, default_value_t = 60.0)]
    slow_seconds: f64,
    /// Per-run time limit in seconds (the run is killed and recorded as a timeout).
    #[arg(long, default_value_t = 600)]
    timeout: u64,
    /// Training sizes of the scaling suite.
    #[arg(long, value_delimiter = ',', default_value = "25000,100000,400000")]
    scaling_n: Vec<usize>,
    /// Training rows of the converge suite.
    #[arg(long, default_value_t = 100_000)]
    converge_n: usize,
    /// joker's budget in the converge suite, in passes over the training rows.
    #[arg(long, default_value_t = 24)]
    converge_passes: usize,
    /// Python with the peers (default: $JOKER_BENCH_PYTHON, then .venv-bench/bin/python;
    /// without one the peers are skipped).
    #[arg(long)]
    python: Option<PathBuf>,
    /// Data folder (default: $JOKER_DATA_DIR, then ../shared/datasets).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Output folder.
    #[arg(long, default_value = "bench-out")]
    out: PathBuf,
    /// A tiny synthetic run of every code path (seconds; for CI).
    #[arg(long)]
    smoke: bool,
    /// Only rebuild the tables and figures from `<out>/results.json`.
    #[arg(long)]
    report_only: bool,
    /// Also copy results.md, results.json and the figures into this folder (docs/bench).
    #[arg(long)]
    publish: Option<PathBuf>,
    /// Run joker's jobs only; the peers' jobs are listed as not run.
    #[arg(long)]
    joker_only: bool,
    /// Plan only these systems (comma-separated names as in the tables, e.g.
    /// `joker-klr,rff-logreg`); default: all.
    #[arg(long, value_delimiter = ',')]
    systems: Option<Vec<String>>,
    /// Internal: run one joker job (JSON) in this process and print its outcome.
    #[arg(long, hide = true)]
    job: Option<String>,
}

/// One fit to run: who, on what, with which shared hyper-parameters.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Job {
    suite: String,
    dataset: String,
    /// `joker-l2svc`, `joker-klr`, `joker-krr`, or a peer of `bench_peer.py`.
    system: String,
    task: Task,
    /// Prefix of the prepared `.npy` files.
    data: String,
    n: usize,
    n_test: usize,
    d: usize,
    gamma: f64,
    /// C of the classifiers (`1 / lambda`).
    c: f64,
    /// lambda of the regressors.
    lambda: f64,
    /// Random features (0 for exact methods).
    m: usize,
    /// joker: iterations (blocks of `block` rows).
    iters: usize,
    block: usize,
    seed: u64,
    /// SVR tube half-width (z units).
    epsilon: f64,
    /// joker: record the test metric every `iters / checks` iterations.
    curve: bool,
    /// joker: points on the curve.
    #[serde(default = "ten")]
    checks: usize,
    /// Standard deviation of the raw target (RMSE in original units = z RMSE times this).
    y_scale: f64,
}

impl Job {
    fn is_joker(&self) -> bool {
        self.system.starts_with("joker")
    }
    fn setting(&self) -> String {
        let mut s = Vec::new();
        if self.m > 0 {
            s.push(format!("M {}", self.m));
        }
        if self.is_joker() {
            s.push(format!("{} it x b {}", self.iters, self.block));
        }
        match self.task {
            Task::Classification => s.push(format!("C {}", self.c)),
            Task::Regression if self.system.ends_with("svr") => {
                s.push(format!("C {}, eps {}", self.c, self.epsilon))
            }
            Task::Regression => s.push(format!("lambda {}", self.lambda)),
        }
        s.join(", ")
    }
}

fn ten() -> usize {
    10
}

/// What one run measured.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Outcome {
    /// Test accuracy, or test RMSE in z units.
    metric: f64,
    fit_s: f64,
    predict_s: f64,
    peak_rss_mb: f64,
    /// joker: `(training seconds, test metric)` at the checks.
    #[serde(default)]
    curve: Vec<(f64, f64)>,
    /// joker: wall time of the fit including monitoring.
    #[serde(default)]
    wall_fit_s: Option<f64>,
}

/// A job with its runs, or why it has none.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Record {
    job: Job,
    runs: Vec<Outcome>,
    #[serde(default)]
    skip: Option<String>,
    #[serde(default)]
    error: Option<String>,
}

impl Record {
    fn median(&self, f: impl Fn(&Outcome) -> f64) -> f64 {
        let mut v: Vec<f64> = self.runs.iter().map(f).collect();
        v.sort_by(f64::total_cmp);
        match v.len() {
            0 => f64::NAN,
            n if n % 2 == 1 => v[n / 2],
            n => 0.5 * (v[n / 2 - 1] + v[n / 2]),
        }
    }
}

/// Everything a results file holds.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Results {
    machine: Machine,
    records: Vec<Record>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Machine {
    cpu: String,
    threads: usize,
    memory_gb: f64,
    /// Measured f32 GEMM rate (faer, 2048^3, all threads, median of 5), GFLOP/s.
    gemm_gflops: f64,
    date: String,
    joker_commit: String,
    python: Option<String>,
    peers: Option<String>,
}

fn main() {
    let args = Args::parse();
    if let Some(job) = &args.job {
        // child mode: one joker fit; the outcome (or error) as one JSON line
        let job: Job = match serde_json::from_str(job) {
            Ok(j) => j,
            Err(e) => {
                eprintln!("bad job: {e}");
                std::process::exit(2);
            }
        };
        match run_joker(&job) {
            Ok(o) => println!("{}", serde_json::to_string(&o).expect("outcome")),
            Err(e) => {
                eprintln!("joker: {e}");
                std::process::exit(1);
            }
        }
        return;
    }
    if let Err(e) = run(&args) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

/// `(x, y)` points of a figure.
type Points = Vec<(f64, f64)>;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

fn run(args: &Args) -> Res<()> {
    std::fs::create_dir_all(args.out.join("data"))?;
    std::fs::create_dir_all(args.out.join("logs"))?;
    let results_path = args.out.join("results.json");
    if args.report_only {
        let res: Results = serde_json::from_str(&std::fs::read_to_string(&results_path)?)?;
        return report(args, &res);
    }
    let python = args
        .python
        .clone()
        .or_else(|| std::env::var_os("JOKER_BENCH_PYTHON").map(PathBuf::from))
        .or_else(|| Some(PathBuf::from(".venv-bench/bin/python")).filter(|p| p.exists()));
    let mut res = Results {
        machine: machine(python.as_deref()),
        records: Vec::new(),
    };
    eprintln!(
        "machine: {} ({} threads, {:.0} GB), f32 GEMM {:.0} GFLOP/s; peers: {}",
        res.machine.cpu,
        res.machine.threads,
        res.machine.memory_gb,
        res.machine.gemm_gflops,
        res.machine
            .peers
            .as_deref()
            .unwrap_or("none (no Python with the peers)")
    );
    let data_dir = args
        .data_dir
        .clone()
        .or_else(|| std::env::var_os("JOKER_DATA_DIR").map(PathBuf::from))
        .unwrap_or_else(|| "../shared/datasets".into());
    let mut jobs = plan(args, &data_dir)?;
    if let Some(keep) = &args.systems {
        jobs.retain(|(j, _)| keep.contains(&j.system));
    }
    let total = jobs.len();
    for (k, (job, repeats)) in jobs.into_iter().enumerate() {
        let rec = execute(args, python.as_deref(), job, repeats, k + 1, total);
        res.records.push(rec);
        std::fs::write(&results_path, serde_json::to_string_pretty(&res)?)?;
    }
    report(args, &res)?;
    // the smoke run checks the program itself: any failed job fails it
    let failed: Vec<String> = res
        .records
        .iter()
        .filter_map(|r| {
            r.error
                .as_ref()
                .map(|e| format!("{} {}: {e}", r.job.dataset, r.job.system))
        })
        .collect();
    if args.smoke && !failed.is_empty() {
        return Err(format!("failed jobs: {}", failed.join("; ")).into());
    }
    Ok(())
}

/// Prepares the data of the chosen suites and lists the jobs with their repeat counts.
fn plan(args: &Args, data_dir: &Path) -> Res<Vec<(Job, usize)>> {
    let mut jobs = Vec::new();
    let dir = args.out.join("data");
    let prefix = |name: &str| dir.join(name).to_string_lossy().into_owned();
    if args.smoke {
        let s = data::synthetic(SHAPES[0], 3000, 1000, 1)?;
        s.write(&prefix("smoke"))?;
        write_feature_map(&prefix("smoke"), &s, 300, 1)?;
        let base = base_job("smoke", "smoke", &s, &prefix("smoke"), 1.0);
        jobs.push((joker_job(&base, "joker-l2svc", 300, 20, 256, true), 1));
        jobs.push((joker_job(&base, "joker-klr", 300, 20, 256, true), 1));
        for p in [
            "rff-linearsvc",
            "rff-logreg",
            "liblinear-joker-features",
            "sklearn-svc",
        ] {
            jobs.push((peer_job(&base, p, 300), 1));
        }
        let r = data::synthetic(SHAPES[2], 2000, 500, 1)?;
        r.write(&prefix("smoke-reg"))?;
        let base = base_job("smoke", "smoke-reg", &r, &prefix("smoke-reg"), 1.0);
        jobs.push((joker_job(&base, "joker-krr", 300, 20, 256, true), 1));
        jobs.push((peer_job(&base, "rff-ridge", 300), 1));
        return Ok(jobs);
    }
    let want = |s: &str| args.suites.iter().any(|x| x == s);
    if want("real") {
        for (name, task) in data::REAL {
            if args
                .datasets
                .as_ref()
                .is_some_and(|d| !d.iter().any(|x| x == name))
            {
                continue;
            }
            let Some(split) = data::real(data_dir, name, task) else {
                eprintln!("{name}: not in {}, skipped", data_dir.display());
                continue;
            };
            let split = split?;
            let p = prefix(name);
            split.write(&p)?;
            // C (classification) or lambda (regression), joker's M values and iterations, and
            // the M of the feature-based peers (LIBLINEAR: joker's very features at that M)
            let (reg, ms, iters, mpeer): (f64, &[usize], usize, usize) = match name {
                "ijcnn1" => (32.0, &[2000, 4000, 8000], 600, 2000),
                "a9a" => (1.0, &[500, 1000, 2000], 200, 1000),
                "w8a" => (8.0, &[1000, 2000, 4000], 300, 2000),
                "covtype" => (32.0, &[1000, 2000, 4000], 60, 2000),
                "higgs" => (1.0, &[1000, 2000, 4000], 80, 2000),
                "cadata" => (0.1, &[1000, 2000, 4000], 300, 2000),
                _ => (0.1, &[1000, 2000, 4000], 200, 2000),
            };
            // Nystrom centres: a Nystrom map needs fewer features than random ones
            let nystrom_ms: &[usize] = &[500, 1000, 2000];
            for seed in 1..=args.repeats as u64 {
                write_feature_map(&p, &split, mpeer, seed)?;
            }
            let base = base_job("real", name, &split, &p, reg);
            let r = args.repeats;
            match task {
                Task::Classification => {
                    for &m in ms {
                        jobs.push((joker_job(&base, "joker-l2svc", m, iters, 512, true), r));
                    }
                    for &m in nystrom_ms {
                        let sys = "joker-l2svc-nystrom";
                        jobs.push((joker_job(&base, sys, m, iters, 512, true), r));
                    }
                    // kernel logistic regression: joker's KLR against logistic regression
                    // on random or Nystroem features (the same C)
                    jobs.push((joker_job(&base, "joker-klr", mpeer, iters, 512, true), r));
                    for peer in [
                        "sklearn-svc",
                        "sklearnex-svc",
                        "thundersvm-svc",
                        "liblinear-joker-features",
                        "rff-linearsvc",
                        "rff-logreg",
                        "nystroem-logreg",
                        "nystroem-linearsvc",
                    ] {
                        jobs.push((peer_job(&base, peer, mpeer), r));
                    }
                }
                Task::Regression => {
                    for &m in ms {
                        jobs.push((joker_job(&base, "joker-krr", m, iters, 512, true), r));
                    }
                    for &m in nystrom_ms {
                        let sys = "joker-krr-nystrom";
                        jobs.push((joker_job(&base, sys, m, iters, 512, true), r));
                    }
                    for peer in [
                        "sklearn-krr",
                        "sklearn-svr",
                        "thundersvm-svr",
                        "rff-ridge",
                        "nystroem-ridge",
                    ] {
                        jobs.push((peer_job(&base, peer, mpeer), r));
                    }
                }
            }
        }
    }
    if want("memory") {
        if let Some(split) = data::real(data_dir, "ijcnn1", Task::Classification) {
            let split = split?;
            let p = prefix("ijcnn1");
            split.write(&p)?;
            let base = base_job("memory", "ijcnn1", &split, &p, 32.0);
            let r = args.sweep_repeats;
            for m in [1000, 2000, 4000, 8000, 16000] {
                jobs.push((joker_job(&base, "joker-l2svc", m, 300, 512, false), r));
            }
            for m in [1000, 2000, 4000] {
                jobs.push((peer_job(&base, "rff-linearsvc", m), r));
                jobs.push((peer_job(&base, "nystroem-linearsvc", m), r));
            }
        }
    }
    if want("scaling") {
        for shape in SHAPES {
            for &n in &args.scaling_n {
                let name = format!("{}-{}", shape.name, n);
                let split = data::synthetic(shape, n, 10_000, 7)?;
                let p = prefix(&name);
                split.write(&p)?;
                let (reg, joker) = match shape.task {
                    Task::Classification => (32.0, "joker-l2svc"),
                    Task::Regression => (1.0, "joker-krr"),
                };
                let mut base = base_job("scaling", shape.name, &split, &p, reg);
                base.n = n;
                let r = args.sweep_repeats;
                jobs.push((joker_job(&base, joker, 2000, 200, 512, false), r));
                // the peers as far as their memory or time allows on this machine
                let peers: &[(&str, usize)] = match shape.task {
                    Task::Classification => &[
                        ("rff-linearsvc", 100_000),
                        ("sklearnex-svc", 100_000),
                        ("sklearn-svc", 25_000),
                    ],
                    Task::Regression => &[("rff-ridge", 100_000)],
                };
                for &(peer, nmax) in peers {
                    let mut j = peer_job(&base, peer, 2000);
                    if n > nmax {
                        j.curve = false;
                        jobs.push((j, 0));
                    } else {
                        jobs.push((j, r));
                    }
                }
            }
        }
    }
    if want("converge") {
        // joker's test metric along a budget of many passes, against the peers' end points
        let n = args.converge_n;
        for shape in SHAPES {
            let name = format!("{}-{}", shape.name, n);
            let split = data::synthetic(shape, n, 10_000, 7)?;
            let p = prefix(&name);
            split.write(&p)?;
            // joker at the peers' M and at twice it
            let (reg, joker, ms, peers): (f64, &str, &[usize], &[&str]) = match shape.task {
                Task::Classification => (
                    32.0,
                    "joker-l2svc",
                    &[2000, 4000],
                    &["rff-linearsvc", "sklearnex-svc"],
                ),
                Task::Regression => (1.0, "joker-krr", &[2000], &["rff-ridge", "nystroem-ridge"]),
            };
            let mut base = base_job("converge", shape.name, &split, &p, reg);
            base.n = n;
            let r = args.sweep_repeats;
            let block = 512;
            let iters = args.converge_passes * n.div_ceil(block);
            for &m in ms {
                let mut j = joker_job(&base, joker, m, iters, block, true);
                j.checks = 2 * args.converge_passes;
                jobs.push((j, r));
            }
            // the same budget on a Nystrom map at the same M
            for &m in ms {
                let mut j = joker_job(&base, &format!("{joker}-nystrom"), m, iters, block, true);
                j.checks = 2 * args.converge_passes;
                jobs.push((j, r));
            }
            for peer in peers {
                jobs.push((peer_job(&base, peer, 2000), r));
            }
        }
    }
    Ok(jobs)
}

fn base_job(suite: &str, dataset: &str, s: &Split, prefix: &str, reg: f64) -> Job {
    let (c, lambda) = match s.task {
        Task::Classification => (reg, 1.0 / reg),
        Task::Regression => (1.0 / reg, reg),
    };
    Job {
        suite: suite.into(),
        dataset: dataset.into(),
        system: String::new(),
        task: s.task,
        data: prefix.into(),
        n: s.ntr(),
        n_test: s.nte(),
        d: s.d,
        gamma: s.gamma,
        c,
        lambda,
        m: 0,
        iters: 0,
        block: 0,
        seed: 1,
        epsilon: 0.1,
        curve: false,
        checks: ten(),
        y_scale: s.y_scale,
    }
}

fn joker_job(base: &Job, system: &str, m: usize, iters: usize, block: usize, curve: bool) -> Job {
    Job {
        system: system.into(),
        m,
        iters,
        block,
        curve,
        ..base.clone()
    }
}

fn peer_job(base: &Job, system: &str, m: usize) -> Job {
    let uses_m =
        system.starts_with("rff") || system.starts_with("nys") || system.starts_with("lib");
    Job {
        system: system.into(),
        m: if uses_m { m } else { 0 },
        ..base.clone()
    }
}

/// `W` (`M x d`) and `b` of joker's feature map for seed `seed`, for the LIBLINEAR peer.
fn write_feature_map(prefix: &str, s: &Split, m: usize, seed: u64) -> Res<()> {
    let map = joker::features::RandomMap::<f64>::new(joker::features::FeatureSpec {
        kernel: joker::Kernel {
            kind: joker::KernelKind::Gaussian,
            gamma: s.gamma,
        },
        n_components: m,
        dim: s.d,
        seed,
    })?;
    npy::write(
        Path::new(&format!("{prefix}.w{m}s{seed}.npy")),
        &[m, s.d],
        &map.w(),
    )?;
    npy::write(
        Path::new(&format!("{prefix}.b{m}s{seed}.npy")),
        &[m],
        map.b(),
    )?;
    Ok(())
}

/// Runs a job `repeats` times (seeds 1, 2, ...), each in a fresh process.
fn execute(
    args: &Args,
    python: Option<&Path>,
    job: Job,
    repeats: usize,
    k: usize,
    total: usize,
) -> Record {
    let mut rec = Record {
        job,
        runs: Vec::new(),
        skip: None,
        error: None,
    };
    let what = format!(
        "[{k}/{total}] {} {} ({})",
        rec.job.dataset,
        rec.job.system,
        rec.job.setting()
    );
    if args.joker_only && !rec.job.is_joker() {
        rec.skip = Some("not run in this invocation (--joker-only)".into());
        eprintln!("{what}: skipped (--joker-only)");
        return rec;
    }
    if repeats == 0 {
        rec.skip = Some(format!(
            "n = {} is beyond what this peer fits in the memory or time of this machine",
            rec.job.n
        ));
        eprintln!("{what}: skipped ({})", rec.skip.as_deref().unwrap_or(""));
        return rec;
    }
    let mut repeats = repeats;
    let mut r = 0;
    while r < repeats {
        let mut job = rec.job.clone();
        job.seed = rec.job.seed + r as u64;
        // the seeds of each run are recorded through the job's base seed and the run index
        let spec = serde_json::to_string(&job).expect("job");
        let mut cmd = if job.is_joker() {
            let mut c = Command::new(std::env::current_exe().expect("own path"));
            c.args(["--job", &spec]);
            c
        } else {
            let Some(py) = python else {
                rec.skip = Some("no Python with the peers (scripts/peers/install-bench.sh)".into());
                break;
            };
            let mut c = Command::new(py);
            c.args(["scripts/peers/bench_peer.py", &spec]);
            c
        };
        let log = args.out.join("logs").join(format!(
            "{}-{}-m{}-{}.log",
            job.dataset.replace('/', "_"),
            job.system,
            job.m,
            r
        ));
        match spawn(&mut cmd, &log, Duration::from_secs(args.timeout)) {
            Ok(Reply::Done(o)) => {
                eprintln!(
                    "{what} run {}/{repeats}: {} {:.4}, fit {:.2} s, predict {:.2} s, peak RSS {:.0} MB",
                    r + 1,
                    metric_name(rec.job.task),
                    shown_metric(&rec.job, o.metric),
                    o.fit_s,
                    o.predict_s,
                    o.peak_rss_mb
                );
                if r == 0 && !job.is_joker() && o.fit_s + o.predict_s > args.slow_seconds {
                    repeats = 1;
                }
                rec.runs.push(o);
            }
            Ok(Reply::Skip(why)) => {
                eprintln!("{what}: skipped ({why})");
                rec.skip = Some(why);
                break;
            }
            Err(e) => {
                eprintln!("{what}: {e}");
                rec.error = Some(e);
                break;
            }
        }
        r += 1;
    }
    rec
}

enum Reply {
    Done(Outcome),
    Skip(String),
}

/// Runs a child with its stderr in `log`, killing it after `limit`; parses its last line.
fn spawn(cmd: &mut Command, log: &Path, limit: Duration) -> Result<Reply, String> {
    let err = std::fs::File::create(log).map_err(|e| format!("log {}: {e}", log.display()))?;
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::from(err))
        .spawn()
        .map_err(|e| format!("cannot start: {e}"))?;
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if start.elapsed() > limit => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("timeout after {} s", limit.as_secs()));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => return Err(format!("wait: {e}")),
        }
    };
    let mut out = String::new();
    use std::io::Read;
    if let Some(mut s) = child.stdout.take() {
        let _ = s.read_to_string(&mut out);
    }
    let tail = || {
        let t = std::fs::read_to_string(log).unwrap_or_default();
        let lines: Vec<&str> = t.lines().rev().take(3).collect();
        lines.into_iter().rev().collect::<Vec<_>>().join(" | ")
    };
    if !status.success() {
        return Err(format!("failed ({status}): {}", tail()));
    }
    let line = out
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    let v: serde_json::Value =
        serde_json::from_str(line).map_err(|e| format!("bad output ({e}): {line:?}"))?;
    if let Some(why) = v.get("skip").and_then(|s| s.as_str()) {
        return Ok(Reply::Skip(why.to_string()));
    }
    serde_json::from_value(v)
        .map(Reply::Done)
        .map_err(|e| format!("bad output ({e}): {line:?}"))
}

/// Peak resident set of this process in MB (`VmHWM`).
fn peak_rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<f64>().ok())
        })
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

/// Child mode: one joker fit on the prepared split.
fn run_joker(job: &Job) -> joker::Result<Outcome> {
    use joker::{FitOptions, Joker, Loss};
    let (train, test) = data::load(&job.data)?;
    // `-nystrom`: the same fit on a Nystrom map (the default centres) instead of random features
    let base = job.system.trim_end_matches("-nystrom");
    let loss = match base {
        "joker-l2svc" => Loss::SquaredHinge,
        "joker-klr" => Loss::Logistic,
        "joker-svr" => Loss::EpsilonInsensitive {
            epsilon: job.epsilon,
        },
        _ => Loss::SquaredError,
    };
    let params = Joker::builder()
        .loss(loss)
        .gamma(job.gamma)
        .lambda(job.lambda)
        .n_components(job.m)
        .feature_map(if base == job.system {
            joker::FeatureKind::Random
        } else {
            joker::FeatureKind::Nystrom(joker::Centers::default())
        })
        .block_size(job.block)
        .max_iter(job.iters)
        .tol(0.0)
        .check_every(if job.curve {
            (job.iters / job.checks.max(1)).max(1)
        } else {
            job.iters
        })
        .standardize(false)
        .normalize_target(false)
        .seed(job.seed)
        .build()?;
    let start = Instant::now();
    let model = params.fit_with(
        &train,
        FitOptions {
            validation: job.curve.then_some(&test),
            ..Default::default()
        },
    )?;
    let wall = start.elapsed().as_secs_f64();
    let fit_s = wall - model.training.timings.check;
    let start = Instant::now();
    let pred = model.predict(&test.x)?;
    let predict_s = start.elapsed().as_secs_f64();
    let metric = match job.task {
        Task::Classification => joker::model::accuracy(&pred, &test.y),
        Task::Regression => joker::model::rmse(&pred, &test.y),
    };
    let curve = model
        .history
        .iter()
        .filter_map(|p| p.validation.map(|v| (p.train_seconds, v)))
        .collect();
    Ok(Outcome {
        metric,
        fit_s,
        predict_s,
        peak_rss_mb: peak_rss_mb(),
        curve,
        wall_fit_s: Some(wall),
    })
}

fn metric_name(task: Task) -> &'static str {
    match task {
        Task::Classification => "accuracy",
        Task::Regression => "RMSE",
    }
}

/// Accuracy in percent, RMSE in the target's original units.
fn shown_metric(job: &Job, z: f64) -> f64 {
    match job.task {
        Task::Classification => 100.0 * z,
        Task::Regression => z * job.y_scale,
    }
}

/// The machine, the measured GEMM ceiling and the versions in play.
fn machine(python: Option<&Path>) -> Machine {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map_or("unknown".into(), |s| s.trim().to_string());
    let memory_gb = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .next()
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<f64>().ok())
        })
        .map_or(f64::NAN, |kb| kb / 1024.0 / 1024.0);
    let run = |prog: &str, a: &[&str]| {
        Command::new(prog)
            .args(a)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let peers = python.and_then(|py| {
        run(
            &py.to_string_lossy(),
            &[
                "-c",
                "import importlib.metadata as m; print(', '.join(p + ' ' + m.version(p) for p in ['scikit-learn', 'scikit-learn-intelex', 'thundersvm-cpu', 'liblinear-official', 'numpy']))",
            ],
        )
    });
    Machine {
        cpu,
        threads: rayon::current_num_threads(),
        memory_gb,
        gemm_gflops: joker::linalg::gemm_gflops_f32(2048),
        date: run("date", &["-u", "+%Y-%m-%d %H:%M UTC"]).unwrap_or_default(),
        joker_commit: run("git", &["rev-parse", "--short", "HEAD"]).unwrap_or_default(),
        python: python.map(|p| p.display().to_string()),
        peers,
    }
}

/// Writes results.md and the figures (and publishes them when asked).
fn report(args: &Args, res: &Results) -> Res<()> {
    let md = tables(res);
    std::fs::write(args.out.join("results.md"), &md)?;
    let figures = figures(res);
    for (name, svg) in &figures {
        std::fs::write(args.out.join(name), svg)?;
    }
    println!("{md}");
    if let Some(dir) = &args.publish {
        std::fs::create_dir_all(dir)?;
        std::fs::write(dir.join("results.md"), &md)?;
        std::fs::write(dir.join("results.json"), serde_json::to_string_pretty(res)?)?;
        for (name, svg) in &figures {
            std::fs::write(dir.join(name), svg)?;
        }
        eprintln!("published to {}", dir.display());
    }
    Ok(())
}

fn fmt_s(v: f64) -> String {
    if !v.is_finite() {
        "-".into()
    } else if v < 10.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.1}")
    }
}

/// Markdown tables of medians, one section per suite.
fn tables(res: &Results) -> String {
    use std::fmt::Write;
    let m = &res.machine;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "Machine: {} ({} threads, {:.0} GB), measured f32 GEMM {:.0} GFLOP/s (faer, 2048^3). \
         Run {} at joker {}. Peers: {}.\n",
        m.cpu,
        m.threads,
        m.memory_gb,
        m.gemm_gflops,
        m.date,
        m.joker_commit,
        m.peers.as_deref().unwrap_or("not installed")
    );
    let suites = [
        (
            "real",
            "Real data: test metric, fit and predict time, peak RSS (medians over the runs)",
        ),
        (
            "memory",
            "ijcnn1: time and memory versus the number of features M",
        ),
        (
            "scaling",
            "Synthetic data with the shapes of HIGGS, SUSY and MSD: time and memory versus n",
        ),
        (
            "converge",
            "Synthetic data with the shapes of HIGGS, SUSY and MSD: joker with a budget of many \
             passes (its curve is in the figures and in the time-to-accuracy table)",
        ),
        ("smoke", "Smoke run (tiny synthetic sets)"),
    ];
    for (suite, title) in suites {
        let recs: Vec<&Record> = res
            .records
            .iter()
            .filter(|r| r.job.suite == suite)
            .collect();
        if recs.is_empty() {
            continue;
        }
        let _ = writeln!(s, "### {title}\n");
        let _ = writeln!(
            s,
            "| data | n train / test | d | system | setting | accuracy % or RMSE | fit s | predict s | peak RSS MB | runs |"
        );
        let _ = writeln!(s, "|---|---|---|---|---|---|---|---|---|---|");
        for r in recs {
            let j = &r.job;
            let head = format!(
                "| {} | {} / {} | {} | {} | {} |",
                j.dataset,
                j.n,
                j.n_test,
                j.d,
                j.system,
                j.setting()
            );
            if r.runs.is_empty() {
                let why = r.skip.as_deref().or(r.error.as_deref()).unwrap_or("-");
                let _ = writeln!(s, "{head} {} | | | | 0 |", why.replace('|', "/"));
                continue;
            }
            let metric = shown_metric(j, r.median(|o| o.metric));
            let digits = if j.task == Task::Classification { 2 } else { 4 };
            let _ = writeln!(
                s,
                "{head} {metric:.digits$} | {} | {} | {:.0} | {} |",
                fmt_s(r.median(|o| o.fit_s)),
                fmt_s(r.median(|o| o.predict_s)),
                r.median(|o| o.peak_rss_mb),
                r.runs.len()
            );
        }
        s.push('\n');
    }
    s.push_str(&time_to_accuracy(res));
    s
}

/// The peer's metric less the tolerance joker is held to: 0.5 points of accuracy, or an RMSE
/// 1% above the peer's; and whether a metric value reaches it.
fn target(task: Task, peer: f64) -> (f64, impl Fn(f64) -> bool) {
    let t = match task {
        Task::Classification => peer - 0.005,
        Task::Regression => peer * 1.01,
    };
    (t, move |v: f64| match task {
        Task::Classification => v >= t,
        Task::Regression => v <= t,
    })
}

/// The run of a record whose fit time is the median one.
fn median_run(r: &Record) -> Option<&Outcome> {
    let mid = r.median(|o| o.fit_s);
    r.runs
        .iter()
        .min_by(|a, b| (a.fit_s - mid).abs().total_cmp(&(b.fit_s - mid).abs()))
}

/// joker's `(training seconds, metric)` along its median-time run, ending at the final model.
fn joker_curve(r: &Record) -> Vec<(f64, f64)> {
    median_run(r).map_or_else(Vec::new, |run| {
        let mut p = run.curve.clone();
        p.push((run.fit_s, run.metric));
        p
    })
}

/// For each data set with joker curves and peer results: how long joker took to come within
/// the tolerance of each peer's test metric (first check at or past it), beside the peer's
/// own fit time.
fn time_to_accuracy(res: &Results) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let mut rows = Vec::new();
    for suite in ["real", "converge", "smoke"] {
        let recs: Vec<&Record> = res
            .records
            .iter()
            .filter(|r| r.job.suite == suite && !r.runs.is_empty())
            .collect();
        for jr in recs.iter().filter(|r| r.job.is_joker() && r.job.curve) {
            let curve = joker_curve(jr);
            for pr in recs
                .iter()
                .filter(|r| !r.job.is_joker() && r.job.dataset == jr.job.dataset)
            {
                let j = &jr.job;
                let peer = pr.median(|o| o.metric);
                let (goal, reached) = target(j.task, peer);
                let when = curve.iter().find(|&&(_, v)| reached(v)).map(|&(t, _)| t);
                // the start of the final stretch of checks that all reach the target
                let held = curve
                    .iter()
                    .rev()
                    .take_while(|&&(_, v)| reached(v))
                    .last()
                    .map(|&(t, _)| t);
                let best = match j.task {
                    Task::Classification => curve.iter().map(|p| p.1).fold(f64::MIN, f64::max),
                    Task::Regression => curve.iter().map(|p| p.1).fold(f64::MAX, f64::min),
                };
                let peer_s = pr.median(|o| o.fit_s);
                let timed = |t: Option<f64>| match t {
                    Some(t) if t < peer_s => format!("{} (faster)", fmt_s(t)),
                    Some(t) => format!("{} (slower)", fmt_s(t)),
                    None => "-".to_string(),
                };
                let verdict = match when {
                    Some(_) => format!("{} | {}", timed(when), timed(held)),
                    None => format!(
                        "not within {} s (best {:.digits$}) | -",
                        fmt_s(curve.last().map_or(f64::NAN, |p| p.0)),
                        shown_metric(j, best),
                        digits = if j.task == Task::Classification { 2 } else { 4 }
                    ),
                };
                let digits = if j.task == Task::Classification { 2 } else { 4 };
                rows.push(format!(
                    "| {} | {} ({}) | {} ({}) | {:.digits$} | {} | {:.digits$} | {} |",
                    j.dataset,
                    j.system,
                    j.setting(),
                    pr.job.system,
                    if pr.job.m > 0 {
                        format!("M {}", pr.job.m)
                    } else {
                        "exact".into()
                    },
                    shown_metric(j, peer),
                    fmt_s(peer_s),
                    shown_metric(j, goal),
                    verdict
                ));
            }
        }
    }
    if rows.is_empty() {
        return s;
    }
    let _ = writeln!(
        s,
        "### Time to the peers' accuracy\n\nWhen joker's median-time run first came within 0.5 \
         points of the peer's test accuracy (or within 1% of its RMSE), and from when on it \
         stayed there to the end of its budget, in training seconds (monitoring left out), \
         beside the peer's fit time. Both read the test metric at joker's checks, which are \
         spaced (so the times are upper bounds for that curve); the first time is what a fit \
         stopped at the right moment would take, which a user without the test labels cannot \
         know; the second is the robust reading.\n"
    );
    let _ = writeln!(
        s,
        "| data | joker | peer | peer metric | peer fit s | target | joker first reaches it, s | joker holds it from, s |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|");
    for r in rows {
        let _ = writeln!(s, "{r}");
    }
    s.push('\n');
    s
}

/// The figures: accuracy (or RMSE) versus fit time per real data set, and memory and time
/// versus M and versus n.
fn figures(res: &Results) -> Vec<(String, String)> {
    use svg::{Chart, Series};
    let mut out = Vec::new();
    let mut by_data: BTreeMap<&str, Vec<&Record>> = BTreeMap::new();
    for r in res
        .records
        .iter()
        .filter(|r| (r.job.suite == "real" || r.job.suite == "converge") && !r.runs.is_empty())
    {
        by_data.entry(&r.job.dataset).or_default().push(r);
    }
    for (name, recs) in by_data {
        let mut series = Vec::new();
        for r in &recs {
            let j = &r.job;
            // joker: the test metric along the fit of the median-time run; peers: one point
            let points = if j.is_joker() {
                joker_curve(r)
                    .into_iter()
                    .map(|(t, v)| (t, shown_metric(j, v)))
                    .collect()
            } else {
                vec![(
                    r.median(|o| o.fit_s),
                    shown_metric(j, r.median(|o| o.metric)),
                )]
            };
            let label = if j.m > 0 {
                format!("{} M={}", j.system, j.m)
            } else {
                j.system.clone()
            };
            series.push(Series {
                name: label,
                points,
                line: j.is_joker(),
            });
        }
        let task = recs[0].job.task;
        out.push((
            format!("time_to_metric_{name}.svg"),
            Chart {
                title: format!("{name}: test {} versus fit time", metric_name(task)),
                x_label: "fit time (s, log scale)".into(),
                y_label: match task {
                    Task::Classification => "test accuracy (%)".into(),
                    Task::Regression => "test RMSE".into(),
                },
                log_x: true,
                log_y: false,
                series,
            }
            .render(),
        ));
    }
    let sweep = |suite: &str, x: &dyn Fn(&Job) -> f64| -> Vec<(String, Points, Points)> {
        let mut groups: BTreeMap<String, (Points, Points)> = BTreeMap::new();
        for r in res
            .records
            .iter()
            .filter(|r| r.job.suite == suite && !r.runs.is_empty())
        {
            let key = if suite == "scaling" {
                format!("{} {}", r.job.dataset, r.job.system)
            } else {
                r.job.system.clone()
            };
            let g = groups.entry(key).or_default();
            g.0.push((x(&r.job), r.median(|o| o.peak_rss_mb)));
            g.1.push((x(&r.job), r.median(|o| o.fit_s)));
        }
        groups.into_iter().map(|(k, (a, b))| (k, a, b)).collect()
    };
    for (suite, xname, file, x) in [
        (
            "memory",
            "M (random features)",
            "vs_m",
            (&|j: &Job| j.m as f64) as &dyn Fn(&Job) -> f64,
        ),
        ("scaling", "n (training rows)", "vs_n", &|j: &Job| {
            j.n as f64
        }),
    ] {
        let g = sweep(suite, x);
        if g.is_empty() {
            continue;
        }
        for (what, pick, ylab) in [
            ("memory", 0, "peak RSS (MB, log scale)"),
            ("time", 1, "fit time (s, log scale)"),
        ] {
            let series = g
                .iter()
                .map(|(k, mem, time)| Series {
                    name: k.clone(),
                    points: if pick == 0 { mem.clone() } else { time.clone() },
                    line: true,
                })
                .collect();
            out.push((
                format!("{what}_{file}.svg"),
                Chart {
                    title: format!(
                        "{} versus {}",
                        if pick == 0 { "Peak memory" } else { "Fit time" },
                        xname
                    ),
                    x_label: format!("{xname}, log scale"),
                    y_label: ylab.into(),
                    log_x: true,
                    log_y: true,
                    series,
                }
                .render(),
            ));
        }
    }
    out
}

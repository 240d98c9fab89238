//! Distributed training by parallel block minimization, simulated: `K` ranks run as threads of
//! this process (`joker::distributed::Threads`), each on its share of the rows, with the same
//! algorithm and the same messages as over MPI. For each set, `K`, partition and way of
//! combining: outer steps and time to the duality-gap tolerance, the test metric after 1, 2,
//! 5 and 10 outer steps and at the end, rank 0's time in local solves against collectives,
//! and the bytes each rank sends per outer step.
//!
//! ```sh
//! cargo run --release --example bench_pbm                                   # a9a, ijcnn1, cadata; K = 1, 2, 4
//! cargo run --release --example bench_pbm -- --sets a9a --ranks 1,4,8,16,32 --partition random,kmeans
//! cargo run --release --example bench_pbm -- --sets HIGGS-like --n 1000000 --ranks 4,8 --outer 10
//! ```
//! Partitions (`joker::distributed::partition`): `file` (contiguous shares in file order, as
//! `joker train --mpi` reads them), `random` (rows spread by a seeded hash) and `kmeans`
//! (k-means with `K` centres on a sample of at most 20,000 standardised rows, every row sent
//! to the nearest centre's rank with room). On a machine with fewer cores than ranks the times are not parallel
//! times: read the outer steps, the metrics and the bytes; `docs/distributed.md` turns them
//! into a model of a cluster.

#[allow(dead_code)]
#[path = "bench/data.rs"]
mod data;
#[allow(dead_code)]
#[path = "bench/npy.rs"]
mod npy;

use std::path::PathBuf;
use std::time::Duration;

use data::{SHAPES, Split, Task};
use joker::distributed::partition::Partition;
use joker::distributed::{Collective, Threads};
use joker::*;

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn list(name: &str, default: &str) -> Vec<String> {
    arg(name)
        .unwrap_or_else(|| default.into())
        .split(',')
        .map(String::from)
        .collect()
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

fn task_of(name: &str) -> Task {
    match name {
        "cadata" | "cpusmall" => Task::Regression,
        _ => Task::Classification,
    }
}

fn dataset(x: &[f32], y: &[f64], d: usize) -> joker::Result<Dataset<f32>> {
    Dataset::new(
        Features::Dense(DenseMatrix::new(y.len(), d, x.to_vec())?),
        y.to_vec(),
    )
}

/// The library's partition named on the command line.
fn partition_of(name: &str) -> Partition {
    match name {
        "file" => Partition::File,
        "random" => Partition::Random,
        "kmeans" => Partition::KMeans,
        other => panic!("--partition: file, random or kmeans, not {other}"),
    }
}

/// One simulated distributed fit's record.
#[derive(serde::Serialize)]
struct Run {
    set: String,
    ranks: usize,
    partition: String,
    combine: String,
    m: usize,
    /// `(outer step, train seconds, gap, metric)` per outer step.
    history: Vec<(usize, f64, f64, f64)>,
    stop: String,
    seconds: f64,
    local_seconds: f64,
    communicate_seconds: f64,
    bytes_per_step: usize,
    sizes: Vec<usize>,
}

#[allow(clippy::too_many_arguments)]
fn run(
    split: &Split,
    name: &str,
    k: usize,
    part: &str,
    combine: Combine,
    m: usize,
    (max_outer, seconds): (usize, f64),
) -> joker::Result<Run> {
    // contiguous shares of the training rows, as `joker train --mpi` reads a file; the
    // partition then moves them
    let (d, n) = (split.d, split.ntr());
    let sizes: Vec<usize> = (0..k).map(|r| n * (r + 1) / k - n * r / k).collect();
    let mut shards = Vec::new();
    for r in 0..k {
        let (lo, hi) = (n * r / k, n * (r + 1) / k);
        shards.push(dataset(&split.xtr[lo * d..hi * d], &split.ytr[lo..hi], d)?);
    }
    let test = dataset(&split.xte, &split.yte, d)?;
    let reg = regularisation(name);
    let builder = Joker::builder();
    let builder = match split.task {
        Task::Classification => builder.loss(Loss::SquaredHinge).c(reg),
        Task::Regression => builder.loss(Loss::SquaredError).lambda(reg),
    };
    let est = builder
        .gamma(split.gamma)
        .n_components(m)
        .max_iter(100_000_000)
        .time_limit(Duration::from_secs_f64(seconds))
        .build()?;
    let pbm = PbmConfig {
        max_outer,
        combine,
        partition: partition_of(part),
        ..PbmConfig::default()
    };
    let scale = if split.task == Task::Classification {
        100.0
    } else {
        split.y_scale
    };
    let group = Threads::group(k);
    let mut history = Vec::new();
    let models: Vec<joker::Result<Model>> = std::thread::scope(|s| {
        let mut handles = Vec::new();
        let mut history_slot = Some(&mut history);
        for (c, shard) in group.iter().zip(&shards) {
            let (est, pbm, test) = (&est, &pbm, &test);
            let hist = if c.rank() == 0 {
                history_slot.take()
            } else {
                None
            };
            handles.push(s.spawn(move || {
                let mut step = 0;
                let progress: Option<ProgressFn> = hist.map(|h| {
                    Box::new(move |p: &Progress| {
                        step += 1;
                        h.push((
                            step,
                            p.train_seconds,
                            p.gap,
                            p.validation.unwrap_or(f64::NAN) * scale,
                        ));
                        true
                    }) as Box<dyn FnMut(&Progress) -> bool>
                });
                let opts = FitOptions {
                    validation: (c.rank() == 0).then_some(test),
                    progress,
                    ..Default::default()
                };
                est.fit_distributed(shard, c, pbm, opts)
            }));
        }
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let model = models.into_iter().next().unwrap()?;
    let t = &model.training;
    Ok(Run {
        set: name.into(),
        ranks: k,
        partition: part.into(),
        combine: format!("{combine:?}"),
        m,
        history,
        stop: t.stop.to_string(),
        seconds: t.seconds,
        local_seconds: t.timings.block + t.timings.solve + t.timings.update,
        communicate_seconds: t.timings.communicate,
        // the sum of the theta changes, the line search's 27 sums and the checks' 2, and the
        // decisions; as values of 8 bytes
        bytes_per_step: 8 * (m + 3 * 9 + 2 + 2),
        sizes,
    })
}

/// Rank 0's progress callback.
type ProgressFn<'a> = Box<dyn FnMut(&Progress) -> bool + 'a>;

fn at_step(r: &Run, step: usize) -> String {
    r.history
        .iter()
        .find(|h| h.0 == step)
        .map_or("-".into(), |h| format!("{:.2}", h.3))
}

fn main() -> joker::Result<()> {
    let dir = PathBuf::from(
        std::env::var("JOKER_DATA_DIR").unwrap_or_else(|_| "../shared/datasets".into()),
    );
    let sets = list("--sets", "a9a,ijcnn1,cadata");
    let ranks: Vec<usize> = list("--ranks", "1,2,4")
        .iter()
        .map(|v| v.parse().expect("--ranks: integers"))
        .collect();
    let parts = list("--partition", "file");
    let combines: Vec<Combine> = list("--combine", "auto")
        .iter()
        .map(|c| match c.as_str() {
            "auto" => Combine::Auto,
            "line-search" => Combine::LineSearch,
            "add" => Combine::Add,
            other => panic!("--combine: auto, line-search or add, not {other}"),
        })
        .collect();
    let m: usize = arg("--m").map_or(1000, |v| v.parse().expect("--m"));
    let outer: usize = arg("--outer").map_or(1000, |v| v.parse().expect("--outer"));
    let seconds: f64 = arg("--seconds").map_or(300.0, |v| v.parse().expect("--seconds"));
    let n: usize = arg("--n").map_or(100_000, |v| v.parse().expect("--n"));
    println!(
        "{} cores; ranks simulated as threads; M = {m}; at most {outer} outer steps or {seconds} s per fit",
        std::thread::available_parallelism().map_or(1, |v| v.get())
    );
    println!(
        "| set | K | partition | combine | rows read per rank | stop | outer steps | seconds | metric after 1 / 2 / 5 / 10 steps | final metric | final gap | rank 0 local s | rank 0 collective s | bytes / rank / step |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    let mut out = Vec::new();
    for name in &sets {
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
        for &k in &ranks {
            for part in &parts {
                for &combine in &combines {
                    if k == 1 && (part != &parts[0] || combine != combines[0]) {
                        continue;
                    }
                    let r = run(&split, name, k, part, combine, m, (outer, seconds))?;
                    let last = r
                        .history
                        .last()
                        .copied()
                        .unwrap_or((0, 0.0, f64::NAN, f64::NAN));
                    println!(
                        "| {name} | {k} | {part} | {:?} | {}..{} | {} | {} | {:.1} | {} / {} / {} / {} | {:.2} | {:.1e} | {:.1} | {:.3} | {} |",
                        combine,
                        r.sizes.iter().min().unwrap(),
                        r.sizes.iter().max().unwrap(),
                        r.stop,
                        r.history.len(),
                        r.seconds,
                        at_step(&r, 1),
                        at_step(&r, 2),
                        at_step(&r, 5),
                        at_step(&r, 10),
                        last.3,
                        last.2,
                        r.local_seconds,
                        r.communicate_seconds,
                        r.bytes_per_step
                    );
                    out.push(r);
                }
            }
        }
    }
    std::fs::create_dir_all("bench-out").ok();
    let path = "bench-out/pbm.json";
    std::fs::write(path, serde_json::to_string_pretty(&out).unwrap()).map_err(|e| {
        JokerError::Io {
            path: path.into(),
            source: e,
        }
    })?;
    eprintln!("wrote {path}");
    Ok(())
}

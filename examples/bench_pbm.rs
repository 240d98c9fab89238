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
//! Partitions: `file` (contiguous shares in file order, as `joker train --mpi` reads them),
//! `random` (a seeded shuffle first) and `kmeans` (Lloyd's k-means with `K` centres on a
//! sample of at most 20,000 standardised rows, every row to the nearest centre with room,
//! capacity 1.05 n / K). On a machine with fewer cores than ranks the times are not parallel
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
use joker::distributed::{Collective, Threads};
use joker::rng::Stream;
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

/// The row order of a partition into `k` contiguous shares, and the share sizes.
fn partition(split: &Split, k: usize, how: &str) -> (Vec<usize>, Vec<usize>) {
    let n = split.ntr();
    let even = |order: Vec<usize>| {
        let sizes = (0..k).map(|r| n * (r + 1) / k - n * r / k).collect();
        (order, sizes)
    };
    match how {
        "file" => even((0..n).collect()),
        "random" => {
            let mut order: Vec<usize> = (0..n).collect();
            Stream::new(7, 1).shuffle(&mut order);
            even(order)
        }
        "kmeans" => kmeans_partition(split, k),
        other => panic!("--partition: file, random or kmeans, not {other}"),
    }
}

/// Lloyd's k-means on a sample of standardised rows, then every row to the nearest centre
/// that has room (rows in a seeded random order).
fn kmeans_partition(split: &Split, k: usize) -> (Vec<usize>, Vec<usize>) {
    let (n, d) = (split.ntr(), split.d);
    let x = &split.xtr;
    let (mut mean, mut sd) = (vec![0.0f64; d], vec![0.0f64; d]);
    for i in 0..n {
        for j in 0..d {
            mean[j] += x[i * d + j] as f64 / n as f64;
        }
    }
    for i in 0..n {
        for j in 0..d {
            sd[j] += (x[i * d + j] as f64 - mean[j]).powi(2) / n as f64;
        }
    }
    let sd: Vec<f64> = sd.iter().map(|v| v.sqrt().max(1e-12)).collect();
    let z = |i: usize, j: usize| (x[i * d + j] as f64 - mean[j]) / sd[j];
    let mut order: Vec<usize> = (0..n).collect();
    let mut rng = Stream::new(11, 2);
    rng.shuffle(&mut order);
    let sample = &order[..n.min(20_000)];
    let mut centres: Vec<f64> = (0..k)
        .flat_map(|c| (0..d).map(move |j| (c, j)))
        .map(|(c, j)| z(sample[c % sample.len()], j))
        .collect();
    let dist = |i: usize, c: usize, centres: &[f64]| -> f64 {
        (0..d).map(|j| (z(i, j) - centres[c * d + j]).powi(2)).sum()
    };
    for _ in 0..20 {
        let mut sum = vec![0.0; k * d];
        let mut cnt = vec![0usize; k];
        for &i in sample {
            let c = (0..k)
                .min_by(|&a, &b| dist(i, a, &centres).total_cmp(&dist(i, b, &centres)))
                .unwrap();
            cnt[c] += 1;
            for j in 0..d {
                sum[c * d + j] += z(i, j);
            }
        }
        for c in 0..k {
            if cnt[c] > 0 {
                for j in 0..d {
                    centres[c * d + j] = sum[c * d + j] / cnt[c] as f64;
                }
            }
        }
    }
    let cap = (1.05 * n as f64 / k as f64).ceil() as usize;
    let mut members: Vec<Vec<usize>> = vec![Vec::new(); k];
    for &i in &order {
        let mut by: Vec<usize> = (0..k).collect();
        by.sort_by(|&a, &b| dist(i, a, &centres).total_cmp(&dist(i, b, &centres)));
        let c = by.into_iter().find(|&c| members[c].len() < cap).unwrap();
        members[c].push(i);
    }
    let sizes = members.iter().map(Vec::len).collect();
    (members.concat(), sizes)
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
    let (order, sizes) = partition(split, k, part);
    let d = split.d;
    let mut shards = Vec::new();
    let mut at = 0;
    for &s in &sizes {
        let rows = &order[at..at + s];
        at += s;
        let x: Vec<f32> = rows
            .iter()
            .flat_map(|&i| split.xtr[i * d..(i + 1) * d].iter().copied())
            .collect();
        let y: Vec<f64> = rows.iter().map(|&i| split.ytr[i]).collect();
        shards.push(dataset(&x, &y, d)?);
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
    let combines: Vec<Combine> = list("--combine", "line-search")
        .iter()
        .map(|c| match c.as_str() {
            "line-search" => Combine::LineSearch,
            "add" => Combine::Add,
            other => panic!("--combine: line-search or add, not {other}"),
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
        "| set | K | partition | combine | shares | stop | outer steps | seconds | metric after 1 / 2 / 5 / 10 steps | final metric | final gap | rank 0 local s | rank 0 collective s | bytes / rank / step |"
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

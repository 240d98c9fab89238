//! `joker train --mpi`: one rank of a distributed fit. Each rank reads its share of the
//! training file, [`Joker::fit_distributed`] trains over `MPI_COMM_WORLD`, and rank 0 prints
//! the progress and writes the model. A failure on any rank (an error or a panic) aborts the
//! whole job with a non-zero exit, after that rank printed why.

use std::io::Read;
use std::path::Path;

use joker::distributed::checkpoint::CheckpointConfig;
use joker::distributed::mpi::{Mpi, abort_on_panic, init};
use joker::distributed::partition::Partition;
use joker::distributed::{Collective, union_sorted};
use joker::io::{
    CsvOptions, LibsvmOptions, Shard, agreed_layout, read_csv_shard, read_libsvm_shard,
};
use joker::{Combine, Dataset, FitOptions, Joker, PbmConfig, Precision, Scalar};

use super::args::{CombineArg, FormatArg, PartitionArg, TrainArgs};
use super::progress::Reporter;
use super::{CliError, CliResult, fail, is_npy, read_data};

/// Runs this rank's part of the fit.
pub fn train(a: &TrainArgs, est: &Joker, model_path: &Path) -> CliResult<()> {
    let Some(universe) = init() else {
        return fail("MPI was initialised already");
    };
    abort_on_panic();
    let comm = Mpi::world(&universe);
    // ranks that share a machine take its GPUs in turn under --device auto
    joker::device::spread_auto(comm.local_rank());
    let out = match est.precision {
        Precision::F32 => rank_fit::<f32>(a, est, model_path, &comm),
        Precision::F64 => rank_fit::<f64>(a, est, model_path, &comm),
    };
    if let Err(CliError::Message(m)) = &out {
        // the other ranks may be waiting for this one: end the job (with one line naming
        // this rank and `m`)
        comm.fail(m);
    }
    out
}

fn rank_fit<U: Scalar>(a: &TrainArgs, est: &Joker, model_path: &Path, comm: &Mpi) -> CliResult<()> {
    let (rank, ranks) = (comm.rank(), comm.size());
    let shard = Shard {
        index: rank,
        count: ranks,
    };
    let train: Dataset<U> = read_shard(a, shard, comm)?;
    let (n, d) = (train.x.nrows(), train.x.ncols());
    let mut counts = vec![0.0; ranks];
    counts[rank] = n as f64;
    comm.sum(&mut counts)?;
    let total: f64 = counts.iter().sum();
    let val: Option<Dataset<U>> = match (&a.validation, rank) {
        (Some(p), 0) => Some(read_data(p, &a.data, None, Some(d))?),
        _ => None,
    };
    let quiet = a.quiet || rank != 0;
    let classes = if est.task() == joker::Task::Classification {
        let mut c = train.y.clone();
        c.sort_by(f64::total_cmp);
        c.dedup();
        format!(", {} classes", union_sorted(comm, &c)?.len())
    } else {
        String::new()
    };
    if !quiet {
        eprintln!(
            "data: {total} samples x {d} features on {ranks} ranks ({} to {} rows each){classes}",
            counts.iter().cloned().fold(f64::INFINITY, f64::min),
            counts.iter().cloned().fold(0.0, f64::max),
        );
    }
    let pbm = PbmConfig {
        local_iters: a.local_iters.unwrap_or(0),
        max_outer: a.max_outer,
        combine: match a.combine {
            CombineArg::Auto => Combine::Auto,
            CombineArg::LineSearch => Combine::LineSearch,
            CombineArg::Add => Combine::Add,
        },
        partition: match a.partition {
            PartitionArg::File => Partition::File,
            PartitionArg::Random => Partition::Random,
            PartitionArg::Kmeans => Partition::KMeans,
        },
        checkpoint: a.checkpoint.as_ref().map(|dir| CheckpointConfig {
            dir: dir.clone(),
            every: a.checkpoint_every,
            seconds: a.checkpoint_seconds,
        }),
        resume: a.resume.clone(),
    };
    let reporter = Reporter::new(est.solver.max_iter, est.task(), quiet);
    let opts = FitOptions {
        validation: val.as_ref(),
        progress: (rank == 0).then(|| reporter.callback()),
        ..FitOptions::default()
    };
    let mut est = est.clone();
    est.solver.block_size = est.solver.block_size.min(n);
    let model = est.fit_distributed(&train, comm, &pbm, opts)?;
    reporter.finish();
    let peaks = comm.gather(&[peak_rss_mib()])?;
    if rank != 0 {
        return Ok(());
    }
    model.save(model_path)?;
    let t = &model.training;
    outln!(
        "outer steps {} ({} local iterations on rank 0; stopped: {}, gap {:.3e})",
        model.history.len(),
        t.iterations,
        t.stop,
        t.gap
    );
    let products = if t.timings.products > 0.0 {
        format!(", kernel products {:.2} s", t.timings.products)
    } else {
        String::new()
    };
    outln!(
        "time        {:.2} s (rank 0: local solves {:.2} s{products}, communication {:.3} s, checks {:.2} s)",
        t.seconds,
        t.timings.block + t.timings.solve + t.timings.update,
        t.timings.communicate,
        t.timings.check
    );
    let peaks: Vec<f64> = peaks.iter().map(|p| p[0]).collect();
    if peaks.iter().all(|p| p.is_finite()) {
        outln!(
            "memory      peak resident {:.0} to {:.0} MiB per rank",
            peaks.iter().cloned().fold(f64::INFINITY, f64::min),
            peaks.iter().cloned().fold(0.0, f64::max)
        );
    }
    if let Some(b) = t.intercept {
        outln!(
            "intercept   {} (where the dual coefficients over all ranks sum to zero)",
            super::sig(b, 6)
        );
    }
    if let Some(v) = &val {
        outln!("validation  {:.4}", model.score(v)?);
    }
    outln!("model       {}", model_path.display());
    Ok(())
}

/// This process's peak resident memory in MiB (`VmHWM` of `/proc/self/status`; NaN where
/// the system does not say).
fn peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map_or(f64::NAN, |kib| kib / 1024.0)
}

/// This rank's share of the training file, with the index base and the width agreed by all:
/// a byte range of a LIBSVM or CSV file, or a range of the rows of a dense `.npy` file or a
/// CSR directory (mapped, with its labels only).
fn read_shard<U: Scalar>(a: &TrainArgs, shard: Shard, comm: &Mpi) -> CliResult<Dataset<U>> {
    let path = &a.train_file;
    if a.data.format == FormatArg::Npy || (a.data.format == FormatArg::Auto && is_npy(path)) {
        let n = joker::io::npy::npy_rows(path)?;
        let (k, count) = (shard.index, shard.count);
        let rows = n * k / count..n * (k + 1) / count;
        if rows.is_empty() {
            return fail(format!(
                "{}: rank {k} of {count} got no rows ({n} rows in all): use fewer ranks",
                path.display()
            ));
        }
        return Ok(joker::io::npy::read_npy_in(path, None, Some(rows))?);
    }
    let libsvm = match a.data.format {
        FormatArg::Npy => unreachable!("handled above"),
        FormatArg::Libsvm => true,
        FormatArg::Csv => false,
        FormatArg::Auto if a.data.label_column.is_some() => false,
        FormatArg::Auto => looks_like_libsvm(path)?,
    };
    let part = if libsvm {
        let raw = read_libsvm_shard::<U>(path, shard)?;
        let mut ext = [
            raw.min_index().map_or(f64::INFINITY, |v| -(v as f64)),
            raw.max_index().map_or(-1.0, |v| v as f64),
        ];
        comm.max(&mut ext)?;
        let opts = LibsvmOptions {
            zero_based: a.data.index_base,
            n_features: a.n_features,
        };
        let (min, max) = (
            ext[0].is_finite().then_some(-ext[0] as u32),
            (ext[1] >= 0.0).then_some(ext[1] as u32),
        );
        let (zero_based, width) = agreed_layout(&opts, min, max);
        raw.finish(zero_based, width)?
    } else {
        let opts = CsvOptions {
            label_column: a.data.label_column.unwrap_or_default(),
            ..CsvOptions::default()
        };
        read_csv_shard::<U>(path, &opts, shard)?.data
    };
    match part {
        Some(d) => Ok(d),
        None => fail(format!(
            "{}: rank {} of {} got no rows (more ranks than lines): use fewer ranks",
            path.display(),
            shard.index,
            shard.count
        )),
    }
}

/// Whether the file's first data line looks like LIBSVM (`label index:value ...`).
fn looks_like_libsvm(path: &Path) -> CliResult<bool> {
    let mut head = vec![0u8; 1 << 16];
    let mut f = std::fs::File::open(path)
        .map_err(|e| CliError::Message(format!("cannot read {}: {e}", path.display())))?;
    let len = f
        .read(&mut head)
        .map_err(|e| CliError::Message(format!("cannot read {}: {e}", path.display())))?;
    let text = String::from_utf8_lossy(&head[..len]);
    let first = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#'));
    // `label index:value ...`, or a lone label (a row without features)
    Ok(first.is_some_and(|l| {
        let mut tokens = l.split_whitespace();
        let label = tokens.next().unwrap_or("");
        match tokens.next() {
            Some(t) => t.contains(':'),
            None => label.parse::<f64>().is_ok(),
        }
    }))
}

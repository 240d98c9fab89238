//! Seconds per DBCD-TR iteration on rows mapped from a `.npy` file, with the page cache
//! dropped first (cold; needs root to write /proc/sys/vm/drop_caches, otherwise it says so) and
//! then warm, against the same rows copied into memory. The three fits take the same
//! iterates; the time excludes the checks (`Timings::check`).
//!
//! ```text
//! cargo run --release --example make_npy -- /tmp/rows.npy --rows 1000000
//! cargo run --release --example bench_mapped -- /tmp/rows.npy --iters 400 --m 512
//! ```

use std::path::PathBuf;
use std::time::Instant;

use joker::io::npy::read_npy;
use joker::{Dataset, DenseMatrix, Features, Joker, Loss, Model};

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map_or(default, |v| v.parse().expect("integer argument"))
}

/// Seconds per iteration of a fit, its check time left out.
fn per_iteration(m: &Model) -> f64 {
    (m.training.seconds - m.training.timings.check) / m.training.iterations.max(1) as f64
}

fn drop_caches() -> bool {
    // fails without root
    let _ = std::process::Command::new("sync").status();
    std::fs::write("/proc/sys/vm/drop_caches", "3").is_ok()
}

fn main() -> joker::Result<()> {
    let path = PathBuf::from(
        std::env::args()
            .nth(1)
            .expect("give the rows file (NAME.npy)"),
    );
    let (iters, m, b) = (arg("--iters", 400), arg("--m", 512), arg("--block", 512));
    let est = Joker::builder()
        .loss(Loss::SquaredHinge)
        .c(1.0)
        .n_components(m)
        .block_size(b)
        .max_iter(iters)
        .check_every(iters)
        .standardize(false)
        .build()?;
    let cold = drop_caches();
    let t0 = Instant::now();
    let mapped: Dataset<f32> = read_npy(&path, None)?;
    let open = t0.elapsed().as_secs_f64();
    let (n, d) = (mapped.x.nrows(), mapped.x.ncols());
    println!(
        "{n} x {d} rows, {:.2} GiB; block {b}, M = {m}, {iters} iterations; opening (finiteness pass) {open:.1} s{}",
        (n * d * 4) as f64 / (1u64 << 30) as f64,
        if cold {
            " from a cold cache"
        } else {
            " (cache not dropped: needs root)"
        }
    );
    // the first fit after the opening pass: the pass itself warmed whatever the cache holds
    if drop_caches() {
        let fit = est.fit(&mapped)?;
        println!(
            "mapped, cold cache: {:.2} ms/iteration",
            1e3 * per_iteration(&fit)
        );
    }
    let warm = est.fit(&mapped)?;
    println!(
        "mapped, warm cache: {:.2} ms/iteration",
        1e3 * per_iteration(&warm)
    );
    let Features::Dense(x) = &mapped.x else {
        unreachable!("npy rows are dense")
    };
    let copy = Dataset::new(
        Features::Dense(DenseMatrix::new(n, d, x.as_slice().to_vec())?),
        mapped.y.clone(),
    )?;
    let mem = est.fit(&copy)?;
    println!(
        "in memory:          {:.2} ms/iteration",
        1e3 * per_iteration(&mem)
    );
    assert_eq!(
        warm.training.primal, mem.training.primal,
        "mapped and in-memory fits take the same iterates"
    );
    Ok(())
}

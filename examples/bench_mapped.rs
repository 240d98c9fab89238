//! Seconds per DBCD-TR iteration on rows mapped from a `.npy` file, with the page cache
//! dropped first (cold; needs root to write /proc/sys/vm/drop_caches, otherwise it says so) and
//! then warm, against the same rows copied into memory. The three fits take the same
//! iterates (blocks of consecutive rows, the default for mapped rows); a fourth fit on the rows
//! in memory with shuffled blocks (the default in memory) is shown beside them. The time per
//! iteration is the block, solve and update time; the setup is shown apart.
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

/// Milliseconds per iteration of a fit (its block, solve and update times), the rest of its
/// time outside the checks (setup: the copy of the rows into the working precision where they
/// are not mapped, the feature map, the engine), and the trust-region and CG iterations per
/// block.
fn per_iteration(m: &Model) -> String {
    let t = &m.training;
    let k = t.iterations.max(1) as f64;
    let work = t.timings.block + t.timings.solve + t.timings.update;
    format!(
        "{:.2} ms/iteration, setup {:.2} s ({:.1} TR, {:.1} CG iterations per block)",
        1e3 * work / k,
        t.seconds - t.timings.check - work,
        t.timings.tr_iters as f64 / k,
        t.timings.cg_iters as f64 / k
    )
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
    let estimator = |contiguous: bool| {
        Joker::builder()
            .loss(Loss::SquaredHinge)
            .c(1.0)
            .n_components(m)
            .block_size(b)
            .max_iter(iters)
            .check_every(iters)
            .standardize(false)
            .contiguous_blocks(contiguous)
            .build()
    };
    let est = estimator(true)?;
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
        println!("mapped, cold cache:          {}", per_iteration(&fit));
    }
    let warm = est.fit(&mapped)?;
    println!("mapped, warm cache:          {}", per_iteration(&warm));
    let Features::Dense(x) = &mapped.x else {
        unreachable!("npy rows are dense")
    };
    let copy = Dataset::new(
        Features::Dense(DenseMatrix::new(n, d, x.as_slice().to_vec())?),
        mapped.y.clone(),
    )?;
    let mem = est.fit(&copy)?;
    println!("in memory:                   {}", per_iteration(&mem));
    assert_eq!(
        warm.training.primal, mem.training.primal,
        "mapped and in-memory fits take the same iterates"
    );
    let shuffled = estimator(false)?.fit(&copy)?;
    println!("in memory, shuffled blocks:  {}", per_iteration(&shuffled));
    Ok(())
}

#[path = "../tests/common.rs"]
mod common;
use joker::*;
fn main() {
    let data = common::regression(240, 3, 2);
    let t = std::time::Instant::now();
    let model = Joker::builder()
        .loss(Loss::Absolute)
        .exact()
        .gamma(0.5)
        .lambda(0.5)
        .precision(Precision::F64)
        .standardize(false)
        .normalize_target(false)
        .block_size(64)
        .tol(1e-4)
        .max_iter(2000)
        .check_every(20)
        .build()
        .unwrap()
        .fit(&data)
        .unwrap();
    println!(
        "{} iters {:?} gap {}",
        model.training.iterations,
        t.elapsed(),
        model.training.gap
    );
}

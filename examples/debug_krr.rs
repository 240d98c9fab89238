#[path = "../tests/common.rs"]
mod common;
use joker::*;
fn main() {
    let data = common::regression(300, 3, 1);
    let bs: usize = std::env::args()
        .nth(1)
        .map(|s| s.parse().unwrap())
        .unwrap_or(64);
    let model = Joker::builder()
        .loss(Loss::SquaredError)
        .exact()
        .gamma(std::env::var("G").unwrap().parse().unwrap())
        .lambda(std::env::var("L").unwrap().parse().unwrap())
        .precision(Precision::F64)
        .standardize(false)
        .normalize_target(false)
        .block_size(bs)
        .tol(1e-12)
        .max_iter(600)
        .check_every(50)
        .build()
        .unwrap()
        .fit(&data)
        .unwrap();
    for p in &model.history {
        println!(
            "{:5} primal {:.6e} dual {:.6e} gap {:.3e} acc {}",
            p.iter, p.primal, p.dual, p.gap, p.accepted
        );
    }
    let a = model.dual.unwrap();
    println!("max |a| {}", a.iter().fold(0.0f64, |m, v| m.max(v.abs())));
}

#[path = "../tests/common.rs"]
mod common;
use joker::*;
fn main() {
    let train = common::three_classes(600, 6);
    let c: f64 = std::env::var("C").unwrap().parse().unwrap();
    let yb: Vec<f64> = train
        .y
        .iter()
        .map(|&v| if v == 0.0 { 1.0 } else { -1.0 })
        .collect();
    let tb = Dataset::new(train.x.clone(), yb).unwrap();
    let m2 = Joker::builder()
        .loss(Loss::SquaredHinge)
        .c(c)
        .exact()
        .block_size(128)
        .max_iter(200)
        .check_every(20)
        .build()
        .unwrap()
        .fit(&tb)
        .unwrap();
    for p in &m2.history {
        println!(
            "{:5} primal {:.6e} dual {:.6e} gap {:.3e} acc {}",
            p.iter, p.primal, p.dual, p.gap, p.accepted
        );
    }
    println!("binary train acc {}", m2.score(&tb).unwrap());
}

use joker::rng::Stream;
use joker::{Dataset, DenseMatrix, Device, Features, Joker, Loss};
fn two_moons(n: usize, seed: u64) -> Dataset<f32> {
    let mut s = Stream::new(seed, 9);
    let (mut x, mut y) = (Vec::new(), Vec::new());
    for i in 0..n {
        let t = std::f64::consts::PI * s.uniform();
        let (cx, cy, lab) = if i % 2 == 0 {
            (t.cos(), t.sin(), 1.0)
        } else {
            (1.0 - t.cos(), 0.5 - t.sin(), -1.0)
        };
        x.push((cx + 0.1 * (s.uniform() - 0.5)) as f32);
        x.push((cy + 0.1 * (s.uniform() - 0.5)) as f32);
        x.push(s.uniform() as f32);
        y.push(lab);
    }
    Dataset::new(Features::Dense(DenseMatrix::new(n, 3, x).unwrap()), y).unwrap()
}
fn main() {
    let data = two_moons(3001, 5);
    for m in ["gram", "kernel", "auto"] {
        let est = Joker::builder()
            .loss(Loss::SquaredHinge)
            .c(std::env::var("C").unwrap().parse().unwrap())
            .n_components(1031)
            .block_size(257)
            .max_iter(3000)
            .tol(1e-6)
            .device(Device::Cpu)
            .tr_model(joker::TrModel::parse(m).unwrap())
            .build()
            .unwrap();
        let t = std::time::Instant::now();
        let f = est.fit(&data).unwrap();
        println!(
            "{m}: gap {:e} primal {} iters {} stop {:?} {:?} {:?}",
            f.training.gap,
            f.training.primal,
            f.training.iterations,
            f.training.stop,
            t.elapsed(),
            f.training.tr_model
        );
    }
}

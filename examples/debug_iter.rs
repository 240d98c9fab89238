use joker::backend::{Backend, cpu::Cpu};
use joker::features::{FeatureMap, FeatureSpec};
use joker::*;
use std::time::Instant;
fn main() {
    let (b, m, d) = (512usize, 10_000usize, 28usize);
    let mut s = joker::rng::Stream::new(1, 1);
    let x: Vec<f32> = (0..b * d).map(|_| s.uniform() as f32 * 2.0 - 1.0).collect();
    let map = FeatureMap::<f32>::new(FeatureSpec {
        kernel: Kernel {
            kind: KernelKind::Gaussian,
            gamma: 0.05,
        },
        n_components: m,
        dim: d,
        seed: 1,
    })
    .unwrap();
    let mut phi = vec![0f32; b * m];
    let mut k = vec![0f64; b * b];
    let theta: Vec<f64> = (0..m).map(|_| s.uniform() - 0.5).collect();
    let mut g = vec![0f64; b];
    let mut th = theta.clone();
    let delta: Vec<f64> = (0..b).map(|_| s.uniform() - 0.5).collect();
    for rep in 0..5 {
        let t0 = Instant::now();
        Cpu.features(&map, &x, b, &mut phi);
        let t1 = Instant::now();
        Cpu.gram(&phi, b, m, &mut k);
        let t2 = Instant::now();
        Cpu.project(&phi, b, m, &theta, 1, &mut g);
        let t3 = Instant::now();
        Cpu.accumulate(&phi, b, m, &delta, 1, &mut th);
        let t4 = Instant::now();
        if rep > 0 {
            println!(
                "features {:?} gram {:?} project {:?} accumulate {:?}",
                t1 - t0,
                t2 - t1,
                t3 - t2,
                t4 - t3
            );
        }
    }
}

//! Scratch driver for choosing test settings on the real datasets (not part of the docs).
use joker::io::{LibsvmOptions, read_libsvm};
use joker::*;
fn main() -> joker::Result<()> {
    let a: Vec<String> = std::env::args().collect();
    let (name, loss, m, c, gamma, iters, b) = (
        &a[1],
        &a[2],
        a[3].parse().unwrap(),
        a[4].parse::<f64>().unwrap(),
        a[5].parse::<f64>().unwrap(),
        a[6].parse().unwrap(),
        a[7].parse().unwrap(),
    );
    let dir = std::path::Path::new("../shared/datasets/libsvm");
    let nf = if name == "a9a" { Some(123) } else { None };
    let opts = LibsvmOptions {
        n_features: nf,
        ..Default::default()
    };
    let train = read_libsvm::<f32>(&dir.join(name), &opts)?;
    let test = read_libsvm::<f32>(
        &dir.join(format!("{name}.t")),
        &LibsvmOptions {
            n_features: Some(train.x.ncols()),
            ..Default::default()
        },
    )?;
    let loss = match loss.as_str() {
        "svc" => Loss::SquaredHinge,
        "klr" => Loss::Logistic,
        "hinge" => Loss::Hinge,
        _ => Loss::SquaredError,
    };
    let mut cfg = SolverConfig::default();
    if let Ok(v) = std::env::var("DMAX") {
        cfg.delta_max = v.parse().unwrap();
    }
    if let Ok(v) = std::env::var("MAXCG") {
        cfg.trust_region.max_cg_iter = v.parse().unwrap();
    }
    if let Ok(v) = std::env::var("MAXTR") {
        cfg.trust_region.max_iter = v.parse().unwrap();
    }
    if let Ok(v) = std::env::var("NYRANK") {
        cfg.trust_region.nystrom_rank = v.parse().unwrap();
    }
    eprintln!("trust region: {:?}", cfg.trust_region);
    if let Ok(v) = std::env::var("SHRINK") {
        cfg.shrink_every = v.parse().unwrap();
    }
    let mut bld = Joker::builder()
        .solver(cfg)
        .loss(loss)
        .c(c)
        .n_components(m)
        .block_size(b)
        .max_iter(iters)
        .tol(1e-3);
    bld = if gamma > 0.0 {
        bld.gamma(gamma)
    } else {
        bld.bandwidth(Bandwidth::Median)
    };
    let t = std::time::Instant::now();
    let model = bld.build()?.fit_with(
        &train,
        FitOptions {
            validation: Some(&test),
            progress: Some(Box::new(|p: &Progress| {
                eprintln!(
                    "{:5} gap {:.3e} val {:?} {:.1}s",
                    p.iter, p.gap, p.validation, p.seconds
                );
                true
            })),
            ..Default::default()
        },
    )?;
    let tm = model.training.timings;
    println!(
        "tr/iter {:.1} cg/iter {:.1} block {:.1}s solve {:.1}s update {:.1}s check {:.1}s",
        tm.tr_iters as f64 / iters as f64,
        tm.cg_iters as f64 / iters as f64,
        tm.block,
        tm.solve,
        tm.update,
        tm.check
    );
    println!(
        "gamma {} fit {:.1}s test acc {:.4} train acc {:.4}",
        model.kernel.gamma,
        t.elapsed().as_secs_f64(),
        model.score(&test)?,
        model.score(&train)?
    );
    Ok(())
}

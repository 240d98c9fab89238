//! `joker demo`: two noisy interleaved spirals, a kernel machine, and a linear baseline.

use std::f64::consts::PI;
use std::time::Instant;

use joker::rng::{Stream, streams};
use joker::{Dataset, DenseMatrix, Features, FitOptions, Joker, Model, Task};

use super::args::DemoArgs;
use super::info::describe_kernel;
use super::progress::Reporter;
use super::train::loss_of;
use super::{CliResult, Score, fail, sig};

/// Turns of each spiral arm.
const TURNS: f64 = 2.0;
/// Standard deviation of the Gaussian noise added to the points.
const NOISE: f64 = 0.04;

/// `n` points of two interleaved spirals in `dim` dimensions, labels `-1` / `+1`.
///
/// A point of arm `k` at parameter `s` in (0, 1) sits at radius `s` and angle
/// `2 pi TURNS s + k pi` in a plane, with `s` drawn with density proportional to the arc
/// length so that points are spread evenly along the arms. For `dim > 2` the plane is a
/// random one of `R^dim`. Gaussian noise of standard deviation [`NOISE`] is added to every
/// coordinate.
pub fn spirals(n: usize, dim: usize, seed: u64) -> CliResult<Dataset<f32>> {
    let mut rng = Stream::new(seed, streams::DEMO_DATA);
    let gauss = |rng: &mut Stream| {
        // Box-Muller
        let (u, v) = (rng.uniform(), rng.uniform());
        (-2.0 * u.ln()).sqrt() * (2.0 * PI * v).cos()
    };
    // An orthonormal basis (e0, e1) of the plane: the first two coordinates for dim = 2,
    // Gram-Schmidt on two Gaussian vectors otherwise.
    let (mut e0, mut e1) = (vec![0.0; dim], vec![0.0; dim]);
    if dim == 2 {
        (e0[0], e1[1]) = (1.0, 1.0);
    } else {
        e0.iter_mut().for_each(|v| *v = gauss(&mut rng));
        e1.iter_mut().for_each(|v| *v = gauss(&mut rng));
        let norm = |v: &[f64]| v.iter().map(|x| x * x).sum::<f64>().sqrt();
        let n0 = norm(&e0);
        e0.iter_mut().for_each(|v| *v /= n0);
        let dot: f64 = e0.iter().zip(&e1).map(|(a, b)| a * b).sum();
        e1.iter_mut().zip(&e0).for_each(|(b, a)| *b -= dot * a);
        let n1 = norm(&e1);
        e1.iter_mut().for_each(|v| *v /= n1);
    }
    // the rows are reserved fallibly: a demo of a billion rows is an error, not an abort
    let mut x = joker::memory::try_reserved(n.saturating_mul(dim), "the demo's rows")?;
    let mut y = joker::memory::try_reserved(n, "the demo's labels")?;
    for _ in 0..n {
        let k = rng.below(2);
        let s = rng.uniform().sqrt();
        let angle = 2.0 * PI * TURNS * s + k as f64 * PI;
        let (p0, p1) = (s * angle.cos(), s * angle.sin());
        for j in 0..dim {
            x.push((p0 * e0[j] + p1 * e1[j] + NOISE * gauss(&mut rng)) as f32);
        }
        y.push(if k == 1 { 1.0 } else { -1.0 });
    }
    Ok(Dataset::new(
        Features::Dense(DenseMatrix::new(n, dim, x)?),
        y,
    )?)
}

/// Test accuracy of least squares on `[x, 1]` with targets `+-1` (a linear classifier).
fn linear_baseline(train: &Dataset<f32>, test: &Dataset<f32>) -> Option<f64> {
    let (Features::Dense(xtr), Features::Dense(xte)) = (&train.x, &test.x) else {
        return None;
    };
    let d = xtr.ncols() + 1;
    let mut a = vec![0.0; d * d];
    let mut b = vec![0.0; d];
    let mut row = vec![1.0; d];
    for i in 0..xtr.nrows() {
        for (r, v) in row.iter_mut().zip(xtr.row(i)) {
            *r = f64::from(*v);
        }
        for j in 0..d {
            b[j] += row[j] * train.y[i];
            for k in 0..d {
                a[j * d + k] += row[j] * row[k];
            }
        }
    }
    for j in 0..d {
        a[j * d + j] += 1e-8 * xtr.nrows() as f64;
    }
    let w = solve_spd(a, b, d)?;
    let hits = (0..xte.nrows())
        .filter(|&i| {
            let z: f64 = xte
                .row(i)
                .iter()
                .zip(&w)
                .map(|(v, w)| f64::from(*v) * w)
                .sum::<f64>()
                + w[d - 1];
            (if z >= 0.0 { 1.0 } else { -1.0 }) == test.y[i]
        })
        .count();
    Some(hits as f64 / xte.nrows() as f64)
}

/// Solves a small symmetric positive definite system by Cholesky.
fn solve_spd(mut a: Vec<f64>, mut b: Vec<f64>, d: usize) -> Option<Vec<f64>> {
    for j in 0..d {
        let s = a[j * d + j] - (0..j).map(|k| a[j * d + k].powi(2)).sum::<f64>();
        if s <= 0.0 {
            return None;
        }
        a[j * d + j] = s.sqrt();
        for i in j + 1..d {
            let t = a[i * d + j] - (0..j).map(|k| a[i * d + k] * a[j * d + k]).sum::<f64>();
            a[i * d + j] = t / a[j * d + j];
        }
    }
    for i in 0..d {
        b[i] = (b[i] - (0..i).map(|k| a[i * d + k] * b[k]).sum::<f64>()) / a[i * d + i];
    }
    for i in (0..d).rev() {
        b[i] = (b[i] - (i + 1..d).map(|k| a[k * d + i] * b[k]).sum::<f64>()) / a[i * d + i];
    }
    Some(b)
}

/// Runs `joker demo`.
pub fn run(a: DemoArgs) -> CliResult<()> {
    let dim = usize::from(a.dim);
    if a.n < 10 {
        return fail("--n must be at least 10");
    }
    let n_test = (a.n / 4).max(1);
    let all = spirals(a.n + n_test, dim, a.seed)?;
    let (train, test) = split(all, a.n)?;

    let loss = loss_of(a.loss, None, None, None)?;
    let mut b = Joker::builder()
        .loss(loss)
        .task(Task::Classification)
        .lambda(a.lambda)
        .block_size(512.min(a.n))
        .max_iter(a.max_iter)
        .seed(a.seed);
    if let Some(g) = a.gamma {
        b = b.gamma(g);
    } else {
        b = b.gamma(default_gamma(dim));
    }
    b = if a.exact {
        b.exact()
    } else {
        b.n_components(a.n_components)
    };
    let est = b.build()?;

    if !a.quiet {
        eprintln!(
            "demo: two interleaved spirals ({TURNS} turns, noise sd {NOISE}){}: {} training and {n_test} test points",
            if dim > 2 {
                format!(" on a random plane of {dim} dimensions")
            } else {
                String::new()
            },
            a.n
        );
        eprintln!(
            "fit: {} with {}, lambda {}",
            loss.name(),
            match est.n_components {
                Some(m) => format!("{m} random features"),
                None => "the exact kernel".into(),
            },
            sig(est.lambda, 4)
        );
    }
    let start = Instant::now();
    let reporter = Reporter::new(est.solver.max_iter, Task::Classification, a.quiet);
    let model: Model = est.fit_with(
        &train,
        FitOptions {
            validation: Some(&test),
            progress: Some(reporter.callback()),
            ..FitOptions::default()
        },
    )?;
    reporter.finish();
    let fit_seconds = start.elapsed().as_secs_f64();
    let test_score = Score::of_model(&model, &test)?;
    let train_score = Score::of_model(&model, &train)?;
    let t = &model.training;
    outln!("test        {test_score}");
    outln!("train       {train_score}");
    outln!(
        "time        {fit_seconds:.2} s ({} iterations, stopped: {}, gap {:.2e})",
        t.iterations,
        t.stop,
        t.gap
    );
    outln!("kernel      {}", describe_kernel(&model.kernel));
    if t.start.is_empty() {
        outln!("model       trust region on {}", t.tr_model);
    } else {
        outln!("start       {}", t.start);
    }
    if let Some(acc) = linear_baseline(&train, &test) {
        outln!(
            "baseline    a linear classifier (least squares) reaches {:.2}% on the same test set",
            100.0 * acc
        );
    }
    Ok(())
}

/// The default kernel scale: the arms are about `1 / (2 TURNS)` apart in radius, which is
/// about 0.5 after standardisation in two dimensions; in `dim` dimensions standardisation
/// stretches the plane by about `sqrt(dim / 2)`, so `gamma` shrinks as `1 / dim`.
fn default_gamma(dim: usize) -> f64 {
    8.0 / dim as f64
}

/// The first `n` rows for training, the rest for testing.
fn split(all: Dataset<f32>, n: usize) -> CliResult<(Dataset<f32>, Dataset<f32>)> {
    let Features::Dense(x) = all.x else {
        return fail("internal: demo data is dense");
    };
    let d = x.ncols();
    let data = x.into_vec();
    let (a, b) = data.split_at(n * d);
    let rows = data.len() / d;
    Ok((
        Dataset::new(
            Features::Dense(DenseMatrix::new(n, d, a.to_vec())?),
            all.y[..n].to_vec(),
        )?,
        Dataset::new(
            Features::Dense(DenseMatrix::new(rows - n, d, b.to_vec())?),
            all.y[n..].to_vec(),
        )?,
    ))
}

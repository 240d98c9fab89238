//! Full KRR by Skotch, ASkotch and Nystrom-PCG converges to `(K + lambda I)^{-1} y` from a dense
//! f64 solve.

use crate::common;

use joker::backend::cpu::Cpu;
use joker::solver::krr::{KrrConfig, KrrMethod, KrrProblem, solve_krr};
use joker::{Features, Kernel, KernelKind};

fn reference(data: &joker::Dataset<f64>, kernel: &Kernel, lambda: f64) -> Vec<f64> {
    let Features::Dense(m) = &data.x else {
        unreachable!()
    };
    let n = m.nrows();
    let mut a = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..n {
            a[i * n + j] = kernel.eval(m.row(i), m.row(j)) + if i == j { lambda } else { 0.0 };
        }
    }
    common::dense_solve(a, data.y.clone())
}

#[test]
fn skotch_askotch_and_pcg_converge_to_the_dense_solution() {
    let data = common::regression(400, 3, 31);
    let kernel = Kernel {
        kind: KernelKind::Gaussian,
        gamma: 0.5,
    };
    let lambda = 0.5;
    let want = reference(&data, &kernel, lambda);
    let norm = want.iter().map(|v| v * v).sum::<f64>().sqrt();
    let prob = KrrProblem {
        x: &data.x,
        kernel: &kernel,
        y: &data.y,
        lambda,
    };
    // (method, iterations, stored preconditioners, K_BB formed for the setup)
    for (method, max_iter, store, gram) in [
        (KrrMethod::NystromPcg, 200, false, true),
        (KrrMethod::ASkotch, 4000, false, true),
        (KrrMethod::ASkotch, 4000, false, false),
        (KrrMethod::ASkotch, 4000, true, true),
        (KrrMethod::Skotch, 8000, false, true),
        (KrrMethod::Skotch, 8000, true, false),
    ] {
        let cfg = KrrConfig {
            method,
            store_preconditioners: store,
            max_block_gram_bytes: if gram { usize::MAX } else { 0 },
            blocks: 4,
            rank: 80,
            max_iter,
            tol: 1e-10,
            check_every: 50,
            ..Default::default()
        };
        let sol = solve_krr(&Cpu, &prob, &cfg, |_, _| true).unwrap();
        let err = sol
            .w
            .iter()
            .zip(&want)
            .map(|(a, b)| (a - b).powi(2))
            .sum::<f64>()
            .sqrt()
            / norm;
        eprintln!(
            "{method:?} (stored preconditioners: {store}, K_BB formed: {gram}): {} iterations, relative error {err:.2e}, residual {:.2e}",
            sol.iters,
            sol.history.last().unwrap().rel_residual
        );
        assert!(
            err < 1e-6,
            "{method:?} (stored: {store}): relative error {err} after {} iterations",
            sol.iters
        );
    }
}

#[test]
fn askotch_beats_skotch_at_equal_iterations() {
    let data = common::regression(400, 3, 32);
    let kernel = Kernel {
        kind: KernelKind::Gaussian,
        gamma: 0.5,
    };
    let prob = KrrProblem {
        x: &data.x,
        kernel: &kernel,
        y: &data.y,
        lambda: 0.05,
    };
    let run = |method| {
        let cfg = KrrConfig {
            method,
            blocks: 10,
            rank: 20,
            max_iter: 2000,
            tol: 0.0,
            check_every: 2000,
            ..Default::default()
        };
        solve_krr(&Cpu, &prob, &cfg, |_, _| true)
            .unwrap()
            .history
            .last()
            .unwrap()
            .rel_residual
    };
    let (acc, plain) = (run(KrrMethod::ASkotch), run(KrrMethod::Skotch));
    assert!(acc < plain, "ASkotch residual {acc} vs Skotch {plain}");
}

#[test]
fn bad_krr_settings_are_refused() {
    let data = common::regression(50, 2, 33);
    let kernel = Kernel {
        kind: KernelKind::Gaussian,
        gamma: 0.5,
    };
    let prob = KrrProblem {
        x: &data.x,
        kernel: &kernel,
        y: &data.y,
        lambda: 0.0,
    };
    assert!(
        solve_krr(&Cpu, &prob, &KrrConfig::default(), |_, _| true)
            .unwrap_err()
            .to_string()
            .contains("lambda")
    );
    let prob = KrrProblem {
        lambda: 0.1,
        ..prob
    };
    let cfg = KrrConfig {
        blocks: 51,
        ..Default::default()
    };
    assert!(
        solve_krr(&Cpu, &prob, &cfg, |_, _| true)
            .unwrap_err()
            .to_string()
            .contains("blocks")
    );
}

/// Through the estimator: ASkotch and PCG give the same exact model as DBCD-TR, with the same
/// monitoring and model file; the squared loss and the exact kernel are required.
#[test]
fn full_krr_through_the_estimator() {
    use joker::{Joker, Loss, Model, Precision};
    let data = common::regression(300, 3, 34);
    let base = || {
        Joker::builder()
            .loss(Loss::SquaredError)
            .exact()
            .gamma(0.5)
            .lambda(0.5)
            .precision(Precision::F64)
    };
    let dbcd = base()
        .block_size(64)
        .tol(1e-10)
        .stall(false)
        .max_iter(3000)
        .build()
        .unwrap()
        .fit(&data)
        .unwrap();
    for method in [KrrMethod::ASkotch, KrrMethod::NystromPcg] {
        let cfg = KrrConfig {
            method,
            blocks: 3,
            rank: 60,
            tol: 1e-10,
            max_iter: 5000,
            check_every: 20,
            ..Default::default()
        };
        let opts = joker::FitOptions {
            validation: Some(&data),
            ..Default::default()
        };
        let model = base()
            .full_krr(cfg)
            .build()
            .unwrap()
            .fit_with(&data, opts)
            .unwrap();
        assert_eq!(
            model.training.stop,
            joker::StopReason::Converged,
            "{method:?}"
        );
        let last = model.history.last().unwrap();
        assert!(last.rel_residual.unwrap() <= 1e-10 && last.primal >= last.dual - 1e-9);
        assert!(
            model.history.iter().all(|p| p.validation.is_some()),
            "validation RMSE at every check"
        );
        let (a, b) = (
            dbcd.predict(&data.x).unwrap(),
            model.predict(&data.x).unwrap(),
        );
        let diff = a
            .iter()
            .zip(&b)
            .map(|(p, q)| (p - q).abs())
            .fold(0.0, f64::max);
        assert!(diff < 1e-4, "{method:?}: predictions differ by {diff}");
        let path =
            std::env::temp_dir().join(format!("joker-krr-{}-{method:?}.json", std::process::id()));
        model.save(&path).unwrap();
        assert_eq!(Model::load(&path).unwrap().predict(&data.x).unwrap(), b);
    }
    let err = Joker::builder()
        .loss(Loss::Huber { delta: 1.0 })
        .exact()
        .full_krr(KrrConfig::default())
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("full_krr"));
    let err = Joker::builder()
        .loss(Loss::SquaredError)
        .n_components(10)
        .full_krr(KrrConfig::default())
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("exact"));
}

/// The memory estimate of full KRR: linear in `n` (no kernel block is formed), the stored
/// preconditioners add their `n r` doubles, and a fit over `max_memory` is refused before it
/// allocates, with the method's own estimate (not DBCD-TR's).
#[test]
fn full_krr_memory_is_estimated_and_capped() {
    use joker::{Joker, Loss, Precision};
    let askotch = KrrConfig {
        method: KrrMethod::ASkotch,
        blocks: 10,
        rank: 100,
        ..Default::default()
    };
    let stored = KrrConfig {
        store_preconditioners: true,
        ..askotch.clone()
    };
    let pcg = KrrConfig {
        method: KrrMethod::NystromPcg,
        ..askotch.clone()
    };
    let (n, d) = (1_000_000, 90);
    let m = askotch.memory(n, d, 4);
    // about four length-n vectors plus one block of 100,000 rows: far below one n x n / 10
    // block of kernel values (80 GB)
    assert!(
        m > 32_000_000 && m < 1_000_000_000,
        "ASkotch at n = 1e6: {m} bytes"
    );
    assert!(askotch.memory(2 * n, d, 4) < 2 * m + 1_000_000);
    let extra = stored.memory(n, d, 4) - m;
    assert!(
        extra >= n * 100 * 8 && extra < n * 101 * 8 + 10_000_000,
        "stored preconditioners add {extra} bytes"
    );
    assert!(pcg.memory(n, d, 4) >= n * 100 * 8 * 5);

    let data = common::regression(2000, 3, 35);
    let fit = |cfg: KrrConfig, limit: usize| {
        Joker::builder()
            .loss(Loss::SquaredError)
            .exact()
            .gamma(0.5)
            .lambda(0.5)
            .precision(Precision::F64)
            .max_memory(limit)
            .full_krr(KrrConfig {
                max_iter: 20,
                ..cfg
            })
            .build()
            .unwrap()
            .fit(&data)
    };
    let need = pcg.memory(2000, 3, 8) + 2000 * 3 * 8;
    let err = fit(pcg.clone(), need - 1).unwrap_err().to_string();
    assert!(err.contains("over the limit"), "{err}");
    fit(pcg, need).unwrap();
}

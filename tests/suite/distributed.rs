//! Distributed fits (parallel block minimization) with ranks as threads of this process
//! (`joker::distributed::Threads`), so that no MPI is needed: one rank reproduces the single
//! process iterate for iterate; several ranks reach the duality-gap tolerance and the
//! single-process test metric; a failing rank fails the others instead of hanging them. The
//! MPI transport itself is tested under `mpirun` (`tests/mpi.rs`, feature `mpi`).

use std::path::Path;

use crate::common;

use joker::distributed::{Collective, Single, Threads};

use joker::io::{LibsvmOptions, read_libsvm};
use joker::model::Representation;
use joker::{
    Bandwidth, CsrMatrix, Dataset, DenseMatrix, Features, FitOptions, Joker, JokerError, Loss,
    Model, PbmConfig, Scalar, StopReason,
};

/// Rows `lo..hi` of `data`, as a rank's contiguous share of a file would hold them.
fn rows<T: Scalar>(data: &Dataset<T>, lo: usize, hi: usize) -> Dataset<T> {
    let x = match &data.x {
        Features::Dense(m) => {
            let d = m.ncols();
            Features::Dense(
                DenseMatrix::new(hi - lo, d, m.as_slice()[lo * d..hi * d].to_vec()).unwrap(),
            )
        }
        Features::Sparse(c) => {
            let (p, at) = (c.indptr(), c.indptr()[lo]);
            let indptr = p[lo..=hi].iter().map(|v| v - at).collect();
            let (a, b) = (p[lo], p[hi]);
            Features::Sparse(
                CsrMatrix::new(
                    hi - lo,
                    c.ncols(),
                    indptr,
                    c.indices()[a..b].to_vec(),
                    c.values()[a..b].to_vec(),
                )
                .unwrap(),
            )
        }
    };
    Dataset::new(x, data.y[lo..hi].to_vec()).unwrap()
}

/// `data` cut into `k` contiguous shares.
fn shards<T: Scalar>(data: &Dataset<T>, k: usize) -> Vec<Dataset<T>> {
    let n = data.len();
    (0..k)
        .map(|r| rows(data, n * r / k, n * (r + 1) / k))
        .collect()
}

/// A fit on `k` ranks (threads); every rank's model.
fn fit_on_ranks<T: Scalar>(
    est: &Joker,
    parts: &[Dataset<T>],
    pbm: &PbmConfig,
) -> Vec<joker::Result<Model>> {
    let group = Threads::group(parts.len());
    std::thread::scope(|s| {
        let hs: Vec<_> = group
            .iter()
            .zip(parts)
            .map(|(c, part)| {
                s.spawn(move || est.fit_distributed(part, c, pbm, FitOptions::default()))
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

fn theta(m: &Model) -> &[f64] {
    match &m.representation {
        Representation::RandomFeatures { theta, .. } => theta,
        _ => panic!("not a random-feature model"),
    }
}

#[test]
fn one_rank_is_the_single_process_fit_iterate_for_iterate() {
    let data = common::binary(700, 3, 5);
    for loss in [Loss::SquaredHinge, Loss::Logistic, Loss::Hinge] {
        let est = Joker::builder()
            .loss(loss)
            .c(4.0)
            .n_components(150)
            .block_size(64)
            .max_iter(120)
            .tol(1e-6)
            .stall(false)
            // distributed fits start from zero
            .newton_start(false)
            .build()
            .unwrap();
        let single = est.fit(&data).unwrap();
        let pbm = PbmConfig::default();
        let one = est
            .fit_distributed(&data, &Single, &pbm, FitOptions::default())
            .unwrap();
        assert_eq!(theta(&one), theta(&single), "{loss:?}");
        assert_eq!(one.training.iterations, single.training.iterations);
        let gaps = |m: &Model| m.history.iter().map(|p| p.gap).collect::<Vec<_>>();
        assert_eq!(gaps(&one), gaps(&single), "{loss:?}");
        // one thread rank is the same
        let threads = fit_on_ranks(&est, std::slice::from_ref(&data), &pbm);
        assert_eq!(theta(threads[0].as_ref().unwrap()), theta(&single));
    }
}

/// Accuracy (classifiers) or RMSE (regression) of `m` on `test`.
fn metric(m: &Model, test: &Dataset<f32>) -> f64 {
    if m.classes.is_some() {
        m.score(test).unwrap()
    } else {
        joker::model::rmse(&m.predict(&test.x).unwrap(), &test.y)
    }
}

/// Fits on 2 and 4 ranks: every rank has the same model, the gap reaches the tolerance (for
/// classifiers; see below for KRR), and the test metric is within `slack` of the single-process fit's (accuracy points, or a
/// relative RMSE).
fn check_ranks(est: &Joker, train: &Dataset<f32>, test: &Dataset<f32>, regression: bool) {
    let single = est.fit(train).unwrap();
    let base = metric(&single, test);
    let pbm = PbmConfig::default();
    for k in [2, 4] {
        let models: Vec<Model> = fit_on_ranks(est, &shards(train, k), &pbm)
            .into_iter()
            .map(|m| m.unwrap())
            .collect();
        for m in &models[1..] {
            assert_eq!(theta(m), theta(&models[0]), "ranks disagree");
        }
        let m = &models[0];
        // the data-wide width rules are resolved on every rank's rows together, as one
        // process resolves them (to rounding: the ranks' sums are added in another order);
        // the median looks at rank 0's sample
        if est.bandwidth != Bandwidth::Median {
            assert!(
                (m.kernel.gamma - single.kernel.gamma).abs() <= 1e-12 * single.kernel.gamma,
                "{k} ranks: gamma {} against {}",
                m.kernel.gamma,
                single.kernel.gamma
            );
        }
        let got = metric(m, test);
        eprintln!(
            "{k} ranks: stop {}, metric {got:.4} (single {base:.4}), {} outer steps, gap {:.2e}, {:.1} s (single {:.1} s)",
            m.training.stop,
            m.history.len(),
            m.training.gap,
            m.training.seconds,
            single.training.seconds
        );
        if regression {
            // KRR's dual couples the ranks through the shared features more than the
            // classifiers' boxed duals do: its gap falls slowly (docs/distributed.md)
            assert!(m.training.gap <= 0.05, "{k} ranks: gap {}", m.training.gap);
        } else {
            assert_eq!(m.training.stop, StopReason::Converged, "{k} ranks");
            assert!(m.training.gap <= 1e-3);
        }
        assert_eq!(m.training.n_samples, train.len());
        if regression {
            assert!(got <= base * 1.01, "{k} ranks: RMSE {got} against {base}");
        } else {
            assert!(
                got >= base - 0.002,
                "{k} ranks: accuracy {got} against {base}"
            );
        }
    }
}

#[test]
fn ranks_reach_the_gap_and_the_single_process_accuracy_synthetic() {
    let d = common::binary(3000, 4, 11);
    let to32 = |d: &Dataset<f64>| Dataset::new(d.x.cast::<f32>(), d.y.clone()).unwrap();
    let (train, test) = (to32(&rows(&d, 0, 2000)), to32(&rows(&d, 2000, 3000)));
    // the median width the 0.2-point slack was set with: at the default width on random
    // features (mean squared distance, gamma 0.125 here, twice the median's) fits at gap 1e-3
    // differ by up to 0.5 points of test accuracy between 1 and 2 ranks
    let est = Joker::builder()
        .loss(Loss::SquaredHinge)
        .c(2.0)
        .bandwidth(Bandwidth::Median)
        .n_components(300)
        .block_size(128)
        .build()
        .unwrap();
    check_ranks(&est, &train, &test, false);
    let d = common::regression(3000, 3, 12);
    let (train, test) = (to32(&rows(&d, 0, 2000)), to32(&rows(&d, 2000, 3000)));
    let est = Joker::builder()
        .loss(Loss::SquaredError)
        .lambda(1e-2)
        .n_components(300)
        .block_size(128)
        .build()
        .unwrap();
    check_ranks(&est, &train, &test, true);
}

fn libsvm_pair(dir: &Path, name: &str) -> (Dataset<f32>, Dataset<f32>) {
    let dir = dir.join("libsvm");
    let train = read_libsvm::<f32>(&dir.join(name), &LibsvmOptions::default()).unwrap();
    let opts = LibsvmOptions {
        n_features: Some(train.x.ncols()),
        ..Default::default()
    };
    let test = read_libsvm::<f32>(&dir.join(format!("{name}.t")), &opts).unwrap();
    (train, test)
}

#[test]
fn ranks_reach_the_single_process_accuracy_on_a9a() {
    let Some(dir) = common::data_dir("distributed::ranks_reach_the_single_process_accuracy_on_a9a")
    else {
        return;
    };
    let (train, test) = libsvm_pair(&dir, "a9a");
    // 6,000 of the 32,561 training rows: on all of them the two fits on ranks take minutes
    // (hundreds of outer steps, each a pass over the rank's rows); the whole test set
    let train = rows(&train, 0, 6000);
    let est = Joker::builder()
        .loss(Loss::SquaredHinge)
        .c(1.0)
        .n_components(500)
        // the budget of a distributed fit is its outer steps
        .max_iter(1_000_000)
        .build()
        .unwrap();
    check_ranks(&est, &train, &test, false);
}

#[test]
fn a_failing_rank_fails_every_rank_with_a_named_error() {
    let data = common::binary(400, 3, 9);
    let parts = shards(&data, 3);
    let est = Joker::builder()
        .loss(Loss::SquaredHinge)
        .n_components(50)
        .block_size(32)
        .build()
        .unwrap();
    let group = Threads::group(3);
    let pbm = PbmConfig::default();
    let bad = vec![-1.0; parts[1].len()];
    let out: Vec<joker::Result<Model>> = std::thread::scope(|s| {
        let hs: Vec<_> = group
            .iter()
            .zip(&parts)
            .map(|(c, part)| {
                let bad = &bad;
                let est = &est;
                let pbm = &pbm;
                s.spawn(move || {
                    let opts = FitOptions {
                        sample_weight: (c.rank() == 1).then_some(&bad[..]),
                        ..Default::default()
                    };
                    est.fit_distributed(part, c, pbm, opts)
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (r, o) in out.iter().enumerate() {
        match o {
            Err(JokerError::InvalidParameter { name, .. }) if r == 1 => {
                assert_eq!(*name, "sample_weight")
            }
            Err(JokerError::Distributed(why)) if r != 1 => {
                assert!(why.contains("rank 1 failed"), "{why}")
            }
            other => panic!("rank {r}: {:?}", other.as_ref().map(|_| ())),
        }
    }
}

/// The dual coefficients of an exact model (its support rows are every training row here).
fn exact_alpha(m: &Model) -> &[f64] {
    match &m.representation {
        Representation::Exact { alpha, .. } => alpha,
        _ => panic!("not an exact model"),
    }
}

/// Exact kernels: on one rank the single-process fit iterate for iterate; on 2 and 3 ranks,
/// KRR reaches the dense solve `(K + lambda I) a = y` (every rank's rows gathered, `(K d)_{S_r}`
/// summed over the ranks), and L2-SVC the duality-gap tolerance with the single process's test
/// accuracy; every rank returns the same model over all the rows.
#[test]
fn exact_kernels_over_ranks_reach_the_single_process_optimum() {
    // one rank
    let data = common::binary(400, 3, 3);
    let est = Joker::builder()
        .loss(Loss::SquaredHinge)
        .exact()
        .block_size(64)
        .max_iter(60)
        .stall(false)
        .build()
        .unwrap();
    let single = est.fit(&data).unwrap();
    let one = est
        .fit_distributed(&data, &Single, &PbmConfig::default(), FitOptions::default())
        .unwrap();
    assert_eq!(exact_alpha(&one), exact_alpha(&single));
    assert_eq!(one.training.iterations, single.training.iterations);

    // KRR against the dense solve
    let reg = common::regression(300, 3, 8);
    let (lambda, gamma) = (0.5, 0.4);
    let krr = Joker::builder()
        .loss(Loss::SquaredError)
        .exact()
        .gamma(gamma)
        .lambda(lambda)
        .precision(joker::Precision::F64)
        .standardize(false)
        .normalize_target(false)
        .block_size(32)
        .tol(1e-12)
        .stall(false)
        .max_iter(20_000)
        .build()
        .unwrap();
    let x: Vec<Vec<f64>> = (0..reg.len())
        .map(|i| {
            let mut r = vec![0.0; 3];
            reg.x.gather_range(i, &mut r);
            r
        })
        .collect();
    let kernel = joker::Kernel {
        kind: joker::KernelKind::Gaussian,
        gamma,
    };
    let n = x.len();
    let want = common::krr_dual(n, |i, j| kernel.eval(&x[i], &x[j]), lambda, &reg.y);
    let pbm = PbmConfig {
        max_outer: 400,
        ..PbmConfig::default()
    };
    for k in [2, 3] {
        let models: Vec<Model> = fit_on_ranks(&krr, &shards(&reg, k), &pbm)
            .into_iter()
            .map(|m| m.unwrap())
            .collect();
        for m in &models[1..] {
            assert_eq!(exact_alpha(m), exact_alpha(&models[0]), "ranks disagree");
        }
        let got = exact_alpha(&models[0]);
        assert_eq!(got.len(), n, "{k} ranks: support of every row");
        let err = got
            .iter()
            .zip(&want)
            .map(|(g, w)| (g - w).abs())
            .fold(0.0, f64::max);
        eprintln!(
            "KRR on {k} ranks: {} outer steps, gap {:.2e}, max |alpha - alpha*| {err:.2e}",
            models[0].history.len(),
            models[0].training.gap
        );
        assert!(err < 1e-5, "{k} ranks: dual coefficients differ by {err}");
    }

    // L2-SVC against the single process
    let d = common::binary(1500, 3, 9);
    let to32 = |d: &Dataset<f64>| Dataset::new(d.x.cast::<f32>(), d.y.clone()).unwrap();
    let (train, test) = (to32(&rows(&d, 0, 1000)), to32(&rows(&d, 1000, 1500)));
    let svc = Joker::builder()
        .loss(Loss::SquaredHinge)
        .c(2.0)
        .exact()
        .block_size(64)
        .build()
        .unwrap();
    let base = svc.fit(&train).unwrap().score(&test).unwrap();
    for k in [2, 3] {
        let models: Vec<Model> = fit_on_ranks(&svc, &shards(&train, k), &PbmConfig::default())
            .into_iter()
            .map(|m| m.unwrap())
            .collect();
        let m = &models[0];
        let acc = m.score(&test).unwrap();
        eprintln!(
            "L2-SVC on {k} ranks: {} outer steps, gap {:.2e}, accuracy {acc:.4} (single {base:.4})",
            m.history.len(),
            m.training.gap
        );
        assert_eq!(m.training.stop, StopReason::Converged, "{k} ranks");
        assert_eq!(m.training.n_samples, 1000);
        assert!(acc >= base - 0.005, "{k} ranks: {acc} against {base}");
        assert_eq!(models[1].score(&test).unwrap(), acc, "ranks disagree");
    }
}

/// SVR with its intercept over the ranks: on one rank the single-process fit (checked a pass
/// apart, as an outer step is), iterate for iterate and intercept for intercept; on 2 and 3
/// ranks at the default tolerance (1e-3) the single process's optimum at 1e-6: the primal
/// objective to 2e-3 relative, the intercept to 0.5% of the targets' spread (a missing one is
/// 130% off) and the dual coefficients balanced to `|sum a| <= 1e-3 sum |a|` (the search's
/// own balance: it reads the sums off solves that are only as exact as the gap, and drops a
/// bracket's end that such a reading left stale), every rank with the same
/// model; a checkpoint holds the intercept, and a fit resumed from it on another number of
/// ranks reaches the optimum.
#[test]
fn svr_with_an_intercept_over_ranks_reaches_the_single_process_optimum() {
    let mut data = common::regression(360, 3, 41);
    data.y.iter_mut().for_each(|y| *y += 2.0);
    let svr = |tol: f64| {
        Joker::builder()
            .loss(Loss::EpsilonInsensitive { epsilon: 0.1 })
            .exact()
            .gamma(0.5)
            .lambda(0.5)
            .precision(joker::Precision::F64)
            .standardize(false)
            .normalize_target(false)
            .intercept(true)
            .block_size(40)
            .check_every(9)
            .tol(tol)
            .stall(false)
            .max_iter(20_000)
            .device(joker::Device::Cpu)
            .build()
            .unwrap()
    };
    let est = svr(1e-6);
    let single = est.fit(&data).unwrap();
    let b = single.training.intercept.unwrap();
    // the targets, raised by 2, have their mean near 1.6: far from a zero intercept
    assert!(b > 1.0, "single-process intercept {b}");
    let one = est
        .fit_distributed(&data, &Single, &PbmConfig::default(), FitOptions::default())
        .unwrap();
    assert_eq!(one.training.intercept, Some(b));
    assert_eq!(exact_alpha(&one), exact_alpha(&single));
    assert_eq!(one.training.iterations, single.training.iterations);

    let spread = {
        let mean = data.y.iter().sum::<f64>() / data.len() as f64;
        (data.y.iter().map(|y| (y - mean).powi(2)).sum::<f64>() / data.len() as f64).sqrt()
    };
    let est = svr(1e-3);
    for k in [2, 3] {
        let models: Vec<Model> = fit_on_ranks(&est, &shards(&data, k), &PbmConfig::default())
            .into_iter()
            .map(|m| m.unwrap())
            .collect();
        for m in &models[1..] {
            assert_eq!(exact_alpha(m), exact_alpha(&models[0]), "ranks disagree");
            assert_eq!(m.training.intercept, models[0].training.intercept);
        }
        let m = &models[0];
        let got = m.training.intercept.unwrap();
        let (sum, size) = common::dual_balance(exact_alpha(m));
        let primal = (m.training.primal - single.training.primal) / single.training.primal;
        eprintln!(
            "SVR on {k} ranks: {} outer steps, gap {:.2e}, intercept {got:.6} against {b:.6}, \
             duals' sum {sum:.2e} of {size:.3}, primal {:.6} against {:.6}",
            m.history.len(),
            m.training.gap,
            m.training.primal,
            single.training.primal
        );
        assert_eq!(m.training.stop, StopReason::Converged, "{k} ranks");
        assert!(
            (got - b).abs() <= 5e-3 * spread,
            "{k} ranks: intercept {got} against {b}"
        );
        assert!(
            sum.abs() <= 1e-3 * size,
            "{k} ranks: duals sum to {sum} of {size}"
        );
        // the gap bounds the primal's distance from the optimum for the intercept found; the
        // intercept's own error adds a little
        assert!(
            primal.abs() <= 2e-3,
            "{k} ranks: primal off by {primal:e} relative"
        );
    }

    // a checkpoint keeps the intercept where the coefficients were written, and a fit resumed
    // from it on another number of ranks reaches the same optimum
    let dir = std::env::temp_dir().join(format!("joker-resume-svr-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let first = PbmConfig {
        max_outer: 60,
        checkpoint: Some(joker::distributed::checkpoint::CheckpointConfig {
            dir: dir.clone(),
            every: 1,
            seconds: None,
        }),
        ..PbmConfig::default()
    };
    let stopped = fit_on_ranks(&est, &shards(&data, 2), &first)
        .into_iter()
        .next()
        .unwrap()
        .unwrap();
    let manifest = joker::distributed::checkpoint::read_manifest(&dir)
        .unwrap()
        .unwrap();
    assert_eq!(manifest.intercept.len(), 1);
    assert!(
        manifest.intercept[0] != 0.0,
        "the intercept moved within 60 steps"
    );
    let resume = PbmConfig {
        resume: Some(dir.clone()),
        ..PbmConfig::default()
    };
    let resumed = fit_on_ranks(&est, &shards(&data, 3), &resume)
        .into_iter()
        .next()
        .unwrap()
        .unwrap();
    let got = resumed.training.intercept.unwrap();
    eprintln!(
        "resumed on 3 ranks after 60 steps on 2 (intercept {:.6} there): {} outer steps more, \
         intercept {got:.6}",
        stopped.training.intercept.unwrap(),
        resumed.history.len()
    );
    assert_eq!(resumed.training.stop, StopReason::Converged);
    assert!(
        (got - b).abs() <= 5e-3 * spread,
        "resumed: intercept {got} against {b}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_fit_resumes_from_a_checkpoint_on_another_number_of_ranks() {
    let d = common::binary(2400, 3, 31);
    let to32 = |d: &Dataset<f64>| Dataset::new(d.x.cast::<f32>(), d.y.clone()).unwrap();
    let (train, test) = (to32(&rows(&d, 0, 1800)), to32(&rows(&d, 1800, 2400)));
    let est = Joker::builder()
        .loss(Loss::SquaredHinge)
        .c(2.0)
        .n_components(200)
        .block_size(64)
        .build()
        .unwrap();
    let dir = std::env::temp_dir().join(format!("joker-resume-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    // three outer steps on two ranks, a checkpoint after each
    let first = PbmConfig {
        max_outer: 3,
        checkpoint: Some(joker::distributed::checkpoint::CheckpointConfig {
            dir: dir.clone(),
            every: 1,
            seconds: None,
        }),
        ..PbmConfig::default()
    };
    let stopped: Vec<Model> = fit_on_ranks(&est, &shards(&train, 2), &first)
        .into_iter()
        .map(|m| m.unwrap())
        .collect();
    let manifest = joker::distributed::checkpoint::read_manifest(&dir)
        .unwrap()
        .unwrap();
    assert_eq!((manifest.outer, manifest.rows), (3, 1800));
    // resumed on three ranks, against a fresh start on three
    let resume = PbmConfig {
        resume: Some(dir.clone()),
        ..PbmConfig::default()
    };
    let resumed = fit_on_ranks(&est, &shards(&train, 3), &resume)
        .into_iter()
        .next()
        .unwrap()
        .unwrap();
    let fresh = fit_on_ranks(&est, &shards(&train, 3), &PbmConfig::default())
        .into_iter()
        .next()
        .unwrap()
        .unwrap();
    assert_eq!(resumed.training.stop, StopReason::Converged);
    // the resumed fit starts where the checkpoint left off: its first step is ahead of a
    // fresh start's
    let first_gap = |m: &Model| m.history[0].gap;
    assert!(
        first_gap(&resumed) < first_gap(&fresh),
        "resumed {} against fresh {}",
        first_gap(&resumed),
        first_gap(&fresh)
    );
    assert!(stopped[0].training.gap > resumed.training.gap);
    let (a, b) = (resumed.score(&test).unwrap(), fresh.score(&test).unwrap());
    assert!((a - b).abs() <= 0.01, "resumed {a}, fresh {b}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Every row once over the ranks, as `(label, features)` strings, sorted.
fn row_multiset<T: Scalar>(parts: &[Dataset<T>]) -> Vec<String> {
    let mut rows: Vec<String> = parts
        .iter()
        .flat_map(|p| {
            let dense = match &p.x {
                Features::Dense(m) => m.clone(),
                Features::Sparse(c) => c.to_dense(),
            };
            (0..p.len())
                .map(|i| format!("{} {:?}", p.y[i], dense.row(i)))
                .collect::<Vec<_>>()
        })
        .collect();
    rows.sort();
    rows
}

#[test]
fn random_and_kmeans_partitions_move_every_row_once_and_reach_the_gap() {
    use joker::distributed::partition::{Partition, place};
    let d = common::binary(3000, 4, 51);
    let to32 = |d: &Dataset<f64>| Dataset::new(d.x.cast::<f32>(), d.y.clone()).unwrap();
    let (train, test) = (to32(&rows(&d, 0, 2000)), to32(&rows(&d, 2000, 3000)));
    // a sparse copy: the dense rows with their small entries dropped
    let sparse = {
        let Features::Dense(m) = &train.x else {
            unreachable!()
        };
        let (mut indptr, mut idx, mut val) = (vec![0], vec![], vec![]);
        for i in 0..m.nrows() {
            for (j, v) in m.row(i).iter().enumerate() {
                if v.abs() > 0.5 {
                    idx.push(j as u32);
                    val.push(*v);
                }
            }
            indptr.push(idx.len());
        }
        Dataset::new(
            Features::Sparse(CsrMatrix::new(m.nrows(), 4, indptr, idx, val).unwrap()),
            train.y.clone(),
        )
        .unwrap()
    };
    for data in [&train, &sparse] {
        let parts = shards(data, 3);
        for how in [Partition::Random, Partition::KMeans] {
            let group = Threads::group(3);
            let placed: Vec<Dataset<f32>> = std::thread::scope(|s| {
                let hs: Vec<_> = group
                    .iter()
                    .zip(&parts)
                    .enumerate()
                    .map(|(r, (c, part))| {
                        let first = (0..r).map(|q| parts[q].len()).sum();
                        s.spawn(move || place(part, how, 42, first, c).unwrap())
                    })
                    .collect();
                hs.into_iter().map(|h| h.join().unwrap()).collect()
            });
            assert_eq!(row_multiset(&placed), row_multiset(&parts), "{how:?}");
            let sizes: Vec<usize> = placed.iter().map(|p| p.len()).collect();
            assert!(sizes.iter().all(|&s| s > 0), "{how:?}: {sizes:?}");
            if how == Partition::KMeans {
                // at most 1.05 n / K rows from each of the K ranks
                assert!(
                    sizes
                        .iter()
                        .all(|&s| s <= 3 * (1.05f64 * 667.0 / 3.0).ceil() as usize),
                    "{sizes:?}"
                );
            }
        }
    }
    let est = Joker::builder()
        .loss(Loss::SquaredHinge)
        .c(2.0)
        .n_components(300)
        .block_size(128)
        .build()
        .unwrap();
    let base = metric(&est.fit(&train).unwrap(), &test);
    for how in [Partition::Random, Partition::KMeans] {
        let pbm = PbmConfig {
            partition: how,
            ..PbmConfig::default()
        };
        let m = fit_on_ranks(&est, &shards(&train, 2), &pbm)
            .into_iter()
            .next()
            .unwrap()
            .unwrap();
        let got = metric(&m, &test);
        eprintln!(
            "{how:?}: {} outer steps, gap {:.2e}, accuracy {got:.4} (single {base:.4})",
            m.history.len(),
            m.training.gap
        );
        assert_eq!(m.training.stop, StopReason::Converged, "{how:?}");
        assert_eq!(m.training.n_samples, 2000);
        // two fits within the gap tolerance may differ by a few of the 1,000 test rows
        assert!(got >= base - 0.01, "{how:?}: {got} against {base}");
    }
    // moved rows and checkpoints (which address rows by their place in the file) do not mix
    let bad = PbmConfig {
        partition: Partition::KMeans,
        resume: Some("nowhere".into()),
        ..PbmConfig::default()
    };
    let e = est
        .fit_distributed(&train, &Single, &bad, FitOptions::default())
        .map(|_| ())
        .unwrap_err();
    assert!(matches!(e, JokerError::Unsupported(_)), "{e}");
}

/// Checkpoints by time: with every step count off and zero seconds, every outer step writes
/// one (rank 0's clock decides for all ranks); a configuration that never writes is refused
/// before any work.
#[test]
fn checkpoints_by_time_and_refused_configurations() {
    use joker::distributed::checkpoint::{CheckpointConfig, read_manifest};
    let train = {
        let d = common::binary(900, 3, 33);
        Dataset::new(d.x.cast::<f32>(), d.y.clone()).unwrap()
    };
    let est = Joker::builder()
        .loss(Loss::SquaredHinge)
        .n_components(100)
        .block_size(64)
        .build()
        .unwrap();
    let dir = std::env::temp_dir().join(format!("joker-ckpt-time-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let by_time = |seconds| PbmConfig {
        max_outer: 4,
        checkpoint: Some(CheckpointConfig {
            dir: dir.clone(),
            every: 0,
            seconds,
        }),
        ..PbmConfig::default()
    };
    let models = fit_on_ranks(&est, &shards(&train, 2), &by_time(Some(0.0)));
    let steps = models[0].as_ref().unwrap().history.len();
    assert_eq!(read_manifest(&dir).unwrap().unwrap().outer, steps);
    std::fs::remove_dir_all(&dir).unwrap();
    // an hour between checkpoints: none in four steps (the fit itself succeeds on every rank)
    for (rank, r) in fit_on_ranks(&est, &shards(&train, 2), &by_time(Some(3600.0)))
        .iter()
        .enumerate()
    {
        let model = r
            .as_ref()
            .unwrap_or_else(|e| panic!("rank {rank}: the fit failed: {e}"));
        assert!(!model.history.is_empty(), "rank {rank}: no outer step");
    }
    let manifest = read_manifest(&dir).expect("the checkpoint folder cannot be read");
    assert!(manifest.is_none(), "a checkpoint was written: {manifest:?}");
    for bad in [None, Some(-1.0), Some(f64::NAN)] {
        for r in fit_on_ranks(&est, &shards(&train, 2), &by_time(bad)) {
            assert!(
                matches!(
                    r,
                    Err(JokerError::InvalidParameter {
                        name: "checkpoint",
                        ..
                    })
                ),
                "{bad:?}: {r:?}"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

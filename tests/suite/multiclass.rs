//! One-vs-one against independent references: each pair's column against a dense solve on the
//! pair's rows (exact KRR) and against a binary fit on those rows (L2-SVC); votes, the model
//! file, probabilities, and the settings that cannot take one-vs-one.

use crate::common;

use joker::model::Representation;
use joker::preprocess::{class_pairs, vote};
use joker::rng::Stream;
use joker::{
    Dataset, DenseMatrix, DsgConfig, Features, FitOptions, Joker, JokerError, Kernel, KernelKind,
    Loss, Model, Multiclass, Precision, StopReason, Task,
};

/// Four classes by the quadrant of `(x0, x1)` with 5% of the labels moved to the next class,
/// labels 3, 5, 7, 9 (not `0..K`, so that class indices and labels differ).
fn four_classes(n: usize, seed: u64) -> Dataset<f64> {
    let mut s = Stream::new(seed, 81);
    let mut x = Vec::with_capacity(n * 2);
    let mut y = Vec::with_capacity(n);
    for _ in 0..n {
        let (a, b) = (4.0 * s.uniform() - 2.0, 4.0 * s.uniform() - 2.0);
        let mut k = usize::from(a > 0.0) + 2 * usize::from(b > 0.0);
        if s.uniform() < 0.05 {
            k = (k + 1) % 4;
        }
        y.push(3.0 + 2.0 * k as f64);
        x.extend([a, b]);
    }
    Dataset::new(Features::Dense(DenseMatrix::new(n, 2, x).unwrap()), y).unwrap()
}

fn rows(d: &Dataset<f64>) -> Vec<Vec<f64>> {
    let Features::Dense(m) = &d.x else {
        unreachable!()
    };
    (0..m.nrows()).map(|i| m.row(i).to_vec()).collect()
}

/// The rows of classes `a` and `b` (indices into `classes`) and their `+-1` targets (`+1` for
/// `b`).
fn pair_rows(y: &[f64], classes: &[f64], (a, b): (usize, usize)) -> (Vec<usize>, Vec<f64>) {
    let rows: Vec<usize> = (0..y.len())
        .filter(|&i| y[i] == classes[a] || y[i] == classes[b])
        .collect();
    let t = rows
        .iter()
        .map(|&i| if y[i] == classes[b] { 1.0 } else { -1.0 })
        .collect();
    (rows, t)
}

/// Exact KRR one-vs-one: every pair's dual column is `(K_SS + lambda I)^{-1} y_S` on the pair's
/// rows `S` (dense f64 solve) and zero elsewhere, to 1e-6 relative.
#[test]
fn krr_pairs_equal_dense_solves_on_their_rows() {
    let data = four_classes(240, 1);
    let (lambda, gamma) = (0.5, 0.7);
    let mut cfg = joker::SolverConfig::default();
    cfg.trust_region.kkt_tol = 1e-11;
    let model = Joker::builder()
        .solver(cfg)
        .loss(Loss::SquaredError)
        .task(Task::Classification)
        .multiclass(Multiclass::OneVsOne)
        .exact()
        .gamma(gamma)
        .lambda(lambda)
        .precision(Precision::F64)
        .standardize(false)
        .block_size(32)
        .tol(0.0)
        .stall(false)
        .max_iter(3000)
        .check_every(100)
        .build()
        .unwrap()
        .fit(&data)
        .unwrap();
    let classes = model.classes.clone().unwrap();
    assert_eq!(classes, vec![3.0, 5.0, 7.0, 9.0]);
    assert_eq!(model.multiclass, Multiclass::OneVsOne);
    assert_eq!(model.n_targets, 6);
    let x = rows(&data);
    let n = x.len();
    let kernel = Kernel {
        kind: KernelKind::Gaussian,
        gamma,
    };
    let dual = model.dual.as_ref().unwrap();
    for (p, &pair) in class_pairs(4).iter().enumerate() {
        let (s, t) = pair_rows(&data.y, &classes, pair);
        let m = s.len();
        let mut a = vec![0.0; m * m];
        for (r, &i) in s.iter().enumerate() {
            for (c, &j) in s.iter().enumerate() {
                a[r * m + c] = kernel.eval(&x[i], &x[j]) + if r == c { lambda } else { 0.0 };
            }
        }
        let want = common::dense_solve(a, t);
        let col = &dual[p * n..(p + 1) * n];
        let err: f64 = s
            .iter()
            .zip(&want)
            .map(|(&i, w)| (col[i] - w).powi(2))
            .sum::<f64>()
            .sqrt();
        let norm: f64 = want.iter().map(|w| w * w).sum::<f64>().sqrt();
        assert!(
            err / norm < 1e-6,
            "pair {pair:?}: relative error {}",
            err / norm
        );
        let outside = (0..n).filter(|i| !s.contains(i)).map(|i| col[i].abs());
        assert_eq!(outside.fold(0.0, f64::max), 0.0, "pair {pair:?}");
    }
}

/// Exact L2-SVC one-vs-one: every pair's decision values on fresh points equal those of a
/// binary fit on the pair's rows alone (the same settings), to 1e-5 of their scale.
#[test]
fn svc_pairs_equal_binary_fits_on_their_rows() {
    let data = four_classes(300, 2);
    let test = four_classes(100, 3);
    let params = || {
        Joker::builder()
            .loss(Loss::SquaredHinge)
            .exact()
            .gamma(0.8)
            .c(2.0)
            .standardize(false)
            .precision(Precision::F64)
            .block_size(64)
            .tol(1e-9)
            .stall(false)
            .max_iter(5000)
    };
    let model = params()
        .multiclass(Multiclass::OneVsOne)
        .build()
        .unwrap()
        .fit(&data)
        .unwrap();
    let classes = model.classes.clone().unwrap();
    let dv = model.decision_function(&test.x).unwrap();
    // the prediction's class-by-class products equal the plain sums over the support
    let Representation::Exact {
        n_support,
        support,
        alpha,
    } = &model.representation
    else {
        panic!("an exact model")
    };
    let kernel = model.kernel;
    let xt = rows(&test);
    for (i, xi) in xt.iter().enumerate() {
        for p in 0..6 {
            let want: f64 = (0..*n_support)
                .map(|s| alpha[p * n_support + s] * kernel.eval(&support[s * 2..s * 2 + 2], xi))
                .sum();
            let got = dv[i * 6 + p];
            assert!(
                (got - want).abs() < 1e-9 * (1.0 + want.abs()),
                "{got} vs {want}"
            );
        }
    }
    let x = rows(&data);
    for (p, &pair) in class_pairs(4).iter().enumerate() {
        let (s, _) = pair_rows(&data.y, &classes, pair);
        let xs: Vec<f64> = s.iter().flat_map(|&i| x[i].clone()).collect();
        let ys: Vec<f64> = s.iter().map(|&i| data.y[i]).collect();
        let sub = Dataset::new(
            Features::Dense(DenseMatrix::new(s.len(), 2, xs).unwrap()),
            ys,
        )
        .unwrap();
        let binary = params().build().unwrap().fit(&sub).unwrap();
        assert_eq!(binary.classes, Some(vec![classes[pair.0], classes[pair.1]]));
        let want = binary.decision_function(&test.x).unwrap();
        let scale = want.iter().fold(1.0f64, |m, v| m.max(v.abs()));
        for (i, w) in want.iter().enumerate() {
            let got = dv[i * 6 + p];
            assert!(
                (got - w).abs() < 1e-5 * scale,
                "pair {pair:?}, row {i}: {got} vs {w}"
            );
        }
    }
}

/// Random features one-vs-one: `theta` holds a column per pair, predictions are the votes of
/// the decision values, the file (version 3, `multiclass: "ovo"`) reads back to the same
/// predictions, and a one-vs-rest model's file is unchanged (version 1, no `multiclass`).
#[test]
fn votes_and_model_files() {
    let train = common::three_classes(600, 6);
    let test = common::three_classes(400, 7);
    let fit = |m: Multiclass| {
        Joker::builder()
            .loss(Loss::SquaredHinge)
            .c(10.0)
            .n_components(512)
            .block_size(128)
            .max_iter(400)
            .multiclass(m)
            .build()
            .unwrap()
            .fit(&train)
            .unwrap()
    };
    let model = fit(Multiclass::OneVsOne);
    assert_eq!(model.n_targets, 3);
    let Representation::RandomFeatures { theta, .. } = &model.representation else {
        panic!("random features expected")
    };
    assert_eq!(theta.len(), 512 * 3);
    let acc = model.score(&test).unwrap();
    assert!(acc > 0.93, "accuracy {acc}");
    let dv = model.decision_function(&test.x).unwrap();
    let pred = model.predict(&test.x).unwrap();
    let classes = model.classes.clone().unwrap();
    for (row, p) in dv.chunks_exact(3).zip(&pred) {
        assert_eq!(classes[vote(row, 3)], *p);
    }
    let dir = std::env::temp_dir().join(format!("joker-multiclass-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("ovo.json");
    model.save(&path).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(json["version"], 3);
    assert_eq!(json["multiclass"], "ovo");
    let back = Model::load(&path).unwrap();
    assert_eq!(back.predict(&test.x).unwrap(), pred);
    assert_eq!(back.decision_function(&test.x).unwrap(), dv);
    // a file that claims one-vs-one with the columns of one-vs-rest is refused
    let mut wrong = json.clone();
    wrong["classes"] = serde_json::json!([0.0, 1.0, 2.0, 3.0]);
    assert!(matches!(
        Model::from_json(&wrong.to_string()),
        Err(JokerError::ModelFormat(_))
    ));
    let ovr = fit(Multiclass::OneVsRest);
    let path = dir.join("ovr.json");
    ovr.save(&path).unwrap();
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(json["version"], 1);
    assert!(json.get("multiclass").is_none());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// KLR one-vs-one: coupled probabilities are a distribution per row and agree with the votes
/// on nearly every row.
#[test]
fn klr_one_vs_one_probabilities() {
    let train = four_classes(400, 4);
    let test = four_classes(200, 5);
    let model = Joker::builder()
        .loss(Loss::Logistic)
        .exact()
        .c(4.0)
        .multiclass(Multiclass::OneVsOne)
        .build()
        .unwrap()
        .fit(&train)
        .unwrap();
    let proba = model.predict_proba(&test.x).unwrap();
    let pred = model.predict(&test.x).unwrap();
    let classes = model.classes.clone().unwrap();
    let mut agree = 0;
    for (p, label) in proba.chunks_exact(4).zip(&pred) {
        let total: f64 = p.iter().sum();
        assert!((total - 1.0).abs() < 1e-9, "{p:?}");
        assert!(p.iter().all(|v| (0.0..=1.0).contains(v)), "{p:?}");
        let best = (0..4).max_by(|&a, &b| p[a].total_cmp(&p[b])).unwrap();
        agree += usize::from(classes[best] == *label);
    }
    assert!(
        agree >= 190,
        "probabilities agree with the votes on {agree} of 200 rows"
    );
    assert!(model.score(&test).unwrap() > 0.85);
}

/// One-vs-one needs DBCD-TR: the doubly stochastic solvers refuse it when the parameters are
/// built; binary fits ignore it; by default exact-kernel fits take it and feature maps do not.
#[test]
fn one_vs_one_where_it_applies() {
    let err = Joker::builder()
        .loss(Loss::Hinge)
        .multiclass(Multiclass::OneVsOne)
        .dsg(DsgConfig::default())
        .build()
        .unwrap_err();
    assert!(
        matches!(&err, JokerError::InvalidParameter { name, .. } if *name == "multiclass"),
        "{err}"
    );
    let binary = Joker::builder()
        .loss(Loss::SquaredHinge)
        .n_components(64)
        .multiclass(Multiclass::OneVsOne)
        .build()
        .unwrap()
        .fit(&common::binary(200, 2, 9))
        .unwrap();
    assert_eq!(binary.n_targets, 1);
    assert_eq!(binary.multiclass, Multiclass::OneVsRest);
    assert_eq!(binary.training.multiclass, "");
    // the automatic choice: one-vs-one on the exact kernel, one-vs-rest with features
    let three = four_classes(200, 10);
    let auto = |exact: bool| {
        let b = Joker::builder().loss(Loss::SquaredHinge);
        let b = if exact { b.exact() } else { b.n_components(64) };
        b.build().unwrap().fit(&three).unwrap()
    };
    let exact = auto(true);
    assert_eq!(
        (exact.multiclass, exact.n_targets),
        (Multiclass::OneVsOne, 6)
    );
    assert!(
        exact
            .training
            .multiclass
            .starts_with("one-vs-one, 6 pairs, ")
            && exact
                .training
                .multiclass
                .contains(" at a time (auto: the exact kernel"),
        "{}",
        exact.training.multiclass
    );
    let features = auto(false);
    assert_eq!(
        (features.multiclass, features.n_targets),
        (Multiclass::OneVsRest, 4)
    );
    assert!(
        features
            .training
            .multiclass
            .starts_with("one-vs-rest, 4 columns (auto: a feature map"),
        "{}",
        features.training.multiclass
    );
}

/// Pairs solved several at a time (a fit called outside a rayon pool with more than one
/// thread) and one after the other (a fit called from a thread of a pool) give the same model
/// bit for bit; the progress callback runs on the calling thread and sees iterations that never
/// decrease; a callback that asks to stop ends the whole fit as cancelled and is called once
/// more, with the whole problem's last check.
#[test]
fn pairs_at_once_and_in_turn_give_one_model() {
    let data = four_classes(800, 9);
    let builder = || {
        Joker::builder()
            .loss(Loss::SquaredHinge)
            .exact()
            .gamma(0.8)
            .c(2.0)
            .block_size(64)
            .tol(1e-6)
            .stall(false)
            .multiclass(Multiclass::OneVsOne)
    };
    let params = builder().build().unwrap();
    let caller = std::thread::current().id();
    let (mut iters, mut elsewhere) = (Vec::new(), 0);
    let at_once = params
        .fit_with(
            &data,
            FitOptions {
                progress: Some(Box::new(|p| {
                    elsewhere += usize::from(std::thread::current().id() != caller);
                    iters.push(p.iter);
                    true
                })),
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(elsewhere, 0, "callbacks off the calling thread");
    assert!(iters.len() > 6, "{} checks for 6 pairs", iters.len());
    assert!(iters.windows(2).all(|w| w[0] <= w[1]), "{iters:?}");
    assert_eq!(*iters.last().unwrap(), at_once.training.iterations);
    assert_eq!(at_once.training.stop, StopReason::Converged);

    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(3)
        .build()
        .unwrap();
    let in_turn = pool.install(|| params.fit(&data)).unwrap();
    let alpha = |m: &Model| match &m.representation {
        Representation::Exact { alpha, .. } => alpha.clone(),
        _ => panic!("an exact model"),
    };
    assert_eq!(alpha(&at_once), alpha(&in_turn));
    assert_eq!(at_once.training.iterations, in_turn.training.iterations);
    let at_a_time = |m: &Model| {
        let t = &m.training.multiclass;
        let (head, _) = t.split_once(" at a time").expect(t);
        head.rsplit(' ').next().unwrap().parse::<usize>().expect(t)
    };
    assert_eq!(at_a_time(&at_once), rayon::current_num_threads().min(6));
    assert_eq!(at_a_time(&in_turn), 1);
    // a kernel cache that holds the largest pair's kernel once, not twice: one at a time
    let mut counts = [0usize; 4];
    data.y
        .iter()
        .for_each(|&l| counts[((l - 3.0) / 2.0) as usize] += 1);
    counts.sort_unstable();
    let largest = counts[2] + counts[3];
    let one_pair = builder()
        .kernel_cache(largest * largest * 4 * 3 / 2)
        .build()
        .unwrap()
        .fit(&data)
        .unwrap();
    assert_eq!(at_a_time(&one_pair), 1);
    assert_eq!(alpha(&one_pair), alpha(&at_once));
    // a time limit spent before the pairs begin: stopped by it, not cancelled
    let timed = Joker::builder()
        .loss(Loss::SquaredHinge)
        .exact()
        .multiclass(Multiclass::OneVsOne)
        .time_limit(std::time::Duration::from_nanos(1))
        .build()
        .unwrap();
    for install in [false, true] {
        let m = if install {
            pool.install(|| timed.fit(&data))
        } else {
            timed.fit(&data)
        }
        .unwrap();
        assert_eq!(
            m.training.stop,
            StopReason::TimeLimit,
            "in a pool: {install}"
        );
    }

    for install in [false, true] {
        let mut seen = 0;
        let mut fit = || {
            params.fit_with(
                &data,
                FitOptions {
                    progress: Some(Box::new(|_| {
                        seen += 1;
                        seen < 3
                    })),
                    ..Default::default()
                },
            )
        };
        let stopped = if install { pool.install(fit) } else { fit() }.unwrap();
        assert_eq!(
            stopped.training.stop,
            StopReason::Cancelled,
            "in a pool: {install}"
        );
        assert_eq!(seen, 4, "in a pool: {install}");
    }
}

//! Class probabilities of SVMs by Platt scaling (`Joker::probability`): each decision column's
//! sigmoid fitted on cross-validated decision values, the columns combined into distributions.

use crate::common;

use joker::io::{LibsvmOptions, read_libsvm};
use joker::{Joker, JokerError, Loss, Model, Multiclass};

/// The mean negative log-probability of the true class.
fn log_loss(p: &[f64], y: &[f64], classes: &[f64]) -> f64 {
    let k = classes.len();
    let total: f64 = y
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let c = classes.iter().position(|c| c == v).unwrap();
            -p[i * k + c].max(1e-15).ln()
        })
        .sum();
    total / y.len() as f64
}

/// Distributions: `k` values per row in [0, 1] that sum to 1.
fn assert_distributions(p: &[f64], k: usize) {
    for row in p.chunks_exact(k) {
        assert!(row.iter().all(|v| (0.0..=1.0).contains(v)), "{row:?}");
        assert!((row.iter().sum::<f64>() - 1.0).abs() < 1e-9, "{row:?}");
    }
}

/// dna (3 classes, one-vs-one on the exact kernel): LIBSVM's SVC(probability=True) at the same
/// C = 1 and width on the same z-scored rows has a test log-loss of 0.1312
/// (`scripts/peers/proba.py`, docs/bench/proba); the calibrated L1-SVC must stay within 10%
/// of it, far below the uncalibrated alternative (the class prior: 1.03).
#[test]
fn dna_calibrated_probabilities_are_near_libsvm() {
    let Some(dir) = common::data_dir("proba::dna_calibrated_probabilities_are_near_libsvm") else {
        return;
    };
    let dir = dir.join("libsvm");
    let train = read_libsvm::<f32>(&dir.join("dna.scale"), &LibsvmOptions::default()).unwrap();
    let opts = LibsvmOptions {
        n_features: Some(train.x.ncols()),
        ..Default::default()
    };
    let test = read_libsvm::<f32>(&dir.join("dna.scale.t"), &opts).unwrap();
    let est = Joker::builder()
        .loss(Loss::Hinge)
        .c(1.0)
        .auto_exact(true)
        .probability(true)
        .build()
        .unwrap();
    let model = est.fit(&train).unwrap();
    assert_eq!(model.multiclass, Multiclass::OneVsOne);
    let classes = model.classes.clone().unwrap();
    let p = model.predict_proba(&test.x).unwrap();
    assert_distributions(&p, 3);
    let loss = log_loss(&p, &test.y, &classes);
    eprintln!("dna: calibrated L1-SVC test log-loss {loss:.4}");
    assert!(loss < 0.1312 * 1.10, "log-loss {loss}");
    // the most probable class is the voted one on nearly every row
    let labels = model.predict(&test.x).unwrap();
    let agree = p
        .chunks_exact(3)
        .zip(&labels)
        .filter(|(row, l)| {
            let best = (0..3).max_by(|&a, &b| row[a].total_cmp(&row[b])).unwrap();
            classes[best] == **l
        })
        .count();
    assert!(agree as f64 >= 0.98 * labels.len() as f64, "{agree}");
    // saved as version 5 and read back with the same probabilities
    let path = std::env::temp_dir().join(format!("joker-proba-{}.json", std::process::id()));
    model.save(&path).unwrap();
    let back = Model::load(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    assert_eq!(back.version, 5);
    assert_eq!(back.predict_proba(&test.x).unwrap(), p);
}

/// One-vs-rest on random features and a binary problem: distributions, P(positive) increasing
/// in the decision value, and the refusals.
#[test]
fn platt_scaling_across_schemes_and_its_refusals() {
    let data = common::three_classes(300, 4);
    let model = Joker::builder()
        .loss(Loss::SquaredHinge)
        .n_components(128)
        .multiclass(Multiclass::OneVsRest)
        .probability(true)
        .build()
        .unwrap()
        .fit(&data)
        .unwrap();
    let cal = model.calibration.as_ref().expect("calibrated");
    assert_eq!((cal.a.len(), cal.folds), (3, 5));
    assert_distributions(&model.predict_proba(&data.x).unwrap(), 3);

    let data = common::binary(200, 3, 9);
    let model = Joker::builder()
        .loss(Loss::Hinge)
        .exact()
        .probability(true)
        .build()
        .unwrap()
        .fit(&data)
        .unwrap();
    let p = model.predict_proba(&data.x).unwrap();
    let f = model.decision_function(&data.x).unwrap();
    assert_distributions(&p, 2);
    let mut pairs: Vec<(f64, f64)> = f
        .iter()
        .zip(p.chunks_exact(2))
        .map(|(&v, r)| (v, r[1]))
        .collect();
    pairs.sort_by(|a, b| a.0.total_cmp(&b.0));
    assert!(
        pairs.windows(2).all(|w| w[0].1 <= w[1].1),
        "not monotone in f"
    );
    assert!(pairs[0].1 < 0.5 && pairs[pairs.len() - 1].1 > 0.5);

    // an SVM without calibration has no probabilities
    let plain = Joker::builder()
        .loss(Loss::Hinge)
        .exact()
        .build()
        .unwrap()
        .fit(&data)
        .unwrap();
    assert!(matches!(
        plain.predict_proba(&data.x),
        Err(JokerError::Unsupported(_))
    ));
    // a regression cannot have them
    let err = Joker::builder()
        .task(joker::Task::Regression)
        .probability(true)
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("probabilit"), "{err}");
    // a class of one row cannot be held out and trained on
    let mut few = common::binary(40, 2, 1);
    few.y[0] = 7.0;
    let est = Joker::builder()
        .loss(Loss::Hinge)
        .exact()
        .probability(true)
        .multiclass(Multiclass::OneVsRest)
        .build()
        .unwrap();
    let err = est.fit(&few).unwrap_err();
    assert!(err.to_string().contains("at least 2 rows"), "{err}");
}

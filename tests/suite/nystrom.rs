//! Nystrom feature maps through the estimator: against the exact kernel, growing the centres,
//! the model file and the refused configurations.

use crate::common;

use joker::model::Representation;
use joker::{Centers, FeatureKind, FitOptions, Joker, JokerBuilder, Loss, Model, Precision};

/// A tight f64 fit of `loss` on the builder's map or kernel.
fn tight(b: JokerBuilder, loss: Loss) -> Joker {
    b.loss(loss)
        .gamma(2.0)
        .lambda(0.05)
        .precision(Precision::F64)
        .block_size(32)
        .max_iter(20_000)
        .tol(1e-13)
        .stall(false)
        .build()
        .unwrap()
}

/// With every training row a centre, `psi(x)^T psi(z) = k(x, X) K^-1 k(X, z)`, which is `k`
/// on the training rows: the Nystrom fit solves the exact-kernel problem, and its decision
/// values, on training and on new rows, are the exact model's.
#[test]
fn all_rows_as_centres_give_the_exact_model() {
    let (train, test) = (common::binary(150, 2, 1), common::binary(60, 2, 2));
    let n = train.len();
    for loss in [Loss::SquaredError, Loss::SquaredHinge] {
        let exact = tight(Joker::builder().exact(), loss).fit(&train).unwrap();
        let ny = tight(
            Joker::builder()
                .n_components(n)
                .feature_map(FeatureKind::Nystrom(Centers::Uniform)),
            loss,
        )
        .fit(&train)
        .unwrap();
        assert!(
            exact.training.gap < 1e-9 && ny.training.gap < 1e-9,
            "{loss:?}"
        );
        assert!(
            ny.training
                .feature_map
                .starts_with(&format!("nystrom, {n} uniform")),
            "{}",
            ny.training.feature_map
        );
        for x in [&train.x, &test.x] {
            let (a, b) = (
                exact.decision_function(x).unwrap(),
                ny.decision_function(x).unwrap(),
            );
            // the primal is 1-strongly convex in w and k(x, x) = 1: each model's decision
            // values are within sqrt(2 (P - D)) of the optimum's
            let within = |m: &joker::Model| (2.0 * (m.training.primal - m.training.dual)).sqrt();
            let bound = (within(&exact) + within(&ny)).max(1e-6);
            let d = common::max_diff(&a, &b);
            assert!(
                d < bound,
                "{loss:?}: decision values differ by {d} > {bound}"
            );
        }
    }
}

/// The features formed once and kept (within the kernel cache) and formed per block in the
/// centres' coefficients (a cache of 0) are two engines for one problem: both reach its
/// optimum, for one and for several target columns, and say which they were.
#[test]
fn stored_and_per_block_features_reach_one_optimum() {
    let sets = [
        (
            Loss::SquaredError,
            common::regression(300, 3, 7),
            common::regression(80, 3, 8),
        ),
        (
            Loss::SquaredHinge,
            common::binary(300, 2, 9),
            common::binary(80, 2, 10),
        ),
        (
            Loss::SquaredHinge,
            common::three_classes(300, 11),
            common::three_classes(80, 12),
        ),
    ];
    for (loss, train, test) in &sets {
        let fit = |cache: usize| {
            let b = Joker::builder()
                .n_components(50)
                .feature_map(FeatureKind::Nystrom(Centers::KMeans))
                .kernel_cache(cache);
            tight(b, *loss).fit(train).unwrap()
        };
        let (stored, per_block) = (fit(1 << 30), fit(0));
        assert!(
            stored
                .training
                .feature_map
                .contains("formed once and kept (300 x "),
            "{}",
            stored.training.feature_map
        );
        assert!(
            per_block.training.feature_map.contains("formed per block"),
            "{}",
            per_block.training.feature_map
        );
        for m in [&stored, &per_block] {
            assert!(m.training.gap < 1e-9, "{loss:?}: gap {}", m.training.gap);
        }
        let d = common::max_diff(
            &stored.decision_function(&test.x).unwrap(),
            &per_block.decision_function(&test.x).unwrap(),
        );
        assert!(d < 1e-6, "{loss:?}: the engines' models differ by {d}");
    }
}

/// Growing the centres from 20 to 60 (the uniform rule's 20 are the first 20 of its 60)
/// warm-started reaches the optimum of a cold fit at 60 centres.
#[test]
fn growing_the_centres_reaches_the_cold_optimum() {
    let (train, test) = (common::binary(300, 2, 3), common::binary(80, 2, 4));
    for rule in [Centers::Uniform, Centers::KMeans] {
        let b = || {
            Joker::builder()
                .n_components(60)
                .feature_map(FeatureKind::Nystrom(rule))
        };
        let cold = tight(b(), Loss::SquaredHinge).fit(&train).unwrap();
        let (grown, stages) = tight(b(), Loss::SquaredHinge)
            .fit_growing(&train, &[20, 60], FitOptions::default())
            .unwrap();
        assert_eq!(stages.len(), 2);
        assert!(
            grown.training.gap < 1e-9,
            "{rule:?}: gap {}",
            grown.training.gap
        );
        let d = common::max_diff(
            &cold.decision_function(&test.x).unwrap(),
            &grown.decision_function(&test.x).unwrap(),
        );
        assert!(d < 1e-6, "{rule:?}: grown and cold fits differ by {d}");
        // the warm start pays: to a gap of 1e-6 the second stage needs fewer iterations
        // than the cold fit
        let loose = || {
            Joker::builder()
                .n_components(60)
                .feature_map(FeatureKind::Nystrom(rule))
                .loss(Loss::SquaredHinge)
                .gamma(2.0)
                .lambda(0.05)
                .block_size(32)
                .tol(1e-6)
                .stall(false)
                // DBCD-TR from zero (a cold L2-SVC fit would start at its optimum)
                .newton_start(false)
                .build()
                .unwrap()
        };
        let cold = loose().fit(&train).unwrap();
        let (_, stages) = loose()
            .fit_growing(&train, &[20, 60], FitOptions::default())
            .unwrap();
        assert!(
            stages[1].iterations < cold.training.iterations,
            "{rule:?}: {} vs {}",
            stages[1].iterations,
            cold.training.iterations
        );
    }
}

/// Each centre rule gives a model close to the exact one at a fraction of the rows, saved
/// and loaded as an exact-kernel model over its centres, with the same predictions.
#[test]
fn every_rule_fits_saves_and_loads() {
    let (train, test) = (common::regression(400, 3, 5), common::regression(100, 3, 6));
    let exact = tight(Joker::builder().exact(), Loss::SquaredError)
        .fit(&train)
        .unwrap();
    let want = exact.decision_function(&test.x).unwrap();
    let scale = want.iter().map(|v| v * v).sum::<f64>().sqrt() / (want.len() as f64).sqrt();
    for rule in [Centers::Uniform, Centers::KMeans, Centers::Leverage] {
        let p = Joker::builder()
            .loss(Loss::SquaredError)
            .gamma(0.5)
            .lambda(0.05)
            .n_components(80)
            .feature_map(FeatureKind::Nystrom(rule))
            .build()
            .unwrap();
        let model = p.fit(&train).unwrap();
        match &model.representation {
            Representation::Exact { n_support, .. } => assert!(*n_support <= 80),
            other => panic!("{rule:?}: {other:?}"),
        }
        let path = std::env::temp_dir().join(format!("joker-nystrom-{rule:?}.json"));
        model.save(&path).unwrap();
        let back = Model::load(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        let (a, b) = (
            model.decision_function(&test.x).unwrap(),
            back.decision_function(&test.x).unwrap(),
        );
        assert_eq!(a, b, "{rule:?}: loaded model predicts differently");
        assert_eq!(back.training.feature_map, model.training.feature_map);
        // 80 centres of a smooth 3-d function: within 15% of the signal's scale of the exact
        // model (f32 features, default tolerance; measured 8.6%, 7.5% and 11.7% for the
        // uniform, k-means and leverage rules)
        let rms = (a
            .iter()
            .zip(&want)
            .map(|(p, q)| (p - q).powi(2))
            .sum::<f64>()
            / a.len() as f64)
            .sqrt();
        assert!(rms < 0.15 * scale, "{rule:?}: rms {rms} vs scale {scale}");
    }
}

#[test]
fn nystrom_configurations_that_cannot_work_are_refused() {
    let e = Joker::builder()
        .exact()
        .feature_map(FeatureKind::Nystrom(Centers::KMeans))
        .build()
        .unwrap_err();
    assert!(e.to_string().contains("feature_map"), "{e}");
    let e = Joker::builder()
        .feature_map(FeatureKind::Nystrom(Centers::Uniform))
        .dsg(Default::default())
        .build()
        .unwrap_err();
    assert!(e.to_string().contains("feature_map"), "{e}");
}

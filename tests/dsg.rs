//! The doubly stochastic solvers through the public API: on easy problems they come close to
//! DBCD-TR, their models are ordinary random-feature models that survive save/load, and bad
//! settings are errors, never panics.

mod common;

use joker::model::Representation;
use joker::{DsgConfig, DsgVariant, Joker, JokerError, Loss, Model, StepSize};

fn variants() -> Vec<DsgConfig> {
    ["dsg", "udsg", "cdsg"]
        .iter()
        .map(|v| DsgConfig::named(v).unwrap())
        .collect()
}

fn tmp(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("joker-dsg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// Binary classification: every variant's test accuracy is within 3 points of DBCD-TR's with
/// the same kernel, `lambda` and number of features.
#[test]
fn classification_accuracy_is_close_to_dbcd() {
    let train = common::binary(4000, 3, 1);
    let test = common::binary(2000, 3, 2);
    let base = || {
        Joker::builder()
            .loss(Loss::Logistic)
            .lambda(0.1)
            .gamma(0.5)
            .n_components(512)
    };
    let dbcd = base().max_iter(400).build().unwrap().fit(&train).unwrap();
    let reference = dbcd.score(&test).unwrap();
    for cfg in variants() {
        let name = cfg.variant.name();
        let model = base()
            .dsg(cfg)
            .max_iter(600)
            .build()
            .unwrap()
            .fit(&train)
            .unwrap();
        let acc = model.score(&test).unwrap();
        eprintln!("{name}: accuracy {acc:.4}, DBCD-TR {reference:.4}");
        assert_eq!(model.training.solver, name);
        assert!(
            acc > reference - 0.03,
            "{name}: {acc} vs DBCD-TR {reference}"
        );
    }
}

/// Regression (squared loss) with enough regularisation that 600 steps reach the optimum: the
/// test RMSE is within 10% of DBCD-TR's.
#[test]
fn regression_rmse_is_close_to_dbcd() {
    let train = common::regression(4000, 3, 3);
    let test = common::regression(2000, 3, 4);
    let base = || Joker::builder().lambda(20.0).gamma(0.3).n_components(512);
    let dbcd = base().max_iter(400).build().unwrap().fit(&train).unwrap();
    let rmse = |m: &Model| -> f64 {
        let p = m.predict(&test.x).unwrap();
        (p.iter()
            .zip(&test.y)
            .map(|(a, b)| (a - b).powi(2))
            .sum::<f64>()
            / p.len() as f64)
            .sqrt()
    };
    let reference = rmse(&dbcd);
    for cfg in variants() {
        let name = cfg.variant.name();
        let model = base()
            .dsg(cfg)
            .max_iter(600)
            .build()
            .unwrap()
            .fit(&train)
            .unwrap();
        let e = rmse(&model);
        eprintln!("{name}: rmse {e:.4}, DBCD-TR {reference:.4}");
        assert!(e < 1.1 * reference, "{name}: {e} vs DBCD-TR {reference}");
    }
}

/// Three classes one-vs-rest (`T = 3` coefficient columns per feature).
#[test]
fn one_vs_rest_learns_three_classes() {
    let train = common::three_classes(3000, 5);
    let test = common::three_classes(1000, 6);
    for cfg in variants() {
        let name = cfg.variant.name();
        let model = Joker::builder()
            .loss(Loss::SquaredHinge)
            .lambda(0.1)
            .gamma(0.5)
            .n_components(256)
            .dsg(cfg)
            .max_iter(300)
            .build()
            .unwrap()
            .fit(&train)
            .unwrap();
        assert_eq!(model.n_targets, 3);
        let acc = model.score(&test).unwrap();
        eprintln!("{name}: three-class accuracy {acc:.4}");
        assert!(acc > 0.9, "{name}: {acc}");
    }
}

/// The model is a random-feature model of the opened features (a multiple of the block, at
/// most the cap), and predicts the same after save and load.
#[test]
fn models_are_random_feature_models_that_survive_save_and_load() {
    let train = common::binary(600, 4, 7);
    let cfg = DsgConfig {
        feature_block: 32,
        batch_size: 50,
        ..DsgConfig::named("cdsg").unwrap()
    };
    for (steps, cap) in [(3usize, 256usize), (40, 256)] {
        let model = Joker::builder()
            .loss(Loss::Hinge)
            .n_components(cap)
            .dsg(cfg.clone())
            .max_iter(steps)
            .build()
            .unwrap()
            .fit(&train)
            .unwrap();
        let Representation::RandomFeatures { n_components, .. } = &model.representation else {
            panic!("not a random-feature model");
        };
        assert_eq!(n_components % 32, 0);
        assert!(*n_components <= cap && *n_components >= 32);
        if steps == 3 {
            // at most one block opened per step
            assert!(*n_components <= 96);
        }
        assert!(model.dual.is_none());
        let path = tmp(&format!("m{steps}.json"));
        model.save(&path).unwrap();
        let back = Model::load(&path).unwrap();
        assert_eq!(back.training.solver, "cdsg");
        assert_eq!(
            model.decision_function(&train.x).unwrap(),
            back.decision_function(&train.x).unwrap()
        );
    }
}

/// Bad settings are typed errors naming the setting, from the builder or the fit.
#[test]
fn bad_settings_are_errors_not_panics() {
    let name = |e: JokerError| match e {
        JokerError::InvalidParameter { name, .. } => name,
        other => panic!("unexpected {other:?}"),
    };
    let with = |cfg: DsgConfig| Joker::builder().dsg(cfg).build().unwrap_err();
    let ok = DsgConfig::default();
    assert_eq!(
        name(with(DsgConfig {
            batch_size: 0,
            ..ok.clone()
        })),
        "batch_size"
    );
    assert_eq!(
        name(with(DsgConfig {
            feature_block: 0,
            ..ok.clone()
        })),
        "feature_block"
    );
    assert_eq!(
        name(with(DsgConfig {
            feature_block: 4096,
            ..ok.clone()
        })),
        "feature_block"
    );
    assert_eq!(
        name(with(DsgConfig {
            step: StepSize {
                theta: -1.0,
                t0: 1.0
            },
            ..ok.clone()
        })),
        "step"
    );
    assert_eq!(
        name(with(DsgConfig {
            variant: DsgVariant::Udsg {
                new_steps: 0,
                old_steps: 3
            },
            ..ok.clone()
        })),
        "udsg"
    );
    let e = Joker::builder()
        .exact()
        .dsg(ok.clone())
        .build()
        .unwrap_err();
    assert_eq!(name(e), "dsg");
    let e = Joker::builder()
        .loss(Loss::Lp { p: 3.0 })
        .dsg(ok.clone())
        .build()
        .unwrap_err();
    assert_eq!(name(e), "loss");
    let e = Joker::builder()
        .dsg(ok.clone())
        .device(joker::Device::Cuda(0))
        .build()
        .unwrap_err();
    assert!(matches!(e, JokerError::Unsupported(_)), "{e:?}");
    // a step whose decay factor 1 - gamma_1 lambda / n is not positive
    let small = common::regression(20, 2, 9);
    let e = Joker::builder()
        .lambda(1e3)
        .n_components(64)
        .dsg(DsgConfig {
            step: StepSize {
                theta: 10.0,
                t0: 0.0,
            },
            ..ok.clone()
        })
        .build()
        .unwrap()
        .fit(&small)
        .unwrap_err();
    assert_eq!(name(e), "step");
    // steps far too large: the iterate diverges, and the fit says so
    let e = Joker::builder()
        .lambda(1e-6)
        .n_components(64)
        .dsg(DsgConfig {
            feature_block: 16,
            batch_size: 10,
            step: StepSize {
                theta: 1e6,
                t0: 1.0,
            },
            ..ok.clone()
        })
        .max_iter(2000)
        .build()
        .unwrap()
        .fit(&common::regression(200, 2, 10))
        .unwrap_err();
    assert!(
        matches!(&e, JokerError::Numerical(m) if m.contains("diverged")),
        "{e:?}"
    );
    // warm starts need dual coefficients
    let dbcd = Joker::builder()
        .n_components(64)
        .max_iter(5)
        .build()
        .unwrap();
    let m = dbcd.fit(&small).unwrap();
    let e = Joker::builder()
        .n_components(64)
        .dsg(ok)
        .build()
        .unwrap()
        .fit_with(
            &small,
            joker::FitOptions {
                warm_start: Some(&m),
                ..Default::default()
            },
        )
        .unwrap_err();
    assert_eq!(name(e), "warm_start");
}

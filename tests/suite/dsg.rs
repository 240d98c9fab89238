//! The doubly stochastic solvers through the public API: on easy problems they come close to
//! DBCD-TR, their models are ordinary random-feature models that survive save/load, and bad
//! settings are errors, never panics.

use crate::common;

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

/// The rows of `data` written as text: LIBSVM (sparse: zeros left out, values rounded to f32)
/// or CSV with the label last (values in full).
fn write_text(path: &std::path::Path, data: &joker::Dataset<f64>, csv: bool) {
    use std::fmt::Write;
    let d = data.x.ncols();
    let mut row = vec![0.0f64; d];
    let mut s = String::new();
    for i in 0..data.x.nrows() {
        data.x.gather_range(i, &mut row);
        let y = data.y[i];
        if csv {
            // full f64 digits: the f64 fit must read them as they are
            for v in &row {
                write!(s, "{v},").unwrap();
            }
            writeln!(s, "{y}").unwrap();
        } else {
            write!(s, "{y}").unwrap();
            for (j, v) in row.iter().enumerate() {
                // about a third of the entries are left out (sparse rows)
                if (i + j) % 3 != 0 {
                    write!(s, " {}:{}", j + 1, *v as f32).unwrap();
                }
            }
            s.push('\n');
        }
    }
    std::fs::write(path, s).unwrap();
}

fn read_text<T: joker::Scalar>(path: &std::path::Path, csv: bool) -> joker::Dataset<T> {
    if csv {
        joker::io::read_csv(path, &joker::io::CsvOptions::default()).unwrap()
    } else {
        joker::io::read_libsvm(path, &joker::io::LibsvmOptions::default()).unwrap()
    }
}

/// A fit on a file streamed in parts of a few kilobytes equals the fit on the same rows in
/// memory swept in file order, bit for bit: the standardisation, the median bandwidth (over
/// the heuristic's sample of 2,000 of the 2,300 rows), the targets and every step. Batches of
/// 64 rows wrap mid-batch from the last row to the first, over three passes; LIBSVM (sparse,
/// three classes, balanced class weights, CDSG, f32) and CSV (dense, regression with
/// normalised targets, UDSG, f64).
#[test]
fn a_streamed_fit_is_the_fit_in_memory() {
    use joker::io::stream::{TextFormat, TextStream};
    let cases = [
        (
            false,
            common::three_classes(2300, 7),
            Loss::SquaredHinge,
            "cdsg",
        ),
        (
            true,
            common::regression(2300, 5, 8),
            Loss::SquaredError,
            "udsg",
        ),
    ];
    for (csv, data, loss, variant) in cases {
        let path = tmp(if csv { "stream.csv" } else { "stream.svm" });
        write_text(&path, &data, csv);
        // class weights (balanced) on the classifier: each row's weight comes from its label
        let weights = match csv {
            true => joker::ClassWeight::None,
            false => joker::ClassWeight::Balanced,
        };
        let precision = match csv {
            true => joker::Precision::F64,
            false => joker::Precision::F32,
        };
        let params = Joker::builder()
            .loss(loss)
            .precision(precision)
            .class_weight(weights)
            .lambda(0.5)
            .n_components(256)
            .max_iter(100)
            .check_every(30)
            .dsg(DsgConfig {
                batch_size: 64,
                feature_block: 32,
                sequential: Some(true),
                ..DsgConfig::named(variant).unwrap()
            })
            .build()
            .unwrap();
        // the regression fits in f64: the file is read in the fit's precision either way
        let in_memory = match csv {
            true => params.fit(&read_text::<f64>(&path, csv)).unwrap(),
            false => params.fit(&read_text::<f32>(&path, csv)).unwrap(),
        };
        let format = match csv {
            true => TextFormat::Csv(Default::default()),
            false => TextFormat::Libsvm(Default::default()),
        };
        let stream = TextStream::open(&path, &format, 2048, |_, _| {}).unwrap();
        assert!(stream.parts() > 10, "{} parts", stream.parts());
        let mut passes = Vec::new();
        let streamed = params
            .fit_stream::<f32>(
                &stream,
                Default::default(),
                Some(Box::new(|pass: &str, k, n| {
                    if k == n {
                        passes.push(pass.to_string())
                    }
                })),
            )
            .unwrap();
        assert_eq!(passes, ["labels", "bandwidth"]);
        assert_eq!(streamed.kernel, in_memory.kernel, "{variant}");
        assert_eq!(streamed.standardizer, in_memory.standardizer, "{variant}");
        assert_eq!(streamed.classes, in_memory.classes, "{variant}");
        assert_eq!(streamed.training.iterations, 100);
        assert!(streamed.history.last().unwrap().epoch > 2.5);
        match (&streamed.representation, &in_memory.representation) {
            (
                Representation::RandomFeatures { theta: a, .. },
                Representation::RandomFeatures { theta: b, .. },
            ) => {
                assert_eq!(a.len(), b.len());
                assert!(a.iter().any(|v| *v != 0.0));
                assert!(
                    a == b,
                    "{variant}: streamed theta differs from the fit in memory"
                );
            }
            other => panic!("not random-feature models: {other:?}"),
        }
        std::fs::remove_file(&path).unwrap();
    }
}

/// What a stream cannot do is refused with a reason: DBCD-TR, batches drawn at random, a
/// bandwidth heuristic that needs every row, sample weights.
#[test]
fn streams_refuse_what_they_cannot_do() {
    use joker::io::stream::{TextFormat, TextStream};
    let path = tmp("refuse.svm");
    write_text(&path, &common::binary(300, 3, 4), false);
    let stream = TextStream::open(
        &path,
        &TextFormat::Libsvm(Default::default()),
        1024,
        |_, _| {},
    )
    .unwrap();
    let base = || Joker::builder().loss(Loss::SquaredHinge).n_components(64);
    let fit = |p: Joker| p.fit_stream::<f32>(&stream, Default::default(), None);
    let msg = |r: joker::Result<Model>| r.unwrap_err().to_string();
    assert!(msg(fit(base().build().unwrap())).contains("doubly stochastic"));
    let random = DsgConfig {
        sequential: Some(false),
        ..DsgConfig::default()
    };
    assert!(msg(fit(base().dsg(random).build().unwrap())).contains("file order"));
    let msd = base()
        .dsg(DsgConfig::default())
        .bandwidth(joker::Bandwidth::MeanSquaredDistance);
    assert!(msg(fit(msd.build().unwrap())).contains("give gamma"));
    let w = [1.0; 300];
    let opts = joker::FitOptions::<f32> {
        sample_weight: Some(&w),
        ..Default::default()
    };
    let p = base().dsg(DsgConfig::default()).build().unwrap();
    assert!(msg(p.fit_stream(&stream, opts, None)).contains("sample weights"));
    std::fs::remove_file(&path).unwrap();
}

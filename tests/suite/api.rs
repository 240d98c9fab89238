//! The public API: bad input gets its typed error, models survive save/load bit for bit,
//! features are deterministic in the seed, and the options of a fit do what they say.

use crate::common;

use joker::model::Representation;
use joker::{
    ClassWeight, CsrMatrix, Dataset, DenseMatrix, Features, FitOptions, Joker, JokerError, Loss,
    Model, Precision, Progress,
};

fn small_svc() -> Joker {
    Joker::builder()
        .loss(Loss::SquaredHinge)
        .n_components(128)
        .block_size(50)
        .max_iter(40)
        // DBCD-TR's own iterations (L2-SVC would start at its optimum)
        .newton_start(false)
        .build()
        .unwrap()
}

fn tmp(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("joker-api-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

#[test]
fn bad_parameters_are_refused_by_the_builder() {
    let err = |b: joker::JokerBuilder| b.build().unwrap_err();
    let name = |e: JokerError| match e {
        JokerError::InvalidParameter { name, .. } => name,
        other => panic!("unexpected {other:?}"),
    };
    assert_eq!(name(err(Joker::builder().lambda(0.0))), "lambda");
    assert_eq!(name(err(Joker::builder().lambda(-1.0))), "lambda");
    assert_eq!(name(err(Joker::builder().lambda(f64::NAN))), "lambda");
    assert_eq!(name(err(Joker::builder().n_components(0))), "n_components");
    assert_eq!(name(err(Joker::builder().gamma(0.0))), "gamma");
    assert_eq!(name(err(Joker::builder().block_size(0))), "block_size");
    assert_eq!(
        name(err(Joker::builder().block_size(32).nystrom_rank(32))),
        "nystrom_rank"
    );
    assert_eq!(
        name(err(Joker::builder().loss(Loss::Huber { delta: 0.0 }))),
        "delta"
    );
    assert_eq!(name(err(Joker::builder().loss(Loss::Lp { p: 1.0 }))), "p");
    assert_eq!(
        name(err(
            Joker::builder().loss(Loss::EpsilonInsensitive { epsilon: -0.1 })
        )),
        "epsilon"
    );
    assert_eq!(
        name(err(Joker::builder()
            .loss(Loss::Logistic)
            .task(joker::Task::Regression))),
        "task"
    );
    let msg = Joker::builder()
        .lambda(0.0)
        .build()
        .unwrap_err()
        .to_string();
    assert!(msg.contains("lambda") && msg.contains("positive"), "{msg}");
}

#[test]
fn bad_data_is_refused_with_its_location() {
    // NaN and infinity in features name the row and column
    let e = DenseMatrix::new(2, 2, vec![1.0, 2.0, 3.0, f64::INFINITY]).unwrap_err();
    assert!(
        matches!(
            e,
            JokerError::NonFinite {
                what: "features",
                row: 1,
                col: 1
            }
        ),
        "{e:?}"
    );
    // NaN target
    let x = Features::Dense(DenseMatrix::new(2, 1, vec![1.0, 2.0]).unwrap());
    let e = Dataset::new(x.clone(), vec![1.0, f64::NAN]).unwrap_err();
    assert!(matches!(
        e,
        JokerError::NonFinite {
            what: "targets",
            row: 1,
            ..
        }
    ));
    // mismatched shapes
    assert!(matches!(
        Dataset::new(x.clone(), vec![1.0]),
        Err(JokerError::ShapeMismatch(_))
    ));
    assert!(matches!(
        DenseMatrix::<f32>::new(0, 3, vec![]),
        Err(JokerError::EmptyData(_))
    ));
    assert!(matches!(
        CsrMatrix::<f32>::new(1, 2, vec![0, 1], vec![5], vec![1.0]),
        Err(JokerError::ShapeMismatch(_))
    ));
    // a dense validation set of another width is refused, not zero-padded
    let data4 = common::binary(60, 4, 2);
    let narrow = common::binary(20, 3, 3);
    let e = small_svc()
        .fit_with(
            &data4,
            joker::FitOptions {
                validation: Some(&narrow),
                ..Default::default()
            },
        )
        .unwrap_err();
    assert!(
        matches!(&e, JokerError::ShapeMismatch(m) if m.contains("3 columns, the training set 4")),
        "{e:?}"
    );
    // a block larger than n is capped at n: the default block of 512 fits small data too
    let data = common::binary(30, 2, 1);
    let m = small_svc().fit(&data).unwrap();
    assert!(m.training.iterations > 0 && m.training.gap.is_finite());
    let m = Joker::builder()
        .loss(Loss::SquaredHinge)
        .n_components(64)
        .build()
        .unwrap()
        .fit(&data)
        .unwrap();
    assert!(m.score(&data).unwrap() > 0.5);
    // labels that do not fit: one class, or regression targets for a classifier
    let one = Dataset::new(data.x.clone(), vec![1.0; 30]).unwrap();
    let e = Joker::builder()
        .loss(Loss::Hinge)
        .block_size(10)
        .build()
        .unwrap()
        .fit(&one)
        .unwrap_err();
    assert!(matches!(e, JokerError::InvalidLabels(_)), "{e:?}");
    let reg = common::regression(200, 2, 2);
    let e = Joker::builder()
        .loss(Loss::Logistic)
        .block_size(50)
        .build()
        .unwrap()
        .fit(&reg)
        .unwrap_err();
    assert!(e.to_string().contains("regression"), "{e}");
    // sample weights: wrong length, non-positive, NaN
    let data = common::binary(100, 2, 3);
    for (w, check) in [
        (vec![1.0; 99], "ShapeMismatch"),
        (vec![0.0; 100], "InvalidParameter"),
        (
            {
                let mut w = vec![1.0; 100];
                w[7] = f64::NAN;
                w
            },
            "NonFinite",
        ),
    ] {
        let e = small_svc()
            .fit_with(
                &data,
                FitOptions {
                    sample_weight: Some(&w),
                    ..Default::default()
                },
            )
            .unwrap_err();
        assert!(format!("{e:?}").starts_with(check), "{e:?}");
    }
    // predicting with more features than the model was trained on
    let model = small_svc().fit(&data).unwrap();
    let wide = Features::Dense(DenseMatrix::new(1, 5, vec![0.0; 5]).unwrap());
    assert!(matches!(
        model.predict(&wide),
        Err(JokerError::ShapeMismatch(_))
    ));
    // a memory limit below the estimate
    let e = Joker::builder()
        .n_components(1 << 16)
        .block_size(50)
        .max_memory(1 << 20)
        .build()
        .unwrap()
        .fit(&data)
        .unwrap_err();
    assert!(
        matches!(e, JokerError::Memory(_)) && e.to_string().contains("MB"),
        "{e}"
    );
}

#[test]
fn save_and_load_give_identical_predictions() {
    let train = common::binary(300, 3, 4);
    let test = common::binary(100, 3, 5);
    for exact in [false, true] {
        let mut b = Joker::builder()
            .loss(Loss::Logistic)
            .block_size(64)
            .max_iter(30);
        b = if exact {
            b.exact()
        } else {
            b.n_components(200)
        };
        let model = b.build().unwrap().fit(&train).unwrap();
        let path = tmp(&format!("m{exact}.json"));
        model.save(&path).unwrap();
        let back = Model::load(&path).unwrap();
        assert_eq!(
            model.decision_function(&test.x).unwrap(),
            back.decision_function(&test.x).unwrap()
        );
        assert_eq!(
            model.predict_proba(&test.x).unwrap(),
            back.predict_proba(&test.x).unwrap()
        );
        assert_eq!(
            matches!(back.representation, Representation::Exact { .. }),
            exact
        );
    }
    let reg = common::regression(300, 3, 6);
    let model = Joker::builder()
        .loss(Loss::Huber { delta: 0.5 })
        .precision(Precision::F64)
        .block_size(64)
        .max_iter(20)
        .build()
        .unwrap()
        .fit(&reg)
        .unwrap();
    let path = tmp("reg.json");
    model.save(&path).unwrap();
    assert_eq!(
        model.predict(&reg.x).unwrap(),
        Model::load(&path).unwrap().predict(&reg.x).unwrap()
    );
}

#[test]
fn model_files_from_the_future_or_elsewhere_are_refused() {
    let data = common::binary(100, 2, 7);
    let model = small_svc().fit(&data).unwrap();
    let path = tmp("future.json");
    model.save(&path).unwrap();
    let text =
        std::fs::read_to_string(&path)
            .unwrap()
            .replacen("\"version\":1", "\"version\":6", 1);
    std::fs::write(&path, text).unwrap();
    let e = Model::load(&path).unwrap_err().to_string();
    assert!(e.contains("newer") && e.contains("version 6"), "{e}");
    std::fs::write(&path, "{\"hello\": 1}").unwrap();
    assert!(
        Model::load(&path)
            .unwrap_err()
            .to_string()
            .contains("not a joker model")
    );
    std::fs::write(&path, "not json").unwrap();
    assert!(Model::load(&path).unwrap_err().to_string().contains("JSON"));
    let e = Model::load(tmp("missing.json")).unwrap_err();
    assert!(matches!(e, JokerError::Io { .. }));
}

#[test]
fn fits_are_deterministic_in_the_seed() {
    let data = common::binary(300, 3, 8);
    let fit = |seed| {
        Joker::builder()
            .loss(Loss::SquaredHinge)
            .n_components(100)
            .block_size(50)
            .max_iter(30)
            .seed(seed)
            .build()
            .unwrap()
            .fit(&data)
            .unwrap()
    };
    let (a, b, c) = (fit(1), fit(1), fit(2));
    assert_eq!(
        a.decision_function(&data.x).unwrap(),
        b.decision_function(&data.x).unwrap()
    );
    assert_ne!(
        a.decision_function(&data.x).unwrap(),
        c.decision_function(&data.x).unwrap()
    );
}

#[test]
fn progress_callback_sees_checks_and_can_stop() {
    let data = common::binary(400, 2, 9);
    let mut seen = Vec::new();
    let model = Joker::builder()
        .loss(Loss::SquaredHinge)
        .n_components(64)
        .block_size(40)
        .max_iter(1000)
        .tol(0.0)
        .check_every(5)
        .newton_start(false)
        .build()
        .unwrap()
        .fit_with(
            &data,
            FitOptions {
                validation: Some(&data),
                progress: Some(Box::new(|p: &Progress| {
                    seen.push(p.clone());
                    p.iter < 20
                })),
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(model.training.stop, joker::StopReason::Cancelled);
    assert_eq!(model.training.iterations, 20);
    assert_eq!(
        seen.iter().map(|p| p.iter).collect::<Vec<_>>(),
        vec![5, 10, 15, 20]
    );
    assert!(
        seen.iter()
            .all(|p| p.validation.is_some_and(|v| v > 0.5) && p.primal >= p.dual)
    );
    // the dual objective never decreases: every accepted step decreases (4)
    assert!(seen.windows(2).all(|w| w[1].dual >= w[0].dual - 1e-9));
}

#[test]
fn warm_start_continues_where_a_fit_stopped() {
    let data = common::binary(400, 2, 10);
    let p = Joker::builder()
        .loss(Loss::SquaredHinge)
        .n_components(64)
        .block_size(40)
        .max_iter(20)
        .tol(0.0)
        .newton_start(false)
        .build()
        .unwrap();
    let first = p.fit(&data).unwrap();
    let second = p
        .fit_with(
            &data,
            FitOptions {
                warm_start: Some(&first),
                ..Default::default()
            },
        )
        .unwrap();
    assert!(
        second.training.dual > first.training.dual,
        "{} vs {}",
        second.training.dual,
        first.training.dual
    );
    let other = common::binary(300, 2, 11);
    assert!(
        p.fit_with(
            &other,
            FitOptions {
                warm_start: Some(&first),
                ..Default::default()
            }
        )
        .is_err()
    );
}

#[test]
fn sample_and_class_weights_scale_the_box() {
    // Weight w_i scales coordinate i's box: with a huge weight on one sample its dual can
    // leave the unweighted box [0, C] of the hinge loss.
    let data = common::binary(200, 2, 12);
    let c = 1.0;
    let p = Joker::builder()
        .loss(Loss::Hinge)
        .c(c)
        .n_components(64)
        .block_size(50)
        .max_iter(200)
        .build()
        .unwrap();
    let mut w = vec![1.0; 200];
    w[0] = 50.0;
    let m = p
        .fit_with(
            &data,
            FitOptions {
                sample_weight: Some(&w),
                ..Default::default()
            },
        )
        .unwrap();
    let dual = m.dual.as_ref().unwrap();
    assert!(dual[1..].iter().all(|a| a.abs() <= c + 1e-12));
    assert!(dual[0].abs() <= 50.0 * c + 1e-9);
    let balanced = Joker::builder()
        .loss(Loss::Hinge)
        .c(c)
        .n_components(64)
        .block_size(50)
        .max_iter(20)
        .class_weight(ClassWeight::Balanced)
        .build()
        .unwrap();
    assert!(balanced.fit(&data).is_ok());
    let bad = Joker::builder()
        .loss(Loss::Hinge)
        .class_weight(ClassWeight::Custom(vec![(7.0, 2.0)]))
        .block_size(50)
        .build()
        .unwrap();
    assert!(bad.fit(&data).unwrap_err().to_string().contains("class 7"));
}

#[test]
fn sparse_and_dense_inputs_give_the_same_model() {
    let dense = common::binary(200, 3, 13);
    let Features::Dense(m) = &dense.x else {
        unreachable!()
    };
    let (mut indptr, mut indices, mut values) = (vec![0], vec![], vec![]);
    for i in 0..m.nrows() {
        for (j, &v) in m.row(i).iter().enumerate() {
            indices.push(j as u32);
            values.push(v);
        }
        indptr.push(values.len());
    }
    let sparse = Dataset::new(
        Features::Sparse(CsrMatrix::new(200, 3, indptr, indices, values).unwrap()),
        dense.y.clone(),
    )
    .unwrap();
    // without standardisation both see identical numbers
    let p = Joker::builder()
        .loss(Loss::SquaredHinge)
        .standardize(false)
        .gamma(0.3)
        .n_components(64)
        .block_size(50)
        .max_iter(20)
        .build()
        .unwrap();
    let (a, b) = (p.fit(&dense).unwrap(), p.fit(&sparse).unwrap());
    assert_eq!(
        a.decision_function(&dense.x).unwrap(),
        b.decision_function(&sparse.x).unwrap()
    );
}

/// Device choice without a GPU-specific expectation: models the GPU does not cover go to the
/// CPU under Auto (with the reason) and are refused under Cuda; where no GPU is usable, Auto
/// trains on the CPU and records why, and Cuda(0) is a device error (never a panic).
#[test]
fn device_resolution_and_fallback() {
    use joker::Device;
    use joker::device::{Placement, probe};
    let base = || {
        Joker::builder()
            .loss(Loss::SquaredHinge)
            .n_components(128)
            .block_size(50)
            .max_iter(40)
    };
    // exact kernels: the GPU only when asked for by name
    let exact_auto = base().exact().build().unwrap();
    let r = exact_auto.resolve_device().unwrap();
    assert_eq!(r.placement, Placement::Cpu);
    assert!(r.reason.contains("exact kernels"), "{}", r.reason);
    let exact = base().exact().device(Device::Cuda(0)).build().unwrap();
    match exact.resolve_device() {
        Ok(r) => assert_eq!(r.placement, Placement::Cuda(0)),
        Err(JokerError::Device(m)) => assert!(
            !probe().available() && m.contains("cuda:0 was requested"),
            "{m}"
        ),
        other => panic!("expected a placement or a device error, got {other:?}"),
    }
    let f64_cuda = base()
        .precision(Precision::F64)
        .device(Device::Cuda(0))
        .build()
        .unwrap();
    match f64_cuda.resolve_device() {
        Err(JokerError::Device(m)) => assert!(m.contains("f64"), "{m}"),
        other => panic!("expected a device error, got {other:?}"),
    }
    let f64_auto = base().precision(Precision::F64).build().unwrap();
    let r = f64_auto.resolve_device().unwrap();
    assert_eq!(r.placement, Placement::Cpu);
    assert!(r.reason.contains("f64"), "{}", r.reason);
    let cpu = base().device(Device::Cpu).build().unwrap();
    assert_eq!(cpu.resolve_device().unwrap().to_string(), "cpu (requested)");

    let data = common::binary(200, 3, 4);
    let m = cpu.fit(&data).unwrap();
    assert_eq!(m.training.device, "cpu (requested)");
    if !probe().available() {
        let auto = base().build().unwrap();
        let m = auto.fit(&data).unwrap();
        assert!(
            m.training.device.starts_with("cpu (auto: no usable GPU: "),
            "{}",
            m.training.device
        );
        // The reason survives save/load.
        let p = tmp("device.json");
        m.save(&p).unwrap();
        assert_eq!(Model::load(&p).unwrap().training.device, m.training.device);
        let _ = std::fs::remove_file(&p);
        let e = base().device(Device::Cuda(0)).build().unwrap().fit(&data);
        match e {
            Err(JokerError::Device(msg)) => {
                assert!(msg.contains("cuda:0 was requested but no GPU"), "{msg}")
            }
            other => panic!("expected a device error, got {:?}", other.map(|_| ())),
        }
    }
}

/// `nystrom_rank` (the preconditioned block solver) changes the path, not the solution: an
/// exact L2-SVC fit to a relative gap of 1e-7 with rank 16 agrees with the plain fit
/// (decision values within 1e-3 of the largest), also when the last block (300 = 4 x 64 + 44) is bigger than
/// the rank and when it is not (rank 50 > 44: that block is solved without the metric).
#[test]
fn nystrom_rank_gives_the_same_solution() {
    let data = common::binary(300, 4, 77);
    let fit = |r: usize| {
        Joker::builder()
            .loss(Loss::SquaredHinge)
            .exact()
            .c(4.0)
            .precision(Precision::F64)
            .block_size(64)
            .tol(1e-7)
            .stall(false)
            .max_iter(5000)
            .nystrom_rank(r)
            .build()
            .unwrap()
            .fit(&data)
            .unwrap()
    };
    let plain = fit(0);
    assert_eq!(plain.training.stop, joker::StopReason::Converged);
    let want = plain.decision_function(&data.x).unwrap();
    let scale = want.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    for r in [16, 50] {
        let m = fit(r);
        assert_eq!(m.training.stop, joker::StopReason::Converged, "rank {r}");
        let got = m.decision_function(&data.x).unwrap();
        for (i, (a, b)) in got.iter().zip(&want).enumerate() {
            assert!(
                (a - b).abs() <= 1e-3 * scale,
                "rank {r}, sample {i}: {a} vs {b}"
            );
        }
    }
}

/// The automatic representation (`auto_exact`, on in `joker train`): the exact kernel where
/// its matrix fits the kernel cache, a Nystrom map of `n_components` centres where only its
/// `n x M` features fit, random features where neither does or a bias feature is asked for;
/// each choice said in `training.representation`.
#[test]
fn the_automatic_representation_follows_the_kernel_cache() {
    let data = common::binary(600, 3, 21);
    // on the CPU: beyond the cache a GPU takes random features, which it forms itself
    let fit = |cache: usize, bias: f64| {
        Joker::builder()
            .loss(Loss::SquaredHinge)
            .n_components(64)
            .auto_exact(true)
            .device(joker::Device::Cpu)
            .kernel_cache(cache)
            .bias(bias)
            .max_iter(50)
            .build()
            .unwrap()
            .fit(&data)
            .unwrap()
    };
    // 600^2 f32 values and the rows: 1.45 MB; the features 600 x 64 f32: 153,600 bytes
    let exact = fit(4 << 20, 0.0);
    assert!(
        exact
            .training
            .representation
            .starts_with("exact kernel (auto: the 600 x 600"),
        "{}",
        exact.training.representation
    );
    assert!(exact.training.feature_map.is_empty());
    let nystrom = fit(500_000, 0.0);
    assert!(
        nystrom
            .training
            .representation
            .starts_with("64 Nystrom centres (auto: the 600 x 600")
            && nystrom
                .training
                .representation
                .contains("its 600 x 64 Nystrom features, 0 MiB, fit it"),
        "{}",
        nystrom.training.representation
    );
    let map = &nystrom.training.feature_map;
    assert!(
        map.contains(" leverage centres") && map.contains("features formed once and kept (600 x "),
        "{}",
        nystrom.training.feature_map
    );
    let random = fit(100_000, 0.0);
    assert!(
        random
            .training
            .representation
            .starts_with("64 random features (auto: ")
            && random
                .training
                .representation
                .contains("exceed the kernel cache of 0 MiB too"),
        "{}",
        random.training.representation
    );
    assert!(random.training.feature_map.is_empty());
    let biased = fit(500_000, 1.0);
    assert!(
        biased
            .training
            .representation
            .contains("random features for the bias feature asked for"),
        "{}",
        biased.training.representation
    );
    // every choice is a classifier of the same data
    for m in [&exact, &nystrom, &random, &biased] {
        let acc = joker::model::accuracy(&m.predict(&data.x).unwrap(), &data.y);
        assert!(acc > 0.8, "{}: {acc}", m.training.representation);
    }
}

/// The automatic loss (`auto_loss`, on in `joker train` for a regression without a named
/// loss): SVR with its intercept on the exact kernel (the same model as asking for it), KRR on
/// a feature map, each said in `training.loss_choice`; refused for a classification.
#[test]
fn the_automatic_loss_is_svr_on_the_exact_kernel_and_krr_on_a_feature_map() {
    let data = common::regression(400, 4, 31);
    // on the CPU, where the map beyond the cache is Nystrom's (a GPU's is random features)
    let auto = |cache: usize| {
        Joker::builder()
            .n_components(64)
            .auto_exact(true)
            .auto_loss(true)
            .device(joker::Device::Cpu)
            .kernel_cache(cache)
            .build()
            .unwrap()
            .fit(&data)
            .unwrap()
    };
    let svr = auto(4 << 20);
    assert_eq!(svr.loss, Loss::EpsilonInsensitive { epsilon: 0.1 });
    assert!(
        svr.training
            .representation
            .starts_with("exact kernel (auto:")
    );
    assert!(
        svr.training
            .loss_choice
            .starts_with("svr (auto: the exact kernel"),
        "{}",
        svr.training.loss_choice
    );
    let b = svr.training.intercept.expect("SVR fits an intercept");
    // the same fit as SVR on the exact kernel asked for by name
    let named = Joker::builder()
        .loss(Loss::EpsilonInsensitive { epsilon: 0.1 })
        .exact()
        .build()
        .unwrap()
        .fit(&data)
        .unwrap();
    assert!(named.training.loss_choice.is_empty());
    assert_eq!(named.training.intercept, Some(b));
    let (got, want) = (
        svr.decision_function(&data.x).unwrap(),
        named.decision_function(&data.x).unwrap(),
    );
    assert_eq!(got, want);
    // 400 x 64 f32 features fit 200,000 bytes, the 400 x 400 kernel does not
    let krr = auto(200_000);
    assert_eq!(krr.loss, Loss::SquaredError);
    assert!(
        krr.training
            .representation
            .starts_with("64 Nystrom centres (auto:")
    );
    assert!(
        krr.training
            .loss_choice
            .starts_with("krr (auto: a feature map"),
        "{}",
        krr.training.loss_choice
    );
    assert_eq!(krr.training.intercept, None);
    // both fit the data (C = 1 smooths it: a training RMSE of about 0.6 of the targets' spread
    // for either loss)
    let spread = {
        let mean = data.y.iter().sum::<f64>() / data.y.len() as f64;
        (data.y.iter().map(|y| (y - mean).powi(2)).sum::<f64>() / data.y.len() as f64).sqrt()
    };
    for m in [&svr, &krr] {
        let rmse = joker::model::rmse(&m.predict(&data.x).unwrap(), &data.y);
        assert!(
            rmse < 0.7 * spread,
            "{}: {rmse} vs {spread}",
            m.training.loss_choice
        );
    }
    // a classification has no regression loss to choose
    let err = Joker::builder()
        .loss(Loss::SquaredHinge)
        .auto_loss(true)
        .build()
        .unwrap_err()
        .to_string();
    assert!(err.contains("auto_loss"), "{err}");
}

//! End-to-end solver tests against independent references: a dense solve for exact KRR, and
//! the duality gap plus the KKT relation for every loss.

use crate::common;

use joker::loss::Coord;
use joker::model::Representation;
use joker::{
    Bandwidth, Centers, Dataset, DenseMatrix, FeatureKind, Features, FitOptions, Joker, JokerError,
    Kernel, KernelKind, Loss, Model, Multiclass, Precision, StopReason, Task, TrNorm, WorkingSet,
};

fn rows(d: &Dataset<f64>) -> Vec<Vec<f64>> {
    let Features::Dense(m) = &d.x else {
        unreachable!()
    };
    (0..m.nrows()).map(|i| m.row(i).to_vec()).collect()
}

/// `||got - want|| / ||want||`.
fn relative_error(got: &[f64], want: &[f64]) -> f64 {
    let err: f64 = (got.iter().zip(want))
        .map(|(g, w)| (g - w).powi(2))
        .sum::<f64>()
        .sqrt();
    err / want.iter().map(|w| w * w).sum::<f64>().sqrt()
}

/// Exact KRR equals `(K + lambda I)^{-1} y` from a dense f64 solve, to 1e-6 relative.
#[test]
fn exact_krr_matches_dense_solve() {
    let data = common::regression(300, 3, 1);
    let (lambda, gamma) = (0.5, 0.4);
    let mut cfg = joker::SolverConfig::default();
    cfg.trust_region.kkt_tol = 1e-11;
    let model = Joker::builder()
        .solver(cfg)
        .loss(Loss::SquaredError)
        .exact()
        .gamma(gamma)
        .lambda(lambda)
        .precision(Precision::F64)
        .standardize(false)
        .normalize_target(false)
        .block_size(64)
        .tol(0.0) // a relative gap of 1e-12 still leaves ~1e-6 error in alpha: run the budget
        .max_iter(4000)
        .check_every(50)
        .build()
        .unwrap()
        .fit(&data)
        .unwrap();
    let x = rows(&data);
    let n = x.len();
    let kernel = Kernel {
        kind: KernelKind::Gaussian,
        gamma,
    };
    let want = common::krr_dual(n, |i, j| kernel.eval(&x[i], &x[j]), lambda, &data.y);
    let rel = relative_error(model.dual.as_ref().unwrap(), &want);
    assert!(
        rel < 1e-6,
        "relative error {} after {} iterations",
        rel,
        model.training.iterations
    );
}

/// Exact KRR in f32 on rows far from the origin, in close pairs, with a small ridge: the
/// fitted values equal those of a dense f64 solve. The kernel's distances cancel there (dot
/// products near 3,600 against distances near 1e-3); formed from f32 dot products alone the
/// kernel matrix was indefinite by more than `lambda`, and the fit diverged.
#[test]
fn exact_krr_in_f32_far_from_the_origin_matches_the_dense_solve() {
    let base = common::regression(150, 3, 5);
    let mut s = joker::rng::Stream::new(6, 1);
    let (mut x, mut y) = (Vec::new(), Vec::new());
    for (row, &target) in rows(&base).iter().zip(&base.y) {
        for _ in 0..2 {
            // rounded to f32 here, so that the reference sees the rows the fit sees
            x.extend(
                row.iter()
                    .map(|v| f64::from((60.0 + v + 1e-3 * (s.uniform() - 0.5)) as f32)),
            );
            y.push(target);
        }
    }
    let n = y.len();
    let data = Dataset::new(Features::Dense(DenseMatrix::new(n, 3, x).unwrap()), y).unwrap();
    let (lambda, gamma) = (1e-3, 0.5);
    let model = Joker::builder()
        .loss(Loss::SquaredError)
        .exact()
        .gamma(gamma)
        .lambda(lambda)
        .precision(Precision::F32)
        .standardize(false)
        .normalize_target(false)
        .tol(1e-6)
        .max_iter(20_000)
        .device(joker::Device::Cpu)
        .build()
        .unwrap()
        .fit(&data)
        .unwrap();
    let x = rows(&data);
    let kernel = Kernel {
        kind: KernelKind::Gaussian,
        gamma,
    };
    let k = |i: usize, j: usize| kernel.eval(&x[i], &x[j]);
    let a = common::krr_dual(n, k, lambda, &data.y);
    let want: Vec<f64> = (0..n)
        .map(|i| (0..n).map(|j| k(i, j) * a[j]).sum())
        .collect();
    let rel = relative_error(&model.decision_function(&data.x).unwrap(), &want);
    assert!(
        rel < 1e-3,
        "fitted values off by {:e} (relative) after {} iterations ({:?})",
        rel,
        model.training.iterations,
        model.training.stop
    );
}

/// Distance of `a` from the interval `[lo, hi]`.
fn outside(a: f64, (lo, hi): (f64, f64)) -> f64 {
    (lo - a).max(a - hi).max(0.0)
}

fn check_loss(loss: Loss, data: &Dataset<f64>, exact: bool) -> Model {
    let lambda = 0.5;
    let mut b = Joker::builder()
        .loss(loss)
        .gamma(0.5)
        .lambda(lambda)
        .precision(Precision::F64)
        .standardize(false)
        .normalize_target(false)
        .block_size(64)
        .tol(1e-4)
        .stall(false)
        .max_iter(20_000)
        .check_every(20);
    b = if exact {
        b.exact()
    } else {
        b.n_components(256)
    };
    let model = b.build().unwrap().fit(data).unwrap();
    eprintln!(
        "{loss:?} exact={exact}: gap {:.2e} iters {} {} {:.2}s",
        model.training.gap, model.training.iterations, model.training.stop, model.training.seconds
    );
    assert!(
        model.training.gap <= 1e-4,
        "{loss:?} (exact: {exact}): gap {} after {} iterations ({})",
        model.training.gap,
        model.training.iterations,
        model.training.stop
    );
    // Fenchel-Young: each term c l(y_i, u_i) + f_i(a_i) + a_i u_i is >= 0, zero exactly when
    // the KKT relation -lambda a_i in d l(y_i, u_i) holds, and the terms sum to P - D. The
    // decision values come from the prediction path, independently of the solver's state.
    // With an intercept b (the regression losses but KRR, by default) the conditions are those
    // of the targets y - b and the kernel expansion u = f - b.
    let b = model.training.intercept.unwrap_or(0.0);
    assert_eq!(
        model.training.intercept.is_some(),
        !loss.is_classifier() && loss != Loss::SquaredError,
        "{loss:?}: an intercept where the default fits one"
    );
    let u: Vec<f64> = (model.decision_function(&data.x).unwrap().iter())
        .map(|f| f - b)
        .collect();
    let alpha = model.dual.as_ref().unwrap();
    let c = 1.0 / lambda;
    let coord = |i: usize| Coord {
        y: data.y[i] - b,
        lam: lambda,
        eps: f64::EPSILON * c,
    };
    let fy: Vec<f64> = (0..u.len())
        .map(|i| {
            let k = coord(i);
            c * loss.primal(u[i], k.y) + loss.dual(alpha[i], &k) + alpha[i] * u[i]
        })
        .collect();
    let abs_gap = model.training.primal - model.training.dual;
    let sum: f64 = fy.iter().sum();
    assert!(
        fy.iter().all(|&v| v > -1e-9 * c),
        "{loss:?}: a negative Fenchel-Young term"
    );
    assert!(
        (sum - abs_gap).abs() <= 1e-6 * model.training.primal.abs().max(1.0),
        "{loss:?}: terms sum to {sum}, P - D = {abs_gap}"
    );
    // KKT interval (hull at u -+ 0.02, since near a kink a tiny Fenchel-Young term allows any point of the interval): at a gap of 1e-4 every coordinate is within
    // 10% of C of its optimal set and 95% within 1%.
    let mut worst: f64 = 0.0;
    let mut loose = 0;
    for i in 0..u.len() {
        let (a, b) = (
            loss.kkt_interval(u[i] - 2e-2, &coord(i)),
            loss.kkt_interval(u[i] + 2e-2, &coord(i)),
        );
        let hull = (
            a.0.min(a.1).min(b.0).min(b.1),
            a.0.max(a.1).max(b.0).max(b.1),
        );
        let v = outside(alpha[i], hull) / c;
        worst = worst.max(v);
        loose += (v > 1e-2) as usize;
    }
    assert!(
        worst <= 0.1 && loose * 20 <= u.len(),
        "{loss:?}: KKT off by {worst} of C; {loose} of {} beyond 1%",
        u.len()
    );
    model
}

#[test]
fn every_loss_reaches_small_gap_and_kkt_exact() {
    let reg = common::regression(240, 3, 2);
    let cls = common::binary(240, 3, 3);
    for loss in [
        Loss::SquaredError,
        Loss::Huber { delta: 0.3 },
        Loss::EpsilonInsensitive { epsilon: 0.1 },
        Loss::Absolute,
        Loss::Lp { p: 1.5 },
        Loss::Lp { p: 3.0 },
    ] {
        check_loss(loss, &reg, true);
    }
    for loss in [Loss::Hinge, Loss::SquaredHinge, Loss::Logistic] {
        check_loss(loss, &cls, true);
    }
}

#[test]
fn every_loss_reaches_small_gap_with_random_features() {
    let reg = common::regression(240, 3, 4);
    let cls = common::binary(240, 3, 5);
    for loss in [
        Loss::SquaredError,
        Loss::Huber { delta: 0.3 },
        Loss::EpsilonInsensitive { epsilon: 0.1 },
    ] {
        check_loss(loss, &reg, false);
    }
    for loss in [Loss::Hinge, Loss::SquaredHinge, Loss::Logistic] {
        check_loss(loss, &cls, false);
    }
}

/// One-vs-rest with three classes learns the angular classes.
#[test]
fn one_vs_rest_three_classes() {
    let train = common::three_classes(600, 6);
    let test = common::three_classes(400, 7);
    let model = Joker::builder()
        .loss(Loss::SquaredHinge)
        .c(10.0)
        .n_components(512)
        .block_size(128)
        .max_iter(400)
        .build()
        .unwrap()
        .fit(&train)
        .unwrap();
    assert_eq!(model.n_targets, 3);
    let acc = model.score(&test).unwrap();
    assert!(acc > 0.93, "accuracy {acc}");
    assert!(matches!(
        model.representation,
        Representation::RandomFeatures { .. }
    ));
}

#[test]
fn klr_probabilities_are_calibrated_shape() {
    let train = common::binary(400, 2, 8);
    let model = Joker::builder()
        .loss(Loss::Logistic)
        .c(4.0)
        .n_components(256)
        .block_size(100)
        .max_iter(300)
        .bandwidth(Bandwidth::Median)
        .build()
        .unwrap()
        .fit(&train)
        .unwrap();
    let p = model.predict_proba(&train.x).unwrap();
    assert_eq!(p.len(), 2 * train.len());
    for row in p.chunks_exact(2) {
        assert!((row[0] + row[1] - 1.0).abs() < 1e-12 && row[1] > 0.0 && row[1] < 1.0);
    }
    let svm = Joker::builder()
        .loss(Loss::Hinge)
        .n_components(64)
        .block_size(100)
        .max_iter(5)
        .build()
        .unwrap()
        .fit(&train)
        .unwrap();
    assert!(svm.predict_proba(&train.x).is_err());
}

/// `theta == sum_i a_i psi(x_i)` after many accepted steps (theta is accumulated in f64), with
/// `psi` evaluated independently in f64 from the model's own seed.
#[test]
fn theta_stays_in_sync_with_the_dual() {
    let data = common::binary(300, 3, 21);
    let model = Joker::builder()
        .loss(Loss::Logistic)
        .n_components(100)
        .gamma(0.3)
        .standardize(false)
        .precision(Precision::F64)
        .block_size(40)
        .max_iter(400)
        .build()
        .unwrap()
        .fit(&data)
        .unwrap();
    let Representation::RandomFeatures {
        n_components,
        seed,
        theta,
        ..
    } = &model.representation
    else {
        unreachable!()
    };
    let spec = joker::features::FeatureSpec {
        kernel: model.kernel,
        n_components: *n_components,
        dim: 3,
        seed: *seed,
    };
    let map = joker::features::RandomMap::<f64>::new(spec).unwrap();
    let alpha = model.dual.as_ref().unwrap();
    let mut want = vec![0.0; *n_components];
    for (i, x) in rows(&data).iter().enumerate() {
        for (w, p) in want.iter_mut().zip(map.eval_f64(x)) {
            *w += alpha[i] * p;
        }
    }
    let err = want
        .iter()
        .zip(theta)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);
    let scale = want.iter().map(|a| a.abs()).fold(0.0, f64::max);
    assert!(
        err <= 1e-10 * scale,
        "theta drifted by {err} (scale {scale}) after {} steps",
        model.history.last().unwrap().accepted
    );
}

/// The Nystrom-preconditioned CG-Steihaug (radius in the preconditioned norm) converges to the
/// same solution as the plain one.
#[test]
fn preconditioned_trust_region_gives_the_same_solution() {
    let cls = common::binary(300, 3, 41);
    let reg = common::regression(300, 3, 42);
    for (loss, data) in [
        (Loss::Logistic, &cls),
        (Loss::SquaredHinge, &cls),
        (Loss::SquaredError, &reg),
    ] {
        let fit = |rank: usize| {
            let mut cfg = joker::SolverConfig::default();
            cfg.trust_region.nystrom_rank = rank;
            cfg.trust_region.kkt_tol = 1e-9;
            Joker::builder()
                .solver(cfg)
                .loss(loss)
                .exact()
                .gamma(0.5)
                .lambda(0.5)
                .precision(Precision::F64)
                .standardize(false)
                .normalize_target(false)
                .block_size(100)
                .tol(1e-8)
                .stall(false)
                .max_iter(3000)
                .check_every(30)
                .build()
                .unwrap()
                .fit(data)
                .unwrap()
        };
        let (plain, pre) = (fit(0), fit(20));
        assert!(
            pre.training.gap <= 1e-8 && plain.training.gap <= 1e-8,
            "{loss:?}: gaps {} and {}",
            plain.training.gap,
            pre.training.gap
        );
        let (a, b) = (
            plain.decision_function(&data.x).unwrap(),
            pre.decision_function(&data.x).unwrap(),
        );
        let diff = a
            .iter()
            .zip(&b)
            .map(|(p, q)| (p - q).abs())
            .fold(0.0, f64::max);
        assert!(diff < 1e-3, "{loss:?}: decision values differ by {diff}");
    }
}

/// Forming the next block during the current solve changes the timing only: the iterates are
/// the same, bit for bit, for random features and exact kernels, one and several target
/// columns and with a budget that stops between a staged block and its use.
#[test]
fn overlapped_blocks_give_the_same_iterates() {
    let two = common::binary(500, 4, 61);
    let three = common::three_classes(450, 62);
    // (data, loss, iterations, random features or exact kernel)
    for (data, loss, iters, m) in [
        (&two, Loss::SquaredHinge, 37, Some(150)),
        (&two, Loss::Logistic, 20, Some(150)),
        (&three, Loss::Hinge, 25, Some(150)),
        (&two, Loss::Logistic, 23, None),
        (&three, Loss::SquaredHinge, 19, None),
    ] {
        let fit = |overlap: bool| {
            let cfg = joker::SolverConfig {
                overlap,
                // the iterates of DBCD-TR itself, from zero
                newton_start: false,
                ..Default::default()
            };
            let builder = Joker::builder();
            let builder = match m {
                Some(m) => builder.n_components(m),
                None => builder.exact(),
            };
            builder
                .solver(cfg)
                .loss(loss)
                .multiclass(Multiclass::OneVsRest) // several columns in each block
                .gamma(0.4)
                .block_size(64)
                .max_iter(iters)
                .check_every(10)
                .tol(0.0)
                .build()
                .unwrap()
                .fit(data)
                .unwrap()
        };
        let (plain, over) = (fit(false), fit(true));
        assert_eq!(plain.training.iterations, iters);
        assert_eq!(over.training.iterations, iters);
        assert_eq!(plain.dual, over.dual, "{loss:?}: dual differs");
        assert_eq!(
            plain.training.timings.cg_iters,
            over.training.timings.cg_iters
        );
        let (a, b) = (
            plain.decision_function(&data.x).unwrap(),
            over.decision_function(&data.x).unwrap(),
        );
        assert_eq!(a, b, "{loss:?}: decisions differ");
        assert!(a.iter().any(|&v| v != 0.0), "{loss:?}: nothing was learnt");
    }
}

/// A random-feature fit with the exact kernel block as the trust region's model
/// (`TrModel::Kernel`) converges to the optimum of the Gram-model fit: same decision values to
/// 1e-6 for every kind of loss (smooth, box-constrained, non-smooth, one-vs-rest), at an `M`
/// small enough that the two curvatures differ visibly.
#[test]
fn kernel_model_reaches_the_gram_models_optimum() {
    let cls = common::binary(300, 3, 71);
    let three = common::three_classes(270, 72);
    let reg = common::regression(300, 3, 73);
    // (loss, data, gap tolerance, decision tolerance): the hinge's gap stops near 1e-11 in f64
    // and SVR's near 3e-8, with either model; the decision tolerance follows from the gap
    // (`||theta - theta*||^2 <= 2 (P - P*)`).
    for (loss, data, tol, close) in [
        (Loss::SquaredHinge, &cls, 1e-13, 1e-6),
        (Loss::Logistic, &cls, 1e-13, 1e-6),
        (Loss::Hinge, &three, 1e-11, 1e-6),
        (Loss::SquaredError, &reg, 1e-13, 1e-6),
        (Loss::EpsilonInsensitive { epsilon: 0.1 }, &reg, 1e-7, 1e-3),
        (Loss::Huber { delta: 0.5 }, &reg, 1e-13, 1e-6),
    ] {
        let fit = |model: joker::TrModel| {
            let mut cfg = joker::SolverConfig::default();
            cfg.trust_region.model = model;
            cfg.trust_region.kkt_tol = 1e-10;
            // the two models' optimum without an intercept: SVR's search for one restarts
            // the slow last digits of its solve
            Joker::builder()
                .solver(cfg)
                .loss(loss)
                .n_components(60)
                .gamma(0.5)
                .lambda(0.5)
                .precision(Precision::F64)
                .intercept(false)
                .block_size(64)
                .tol(tol)
                .stall(false)
                .max_iter(20_000)
                .check_every(20)
                .build()
                .unwrap()
                .fit(data)
                .unwrap()
        };
        let (gram, kernel) = (fit(joker::TrModel::Gram), fit(joker::TrModel::Kernel));
        assert_eq!(gram.training.tr_model, "gram");
        assert_eq!(kernel.training.tr_model, "kernel");
        assert_same_optimum((&gram, &kernel), data, (tol, close), &format!("{loss:?}"));
    }
}

/// Under the kernel model every accepted step decreases the random-feature objective, also
/// where the model is poor (few features, a narrow kernel): the dual objective never falls
/// from one iteration to the next.
#[test]
fn kernel_model_never_increases_the_objective() {
    let cls = common::binary(400, 4, 81);
    let reg = common::regression(400, 4, 82);
    for (loss, data, gamma) in [
        (Loss::Logistic, &cls, 4.0),
        (Loss::SquaredHinge, &cls, 4.0),
        (Loss::SquaredError, &reg, 0.05),
    ] {
        let mut cfg = joker::SolverConfig::default();
        cfg.trust_region.model = joker::TrModel::Kernel;
        // DBCD-TR's own steps: KRR and L2-SVC would otherwise start at their optimum
        cfg.direct_krr = false;
        cfg.newton_start = false;
        let model = Joker::builder()
            .solver(cfg)
            .loss(loss)
            .n_components(16)
            .gamma(gamma)
            .precision(Precision::F64)
            .block_size(50)
            .tol(0.0)
            .max_iter(150)
            .check_every(1)
            .build()
            .unwrap()
            .fit(data)
            .unwrap();
        assert_eq!(model.training.tr_model, "kernel");
        let duals: Vec<f64> = model.history.iter().map(|p| p.dual).collect();
        assert_eq!(duals.len(), 150);
        for (i, w) in duals.windows(2).enumerate() {
            assert!(
                w[1] >= w[0] - 1e-12 * w[0].abs().max(1.0),
                "{loss:?}: the dual fell at iteration {}: {} -> {}",
                i + 2,
                w[0],
                w[1]
            );
        }
        assert!(duals[149] > duals[0], "{loss:?}: no progress");
    }
}

/// `TrModel::Auto` takes the kernel model for one column in f32 with blocks of 512 rows and
/// `M` above `2b` and well above `d`, the
/// Gram in f64 or for several columns, and leaves the kernel model for the Gram when its
/// block solves keep falling back (KRR with a narrow kernel, which the features approximate
/// poorly).
#[test]
fn automatic_trust_region_model() {
    let cls = common::binary(1200, 3, 91);
    let three = common::three_classes(1200, 92);
    let reg = common::regression(2000, 3, 93);
    let fit = |data: &Dataset<f64>, loss: Loss, gamma: f64, precision: Precision| {
        // On the CPU: a GPU engine forms only the Gram, so Auto has no choice to make there.
        Joker::builder()
            .tr_model(joker::TrModel::Auto)
            .device(joker::Device::Cpu)
            .direct_krr(false)
            .loss(loss)
            .n_components(1200)
            .gamma(gamma)
            .lambda(1e-4)
            .precision(precision)
            .block_size(512)
            .max_iter(200)
            .build()
            .unwrap()
            .fit(data)
            .unwrap()
            .training
    };
    let t = fit(&cls, Loss::SquaredHinge, 0.5, Precision::F32);
    assert!(t.tr_model.starts_with("kernel (auto"), "{}", t.tr_model);
    assert!(
        t.timings.gram_fallbacks * 20 <= t.iterations,
        "{:?}",
        t.timings
    );
    let t = fit(&cls, Loss::SquaredHinge, 0.5, Precision::F64);
    assert!(t.tr_model.starts_with("gram (auto"), "{}", t.tr_model);
    let t = fit(&three, Loss::SquaredHinge, 0.5, Precision::F32);
    assert!(t.tr_model.starts_with("gram (auto"), "{}", t.tr_model);
    // a narrow kernel: the random features approximate it poorly
    let t = fit(&reg, Loss::SquaredError, 8.0, Precision::F32);
    assert!(
        t.tr_model
            .starts_with("gram (auto: the kernel model was left"),
        "{} ({} fallbacks)",
        t.tr_model,
        t.timings.gram_fallbacks
    );
}

/// A backend whose random-feature engine fails (`JokerError::Device`) at its `fail_at`-th
/// update, as a GPU that stops answering mid-fit; everything else is the CPU's.
struct FailingDevice {
    fail_at: usize,
}

/// The host engine of [`FailingDevice`], failing at the given update.
struct FailingEngine<'a> {
    inner: joker::backend::HostRff<'a, f64>,
    updates: usize,
    fail_at: usize,
}

impl joker::backend::BlockEngine<f64> for FailingEngine<'_> {
    fn load_block(&mut self, start: usize, len: usize) -> joker::Result<()> {
        self.inner.load_block(start, len)
    }
    fn block_gram(&mut self, kbb: Option<&mut [f64]>, g: &mut [f64]) -> joker::Result<()> {
        self.inner.block_gram(kbb, g)
    }
    fn update(&mut self, delta: &[f64]) -> joker::Result<()> {
        self.updates += 1;
        if self.updates == self.fail_at {
            return Err(joker::JokerError::Device("the test device stopped".into()));
        }
        self.inner.update(delta)
    }
    fn set_alpha(&mut self, alpha: &[f64]) -> joker::Result<()> {
        self.inner.set_alpha(alpha)
    }
    fn decision(&mut self) -> joker::Result<Vec<f64>> {
        self.inner.decision()
    }
    fn theta(&mut self, out: &mut [f64]) -> joker::Result<()> {
        self.inner.theta(out)
    }
}

impl joker::backend::Backend<f64> for FailingDevice {
    fn name(&self) -> &'static str {
        "failing test device"
    }
    fn features(
        &self,
        map: &joker::features::FeatureMap<f64>,
        x: &[f64],
        n: usize,
        out: &mut [f64],
    ) {
        joker::backend::cpu::Cpu.features(map, x, n, out)
    }
    fn gram(&self, phi: &[f64], n: usize, m: usize, out: &mut [f64]) {
        joker::backend::cpu::Cpu.gram(phi, n, m, out)
    }
    fn project(&self, phi: &[f64], n: usize, m: usize, theta: &[f64], t: usize, out: &mut [f64]) {
        joker::backend::cpu::Cpu.project(phi, n, m, theta, t, out)
    }
    fn accumulate(&self, phi: &[f64], n: usize, m: usize, d: &[f64], t: usize, th: &mut [f64]) {
        joker::backend::cpu::Cpu.accumulate(phi, n, m, d, t, th)
    }
    fn kernel_tile(
        &self,
        kernel: &Kernel,
        xi: &[f64],
        ni: usize,
        xj: &[f64],
        nj: usize,
        d: usize,
        out: &mut [f64],
    ) {
        joker::backend::cpu::Cpu.kernel_tile(kernel, xi, ni, xj, nj, d, out)
    }
    fn rff_engine<'a>(
        &'a self,
        map: &'a joker::features::FeatureMap<f64>,
        x: &'a Features<f64>,
        order: &'a [usize],
        targets: usize,
        block: usize,
    ) -> joker::Result<Option<Box<dyn joker::backend::BlockEngine<f64> + 'a>>> {
        let inner =
            joker::backend::HostRff::new(&joker::backend::cpu::Cpu, map, x, order, targets, block)?;
        Ok(Some(Box::new(FailingEngine {
            inner,
            updates: 0,
            fail_at: self.fail_at,
        })))
    }
}

/// A device failure in the middle of a fit: with a fallback the fit goes on on the CPU from
/// the current dual iterate, says so, and reaches the optimum of a fit that never failed;
/// without one it is the device error.
#[test]
fn a_device_failure_mid_fit_finishes_on_the_cpu() {
    use joker::backend::cpu::Cpu;
    use joker::features::{FeatureMap, FeatureSpec};
    use joker::solver::dbcd::{Hooks, Problem, Repr, solve};
    let data = common::binary(400, 3, 41);
    let map = FeatureMap::<f64>::new(FeatureSpec {
        kernel: Kernel {
            kind: KernelKind::Gaussian,
            gamma: 0.5,
        },
        n_components: 64,
        dim: 3,
        seed: 7,
    })
    .unwrap();
    let lam = vec![0.1; 400];
    let eps = vec![0.0; 400];
    let prob = Problem {
        x: &data.x,
        repr: Repr::Features(&map),
        loss: Loss::SquaredHinge,
        targets: 1,
        y: &data.y,
        lam: &lam,
        eps: &eps,
    };
    let cfg = joker::SolverConfig {
        block_size: 50,
        max_iter: 4000,
        tol: 1e-7,
        stall: false,
        // DBCD-TR's iterations, where the device fails
        newton_start: false,
        ..joker::SolverConfig::default()
    };
    let hooks = || Hooks::<f64> {
        validate: None,
        progress: None,
        interrupt: None,
    };
    let clean = solve(&Cpu, &prob, &cfg, None, &mut hooks(), None).unwrap();
    assert!(clean.fell_back.is_none());
    assert_eq!(
        clean.stop,
        joker::StopReason::Converged,
        "{:?}",
        clean.history.last()
    );
    let device = FailingDevice { fail_at: 37 };
    let err = solve(&device, &prob, &cfg, None, &mut hooks(), None).unwrap_err();
    assert!(matches!(err, joker::JokerError::Device(_)), "{err}");
    let rescued = solve(&device, &prob, &cfg, None, &mut hooks(), Some(&Cpu)).unwrap();
    let note = rescued.fell_back.as_deref().unwrap();
    // (an iteration whose step is zero makes no update, so the 37th update comes later)
    assert!(
        note.contains("the device failed at iteration") && note.contains("on the cpu"),
        "{note}"
    );
    assert_eq!(rescued.stop, joker::StopReason::Converged);
    let (a, b) = (
        clean.history.last().unwrap(),
        rescued.history.last().unwrap(),
    );
    assert!(
        (a.primal - b.primal).abs() <= 1e-5 * a.primal.abs(),
        "primal {} against {}",
        b.primal,
        a.primal
    );
}

/// Growing the features from 30 to 90, the second stage warm-started from the first one's
/// duals, reaches the optimum of a cold fit at 90 features: the duals stay feasible when the
/// map changes, and the optimum at 90 features is unique (strongly convex dual).
#[test]
fn growing_the_features_reaches_the_cold_fits_optimum() {
    let reg = common::regression(240, 3, 91);
    let cls = common::binary(240, 3, 92);
    for (loss, data) in [(Loss::SquaredHinge, &cls), (Loss::SquaredError, &reg)] {
        let est = Joker::builder()
            .loss(loss)
            .n_components(90)
            .gamma(0.5)
            .lambda(0.5)
            .precision(Precision::F64)
            .block_size(64)
            .tol(1e-12)
            .stall(false)
            .max_iter(20_000)
            .check_every(10)
            .device(joker::Device::Cpu)
            .build()
            .unwrap();
        let cold = est.fit(data).unwrap();
        let (grown, stages) = est
            .fit_growing(data, &[30, 90], Default::default())
            .unwrap();
        assert_eq!(stages.len(), 2, "{loss:?}");
        assert_eq!(
            stages.iter().map(|s| s.n_components).collect::<Vec<_>>(),
            [30, 90]
        );
        assert_eq!(grown.n_components(), Some(90), "{loss:?}");
        assert_same_optimum((&grown, &cold), data, (1e-12, 1e-6), &format!("{loss:?}"));
    }
}

/// With a validation set, growing stops at the first stage that does not improve the metric
/// and returns the best stage's model; bad schedules are errors.
#[test]
fn growing_stops_when_the_validation_metric_stops_improving() {
    // two well separated clusters: every stage classifies all of them
    let n = 200;
    let mut s = joker::rng::Stream::new(94, 1);
    let mut x = Vec::with_capacity(2 * n);
    let mut y = Vec::with_capacity(n);
    for i in 0..n {
        let c = if i % 2 == 0 { 1.0 } else { -1.0 };
        x.push(3.0 * c + s.uniform() - 0.5);
        x.push(3.0 * c + s.uniform() - 0.5);
        y.push(c);
    }
    let data = Dataset::new(
        Features::Dense(joker::DenseMatrix::new(n, 2, x).unwrap()),
        y,
    )
    .unwrap();
    let est = |m: Option<usize>| {
        let b = Joker::builder()
            .loss(Loss::SquaredHinge)
            .gamma(0.5)
            .block_size(64)
            .tol(1e-6)
            .stall(false)
            .max_iter(2000)
            .device(joker::Device::Cpu);
        match m {
            Some(m) => b.n_components(m),
            None => b.exact(),
        }
        .build()
        .unwrap()
    };
    let opts = joker::FitOptions {
        validation: Some(&data),
        ..Default::default()
    };
    let (model, stages) = est(Some(8))
        .fit_growing(&data, &[100, 200, 400], opts)
        .unwrap();
    assert_eq!(stages.len(), 2, "{stages:?}");
    assert_eq!(stages[0].validation, Some(1.0), "{stages:?}");
    assert_eq!(model.n_components(), Some(100));
    assert_eq!(model.score(&data).unwrap(), 1.0);

    for bad in [&[][..], &[0, 10][..], &[20, 10][..], &[10, 10][..]] {
        match est(Some(10)).fit_growing(&data, bad, Default::default()) {
            Err(JokerError::InvalidParameter { name, .. }) => assert_eq!(name, "grow"),
            other => panic!("{bad:?}: expected an error, got {other:?}"),
        }
    }
    assert!(
        est(None)
            .fit_growing(&data, &[10, 20], Default::default())
            .is_err()
    );
}

/// Exact fits on the cached kernel matrix reach the optimum of the same fits that evaluate the
/// kernel block by block (`kernel_cache = 0`), for a classifier, one-vs-rest and KRR.
#[test]
fn the_cached_kernel_reaches_the_streaming_fits_optimum() {
    let cls = common::binary(300, 3, 95);
    let three = common::three_classes(240, 96);
    let reg = common::regression(300, 3, 97);
    for (loss, data) in [
        (Loss::SquaredHinge, &cls),
        (Loss::Logistic, &three),
        (Loss::SquaredError, &reg),
    ] {
        let fit = |cache: usize| {
            Joker::builder()
                .kernel_cache(cache)
                .loss(loss)
                .exact()
                .gamma(0.5)
                .lambda(0.5)
                .precision(Precision::F64)
                .block_size(64)
                .tol(1e-11)
                .stall(false)
                .max_iter(20_000)
                .device(joker::Device::Cpu)
                .build()
                .unwrap()
                .fit(data)
                .unwrap()
        };
        let (cached, streamed) = (fit(joker::solver::dbcd::DEFAULT_KERNEL_CACHE), fit(0));
        assert_same_optimum(
            (&cached, &streamed),
            data,
            (1e-11, 1e-6),
            &format!("{loss:?}"),
        );
    }
}

/// The working sets read off the violations (shrinking, greedy) reach the optimum of random
/// blocks for the losses with a box or a kink (hinge, squared hinge, SVR, Huber, one-vs-rest
/// KLR; L1 regression's random blocks do not reach a tight gap in 20,000 iterations) and KRR, and the model says which rule ran; without the cached kernel a
/// fit that asks for them takes random blocks and says why.
#[test]
fn working_sets_from_the_violations_reach_the_random_blocks_optimum() {
    let cls = common::binary(300, 3, 98);
    let three = common::three_classes(240, 99);
    let reg = common::regression(300, 3, 100);
    // the losses whose dual has no curvature (hinge, SVR) converge slowly at the end
    let tol_of = |loss: Loss| match loss {
        Loss::Hinge | Loss::EpsilonInsensitive { .. } => 1e-6,
        _ => 1e-11,
    };
    let fit = |loss: Loss, data: &Dataset<f64>, rule: WorkingSet, cache: usize| {
        Joker::builder()
            .kernel_cache(cache)
            .working_set(rule)
            .loss(loss)
            .exact()
            .gamma(0.5)
            .lambda(0.5)
            .precision(Precision::F64)
            .block_size(64)
            .tol(tol_of(loss))
            .stall(false)
            .max_iter(20_000)
            .device(joker::Device::Cpu)
            .build()
            .unwrap()
            .fit(data)
            .unwrap()
    };
    let cache = joker::solver::dbcd::DEFAULT_KERNEL_CACHE;
    for (loss, data) in [
        (Loss::Hinge, &cls),
        (Loss::SquaredHinge, &cls),
        (Loss::Logistic, &three),
        (Loss::EpsilonInsensitive { epsilon: 0.3 }, &reg),
        (Loss::Huber { delta: 0.5 }, &reg),
        (Loss::SquaredError, &reg),
    ] {
        let random = fit(loss, data, WorkingSet::Random, cache);
        assert_eq!(random.training.working_set, "random");
        for rule in [WorkingSet::Auto, WorkingSet::Greedy] {
            let m = fit(loss, data, rule, cache);
            let what = format!("{loss:?} {rule:?}");
            assert_same_optimum((&m, &random), data, (tol_of(loss), 1e-6), &what);
            let want = if rule == WorkingSet::Auto {
                "shrinking (auto"
            } else {
                "greedy"
            };
            assert!(
                m.training.working_set.starts_with(want),
                "{what}: {}",
                m.training.working_set
            );
        }
    }
    let m = fit(Loss::SquaredHinge, &cls, WorkingSet::Shrinking, 0);
    assert!(
        m.training
            .working_set
            .starts_with("random (shrinking was asked for"),
        "{}",
        m.training.working_set
    );
    assert!(m.training.gap <= 1e-11);
}

/// Left to the solver, the block size is 256 on a cached exact kernel (128 for the hinge loss,
/// which has no curvature) and the model says so; the fits reach the optimum of blocks of 512,
/// and a block size the caller gives (512 too), or a kernel not cached, keeps the configured
/// one.
#[test]
fn the_default_block_is_smaller_on_a_cached_exact_kernel() {
    let data = common::binary(900, 3, 97);
    let fit_loss = |loss: Loss, block: Option<usize>, cache: usize| {
        let mut b = Joker::builder()
            .kernel_cache(cache)
            .loss(loss)
            .exact()
            .gamma(0.5)
            .lambda(0.5)
            .precision(Precision::F64)
            .tol(1e-10)
            .stall(false)
            .max_iter(20_000)
            .device(joker::Device::Cpu);
        if let Some(size) = block {
            b = b.block_size(size);
        }
        b.build().unwrap().fit(&data).unwrap()
    };
    let fit = |block: Option<usize>, cache: usize| fit_loss(Loss::SquaredHinge, block, cache);
    let cache = joker::solver::dbcd::DEFAULT_KERNEL_CACHE;
    let hinge = fit_loss(Loss::Hinge, None, cache);
    assert!(
        hinge.training.working_set.contains("blocks of 128 (auto"),
        "{}",
        hinge.training.working_set
    );
    assert_same_optimum(
        (&hinge, &fit_loss(Loss::Hinge, Some(512), cache)),
        &data,
        // the hinge loss's dual is not strictly convex: its fits end nearer 1e-8
        (1e-7, 1e-4),
        "hinge, auto block against 512",
    );
    let auto = fit(None, cache);
    assert!(
        auto.training.working_set.contains("blocks of 256 (auto"),
        "{}",
        auto.training.working_set
    );
    let given = fit(Some(512), cache);
    assert!(
        !given.training.working_set.contains("blocks of"),
        "{}",
        given.training.working_set
    );
    assert_same_optimum(
        (&auto, &given),
        &data,
        (1e-10, 1e-6),
        "auto block against 512",
    );
    // 900 x 900 f64 values do not fit in 1 MB: the kernel is streamed, the block stays 512
    let streamed = fit(None, 1 << 20);
    assert!(
        !streamed.training.working_set.contains("blocks of"),
        "{}",
        streamed.training.working_set
    );
    assert!(streamed.training.gap <= 1e-10);
}

/// Two fits of one problem reached its optimum: both gaps within `tol`, decision values on
/// `data` within `close` of each other or within what the gaps guarantee, whichever is larger
/// (the primal is 1-strongly convex in `w`, so a model's decision values are within
/// `sqrt(2 (P - D)) sqrt(k(x, x))` of the optimum's; `k(x, x) = 1` for the kernels used
/// here), and something learnt.
fn assert_same_optimum<U: joker::Scalar>(
    (a, b): (&Model, &Model),
    data: &Dataset<U>,
    (tol, close): (f64, f64),
    what: &str,
) {
    assert!(
        a.training.gap <= tol && b.training.gap <= tol,
        "{what}: gaps {} and {}",
        a.training.gap,
        b.training.gap
    );
    let (fa, fb) = (
        a.decision_function(&data.x).unwrap(),
        b.decision_function(&data.x).unwrap(),
    );
    let diff = fa
        .iter()
        .zip(&fb)
        .map(|(p, q)| (p - q).abs())
        .fold(0.0, f64::max);
    let within = |m: &Model| (2.0 * (m.training.primal - m.training.dual).max(0.0)).sqrt();
    let bound = close.max(within(a) + within(b));
    assert!(
        diff < bound,
        "{what}: decision values differ by {diff} > {bound}"
    );
    assert!(fa.iter().any(|v| v.abs() > 1e-3), "{what}: nothing learnt");
}

/// Seven classes in 9 dimensions with the class balance of many real multi-class sets (one
/// class at 78%, two of a handful of rows), each class a mixture of three Gaussian blobs,
/// features on scales from 1 to 50: one-vs-rest KLR columns where nearly every coordinate
/// sits close to a bound of its box.
fn imbalanced_classes(n: usize, seed: u64) -> Dataset<f64> {
    let mut s = joker::rng::Stream::new(seed, 81);
    let mut normal = move || {
        let (u, v) = (s.uniform().max(1e-300), s.uniform());
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    };
    const D: usize = 9;
    let shares = [0.784, 0.001, 0.003, 0.155, 0.056, 0.0003, 0.0007];
    let scale = [1.0, 5.0, 1.0, 20.0, 1.0, 3.0, 1.0, 1.0, 50.0];
    let blobs: Vec<[f64; D]> = (0..shares.len() * 3)
        .map(|_| std::array::from_fn(|_| 3.0 * normal()))
        .collect();
    let mut x = Vec::with_capacity(n * D);
    let mut y = Vec::with_capacity(n);
    for i in 0..n {
        // classes by their shares, the rarest present at least once
        let u = (i as f64 + 0.5) / n as f64;
        let mut acc = 0.0;
        let class = shares
            .iter()
            .position(|p| {
                acc += p;
                u < acc
            })
            .unwrap_or(shares.len() - 1);
        let blob = &blobs[3 * class + (normal().abs() * 2.0) as usize % 3];
        x.extend((0..D).map(|j| blob[j] + scale[j] * normal()));
        y.push(class as f64);
    }
    Dataset::new(Features::Dense(DenseMatrix::new(n, D, x).unwrap()), y).unwrap()
}

/// KLR on imbalanced classes: in the diagonal norm (the default for KLR) the fit reaches the
/// duality-gap tolerance in no more iterations than in the Euclidean norm (the coordinates
/// near a bound, whose entropy curvature is orders of magnitude above the others', make the
/// Euclidean steps short: with blocks solved to `kkt_tol` the Euclidean norm stayed above the
/// tolerance after four times the diagonal norm's iterations; with the inexact block solves
/// and the box-stopped CG it took 324 against 276, with the projected CG both take 276, the
/// checks coming every 12), and the two models agree within what their gaps guarantee. Pinned to the CPU: on a GPU's engine (the Gram as the trust region's model) the
/// iteration counts differ (docs/gpu-validation.md).
#[test]
fn klr_in_the_diagonal_norm_reaches_the_optimum_sooner() {
    let data = imbalanced_classes(6000, 17);
    let tol = 3e-4;
    let fit = |norm: TrNorm, max_iter: usize| {
        Joker::builder()
            .loss(Loss::Logistic)
            .n_components(512)
            .multiclass(Multiclass::OneVsRest)
            .tr_norm(norm)
            .tol(tol)
            .stall(false)
            .max_iter(max_iter)
            .check_every(12)
            .device(joker::Device::Cpu)
            .build()
            .unwrap()
            .fit(&data)
            .unwrap()
    };
    let diagonal = fit(TrNorm::Diagonal, 20_000);
    let euclidean = fit(TrNorm::Euclidean, 20_000);
    println!(
        "diagonal norm: gap {:.2e} after {} iterations; Euclidean: gap {:.2e} after {}",
        diagonal.training.gap,
        diagonal.training.iterations,
        euclidean.training.gap,
        euclidean.training.iterations
    );
    assert_eq!(diagonal.training.stop, StopReason::Converged);
    assert!(diagonal.training.gap <= tol);
    assert!(
        euclidean.training.gap <= tol
            && euclidean.training.iterations >= diagonal.training.iterations,
        "the Euclidean norm: gap {:.2e} after {} iterations",
        euclidean.training.gap,
        euclidean.training.iterations
    );
    let auto = fit(TrNorm::Auto, diagonal.training.iterations);
    assert_eq!(
        auto.decision_function(&data.x).unwrap(),
        diagonal.decision_function(&data.x).unwrap(),
        "KLR takes the diagonal norm by default"
    );
    assert_same_optimum(
        (&euclidean, &diagonal),
        &data,
        (euclidean.training.gap, 0.0),
        "KLR, Euclidean and diagonal norms",
    );
}

/// A constant feature `B` after the random ones: KRR's dual is the dense solve of
/// `(Phi' Phi'^T + lambda I) a = y` with `Phi' = [Phi, B 1]`, and the model file (version 4,
/// with `bias`) predicts `Phi' Phi'^T a`, also after a round trip through the file; the exact
/// kernel, a Nystrom map, the doubly stochastic solvers and a negative `B` are refused.
#[test]
fn a_bias_feature_is_a_constant_feature() {
    let data = common::regression(300, 3, 5);
    let (lambda, gamma, m, b) = (0.5, 0.4, 64, 1.0);
    let mut cfg = joker::SolverConfig::default();
    cfg.trust_region.kkt_tol = 1e-11;
    let model = Joker::builder()
        .solver(cfg)
        .loss(Loss::SquaredError)
        .n_components(m)
        .bias(b)
        .gamma(gamma)
        .lambda(lambda)
        .precision(Precision::F64)
        .standardize(false)
        .normalize_target(false)
        .block_size(64)
        .tol(0.0)
        .max_iter(8000)
        .check_every(50)
        .build()
        .unwrap()
        .fit(&data)
        .unwrap();
    let map = joker::features::RandomMap::<f64>::new(joker::features::FeatureSpec {
        kernel: Kernel {
            kind: KernelKind::Gaussian,
            gamma,
        },
        n_components: m,
        dim: 3,
        seed: joker::SolverConfig::default().seed,
    })
    .unwrap();
    let phi: Vec<Vec<f64>> = rows(&data)
        .iter()
        .map(|x| {
            let mut p = map.eval_f64(x);
            p.push(b);
            p
        })
        .collect();
    let n = phi.len();
    let k = |i: usize, j: usize| -> f64 { phi[i].iter().zip(&phi[j]).map(|(p, q)| p * q).sum() };
    let want = common::krr_dual(n, k, lambda, &data.y);
    let got = model.dual.as_ref().unwrap();
    let err = got
        .iter()
        .zip(&want)
        .map(|(g, w)| (g - w).abs())
        .fold(0.0, f64::max);
    assert!(
        err < 1e-6,
        "dual coefficients differ by {err}; gap {:e} after {} iterations",
        model.training.gap,
        model.training.iterations
    );
    let fitted: Vec<f64> = (0..n)
        .map(|i| (0..n).map(|j| k(i, j) * want[j]).sum())
        .collect();
    let path = std::env::temp_dir().join(format!("joker-bias-{}.json", std::process::id()));
    model.save(&path).unwrap();
    let loaded = Model::load(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    assert_eq!(loaded.version, 4);
    for m in [&model, &loaded] {
        let f = m.decision_function(&data.x).unwrap();
        let diff = f
            .iter()
            .zip(&fitted)
            .map(|(p, q)| (p - q).abs())
            .fold(0.0, f64::max);
        assert!(diff < 1e-6, "decision values differ by {diff}");
    }
    let refuse = |b: joker::JokerBuilder| {
        let e = b.bias(1.0).build().unwrap_err();
        assert!(e.to_string().contains("bias"), "{e}");
    };
    refuse(Joker::builder().exact());
    refuse(Joker::builder().feature_map(joker::FeatureKind::Nystrom(joker::Centers::Uniform)));
    refuse(Joker::builder().dsg(joker::DsgConfig::default()));
    let e = Joker::builder().bias(-1.0).build().unwrap_err();
    assert!(e.to_string().contains("bias"), "{e}");
}

/// KRR on a feature map starts from the exact optimum of its primal system: the first check
/// certifies it (no iteration, a gap at rounding level), and DBCD-TR from zero - another
/// algorithm - converges to the same model; with sample weights, several target columns, a
/// Nystrom map and random features.
#[test]
fn krr_on_features_starts_from_its_exact_optimum() {
    let w: Vec<f64> = (0..200).map(|i| 0.5 + (i % 3) as f64).collect();
    let sets = [
        (
            common::regression(200, 3, 31),
            common::regression(90, 3, 32),
            Task::Regression,
        ),
        (
            common::three_classes(150, 33),
            common::three_classes(90, 34),
            Task::Classification,
        ),
    ];
    for map in [FeatureKind::Random, FeatureKind::Nystrom(Centers::Uniform)] {
        for (train, test, task) in &sets {
            let weighted = *task == Task::Regression;
            let fit = |direct: bool, tol: f64| {
                Joker::builder()
                    .loss(Loss::SquaredError)
                    .task(*task)
                    .n_components(60)
                    .feature_map(map)
                    .gamma(0.7)
                    .lambda(0.02)
                    .precision(Precision::F64)
                    .block_size(64)
                    .max_iter(100_000)
                    .tol(tol)
                    .stall(false)
                    .direct_krr(direct)
                    .build()
                    .unwrap()
                    .fit_with(
                        train,
                        FitOptions {
                            sample_weight: weighted.then_some(&w[..]),
                            ..Default::default()
                        },
                    )
                    .unwrap()
            };
            let direct = fit(true, 1e-3);
            assert_eq!(direct.training.iterations, 0, "{map:?} {task:?}");
            assert!(
                direct.training.gap < 1e-10,
                "{map:?} {task:?}: gap {}",
                direct.training.gap
            );
            let iterative = fit(false, 1e-10);
            assert!(iterative.training.iterations > 0);
            let (a, b) = (
                direct.decision_function(&test.x).unwrap(),
                iterative.decision_function(&test.x).unwrap(),
            );
            let d = a
                .iter()
                .zip(&b)
                .map(|(p, q)| (p - q).abs())
                .fold(0.0, f64::max);
            assert!(d < 1e-5, "{map:?} {task:?}: the models differ by {d}");
        }
    }
}

/// L2-SVC on a feature map starts from its optimum, found in the primal by a finite Newton
/// method: the first check certifies it (no iteration, a gap at rounding level), the model
/// file says how it started, and DBCD-TR from zero - another algorithm - converges to the same
/// model; two classes with sample weights and three one-vs-rest, a Nystrom map (its features
/// kept, and formed per block beyond a zero cache) and random features, in f64 and in f32
/// (whose products the method refines against the exact residual).
#[test]
fn l2_svc_on_features_starts_from_its_primal_optimum() {
    let w: Vec<f64> = (0..400).map(|i| 0.5 + (i % 3) as f64).collect();
    let sets = [
        (common::binary(400, 4, 41), common::binary(150, 4, 42), true),
        (
            common::three_classes(400, 43),
            common::three_classes(150, 44),
            false,
        ),
    ];
    let maps = [
        (FeatureKind::Random, 2048),
        (FeatureKind::Nystrom(Centers::Uniform), 2048),
        (FeatureKind::Nystrom(Centers::Uniform), 0),
    ];
    for (map, cache) in maps {
        for precision in [Precision::F64, Precision::F32] {
            for (train, test, weighted) in &sets {
                let fit = |newton: bool, tol: f64| {
                    Joker::builder()
                        .loss(Loss::SquaredHinge)
                        .n_components(16)
                        .feature_map(map)
                        .gamma(0.5)
                        .lambda(0.05)
                        .precision(precision)
                        .kernel_cache(cache << 20)
                        .block_size(64)
                        .max_iter(200_000)
                        .tol(tol)
                        .stall(false)
                        .newton_start(newton)
                        .build()
                        .unwrap()
                        .fit_with(
                            train,
                            FitOptions {
                                sample_weight: weighted.then_some(&w[..]),
                                ..Default::default()
                            },
                        )
                        .unwrap()
                };
                let what = format!("{map:?} cache {cache} {precision:?} weighted {weighted}");
                let newton = fit(true, 1e-3);
                assert_eq!(newton.training.iterations, 0, "{what}");
                let bound = if precision == Precision::F64 {
                    1e-10
                } else {
                    1e-6
                };
                assert!(
                    newton.training.gap < bound,
                    "{what}: gap {}",
                    newton.training.gap
                );
                assert!(
                    newton.training.start.starts_with("finite Newton"),
                    "{what}: {}",
                    newton.training.start
                );
                assert!(!newton.training.start.contains("stopped"), "{what}");
                let iterative = fit(
                    false,
                    if precision == Precision::F64 {
                        1e-12
                    } else {
                        1e-8
                    },
                );
                assert!(iterative.training.iterations > 0, "{what}");
                assert!(iterative.training.start.is_empty(), "{what}");
                let (a, b) = (
                    newton.decision_function(&test.x).unwrap(),
                    iterative.decision_function(&test.x).unwrap(),
                );
                let d = a
                    .iter()
                    .zip(&b)
                    .map(|(p, q)| (p - q).abs())
                    .fold(0.0, f64::max);
                // the primal is 1-strongly convex in theta and |phi(x)| <= 1: each model's
                // decision values lie within sqrt(2 (P - D)) of the optimum's
                let off = |m: &joker::Model| {
                    let t = &m.training;
                    (2.0 * t.gap * t.primal.abs().max(t.dual.abs())).sqrt()
                };
                let rounding = if precision == Precision::F64 {
                    1e-9
                } else {
                    1e-5
                };
                let tol = 1.05 * (off(&newton) + off(&iterative)) + rounding;
                assert!(d < tol, "{what}: the models differ by {d} (bound {tol})");
            }
        }
    }
}

/// The Newton start honours the interruption poll and the time limit between its steps: an
/// interrupt at the third poll ends the fit as cancelled without a check (its duals those of
/// the last iterate, a usable model), a spent time limit as `time_limit` after the check of
/// iteration 0, and the training record says so.
#[test]
fn the_newton_start_stops_on_interrupt_and_time_limit() {
    let train = common::binary(600, 4, 45);
    let builder = || {
        Joker::builder()
            .loss(Loss::SquaredHinge)
            .n_components(32)
            .gamma(0.5)
            .block_size(64)
    };
    let mut polls = 0;
    let cancelled = builder()
        .build()
        .unwrap()
        .fit_with(
            &train,
            FitOptions {
                interrupt: Some(Box::new(|| {
                    polls += 1;
                    polls >= 3
                })),
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(polls, 3);
    assert_eq!(cancelled.training.stop, joker::StopReason::Cancelled);
    assert_eq!(cancelled.training.iterations, 0);
    assert!(
        cancelled.training.start.ends_with("(interrupted)"),
        "{}",
        cancelled.training.start
    );
    assert!(
        cancelled
            .decision_function(&train.x)
            .unwrap()
            .iter()
            .all(|v| v.is_finite())
    );

    let timed = builder()
        .time_limit(std::time::Duration::from_nanos(1))
        .build()
        .unwrap()
        .fit(&train)
        .unwrap();
    assert_eq!(timed.training.stop, joker::StopReason::TimeLimit);
    assert_eq!(timed.training.iterations, 0);
    assert!(
        timed.training.start.ends_with("(time limit)"),
        "{}",
        timed.training.start
    );
    assert!(timed.training.gap.is_finite());
}

/// The regression set of [`common::regression`] with every target raised by `offset`: a
/// constant the kernel expansion (regularised, decaying away from the rows) fits poorly and
/// an intercept fits exactly.
fn raised(n: usize, seed: u64, offset: f64) -> Dataset<f64> {
    let mut data = common::regression(n, 3, seed);
    data.y.iter_mut().for_each(|y| *y += offset);
    data
}

/// KRR with an intercept: `(K + lambda I) a + b 1 = y` with `1^T a = 0`, solved densely as
/// `a = A y - b A 1`, `b = 1^T A y / 1^T A 1` (`A = (K + lambda I)^-1`): the fitted values and
/// the intercept agree to 1e-4 relative.
#[test]
fn krr_with_an_intercept_matches_the_bordered_dense_solve() {
    let data = raised(160, 11, 3.0);
    let (lambda, gamma) = (0.2, 0.5);
    let model = Joker::builder()
        .loss(Loss::SquaredError)
        .exact()
        .gamma(gamma)
        .lambda(lambda)
        .precision(Precision::F64)
        .standardize(false)
        .normalize_target(false)
        .intercept(true)
        .tol(1e-9)
        .stall(false)
        .max_iter(20_000)
        .device(joker::Device::Cpu)
        .build()
        .unwrap()
        .fit(&data)
        .unwrap();
    let x = rows(&data);
    let n = x.len();
    let kernel = Kernel {
        kind: KernelKind::Gaussian,
        gamma,
    };
    let k = |i: usize, j: usize| kernel.eval(&x[i], &x[j]);
    let ay = common::krr_dual(n, k, lambda, &data.y);
    let a1 = common::krr_dual(n, k, lambda, &vec![1.0; n]);
    let b = ay.iter().sum::<f64>() / a1.iter().sum::<f64>();
    let a: Vec<f64> = ay.iter().zip(&a1).map(|(p, q)| p - b * q).collect();
    let want: Vec<f64> = (0..n)
        .map(|i| b + (0..n).map(|j| k(i, j) * a[j]).sum::<f64>())
        .collect();
    let rel = relative_error(&model.decision_function(&data.x).unwrap(), &want);
    let fitted = model.training.intercept.expect("the intercept is recorded");
    assert!(
        rel < 1e-4 && (fitted - b).abs() < 1e-4 * b.abs(),
        "fitted values off by {rel:e} (relative), intercept {fitted} against {b}"
    );
    // without the intercept the same fit is another model
    assert!((b - 3.0).abs() < 1.0, "the dense solve's intercept {b}");
}

/// SVR with an intercept against its optimality conditions, LIBSVM's problem: the duals sum
/// to zero (to the search's 1e-3 of their size) and each lies in its KKT interval at the
/// residual `y_i - u_i - b`; its primal optimum is below the one without an intercept.
#[test]
fn svr_with_an_intercept_balances_its_duals_and_meets_the_kkt_conditions() {
    let data = raised(300, 12, 2.0);
    let (lambda, gamma, epsilon) = (0.5, 0.5, 0.1);
    let loss = Loss::EpsilonInsensitive { epsilon };
    let fit = |intercept: bool| {
        Joker::builder()
            .loss(loss)
            .exact()
            .gamma(gamma)
            .lambda(lambda)
            .precision(Precision::F64)
            .standardize(false)
            .normalize_target(false)
            .intercept(intercept)
            .tol(1e-6)
            .stall(false)
            .max_iter(20_000)
            .device(joker::Device::Cpu)
            .build()
            .unwrap()
            .fit(&data)
            .unwrap()
    };
    let (with, without) = (fit(true), fit(false));
    let b = with.training.intercept.unwrap();
    let alpha = with.dual.as_ref().unwrap();
    let (sum, size) = common::dual_balance(alpha);
    assert!(
        sum.abs() <= 1e-3 * size,
        "duals sum to {sum} (of {size}), intercept {b}"
    );
    // the decision values include b; the KKT relation reads the kernel expansion alone
    let f = with.decision_function(&data.x).unwrap();
    let c = 1.0 / lambda;
    let mut worst: f64 = 0.0;
    for (i, (&fi, &ai)) in f.iter().zip(alpha).enumerate() {
        let k = Coord {
            y: data.y[i] - b,
            lam: lambda,
            eps: 0.0,
        };
        let u = fi - b;
        let (lo, hi) = (
            loss.kkt_interval(u - 1e-3, &k),
            loss.kkt_interval(u + 1e-3, &k),
        );
        let hull = (lo.0.min(hi.0), lo.1.max(hi.1));
        worst = worst.max(outside(ai, hull) / c);
    }
    assert!(worst <= 1e-2, "a dual {worst} of C off its KKT interval");
    // the intercept is a free variable more: the primal optimum can only fall
    assert!(
        with.training.primal < without.training.primal && without.training.intercept.is_none(),
        "primal {} with an intercept, {} without",
        with.training.primal,
        without.training.primal
    );
}

/// The intercept is refused where it is not fitted: classifiers, the doubly stochastic
/// solvers, full KRR.
#[test]
fn an_intercept_is_refused_where_it_is_not_fitted() {
    let refused = |b: joker::JokerBuilder| match b.intercept(true).build() {
        Err(JokerError::InvalidParameter { name, .. }) => name == "intercept",
        _ => false,
    };
    assert!(refused(Joker::builder().loss(Loss::Hinge)));
    assert!(refused(Joker::builder().task(Task::Classification)));
    assert!(refused(Joker::builder().dsg(joker::DsgConfig::default())));
    assert!(refused(
        Joker::builder()
            .exact()
            .full_krr(joker::KrrConfig::default())
    ));
    assert!(
        Joker::builder()
            .loss(Loss::Huber { delta: 1.0 })
            .intercept(true)
            .build()
            .is_ok()
    );
}

/// KRR with an intercept on a feature map starts at the bordered system's optimum (0
/// iterations, the duals summing to zero) and equals the same fit found by DBCD-TR and the
/// intercept's search from zero, with sample weights, on random features and a Nystrom map.
#[test]
fn krr_on_features_with_an_intercept_starts_at_the_bordered_optimum() {
    let train = raised(240, 35, 3.0);
    let test = raised(90, 36, 3.0);
    let w: Vec<f64> = (0..240).map(|i| 0.5 + (i % 3) as f64).collect();
    for map in [FeatureKind::Random, FeatureKind::Nystrom(Centers::Uniform)] {
        let fit = |direct: bool, tol: f64| {
            Joker::builder()
                .loss(Loss::SquaredError)
                .n_components(60)
                .feature_map(map)
                .gamma(0.7)
                .lambda(0.02)
                .precision(Precision::F64)
                .normalize_target(false)
                .intercept(true)
                .block_size(64)
                .max_iter(100_000)
                .tol(tol)
                .stall(false)
                .direct_krr(direct)
                .build()
                .unwrap()
                .fit_with(
                    &train,
                    FitOptions {
                        sample_weight: Some(&w),
                        ..Default::default()
                    },
                )
                .unwrap()
        };
        let direct = fit(true, 1e-3);
        assert_eq!(direct.training.iterations, 0, "{map:?}");
        let alpha = direct.dual.as_ref().unwrap();
        let (sum, size) = common::dual_balance(alpha);
        assert!(sum.abs() < 1e-9 * size, "{map:?}: duals sum to {sum}");
        let iterative = fit(false, 1e-10);
        assert!(iterative.training.iterations > 0);
        let (b0, b1) = (
            direct.training.intercept.unwrap(),
            iterative.training.intercept.unwrap(),
        );
        let d = common::max_diff(
            &direct.decision_function(&test.x).unwrap(),
            &iterative.decision_function(&test.x).unwrap(),
        );
        assert!(
            d < 1e-3 && (b0 - b1).abs() < 1e-3,
            "{map:?}: the models differ by {d}, intercepts {b0} and {b1}"
        );
    }
}

/// SVR's `epsilon |a|` at a dual a rounding error from zero: from the optimum with one
/// coordinate `a_j < 0` replaced by `1e-162`, its residual beyond the tube, DBCD-TR converges
/// again (the coordinate takes its orthant from its gradient, as at zero). When the sign of
/// `a_j` fixed the orthant, the free set froze it at the orthant's edge, a hair from zero, and
/// the fit ran to its iteration cap at the gap it started with (docs/gpu-validation.md).
#[test]
fn an_svr_dual_a_hair_from_zero_does_not_stall_the_fit() {
    let data = common::regression(300, 3, 41);
    let fit = |warm: Option<&Model>| {
        Joker::builder()
            .loss(Loss::EpsilonInsensitive { epsilon: 0.1 })
            .intercept(false)
            .exact()
            .block_size(64)
            .tol(1e-6)
            .stall(false)
            .max_iter(3000)
            .device(joker::Device::Cpu)
            .build()
            .unwrap()
            .fit_with(
                &data,
                FitOptions {
                    warm_start: warm,
                    ..Default::default()
                },
            )
            .unwrap()
    };
    let optimum = fit(None);
    assert_eq!(optimum.training.stop, StopReason::Converged);
    let mut moved = optimum.clone();
    let alpha = moved.dual.as_mut().unwrap();
    let j = (0..alpha.len())
        .min_by(|&p, &q| alpha[p].total_cmp(&alpha[q]))
        .unwrap();
    assert!(alpha[j] < -0.1, "the most negative dual {}", alpha[j]);
    alpha[j] = 1e-162;
    let again = fit(Some(&moved));
    assert_eq!(
        again.training.stop,
        StopReason::Converged,
        "gap {:e} after {} iterations",
        again.training.gap,
        again.training.iterations
    );
    let a = again.dual.as_ref().unwrap();
    assert!(a[j] < 0.0, "dual {j} stayed at {:e}", a[j]);
}

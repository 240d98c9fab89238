//! Unit tests of the C ABI, called from Rust as C would call it: statuses, messages, handle
//! checks, buffers, and a fit / predict / save / load round trip.

use std::ffi::{CStr, CString, c_void};
use std::ptr::{null, null_mut};

use super::*;
use crate::rng::Stream;
use crate::solver::TrNorm;

fn last_error() -> String {
    // SAFETY: joker_last_error returns a valid NUL-terminated string (thread-local).
    unsafe { CStr::from_ptr(joker_last_error()) }
        .to_string_lossy()
        .into_owned()
}

/// Asserts a status and that the last error contains `needle`.
#[track_caller]
fn expect(status: JokerStatus, want: JokerStatus, needle: &str) {
    assert_eq!(status, want, "message: {}", last_error());
    let msg = last_error();
    assert!(msg.contains(needle), "{msg:?} does not contain {needle:?}");
}

#[track_caller]
fn ok(status: JokerStatus) {
    assert_eq!(status, JokerStatus::Ok, "message: {}", last_error());
    assert_eq!(last_error(), "");
}

/// Binary labels: the sign of `x0^2 + x1 - 1`, row-major `n x d`, no noise.
fn binary(n: usize, d: usize, seed: u64) -> (Vec<f64>, Vec<f64>) {
    let mut s = Stream::new(seed, 5);
    let mut x = Vec::with_capacity(n * d);
    let mut y = Vec::with_capacity(n);
    for _ in 0..n {
        let row: Vec<f64> = (0..d).map(|_| 4.0 * s.uniform() - 2.0).collect();
        y.push(if row[0] * row[0] + row[1] - 1.0 > 0.0 {
            1.0
        } else {
            -1.0
        });
        x.extend(row);
    }
    (x, y)
}

fn params(loss: JokerLoss) -> *mut JokerParams {
    let mut p = null_mut();
    // SAFETY: valid out-pointer; the handle is used on this thread only.
    unsafe {
        ok(joker_params_new(&mut p));
        ok(joker_params_set_loss(p, loss as i32, 0.0));
        ok(joker_params_set_n_components(p, 256));
        ok(joker_params_set_block_size(p, 64));
        ok(joker_params_set_max_iter(p, 150));
        ok(joker_params_set_c(p, 10.0));
    }
    p
}

fn dense(x: &[f64], n: usize, d: usize, y: Option<&[f64]>) -> *mut JokerData {
    let mut h = null_mut();
    let yp = y.map_or(null(), <[f64]>::as_ptr);
    // SAFETY: `x` holds n * d values and `y` n values (or NULL).
    ok(unsafe { joker_data_from_dense_f64(x.as_ptr(), n, d, yp, &mut h) });
    h
}

#[test]
fn version_and_capabilities() {
    // SAFETY: static NUL-terminated string.
    let v = unsafe { CStr::from_ptr(joker_version()) };
    assert_eq!(v.to_str().unwrap(), env!("CARGO_PKG_VERSION"));
    assert_eq!(joker_abi_version(), JOKER_ABI_VERSION);
    // The device queries answer from the probe, whatever this machine has.
    let probe = crate::device::probe();
    assert_eq!(joker_gpu_available(), i32::from(probe.available()));
    assert_eq!(joker_device_count(), probe.devices.len() as i32);
    let mut name = c"x".as_ptr();
    // SAFETY: valid out-pointer.
    let st = unsafe { joker_device_name(-1, &mut name) };
    expect(st, JokerStatus::Device, "no usable CUDA device -1");
    assert!(name.is_null());
    if !probe.available() {
        // SAFETY: valid out-pointer.
        let st = unsafe { joker_device_name(0, &mut name) };
        expect(st, JokerStatus::Device, &probe.reason());
        assert!(name.is_null());
    }
    for g in &probe.devices {
        // SAFETY: valid out-pointer; the name is a static NUL-terminated string.
        unsafe {
            ok(joker_device_name(g.index as i32, &mut name));
            assert_eq!(CStr::from_ptr(name).to_str().unwrap(), g.name);
        }
    }
    // SAFETY: NULL out-pointer is rejected.
    let st = unsafe { joker_device_name(0, null_mut()) };
    expect(st, JokerStatus::NullPointer, "out");
    // SAFETY: static strings.
    let s = |v| {
        unsafe { CStr::from_ptr(joker_status_name(v)) }
            .to_str()
            .unwrap()
    };
    assert_eq!(s(0), "JOKER_STATUS_OK");
    assert_eq!(s(5), "JOKER_STATUS_SHAPE_MISMATCH");
    assert_eq!(s(16), "JOKER_STATUS_PANIC");
    assert_eq!(s(17), "JOKER_STATUS_DISTRIBUTED");
    assert_eq!(s(18), "JOKER_STATUS_UNKNOWN");
    assert_eq!(s(-1), "JOKER_STATUS_UNKNOWN");
    for (i, st) in JokerStatus::ALL.iter().enumerate() {
        assert_eq!(*st as i32, i as i32);
    }
}

#[test]
fn parameters_are_validated_when_set() {
    let p = params(JokerLoss::L2Svc);
    // SAFETY: `p` is a live handle used on this thread only.
    unsafe {
        expect(
            joker_params_set_lambda(p, 0.0),
            JokerStatus::InvalidArgument,
            "invalid parameter `lambda`",
        );
        // messages name the C function that sets the parameter
        expect(
            joker_params_set_block_size(p, 0),
            JokerStatus::InvalidArgument,
            "(set with joker_params_set_block_size)",
        );
        expect(
            joker_params_set_lambda(p, f64::NAN),
            JokerStatus::InvalidArgument,
            "lambda",
        );
        expect(
            joker_params_set_c(p, -1.0),
            JokerStatus::InvalidArgument,
            "`c`",
        );
        expect(
            joker_params_set_n_components(p, 0),
            JokerStatus::InvalidArgument,
            "n_components",
        );
        expect(
            joker_params_set_loss(p, 99, 0.0),
            JokerStatus::InvalidArgument,
            "not a JOKER_LOSS_* value",
        );
        expect(
            joker_params_set_loss(p, JokerLoss::Huber as i32, -1.0),
            JokerStatus::InvalidArgument,
            "delta",
        );
        expect(
            joker_params_set_kernel(p, 5),
            JokerStatus::InvalidArgument,
            "JOKER_KERNEL_*",
        );
        expect(
            joker_params_set_gamma(p, 0.0),
            JokerStatus::InvalidArgument,
            "gamma",
        );
        expect(
            joker_params_set_task(p, JokerTask::Regression as i32),
            JokerStatus::InvalidArgument,
            "classifier",
        );
        expect(
            joker_params_set_time_limit(p, -1.0),
            JokerStatus::InvalidArgument,
            "seconds",
        );
        let (l, w) = ([1.0, -1.0], [2.0, 0.0]);
        expect(
            joker_params_set_class_weights(p, l.as_ptr(), w.as_ptr(), 2),
            JokerStatus::InvalidArgument,
            "weights[1]",
        );
        expect(
            joker_params_set_class_weights(p, null(), w.as_ptr(), 2),
            JokerStatus::NullPointer,
            "`labels` is NULL",
        );
        // a failed setter leaves the parameters as they were
        assert_eq!((*p).inner.lambda, 0.1);
        ok(joker_params_set_kernel(p, JokerKernel::Matern32 as i32));
        ok(joker_params_set_bandwidth(
            p,
            JokerBandwidth::MeanSquaredDistance as i32,
        ));
        ok(joker_params_set_time_limit(p, 0.0));
        ok(joker_params_set_precision(p, JokerPrecision::F64 as i32));
        ok(joker_params_set_class_weight(
            p,
            JokerClassWeight::Balanced as i32,
        ));
        ok(joker_params_set_exact(p));
        assert_eq!((*p).inner.n_components, None);
        ok(joker_params_free(p));
    }
}

#[test]
fn null_freed_and_mistyped_handles_are_rejected() {
    let mut p = null_mut();
    // SAFETY: every pointer below is NULL, live, or a stale address that the registry rejects
    // before any dereference.
    unsafe {
        expect(
            joker_params_new(null_mut()),
            JokerStatus::NullPointer,
            "`out` is NULL",
        );
        expect(
            joker_params_set_c(null_mut(), 1.0),
            JokerStatus::NullPointer,
            "`params` is NULL",
        );
        ok(joker_params_new(&mut p));
        ok(joker_params_free(p));
        expect(
            joker_params_set_c(p, 1.0),
            JokerStatus::InvalidHandle,
            "not a live JokerParams handle",
        );
        expect(
            joker_params_free(p),
            JokerStatus::InvalidHandle,
            "already freed",
        );
        ok(joker_params_free(null_mut()));
        // a pointer that joker never made
        let mut fake = [0u64; 4];
        expect(
            joker_params_set_c(fake.as_mut_ptr().cast(), 1.0),
            JokerStatus::InvalidHandle,
            "never created",
        );
        // a data handle where parameters are expected
        let (x, y) = binary(10, 2, 1);
        let d = dense(&x, 10, 2, Some(&y));
        expect(
            joker_params_set_c(d.cast(), 1.0),
            JokerStatus::InvalidHandle,
            "is a JokerData handle, a JokerParams is required",
        );
        expect(
            joker_model_free(d.cast()),
            JokerStatus::InvalidHandle,
            "is a JokerData handle",
        );
        let mut n = 0;
        ok(joker_data_n_rows(d, &mut n));
        assert_eq!(n, 10);
        ok(joker_data_free(d));
        expect(
            joker_data_n_rows(d, &mut n),
            JokerStatus::InvalidHandle,
            "JokerData",
        );
    }
}

#[test]
fn bad_data_is_rejected_with_its_position() {
    let mut h = null_mut();
    let x = [1.0, 2.0, f64::NAN, 4.0];
    // SAFETY: arrays of the stated sizes, valid out-pointer.
    unsafe {
        expect(
            joker_data_from_dense_f64(x.as_ptr(), 2, 2, null(), &mut h),
            JokerStatus::NonFinite,
            "non-finite value in features at row 1, column 0",
        );
        assert!(h.is_null());
        let xf = [1.0f32, f32::INFINITY];
        expect(
            joker_data_from_dense_f32(xf.as_ptr(), 1, 2, null(), &mut h),
            JokerStatus::NonFinite,
            "row 0, column 1",
        );
        let y = [1.0, f64::NAN];
        let x = [1.0, 2.0, 3.0, 4.0];
        expect(
            joker_data_from_dense_f64(x.as_ptr(), 2, 2, y.as_ptr(), &mut h),
            JokerStatus::NonFinite,
            "targets at row 1",
        );
        expect(
            joker_data_from_dense_f64(x.as_ptr(), 0, 2, null(), &mut h),
            JokerStatus::EmptyData,
            "0 x 2",
        );
        expect(
            joker_data_from_dense_f64(null(), 2, 2, null(), &mut h),
            JokerStatus::NullPointer,
            "`x` is NULL",
        );
        expect(
            joker_data_from_dense_f64(x.as_ptr(), usize::MAX, 2, null(), &mut h),
            JokerStatus::ShapeMismatch,
            "overflows",
        );
        // CSR: a column out of range, unsorted columns, and an indptr that overstates nnz
        let (ptr, idx, val) = ([0usize, 1, 2], [0u32, 3], [1.0, 2.0]);
        expect(
            joker_data_from_csr_f64(
                2,
                3,
                ptr.as_ptr(),
                idx.as_ptr(),
                val.as_ptr(),
                null(),
                &mut h,
            ),
            JokerStatus::ShapeMismatch,
            "CSR row 1 has column 3, but there are 3 columns",
        );
        let (ptr, idx) = ([0usize, 2], [2u32, 1]);
        expect(
            joker_data_from_csr_f64(
                1,
                3,
                ptr.as_ptr(),
                idx.as_ptr(),
                val.as_ptr(),
                null(),
                &mut h,
            ),
            JokerStatus::ShapeMismatch,
            "strictly increasing",
        );
        let ptr = [0usize, 1_000_000];
        expect(
            joker_data_from_csr_f64(
                1,
                3,
                ptr.as_ptr(),
                idx.as_ptr(),
                val.as_ptr(),
                null(),
                &mut h,
            ),
            JokerStatus::ShapeMismatch,
            "more than n_rows x n_cols",
        );
        let (ptr, idx, val) = ([0usize, 1, 2], [0u32, 2], [1.0f32, 2.0]);
        ok(joker_data_from_csr_f32(
            2,
            3,
            ptr.as_ptr(),
            idx.as_ptr(),
            val.as_ptr(),
            null(),
            &mut h,
        ));
        let mut c = 0;
        ok(joker_data_n_cols(h, &mut c));
        assert_eq!(c, 3);
        ok(joker_data_free(h));
    }
}

struct Calls {
    n: usize,
    stop_after: usize,
    last_validation: f64,
}

/// The test's progress callback: counts the checks and stops after `stop_after`.
///
/// # Safety
/// `p` must be a valid snapshot and `user` a `Calls` that no one else uses during the call.
unsafe extern "C" fn on_progress(p: *const JokerProgress, user: *mut c_void) -> i32 {
    // SAFETY: joker passes a valid snapshot and our `Calls` pointer, used on this thread only.
    let (p, calls) = unsafe { (&*p, &mut *user.cast::<Calls>()) };
    calls.n += 1;
    calls.last_validation = p.validation;
    assert!(p.gap.is_finite() && p.iter > 0);
    i32::from(calls.n >= calls.stop_after)
}

#[test]
fn fit_predict_save_load_round_trip() {
    let (n, d) = (600, 3);
    let (x, y) = binary(n, d, 7);
    let (xt, yt) = binary(300, d, 8);
    let p = params(JokerLoss::L2Svc);
    let train = dense(&x, n, d, Some(&y));
    let test = dense(&xt, 300, d, Some(&yt));
    let unlabelled = dense(&xt, 300, d, None);
    let mut m = null_mut();
    // SAFETY: live handles used on this thread; buffers of the stated lengths.
    unsafe {
        ok(joker_fit(
            p,
            train,
            null(),
            0,
            null(),
            None,
            null_mut(),
            &mut m,
        ));
        let mut acc = 0.0;
        ok(joker_model_score(m, test, &mut acc));
        assert!(acc > 0.93, "test accuracy {acc}");

        let mut need = 0;
        ok(joker_model_output_size(
            m,
            unlabelled,
            JokerOutput::Predict as i32,
            &mut need,
        ));
        assert_eq!(need, 300);
        let mut pred = vec![0.0; 300];
        ok(joker_model_predict(
            m,
            unlabelled,
            pred.as_mut_ptr(),
            pred.len(),
        ));
        let hits = pred.iter().zip(&yt).filter(|(a, b)| a == b).count();
        assert_eq!(hits as f64 / 300.0, acc);
        let mut short = vec![7.0; 299];
        expect(
            joker_model_predict(m, unlabelled, short.as_mut_ptr(), short.len()),
            JokerStatus::BufferTooSmall,
            "`out` holds 299 values, the result needs 300",
        );
        assert!(short.iter().all(|&v| v == 7.0), "nothing written");
        expect(
            joker_model_predict(m, unlabelled, null_mut(), 300),
            JokerStatus::NullPointer,
            "`out` is NULL",
        );
        expect(
            joker_model_predict_proba(m, unlabelled, pred.as_mut_ptr(), pred.len()),
            JokerStatus::Unsupported,
            "logistic",
        );
        expect(
            joker_model_score(m, unlabelled, &mut acc),
            JokerStatus::InvalidLabels,
            "no labels",
        );
        // wrong number of columns
        let wrong = dense(&xt[..200], 100, 2, None);
        expect(
            joker_model_predict(m, wrong, pred.as_mut_ptr(), pred.len()),
            JokerStatus::ShapeMismatch,
            "has 2 columns, the model was trained on 3 features",
        );
        ok(joker_data_free(wrong));

        let (mut nf, mut nc, mut mm, mut task) = (0, 0, 0, 0);
        ok(joker_model_n_features(m, &mut nf));
        ok(joker_model_n_classes(m, &mut nc));
        ok(joker_model_n_components(m, &mut mm));
        ok(joker_model_task(m, &mut task));
        assert_eq!((nf, nc, mm), (3, 2, 256));
        assert_eq!(task, JokerTask::Classification as i32);
        let mut classes = [0.0; 2];
        ok(joker_model_classes(m, classes.as_mut_ptr(), 2));
        assert_eq!(classes, [-1.0, 1.0]);
        let mut stop = null();
        ok(joker_model_stop_reason(m, &mut stop));
        assert!(!CStr::from_ptr(stop).to_bytes().is_empty());

        let dir = std::env::temp_dir().join(format!("joker-ffi-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = CString::new(dir.join("m.json").to_str().unwrap()).unwrap();
        ok(joker_model_save(m, path.as_ptr()));
        let mut back = null_mut();
        ok(joker_model_load(path.as_ptr(), &mut back));
        let mut dv1 = vec![0.0; 300];
        let mut dv2 = vec![0.0; 300];
        ok(joker_model_decision_function(
            m,
            test,
            dv1.as_mut_ptr(),
            300,
        ));
        ok(joker_model_decision_function(
            back,
            test,
            dv2.as_mut_ptr(),
            300,
        ));
        assert_eq!(dv1, dv2, "identical decision values after save/load");
        let missing = CString::new(dir.join("none.json").to_str().unwrap()).unwrap();
        let mut none = null_mut();
        expect(
            joker_model_load(missing.as_ptr(), &mut none),
            JokerStatus::Io,
            "none.json",
        );
        assert!(none.is_null());
        std::fs::write(dir.join("bad.json"), "{\"format\": \"other\"}").unwrap();
        let bad = CString::new(dir.join("bad.json").to_str().unwrap()).unwrap();
        expect(
            joker_model_load(bad.as_ptr(), &mut none),
            JokerStatus::ModelFormat,
            "not a joker model",
        );
        ok(joker_model_free(back));
        ok(joker_model_free(m));
        expect(
            joker_model_free(m),
            JokerStatus::InvalidHandle,
            "JokerModel",
        );
        std::fs::remove_dir_all(&dir).unwrap();

        // errors of the fit itself
        expect(
            joker_fit(p, unlabelled, null(), 0, null(), None, null_mut(), &mut m),
            JokerStatus::InvalidLabels,
            "`train` has no labels",
        );
        let w = vec![1.0; n - 1];
        expect(
            joker_fit(
                p,
                train,
                w.as_ptr(),
                w.len(),
                null(),
                None,
                null_mut(),
                &mut m,
            ),
            JokerStatus::ShapeMismatch,
            "600 rows but n_weights is 599",
        );
        let mut w = vec![1.0; n];
        w[3] = -1.0;
        expect(
            joker_fit(p, train, w.as_ptr(), n, null(), None, null_mut(), &mut m),
            JokerStatus::InvalidArgument,
            "sample 3",
        );
        assert!(m.is_null());

        // progress callback with a validation set, stopping after 3 checks of DBCD-TR's
        // iterations (from zero: the Newton start would converge at iteration 0)
        ok(joker_params_set_check_every(p, 5));
        ok(joker_params_set_newton_start(p, 0));
        let mut calls = Calls {
            n: 0,
            stop_after: 3,
            last_validation: f64::NAN,
        };
        ok(joker_fit(
            p,
            train,
            null(),
            0,
            test,
            Some(on_progress),
            (&raw mut calls).cast(),
            &mut m,
        ));
        assert_eq!(calls.n, 3);
        assert!(calls.last_validation > 0.5 && calls.last_validation <= 1.0);
        let mut stop = null();
        ok(joker_model_stop_reason(m, &mut stop));
        assert_eq!(CStr::from_ptr(stop).to_str().unwrap(), "cancelled");
        ok(joker_model_free(m));

        for h in [train, test, unlabelled] {
            ok(joker_data_free(h));
        }
        ok(joker_params_free(p));
    }
}

#[test]
fn klr_probabilities_and_f32_csr_inputs() {
    let (n, d) = (400, 2);
    let (x, y) = binary(n, d, 3);
    let y01: Vec<f64> = y.iter().map(|&v| if v > 0.0 { 1.0 } else { 0.0 }).collect();
    let p = params(JokerLoss::Klr);
    let xf: Vec<f32> = x.iter().map(|&v| v as f32).collect();
    // the same matrix as CSR (every entry stored)
    let indptr: Vec<usize> = (0..=n).map(|i| i * d).collect();
    let indices: Vec<u32> = (0..n * d).map(|k| (k % d) as u32).collect();
    let (mut a, mut b, mut m) = (null_mut(), null_mut(), null_mut());
    // SAFETY: arrays of the stated sizes; live handles on this thread.
    unsafe {
        ok(joker_data_from_dense_f32(
            xf.as_ptr(),
            n,
            d,
            y01.as_ptr(),
            &mut a,
        ));
        ok(joker_data_from_csr_f32(
            n,
            d,
            indptr.as_ptr(),
            indices.as_ptr(),
            xf.as_ptr(),
            y01.as_ptr(),
            &mut b,
        ));
        ok(joker_fit(p, a, null(), 0, null(), None, null_mut(), &mut m));
        let mut need = 0;
        ok(joker_model_output_size(
            m,
            a,
            JokerOutput::Proba as i32,
            &mut need,
        ));
        assert_eq!(need, 2 * n);
        let mut pa = vec![0.0; need];
        let mut pb = vec![0.0; need];
        ok(joker_model_predict_proba(m, a, pa.as_mut_ptr(), need));
        ok(joker_model_predict_proba(m, b, pb.as_mut_ptr(), need));
        for (ra, rb) in pa.chunks(2).zip(pb.chunks(2)) {
            assert!((ra[0] + ra[1] - 1.0).abs() < 1e-12);
            assert!((ra[0] - rb[0]).abs() < 1e-6, "dense and CSR agree");
        }
        let mut acc = 0.0;
        ok(joker_model_score(m, b, &mut acc));
        assert!(acc > 0.9, "training accuracy {acc}");
        let mut classes = [9.0; 3];
        ok(joker_model_classes(m, classes.as_mut_ptr(), 3));
        assert_eq!(classes, [0.0, 1.0, 9.0]);
        let mut loss = -1;
        ok(joker_model_loss(m, &mut loss));
        assert_eq!(loss, JokerLoss::Klr as i32);
        ok(joker_model_free(m));
        ok(joker_data_free(a));
        ok(joker_data_free(b));
        ok(joker_params_free(p));
    }
}

/// One-vs-one through the C ABI: the setter validates its value, four classes give six
/// decision columns, the model reports the scheme, and the doubly stochastic solver refuses it.
#[test]
fn one_vs_one_multiclass() {
    let (n, d) = (400, 2);
    let (x, _) = binary(n, d, 21);
    // four classes by quadrant
    let y: Vec<f64> = x
        .chunks(2)
        .map(|r| f64::from(u8::from(r[0] > 0.0) + 2 * u8::from(r[1] > 0.0)))
        .collect();
    let train = dense(&x, n, d, Some(&y));
    let p = params(JokerLoss::L2Svc);
    let mut m = null_mut();
    // SAFETY: live handles on this thread; out-pointers valid.
    unsafe {
        expect(
            joker_params_set_multiclass(p, 3),
            JokerStatus::InvalidArgument,
            "not a JOKER_MULTICLASS_* value",
        );
        ok(joker_params_set_multiclass(p, JokerMulticlass::Ovo as i32));
        ok(joker_fit(
            p,
            train,
            null(),
            0,
            null(),
            None,
            null_mut(),
            &mut m,
        ));
        let mut need = 0;
        ok(joker_model_output_size(
            m,
            train,
            JokerOutput::Decision as i32,
            &mut need,
        ));
        assert_eq!(need, 6 * n);
        let mut scheme = -1;
        ok(joker_model_multiclass(m, &mut scheme));
        assert_eq!(scheme, JokerMulticlass::Ovo as i32);
        let mut acc = 0.0;
        ok(joker_model_score(m, train, &mut acc));
        assert!(acc > 0.95, "training accuracy {acc}");
        ok(joker_model_free(m));
        // parameters are validated as they are set: the solver that cannot take it is refused
        expect(
            joker_params_set_solver(p, JokerSolver::Dsg as i32, 0, 0, f64::NAN, f64::NAN),
            JokerStatus::InvalidArgument,
            "one-vs-one",
        );
        ok(joker_data_free(train));
        ok(joker_params_free(p));
    }
}

#[test]
fn panics_become_a_status_and_a_message() {
    let st = guard(|| panic!("boom"));
    expect(st, JokerStatus::Panic, "the library panicked (boom)");
    // the next call clears the message
    ok(guard(|| Ok(())));
    assert_eq!(guard_value(5, || panic!("x")), 5);
}

/// The trust-region model setter validates its value, and the model reports the choice.
#[test]
fn trust_region_model_choice() {
    let (n, d) = (300, 3);
    let (x, y) = binary(n, d, 12);
    let train = dense(&x, n, d, Some(&y));
    let p = params(JokerLoss::L2Svc);
    // SAFETY: live handles used on this thread.
    unsafe {
        expect(
            joker_params_set_tr_model(p, 3),
            JokerStatus::InvalidArgument,
            "JOKER_TR_MODEL_*",
        );
        ok(joker_params_set_max_iter(p, 20));
        // The CPU engine offers both models (a GPU engine forms only the Gram).
        ok(joker_params_set_device(p, JOKER_DEVICE_CPU));
        for (code, name) in [
            (JOKER_TR_MODEL_GRAM, "gram"),
            (JOKER_TR_MODEL_KERNEL, "kernel"),
        ] {
            ok(joker_params_set_tr_model(p, code));
            let mut m = null_mut();
            ok(joker_fit(
                p,
                train,
                null(),
                0,
                null(),
                None,
                null_mut(),
                &mut m,
            ));
            let mut s = null();
            ok(joker_model_tr_model(m, &mut s));
            assert_eq!(CStr::from_ptr(s).to_str().unwrap(), name);
            ok(joker_model_free(m));
        }
        ok(joker_data_free(train));
        ok(joker_params_free(p));
    }
}

/// The working-set setter validates its value; the automatic exact kernel takes the exact
/// kernel where it fits the kernel cache and random features where the cache is too small.
#[test]
fn working_set_and_automatic_exact_kernel() {
    let (n, d) = (300, 3);
    let (x, y) = binary(n, d, 13);
    let train = dense(&x, n, d, Some(&y));
    let p = params(JokerLoss::L2Svc);
    // SAFETY: live handles used on this thread.
    unsafe {
        expect(
            joker_params_set_working_set(p, 4),
            JokerStatus::InvalidArgument,
            "JOKER_WORKING_SET_*",
        );
        ok(joker_params_set_device(p, JOKER_DEVICE_CPU));
        ok(joker_params_set_working_set(p, JOKER_WORKING_SET_SHRINKING));
        ok(joker_params_set_auto_exact(p, 1));
        // 0 components: the exact kernel; the test parameters' random features otherwise
        for (cache, exact) in [(1 << 20, true), (1000, false)] {
            ok(joker_params_set_kernel_cache(p, cache));
            let mut m = null_mut();
            ok(joker_fit(
                p,
                train,
                null(),
                0,
                null(),
                None,
                null_mut(),
                &mut m,
            ));
            let mut got = usize::MAX;
            ok(joker_model_n_components(m, &mut got));
            assert_eq!(got == 0, exact, "kernel cache {cache}: {got} components");
            ok(joker_model_free(m));
        }
        ok(joker_data_free(train));
        ok(joker_params_free(p));
    }
}

/// The direct KRR start, the trust region's norm and the bias feature through the C ABI:
/// each setter validates its value; KRR on random features starts at its optimum (0
/// iterations, gap within the tolerance) unless the start is switched off (DBCD-TR iterates); a bias feature is
/// kept in the model and refused with the exact kernel, whichever is set last.
#[test]
fn direct_krr_trust_region_norm_and_bias_feature() {
    let (n, d) = (300, 3);
    let (x, y) = binary(n, d, 14);
    let train = dense(&x, n, d, Some(&y));
    let fit = |p: *mut JokerParams| -> *mut JokerModel {
        let mut m = null_mut();
        // SAFETY: live handles used on this thread.
        ok(unsafe { joker_fit(p, train, null(), 0, null(), None, null_mut(), &mut m) });
        m
    };
    let p = params(JokerLoss::Krr);
    // SAFETY: live handles used on this thread.
    unsafe {
        ok(joker_params_set_device(p, JOKER_DEVICE_CPU));
        ok(joker_params_set_max_iter(p, 2000));
        for (on, direct) in [(1, true), (0, false)] {
            ok(joker_params_set_direct_krr(p, on));
            let m = fit(p);
            let (mut iters, mut gap) = (usize::MAX, f64::NAN);
            ok(joker_model_iterations(m, &mut iters));
            ok(joker_model_gap(m, &mut gap));
            assert_eq!(iters == 0, direct, "direct_krr {on}: {iters} iterations");
            // DBCD-TR from zero may stop by the stall rule, within ten times the tolerance
            assert!(
                gap <= if direct { 1e-3 } else { 1e-2 },
                "direct_krr {on}: gap {gap}"
            );
            ok(joker_model_free(m));
        }

        let svc = params(JokerLoss::L2Svc);
        // at least 8 rows a feature: the Newton start's domain
        ok(joker_params_set_n_components(svc, 32));
        ok(joker_params_set_device(svc, JOKER_DEVICE_CPU));
        ok(joker_params_set_max_iter(svc, 2000));
        for on in [1, 0] {
            ok(joker_params_set_newton_start(svc, on));
            let m = fit(svc);
            let mut iters = usize::MAX;
            ok(joker_model_iterations(m, &mut iters));
            assert_eq!(iters == 0, on == 1, "newton_start {on}: {iters} iterations");
            let start = &(*m).model.training.start;
            assert_eq!(start.is_empty(), on == 0, "{start}");
            ok(joker_model_free(m));
        }
        ok(joker_params_free(svc));

        expect(
            joker_params_set_tr_norm(p, 3),
            JokerStatus::InvalidArgument,
            "JOKER_TR_NORM_*",
        );
        for (code, norm) in [
            (JOKER_TR_NORM_DIAGONAL, TrNorm::Diagonal),
            (JOKER_TR_NORM_EUCLIDEAN, TrNorm::Euclidean),
            (JOKER_TR_NORM_AUTO, TrNorm::Auto),
        ] {
            ok(joker_params_set_tr_norm(p, code));
            assert_eq!((*p).inner.solver.trust_region.norm, norm);
        }

        expect(
            joker_params_set_intercept(p, 3),
            JokerStatus::InvalidArgument,
            "JOKER_INTERCEPT_*",
        );
        for (code, want) in [
            (JOKER_INTERCEPT_ON, Some(true)),
            (JOKER_INTERCEPT_OFF, Some(false)),
            (JOKER_INTERCEPT_AUTO, None),
        ] {
            ok(joker_params_set_intercept(p, code));
            assert_eq!((*p).inner.intercept, want);
        }
        let svc = params(JokerLoss::L2Svc);
        expect(
            joker_params_set_intercept(svc, JOKER_INTERCEPT_ON),
            JokerStatus::InvalidArgument,
            "intercept",
        );
        // a classifier has no regression loss to choose
        expect(
            joker_params_set_auto_loss(svc, 1),
            JokerStatus::InvalidArgument,
            "auto_loss",
        );
        ok(joker_params_free(svc));

        // the automatic loss: KRR on a feature map, SVR with its intercept on the exact kernel
        let auto = params(JokerLoss::Krr);
        ok(joker_params_set_device(auto, JOKER_DEVICE_CPU));
        ok(joker_params_set_n_components(auto, 32));
        ok(joker_params_set_auto_loss(auto, 1));
        let m = fit(auto);
        assert_eq!((*m).model.loss, crate::Loss::SquaredError);
        let choice = &(*m).model.training.loss_choice;
        assert!(choice.starts_with("krr (auto: a feature map"), "{choice}");
        ok(joker_model_free(m));
        ok(joker_params_set_exact(auto));
        let m = fit(auto);
        assert_eq!(
            (*m).model.loss,
            crate::Loss::EpsilonInsensitive {
                epsilon: crate::AUTO_EPSILON
            }
        );
        assert!((*m).model.training.intercept.is_some());
        ok(joker_model_free(m));
        ok(joker_params_free(auto));

        for bad in [-1.0, f64::NAN, f64::INFINITY] {
            expect(
                joker_params_set_bias(p, bad),
                JokerStatus::InvalidArgument,
                "bias",
            );
        }
        ok(joker_params_set_bias(p, 1.0));
        let m = fit(p);
        match &(*m).model.representation {
            crate::model::Representation::RandomFeatures { bias, .. } => assert_eq!(*bias, 1.0),
            other => panic!("not a random-feature model: {other:?}"),
        }
        ok(joker_model_free(m));
        expect(
            joker_params_set_exact(p),
            JokerStatus::InvalidArgument,
            "bias",
        );
        ok(joker_params_set_bias(p, 0.0));
        ok(joker_params_set_exact(p));
        expect(
            joker_params_set_bias(p, 1.0),
            JokerStatus::InvalidArgument,
            "bias",
        );
        ok(joker_data_free(train));
        ok(joker_params_free(p));
    }
}

/// The device setter validates its value; an explicit GPU that cannot be used fails the fit
/// with JOKER_STATUS_DEVICE (no panic), and Auto falls back to the CPU.
#[test]
fn device_choice() {
    let (n, d) = (300, 3);
    let (x, y) = binary(n, d, 11);
    let train = dense(&x, n, d, Some(&y));
    let p = params(JokerLoss::L2Svc);
    // SAFETY: live handles used on this thread.
    unsafe {
        expect(
            joker_params_set_device(p, -3),
            JokerStatus::InvalidArgument,
            "JOKER_DEVICE_AUTO",
        );
        // where each choice trained, as the model reports it
        let trained_on = |p| {
            let mut m = null_mut();
            ok(joker_fit(
                p,
                train,
                null(),
                0,
                null(),
                None,
                null_mut(),
                &mut m,
            ));
            let mut dev = null();
            ok(joker_model_device(m, &mut dev));
            let s = CStr::from_ptr(dev).to_str().unwrap().to_string();
            ok(joker_model_free(m));
            s
        };
        ok(joker_params_set_device(p, JOKER_DEVICE_CPU));
        assert!(trained_on(p).starts_with("cpu"));
        ok(joker_params_set_device(p, JOKER_DEVICE_AUTO));
        let auto = trained_on(p);
        if !crate::device::probe().available() {
            assert!(auto.starts_with("cpu (auto"), "{auto}");
        }
        let mut dev = null();
        expect(
            joker_model_device(null(), &mut dev),
            JokerStatus::NullPointer,
            "model",
        );
        if !crate::device::probe().available() {
            ok(joker_params_set_device(p, 0));
            let mut m = null_mut();
            expect(
                joker_fit(p, train, null(), 0, null(), None, null_mut(), &mut m),
                JokerStatus::Device,
                "cuda:0 was requested",
            );
            assert!(m.is_null());
        }
        ok(joker_params_free(p));
        ok(joker_data_free(train));
    }
}

/// Records the last relative residual a fit reported.
///
/// # Safety
/// `p` must be a valid snapshot and `user` an `f64` that no one else uses during the call.
unsafe extern "C" fn last_residual(p: *const JokerProgress, user: *mut c_void) -> i32 {
    // SAFETY: joker passes a valid snapshot and our `f64`, used on this thread only.
    unsafe { *user.cast::<f64>() = (*p).rel_residual };
    0
}

#[test]
fn full_krr_and_the_nystrom_metric_through_the_c_abi() {
    let (n, d, gamma, lambda) = (240, 2, 0.7, 0.05);
    let mut s = Stream::new(17, 3);
    let x: Vec<f64> = (0..n * d).map(|_| 4.0 * s.uniform() - 2.0).collect();
    let y: Vec<f64> = (0..n)
        .map(|i| (2.0 * x[i * d]).sin() + 0.5 * x[i * d + 1] + 0.1 * (s.uniform() - 0.5))
        .collect();
    let mut p = null_mut();
    // SAFETY: valid pointers and buffers of the stated sizes; handles used on this thread only.
    unsafe {
        ok(joker_params_new(&mut p));
        let pcg = JokerKrrMethod::Pcg as i32;
        // random features: refused until the exact kernel is chosen
        expect(
            joker_params_set_full_krr(p, pcg, 10, 50, 200, 1e-10, 0),
            JokerStatus::InvalidArgument,
            ".exact()",
        );
        ok(joker_params_set_exact(p));
        for (method, blocks, rank, iters, tol, needle) in [
            (7, 10, 50, 200, 1e-10, "JOKER_KRR_METHOD"),
            (1, 0, 50, 200, 1e-10, "blocks"),
            (3, 10, 0, 200, 1e-10, "rank"),
            (3, 10, 50, 0, 1e-10, "max_iter"),
            (3, 10, 50, 200, f64::NAN, "tol"),
        ] {
            expect(
                joker_params_set_full_krr(p, method, blocks, rank, iters, tol, 0),
                JokerStatus::InvalidArgument,
                needle,
            );
        }
        ok(joker_params_set_gamma(p, gamma));
        ok(joker_params_set_lambda(p, lambda));
        ok(joker_params_set_standardize(p, 0));
        ok(joker_params_set_normalize_target(p, 0));
        ok(joker_params_set_precision(p, JokerPrecision::F64 as i32));
        ok(joker_params_set_full_krr(p, pcg, 10, 50, 200, 1e-10, 0));
        // a classifier loss conflicts with full KRR
        expect(
            joker_params_set_loss(p, JokerLoss::Klr as i32, 0.0),
            JokerStatus::InvalidArgument,
            "squared loss",
        );

        let train = dense(&x, n, d, Some(&y));
        let mut m = null_mut();
        let mut residual = f64::NAN;
        ok(joker_fit(
            p,
            train,
            null(),
            0,
            null(),
            Some(last_residual),
            (&raw mut residual).cast(),
            &mut m,
        ));
        assert!(residual <= 1e-10, "last residual {residual}");
        // f = K w with (K + lambda I) w = y, so w = (y - f) / lambda and K w = f: checked with
        // the kernel written out here
        let mut f = vec![f64::NAN; n];
        ok(joker_model_decision_function(m, train, f.as_mut_ptr(), n));
        let w: Vec<f64> = y.iter().zip(&f).map(|(y, f)| (y - f) / lambda).collect();
        let (mut err, mut norm) = (0.0f64, 0.0f64);
        for i in 0..n {
            let kw: f64 = (0..n)
                .map(|j| {
                    let r2 = (0..d)
                        .map(|c| (x[i * d + c] - x[j * d + c]).powi(2))
                        .sum::<f64>();
                    (-gamma * r2).exp() * w[j]
                })
                .sum();
            err += (kw - f[i]).powi(2);
            norm += f[i] * f[i];
        }
        let rel = (err / norm).sqrt();
        assert!(rel < 1e-7, "K w differs from f by {rel:e} (relative)");
        ok(joker_model_free(m));

        // back to DBCD-TR, with the Nystrom metric in its block solver
        ok(joker_params_set_full_krr(
            p,
            JokerKrrMethod::None as i32,
            0,
            0,
            0,
            0.0,
            0,
        ));
        ok(joker_params_set_block_size(p, 64));
        expect(
            joker_params_set_nystrom_rank(p, 64),
            JokerStatus::InvalidArgument,
            "below the block size",
        );
        ok(joker_params_set_nystrom_rank(p, 16));
        ok(joker_params_set_max_iter(p, 40));
        residual = 0.0;
        ok(joker_fit(
            p,
            train,
            null(),
            0,
            null(),
            Some(last_residual),
            (&raw mut residual).cast(),
            &mut m,
        ));
        assert!(
            residual.is_nan(),
            "DBCD-TR reports no residual, got {residual}"
        );
        ok(joker_model_free(m));
        ok(joker_data_free(train));
        ok(joker_params_free(p));
    }
}

#[test]
fn an_interrupt_flag_stops_a_fit_at_the_next_iteration() {
    let (x, y) = binary(400, 3, 31);
    let p = params(JokerLoss::L2Svc);
    let data = dense(&x, 400, 3, Some(&y));
    // SAFETY: live handles on this thread; the flags outlive the fits that read them.
    unsafe {
        ok(joker_params_set_max_iter(p, 10_000));
        ok(joker_params_set_tol(p, 0.0));
        let fit = |p: *mut JokerParams| {
            let mut m = null_mut();
            ok(joker_fit(
                p,
                data,
                null(),
                0,
                null(),
                None,
                null_mut(),
                &mut m,
            ));
            let (mut iters, mut stop) = (0usize, null());
            ok(joker_model_iterations(m, &mut iters));
            ok(joker_model_stop_reason(m, &mut stop));
            let stop = CStr::from_ptr(stop).to_str().unwrap().to_owned();
            ok(joker_model_free(m));
            (iters, stop)
        };
        // raised before the fit: one iteration, then the stop
        let raised = 1i32;
        ok(joker_params_set_interrupt(p, &raised));
        assert_eq!(fit(p), (1, "cancelled".to_string()));
        // raised by another thread while the fit runs
        let flag = std::sync::atomic::AtomicI32::new(0);
        ok(joker_params_set_interrupt(p, flag.as_ptr()));
        let (iters, stop) = std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(std::time::Duration::from_millis(200));
                flag.store(1, std::sync::atomic::Ordering::Relaxed);
            });
            fit(p)
        });
        assert_eq!(stop, "cancelled");
        assert!(iters > 1 && iters < 10_000, "{iters} iterations");
        // removed: the fit runs to its budget
        ok(joker_params_set_interrupt(p, null()));
        ok(joker_params_set_max_iter(p, 30));
        assert_eq!(fit(p), (30, "max_iter".to_string()));
        // a misaligned flag is refused
        let bytes = [0u8; 8];
        expect(
            joker_params_set_interrupt(p, bytes.as_ptr().add(1).cast()),
            JokerStatus::InvalidArgument,
            "4-byte-aligned",
        );
        ok(joker_data_free(data));
        ok(joker_params_free(p));
    }
}

#[test]
fn doubly_stochastic_solvers_through_the_c_abi() {
    let (n, d) = (400, 2);
    let mut s = Stream::new(23, 3);
    let x: Vec<f64> = (0..n * d).map(|_| 4.0 * s.uniform() - 2.0).collect();
    let y: Vec<f64> = (0..n)
        .map(|i| {
            if x[i * d] * x[i * d] + x[i * d + 1] > 1.0 {
                1.0
            } else {
                -1.0
            }
        })
        .collect();
    let mut p = null_mut();
    // SAFETY: valid pointers and buffers of the stated sizes; handles used on this thread only.
    unsafe {
        ok(joker_params_new(&mut p));
        ok(joker_params_set_loss(p, JokerLoss::Klr as i32, 0.0));
        ok(joker_params_set_n_components(p, 256));
        ok(joker_params_set_max_iter(p, 300));
        for (solver, batch, block, theta, needle) in [
            (9, 0, 0, f64::NAN, "JOKER_SOLVER"),
            (1, 0, 512, f64::NAN, "feature_block"),
            (2, 0, 0, -1.0, "step"),
        ] {
            expect(
                joker_params_set_solver(p, solver, batch, block, theta, f64::NAN),
                JokerStatus::InvalidArgument,
                needle,
            );
        }
        ok(joker_params_set_solver(
            p,
            JokerSolver::Cdsg as i32,
            100,
            32,
            f64::NAN,
            f64::NAN,
        ));
        // the exact kernel conflicts with the doubly stochastic solvers
        expect(
            joker_params_set_exact(p),
            JokerStatus::InvalidArgument,
            "n_components",
        );
        let train = dense(&x, n, d, Some(&y));
        let mut m = null_mut();
        ok(joker_fit(
            p,
            train,
            null(),
            0,
            null(),
            None,
            null_mut(),
            &mut m,
        ));
        let mut pred = vec![f64::NAN; n];
        ok(joker_model_predict(m, train, pred.as_mut_ptr(), n));
        let right = pred.iter().zip(&y).filter(|(a, b)| a == b).count();
        assert!(right as f64 > 0.85 * n as f64, "{right} of {n}");
        ok(joker_model_free(m));

        // the same rows streamed from a CSV file in parts of 2 KiB
        let dir = std::env::temp_dir().join(format!("joker-ffi-stream-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("train.csv");
        let text: String = (0..n)
            .map(|i| format!("{},{},{}\n", x[i * d], x[i * d + 1], y[i]))
            .collect();
        std::fs::write(&file, text).unwrap();
        let path = CString::new(file.to_str().unwrap()).unwrap();
        let fmt = JokerTextFormat::Csv as i32;
        let mut m = null_mut();
        ok(joker_fit_stream(
            p,
            path.as_ptr(),
            fmt,
            2048,
            train,
            None,
            null_mut(),
            &mut m,
        ));
        ok(joker_model_predict(m, train, pred.as_mut_ptr(), n));
        let right = pred.iter().zip(&y).filter(|(a, b)| a == b).count();
        assert!(right as f64 > 0.85 * n as f64, "streamed: {right} of {n}");
        ok(joker_model_free(m));
        let (no_file, bad) = (CString::new("/nonexistent/x.csv").unwrap(), 7);
        expect(
            joker_fit_stream(p, path.as_ptr(), bad, 0, null(), None, null_mut(), &mut m),
            JokerStatus::InvalidArgument,
            "JOKER_TEXT_FORMAT",
        );
        assert!(m.is_null());
        let status = joker_fit_stream(p, no_file.as_ptr(), 2, 0, null(), None, null_mut(), &mut m);
        assert_ne!(status, JokerStatus::Ok);
        expect(
            joker_fit_stream(p, null(), 0, 0, null(), None, null_mut(), &mut m),
            JokerStatus::NullPointer,
            "path",
        );
        // DBCD-TR does not stream
        let dbcd = params(JokerLoss::L2Svc);
        ok(joker_params_set_n_components(dbcd, 64));
        expect(
            joker_fit_stream(dbcd, path.as_ptr(), 0, 0, null(), None, null_mut(), &mut m),
            JokerStatus::InvalidArgument,
            "doubly stochastic",
        );
        ok(joker_params_free(dbcd));
        std::fs::remove_dir_all(&dir).unwrap();
        ok(joker_data_free(train));
        ok(joker_params_free(p));
    }
}

#[test]
fn search_chooses_c_and_the_width() {
    let (n, d) = (300, 3);
    let (x, y) = binary(n, d, 31);
    let (xt, yt) = binary(300, d, 32);
    let p = params(JokerLoss::L2Svc);
    let train = dense(&x, n, d, Some(&y));
    let test = dense(&xt, 300, d, Some(&yt));
    let (cs, widths) = ([0.1, 1.0, 10.0], [0.5, 1.0, 2.0]);
    let mut m = null_mut();
    // SAFETY: live handles used on this thread; buffers of the stated lengths.
    unsafe {
        ok(joker_fit_search(
            p,
            train,
            cs.as_ptr(),
            3,
            widths.as_ptr(),
            3,
            3,
            5,
            &mut m,
        ));
        let (mut lambda, mut acc) = (0.0, 0.0);
        ok(joker_model_lambda(m, &mut lambda));
        assert!(
            cs.iter().any(|c| (1.0 / c - lambda).abs() < 1e-12),
            "{lambda}"
        );
        ok(joker_model_score(m, test, &mut acc));
        assert!(acc > 0.9, "test accuracy {acc}");
        ok(joker_model_free(m));
        // one fold, and no values of C, are refused by name
        let mut bad = null_mut();
        expect(
            joker_fit_search(p, train, cs.as_ptr(), 3, widths.as_ptr(), 3, 1, 5, &mut bad),
            JokerStatus::InvalidArgument,
            "folds",
        );
        assert!(bad.is_null());
        expect(
            joker_fit_search(p, train, cs.as_ptr(), 0, widths.as_ptr(), 3, 3, 5, &mut bad),
            JokerStatus::InvalidArgument,
            "search_c",
        );
        ok(joker_data_free(train));
        ok(joker_data_free(test));
        ok(joker_params_free(p));
    }
}

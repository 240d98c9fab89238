//! Export of what a model file does not store: the random-feature map, regenerated from the
//! seed, for programs that rebuild the prediction elsewhere (the Python package's ONNX export).

use super::handle::get;
use super::model::JokerModel;
use super::{Failure, FfiResult, JokerStatus, guard, output_slice, write_out};
use crate::features::{FeatureSpec, RandomMap};
use crate::model::{Model, Precision, Representation};
use crate::scalar::Scalar;

/// `W` (row-major `M x d`), `b` and the scale `sqrt(2/M)` of a model's random-feature map, in
/// the model's precision, widened to `f64`.
fn random_map(m: &Model) -> FfiResult<(Vec<f64>, Vec<f64>, f64)> {
    fn values<T: Scalar>(spec: FeatureSpec) -> FfiResult<(Vec<f64>, Vec<f64>, f64)> {
        let map = RandomMap::<T>::new(spec)?;
        let w = map.w().into_iter().map(Scalar::to_f64).collect();
        let b = map.b().iter().map(|&v| v.to_f64()).collect();
        let scale = T::from_f64((2.0 / spec.n_components as f64).sqrt()).to_f64();
        Ok((w, b, scale))
    }
    let Representation::RandomFeatures {
        n_components, seed, ..
    } = &m.representation
    else {
        return Err(Failure::new(
            JokerStatus::Unsupported,
            "the model has no random-feature map (an exact-kernel or Nystrom model: its \
             support rows or centres are in the model file)",
        ));
    };
    let spec = FeatureSpec {
        kernel: m.kernel,
        n_components: *n_components,
        dim: m.n_features,
        seed: *seed,
    };
    match m.precision {
        Precision::F32 => values::<f32>(spec),
        Precision::F64 => values::<f64>(spec),
    }
}

/// Writes the random-feature map of a random-feature model, as its predictions use it:
/// `psi_j(x) = scale * cos(sum_k W[j,k] x_k + b_j)` for `j < M`, with `x` the standardised
/// input (`standardizer` of the model file), followed by the constant feature `B` when the
/// model file has `representation.bias`. `W` goes row-major `M x d` into `w` (`w_len >= M d`),
/// `b` into `b` (`b_len >= M`) and `sqrt(2/M)` into `*scale`, each rounded to the model's
/// precision (`float` values, widened, for an `f32` model). `M` is `joker_model_n_components`
/// and `d` is `joker_model_n_features`. The map is regenerated from the model's seed (it is
/// not stored), which takes `M d` evaluations of the generator.
///
/// `JOKER_STATUS_UNSUPPORTED` for a model without random features (`joker_model_n_components`
/// is 0); `JOKER_STATUS_BUFFER_TOO_SMALL` when `w_len` or `b_len` is short, and nothing is
/// written.
///
/// # Safety
/// `model` must be NULL or a live handle not freed during the call; `w` must be NULL or point
/// to `w_len` writable doubles, `b` to `b_len`, and `scale` must be NULL or valid for one
/// write; the three do not overlap.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn joker_model_random_features(
    model: *const JokerModel,
    w: *mut f64,
    w_len: usize,
    b: *mut f64,
    b_len: usize,
    scale: *mut f64,
) -> JokerStatus {
    guard(|| {
        // SAFETY: see the function's contract.
        let m = &unsafe { get(model, "model") }?.model;
        let Representation::RandomFeatures { n_components, .. } = &m.representation else {
            return random_map(m).map(|_| ());
        };
        let (mm, d) = (*n_components, m.n_features);
        // Check every output before the work, so that a wrong size fails fast and writes
        // nothing.
        // SAFETY: `w` and `b` are NULL or hold `w_len`/`b_len` writable doubles (contract).
        unsafe { output_slice(w, w_len, mm.saturating_mul(d), "w") }?;
        // SAFETY: as above.
        unsafe { output_slice(b, b_len, mm, "b") }?;
        if scale.is_null() {
            return Err(Failure::null("scale"));
        }
        let (wv, bv, s) = random_map(m)?;
        // SAFETY: as above.
        unsafe { output_slice(w, w_len, wv.len(), "w") }?.copy_from_slice(&wv);
        // SAFETY: as above.
        unsafe { output_slice(b, b_len, bv.len(), "b") }?.copy_from_slice(&bv);
        // SAFETY: `scale` is valid for one write (contract).
        unsafe { write_out(scale, s, "scale") }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ffi::{joker_last_error, joker_model_free, joker_model_load};
    use std::ffi::{CStr, CString};

    /// A random-feature model file of `d = 2`, `M = 3` (and a bias feature), in `precision`.
    fn model_file(dir: &std::path::Path, precision: &str, representation: &str) -> CString {
        let text = format!(
            r#"{{"format": "joker-model", "version": 4, "joker_version": "0.1.0",
            "loss": {{"name": "squared_error"}},
            "kernel": {{"kind": {{"family": "gaussian"}}, "gamma": 0.7}}, "lambda": 0.1,
            "precision": "{precision}", "task": "regression", "classes": null,
            "n_features": 2, "n_targets": 1,
            "standardizer": {{"center": [0, 0], "scale": [1, 1]}},
            "target_scaler": {{"mean": 0, "scale": 1}},
            "representation": {representation},
            "training": {{"iterations": 1, "stop": "converged", "gap": 0, "primal": 0,
                         "dual": 0, "seconds": 0, "n_samples": 4}}}}"#
        );
        let path = dir.join(format!("m-{precision}-{}.json", text.len()));
        std::fs::write(&path, text).unwrap();
        CString::new(path.to_str().unwrap()).unwrap()
    }

    fn load(path: &CString) -> *mut JokerModel {
        let mut h = std::ptr::null_mut();
        // SAFETY: a valid path and out-pointer.
        let st = unsafe { joker_model_load(path.as_ptr(), &mut h) };
        assert_eq!(st, JokerStatus::Ok, "{:?}", unsafe {
            CStr::from_ptr(joker_last_error())
        });
        h
    }

    #[test]
    fn the_map_is_the_one_the_model_predicts_with() {
        let dir = std::env::temp_dir().join(format!("joker-export-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let rff = r#"{"type": "random_features", "n_components": 3, "seed": 11,
                      "theta": [0.5, -1.0, 2.0, 0.25], "bias": 1.5}"#;
        for precision in ["f32", "f64"] {
            let h = load(&model_file(&dir, precision, rff));
            let (mut w, mut b, mut s) = ([0.0; 6], [0.0; 3], 0.0);
            // SAFETY: buffers of the stated lengths.
            let st = unsafe {
                joker_model_random_features(h, w.as_mut_ptr(), 6, b.as_mut_ptr(), 3, &mut s)
            };
            assert_eq!(st, JokerStatus::Ok);
            // the values of the generator, rounded to the model's precision
            let spec = FeatureSpec {
                kernel: crate::kernel::Kernel {
                    kind: crate::kernel::KernelKind::Gaussian,
                    gamma: 0.7,
                },
                n_components: 3,
                dim: 2,
                seed: 11,
            };
            for j in 0..3 {
                let phase = crate::features::phase(&spec, j);
                let want = if precision == "f32" {
                    phase as f32 as f64
                } else {
                    phase
                };
                assert_eq!(b[j], want);
                for k in 0..2 {
                    let f = crate::features::frequency(&spec, j, k);
                    let want = if precision == "f32" {
                        f as f32 as f64
                    } else {
                        f
                    };
                    assert_eq!(w[j * 2 + k], want, "W[{j},{k}]");
                }
            }
            let want_s = (2.0f64 / 3.0).sqrt();
            let want_s = if precision == "f32" {
                want_s as f32 as f64
            } else {
                want_s
            };
            assert_eq!(s, want_s);
            // the decision value rebuilt from the exported map is the model's
            let x = [0.3f64, -1.2];
            let psi: Vec<f64> = (0..3)
                .map(|j| s * (w[j * 2] * x[0] + w[j * 2 + 1] * x[1] + b[j]).cos())
                .collect();
            let theta = [0.5, -1.0, 2.0, 0.25];
            let rebuilt: f64 =
                psi.iter().zip(&theta).map(|(p, t)| p * t).sum::<f64>() + 1.5 * theta[3];
            // SAFETY: the handle is live.
            let model = &unsafe { get(h, "model") }.unwrap().model;
            let data = crate::data::DenseMatrix::new(1, 2, x.to_vec()).unwrap();
            let f = model
                .decision_function(&crate::data::Features::Dense(data))
                .unwrap()[0];
            let tol = if precision == "f32" { 1e-5 } else { 1e-12 };
            assert!(
                (f - rebuilt).abs() <= tol * rebuilt.abs().max(1.0),
                "{f} vs {rebuilt}"
            );

            // short buffers: BUFFER_TOO_SMALL, nothing written
            let mut w2 = [7.0; 5];
            // SAFETY: buffers of the stated lengths.
            let st = unsafe {
                joker_model_random_features(h, w2.as_mut_ptr(), 5, b.as_mut_ptr(), 3, &mut s)
            };
            assert_eq!(st, JokerStatus::BufferTooSmall);
            assert_eq!(w2, [7.0; 5]);
            let mut b2 = [7.0; 2];
            // SAFETY: as above.
            let st = unsafe {
                joker_model_random_features(h, w.as_mut_ptr(), 6, b2.as_mut_ptr(), 2, &mut s)
            };
            assert_eq!(st, JokerStatus::BufferTooSmall);
            assert_eq!(b2, [7.0; 2]);
            // NULL scale
            // SAFETY: as above.
            let st = unsafe {
                joker_model_random_features(
                    h,
                    w.as_mut_ptr(),
                    6,
                    b.as_mut_ptr(),
                    3,
                    std::ptr::null_mut(),
                )
            };
            assert_eq!(st, JokerStatus::NullPointer);
            // SAFETY: live handle, freed once.
            assert_eq!(unsafe { joker_model_free(h) }, JokerStatus::Ok);
        }
        // an exact model has no map
        let exact = r#"{"type": "exact", "n_support": 1, "support": [0.5, 0.5], "alpha": [1.0]}"#;
        let h = load(&model_file(&dir, "f64", exact));
        let (mut w, mut b, mut s) = ([0.0; 6], [0.0; 3], 0.0);
        // SAFETY: buffers of the stated lengths.
        let st =
            unsafe { joker_model_random_features(h, w.as_mut_ptr(), 6, b.as_mut_ptr(), 3, &mut s) };
        assert_eq!(st, JokerStatus::Unsupported);
        // SAFETY: `joker_last_error` returns a valid NUL-terminated string.
        let msg = unsafe { CStr::from_ptr(joker_last_error()) }
            .to_string_lossy()
            .into_owned();
        assert!(msg.contains("no random-feature map"), "{msg}");
        // SAFETY: live handle, freed once; then a freed handle is rejected.
        assert_eq!(unsafe { joker_model_free(h) }, JokerStatus::Ok);
        // SAFETY: NULL is rejected before use.
        let st = unsafe {
            joker_model_random_features(
                std::ptr::null(),
                w.as_mut_ptr(),
                6,
                b.as_mut_ptr(),
                3,
                &mut s,
            )
        };
        assert_ne!(st, JokerStatus::Ok);
        std::fs::remove_dir_all(&dir).ok();
    }
}

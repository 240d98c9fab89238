//! Trained models: prediction and the model file.
//!
//! A model file is JSON (readable from any language), described field by field in
//! `docs/model-format.md`. It holds everything prediction needs: the kernel with its resolved
//! scale, the precision, the preprocessing, the classes, and either the random-feature map's
//! seed and size with `theta`, or the exact model's support rows with their coefficients.
//! Random-feature frequencies are regenerated from the seed (see [`crate::features`]).

use std::any::TypeId;
use std::io::BufReader;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::backend::cpu::Cpu;
use crate::backend::predict::Predictor;
use crate::calibration::{Calibration, sigmoid};
use crate::data::{Dataset, DenseMatrix, Features};
use crate::error::{JokerError, Result};
use crate::features::{FeatureMap, FeatureSpec, RandomMap};
use crate::kernel::Kernel;
use crate::loss::Loss;
use crate::preprocess::{Multiclass, Standardizer, TargetScaler, class_pairs, couple, vote};
use crate::scalar::Scalar;
use crate::solver::{Progress, StopReason, Timings};

/// Rows of a mapped file scaled at a time when a model's standardisation or precision needs a
/// copy of them (64 Ki rows: 200 MiB at d = 784 in f32).
pub const MAPPED_CHUNK_ROWS: usize = 1 << 16;

/// The model file format's name, in every file's `format` field.
pub const FORMAT_NAME: &str = "joker-model";
/// The newest model file version this build reads. Version 2 adds `training.solver` and
/// allows `null` for `training.gap`, `primal` and `dual` (a doubly stochastic fit has no
/// duality gap); this build writes it for such models only. Version 3 adds `multiclass`
/// (`"ovo"`, whose columns an older build would misread as one-vs-rest); this build writes it
/// for one-vs-one models only. Version 4 adds `representation.bias` (a constant feature after
/// the random ones, whose `theta` entries an older build would not expect); this build writes
/// it for such models only. Version 5 adds `calibration` (Platt's sigmoids, which give an SVM
/// class probabilities); this build writes it for calibrated models only.
pub const FORMAT_VERSION: u32 = 5;
/// The version written for models with a bias feature (see [`FORMAT_VERSION`]).
pub const FORMAT_VERSION_BIAS: u32 = 4;
/// The version written for one-vs-one models without a bias feature (see [`FORMAT_VERSION`]).
pub const FORMAT_VERSION_OVO: u32 = 3;
/// The version written for doubly stochastic models (see [`FORMAT_VERSION`]).
pub const FORMAT_VERSION_STOCHASTIC: u32 = 2;
/// The version written for DBCD-TR and full-KRR models: their files are unchanged from
/// version 1, so older builds read them.
pub const FORMAT_VERSION_DUAL: u32 = 1;

/// Whether a value is 0 (left out of model files).
fn is_zero(v: &f64) -> bool {
    *v == 0.0
}

/// Whether the scheme is the default one (left out of model files).
fn is_one_vs_rest(m: &Multiclass) -> bool {
    *m == Multiclass::OneVsRest
}

/// Reads a number that may be `null` (a value with no meaning for the fit) as NaN.
fn f64_or_nan<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

/// Floating-point precision of features, random features and Gram blocks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    /// Single precision (the paper's setting; twice the speed).
    #[default]
    F32,
    /// Double precision.
    F64,
}

/// Classification or regression.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Task {
    /// Labels are classes; predictions are labels.
    Classification,
    /// Targets are real values.
    Regression,
}

/// How the kernel is represented in a trained model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Representation {
    /// Random Fourier features: `f_t(x) = psi(x)^T theta_t`, with `psi(x) = [psi_M(x); B]`
    /// when the map has a constant feature `B` (`bias`).
    RandomFeatures {
        /// `M`.
        n_components: usize,
        /// Seed of the feature map.
        seed: u64,
        /// `theta`, column-major `M' x T` with `M' = M`, or `M + 1` with a bias feature
        /// (column `t` is `theta[t*M'..(t+1)*M']`, the bias feature's weight last).
        theta: Vec<f64>,
        /// `B` of the constant feature after the random ones (0: none).
        #[serde(default, skip_serializing_if = "is_zero")]
        bias: f64,
    },
    /// The exact kernel: `f_t(x) = sum_i alpha_it k(s_i, x)`.
    Exact {
        /// Number of support rows.
        n_support: usize,
        /// Support rows after preprocessing, row-major `n_support x n_features`.
        support: Vec<f64>,
        /// Coefficients, column-major `n_support x T`.
        alpha: Vec<f64>,
    },
}

/// Passes a fit made over its training rows, by phase. On rows mapped from a file larger than
/// the page cache each pass is a read of the file (`docs/out-of-core.md`); opening the file is
/// one more, outside the fit.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Passes {
    /// The statistics: the standardisation (1 where it is fitted) and the data-wide width rule
    /// (1 where its sums were not taken when a mapped file was opened; the median reads a
    /// sample only).
    pub statistics: f64,
    /// The start: the direct KRR solve (1) or the finite Newton start (its steps over all
    /// rows, plus the sample's share).
    pub start: f64,
    /// Block coordinate descent: iterations times the block size over the rows.
    pub blocks: f64,
    /// The checks that computed the objectives, each a pass.
    pub checks: f64,
}

impl Passes {
    /// All of them.
    pub fn total(&self) -> f64 {
        self.statistics + self.start + self.blocks + self.checks
    }
}

/// What happened during training (informational).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TrainingInfo {
    /// DBCD-TR iterations.
    pub iterations: usize,
    /// Why training stopped (`converged`, `max_iter`, `time_limit`, `cancelled` in the file).
    pub stop: StopReason,
    /// Final relative duality gap (NaN, `null` in the file, where there is none).
    #[serde(deserialize_with = "f64_or_nan")]
    pub gap: f64,
    /// Final primal objective.
    #[serde(deserialize_with = "f64_or_nan")]
    pub primal: f64,
    /// Final dual objective (NaN, `null` in the file, where there is none).
    #[serde(deserialize_with = "f64_or_nan")]
    pub dual: f64,
    /// Training time in seconds.
    pub seconds: f64,
    /// Number of training samples.
    pub n_samples: usize,
    /// Where the time went.
    #[serde(default)]
    pub timings: Timings,
    /// Where the fit ran and why, for example `cpu (auto: no usable GPU: ...)` or
    /// `cuda:0 (requested: NVIDIA H100 ...; 120 MiB of device memory, data resident)`.
    #[serde(default)]
    pub device: String,
    /// The trust region's model curvature and why: `gram`, `kernel`, `exact kernel`, with the
    /// reason where it was chosen automatically or could not be had.
    #[serde(default)]
    pub tr_model: String,
    /// How DBCD-TR chose its blocks and why (`shrinking (auto: ...)`, `random (auto: ...)`);
    /// absent from the file, and empty, for the other solvers.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub working_set: String,
    /// Where the fit chose between the exact kernel, a Nystrom map and random features itself
    /// ([`Joker::auto_exact`](crate::Joker)): which it took and why (absent from the file,
    /// and empty, otherwise).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub representation: String,
    /// Where the fit chose the regression loss itself ([`Joker::auto_loss`](crate::Joker)):
    /// which it took and why, for example `svr (auto: the exact kernel: ...)` (absent from the
    /// file, and empty, otherwise).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub loss_choice: String,
    /// How more than two classes were split and why, for example `one-vs-one, 45 pairs (auto:
    /// the exact kernel, ...)` (absent from the file, and empty, for fewer classes).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub multiclass: String,
    /// The solver that trained the model when it was not DBCD-TR: `dsg`, `udsg` or `cdsg`
    /// (absent from the file, and empty, for DBCD-TR and full KRR).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub solver: String,
    /// The feature map when it was not random Fourier features: a Nystrom map's centre rule
    /// and how many centres it kept (absent from the file, and empty, otherwise). A Nystrom
    /// model is stored as an exact-kernel model over its centres.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub feature_map: String,
    /// Where DBCD-TR started when it solved the problem in the primal first: `direct KRR
    /// solve` or `finite Newton, ...` on a feature map (absent from the file, and empty,
    /// otherwise).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub start: String,
    /// The intercept fitted beside the kernel expansion, in the targets' units (already in
    /// [`Model::target_scaler`]'s mean); absent without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intercept: Option<f64>,
    /// The passes over the training rows by phase (DBCD-TR fits; absent otherwise, and older
    /// builds ignore it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub passes: Option<Passes>,
    /// The model search that chose `C` and the width ([`Joker::search`](crate::Joker::search)),
    /// absent otherwise (older builds ignore it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search: Option<SearchRecord>,
}

/// One candidate of a search, scored on every fold.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SearchCandidate {
    /// `C`.
    pub c: f64,
    /// The width's factor of the default `gamma`.
    pub gamma_factor: f64,
    /// `gamma`.
    pub gamma: f64,
    /// The held-out score of each fold: accuracy (classification) or R^2 (regression).
    pub scores: Vec<f64>,
    /// The mean of `scores`.
    pub mean: f64,
    /// The standard deviation of `scores`.
    pub spread: f64,
    /// DBCD-TR iterations over the folds' fits.
    pub iterations: usize,
    /// Fit seconds over the folds.
    pub seconds: f64,
}

/// What a search did: every candidate, and the one refitted on all rows.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SearchRecord {
    /// The folds.
    pub folds: usize,
    /// `accuracy` or `r2`, the held-out score maximised.
    pub metric: String,
    /// The candidates, in the order they were fitted (by width, then `C`).
    pub candidates: Vec<SearchCandidate>,
    /// The index of the winner in `candidates`: the best mean score, the smaller `C` and
    /// then the width nearer the default on ties.
    pub best: usize,
}

/// A trained Joker model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Model {
    /// Always [`FORMAT_NAME`].
    pub format: String,
    /// Model file version: [`FORMAT_VERSION_DUAL`] for DBCD-TR and full-KRR models,
    /// [`FORMAT_VERSION`] for doubly stochastic ones.
    pub version: u32,
    /// Version of joker that trained the model.
    pub joker_version: String,
    /// The loss trained with.
    pub loss: Loss,
    /// The kernel, with the resolved scale.
    pub kernel: Kernel,
    /// The regularisation `lambda` (`C = 1/lambda`).
    pub lambda: f64,
    /// Precision used for features and prediction.
    pub precision: Precision,
    /// Classification or regression.
    pub task: Task,
    /// Sorted class labels (classification only).
    pub classes: Option<Vec<f64>>,
    /// How more than two classes were split into binary columns (absent from the file for
    /// one-vs-rest, the only scheme of versions 1 and 2).
    #[serde(default, skip_serializing_if = "is_one_vs_rest")]
    pub multiclass: Multiclass,
    /// Number of input features.
    pub n_features: usize,
    /// Number of decision columns `T` (1 for regression and binary, `K` for one-vs-rest,
    /// `K (K - 1) / 2` for one-vs-one).
    pub n_targets: usize,
    /// Feature preprocessing.
    pub standardizer: Standardizer,
    /// Target scaling (regression; identity otherwise).
    pub target_scaler: TargetScaler,
    /// The kernel representation and its coefficients.
    pub representation: Representation,
    /// Dual coefficients of all training samples (column-major `n x T`), for warm starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dual: Option<Vec<f64>>,
    /// The layout of the training file (format and label column), where the model was trained
    /// from a file: `joker predict` reads test files the same way unless told otherwise.
    /// Older builds ignore the field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<crate::io::DataLayout>,
    /// Platt's sigmoids per decision column, which give a classifier trained with another loss
    /// than the logistic one class probabilities ([`Model::predict_proba`]); absent where the
    /// fit was not asked for probabilities (version 5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibration: Option<Calibration>,
    /// Training summary.
    pub training: TrainingInfo,
    /// Every monitoring check of the fit (not saved).
    #[serde(skip)]
    pub history: Vec<Progress>,
}

impl Model {
    /// Decision values, row-major `n x T`: the raw `f_t(x)` (in target units for regression).
    pub fn decision_function<U: Scalar>(&self, x: &Features<U>) -> Result<Vec<f64>> {
        let cols = match self.precision {
            Precision::F32 => self.decision_columns::<U, f32>(x)?,
            Precision::F64 => self.decision_columns::<U, f64>(x)?,
        };
        let (n, t) = (x.nrows(), self.n_targets);
        let mut out = vec![0.0; n * t];
        for c in 0..t {
            for i in 0..n {
                out[i * t + c] = self.target_scaler.inverse(cols[c * n + i]);
            }
        }
        Ok(out)
    }

    /// Column-major decision values in standardized target units.
    pub(crate) fn decision_columns<U: Scalar, T: Scalar>(
        &self,
        x: &Features<U>,
    ) -> Result<Vec<f64>> {
        let in_place = self.standardizer.is_identity() && TypeId::of::<U>() == TypeId::of::<T>();
        let m = match x {
            Features::Dense(m) if m.is_mapped() && !in_place => m,
            _ => return Ok(self.decision_prepared(&self.standardizer.transform::<U, T>(x)?)),
        };
        // Mapped rows that need scaling or another precision: a chunk of rows at a time, so
        // that memory holds a chunk's copy, not the file's. Each row's value is the same.
        let (n, d, t) = (m.nrows(), m.ncols(), self.n_targets);
        let mut out = vec![0.0; n * t];
        for lo in (0..n).step_by(MAPPED_CHUNK_ROWS) {
            let hi = (lo + MAPPED_CHUNK_ROWS).min(n);
            let rows = m.as_slice()[lo * d..hi * d].to_vec();
            let part = Features::Dense(DenseMatrix::new(hi - lo, d, rows)?);
            let cols = self.decision_prepared(&self.standardizer.transform::<U, T>(&part)?);
            for c in 0..t {
                out[c * n + lo..c * n + hi]
                    .copy_from_slice(&cols[c * (hi - lo)..(c + 1) * (hi - lo)]);
            }
        }
        Ok(out)
    }

    /// Decision values of already-preprocessed data in the model's precision.
    pub(crate) fn decision_prepared<T: Scalar>(&self, xt: &Features<T>) -> Vec<f64> {
        let t = self.n_targets;
        match &self.representation {
            Representation::RandomFeatures {
                n_components,
                seed,
                theta,
                bias,
            } => {
                let spec = FeatureSpec {
                    kernel: self.kernel,
                    n_components: *n_components,
                    dim: self.n_features,
                    seed: *seed,
                };
                // The spec and the bias were validated when the model was made or loaded.
                match RandomMap::<T>::new(spec)
                    .and_then(|r| r.with_bias(*bias))
                    .map(FeatureMap::Random)
                {
                    Ok(map) => Predictor::Features { map: &map, theta }.decision(&Cpu, xt, t),
                    Err(_) => vec![f64::NAN; xt.nrows() * t],
                }
            }
            Representation::Exact {
                n_support,
                support,
                alpha,
            } => {
                let sup = support.iter().map(|&v| T::from_f64(v)).collect();
                let Ok(s) = DenseMatrix::new(*n_support, self.n_features, sup) else {
                    // an empty support (all coefficients zero) predicts zero
                    return vec![0.0; xt.nrows() * t];
                };
                let s = Features::Dense(s);
                if let Some(out) = self.pairwise_exact(&s, alpha, xt) {
                    return out;
                }
                Predictor::Exact {
                    kernel: &self.kernel,
                    support: &s,
                    rows: None,
                    alpha,
                }
                .decision(&Cpu, xt, t)
            }
        }
    }

    /// One-vs-one exact decision values a class at a time: a support row has coefficients only
    /// in the `K - 1` pairs of its own class, so the kernel rows of each class's support rows
    /// multiply those columns alone (`n_sv (K - 1)` products per row of `x` instead of
    /// `n_sv K (K - 1) / 2`). `None` for other models, or where a row's non-zero pairs share no
    /// class (a file not written by a one-vs-one fit).
    fn pairwise_exact<T: Scalar>(
        &self,
        support: &Features<T>,
        alpha: &[f64],
        xt: &Features<T>,
    ) -> Option<Vec<f64>> {
        let k = self.classes.as_ref()?.len();
        if self.multiclass != Multiclass::OneVsOne || k < 3 {
            return None;
        }
        let (ns, t, n) = (support.nrows(), self.n_targets, xt.nrows());
        let pairs = class_pairs(k);
        // each support row's class: the one all of its non-zero pairs share
        let mut class = vec![None; ns];
        for (s, c) in class.iter_mut().enumerate() {
            let mut shared: Option<[usize; 2]> = None;
            for (p, &(a, b)) in pairs.iter().enumerate() {
                if alpha[p * ns + s] == 0.0 {
                    continue;
                }
                shared = Some(match shared {
                    None => [a, b],
                    Some(both) => {
                        let keep = |v: usize| (v == a || v == b).then_some(v);
                        match (keep(both[0]), keep(both[1])) {
                            (Some(x), Some(y)) => [x, y],
                            (Some(x), None) | (None, Some(x)) => [x, x],
                            (None, None) => return None,
                        }
                    }
                });
            }
            *c = shared.map(|both| both[0]);
        }
        let mut out = vec![0.0; n * t];
        for c in 0..k {
            let rows: Vec<usize> = (0..ns).filter(|&s| class[s] == Some(c)).collect();
            if rows.is_empty() {
                continue;
            }
            let cols: Vec<usize> = (0..t)
                .filter(|&p| pairs[p].0 == c || pairs[p].1 == c)
                .collect();
            let mut a = vec![0.0; ns * cols.len()];
            for (q, &p) in cols.iter().enumerate() {
                for &s in &rows {
                    a[q * ns + s] = alpha[p * ns + s];
                }
            }
            let part = Predictor::Exact {
                kernel: &self.kernel,
                support,
                rows: Some(&rows),
                alpha: &a,
            }
            .decision(&Cpu, xt, cols.len());
            for (q, &p) in cols.iter().enumerate() {
                for (o, v) in out[p * n..(p + 1) * n].iter_mut().zip(&part[q * n..]) {
                    *o += v;
                }
            }
        }
        Some(out)
    }

    /// Predictions: class labels for classifiers (sign, argmax for one-vs-rest, votes for
    /// one-vs-one), values for regression.
    pub fn predict<U: Scalar>(&self, x: &Features<U>) -> Result<Vec<f64>> {
        let dv = self.decision_function(x)?;
        Ok(self.labels_from_decision(&dv))
    }

    /// Maps row-major decision values to predictions.
    pub fn labels_from_decision(&self, dv: &[f64]) -> Vec<f64> {
        let t = self.n_targets;
        match (&self.classes, self.task) {
            (Some(classes), Task::Classification) => dv
                .chunks_exact(t)
                .map(|row| {
                    if t == 1 {
                        if row[0] >= 0.0 {
                            classes[1]
                        } else {
                            classes[0]
                        }
                    } else if self.multiclass == Multiclass::OneVsOne {
                        classes[vote(row, classes.len())]
                    } else {
                        let best = row
                            .iter()
                            .enumerate()
                            .max_by(|a, b| a.1.total_cmp(b.1))
                            .map_or(0, |(k, _)| k);
                        classes[best]
                    }
                })
                .collect(),
            _ => dv.to_vec(),
        }
    }

    /// Whether the model gives class probabilities: a kernel logistic regression, or a
    /// classifier calibrated by Platt scaling (trained with probabilities asked for).
    pub fn has_probabilities(&self) -> bool {
        self.task == Task::Classification
            && (self.loss == Loss::Logistic || self.calibration.is_some())
    }

    /// Class probabilities, row-major `n x K` in the order of `classes`, from each decision
    /// column's probability of its positive side (the logistic sigmoid of the decision value
    /// for KLR, Platt's calibrated sigmoid otherwise): for two classes that column's
    /// probability and its complement; for one-vs-rest, the columns' probabilities normalised
    /// over the classes; for one-vs-one, the pairs' probabilities coupled ([`couple`]).
    ///
    /// # Errors
    /// [`JokerError::Unsupported`] for a model without probabilities
    /// ([`has_probabilities`](Model::has_probabilities)).
    pub fn predict_proba<U: Scalar>(&self, x: &Features<U>) -> Result<Vec<f64>> {
        if !self.has_probabilities() {
            return Err(JokerError::Unsupported(format!(
                "probabilities need the logistic loss (KLR) or a classifier trained with probabilities asked for (Platt scaling: `joker train --proba`, `probability=True`); this model uses the {} loss without them",
                self.loss.name()
            )));
        }
        let dv = self.decision_function(x)?;
        let column = |t: usize, z: f64| match &self.calibration {
            Some(c) if self.loss != Loss::Logistic => c.probability(t, z),
            _ => sigmoid(z),
        };
        let t = self.n_targets;
        Ok(if t == 1 {
            dv.iter()
                .flat_map(|&z| {
                    let p = column(0, z);
                    [1.0 - p, p]
                })
                .collect()
        } else if self.multiclass == Multiclass::OneVsOne {
            let k = self.classes.as_ref().map_or(0, |c| c.len());
            dv.chunks_exact(t)
                .flat_map(|row| {
                    let r: Vec<f64> = row.iter().enumerate().map(|(c, &z)| column(c, z)).collect();
                    couple(&r, k)
                })
                .collect()
        } else {
            dv.chunks_exact(t)
                .flat_map(|row| {
                    let p: Vec<f64> = row.iter().enumerate().map(|(c, &z)| column(c, z)).collect();
                    let s: f64 = p.iter().sum();
                    p.into_iter().map(move |v| v / s)
                })
                .collect()
        })
    }

    /// Accuracy for classifiers, the coefficient of determination R^2 for regression.
    pub fn score<U: Scalar>(&self, data: &Dataset<U>) -> Result<f64> {
        let pred = self.predict(&data.x)?;
        Ok(match self.task {
            Task::Classification => accuracy(&pred, &data.y),
            Task::Regression => {
                let mean = data.y.iter().sum::<f64>() / data.y.len() as f64;
                let ss_tot: f64 = data.y.iter().map(|v| (v - mean).powi(2)).sum();
                let ss_res: f64 = pred.iter().zip(&data.y).map(|(p, y)| (p - y).powi(2)).sum();
                if ss_tot > 0.0 {
                    1.0 - ss_res / ss_tot
                } else {
                    f64::NAN
                }
            }
        })
    }

    /// Number of random features, or `None` for an exact model.
    pub fn n_components(&self) -> Option<usize> {
        match &self.representation {
            Representation::RandomFeatures { n_components, .. } => Some(*n_components),
            Representation::Exact { .. } => None,
        }
    }

    /// Writes the model file (JSON), atomically: on any failure (a full disk, say) the file
    /// that was at `path` stays as it was.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        crate::atomic_file::write_atomically(path.as_ref(), |w| {
            serde_json::to_writer(w, self).map_err(std::io::Error::from)
        })
    }

    /// Reads a model file, refusing files from a newer format version.
    pub fn load(path: impl AsRef<Path>) -> Result<Model> {
        let path = path.as_ref();
        let file = std::fs::File::open(path).map_err(|source| JokerError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let value: serde_json::Value =
            serde_json::from_reader(BufReader::new(file)).map_err(|e| {
                JokerError::ModelFormat(format!("{}: not valid JSON: {e}", path.display()))
            })?;
        Self::from_json_value(value).map_err(|e| match e {
            JokerError::ModelFormat(m) => {
                JokerError::ModelFormat(format!("{}: {m}", path.display()))
            }
            other => other,
        })
    }

    /// Parses a model from JSON text.
    pub fn from_json(text: &str) -> Result<Model> {
        let value: serde_json::Value = serde_json::from_str(text)
            .map_err(|e| JokerError::ModelFormat(format!("not valid JSON: {e}")))?;
        Self::from_json_value(value)
    }

    fn from_json_value(value: serde_json::Value) -> Result<Model> {
        if value.get("format").and_then(|v| v.as_str()) != Some(FORMAT_NAME) {
            return Err(JokerError::ModelFormat(format!(
                "not a joker model (the `format` field is not \"{FORMAT_NAME}\")"
            )));
        }
        let version = value.get("version").and_then(|v| v.as_u64()).unwrap_or(0);
        if version > FORMAT_VERSION as u64 {
            return Err(JokerError::ModelFormat(format!(
                "written by a newer joker (format version {version}); this build ({}) reads versions up to {FORMAT_VERSION}: upgrade joker",
                env!("CARGO_PKG_VERSION")
            )));
        }
        let model: Model = serde_json::from_value(value)
            .map_err(|e| JokerError::ModelFormat(format!("malformed model: {e}")))?;
        model.check()?;
        Ok(model)
    }

    /// The values and sizes inside a model, each reported by its field in the file: a model
    /// edited by hand (or damaged) is refused rather than predicting garbage.
    fn check(&self) -> Result<()> {
        let bad = |m: String| Err(JokerError::ModelFormat(m));
        self.kernel.validate().map_err(|e| in_field("kernel", e))?;
        self.loss.validate().map_err(|e| in_field("loss", e))?;
        if !(self.lambda.is_finite() && self.lambda > 0.0) {
            return bad(format!(
                "field `lambda` is {}, not a positive number",
                self.lambda
            ));
        }
        let (d, t) = (self.n_features, self.n_targets);
        if d == 0 || t == 0 {
            return bad("n_features and n_targets must be positive".into());
        }
        if self.standardizer.center.len() != d || self.standardizer.scale.len() != d {
            return bad("standardizer length differs from n_features".into());
        }
        if let Some(j) = self
            .standardizer
            .scale
            .iter()
            .position(|s| !(s.is_finite() && *s > 0.0))
        {
            return bad(format!(
                "field `standardizer.scale[{j}]` is {}: a feature's scale must be a positive number (it divides the feature)",
                self.standardizer.scale[j]
            ));
        }
        if let Some(j) = self.standardizer.center.iter().position(|c| !c.is_finite()) {
            return bad(format!(
                "field `standardizer.center[{j}]` is {}, not a number",
                self.standardizer.center[j]
            ));
        }
        let ts = &self.target_scaler;
        if !(ts.scale.is_finite() && ts.scale > 0.0 && ts.mean.is_finite()) {
            return bad(format!(
                "field `target_scaler` has mean {} and scale {}: the scale must be a positive number and the mean a number",
                ts.mean, ts.scale
            ));
        }
        if let Some(c) = &self.classes
            && !c.windows(2).all(|w| w[0] < w[1])
        {
            return bad("field `classes` must hold distinct numbers in increasing order".into());
        }
        let coefficients: &[(&str, &[f64])] = match &self.representation {
            Representation::RandomFeatures { theta, .. } => &[("representation.theta", theta)],
            Representation::Exact { support, alpha, .. } => &[
                ("representation.support", support),
                ("representation.alpha", alpha),
            ],
        };
        for (field, values) in coefficients {
            if let Some(k) = values.iter().position(|v| !v.is_finite()) {
                return bad(format!(
                    "field `{field}[{k}]` is {}, not a number",
                    values[k]
                ));
            }
        }
        if let Some(cal) = &self.calibration
            && (self.classes.is_none() || !cal.fits(t))
        {
            return bad(format!(
                "field `calibration` needs a classifier and one finite `a` and `b` per decision column ({t})"
            ));
        }
        if let Some(c) = &self.classes {
            if c.len() < 2 {
                return bad(format!(
                    "{} class labels, but a classifier has at least two",
                    c.len()
                ));
            }
            let want = self.multiclass.columns(c.len());
            if want != t {
                return bad(format!(
                    "{} classes need {want} targets ({}), model has {t}",
                    c.len(),
                    self.multiclass.name()
                ));
            }
        }
        // The sizes come from the file, so their products may overflow: no array is that
        // long then.
        match &self.representation {
            Representation::RandomFeatures {
                n_components,
                theta,
                bias,
                ..
            } => {
                if let Err(e) = crate::features::check_bias(*bias) {
                    return bad(e.to_string());
                }
                let width = n_components + usize::from(*bias > 0.0);
                if *n_components == 0 || width.checked_mul(t) != Some(theta.len()) {
                    return bad(format!(
                        "theta has {} values, expected (M + {}) x T = {width} x {t}",
                        theta.len(),
                        usize::from(*bias > 0.0)
                    ));
                }
            }
            Representation::Exact {
                n_support,
                support,
                alpha,
            } => {
                if n_support.checked_mul(d) != Some(support.len())
                    || n_support.checked_mul(t) != Some(alpha.len())
                {
                    return bad("support or alpha size differs from n_support".into());
                }
            }
        }
        Ok(())
    }
}

/// A parameter's error in a model file's terms: the field's path, not the flag that sets it
/// in training.
fn in_field(field: &str, e: JokerError) -> JokerError {
    match e {
        JokerError::InvalidParameter { name, reason } => {
            JokerError::ModelFormat(format!("field `{field}.{name}`: {reason}"))
        }
        other => JokerError::ModelFormat(format!("field `{field}`: {other}")),
    }
}

/// Fraction of equal entries.
pub fn accuracy(pred: &[f64], truth: &[f64]) -> f64 {
    let hits = pred.iter().zip(truth).filter(|(p, y)| p == y).count();
    hits as f64 / truth.len().max(1) as f64
}

/// Root mean squared error.
pub fn rmse(pred: &[f64], truth: &[f64]) -> f64 {
    let s: f64 = pred.iter().zip(truth).map(|(p, y)| (p - y).powi(2)).sum();
    (s / truth.len().max(1) as f64).sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Device, Joker};

    /// The JSON of a tiny binary classifier.
    fn classifier_json() -> serde_json::Value {
        let x: Vec<f64> = (0..12)
            .map(|i| ((i * 7 + 3) % 11) as f64 / 5.0 - 1.0)
            .collect();
        let x = Features::Dense(DenseMatrix::new(6, 2, x).unwrap());
        let data = Dataset::new(x, vec![-1.0, 1.0, -1.0, 1.0, -1.0, 1.0]).unwrap();
        let model = Joker::builder()
            .loss(Loss::SquaredHinge)
            .n_components(4)
            .max_iter(3)
            .device(Device::Cpu)
            .build()
            .unwrap()
            .fit(&data)
            .unwrap();
        serde_json::to_value(&model).unwrap()
    }

    /// `from_json` of `v` with `edit` applied, as an error message.
    fn refused(v: &serde_json::Value, edit: impl FnOnce(&mut serde_json::Value)) -> String {
        let mut v = v.clone();
        edit(&mut v);
        match Model::from_json(&v.to_string()) {
            Err(JokerError::ModelFormat(m)) => m,
            other => panic!("expected a model format error, got {other:?}"),
        }
    }

    #[test]
    fn inconsistent_model_files_are_refused_not_panicked_on() {
        let v = classifier_json();
        assert!(Model::from_json(&v.to_string()).is_ok());
        // One class: prediction would index the missing second one.
        let m = refused(&v, |v| v["classes"] = serde_json::json!([-1.0]));
        assert!(m.contains("1 class labels"), "{m}");
        // Sizes whose product wraps around to the length of an empty array.
        let m = refused(&v, |v| {
            v["task"] = "regression".into();
            v["classes"] = serde_json::Value::Null;
            v["n_targets"] = 2.into();
            v["representation"]["n_components"] = (1u64 << 63).into();
            v["representation"]["theta"] = serde_json::json!([]);
        });
        assert!(m.contains("theta has 0 values"), "{m}");
    }
}

//! Class probabilities for a trained classifier by Platt scaling ([`crate::calibration`]): the
//! decision values come from stratified cross-validation folds, each fitted with the trained
//! model's own kernel, width, representation and multi-class scheme, so that the sigmoids
//! are fitted on values of models like the final one on rows they did not see.

use std::time::Instant;

use super::{FitOptions, Joker, JokerBuilder};
use crate::calibration::{CALIBRATION_FOLDS, Calibration, platt};
use crate::data::Dataset;
use crate::error::{JokerError, Result};
use crate::kernel::Bandwidth;
use crate::model::{FORMAT_VERSION, Model};
use crate::preprocess::{Multiclass, class_pairs};
use crate::rng::{Stream, streams};
use crate::scalar::Scalar;

/// The fold of each row: a shuffle, then the rows of each class dealt to the folds in turn,
/// so that every fold's training rows hold every class with two rows or more.
fn stratified_folds(class_of: &[usize], folds: usize, seed: u64) -> Vec<usize> {
    let mut order: Vec<usize> = (0..class_of.len()).collect();
    Stream::new(seed, streams::CALIBRATION_FOLDS).shuffle(&mut order);
    order.sort_by_key(|&i| class_of[i]);
    let mut fold = vec![0; class_of.len()];
    for (k, &i) in order.iter().enumerate() {
        fold[i] = k % folds;
    }
    fold
}

/// For decision column `t` of a model with `k` classes under `scheme`: whether a row of class
/// `c` takes part, and whether it is on the column's positive side.
fn side(t: usize, c: usize, k: usize, scheme: Multiclass) -> Option<bool> {
    if k == 2 {
        Some(c == 1)
    } else if scheme == Multiclass::OneVsOne {
        let (a, b) = class_pairs(k)[t];
        (c == a || c == b).then_some(c == b)
    } else {
        Some(c == t)
    }
}

impl Joker {
    /// Fits Platt's sigmoids for `model`, trained by these (resolved) parameters on `data`,
    /// and stores them in `model.calibration` (format version 5).
    ///
    /// # Errors
    /// A class with a single row (no fold's training rows could hold it), and the errors of
    /// the folds' fits.
    pub(crate) fn calibrate<U: Scalar>(
        &self,
        model: &mut Model,
        data: &Dataset<U>,
        weights: Option<&[f64]>,
    ) -> Result<()> {
        let start = Instant::now();
        let classes = model.classes.clone().ok_or_else(|| {
            JokerError::Unsupported("class probabilities need a classifier".into())
        })?;
        let k = classes.len();
        let class_of: Vec<usize> = data
            .y
            .iter()
            .map(|v| classes.binary_search_by(|c| c.total_cmp(v)).unwrap_or(0))
            .collect();
        let mut counts = vec![0usize; k];
        for &c in &class_of {
            counts[c] += 1;
        }
        if let Some(c) = counts.iter().position(|&m| m < 2) {
            return Err(JokerError::InvalidLabels(format!(
                "class {} has {} row: calibrating probabilities by cross-validation needs at least 2 rows of each class",
                classes[c], counts[c]
            )));
        }
        let folds = CALIBRATION_FOLDS.min(data.len());
        let fold = stratified_folds(&class_of, folds, self.solver.seed);
        // the trained model's kernel and scheme, fixed: every fold model has its columns
        let fold_est = JokerBuilder::from(self.clone())
            .probability(false)
            .auto_exact(false)
            .bandwidth(Bandwidth::Gamma(model.kernel.gamma))
            .multiclass(model.multiclass)
            .build()?;
        let t = model.n_targets;
        let mut dv = vec![f64::NAN; data.len() * t];
        for k_fold in 0..folds {
            let (train, held): (Vec<usize>, Vec<usize>) =
                (0..data.len()).partition(|&i| fold[i] != k_fold);
            let part = |rows: &[usize]| {
                Dataset::new(
                    data.x.select_rows(rows)?,
                    rows.iter().map(|&i| data.y[i]).collect(),
                )
            };
            let w: Option<Vec<f64>> = weights.map(|w| train.iter().map(|&i| w[i]).collect());
            let opts = FitOptions {
                sample_weight: w.as_deref(),
                ..FitOptions::default()
            };
            let m = fold_est.fit_with(&part(&train)?, opts)?;
            let values = m.decision_function(&part(&held)?.x)?;
            for (r, &i) in held.iter().enumerate() {
                dv[i * t..(i + 1) * t].copy_from_slice(&values[r * t..(r + 1) * t]);
            }
        }
        let (mut a, mut b) = (Vec::with_capacity(t), Vec::with_capacity(t));
        for col in 0..t {
            let (mut f, mut positive) = (Vec::new(), Vec::new());
            for (i, &c) in class_of.iter().enumerate() {
                if let Some(pos) = side(col, c, k, model.multiclass) {
                    f.push(dv[i * t + col]);
                    positive.push(pos);
                }
            }
            let (ac, bc) = platt(&f, &positive);
            a.push(ac);
            b.push(bc);
        }
        model.calibration = Some(Calibration { a, b, folds });
        model.version = FORMAT_VERSION;
        model.training.seconds += start.elapsed().as_secs_f64();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folds_hold_every_class_in_training() {
        let class_of: Vec<usize> = (0..23)
            .map(|i| usize::from(i % 7 == 0) + usize::from(i == 3) * 2)
            .collect();
        let fold = stratified_folds(&class_of, 5, 3);
        for f in 0..5 {
            for c in 0..3 {
                let n = class_of.len();
                let in_train = (0..n).filter(|&i| fold[i] != f && class_of[i] == c).count();
                let total = class_of.iter().filter(|&&v| v == c).count();
                assert!(
                    total < 2 || in_train > 0,
                    "class {c} missing from fold {f}'s training rows"
                );
            }
        }
        // the folds are near equal in size
        let sizes: Vec<usize> = (0..5)
            .map(|f| fold.iter().filter(|&&v| v == f).count())
            .collect();
        assert!(
            sizes.iter().max().unwrap() - sizes.iter().min().unwrap() <= 1,
            "{sizes:?}"
        );
    }

    #[test]
    fn sides_follow_the_schemes() {
        assert_eq!(side(0, 1, 2, Multiclass::OneVsRest), Some(true));
        assert_eq!(side(0, 0, 2, Multiclass::OneVsOne), Some(false));
        // pairs of 3 classes: (0,1), (0,2), (1,2)
        assert_eq!(side(1, 2, 3, Multiclass::OneVsOne), Some(true));
        assert_eq!(side(1, 0, 3, Multiclass::OneVsOne), Some(false));
        assert_eq!(side(1, 1, 3, Multiclass::OneVsOne), None);
        assert_eq!(side(2, 2, 3, Multiclass::OneVsRest), Some(true));
        assert_eq!(side(2, 0, 3, Multiclass::OneVsRest), Some(false));
    }
}

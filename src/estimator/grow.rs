//! Growing the number of random features: a sequence of fits with more features each, every
//! one warm-started from the last one's dual coefficients.
//!
//! The dual variables `alpha` live on the training rows, not on the features: the box of each
//! coordinate depends on the loss and `C` only, so an optimum at `M_1` features is a feasible
//! start at `M_2`, and its `theta = Phi_2^T alpha` is one streaming pass over the data. A larger
//! map is a better approximation of the same kernel, so the start is close: the fit at `M_2`
//! only corrects what the smaller map missed.

use super::{FitOptions, Joker};
use crate::data::Dataset;
use crate::error::{Result, invalid};
use crate::model::{Model, Task};
use crate::scalar::Scalar;
use crate::solver::dbcd::{InterruptFn, ProgressFn};
use crate::solver::{Progress, StopReason};

/// Accuracy (a fraction) a stage must gain over the best so far to count as an improvement:
/// 0.1 points, the resolution of the benchmarks' time-to-accuracy.
pub const MIN_ACCURACY_GAIN: f64 = 1e-3;
/// Relative RMSE decrease a stage must reach to count as an improvement (0.5%).
pub const MIN_RMSE_GAIN: f64 = 5e-3;

/// One stage of [`Joker::fit_growing`].
#[derive(Clone, Debug, PartialEq)]
pub struct GrowthStage {
    /// Random features of this stage.
    pub n_components: usize,
    /// The validation metric at the stage's end (accuracy for classifiers, RMSE for
    /// regression), when a validation set was given.
    pub validation: Option<f64>,
    /// DBCD-TR iterations of the stage.
    pub iterations: usize,
    /// The stage's fit time in seconds.
    pub seconds: f64,
    /// Why the stage's fit stopped.
    pub stop: StopReason,
}

/// Whether `metric` improves on `best` by the margin of [`MIN_ACCURACY_GAIN`] or
/// [`MIN_RMSE_GAIN`].
fn improves(task: Task, metric: f64, best: f64) -> bool {
    match task {
        Task::Classification => metric > best + MIN_ACCURACY_GAIN,
        Task::Regression => metric < best * (1.0 - MIN_RMSE_GAIN),
    }
}

/// Whether `metric` is better than `best` by any amount.
fn improves_at_all(task: Task, metric: f64, best: f64) -> bool {
    match task {
        Task::Classification => metric > best,
        Task::Regression => metric < best,
    }
}

/// The schedule's checks: strictly increasing sizes of at least one feature, for a
/// random-feature DBCD-TR fit.
fn check_schedule(joker: &Joker, sizes: &[usize]) -> Result<()> {
    if sizes.is_empty() {
        return Err(invalid("grow", "give at least one number of features"));
    }
    if sizes[0] == 0 || sizes.windows(2).any(|w| w[1] <= w[0]) {
        return Err(invalid(
            "grow",
            format!("the numbers of features must be positive and increasing, got {sizes:?}"),
        ));
    }
    if joker.n_components.is_none() || joker.full_krr.is_some() {
        return Err(invalid(
            "grow",
            "growing the features needs a random-feature model (n_components), not the exact kernel",
        ));
    }
    if joker.dsg.is_some() {
        return Err(invalid(
            "grow",
            "the doubly stochastic solvers open features as they go; growing applies to DBCD-TR",
        ));
    }
    Ok(())
}

/// One stage's options: the caller's sample weights and validation set, the stage's warm
/// start, and the caller's callbacks lent for the stage.
fn stage_options<'s, 'c: 's, U>(
    opts: &FitOptions<'s, U>,
    warm_start: Option<&'s Model>,
    progress: &'s mut Option<ProgressFn<'c>>,
    interrupt: &'s mut Option<InterruptFn<'c>>,
) -> FitOptions<'s, U> {
    FitOptions {
        sample_weight: opts.sample_weight,
        validation: opts.validation,
        warm_start,
        progress: progress
            .as_mut()
            .map(|f| Box::new(move |p: &Progress| f(p)) as ProgressFn<'s>),
        interrupt: interrupt.as_mut().map(|f| Box::new(f) as InterruptFn<'s>),
    }
}

impl Joker {
    /// Fits models with `sizes[0]`, `sizes[1]`, ... random features in turn (the estimator's
    /// own `n_components` is replaced), each stage warm-started from the previous stage's dual
    /// coefficients, or from `opts.warm_start` for the first; every stage runs to the
    /// estimator's tolerance or iteration cap. With a validation set (`opts.validation`)
    /// growing stops after the first stage that does not improve the metric by 0.1 points of
    /// accuracy or 0.5% of RMSE over the best stage before it, and the model with the best
    /// metric is returned (the smaller one on a tie); without one every size is fitted and the
    /// last model returned. A cancelled stage ends the schedule. The progress callback and the
    /// interrupt see every stage.
    pub fn fit_growing<U: Scalar>(
        &self,
        data: &Dataset<U>,
        sizes: &[usize],
        mut opts: FitOptions<'_, U>,
    ) -> Result<(Model, Vec<GrowthStage>)> {
        check_schedule(self, sizes)?;
        let task = self.task();
        let mut progress = opts.progress.take();
        let mut interrupt = opts.interrupt.take();
        let mut stages: Vec<GrowthStage> = Vec::with_capacity(sizes.len());
        let mut best: Option<(Model, f64)> = None;
        let mut last: Option<Model> = None;
        for &m in sizes {
            // growing is over features: never the automatic exact kernel
            let stage = Joker {
                n_components: Some(m),
                auto_exact: false,
                ..self.clone()
            };
            let warm = last.as_ref().or(opts.warm_start);
            let model = stage.fit_with(
                data,
                stage_options(&opts, warm, &mut progress, &mut interrupt),
            )?;
            let validation = model.history.last().and_then(|p| p.validation);
            stages.push(GrowthStage {
                n_components: m,
                validation,
                iterations: model.training.iterations,
                seconds: model.training.seconds,
                stop: model.training.stop,
            });
            let cancelled = model.training.stop == StopReason::Cancelled;
            let (go_on, better) = match (validation, &best) {
                (Some(v), Some((_, b))) => (improves(task, v, *b), improves_at_all(task, v, *b)),
                (Some(_), None) => (true, true),
                (None, _) => (true, false),
            };
            if let (Some(v), true) = (validation, better) {
                best = Some((model.clone(), v));
            }
            last = Some(model);
            if cancelled || !go_on {
                break;
            }
        }
        let model = best
            .map(|(m, _)| m)
            .or(last)
            .ok_or_else(|| invalid("grow", "no stage was fitted"))?;
        Ok((model, stages))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn improvement_margins() {
        assert!(improves(Task::Classification, 0.952, 0.95));
        assert!(!improves(Task::Classification, 0.9505, 0.95));
        assert!(improves(Task::Regression, 0.49, 0.5));
        assert!(!improves(Task::Regression, 0.499, 0.5));
        assert!(!improves(Task::Regression, f64::NAN, 0.5));
    }
}

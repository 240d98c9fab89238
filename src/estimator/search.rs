//! Model selection built in: `C` and the kernel width chosen by cross-validation, the winner
//! refitted on all rows.
//!
//! The widths are factors of the width the fit's own rule gives ([`Bandwidth::Auto`] by
//! default), resolved once on the first fold's training rows, so that every fold and every
//! `C` scores the same kernels; the winner is refitted with that `gamma`, or with the rule
//! itself on all rows where the winner is the default width (so that a search of one
//! candidate is the plain fit). Along `C` (in increasing order) each fold's fit starts from the
//! previous `C`'s dual coefficients where the fit is on the exact kernel: the box of each
//! coordinate depends on `C` only, so the last optimum is a feasible start close to the next.

use super::{FitOptions, Joker, JokerBuilder};
use crate::data::Dataset;
use crate::error::{Result, invalid};
use crate::kernel::Bandwidth;
use crate::model::{Model, Representation, SearchCandidate, SearchRecord};
use crate::rng::{Stream, streams};
use crate::scalar::Scalar;

/// The candidates of [`Joker::search`].
#[derive(Clone, Debug, PartialEq)]
pub struct SearchGrid {
    /// Values of `C` (each > 0).
    pub c: Vec<f64>,
    /// Factors of the default width's `gamma` (each > 0; 1 is the default width).
    pub gamma_factors: Vec<f64>,
    /// Cross-validation folds (at least 2).
    pub folds: usize,
    /// Seed of the folds' shuffle.
    pub seed: u64,
}

impl Default for SearchGrid {
    /// `C` in {0.1, 1, 10, 100}, widths 1/4 to 4 times the default by factors of 2, 3 folds
    /// (LIBSVM's `grid.py` searches a wider grid of powers of 2 with 5 folds).
    fn default() -> Self {
        SearchGrid {
            c: vec![0.1, 1.0, 10.0, 100.0],
            gamma_factors: vec![0.25, 0.5, 1.0, 2.0, 4.0],
            folds: 3,
            seed: 1,
        }
    }
}

/// Checks a grid.
fn check(grid: &SearchGrid, n: usize) -> Result<()> {
    let positive = |v: &[f64]| !v.is_empty() && v.iter().all(|x| x.is_finite() && *x > 0.0);
    if !positive(&grid.c) {
        return Err(invalid(
            "search_c",
            "give one or more values of C, each positive",
        ));
    }
    if !positive(&grid.gamma_factors) {
        return Err(invalid(
            "search_gamma",
            "give one or more factors of the default width, each positive",
        ));
    }
    if grid.folds < 2 || grid.folds > n {
        return Err(invalid(
            "folds",
            format!("needs 2 to {n} folds (the rows), got {}", grid.folds),
        ));
    }
    Ok(())
}

/// The rows of fold `k` of `folds` over `order`, and the other rows.
fn split(order: &[usize], folds: usize, k: usize) -> (Vec<usize>, Vec<usize>) {
    let n = order.len();
    let (lo, hi) = (k * n / folds, (k + 1) * n / folds);
    let held = order[lo..hi].to_vec();
    let mut train = order[..lo].to_vec();
    train.extend_from_slice(&order[hi..]);
    (train, held)
}

/// The mean and the standard deviation of `v`.
fn mean_spread(v: &[f64]) -> (f64, f64) {
    let n = v.len().max(1) as f64;
    let mean = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n;
    (mean, var.sqrt())
}

/// Whether a model was trained on the exact kernel (not on features, nor on a Nystrom map's
/// centres, which is stored as an exact model).
fn is_exact(m: &Model) -> bool {
    matches!(m.representation, Representation::Exact { .. }) && m.training.feature_map.is_empty()
}

impl Joker {
    /// Chooses `C` and the kernel width by `grid.folds`-fold cross-validation over the grid,
    /// then fits the winner on all rows. `progress(done, total)` is called after each
    /// candidate. The model's `training.search` holds the record.
    ///
    /// # Errors
    /// A grid with no or non-positive values, fewer than 2 folds or more folds than rows; and
    /// the errors of the fits.
    pub fn search<U: Scalar>(
        &self,
        data: &Dataset<U>,
        grid: &SearchGrid,
        mut progress: impl FnMut(usize, usize),
    ) -> Result<Model> {
        let n = data.len();
        check(grid, n)?;
        let mut cs = grid.c.clone();
        cs.sort_by(f64::total_cmp);
        cs.dedup();
        let mut order: Vec<usize> = (0..n).collect();
        Stream::new(grid.seed, streams::SEARCH_FOLDS).shuffle(&mut order);
        let folds: Vec<(Dataset<U>, Dataset<U>)> = (0..grid.folds)
            .map(|k| {
                let (tr, held) = split(&order, grid.folds, k);
                let part = |rows: &[usize]| {
                    Dataset::new(
                        data.x.select_rows(rows)?,
                        rows.iter().map(|&i| data.y[i]).collect(),
                    )
                };
                Ok((part(&tr)?, part(&held)?))
            })
            .collect::<Result<_>>()?;
        let with = |c: f64, gamma: Bandwidth, exact: bool| {
            // the folds' fits score labels: only the refitted winner is calibrated
            let b = JokerBuilder::from(self.clone())
                .c(c)
                .bandwidth(gamma)
                .probability(false);
            if exact { b.exact() } else { b }.build()
        };
        // the default width on the first fold's rows, and the representation it takes there
        let probe = with(cs[0], self.bandwidth, false)?.fit(&folds[0].0)?;
        let base = probe.kernel.gamma;
        let exact = is_exact(&probe);
        let metric = match probe.task {
            crate::model::Task::Classification => "accuracy",
            crate::model::Task::Regression => "r2",
        };
        let total = grid.gamma_factors.len() * cs.len();
        let mut candidates = Vec::with_capacity(total);
        for &factor in &grid.gamma_factors {
            let gamma = base * factor;
            let mut fold_scores = vec![Vec::with_capacity(grid.folds); cs.len()];
            let mut work = vec![(0usize, 0.0f64); cs.len()];
            for (train, held) in &folds {
                let mut last: Option<Model> = None;
                for (j, &c) in cs.iter().enumerate() {
                    let est = with(c, Bandwidth::Gamma(gamma), exact)?;
                    let opts = FitOptions {
                        warm_start: last.as_ref().filter(|_| exact),
                        ..FitOptions::default()
                    };
                    let m = est.fit_with(train, opts)?;
                    fold_scores[j].push(m.score(held)?);
                    work[j].0 += m.training.iterations;
                    work[j].1 += m.training.seconds;
                    last = Some(m);
                }
            }
            for (j, &c) in cs.iter().enumerate() {
                let (mean, spread) = mean_spread(&fold_scores[j]);
                candidates.push(SearchCandidate {
                    c,
                    gamma_factor: factor,
                    gamma,
                    scores: std::mem::take(&mut fold_scores[j]),
                    mean,
                    spread,
                    iterations: work[j].0,
                    seconds: work[j].1,
                });
                progress(candidates.len(), total);
            }
        }
        let best = best_candidate(&candidates);
        let w = &candidates[best];
        // the default width is the rule's on all rows, as a plain fit's; the others scale the
        // gamma they were scored with
        let width = if w.gamma_factor == 1.0 {
            self.bandwidth
        } else {
            Bandwidth::Gamma(w.gamma)
        };
        let winner = JokerBuilder::from(with(w.c, width, false)?).probability(self.probability);
        let mut model = winner.build()?.fit(data)?;
        model.training.search = Some(SearchRecord {
            folds: grid.folds,
            metric: metric.into(),
            candidates,
            best,
        });
        Ok(model)
    }
}

/// The best mean score; on ties the smaller `C`, then the width factor nearer 1.
fn best_candidate(c: &[SearchCandidate]) -> usize {
    let key = |k: &SearchCandidate| (k.mean, -k.c, -k.gamma_factor.ln().abs());
    (0..c.len())
        .max_by(|&a, &b| {
            let (x, y) = (key(&c[a]), key(&c[b]));
            x.0.total_cmp(&y.0)
                .then(x.1.total_cmp(&y.1))
                .then(x.2.total_cmp(&y.2))
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::{DenseMatrix, Features};
    use crate::loss::Loss;

    /// Points in the square `[-1.5, 1.5]^2`, labelled by the side of the unit circle, with a
    /// tenth of the labels flipped.
    fn circle(n: usize, seed: u64) -> Dataset<f64> {
        let mut s = Stream::new(seed, 1);
        let (mut x, mut y) = (Vec::new(), Vec::new());
        for _ in 0..n {
            let (a, b) = (3.0 * s.uniform() - 1.5, 3.0 * s.uniform() - 1.5);
            let inside = a * a + b * b < 1.0;
            let flip = s.uniform() < 0.1;
            x.extend([a, b]);
            y.push(if inside != flip { 1.0 } else { -1.0 });
        }
        Dataset::new(Features::Dense(DenseMatrix::new(n, 2, x).unwrap()), y).unwrap()
    }

    /// A search of one candidate (C = 1, the default width) ends in the plain fit's model;
    /// a larger grid scores every candidate on every fold and keeps the record.
    #[test]
    fn one_candidate_is_the_plain_fit() {
        let data = circle(240, 3);
        let est = Joker::builder()
            .loss(Loss::SquaredHinge)
            .auto_exact(true)
            .build()
            .unwrap();
        let grid = SearchGrid {
            c: vec![1.0],
            gamma_factors: vec![1.0],
            ..SearchGrid::default()
        };
        let searched = est.search(&data, &grid, |_, _| {}).unwrap();
        let plain = est.fit(&data).unwrap();
        assert_eq!(searched.kernel, plain.kernel);
        assert_eq!(searched.representation, plain.representation);
        let record = searched.training.search.as_ref().unwrap();
        assert_eq!((record.candidates.len(), record.best), (1, 0));
        assert_eq!(record.candidates[0].scores.len(), 3);

        let mut calls = 0;
        let wide = SearchGrid {
            c: vec![10.0, 0.01, 1.0],
            gamma_factors: vec![0.5, 2.0],
            folds: 4,
            seed: 7,
        };
        let m = est.search(&data, &wide, |_, _| calls += 1).unwrap();
        let r = m.training.search.unwrap();
        assert_eq!((r.candidates.len(), calls), (6, 6));
        assert!(r.candidates.iter().all(|c| c.scores.len() == 4));
        // C sorted within each width; the winner is no worse than any other
        assert_eq!(r.candidates[0].c, 0.01);
        assert!(
            r.candidates
                .iter()
                .all(|c| c.mean <= r.candidates[r.best].mean)
        );
        assert_eq!(m.kernel.gamma, r.candidates[r.best].gamma);
        // a grid without values, or with one fold, is refused
        let bad = SearchGrid {
            folds: 1,
            ..SearchGrid::default()
        };
        assert!(est.search(&data, &bad, |_, _| {}).is_err());
    }

    /// Along C, a fit warm-started from the last C's duals reaches the cold fit's optimum.
    #[test]
    fn a_warm_start_along_c_reaches_the_cold_optimum() {
        let data = circle(200, 5);
        let fit = |c: f64, warm: Option<&Model>| {
            Joker::builder()
                .loss(Loss::SquaredHinge)
                .c(c)
                .gamma(0.5)
                .exact()
                .tol(1e-6)
                .build()
                .unwrap()
                .fit_with(
                    &data,
                    FitOptions {
                        warm_start: warm,
                        ..FitOptions::default()
                    },
                )
                .unwrap()
        };
        let first = fit(1.0, None);
        let (warm, cold) = (fit(10.0, Some(&first)), fit(10.0, None));
        let rel = (warm.training.primal - cold.training.primal).abs() / cold.training.primal;
        assert!(
            rel < 1e-5,
            "primal {} against {}",
            warm.training.primal,
            cold.training.primal
        );
        assert!(warm.training.gap <= 1e-6 && cold.training.gap <= 1e-6);
    }

    #[test]
    fn folds_cover_the_rows_once() {
        let order: Vec<usize> = (0..10).rev().collect();
        let mut seen = [0; 10];
        for k in 0..3 {
            let (train, held) = split(&order, 3, k);
            assert_eq!(train.len() + held.len(), 10);
            for &i in &held {
                seen[i] += 1;
                assert!(!train.contains(&i));
            }
        }
        assert!(seen.iter().all(|&s| s == 1));
    }

    #[test]
    fn ties_go_to_the_smaller_c_and_the_default_width() {
        let cand = |c: f64, f: f64, mean: f64| SearchCandidate {
            c,
            gamma_factor: f,
            gamma: f,
            scores: vec![mean],
            mean,
            spread: 0.0,
            iterations: 0,
            seconds: 0.0,
        };
        let v = [
            cand(10.0, 1.0, 0.9),
            cand(1.0, 4.0, 0.9),
            cand(1.0, 1.0, 0.9),
            cand(100.0, 1.0, 0.8),
        ];
        assert_eq!(best_candidate(&v), 2);
        assert_eq!(best_candidate(&v[..2]), 1);
    }
}

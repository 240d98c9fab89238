//! Class probabilities for classifiers whose decision values are not probabilities (the SVMs
//! and the regression losses used as classifiers): Platt scaling.
//!
//! Each decision column `f_t` gets a sigmoid `P(positive | f) = 1 / (1 + exp(A_t f + B_t))`,
//! fitted by maximum likelihood on decision values the column's model did not train on (from
//! cross-validation folds, as LIBSVM's `-b 1`), with Platt's smoothed targets
//! `(N+ + 1) / (N+ + 2)` and `1 / (N- + 2)` so that separable folds do not drive `A` to
//! infinity (Platt, 1999; the Newton iteration with a line search of Lin, Lin and Weng, 2007).
//! The columns' probabilities are then combined into class probabilities the same way as
//! kernel logistic regression's ([`crate::model::Model::predict_proba`]).

use serde::{Deserialize, Serialize};

/// Folds of the cross-validation that gives the calibration's decision values (LIBSVM's).
pub const CALIBRATION_FOLDS: usize = 5;

/// Platt's sigmoid per decision column.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    /// `A_t` per column (negative where larger decision values mean the positive class).
    pub a: Vec<f64>,
    /// `B_t` per column.
    pub b: Vec<f64>,
    /// Cross-validation folds the decision values came from.
    pub folds: usize,
}

impl Calibration {
    /// The probability of column `t`'s positive side (the second class of a binary problem or
    /// a pair, the column's class under one-vs-rest) at decision value `f`.
    pub fn probability(&self, t: usize, f: f64) -> f64 {
        sigmoid(-(self.a[t] * f + self.b[t]))
    }

    /// Whether the calibration has one finite sigmoid per column of `columns`.
    pub fn fits(&self, columns: usize) -> bool {
        self.a.len() == columns
            && self.b.len() == columns
            && self.a.iter().chain(&self.b).all(|v| v.is_finite())
    }
}

/// `1 / (1 + exp(-z))`, without overflow.
pub fn sigmoid(z: f64) -> f64 {
    if z >= 0.0 {
        1.0 / (1.0 + (-z).exp())
    } else {
        let e = z.exp();
        e / (1.0 + e)
    }
}

/// `log(1 + exp(z))`, without overflow.
fn softplus(z: f64) -> f64 {
    if z > 0.0 {
        z + (-z).exp().ln_1p()
    } else {
        z.exp().ln_1p()
    }
}

/// Fits Platt's sigmoid `P(positive | f) = 1 / (1 + exp(A f + B))` to decision values `f`
/// with labels `positive`, returning `(A, B)`.
///
/// With `z_i = A f_i + B` and the smoothed targets `t_i`, the negative log-likelihood is
/// `F = sum_i softplus(z_i) - (1 - t_i) z_i`; its derivative in `z_i` is `t_i - p_i` and its
/// second derivative `p_i (1 - p_i)`, so Newton's step on `(A, B)` solves a 2 x 2 system
/// (with a tiny ridge for a flat Hessian), and a backtracking line search keeps `F`
/// decreasing. `f` holds both classes; with one class only, the smoothed prior is returned.
pub fn platt(f: &[f64], positive: &[bool]) -> (f64, f64) {
    let n_pos = positive.iter().filter(|&&p| p).count() as f64;
    let n_neg = positive.len() as f64 - n_pos;
    let (hi, lo) = ((n_pos + 1.0) / (n_pos + 2.0), 1.0 / (n_neg + 2.0));
    let targets: Vec<f64> = positive.iter().map(|&p| if p { hi } else { lo }).collect();
    let objective = |a: f64, b: f64| -> f64 {
        f.iter()
            .zip(&targets)
            .map(|(&v, &t)| {
                let z = a * v + b;
                softplus(z) - (1.0 - t) * z
            })
            .sum()
    };
    let (mut a, mut b) = (0.0, ((n_neg + 1.0) / (n_pos + 1.0)).ln());
    let mut value = objective(a, b);
    let ridge = 1e-12;
    for _ in 0..100 {
        let (mut ga, mut gb) = (0.0, 0.0);
        let (mut haa, mut hab, mut hbb) = (ridge, 0.0, ridge);
        for (&v, &t) in f.iter().zip(&targets) {
            let p = sigmoid(-(a * v + b));
            let (g, h) = (t - p, p * (1.0 - p));
            ga += g * v;
            gb += g;
            haa += h * v * v;
            hab += h * v;
            hbb += h;
        }
        if ga.abs() < 1e-5 && gb.abs() < 1e-5 {
            break;
        }
        let det = haa * hbb - hab * hab;
        let (da, db) = (-(hbb * ga - hab * gb) / det, -(haa * gb - hab * ga) / det);
        let slope = ga * da + gb * db;
        let mut step = 1.0;
        while step >= 1e-10 {
            let (na, nb) = (a + step * da, b + step * db);
            let v = objective(na, nb);
            if v < value + 1e-4 * step * slope {
                (a, b, value) = (na, nb, v);
                break;
            }
            step /= 2.0;
        }
        if step < 1e-10 {
            break;
        }
    }
    (a, b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Stream;

    /// The negative log-likelihood's gradient at the fit is zero: checked against central
    /// differences of the objective written out independently.
    #[test]
    fn platt_solves_the_smoothed_likelihood() {
        let mut s = Stream::new(7, 1);
        let n = 400;
        let f: Vec<f64> = (0..n).map(|_| 4.0 * s.uniform() - 2.0).collect();
        // labels from a known sigmoid with noise: P(pos | f) = 1 / (1 + exp(-1.5 f + 0.3))
        let positive: Vec<bool> = f
            .iter()
            .map(|&v| s.uniform() < 1.0 / (1.0 + (-1.5 * v + 0.3).exp()))
            .collect();
        let (a, b) = platt(&f, &positive);
        let np = positive.iter().filter(|&&p| p).count() as f64;
        let nn = n as f64 - np;
        let nll = |a: f64, b: f64| -> f64 {
            f.iter()
                .zip(&positive)
                .map(|(&v, &p)| {
                    let t = if p {
                        (np + 1.0) / (np + 2.0)
                    } else {
                        1.0 / (nn + 2.0)
                    };
                    let q = 1.0 / (1.0 + (a * v + b).exp());
                    -(t * q.ln() + (1.0 - t) * (1.0 - q).ln())
                })
                .sum()
        };
        let h = 1e-6;
        let da = (nll(a + h, b) - nll(a - h, b)) / (2.0 * h);
        let db = (nll(a, b + h) - nll(a, b - h)) / (2.0 * h);
        assert!(da.abs() < 1e-3 && db.abs() < 1e-3, "gradient {da} {db}");
        // near the generating sigmoid (400 draws)
        assert!(
            (a + 1.5).abs() < 0.5 && (b - 0.3).abs() < 0.4,
            "A {a} B {b}"
        );
        assert!(nll(a, b) < nll(a * 0.9, b) && nll(a, b) < nll(a, b + 0.05));
    }

    /// Separable values keep a finite slope (the smoothed targets), and the probabilities
    /// rank as the decision values do.
    #[test]
    fn separable_values_keep_a_finite_sigmoid() {
        let f = [-3.0, -2.0, -1.5, 1.0, 2.0, 2.5];
        let positive = [false, false, false, true, true, true];
        let (a, b) = platt(&f, &positive);
        assert!(a.is_finite() && b.is_finite() && a < 0.0, "A {a} B {b}");
        let c = Calibration {
            a: vec![a],
            b: vec![b],
            folds: 5,
        };
        let p: Vec<f64> = f.iter().map(|&v| c.probability(0, v)).collect();
        assert!(p.windows(2).all(|w| w[0] < w[1]));
        assert!(p[0] > 0.0 && p[5] < 1.0);
        // one class only: the smoothed prior
        let (a1, b1) = platt(&[1.0, 2.0], &[true, true]);
        assert_eq!(a1, 0.0);
        assert!((sigmoid(-b1) - 3.0 / 4.0).abs() < 1e-12, "{}", sigmoid(-b1));
    }

    #[test]
    fn sigmoid_and_softplus_do_not_overflow() {
        assert_eq!(sigmoid(-1000.0), 0.0);
        assert_eq!(sigmoid(1000.0), 1.0);
        assert!((softplus(1000.0) - 1000.0).abs() < 1e-9);
        assert!(softplus(-1000.0) >= 0.0);
    }
}

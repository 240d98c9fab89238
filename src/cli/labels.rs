//! Which column of a delimited file holds the labels: what `train` says about it, and the
//! warning when another column looks far more like class labels than the chosen one.

use joker::io::LabelColumn;
use joker::{Dataset, Features, Scalar};

/// At most this many distinct integer values make a column look like class labels.
const MAX_LABEL_VALUES: usize = 32;

/// Another column looks "far more" like labels when its rarest value is this many times as
/// common as the rarest value of the chosen column (a one-hot feature of a label-first file
/// taken for the labels has a rare value: 1.3% of covtype's rows in its last column, against
/// 49.7% for the real labels in its first).
const FAR_MORE: f64 = 4.0;

/// How much a column looks like class labels: `None` unless its values are integers with 2 to
/// [`MAX_LABEL_VALUES`] distinct values; otherwise the share of rows holding the rarest value.
pub fn label_shape(values: impl IntoIterator<Item = f64>) -> Option<f64> {
    let mut counts: Vec<(f64, usize)> = Vec::new();
    let mut n = 0usize;
    for v in values {
        if !v.is_finite() || v.fract() != 0.0 {
            return None;
        }
        n += 1;
        if let Some((_, k)) = counts.iter_mut().find(|(c, _)| *c == v) {
            *k += 1;
        } else if counts.len() == MAX_LABEL_VALUES {
            return None;
        } else {
            counts.push((v, 1));
        }
    }
    if counts.len() < 2 {
        return None;
    }
    let rarest = counts.iter().map(|&(_, k)| k).min().unwrap_or(0);
    Some(rarest as f64 / n as f64)
}

/// Whether a column of shape `other` looks far more like class labels than the chosen
/// labels, of shape `chosen` (both from [`label_shape`]).
pub fn far_more_label_like(other: Option<f64>, chosen: Option<f64>) -> bool {
    match (other, chosen) {
        (Some(_), None) => true,
        (Some(o), Some(c)) => o >= FAR_MORE * c,
        (None, _) => false,
    }
}

/// The zero-based column of the file that holds the labels, for a file of `n_features + 1`
/// fields read with `column`.
pub fn file_column(column: LabelColumn, n_features: usize) -> usize {
    column.resolve(n_features + 1).unwrap_or(n_features)
}

/// `first`, `last` or `N` in words, with the zero-based index: "the last column (54)".
pub fn describe(column: LabelColumn, n_features: usize) -> String {
    let k = file_column(column, n_features);
    match column {
        LabelColumn::First => "the first column (0)".into(),
        LabelColumn::Last => format!("the last column ({k})"),
        LabelColumn::Index(_) => format!("column {k}"),
    }
}

/// A warning when the first or the last column of a delimited file (those not holding the
/// labels) looks far more like class labels than the labels read from `column`; `None` when
/// none does, or when the rows are not a delimited file's dense rows.
pub fn other_label_column<U: Scalar>(data: &Dataset<U>, column: LabelColumn) -> Option<String> {
    let Features::Dense(m) = &data.x else {
        return None;
    };
    let d = m.ncols();
    if d == 0 || m.is_mapped() {
        return None;
    }
    let label = file_column(column, d);
    let chosen = label_shape(data.y.iter().copied());
    // file column j is feature j below the label's column and feature j - 1 above it
    let feature_of = |j: usize| if j < label { j } else { j - 1 };
    let x = m.as_slice();
    for (j, name) in [(0, "first"), (d, "last")] {
        if j == label {
            continue;
        }
        let f = feature_of(j);
        let other = label_shape((0..m.nrows()).map(|i| x[i * d + f].to_f64()));
        if far_more_label_like(other, chosen) {
            return Some(format!(
                "the {name} column ({j}) looks far more like class labels than the labels read from {} (few distinct integers, none rare); if the labels are in the {name} column, give --label-column {name}",
                describe(column, d)
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use joker::DenseMatrix;

    #[test]
    fn shapes_of_label_columns() {
        assert_eq!(label_shape([1.0, -1.0, 1.0, 1.0]), Some(0.25));
        assert_eq!(label_shape([3.0, 3.0]), None, "one value is no labels");
        assert_eq!(label_shape([0.5, 1.0]), None, "fractions are no labels");
        assert_eq!(label_shape((0..40).map(f64::from)), None, "too many values");
        assert_eq!(label_shape([f64::NAN, 1.0]), None);
    }

    #[test]
    fn far_more_like_labels() {
        assert!(far_more_label_like(Some(0.497), Some(0.013)));
        assert!(far_more_label_like(Some(0.2), None));
        assert!(!far_more_label_like(Some(0.3), Some(0.24)));
        assert!(!far_more_label_like(None, Some(0.01)));
    }

    /// A label-first file read with the labels from the last column: its rare one-hot last
    /// column became the labels, the balanced first column a feature.
    #[test]
    fn warns_of_a_label_first_file_read_label_last() {
        let n = 200;
        let mut x = Vec::new();
        let mut y = Vec::new();
        for i in 0..n {
            // file: label (+-1), a real feature, a rare one-hot column (last)
            x.extend([if i % 2 == 0 { 1.0 } else { -1.0 }, (i as f64).sin()]);
            y.push(if i % 50 == 0 { 1.0 } else { 0.0 });
        }
        let data = Dataset::new(Features::Dense(DenseMatrix::new(n, 2, x).unwrap()), y).unwrap();
        let w = other_label_column(&data, LabelColumn::Last).expect("a warning");
        assert!(w.contains("--label-column first"), "{w}");
        assert!(w.contains("the last column (2)"), "{w}");

        // read the right way round, nothing to say
        let mut x = Vec::new();
        let mut y = Vec::new();
        for i in 0..n {
            x.extend([(i as f64).sin(), if i % 50 == 0 { 1.0 } else { 0.0 }]);
            y.push(if i % 2 == 0 { 1.0 } else { -1.0 });
        }
        let data = Dataset::new(Features::Dense(DenseMatrix::new(n, 2, x).unwrap()), y).unwrap();
        assert_eq!(other_label_column(&data, LabelColumn::First), None);
    }
}

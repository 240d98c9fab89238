//! Shared helpers for the integration tests: synthetic data, the real-data directory, and
//! `.npy` files of a data set.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use joker::rng::Stream;
use joker::{Dataset, DenseMatrix, Features};

/// A regression set: `y = sin(2 x0) + 0.5 x1 - 0.3 x2^2 + noise`, `x` uniform in [-2, 2]^d.
pub fn regression(n: usize, d: usize, seed: u64) -> Dataset<f64> {
    let mut s = Stream::new(seed, 77);
    let mut x = Vec::with_capacity(n * d);
    let mut y = Vec::with_capacity(n);
    for _ in 0..n {
        let row: Vec<f64> = (0..d).map(|_| 4.0 * s.uniform() - 2.0).collect();
        let noise = 0.1 * (s.uniform() - 0.5);
        y.push((2.0 * row[0]).sin() + 0.5 * row[1 % d] - 0.3 * row[2 % d].powi(2) + noise);
        x.extend(row);
    }
    Dataset::new(Features::Dense(DenseMatrix::new(n, d, x).unwrap()), y).unwrap()
}

/// The largest absolute difference between two equally long vectors.
pub fn max_diff(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(p, q)| (p - q).abs())
        .fold(0.0, f64::max)
}

/// The sum of the dual coefficients and their absolute sum: with an intercept the first is
/// zero at the optimum, measured against the second.
pub fn dual_balance(alpha: &[f64]) -> (f64, f64) {
    (
        alpha.iter().sum::<f64>(),
        alpha.iter().map(|a| a.abs()).sum::<f64>(),
    )
}

/// A binary set with labels `-1/+1`: the sign of `x0^2 + x1 - 1` with 5% flipped labels.
pub fn binary(n: usize, d: usize, seed: u64) -> Dataset<f64> {
    let mut s = Stream::new(seed, 78);
    let mut x = Vec::with_capacity(n * d);
    let mut y = Vec::with_capacity(n);
    for _ in 0..n {
        let row: Vec<f64> = (0..d).map(|_| 4.0 * s.uniform() - 2.0).collect();
        let mut label = if row[0] * row[0] + row[1 % d] - 1.0 > 0.0 {
            1.0
        } else {
            -1.0
        };
        if s.uniform() < 0.05 {
            label = -label;
        }
        y.push(label);
        x.extend(row);
    }
    Dataset::new(Features::Dense(DenseMatrix::new(n, d, x).unwrap()), y).unwrap()
}

/// Three classes by angle of `(x0, x1)`, labels 0, 1, 2.
pub fn three_classes(n: usize, seed: u64) -> Dataset<f64> {
    let mut s = Stream::new(seed, 79);
    let mut x = Vec::with_capacity(n * 2);
    let mut y = Vec::with_capacity(n);
    for _ in 0..n {
        let (a, b) = (4.0 * s.uniform() - 2.0, 4.0 * s.uniform() - 2.0);
        let ang = b.atan2(a) + std::f64::consts::PI;
        y.push(((ang / (2.0 * std::f64::consts::PI / 3.0)) as usize).min(2) as f64);
        x.extend([a, b]);
    }
    Dataset::new(Features::Dense(DenseMatrix::new(n, 2, x).unwrap()), y).unwrap()
}

/// Whether the environment variable `var` is `1`: an input the tests need is then required,
/// and its absence is a failure rather than a skipped test.
fn required(var: &str) -> bool {
    std::env::var(var).as_deref() == Ok("1")
}

/// A test that cannot run here: under `require_var=1` a panic naming what is missing,
/// otherwise one line `skipped: TEST needs WHAT (set HINT)` on stderr (written directly, so
/// that the test runner's capture of passing tests does not hide it).
#[track_caller]
fn missing(test: &str, what: &str, hint: &str, require_var: &str) {
    if required(require_var) {
        panic!("{test} needs {what} ({require_var}=1; set {hint})");
    }
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr(),
        "skipped: {test} needs {what} (set {hint})"
    );
}

/// The folder of the shared real data sets, looked up when the test runs: `$JOKER_DATA_DIR`,
/// else `../shared/datasets` beside the repository, present when it holds `README.md`.
/// `None` when absent: the test `test` should then return at once; it is skipped with a line
/// on stderr, or fails when `JOKER_REQUIRE_DATA=1` (as `.ci/run` sets).
///
/// ```ignore
/// let Some(dir) = common::data_dir("io::a9a") else { return };
/// ```
#[track_caller]
pub fn data_dir(test: &str) -> Option<PathBuf> {
    let dir = std::env::var_os("JOKER_DATA_DIR")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/datasets"));
    if dir.join("README.md").is_file() {
        Some(dir)
    } else {
        let what = format!(
            "the benchmark data sets, not found at {} (no README.md)",
            dir.display()
        );
        missing(test, &what, "JOKER_DATA_DIR", "JOKER_REQUIRE_DATA");
        None
    }
}

/// The Python with the peer libraries (numpy, scikit-learn), `$JOKER_PYTHON`, looked up when
/// the test runs. `None` when unset or empty: the test `test` should then return at once; it is
/// skipped with a line on stderr, or fails when `JOKER_REQUIRE_PEERS=1` (as `.ci/run` sets).
#[track_caller]
pub fn peer_python(test: &str) -> Option<String> {
    match std::env::var("JOKER_PYTHON") {
        Ok(p) if !p.is_empty() => Some(p),
        _ => {
            missing(
                test,
                "a Python with numpy and scikit-learn",
                "JOKER_PYTHON",
                "JOKER_REQUIRE_PEERS",
            );
            None
        }
    }
}

/// Solves `A x = b` (dense, row-major) by Gaussian elimination with partial pivoting in f64:
/// the independent reference for exact KRR.
pub fn dense_solve(mut a: Vec<f64>, mut b: Vec<f64>) -> Vec<f64> {
    let n = b.len();
    for k in 0..n {
        let p = (k..n)
            .max_by(|&i, &j| a[i * n + k].abs().total_cmp(&a[j * n + k].abs()))
            .unwrap();
        if p != k {
            for j in 0..n {
                a.swap(k * n + j, p * n + j);
            }
            b.swap(k, p);
        }
        for i in k + 1..n {
            let f = a[i * n + k] / a[k * n + k];
            for j in k..n {
                a[i * n + j] -= f * a[k * n + j];
            }
            b[i] -= f * b[k];
        }
    }
    let mut x = vec![0.0; n];
    for i in (0..n).rev() {
        let s: f64 = (i + 1..n).map(|j| a[i * n + j] * x[j]).sum();
        x[i] = (b[i] - s) / a[i * n + i];
    }
    x
}

/// The dual of kernel ridge regression, `a = (K + lambda I)^-1 y` for the `n x n` kernel
/// `k(i, j)`, by [`dense_solve`].
pub fn krr_dual(n: usize, k: impl Fn(usize, usize) -> f64, lambda: f64, y: &[f64]) -> Vec<f64> {
    let mut a = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..n {
            a[i * n + j] = k(i, j) + if i == j { lambda } else { 0.0 };
        }
    }
    dense_solve(a, y.to_vec())
}

/// Converts the LIBSVM file `svm` into a directory of CSR arrays `csr` (`joker convert
/// --csr`).
pub fn write_csr(svm: &std::path::Path, csr: &std::path::Path) {
    let format = joker::io::stream::TextFormat::Libsvm(Default::default());
    joker::io::npy::convert(
        svm,
        &format,
        csr,
        joker::io::npy::Layout::Csr,
        1 << 20,
        |_, _| {},
    )
    .unwrap();
}

/// Writes `data`'s dense rows to `path` (`.npy`, float32) and its labels beside them
/// (`joker::io::npy::labels_path`).
pub fn write_npy(path: &std::path::Path, data: &Dataset<f32>) {
    use joker::io::npy::{RowWriter, labels_path, write_vector};
    let Features::Dense(m) = &data.x else {
        panic!("dense rows only")
    };
    let mut w = RowWriter::create(path, m.ncols()).unwrap();
    for i in 0..m.nrows() {
        w.push(m.row(i)).unwrap();
    }
    assert_eq!(w.finish().unwrap(), m.nrows());
    write_vector(&labels_path(path), &data.y).unwrap();
}

//! The benchmark's data: real splits from `../shared/datasets` and synthetic sets with the
//! shapes of the paper's large data, prepared once (dense, z-scored with training statistics,
//! binary labels +-1, regression targets z-scored) and written as `.npy` for every system.

use std::path::Path;

use joker::io::{CsvOptions, LabelColumn, LibsvmOptions, read_csv, read_libsvm};
use joker::kernel::median_distance;
use joker::rng::{Stream, normal_from};
use joker::{Dataset, DenseMatrix, Features};
use rayon::prelude::*;

use crate::npy;

/// Classification (binary, labels +-1) or regression.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Task {
    /// Binary classification; the metric is test accuracy.
    Classification,
    /// Regression; the metric is test RMSE.
    Regression,
}

/// A prepared train/test split.
pub struct Split {
    /// Row-major `ntr x d` training features.
    pub xtr: Vec<f32>,
    /// Training targets.
    pub ytr: Vec<f64>,
    /// Row-major `nte x d` test features.
    pub xte: Vec<f32>,
    /// Test targets.
    pub yte: Vec<f64>,
    /// Number of features.
    pub d: usize,
    /// The task.
    pub task: Task,
    /// Standard deviation of the raw training target (RMSE in original units is the z-unit
    /// RMSE times this; 1 for classification).
    pub y_scale: f64,
    /// `gamma` of the Gaussian kernel from the median heuristic, `0.5 / median^2`.
    pub gamma: f64,
}

impl Split {
    /// Training rows.
    pub fn ntr(&self) -> usize {
        self.ytr.len()
    }
    /// Test rows.
    pub fn nte(&self) -> usize {
        self.yte.len()
    }

    /// Writes `<prefix>.{xtr,ytr,xte,yte}.npy`.
    pub fn write(&self, prefix: &str) -> std::io::Result<()> {
        npy::write(
            Path::new(&format!("{prefix}.xtr.npy")),
            &[self.ntr(), self.d],
            &self.xtr,
        )?;
        npy::write(
            Path::new(&format!("{prefix}.ytr.npy")),
            &[self.ntr()],
            &self.ytr,
        )?;
        npy::write(
            Path::new(&format!("{prefix}.xte.npy")),
            &[self.nte(), self.d],
            &self.xte,
        )?;
        npy::write(
            Path::new(&format!("{prefix}.yte.npy")),
            &[self.nte()],
            &self.yte,
        )
    }
}

/// Reads the split written by [`Split::write`] as joker datasets `(train, test)`.
pub fn load(prefix: &str) -> joker::Result<(Dataset<f32>, Dataset<f32>)> {
    let part = |x: &str, y: &str| -> joker::Result<Dataset<f32>> {
        let (px, py) = (format!("{prefix}.{x}.npy"), format!("{prefix}.{y}.npy"));
        fn io(path: &str) -> impl Fn(std::io::Error) -> joker::JokerError + '_ {
            move |source| joker::JokerError::Io {
                path: path.into(),
                source,
            }
        }
        let (shape, xs) = npy::read::<f32>(Path::new(&px)).map_err(io(&px))?;
        let (_, ys) = npy::read::<f64>(Path::new(&py)).map_err(io(&py))?;
        Dataset::new(
            Features::Dense(DenseMatrix::new(shape[0], shape[1], xs)?),
            ys,
        )
    };
    Ok((part("xtr", "ytr")?, part("xte", "yte")?))
}

/// The real data sets this benchmark knows, with their task.
pub const REAL: [(&str, Task); 7] = [
    ("ijcnn1", Task::Classification),
    ("a9a", Task::Classification),
    ("w8a", Task::Classification),
    ("covtype", Task::Classification),
    ("higgs", Task::Classification),
    ("cadata", Task::Regression),
    ("cpusmall", Task::Regression),
];

fn dense(x: &Features<f64>) -> Vec<f64> {
    let mut out = vec![0.0; x.nrows() * x.ncols()];
    x.gather_dense(&(0..x.nrows()).collect::<Vec<_>>(), &mut out);
    out
}

/// Raw `(train, test)` of a real set, or `None` when its files are absent.
fn read_real(dir: &Path, name: &str) -> Option<joker::Result<(Dataset<f64>, Dataset<f64>)>> {
    let libsvm = |file: &str, d: Option<usize>| -> Option<joker::Result<_>> {
        let (tr, te) = (
            dir.join("libsvm").join(file),
            dir.join("libsvm").join(format!("{file}.t")),
        );
        if !tr.exists() || !te.exists() {
            return None;
        }
        Some((|| {
            let opts = LibsvmOptions {
                n_features: d,
                ..Default::default()
            };
            let a = read_libsvm::<f64>(&tr, &opts)?;
            let opts = LibsvmOptions {
                n_features: Some(a.x.ncols()),
                ..Default::default()
            };
            Ok((a.clone(), read_libsvm::<f64>(&te, &opts)?))
        })())
    };
    let first = CsvOptions {
        has_header: Some(false),
        label_column: LabelColumn::First,
        ..Default::default()
    };
    let csv_pair = |tr: &Path, te: &Path| -> Option<joker::Result<_>> {
        if !tr.exists() || !te.exists() {
            return None;
        }
        Some((|| {
            Ok((read_csv::<f64>(tr, &first)?, read_csv::<f64>(te, &first)?))
        })())
    };
    match name {
        "ijcnn1" => libsvm("ijcnn1", None),
        "a9a" => libsvm("a9a", Some(123)),
        "w8a" => libsvm("w8a", Some(300)),
        "cpusmall" => libsvm("cpusmall_scale", None),
        "covtype" => csv_pair(
            &dir.join("covtype_small/covtype.5000.train.csv"),
            &dir.join("covtype_small/covtype.5000.test.csv"),
        ),
        "higgs" => csv_pair(
            &dir.join("higgs_small/binary.train"),
            &dir.join("higgs_small/binary.test"),
        ),
        "cadata" => {
            let path = dir.join("cadata/cal_housing.data");
            if !path.exists() {
                return None;
            }
            Some((|| {
                let all = read_csv::<f64>(&path, &CsvOptions::default())?;
                let x = dense(&all.x);
                let d = all.x.ncols();
                let pick = |test: bool| -> joker::Result<Dataset<f64>> {
                    let rows: Vec<usize> =
                        (0..all.len()).filter(|i| (i % 5 == 0) == test).collect();
                    let v = rows
                        .iter()
                        .flat_map(|&i| x[i * d..(i + 1) * d].iter().copied())
                        .collect();
                    Dataset::new(
                        Features::Dense(DenseMatrix::new(rows.len(), d, v)?),
                        rows.iter().map(|&i| all.y[i]).collect(),
                    )
                };
                Ok((pick(false)?, pick(true)?))
            })())
        }
        _ => None,
    }
}

/// Loads and prepares a real set; `None` when absent.
pub fn real(dir: &Path, name: &str, task: Task) -> Option<joker::Result<Split>> {
    let raw = read_real(dir, name)?;
    Some(raw.and_then(|(tr, te)| prepare(&tr, &te, task)))
}

/// Dense, z-scored features; labels to +-1 (the larger label is +1) or z-scored targets.
fn prepare(tr: &Dataset<f64>, te: &Dataset<f64>, task: Task) -> joker::Result<Split> {
    let d = tr.x.ncols();
    let (xtr, xte) = (dense(&tr.x), dense(&te.x));
    let ntr = tr.len() as f64;
    let mut mean = vec![0.0; d];
    for row in xtr.chunks_exact(d) {
        for (m, v) in mean.iter_mut().zip(row) {
            *m += v / ntr;
        }
    }
    let mut sd = vec![0.0; d];
    for row in xtr.chunks_exact(d) {
        for ((s, v), m) in sd.iter_mut().zip(row).zip(&mean) {
            *s += (v - m) * (v - m) / ntr;
        }
    }
    let sd: Vec<f64> = sd
        .iter()
        .map(|v| if *v > 0.0 { v.sqrt() } else { 1.0 })
        .collect();
    let z = |x: &[f64]| -> Vec<f32> {
        x.chunks_exact(d)
            .flat_map(|row| {
                row.iter()
                    .zip(&mean)
                    .zip(&sd)
                    .map(|((v, m), s)| ((v - m) / s) as f32)
            })
            .collect()
    };
    let (ytr, yte, y_scale) = match task {
        Task::Classification => {
            let top = tr.y.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let pm = |y: &[f64]| {
                y.iter()
                    .map(|&v| if v == top { 1.0 } else { -1.0 })
                    .collect()
            };
            (pm(&tr.y), pm(&te.y), 1.0)
        }
        Task::Regression => {
            let ym = tr.y.iter().sum::<f64>() / ntr;
            let ys = (tr.y.iter().map(|v| (v - ym).powi(2)).sum::<f64>() / ntr).sqrt();
            let zy = |y: &[f64]| y.iter().map(|v| (v - ym) / ys).collect();
            (zy(&tr.y), zy(&te.y), ys)
        }
    };
    finish(z(&xtr), ytr, z(&xte), yte, d, task, y_scale)
}

fn finish(
    xtr: Vec<f32>,
    ytr: Vec<f64>,
    xte: Vec<f32>,
    yte: Vec<f64>,
    d: usize,
    task: Task,
    y_scale: f64,
) -> joker::Result<Split> {
    let m = median_distance(
        &Features::Dense(DenseMatrix::new(ytr.len(), d, xtr.clone())?),
        false,
        1,
    );
    Ok(Split {
        xtr,
        ytr,
        xte,
        yte,
        d,
        task,
        y_scale,
        gamma: 0.5 / (m * m),
    })
}

/// A synthetic shape: the dimension and task of one of the paper's large sets.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    /// Name in tables, e.g. `HIGGS-like`.
    pub name: &'static str,
    /// Input dimension.
    pub d: usize,
    /// Task.
    pub task: Task,
}

/// HIGGS (11M x 28, binary), SUSY (5M x 18, binary) and YearPredictionMSD (515k x 90,
/// regression) shapes.
pub const SHAPES: [Shape; 3] = [
    Shape {
        name: "HIGGS-like",
        d: 28,
        task: Task::Classification,
    },
    Shape {
        name: "SUSY-like",
        d: 18,
        task: Task::Classification,
    },
    Shape {
        name: "MSD-like",
        d: 90,
        task: Task::Regression,
    },
];

/// Standard normal inputs and a smooth random target
/// `f(x) = sum_k a_k cos(w_k . x / sqrt(d) + b_k)` over 64 random directions; classification
/// takes `sign(f)` with 5% of the labels flipped, regression adds noise of 0.3 sd(f) and is
/// z-scored. Row `i` depends only on `(seed, i)`, so a larger `n` extends a smaller one.
pub fn synthetic(shape: Shape, n: usize, n_test: usize, seed: u64) -> joker::Result<Split> {
    const K: usize = 64;
    let d = shape.d;
    let mut s = Stream::new(seed, u32::MAX);
    let mut normal = || normal_from([s.next_u32(), s.next_u32(), s.next_u32(), s.next_u32()]);
    let w: Vec<f64> = (0..K * d)
        .map(|_| normal() / (d as f64).sqrt() * 1.5)
        .collect();
    let ab: Vec<(f64, f64)> = (0..K)
        .map(|_| (normal(), std::f64::consts::TAU * normal().abs()))
        .collect();
    let rows = |offset: usize, count: usize| -> (Vec<f32>, Vec<f64>) {
        let out: Vec<(Vec<f32>, f64)> = (offset..offset + count)
            .into_par_iter()
            .map(|i| {
                let mut r = Stream::new(seed, i as u32);
                let x: Vec<f64> = (0..d)
                    .map(|_| normal_from([r.next_u32(), r.next_u32(), r.next_u32(), r.next_u32()]))
                    .collect();
                let f: f64 = (0..K)
                    .map(|k| {
                        let z: f64 = w[k * d..(k + 1) * d]
                            .iter()
                            .zip(&x)
                            .map(|(a, b)| a * b)
                            .sum();
                        ab[k].0 * (z + ab[k].1).cos()
                    })
                    .sum::<f64>()
                    / (K as f64).sqrt();
                let y = match shape.task {
                    Task::Classification => {
                        let flip = r.uniform() < 0.05;
                        if (f >= 0.0) != flip { 1.0 } else { -1.0 }
                    }
                    Task::Regression => {
                        f + 0.3
                            * normal_from([r.next_u32(), r.next_u32(), r.next_u32(), r.next_u32()])
                    }
                };
                (x.iter().map(|&v| v as f32).collect(), y)
            })
            .collect();
        let y = out.iter().map(|r| r.1).collect();
        (out.into_iter().flat_map(|r| r.0).collect(), y)
    };
    // the test rows come from the far end of the index range, disjoint from any train size
    let (xtr, mut ytr) = rows(0, n);
    let (xte, mut yte) = rows(u32::MAX as usize / 2, n_test);
    let mut y_scale = 1.0;
    if shape.task == Task::Regression {
        let nt = ytr.len() as f64;
        let ym = ytr.iter().sum::<f64>() / nt;
        let ys = (ytr.iter().map(|v| (v - ym).powi(2)).sum::<f64>() / nt).sqrt();
        for v in ytr.iter_mut().chain(yte.iter_mut()) {
            *v = (*v - ym) / ys;
        }
        y_scale = ys;
    }
    finish(xtr, ytr, xte, yte, d, shape.task, y_scale)
}

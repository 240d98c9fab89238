//! Where the rows of a distributed fit live. Each rank reads a contiguous share of the file
//! ([`Partition::File`]); the other partitions move rows between the ranks first, with one
//! all-to-all exchange: [`Partition::Random`] spreads them by a seeded hash of their row
//! number, [`Partition::KMeans`] puts similar rows together (parallel block minimization's
//! block-diagonal model then leaves out less of the Hessian).
//!
//! k-means runs on a sample: every rank contributes up to `20,000 / K` of its rows
//! (standardised over all ranks), every rank runs the same seeded Lloyd iterations on the
//! gathered sample and gets the same `K` centres, then sends each of its rows to the nearest
//! centre's rank that still has room (at most `1.05 n_r / K` of its rows per rank).

use super::Collective;
use crate::data::{CsrMatrix, Dataset, DenseMatrix, Features};
use crate::error::{JokerError, Result};
use crate::preprocess::Standardizer;
use crate::rng::{Stream, streams};
use crate::scalar::Scalar;

/// How the rows are placed on the ranks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Partition {
    /// As read: contiguous shares of the file, in rank order.
    #[default]
    File,
    /// Spread by a seeded hash of each row's number in the file.
    Random,
    /// Similar rows on the same rank (k-means with one centre per rank).
    KMeans,
}

/// Rows k-means is fitted on, over all ranks.
pub const KMEANS_SAMPLE: usize = 20_000;
/// Lloyd iterations.
const KMEANS_ITERS: usize = 20;
/// Most features a k-means partition handles (its sample is dense).
pub const KMEANS_MAX_FEATURES: usize = 4096;

/// This rank's rows after `how` (every rank calls it; `first_row` is this rank's first row in
/// the file). `File` returns a copy.
pub fn place<U: Scalar>(
    data: &Dataset<U>,
    how: Partition,
    seed: u64,
    first_row: usize,
    comm: &dyn Collective,
) -> Result<Dataset<U>> {
    let k = comm.size();
    let dest: Vec<usize> = match how {
        Partition::File => return Ok(data.clone()),
        Partition::Random => (0..data.len())
            .map(|i| (mix(seed ^ (first_row + i) as u64) % k as u64) as usize)
            .collect(),
        Partition::KMeans => nearest_with_room(data, &centres(data, seed, comm)?, k),
    };
    redistribute(data, &dest, comm)
}

/// A 64-bit mix (splitmix64's finaliser): row numbers to well spread ranks.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Row `i` of `x`, dense and standardised, into `out`.
fn dense_row<U: Scalar>(x: &Features<U>, s: &Standardizer, i: usize, out: &mut [f64]) {
    out.iter_mut().zip(&s.center).for_each(|(o, c)| *o = -c);
    match x {
        Features::Dense(m) => {
            for (o, v) in out.iter_mut().zip(m.row(i)) {
                *o += v.to_f64();
            }
        }
        Features::Sparse(m) => {
            let (idx, val) = m.row(i);
            for (j, v) in idx.iter().zip(val) {
                out[*j as usize] += v.to_f64();
            }
        }
    }
    out.iter_mut().zip(&s.scale).for_each(|(o, sc)| *o /= sc);
}

/// The `K` centres (`K x d`, row-major), the same on every rank.
fn centres<U: Scalar>(data: &Dataset<U>, seed: u64, comm: &dyn Collective) -> Result<Vec<f64>> {
    let (n, d, k) = (data.len(), data.x.ncols(), comm.size());
    if d > KMEANS_MAX_FEATURES {
        return Err(JokerError::Unsupported(format!(
            "a k-means partition handles at most {KMEANS_MAX_FEATURES} features, the data has {d}"
        )));
    }
    let s = Standardizer::fit_over(&data.x, comm)?;
    let mut order: Vec<usize> = (0..n).collect();
    Stream::new(seed ^ comm.rank() as u64, streams::PARTITION).shuffle(&mut order);
    let take = n.min(KMEANS_SAMPLE.div_ceil(k));
    let mut local = vec![0.0; take * d];
    for (r, &i) in order[..take].iter().enumerate() {
        dense_row(&data.x, &s, i, &mut local[r * d..(r + 1) * d]);
    }
    let sample: Vec<f64> = comm.gather(&local)?.concat();
    let m = sample.len() / d.max(1);
    if m < k {
        return Err(JokerError::EmptyData(format!(
            "a k-means partition into {k} parts needs at least {k} rows, the data has {m}"
        )));
    }
    // seeded start: K sample rows
    let mut pick: Vec<usize> = (0..m).collect();
    Stream::new(seed, streams::PARTITION).shuffle(&mut pick);
    let mut c: Vec<f64> = pick[..k]
        .iter()
        .flat_map(|&r| sample[r * d..(r + 1) * d].iter().copied())
        .collect();
    for _ in 0..KMEANS_ITERS {
        let mut sum = vec![0.0; k * d];
        let mut count = vec![0usize; k];
        for r in 0..m {
            let row = &sample[r * d..(r + 1) * d];
            let best = (0..k)
                .min_by(|&a, &b| sq_dist(row, &c[a * d..]).total_cmp(&sq_dist(row, &c[b * d..])))
                .unwrap_or(0);
            count[best] += 1;
            sum[best * d..(best + 1) * d]
                .iter_mut()
                .zip(row)
                .for_each(|(s, v)| *s += v);
        }
        for j in 0..k {
            if count[j] > 0 {
                for t in 0..d {
                    c[j * d + t] = sum[j * d + t] / count[j] as f64;
                }
            }
        }
    }
    // the centres in standardised units; rows are compared in the same units below
    let mut out = c;
    out.extend(s.center.iter().chain(&s.scale));
    Ok(out)
}

fn sq_dist(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum()
}

/// Each row's rank: the nearest centre that still has room (rows in their order).
fn nearest_with_room<U: Scalar>(data: &Dataset<U>, centres: &[f64], k: usize) -> Vec<usize> {
    let (n, d) = (data.len(), data.x.ncols());
    let c = &centres[..k * d];
    let s = Standardizer {
        center: centres[k * d..k * d + d].to_vec(),
        scale: centres[k * d + d..].to_vec(),
    };
    let room = ((1.05 * n as f64 / k as f64).ceil() as usize).max(1);
    let mut used = vec![0usize; k];
    let mut row = vec![0.0; d];
    (0..n)
        .map(|i| {
            dense_row(&data.x, &s, i, &mut row);
            let mut by: Vec<(f64, usize)> =
                (0..k).map(|j| (sq_dist(&row, &c[j * d..]), j)).collect();
            by.sort_by(|a, b| a.0.total_cmp(&b.0));
            let j = by
                .iter()
                .map(|&(_, j)| j)
                .find(|&j| used[j] < room)
                .unwrap_or(by[0].1);
            used[j] += 1;
            j
        })
        .collect()
}

/// Sends row `i` to rank `dest[i]`; returns the rows this rank receives, in rank order.
/// A row travels as `[y, x...]` (dense) or `[y, nnz, indices..., values...]` (sparse), as f64
/// (exact for f32 and f64 values).
pub fn redistribute<U: Scalar>(
    data: &Dataset<U>,
    dest: &[usize],
    comm: &dyn Collective,
) -> Result<Dataset<U>> {
    let (k, d) = (comm.size(), data.x.ncols());
    let mut parts: Vec<Vec<f64>> = vec![Vec::new(); k];
    for (i, &q) in dest.iter().enumerate() {
        let p = &mut parts[q];
        p.push(data.y[i]);
        match &data.x {
            Features::Dense(m) => p.extend(m.row(i).iter().map(|v| v.to_f64())),
            Features::Sparse(m) => {
                let (idx, val) = m.row(i);
                p.push(idx.len() as f64);
                p.extend(idx.iter().map(|&j| j as f64));
                p.extend(val.iter().map(|v| v.to_f64()));
            }
        }
    }
    let got = comm.exchange(&parts)?;
    let mut y = Vec::new();
    let x = match &data.x {
        Features::Dense(_) => {
            let mut x = Vec::new();
            for part in &got {
                for row in part.chunks_exact(d + 1) {
                    y.push(row[0]);
                    x.extend(row[1..].iter().map(|&v| U::from_f64(v)));
                }
            }
            if y.is_empty() {
                return Err(no_rows(comm));
            }
            Features::Dense(DenseMatrix::new(y.len(), d, x)?)
        }
        Features::Sparse(_) => {
            let (mut indptr, mut indices, mut values) = (vec![0usize], Vec::new(), Vec::new());
            for part in &got {
                let mut at = 0;
                while at < part.len() {
                    y.push(part[at]);
                    let nnz = part[at + 1] as usize;
                    let idx = &part[at + 2..at + 2 + nnz];
                    let val = &part[at + 2 + nnz..at + 2 + 2 * nnz];
                    indices.extend(idx.iter().map(|&j| j as u32));
                    values.extend(val.iter().map(|&v| U::from_f64(v)));
                    indptr.push(indices.len());
                    at += 2 + 2 * nnz;
                }
            }
            if y.is_empty() {
                return Err(no_rows(comm));
            }
            Features::Sparse(CsrMatrix::new(y.len(), d, indptr, indices, values)?)
        }
    };
    Dataset::new(x, y)
}

fn no_rows(comm: &dyn Collective) -> JokerError {
    JokerError::EmptyData(format!(
        "rank {} of {} received no rows from the partition: use fewer ranks",
        comm.rank(),
        comm.size()
    ))
}

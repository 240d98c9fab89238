//! The exact kernel formed once: [`CachedExact`] keeps `K(X, X)` (`n x n`, in the working
//! precision) in memory, so that a DBCD-TR iteration reads `K_BB` and the columns `K(X, X_B)`
//! instead of evaluating `b^2 d + n b d` kernel entries again. It costs `n^2` values of memory
//! and one pass of `n^2 d` to form; a fit takes it when that fits its cache budget
//! ([`SolverConfig::kernel_cache`](crate::solver::SolverConfig)).

use rayon::prelude::*;

use super::cpu::clear_upper_state;
use super::{Backend, BlockEngine};
use crate::data::Features;
use crate::error::Result;
use crate::kernel::Kernel;
use crate::memory::try_filled;
use crate::scalar::Scalar;

/// Rows of `K` formed per kernel tile (`rows x n` f64 of scratch).
const FORM_ROWS: usize = 256;
/// Rows per task of the update `beta += K(X, X_B) delta`.
const ADD_ROWS: usize = 256;

/// Bytes of the cached kernel of `n` rows in precision `T`.
pub fn cached_kernel_bytes<T>(n: usize) -> usize {
    n.saturating_mul(n).saturating_mul(std::mem::size_of::<T>())
}

/// [`BlockEngine`] over a cached exact kernel. Positions are those of `order` (a block is a
/// contiguous range of them): `K[p][q] = k(x_order[p], x_order[q])`, and `beta = K alpha` is
/// kept in the same order, so a block's `g` and its columns of `K` are contiguous.
pub struct CachedExact<'a, T> {
    order: &'a [usize],
    targets: usize,
    /// `K` in `order`'s positions, row-major `n x n`.
    k: Vec<T>,
    /// `beta = K alpha` in `order`'s positions, `n x T` column-major.
    beta: Vec<f64>,
    cur: (usize, usize),
}

impl<'a, T: Scalar> CachedExact<'a, T> {
    /// Forms `K(X, X)` for the rows of `x` in the order `order` (`beta = 0`).
    pub fn new(
        backend: &'a dyn Backend<T>,
        kernel: &'a Kernel,
        x: &'a Features<T>,
        order: &'a [usize],
        targets: usize,
    ) -> Result<Self> {
        let (n, d) = (x.nrows(), x.ncols());
        crate::backend::check_order(order, n)?;
        let mut k = try_filled(n * n, T::default(), "the cached kernel matrix")?;
        let mut xs = try_filled(n * d, T::default(), "the rows in block order")?;
        x.gather_dense(order, &mut xs);
        let mut tile = try_filled(FORM_ROWS.min(n.max(1)) * n, 0.0f64, "a kernel tile")?;
        for p0 in (0..n).step_by(FORM_ROWS) {
            let rows = FORM_ROWS.min(n - p0);
            let xi = &xs[p0 * d..(p0 + rows) * d];
            backend.kernel_tile(kernel, xi, rows, &xs, n, d, &mut tile[..rows * n]);
            for (o, v) in k[p0 * n..(p0 + rows) * n].iter_mut().zip(&tile) {
                *o = T::from_f64(*v);
            }
        }
        Ok(CachedExact {
            order,
            targets,
            k,
            beta: try_filled(n * targets, 0.0, "beta = K alpha")?,
            cur: (0, 0),
        })
    }

    fn n(&self) -> usize {
        self.order.len()
    }

    /// `beta[:, t] += K[:, cols] v[:, t]` for the contiguous positions `cols` and `v`
    /// (`cols.len() x T`, column-major), accumulated in f64, over the columns where `v` is not
    /// zero only (an SVM's block moves few of its coordinates once the support settles): one
    /// pass over each row's segment for one target with every column moving, otherwise an f64
    /// GEMM on row chunks with the moving columns gathered, each segment read once.
    fn add_columns(&mut self, cols: std::ops::Range<usize>, v: &[f64]) {
        let (n, len, tt) = (self.n(), cols.len(), self.targets);
        let v = &v[..len * tt];
        let moving: Vec<usize> = (0..len)
            .filter(|&j| (0..tt).any(|t| v[t * len + j] != 0.0))
            .collect();
        if moving.is_empty() {
            return;
        }
        let k = &self.k;
        if tt == 1 && moving.len() == len {
            self.beta[..n]
                .par_chunks_mut(ADD_ROWS)
                .enumerate()
                .for_each(|(c, out)| {
                    let mut dot = [0.0];
                    for (r, o) in out.iter_mut().enumerate() {
                        let p = c * ADD_ROWS + r;
                        T::rows_dot(&k[p * n + cols.start..p * n + cols.end], v, &mut dot);
                        *o += dot[0];
                    }
                });
            return;
        }
        let na = moving.len();
        let vm: Vec<f64> = (0..tt)
            .flat_map(|t| moving.iter().map(move |&j| v[t * len + j]))
            .collect();
        let vm = faer::MatRef::from_column_major_slice(&vm, na, tt);
        let sums: Vec<(usize, Vec<f64>)> = (0..n.div_ceil(ADD_ROWS))
            .into_par_iter()
            .map(|c| {
                let (p0, rows) = (c * ADD_ROWS, ADD_ROWS.min(n - c * ADD_ROWS));
                let mut kc = vec![0.0; rows * na];
                for (r, row) in kc.chunks_exact_mut(na).enumerate() {
                    let seg = &k[(p0 + r) * n + cols.start..(p0 + r) * n + cols.end];
                    row.iter_mut()
                        .zip(&moving)
                        .for_each(|(o, &j)| *o = seg[j].to_f64());
                }
                let mut out = vec![0.0; rows * tt];
                faer::linalg::matmul::matmul(
                    faer::MatMut::from_column_major_slice_mut(&mut out, rows, tt),
                    faer::Accum::Replace,
                    faer::MatRef::from_row_major_slice(&kc, rows, na),
                    vm,
                    1.0,
                    faer::Par::Seq,
                );
                clear_upper_state();
                (p0, out)
            })
            .collect();
        for (p0, out) in sums {
            let rows = out.len() / tt;
            for t in 0..tt {
                let beta = &mut self.beta[t * n + p0..t * n + p0 + rows];
                beta.iter_mut()
                    .zip(&out[t * rows..(t + 1) * rows])
                    .for_each(|(b, s)| *b += s);
            }
        }
    }
}

impl<T: Scalar> BlockEngine<T> for CachedExact<'_, T> {
    fn load_block(&mut self, start: usize, len: usize) -> Result<()> {
        if start + len > self.n() {
            return Err(crate::error::invalid(
                "block",
                format!("rows {start}..{} exceed the {} rows", start + len, self.n()),
            ));
        }
        self.cur = (start, len);
        Ok(())
    }

    fn block_gram(&mut self, kbb: Option<&mut [f64]>, g: &mut [f64]) -> Result<()> {
        let ((start, nb), n) = (self.cur, self.n());
        if let Some(kbb) = kbb {
            for r in 0..nb {
                let row = &self.k[(start + r) * n + start..(start + r) * n + start + nb];
                for (o, v) in kbb[r * nb..(r + 1) * nb].iter_mut().zip(row) {
                    *o = v.to_f64();
                }
            }
        }
        for t in 0..self.targets {
            g[t * nb..(t + 1) * nb].copy_from_slice(&self.beta[t * n + start..t * n + start + nb]);
        }
        Ok(())
    }

    /// `beta += K(X, X_B) delta` from the cached columns.
    fn update(&mut self, delta: &[f64]) -> Result<()> {
        let (start, nb) = self.cur;
        self.add_columns(start..start + nb, delta);
        Ok(())
    }

    fn set_alpha(&mut self, alpha: &[f64]) -> Result<()> {
        let (n, tt) = (self.n(), self.targets);
        self.beta.fill(0.0);
        let mut ordered = vec![0.0; n * tt];
        for t in 0..tt {
            for (p, &i) in self.order.iter().enumerate() {
                ordered[t * n + p] = alpha[t * n + i];
            }
        }
        self.add_columns(0..n, &ordered);
        Ok(())
    }

    fn decision(&mut self) -> Result<Vec<f64>> {
        let (n, tt) = (self.n(), self.targets);
        let mut out = vec![0.0; n * tt];
        for t in 0..tt {
            for (p, &i) in self.order.iter().enumerate() {
                out[t * n + i] = self.beta[t * n + p];
            }
        }
        Ok(out)
    }

    fn theta(&mut self, _out: &mut [f64]) -> Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::HostExact;
    use crate::backend::cpu::Cpu;
    use crate::data::DenseMatrix;
    use crate::kernel::KernelKind;
    use crate::rng::Stream;

    fn random(n: usize, seed: u64) -> Vec<f64> {
        let mut s = Stream::new(seed, 1);
        (0..n).map(|_| 4.0 * s.uniform() - 2.0).collect()
    }

    /// The cached engine's block (`K_BB`, `g`), updates, `set_alpha` and decision values match
    /// the streaming engine's over blocks of every position and the short last block (sizes
    /// that are no multiple of the row chunks), with one and two targets, updates that move
    /// every coordinate and updates that move a few.
    #[test]
    fn the_cached_engine_matches_the_streaming_engine() {
        for tt in [1, 2] {
            engines_agree(tt);
        }
    }

    fn engines_agree(tt: usize) {
        let (n, d, b) = (1100, 4, 130);
        let x = Features::Dense(DenseMatrix::new(n, d, random(n * d, 1)).unwrap());
        let kernel = Kernel {
            kind: KernelKind::Laplacian,
            gamma: 0.3,
        };
        let mut order: Vec<usize> = (0..n).collect();
        Stream::new(5, 2).shuffle(&mut order);
        let mut cached = CachedExact::new(&Cpu, &kernel, &x, &order, tt).unwrap();
        let mut streamed = HostExact::new(&Cpu, &kernel, &x, &order, tt, b).unwrap();
        let alpha = random(n * tt, 3);
        cached.set_alpha(&alpha).unwrap();
        streamed.set_alpha(&alpha).unwrap();
        let close = |a: &[f64], b: &[f64], what: &str| {
            for (i, (p, q)) in a.iter().zip(b).enumerate() {
                assert!(
                    (p - q).abs() <= 1e-9 * (1.0 + q.abs()),
                    "{what}[{i}]: {p} vs {q}"
                );
            }
        };
        for step in 0..9 {
            let start = (step * 5 % 9) * b;
            let len = b.min(n - start);
            let (mut kc, mut gc) = (vec![f64::NAN; len * len], vec![f64::NAN; len * tt]);
            let (mut ks, mut gs) = (vec![f64::NAN; len * len], vec![f64::NAN; len * tt]);
            cached.load_block(start, len).unwrap();
            cached.block_gram(Some(&mut kc), &mut gc).unwrap();
            streamed.load_block(start, len).unwrap();
            streamed.block_gram(Some(&mut ks), &mut gs).unwrap();
            close(&kc, &ks, &format!("step {step} K_BB"));
            close(&gc, &gs, &format!("step {step} g"));
            // moves in every column, then in a few (zeros elsewhere, in both targets or one)
            let mut delta = random(len * tt, 10 + step as u64);
            if step % 3 == 1 {
                for (j, dv) in delta.iter_mut().enumerate() {
                    if j % len % 7 != 0 && j % 11 != 0 {
                        *dv = 0.0;
                    }
                }
            }
            cached.update(&delta).unwrap();
            streamed.update(&delta).unwrap();
        }
        close(
            &cached.decision().unwrap(),
            &streamed.decision().unwrap(),
            "decision",
        );
        assert!(cached.load_block(n - 10, 11).is_err());
    }
}

//! The exact kernel formed once: [`CachedExact`] keeps `K(X, X)` (`n x n`, in the working
//! precision) in memory, so that a DBCD-TR iteration reads `K_BB` and the columns `K(X, X_B)`
//! instead of evaluating `b^2 d + n b d` kernel entries again. It costs `n^2` values of memory
//! and one pass of `n^2 d` to form; a fit takes it when that fits its cache budget
//! ([`SolverConfig::kernel_cache`](crate::solver::SolverConfig)).
//!
//! For an SVM's sparse dual the matrix can also be formed on demand ([`Formation::OnDemand`]):
//! the rows of the coordinates that move, when they first move, as LIBSVM computes the columns
//! its working sets touch; most coordinates of a separable problem never leave zero.

use std::any::Any;
use std::cell::{Cell, RefCell};

use rayon::prelude::*;

use super::cpu::{Tile, clear_upper_state, kernel_tile_on, squared_norms};
use super::{Backend, BlockEngine};
use crate::data::Features;
use crate::error::Result;
use crate::kernel::Kernel;
use crate::memory::{try_filled, try_zeroed};
use crate::scalar::Scalar;

/// Rows of `K` formed per kernel tile.
const FORM_ROWS: usize = 128;
/// Columns per kernel tile: `FORM_ROWS x FORM_COLS` f64 (512 KiB) stay in a core's cache
/// between their formation and their two writes.
const FORM_COLS: usize = 512;
/// Rows per task of the transposed writes of a formed tile.
const TRANSPOSE_ROWS: usize = 32;
/// Rows per task when the rows not formed yet copy their formed columns.
const COPY_ROWS: usize = 256;
/// Rows per task of the update `beta += K(X, X_B) delta`.
const ADD_ROWS: usize = 256;
/// Columns per task of the update from rows at any positions ([`CachedExact::add_rows`]).
const SPAN: usize = 2048;

/// Bytes of the cached kernel of `n` rows in precision `T`.
pub fn cached_kernel_bytes<T>(n: usize) -> usize {
    n.saturating_mul(n).saturating_mul(std::mem::size_of::<T>())
}

/// Whether an exact fit of `n` rows in precision `T` keeps its kernel ([`CachedExact`]) under
/// the kernel cache `budget` in bytes.
pub fn caches_kernel<T>(n: usize, budget: usize) -> bool {
    cached_kernel_bytes::<T>(n) <= budget
}

/// Share of the rows formed on demand past which the rest are formed at once: by then most of
/// the matrix is read anyway, and whole tiles cost less per value than rows one by one.
const ON_DEMAND_SHARE: f64 = 0.4;

/// How [`CachedExact`] forms `K`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Formation {
    /// All of it at the start, over its lower triangle (`n^2 / 2` kernel values).
    Whole,
    /// A row when its coordinate first moves (`n` values each; `K_BB` of a block with rows not
    /// yet formed from the block's own rows), as LIBSVM computes the columns its working sets
    /// touch. The whole matrix at the first step where most of that step's block moves (most
    /// rows will be read), and the rest at once, by symmetry from the formed rows, past a share
    /// of the rows. For duals that stay sparse ([`crate::loss::Loss::sparse_dual`]).
    OnDemand,
}

/// The state of a kernel formed on demand: the rows in block order (to form rows from) and
/// which rows of `K` hold their values.
struct Pending<T> {
    xs: Vec<T>,
    /// The squared norms of the rows of `xs`, which every row's tiles take.
    norms: Vec<f64>,
    formed: Vec<bool>,
    count: usize,
}

/// Share of the first step's block that moves above which the matrix is formed whole at once:
/// on separable problems (few support vectors) a third to a half of a first block moves, on
/// the others nearly all of it.
const FIRST_STEP_SHARE: f64 = 2.0 / 3.0;

/// Rows of `K_BB` per task when a block's kernel is gathered from the cache.
const GATHER_ROWS: usize = 32;

/// [`BlockEngine`] over a cached exact kernel. Positions are those of `order` (a block is a
/// contiguous range of them): `K[p][q] = k(x_order[p], x_order[q])`, and `beta = K alpha` is
/// kept in the same order, so a block's `g` and its columns of `K` are contiguous.
pub struct CachedExact<'a, T: Scalar> {
    backend: &'a dyn Backend<T>,
    kernel: &'a Kernel,
    d: usize,
    order: &'a [usize],
    targets: usize,
    /// `K` in `order`'s positions, row-major `n x n` (empty until the first rows are formed on
    /// demand).
    k: Vec<T>,
    /// `beta = K alpha` in `order`'s positions, `n x T` column-major.
    beta: Vec<f64>,
    cur: Current,
    /// `Some` while `K` is formed on demand and some of its rows are not.
    pending: Option<Pending<T>>,
}

/// The current block: consecutive positions, or any distinct ones (a greedy working set).
enum Current {
    Range(usize, usize),
    Positions(Vec<usize>),
}

impl<'a, T: Scalar> CachedExact<'a, T> {
    /// The engine of `K(X, X)` for the rows of `x` in the order `order` (`beta = 0`), formed
    /// now or on demand.
    pub fn new(
        backend: &'a dyn Backend<T>,
        kernel: &'a Kernel,
        x: &'a Features<T>,
        order: &'a [usize],
        targets: usize,
        formation: Formation,
    ) -> Result<Self> {
        let (n, d) = (x.nrows(), x.ncols());
        crate::backend::check_order(order, n)?;
        let mut xs = try_filled(n * d, T::default(), "the rows in block order")?;
        x.gather_dense(order, &mut xs);
        let (k, pending) = match formation {
            Formation::Whole => (form_whole(backend, kernel, &xs, n, d)?, None),
            Formation::OnDemand => {
                let pending = Pending {
                    norms: squared_norms(&xs, n, d),
                    xs,
                    formed: vec![false; n],
                    count: 0,
                };
                // allocated at the first rows formed: a first step that forms the whole
                // matrix then allocates it once, as at the start
                (Vec::new(), Some(pending))
            }
        };
        Ok(CachedExact {
            backend,
            kernel,
            d,
            order,
            targets,
            k,
            beta: try_filled(n * targets, 0.0, "beta = K alpha")?,
            cur: Current::Range(0, 0),
            pending,
        })
    }

    fn n(&self) -> usize {
        self.order.len()
    }

    /// Forms the rows of `K` at the positions `ps` that are not formed yet, or all the rest
    /// once the formed share would pass [`ON_DEMAND_SHARE`].
    fn form_rows(&mut self, ps: &[usize]) -> Result<()> {
        let Some(pend) = &mut self.pending else {
            return Ok(());
        };
        let n = self.order.len();
        let mut fresh: Vec<usize> = ps.iter().copied().filter(|&p| !pend.formed[p]).collect();
        fresh.sort_unstable();
        fresh.dedup();
        if fresh.is_empty() {
            return Ok(());
        }
        if (pend.count + fresh.len()) as f64 > ON_DEMAND_SHARE * n as f64 {
            return self.form_rest();
        }
        if self.k.is_empty() {
            self.k = matrix(n * n)?;
        }
        for &p in &fresh {
            pend.formed[p] = true;
        }
        pend.count += fresh.len();
        let (backend, kernel, d, xs) = (self.backend, self.kernel, self.d, &pend.xs);
        // the fresh rows of K, each a disjoint slice, formed a band against a span of columns
        // at a time (the tile stays in cache until it is written)
        let mut rows: Vec<&mut [T]> = Vec::with_capacity(fresh.len());
        let mut next = fresh.iter().peekable();
        for (p, row) in self.k.chunks_exact_mut(n).enumerate() {
            if next.peek() == Some(&&p) {
                next.next();
                rows.push(row);
            }
        }
        let xf = gather_rows(xs, d, &fresh);
        if backend.name() == "cpu" {
            let nf: Vec<f64> = fresh.iter().map(|&p| pend.norms[p]).collect();
            form_rows_host(kernel, (&xf, &nf), (xs, &pend.norms), d, &mut rows);
            return Ok(());
        }
        let (band, span) = (FORM_ROWS.min(fresh.len()), FORM_COLS.min(n));
        let mut tile = try_filled(band * span, 0.0f64, "a kernel tile")?;
        for (c, rows) in rows.chunks_mut(band).enumerate() {
            let g = rows.len();
            let xg = &xf[c * band * d..(c * band + g) * d];
            for c0 in (0..n).step_by(span) {
                let w = span.min(n - c0);
                let tile = &mut tile[..g * w];
                backend.kernel_tile(kernel, xg, g, &xs[c0 * d..(c0 + w) * d], w, d, tile);
                rows.par_iter_mut()
                    .zip(tile.par_chunks(w))
                    .for_each(|(row, t)| {
                        row[c0..c0 + w]
                            .iter_mut()
                            .zip(t)
                            .for_each(|(o, v)| *o = T::from_f64(*v));
                    });
            }
        }
        Ok(())
    }

    /// Forms every row not formed yet and ends the formation on demand: their columns at the
    /// formed rows are those rows' entries (`K` is symmetric), the rest the kernel among them
    /// over its lower triangle, so that the matrix costs `n^2 / 2` kernel values plus the
    /// rows formed on demand.
    fn form_rest(&mut self) -> Result<()> {
        let Some(pend) = self.pending.take() else {
            return Ok(());
        };
        let (n, d) = (self.order.len(), self.d);
        if pend.count == 0 {
            // nothing formed: the zeroed matrix was never touched, and the whole one is
            // allocated and faulted in as at the start
            self.k = form_whole(self.backend, self.kernel, &pend.xs, n, d)?;
            return Ok(());
        }
        let unformed: Vec<usize> = (0..n).filter(|&p| !pend.formed[p]).collect();
        let mut done: Vec<(usize, &[T])> = Vec::with_capacity(pend.count);
        let mut rest: Vec<&mut [T]> = Vec::with_capacity(unformed.len());
        for (p, row) in self.k.chunks_exact_mut(n).enumerate() {
            if pend.formed[p] {
                done.push((p, row));
            } else {
                rest.push(row);
            }
        }
        // their pages faulted in by all threads at once, as the whole matrix's are
        rest.par_iter_mut().for_each(|row| row.fill(T::default()));
        rest.par_chunks_mut(COPY_ROWS)
            .zip(unformed.par_chunks(COPY_ROWS))
            .for_each(|(group, us)| {
                for &(q, formed) in &done {
                    for (row, &u) in group.iter_mut().zip(us) {
                        row[q] = formed[u];
                    }
                }
            });
        let xu = gather_rows(&pend.xs, d, &unformed);
        form_among(
            self.backend,
            self.kernel,
            &xu,
            d,
            |j| unformed[j],
            &mut rest,
        )
    }

    /// Whether every row of `K` at the positions `ps` holds its values.
    fn formed(&self, ps: &[usize]) -> bool {
        self.pending
            .as_ref()
            .is_none_or(|pend| ps.iter().all(|&p| pend.formed[p]))
    }

    /// `K_BB` at the positions `pos` while some of their rows are not formed: the entries in
    /// a formed row, or by symmetry in a formed column, read from the cache, and only those
    /// between two unformed rows evaluated (`u^2 d` for `u` unformed rows instead of `b^2 d`),
    /// rounded to the working precision as the cached values are.
    fn gram_with_pending(&self, pos: &[usize], kbb: &mut [f64]) {
        let (n, nb, k) = (self.n(), pos.len(), &self.k);
        let pend = self.pending.as_ref().expect("rows pending");
        let (fresh, formed): (Vec<usize>, Vec<usize>) =
            (0..nb).partition(|&j| !pend.formed[pos[j]]);
        let u = fresh.len();
        let xu = gather_rows(
            &pend.xs,
            self.d,
            &fresh.iter().map(|&j| pos[j]).collect::<Vec<_>>(),
        );
        let mut tile = vec![0.0; u * u];
        self.backend
            .kernel_tile(self.kernel, &xu, u, &xu, u, self.d, &mut tile);
        for &i in &formed {
            let row = &k[pos[i] * n..(pos[i] + 1) * n];
            kbb[i * nb..(i + 1) * nb]
                .iter_mut()
                .zip(pos)
                .for_each(|(o, &q)| *o = row[q].to_f64());
        }
        // an unformed row's entries at the formed columns are the formed rows' (just read, so
        // in cache) at its own column
        for (a, &i) in fresh.iter().enumerate() {
            for &j in &formed {
                kbb[i * nb + j] = kbb[j * nb + i];
            }
            let out = &mut kbb[i * nb..(i + 1) * nb];
            for (b, &j) in fresh.iter().enumerate() {
                out[j] = T::from_f64(tile[a * u + b]).to_f64();
            }
        }
    }

    /// `beta[:, t] += K[:, cols] v[:, t]` for the contiguous positions `cols` and `v`
    /// (`cols.len() x T`, column-major), accumulated in f64, over the columns where `v` is not
    /// zero only (an SVM's block moves few of its coordinates once the support settles): one
    /// pass over each row's segment for one target with every column moving, otherwise an f64
    /// GEMM on row chunks with the moving columns gathered, each segment read once.
    fn add_columns(&mut self, cols: std::ops::Range<usize>, v: &[f64]) {
        let (n, len, tt) = (self.n(), cols.len(), self.targets);
        let v = &v[..len * tt];
        let moving = moving(v, len, tt);
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

impl<T: Scalar> CachedExact<'_, T> {
    /// `beta[:, t] += sum_j K[rows_j, :] v[j, t]` for any distinct positions `rows` (`v`:
    /// `rows.len() x T`, column-major): by the symmetry of `K` its columns are rows, read
    /// contiguously per column chunk, four at a time into each load and store of the chunk's
    /// sums ([`Scalar::add_rows`]); rows whose `v` is zero in a target are skipped there.
    fn add_rows(&mut self, rows: &[usize], v: &[f64]) {
        let (n, len, tt) = (self.n(), rows.len(), self.targets);
        // per target: the moving rows' positions and coefficients
        let moving: Vec<(Vec<usize>, Vec<f64>)> = (0..tt)
            .map(|t| {
                (0..len)
                    .filter(|&j| v[t * len + j] != 0.0)
                    .map(|j| (rows[j], v[t * len + j]))
                    .unzip()
            })
            .collect();
        if moving.iter().all(|(p, _)| p.is_empty()) {
            return;
        }
        let k = &self.k;
        let sums: Vec<(usize, Vec<f64>)> = (0..n.div_ceil(SPAN))
            .into_par_iter()
            .map(|c| {
                let (q0, w) = (c * SPAN, SPAN.min(n - c * SPAN));
                let mut out = vec![0.0; w * tt];
                for ((ps, coef), out) in moving.iter().zip(out.chunks_exact_mut(w)) {
                    let segs: Vec<&[T]> =
                        ps.iter().map(|p| &k[p * n + q0..p * n + q0 + w]).collect();
                    T::add_rows(&segs, coef, out);
                }
                (q0, out)
            })
            .collect();
        for (q0, out) in sums {
            let w = out.len() / tt;
            for t in 0..tt {
                self.beta[t * n + q0..t * n + q0 + w]
                    .iter_mut()
                    .zip(&out[t * w..(t + 1) * w])
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
        self.cur = Current::Range(start, len);
        Ok(())
    }

    fn positioned_decision(&self) -> Option<&[f64]> {
        Some(&self.beta)
    }

    fn load_positions(&mut self, positions: &[usize]) -> Result<()> {
        let n = self.n();
        let mut seen = vec![false; n];
        for &p in positions {
            if p >= n || std::mem::replace(&mut seen[p], true) {
                return Err(crate::error::invalid(
                    "block",
                    format!("position {p} is repeated or beyond the {n} rows"),
                ));
            }
        }
        self.cur = Current::Positions(positions.to_vec());
        Ok(())
    }

    fn block_gram(&mut self, kbb: Option<&mut [f64]>, g: &mut [f64]) -> Result<()> {
        let (n, k) = (self.n(), &self.k);
        let pos: std::borrow::Cow<[usize]> = match &self.cur {
            Current::Range(start, len) => (*start..start + len).collect::<Vec<_>>().into(),
            Current::Positions(p) => p.as_slice().into(),
        };
        let nb = pos.len();
        let unformed = !self.formed(&pos);
        let kbb = match kbb {
            Some(kbb) if unformed => {
                self.gram_with_pending(&pos, &mut kbb[..nb * nb]);
                None
            }
            other => other,
        };
        if let Some(kbb) = kbb {
            // a row of K_BB per task: each reads its own cached row (out of cache for large n)
            let cur = &self.cur;
            kbb[..nb * nb]
                .par_chunks_mut(nb.max(1))
                .zip(pos.par_iter())
                .with_min_len(GATHER_ROWS)
                .for_each(|(out, &p)| {
                    let row = &k[p * n..(p + 1) * n];
                    match cur {
                        Current::Range(start, _) => out
                            .iter_mut()
                            .zip(&row[*start..start + nb])
                            .for_each(|(o, v)| *o = v.to_f64()),
                        Current::Positions(_) => out
                            .iter_mut()
                            .zip(pos.iter())
                            .for_each(|(o, &q)| *o = row[q].to_f64()),
                    }
                });
        }
        for t in 0..self.targets {
            let beta = &self.beta[t * n..(t + 1) * n];
            for (o, &p) in g[t * nb..(t + 1) * nb].iter_mut().zip(pos.iter()) {
                *o = beta[p];
            }
        }
        Ok(())
    }

    /// `beta += K(X, X_B) delta` from the cached columns (or, for a block of any positions,
    /// the cached rows).
    fn update(&mut self, delta: &[f64]) -> Result<()> {
        if self.pending.is_some() {
            // the moving coordinates' rows, formed now where they are not yet
            let pos: Vec<usize> = match &self.cur {
                Current::Range(start, nb) => (*start..start + nb).collect(),
                Current::Positions(p) => p.clone(),
            };
            let len = pos.len();
            let moving: Vec<usize> = moving(delta, len, self.targets)
                .into_iter()
                .map(|j| pos[j])
                .collect();
            // the first step's share of moving coordinates foretells the support's: where most
            // of a block moves, most rows will be read, and the whole matrix costs half as many
            // kernel values as its rows one by one
            let first = self.pending.as_ref().is_some_and(|p| p.count == 0);
            if first && moving.len() as f64 > FIRST_STEP_SHARE * len as f64 {
                self.form_rest()?;
            } else {
                self.form_rows(&moving)?;
            }
            self.add_rows(&pos, delta);
            return Ok(());
        }
        match std::mem::replace(&mut self.cur, Current::Range(0, 0)) {
            Current::Range(start, nb) => {
                self.add_columns(start..start + nb, delta);
                self.cur = Current::Range(start, nb);
            }
            Current::Positions(p) => {
                self.add_rows(&p, delta);
                self.cur = Current::Positions(p);
            }
        }
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
        if self.pending.is_some() {
            self.form_rows(&moving(&ordered, n, tt))?;
            self.add_rows(&(0..n).collect::<Vec<_>>(), &ordered);
        } else {
            self.add_columns(0..n, &ordered);
        }
        Ok(())
    }

    fn shift_beta(&mut self, by: &[f64]) -> Result<()> {
        let (n, tt) = (self.n(), self.targets);
        crate::backend::check_shift(by.len(), n * tt)?;
        for t in 0..tt {
            for (p, &i) in self.order.iter().enumerate() {
                self.beta[t * n + p] += by[t * n + i];
            }
        }
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

/// The indices `j < len` of the columns of `v` (`len x T`, column-major) not zero in some
/// target: the coordinates a step moves.
fn moving(v: &[f64], len: usize, tt: usize) -> Vec<usize> {
    (0..len)
        .filter(|&j| (0..tt).any(|t| v[t * len + j] != 0.0))
        .collect()
}

/// The rows `ps` of the row-major `xs` (`d` columns), one after the other.
fn gather_rows<T: Copy>(xs: &[T], d: usize, ps: &[usize]) -> Vec<T> {
    ps.iter()
        .flat_map(|&p| &xs[p * d..(p + 1) * d])
        .copied()
        .collect()
}

thread_local! {
    /// The values each matrix allocated in the open [`recycling`] scopes of this thread holds
    /// at least (their largest), and how many scopes are open.
    static RECYCLING: Cell<(usize, usize)> = const { Cell::new((0, 0)) };
    /// The matrix of the last [`CachedExact`] dropped on this thread in a [`recycling`]
    /// scope: a `Vec<T>` of the engine's precision.
    static SPARE: RefCell<Option<Box<dyn Any>>> = const { RefCell::new(None) };
}

/// Runs `f` with the kernel matrices of the [`CachedExact`] engines made and dropped on this
/// thread passed on: each engine takes the memory of the one dropped before it instead of
/// fresh pages that the system faults in and clears (one-vs-one's pairs, one after another
/// on each thread: 45 matrices of 9 MB on pendigits). A matrix allocated in the scope holds
/// `capacity` values (the largest problem's `n^2`), so that one allocation serves every
/// problem of the scope; the last one is freed when the outermost scope ends.
pub fn recycling<R>(capacity: usize, f: impl FnOnce() -> R) -> R {
    /// Closes the scope, also when `f` unwinds: the capacity asked for before it again.
    struct Scope(usize);
    impl Drop for Scope {
        fn drop(&mut self) {
            let open = RECYCLING.with(|r| {
                let open = r.get().1 - 1;
                r.set((self.0, open));
                open
            });
            if open == 0 {
                drop(SPARE.with(|s| s.borrow_mut().take()));
            }
        }
    }
    let before = RECYCLING.with(|r| {
        let (before, open) = r.get();
        r.set((before.max(capacity), open + 1));
        before
    });
    let _scope = Scope(before);
    f()
}

/// A matrix of `len` values for [`CachedExact`]'s `K`: the spare of a [`recycling`] scope
/// when it holds `len` values, with the values of its last engine (every entry of `K` is
/// written before it is read: a row when it is formed, the whole matrix by [`form_among`]),
/// else pages allocated zeroed, as many as the scope asks for (the spare, too small, freed
/// first).
fn matrix<T: Scalar>(len: usize) -> Result<Vec<T>> {
    let spare = SPARE
        .with(|s| s.borrow_mut().take())
        .and_then(|b| b.downcast::<Vec<T>>().ok());
    match spare {
        Some(mut k) if k.capacity() >= len => {
            k.resize(len, T::default());
            Ok(*k)
        }
        other => {
            drop(other);
            let (capacity, _) = RECYCLING.with(Cell::get);
            let mut k = try_zeroed(len.max(capacity), "the cached kernel matrix")?;
            k.truncate(len);
            Ok(k)
        }
    }
}

impl<T: Scalar> Drop for CachedExact<'_, T> {
    /// In a [`recycling`] scope, leaves `K`'s memory to the next engine on this thread (the
    /// larger, where a spare is already there).
    fn drop(&mut self) {
        if RECYCLING.with(Cell::get).1 == 0 || self.k.capacity() == 0 {
            return;
        }
        let k = std::mem::take(&mut self.k);
        SPARE.with(|s| {
            let mut s = s.borrow_mut();
            let larger = s
                .as_ref()
                .and_then(|b| b.downcast_ref::<Vec<T>>())
                .is_none_or(|old| old.capacity() < k.capacity());
            if larger {
                *s = Some(Box::new(k));
            }
        });
    }
}

/// All of `K(X, X)` for the rows `xs` (`n x d`, in block order), in the working precision.
fn form_whole<T: Scalar>(
    backend: &dyn Backend<T>,
    kernel: &Kernel,
    xs: &[T],
    n: usize,
    d: usize,
) -> Result<Vec<T>> {
    let mut k = matrix(n * n)?;
    let mut rows: Vec<&mut [T]> = k.chunks_exact_mut(n.max(1)).collect();
    form_among(backend, kernel, xs, d, |j| j, &mut rows)?;
    Ok(k)
}

/// The kernel among `m` rows of `K`: `rows[i][pos(j)] = k(x_i, x_j)` for the features `xp`
/// (`m x d`) and increasing positions `pos(0) < ... < pos(m - 1)`, over the lower triangle
/// (`m^2 / 2` kernel values): each band of rows against the rows up to its own end, a span at
/// a time, so that the f64 tile stays in cache while it is written into the band's rows and,
/// transposed, into the earlier rows' columns (a tile of whole rows went out to memory and
/// back twice). A device forms whole bands: a call there costs a launch and a transfer, so
/// fewer and larger tiles.
fn form_among<T: Scalar>(
    backend: &dyn Backend<T>,
    kernel: &Kernel,
    xp: &[T],
    d: usize,
    pos: impl Fn(usize) -> usize + Sync,
    rows: &mut [&mut [T]],
) -> Result<()> {
    let m = rows.len();
    if backend.name() == "cpu" {
        form_among_host(kernel, xp, d, pos, rows);
        return Ok(());
    }
    let span = m.max(1);
    let mut tile = try_filled(FORM_ROWS.min(m.max(1)) * span, 0.0f64, "a kernel tile")?;
    for p0 in (0..m).step_by(FORM_ROWS) {
        let nr = FORM_ROWS.min(m - p0);
        let end = p0 + nr;
        let xi = &xp[p0 * d..end * d];
        for c0 in (0..end).step_by(span) {
            let w = span.min(end - c0);
            let tile = &mut tile[..nr * w];
            backend.kernel_tile(kernel, xi, nr, &xp[c0 * d..(c0 + w) * d], w, d, tile);
            let tile = &*tile;
            let (earlier, own) = rows.split_at_mut(p0);
            own[..nr]
                .par_iter_mut()
                .zip(tile.par_chunks(w))
                .for_each(|(row, t)| write_span(row, t, c0, &pos));
            // the span's rows before the band take the tile's columns; in groups of rows, so
            // that the tile's columns they read stay in the nearest cache
            let below = p0.min(c0 + w).saturating_sub(c0);
            earlier[c0..c0 + below]
                .par_chunks_mut(TRANSPOSE_ROWS)
                .enumerate()
                .for_each(|(g, group)| {
                    let q0 = g * TRANSPOSE_ROWS;
                    for r in 0..nr {
                        let t = &tile[r * w + q0..r * w + q0 + group.len()];
                        let col = pos(p0 + r);
                        for (row, v) in group.iter_mut().zip(t) {
                            row[col] = T::from_f64(*v);
                        }
                    }
                });
        }
    }
    Ok(())
}

/// Writes the tile row `t`, the kernel values at the rows `c0..c0 + t.len()` of a span, into
/// `row` at their positions: one slice where they are consecutive.
fn write_span<T: Scalar>(row: &mut [T], t: &[f64], c0: usize, pos: &impl Fn(usize) -> usize) {
    let (first, last) = (pos(c0), pos(c0 + t.len() - 1));
    if last - first == t.len() - 1 {
        row[first..=last]
            .iter_mut()
            .zip(t)
            .for_each(|(o, v)| *o = T::from_f64(*v));
    } else {
        for (j, v) in t.iter().enumerate() {
            row[pos(c0 + j)] = T::from_f64(*v);
        }
    }
}

/// Column spans of [`form_rows_host`]: [`FORM_COLS`] wide, or narrower so that there are at
/// least this many (tasks to share among the threads), down to [`FORM_ROWS`] wide.
const ROW_SPANS: usize = 8;

/// The rows `rows` of `K` (each `n` long) for the features `xf` of their rows, against all `n`
/// rows `xs`, on the host (`nf` and `ns` their squared norms): a task per span of columns,
/// each forming its span of every row a band of [`FORM_ROWS`] rows at a time in its own thread
/// (the tile stays in that core's cache until it is written). One fork and join for all the
/// rows, and tasks for both threads however few the rows.
fn form_rows_host<T: Scalar>(
    kernel: &Kernel,
    (xf, nf): (&[T], &[f64]),
    (xs, ns): (&[T], &[f64]),
    d: usize,
    rows: &mut [&mut [T]],
) {
    let Some(n) = rows.first().map(|r| r.len()) else {
        return;
    };
    let span = n.div_ceil(ROW_SPANS).clamp(FORM_ROWS.min(n), FORM_COLS);
    let mut spans: Vec<Vec<&mut [T]>> = (0..n.div_ceil(span)).map(|_| Vec::new()).collect();
    for row in rows.iter_mut() {
        for (s, piece) in row.chunks_mut(span).enumerate() {
            spans[s].push(piece);
        }
    }
    spans.into_par_iter().enumerate().for_each_init(
        || (Vec::new(), Vec::<T>::new()),
        |(tile, dots), (s, mut pieces)| {
            let c0 = s * span;
            let w = span.min(n - c0);
            let xj = &xs[c0 * d..(c0 + w) * d];
            for (c, band) in pieces.chunks_mut(FORM_ROWS).enumerate() {
                let g = band.len();
                let xg = &xf[c * FORM_ROWS * d..(c * FORM_ROWS + g) * d];
                tile.resize(g * w, 0.0f64);
                let tile = &mut tile[..g * w];
                let operands = Tile {
                    xi: xg,
                    ni: g,
                    xj,
                    nj: w,
                    d,
                    norms: Some((&nf[c * FORM_ROWS..c * FORM_ROWS + g], &ns[c0..c0 + w])),
                };
                kernel_tile_on(kernel, &operands, tile, dots, false);
                for (piece, t) in band.iter_mut().zip(tile.chunks(w)) {
                    piece
                        .iter_mut()
                        .zip(t)
                        .for_each(|(o, v)| *o = T::from_f64(*v));
                }
            }
        },
    );
}

/// The rows of `K` as raw pointers, for [`form_among_host`]'s bands, which write disjoint parts
/// of rows that other bands write too.
struct RowPointers<T>(Vec<*mut T>);

// SAFETY: the pointers are only written through at the elements each band owns
// ([`form_among_host`] states which), so sharing them between threads shares no element.
unsafe impl<T: Send> Sync for RowPointers<T> {}

impl<T> RowPointers<T> {
    /// The first value of row `i`.
    fn row(&self, i: usize) -> *mut T {
        self.0[i]
    }
}

/// [`form_among`] on the host: the bands of rows in parallel, each band's tiles in its own
/// thread one after another (a band of `FORM_ROWS` rows against a span of `FORM_COLS`
/// columns, its f64 tile in that core's cache while it is written into the band's rows and,
/// transposed, into the earlier rows' columns). One fork and join for the whole triangle
/// instead of several per tile, and the largest bands (the last) first.
fn form_among_host<T: Scalar>(
    kernel: &Kernel,
    xp: &[T],
    d: usize,
    pos: impl Fn(usize) -> usize + Sync,
    rows: &mut [&mut [T]],
) {
    let m = rows.len();
    if m == 0 {
        return;
    }
    let span = FORM_COLS.min(m);
    let norms = squared_norms(xp, m, d);
    let lens: Vec<usize> = rows.iter().map(|r| r.len()).collect();
    // (no reference to the rows' values is made from here on but through `ptrs`)
    let ptrs = RowPointers(rows.iter_mut().map(|r| r.as_mut_ptr()).collect());
    let bands: Vec<usize> = (0..m).step_by(FORM_ROWS).rev().collect();
    bands.into_par_iter().for_each_init(
        || (Vec::new(), Vec::<T>::new(), Vec::<*mut T>::new()),
        |(tile, dots, group), p0| {
            let nr = FORM_ROWS.min(m - p0);
            let end = p0 + nr;
            let xi = &xp[p0 * d..end * d];
            // The band owns, in its rows, the positions up to its last one, pos(end - 1),
            // and, in the earlier rows, its own positions pos(p0) ..= pos(end - 1); since
            // `pos` increases, no other band writes there: a later band's positions are above
            // pos(end - 1), an earlier band's below pos(p0), and each band writes only the
            // positions of the rows it forms and, in its own rows, those below them.
            let (first, last) = (pos(p0), pos(end - 1));
            for c0 in (0..end).step_by(span) {
                let w = span.min(end - c0);
                tile.resize(nr * w, 0.0f64);
                let tile = &mut tile[..nr * w];
                let operands = Tile {
                    xi,
                    ni: nr,
                    xj: &xp[c0 * d..(c0 + w) * d],
                    nj: w,
                    d,
                    norms: Some((&norms[p0..end], &norms[c0..c0 + w])),
                };
                kernel_tile_on(kernel, &operands, tile, dots, false);
                for (r, t) in tile.chunks(w).enumerate() {
                    assert!(last < lens[p0 + r]);
                    // SAFETY: row p0 + r is `lens[p0 + r]` values long and this band owns its
                    // first `last + 1` (above); no other reference to them exists meanwhile.
                    let row = unsafe { std::slice::from_raw_parts_mut(ptrs.row(p0 + r), last + 1) };
                    write_span(row, t, c0, &pos);
                }
                // the earlier rows of the span take the tile's columns, a group of rows at a
                // time: each of the band's rows gives the group a consecutive run of the tile,
                // and the group's rows fill a cache line each
                let below = p0.min(c0 + w);
                for g0 in (c0..below).step_by(TRANSPOSE_ROWS) {
                    let g1 = (g0 + TRANSPOSE_ROWS).min(below);
                    group.clear();
                    for (q, &len) in lens.iter().enumerate().take(g1).skip(g0) {
                        assert!(last < len);
                        // SAFETY: row q (q < p0) is `len` values long, so `first` is inside
                        // it.
                        group.push(unsafe { ptrs.row(q).add(first) });
                    }
                    for r in 0..nr {
                        let col = pos(p0 + r) - first;
                        let t = &tile[r * w + g0 - c0..r * w + g1 - c0];
                        for (&q, v) in group.iter().zip(t) {
                            // SAFETY: `col <= last - first`, inside row q's positions
                            // first ..= last, which this band owns (above) and writes
                            // through no reference.
                            unsafe { *q.add(col) = T::from_f64(*v) };
                        }
                    }
                }
            }
        },
    );
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
    /// every coordinate and updates that move a few, with the kernel formed at the start and
    /// on demand: from a sparse `alpha` (blocks with rows not formed yet, then the switch to
    /// forming the rest at once, by symmetry from the formed rows) and from zero (a first step
    /// that moves its whole block forms the whole matrix).
    #[test]
    fn the_cached_engine_matches_the_streaming_engine() {
        for tt in [1, 2] {
            engines_agree(tt, Formation::Whole, true);
            engines_agree(tt, Formation::OnDemand, true);
            engines_agree(tt, Formation::OnDemand, false);
        }
    }

    /// `alpha` with one coordinate in ten not zero.
    fn sparse_alpha(len: usize, seed: u64) -> Vec<f64> {
        let mut a = random(len, seed);
        a.iter_mut()
            .enumerate()
            .filter(|(i, _)| i % 10 != 3)
            .for_each(|(_, v)| *v = 0.0);
        a
    }

    fn engines_agree(tt: usize, formation: Formation, sparse_start: bool) {
        let (n, d, b) = (1100, 4, 130);
        let x = Features::Dense(DenseMatrix::new(n, d, random(n * d, 1)).unwrap());
        let kernel = Kernel {
            kind: KernelKind::Laplacian,
            gamma: 0.3,
        };
        let mut order: Vec<usize> = (0..n).collect();
        Stream::new(5, 2).shuffle(&mut order);
        let mut cached = CachedExact::new(&Cpu, &kernel, &x, &order, tt, formation).unwrap();
        let mut streamed = HostExact::new(&Cpu, &kernel, &x, &order, tt, b).unwrap();
        let alpha = if sparse_start {
            sparse_alpha(n * tt, 3)
        } else {
            vec![0.0; n * tt]
        };
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
            if step == 0 && formation == Formation::OnDemand {
                // from zero the first step moved its whole block: the whole matrix is formed;
                // from a sparse start a tenth of the rows and the block's are
                assert_eq!(
                    cached.pending.is_none(),
                    !sparse_start,
                    "after the first step"
                );
            }
        }
        assert!(cached.pending.is_none(), "every row formed by the end");
        close(
            &cached.decision().unwrap(),
            &streamed.decision().unwrap(),
            "decision",
        );
        assert!(cached.load_block(n - 10, 11).is_err());
    }

    /// In a [`recycling`] scope each engine takes the matrix of the one dropped before it,
    /// values and all (here poisoned with NaN): the engines still match the streaming engine
    /// and the kernel, with the matrix formed at the start and on demand (every entry is
    /// written before it is read), and the last matrix is freed when the scope ends.
    #[test]
    fn recycled_matrices_are_written_before_they_are_read() {
        recycling(1200 * 1200, || {
            let first = poison_the_spare();
            for formation in [Formation::Whole, Formation::OnDemand] {
                engines_agree(1, formation, true);
                assert_eq!(poison_the_spare(), first, "the same memory, passed on");
                engines_agree(2, formation, false);
                poison_the_spare();
                positions_agree(formation);
                poison_the_spare();
            }
        });
        assert!(
            SPARE.with(|s| s.borrow().is_none()),
            "freed at the scope's end"
        );
        assert_eq!(RECYCLING.with(Cell::get), (0, 0));
    }

    /// Drops an engine whose whole matrix (as large as the scope asks) is NaN, and returns
    /// where that matrix is.
    fn poison_the_spare() -> *const f64 {
        let x = Features::Dense(DenseMatrix::new(8, 2, random(16, 9)).unwrap());
        let order: Vec<usize> = (0..8).collect();
        let kernel = Kernel {
            kind: KernelKind::Gaussian,
            gamma: 0.5,
        };
        let mut e = CachedExact::new(&Cpu, &kernel, &x, &order, 1, Formation::Whole).unwrap();
        assert!(e.k.capacity() >= 1200 * 1200);
        e.k.resize(e.k.capacity(), f64::NAN);
        e.k.fill(f64::NAN);
        e.k.as_ptr()
    }

    /// Blocks of any positions (a working set): `K_BB` is the kernel of those rows, `g` their
    /// `beta`, and updates through the cached rows leave `beta = K alpha` for the summed steps,
    /// as the streaming engine computes it from scratch; repeated or out-of-range positions are
    /// refused.
    #[test]
    fn blocks_of_any_positions_match_the_kernel() {
        for formation in [Formation::Whole, Formation::OnDemand] {
            positions_agree(formation);
        }
    }

    fn positions_agree(formation: Formation) {
        let (n, d, tt) = (700, 3, 2);
        let rows = random(n * d, 21);
        let x = Features::Dense(DenseMatrix::new(n, d, rows.clone()).unwrap());
        let kernel = Kernel {
            kind: KernelKind::Gaussian,
            gamma: 0.7,
        };
        let mut order: Vec<usize> = (0..n).collect();
        Stream::new(6, 2).shuffle(&mut order);
        let mut cached = CachedExact::new(&Cpu, &kernel, &x, &order, tt, formation).unwrap();
        let mut alpha = sparse_alpha(n * tt, 22);
        cached.set_alpha(&alpha).unwrap();
        let mut pick = Stream::new(23, 4);
        for step in 0..6 {
            let len = [1, 37, 130, 256, 699, 700][step];
            let mut pos: Vec<usize> = (0..n).collect();
            pick.shuffle(&mut pos);
            pos.truncate(len);
            cached.load_positions(&pos).unwrap();
            let (mut kbb, mut g) = (vec![f64::NAN; len * len], vec![f64::NAN; len * tt]);
            cached.block_gram(Some(&mut kbb), &mut g).unwrap();
            let decision = cached.decision().unwrap();
            for (r, &p) in pos.iter().enumerate() {
                for (s, &q) in pos.iter().enumerate() {
                    let (i, j) = (order[p], order[q]);
                    let want = kernel.eval(&rows[i * d..(i + 1) * d], &rows[j * d..(j + 1) * d]);
                    assert!((kbb[r * len + s] - want).abs() < 1e-12, "step {step} K_BB");
                }
                for t in 0..tt {
                    assert_eq!(g[t * len + r], decision[t * n + order[p]], "step {step} g");
                }
            }
            let delta = random(len * tt, 30 + step as u64);
            for t in 0..tt {
                for (r, &p) in pos.iter().enumerate() {
                    alpha[t * n + order[p]] += delta[t * len + r];
                }
            }
            cached.update(&delta).unwrap();
        }
        let mut streamed = HostExact::new(&Cpu, &kernel, &x, &order, tt, 128).unwrap();
        streamed.set_alpha(&alpha).unwrap();
        let (a, b) = (cached.decision().unwrap(), streamed.decision().unwrap());
        for (p, q) in a.iter().zip(&b) {
            assert!((p - q).abs() <= 1e-9 * (1.0 + q.abs()), "{p} vs {q}");
        }
        assert!(cached.load_positions(&[3, 5, 3]).is_err());
        assert!(cached.load_positions(&[n]).is_err());
    }
}

//! L2-SVC on a feature map, solved in the primal by a finite Newton method.
//!
//! With `M` features the L2-SVC primal
//! `P(theta) = 1/2 ||theta||^2 + sum_i c_i max(0, 1 - y_i u_i)^2 / 2`, `u = Phi theta`, is
//! piecewise quadratic: on the rows it currently penalises, the active set
//! `I = {i : y_i u_i < 1}`, it is ridge regression on the labels. Each Newton step solves that
//! ridge problem, `(I + Phi_I^T C_I Phi_I) theta_bar = Phi_I^T C_I y_I`, and moves to the
//! minimum of `P` on the segment to `theta_bar` (an exact line search: `P` is a convex
//! piecewise quadratic along it). There are finitely many active sets and `P` falls at every
//! step, so once a full step leaves the active set as it was, `theta_bar` is the optimum
//! (Keerthi and DeCoste's modified finite Newton method, JMLR 2005).
//!
//! The system is kept and changed by the rows that enter or leave the active set (`M^2` flops
//! a row), so after the first a step costs an `M^3 / 3` Cholesky factor and one pass for the
//! decision values. The first active set comes from the same method on a uniform sample of
//! the rows (with `c` scaled by `n / s`, the same balance of loss and regulariser), which
//! leaves only the rows near the margin to change on the whole set. The dual optimum follows
//! from each coordinate's optimality, `a_i = c_i y_i max(0, 1 - y_i u_i)`; DBCD-TR's first
//! check certifies it by the duality gap, or polishes from there.

use faer::linalg::matmul::triangular::BlockStructure;
use faer::linalg::solvers::Llt;
use faer::{Accum, Mat, MatMut, MatRef};
use rayon::prelude::*;

use super::{Problem, Repr, State, engine_of};
use crate::backend::Backend;
use crate::backend::predict::chunk_rows;
use crate::error::{JokerError, Result};
use crate::features::FeatureMap;
use crate::loss::Loss;
use crate::memory::try_filled;
use crate::rng::{Stream, streams};
use crate::scalar::Scalar;

/// The largest feature map solved this way: its `M x M` systems take 128 MiB each in f64 at
/// 4,096 (as the direct KRR solve).
pub const MAX_FEATURES: usize = super::direct::MAX_FEATURES;

/// On the sample, a column stops once a step changes at most one row in `LOOSE`: it only
/// has to give the whole set a first active set.
const LOOSE: usize = 100;

/// Newton steps at most; the shared sets need 4 to 8 from the sample's start.
const MAX_STEPS: usize = 50;

/// The most the systems of all target columns may take (`(T + 1) M^2` f64 values): 1 GiB,
/// 31 classes one-vs-rest at `M` = 2,048, 7 at 4,096.
const MAX_SYSTEM_BYTES: usize = 1 << 30;

/// Rows per feature and target column below which the method is not used: each column's
/// system costs `M^2` a row inside the margin and `M^3 / 3` a step, DBCD-TR `M` a row and
/// pass, and below 8 rows a feature DBCD-TR's 15-25 passes cost as little (measured in
/// `docs/solver.md`: 2,048 random features on 12,000 a9a rows level, on 16,384 ijcnn1 rows
/// 11% faster, on 7,494 pendigits rows of ten one-vs-rest columns four times slower).
const MIN_ROWS_PER_FEATURE: usize = 8;

/// Whether L2-SVC on `n` rows with `targets` columns on `m` features is solved in the primal
/// first.
pub fn fits(n: usize, m: usize, targets: usize) -> bool {
    m <= MAX_FEATURES
        && systems_bytes(m, targets) <= MAX_SYSTEM_BYTES
        && n >= MIN_ROWS_PER_FEATURE
            .saturating_mul(m)
            .saturating_mul(targets)
}

fn systems_bytes(m: usize, targets: usize) -> usize {
    (targets + 1)
        .saturating_mul(m)
        .saturating_mul(m)
        .saturating_mul(8)
}

/// Whether `prob` is L2-SVC on a feature map small enough to solve in the primal.
pub(super) fn applies<T: Scalar>(prob: &Problem<T>) -> bool {
    matches!(prob.loss, Loss::SquaredHinge)
        && matches!(prob.repr, Repr::Features(map) if fits(prob.x.nrows(), map.m(), prob.targets))
}

/// Rows of the uniform sample the first active set is found on: an eighth of the rows, at
/// least `M` and at most `2 M`; none (the whole set from the start) where that is over half.
pub fn sample_rows(n: usize, m: usize) -> usize {
    let s = (n / 8).clamp(m, 2 * m);
    if 2 * s > n { 0 } else { s }
}

/// Bytes the method holds beside the fit: per target column a system and its right-hand
/// side, one Cholesky factor, the sample's features, an update's product (`M x M`) and two
/// chunks of features in the working precision, and per row and column the decision values,
/// the next ones, their change, the refinement's weights and the active flags.
pub fn memory(n: usize, m: usize, targets: usize, scalar_bytes: usize) -> usize {
    let systems = systems_bytes(m, targets);
    let sample = sample_rows(n, m)
        .saturating_mul(m)
        .saturating_mul(scalar_bytes);
    let update = (m + 2 * CHUNK)
        .saturating_mul(m)
        .saturating_mul(scalar_bytes);
    let rows = n.saturating_mul(targets).saturating_mul(33);
    systems
        .saturating_add(sample)
        .saturating_add(update)
        .saturating_add(rows)
}

/// What the method reads of a set of rows: their features, and the decision values of all of
/// them for a `theta` (`M x T`, column-major).
trait Rows<T> {
    /// Number of rows.
    fn len(&self) -> usize;
    /// Features of the rows `idx` (`idx.len() x M`, row-major).
    fn features(&self, idx: &[usize]) -> Result<Vec<T>>;
    /// `Phi theta` (`n x T`, column-major).
    fn decision(&mut self, theta: &[f64]) -> Result<Vec<f64>>;
    /// `Phi^T w` (`M x T`, column-major) for `w` of `n x T`.
    fn transpose(&mut self, w: &[f64]) -> Result<Vec<f64>>;
}

/// The sample: its features held in the working precision.
struct Sample<'b, T: Scalar> {
    phi: Vec<T>,
    s: usize,
    m: usize,
    targets: usize,
    backend: &'b dyn Backend<T>,
}

impl<T: Scalar> Rows<T> for Sample<'_, T> {
    fn len(&self) -> usize {
        self.s
    }

    fn features(&self, idx: &[usize]) -> Result<Vec<T>> {
        let m = self.m;
        let mut out = try_filled(idx.len() * m, T::default(), "features for the Newton start")?;
        for (o, &i) in out.chunks_exact_mut(m).zip(idx) {
            o.copy_from_slice(&self.phi[i * m..(i + 1) * m]);
        }
        Ok(out)
    }

    fn decision(&mut self, theta: &[f64]) -> Result<Vec<f64>> {
        let mut out = try_filled(self.s * self.targets, 0.0, "the sample's decision values")?;
        self.backend
            .project(&self.phi, self.s, self.m, theta, self.targets, &mut out);
        Ok(out)
    }

    fn transpose(&mut self, w: &[f64]) -> Result<Vec<f64>> {
        let mut out = vec![0.0; self.m * self.targets];
        self.backend
            .accumulate(&self.phi, self.s, self.m, w, self.targets, &mut out);
        Ok(out)
    }
}

/// The whole training set through the fit's engine: its kept features where it keeps them,
/// else features formed from the rows.
struct Whole<'s, 'a, T: Scalar> {
    st: &'s mut State<'a, T>,
    backend: &'s dyn Backend<T>,
    map: &'a FeatureMap<T>,
    /// The position in the kept features of each row (kept features only).
    pos: Vec<usize>,
}

impl<T: Scalar> Whole<'_, '_, T> {
    /// Moves the engine's `theta` to `theta`.
    fn set_theta(&mut self, theta: &[f64]) -> Result<()> {
        let engine = engine_of(&mut self.st.engine)?;
        let mut now = vec![0.0; theta.len()];
        engine.theta(&mut now)?;
        let by: Vec<f64> = theta.iter().zip(&now).map(|(t, n)| t - n).collect();
        engine.shift_theta(&by)
    }
}

impl<T: Scalar> Rows<T> for Whole<'_, '_, T> {
    fn len(&self) -> usize {
        self.st.n
    }

    fn features(&self, idx: &[usize]) -> Result<Vec<T>> {
        let m = self.map.m();
        let mut out = try_filled(idx.len() * m, T::default(), "features for the Newton start")?;
        if let Some((phi, _)) = self.st.engine.as_deref().and_then(|e| e.stored_features()) {
            for (o, &i) in out.chunks_exact_mut(m).zip(idx) {
                o.copy_from_slice(&phi[self.pos[i] * m..(self.pos[i] + 1) * m]);
            }
            return Ok(out);
        }
        let x = self.st.prob.x;
        let d = x.ncols();
        let chunk = chunk_rows(d + m, 8).min(idx.len().max(1));
        let mut xc = try_filled(chunk * d, T::default(), "rows for the Newton start")?;
        for (rows, o) in idx.chunks(chunk).zip(out.chunks_mut(chunk * m)) {
            let len = rows.len();
            x.gather_dense(rows, &mut xc[..len * d]);
            self.backend.features(self.map, &xc[..len * d], len, o);
        }
        Ok(out)
    }

    fn decision(&mut self, theta: &[f64]) -> Result<Vec<f64>> {
        self.set_theta(theta)?;
        engine_of(&mut self.st.engine)?.decision()
    }

    fn transpose(&mut self, w: &[f64]) -> Result<Vec<f64>> {
        let engine = engine_of(&mut self.st.engine)?;
        engine.set_alpha(w)?;
        let mut out = vec![0.0; self.map.m() * self.st.prob.targets];
        engine.theta(&mut out)?;
        Ok(out)
    }
}

/// One target column's Newton state: the ridge system of its active set (lower triangle of
/// `I + Phi_I^T C_I Phi_I`, right-hand side `Phi_I^T C_I y_I`) and where it stands.
struct Column {
    a: Mat<f64>,
    b: Vec<f64>,
    active: Vec<bool>,
    done: bool,
}

/// Adds `w_i` times row `i`'s outer product to the system, and `w_i y_i phi_i` to its
/// right-hand side, for the `k` rows of `phi` (row-major `k x M`). The product runs in the
/// working precision (twice the f64 rate in f32) over chunks of at most [`CHUNK`] rows and is
/// summed into the f64 system: the steps only have to find the active set, and the
/// refinement at the end ([`refine`]) takes the solution to f64 accuracy.
fn add_rows<T: Scalar>(col: &mut Column, scratch: &mut [T], phi: &[T], w: &[f64], y: &[f64]) {
    let m = col.b.len();
    let k = w.len();
    if k == 0 {
        return;
    }
    let p = MatRef::from_row_major_slice(phi, k, m);
    // `W Phi` row-major like `Phi`: both operands read along their rows
    let mut wphi = phi.to_vec();
    wphi.par_chunks_mut(m).zip(w).for_each(|(row, &wr)| {
        let wr = T::from_f64(wr);
        for v in row {
            *v = wr * *v;
        }
    });
    faer::linalg::matmul::triangular::matmul(
        MatMut::from_column_major_slice_mut(scratch, m, m),
        BlockStructure::TriangularLower,
        Accum::Replace,
        p.transpose(),
        BlockStructure::Rectangular,
        MatRef::from_row_major_slice(&wphi, k, m),
        BlockStructure::Rectangular,
        T::from_f64(1.0),
        crate::linalg::par_for(m, m, k),
    );
    crate::backend::cpu::clear_upper_state();
    for j in 0..m {
        let add = &scratch[j * m + j..(j + 1) * m];
        for (a, s) in col.a.col_as_slice_mut(j)[j..].iter_mut().zip(add) {
            *a += s.to_f64();
        }
    }
    add_rhs(&mut col.b, phi, (0..k).map(|r| w[r] * y[r]));
}

/// `b += sum_r s_r phi_r` over the rows of `phi` (row-major, `M` wide), in f64.
fn add_rhs<T: Scalar>(b: &mut [f64], phi: &[T], s: impl Iterator<Item = f64>) {
    let m = b.len();
    for (row, s) in phi.chunks_exact(m).zip(s) {
        for (bj, v) in b.iter_mut().zip(row) {
            *bj += s * v.to_f64();
        }
    }
}

/// Rows a product of the system's update takes at most.
const CHUNK: usize = 2048;

/// The rows of `set` in chunks, their features added with weight `sign c_i`.
fn add_set<T: Scalar>(
    rows: &dyn Rows<T>,
    col: &mut Column,
    set: &[usize],
    sign: &[f64],
    c: &[f64],
    y: &[f64],
) -> Result<()> {
    let m = col.b.len();
    if set.is_empty() {
        return Ok(());
    }
    let mut scratch = try_filled(m * m, T::default(), "the Newton system's update")?;
    for (part, signs) in set.chunks(CHUNK).zip(sign.chunks(CHUNK)) {
        let phi = rows.features(part)?;
        let w: Vec<f64> = part.iter().zip(signs).map(|(&i, s)| s * c[i]).collect();
        let yy: Vec<f64> = part.iter().map(|&i| y[i]).collect();
        add_rows(col, &mut scratch, &phi, &w, &yy);
    }
    Ok(())
}

/// `A^-1 b` for `A` symmetric positive definite given by its lower triangle.
fn solve(a: &Mat<f64>, b: &[f64]) -> Result<Vec<f64>> {
    solve_with(&factor(a)?, b)
}

/// The Cholesky factor of `A`, given by its lower triangle.
fn factor(a: &Mat<f64>) -> Result<Llt<f64>> {
    a.llt(faer::Side::Lower).map_err(|_| {
        JokerError::Numerical(
            "the Newton system I + Phi_I^T C Phi_I is not positive definite (non-finite features?)"
                .into(),
        )
    })
}

/// `A^-1 b` from the factor of `A`.
fn solve_with(llt: &Llt<f64>, b: &[f64]) -> Result<Vec<f64>> {
    let mut x = b.to_vec();
    let m = x.len();
    let l = llt.L();
    faer::linalg::triangular_solve::solve_lower_triangular_in_place(
        l,
        MatMut::from_column_major_slice_mut(&mut x, m, 1),
        faer::Par::Seq,
    );
    faer::linalg::triangular_solve::solve_upper_triangular_in_place(
        l.transpose(),
        MatMut::from_column_major_slice_mut(&mut x, m, 1),
        faer::Par::Seq,
    );
    Ok(x)
}

/// The minimiser over `t >= 0` of `P(theta + t d)`, from `theta . d`, `d . d`, the decision
/// values `u` and their change `ud` along `d`: the root of the piecewise linear, increasing
/// `P'(t)`, by Newton steps kept inside a bracket. Zero where `d` is not a descent direction.
fn line_search(td: f64, dd: f64, u: &[f64], ud: &[f64], y: &[f64], c: &[f64]) -> f64 {
    let slope = |t: f64| {
        let (mut g, mut h) = (td + t * dd, dd);
        for i in 0..u.len() {
            let r = 1.0 - y[i] * (u[i] + t * ud[i]);
            if r > 0.0 {
                g -= c[i] * y[i] * ud[i] * r;
                h += c[i] * ud[i] * ud[i];
            }
        }
        (g, h)
    };
    let (g0, _) = slope(0.0);
    if !(g0 < 0.0) {
        return 0.0;
    }
    let (mut lo, mut hi) = (0.0, 1.0);
    while slope(hi).0 < 0.0 {
        lo = hi;
        hi *= 2.0;
        if hi > 1e6 {
            return lo;
        }
    }
    let mut t = hi;
    for _ in 0..100 {
        let (g, h) = slope(t);
        if g == 0.0 {
            return t;
        }
        if g < 0.0 {
            lo = t;
        } else {
            hi = t;
        }
        let next = t - g / h;
        let next = if next > lo && next < hi {
            next
        } else {
            0.5 * (lo + hi)
        };
        if (next - t).abs() <= 1e-14 * t.max(1.0) {
            return next;
        }
        t = next;
    }
    t
}

/// What a run of the method did.
#[derive(Clone, Copy, Debug, Default)]
pub struct Steps {
    /// Newton steps on the sample.
    pub sample: usize,
    /// Rows of the sample (0: none).
    pub sample_rows: usize,
    /// Newton steps on the whole set.
    pub whole: usize,
    /// Why it ended early, if it did. Interrupted or out of time, the engine's `theta` is the
    /// last iterate and the duals those its decision values imply (`theta = Phi^T a` holds
    /// at the optimum only); after [`MAX_STEPS`] steps `theta = Phi^T a` of those duals.
    pub halted: Option<Halt>,
}

impl Steps {
    /// One line for the training record.
    pub fn describe(&self) -> String {
        let mut s = String::from("finite Newton in the primal: ");
        if self.sample > 0 {
            s.push_str(&format!(
                "{} steps on a {}-row sample, then ",
                self.sample, self.sample_rows
            ));
        }
        s.push_str(&format!("{} on every row", self.whole));
        match self.halted {
            Some(Halt::Steps) => s.push_str(&format!(" (stopped at {MAX_STEPS} steps)")),
            Some(Halt::Interrupted) => s.push_str(" (interrupted)"),
            Some(Halt::TimeLimit) => s.push_str(" (time limit)"),
            None => {}
        }
        s
    }
}

/// The finite Newton method on `rows` from `theta` (`M x T`): the per-row `c` and the labels
/// `y` (`n x T`, column-major). Returns the steps taken and whether it converged; `theta` and
/// the decision values `u` are left at the last iterate.
fn minimise<T: Scalar>(
    rows: &mut dyn Rows<T>,
    theta: &mut [f64],
    c: &[f64],
    y: &[f64],
    targets: usize,
    loose: bool,
    halt: &mut dyn FnMut() -> Option<Halt>,
) -> Result<(Vec<f64>, usize, Option<Halt>)> {
    let n = rows.len();
    let m = theta.len() / targets.max(1);
    let mut u = if theta.iter().all(|&v| v == 0.0) {
        try_filled(n * targets, 0.0, "the decision values")?
    } else {
        rows.decision(theta)?
    };
    let mut cols: Vec<Column> = Vec::with_capacity(targets);
    for t in 0..targets {
        let (ut, yt) = (&u[t * n..(t + 1) * n], &y[t * n..(t + 1) * n]);
        let active: Vec<bool> = (0..n).map(|i| yt[i] * ut[i] < 1.0).collect();
        // a column with the active set of an earlier one copies its system
        let same = cols.iter().position(|c: &Column| c.active == active);
        let col = match same {
            Some(k) => {
                let a = cols[k].a.clone();
                let b = cols[k].b.clone();
                // the right-hand sides differ by the labels: recomputed below where they do
                let mut col = Column {
                    a,
                    b,
                    active,
                    done: false,
                };
                if y[k * n..(k + 1) * n] != *yt {
                    col.b = rhs(rows, &col.active, c, yt, m)?;
                }
                col
            }
            None => {
                let mut col = Column {
                    a: Mat::<f64>::identity(m, m),
                    b: vec![0.0; m],
                    active,
                    done: false,
                };
                let set: Vec<usize> = (0..n).filter(|&i| col.active[i]).collect();
                add_set(rows, &mut col, &set, &vec![1.0; set.len()], c, yt)?;
                col
            }
        };
        cols.push(col);
    }
    let mut steps = 0;
    while steps < MAX_STEPS && cols.iter().any(|c| !c.done) {
        steps += 1;
        // every live column's ridge solution on its active set
        let mut bar = theta.to_vec();
        for (t, col) in cols.iter().enumerate() {
            if !col.done {
                bar[t * m..(t + 1) * m].copy_from_slice(&solve(&col.a, &col.b)?);
            }
        }
        let ubar = rows.decision(&bar)?;
        for (t, col) in cols.iter_mut().enumerate() {
            if col.done {
                continue;
            }
            let (th, tb) = (&theta[t * m..(t + 1) * m], &bar[t * m..(t + 1) * m]);
            let d: Vec<f64> = tb.iter().zip(th).map(|(b, a)| b - a).collect();
            let td: f64 = th.iter().zip(&d).map(|(a, b)| a * b).sum();
            let dd: f64 = d.iter().map(|v| v * v).sum();
            let ut = &mut u[t * n..(t + 1) * n];
            let ud: Vec<f64> = ubar[t * n..(t + 1) * n]
                .iter()
                .zip(ut.iter())
                .map(|(b, a)| b - a)
                .collect();
            let yt = &y[t * n..(t + 1) * n];
            let step = line_search(td, dd, ut, &ud, yt, c);
            for (a, v) in theta[t * m..(t + 1) * m].iter_mut().zip(&d) {
                *a += step * v;
            }
            for (a, v) in ut.iter_mut().zip(&ud) {
                *a += step * v;
            }
            let mut changed = Vec::new();
            let mut sign = Vec::new();
            for i in 0..n {
                let now = yt[i] * ut[i] < 1.0;
                if now != col.active[i] {
                    changed.push(i);
                    sign.push(if now { 1.0 } else { -1.0 });
                    col.active[i] = now;
                }
            }
            // no row changed side: the active set is the optimum's, whose ridge solution the
            // refinement below reaches (exactly, where the step was not quite full: the
            // system's f32 products leave it a little off)
            if changed.is_empty() || (loose && changed.len() * LOOSE <= n) {
                col.done = true;
            } else {
                add_set(rows, col, &changed, &sign, c, yt)?;
            }
        }
        // asked after a step, so that a halted start has moved from zero
        if cols.iter().any(|c| !c.done) {
            if let Some(why) = halt() {
                return Ok((u, steps, Some(why)));
            }
        }
    }
    let converged = cols.iter().all(|c| c.done);
    if !loose {
        refine(rows, theta, cols, c)?;
        u = rows.decision(theta)?;
    }
    Ok((u, steps, (!converged).then_some(Halt::Steps)))
}

/// Why the method ended before its active sets settled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Halt {
    /// [`MAX_STEPS`] steps.
    Steps,
    /// The fit's interruption poll asked to stop.
    Interrupted,
    /// The fit's time limit passed.
    TimeLimit,
}

/// Rounds of refinement at most, and the relative correction that ends them.
const REFINE_ROUNDS: usize = 6;
const REFINE_TOL: f64 = 1e-12;

/// Iterative refinement of each column's ridge solution on its last active set: the residual
/// `b - (I + Phi_I^T C_I Phi_I) theta` from the exact products (two passes, accumulated in
/// f64), the correction from the system's factor. The system was summed from products in the
/// working precision, so its solution is off by up to that precision times the system's
/// condition (2e-4 of the objective on w8a in f32); the residual is not. Each system is
/// replaced by its factor, factored once.
fn refine<T: Scalar>(
    rows: &mut dyn Rows<T>,
    theta: &mut [f64],
    cols: Vec<Column>,
    c: &[f64],
) -> Result<()> {
    let n = rows.len();
    let m = theta.len() / cols.len().max(1);
    let mut factors = Vec::with_capacity(cols.len());
    let mut kept = Vec::with_capacity(cols.len());
    for col in cols {
        factors.push(factor(&col.a)?);
        kept.push((col.b, col.active));
    }
    let cols = kept;
    for _ in 0..REFINE_ROUNDS {
        let mut w = rows.decision(theta)?;
        for (t, (_, active)) in cols.iter().enumerate() {
            for i in 0..n {
                let v = &mut w[t * n + i];
                *v = if active[i] { *v * c[i] } else { 0.0 };
            }
        }
        let q = rows.transpose(&w)?;
        let mut worst: f64 = 0.0;
        for (t, ((b, _), llt)) in cols.iter().zip(&factors).enumerate() {
            let th = &mut theta[t * m..(t + 1) * m];
            let r: Vec<f64> = (0..m).map(|j| b[j] - th[j] - q[t * m + j]).collect();
            let delta = solve_with(llt, &r)?;
            let dn: f64 = delta.iter().map(|v| v * v).sum();
            let tn: f64 = th.iter().map(|v| v * v).sum();
            for (a, v) in th.iter_mut().zip(&delta) {
                *a += v;
            }
            worst = worst.max((dn / tn.max(f64::MIN_POSITIVE)).sqrt());
        }
        if worst <= REFINE_TOL {
            break;
        }
    }
    Ok(())
}

/// `Phi_I^T C_I y_I` over the active rows.
fn rhs<T: Scalar>(
    rows: &dyn Rows<T>,
    active: &[bool],
    c: &[f64],
    y: &[f64],
    m: usize,
) -> Result<Vec<f64>> {
    let set: Vec<usize> = (0..active.len()).filter(|&i| active[i]).collect();
    let mut b = vec![0.0; m];
    for part in set.chunks(CHUNK) {
        add_rhs(
            &mut b,
            &rows.features(part)?,
            part.iter().map(|&i| c[i] * y[i]),
        );
    }
    Ok(b)
}

/// Moves `st` (its `alpha` and its engine) to the L2-SVC optimum on its feature map, found in
/// the primal: the finite Newton method on a uniform sample of `seed`'s stream for the first
/// active set, then on every row. `halt` is asked after each step; where it answers, the
/// method ends there, the duals those of the last iterate (on the sample: its iterate's on
/// every row).
pub(super) fn squared_hinge_optimum<T: Scalar>(
    st: &mut State<'_, T>,
    backend: &dyn Backend<T>,
    seed: u64,
    halt: &mut dyn FnMut() -> Option<Halt>,
) -> Result<Steps> {
    let prob = st.prob;
    let Repr::Features(map) = prob.repr else {
        return Err(JokerError::Unsupported(
            "the Newton start needs a feature map".into(),
        ));
    };
    let (n, m, tt) = (prob.x.nrows(), map.m(), prob.targets);
    let c: Vec<f64> = prob.lam.iter().map(|l| 1.0 / l).collect();
    let mut theta = vec![0.0; m * tt];
    let mut steps = Steps::default();

    // the whole set through the engine (its kept features, where it keeps them)
    let mut pos = Vec::new();
    if let Some((_, order)) = engine_of(&mut st.engine)?.stored_features() {
        pos = vec![0; n];
        for (p, &i) in order.iter().enumerate() {
            pos[i] = p;
        }
    }
    let mut whole = Whole {
        st,
        backend,
        map,
        pos,
    };

    // the first active set from a uniform sample, `c` scaled to the whole set's balance
    let s = sample_rows(n, m);
    if s > 0 {
        let mut idx: Vec<usize> = (0..n).collect();
        Stream::new(seed, streams::NEWTON_SAMPLE).shuffle(&mut idx);
        idx.truncate(s);
        idx.sort_unstable();
        let cs: Vec<f64> = idx.iter().map(|&i| c[i] * n as f64 / s as f64).collect();
        let mut ys = vec![0.0; s * tt];
        for t in 0..tt {
            for (r, &i) in idx.iter().enumerate() {
                ys[t * s + r] = prob.y[t * n + i];
            }
        }
        let mut sample = Sample {
            phi: whole.features(&idx)?,
            s,
            m,
            targets: tt,
            backend,
        };
        let (_, k, why) = minimise(&mut sample, &mut theta, &cs, &ys, tt, true, halt)?;
        steps.sample = k;
        steps.sample_rows = s;
        if matches!(why, Some(Halt::Interrupted | Halt::TimeLimit)) {
            steps.halted = why;
        }
    }

    // then every row, from the sample's optimum; a fit halted on the sample keeps its iterate
    let u = if steps.halted.is_some() {
        whole.decision(&theta)?
    } else {
        let (u, k, why) = minimise(&mut whole, &mut theta, &c, prob.y, tt, false, halt)?;
        steps.whole = k;
        steps.halted = why;
        u
    };
    let stopped = matches!(steps.halted, Some(Halt::Interrupted | Halt::TimeLimit));
    if stopped {
        // the model is the last iterate (theta = Phi^T a holds at the optimum only)
        whole.set_theta(&theta)?;
    }
    let st = whole.st;
    // the duals from each coordinate's optimality, then theta = Phi^T a from them
    for t in 0..tt {
        for i in 0..n {
            let y = prob.y[t * n + i];
            st.alpha[t * n + i] = y * (1.0 - y * u[t * n + i]).max(0.0) * c[i];
        }
    }
    if !stopped {
        engine_of(&mut st.engine)?.set_alpha(&st.alpha)?;
    }
    Ok(steps)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::cpu::Cpu;
    use crate::rng::Stream;

    fn uniform(n: usize, seed: u64) -> Vec<f64> {
        let mut r = Stream::new(seed, 7);
        (0..n)
            .map(|_| r.next_u32() as f64 / u32::MAX as f64 - 0.5)
            .collect()
    }

    /// The line search's step is the minimiser of the piecewise quadratic (checked on a fine
    /// grid and by the one-sided slopes around it), also where it lies beyond 1.
    #[test]
    fn the_line_search_finds_the_minimum_on_the_segment() {
        for seed in 0..20 {
            let n = 60;
            let u: Vec<f64> = uniform(n, seed).iter().map(|v| 4.0 * v).collect();
            let ud: Vec<f64> = uniform(n, seed + 100).iter().map(|v| 6.0 * v).collect();
            let y: Vec<f64> = uniform(n, seed + 200).iter().map(|v| v.signum()).collect();
            let c: Vec<f64> = uniform(n, seed + 300).iter().map(|v| 1.0 + v).collect();
            let (theta_sq, dd) = (3.0, 2.0 + seed as f64 / 10.0);
            // a descent direction: the slope at zero below zero
            let loss_slope: f64 = (0..n)
                .map(|i| -c[i] * y[i] * ud[i] * (1.0 - y[i] * u[i]).max(0.0))
                .sum();
            let td = -loss_slope - 1.0 - seed as f64;
            let t = line_search(td, dd, &u, &ud, &y, &c);
            assert!(t > 0.0, "seed {seed}");
            // P(theta + s d) along the segment, straight from its definition
            let p = |s: f64| {
                let loss: f64 = (0..n)
                    .map(|i| 0.5 * c[i] * (1.0 - y[i] * (u[i] + s * ud[i])).max(0.0).powi(2))
                    .sum();
                0.5 * (theta_sq + 2.0 * s * td + s * s * dd) + loss
            };
            let best = (0..=40_000)
                .map(|k| k as f64 * 1e-4)
                .map(p)
                .fold(f64::INFINITY, f64::min);
            assert!(
                p(t) <= best + 1e-9,
                "seed {seed}: {} above the grid's {best}",
                p(t)
            );
            let h = 1e-6 * t.max(1.0);
            assert!(
                p(t - h) >= p(t) - 1e-12 && p(t + h) >= p(t) - 1e-12,
                "seed {seed}"
            );
        }
        // not a descent direction: no step
        assert_eq!(line_search(1.0, 1.0, &[2.0], &[1.0], &[1.0], &[1.0]), 0.0);
    }

    /// On fresh random features the method ends at the primal optimum: the gradient
    /// `theta - sum_i c_i y_i max(0, 1 - y_i u_i) phi_i` vanishes, for two target columns
    /// with different labels, f64 and f32 features (the f32 system refined).
    #[test]
    fn the_newton_start_reaches_a_stationary_point() {
        let (s, m, tt) = (300, 24, 2);
        let phi64: Vec<f64> = uniform(s * m, 1).iter().map(|v| 0.8 * v).collect();
        let c: Vec<f64> = uniform(s, 2).iter().map(|v| 20.0 + 20.0 * v).collect();
        // labels of two planted hyperplanes with 10% flipped: some rows end beyond the margin,
        // some inside
        let w = uniform(m * tt, 3);
        let flip = uniform(s * tt, 4);
        let y: Vec<f64> = (0..s * tt)
            .map(|k| {
                let (t, i) = (k / s, k % s);
                let f: f64 = (0..m).map(|j| phi64[i * m + j] * w[t * m + j]).sum();
                if flip[k] > 0.4 {
                    -f.signum()
                } else {
                    f.signum()
                }
            })
            .collect();
        fn check<T: Scalar>(
            phi: Vec<T>,
            s: usize,
            m: usize,
            tt: usize,
            c: &[f64],
            y: &[f64],
            tol: f64,
        ) {
            let exact: Vec<f64> = phi.iter().map(|v| v.to_f64()).collect();
            let mut rows = Sample {
                phi,
                s,
                m,
                targets: tt,
                backend: &Cpu,
            };
            let mut theta = vec![0.0; m * tt];
            let (u, steps, why) =
                minimise(&mut rows, &mut theta, c, y, tt, false, &mut || None).unwrap();
            assert!(why.is_none() && steps > 1, "{steps} steps");
            for t in 0..tt {
                let inside = (0..s)
                    .filter(|&i| y[t * s + i] * u[t * s + i] < 1.0)
                    .count();
                assert!(
                    inside > s / 10 && inside < s * 9 / 10,
                    "{inside} rows inside"
                );
            }
            for t in 0..tt {
                let mut g: Vec<f64> = theta[t * m..(t + 1) * m].to_vec();
                for i in 0..s {
                    let ui: f64 = (0..m).map(|j| exact[i * m + j] * theta[t * m + j]).sum();
                    assert!((ui - u[t * s + i]).abs() < 1e-9, "decision values");
                    let yi = y[t * s + i];
                    let r = (1.0 - yi * ui).max(0.0);
                    for j in 0..m {
                        g[j] -= c[i] * yi * r * exact[i * m + j];
                    }
                }
                let gn = g.iter().map(|v| v * v).sum::<f64>().sqrt();
                let tn = theta[t * m..(t + 1) * m]
                    .iter()
                    .map(|v| v * v)
                    .sum::<f64>()
                    .sqrt();
                assert!(gn <= tol * tn, "column {t}: gradient {gn} at |theta| {tn}");
            }
        }
        check(phi64.clone(), s, m, tt, &c, &y, 1e-11);
        let phi32: Vec<f32> = phi64.iter().map(|&v| v as f32).collect();
        check(phi32, s, m, tt, &c, &y, 1e-9);
    }
}

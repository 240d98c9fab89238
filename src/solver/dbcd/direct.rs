//! Kernel ridge regression solved exactly: on a feature map in the primal, and on the exact
//! kernel of a small problem in the dual.
//!
//! With `M` features the KRR primal `min 1/2 ||theta||^2 + sum_i c_i (y_i - phi_i^T theta)^2 / 2`
//! (`c_i = 1 / lambda_i`) is an `M x M` linear system, `(I + Phi^T C Phi) theta = Phi^T C y`:
//! one pass over the rows forms it (`n M^2` flops), a Cholesky factor solves it (`M^3 / 3`), and
//! the dual optimum follows from the optimality of each coordinate, `a_i = c_i (y_i - u_i)` with
//! `u = Phi theta`. Block coordinate descent needs many passes for the same answer where the
//! kernel's spectrum is wide (measured in `docs/nystrom.md`); from this start DBCD-TR's first
//! check certifies the optimum by its duality gap.

use faer::linalg::matmul::triangular::BlockStructure;
use faer::{Accum, Mat, MatMut, MatRef};

use super::{Problem, Repr, State, engine_of};
use crate::backend::Backend;
use crate::backend::predict::chunk_rows;
use crate::error::{JokerError, Result};
use crate::loss::Loss;
use crate::memory::try_filled;
use crate::scalar::Scalar;

/// The largest feature map solved directly: its `M x M` system takes 128 MiB in f64 at 4,096,
/// and forming it costs `n M^2` flops, about what DBCD-TR spends on `M / 8` passes.
pub const MAX_FEATURES: usize = 4096;

/// The largest exact-kernel problem solved directly: its `n x n` kernel matrix takes 32 MiB
/// in f64 at 2,048 rows and its Cholesky factor `n^3 / 3` flops (a fraction of a second),
/// where block coordinate descent reaches the tolerance only, not the optimum.
pub const MAX_EXACT_ROWS: usize = 2048;

/// Whether `prob` is KRR on a feature map small enough to solve directly.
pub(super) fn applies<T: Scalar>(prob: &Problem<T>) -> bool {
    matches!(prob.loss, Loss::SquaredError)
        && matches!(prob.repr, Repr::Features(map) if map.m() <= MAX_FEATURES)
}

/// Whether `prob` is KRR on the exact kernel of at most [`MAX_EXACT_ROWS`] rows.
pub(super) fn applies_exact<T: Scalar>(prob: &Problem<T>) -> bool {
    matches!(prob.loss, Loss::SquaredError)
        && matches!(prob.repr, Repr::Exact(_))
        && prob.x.nrows() <= MAX_EXACT_ROWS
}

/// Moves `st` to the exact KRR optimum on the exact kernel: the dual optimality
/// `a_i = c_i (y_i - b - (K a)_i)` is the system `(K + Lambda) a = y - b 1` with
/// `Lambda = diag(lambda_i)`, solved by a Cholesky factor of `K + Lambda` (formed in f64).
/// With `intercept`, `b` per target column makes `sum_i a_i = 0`: with `S = K + Lambda`,
/// `b = 1^T S^-1 y / 1^T S^-1 1` (the bordered system's Schur complement).
pub(super) fn krr_exact_optimum<T: Scalar>(st: &mut State<'_, T>, intercept: bool) -> Result<()> {
    let prob = st.prob;
    let Repr::Exact(kernel) = prob.repr else {
        return Err(JokerError::Unsupported(
            "the direct exact KRR solve needs the exact kernel".into(),
        ));
    };
    let (n, d, tt) = (prob.x.nrows(), prob.x.ncols(), prob.targets);
    let mut buf = try_filled(n * d, T::default(), "rows for the direct KRR solve")?;
    prob.x.gather_range(0, &mut buf);
    let rows: Vec<f64> = buf.iter().map(|v| v.to_f64()).collect();
    drop(buf);
    let row = |i: usize| &rows[i * d..(i + 1) * d];
    let mut s = Mat::<f64>::zeros(n, n);
    for i in 0..n {
        for j in 0..=i {
            s[(i, j)] = kernel.eval(row(i), row(j));
        }
        s[(i, i)] += prob.lam[i];
    }
    // columns: the targets, and the ones vector for the intercept
    let cols = tt + usize::from(intercept);
    let rhs = Mat::<f64>::from_fn(n, cols, |i, t| if t < tt { prob.y[t * n + i] } else { 1.0 });
    let z = solve_lower_spd(s.as_ref(), rhs)?;
    for t in 0..tt {
        let b = if intercept {
            let (num, den) = (0..n).fold((0.0, 0.0), |(a, c), i| (a + z[(i, t)], c + z[(i, tt)]));
            num / den
        } else {
            0.0
        };
        st.shift[t] = b;
        for i in 0..n {
            st.alpha[t * n + i] = z[(i, t)] - if intercept { b * z[(i, tt)] } else { 0.0 };
        }
    }
    engine_of(&mut st.engine)?.set_alpha(&st.alpha)
}

/// Moves `st` (its `alpha` and its engine) to the exact KRR optimum on its feature map; with
/// `intercept`, to the optimum with an unregularised intercept `b` per target column (kept in
/// `st.shift`): the system gains the constant feature's row and column with no ridge,
/// `[I + Phi^T C Phi, Phi^T C 1; 1^T C Phi, 1^T C 1] [theta; b] = [Phi^T C y; 1^T C y]`, whose
/// last row says `sum_i a_i = 0`.
pub(super) fn krr_optimum<T: Scalar>(
    st: &mut State<'_, T>,
    backend: &dyn Backend<T>,
    intercept: bool,
) -> Result<()> {
    let prob = st.prob;
    let Repr::Features(map) = prob.repr else {
        return Err(JokerError::Unsupported(
            "the direct KRR solve needs a feature map".into(),
        ));
    };
    let (n, d, m, tt) = (prob.x.nrows(), prob.x.ncols(), map.m(), prob.targets);
    // A = I + Phi^T C Phi (lower triangle) and R = Phi^T C Y, over chunks of rows; with an
    // intercept, one more row and column for the constant feature (no ridge on it)
    let k = m + usize::from(intercept);
    let mut a = Mat::<f64>::identity(k, k);
    if intercept {
        a[(m, m)] = 0.0;
    }
    let mut r = Mat::<f64>::zeros(k, tt);
    let chunk = chunk_rows(d + m, 8).min(n.max(1));
    let stored = st.engine.as_deref().and_then(|e| e.stored_features());
    // rows in chunks: the engine's kept features (rows in its order), or features formed here
    let mut xc = Vec::new();
    let mut formed = Vec::new();
    if stored.is_none() {
        xc = try_filled(chunk * d, T::default(), "rows for the direct KRR solve")?;
        formed = try_filled(chunk * m, T::default(), "features for the direct KRR solve")?;
    }
    for start in (0..n).step_by(chunk) {
        let rows = chunk.min(n - start);
        // the original row of each chunk row
        let (phi, row_of): (&[T], Box<dyn Fn(usize) -> usize>) = match stored {
            Some((phi, order)) => (
                &phi[start * m..(start + rows) * m],
                Box::new(move |i| order[start + i]),
            ),
            None => {
                prob.x.gather_range(start, &mut xc[..rows * d]);
                backend.features(map, &xc[..rows * d], rows, &mut formed[..rows * m]);
                (&formed[..rows * m], Box::new(move |i| start + i))
            }
        };
        // the constant feature in column m
        let p = Mat::<f64>::from_fn(
            rows,
            k,
            |i, j| {
                if j < m { phi[i * m + j].to_f64() } else { 1.0 }
            },
        );
        let c: Vec<f64> = (0..rows).map(|i| 1.0 / prob.lam[row_of(i)]).collect();
        let cp = Mat::<f64>::from_fn(rows, k, |i, j| c[i] * p[(i, j)]);
        let cy = Mat::<f64>::from_fn(rows, tt, |i, t| c[i] * prob.y[t * n + row_of(i)]);
        let par = crate::linalg::par_for(k, k, rows);
        faer::linalg::matmul::triangular::matmul(
            a.as_mut(),
            BlockStructure::TriangularLower,
            Accum::Add,
            p.transpose(),
            BlockStructure::Rectangular,
            cp.as_ref(),
            BlockStructure::Rectangular,
            1.0,
            par,
        );
        faer::linalg::matmul::matmul(r.as_mut(), Accum::Add, p.transpose(), cy.as_ref(), 1.0, par);
        crate::backend::cpu::clear_upper_state();
    }
    let theta = solve_lower_spd(a.as_ref(), r)?;
    // the engine at theta: its decision values u = Phi theta, then a = C (y - b - u)
    let mut by = vec![0.0; m * tt];
    for t in 0..tt {
        for j in 0..m {
            by[t * m + j] = theta[(j, t)];
        }
        if intercept {
            st.shift[t] = theta[(m, t)];
        }
    }
    let engine = engine_of(&mut st.engine)?;
    engine.set_alpha(&vec![0.0; n * tt])?;
    engine.shift_theta(&by)?;
    let u = engine.decision()?;
    for t in 0..tt {
        for i in 0..n {
            st.alpha[t * n + i] = (prob.y[t * n + i] - st.shift[t] - u[t * n + i]) / prob.lam[i];
        }
    }
    // theta = Phi^T a again, from the duals the solver keeps (equal up to rounding)
    engine_of(&mut st.engine)?.set_alpha(&st.alpha)
}

/// `A^-1 R` for `A` symmetric positive definite, given by its lower triangle.
fn solve_lower_spd(a: MatRef<'_, f64>, mut r: Mat<f64>) -> Result<Mat<f64>> {
    let llt = a.llt(faer::Side::Lower).map_err(|_| {
        JokerError::Numerical(
            "the direct KRR system I + Phi^T C Phi is not positive definite (non-finite features?)"
                .into(),
        )
    })?;
    let l = llt.L();
    let rm: MatMut<'_, f64> = r.as_mut();
    faer::linalg::triangular_solve::solve_lower_triangular_in_place(l, rm, faer::Par::Seq);
    faer::linalg::triangular_solve::solve_upper_triangular_in_place(
        l.transpose(),
        r.as_mut(),
        faer::Par::Seq,
    );
    Ok(r)
}

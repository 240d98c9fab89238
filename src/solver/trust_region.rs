//! The block subproblem: trust region (paper Algorithm 1) around a truncated, box-aware
//! CG-Steihaug (Algorithm 2), for one target column.
//!
//! Block objective, with `gbar = K_{B,:} alpha` at the current iterate:
//! `J(alpha_B + s) - J(alpha_B) = s^T gbar + 1/2 s^T K_BB s + sum_i [f_i(a_i + s_i) - f_i(a_i)]`,
//! model `mu(s) - mu(0) = g^T s + 1/2 s^T Q s` with `g = gbar + f'(a)`, `Q = K_BB + diag(f'')`.
//! Both changes are computed directly (never as differences of two objectives), so the ratio
//! keeps its accuracy for small steps.
//!
//! Box handling: coordinates at a bound whose gradient points outward are frozen before CG
//! (two-metric projection). When a CG move would leave the box, two candidates are compared
//! on the model: the move stopped at the first bound (the model still decreases, as in
//! Steihaug's boundary step) and the reference code's move clipped to the box; the better one
//! is kept and CG restarts on the coordinates still free (see `cg_steihaug`). Clipping
//! alone can produce an ascent step that stalls the method (seen on L2-SVC with C = 10);
//! stopping alone settles one bound per trust-region iteration (50 iterations per block on
//! L2-SVC at C = 32). SVR's `epsilon |a|` is handled
//! orthant-wise: each coordinate is confined to the orthant of its sign (or of its
//! steepest-descent sign at zero), where the model is exact.

use crate::linalg::{dot, matvec, matvec_mixed};
use crate::loss::{Coord, Loss, l1_sign};

/// How the radius reacts to the ratio `rho`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum RadiusRule {
    /// The Joker reference code: no decrease gives `Delta/4`; `rho < 1/4` gives `Delta/2`;
    /// `rho > 3/4` on the boundary doubles `Delta` (up to `Delta_max`); accept iff the
    /// objective decreased and `rho > eta`.
    Reference,
    /// The paper's Algorithm 1: `rho < 1/2` gives `Delta/4`; `rho > 3/4` on the boundary
    /// doubles; accept iff `rho > eta`.
    Paper,
}

/// The curvature the trust region's quadratic model uses for a random-feature fit.
///
/// The block objective's quadratic is `1/2 s^T Phi_B Phi_B^T s`. Its Gram `Phi_B Phi_B^T`
/// costs `b^2 M` flops per block, more than anything else in an iteration once `M` is large.
/// The exact kernel block `K(X_B, X_B)` (`b^2 d` flops), which the Gram approximates to
/// `O(1/sqrt(M))`, serves as well as a model: the ratio test still measures the true change
/// of the objective, through `Phi_B^T s` (`2 b M` flops per trust-region iteration, twice that
/// after a rejected step), so every
/// accepted step decreases the random-feature objective and the fit converges to the same
/// optimum. Exact-kernel fits have only one curvature and ignore the choice.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TrModel {
    /// The Gram `Phi_B Phi_B^T`: the model is exact in its quadratic part.
    Gram,
    /// The exact kernel block `K(X_B, X_B)`, with the exact ratio test.
    Kernel,
    /// The kernel model where it is predicted to be cheaper ([`TrModel::uses_kernel`]), left
    /// for the Gram when its ratio test keeps failing (the default).
    #[default]
    Auto,
}

impl TrModel {
    /// The name used by the command line, the C ABI and the bindings.
    pub fn name(self) -> &'static str {
        match self {
            TrModel::Gram => "gram",
            TrModel::Kernel => "kernel",
            TrModel::Auto => "auto",
        }
    }

    /// Parses [`name`](TrModel::name).
    pub fn parse(s: &str) -> Option<TrModel> {
        match s {
            "gram" => Some(TrModel::Gram),
            "kernel" => Some(TrModel::Kernel),
            "auto" => Some(TrModel::Auto),
            _ => None,
        }
    }

    /// Whether a random-feature fit with blocks of `b` rows, `m` features, `d` inputs,
    /// `targets` columns and `bytes` per feature value uses the kernel model. `Auto` weighs the
    /// Gram's `b^2 M` flops (at the GEMM rate) against the kernel model's `b^2 d` tile and, per
    /// column, its passes over the `b x M` feature block: about 10 trust-region iterations of
    /// 1.2 products each, memory-bound (a byte read counted as 8 flops, near the ratio of a
    /// 2-core machine's GEMM rate to its memory bandwidth); and it asks for `M >= 2b`.
    pub fn uses_kernel(self, b: usize, m: usize, d: usize, targets: usize, bytes: usize) -> bool {
        const PASSES: f64 = 10.0 * 1.2;
        const FLOPS_PER_BYTE: f64 = 8.0;
        match self {
            TrModel::Gram => false,
            TrModel::Kernel => true,
            TrModel::Auto => {
                // with M < 2b the Gram's rank falls short of the block, and the kernel model
                // misses that (its blocks kept falling back on small problems)
                let enough = m >= 2 * b;
                let (b, m, d, t) = (b as f64, m as f64, d as f64, targets as f64);
                let gram = b * b * m;
                let kernel = t * PASSES * b * m * bytes as f64 * FLOPS_PER_BYTE + 3.0 * b * b * d;
                enough && kernel < gram
            }
        }
    }
}

/// The norm in which a block solve measures its steps, and the preconditioner of its CG,
/// when no Nystrom metric is asked for ([`TrustRegion::nystrom_rank`], which brings its own
/// diagonal of the same form).
///
/// The diagonal norm is `||s||_D` with `D = diag(f_i''(a_i) + rho)`, `rho` the mean of
/// `K_BB`'s diagonal, and CG is preconditioned by `D^-1` (Jacobi). It matters where the
/// losses' curvature differs by orders of magnitude across a block: KLR's entropy curvature
/// `c / (a (c - a))` grows without bound as a coordinate nears its box, as most do on a
/// well-separated class, and in the Euclidean norm those coordinates make the CG model
/// ill-conditioned and every step short (a 7-class KLR fit stalled at a duality gap of
/// 6e-3; in the diagonal norm it converged in half the passes, docs/solver.md). Where the
/// curvature is the same on every coordinate, `D` is a multiple of the identity and would only
/// rescale the radius.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TrNorm {
    /// `||s||_2`, CG without a preconditioner (the paper's).
    Euclidean,
    /// `||s||_D`, Jacobi-preconditioned CG.
    Diagonal,
    /// The diagonal norm for losses whose curvature varies along the box (KLR, Lp), the
    /// Euclidean norm otherwise (the default).
    #[default]
    Auto,
}

impl TrNorm {
    /// Whether a block solve of `loss` measures its steps in the diagonal norm.
    pub fn is_diagonal(self, loss: Loss) -> bool {
        match self {
            TrNorm::Euclidean => false,
            TrNorm::Diagonal => true,
            TrNorm::Auto => loss.curvature_varies(),
        }
    }
}

/// `rho` of the diagonal norm ([`TrNorm`]): the mean of `K_BB`'s diagonal from its `trace`
/// over a block of `b`, kept positive so that `D` is invertible even where the curvature is 0.
pub fn diagonal_shift(trace: f64, b: usize) -> f64 {
    (trace / b.max(1) as f64).max(f64::MIN_POSITIVE)
}

/// Parameters of the block solver.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TrustRegion {
    /// Acceptance threshold on `rho` (reference code: 0.125).
    pub eta: f64,
    /// Trust-region iterations per block (paper and reference code: 50). The default is 10:
    /// blocks are revisited, so solving each one loosely is cheaper overall (ijcnn1, KLR,
    /// C = 32, M = 2000, 300 iterations: 97.68% test accuracy in 42 s with 50 and 100, 97.67% in
    /// 15 s with 10 and 20).
    pub max_iter: usize,
    /// CG iterations per trust-region iteration (reference code: 100; default 20).
    pub max_cg_iter: usize,
    /// CG stops when `||r|| <= cg_rtol ||r_0||` (reference code: `1e-8` on `r^T r`).
    pub cg_rtol: f64,
    /// The block is solved when the projected gradient's largest entry is below this.
    pub kkt_tol: f64,
    /// The block is solved enough when the projected gradient's largest entry has fallen to
    /// this fraction of its value at the block's start (0: only `kkt_tol` and `max_iter` end a
    /// block solve). Blocks are revisited, and their neighbours' moves change their gradients
    /// meanwhile: a block solved to a tenth of its violation left the rest of its iterations
    /// to blocks that gain more (docs/solver.md, "Inexact block solves").
    #[serde(default = "default_kkt_rtol")]
    pub kkt_rtol: f64,
    /// Radius update rule.
    pub rule: RadiusRule,
    /// Rank of a Nystrom preconditioner of `K_BB` for the CG (0: none). With it, CG runs in
    /// the preconditioned norm `||s||_M`, `M = U_F Lambda U_F^T + diag(h_F + rho)` with `rho`
    /// the smallest retained Nystrom eigenvalue, and the radius is measured in that norm.
    #[serde(default)]
    pub nystrom_rank: usize,
    /// The curvature of the quadratic model in random-feature fits.
    #[serde(default)]
    pub model: TrModel,
    /// The norm of the steps without a Nystrom metric.
    #[serde(default)]
    pub norm: TrNorm,
}

/// [`TrustRegion::kkt_rtol`]'s default.
fn default_kkt_rtol() -> f64 {
    0.1
}

impl Default for TrustRegion {
    fn default() -> Self {
        TrustRegion {
            eta: 0.125,
            max_iter: 10,
            max_cg_iter: 20,
            cg_rtol: 1e-4,
            kkt_tol: 1e-6,
            kkt_rtol: default_kkt_rtol(),
            rule: RadiusRule::Reference,
            nystrom_rank: 0,
            model: TrModel::Auto,
            norm: TrNorm::Auto,
        }
    }
}

/// What one column's block solve did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlockStats {
    /// Trust-region iterations run.
    pub tr_iters: usize,
    /// Steps accepted.
    pub accepted: usize,
    /// CG iterations over all trust-region iterations.
    pub cg_iters: usize,
}

impl std::ops::AddAssign for BlockStats {
    fn add_assign(&mut self, o: Self) {
        self.tr_iters += o.tr_iters;
        self.accepted += o.accepted;
        self.cg_iters += o.cg_iters;
    }
}

/// The block's true curvature `F F^T` by its factor (`F = Phi_B`, `b x M`), where the model
/// matrix `kbb` is only an approximation of it.
pub trait CurvatureFactor: Sync {
    /// `F^T s` (length `M`).
    fn t_times(&self, s: &[f64]) -> Vec<f64>;
    /// `out = F u` (length `b`).
    fn times(&self, u: &[f64], out: &mut [f64]);
}

/// One block subproblem for one target column.
pub struct BlockProblem<'a> {
    /// `K_BB`, row-major `b x b`, symmetric positive semi-definite: the model's curvature,
    /// and the objective's unless `exact` is given.
    pub kbb: &'a [f64],
    /// The loss.
    pub loss: Loss,
    /// Per-coordinate data of the block's samples for this column.
    pub coords: &'a [Coord],
    /// The objective's curvature by its factor, when `kbb` is a model of it (see
    /// [`TrModel::Kernel`]): the ratio test measures the objective's true change with it.
    pub exact: Option<&'a dyn CurvatureFactor>,
}

/// Projected gradient entry: zero for a frozen coordinate.
fn is_frozen(slo: f64, shi: f64, g: f64, tol: f64) -> bool {
    (slo >= -tol && g > 0.0) || (shi <= tol && g < 0.0) || (slo >= -tol && shi <= tol)
}

/// Positive root `tau` of `||s + tau d|| = radius` (with `||s|| <= radius`).
fn to_boundary(s: &[f64], d: &[f64], radius: f64) -> f64 {
    let a: f64 = d.iter().map(|v| v * v).sum();
    let b: f64 = 2.0 * s.iter().zip(d).map(|(x, y)| x * y).sum::<f64>();
    let c: f64 = s.iter().map(|v| v * v).sum::<f64>() - radius * radius;
    if a <= 0.0 {
        return 0.0;
    }
    let disc = (b * b - 4.0 * a * c).max(0.0).sqrt();
    // numerically stable form of (-b + disc) / (2a)
    if b >= 0.0 {
        (-2.0 * c) / (b + disc).max(f64::MIN_POSITIVE)
    } else {
        (-b + disc) / (2.0 * a)
    }
    .max(0.0)
}

/// Largest `tau >= 0` with `slo <= s + tau d <= shi` over the active coordinates.
fn to_box(s: &[f64], d: &[f64], slo: &[f64], shi: &[f64]) -> f64 {
    let mut tau = f64::INFINITY;
    for i in 0..s.len() {
        if d[i] > 0.0 {
            tau = tau.min((shi[i] - s[i]) / d[i]);
        } else if d[i] < 0.0 {
            tau = tau.min((slo[i] - s[i]) / d[i]);
        }
    }
    tau.max(0.0)
}

/// The trust-region norm and preconditioner of one CG solve: the identity, or
/// `M = U_F diag(Lambda) U_F^T + diag(h_F + rho)` from a Nystrom approximation of `K_BB`
/// restricted to the free coordinates `F` (applied by Woodbury with an `r x r` Cholesky), or
/// with `r = 0` the diagonal norm of [`TrNorm::Diagonal`].
struct Metric {
    /// `U_F`, row-major `nf x r`.
    u: Vec<f64>,
    lam: Vec<f64>,
    dinv: Vec<f64>,
    /// Lower Cholesky factor of `Lambda^-1 + U_F^T D^-1 U_F`.
    chol: faer::Mat<f64>,
}

impl Metric {
    fn new(u_all: &faer::Mat<f64>, lam: &[f64], free: &[usize], diag: &[f64]) -> Option<Metric> {
        let r = lam.len();
        let nf = free.len();
        let u: Vec<f64> = free
            .iter()
            .flat_map(|&i| (0..r).map(move |k| u_all[(i, k)]))
            .collect();
        let dinv: Vec<f64> = diag.iter().map(|d| 1.0 / d).collect();
        if r == 0 {
            return Some(Metric {
                u,
                lam: Vec::new(),
                dinv,
                chol: faer::Mat::zeros(0, 0),
            });
        }
        // U_F^T D^-1 U_F as one product W^T W, W = D^-1/2 U_F (the entry-by-entry sums over
        // the strided columns of U_F cost more than the CG iterations the metric saves)
        let w = faer::Mat::<f64>::from_fn(nf, r, |i, k| u[i * r + k] * dinv[i].sqrt());
        let mut core = w.transpose() * &w;
        for a in 0..r {
            core[(a, a)] += 1.0 / lam[a].max(1e-12);
        }
        let chol = core.llt(faer::Side::Lower).ok()?.L().to_owned();
        Some(Metric {
            u,
            lam: lam.to_vec(),
            dinv,
            chol,
        })
    }

    fn r(&self) -> usize {
        self.lam.len()
    }

    /// `U^T v`.
    fn ut(&self, v: &[f64]) -> Vec<f64> {
        let r = self.r();
        let mut out = vec![0.0; r];
        if r == 0 {
            return out;
        }
        for (row, vi) in self.u.chunks_exact(r).zip(v) {
            for (o, uik) in out.iter_mut().zip(row) {
                *o += uik * vi;
            }
        }
        out
    }

    /// `x^T M y` from `tx = U^T x` and `ty = U^T y`:
    /// `sum_i x_i y_i / dinv_i + sum_k lam_k tx_k ty_k` (no `M y` formed).
    fn form(&self, x: &[f64], y: &[f64], tx: &[f64], ty: &[f64]) -> f64 {
        let diag: f64 = x
            .iter()
            .zip(y)
            .zip(&self.dinv)
            .map(|((a, b), di)| a * b / di)
            .sum();
        let low: f64 = tx
            .iter()
            .zip(ty)
            .zip(&self.lam)
            .map(|((a, b), l)| l * a * b)
            .sum();
        diag + low
    }

    /// `M^-1 v = D^-1 v - D^-1 U C^-1 U^T D^-1 v`.
    fn solve(&self, v: &[f64]) -> Vec<f64> {
        let r = self.r();
        let dv: Vec<f64> = v.iter().zip(&self.dinv).map(|(a, b)| a * b).collect();
        if r == 0 {
            return dv;
        }
        let t = self.ut(&dv);
        let mut tm = faer::Mat::<f64>::from_fn(r, 1, |k, _| t[k]);
        faer::linalg::triangular_solve::solve_lower_triangular_in_place(
            self.chol.as_ref(),
            tm.as_mut(),
            faer::Par::Seq,
        );
        faer::linalg::triangular_solve::solve_upper_triangular_in_place(
            self.chol.transpose(),
            tm.as_mut(),
            faer::Par::Seq,
        );
        dv.iter()
            .enumerate()
            .map(|(i, a)| {
                a - self.dinv[i] * (0..r).map(|k| self.u[i * r + k] * tm[(k, 0)]).sum::<f64>()
            })
            .collect()
    }
}

/// The Nystrom approximation of `K_BB` behind the preconditioned CG
/// ([`TrustRegion::nystrom_rank`]), from `apply: Omega -> K_BB Omega` (`b x rank`) and
/// `trace = Tr(K_BB)`, with a fixed sketch seed so that a block solved on the host and on a
/// device gets the same factors. `None` when the rank is 0 or not below `b`, or when the
/// approximation fails (the block is then solved without a metric).
pub fn block_nystrom(
    b: usize,
    rank: usize,
    trace: f64,
    apply: impl FnMut(faer::MatRef<'_, f64>) -> faer::Mat<f64>,
) -> Option<crate::nystrom::Nystrom> {
    if rank == 0 || rank >= b {
        return None;
    }
    crate::nystrom::Nystrom::new(b, rank, trace, 1.0, 0x7E5, apply).ok()
}

/// The Nystrom factors of `K_BB`, shared by the trust-region iterations of a block, and the
/// metric of the last iteration with the (free set, diagonal) it was built for.
struct MetricCache {
    sketch: Option<crate::nystrom::Nystrom>,
    /// `rho` of the diagonal norm, without a sketch.
    diagonal: Option<f64>,
    metric: Option<Metric>,
    key: Option<(Vec<usize>, Vec<f64>)>,
}

impl MetricCache {
    fn new(kbb: &[f64], b: usize, rank: usize, diagonal: bool) -> MetricCache {
        let k = faer::MatRef::from_row_major_slice(kbb, b, b);
        let trace: f64 = (0..b).map(|i| kbb[i * b + i]).sum();
        let sketch = block_nystrom(b, rank, trace, |om| k * om);
        let diagonal = (sketch.is_none() && diagonal).then(|| diagonal_shift(trace, b));
        MetricCache {
            sketch,
            diagonal,
            metric: None,
            key: None,
        }
    }

    /// The metric for the free coordinates with loss curvature `h` (`None` without a
    /// sketch). It depends only on the free set and the curvature there: while both stay
    /// (always for the squared loss without bounds) the factorisation is kept.
    fn for_free(&mut self, free: &[usize], h: &[f64]) -> Option<&Metric> {
        if let Some(rho) = self.diagonal {
            let diag: Vec<f64> = free.iter().map(|&i| h[i] + rho).collect();
            self.metric = Metric::new(&faer::Mat::zeros(0, 0), &[], free, &diag);
            return self.metric.as_ref();
        }
        let ny = self.sketch.as_ref()?;
        let lam = ny.eigenvalues();
        let rho = lam
            .last()
            .copied()
            .unwrap_or(0.0)
            .max(1e-10 * lam[0].max(1e-300));
        let diag: Vec<f64> = free.iter().map(|&i| h[i] + rho).collect();
        if self
            .key
            .as_ref()
            .is_none_or(|(f, d)| f.as_slice() != free || *d != diag)
        {
            self.metric = Metric::new(ny.u(), lam, free, &diag);
            self.key = Some((free.to_vec(), diag));
        }
        self.metric.as_ref()
    }
}

/// `||v||_M` (the 2-norm without a metric).
fn m_norm(metric: Option<&Metric>, v: &[f64]) -> f64 {
    match metric {
        Some(m) => {
            let tv = m.ut(v);
            m.form(v, v, &tv, &tv).max(0.0).sqrt()
        }
        None => dot(v, v).sqrt(),
    }
}

/// Positive root `tau` of `||s + tau d||_M = radius`.
fn to_boundary_m(metric: Option<&Metric>, s: &[f64], d: &[f64], radius: f64) -> f64 {
    let Some(m) = metric else {
        return to_boundary(s, d, radius);
    };
    let (ts, td) = (m.ut(s), m.ut(d));
    let a = m.form(d, d, &td, &td);
    let b = 2.0 * m.form(s, d, &ts, &td);
    let c = m.form(s, s, &ts, &ts) - radius * radius;
    if !(a > 0.0) {
        return 0.0;
    }
    let disc = (b * b - 4.0 * a * c).max(0.0).sqrt();
    if b >= 0.0 {
        (-2.0 * c) / (b + disc).max(f64::MIN_POSITIVE)
    } else {
        (-b + disc) / (2.0 * a)
    }
    .max(0.0)
}

/// `z = M^-1 r` restricted to the coordinates marked in `keep` (`r` itself without a metric,
/// where `r` is zero off them already).
fn precondition(metric: Option<&Metric>, r: &[f64], keep: &[bool]) -> Vec<f64> {
    match metric {
        None => r.to_vec(),
        Some(m) => m
            .solve(r)
            .into_iter()
            .zip(keep)
            .map(|(v, &a)| if a { v } else { 0.0 })
            .collect(),
    }
}

/// Truncated, box-aware CG-Steihaug on `min g^T s + 1/2 s^T Q s` subject to
/// `||s|| <= radius` and `slo <= s <= shi`. Returns the CG iterations used; `s` holds the
/// step.
///
/// CG runs until the residual is small, the radius is reached, or a move leaves the box.
/// At a box exit two candidates are compared on the model: the move stopped at the first
/// bound (the model keeps decreasing) and the move clipped to the box (the reference code's
/// rule, better when many bounds are crossed at once, but it can increase the model). The
/// better one is kept, the coordinates now at a bound are fixed, and CG restarts on the
/// others from the new point, so one trust-region iteration can settle many bounds.
#[allow(clippy::too_many_arguments)]
fn cg_steihaug(
    q: &[f32],
    g: &[f64],
    slo: &[f64],
    shi: &[f64],
    radius: f64,
    p: &TrustRegion,
    metric: Option<&Metric>,
    s: &mut [f64],
) -> usize {
    let n = g.len();
    s.fill(0.0);
    let mut active = vec![true; n];
    let precond = |r: &[f64], active: &[bool]| precondition(metric, r, active);
    let mut qs = vec![0.0; n]; // Q s
    let mut r: Vec<f64> = g.iter().map(|v| -v).collect();
    let mut z = precond(&r, &active);
    let mut d = z.clone();
    let mut qd = vec![0.0; n];
    let mut rz = dot(&r, &z);
    let stop = dot(&r, &r) * p.cg_rtol * p.cg_rtol;
    if stop == 0.0 {
        return 0;
    }
    let mut it = 0;
    while it < p.max_cg_iter {
        it += 1;
        matvec_mixed(q, &d, &mut qd);
        let dqd = dot(&d, &qd);
        let dd = dot(&d, &d);
        let tau_radius = to_boundary_m(metric, s, &d, radius);
        let curved = dqd > 1e-14 * dd;
        let omega = if curved { rz / dqd } else { f64::INFINITY };
        let tau = omega.min(tau_radius);
        let tau_box = to_box(s, &d, slo, shi);
        if tau_box >= tau {
            for i in 0..n {
                s[i] += tau * d[i];
                qs[i] += tau * qd[i];
            }
            if tau >= tau_radius {
                return it; // on the trust-region boundary
            }
            for i in 0..n {
                r[i] = if active[i] { r[i] - omega * qd[i] } else { 0.0 };
            }
            if dot(&r, &r) <= stop {
                return it;
            }
            z = precond(&r, &active);
            let rz_new = dot(&r, &z);
            let beta = rz_new / rz;
            for i in 0..n {
                d[i] = z[i] + beta * d[i];
            }
            rz = rz_new;
            continue;
        }
        // The move leaves the box: stopped at the first bound, or clipped.
        let stopped: Vec<f64> = (0..n)
            .map(|i| (s[i] + tau_box * d[i]).clamp(slo[i], shi[i]))
            .collect();
        let qs_stopped: Vec<f64> = (0..n).map(|i| qs[i] + tau_box * qd[i]).collect();
        let clipped: Vec<f64> = (0..n)
            .map(|i| (s[i] + tau * d[i]).clamp(slo[i], shi[i]))
            .collect();
        let qs_clipped = clipped_product(q, &qs, &qd, tau, s, d.as_slice(), &clipped);
        let model = |x: &[f64], qx: &[f64]| dot(g, x) + 0.5 * dot(x, qx);
        if model(&clipped, &qs_clipped) < model(&stopped, &qs_stopped) {
            s.copy_from_slice(&clipped);
            qs.copy_from_slice(&qs_clipped);
        } else {
            s.copy_from_slice(&stopped);
            qs.copy_from_slice(&qs_stopped);
        }
        // Fix the coordinates at a bound whose model gradient points outward; restart CG on
        // the rest with the steepest-descent direction. With a metric the direction
        // `M^-1 r` can point out of the box at a coordinate on its bound even where the
        // gradient points in: such a coordinate blocks the next move at its start (tau_box =
        // 0, no progress ever), so a coordinate on a bound that the move pushed outward is
        // fixed too.
        let mut any = false;
        for i in 0..n {
            let gi = g[i] + qs[i];
            let pushed =
                metric.is_some() && (d[i] < 0.0 && s[i] <= slo[i] || d[i] > 0.0 && s[i] >= shi[i]);
            let at_lo = s[i] <= slo[i] && (gi > 0.0 || pushed);
            let at_hi = s[i] >= shi[i] && (gi < 0.0 || pushed);
            if at_lo || at_hi {
                active[i] = false;
            }
            r[i] = if active[i] { -gi } else { 0.0 };
            any |= active[i];
        }
        if !any || m_norm(metric, s) >= radius * (1.0 - 1e-12) {
            return it;
        }
        if dot(&r, &r) <= stop {
            return it;
        }
        z = precond(&r, &active);
        rz = dot(&r, &z);
        d.copy_from_slice(&z);
    }
    it
}

/// Projected CG on `min g^T s + 1/2 s^T Q s` subject to `||s|| <= radius` and
/// `slo <= s <= shi` (the subspace step of Lin and More's TRON). Returns the products with
/// `Q` used; `s` holds the step.
///
/// Each round runs CG on the coordinates not held at a bound, through the box, until the
/// residual has fallen to a tenth of the round's first (or to `cg_rtol` of the solve's
/// first, if that is larger; to `cg_rtol` alone where no coordinate has a bound), the radius
/// is reached or the budget is spent: the block solve around it asks for a tenth of the
/// block's violation ([`TrustRegion::kkt_rtol`]), and blocks are revisited. Its step `w` is then projected onto the box by a search along it
/// (`P[s + t w]`, `t = 1, 1/2, ...`, kept at the first sufficient decrease of the model), and
/// the coordinates the projection set on a bound stay there for the later rounds. On a block
/// whose solution holds many coordinates at a bound (an SVM's non-support vectors) one
/// projection settles the bounds that [`cg_steihaug`] meets one exit at a time, each exit
/// restarting it from steepest descent (pendigits: 15 exits in 19 CG iterations on average).
/// Where no step of the search decreases the model enough, the block falls back on
/// [`cg_steihaug`] from the start.
#[allow(clippy::too_many_arguments)]
fn cg_projected(
    q: &[f32],
    g: &[f64],
    slo: &[f64],
    shi: &[f64],
    radius: f64,
    p: &TrustRegion,
    metric: Option<&Metric>,
    s: &mut [f64],
) -> usize {
    let n = g.len();
    s.fill(0.0);
    let stop = dot(g, g) * p.cg_rtol * p.cg_rtol;
    if stop == 0.0 {
        return 0;
    }
    let precond = |r: &[f64], free: &[bool]| precondition(metric, r, free);
    let model = |x: &[f64], qx: &[f64]| dot(g, x) + 0.5 * dot(x, qx);
    let outside = |x: &[f64]| (0..n).any(|i| x[i] < slo[i] || x[i] > shi[i]);
    // without a bound (KRR, Lp) the rounds run to `cg_rtol`: a loose CG there slowed the
    // distributed fits, whose ranks combine their block solves (docs/solver.md)
    let boxed = (0..n).any(|i| slo[i].is_finite() || shi[i].is_finite());
    let mut qs = vec![0.0; n]; // Q s
    let mut free = vec![true; n];
    let mut held = vec![false; n];
    let mut qd = vec![0.0; n];
    let mut it = 0;
    while it < p.max_cg_iter {
        // The round's coordinates: those whose gradient points into the box, and not held
        // on a bound by an earlier projection.
        let mut r = vec![0.0; n];
        for i in 0..n {
            let gi = g[i] + qs[i];
            let at_lo = s[i] <= slo[i] && (gi > 0.0 || held[i]);
            let at_hi = s[i] >= shi[i] && (gi < 0.0 || held[i]);
            free[i] = !(at_lo || at_hi);
            if free[i] {
                r[i] = -gi;
            }
        }
        let rr = dot(&r, &r);
        if rr <= stop {
            break;
        }
        // CG from `s` on the free coordinates, through the box.
        let round_stop = if boxed {
            stop.max(rr * PROJECTED_ROUND_RTOL * PROJECTED_ROUND_RTOL)
        } else {
            stop
        };
        let (base, qbase) = (s.to_vec(), qs.clone());
        let mut z = precond(&r, &free);
        let mut d = z.clone();
        let mut rz = dot(&r, &z);
        let mut on_radius = false;
        while it < p.max_cg_iter {
            it += 1;
            matvec_mixed(q, &d, &mut qd);
            let dqd = dot(&d, &qd);
            let tau_radius = to_boundary_m(metric, s, &d, radius);
            let curved = dqd > 1e-14 * dot(&d, &d);
            let omega = if curved { rz / dqd } else { f64::INFINITY };
            let tau = omega.min(tau_radius);
            for i in 0..n {
                s[i] += tau * d[i];
                qs[i] += tau * qd[i];
            }
            if tau >= tau_radius {
                on_radius = true;
                break;
            }
            for i in 0..n {
                if free[i] {
                    r[i] -= omega * qd[i];
                }
            }
            let rr = dot(&r, &r);
            if rr <= round_stop {
                break;
            }
            z = precond(&r, &free);
            let rz_new = dot(&r, &z);
            let beta = rz_new / rz;
            for i in 0..n {
                d[i] = z[i] + beta * d[i];
            }
            rz = rz_new;
        }
        if !outside(s) {
            break; // no bound crossed: the round's CG step stands
        }
        // The projected search along the round's step `w = s - base`.
        let w: Vec<f64> = (0..n).map(|i| s[i] - base[i]).collect();
        let qw: Vec<f64> = (0..n).map(|i| qs[i] - qbase[i]).collect();
        let m_base = model(&base, &qbase);
        let mut t = 1.0;
        let mut found = None;
        for _ in 0..=PROJECTED_HALVINGS {
            let x: Vec<f64> = (0..n)
                .map(|i| (base[i] + t * w[i]).clamp(slo[i], shi[i]))
                .collect();
            let (qx, full) = projected_product(q, &qbase, &qw, t, &base, &w, &x);
            it += usize::from(full);
            let slope: f64 = (0..n).map(|i| (g[i] + qbase[i]) * (x[i] - base[i])).sum();
            let mx = model(&x, &qx);
            let inside = metric.is_none_or(|_| m_norm(metric, &diff(&x, &base)) <= radius);
            if inside && mx < m_base && mx - m_base <= PROJECTED_MU * slope {
                found = Some((x, qx));
                break;
            }
            t *= 0.5;
        }
        let Some((x, qx)) = found else {
            return it + cg_steihaug(q, g, slo, shi, radius, p, metric, s);
        };
        for i in 0..n {
            held[i] |= x[i] != base[i] + t * w[i];
        }
        s.copy_from_slice(&x);
        qs = qx;
        if on_radius {
            break;
        }
    }
    it
}

/// The fraction of a [`cg_projected`] round's first residual at which the round ends
/// (measured: `docs/solver.md`, "Projected CG").
const PROJECTED_ROUND_RTOL: f64 = 0.1;
/// The sufficient decrease of [`cg_projected`]'s search, as a fraction of the decrease its
/// linear model predicts (TRON's `mu0`).
const PROJECTED_MU: f64 = 0.01;
/// Halvings of [`cg_projected`]'s search before the block falls back on [`cg_steihaug`].
const PROJECTED_HALVINGS: usize = 4;

/// `x - y`.
fn diff(x: &[f64], y: &[f64]) -> Vec<f64> {
    x.iter().zip(y).map(|(a, b)| a - b).collect()
}

/// `Q x` for `x = clamp(base + t w)` from `Q base` and `Q w`: only the clamped coordinates need
/// rows of `Q` (symmetric), `Q x = Q base + t Q w + sum_k e_k Q_k` with `e = x - base - t w`;
/// with many clamped the product is formed afresh (the second value: whether it was).
fn projected_product(
    q: &[f32],
    qbase: &[f64],
    qw: &[f64],
    t: f64,
    base: &[f64],
    w: &[f64],
    x: &[f64],
) -> (Vec<f64>, bool) {
    let n = x.len();
    let moved: Vec<(usize, f64)> = (0..n)
        .map(|i| (i, x[i] - (base[i] + t * w[i])))
        .filter(|&(_, e)| e != 0.0)
        .collect();
    let mut out = vec![0.0; n];
    if moved.len() * 4 > n {
        matvec_mixed(q, x, &mut out);
        return (out, true);
    }
    for i in 0..n {
        out[i] = qbase[i] + t * qw[i];
    }
    let rows: Vec<&[f32]> = moved.iter().map(|&(k, _)| &q[k * n..(k + 1) * n]).collect();
    let coef: Vec<f64> = moved.iter().map(|&(_, e)| e).collect();
    crate::linalg::add_rows_mixed(&rows, &coef, &mut out);
    (out, false)
}

/// `Q x` for `x = clamp(s + tau d)`, from the known `Q s` and `Q d` ([`projected_product`]).
/// (The device twin in `cuda/trsolve.cu` always forms it afresh: the same value up to
/// rounding.)
fn clipped_product(
    q: &[f32],
    qs: &[f64],
    qd: &[f64],
    tau: f64,
    s: &[f64],
    d: &[f64],
    x: &[f64],
) -> Vec<f64> {
    projected_product(q, qs, qd, tau, s, d, x).0
}

/// The model's decrease `-(g^T s + 1/2 s^T (K_BB + diag(h)) s)` for the step `sf` on the free
/// coordinates (`ks = K_BB s`), the rounding noise below which it means nothing, and
/// `s^T K_BB s`.
fn predicted(free: &[usize], sf: &[f64], g: &[f64], ks: &[f64], h: &[f64]) -> (f64, f64, f64) {
    let gs_dot: f64 = free.iter().zip(sf).map(|(&i, v)| g[i] * v).sum();
    let sks: f64 = free.iter().zip(sf).map(|(&i, v)| ks[i] * v).sum();
    let shs: f64 = free.iter().zip(sf).map(|(&i, v)| h[i] * v * v).sum();
    let pred = -(gs_dot + 0.5 * (sks + shs));
    let noise = 1e-13 * (gs_dot.abs() + sks.abs() + shs.abs());
    (pred, noise, sks)
}

/// The gradient and the step box `[lo_s, hi_s]` of a coordinate at `a` with smooth gradient
/// `gs` and box `(lo, hi)`. With an `l1 |a|` term (SVR) the coordinate is confined to the
/// orthant of its sign, or of its steepest-descent sign at zero (no move where `|gs| <= l1`);
/// within [`AT_ZERO`](crate::loss::AT_ZERO) of zero it counts as at zero.
pub fn orthant_step(gs: f64, a: f64, (lo, hi): (f64, f64), l1: f64) -> (f64, f64, f64) {
    let (mut lo_s, mut hi_s) = (lo - a, hi - a);
    if l1 <= 0.0 {
        return (gs, lo_s, hi_s);
    }
    let side = l1_sign(a);
    let sigma = if side != 0.0 {
        side
    } else if gs < -l1 {
        1.0
    } else if gs > l1 {
        -1.0
    } else {
        0.0
    };
    if sigma > 0.0 {
        lo_s = lo_s.max(-a);
    } else if sigma < 0.0 {
        hi_s = hi_s.min(-a);
    } else {
        lo_s = 0.0;
        hi_s = 0.0;
    }
    (gs + l1 * sigma, lo_s, hi_s)
}

/// `K_BB` restricted to the free coordinates, in f32 for CG (half the memory traffic; the
/// ratio test uses `K_BB` in f64), into `q`. While the free set stays `q_free`, only the
/// diagonal (the loss curvature) changes and the gather is skipped.
fn gather_model(kbb: &[f64], b: usize, free: &[usize], q: &mut Vec<f32>, q_free: &mut Vec<usize>) {
    if free == q_free.as_slice() {
        return;
    }
    let nf = free.len();
    q.resize(nf * nf, 0.0);
    for (qr, &i) in q.chunks_exact_mut(nf).zip(free) {
        let row = &kbb[i * b..(i + 1) * b];
        for (v, &j) in qr.iter_mut().zip(free) {
            *v = row[j] as f32;
        }
    }
    q_free.clear();
    q_free.extend_from_slice(free);
}

impl RadiusRule {
    /// Updates the radius after a step with actual and predicted decrease `ared` and
    /// `ared / rho` (`on_boundary`: the step reached the radius); returns whether the step is
    /// accepted.
    fn update(
        self,
        radius: &mut f64,
        ared: f64,
        rho: f64,
        on_boundary: bool,
        delta_max: f64,
        eta: f64,
    ) -> bool {
        match self {
            RadiusRule::Reference => {
                if !(ared > 0.0) {
                    *radius *= 0.25;
                } else if rho < 0.25 {
                    *radius *= 0.5;
                } else if rho > 0.75 && on_boundary {
                    *radius = (2.0 * *radius).min(delta_max);
                }
                ared > 0.0 && rho > eta
            }
            RadiusRule::Paper => {
                if !(rho >= 0.5) {
                    *radius *= 0.25;
                } else if rho > 0.75 && on_boundary {
                    *radius = (2.0 * *radius).min(delta_max);
                }
                rho > eta
            }
        }
    }
}

/// The objective's true curvature under a model curvature ([`BlockProblem::exact`]): its
/// factor `F`, `gbar` at the block's start and `F^T (alpha - alpha_0)`. An accepted step moves
/// `gbar` by the model's `K_model s` (no product with `F`), so the gradient is the model's
/// around the last refresh; the ratio test stays exact for the objective
/// (`s^T gbar_true = s^T gbar_0 + (F^T s)^T F^T (alpha - alpha_0)`). A rejected step may come
/// from that drift, so the next iteration starts from the exact `gbar`.
struct TrueCurvature<'a> {
    factor: &'a dyn CurvatureFactor,
    gbar0: Vec<f64>,
    moved: Vec<f64>,
    drifted: bool,
}

impl TrueCurvature<'_> {
    /// `gbar = gbar_0 + F F^T (alpha - alpha_0)` where accepted steps moved it by the model.
    fn refresh(&mut self, gbar: &mut [f64], scratch: &mut [f64]) {
        if !self.drifted {
            return;
        }
        self.factor.times(&self.moved, scratch);
        for ((g, g0), k) in gbar.iter_mut().zip(&self.gbar0).zip(scratch.iter()) {
            *g = g0 + k;
        }
        self.drifted = false;
    }

    /// `s^T gbar_true`, `s^T F F^T s` and `u = F^T s`.
    fn change(&self, s: &[f64]) -> (f64, f64, Vec<f64>) {
        let u = self.factor.t_times(s);
        let sg = dot(s, &self.gbar0)
            + if self.moved.is_empty() {
                0.0
            } else {
                dot(&u, &self.moved)
            };
        (sg, dot(&u, &u), u)
    }

    /// Records an accepted step `s` with `u = F^T s`.
    fn accept(&mut self, u: Vec<f64>) {
        self.drifted = true;
        if self.moved.is_empty() {
            self.moved = u;
        } else {
            self.moved.iter_mut().zip(&u).for_each(|(m, v)| *m += v);
        }
    }
}

/// The gradient (with the orthant's sign at zero), the step box and the free set at `alpha`:
/// fills `g`, `slo`, `shi` and `free` (the coordinates not frozen at a bound) and returns the
/// largest free gradient entry, the block's KKT residual.
fn free_set(
    prob: &BlockProblem,
    alpha: &[f64],
    gbar: &[f64],
    bounds: &[(f64, f64)],
    (g, slo, shi): (&mut [f64], &mut [f64], &mut [f64]),
    free: &mut Vec<usize>,
) -> f64 {
    let (loss, l1) = (prob.loss, prob.loss.l1_weight());
    free.clear();
    let mut kkt: f64 = 0.0;
    for i in 0..alpha.len() {
        let a = alpha[i];
        let gs = gbar[i] + loss.grad(a, &prob.coords[i]);
        let (gi, lo_s, hi_s) = orthant_step(gs, a, bounds[i], l1);
        g[i] = gi;
        slo[i] = lo_s;
        shi[i] = hi_s;
        let tol = 1e-13 * (1.0 + a.abs());
        if !is_frozen(lo_s, hi_s, gi, tol) {
            free.push(i);
            kkt = kkt.max(gi.abs());
        }
    }
    kkt
}

/// Solves the block subproblem for one column: updates `alpha` (the block's coordinates) and
/// `gbar` (`K_{B,:} alpha`; with [`BlockProblem::exact`], its model) in place.
pub fn solve_column(
    prob: &BlockProblem,
    alpha: &mut [f64],
    gbar: &mut [f64],
    delta_max: f64,
    p: &TrustRegion,
) -> BlockStats {
    let b = alpha.len();
    let loss = prob.loss;
    let bounds: Vec<(f64, f64)> = prob.coords.iter().map(|k| loss.bounds(k)).collect();
    let mut stats = BlockStats::default();
    let mut radius = 0.25 * delta_max;

    let (mut g, mut h) = (vec![0.0; b], vec![0.0; b]);
    let (mut slo, mut shi) = (vec![0.0; b], vec![0.0; b]);
    let mut s = vec![0.0; b];
    let mut ks = vec![0.0; b];
    let mut free: Vec<usize> = Vec::with_capacity(b);
    // the model matrix of the last trust-region iteration and its free set
    let (mut q, mut q_free) = (Vec::<f32>::new(), Vec::<usize>::new());
    let mut metrics = MetricCache::new(prob.kbb, b, p.nystrom_rank, p.norm.is_diagonal(loss));

    let mut exact = prob.exact.map(|factor| TrueCurvature {
        factor,
        gbar0: gbar.to_vec(),
        moved: Vec::new(),
        drifted: false,
    });

    let mut rejected = false;
    // the block's KKT residual at its start, which `kkt_rtol` is relative to
    let mut kkt0 = None;
    for _ in 0..p.max_iter {
        if let Some(true_curvature) = exact.as_mut().filter(|_| rejected) {
            true_curvature.refresh(gbar, &mut ks);
        }
        let kkt = free_set(
            prob,
            alpha,
            gbar,
            &bounds,
            (&mut g, &mut slo, &mut shi),
            &mut free,
        );
        let kkt0 = *kkt0.get_or_insert(kkt);
        if kkt < p.kkt_tol || kkt < p.kkt_rtol * kkt0 || free.is_empty() {
            break;
        }
        stats.tr_iters += 1;

        // The model restricted to the free coordinates.
        let nf = free.len();
        gather_model(prob.kbb, b, &free, &mut q, &mut q_free);
        for (r, &i) in free.iter().enumerate() {
            h[i] = loss.hess(alpha[i], &prob.coords[i]);
            q[r * nf + r] = (prob.kbb[i * b + i] + h[i]) as f32;
        }
        let gf: Vec<f64> = free.iter().map(|&i| g[i]).collect();
        let lf: Vec<f64> = free.iter().map(|&i| slo[i]).collect();
        let hf: Vec<f64> = free.iter().map(|&i| shi[i]).collect();
        let metric = metrics.for_free(&free, &h);
        let mut sf = vec![0.0; nf];
        // The projected CG where the model is the objective's own curvature and the loss's
        // curvature makes it strictly convex on every free coordinate. Without the latter
        // (hinge, SVR, L1) CG through the box runs to the radius along the kernel's
        // near-null directions and the projection of that step rarely decreases the model;
        // under a model curvature (random features' kernel model) each trust-region
        // iteration's ratio test costs more than the CG products its looser rounds save
        // (measured: docs/solver.md, "Projected CG").
        let projected = prob.exact.is_none() && free.iter().all(|&i| h[i] > 0.0);
        stats.cg_iters += if projected {
            cg_projected(&q, &gf, &lf, &hf, radius, p, metric, &mut sf)
        } else {
            cg_steihaug(&q, &gf, &lf, &hf, radius, p, metric, &mut sf)
        };
        s.fill(0.0);
        for (c, &i) in free.iter().enumerate() {
            s[i] = sf[c];
        }

        // Predicted and actual decrease.
        matvec(prob.kbb, &s, &mut ks);
        let (pred, noise, sks) = predicted(&free, &sf, &g, &ks, &h);
        if !(pred > noise) {
            break; // the model promises nothing measurable: the block is solved
        }
        // The objective's change: its linear and quadratic parts from the model matrix, or,
        // under a model curvature, from `u = F^T s` and `F^T (alpha - alpha_0)`.
        let dual_change: f64 = free
            .iter()
            .zip(&sf)
            .map(|(&i, &v)| loss.dual_change(alpha[i], v, &prob.coords[i]))
            .sum();
        let (dj, u) = match &exact {
            None => {
                let sg: f64 = free.iter().zip(&sf).map(|(&i, v)| v * gbar[i]).sum();
                (sg + dual_change + 0.5 * sks, None)
            }
            Some(true_curvature) => {
                let (sg, sks, u) = true_curvature.change(&s);
                (sg + dual_change + 0.5 * sks, Some(u))
            }
        };
        let ared = -dj;
        let rho = ared / pred;
        let norm_s = m_norm(metric, &sf);
        let on_boundary = (norm_s - radius).abs() <= 1e-3 * radius;
        let accept = p
            .rule
            .update(&mut radius, ared, rho, on_boundary, delta_max, p.eta);
        rejected = !accept;
        if accept {
            stats.accepted += 1;
            for &i in &free {
                let (lo, hi) = bounds[i];
                alpha[i] = (alpha[i] + s[i]).clamp(lo, hi);
            }
            for (gb, k) in gbar.iter_mut().zip(&ks) {
                *gb += k;
            }
            if let (Some(u), Some(true_curvature)) = (u, exact.as_mut()) {
                true_curvature.accept(u);
            }
        }
        let scale = 1.0 + alpha.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        if radius < 1e-14 * scale {
            break;
        }
    }
    stats
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Stream;

    /// A random psd `K = A A^T / m` of size `b` from `m` random columns.
    fn random_psd(b: usize, m: usize, seed: u64) -> Vec<f64> {
        let mut s = Stream::new(seed, 3);
        let a: Vec<f64> = (0..b * m).map(|_| s.uniform() - 0.5).collect();
        let mut k = vec![0.0; b * b];
        for i in 0..b {
            for j in 0..b {
                k[i * b + j] =
                    (0..m).map(|c| a[i * m + c] * a[j * m + c]).sum::<f64>() / m as f64 * 4.0;
            }
        }
        k
    }

    /// With `alpha_{B^c} = 0`, the block problem for KRR is `(K + lambda I) a = y`; a single
    /// block solve from zero must reach it.
    #[test]
    fn krr_block_solves_the_linear_system() {
        let b = 30;
        let k = random_psd(b, 50, 1);
        let lam = 0.1;
        let mut st = Stream::new(2, 0);
        let coords: Vec<Coord> = (0..b)
            .map(|_| Coord {
                y: st.uniform() * 2.0 - 1.0,
                lam,
                eps: 0.0,
            })
            .collect();
        let prob = BlockProblem {
            kbb: &k,
            loss: Loss::SquaredError,
            coords: &coords,
            exact: None,
        };
        let mut alpha = vec![0.0; b];
        let mut gbar = vec![0.0; b];
        let p = TrustRegion {
            kkt_rtol: 0.0,
            kkt_tol: 1e-10,
            ..Default::default()
        };
        solve_column(&prob, &mut alpha, &mut gbar, 64.0, &p);
        for i in 0..b {
            let r: f64 =
                (0..b).map(|j| k[i * b + j] * alpha[j]).sum::<f64>() + lam * alpha[i] - coords[i].y;
            assert!(r.abs() < 1e-8, "residual {r} at {i}");
            let gb: f64 = (0..b).map(|j| k[i * b + j] * alpha[j]).sum();
            assert!((gb - gbar[i]).abs() < 1e-10, "gbar out of sync");
        }
    }

    /// An SVR coordinate a rounding error above zero whose gradient points across zero
    /// crosses it: `1/2 a^2 + 0.4 a` from `a = 1e-162` (gradient `0.5`, epsilon `0.1`) ends at
    /// `a = -0.4`, where it stayed at `1e-162` when the sign of `a` fixed its orthant.
    #[test]
    fn an_svr_coordinate_a_hair_above_zero_crosses_it() {
        let loss = Loss::EpsilonInsensitive { epsilon: 0.1 };
        let coords = [Coord {
            y: 0.0,
            lam: 1.0,
            eps: 0.0,
        }];
        let k = [1.0];
        let prob = BlockProblem {
            kbb: &k,
            loss,
            coords: &coords,
            exact: None,
        };
        for start in [1e-162, -1e-162, 1e-14] {
            let mut alpha = vec![start];
            let mut gbar = vec![0.5 + start];
            let p = TrustRegion {
                kkt_rtol: 0.0,
                kkt_tol: 1e-12,
                ..Default::default()
            };
            solve_column(&prob, &mut alpha, &mut gbar, 64.0, &p);
            assert!(
                (alpha[0] + 0.4).abs() < 1e-9 && (gbar[0] - 0.1).abs() < 1e-9,
                "from {start:e}: a = {:e}, gbar = {}",
                alpha[0],
                gbar[0]
            );
        }
    }

    /// Hinge loss (h = 0, a box, a rank-deficient K): the result satisfies the box KKT
    /// conditions of the block problem.
    #[test]
    fn hinge_block_meets_box_kkt() {
        let b = 40;
        let k = random_psd(b, 10, 4); // rank 10 < b
        let lam = 0.5;
        let mut st = Stream::new(5, 0);
        let coords: Vec<Coord> = (0..b)
            .map(|_| Coord {
                y: if st.uniform() < 0.5 { 1.0 } else { -1.0 },
                lam,
                eps: 0.0,
            })
            .collect();
        let loss = Loss::Hinge;
        let prob = BlockProblem {
            kbb: &k,
            loss,
            coords: &coords,
            exact: None,
        };
        let mut alpha = vec![0.0; b];
        let mut gbar = vec![0.0; b];
        let p = TrustRegion {
            kkt_rtol: 0.0,
            kkt_tol: 1e-9,
            max_iter: 500,
            ..Default::default()
        };
        solve_column(&prob, &mut alpha, &mut gbar, 64.0, &p);
        for i in 0..b {
            let (lo, hi) = loss.bounds(&coords[i]);
            assert!(alpha[i] >= lo && alpha[i] <= hi);
            let g = gbar[i] + loss.grad(alpha[i], &coords[i]);
            let pg = if alpha[i] <= lo {
                g.min(0.0)
            } else if alpha[i] >= hi {
                g.max(0.0)
            } else {
                g
            };
            assert!(
                pg.abs() < 1e-6,
                "projected gradient {pg} at {i} (a={}, box [{lo},{hi}])",
                alpha[i]
            );
        }
    }
    /// Squared hinge (`h = lam > 0`: the projected CG's case) and a block whose optimum holds
    /// a quarter to three quarters of its coordinates at zero: the solve reaches the block
    /// optimum of an independent projected-gradient solve in f64 (step `1 / L`, `L` bounding
    /// the largest eigenvalue, 20,000 steps) to 1e-7.
    #[test]
    fn squared_hinge_block_reaches_the_projected_gradient_optimum() {
        // two classes of points on a line, labelled by their side: a Gaussian kernel with
        // the far points' margins met by their neighbours
        let b = 48;
        let mut st = Stream::new(7, 0);
        let x: Vec<f64> = (0..b).map(|_| st.uniform() * 6.0 - 3.0).collect();
        let k: Vec<f64> = (0..b * b)
            .map(|ij| 2.0 * (-(x[ij / b] - x[ij % b]).powi(2)).exp())
            .collect();
        let lam = 0.5;
        let coords: Vec<Coord> = x
            .iter()
            .map(|&v| Coord {
                y: if v > 0.0 { 1.0 } else { -1.0 },
                lam,
                eps: 0.0,
            })
            .collect();
        let loss = Loss::SquaredHinge;
        // the reference: projected gradient on 1/2 a^T K a + sum f_i(a_i) over the box
        let l: f64 = lam + (0..b).map(|i| k[i * b + i]).sum::<f64>();
        let mut a_ref = vec![0.0; b];
        for _ in 0..20_000 {
            let step: Vec<f64> = (0..b)
                .map(|i| {
                    let ka: f64 = (0..b).map(|j| k[i * b + j] * a_ref[j]).sum();
                    let (lo, hi) = loss.bounds(&coords[i]);
                    (a_ref[i] - (ka + loss.grad(a_ref[i], &coords[i])) / l).clamp(lo, hi)
                })
                .collect();
            a_ref = step;
        }
        let at_bound = a_ref.iter().filter(|&&v| v == 0.0).count();
        assert!(
            at_bound > b / 4 && at_bound < 3 * b / 4,
            "{at_bound} of {b} at zero"
        );
        let prob = BlockProblem {
            kbb: &k,
            loss,
            coords: &coords,
            exact: None,
        };
        let (mut alpha, mut gbar) = (vec![0.0; b], vec![0.0; b]);
        let p = TrustRegion {
            kkt_rtol: 0.0,
            kkt_tol: 1e-10,
            max_iter: 500,
            ..Default::default()
        };
        let stats = solve_column(&prob, &mut alpha, &mut gbar, 64.0, &p);
        assert!(stats.accepted > 0);
        for i in 0..b {
            assert!(
                (alpha[i] - a_ref[i]).abs() < 1e-7,
                "coordinate {i}: {} against the reference {}",
                alpha[i],
                a_ref[i]
            );
        }
    }

    /// One projected CG step on random strictly convex box problems (a quarter of the
    /// coordinates at a bound from the start, radii from tight to loose, with and without
    /// budget): the step stays in the box and the radius and decreases the model.
    #[test]
    fn projected_cg_steps_stay_in_the_box_and_the_radius_and_descend() {
        for seed in 0..12u64 {
            let n = 64;
            let kd = random_psd(n, 40, 20 + seed);
            let mut st = Stream::new(30 + seed, 0);
            let mut q: Vec<f32> = kd.iter().map(|&v| v as f32).collect();
            for i in 0..n {
                q[i * n + i] += 0.3;
            }
            let g: Vec<f64> = (0..n).map(|_| st.uniform() * 2.0 - 1.2).collect();
            let slo: Vec<f64> = (0..n)
                .map(|i| if i % 4 == 0 { 0.0 } else { -0.2 * st.uniform() })
                .collect();
            let shi: Vec<f64> = (0..n).map(|_| 0.1 + st.uniform()).collect();
            let radius = [0.05, 0.5, 5.0][seed as usize % 3];
            let p = TrustRegion {
                max_cg_iter: [3, 20, 200][seed as usize / 4],
                ..Default::default()
            };
            let mut s = vec![f64::NAN; n];
            let used = cg_projected(&q, &g, &slo, &shi, radius, &p, None, &mut s);
            assert!(used >= 1);
            for i in 0..n {
                assert!(
                    s[i] >= slo[i] && s[i] <= shi[i],
                    "seed {seed}: s[{i}] = {} outside",
                    s[i]
                );
            }
            assert!(
                dot(&s, &s).sqrt() <= radius * (1.0 + 1e-9),
                "seed {seed}: beyond the radius"
            );
            let mut qs = vec![0.0; n];
            matvec_mixed(&q, &s, &mut qs);
            let model = dot(&g, &s) + 0.5 * dot(&s, &qs);
            assert!(model < 0.0, "seed {seed}: the model rose to {model}");
        }
    }
}

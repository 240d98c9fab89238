//! Full (exact) kernel ridge regression, `(K + lambda I) w = y`, without forming `K`:
//! Skotch and ASkotch (Rathore, Frangella and Udell: Nystrom-preconditioned block coordinate
//! descent, accelerated in ASkotch) and conjugate gradients with a Nystrom preconditioner.
//! The choices and the corrections to the printed algorithms: `docs/papers/askotch.md`.
//!
//! Every kernel product is streamed in tiles through the backend. The only kernel block ever
//! formed is a Skotch/ASkotch block's `K_BB` during the setup, and only while it takes at most
//! [`KrrConfig::max_block_gram_bytes`]; so memory stays `O(n + b r)` plus that (plus `O(n r)` for the PCG
//! preconditioner or the stored block preconditioners; see [`KrrConfig::memory`]).

use std::time::{Duration, Instant};

use faer::{Mat, MatRef};

use crate::backend::Backend;
use crate::backend::predict::Predictor;
use crate::data::{DenseMatrix, Features};
use crate::error::{JokerError, Result, invalid};
use crate::kernel::Kernel;
use crate::nystrom::{Nystrom, smoothness};
use crate::rng::{Stream, streams};
use crate::scalar::Scalar;

/// The default of [`KrrConfig::max_block_gram_bytes`]: a block's `K_BB` is formed for the
/// setup up to about 5,800 rows.
pub const GRAM_BYTES: usize = 1 << 28;

/// Which full-KRR method.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum KrrMethod {
    /// Nystrom-preconditioned randomized block coordinate descent.
    Skotch,
    /// Skotch with Nesterov acceleration (NU_ACDM), the paper's recommended method.
    ASkotch,
    /// Conjugate gradients on `K + lambda I` preconditioned by a rank-`r` Nystrom
    /// approximation of `K` (damping `lambda`).
    NystromPcg,
}

/// Settings of the full-KRR solvers.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct KrrConfig {
    /// The method.
    pub method: KrrMethod,
    /// Number of blocks `B` (Skotch/ASkotch).
    pub blocks: usize,
    /// Nystrom rank `r`.
    pub rank: usize,
    /// Block sampling exponent: `p_b ~ L_b^alpha` (Skotch; ASkotch uses `(1 - beta)/2` with
    /// `beta = 0`, i.e. 1/2).
    pub alpha: f64,
    /// Iteration budget.
    pub max_iter: usize,
    /// Stop when `||(K + lambda I) w - y|| / ||y||` is at most this.
    pub tol: f64,
    /// Evaluate the residual every this many iterations (a full pass over `K`).
    pub check_every: usize,
    /// Wall-clock budget.
    pub time_limit: Option<Duration>,
    /// Power iterations for the block smoothness constants (paper: 10).
    pub power_iters: usize,
    /// Seed of the partition, the sampling and the sketches.
    pub seed: u64,
    /// Skotch/ASkotch: keep the `B` block preconditioners of the setup (`O(n r)` memory)
    /// instead of building a fresh one from a new sketch at every step (the paper's choice,
    /// `O(r b^2)` kernel work per step).
    #[serde(default)]
    pub store_preconditioners: bool,
    /// Skotch/ASkotch: form a block's `K_BB` for the setup (the sketch and the power
    /// iterations) when it takes at most this many bytes; otherwise stream its products
    /// (`1 + power_iters` kernel passes over the block instead of one). Default
    /// [`GRAM_BYTES`].
    #[serde(default = "gram_bytes_default")]
    pub max_block_gram_bytes: usize,
}

fn gram_bytes_default() -> usize {
    GRAM_BYTES
}

impl Default for KrrConfig {
    fn default() -> Self {
        KrrConfig {
            method: KrrMethod::ASkotch,
            blocks: 10,
            rank: 100,
            alpha: 0.5,
            max_iter: 1000,
            tol: 1e-6,
            check_every: 50,
            time_limit: None,
            power_iters: 10,
            seed: 42,
            store_preconditioners: false,
            max_block_gram_bytes: GRAM_BYTES,
        }
    }
}

impl KrrConfig {
    /// Checks the settings that do not depend on the data (the number of blocks is checked
    /// against the number of samples when the solve starts).
    pub fn validate(&self) -> Result<()> {
        if self.max_iter == 0 || self.check_every == 0 {
            return Err(invalid(
                "max_iter",
                "iteration budget and check period must be >= 1",
            ));
        }
        if self.rank == 0 {
            return Err(invalid("krr_rank", "the Nystrom rank must be >= 1"));
        }
        if self.method != KrrMethod::NystromPcg && self.blocks == 0 {
            return Err(invalid("krr_blocks", "must be >= 1"));
        }
        if !(self.tol >= 0.0 && self.tol.is_finite()) {
            return Err(invalid(
                "krr_tol",
                format!(
                    "the relative residual tolerance must be >= 0 and finite, got {}",
                    self.tol
                ),
            ));
        }
        if !(0.0..=1.0).contains(&self.alpha) {
            return Err(invalid(
                "alpha",
                format!(
                    "the sampling exponent must be in [0, 1], got {}",
                    self.alpha
                ),
            ));
        }
        if self.power_iters == 0 {
            return Err(invalid("power_iters", "must be >= 1"));
        }
        Ok(())
    }

    /// Bytes a solve on `n` points of `d` features needs beyond the data itself: the
    /// length-`n` vectors, the sketch and factors of one block (`b = ceil(n / B)` rows), the
    /// stored preconditioners or PCG's `n x r` factor, and the kernel tiles of the streamed
    /// products (`elem` bytes per feature value).
    pub fn memory(&self, n: usize, d: usize, elem: usize) -> usize {
        let f64s = 8;
        let r = self.rank.min(n);
        let tiles = 2
            * crate::backend::predict::CHUNK_ROWS
            * crate::backend::predict::CHUNK_ROWS.min(n)
            * f64s;
        match self.method {
            KrrMethod::NystromPcg => {
                // y, w, residual, z, p, A p; the sketch Omega, Q, Y, B and U (n x r each)
                6 * n * f64s + 5 * n * r * f64s + tiles
            }
            KrrMethod::Skotch | KrrMethod::ASkotch => {
                let b = n.div_ceil(self.blocks.max(1));
                let r = r.min(b);
                // y, w, z, x and a block's gathered rows, gradient and step; the block sketch
                let vectors = 4 * n * f64s + b * (d * elem + 3 * f64s);
                let sketch = 5 * b * r * f64s + 3 * r * r * f64s;
                let gram = if b * b * f64s <= self.max_block_gram_bytes {
                    b * b * f64s
                } else {
                    0
                };
                let stored = if self.store_preconditioners {
                    self.blocks * (b * r + r * r + r) * f64s
                } else {
                    0
                };
                vectors + sketch + gram + stored + tiles
            }
        }
    }
}

/// One monitoring point.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct KrrProgress {
    /// Iterations done.
    pub iter: usize,
    /// Seconds since the start, excluding the time of the checks (the residual and the
    /// progress callback).
    pub seconds: f64,
    /// `||(K + lambda I) w - y|| / ||y||`.
    pub rel_residual: f64,
    /// Primal objective `1/2 w^T K w + (1/lambda) sum_i (y_i - (K w)_i)^2 / 2` (Joker's scaling).
    pub primal: f64,
    /// Dual objective `-(1/2 w^T K w + sum_i (lambda w_i^2 / 2 - y_i w_i))`.
    pub dual: f64,
    /// Wall-clock seconds at the end of this check, checks included (the progress callback
    /// sees the time before it was called; the history, after).
    pub check_end: f64,
}

/// The result of a full-KRR solve.
#[derive(Clone, Debug)]
pub struct KrrSolution {
    /// The coefficients `w` (`f(x) = sum_i w_i k(x_i, x)`).
    pub w: Vec<f64>,
    /// Iterations run.
    pub iters: usize,
    /// Whether the residual tolerance was met.
    pub converged: bool,
    /// Every check.
    pub history: Vec<KrrProgress>,
}

/// The data of a full-KRR problem.
pub struct KrrProblem<'a, T> {
    /// Training points.
    pub x: &'a Features<T>,
    /// The kernel (with `k(x, x) = 1`).
    pub kernel: &'a Kernel,
    /// Targets.
    pub y: &'a [f64],
    /// `lambda > 0` (unnormalised: the system is `K + lambda I`).
    pub lambda: f64,
}

impl<T: Scalar> KrrProblem<'_, T> {
    /// `K(X_rows, X) w`.
    fn rows_times(&self, backend: &dyn Backend<T>, rows: &[usize], w: &[f64]) -> Vec<f64> {
        let d = self.x.ncols();
        let mut xb = vec![T::default(); rows.len() * d];
        self.x.gather_dense(rows, &mut xb);
        let q = match DenseMatrix::new(rows.len(), d, xb) {
            Ok(m) => Features::Dense(m),
            Err(_) => return vec![0.0; rows.len()],
        };
        Predictor::Exact {
            kernel: self.kernel,
            support: self.x,
            rows: None,
            alpha: w,
        }
        .decision(backend, &q, 1)
    }

    /// `K w` over all rows.
    fn times(&self, backend: &dyn Backend<T>, w: &[f64]) -> Vec<f64> {
        Predictor::Exact {
            kernel: self.kernel,
            support: self.x,
            rows: None,
            alpha: w,
        }
        .decision(backend, self.x, 1)
    }

    /// The rows `rows` of `X`, gathered densely (`b x d`, row-major).
    fn gather(&self, rows: &[usize]) -> Vec<T> {
        let mut xb = vec![T::default(); rows.len() * self.x.ncols()];
        self.x.gather_dense(rows, &mut xb);
        xb
    }

    /// `K(X_B, X_B) V` for gathered rows `xb` (`b x d`) and `V` (`b x k`, column-major), as one
    /// streamed kernel product: `K_BB` is never formed (the GPU's `exact_matvec`).
    fn block_times(&self, backend: &dyn Backend<T>, xb: &[T], v: &[f64], k: usize) -> Vec<f64> {
        let d = self.x.ncols();
        let b = xb.len() / d.max(1);
        let mut out = vec![0.0; b * k];
        backend.kernel_matvec(self.kernel, xb, b, xb, b, d, v, k, &mut out, b);
        out
    }

    /// `K(X_B, X_B)` for gathered rows `xb` (`b x b`).
    fn block_gram(&self, backend: &dyn Backend<T>, xb: &[T]) -> Mat<f64> {
        let d = self.x.ncols();
        let b = xb.len() / d.max(1);
        let mut k = vec![0.0; b * b];
        backend.kernel_tile(self.kernel, xb, b, xb, b, d, &mut k);
        Mat::from_fn(b, b, |i, j| k[i * b + j])
    }

    /// The Nystrom sketch `K(X_B, X_B) Omega` (`b x r`).
    fn block_sketch(&self, backend: &dyn Backend<T>, xb: &[T], omega: MatRef<'_, f64>) -> Mat<f64> {
        let (b, r) = (omega.nrows(), omega.ncols());
        let v: Vec<f64> = (0..r)
            .flat_map(|c| (0..b).map(move |i| omega[(i, c)]))
            .collect();
        let out = self.block_times(backend, xb, &v, r);
        Mat::from_fn(b, r, |i, c| out[c * b + i])
    }

    /// `||(K + lambda I) w - y|| / ||y||`, and the primal and dual objectives of Joker's KRR
    /// (one pass over `K`).
    pub fn assess(&self, backend: &dyn Backend<T>, w: &[f64]) -> (f64, f64, f64) {
        let kw = self.times(backend, w);
        let lam = self.lambda;
        let r: f64 = kw
            .iter()
            .zip(w)
            .zip(self.y)
            .map(|((k, w), y)| (k + lam * w - y).powi(2))
            .sum();
        let ny: f64 = self.y.iter().map(|v| v * v).sum();
        let wkw: f64 = w.iter().zip(&kw).map(|(a, b)| a * b).sum();
        let loss: f64 = kw
            .iter()
            .zip(self.y)
            .map(|(u, y)| 0.5 * (y - u).powi(2))
            .sum::<f64>()
            / lam;
        let f: f64 = w
            .iter()
            .zip(self.y)
            .map(|(a, y)| 0.5 * lam * a * a - y * a)
            .sum();
        (
            (r / ny.max(f64::MIN_POSITIVE)).sqrt(),
            0.5 * wkw + loss,
            -(0.5 * wkw + f),
        )
    }
}

/// Solves full KRR with the configured method; `progress` sees every check with the current
/// coefficients and may stop the solve by returning `false`.
pub fn solve_krr<T: Scalar>(
    backend: &dyn Backend<T>,
    prob: &KrrProblem<T>,
    cfg: &KrrConfig,
    mut progress: impl FnMut(&KrrProgress, &[f64]) -> bool,
) -> Result<KrrSolution> {
    let n = prob.x.nrows();
    if prob.y.len() != n {
        return Err(JokerError::ShapeMismatch(format!(
            "{n} samples but {} targets",
            prob.y.len()
        )));
    }
    if !(prob.lambda > 0.0 && prob.lambda.is_finite()) {
        return Err(invalid(
            "lambda",
            format!("must be positive and finite, got {}", prob.lambda),
        ));
    }
    prob.kernel.validate()?;
    cfg.validate()?;
    if cfg.method != KrrMethod::NystromPcg && cfg.blocks > n {
        return Err(invalid(
            "krr_blocks",
            format!(
                "must be between 1 and the number of samples ({n}), got {}",
                cfg.blocks
            ),
        ));
    }
    match cfg.method {
        KrrMethod::NystromPcg => pcg(backend, prob, cfg, &mut progress),
        KrrMethod::Skotch | KrrMethod::ASkotch => skotch(backend, prob, cfg, &mut progress),
    }
}

/// Records a check; returns (converged, keep going).
#[allow(clippy::too_many_arguments)]
fn check<T: Scalar>(
    backend: &dyn Backend<T>,
    prob: &KrrProblem<T>,
    cfg: &KrrConfig,
    w: &[f64],
    iter: usize,
    start: Instant,
    history: &mut Vec<KrrProgress>,
    progress: &mut dyn FnMut(&KrrProgress, &[f64]) -> bool,
) -> Result<(bool, bool)> {
    let t0 = Instant::now();
    // time spent in earlier checks = wall time at their end - their solver time
    let checks_before = history.last().map_or(0.0, |p| p.check_end - p.seconds);
    let seconds = (t0 - start).as_secs_f64() - checks_before;
    let (rel_residual, primal, dual) = prob.assess(backend, w);
    if !rel_residual.is_finite() {
        return Err(JokerError::Numerical(format!(
            "the residual became non-finite at iteration {iter}"
        )));
    }
    let mut p = KrrProgress {
        iter,
        seconds,
        rel_residual,
        primal,
        dual,
        check_end: start.elapsed().as_secs_f64(),
    };
    let go = progress(&p, w);
    // the callback's own work (a validation score, say) is monitoring, not solving
    p.check_end = start.elapsed().as_secs_f64();
    history.push(p);
    let timed_out = cfg.time_limit.is_some_and(|l| start.elapsed() >= l);
    Ok((rel_residual <= cfg.tol, go && !timed_out))
}

/// Skotch and ASkotch: the setup of every block (its preconditioner and its step `1 / L_b`),
/// then randomized preconditioned block steps, accelerated for ASkotch.
fn skotch<T: Scalar>(
    backend: &dyn Backend<T>,
    prob: &KrrProblem<T>,
    cfg: &KrrConfig,
    progress: &mut dyn FnMut(&KrrProgress, &[f64]) -> bool,
) -> Result<KrrSolution> {
    let start = Instant::now();
    let (n, lam) = (prob.x.nrows(), prob.lambda);
    let blocks = partition(n, cfg.blocks, cfg.seed);
    let (lb, stored) = setup_blocks(backend, prob, cfg, &blocks)?;
    let accelerated = cfg.method == KrrMethod::ASkotch;
    let alpha = if accelerated { 0.5 } else { cfg.alpha };
    let sampler = BlockSampler::new(&lb, alpha);

    let mut w = vec![0.0; n];
    let mut nesterov = accelerated.then(|| Nesterov::new(n, sampler.s_alpha, lam));
    let mut chooser = Stream::new(cfg.seed, streams::BLOCK_CHOICE);
    let mut history = Vec::new();
    let mut converged = false;
    let mut iter = 0;
    while iter < cfg.max_iter {
        let k = sampler.pick(chooser.uniform());
        let rows = &blocks[k];
        let fresh;
        let ny = match stored.get(k) {
            Some(ny) => ny,
            None => {
                fresh = fresh_preconditioner(backend, prob, cfg, rows, k, iter)?;
                &fresh
            }
        };
        let v = ny.solve(&block_gradient(backend, prob, rows, &w));
        match &mut nesterov {
            Some(acc) => acc.step(&mut w, rows, &v, lb[k], sampler.probs[k]),
            None => block_step(&mut w, rows, &v, lb[k]),
        }
        iter += 1;
        if iter % cfg.check_every == 0 || iter == cfg.max_iter {
            let out = nesterov.as_ref().map_or(&w, |acc| &acc.x);
            let (conv, go) = check(backend, prob, cfg, out, iter, start, &mut history, progress)?;
            converged = conv;
            if conv || !go {
                break;
            }
        }
    }
    // ASkotch's solution is the stepped point x, not the coupling point w.
    let w = nesterov.map_or(w, |acc| acc.x);
    Ok(KrrSolution {
        w,
        iters: iter,
        converged,
        history,
    })
}

/// The fixed random partition of the `n` rows into `nb` nearly equal blocks.
fn partition(n: usize, nb: usize, seed: u64) -> Vec<Vec<usize>> {
    let mut perm: Vec<usize> = (0..n).collect();
    Stream::new(seed, streams::BLOCK_PARTITION).shuffle(&mut perm);
    (0..nb)
        .map(|k| {
            let (lo, hi) = (k * n / nb, (k + 1) * n / nb);
            perm[lo..hi].to_vec()
        })
        .collect()
}

/// A block's preconditioner `P_b + rho_b I` from a sketch `K_BB Omega` of its `b` rows
/// (`Tr(K_BB) = b` since `k(x, x) = 1`), damped by `rho_b = lambda +` the smallest retained
/// eigenvalue (the paper's default).
fn block_preconditioner(
    b: usize,
    rank: usize,
    lam: f64,
    seed: u64,
    sketch: &mut dyn FnMut(MatRef<'_, f64>) -> Mat<f64>,
) -> Result<Nystrom> {
    let ny = Nystrom::new(b, rank.min(b), b as f64, lam, seed, sketch)?;
    let rho = lam + ny.eigenvalues().last().copied().unwrap_or(0.0);
    ny.with_rho(rho)
}

/// The setup of every block: the preconditioned smoothness `L_b` (the step is `1 / L_b`, the
/// sampling weight `L_b^alpha`), and the preconditioners themselves when they are stored
/// (otherwise each step sketches its block afresh).
fn setup_blocks<T: Scalar>(
    backend: &dyn Backend<T>,
    prob: &KrrProblem<T>,
    cfg: &KrrConfig,
    blocks: &[Vec<usize>],
) -> Result<(Vec<f64>, Vec<Nystrom>)> {
    let nb = blocks.len();
    let mut lb = Vec::with_capacity(nb);
    let mut stored = Vec::with_capacity(if cfg.store_preconditioners { nb } else { 0 });
    for (k, rows) in blocks.iter().enumerate() {
        let (ny, l) = setup_block(backend, prob, cfg, k, rows)?;
        lb.push(l.max(f64::MIN_POSITIVE));
        if cfg.store_preconditioners {
            stored.push(ny);
        }
    }
    Ok((lb, stored))
}

/// Block `k`'s preconditioner and its smoothness
/// `L_b = lambda_max((P_b + rho_b I)^{-1/2} (K_BB + lambda I) (P_b + rho_b I)^{-1/2})`
/// (power iterations). The sketch and the power iterations take `1 + power_iters` products
/// with `K_BB`: it is formed once when it is small, streamed (never formed) when it is not.
fn setup_block<T: Scalar>(
    backend: &dyn Backend<T>,
    prob: &KrrProblem<T>,
    cfg: &KrrConfig,
    k: usize,
    rows: &[usize],
) -> Result<(Nystrom, f64)> {
    let lam = prob.lambda;
    let xb = prob.gather(rows);
    let kbb = (rows.len() * rows.len() * 8 <= cfg.max_block_gram_bytes)
        .then(|| prob.block_gram(backend, &xb));
    // K_BB V for V of `c` columns, column-major in and out.
    let times = |v: &[f64], c: usize| -> Vec<f64> {
        match &kbb {
            Some(g) => gram_times(g, v, c),
            None => prob.block_times(backend, &xb, v, c),
        }
    };
    let seed = cfg.seed ^ ((k as u64) << 20);
    let ny = block_preconditioner(rows.len(), cfg.rank, lam, seed, &mut |om| {
        let (b, r) = (om.nrows(), om.ncols());
        let v: Vec<f64> = (0..r)
            .flat_map(|c| (0..b).map(move |i| om[(i, c)]))
            .collect();
        let out = times(&v, r);
        Mat::from_fn(b, r, |i, c| out[c * b + i])
    })?;
    let l = smoothness(
        rows.len(),
        Some(&ny),
        cfg.power_iters,
        cfg.seed + k as u64,
        |v| {
            times(v, 1)
                .iter()
                .zip(v)
                .map(|(a, b)| a + lam * b)
                .collect()
        },
    );
    Ok((ny, l))
}

/// `G V` for a formed block Gram `G` (`b x b`) and `V` (`b x c`), column-major in and out.
fn gram_times(g: &Mat<f64>, v: &[f64], c: usize) -> Vec<f64> {
    let b = g.nrows();
    let vm = MatRef::from_column_major_slice(v, b, c);
    let out = g * vm;
    (0..c)
        .flat_map(|j| (0..b).map(move |i| (i, j)))
        .map(|(i, j)| out[(i, j)])
        .collect()
}

/// Block sampling with `p_b = L_b^alpha / S_alpha`, `S_alpha = sum_b L_b^alpha`: the blocks
/// with the larger smoothness, and so the shorter steps, are drawn more often.
struct BlockSampler {
    /// `S_alpha`, which also sets NU_ACDM's constants.
    s_alpha: f64,
    /// `p_b`.
    probs: Vec<f64>,
    /// The cumulative sums of `p_b`, inverted by a uniform draw.
    cdf: Vec<f64>,
}

impl BlockSampler {
    /// The probabilities for smoothness constants `lb` and exponent `alpha`.
    fn new(lb: &[f64], alpha: f64) -> Self {
        let weights: Vec<f64> = lb.iter().map(|l| l.powf(alpha)).collect();
        let s_alpha: f64 = weights.iter().sum();
        let probs: Vec<f64> = weights.iter().map(|w| w / s_alpha).collect();
        let cdf: Vec<f64> = probs
            .iter()
            .scan(0.0, |acc, p| {
                *acc += p;
                Some(*acc)
            })
            .collect();
        BlockSampler {
            s_alpha,
            probs,
            cdf,
        }
    }

    /// The block of a uniform draw `u`: the first whose cumulative probability reaches `u`
    /// (the last one when rounding leaves the total below `u`).
    fn pick(&self, u: f64) -> usize {
        self.cdf
            .iter()
            .position(|&c| u <= c)
            .unwrap_or(self.cdf.len() - 1)
    }
}

/// Block `k`'s preconditioner at step `iter` from a fresh sketch straight from the kernel
/// (`K_BB` is not formed again), as the paper does when they are not stored.
fn fresh_preconditioner<T: Scalar>(
    backend: &dyn Backend<T>,
    prob: &KrrProblem<T>,
    cfg: &KrrConfig,
    rows: &[usize],
    k: usize,
    iter: usize,
) -> Result<Nystrom> {
    let seed = cfg.seed ^ ((iter as u64 + 1) << 24) ^ k as u64;
    let xb = prob.gather(rows);
    block_preconditioner(rows.len(), cfg.rank, prob.lambda, seed, &mut |om| {
        prob.block_sketch(backend, &xb, om)
    })
}

/// The block gradient of the dual, `g_B = (K w)_B + lambda w_B - y_B` (one streamed pass
/// over the block's rows of `K`).
fn block_gradient<T: Scalar>(
    backend: &dyn Backend<T>,
    prob: &KrrProblem<T>,
    rows: &[usize],
    w: &[f64],
) -> Vec<f64> {
    let kw = prob.rows_times(backend, rows, w);
    rows.iter()
        .zip(&kw)
        .map(|(&i, kwi)| kwi + prob.lambda * w[i] - prob.y[i])
        .collect()
}

/// Skotch's step on block `B`: `w_B -= v / L_b`, with `v = (P_b + rho_b I)^{-1} g_B`.
fn block_step(w: &mut [f64], rows: &[usize], v: &[f64], l: f64) {
    for (r, &i) in rows.iter().enumerate() {
        w[i] -= v[r] / l;
    }
}

/// ASkotch's NU_ACDM state besides the coupling point `w` (where the gradients are taken): the
/// stepped point `x`, which is the solution, and the auxiliary sequence `z`; `lambda` stands in
/// for the strong-convexity constant (`beta = 0`).
struct Nesterov {
    x: Vec<f64>,
    z: Vec<f64>,
    tau: f64,
    gamma: f64,
    lam: f64,
}

impl Nesterov {
    /// Zero iterates and the constants `tau = 2 / (1 + sqrt(4 S^2 / lambda + 1))` and
    /// `gamma = 1 / (tau S^2)` for `S = S_alpha`.
    fn new(n: usize, s_alpha: f64, lam: f64) -> Self {
        let tau = 2.0 / (1.0 + (4.0 * s_alpha * s_alpha / lam + 1.0).sqrt());
        let gamma = 1.0 / (tau * s_alpha * s_alpha);
        Nesterov {
            x: vec![0.0; n],
            z: vec![0.0; n],
            tau,
            gamma,
            lam,
        }
    }

    /// The step on block `B` drawn with probability `p`: `x = w` with the block stepped, `z`
    /// pulled towards `w` and then stepped by `gamma / p`, and the new coupling point
    /// `w = tau z + (1 - tau) x`.
    fn step(&mut self, w: &mut [f64], rows: &[usize], v: &[f64], l: f64, p: f64) {
        let (tau, gamma, lam) = (self.tau, self.gamma, self.lam);
        let (x, z) = (&mut self.x, &mut self.z);
        x.copy_from_slice(w);
        block_step(x, rows, v, l);
        let c = 1.0 + gamma * lam;
        for i in 0..w.len() {
            z[i] = (z[i] + gamma * lam * w[i]) / c;
        }
        for (r, &i) in rows.iter().enumerate() {
            z[i] -= gamma / (c * p) * v[r];
        }
        for i in 0..w.len() {
            w[i] = tau * z[i] + (1.0 - tau) * x[i];
        }
    }
}

fn pcg<T: Scalar>(
    backend: &dyn Backend<T>,
    prob: &KrrProblem<T>,
    cfg: &KrrConfig,
    progress: &mut dyn FnMut(&KrrProgress, &[f64]) -> bool,
) -> Result<KrrSolution> {
    let start = Instant::now();
    let (n, lam) = (prob.x.nrows(), prob.lambda);
    let r = cfg.rank.min(n);
    // Preconditioner from K Omega: all r columns in one streamed pass over the kernel tiles.
    let ny = Nystrom::new(n, r, n as f64, lam, cfg.seed, |om| {
        let k = om.ncols();
        let cols: Vec<f64> = (0..k)
            .flat_map(|c| (0..n).map(move |i| om[(i, c)]))
            .collect();
        let ko = Predictor::Exact {
            kernel: prob.kernel,
            support: prob.x,
            rows: None,
            alpha: &cols,
        }
        .decision(backend, prob.x, k);
        Mat::<f64>::from_fn(n, k, |i, c| ko[c * n + i])
    })?;
    let apply = |v: &[f64]| -> Vec<f64> {
        prob.times(backend, v)
            .iter()
            .zip(v)
            .map(|(k, x)| k + lam * x)
            .collect()
    };
    let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>();
    let mut w = vec![0.0; n];
    let mut res: Vec<f64> = prob.y.to_vec();
    let mut zv = ny.solve(&res);
    let mut p = zv.clone();
    let mut rz = dot(&res, &zv);
    let ny2 = dot(prob.y, prob.y).max(f64::MIN_POSITIVE);
    let mut history = Vec::new();
    let mut converged = false;
    let mut iter = 0;
    while iter < cfg.max_iter {
        let ap = apply(&p);
        let pap = dot(&p, &ap);
        if !(pap > 0.0) {
            break;
        }
        let a = rz / pap;
        for i in 0..n {
            w[i] += a * p[i];
            res[i] -= a * ap[i];
        }
        iter += 1;
        // the recursive residual is exact up to rounding; checks recompute it every check_every
        let rel = (dot(&res, &res) / ny2).sqrt();
        if rel <= cfg.tol || iter % cfg.check_every == 0 || iter == cfg.max_iter {
            let (conv, go) = check(backend, prob, cfg, &w, iter, start, &mut history, progress)?;
            converged = conv;
            if conv || !go {
                break;
            }
        }
        zv = ny.solve(&res);
        let rz_new = dot(&res, &zv);
        let beta = rz_new / rz;
        for i in 0..n {
            p[i] = zv[i] + beta * p[i];
        }
        rz = rz_new;
    }
    Ok(KrrSolution {
        w,
        iters: iter,
        converged,
        history,
    })
}

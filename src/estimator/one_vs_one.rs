//! One-vs-one: a binary problem per pair of classes, on the rows of its two classes only,
//! solved with the fit's features, kernel and settings, several pairs at once on the CPU. Each
//! problem has about `2 n / K` rows, so its cached kernel is `(2 n / K)^2` entries and its
//! passes are short; the `K (K - 1) / 2` columns together form one separable problem, whose
//! objectives are the sums of the pairs'. The model holds a decision column per pair (zero coefficients outside the
//! pair) and predicts by votes ([`crate::preprocess::vote`]).

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, mpsc};
use std::time::{Duration, Instant};

use rayon::prelude::*;

use super::Joker;
use crate::backend::Backend;
use crate::backend::cached::{caches_kernel, recycling};
use crate::backend::cpu::Cpu;
use crate::backend::predict::Predictor;
use crate::error::Result;
use crate::kernel::Kernel;
use crate::memory::try_filled;
use crate::scalar::Scalar;
use crate::solver::dbcd::{Hooks, InterruptFn, Problem, ProgressFn, Repr};
use crate::solver::{Progress, Solution, SolverConfig, StopReason, Timings};

impl Joker {
    /// Solves the pair problems of `prob`, whose targets are one-vs-one columns
    /// ([`crate::preprocess::encode_pairs`]: `+-1` on the pair's rows, 0 elsewhere), several at
    /// once on the CPU ([`pair_concurrency`]). The callbacks run on the calling thread: the
    /// progress callback sees each pair's checks as they come, with the iterations and accepted
    /// steps of all pairs so far and the seconds since the start of the first pair; the
    /// interrupt, the time limit and a callback that asks to stop end the whole fit at each
    /// running pair's next iteration (pairs not reached keep zero coefficients). The last check
    /// is the whole problem's: summed objectives and, with a validation set, the voted metric.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn solve_pairs<T: Scalar>(
        &self,
        backend: &dyn Backend<T>,
        prob: &Problem<'_, T>,
        kernel: &Kernel,
        solver: &SolverConfig,
        alpha0: Option<Vec<f64>>,
        weighted: bool,
        hooks: &mut Hooks<'_, T>,
    ) -> Result<Solution> {
        let start = Instant::now();
        let (n, pairs) = (prob.x.nrows(), prob.targets);
        let rows: Vec<Vec<usize>> = (0..pairs)
            .map(|p| {
                let col = &prob.y[p * n..(p + 1) * n];
                (0..n).filter(|&i| col[i] != 0.0).collect()
            })
            .collect();
        let concurrent = pair_concurrency::<T>(backend, &rows, solver, prob);
        let stop = AtomicBool::new(false);
        let ctx = PairContext {
            joker: self,
            backend,
            prob,
            kernel,
            solver,
            alpha0: alpha0.as_deref(),
            weighted,
            start,
            stop: &stop,
        };
        let mut relay = Relay::new(hooks, pairs);
        // On a thread of a rayon pool the pairs run one after the other: waiting there for the
        // pool's other threads could wait on work queued behind this one.
        let side_by_side = concurrent > 1 && rayon::current_thread_index().is_none();
        let (slots, timed_out) = if side_by_side {
            ctx.run_concurrent(&rows, concurrent, &mut relay)
        } else {
            ctx.run_in_turn(&rows, &mut relay)
        };
        let (history, cancelled) = (relay.history, relay.cancelled);

        let mut alpha = try_filled(n.saturating_mul(pairs), 0.0, "one-vs-one coefficients")?;
        let mut theta = match prob.repr {
            Repr::Features(map) => Some(try_filled(pairs * map.m(), 0.0, "one-vs-one weights")?),
            Repr::Exact(_) => None,
        };
        let mut out = Solution {
            alpha: Vec::new(),
            theta: None,
            iters: 0,
            stop: StopReason::Converged,
            history,
            timings: Timings::default(),
            tr_model: String::new(),
            working_set: String::new(),
            fell_back: None,
            pairs_at_once: if side_by_side { concurrent } else { 1 },
            passes: None,
            intercept: Vec::new(),
            start: String::new(),
        };
        let (mut primal, mut dual, mut epochs, mut accepted) = (0.0, 0.0, 0.0, 0);
        let mut first = true;
        for (p, slot) in slots.into_iter().enumerate() {
            let Some(sol) = slot else { continue };
            let sol = sol?;
            for (k, &i) in rows[p].iter().enumerate() {
                alpha[p * n + i] = sol.alpha[k];
            }
            if let (Some(all), Some(t)) = (theta.as_mut(), &sol.theta) {
                all[p * t.len()..(p + 1) * t.len()].copy_from_slice(t);
            }
            if let Some(last) = sol.history.last() {
                primal += last.primal;
                dual += last.dual;
                epochs += last.epoch * rows[p].len() as f64 / n as f64;
                accepted += last.accepted;
            }
            out.iters += sol.iters;
            out.timings += sol.timings;
            if first {
                out.tr_model = sol.tr_model;
                out.working_set = sol.working_set;
                first = false;
            }
            out.fell_back = out.fell_back.or(sol.fell_back);
            out.stop = worse(out.stop, sol.stop);
        }
        if timed_out {
            out.stop = worse(out.stop, StopReason::TimeLimit);
        }
        if cancelled {
            out.stop = worse(out.stop, StopReason::Cancelled);
        }
        out.theta = theta;
        let validation = hooks.validate.as_mut().map(|f| {
            f(
                &match prob.repr {
                    Repr::Features(map) => Predictor::Features {
                        map,
                        theta: out.theta.as_deref().unwrap_or(&[]),
                    },
                    Repr::Exact(kernel) => Predictor::Exact {
                        kernel,
                        support: prob.x,
                        rows: None,
                        alpha: &alpha,
                    },
                },
                &[],
            )
        });
        let scale = f64::abs(primal).max(dual.abs()).max(f64::MIN_POSITIVE);
        let whole = Progress {
            iter: out.iters,
            epoch: epochs,
            seconds: start.elapsed().as_secs_f64(),
            train_seconds: out.history.last().map_or(0.0, |s| s.train_seconds),
            primal,
            dual,
            gap: ((primal - dual) / scale).max(0.0),
            validation,
            accepted,
            rel_residual: None,
            pairs: None,
        };
        if let Some(f) = hooks.progress.as_mut() {
            f(&whole);
        }
        out.history.push(whole);
        out.alpha = alpha;
        Ok(out)
    }
}

/// How often the calling thread polls the interrupt while the pairs run.
const POLL: Duration = Duration::from_millis(5);

/// A pair's check on its way to the calling thread: the pair, the seconds from the start of
/// the fit to the pair's start, and the check as the pair's solve saw it.
struct Check {
    pair: usize,
    offset: f64,
    progress: Progress,
    /// The pair's solve has ended (its last check, sent again).
    finished: bool,
}

/// What every pair's solve shares.
struct PairContext<'a, 'p, T: Scalar> {
    joker: &'a Joker,
    backend: &'a dyn Backend<T>,
    prob: &'a Problem<'p, T>,
    kernel: &'a Kernel,
    solver: &'a SolverConfig,
    alpha0: Option<&'a [f64]>,
    weighted: bool,
    start: Instant,
    /// Set when the fit ends early: the running pairs stop at their next iteration.
    stop: &'a AtomicBool,
}

impl<T: Scalar> PairContext<'_, '_, T> {
    /// Pair `p`'s problem on its `rows`, solved with the fit's settings; each check goes to
    /// `report` (its answer: go on), and `interrupt` is polled every iteration. `None`: the time
    /// limit ran out before it started.
    fn solve(
        &self,
        p: usize,
        rows: &[usize],
        report: &mut dyn FnMut(Check) -> bool,
        interrupt: &mut dyn FnMut() -> bool,
    ) -> Result<Option<Solution>> {
        let (n, prob) = (self.prob.x.nrows(), self.prob);
        let time_limit = match self.solver.time_limit {
            Some(limit) => match limit.checked_sub(self.start.elapsed()) {
                Some(left) if !left.is_zero() => Some(left),
                _ => return Ok(None),
            },
            None => None,
        };
        let col = &prob.y[p * n..(p + 1) * n];
        let x = prob.x.select_rows(rows)?;
        let pick = |v: &[f64]| rows.iter().map(|&i| v[i]).collect::<Vec<f64>>();
        let (y, lam, eps) = (pick(col), pick(prob.lam), pick(prob.eps));
        let sub = Problem {
            x: &x,
            repr: match prob.repr {
                Repr::Features(map) => Repr::Features(map),
                Repr::Exact(k) => Repr::Exact(k),
            },
            loss: prob.loss,
            targets: 1,
            y: &y,
            lam: &lam,
            eps: &eps,
        };
        let cfg = SolverConfig {
            block_size: self.solver.block_size.min(rows.len()),
            time_limit,
            ..self.solver.clone()
        };
        let warm = self.alpha0.map(|a| pick(&a[p * n..(p + 1) * n]));
        let offset = self.start.elapsed().as_secs_f64();
        let mut pair_hooks = Hooks::<T> {
            validate: None,
            progress: Some(Box::new(|s: &Progress| {
                report(Check {
                    pair: p,
                    offset,
                    progress: s.clone(),
                    finished: false,
                })
            }) as ProgressFn<'_>),
            interrupt: Some(Box::new(interrupt) as InterruptFn<'_>),
        };
        let sol = self.joker.solve_dual(
            self.backend,
            &sub,
            &cfg,
            warm,
            &x,
            self.kernel,
            &y,
            1,
            self.weighted,
            &mut pair_hooks,
        );
        drop(pair_hooks);
        // the pair's end, for the count of finished pairs
        if let Some(last) = sol.as_ref().ok().and_then(|s| s.history.last()) {
            report(Check {
                pair: p,
                offset,
                progress: last.clone(),
                finished: true,
            });
        }
        sol.map(Some)
    }
}

impl<T: Scalar> PairContext<'_, '_, T> {
    /// The pairs one after the other on the calling thread, each check through `relay` as it
    /// is made. Returns each pair's solve (`None`: not reached) and whether the time limit ran
    /// out before a pair started.
    fn run_in_turn(&self, rows: &[Vec<usize>], relay: &mut Relay<'_, '_, T>) -> PairResults {
        let relay = RefCell::new(relay);
        let mut slots: Vec<Option<Result<Solution>>> = (0..rows.len()).map(|_| None).collect();
        // each pair's cached kernel in the memory of the pair before
        let late = recycling(largest_cached_matrix(rows, self.solver, self.prob), || {
            for (p, r) in rows.iter().enumerate() {
                let sol = self.solve(p, r, &mut |c| relay.borrow_mut().check(c), &mut || {
                    relay.borrow_mut().interrupted()
                });
                let (ends, late) = ends_the_fit(&sol);
                slots[p] = sol.transpose();
                if late {
                    return true;
                }
                if ends {
                    break;
                }
            }
            false
        });
        (slots, late)
    }

    /// `concurrent` pairs at a time on the rayon pool, each taking the next pair not begun,
    /// while the calling thread passes their checks through `relay` and polls its interrupt;
    /// the fit's stop flag ends the running pairs at their next iteration.
    fn run_concurrent(
        &self,
        rows: &[Vec<usize>],
        concurrent: usize,
        relay: &mut Relay<'_, '_, T>,
    ) -> PairResults {
        let pairs = rows.len();
        let next = AtomicUsize::new(0);
        let (tx, rx) = mpsc::channel::<Check>();
        let capacity = largest_cached_matrix(rows, self.solver, self.prob);
        std::thread::scope(|scope| {
            let next = &next;
            let worker = scope.spawn(move || {
                let slots: Vec<Mutex<Option<Result<Solution>>>> =
                    (0..pairs).map(|_| Mutex::new(None)).collect();
                let late = AtomicBool::new(false);
                (0..concurrent).into_par_iter().for_each(|_| {
                    let tx = tx.clone();
                    // each pair's cached kernel in the memory of this thread's pair before
                    recycling(capacity, || {
                        while !self.stop.load(Ordering::Relaxed) {
                            let p = next.fetch_add(1, Ordering::Relaxed);
                            if p >= pairs {
                                break;
                            }
                            let sol = self.solve(
                                p,
                                &rows[p],
                                // a closed channel: the calling thread has gone, nothing listens
                                &mut |c| tx.send(c).is_ok() && !self.stop.load(Ordering::Relaxed),
                                &mut || self.stop.load(Ordering::Relaxed),
                            );
                            // an error or a cancelled pair stops the others; the time limit
                            // stops each running pair by itself (they share its deadline), and
                            // the pairs not begun find no time left
                            let (_, was_late) = ends_the_fit(&sol);
                            let cancelled = match &sol {
                                Err(_) => true,
                                Ok(Some(s)) => s.stop == StopReason::Cancelled,
                                Ok(None) => false,
                            };
                            if cancelled {
                                self.stop.store(true, Ordering::Relaxed);
                            }
                            if was_late {
                                late.store(true, Ordering::Relaxed);
                            }
                            *slots[p].lock().unwrap_or_else(|e| e.into_inner()) = sol.transpose();
                        }
                    });
                });
                let slots = slots
                    .into_iter()
                    .map(|m| m.into_inner().unwrap_or_else(|e| e.into_inner()))
                    .collect();
                (slots, late.into_inner())
            });
            loop {
                match rx.recv_timeout(POLL) {
                    Ok(c) => {
                        if !relay.check(c) {
                            self.stop.store(true, Ordering::Relaxed);
                        }
                    }
                    Err(mpsc::RecvTimeoutError::Timeout) => {}
                    Err(mpsc::RecvTimeoutError::Disconnected) => break,
                }
                if relay.interrupted() {
                    self.stop.store(true, Ordering::Relaxed);
                }
            }
            worker
                .join()
                .unwrap_or_else(|e| std::panic::resume_unwind(e))
        })
    }
}

/// Each pair's solve (`None`: not reached) and whether the time limit ran out before a pair
/// started.
type PairResults = (Vec<Option<Result<Solution>>>, bool);

/// Whether a pair's outcome ends the fit (an error, a cancelled or timed-out solve, or no
/// time left to start), and whether it is the last.
fn ends_the_fit(sol: &Result<Option<Solution>>) -> (bool, bool) {
    match sol {
        Err(_) => (true, false),
        Ok(None) => (true, true),
        Ok(Some(s)) => (
            matches!(s.stop, StopReason::Cancelled | StopReason::TimeLimit),
            false,
        ),
    }
}

/// The calling thread's side of a fit: the caller's callbacks, fed with the pairs' checks in
/// the order they come, counted over all pairs.
struct Relay<'h, 'a, T> {
    hooks: &'h mut Hooks<'a, T>,
    /// The latest check's iterations, accepted steps and gap of each pair.
    iters: Vec<usize>,
    accepted: Vec<usize>,
    gaps: Vec<f64>,
    /// The pairs whose solves have ended.
    finished: Vec<bool>,
    seconds: f64,
    train_seconds: f64,
    history: Vec<Progress>,
    /// The progress callback asked to stop, or the interrupt fired.
    cancelled: bool,
}

impl<'h, 'a, T> Relay<'h, 'a, T> {
    fn new(hooks: &'h mut Hooks<'a, T>, pairs: usize) -> Self {
        Relay {
            hooks,
            iters: vec![0; pairs],
            accepted: vec![0; pairs],
            gaps: vec![0.0; pairs],
            finished: vec![false; pairs],
            seconds: 0.0,
            train_seconds: 0.0,
            history: Vec::new(),
            cancelled: false,
        }
    }

    /// Passes a pair's check to the progress callback with the iterations and accepted steps
    /// of all pairs and the seconds from the fit's start (never decreasing); `false` once the
    /// fit is cancelled (the callback is not called again).
    fn check(&mut self, c: Check) -> bool {
        self.gaps[c.pair] = c.progress.gap;
        if c.finished {
            // its last check has been relayed already
            self.finished[c.pair] = true;
            let done = self.finished.iter().filter(|&&f| f).count();
            if done < self.finished.len() {
                return !self.cancelled;
            }
        }
        self.iters[c.pair] = c.progress.iter;
        self.accepted[c.pair] = c.progress.accepted;
        self.seconds = self.seconds.max(c.offset + c.progress.seconds);
        self.train_seconds = self.train_seconds.max(c.offset + c.progress.train_seconds);
        let s = Progress {
            iter: self.iters.iter().sum(),
            accepted: self.accepted.iter().sum(),
            seconds: self.seconds,
            train_seconds: self.train_seconds,
            gap: self.gaps.iter().copied().fold(0.0, f64::max),
            pairs: Some([
                self.finished.iter().filter(|&&f| f).count(),
                self.finished.len(),
            ]),
            ..c.progress
        };
        if !self.cancelled && !self.hooks.progress.as_mut().is_none_or(|f| f(&s)) {
            self.cancelled = true;
        }
        // the repeat of a pair's last check is not a check of its own
        if !c.finished {
            self.history.push(s);
        }
        !self.cancelled
    }

    /// Polls the caller's interrupt (not again once the fit is cancelled).
    fn interrupted(&mut self) -> bool {
        if !self.cancelled && self.hooks.interrupt.as_mut().is_some_and(|f| f()) {
            self.cancelled = true;
        }
        self.cancelled
    }
}

/// How many pairs run at once: one per thread on the CPU (a pair's problem is small, so its
/// own loops leave threads idle), as many as the kernel cache holds the largest pair's cached
/// kernel (the fit's cache is capped at what its memory limit leaves); one at a time on a GPU.
fn pair_concurrency<T: Scalar>(
    backend: &dyn Backend<T>,
    rows: &[Vec<usize>],
    solver: &SolverConfig,
    prob: &Problem<'_, T>,
) -> usize {
    let cpu: &dyn Backend<T> = &Cpu;
    if backend.name() != cpu.name() || rows.len() < 2 {
        return 1;
    }
    let cached = largest_cached_matrix(rows, solver, prob) * std::mem::size_of::<T>();
    let by_cache = solver
        .kernel_cache
        .checked_div(cached)
        .unwrap_or(usize::MAX);
    rayon::current_num_threads()
        .min(rows.len())
        .min(by_cache)
        .max(1)
}

/// The values of the largest pair's cached kernel (`n^2`, or 0 where the pairs do not cache
/// it): what the pairs at once must share of the kernel cache, and the memory that
/// [`recycling`] passes from pair to pair.
fn largest_cached_matrix<T: Scalar>(
    rows: &[Vec<usize>],
    solver: &SolverConfig,
    prob: &Problem<'_, T>,
) -> usize {
    let largest = rows.iter().map(Vec::len).max().unwrap_or(0);
    match prob.repr {
        Repr::Exact(_) if caches_kernel::<T>(largest, solver.kernel_cache) => largest * largest,
        _ => 0,
    }
}

/// The stop reason of a fit made of solves: the one that says least about convergence.
fn worse(a: StopReason, b: StopReason) -> StopReason {
    let rank = |s: StopReason| match s {
        StopReason::Converged => 0,
        StopReason::Stalled => 1,
        StopReason::MaxIter => 2,
        StopReason::TimeLimit => 3,
        StopReason::Cancelled => 4,
    };
    if rank(b) > rank(a) { b } else { a }
}

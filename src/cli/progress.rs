//! Training progress: an indicatif bar on a terminal, one line per check otherwise.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use joker::{Progress, Task};

use super::sig;

/// Whether a progress line (`\rconverting: 3/10 chunks`) is on stderr without its newline.
static LINE_OPEN: AtomicBool = AtomicBool::new(false);

/// Shows `text` in place of the progress line on stderr, without ending the line.
pub fn progress_line(text: &str) {
    eprint!("\r{text}");
    let _ = std::io::stderr().flush();
    LINE_OPEN.store(true, Ordering::Relaxed);
}

/// Ends the progress line, if one is open, so that what is printed next (an error, the
/// summary) starts on a line of its own.
pub fn end_line() {
    if LINE_OPEN.swap(false, Ordering::Relaxed) {
        eprintln!();
    }
}

/// Shows the solver's checks: the iteration count, the relative duality gap, the primal and
/// dual objectives, the relative residual (full KRR) and the validation metric.
pub struct Reporter {
    bar: Option<ProgressBar>,
    lines: bool,
    max_iter: usize,
    task: Task,
    /// The finished pairs of a one-vs-one fit at the last line printed.
    pairs_shown: std::cell::Cell<Option<usize>>,
}

impl Reporter {
    /// A reporter for a fit of at most `max_iter` iterations. On a terminal it draws a bar on
    /// stderr; otherwise it prints one line per check to stderr; with `quiet` it shows
    /// nothing.
    pub fn new(max_iter: usize, task: Task, quiet: bool) -> Reporter {
        let terminal = std::io::stderr().is_terminal();
        let bar = (!quiet && terminal).then(|| {
            let style = ProgressStyle::with_template(
                "{spinner:.green} {elapsed} [{wide_bar:.cyan/blue}] {pos}/{len} {msg}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
            let bar =
                ProgressBar::with_draw_target(Some(max_iter as u64), ProgressDrawTarget::stderr())
                    .with_style(style)
                    .with_message("(the first check comes after one pass over the data)");
            bar.enable_steady_tick(Duration::from_millis(120));
            bar
        });
        Reporter {
            bar,
            lines: !quiet && !terminal,
            max_iter,
            task,
            pairs_shown: std::cell::Cell::new(None),
        }
    }

    /// The validation metric's name and value as text.
    fn metric(&self, v: f64) -> (&'static str, String) {
        match self.task {
            Task::Classification => ("acc", format!("{:.2}%", 100.0 * v)),
            Task::Regression => ("rmse", sig(v, 5)),
        }
    }

    /// Shows one check; always lets the fit go on.
    pub fn check(&self, p: &Progress) -> bool {
        if let Some([done, total]) = p.pairs {
            self.pairs(done, total, p);
            return true;
        }
        let val = p.validation.map(|v| self.metric(v));
        if let Some(bar) = &self.bar {
            // the doubly stochastic solvers have no dual: their primal is an estimate
            let mut msg = if p.gap.is_nan() {
                format!("P~ {}", sig(p.primal, 5))
            } else {
                format!(
                    "gap {:.2e} P {} D {}",
                    p.gap,
                    sig(p.primal, 5),
                    sig(p.dual, 5)
                )
            };
            if let Some(r) = p.rel_residual {
                msg.push_str(&format!(" residual {r:.2e}"));
            }
            if let Some((name, v)) = &val {
                msg.push_str(&format!(" val {name} {v}"));
            }
            bar.set_position(p.iter as u64);
            bar.set_message(msg);
        } else if self.lines {
            // full KRR has no passes over the data to count
            let epoch = if p.epoch.is_finite() {
                format!(" epoch {:.2}", p.epoch)
            } else {
                String::new()
            };
            let objectives = if p.gap.is_nan() {
                format!("primal~ {}", sig(p.primal, 6))
            } else {
                format!(
                    "gap {:.3e} primal {} dual {}",
                    p.gap,
                    sig(p.primal, 6),
                    sig(p.dual, 6)
                )
            };
            let mut line = format!(
                "iter {}/{}{epoch} {:.2}s {objectives}",
                p.iter, self.max_iter, p.seconds,
            );
            if let Some(r) = p.rel_residual {
                line.push_str(&format!(" residual {r:.3e}"));
            }
            if let Some((name, v)) = &val {
                line.push_str(&format!(" val_{name} {v}"));
            }
            eprintln!("{line}");
        }
        true
    }

    /// A one-vs-one fit's check: one bar over the pairs (pairs finished, the worst gap), or in
    /// lines a line each time another twentieth of the pairs has finished, not a line per
    /// pair's check.
    fn pairs(&self, done: usize, total: usize, p: &Progress) {
        let msg = format!(
            "pairs {done}/{total} finished, worst gap {:.2e}, {} iterations",
            p.gap, p.iter
        );
        if let Some(bar) = &self.bar {
            bar.set_length(total as u64);
            bar.set_position(done as u64);
            bar.set_message(msg);
        } else if self.lines {
            let step = total.div_ceil(20).max(1);
            let due = match self.pairs_shown.get() {
                None => true,
                Some(shown) => done / step > shown / step || (done == total && shown < total),
            };
            if due {
                self.pairs_shown.set(Some(done));
                eprintln!("{msg} {:.2}s", p.seconds);
            }
        }
    }

    /// A callback for [`joker::FitOptions::progress`].
    pub fn callback<'a>(&'a self) -> Box<dyn FnMut(&Progress) -> bool + 'a> {
        Box::new(move |p| self.check(p))
    }

    /// Removes the bar (before the summary is printed).
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

impl Drop for Reporter {
    fn drop(&mut self) {
        self.finish();
    }
}

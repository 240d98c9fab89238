//! A doubly stochastic fit on a text file streamed a part at a time: the rows are never all
//! in memory, only one part of them and 8 bytes a row (the labels and their targets).
//!
//! Before the first step the file is read once (twice for a LIBSVM file whose width is not
//! given, a third time for the median bandwidth): the labels, the column moments of the
//! standardisation and the rows the median heuristic looks at. These are the values the fit
//! in memory computes from the same rows in the same order, so a streamed fit and one on the
//! rows in memory, swept in file order, take the same steps.

use std::cell::RefCell;

use super::{FitOptions, Fitted, Joker, validation_hook};
use crate::data::{DenseMatrix, Features, RowStream};
use crate::device::resolve;
use crate::distributed::Single;
use crate::error::{JokerError, Result, invalid};
use crate::features::{FeatureKind, FeatureMap, FeatureSpec, RandomMap};
use crate::io::stream::TextStream;
use crate::kernel::{Bandwidth, Kernel, heuristic_rows, resolve_gamma};
use crate::model::{Model, Precision};
use crate::preprocess::{Moments, Standardizer};
use crate::scalar::Scalar;
use crate::solver::dbcd::Hooks;
use crate::solver::dsg::{DsgConfig, DsgProblem, DsgRows, DsgRun, solve_dsg};

/// What a streamed fit reports while it reads the file before the first step: the pass
/// (`"labels"`, `"bandwidth"`), then parts done and the parts of a pass.
pub type ReadingFn<'a> = Box<dyn FnMut(&str, usize, usize) + 'a>;

impl Joker {
    /// Fits a doubly stochastic solver (the parameters must choose one,
    /// [`JokerBuilder::dsg`](super::JokerBuilder::dsg)) on the rows of `stream`, read a part at
    /// a time in file order, pass after pass: memory holds one part's rows, the labels and the
    /// targets, never the data set. The batches sweep the file in order (its rows should be
    /// in random order). `reading` is told of the passes before the first step.
    ///
    /// The same fit as [`Joker::fit_with`] on the file's rows in memory with
    /// [`DsgConfig::sequential`] on: the standardisation, the median bandwidth, the targets and
    /// every step are computed from the same values in the same order.
    ///
    /// # Errors
    /// No doubly stochastic solver chosen, sample weights or a warm start (neither applies to
    /// a stream), a bandwidth heuristic other than the median (`msd` and `scale` need a pass
    /// of their own: give `gamma`), batches drawn at random, the reader's errors (named by
    /// part and line), a file whose row count changes between passes, and the errors of
    /// [`Joker::fit_with`].
    pub fn fit_stream<U: Scalar>(
        &self,
        stream: &TextStream,
        opts: FitOptions<'_, U>,
        reading: Option<ReadingFn<'_>>,
    ) -> Result<Model> {
        let Some(cfg) = &self.dsg else {
            return Err(invalid(
                "solver",
                "a streamed file is read in order, a part at a time, by the doubly stochastic solvers (dsg, udsg, cdsg); DBCD-TR reads blocks of rows at random: convert the file to .npy (`joker convert`) and train on the mapped rows",
            ));
        };
        if opts.sample_weight.is_some() {
            return Err(invalid(
                "sample_weight",
                "a streamed fit takes no sample weights (class weights apply)",
            ));
        }
        if opts.warm_start.is_some() {
            return Err(invalid(
                "warm_start",
                "the doubly stochastic solvers have no dual coefficients to start from",
            ));
        }
        match self.precision {
            Precision::F32 => self.fit_stream_in::<U, f32>(stream, cfg, opts, reading),
            Precision::F64 => self.fit_stream_in::<U, f64>(stream, cfg, opts, reading),
        }
    }

    fn fit_stream_in<U: Scalar, T: Scalar>(
        &self,
        stream: &TextStream,
        cfg: &DsgConfig,
        mut opts: FitOptions<'_, U>,
        mut reading: Option<ReadingFn<'_>>,
    ) -> Result<Model> {
        let start = std::time::Instant::now();
        let mut tell = |pass: &str, k: usize| {
            if let Some(f) = reading.as_mut() {
                f(pass, k, stream.parts())
            }
        };
        // the labels and the column moments
        let (mut labels, mut moments) = (Vec::new(), None::<Moments>);
        for k in 0..stream.parts() {
            if let Some(part) = stream.part(k)? {
                moments
                    .get_or_insert_with(|| Moments::new(part.x.ncols()))
                    .add(&part.x);
                labels.extend_from_slice(&part.y);
            }
            tell("labels", k + 1);
        }
        let Some(moments) = moments else {
            return Err(JokerError::EmptyData(format!(
                "{} has no data rows",
                stream.path().display()
            )));
        };
        let (n, d) = (labels.len(), moments.ncols());
        let standardizer = match self.standardize {
            true => moments.standardizer(&Single)?,
            false => Standardizer::identity(d),
        };
        let some_rows = match self.bandwidth {
            Bandwidth::Median => {
                heuristic_sample::<T>(stream, &standardizer, n, d, self.solver.seed, |k| {
                    tell("bandwidth", k)
                })?
            }
            Bandwidth::Gamma(_) => Features::Dense(DenseMatrix::new(1, d, vec![T::default(); d])?),
            _ => {
                return Err(invalid(
                    "gamma",
                    "a streamed fit finds the median bandwidth from a sample of rows; the mean squared distance and scikit-learn's \"scale\" need the whole data set: give gamma or use the median",
                ));
            }
        };
        let gamma = resolve_gamma(self.kernel, self.bandwidth, &some_rows, self.solver.seed)?;
        let kernel = Kernel {
            kind: self.kernel,
            gamma,
        };
        if self.feature_map != FeatureKind::Random {
            return Err(invalid(
                "feature_map",
                "the doubly stochastic solvers regenerate random features from the seed; a Nystrom map is for DBCD-TR",
            ));
        }
        let map = FeatureMap::Random(RandomMap::<T>::new(FeatureSpec {
            kernel,
            n_components: self.n_components.unwrap_or(0),
            dim: d,
            seed: self.solver.seed,
        })?);

        let targets = self.encode_targets(&labels, &Single, self.scheme(false))?;
        let tt = targets.y.len() / n;
        let lam = self.sample_lambdas(&labels, targets.classes.as_deref(), None, &Single)?;
        drop(labels);
        let weight: Vec<f64> = lam.iter().map(|l| self.lambda / l).collect();
        drop(lam);
        let mut hooks = Hooks::<T> {
            validate: validation_hook(
                opts.validation,
                &standardizer,
                d,
                targets.classes.clone(),
                targets.scaler,
                tt,
                targets.multiclass,
            )?,
            progress: opts.progress.take(),
            interrupt: opts.interrupt.take(),
        };
        let rows = StreamedRows::<T> {
            stream,
            standardizer: &standardizer,
            n,
            d,
            at: RefCell::new(Cursor::default()),
        };
        let problem = DsgProblem {
            rows: DsgRows::Stream(&rows),
            map: &map,
            loss: self.loss,
            targets: tt,
            y: &targets.y,
            weight: &weight,
            lambda: self.lambda,
        };
        let run = DsgRun {
            max_iter: self.solver.max_iter,
            time_limit: self.solver.time_limit,
            check_every: self.solver.check_every,
            seed: self.solver.seed,
        };
        let sol = solve_dsg(&problem, cfg, &run, &mut hooks)?;
        let device_note = format!(
            "{}; rows streamed from {} in {} parts",
            resolve(self.device, self.gpu_support())?,
            stream.path().display(),
            stream.parts()
        );
        let fitted = Fitted {
            sol,
            solver_name: cfg.variant.name(),
            kernel,
            standardizer: standardizer.clone(),
            targets,
            n,
            n_total: n,
            distributed: false,
            seconds: start.elapsed().as_secs_f64(),
            device_note,
        };
        Ok(self.assemble(fitted, Some(&map), &some_rows))
    }
}

/// The rows the median heuristic looks at ([`heuristic_rows`]), standardised, in its order:
/// one pass over the file, keeping only those rows.
fn heuristic_sample<T: Scalar>(
    stream: &TextStream,
    standardizer: &Standardizer,
    n: usize,
    d: usize,
    seed: u64,
    mut tell: impl FnMut(usize),
) -> Result<Features<T>> {
    let idx = heuristic_rows(n, seed);
    // (row, slot) by row, walked alongside the file
    let mut wanted: Vec<(usize, usize)> = idx.iter().enumerate().map(|(s, &r)| (r, s)).collect();
    wanted.sort_unstable();
    let mut out = vec![T::default(); idx.len() * d];
    let (mut first, mut next) = (0, 0);
    for k in 0..stream.parts() {
        if let Some(part) = stream.part(k)? {
            let len = part.x.nrows();
            let x: Features<T> = standardizer.transform(&part.x)?;
            while next < wanted.len() && wanted[next].0 < first + len {
                let (row, slot) = wanted[next];
                x.gather_range(row - first, &mut out[slot * d..(slot + 1) * d]);
                next += 1;
            }
            first += len;
        }
        tell(k + 1);
    }
    if first != n {
        return Err(changed(stream, first, n));
    }
    Ok(Features::Dense(DenseMatrix::new(idx.len(), d, out)?))
}

/// The error of a file whose row count changed between two passes.
fn changed(stream: &TextStream, rows: usize, n: usize) -> JokerError {
    JokerError::Numerical(format!(
        "{} changed while it was read: a pass found {rows} rows, the first {n}",
        stream.path().display()
    ))
}

/// Where a [`StreamedRows`] stands: the part read last, its rows (standardised), the next of
/// them, and the row of the pass that is.
#[derive(Default)]
struct Cursor<T> {
    part: Option<usize>,
    rows: Option<Features<T>>,
    next: usize,
    row: usize,
}

/// The file's rows as a [`RowStream`]: parts read and standardised one at a time.
struct StreamedRows<'a, T> {
    stream: &'a TextStream,
    standardizer: &'a Standardizer,
    n: usize,
    d: usize,
    at: RefCell<Cursor<T>>,
}

impl<T: Scalar> StreamedRows<'_, T> {
    /// Moves to the next part with rows, from the first part after the last one.
    fn advance(&self, at: &mut Cursor<T>) -> Result<()> {
        loop {
            let k = match at.part {
                Some(k) if k + 1 < self.stream.parts() => k + 1,
                Some(_) => {
                    if at.row != self.n {
                        return Err(changed(self.stream, at.row, self.n));
                    }
                    at.row = 0;
                    0
                }
                None => 0,
            };
            at.part = Some(k);
            if let Some(part) = self.stream.part(k)? {
                if at.row + part.x.nrows() > self.n {
                    return Err(changed(self.stream, at.row + part.x.nrows(), self.n));
                }
                at.rows = Some(self.standardizer.transform(&part.x)?);
                at.next = 0;
                return Ok(());
            }
        }
    }
}

impl<T: Scalar> RowStream<T> for StreamedRows<'_, T> {
    fn nrows(&self) -> usize {
        self.n
    }

    fn ncols(&self) -> usize {
        self.d
    }

    fn read(&self, first: usize, out: &mut [T]) -> Result<()> {
        let mut at = self.at.borrow_mut();
        let d = self.d;
        if first != at.row % self.n {
            return Err(invalid(
                "rows",
                format!(
                    "a stream is read in order: row {first} was asked for at row {}",
                    at.row % self.n
                ),
            ));
        }
        let want = out.len() / d;
        let mut done = 0;
        while done < want {
            let len = at.rows.as_ref().map_or(0, |x| x.nrows());
            if at.next == len {
                self.advance(&mut at)?;
                continue;
            }
            let take = (want - done).min(len - at.next);
            let rows = at.rows.as_ref().expect("a part is loaded");
            rows.gather_range(at.next, &mut out[done * d..(done + take) * d]);
            at.next += take;
            at.row += take;
            done += take;
        }
        Ok(())
    }
}

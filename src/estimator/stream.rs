//! A doubly stochastic fit on a text file streamed a part at a time: memory holds one part of
//! the rows and nothing per row (a row's targets and weight come from its label as it is
//! read).
//!
//! Before the first step the file is read once (once more first for a LIBSVM file whose width
//! is not given): the labels' statistics (count, classes and their counts, or sum) and the
//! column moments of the standardisation; then once more for the rows the median heuristic
//! looks at (and the regression targets' spread). These are the values the fit in memory
//! computes from the same rows in the same order, so a streamed fit and one on the rows in
//! memory, swept in file order, take the same steps.

use std::cell::RefCell;

use super::{
    ClassWeight, FitOptions, Fitted, Joker, Targets, check_class_count, class_weights, fit_hooks,
};
use crate::data::{DenseMatrix, Features, RowStream};
use crate::device::resolve;
use crate::distributed::Single;
use crate::error::{JokerError, Result, invalid};
use crate::features::{FeatureKind, FeatureMap, FeatureSpec, RandomMap};
use crate::io::stream::TextStream;
use crate::kernel::{Bandwidth, Kernel, heuristic_rows, resolve_gamma};
use crate::model::{Model, Precision, Task};
use crate::preprocess::{Moments, Multiclass, Standardizer, TargetScaler};
use crate::scalar::Scalar;
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
    /// The same fit as [`Joker::fit_with`] on the file's rows in memory (read in the fit's
    /// precision) with [`DsgConfig::sequential`] on: the standardisation, the median bandwidth,
    /// the targets and every step are computed from the same values in the same order.
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
        // refused before the file is read; the default rule is the median here, the one rule a
        // sample of the stream gives
        let bandwidth = self.bandwidth.for_fit(true, true);
        if !matches!(bandwidth, Bandwidth::Median | Bandwidth::Gamma(_)) {
            return Err(invalid(
                "gamma",
                "a streamed fit finds the median bandwidth from a sample of rows; the mean squared distance and scikit-learn's \"scale\" need the whole data set: give gamma or use the median",
            ));
        }
        if self.feature_map != FeatureKind::Random {
            return Err(invalid(
                "feature_map",
                "the doubly stochastic solvers regenerate random features from the seed; a Nystrom map is for DBCD-TR",
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
        let classify = self.task() == Task::Classification;
        // the label statistics and the column moments
        let mut labels = LabelStats::new(classify);
        let mut moments = None::<Moments>;
        for k in 0..stream.parts() {
            if let Some(part) = stream.part::<T>(k)? {
                moments
                    .get_or_insert_with(|| Moments::new(part.x.ncols()))
                    .add(&part.x);
                labels.add(&part.y)?;
            }
            tell("labels", k + 1);
        }
        let Some(moments) = moments else {
            return Err(JokerError::EmptyData(format!(
                "{} has no data rows",
                stream.path().display()
            )));
        };
        let (n, d) = (labels.n, moments.ncols());
        let standardizer = match self.standardize {
            true => moments.standardizer(&Single)?,
            false => Standardizer::identity(d),
        };
        // a second pass for the median bandwidth's rows and the targets' spread
        let bandwidth = self.bandwidth.for_fit(true, true);
        let median = bandwidth == Bandwidth::Median;
        let spread = !classify && self.normalize_target;
        let mut some_rows = Features::Dense(DenseMatrix::new(1, d, vec![T::default(); d])?);
        if median || spread {
            let mean = labels.sum / n as f64;
            let (rows, squares) = second_pass::<T>(
                stream,
                &standardizer,
                (n, d),
                mean,
                |k| tell("bandwidth", k),
                self.solver.seed,
            )?;
            some_rows = rows;
            labels.squares = squares;
        }
        let gamma = resolve_gamma(self.kernel, bandwidth, &some_rows, self.solver.seed)?;
        let kernel = Kernel {
            kind: self.kernel,
            gamma,
        };
        let map = FeatureMap::Random(RandomMap::<T>::new(FeatureSpec {
            kernel,
            n_components: self.n_components.unwrap_or(0),
            dim: d,
            seed: self.solver.seed,
        })?);

        let targets = labels.targets(self)?;
        let tt = match &targets.classes {
            Some(c) if c.len() > 2 => c.len(),
            _ => 1,
        };
        let encode = labels.encoder(self, &targets)?;
        let mut hooks = fit_hooks::<U, T>(&mut opts, &standardizer, d, &targets, tt)?;
        let rows = StreamedRows::<T> {
            stream,
            standardizer: &standardizer,
            n,
            d,
            at: RefCell::new(Cursor::default()),
        };
        let problem = DsgProblem {
            rows: DsgRows::Stream {
                rows: &rows,
                encode: &encode,
            },
            map: &map,
            loss: self.loss,
            targets: tt,
            lambda: self.lambda,
        };
        let sol = solve_dsg(&problem, cfg, &DsgRun::of(&self.solver), &mut hooks)?;
        let device_note = format!(
            "{}; rows streamed from {} in {} parts",
            resolve(self.device, self.gpu_support())?,
            stream.path().display(),
            stream.parts()
        );
        let fitted = Fitted {
            sol,
            tt,
            map_note: String::new(),
            solver_name: cfg.variant.name(),
            kernel,
            standardizer: standardizer.clone(),
            targets,
            n_total: n,
            distributed: false,
            seconds: start.elapsed().as_secs_f64(),
            device_note,
            // not counted: the doubly stochastic solvers have no pass count (`sol.passes`)
            statistics: 0.0,
        };
        Ok(self.assemble(fitted, Some(&map), &some_rows))
    }
}

/// What the fit needs of the labels, gathered a part at a time: their count, and the classes
/// with their counts (classifiers) or the sum and the squared deviations (regression); the
/// values the fit in memory computes from all the labels, in the same order.
struct LabelStats {
    n: usize,
    /// Sorted distinct labels and their counts (classifiers).
    classes: Option<Vec<(f64, f64)>>,
    sum: f64,
    squares: f64,
}

impl LabelStats {
    fn new(classify: bool) -> Self {
        LabelStats {
            n: 0,
            classes: classify.then(Vec::new),
            sum: 0.0,
            squares: 0.0,
        }
    }

    fn add(&mut self, y: &[f64]) -> Result<()> {
        self.n += y.len();
        match &mut self.classes {
            Some(classes) => {
                for &v in y {
                    match classes.binary_search_by(|c| c.0.total_cmp(&v)) {
                        Ok(k) => classes[k].1 += 1.0,
                        Err(k) => classes.insert(k, (v, 1.0)),
                    }
                }
                // more labels than a classifier can have: the check below says so
                if classes.len() > MAX_STREAM_CLASSES {
                    let c: Vec<f64> = classes.iter().map(|c| c.0).collect();
                    check_class_count(&c, self.n)?;
                }
            }
            None => self.sum = y.iter().fold(self.sum, |s, v| s + v),
        }
        Ok(())
    }

    /// The targets' description (no per-row values: a streamed row's targets come from its
    /// label, [`LabelStats::encoder`]).
    fn targets(&self, p: &Joker) -> Result<Targets> {
        Ok(match &self.classes {
            Some(c) => {
                let classes: Vec<f64> = c.iter().map(|c| c.0).collect();
                check_class_count(&classes, self.n)?;
                if classes.len() > 2 && p.scheme(false) == Multiclass::OneVsOne {
                    return Err(invalid(
                        "multiclass",
                        "the doubly stochastic solvers train one-vs-rest",
                    ));
                }
                Targets {
                    classes: Some(classes),
                    multiclass: Multiclass::OneVsRest,
                    y: Vec::new(),
                    scaler: TargetScaler::identity(),
                }
            }
            None => {
                let scaler = match p.normalize_target {
                    true => {
                        let n = self.n as f64;
                        TargetScaler::of_spread(self.sum / n, self.squares, n)
                    }
                    false => TargetScaler::identity(),
                };
                Targets {
                    classes: None,
                    multiclass: Multiclass::OneVsRest,
                    y: Vec::new(),
                    scaler,
                }
            }
        })
    }

    /// A label's targets (`-1`/`+1` columns as [`encode_labels`](crate::preprocess::encode_labels)
    /// writes them, or the scaled value) and weight (the class weight, through
    /// `lambda / (lambda / w)` as the fit in memory computes it).
    #[allow(clippy::type_complexity)]
    fn encoder(
        &self,
        p: &Joker,
        targets: &Targets,
    ) -> Result<Box<dyn Fn(f64, &mut [f64]) -> Result<f64> + Sync>> {
        let lambda = p.lambda;
        let per_class = |w: f64| lambda / (lambda / w);
        match &self.classes {
            Some(c) => {
                let classes: Vec<f64> = c.iter().map(|c| c.0).collect();
                let counts: Vec<f64> = c.iter().map(|c| c.1).collect();
                let weights: Vec<f64> = class_weights(&p.class_weight, &classes, &counts)?
                    .into_iter()
                    .map(per_class)
                    .collect();
                Ok(Box::new(move |label, out: &mut [f64]| {
                    let k = classes
                        .binary_search_by(|c| c.total_cmp(&label))
                        .map_err(|_| {
                            JokerError::InvalidLabels(format!(
                                "label {label} was not in the file's first pass (classes {classes:?}): the file changed while it was read"
                            ))
                        })?;
                    match out.len() {
                        1 => out[0] = if k == 1 { 1.0 } else { -1.0 },
                        _ => {
                            out.fill(-1.0);
                            out[k] = 1.0;
                        }
                    }
                    Ok(weights[k])
                }))
            }
            None => {
                if p.class_weight != ClassWeight::None {
                    return Err(invalid(
                        "class_weight",
                        "class weights apply to classifiers only",
                    ));
                }
                let (scaler, w) = (targets.scaler, per_class(1.0));
                Ok(Box::new(move |label, out: &mut [f64]| {
                    out[0] = scaler.forward(label);
                    Ok(w)
                }))
            }
        }
    }
}

/// Distinct labels past which a classifier's labels are checked (the check refuses more
/// than 1,000 classes): the statistics never hold more.
const MAX_STREAM_CLASSES: usize = 1000;

/// The second pass: the rows the median heuristic looks at ([`heuristic_rows`]),
/// standardised, in its order, and the labels' sum of squared deviations from `mean`.
fn second_pass<T: Scalar>(
    stream: &TextStream,
    standardizer: &Standardizer,
    (n, d): (usize, usize),
    mean: f64,
    mut tell: impl FnMut(usize),
    seed: u64,
) -> Result<(Features<T>, f64)> {
    let idx = heuristic_rows(n, seed);
    // (row, slot) by row, walked alongside the file
    let mut wanted: Vec<(usize, usize)> = idx.iter().enumerate().map(|(s, &r)| (r, s)).collect();
    wanted.sort_unstable();
    let mut out = vec![T::default(); idx.len() * d];
    let (mut first, mut next, mut squares) = (0, 0, 0.0);
    for k in 0..stream.parts() {
        if let Some(part) = stream.part::<T>(k)? {
            let len = part.x.nrows();
            squares = part.y.iter().fold(squares, |s, v| s + (v - mean).powi(2));
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
    Ok((
        Features::Dense(DenseMatrix::new(idx.len(), d, out)?),
        squares,
    ))
}

/// The error of a file whose row count changed between two passes.
fn changed(stream: &TextStream, rows: usize, n: usize) -> JokerError {
    JokerError::Numerical(format!(
        "{} changed while it was read: a pass found {rows} rows, the first {n}",
        stream.path().display()
    ))
}

/// Where a [`StreamedRows`] stands: the part read last, its rows (standardised) and labels,
/// the next of them, and the row of the pass that is.
#[derive(Default)]
struct Cursor<T> {
    part: Option<usize>,
    rows: Option<(Features<T>, Vec<f64>)>,
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
            if let Some(part) = self.stream.part::<T>(k)? {
                if at.row + part.x.nrows() > self.n {
                    return Err(changed(self.stream, at.row + part.x.nrows(), self.n));
                }
                at.rows = Some((self.standardizer.transform(&part.x)?, part.y));
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

    fn read(&self, first: usize, out: &mut [T], labels: &mut [f64]) -> Result<()> {
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
        let want = labels.len();
        let mut done = 0;
        while done < want {
            let len = at.rows.as_ref().map_or(0, |(x, _)| x.nrows());
            if at.next == len {
                self.advance(&mut at)?;
                continue;
            }
            let take = (want - done).min(len - at.next);
            let (rows, y) = at.rows.as_ref().expect("a part is loaded");
            rows.gather_range(at.next, &mut out[done * d..(done + take) * d]);
            labels[done..done + take].copy_from_slice(&y[at.next..at.next + take]);
            at.next += take;
            at.row += take;
            done += take;
        }
        Ok(())
    }
}

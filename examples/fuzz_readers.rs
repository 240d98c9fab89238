//! Deterministic mutation fuzzing of the readers of untrusted files: the data readers
//! (`read_libsvm`, `read_csv`, `read_auto`, in `f32` and `f64`) and the model reader
//! (`Model::from_json`, `Model::load`, then prediction with any model they accept).
//!
//! Every input must come back as a value or a `JokerError`. A panic, a reader call that
//! takes longer than the hang limit, or an allocation that would take the heap in use past
//! 1 GiB (inputs are at most 4 KiB) is a finding; so is a disagreement between results
//! that must agree: a file read in `f32` reads in `f64` with the same rows, `read_auto`
//! returns what the reader it picks returns, whatever `read_libsvm` or `read_csv` reads
//! `write_libsvm` writes back identically, `Model::load` agrees with `Model::from_json`, and
//! a model that loads survives a JSON round trip. A finding prints the input escaped to
//! stderr, writes it to `target/fuzz-crash-<n>.bin` and exits with status 1;
//! `--replay FILE` runs a saved input again.
//!
//! Inputs start from seeds (small LIBSVM files, CSV and TSV files with and without a
//! header, their gzip and bzip2 forms, and model files of tiny fits) and are mutated by bit
//! flips, insertions of tokens that number and index parsers trip over, deletions,
//! truncation, duplicated chunks, line swaps and splices; compressed inputs are also mutated
//! inside their compression, so that the parser behind the decompressor sees the damage. An
//! input with an outcome not seen before (a reader accepting it, or an error of a new kind
//! and shape) joins the corpus. The sequence of inputs is a pure function of `--seed`;
//! `--seconds` only says how far along it the run gets.
//!
//! ```text
//! cargo run --release --example fuzz_readers -- --seconds 180 --seed 1
//! ```

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::{BTreeMap, HashSet};
use std::io::{Read, Write};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Mutex, MutexGuard, OnceLock, TryLockError};
use std::time::{Duration, Instant};

use serde_json::Value;

use joker::io::{
    CsvOptions, LabelColumn, LibsvmOptions, read_auto, read_csv, read_libsvm, write_libsvm,
};
use joker::{
    CsrMatrix, Dataset, DenseMatrix, Device, Features, Joker, KernelKind, Loss, Model, Precision,
    Scalar, Task,
};

/// Largest input, in bytes.
const MAX_INPUT: usize = 4096;
/// Most heap in use at once; an allocation that would pass it is a finding.
const HEAP_LIMIT: usize = 1 << 30;
/// Longest a single reader call may take (unoptimised builds are given more).
const HANG_LIMIT: Duration = if cfg!(debug_assertions) {
    Duration::from_secs(10)
} else {
    Duration::from_secs(2)
};
/// Largest model width that prediction is tried on (the rows are dense).
const MAX_PREDICT_WIDTH: usize = 4096;
/// Most inputs kept for mutation.
const MAX_CORPUS: usize = 4000;

// ---------------------------------------------------------------------------------------
// Findings: the heap limit, panics and hangs, reported with the input that caused them.

/// The system allocator, counting the bytes in use and stopping the run at the first
/// allocation that would take them past [`HEAP_LIMIT`].
struct Guarded;

#[global_allocator]
static ALLOCATOR: Guarded = Guarded;

/// Heap bytes in use, the most there has been, and the most since the current call began.
static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
static CALL_PEAK: AtomicUsize = AtomicUsize::new(0);
/// Set once a finding is being reported: the report may allocate freely, and a second
/// finding waits for the first to end the process.
static REPORTING: AtomicBool = AtomicBool::new(false);

impl Guarded {
    /// Stops the run if `grow` more bytes would take the heap past the limit.
    fn admit(&self, grow: usize) {
        let live = LIVE.load(Relaxed);
        if live.saturating_add(grow) > HEAP_LIMIT && !REPORTING.load(Relaxed) {
            report(Finding::Memory { grow, live });
        }
    }

    fn count(&self, grow: usize) {
        let live = LIVE.fetch_add(grow, Relaxed) + grow;
        PEAK.fetch_max(live, Relaxed);
        CALL_PEAK.fetch_max(live, Relaxed);
    }
}

// SAFETY: every method forwards its arguments unchanged to `System`, so the pointers and
// layouts returned and accepted are exactly `System`'s; the bookkeeping around the calls
// touches only atomics, and a report (which allocates) is entered with `REPORTING` set, so
// it never re-enters itself.
unsafe impl GlobalAlloc for Guarded {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        self.admit(layout.size());
        // SAFETY: the caller meets `alloc`'s contract for `layout`, passed on as is.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            self.count(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        self.admit(layout.size());
        // SAFETY: as in `alloc`.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            self.count(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System` through this allocator with this `layout`.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        self.admit(new_size.saturating_sub(layout.size()));
        // SAFETY: `ptr` came from `System` with `layout`, and the caller meets `realloc`'s
        // contract for `new_size`.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            self.count(new_size);
            LIVE.fetch_sub(layout.size(), Relaxed);
        }
        p
    }
}

/// What went wrong.
enum Finding {
    Panic(String),
    Hang(Duration),
    Memory { grow: usize, live: usize },
    Mismatch(String),
}

/// The input being run, its number, and the call it is in (for reports from the allocator
/// and the watchdog).
static INPUT: Mutex<(Vec<u8>, u64)> = Mutex::new((Vec::new(), 0));
static TARGET: Mutex<&str> = Mutex::new("setup");
/// The last panic's message and backtrace, from the panic hook.
static PANIC: Mutex<Option<String>> = Mutex::new(None);
/// When the current call started, in microseconds after [`origin`] plus one; 0 when idle.
static STARTED: AtomicU64 = AtomicU64::new(0);
/// The most heap each kind of call took on top of what was in use when it began.
static CALL_HEAP: Mutex<BTreeMap<&str, usize>> = Mutex::new(BTreeMap::new());

fn origin() -> Instant {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    *ORIGIN.get_or_init(Instant::now)
}

fn micros_since_origin() -> u64 {
    origin().elapsed().as_micros() as u64
}

/// A lock that a panic elsewhere does not make unusable.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Like [`lock`], but gives up rather than wait (a report must not deadlock).
fn try_lock<T>(m: &Mutex<T>) -> Option<MutexGuard<'_, T>> {
    match m.try_lock() {
        Ok(g) => Some(g),
        Err(TryLockError::Poisoned(e)) => Some(e.into_inner()),
        Err(TryLockError::WouldBlock) => None,
    }
}

/// Prints the finding and its input, saves the input, and ends the run with status 1.
fn report(finding: Finding) -> ! {
    if REPORTING.swap(true, Relaxed) {
        // Another thread is reporting and will end the process.
        loop {
            std::thread::park();
        }
    }
    let (input, n) = try_lock(&INPUT).map_or((Vec::new(), 0), |g| g.clone());
    let target = try_lock(&TARGET).map_or("?", |g| *g);
    let what = match finding {
        Finding::Panic(msg) => format!("panic: {msg}"),
        Finding::Hang(t) => format!("hang: still running after {t:.1?}"),
        Finding::Memory { grow, live } => format!(
            "memory: allocating {grow} bytes with {live} in use passes the limit of {HEAP_LIMIT}"
        ),
        Finding::Mismatch(msg) => format!("inconsistent results: {msg}"),
    };
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "fuzz_readers: FINDING in {target}, input {n}: {what}");
    let _ = writeln!(
        err,
        "input ({} bytes): \"{}\"",
        input.len(),
        input.escape_ascii()
    );
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target");
    let path = dir.join(format!("fuzz-crash-{n}.bin"));
    match std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&path, &input)) {
        Ok(()) => {
            let _ = writeln!(
                err,
                "saved to {0}; run it again with --replay {0}",
                path.display()
            );
        }
        Err(e) => {
            let _ = writeln!(err, "could not save the input to {}: {e}", path.display());
        }
    }
    // Exiting skips the scratch files' destructor.
    if let Some(dir) = SCRATCH.get() {
        let _ = std::fs::remove_dir_all(dir);
    }
    std::process::exit(1)
}

/// Ends the run when a call has been running longer than [`HANG_LIMIT`].
fn watchdog() {
    loop {
        std::thread::sleep(Duration::from_millis(50));
        let started = STARTED.load(Relaxed);
        if started == 0 {
            continue;
        }
        let running = Duration::from_micros(micros_since_origin().saturating_sub(started - 1));
        if running > HANG_LIMIT {
            report(Finding::Hang(running));
        }
    }
}

/// Runs one call under the panic and hang checks; `target` names it in reports.
fn call<R>(target: &'static str, f: impl FnOnce() -> R) -> R {
    *lock(&TARGET) = target;
    let base = LIVE.load(Relaxed);
    CALL_PEAK.store(base, Relaxed);
    STARTED.store(micros_since_origin() + 1, Relaxed);
    let r = catch_unwind(AssertUnwindSafe(f));
    STARTED.store(0, Relaxed);
    let took = CALL_PEAK.load(Relaxed).saturating_sub(base);
    let mut heap = lock(&CALL_HEAP);
    let most = heap.entry(target).or_default();
    *most = took.max(*most);
    drop(heap);
    r.unwrap_or_else(|_| {
        let msg = lock(&PANIC).take();
        report(Finding::Panic(msg.unwrap_or_else(|| "(no message)".into())))
    })
}

/// The frames of a backtrace in joker's code, with their source lines.
fn joker_frames(trace: &str) -> String {
    let lines: Vec<&str> = trace.lines().collect();
    let mut out = String::new();
    for (k, line) in lines.iter().enumerate() {
        if line.contains(" joker::") {
            out.push_str(line);
            out.push('\n');
            if let Some(at) = lines
                .get(k + 1)
                .filter(|l| l.trim_start().starts_with("at "))
            {
                out.push_str(at);
                out.push('\n');
            }
        }
    }
    out
}

/// Ends the run with a disagreement between results unless `ok`.
fn expect(ok: bool, what: impl FnOnce() -> String) {
    if !ok {
        report(Finding::Mismatch(what()));
    }
}

// ---------------------------------------------------------------------------------------
// Running one input through every reader.

/// The scratch directory, for removal when a finding ends the run.
static SCRATCH: OnceLock<PathBuf> = OnceLock::new();

/// Scratch files: the input under names with and without a compression extension, and the
/// files written back.
struct Files {
    dir: PathBuf,
    inputs: [PathBuf; 4],
    written: [PathBuf; 2],
}

impl Files {
    fn new() -> std::io::Result<Files> {
        let dir = std::env::temp_dir().join(format!("joker-fuzz-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let _ = SCRATCH.set(dir.clone());
        Ok(Files {
            inputs: ["input", "input.svm", "input.gz", "input.bz2"].map(|n| dir.join(n)),
            written: ["written.svm", "written.svm.gz"].map(|n| dir.join(n)),
            dir,
        })
    }
}

impl Drop for Files {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// FNV-1a: picks options and file names from the input itself, so a saved input replays
/// exactly.
fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

fn pick<T: Clone>(h: &mut u64, options: &[T]) -> T {
    let k = (*h % options.len() as u64) as usize;
    *h /= options.len() as u64;
    options[k].clone()
}

fn libsvm_options(h: &mut u64) -> LibsvmOptions {
    LibsvmOptions {
        zero_based: pick(h, &[None, Some(true), Some(false)]),
        n_features: pick(h, &[None, Some(1), Some(3), Some(4), Some(100_000)]),
    }
}

fn csv_options(h: &mut u64) -> CsvOptions {
    CsvOptions {
        delimiter: pick(
            h,
            &[
                None,
                Some(b','),
                Some(b'\t'),
                Some(b' '),
                Some(b';'),
                Some(b'|'),
                Some(b'.'),
            ],
        ),
        has_header: pick(h, &[None, Some(true), Some(false)]),
        label_column: pick(
            h,
            &[
                LabelColumn::Last,
                LabelColumn::First,
                LabelColumn::Index(1),
                LabelColumn::Index(2),
                LabelColumn::Index(9),
            ],
        ),
    }
}

/// The outcome of a call, in a form that groups alike errors: the file name, everything
/// between the first and the last backquote (quoted input, which may hold backquotes
/// itself) and numbers are blanked out.
fn shape<T>(target: &str, r: &joker::Result<T>, files: &Files) -> String {
    let Err(e) = r else {
        return format!("{target}: ok");
    };
    let mut msg = e.to_string();
    for path in files.inputs.iter().rev() {
        msg = msg.replace(&*path.to_string_lossy(), "<input>");
    }
    if let (Some(a), Some(b)) = (msg.find('`'), msg.rfind('`')) {
        msg.replace_range(a..=b, "~");
    }
    let mut out = String::new();
    for c in msg.chars().take(160) {
        if !c.is_ascii_digit() {
            out.push(c);
        } else if !out.ends_with('#') {
            out.push('#');
        }
    }
    format!("{target}: {out}")
}

/// The non-zero features as (row, column, value rounded to `f32`), for comparing results
/// across precisions and layouts.
fn nonzeros<T: Scalar>(x: &Features<T>) -> Vec<(usize, usize, u32)> {
    let mut out = Vec::new();
    let mut put = |i: usize, j: usize, v: T| {
        let v = v.to_f64() as f32;
        if v != 0.0 {
            out.push((i, j, v.to_bits()));
        }
    };
    match x {
        Features::Dense(m) => {
            for i in 0..m.nrows() {
                for (j, &v) in m.row(i).iter().enumerate() {
                    put(i, j, v);
                }
            }
        }
        Features::Sparse(m) => {
            for i in 0..m.nrows() {
                let (idx, val) = m.row(i);
                for (&j, &v) in idx.iter().zip(val) {
                    put(i, j as usize, v);
                }
            }
        }
    }
    out
}

/// Names of the data reader calls, per precision.
fn reader_names<T: Scalar>() -> [&'static str; 5] {
    if T::NAME == "f32" {
        [
            "read_libsvm::<f32> (default options)",
            "read_libsvm::<f32> (other options)",
            "read_csv::<f32> (default options)",
            "read_csv::<f32> (other options)",
            "read_auto::<f32>",
        ]
    } else {
        [
            "read_libsvm::<f64> (default options)",
            "read_libsvm::<f64> (other options)",
            "read_csv::<f64> (default options)",
            "read_csv::<f64> (other options)",
            "read_auto::<f64>",
        ]
    }
}

/// Every data reader on `path`, in one precision.
fn read_all<T: Scalar>(
    path: &Path,
    lo: &LibsvmOptions,
    co: &CsvOptions,
) -> [joker::Result<Dataset<T>>; 5] {
    let names = reader_names::<T>();
    [
        call(names[0], || read_libsvm(path, &LibsvmOptions::default())),
        call(names[1], || read_libsvm(path, lo)),
        call(names[2], || read_csv(path, &CsvOptions::default())),
        call(names[3], || read_csv(path, co)),
        call(names[4], || read_auto(path)),
    ]
}

/// What is read is written back by `write_libsvm` and read again unchanged.
fn check_write_back<T: Scalar>(d: &Dataset<T>, files: &Files, h: u64, read_by: &str) {
    let path = &files.written[(h % 2) as usize];
    let wrote = call("write_libsvm", || write_libsvm(path, d));
    expect(wrote.is_ok(), || {
        format!("write_libsvm of what {read_by} read failed: {wrote:?}")
    });
    let opts = LibsvmOptions {
        zero_based: Some(false),
        n_features: Some(d.x.ncols()),
    };
    let back = call("read_libsvm of written data", || {
        read_libsvm::<T>(path, &opts)
    });
    let same = back
        .as_ref()
        .is_ok_and(|b| b.y == d.y && nonzeros(&b.x) == nonzeros(&d.x));
    expect(same, || {
        format!("what {read_by} read does not read back the same after write_libsvm: {back:?}")
    });
}

/// Runs the data readers in both precisions and checks their results against each other.
fn run_readers(path: &Path, files: &Files, h: u64, outcomes: &mut Vec<String>) {
    let mut hh = h;
    let (lo, co) = (libsvm_options(&mut hh), csv_options(&mut hh));
    let r32 = read_all::<f32>(path, &lo, &co);
    let r64 = read_all::<f64>(path, &lo, &co);
    for (k, (a, b)) in r32.iter().zip(&r64).enumerate() {
        outcomes.push(shape(reader_names::<f32>()[k], a, files));
        outcomes.push(shape(reader_names::<f64>()[k], b, files));
        if let Ok(a) = a {
            let agree = b
                .as_ref()
                .is_ok_and(|b| a.y == b.y && nonzeros(&a.x) == nonzeros(&b.x));
            expect(agree, || {
                format!(
                    "{} read the input but {} gave {b:?}",
                    reader_names::<f32>()[k],
                    reader_names::<f64>()[k]
                )
            });
        }
    }
    // read_auto is read_libsvm or read_csv with default options.
    if let Ok(auto) = &r64[4] {
        let picked = [&r64[0], &r64[2]]
            .iter()
            .any(|r| r.as_ref().is_ok_and(|d| d == auto));
        expect(picked, || {
            "read_auto::<f64> returned what neither default reader returns".into()
        });
    }
    for (k, r) in r64.iter().enumerate().take(4) {
        if let Ok(d) = r {
            check_write_back(d, files, h >> 7, reader_names::<f64>()[k]);
        }
    }
    if let Ok(d) = &r32[0] {
        check_write_back(d, files, h >> 9, reader_names::<f32>()[0]);
    }
}

/// Prediction on rows of the model's width (and one too wide) may fail, but not panic.
fn exercise(m: &Model) {
    let d = m.n_features;
    if d == 0 || d > MAX_PREDICT_WIDTH {
        return;
    }
    let values: Vec<f64> = (0..2 * d).map(|k| [0.5, -1.25, 0.0, 3.0][k % 4]).collect();
    let dense = DenseMatrix::new(2, d, values.clone()).map(Features::Dense);
    let sparse =
        CsrMatrix::new(2, d, vec![0, 1, 1], vec![(d - 1) as u32], vec![2.0]).map(Features::Sparse);
    let wide = DenseMatrix::new(1, d + 1, vec![1.0; d + 1]).map(Features::Dense);
    for x in [dense, sparse, wide].into_iter().flatten() {
        let _ = m.decision_function(&x);
        let _ = m.predict(&x);
        let _ = m.predict_proba(&x);
        let y = vec![1.0; x.nrows()];
        if let Ok(data) = Dataset::new(x, y) {
            let _ = m.score(&data);
        }
    }
}

/// Runs the model readers, checks that they agree, and predicts with what they accept.
fn run_model_readers(input: &[u8], path: &Path, files: &Files, outcomes: &mut Vec<String>) {
    let loaded = call("Model::load", || Model::load(path));
    outcomes.push(shape("Model::load", &loaded, files));
    let Ok(text) = std::str::from_utf8(input) else {
        return;
    };
    let parsed = call("Model::from_json", || Model::from_json(text));
    outcomes.push(match &parsed {
        // Models of a new kind join the corpus, to be edited further.
        Ok(m) => format!(
            "Model::from_json: ok ({:?}, {:?}, {}, {}, {} targets, {:?} classes)",
            m.task,
            m.precision,
            m.loss.name(),
            m.n_components().map_or("exact", |_| "random features"),
            m.n_targets,
            m.classes.as_ref().map(Vec::len)
        ),
        Err(_) => shape("Model::from_json", &parsed, files),
    });
    match (&parsed, &loaded) {
        (Ok(a), Ok(b)) => expect(same_model(a, b), || {
            "Model::load and Model::from_json differ".into()
        }),
        (Err(_), Err(_)) => {}
        _ => report(Finding::Mismatch(format!(
            "Model::from_json gave {:?} but Model::load gave {:?}",
            parsed.as_ref().map(|_| "a model"),
            loaded.as_ref().map(|_| "a model")
        ))),
    }
    if let Ok(m) = &parsed {
        let json = serde_json::to_string(m);
        expect(json.is_ok(), || {
            format!("a loaded model does not serialise: {json:?}")
        });
        let again = json.map(|j| call("Model::from_json (round trip)", || Model::from_json(&j)));
        expect(matches!(&again, Ok(Ok(b)) if same_model(b, m)), || {
            "a loaded model does not survive a JSON round trip".into()
        });
        call("Model prediction", || exercise(m));
    }
}

/// Runs one input through every reader; returns the outcomes, one per call.
fn execute(input: &[u8], n: u64, files: &Files) -> Vec<String> {
    *lock(&INPUT) = (input.to_vec(), n);
    let h = fnv(input);
    let path = &files.inputs[(h % 4) as usize];
    if let Err(e) = std::fs::write(path, input) {
        eprintln!("fuzz_readers: cannot write {}: {e}", path.display());
        std::process::exit(2);
    }
    let mut outcomes = Vec::with_capacity(24);
    run_readers(path, files, h >> 2, &mut outcomes);
    run_model_readers(input, path, files, &mut outcomes);
    outcomes
}

// ---------------------------------------------------------------------------------------
// Inputs: seeds and mutations.

/// SplitMix64: small, fast, and the same everywhere.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn chance(&mut self, one_in: usize) -> bool {
        self.below(one_in) == 0
    }
}

/// Text that field, index and line parsers trip over.
const TOKENS: &[&[u8]] = &[
    b":",
    b"-",
    b"+",
    b".",
    b",",
    b";",
    b"\t",
    b" ",
    b"\"",
    b"#",
    b"\r",
    b"\r\n",
    b"\n",
    b"\0",
    b"\xEF\xBB\xBF",
    b"\xff",
    b"\xc3\x28",
    b"qid:",
    b"qid:7",
    b"0:1",
    b"1:0",
    b"99999999999:1",
    b"4294967296:1",
    b"4294967295:1",
    b"4294967294:1",
    b"100000000:1",
    b"1,2",
    b"1 2:3",
    b"{",
    b"}",
    b"[",
    b"]",
    b"[]",
    b"{}",
    b"null",
    b"true",
    b"\"\"",
    b"\"exact\"",
    b"\"random_features\"",
    b"\"type\":\"exact\"",
    b"\"classes\":[1]",
    b"\"classes\":[]",
    b"\"n_targets\":2",
    b"\"precision\":\"f64\"",
    b"\"task\":\"regression\"",
    b"\"loss\":\"logistic\"",
];

/// Numbers that number and index parsers trip over, also put in place of numbers.
const NUMBERS: &[&[u8]] = &[
    b"1e308",
    b"-1e308",
    b"1e309",
    b"3.5e38",
    b"1e-320",
    b"4.9e-324",
    b"nan",
    b"NaN",
    b"inf",
    b"-inf",
    b"Infinity",
    b"-0",
    b"0x10",
    b"1_0",
    b"1e",
    b"E-",
    b"18446744073709551616",
    b"18446744073709551615",
    b"9223372036854775808",
    b"-9223372036854775808",
    b"4294967297",
    b"99999999999999999999999999999999999999999999999999999999999999999999999999999999",
    b"0.000000000000000000000000000000000000000000000000000000000000000000000000000001",
    b"0",
    b"1",
    b"2",
    b"-1",
];

/// A run of digits: where numbers and indices are.
fn digit_run(data: &[u8], from: usize) -> Option<(usize, usize)> {
    let a = from + data[from..].iter().position(u8::is_ascii_digit)?;
    let len = data[a..].iter().take_while(|b| b.is_ascii_digit()).count();
    Some((a, a + len))
}

/// A token or a number to insert.
fn token(rng: &mut Rng) -> &'static [u8] {
    let k = rng.below(TOKENS.len() + NUMBERS.len());
    TOKENS.get(k).unwrap_or_else(|| &NUMBERS[k - TOKENS.len()])
}

/// One to four random edits of `data`; `other` is a second corpus input for splicing.
fn mutate_bytes(rng: &mut Rng, data: &mut Vec<u8>, other: &[u8]) {
    for _ in 0..1 + rng.below(4) {
        let len = data.len();
        let at = rng.below(len + 1);
        match rng.below(11) {
            0 if len > 0 => {
                let k = rng.below(len);
                data[k] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let k = rng.below(len);
                data[k] = b"\n\r:# -.,\"9\0\xff"[rng.below(12)];
            }
            2 | 3 => {
                let tok = token(rng);
                data.splice(at..at, tok.iter().copied());
            }
            4 if len > 0 => {
                // After a separator, where a new token starts.
                let seps = data
                    .iter()
                    .enumerate()
                    .filter(|(_, b)| b" :,\n\t;".contains(b))
                    .map(|(k, _)| k + 1)
                    .collect::<Vec<_>>();
                let at = if seps.is_empty() {
                    at
                } else {
                    seps[rng.below(seps.len())]
                };
                let tok = token(rng);
                data.splice(at..at, tok.iter().copied());
            }
            5 if len > 0 => {
                let a = rng.below(len);
                let b = (a + 1 + rng.below(16)).min(len);
                data.drain(a..b);
            }
            6 if len > 0 => {
                let a = rng.below(len);
                let b = (a + 1 + rng.below(64)).min(len);
                let chunk = data[a..b].to_vec();
                let to = rng.below(len + 1);
                data.splice(to..to, chunk);
            }
            7 => data.truncate(at),
            8 => {
                let cut = rng.below(other.len() + 1);
                data.truncate(at);
                data.extend_from_slice(&other[cut..]);
            }
            9 if len > 0 => {
                if let Some((a, b)) = digit_run(data, rng.below(len)) {
                    let number = NUMBERS[rng.below(NUMBERS.len())];
                    data.splice(a..b, number.iter().copied());
                }
            }
            10 => {
                // Swap two lines.
                let lines: Vec<Vec<u8>> = data
                    .split_inclusive(|&b| b == b'\n')
                    .map(<[u8]>::to_vec)
                    .collect();
                if lines.len() > 1 {
                    let (i, j) = (rng.below(lines.len()), rng.below(lines.len()));
                    let mut lines = lines;
                    lines.swap(i, j);
                    *data = lines.concat();
                }
            }
            _ => {
                let b = rng.next() as u8;
                data.insert(at, b);
            }
        }
    }
    data.truncate(MAX_INPUT);
}

/// How an input is compressed, by its magic bytes.
#[derive(Clone, Copy, PartialEq)]
enum Packing {
    Plain,
    Gzip,
    Bzip2,
}

fn packing(data: &[u8]) -> Packing {
    if data.starts_with(&[0x1f, 0x8b, 0x08]) {
        Packing::Gzip
    } else if data.starts_with(b"BZh") {
        Packing::Bzip2
    } else {
        Packing::Plain
    }
}

fn pack(data: &[u8], how: Packing) -> Vec<u8> {
    fn finish<W: Write>(
        mut w: W,
        data: &[u8],
        end: impl FnOnce(W) -> std::io::Result<Vec<u8>>,
    ) -> Vec<u8> {
        w.write_all(data).and_then(|()| end(w)).unwrap_or_default()
    }
    match how {
        Packing::Plain => data.to_vec(),
        Packing::Gzip => finish(
            flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default()),
            data,
            |w| w.finish(),
        ),
        Packing::Bzip2 => finish(
            bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::default()),
            data,
            |w| w.finish(),
        ),
    }
}

/// The content of a compressed input, as far as it decompresses (at most 64 KiB).
fn unpack(data: &[u8], how: Packing) -> Vec<u8> {
    let mut out = Vec::new();
    let limit = 1 << 16;
    let _ = match how {
        Packing::Plain => return data.to_vec(),
        Packing::Gzip => flate2::read::MultiGzDecoder::new(data)
            .take(limit)
            .read_to_end(&mut out),
        Packing::Bzip2 => bzip2::read::MultiBzDecoder::new(data)
            .take(limit)
            .read_to_end(&mut out),
    };
    out
}

/// A JSON value that model fields trip over, mostly of the type of `old` (a file that
/// fails to deserialise reaches none of the model's own checks).
fn json_value(rng: &mut Rng, old: &Value) -> Value {
    const STRINGS: &[&str] = &[
        "",
        "joker-model",
        "exact",
        "random_features",
        "gaussian",
        "laplacian",
        "matern",
        "half",
        "five_halves",
        "squared_error",
        "squared_hinge",
        "hinge",
        "logistic",
        "huber",
        "f32",
        "f64",
        "classification",
        "regression",
    ];
    const FLOATS: &[f64] = &[0.0, -0.0, 0.5, -1.5, 1e308, -1e308, 1e-320, 3.5e38, 1e-30];
    const INTEGERS: &[u64] = &[
        0,
        1,
        2,
        3,
        9,
        4_294_967_295,
        4_294_967_296,
        1 << 63,
        u64::MAX,
    ];
    let kind = match old {
        _ if rng.chance(4) => rng.below(7),
        Value::Number(_) => rng.below(4),
        Value::String(_) => 4,
        Value::Array(_) => 5,
        _ => rng.below(7),
    };
    match kind {
        0 | 1 => Value::from(INTEGERS[rng.below(INTEGERS.len())]),
        2 => Value::from(-1 - rng.below(3) as i64),
        3 => Value::from(FLOATS[rng.below(FLOATS.len())]),
        4 => Value::from(STRINGS[rng.below(STRINGS.len())]),
        5 => Value::Array(
            (0..rng.below(4))
                .map(|k| Value::from(k as f64 - 1.0))
                .collect(),
        ),
        _ => [
            Value::Null,
            Value::Bool(true),
            Value::Object(Default::default()),
        ][rng.below(3)]
        .clone(),
    }
}

/// JSON pointers to the nodes of `v` (of arrays, the first two elements and the last).
fn json_nodes(v: &Value, at: String, out: &mut Vec<String>) {
    match v {
        Value::Array(a) => {
            let mut ends = vec![0, 1, a.len().saturating_sub(1)];
            ends.dedup();
            for k in ends.into_iter().filter(|&k| k < a.len()) {
                json_nodes(&a[k], format!("{at}/{k}"), out);
            }
        }
        Value::Object(o) => {
            for (key, x) in o {
                let key = key.replace('~', "~0").replace('/', "~1");
                json_nodes(x, format!("{at}/{key}"), out);
            }
        }
        _ => {}
    }
    out.push(at);
}

/// Edits of a JSON document that keep it JSON, so that the model's own checks, not the JSON
/// parser, meet them: a node replaced, removed from its array or object, or repeated in its
/// array.
fn mutate_json(rng: &mut Rng, doc: &mut Value) {
    // Mostly one edit: most edits are refused, and two refusals hide each other.
    for _ in 0..1 + usize::from(rng.chance(4)) {
        let mut nodes = Vec::new();
        json_nodes(doc, String::new(), &mut nodes);
        // Not the root: a document that is not an object is refused up front.
        nodes.pop();
        if nodes.is_empty() {
            return;
        }
        let at = &nodes[rng.below(nodes.len())];
        let Some(node) = doc.pointer_mut(at) else {
            continue;
        };
        match (rng.below(3), node) {
            (1, Value::Array(a)) if !a.is_empty() => {
                a.remove(rng.below(a.len()));
            }
            (0 | 1, Value::Object(o)) if !o.is_empty() => {
                if let Some(key) = o.keys().nth(rng.below(o.len())).cloned() {
                    o.remove(&key);
                }
            }
            (2, Value::Array(a)) if !a.is_empty() => {
                let x = a[rng.below(a.len())].clone();
                a.push(x);
            }
            (_, node) => *node = json_value(rng, node),
        }
    }
}

/// A new input from the corpus: edits of one input, often inside its compression or, for
/// JSON, of its values.
fn mutate(rng: &mut Rng, corpus: &[Vec<u8>]) -> Vec<u8> {
    // A third of the inputs are edits of model files, which are few in the corpus.
    let models: Vec<&Vec<u8>> = corpus.iter().filter(|c| c.first() == Some(&b'{')).collect();
    let base = if !models.is_empty() && rng.chance(3) {
        models[rng.below(models.len())]
    } else {
        &corpus[rng.below(corpus.len())]
    };
    let other = &corpus[rng.below(corpus.len())];
    if base.first() == Some(&b'{')
        && !rng.chance(3)
        && let Ok(mut doc) = serde_json::from_slice::<Value>(base)
    {
        mutate_json(rng, &mut doc);
        let mut out = serde_json::to_vec(&doc).unwrap_or_default();
        out.truncate(MAX_INPUT);
        return out;
    }
    let how = packing(base);
    if how != Packing::Plain && !rng.chance(3) {
        let mut plain = unpack(base, how);
        plain.truncate(MAX_INPUT);
        mutate_bytes(rng, &mut plain, other);
        let mut packed = pack(&plain, how);
        packed.truncate(MAX_INPUT);
        return packed;
    }
    let mut data = base.clone();
    mutate_bytes(rng, &mut data, other);
    data
}

/// Model files of tiny fits: a binary classifier with random features, a three-class
/// logistic model with the exact kernel, and a regressor in double precision.
fn model_seeds() -> joker::Result<Vec<Vec<u8>>> {
    let rows = |k: usize| -> Vec<f64> {
        (0..2 * k)
            .map(|i| ((i * 7 + 3) % 11) as f64 / 5.0 - 1.0)
            .collect()
    };
    let x = Features::Dense(DenseMatrix::new(9, 2, rows(9))?);
    let binary = Dataset::new(x.clone(), (0..9).map(|i| [-1.0, 1.0][i % 2]).collect())?;
    let three = Dataset::new(x.clone(), (0..9).map(|i| (i % 3) as f64).collect())?;
    let real = Dataset::new(x, (0..9).map(|i| i as f64 / 3.0).collect())?;
    let base = || Joker::builder().device(Device::Cpu).max_iter(5).seed(7);
    let models = [
        base()
            .loss(Loss::SquaredHinge)
            .n_components(4)
            .build()?
            .fit(&binary)?,
        base()
            .loss(Loss::Logistic)
            .kernel(KernelKind::Laplacian)
            .exact()
            .build()?
            .fit(&three)?,
        base()
            .task(Task::Regression)
            .precision(Precision::F64)
            .n_components(3)
            .build()?
            .fit(&real)?,
    ];
    Ok(models
        .iter()
        .map(|m| serde_json::to_vec(m).expect("a fitted model serialises"))
        .collect())
}

/// Small valid data files in every layout the readers take, plain and compressed, and
/// model files.
fn seeds() -> joker::Result<Vec<Vec<u8>>> {
    let texts: [&[u8]; 10] = [
        b"1 1:0.5 3:2\n-1 2:1\n+1 1:-1 2:3 3:4\n",
        b"# comment\n0 0:1.5 2:-3\n1 qid:2 1:2e-3 # tail\n\n2\n",
        b"-1 3:1 11:0.5\r\n+1 1:0.25\t2:-3\r\n",
        b"a,b,target\n1,2,3\n4,-5.5,6\n7,8e-3,9\n",
        b"1,2,3\n4,5,6\n",
        b"x1\tx2\ty\n1\t2\t0\n3\t4\t1\n",
        b"\"a\";\"b\";\"y\"\n1;2;3\n4;5;6\n",
        b"1 2 3\n4 5 6\n  7   8 9\n",
        b"\xEF\xBB\xBFy,x\r1,2\r3,4\r",
        b"1\n-1\n",
    ];
    let mut out: Vec<Vec<u8>> = texts.iter().map(|t| t.to_vec()).collect();
    for t in [texts[0], texts[3], texts[5]] {
        out.push(pack(t, Packing::Gzip));
        out.push(pack(t, Packing::Bzip2));
    }
    out.extend(model_seeds()?);
    Ok(out)
}

// ---------------------------------------------------------------------------------------

/// Command-line arguments.
struct Args {
    seconds: f64,
    seed: u64,
    replay: Option<PathBuf>,
    outcomes: Option<PathBuf>,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        seconds: 30.0,
        seed: 1,
        replay: None,
        outcomes: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--seconds" => {
                a.seconds = value()?
                    .parse()
                    .ok()
                    .filter(|s: &f64| *s >= 0.0 && s.is_finite())
                    .ok_or("--seconds takes a non-negative number")?;
            }
            "--seed" => a.seed = value()?.parse().map_err(|_| "--seed takes an integer")?,
            "--replay" => a.replay = Some(PathBuf::from(value()?)),
            "--outcomes" => a.outcomes = Some(PathBuf::from(value()?)),
            "-h" | "--help" => {
                return Err("usage: fuzz_readers [--seconds S (30)] [--seed N (1)] \
                            [--replay FILE] [--outcomes FILE (writes the distinct outcomes)]"
                    .into());
            }
            other => return Err(format!("unknown argument `{other}` (see --help)")),
        }
    }
    Ok(a)
}

fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(msg) => {
            eprintln!("{msg}");
            std::process::exit(2);
        }
    };
    origin();
    std::panic::set_hook(Box::new(|info| {
        let trace = std::backtrace::Backtrace::force_capture().to_string();
        *lock(&PANIC) = Some(format!("{info}\n{}", joker_frames(&trace)));
    }));
    std::thread::spawn(watchdog);
    let files = Files::new().unwrap_or_else(|e| {
        eprintln!("fuzz_readers: cannot make a scratch directory: {e}");
        std::process::exit(2);
    });

    if let Some(path) = &args.replay {
        let input = std::fs::read(path).unwrap_or_else(|e| {
            eprintln!("fuzz_readers: cannot read {}: {e}", path.display());
            std::process::exit(2);
        });
        for outcome in execute(&input, 0, &files) {
            println!("{outcome}");
        }
        return;
    }

    let mut corpus = seeds().unwrap_or_else(|e| {
        eprintln!("fuzz_readers: cannot make the seeds: {e}");
        std::process::exit(2);
    });
    let start = Instant::now();
    let budget = Duration::from_secs_f64(args.seconds);
    let mut seen: HashSet<String> = HashSet::new();
    let mut accepted = BTreeMap::<String, u64>::new();
    for target in reader_names::<f32>()
        .into_iter()
        .chain(reader_names::<f64>())
    {
        accepted.insert(target.into(), 0);
    }
    accepted.insert("Model::load".into(), 0);
    accepted.insert("Model::from_json".into(), 0);
    let mut rng = Rng(args.seed);
    let mut n: u64 = 0;
    // Whether an input had an outcome not seen before, counting what the readers accept.
    let mut run = |input: &[u8], n: u64| {
        let mut novel = false;
        for outcome in execute(input, n, &files) {
            if let Some((target, _)) = outcome.split_once(": ok") {
                *accepted.entry(target.to_string()).or_default() += 1;
            }
            novel |= seen.insert(outcome);
        }
        novel
    };
    for input in &corpus {
        n += 1;
        run(input, n);
    }
    while start.elapsed() < budget {
        let input = mutate(&mut rng, &corpus);
        n += 1;
        if run(&input, n) && corpus.len() < MAX_CORPUS {
            corpus.push(input);
        }
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "fuzz_readers: {n} executions in {secs:.1} s ({:.0} per second), {} distinct \
         outcomes, corpus of {} inputs, peak heap {:.1} MiB; no findings",
        n as f64 / secs.max(1e-9),
        seen.len(),
        corpus.len(),
        PEAK.load(Relaxed) as f64 / (1 << 20) as f64
    );
    if let Some(path) = &args.outcomes {
        let mut list: Vec<&String> = seen.iter().collect();
        list.sort();
        let text: String = list.iter().map(|o| format!("{o}\n")).collect();
        if let Err(e) = std::fs::write(path, text) {
            eprintln!("fuzz_readers: cannot write {}: {e}", path.display());
        }
    }
    println!("per call: inputs accepted (for the readers), most heap taken by one call");
    for (target, most) in lock(&CALL_HEAP).iter() {
        let count = accepted.get(*target).map_or("".into(), |c| c.to_string());
        println!(
            "  {count:>8}  {:>6.1} MiB  {target}",
            *most as f64 / (1 << 20) as f64
        );
    }
}

/// Two models are the same when they serialise to the same JSON: `PartialEq` alone calls two
/// identical models different when a training statistic is NaN (a doubly stochastic fit has
/// no duality gap, written as `null` and read as NaN).
fn same_model(a: &Model, b: &Model) -> bool {
    match (serde_json::to_value(a), serde_json::to_value(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => a == b,
    }
}

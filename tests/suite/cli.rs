//! End-to-end tests of the `joker` program: train, predict, info and demo, and the way
//! every failure is reported (`error: ...` on stderr, exit status 1; usage errors exit 2).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A fresh directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("joker-cli-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.0.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `joker` with `args` in `dir`.
fn joker(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_joker"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("the joker binary runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Asserts success, showing the output otherwise.
fn ok(o: Output) -> Output {
    assert!(
        o.status.success(),
        "joker failed ({:?})\nstdout:\n{}\nstderr:\n{}",
        o.status,
        stdout(&o),
        stderr(&o)
    );
    o
}

/// Asserts a clean failure: exit status 1, one `error: ` message that contains `needle`,
/// no panic.
fn fails_with(o: Output, needle: &str) -> String {
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "stderr:\n{err}");
    assert!(err.contains("error: "), "no `error:` in:\n{err}");
    assert!(err.contains(needle), "`{needle}` not in:\n{err}");
    assert!(!err.contains("panicked"), "a panic:\n{err}");
    assert!(!err.contains("internal error"), "a bug:\n{err}");
    err
}

/// A tiny pseudo-random generator, so the test data needs no dependency.
struct Lcg(u64);

impl Lcg {
    fn uniform(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// A separable binary problem in LIBSVM format: the label is the side of the circle
/// `x0^2 + x1^2 = 1` (points within 0.15 of it are left out), with 1-based indices.
/// `drop_last` leaves the last feature out of every line (a narrower test file).
fn circle_libsvm(n: usize, seed: u64, drop_last: bool) -> String {
    let mut r = Lcg(seed);
    let mut s = String::new();
    let mut k = 0;
    while k < n {
        let (a, b) = (3.0 * r.uniform() - 1.5, 3.0 * r.uniform() - 1.5);
        let rad = (a * a + b * b).sqrt();
        if (rad - 1.0).abs() < 0.15 {
            continue;
        }
        let y = if rad > 1.0 { "+1" } else { "-1" };
        let noise = r.uniform() - 0.5;
        if drop_last {
            s.push_str(&format!("{y} 1:{a:.5} 2:{b:.5}\n"));
        } else {
            s.push_str(&format!("{y} 1:{a:.5} 2:{b:.5} 3:{noise:.5}\n"));
        }
        k += 1;
    }
    s
}

/// The percentage in `Accuracy = 97.5% (...)`.
fn accuracy_of(stderr: &str) -> f64 {
    let line = stderr
        .lines()
        .find(|l| l.starts_with("Accuracy = "))
        .unwrap_or_else(|| panic!("no accuracy in:\n{stderr}"));
    line["Accuracy = ".len()..]
        .split('%')
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn train_and_predict_a_libsvm_classifier() {
    let t = TempDir::new("libsvm");
    t.write("train.svm", &circle_libsvm(300, 1, false));
    // The test file never mentions feature 3: it must be widened to the model's width.
    t.write("test.svm", &circle_libsvm(100, 2, true));
    let train = ok(joker(
        &t.0,
        &[
            "train",
            "-l",
            "svc",
            "-c",
            "10",
            "-m",
            "512",
            "-b",
            "64",
            "--max-iter",
            "400",
            "-v",
            "test.svm",
            "train.svm",
        ],
    ));
    let out = stdout(&train);
    assert!(out.contains("train       accuracy"), "{out}");
    assert!(out.contains("validation  accuracy"), "{out}");
    // Non-terminal stderr: one line per check.
    assert!(
        stderr(&train).lines().any(|l| l.starts_with("iter ")),
        "{}",
        stderr(&train)
    );
    // The default model file: <train file name>.joker.json in the current directory.
    assert!(t.path("train.svm.joker.json").exists());

    let pred = ok(joker(
        &t.0,
        &["predict", "test.svm", "train.svm.joker.json", "pred.txt"],
    ));
    let acc = accuracy_of(&stderr(&pred));
    assert!(acc >= 95.0, "accuracy {acc}");
    let lines: Vec<String> = std::fs::read_to_string(t.path("pred.txt"))
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    assert_eq!(lines.len(), 100);
    assert!(
        lines.iter().all(|l| l == "1" || l == "-1"),
        "labels are printed like the input's: {:?}",
        &lines[..5]
    );

    // Decision values on stdout, agreeing in sign with the labels.
    let dec = ok(joker(
        &t.0,
        &[
            "predict",
            "--decision",
            "-q",
            "test.svm",
            "train.svm.joker.json",
        ],
    ));
    assert!(stderr(&dec).is_empty(), "--quiet: {}", stderr(&dec));
    let values: Vec<f64> = stdout(&dec).lines().map(|l| l.parse().unwrap()).collect();
    assert_eq!(values.len(), 100);
    for (v, l) in values.iter().zip(&lines) {
        assert_eq!(*v >= 0.0, l == "1", "decision {v}, label {l}");
    }

    // info
    let info = ok(joker(&t.0, &["info", "train.svm.joker.json"]));
    let s = stdout(&info);
    for needle in [
        "l2-svc",
        "gaussian",
        "gamma",
        "512 random Fourier features",
        "2 classes: -1 1",
        "300 samples",
        "lambda 0.1 (C 10)",
    ] {
        assert!(s.contains(needle), "`{needle}` not in:\n{s}");
    }

    // Probabilities need a KLR model.
    let err = fails_with(
        joker(
            &t.0,
            &["predict", "--proba", "test.svm", "train.svm.joker.json"],
        ),
        "--proba",
    );
    assert!(err.contains("klr"), "{err}");
}

#[test]
fn klr_probabilities_and_an_exact_model() {
    let t = TempDir::new("klr");
    t.write("train.svm", &circle_libsvm(200, 3, false));
    ok(joker(
        &t.0,
        &[
            "train",
            "-q",
            "-l",
            "logistic",
            "--exact",
            "-b",
            "50",
            "--nystrom-rank",
            "10",
            "--max-iter",
            "200",
            "--precision",
            "f64",
            "train.svm",
            "klr.json",
        ],
    ));
    let info = stdout(&ok(joker(&t.0, &["info", "klr.json"])));
    assert!(info.contains("exact kernel"), "{info}");
    assert!(info.contains("f64"), "{info}");
    let out = ok(joker(
        &t.0,
        &["predict", "--proba", "train.svm", "klr.json", "-"],
    ));
    let rows: Vec<Vec<f64>> = stdout(&out)
        .lines()
        .map(|l| l.split(' ').map(|v| v.parse().unwrap()).collect())
        .collect();
    assert_eq!(rows.len(), 200);
    for r in &rows {
        assert_eq!(r.len(), 2);
        assert!((r[0] + r[1] - 1.0).abs() < 1e-9 && r.iter().all(|p| (0.0..=1.0).contains(p)));
    }
    assert!(accuracy_of(&stderr(&out)) > 90.0);
}

#[test]
fn svm_probabilities_by_platt_scaling() {
    let t = TempDir::new("platt");
    t.write("train.svm", &circle_libsvm(300, 5, false));
    t.write("test.svm", &circle_libsvm(200, 6, false));
    let train = ok(joker(&t.0, &["train", "--proba", "train.svm", "svc.json"]));
    assert!(
        stderr(&train).contains("probabilities: Platt"),
        "{}",
        stderr(&train)
    );
    let model = std::fs::read_to_string(t.path("svc.json")).unwrap();
    assert!(model.contains("\"calibration\"") && model.contains("\"version\":5"));
    let out = ok(joker(
        &t.0,
        &["predict", "--proba", "-q", "test.svm", "svc.json", "-"],
    ));
    let rows: Vec<Vec<f64>> = stdout(&out)
        .lines()
        .map(|l| l.split(' ').map(|v| v.parse().unwrap()).collect())
        .collect();
    let dec = ok(joker(
        &t.0,
        &["predict", "--decision", "-q", "test.svm", "svc.json", "-"],
    ));
    let f: Vec<f64> = stdout(&dec).lines().map(|l| l.parse().unwrap()).collect();
    assert_eq!((rows.len(), f.len()), (200, 200));
    for r in &rows {
        assert!((r[0] + r[1] - 1.0).abs() < 1e-12 && r.iter().all(|p| (0.0..=1.0).contains(p)));
    }
    // P(positive) increases with the decision value, and is above 1/2 on most rows the
    // decision puts on the positive side
    let mut by_f: Vec<(f64, f64)> = f.iter().zip(&rows).map(|(&v, r)| (v, r[1])).collect();
    by_f.sort_by(|a, b| a.0.total_cmp(&b.0));
    assert!(by_f.windows(2).all(|w| w[0].1 <= w[1].1), "not monotone");
    let agree = by_f
        .iter()
        .filter(|(v, p)| (*v >= 0.0) == (*p >= 0.5))
        .count();
    assert!(agree >= 180, "{agree} of 200 agree");
    // a regression cannot have class probabilities
    t.write("reg.svm", "1.5 1:0.2\n0.3 1:0.4\n2.0 1:0.9\n0.1 1:0.1\n");
    fails_with(
        joker(
            &t.0,
            &[
                "train",
                "--proba",
                "--task",
                "regression",
                "reg.svm",
                "r.json",
            ],
        ),
        "probabilit",
    );
}

#[test]
fn csv_regression() {
    let t = TempDir::new("csv");
    let mut r = Lcg(7);
    let mut csv = String::from("target,a,b\n");
    for _ in 0..300 {
        let (a, b) = (2.0 * r.uniform() - 1.0, 2.0 * r.uniform() - 1.0);
        csv.push_str(&format!("{},{a},{b}\n", (2.0 * a).sin() + 0.5 * b));
    }
    t.write("data.csv", &csv);
    let train = ok(joker(
        &t.0,
        &[
            "train",
            "--label-column",
            "first",
            "--lambda",
            "0.01",
            "-m",
            "512",
            "-b",
            "64",
            "--max-iter",
            "500",
            "-q",
            "data.csv",
            "reg.json",
        ],
    ));
    assert!(
        stdout(&train).contains("train       RMSE"),
        "{}",
        stdout(&train)
    );
    let pred = ok(joker(
        &t.0,
        &[
            "predict",
            "--label-column",
            "first",
            "data.csv",
            "reg.json",
            "out.txt",
        ],
    ));
    let err = stderr(&pred);
    let rmse: f64 = err
        .lines()
        .find_map(|l| l.strip_prefix("RMSE = "))
        .and_then(|l| l.split(' ').next())
        .unwrap_or_else(|| panic!("no RMSE in:\n{err}"))
        .parse()
        .unwrap();
    assert!(rmse < 0.1, "RMSE {rmse} (targets have sd ~0.8)");
    let values: Vec<f64> = std::fs::read_to_string(t.path("out.txt"))
        .unwrap()
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    assert_eq!(values.len(), 300);
    // Full precision: values are not rounded to a few digits.
    assert!(values.iter().any(|v| {
        format!("{v}")
            .split('.')
            .nth(1)
            .is_some_and(|f| f.len() > 8)
    }));

    // A CSV file with another number of features is refused (dense data is never widened).
    t.write("wide.csv", "1,2,3,4\n5,6,7,8\n");
    fails_with(
        joker(&t.0, &["predict", "wide.csv", "reg.json"]),
        "the model expects 2",
    );
}

#[test]
fn full_krr_from_the_command_line() {
    let t = TempDir::new("fullkrr");
    let mut r = Lcg(8);
    let mut csv = String::new();
    for _ in 0..300 {
        let (a, b) = (2.0 * r.uniform() - 1.0, 2.0 * r.uniform() - 1.0);
        csv.push_str(&format!("{},{a},{b}\n", (2.0 * a).sin() + 0.5 * b));
    }
    t.write("data.csv", &csv);
    let common = [
        "train",
        "--label-column",
        "first",
        "--exact",
        "--loss",
        "krr",
        "--lambda",
        "0.01",
        "--precision",
        "f64",
    ];
    let run = |extra: &[&str]| {
        let mut args = common.to_vec();
        args.extend_from_slice(extra);
        joker(&t.0, &args)
    };
    let out = ok(run(&[
        "--full-krr",
        "pcg",
        "--krr-rank",
        "60",
        "--krr-tol",
        "1e-8",
        "--check-every",
        "5",
        "data.csv",
        "pcg.json",
    ]));
    let (o, e) = (stdout(&out), stderr(&out));
    assert!(o.contains("stopped: converged, relative residual"), "{o}");
    assert!(
        e.contains("NystromPcg, rank 60") && e.contains(" residual "),
        "{e}"
    );
    let rmse = |model: &str| {
        let err = stderr(&ok(joker(
            &t.0,
            &["predict", "--label-column", "first", "data.csv", model],
        )));
        err.lines()
            .find_map(|l| l.strip_prefix("RMSE = "))
            .and_then(|l| l.split(' ').next())
            .unwrap_or_else(|| panic!("no RMSE in:\n{err}"))
            .parse::<f64>()
            .unwrap()
    };
    assert!(rmse("pcg.json") < 0.05);
    // ASkotch with stored preconditioners, stopped by the iteration budget
    let out = ok(run(&[
        "--full-krr",
        "askotch",
        "--krr-blocks",
        "4",
        "--krr-rank",
        "30",
        "--krr-store-preconditioners",
        "--max-iter",
        "400",
        "-q",
        "data.csv",
        "askotch.json",
    ]));
    assert!(
        stdout(&out).contains("iterations  400 (stopped: max_iter"),
        "{}",
        stdout(&out)
    );
    assert!(rmse("askotch.json") < 0.1);

    fails_with(
        joker(&t.0, &["train", "--full-krr", "pcg", "data.csv"]),
        "add --exact and --loss krr",
    );
    // a full-KRR setting without --full-krr is a usage error (clap's exit status 2)
    let usage = joker(&t.0, &["train", "--krr-rank", "5", "data.csv"]);
    assert_eq!(usage.status.code(), Some(2));
    assert!(
        stderr(&usage).contains("--full-krr <METHOD>"),
        "{}",
        stderr(&usage)
    );
    fails_with(
        run(&["--full-krr", "skotch", "--krr-blocks", "0", "data.csv"]),
        "blocks",
    );
}

#[test]
fn demo_runs_and_reports_accuracy() {
    let t = TempDir::new("demo");
    let o = ok(joker(&t.0, &["demo", "--n", "2000", "--max-iter", "300"]));
    let out = stdout(&o);
    let acc: f64 = out
        .lines()
        .find_map(|l| l.strip_prefix("test        accuracy "))
        .and_then(|l| l.split('%').next())
        .unwrap_or_else(|| panic!("no test accuracy in:\n{out}"))
        .parse()
        .unwrap();
    assert!(acc > 90.0, "demo accuracy {acc}\n{out}");
    assert!(out.contains("baseline"), "{out}");
}

#[test]
fn errors_are_reported_cleanly() {
    let t = TempDir::new("errors");
    t.write("good.svm", &circle_libsvm(50, 4, false));

    let missing = t.path("missing.svm");
    let err = fails_with(
        joker(&t.0, &["train", missing.to_str().unwrap()]),
        "missing.svm",
    );
    assert!(err.starts_with("error: "), "{err}");
    fails_with(
        joker(&t.0, &["predict", "good.svm", "missing.json"]),
        "missing.json",
    );

    t.write("bad.svm", "1 1:0.5 2:1\n-1 1:0.25 2:oops\n");
    fails_with(joker(&t.0, &["train", "bad.svm"]), "bad.svm:2");

    fails_with(
        joker(
            &t.0,
            &["train", "-b", "32", "--nystrom-rank", "32", "good.svm"],
        ),
        "invalid --nystrom-rank: must be below the block size",
    );
    fails_with(
        joker(&t.0, &["train", "--lambda", "0", "good.svm"]),
        "lambda",
    );
    fails_with(joker(&t.0, &["train", "-c", "-1", "good.svm"]), "`C`");
    fails_with(
        joker(
            &t.0,
            &["train", "--loss", "krr", "--delta", "2", "good.svm"],
        ),
        "huber",
    );
    // a block larger than the data is capped at the number of samples
    let o = ok(joker(
        &t.0,
        &["train", "-b", "1000", "-m", "64", "good.svm"],
    ));
    assert!(stderr(&o).contains("block 50,"), "{}", stderr(&o));
    fails_with(
        joker(&t.0, &["train", "-b", "0", "good.svm"]),
        "invalid -b/--block-size",
    );
    fails_with(
        joker(&t.0, &["train", "good.svm", "no/such/dir/model.json"]),
        "no/such/dir/model.json",
    );

    // A model file from a newer format version.
    ok(joker(
        &t.0,
        &[
            "train",
            "-q",
            "-m",
            "16",
            "--max-iter",
            "5",
            "good.svm",
            "m.json",
        ],
    ));
    let text = std::fs::read_to_string(t.path("m.json")).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["version"] = 99.into();
    t.write("v99.json", &v.to_string());
    fails_with(joker(&t.0, &["info", "v99.json"]), "newer");
    fails_with(
        joker(&t.0, &["predict", "good.svm", "v99.json"]),
        "version 99",
    );
    t.write("junk.json", "{ not json");
    fails_with(joker(&t.0, &["info", "junk.json"]), "junk.json");

    // A regression target given to a classifier.
    let mut reg = String::new();
    for i in 0..60 {
        reg.push_str(&format!("{} 1:{}\n", i as f64 * 0.37, i));
    }
    t.write("reg.svm", &reg);
    fails_with(
        joker(&t.0, &["train", "-l", "svc", "reg.svm"]),
        "regression",
    );

    // Usage errors are clap's (exit status 2).
    let o = joker(&t.0, &["train", "--no-such-flag", "good.svm"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("Usage"), "{}", stderr(&o));
    let o = joker(&t.0, &["train", "-c", "1", "--lambda", "1", "good.svm"]);
    assert_eq!(o.status.code(), Some(2), "C and lambda conflict");
    let o = joker(&t.0, &["train", "-l", "nope", "good.svm"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn version_and_help() {
    let dir = std::env::temp_dir();
    let v = stdout(&ok(joker(&dir, &["--version"])));
    assert!(v.starts_with("joker "), "{v}");
    let h = stdout(&ok(joker(&dir, &["train", "--help"])));
    for needle in [
        "--loss",
        "--n-components",
        "--exact",
        "--validation",
        "Examples:",
    ] {
        assert!(h.contains(needle), "`{needle}` not in train --help");
    }
    let h = stdout(&ok(joker(&dir, &["predict", "--help"])));
    assert!(h.contains("--proba") && h.contains("--decision"));
}

/// `--device`: cpu and auto train (the device and the reason are printed), an unusable GPU is
/// a clean error, a malformed value is rejected by the argument parser.
#[test]
fn device_option() {
    let t = TempDir::new("device");
    t.write("good.svm", &circle_libsvm(200, 6, false));
    let o = ok(joker(
        &t.0,
        &["train", "--device", "cpu", "-m", "64", "good.svm"],
    ));
    assert!(
        stderr(&o).contains("device: cpu (requested)"),
        "{}",
        stderr(&o)
    );
    let o = ok(joker(&t.0, &["train", "-m", "64", "good.svm"]));
    let gpu = joker::device::probe().available();
    if !gpu {
        assert!(
            stderr(&o).contains("device: cpu (auto: no usable GPU"),
            "{}",
            stderr(&o)
        );
        fails_with(
            joker(&t.0, &["train", "--device", "cuda:0", "good.svm"]),
            "cuda:0 was requested",
        );
    }
    // An exact model uses a GPU only when one is asked for by name.
    let o = ok(joker(&t.0, &["train", "--exact", "good.svm"]));
    assert!(
        stderr(&o)
            .contains("device: cpu (auto: exact kernels use the GPU only when it is asked for"),
        "{}",
        stderr(&o)
    );
    if !gpu {
        fails_with(
            joker(&t.0, &["train", "--device", "cuda", "--exact", "good.svm"]),
            "cuda:0 was requested but no GPU can be used",
        );
    }
    let o = joker(&t.0, &["train", "--device", "tpu", "good.svm"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("not a device"), "{}", stderr(&o));
}

/// Runs `joker` through `sh -c` with `limits` (ulimit commands) applied first.
fn joker_limited(dir: &Path, limits: &str, args: &[&str]) -> Output {
    let script = format!("{limits}; exec \"$0\" \"$@\"");
    Command::new("sh")
        .arg("-c")
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_joker"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("sh runs")
}

/// The names in `dir` that look like temporary files of an atomic write.
fn temporaries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect()
}

#[test]
fn nothing_is_lost_or_overwritten() {
    let t = TempDir::new("guards");
    let train = circle_libsvm(400, 3, false);
    t.write("tr.svm", &train);
    t.write("te.svm", &train);
    ok(joker(
        &t.0,
        &["train", "-q", "-m", "256", "tr.svm", "m.json"],
    ));
    let model = std::fs::read(t.path("m.json")).unwrap();

    // a failed save (the file-size limit stands in for a full disk) keeps the old model
    let err = fails_with(
        joker_limited(
            &t.0,
            "trap '' XFSZ; ulimit -f 4",
            &[
                "train", "-q", "-m", "512", "--seed", "5", "tr.svm", "m.json",
            ],
        ),
        "m.json",
    );
    assert!(err.contains("File too large"), "{err}");
    assert_eq!(std::fs::read(t.path("m.json")).unwrap(), model);
    assert!(temporaries(&t.0).is_empty(), "{:?}", temporaries(&t.0));

    // `joker train TRAIN TEST` does not replace the test set, nor TRAIN its own input
    fails_with(
        joker(&t.0, &["train", "-q", "tr.svm", "te.svm"]),
        "te.svm exists and is not a joker model",
    );
    assert_eq!(std::fs::read_to_string(t.path("te.svm")).unwrap(), train);
    fails_with(
        joker(&t.0, &["train", "-q", "tr.svm", "tr.svm"]),
        "is the training file",
    );
    fails_with(
        joker(&t.0, &["train", "-q", "-v", "te.svm", "tr.svm", "te.svm"]),
        "is the validation file",
    );
    assert_eq!(std::fs::read_to_string(t.path("tr.svm")).unwrap(), train);
    // ... unless asked to
    ok(joker(
        &t.0,
        &["train", "-q", "-m", "64", "--force", "tr.svm", "te.svm"],
    ));
    assert!(joker::Model::load(t.path("te.svm")).is_ok());
    t.write("te.svm", &train);

    // predictions never overwrite the model or the data
    fails_with(
        joker(&t.0, &["predict", "-q", "te.svm", "m.json", "m.json"]),
        "is the model file",
    );
    fails_with(
        joker(&t.0, &["predict", "-q", "te.svm", "m.json", "te.svm"]),
        "is the data file",
    );
    assert_eq!(std::fs::read(t.path("m.json")).unwrap(), model);
    assert_eq!(std::fs::read_to_string(t.path("te.svm")).unwrap(), train);
    ok(joker(&t.0, &["predict", "-q", "te.svm", "m.json", "p.txt"]));
    assert_eq!(
        std::fs::read_to_string(t.path("p.txt"))
            .unwrap()
            .lines()
            .count(),
        400
    );
    assert!(temporaries(&t.0).is_empty());
}

#[test]
fn memory_limits_are_errors_not_aborts() {
    let t = TempDir::new("memory");
    t.write("tr.svm", &circle_libsvm(300, 4, false));
    // ten million random features: refused by the default limit before any allocation
    let err = fails_with(
        joker(&t.0, &["train", "-q", "-m", "10000000", "tr.svm", "m.json"]),
        "memory: the fit",
    );
    assert!(err.contains("--max-memory"), "{err}");
    assert!(!t.path("m.json").exists());
    // a LIBSVM index of 100,000,000: 1e8-wide random-feature frequencies are never formed
    t.write("wide.svm", "1 1:0.5 100000000:1\n-1 2:1\n1 1:1\n-1 3:2\n");
    fails_with(
        joker(&t.0, &["train", "-q", "-m", "2048", "wide.svm", "w.json"]),
        "memory: the fit",
    );
    // the same under an address-space limit: the automatic limit follows it (no abort)
    let o = joker_limited(
        &t.0,
        "ulimit -v 3000000",
        &["train", "-q", "-m", "200000", "tr.svm", "m.json"],
    );
    fails_with(o, "memory: the fit");
    // no limit at all and a refused allocation: an error, not an abort
    let o = joker_limited(
        &t.0,
        "ulimit -v 600000",
        &[
            "train",
            "-q",
            "--max-memory",
            "0",
            "-m",
            "100000000",
            "tr.svm",
            "m.json",
        ],
    );
    fails_with(o, "cannot allocate");
    // a conversion whose one dense row (6 GB) exceeds the address space: refused before
    // anything is written, with its estimate; as CSR it holds no dense row and converts
    t.write("one-wide.svm", "1 1:0.5 1500000000:1\n-1 2:1\n");
    let o = joker_limited(
        &t.0,
        "ulimit -v 3000000",
        &["convert", "one-wide.svm", "ow.npy"],
    );
    let err = fails_with(o, "in memory");
    assert!(
        err.contains("nothing was written") && err.contains("--csr"),
        "{err}"
    );
    assert!(!t.path("ow.npy").exists());
    let o = joker_limited(
        &t.0,
        "ulimit -v 3000000",
        &["convert", "--csr", "one-wide.svm", "owc"],
    );
    ok(o);
    // ... and where the frequencies fit but the block's features do not
    let o = joker_limited(
        &t.0,
        "ulimit -v 1000000",
        &[
            "train",
            "-q",
            "--max-memory",
            "0",
            "-m",
            "20000000",
            "tr.svm",
            "m.json",
        ],
    );
    fails_with(o, "for the block's random features");
    // an explicit limit, and none
    fails_with(
        joker(
            &t.0,
            &["train", "-q", "--max-memory", "1M", "tr.svm", "m.json"],
        ),
        "over the limit of 1 MB",
    );
    ok(joker(
        &t.0,
        &[
            "train",
            "-q",
            "--max-memory",
            "0",
            "-m",
            "64",
            "tr.svm",
            "m.json",
        ],
    ));
    let o = joker(&t.0, &["train", "--max-memory", "12X", "tr.svm"]);
    assert_eq!(o.status.code(), Some(2), "a usage error");
    assert!(stderr(&o).contains("unknown unit"), "{}", stderr(&o));
}

/// Runs `joker` with `input` piped to its standard input.
fn joker_piped(dir: &Path, args: &[&str], input: &[u8]) -> Output {
    use std::io::Write as _;
    let mut child = Command::new(env!("CARGO_BIN_EXE_joker"))
        .args(args)
        .current_dir(dir)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the joker binary runs");
    let mut stdin = child.stdin.take().unwrap();
    // a write error means joker stopped reading (an error it reports itself)
    let _ = stdin.write_all(input);
    drop(stdin);
    child.wait_with_output().unwrap()
}

#[test]
fn standard_input_as_a_data_file() {
    let t = TempDir::new("stdin");
    let train = circle_libsvm(300, 8, false);
    let o = ok(joker_piped(
        &t.0,
        &["train", "-q", "-l", "l2-svc", "-m", "128", "-", "m.json"],
        train.as_bytes(),
    ));
    assert!(stdout(&o).contains("saved to m.json"), "{}", stdout(&o));
    let o = ok(joker_piped(
        &t.0,
        &["predict", "-", "m.json", "p.txt"],
        train.as_bytes(),
    ));
    assert!(stderr(&o).contains("Accuracy"), "{}", stderr(&o));
    // no model name to derive from `-`, and stdin cannot be read twice
    fails_with(
        joker_piped(&t.0, &["train", "-"], train.as_bytes()),
        "give MODEL_FILE",
    );
    fails_with(
        joker_piped(
            &t.0,
            &["train", "-v", "-", "-", "m2.json"],
            train.as_bytes(),
        ),
        "not both",
    );
    fails_with(
        joker_piped(&t.0, &["train", "-", "m2.json"], b""),
        "standard input",
    );
}

#[test]
fn messages_name_flags_and_causes() {
    let t = TempDir::new("messages");
    t.write("tr.svm", &circle_libsvm(50, 5, false));
    let err = fails_with(
        joker(&t.0, &["train", "--time-limit", "1e300", "tr.svm"]),
        "--time-limit must be a positive number of seconds up to 1e12, got 1e300",
    );
    assert!(err.len() < 200, "{err}");
    // one row: no distances for the bandwidth heuristic, said so (not a label problem)
    t.write("one.svm", "1 1:0.5 2:1\n");
    let err = fails_with(
        joker(&t.0, &["train", "--task", "regression", "one.svm"]),
        "invalid --gamma",
    );
    assert!(err.contains("1 row"), "{err}");
    // a tab-separated file with the label first: the hint names --label-column first
    let mut tsv = String::new();
    let mut rng = Lcg(9);
    for i in 0..60 {
        let y = if i % 2 == 0 { 1 } else { 0 };
        tsv.push_str(&format!(
            "{y}\t{:.4}\t{:.4}\t{:.4}\n",
            rng.uniform(),
            rng.uniform(),
            rng.uniform()
        ));
    }
    t.write("lf.tsv", &tsv);
    fails_with(
        joker(&t.0, &["train", "-l", "l2-svc", "lf.tsv"]),
        "--label-column first",
    );
    ok(joker(
        &t.0,
        &[
            "train",
            "-q",
            "-l",
            "l2-svc",
            "-m",
            "64",
            "--label-column",
            "first",
            "lf.tsv",
        ],
    ));
}

/// Labels that are all equal are a regression whose `R^2` has no value: training and
/// prediction say so instead of printing `NaN`.
#[test]
fn constant_targets_have_no_r_squared() {
    let t = TempDir::new("constant");
    let mut rows = String::new();
    for i in 0..20 {
        rows += &format!("1 1:{} 2:{}\n", i % 5, (i * 3) % 7);
    }
    t.write("same.svm", &rows);
    // one value left to infer the task from is refused, naming the flag that fits it anyway
    fails_with(
        joker(&t.0, &["train", "same.svm", "m.json"]),
        "every label is 1: one class is nothing to classify",
    );
    let o = ok(joker(
        &t.0,
        &["train", "--task", "regression", "same.svm", "m.json"],
    ));
    let all = stdout(&o) + &stderr(&o);
    assert!(
        all.contains("R^2 undefined (constant targets)") && !all.contains("NaN"),
        "{all}"
    );
    let o = ok(joker(&t.0, &["predict", "same.svm", "m.json", "out.txt"]));
    let e = stderr(&o);
    assert!(
        e.contains("R^2 = undefined (constant targets)") && !e.contains("NaN"),
        "{e}"
    );
}

/// Without `--loss`, integer labels with 2-32 values fit a classifier and other labels a
/// regression, and the CLI says which and why; `--task` and a loss parameter decide instead.
#[test]
fn the_task_is_inferred_from_the_labels() {
    let t = TempDir::new("infer");
    t.write("classes.svm", &circle_libsvm(60, 5, false));
    let mut real = String::new();
    for i in 0..60 {
        real += &format!("{} 1:{} 2:{}\n", 0.37 * i as f64 - 3.1, i % 7, (i * 3) % 11);
    }
    t.write("real.svm", &real);
    let e = stderr(&ok(joker(
        &t.0,
        &["train", "classes.svm", "c.json", "--max-iter", "20"],
    )));
    assert!(
        e.contains("task: classification (l2-svc), inferred from the labels: 2 integer values"),
        "{e}"
    );
    assert!(e.contains("fit: l2-svc"), "{e}");
    let e = stderr(&ok(joker(
        &t.0,
        &["train", "real.svm", "r.json", "--max-iter", "20"],
    )));
    assert!(
        e.contains(
            "task: regression, inferred from the labels: 60 distinct values, not all integers"
        ),
        "{e}"
    );
    // the regression's loss follows the representation: SVR on the exact kernel
    assert!(
        e.contains("fit: svr (epsilon 0.1) on the exact kernel, else krr")
            && e.contains("loss: svr (auto: the exact kernel"),
        "{e}"
    );
    let info = stdout(&ok(joker(&t.0, &["info", "r.json"])));
    assert!(
        info.contains("loss chosen     svr (auto: the exact kernel") && info.contains("intercept"),
        "{info}"
    );
    // a feature map asked for: KRR, solved directly
    let e = stderr(&ok(joker(
        &t.0,
        &[
            "train",
            "real.svm",
            "rm.json",
            "--task",
            "regression",
            "-m",
            "32",
        ],
    )));
    assert!(e.contains("loss: krr (auto: a feature map"), "{e}");
    // a loss named: that loss, no choice
    let e = stderr(&ok(joker(
        &t.0,
        &[
            "train",
            "real.svm",
            "rk.json",
            "-l",
            "krr",
            "--max-iter",
            "20",
        ],
    )));
    assert!(e.contains("fit: krr,") && !e.contains("loss: "), "{e}");
    let args = [
        "train",
        "classes.svm",
        "t.json",
        "--max-iter",
        "20",
        "--task",
        "regression",
    ];
    let e = stderr(&ok(joker(&t.0, &args)));
    assert!(
        !e.contains("inferred") && e.contains("loss: svr (auto: the exact kernel"),
        "{e}"
    );
    let args = [
        "train",
        "classes.svm",
        "h.json",
        "--max-iter",
        "20",
        "--delta",
        "0.5",
    ];
    let e = stderr(&ok(joker(&t.0, &args)));
    assert!(!e.contains("inferred") && e.contains("fit: huber"), "{e}");
}

#[test]
fn doubly_stochastic_solvers_from_the_command_line() {
    let t = TempDir::new("dsg");
    t.write("train.svm", &circle_libsvm(1500, 21, false));
    t.write("test.svm", &circle_libsvm(500, 22, false));
    for solver in ["dsg", "udsg", "cdsg"] {
        let model = format!("{solver}.json");
        let out = ok(joker(
            &t.0,
            &[
                "train",
                "-l",
                "klr",
                "-m",
                "256",
                "--solver",
                solver,
                "--max-iter",
                "300",
                "--batch-size",
                "100",
                "--feature-block",
                "32",
                "train.svm",
                &model,
            ],
        ));
        let (o, e) = (stdout(&out), stderr(&out));
        assert!(o.contains(&format!("solver      {solver}")), "{o}");
        assert!(e.contains("batch 100, feature block 32"), "{e}");
        let pred = ok(joker(&t.0, &["predict", "test.svm", &model]));
        let acc = accuracy_of(&stderr(&pred));
        assert!(acc > 90.0, "{solver}: {acc}%");
        let info = stdout(&ok(joker(&t.0, &["info", &model])));
        assert!(info.contains(&format!("300 {solver} steps")), "{info}");
    }
    // the solver's settings without the solver, and a zero batch, are clean errors
    fails_with(
        joker(
            &t.0,
            &["train", "--batch-size", "10", "train.svm", "x.json"],
        ),
        "--solver dsg",
    );
    fails_with(
        joker(
            &t.0,
            &[
                "train",
                "--solver",
                "dsg",
                "--batch-size",
                "0",
                "train.svm",
                "x.json",
            ],
        ),
        "batch_size",
    );
}

/// `--grow` fits the sizes in turn, reports each, keeps a model of one of them, and refuses
/// bad schedules and the exact kernel.
#[test]
fn growing_the_features_from_the_command_line() {
    let t = TempDir::new("grow");
    t.write("train.svm", &circle_libsvm(300, 7, false));
    t.write("val.svm", &circle_libsvm(200, 8, false));
    let e = stderr(&ok(joker(
        &t.0,
        &[
            "train",
            "train.svm",
            "m.json",
            "-v",
            "val.svm",
            "--grow",
            "16,64,256",
            "--max-iter",
            "400",
        ],
    )));
    assert!(e.contains("grown through M = 16, 64, 256"), "{e}");
    assert!(e.contains("grow: M = 16: "), "{e}");
    assert!(e.contains("validation accuracy"), "{e}");
    let kept = e
        .lines()
        .find_map(|l| l.strip_prefix("grow: kept the model with M = "))
        .expect("the kept size");
    assert!(["16", "64", "256"].contains(&kept), "{e}");
    let model = joker::Model::load(t.0.join("m.json")).unwrap();
    assert_eq!(model.n_components().unwrap().to_string(), kept);
    fails_with(
        joker(&t.0, &["train", "train.svm", "b.json", "--grow", "64,16"]),
        "increasing",
    );
    let o = joker(
        &t.0,
        &["train", "train.svm", "c.json", "--grow", "16,64", "--exact"],
    );
    assert_eq!(o.status.code(), Some(2), "usage errors exit with 2");
    assert!(stderr(&o).contains("cannot be used with"), "{}", stderr(&o));
}

/// Three classes by the angle of a point in the plane, labels 1, 2, 3.
fn three_class_libsvm(n: usize, seed: u64) -> String {
    let mut r = Lcg(seed);
    let mut s = String::new();
    for _ in 0..n {
        let (a, b) = (2.0 * r.uniform() - 1.0, 2.0 * r.uniform() - 1.0);
        let angle = b.atan2(a) + std::f64::consts::PI;
        let class = 1 + ((angle / (2.0 * std::f64::consts::PI / 3.0)) as usize).min(2);
        s.push_str(&format!("{class} 1:{a:.5} 2:{b:.5}\n"));
    }
    s
}

/// `--multiclass`: by default the exact kernel trains one-vs-one and random features
/// one-vs-rest, each saying so and why; `joker info` reads the scheme back from the file.
#[test]
fn multiclass_schemes_are_chosen_and_reported() {
    let t = TempDir::new("multiclass");
    t.write("train.svm", &three_class_libsvm(300, 11));
    let train = |extra: &[&str], model: &str| {
        let mut args = vec!["train", "-l", "svc", "train.svm", model];
        args.extend_from_slice(extra);
        stderr(&ok(joker(&t.0, &args)))
    };
    let auto = train(&[], "auto.json");
    assert!(
        auto.contains("multiclass: one-vs-one, 3 pairs, ")
            && auto.contains(" at a time (auto: the exact kernel"),
        "{auto}"
    );
    let info = stdout(&ok(joker(&t.0, &["info", "auto.json"])));
    assert!(
        info.contains("3 classes: 1 2 3 (one-vs-one, 3 pairs)"),
        "{info}"
    );
    assert!(info.contains("version 3"), "{info}");
    let rff = train(&["-m", "64"], "rff.json");
    assert!(
        rff.contains("multiclass: one-vs-rest, 3 columns (auto: a feature map"),
        "{rff}"
    );
    let asked = train(&["--multiclass", "ovr"], "ovr.json");
    assert!(
        asked.contains("multiclass: one-vs-rest, 3 columns (requested)"),
        "{asked}"
    );
    let info = stdout(&ok(joker(&t.0, &["info", "ovr.json"])));
    assert!(
        info.contains("(one-vs-rest)") && info.contains("version 1"),
        "{info}"
    );
    fails_with(
        joker(
            &t.0,
            &[
                "train",
                "-m",
                "64",
                "--solver",
                "dsg",
                "--multiclass",
                "ovo",
                "train.svm",
                "x.json",
            ],
        ),
        "--multiclass",
    );
}

/// Sparse LIBSVM rows: `d` features, about four stored per row, the label the sign of a
/// fixed linear function of them.
fn sparse_libsvm(n: usize, d: usize, seed: u64) -> String {
    let mut r = Lcg(seed);
    let mut s = String::new();
    for _ in 0..n {
        let mut cols: Vec<usize> = (0..4)
            .map(|_| (r.uniform() * d as f64) as usize % d)
            .collect();
        cols.sort_unstable();
        cols.dedup();
        let vals: Vec<f64> = cols.iter().map(|_| 2.0 * r.uniform() - 1.0).collect();
        let f: f64 = cols
            .iter()
            .zip(&vals)
            .map(|(&j, v)| v * if j % 2 == 0 { 1.0 } else { -0.7 })
            .sum();
        s.push_str(if f > 0.0 { "+1" } else { "-1" });
        for (j, v) in cols.iter().zip(&vals) {
            s.push_str(&format!(" {}:{v:.5}", j + 1));
        }
        s.push('\n');
    }
    s
}

/// `joker convert --csr` writes the CSR arrays numpy writes for a scipy matrix (in small chunks
/// here): they hold the LIBSVM file's entries and labels exactly, `train` maps them and gives
/// the model the LIBSVM file gives, and an existing directory is replaced only with `--force`
/// and only when it holds a conversion's files.
#[test]
fn convert_to_csr_then_train_on_mapped_sparse_rows() {
    let t = TempDir::new("convert-csr");
    t.write("train.svm", &sparse_libsvm(1500, 50, 7));
    t.write("test.svm", &sparse_libsvm(200, 50, 8));
    let out = ok(joker(
        &t.0,
        &["convert", "-q", "--csr", "--chunk-mib", "1", "train.svm"],
    ));
    assert!(
        stdout(&out).contains("wrote 1500 rows of 50 columns as CSR arrays"),
        "{}",
        stdout(&out)
    );
    assert!(!t.path("train.csr.partial").exists());
    let text = joker::io::read_libsvm::<f32>(&t.path("train.svm"), &Default::default()).unwrap();
    let mapped = joker::io::npy::map_csr::<f32>(&t.path("train.csr")).unwrap();
    let joker::Features::Sparse(want) = &text.x else {
        panic!("a sparse LIBSVM file is read as sparse rows")
    };
    assert_eq!((mapped.nrows(), mapped.ncols()), (1500, 50));
    assert_eq!(mapped.indptr(), want.indptr());
    assert_eq!(mapped.indices(), want.indices());
    assert_eq!(mapped.values(), want.values());
    let labels = joker::io::npy::read_vector(&t.path("train.csr/labels.npy")).unwrap();
    assert_eq!(labels, text.y);

    let fit = |data: &str, model: &str| {
        // mapped rows take consecutive blocks, rows in memory shuffled ones: both run to the
        // optimum, which is the same
        let args = [
            "train",
            "-l",
            "svc",
            "-m",
            "256",
            "-b",
            "64",
            "--max-iter",
            "20000",
            "--tol",
            "1e-7",
            "--no-stall",
            "--no-standardize",
            "-q",
            data,
            model,
        ];
        ok(joker(&t.0, &args));
        ok(joker(
            &t.0,
            &["predict", "test.svm", model, &format!("{model}.pred")],
        ));
        std::fs::read_to_string(t.path(&format!("{model}.pred"))).unwrap()
    };
    assert_eq!(fit("train.csr", "a.json"), fit("train.svm", "b.json"));

    fails_with(
        joker(&t.0, &["convert", "-q", "--csr", "train.svm"]),
        "--force",
    );
    ok(joker(
        &t.0,
        &["convert", "-q", "--csr", "--force", "train.svm"],
    ));
    t.write("train.csr/notes.txt", "mine");
    fails_with(
        joker(&t.0, &["convert", "-q", "--csr", "--force", "train.svm"]),
        "other files",
    );
    assert!(t.path("train.csr/notes.txt").exists());
    fails_with(
        joker(&t.0, &["convert", "-q", "--csr", "train.svm", "out.npy"]),
        "directory",
    );
    // a malformed line: nothing is left under either name
    t.write("bad.svm", "+1 1:0.5\n-1 2:oops\n");
    fails_with(
        joker(&t.0, &["convert", "-q", "--csr", "bad.svm"]),
        "bad.svm",
    );
    assert!(!t.path("bad.csr").exists() && !t.path("bad.csr.partial").exists());
}

/// `joker convert` writes `.npy` rows and labels (in small chunks here, so several), `train`
/// maps them and gives the model the LIBSVM file gives, and the failures are named.
#[test]
fn convert_then_train_on_mapped_rows() {
    let t = TempDir::new("convert");
    t.write("train.svm", &circle_libsvm(400, 3, false));
    t.write("test.svm", &circle_libsvm(100, 4, false));
    let out = ok(joker(
        &t.0,
        &["convert", "-q", "--chunk-mib", "1", "train.svm"],
    ));
    assert!(
        stdout(&out).contains("wrote 400 rows of 3 float32 values"),
        "{}",
        stdout(&out)
    );
    assert!(t.path("train.labels.npy").exists());
    assert!(!t.path("train.npy.partial").exists());
    let common = [
        "-l",
        "svc",
        "-c",
        "10",
        "-m",
        "256",
        "-b",
        "64",
        "--max-iter",
        "200",
        "--no-standardize",
        "-q",
    ];
    let fit = |data: &str, model: &str| {
        let mut args = vec!["train"];
        args.extend_from_slice(&common);
        args.extend_from_slice(&[data, model]);
        ok(joker(&t.0, &args));
        ok(joker(
            &t.0,
            &["predict", "test.svm", model, &format!("{model}.pred")],
        ));
        std::fs::read_to_string(t.path(&format!("{model}.pred"))).unwrap()
    };
    assert_eq!(fit("train.npy", "a.json"), fit("train.svm", "b.json"));
    // predicting on mapped rows
    ok(joker(&t.0, &["convert", "-q", "test.svm", "test.npy"]));
    ok(joker(&t.0, &["predict", "test.npy", "a.json", "c.pred"]));
    assert_eq!(
        std::fs::read_to_string(t.path("c.pred")).unwrap(),
        std::fs::read_to_string(t.path("a.json.pred")).unwrap()
    );

    fails_with(joker(&t.0, &["convert", "-q", "train.svm"]), "--force");
    ok(joker(&t.0, &["convert", "-q", "--force", "train.svm"]));
    fails_with(
        joker(
            &t.0,
            &["train", "-l", "svc", "-m", "64", "train.npy", "x.json"],
        ),
        "--no-standardize",
    );
    fails_with(
        joker(&t.0, &["convert", "-q", "train.svm", "out.bin"]),
        ".npy",
    );
    fails_with(
        joker(&t.0, &["convert", "-q", "missing.svm", "m.npy"]),
        "missing.svm",
    );
    std::fs::remove_file(t.path("train.labels.npy")).unwrap();
    fails_with(
        joker(&t.0, &["train", "--no-standardize", "train.npy", "x.json"]),
        "train.labels.npy",
    );
}

/// `--stream` trains a doubly stochastic solver on the file read a part at a time: the passes
/// are reported, the model predicts, and what a stream cannot do is refused by name.
#[test]
fn stream_trains_dsg_on_the_file_a_part_at_a_time() {
    let t = TempDir::new("stream");
    t.write("train.svm", &sparse_libsvm(1500, 50, 7));
    t.write("test.svm", &sparse_libsvm(200, 50, 8));
    let args = [
        "train",
        "--stream",
        "--chunk-mib",
        "1",
        "-l",
        "svc",
        "--solver",
        "cdsg",
        "-m",
        "256",
        "--max-iter",
        "60",
        "train.svm",
        "m.json",
        "-v",
        "test.svm",
    ];
    let out = ok(joker(&t.0, &args));
    let (o, e) = (
        stdout(&out),
        String::from_utf8_lossy(&out.stderr).to_string(),
    );
    assert!(o.contains("1500 rows streamed, not scored"), "{o}");
    assert!(o.contains("solver      cdsg"), "{o}");
    assert!(o.contains("validation  accuracy"), "{o}");
    assert!(e.contains("reading: labels 1/1 parts"), "{e}");
    assert!(e.contains("rows streamed from train.svm"), "{e}");
    ok(joker(&t.0, &["predict", "test.svm", "m.json", "p.txt"]));
    assert_eq!(
        std::fs::read_to_string(t.path("p.txt"))
            .unwrap()
            .lines()
            .count(),
        200
    );

    // standard input is copied beside the model and streamed from there; the copy is removed
    let input = std::fs::read(t.path("train.svm")).unwrap();
    let mut piped = args.to_vec();
    let k = piped.len();
    piped[k - 4] = "-";
    piped[k - 3] = "piped.json";
    let out = ok(joker_piped(&t.0, &piped, &input));
    assert!(
        stdout(&out).contains("1500 rows streamed"),
        "{}",
        stdout(&out)
    );
    assert!(t.path("piped.json").exists());
    assert!(!t.path("piped.json.stdin.tmp").exists());

    // predict --stream writes what predict writes, part by part (a file of several MiB)
    t.write("big.svm", &sparse_libsvm(60_000, 50, 9));
    assert!(std::fs::metadata(t.path("big.svm")).unwrap().len() > 2 << 20);
    for extra in [&[][..], &["--decision"]] {
        let mut whole = vec!["predict", "big.svm", "m.json", "whole.txt"];
        whole.extend_from_slice(extra);
        let a = ok(joker(&t.0, &whole));
        let mut parts = vec![
            "predict",
            "--stream",
            "--chunk-mib",
            "1",
            "big.svm",
            "m.json",
        ];
        parts.push("parts.txt");
        parts.extend_from_slice(extra);
        let b = ok(joker(&t.0, &parts));
        let read = |f: &str| std::fs::read_to_string(t.path(f)).unwrap();
        let values =
            |f: &str| -> Vec<f64> { read(f).lines().map(|l| l.trim().parse().unwrap()).collect() };
        let (w, p) = (values("whole.txt"), values("parts.txt"));
        assert_eq!(p.len(), 60_000);
        // labels equal; decision values up to the rounding of the prediction's own chunks
        for (a, b) in w.iter().zip(&p) {
            assert!(
                (a - b).abs() <= 1e-12 * (1.0 + a.abs()),
                "{extra:?}: {a} vs {b}"
            );
        }
        assert_eq!(stderr(&a), stderr(&b), "the same score line");
    }

    let refused = |extra: &[&str], want: &str| {
        let mut a = vec!["train", "--stream", "-l", "svc", "-m", "256"];
        a.extend_from_slice(extra);
        a.extend_from_slice(&["train.svm", "r.json"]);
        let out = joker(&t.0, &a);
        assert!(!out.status.success(), "{a:?} succeeded");
        let e = String::from_utf8_lossy(&out.stderr);
        assert!(e.contains(want), "{a:?}: {e}");
        assert!(!t.path("r.json").exists());
    };
    refused(&[], "add --solver dsg, udsg or cdsg");
    refused(&["--solver", "dsg", "--bandwidth", "msd"], "give gamma");
    let out = joker(
        &t.0,
        &[
            "train",
            "--stream",
            "--solver",
            "dsg",
            "-m",
            "64",
            "train.svm",
            "r.json",
        ],
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("give the loss with -l"));
}

/// The circle problem as a comma-separated file with the label (`+-1`) in the first column and
/// a rare one-hot column last: a label-first file like the shared covtype CSVs.
fn label_first_csv(n: usize, seed: u64) -> String {
    let mut s = String::new();
    for (i, line) in circle_libsvm(n, seed, false).lines().enumerate() {
        let mut f = line.split(' ');
        let y: f64 = f.next().unwrap().parse().unwrap();
        let x: Vec<&str> = f.map(|kv| kv.split(':').nth(1).unwrap()).collect();
        let rare = if i % 40 == 0 { 1 } else { 0 };
        s.push_str(&format!("{y},{},{rare}\n", x.join(",")));
    }
    s
}

/// A label-first CSV: `train` says which column holds the labels and warns when the default
/// (last) column is far less like labels than the first; the model records the column, and
/// `predict` reads the test file the same way with no flag; a test file read with the wrong
/// column is refused, not scored.
#[test]
fn the_label_column_is_said_recorded_and_used() {
    let t = TempDir::new("labelcol");
    t.write("tr.csv", &label_first_csv(300, 3));
    t.write("te.csv", &label_first_csv(300, 4));
    // the default reads the last column: said, and warned about
    let o = ok(joker(&t.0, &["train", "tr.csv", "last.json"]));
    let e = stderr(&o);
    assert!(e.contains("labels: the last column (4)"), "{e}");
    assert!(
        e.contains("warning: the first column (0) looks far more like class labels")
            && e.contains("--label-column first"),
        "{e}"
    );
    // told, no warning, and the file records it
    let o = ok(joker(
        &t.0,
        &["train", "--label-column", "first", "tr.csv", "first.json"],
    ));
    let e = stderr(&o);
    assert!(e.contains("labels: the first column (0)"), "{e}");
    assert!(!e.contains("warning"), "{e}");
    let text = std::fs::read_to_string(t.path("first.json")).unwrap();
    assert!(
        text.contains(r#""data":{"format":"csv","label_column":"first"}"#),
        "{text}"
    );
    // predict with no flag: the labels of the first column, scored right
    let o = ok(joker(&t.0, &["predict", "te.csv", "first.json", "p.txt"]));
    let e = stderr(&o);
    assert!(e.contains("as in the training file"), "{e}");
    assert!(accuracy_of(&e) > 90.0, "{e}");
    // a part at a time as well (the model's width names no format)
    let o = ok(joker(
        &t.0,
        &["predict", "--stream", "te.csv", "first.json", "s.txt"],
    ));
    assert!(accuracy_of(&stderr(&o)) > 90.0, "{}", stderr(&o));
    // told the wrong column: most labels are not classes, an error and no output
    fails_with(
        joker(
            &t.0,
            &[
                "predict",
                "--label-column",
                "last",
                "te.csv",
                "first.json",
                "q.txt",
            ],
        ),
        "labels are not among the model's classes (-1 1)",
    );
    assert!(!t.path("q.txt").exists());
    // unlabelled rows written with one placeholder label are predicted, not refused
    let unlabelled: String = label_first_csv(50, 5)
        .lines()
        .map(|l| format!("0{}\n", &l[l.find(',').unwrap()..]))
        .collect();
    t.write("u.csv", &unlabelled);
    ok(joker(&t.0, &["predict", "u.csv", "first.json", "u.txt"]));
}

/// Values a model file may not hold are refused on loading, named by their field in the file
/// (not by the training flag that sets them).
#[test]
fn model_files_are_checked_field_by_field() {
    let t = TempDir::new("modelcheck");
    t.write("tr.csv", &label_first_csv(120, 6));
    ok(joker(
        &t.0,
        &["train", "-q", "--label-column", "first", "tr.csv", "m.json"],
    ));
    let text = std::fs::read_to_string(t.path("m.json")).unwrap();
    let mut json: serde_json::Value = serde_json::from_str(&text).unwrap();
    for (edit, needle) in [
        (
            ("kernel", "gamma", serde_json::json!(-1.0)),
            "field `kernel.gamma`",
        ),
        (
            (
                "standardizer",
                "scale",
                serde_json::json!([0.0, 1.0, 1.0, 1.0]),
            ),
            "field `standardizer.scale[0]` is 0",
        ),
    ] {
        let (obj, key, value) = edit;
        let saved = json[obj][key].clone();
        json[obj][key] = value;
        t.write("bad.json", &json.to_string());
        let err = fails_with(
            joker(&t.0, &["predict", "tr.csv", "bad.json", "out.txt"]),
            needle,
        );
        assert!(!err.contains("--gamma"), "{err}");
        json[obj][key] = saved;
    }
    // the unedited file still loads
    t.write("good.json", &json.to_string());
    ok(joker(&t.0, &["predict", "tr.csv", "good.json", "out.txt"]));
}

/// A directory where a data file is expected has its own message.
#[test]
fn a_directory_is_not_a_data_file() {
    let t = TempDir::new("dirdata");
    std::fs::create_dir(t.path("rows")).unwrap();
    let err = fails_with(
        joker(&t.0, &["train", "rows", "m.json"]),
        "is a directory, not a data file",
    );
    assert!(!err.contains("shape.npy: No such file"), "{err}");
}

/// A conversion whose output cannot fit the disk is refused before anything is written, at
/// once, with the estimate, and the CSR layout suggested for sparse rows; the progress line
/// ends before the error.
#[test]
fn a_conversion_that_would_fill_the_disk_is_refused_first() {
    let t = TempDir::new("convsize");
    let rows: String = (0..40)
        .map(|i| format!("{} 1:0.5 1000000000:1\n", if i % 2 == 0 { 1 } else { -1 }))
        .collect();
    t.write("wide.svm", &rows);
    let start = std::time::Instant::now();
    let err = fails_with(
        joker(&t.0, &["convert", "wide.svm", "wide.npy"]),
        "the output would take about 149.0 GB (40 rows of 1000000000 columns)",
    );
    assert!(start.elapsed().as_secs_f64() < 1.0, "{:?}", start.elapsed());
    assert!(err.contains("joker convert --csr"), "{err}");
    assert!(
        err.contains("chunks\nerror: "),
        "the progress line ends first:\n{err}"
    );
    let left: Vec<_> = std::fs::read_dir(&t.0)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left, ["wide.svm"], "nothing written");
    // the CSR arrays are small, and written
    ok(joker(&t.0, &["convert", "--csr", "wide.svm", "wide.csr"]));
}

/// Allocations the system refuses are errors with exit status 1, never aborts: the demo's
/// rows, and a 1e9-wide file's per-feature buffers with the memory estimate turned off.
#[test]
fn refused_allocations_exit_with_an_error() {
    let t = TempDir::new("refused");
    let o = joker_limited(&t.0, "ulimit -v 4000000", &["demo", "--n", "1000000000"]);
    fails_with(o, "cannot allocate");
    t.write("w4.svm", "1 1:0.5 1000000000:1\n-1 2:1\n1 1:1\n-1 3:2\n");
    let o = joker_limited(
        &t.0,
        "ulimit -v 4000000",
        &["train", "-q", "--max-memory", "0", "w4.svm", "m.json"],
    );
    fails_with(o, "cannot allocate");
}

/// Small input mistakes with their own messages: a stray token on the first line of a CSV
/// file is reported on that line (not taken for a header), rows without features, and `-`
/// as the model file of `train` is standard output.
#[test]
fn first_lines_empty_rows_and_standard_output() {
    let t = TempDir::new("small");
    t.write("bad.csv", "1,2,x\n3,4,5\n6,7,8\n");
    fails_with(joker(&t.0, &["train", "bad.csv", "m.json"]), "bad.csv:1:");
    // a real header still is one
    t.write("head.csv", "a,b,y\n1,2,1\n3,4,-1\n5,6,1\n7,8,-1\n");
    ok(joker(&t.0, &["train", "-q", "head.csv", "m.json"]));
    // `-`: the model on stdout, the summary on stderr, and the model loads
    let o = ok(joker(&t.0, &["train", "-q", "head.csv", "-"]));
    let out = stdout(&o);
    assert!(out.starts_with(r#"{"format":"joker-model""#), "{out}");
    assert!(stderr(&o).contains("model       written to standard output"));
    assert!(!t.path("-").exists(), "no file named `-`");
    t.write("piped.json", &out);
    ok(joker(&t.0, &["predict", "head.csv", "piped.json", "-"]));
    // standard input cannot be converted a chunk at a time: said so, not "no such file"
    let err = fails_with(
        joker_piped(&t.0, &["convert", "-", "out.npy"], b"1 1:2\n-1 1:3\n"),
        "standard input (`-`) cannot be",
    );
    assert!(!err.contains("No such file"), "{err}");
    // 200 rows of 0 columns: said so, not an internal error
    let mut w = joker::io::npy::RowWriter::create(&t.path("empty.npy"), 0).unwrap();
    for _ in 0..200 {
        w.push(&[]).unwrap();
    }
    w.finish().unwrap();
    joker::io::npy::write_vector(&t.path("empty.labels.npy"), &[1.0; 200]).unwrap();
    fails_with(
        joker(
            &t.0,
            &[
                "train",
                "--no-standardize",
                "-l",
                "krr",
                "empty.npy",
                "m.json",
            ],
        ),
        "the 200 rows have no features (0 columns)",
    );
}

/// On rows mapped from a `.npy` file the finite Newton start of L2-SVC, whose every step is a
/// pass over the rows (a read of the file), is left out and said so; on rows in memory it runs.
#[test]
fn mapped_rows_skip_the_newton_start() {
    let t = TempDir::new("mappednewton");
    t.write("tr.svm", &circle_libsvm(2000, 8, false));
    ok(joker(&t.0, &["convert", "-q", "tr.svm", "tr.npy"]));
    let o = ok(joker(
        &t.0,
        &["train", "-l", "l2-svc", "-m", "32", "tr.svm", "mem.json"],
    ));
    let e = stderr(&o);
    assert!(e.contains("start: finite Newton"), "{e}");
    let o = ok(joker(
        &t.0,
        &[
            "train",
            "-l",
            "l2-svc",
            "-m",
            "32",
            "--no-standardize",
            "tr.npy",
            "mapped.json",
        ],
    ));
    let e = stderr(&o);
    assert!(
        e.contains("start: DBCD-TR from zero: the finite Newton start is left out on rows mapped"),
        "{e}"
    );
    // DBCD-TR alone still fits the model
    let o = ok(joker(&t.0, &["predict", "tr.svm", "mapped.json", "p.txt"]));
    assert!(accuracy_of(&stderr(&o)) > 90.0, "{}", stderr(&o));
}

/// `--search`: every candidate scored on every fold and printed, the winner refitted and
/// marked, the record saved in the model file; a grid that cannot be searched is refused in
/// the command line's words.
#[test]
fn search_chooses_c_and_the_width_by_cross_validation() {
    let t = TempDir::new("search");
    t.write("tr.svm", &circle_libsvm(300, 21, false));
    t.write("te.svm", &circle_libsvm(300, 22, false));
    let o = ok(joker(
        &t.0,
        &[
            "train",
            "--search",
            "--search-c",
            "1,10",
            "--search-gamma",
            "0.5,1,2",
            "--folds",
            "4",
            "tr.svm",
            "m.json",
        ],
    ));
    let e = stderr(&o);
    assert!(e.contains("search: 4 folds, held-out accuracy"), "{e}");
    assert_eq!(e.lines().filter(|l| l.starts_with('*')).count(), 1, "{e}");
    let text = std::fs::read_to_string(t.path("m.json")).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    let search = &json["training"]["search"];
    assert_eq!(search["candidates"].as_array().unwrap().len(), 6);
    assert_eq!(
        search["candidates"][0]["scores"].as_array().unwrap().len(),
        4
    );
    let o = ok(joker(&t.0, &["predict", "te.svm", "m.json", "p.txt"]));
    assert!(accuracy_of(&stderr(&o)) > 90.0, "{}", stderr(&o));
    fails_with(
        joker(
            &t.0,
            &["train", "--search", "--folds", "1", "tr.svm", "m2.json"],
        ),
        "invalid --folds",
    );
    fails_with(
        joker(
            &t.0,
            &[
                "train",
                "--search",
                "--search-c",
                "0,1",
                "tr.svm",
                "m2.json",
            ],
        ),
        "invalid --search-c",
    );
}

/// One-vs-one progress: lines over the pairs (finished, of all, the worst gap) instead of
/// every pair's own checks interleaved, ending with all pairs finished.
#[test]
fn one_vs_one_progress_counts_the_pairs() {
    let t = TempDir::new("ovoprogress");
    t.write("tr.svm", &three_class_libsvm(300, 4));
    let o = ok(joker(&t.0, &["train", "tr.svm", "m.json"]));
    let e = stderr(&o);
    assert!(e.contains("multiclass: one-vs-one, 3 pairs"), "{e}");
    assert!(e.contains("pairs 3/3 finished, worst gap"), "{e}");
    let per_pair = e.lines().filter(|l| l.starts_with("iter ")).count();
    assert!(
        per_pair <= 1,
        "only the whole fit's check as an iteration line:\n{e}"
    );
}

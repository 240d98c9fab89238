//! `joker train --mpi` under `mpirun` with 1, 2 and 4 ranks (feature `mpi`; needs OpenMPI's
//! `mpirun`, or the launcher named by `$MPIEXEC`). The algorithm itself is tested without MPI
//! in `tests/suite/distributed.rs`; these tests cover the transport, the sharded reading, the
//! model written by rank 0, and a failing rank ending the job.
#![cfg(feature = "mpi")]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use joker::io::write_libsvm;
use joker::model::Representation;
use joker::{Dataset, Model};

/// The tests' MPI jobs run one at a time: concurrent `mpirun` jobs on one machine were seen to
/// disturb each other (a job's rank failing to find a folder another test had made, a job
/// ending early), and the killing test must find only its own ranks.
fn one_job_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static JOBS: std::sync::Mutex<()> = std::sync::Mutex::new(());
    JOBS.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("joker-mpi-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `mpirun -n ranks joker ARGS`, as root where the tests run as root, oversubscribed.
fn mpirun(ranks: usize, args: &[&str]) -> Output {
    let launcher = std::env::var("MPIEXEC").unwrap_or_else(|_| "mpirun".into());
    let mut cmd = Command::new(launcher);
    cmd.args(["--oversubscribe", "-n", &ranks.to_string()])
        .arg(env!("CARGO_BIN_EXE_joker"))
        .args(args)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("OMPI_MCA_btl_vader_single_copy_mechanism", "none")
        .env("RAYON_NUM_THREADS", "1");
    cmd.output()
        .expect("mpirun could not be started: install OpenMPI")
}

fn theta(m: &Model) -> Vec<f64> {
    match &m.representation {
        Representation::RandomFeatures { theta, .. } => theta.clone(),
        _ => panic!("not a random-feature model"),
    }
}

/// `theta` of a random-feature model, `alpha` of an exact one.
fn coefficients(m: &Model) -> Vec<f64> {
    match &m.representation {
        Representation::RandomFeatures { theta, .. } => theta.clone(),
        Representation::Exact { alpha, .. } => alpha.clone(),
    }
}

/// The single-process fit of an `--mpi` command line (`args(model)`, `--mpi` dropped), written
/// to and loaded from `path`.
fn single_process_fit(path: &Path, args: impl Fn(&Path) -> Vec<String>) -> Model {
    let mut single_args = args(path);
    single_args.retain(|a| a != "--mpi");
    let out = Command::new(env!("CARGO_BIN_EXE_joker"))
        .args(&single_args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Model::load(path).unwrap()
}

fn write_set(dir: &Path, name: &str, data: &Dataset<f64>) -> PathBuf {
    let p = dir.join(name);
    write_libsvm(&p, data).unwrap();
    p
}

#[test]
fn one_two_and_four_ranks_train_one_model() {
    let _jobs = one_job_at_a_time();
    let dir = scratch("train");
    let train = write_set(&dir, "train.svm", &common::binary(1200, 3, 21));
    let test = write_set(&dir, "test.svm", &common::binary(600, 3, 22));
    // random features, and the exact kernel (every rank's rows gathered, (K d)_{S_r} summed)
    for representation in [["-m", "200"], ["--exact", "--no-standardize"]] {
        ranks_train_one_model(&dir, &train, &test, &representation);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// SVR with its intercept (the default for `-l svr`) on 2 ranks under `mpirun` at the default
/// tolerance: the intercept, searched with its sums over the ranks, within 10% of the
/// targets' spread of the single-process optimum's (tolerance 1e-7; the dual objective is
/// flat in it here: the single process's own fit at the default tolerance is 8% of the spread
/// from it; a missing intercept is 100% off), and the test RMSE within 1% of the optimum's.
/// The optimum itself is compared closely without MPI (`tests/suite/distributed.rs`).
#[test]
fn svr_over_ranks_fits_its_intercept() {
    let _jobs = one_job_at_a_time();
    let dir = scratch("svr");
    let raised = |n, seed| {
        let mut d = common::regression(n, 3, seed);
        d.y.iter_mut().for_each(|y| *y = 10.0 * *y + 30.0);
        d
    };
    let (train_set, test_set) = (raised(900, 51), raised(400, 52));
    let train = write_set(&dir, "train.svm", &train_set);
    let args = |model: &Path| -> Vec<String> {
        [
            "train",
            "--mpi",
            "-q",
            "-l",
            "svr",
            "--exact",
            "--no-standardize",
            "-b",
            "64",
            "--no-stall",
            "--max-iter",
            "20000",
        ]
        .iter()
        .map(|a| a.to_string())
        .chain([train.display().to_string(), model.display().to_string()])
        .collect()
    };
    let single = single_process_fit(&dir.join("single.json"), |model| {
        let mut a = args(model);
        a.splice(1..1, ["--tol".to_string(), "1e-7".to_string()]);
        a
    });
    let path = dir.join("model2.json");
    let a = args(&path);
    let out = mpirun(2, &a.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let m = Model::load(&path).unwrap();
    let (b1, b2) = (
        single.training.intercept.expect("single-process intercept"),
        m.training.intercept.expect("an intercept over the ranks"),
    );
    let rmse = |m: &Model| joker::model::rmse(&m.predict(&test_set.x).unwrap(), &test_set.y);
    let (r1, r2) = (rmse(&single), rmse(&m));
    let mean = train_set.y.iter().sum::<f64>() / train_set.len() as f64;
    let spread = (train_set.y.iter().map(|y| (y - mean).powi(2)).sum::<f64>()
        / train_set.len() as f64)
        .sqrt();
    eprintln!(
        "SVR on 2 ranks: intercept {b2:.4} against {b1:.4} (spread {spread:.3}), test RMSE \
         {r2:.4} against {r1:.4}, {:?}",
        m.training.stop
    );
    assert_eq!(m.training.stop, joker::StopReason::Converged);
    assert!(
        (b2 - b1).abs() <= 0.1 * spread,
        "intercept {b2} against {b1}"
    );
    assert!(r2 <= 1.01 * r1, "test RMSE {r2} against {r1}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The fits of [`one_two_and_four_ranks_train_one_model`] with the representation options
/// `representation`.
fn ranks_train_one_model(dir: &Path, train: &Path, test: &Path, representation: &[&str]) {
    let args = |model: &Path| -> Vec<String> {
        [
            "train",
            "--mpi",
            "-l",
            "l2-svc",
            representation[0],
            representation[1],
            "-b",
            "64",
            "--max-iter",
            "4000",
            // parallel block minimization runs to the gap; the single fit must too
            "--no-stall",
            train.to_str().unwrap(),
            model.to_str().unwrap(),
            "-v",
            test.to_str().unwrap(),
        ]
        .map(String::from)
        .to_vec()
    };
    // the single-process fit of the same file
    let single = single_process_fit(&dir.join("single.json"), args);
    let test_set: Dataset<f64> = joker::io::read_libsvm(
        test,
        &joker::io::LibsvmOptions {
            n_features: Some(3),
            ..Default::default()
        },
    )
    .unwrap();
    let base = single.score(&test_set).unwrap();
    for ranks in [1, 2, 4] {
        let path = dir.join(format!("model{ranks}.json"));
        let a = args(&path);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        let out = mpirun(ranks, &a);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{ranks} ranks: {err}");
        assert!(err.contains(&format!("on {ranks} ranks")), "{err}");
        let m = Model::load(&path).unwrap();
        assert_eq!(m.training.n_samples, 1200);
        assert_eq!(
            m.training.stop,
            joker::StopReason::Converged,
            "{ranks} ranks"
        );
        if ranks == 1 {
            // the ordinary fit, iterate for iterate
            assert_eq!(coefficients(&m), coefficients(&single));
        }
        let acc = m.score(&test_set).unwrap();
        eprintln!(
            "{representation:?}, {ranks} ranks: accuracy {acc:.4} (single {base:.4}), {} local iterations on rank 0",
            m.training.iterations
        );
        assert!(
            acc >= base - 0.01,
            "{representation:?}, {ranks} ranks: {acc} against {base}"
        );
    }
}

/// Rows of a `.npy` file, or of a directory of CSR arrays, are shared among the ranks, each
/// mapping its own range and reading its own labels: one rank is the single-process fit on the
/// mapped rows, iterate for iterate, and two ranks converge to a model as accurate.
#[test]
fn npy_rows_are_shared_among_the_ranks() {
    let _jobs = one_job_at_a_time();
    let dir = scratch("npy");
    let data = common::binary(1200, 3, 21);
    let dense = dir.join("train.npy");
    let f32_data = Dataset::new(data.x.cast::<f32>(), data.y.clone()).unwrap();
    common::write_npy(&dense, &f32_data);
    let csr = dir.join("train.csr");
    let svm = write_set(&dir, "train.svm", &data);
    common::write_csr(&svm, &csr);
    for rows in [dense, csr] {
        shared_rows_fit_as_one(&dir, &rows);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The fits of [`npy_rows_are_shared_among_the_ranks`] on the mapped rows `rows`.
fn shared_rows_fit_as_one(dir: &Path, rows: &Path) {
    let test = common::binary(600, 3, 22);
    let args = |model: &Path| -> Vec<String> {
        [
            "train",
            "--mpi",
            "--no-standardize",
            "-l",
            "l2-svc",
            "-m",
            "200",
            "-b",
            "64",
            "--max-iter",
            "4000",
            "--no-stall",
            rows.to_str().unwrap(),
            model.to_str().unwrap(),
        ]
        .map(String::from)
        .to_vec()
    };
    let single = single_process_fit(&dir.join("single.json"), args);
    let base = single.score(&test).unwrap();
    for ranks in [1, 2] {
        let path = dir.join(format!("model{ranks}.json"));
        let a = args(&path);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        let out = mpirun(ranks, &a);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{ranks} ranks: {err}");
        let m = Model::load(&path).unwrap();
        assert_eq!(m.training.n_samples, 1200);
        assert_eq!(
            m.training.stop,
            joker::StopReason::Converged,
            "{ranks} ranks"
        );
        if ranks == 1 {
            assert_eq!(theta(&m), theta(&single));
        }
        let acc = m.score(&test).unwrap();
        assert!(
            acc >= base - 0.01,
            "{}, {ranks} ranks: {acc} against {base}",
            rows.display()
        );
    }
}

#[test]
fn a_failing_rank_ends_the_job_with_an_error_in_seconds() {
    let _jobs = one_job_at_a_time();
    let dir = scratch("fail");
    let mut text =
        std::fs::read_to_string(write_set(&dir, "ok.svm", &common::binary(800, 3, 23))).unwrap();
    // the last rank's share holds a malformed line
    text.push_str("1 2:0.5 oops\n");
    let bad = dir.join("bad.svm");
    std::fs::write(&bad, text).unwrap();
    let model = dir.join("m.json");
    let t = Instant::now();
    let out = mpirun(
        4,
        &[
            "train",
            "--mpi",
            "-l",
            "l2-svc",
            "-m",
            "100",
            bad.to_str().unwrap(),
            model.to_str().unwrap(),
        ],
    );
    let took = t.elapsed();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the job must fail: {err}");
    assert!(err.contains("rank 3 of 4"), "{err}");
    assert!(took < Duration::from_secs(10), "took {took:?}");
    assert!(!model.exists());
    let _ = std::fs::remove_dir_all(&dir);
}

/// The pids of the running ranks of this test's joker whose MPI rank is `rank` and whose
/// command line names `marker` (the test's own folder: the other tests' jobs run beside it).
fn pids_of_rank(binary: &str, rank: usize, marker: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let cmd = String::from_utf8_lossy(&cmd);
        if !cmd.starts_with(binary) || !cmd.contains(marker) {
            continue;
        }
        let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        let want = format!("OMPI_COMM_WORLD_RANK={rank}");
        if env.split(|&b| b == 0).any(|v| v == want.as_bytes()) {
            out.push(pid);
        }
    }
    out
}

#[test]
fn a_killed_rank_ends_the_job_in_seconds_and_resume_finishes_it() {
    let _jobs = one_job_at_a_time();
    let dir = scratch("kill");
    let train = write_set(&dir, "train.svm", &common::binary(20_000, 3, 41));
    let test = write_set(&dir, "test.svm", &common::binary(2000, 3, 42));
    let ckpt = dir.join("ckpt");
    let model = dir.join("m.json");
    let bin = env!("CARGO_BIN_EXE_joker");
    let common_args = |extra: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = [
            "train", "--mpi", "-q", "-l", "l2-svc", "-m", "300", "-b", "256",
        ]
        .map(String::from)
        .to_vec();
        v.extend(extra.iter().map(|s| s.to_string()));
        v.push(train.to_str().unwrap().into());
        v.push(model.to_str().unwrap().into());
        v
    };
    // a fit that would run for long: a tolerance it does not reach
    let args = common_args(&[
        "--tol",
        "1e-12",
        "--max-iter",
        "100000000",
        "--max-outer",
        "100000",
        "--checkpoint",
        ckpt.to_str().unwrap(),
        "--checkpoint-every",
        "1",
    ]);
    let launcher = std::env::var("MPIEXEC").unwrap_or_else(|_| "mpirun".into());
    let log = std::fs::File::create(dir.join("job.log")).unwrap();
    let mut job = Command::new(&launcher)
        .args(["--oversubscribe", "-n", "4", bin])
        .args(&args)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("OMPI_MCA_btl_vader_single_copy_mechanism", "none")
        .env("RAYON_NUM_THREADS", "1")
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .expect("mpirun could not be started: install OpenMPI");
    // wait for two complete checkpoints
    let t = Instant::now();
    loop {
        if let Ok(Some(m)) = joker::distributed::checkpoint::read_manifest(&ckpt)
            && m.outer >= 2
        {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "no checkpoint after 60 s: {}",
            std::fs::read_to_string(dir.join("job.log")).unwrap_or_default()
        );
        assert!(job.try_wait().unwrap().is_none(), "the job ended early");
        std::thread::sleep(Duration::from_millis(50));
    }
    let victims = pids_of_rank(bin, 2, dir.to_str().unwrap());
    assert_eq!(victims.len(), 1, "rank 2's process: {victims:?}");
    let killed = Instant::now();
    Command::new("kill")
        .args(["-9", &victims[0].to_string()])
        .status()
        .unwrap();
    let status = loop {
        if let Some(s) = job.try_wait().unwrap() {
            break s;
        }
        if killed.elapsed() > Duration::from_secs(30) {
            let _ = job.kill();
            panic!("the job still runs 30 s after a rank was killed");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let took = killed.elapsed();
    assert!(!status.success(), "the job must fail");
    assert!(
        took < Duration::from_secs(10),
        "the job ended {took:?} after the kill"
    );
    assert!(!model.exists());
    // resumed on two ranks with the usual tolerance
    let args = common_args(&["--resume", ckpt.to_str().unwrap()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = mpirun(2, &args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let m = Model::load(&model).unwrap();
    assert_eq!(m.training.stop, joker::StopReason::Converged);
    let test_set: Dataset<f64> = joker::io::read_libsvm(
        &test,
        &joker::io::LibsvmOptions {
            n_features: Some(3),
            ..Default::default()
        },
    )
    .unwrap();
    let acc = m.score(&test_set).unwrap();
    eprintln!("killed after {took:?}; resumed on 2 ranks: accuracy {acc:.4}");
    assert!(acc > 0.85, "accuracy {acc}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_c_abi_trains_on_the_callers_communicator() {
    let _jobs = one_job_at_a_time();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // the library this test was built with (target/<profile>/libjoker.so)
    let exe = std::env::current_exe().unwrap();
    let lib_dir = exe.parent().unwrap().parent().unwrap();
    assert!(
        lib_dir.join("libjoker.so").exists(),
        "libjoker.so not found in {}",
        lib_dir.display()
    );
    let dir = scratch("c");
    let bin = dir.join("mpi_example");
    // programs record the library's SONAME, libjoker.so.0
    std::os::unix::fs::symlink(lib_dir.join("libjoker.so"), dir.join("libjoker.so.0")).unwrap();
    let cc = Command::new("mpicc")
        .args(["-O2", "-I"])
        .arg(root.join("include"))
        .arg(root.join("bindings/c/mpi_example.c"))
        .arg("-L")
        .arg(lib_dir)
        .args(["-ljoker", "-lm", "-o"])
        .arg(&bin)
        .output()
        .expect("mpicc could not be started: install OpenMPI's development files");
    assert!(
        cc.status.success(),
        "{}",
        String::from_utf8_lossy(&cc.stderr)
    );
    let out = Command::new(std::env::var("MPIEXEC").unwrap_or_else(|_| "mpirun".into()))
        .args(["--oversubscribe", "-n", "3"])
        .arg(&bin)
        .env("LD_LIBRARY_PATH", &dir)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("OMPI_MCA_btl_vader_single_copy_mechanism", "none")
        .env("RAYON_NUM_THREADS", "1")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let accs: Vec<f64> = text
        .lines()
        .filter_map(|l| l.rsplit("accuracy ").next()?.trim().parse().ok())
        .collect();
    eprintln!("{text}");
    assert_eq!(accs.len(), 3, "{text}");
    // one model on every rank
    assert!(accs.iter().all(|a| *a == accs[0] && *a > 0.9), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn rows_move_between_ranks_for_random_and_kmeans_partitions() {
    let _jobs = one_job_at_a_time();
    let dir = scratch("partition");
    let train_set = common::binary(1500, 3, 61);
    let train = write_set(&dir, "train.svm", &train_set);
    let test_set = common::binary(500, 3, 62);
    // the same fit in one process
    let base = joker::Joker::builder()
        .loss(joker::Loss::SquaredHinge)
        .n_components(200)
        .block_size(64)
        .build()
        .unwrap()
        .fit(&train_set)
        .unwrap()
        .score(&test_set)
        .unwrap();
    for (how, ranks) in [("random", 3), ("kmeans", 2)] {
        let model = dir.join(format!("{how}.json"));
        let out = mpirun(
            ranks,
            &[
                "train",
                "--mpi",
                "-l",
                "l2-svc",
                "-m",
                "200",
                "-b",
                "64",
                "--partition",
                how,
                train.to_str().unwrap(),
                model.to_str().unwrap(),
            ],
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{how}: {err}");
        let m = Model::load(&model).unwrap();
        assert_eq!(m.training.n_samples, 1500);
        assert_eq!(m.training.stop, joker::StopReason::Converged, "{how}");
        assert!(
            m.training.device.contains("partition"),
            "{}",
            m.training.device
        );
        let acc = m.score(&test_set).unwrap();
        eprintln!("{how} on {ranks} ranks: accuracy {acc:.4} (one process {base:.4})");
        // two fits within the gap tolerance may differ by a few of the 500 test rows
        assert!(acc >= base - 0.02, "{how}: accuracy {acc} against {base}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

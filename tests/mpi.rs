//! `joker train --mpi` under `mpirun` with 1, 2 and 4 ranks (feature `mpi`; needs OpenMPI's
//! `mpirun`, or the launcher named by `$MPIEXEC`). The algorithm itself is tested without MPI
//! in `tests/distributed.rs`; these tests cover the transport, the sharded reading, the
//! model written by rank 0, and a failing rank ending the job.
#![cfg(feature = "mpi")]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use joker::io::write_libsvm;
use joker::model::Representation;
use joker::{Dataset, Model};

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

fn write_set(dir: &Path, name: &str, data: &Dataset<f64>) -> PathBuf {
    let p = dir.join(name);
    write_libsvm(&p, data).unwrap();
    p
}

#[test]
fn one_two_and_four_ranks_train_one_model() {
    let dir = scratch("train");
    let train = write_set(&dir, "train.svm", &common::binary(1200, 3, 21));
    let test = write_set(&dir, "test.svm", &common::binary(600, 3, 22));
    let args = |model: &Path| -> Vec<String> {
        [
            "train",
            "--mpi",
            "-l",
            "l2-svc",
            "-m",
            "200",
            "-b",
            "64",
            "--max-iter",
            "4000",
            train.to_str().unwrap(),
            model.to_str().unwrap(),
            "-v",
            test.to_str().unwrap(),
        ]
        .map(String::from)
        .to_vec()
    };
    // the single-process fit of the same file
    let single_path = dir.join("single.json");
    let mut single_args = args(&single_path);
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
    let single = Model::load(&single_path).unwrap();
    let test_set: Dataset<f64> = joker::io::read_libsvm(
        &test,
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
            assert_eq!(theta(&m), theta(&single));
        }
        let acc = m.score(&test_set).unwrap();
        eprintln!(
            "{ranks} ranks: accuracy {acc:.4} (single {base:.4}), {} local iterations on rank 0",
            m.training.iterations
        );
        assert!(acc >= base - 0.01, "{ranks} ranks: {acc} against {base}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_failing_rank_ends_the_job_with_an_error_in_seconds() {
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

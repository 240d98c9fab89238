//! The data readers on the real files of `JOKER_DATA_DIR` (default `../shared/datasets`),
//! looked up when the tests run: without the folder each test prints a `skipped:` line and
//! returns (a fresh clone passes), or fails under `JOKER_REQUIRE_DATA=1`.

use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::common;

use joker::io::{CsvOptions, LabelColumn, LibsvmOptions, read_auto, read_csv, read_libsvm};
use joker::{CsrMatrix, Dataset, Features};

/// The file `rel` of the data folder `dir`: a test that needs it fails when it is missing
/// (a data folder without one of its files is incomplete, not absent).
fn data_file(dir: &Path, rel: &str) -> PathBuf {
    let p = dir.join(rel);
    assert!(p.is_file(), "{} not found", p.display());
    p
}

fn sparse<T>(d: &Dataset<T>) -> &CsrMatrix<T> {
    match &d.x {
        Features::Sparse(m) => m,
        Features::Dense(_) => panic!("expected sparse features"),
    }
}

fn dense_shape<T: joker::Scalar>(d: &Dataset<T>) -> (usize, usize) {
    assert!(matches!(d.x, Features::Dense(_)), "expected dense features");
    (d.x.nrows(), d.x.ncols())
}

fn timed<R>(what: &Path, f: impl FnOnce() -> R) -> R {
    let t = Instant::now();
    let r = f();
    eprintln!(
        "read {} in {:.1} ms",
        what.display(),
        t.elapsed().as_secs_f64() * 1e3
    );
    r
}

fn count(y: &[f64], v: f64) -> usize {
    y.iter().filter(|&&t| t == v).count()
}

#[test]
fn a9a() {
    let Some(dir) = common::data_dir("io::a9a") else {
        return;
    };
    let p = data_file(&dir, "libsvm/a9a");
    let opts = LibsvmOptions {
        n_features: Some(123),
        ..Default::default()
    };
    let d = timed(&p, || read_libsvm::<f32>(&p, &opts)).unwrap();
    let m = sparse(&d);
    assert_eq!((m.nrows(), m.ncols()), (32_561, 123));
    assert_eq!((count(&d.y, -1.0), count(&d.y, 1.0)), (24_720, 7_841));
    // First line: "-1 3:1 11:1 14:1 ...", 1-based.
    assert_eq!(&m.row(0).0[..3], &[2, 10, 13]);
    assert!(m.values().iter().all(|&v| v == 1.0));

    // The test split mentions only 122 features: n_features keeps the training width.
    let pt = p.with_file_name("a9a.t");
    let t = read_libsvm::<f32>(&pt, &opts).unwrap();
    assert_eq!((t.x.nrows(), t.x.ncols()), (16_281, 123));
    let t = read_libsvm::<f32>(&pt, &LibsvmOptions::default()).unwrap();
    assert_eq!(t.x.ncols(), 122);
    // And a width below the largest index is refused, naming a line.
    let narrow = LibsvmOptions {
        n_features: Some(100),
        ..Default::default()
    };
    let e = read_libsvm::<f32>(&p, &narrow).unwrap_err();
    assert!(matches!(e, joker::JokerError::Parse { .. }), "{e}");

    let auto = read_auto::<f32>(&p).unwrap();
    assert_eq!(auto, d);
}

#[test]
fn ijcnn1() {
    let Some(dir) = common::data_dir("io::ijcnn1") else {
        return;
    };
    let p = data_file(&dir, "libsvm/ijcnn1");
    let d = timed(&p, || read_libsvm::<f64>(&p, &LibsvmOptions::default())).unwrap();
    let m = sparse(&d);
    assert_eq!((m.nrows(), m.ncols()), (49_990, 22));
    assert_eq!((count(&d.y, -1.0), count(&d.y, 1.0)), (45_137, 4_853));
    // "-1.0 6:1 11:-0.731854 12:0.173431 13:0.0 ...": the explicit zero is not stored.
    let (idx, val) = m.row(0);
    assert_eq!(&idx[..4], &[5, 10, 11, 13]);
    assert_eq!(&val[..3], &[1.0, -0.731854, 0.173431]);

    let pt = p.with_file_name("ijcnn1.t");
    let t = timed(&pt, || read_libsvm::<f32>(&pt, &LibsvmOptions::default())).unwrap();
    assert_eq!((t.x.nrows(), t.x.ncols()), (91_701, 22));
    assert_eq!(count(&t.y, 1.0), 8_712);
}

#[test]
fn cpusmall_is_detected_zero_based() {
    let Some(dir) = common::data_dir("io::cpusmall_is_detected_zero_based") else {
        return;
    };
    let p = data_file(&dir, "libsvm/cpusmall_scale");
    let d = read_libsvm::<f64>(&p, &LibsvmOptions::default()).unwrap();
    let m = sparse(&d);
    assert_eq!((m.nrows(), m.ncols()), (5_734, 12));
    // "98 0:-0.98374 1:-0.926957 ...": index 0 is column 0.
    assert_eq!(d.y[0], 98.0);
    assert_eq!(m.row(0).0[0], 0);
    assert!((m.row(0).1[0] + 0.98374).abs() < 1e-12);
    // Read as 1-based it is an error on the first line with index 0.
    let one = LibsvmOptions {
        zero_based: Some(false),
        ..Default::default()
    };
    match read_libsvm::<f64>(&p, &one) {
        Err(joker::JokerError::Parse { line: 1, .. }) => {}
        other => panic!("expected a parse error on line 1, got {other:?}"),
    }
}

#[test]
fn other_libsvm_files() {
    let Some(dir) = common::data_dir("io::other_libsvm_files") else {
        return;
    };
    for (rel, shape) in [
        ("libsvm/w8a", (49_749, 300)),
        ("libsvm/mushrooms", (8_124, 112)),
        ("libsvm/housing_scale", (506, 13)),
    ] {
        let p = data_file(&dir, rel);
        let d = read_auto::<f32>(&p).unwrap();
        assert!(matches!(d.x, Features::Sparse(_)), "{rel}");
        assert_eq!((d.x.nrows(), d.x.ncols()), shape, "{rel}");
    }
}

#[test]
fn cadata_csv_with_header() {
    let Some(dir) = common::data_dir("io::cadata_csv_with_header") else {
        return;
    };
    let p = data_file(&dir, "cadata/cal_housing.data");
    let d = timed(&p, || read_csv::<f64>(&p, &CsvOptions::default())).unwrap();
    assert_eq!(dense_shape(&d), (20_640, 8));
    assert_eq!(d.y[0], 452_600.0);
    let Features::Dense(m) = &d.x else {
        unreachable!()
    };
    assert_eq!(m.row(0)[..2], [-122.23, 37.88]);
    assert_eq!(read_auto::<f64>(&p).unwrap(), d);
}

#[test]
fn higgs_tsv_label_first() {
    let Some(dir) = common::data_dir("io::higgs_tsv_label_first") else {
        return;
    };
    let p = data_file(&dir, "higgs_small/binary.train");
    let opts = CsvOptions {
        label_column: LabelColumn::First,
        ..Default::default()
    };
    let d = timed(&p, || read_csv::<f32>(&p, &opts)).unwrap();
    assert_eq!(dense_shape(&d), (7_000, 28));
    assert_eq!(count(&d.y, 0.0) + count(&d.y, 1.0), 7_000);
    let Features::Dense(m) = &d.x else {
        unreachable!()
    };
    assert_eq!(m.row(0)[..2], [0.869, -0.635]);
    let t = read_csv::<f32>(&p.with_file_name("binary.test"), &opts).unwrap();
    assert_eq!(dense_shape(&t), (500, 28));
}

#[test]
fn covtype_csv_comma_space_label_first() {
    let Some(dir) = common::data_dir("io::covtype_csv_comma_space_label_first") else {
        return;
    };
    let p = data_file(&dir, "covtype_small/covtype.1000.train.csv");
    let opts = CsvOptions {
        label_column: LabelColumn::Index(0),
        ..Default::default()
    };
    let d = read_csv::<f64>(&p, &opts).unwrap();
    assert_eq!(dense_shape(&d), (976, 54));
    assert_eq!(count(&d.y, -1.0) + count(&d.y, 1.0), 976);
}

#[test]
fn uci_gp_gzip_csv() {
    let Some(dir) = common::data_dir("io::uci_gp_gzip_csv") else {
        return;
    };
    for (name, shape) in [("kin40k", (40_000, 8)), ("elevators", (16_599, 18))] {
        let p = data_file(&dir, &format!("uci_gp/{name}/data.csv.gz"));
        let d = timed(&p, || read_csv::<f32>(&p, &CsvOptions::default())).unwrap();
        assert_eq!(dense_shape(&d), shape, "{name}");
        assert_eq!(read_auto::<f32>(&p).unwrap(), d, "{name}");
    }
}

//! Training rows mapped from `.npy` files (`joker::io::npy`): the reader's checks name each
//! kind of malformed file, mapped rows stay mapped through a fit, and a fit on mapped rows is
//! the fit on the same rows in memory with the same blocks, iterate for iterate (mapped rows
//! take blocks of consecutive rows by default).

use crate::common;

use std::path::{Path, PathBuf};

use joker::io::npy::{RowWriter, labels_path, map_rows, read_npy, read_vector, write_vector};
use joker::model::Representation;
use joker::{Dataset, DenseMatrix, Features, Joker, JokerError, Loss, Model};

/// A fresh directory for one test's files.
fn dir(test: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("joker-npy-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Writes `data` (dense f32 rows) as `rows.npy` and `rows.labels.npy` in `dir`.
fn write(dir: &Path, data: &Dataset<f32>) -> PathBuf {
    let path = dir.join("rows.npy");
    common::write_npy(&path, data);
    path
}

/// A `.npy` file with a hand-written header dict and `data` after it.
fn raw(path: &Path, dict: &str, data: &[u8]) {
    let mut b = b"\x93NUMPY\x01\x00".to_vec();
    let mut h = dict.as_bytes().to_vec();
    while (10 + h.len() + 1) % 64 != 0 {
        h.push(b' ');
    }
    h.push(b'\n');
    b.extend_from_slice(&(h.len() as u16).to_le_bytes());
    b.extend_from_slice(&h);
    b.extend_from_slice(data);
    std::fs::write(path, b).unwrap();
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn data32(n: usize, d: usize, seed: u64) -> Dataset<f32> {
    let data = common::binary(n, d, seed);
    Dataset::new(data.x.cast::<f32>(), data.y).unwrap()
}

/// A default fit on rows mapped from a file beyond the page cache (`JOKER_CACHE_ROOM` makes
/// the room smaller than the file, in a child process) makes the passes its iterations imply
/// and no more: the statistics from the opening pass's sums, no start, one pass of blocks and
/// no check of the objectives. The same file within the page cache is checked as usual.
#[test]
fn a_default_fit_beyond_the_page_cache_reads_the_rows_once() {
    let d = dir("passes");
    let path = write(&d, &data32(4000, 20, 31));
    let fit = |room: Option<&str>, name: &str| -> serde_json::Value {
        let model = d.join(name);
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_joker"));
        cmd.args([
            "train",
            "-q",
            "--no-standardize",
            "-l",
            "l2-svc",
            "-m",
            "64",
        ])
        .arg(&path)
        .arg(&model);
        match room {
            Some(r) => cmd.env("JOKER_CACHE_ROOM", r),
            None => cmd.env_remove("JOKER_CACHE_ROOM"),
        };
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_str(&std::fs::read_to_string(&model).unwrap()).unwrap()
    };
    let beyond = fit(Some("100000"), "beyond.json");
    let t = &beyond["training"];
    let p = &t["passes"];
    let iterations = t["iterations"].as_f64().unwrap();
    assert_eq!(iterations, (4000f64 / 512.0).ceil(), "{t}");
    assert_eq!(
        p["statistics"], 0.0,
        "the width from the opening pass's sums: {p}"
    );
    assert_eq!(p["start"], 0.0, "no Newton start on mapped rows: {p}");
    assert_eq!(p["checks"], 0.0, "no check of the objectives: {p}");
    assert!(
        (p["blocks"].as_f64().unwrap() - iterations * 512.0 / 4000.0).abs() < 1e-9,
        "{p}"
    );
    assert!(t["gap"].is_null(), "{t}");
    assert!(beyond["version"].as_u64().unwrap() >= 2);
    // within the page cache: the checks compute the gap
    let within = fit(None, "within.json");
    let p = &within["training"]["passes"];
    assert!(p["checks"].as_f64().unwrap() >= 1.0, "{p}");
    assert!(within["training"]["gap"].is_f64(), "{}", within["training"]);
    let _ = std::fs::remove_dir_all(&d);
}

fn theta(m: &Model) -> &[f64] {
    match &m.representation {
        Representation::RandomFeatures { theta, .. } => theta,
        _ => panic!("not a random-feature model"),
    }
}

#[test]
fn written_rows_map_back_unchanged() {
    let d = dir("roundtrip");
    let data = data32(301, 5, 1);
    let path = write(&d, &data);
    let back = read_npy::<f32>(&path, None).unwrap();
    assert!(back.x.is_mapped());
    assert_eq!(back.x, data.x);
    assert_eq!(back.y, data.y);
    // read in another precision: converted into memory
    let wide = read_npy::<f64>(&path, None).unwrap();
    assert!(!wide.x.is_mapped());
    assert_eq!(wide.x, data.x.cast::<f64>());
    // labels of other types, as numpy writes them
    let labels = d.join("ints.npy");
    raw(
        &labels,
        "{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }",
        &[-1i64, 1, 7]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect::<Vec<_>>(),
    );
    assert_eq!(read_vector(&labels).unwrap(), vec![-1.0, 1.0, 7.0]);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_fit_on_mapped_rows_is_the_fit_in_memory() {
    let d = dir("fit");
    let data = data32(900, 4, 2);
    let path = write(&d, &data);
    let mapped = read_npy::<f32>(&path, None).unwrap();
    for loss in [Loss::SquaredHinge, Loss::Logistic] {
        let builder = || {
            Joker::builder()
                .loss(loss)
                .c(2.0)
                .n_components(200)
                .block_size(128)
                .max_iter(200)
                .standardize(false)
                // the block order matters to DBCD-TR's iterates, not to the Newton start
                .newton_start(false)
        };
        // mapped rows take blocks of consecutive rows by default
        let est = builder().build().unwrap();
        let consecutive = builder().contiguous_blocks(true).build().unwrap();
        let (a, b) = (consecutive.fit(&data).unwrap(), est.fit(&mapped).unwrap());
        assert_eq!(theta(&a), theta(&b), "{loss:?}");
        assert_eq!(a.training.iterations, b.training.iterations);
        assert_eq!(
            a.decision_function(&data.x).unwrap(),
            b.decision_function(&mapped.x).unwrap()
        );
        // and the shuffled blocks of rows in memory when asked
        let shuffled = builder().contiguous_blocks(false).build().unwrap();
        let (a, b) = (est.fit(&data).unwrap(), shuffled.fit(&mapped).unwrap());
        assert_eq!(theta(&a), theta(&b), "{loss:?}");
        assert_ne!(theta(&a), theta(&consecutive.fit(&data).unwrap()));
    }
    // exact kernels read the mapped rows too
    let est = Joker::builder()
        .loss(Loss::SquaredHinge)
        .exact()
        .max_iter(50)
        .standardize(false)
        .contiguous_blocks(true)
        .build()
        .unwrap();
    let (a, b) = (est.fit(&data).unwrap(), est.fit(&mapped).unwrap());
    assert_eq!(
        a.decision_function(&data.x).unwrap(),
        b.decision_function(&mapped.x).unwrap()
    );
    // standardising would copy the rows into memory: refused, with the way out
    let est = Joker::builder().n_components(50).build().unwrap();
    match est.fit(&mapped) {
        Err(JokerError::InvalidParameter { name, reason }) => {
            assert_eq!(name, "standardize");
            assert!(reason.contains("standardisation off"), "{reason}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    let _ = std::fs::remove_dir_all(&d);
}

/// The message of an I/O error about `path`.
fn io_message(r: joker::Result<impl std::fmt::Debug>, path: &Path) -> String {
    match r {
        Err(JokerError::Io { path: p, source }) => {
            assert_eq!(p, path);
            source.to_string()
        }
        other => panic!(
            "expected an I/O error about {}, got {other:?}",
            path.display()
        ),
    }
}

#[test]
fn malformed_files_are_named_errors() {
    let d = dir("errors");
    let p = d.join("x.npy");
    let body = f32_bytes(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let ok = "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), }";
    raw(&p, ok, &body);
    assert_eq!(
        map_rows::<f32>(&p).unwrap().as_slice(),
        &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    );

    let cases: [(&str, Vec<u8>, &str); 6] = [
        (
            "{'descr': '<i4', 'fortran_order': False, 'shape': (3, 2), }",
            body.clone(),
            "'<i4'",
        ),
        (
            "{'descr': '>f4', 'fortran_order': False, 'shape': (3, 2), }",
            body.clone(),
            "little-endian",
        ),
        (
            "{'descr': '<f4', 'fortran_order': True, 'shape': (3, 2), }",
            body.clone(),
            "Fortran",
        ),
        (
            "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2, 1), }",
            body.clone(),
            "2-D",
        ),
        (ok, body[..20].to_vec(), "truncated"),
        (
            "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), }",
            b"".to_vec(),
            "truncated",
        ),
    ];
    for (dict, data, want) in cases {
        raw(&p, dict, &data);
        let msg = io_message(map_rows::<f32>(&p), &p);
        assert!(msg.contains(want), "{dict}: {msg}");
    }
    // labels of odd types, an empty or non-ASCII type string
    let l = d.join("odd.npy");
    for descr in ["", "\u{e9}4", "<c8", ">i4"] {
        let dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': (2,), }}");
        raw(&l, &dict, &[0u8; 16]);
        assert!(
            io_message(read_vector(&l), &l).contains("labels must be"),
            "{descr}"
        );
    }
    std::fs::write(&p, b"1 1:0.5\n").unwrap();
    assert!(io_message(map_rows::<f32>(&p), &p).contains("not a .npy file"));
    let missing = d.join("none.npy");
    assert!(matches!(
        map_rows::<f32>(&missing),
        Err(JokerError::Io { path, .. }) if path == missing
    ));

    // NaN in the rows
    raw(&p, ok, &f32_bytes(&[1.0, 2.0, 3.0, f32::NAN, 5.0, 6.0]));
    assert!(matches!(
        map_rows::<f32>(&p),
        Err(JokerError::NonFinite { row: 1, col: 1, .. })
    ));

    // labels: missing, of the wrong count, of the wrong shape
    raw(&p, ok, &body);
    let msg = io_message(read_npy::<f32>(&p, None), &p);
    assert!(msg.contains("x.labels.npy"), "{msg}");
    write_vector(&labels_path(&p), &[1.0, -1.0]).unwrap();
    match read_npy::<f32>(&p, None) {
        Err(JokerError::ShapeMismatch(m)) => {
            assert!(m.contains("3 rows") && m.contains("2 labels"), "{m}")
        }
        other => panic!("expected a shape mismatch, got {other:?}"),
    }
    let l = d.join("l.npy");
    raw(&l, ok, &body);
    assert!(io_message(read_npy::<f32>(&p, Some(&l)), &l).contains("1-D"));
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn in_memory_matrices_are_not_mapped() {
    let m = DenseMatrix::new(2, 2, vec![1.0f32, 2.0, 3.0, 4.0]).unwrap();
    assert!(!m.is_mapped());
}

/// Files as numpy writes them read here, and files written here read by numpy, through
/// `$JOKER_PYTHON` (skipped without it, required under `JOKER_REQUIRE_PEERS=1` as `.ci/run`
/// sets).
#[test]
fn numpy_reads_and_writes_the_same_files() {
    let Some(python) = common::peer_python("npy::numpy_reads_and_writes_the_same_files") else {
        return;
    };
    let d = dir("numpy");
    let script = r#"
import sys, numpy as np
d = sys.argv[1]
x = np.arange(12, dtype=np.float32).reshape(4, 3) / 7
np.save(d + "/c32.npy", x)
np.save(d + "/c32.labels.npy", np.array([1, -1, 1, 1], dtype=np.int64))
np.save(d + "/c64.npy", x.astype(np.float64))
np.save(d + "/c64.labels.npy", np.array([True, False, True, True]))
np.save(d + "/f32.npy", np.asfortranarray(x))
np.save(d + "/big.npy", np.zeros((4, 3), dtype=">f4"))
# what joker wrote
y = np.load(d + "/joker.npy", mmap_mode="r")
assert y.dtype == np.float32 and y.flags["C_CONTIGUOUS"], (y.dtype, y.flags)
assert np.array_equal(y, np.array([[0.5, -2.0], [3.25, 1e-3]], dtype=np.float32)), y
l = np.load(d + "/joker.labels.npy")
assert l.dtype == np.float64 and np.array_equal(l, [3.0, -1.5]), l
print("ok")
"#;
    let mut w = RowWriter::create(&d.join("joker.npy"), 2).unwrap();
    w.push(&[0.5, -2.0]).unwrap();
    w.push(&[3.25, 1e-3]).unwrap();
    w.finish().unwrap();
    write_vector(&labels_path(&d.join("joker.npy")), &[3.0, -1.5]).unwrap();
    let out = std::process::Command::new(python)
        .args(["-c", script])
        .arg(&d)
        .output()
        .unwrap();
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("ok"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let want: Vec<f32> = (0..12).map(|v| v as f32 / 7.0).collect();
    let a = read_npy::<f32>(&d.join("c32.npy"), None).unwrap();
    assert!(a.x.is_mapped());
    let Features::Dense(m) = &a.x else { panic!() };
    assert_eq!((m.nrows(), m.ncols()), (4, 3));
    assert_eq!(m.as_slice(), &want[..]);
    assert_eq!(a.y, vec![1.0, -1.0, 1.0, 1.0]);
    let b = read_npy::<f64>(&d.join("c64.npy"), None).unwrap();
    assert!(b.x.is_mapped());
    assert_eq!(b.x, a.x.cast::<f64>());
    assert_eq!(b.y, vec![1.0, 0.0, 1.0, 1.0]);
    assert!(
        io_message(map_rows::<f32>(&d.join("f32.npy")), &d.join("f32.npy")).contains("Fortran")
    );
    assert!(io_message(map_rows::<f32>(&d.join("big.npy")), &d.join("big.npy")).contains("'>f4'"));
    let _ = std::fs::remove_dir_all(&d);
}

/// A model trained with standardisation predicts on mapped rows a chunk at a time (more rows
/// than one chunk here), with the values it gives for the same rows in memory.
#[test]
fn a_standardising_model_predicts_on_mapped_rows_in_chunks() {
    let d = dir("chunks");
    let n = joker::model::MAPPED_CHUNK_ROWS + 1234;
    let data = data32(n, 3, 5);
    let path = write(&d, &data);
    let mapped = read_npy::<f32>(&path, None).unwrap();
    let train = data32(500, 3, 6);
    for precision in [joker::Precision::F32, joker::Precision::F64] {
        let model = Joker::builder()
            .loss(Loss::SquaredHinge)
            .n_components(64)
            .max_iter(30)
            .precision(precision)
            .build()
            .unwrap()
            .fit(&train)
            .unwrap();
        assert!(!model.standardizer.is_identity());
        assert_eq!(
            model.decision_function(&mapped.x).unwrap(),
            model.decision_function(&data.x).unwrap(),
            "{precision:?}"
        );
    }
    let _ = std::fs::remove_dir_all(&d);
}

/// The doubly stochastic solvers sweep mapped rows in file order by default (a sequential
/// read per pass), and a sweep over the same rows in memory gives the same model.
#[test]
fn doubly_stochastic_fits_sweep_mapped_rows() {
    let d = dir("dsg");
    let data = data32(1000, 4, 7);
    let path = write(&d, &data);
    let mapped = read_npy::<f32>(&path, None).unwrap();
    for name in ["dsg", "cdsg"] {
        let cfg = joker::solver::dsg::DsgConfig::named(name).unwrap();
        let est = |sequential: Option<bool>| {
            Joker::builder()
                .loss(Loss::Logistic)
                .n_components(256)
                .max_iter(40)
                .standardize(false)
                .dsg(joker::solver::dsg::DsgConfig {
                    batch_size: 64,
                    sequential,
                    ..cfg.clone()
                })
                .build()
                .unwrap()
        };
        let swept = est(None).fit(&mapped).unwrap();
        let same = est(Some(true)).fit(&data).unwrap();
        assert_eq!(theta(&swept), theta(&same), "{name}");
        let drawn = est(None).fit(&data).unwrap();
        assert_ne!(theta(&swept), theta(&drawn), "{name}");
        assert_eq!(
            theta(&drawn),
            theta(&est(Some(false)).fit(&mapped).unwrap())
        );
    }
    let _ = std::fs::remove_dir_all(&d);
}

/// `bytes` of `<T>` values as a 1-D `.npy` array of type `descr`.
fn raw_vector<T: Copy>(path: &Path, descr: &str, v: &[T], to: impl Fn(T) -> Vec<u8>) {
    let dict = format!(
        "{{'descr': '{descr}', 'fortran_order': False, 'shape': ({},), }}",
        v.len()
    );
    raw(
        path,
        &dict,
        &v.iter().flat_map(|x| to(*x)).collect::<Vec<u8>>(),
    );
}

/// Writes `c` as a directory of CSR arrays (as numpy saves a scipy matrix's) with its labels.
fn write_csr(dir: &Path, c: &joker::CsrMatrix<f32>, y: &[f64], indptr32: bool) {
    std::fs::create_dir_all(dir).unwrap();
    raw_vector(&dir.join("data.npy"), "<f4", c.values(), |v| {
        v.to_le_bytes().to_vec()
    });
    raw_vector(&dir.join("indices.npy"), "<i4", c.indices(), |v| {
        (v as i32).to_le_bytes().to_vec()
    });
    if indptr32 {
        raw_vector(&dir.join("indptr.npy"), "<i4", c.indptr(), |v| {
            (v as i32).to_le_bytes().to_vec()
        });
    } else {
        raw_vector(&dir.join("indptr.npy"), "<i8", c.indptr(), |v| {
            (v as i64).to_le_bytes().to_vec()
        });
    }
    raw_vector(
        &dir.join("shape.npy"),
        "<i8",
        &[c.nrows() as i64, c.ncols() as i64],
        |v| v.to_le_bytes().to_vec(),
    );
    write_vector(&labels_path(dir), y).unwrap();
}

/// Sparse rows mapped from a directory of CSR arrays: the same matrix, the same fit as the
/// rows in memory with the same blocks, and named errors for malformed arrays.
#[test]
fn csr_arrays_map_and_fit_as_in_memory() {
    let d = dir("csr");
    let dense = data32(800, 6, 8);
    let Features::Dense(m) = &dense.x else {
        panic!()
    };
    // a sparse copy: small entries dropped
    let (mut indptr, mut indices, mut values) = (vec![0usize], vec![], vec![]);
    for i in 0..m.nrows() {
        for (j, &v) in m.row(i).iter().enumerate() {
            if v.abs() > 0.3 {
                indices.push(j as u32);
                values.push(v);
            }
        }
        indptr.push(values.len());
    }
    let c = joker::CsrMatrix::new(m.nrows(), m.ncols(), indptr, indices, values).unwrap();
    let data = Dataset::new(Features::Sparse(c.clone()), dense.y.clone()).unwrap();
    for indptr32 in [false, true] {
        let path = d.join(format!("rows-{indptr32}"));
        write_csr(&path, &c, &data.y, indptr32);
        let mapped = read_npy::<f32>(&path, None).unwrap();
        assert!(mapped.x.is_mapped());
        assert_eq!(mapped.x, data.x);
        assert_eq!(mapped.y, data.y);
        let est = Joker::builder()
            .loss(Loss::SquaredHinge)
            .n_components(128)
            .block_size(100)
            .max_iter(100)
            .standardize(false)
            .contiguous_blocks(true)
            .build()
            .unwrap();
        let (a, b) = (est.fit(&data).unwrap(), est.fit(&mapped).unwrap());
        assert_eq!(theta(&a), theta(&b));
        assert_eq!(
            a.decision_function(&data.x).unwrap(),
            b.decision_function(&mapped.x).unwrap()
        );
    }
    let path = d.join("rows-false");
    let ipath = path.join("indices.npy");
    raw_vector(&ipath, "<i8", c.indices(), |v| {
        (v as i64).to_le_bytes().to_vec()
    });
    assert!(io_message(read_npy::<f32>(&path, None), &ipath).contains("'<i4'"));
    let mut bad = c.indices().to_vec();
    bad.swap(0, 1);
    raw_vector(&ipath, "<i4", &bad, |v| (v as i32).to_le_bytes().to_vec());
    match read_npy::<f32>(&path, None) {
        Err(JokerError::ShapeMismatch(m)) => assert!(m.contains("strictly increasing"), "{m}"),
        other => panic!("expected unsorted columns to be refused, got {other:?}"),
    }
    let _ = std::fs::remove_dir_all(&d);
}

/// Damaged files (bits flipped, bytes cut, shapes and types rewritten) come back as a value or
/// an error, never a panic: a deterministic sweep of mutations of a valid rows file and a valid
/// labels file.
#[test]
fn damaged_files_are_errors_not_panics() {
    let d = dir("damage");
    let data = data32(40, 3, 9);
    let path = write(&d, &data);
    let rows = std::fs::read(&path).unwrap();
    let labels = std::fs::read(labels_path(&path)).unwrap();
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = |k: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % k as u64) as usize
    };
    let swaps: [(&str, &str); 6] = [
        ("(40, 3)", "(4611686018427387904, 3)"),
        ("(40, 3)", "(40,)"),
        ("'<f4'", "'<f8'"),
        ("'<f4'", "''"),
        ("(40,)", "(4611686018427387904,)"),
        ("'<f8'", "'|b1'"),
    ];
    for round in 0..600 {
        for (orig, target) in [(&rows, &path), (&labels, &labels_path(&path))] {
            let mut b = orig.clone();
            match round % 4 {
                0 => {
                    let i = next(b.len());
                    b[i] ^= 1 << next(8);
                }
                1 => b.truncate(next(b.len())),
                2 => {
                    let i = next(128.min(b.len()));
                    b[i] = next(256) as u8;
                }
                _ => {
                    let (from, to) = swaps[next(swaps.len())];
                    let text = String::from_utf8_lossy(&b[..128]).replace(from, to);
                    let mut h = text.into_bytes();
                    h.resize(128, b' ');
                    b.splice(..128, h);
                }
            }
            std::fs::write(target, &b).unwrap();
        }
        let _ = map_rows::<f32>(&path);
        let _ = map_rows::<f64>(&path);
        let _ = read_vector(&labels_path(&path));
        let _ = read_npy::<f32>(&path, None);
    }
    let _ = std::fs::remove_dir_all(&d);
}

/// A share of the rows (a rank of a distributed fit) maps those rows and reads only their
/// labels: the shares, in order, are the whole file's rows and labels; bad ranges and CSR
/// directories are refused by name.
#[test]
fn shares_of_the_rows_are_the_rows() {
    let d = dir("shares");
    let data = common::binary(103, 4, 9);
    let data = Dataset::new(data.x.cast::<f32>(), data.y).unwrap();
    let path = write(&d, &data);
    let whole = read_npy::<f32>(&path, None).unwrap();
    assert_eq!(joker::io::npy::npy_rows(&path).unwrap(), 103);
    let mut rows = Vec::new();
    let mut labels = Vec::new();
    for k in 0..4 {
        let share =
            joker::io::npy::read_npy_in::<f32>(&path, None, Some(103 * k / 4..103 * (k + 1) / 4))
                .unwrap();
        assert!(share.x.is_mapped());
        let mut r = vec![0.0f32; share.x.nrows() * 4];
        share.x.gather_range(0, &mut r);
        rows.extend(r);
        labels.extend(share.y);
    }
    let mut all = vec![0.0f32; 103 * 4];
    whole.x.gather_range(0, &mut all);
    assert_eq!(rows, all);
    assert_eq!(labels, whole.y);
    #[allow(clippy::reversed_empty_ranges)]
    let bads = [0..0, 100..104, 5..3];
    for bad in bads {
        let e = joker::io::npy::read_npy_in::<f32>(&path, None, Some(bad.clone())).unwrap_err();
        assert!(e.to_string().contains("range"), "{bad:?}: {e}");
    }
    let _ = std::fs::remove_dir_all(&d);
}

/// Shares of a CSR directory's rows are its rows: the offsets rebased, the indices and values
/// of each share mapped (a share may begin or end at a row with no entries); bad ranges are
/// refused by name.
#[test]
fn shares_of_csr_rows_are_the_rows() {
    let d = dir("csr-shares");
    // 101 sparse rows of 30 columns; every seventh row has no entries
    let mut text = String::new();
    for i in 0..101usize {
        text.push_str(if i % 3 == 0 { "1" } else { "-1" });
        if i % 7 != 0 {
            for j in (i % 5..30).step_by(4 + i % 3) {
                text.push_str(&format!(" {}:{}", j + 1, (i * 31 + j * 7) % 17) as &str);
            }
        }
        text.push('\n');
    }
    let svm = d.join("rows.svm");
    std::fs::write(&svm, text).unwrap();
    let csr = d.join("rows.csr");
    common::write_csr(&svm, &csr);
    let whole = read_npy::<f32>(&csr, None).unwrap();
    assert_eq!(joker::io::npy::npy_rows(&csr).unwrap(), 101);
    let mut all = vec![0.0f32; 101 * 30];
    whole.x.gather_range(0, &mut all);
    for parts in [1, 3, 4, 7] {
        let (mut rows, mut labels) = (Vec::new(), Vec::new());
        for k in 0..parts {
            let range = 101 * k / parts..101 * (k + 1) / parts;
            let share =
                joker::io::npy::read_npy_in::<f32>(&csr, None, Some(range.clone())).unwrap();
            assert!(share.x.is_mapped());
            assert_eq!(share.x.nrows(), range.len());
            let mut r = vec![f32::NAN; range.len() * 30];
            share.x.gather_range(0, &mut r);
            rows.extend(r);
            labels.extend(share.y);
        }
        assert_eq!(rows, all, "{parts} shares");
        assert_eq!(labels, whole.y, "{parts} shares");
    }
    #[allow(clippy::reversed_empty_ranges)]
    let bads = [0..0, 100..102, 5..3];
    for bad in bads {
        let e = joker::io::npy::read_npy_in::<f32>(&csr, None, Some(bad.clone())).unwrap_err();
        assert!(e.to_string().contains("range"), "{bad:?}: {e}");
    }
    let _ = std::fs::remove_dir_all(&d);
}

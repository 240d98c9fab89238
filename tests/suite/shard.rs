//! Sharded reads: the parts of a file, read one by one and put back in order, give exactly
//! the rows of an ordinary read of the whole file, for any number of parts.

use crate::common;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use joker::io::{
    CsvOptions, LabelColumn, LibsvmOptions, Shard, read_csv, read_csv_shard, read_libsvm,
    read_libsvm_shard, shard_range,
};
use joker::rng::Stream;
use joker::{Dataset, Features, JokerError};

/// A file in the temporary directory with a name unique to this process, removed on drop.
struct TempFile(PathBuf);

impl TempFile {
    fn write(name: &str, bytes: &[u8]) -> Self {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let k = COUNTER.fetch_add(1, Ordering::Relaxed);
        let path =
            std::env::temp_dir().join(format!("joker-shard-{}-{k}-{name}", std::process::id()));
        std::fs::write(&path, bytes).unwrap();
        TempFile(path)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A row as (label, column indices, values), whatever the storage.
type Row = (f64, Vec<u32>, Vec<f64>);

fn rows_of(d: &Dataset<f64>) -> Vec<Row> {
    (0..d.len())
        .map(|i| match &d.x {
            Features::Sparse(m) => {
                let (idx, val) = m.row(i);
                (d.y[i], idx.to_vec(), val.to_vec())
            }
            Features::Dense(m) => {
                let row = m.row(i);
                ((d.y[i]), (0..row.len() as u32).collect(), row.to_vec())
            }
        })
        .collect()
}

/// Reads `path` in `count` LIBSVM parts, settles the base and width as ranks would (the
/// smallest and largest index over all parts), and returns the rows in order and the width.
fn libsvm_in_parts(path: &Path, count: usize) -> (Vec<Row>, usize) {
    let parts: Vec<_> = (0..count)
        .map(|index| read_libsvm_shard::<f64>(path, Shard { index, count }).unwrap())
        .collect();
    let min = parts.iter().filter_map(|p| p.min_index()).min();
    let max = parts.iter().filter_map(|p| p.max_index()).max().unwrap();
    let zero_based = min == Some(0);
    let n_features = max as usize + usize::from(zero_based);
    let total: usize = parts.iter().map(|p| p.len()).sum();
    let mut rows = Vec::new();
    for p in parts {
        let labels = p.labels().to_vec();
        match p.finish(zero_based, n_features).unwrap() {
            Some(d) => {
                assert_eq!(d.x.ncols(), n_features);
                assert_eq!(d.y, labels);
                rows.extend(rows_of(&d));
            }
            None => assert!(labels.is_empty()),
        }
    }
    assert_eq!(rows.len(), total);
    (rows, n_features)
}

/// Reads `path` in `count` CSV parts and returns the rows in order; every part reports the
/// width of the whole file.
fn csv_in_parts(path: &Path, opts: &CsvOptions, count: usize, width: usize) -> Vec<Row> {
    let mut rows = Vec::new();
    for index in 0..count {
        let part = read_csv_shard::<f64>(path, opts, Shard { index, count }).unwrap();
        assert_eq!(part.n_features, width, "part {index} of {count}");
        if let Some(d) = part.data {
            assert_eq!(d.x.ncols(), width);
            rows.extend(rows_of(&d));
        }
    }
    rows
}

/// The part counts to try: 1 to 7, and more parts than lines.
fn counts(lines: usize) -> Vec<usize> {
    (1..=7).chain([lines + 3, 2 * lines + 11]).collect()
}

/// A random number as a file would hold it: small integers, decimals, exponents.
fn number(s: &mut Stream) -> String {
    match s.below(4) {
        0 => format!("{}", s.below(10) as i64 - 3),
        1 => format!("{}", (s.uniform() - 0.5) * 20.0),
        2 => format!("{:e}", (s.uniform() - 0.5) * 1e-5),
        _ => format!("{:.3}", s.uniform() * 1000.0),
    }
}

/// A line end: always `\n`, always `\r\n`, always `\r`, or any of them.
fn line_end(s: &mut Stream, style: usize) -> &'static str {
    match if style == 3 { s.below(3) } else { style } {
        0 => "\n",
        1 => "\r\n",
        _ => "\r",
    }
}

/// A random LIBSVM file: lines of very different lengths (label only, or up to 300
/// features), blank lines, comments and `qid:` tokens, with the given line-end style and
/// index base, and a final line end or not. Returns the text and its number of lines.
fn libsvm_text(
    s: &mut Stream,
    n: usize,
    zero_based: bool,
    style: usize,
    final_end: bool,
) -> (String, usize) {
    let mut text = String::new();
    let mut lines = 0;
    for i in 0..n {
        match s.below(10) {
            0 => text.push_str("# a comment line"),
            1 => text.push_str("   "),
            _ => {
                text.push_str(&format!("{}", [-1.0, 1.0, 2.5, 0.0][s.below(4)]));
                if s.below(8) == 0 {
                    text.push_str(" qid:3");
                }
                let nnz = match s.below(4) {
                    0 => 0,
                    1 => 300,
                    _ => s.below(20),
                };
                let mut index = usize::from(!zero_based);
                // The 0-based file has its index 0 on the middle line only.
                if zero_based && i != n / 2 {
                    index += 1;
                }
                for _ in 0..nnz {
                    text.push_str(&format!(" {index}:{}", number(s)));
                    index += 1 + s.below(5);
                }
                if s.below(6) == 0 {
                    text.push_str(" # trailing comment");
                }
            }
        }
        lines += 1;
        if i + 1 < n || final_end {
            text.push_str(line_end(s, style));
        }
    }
    (text, lines)
}

#[test]
fn libsvm_parts_concatenate_to_the_whole_file() {
    let mut s = Stream::new(7, 1);
    for case in 0..16 {
        let zero_based = case % 2 == 1;
        let style = (case / 2) % 4;
        let final_end = case < 12;
        let (mut text, lines) = libsvm_text(&mut s, 40, zero_based, style, final_end);
        if zero_based {
            // Make sure the index 0 is there even if the middle line is blank.
            text.push_str(&format!("{}1 0:1 5:2", line_end(&mut s, style)));
        }
        let t = TempFile::write("random.svm", text.as_bytes());
        let whole = read_libsvm::<f64>(&t.0, &LibsvmOptions::default()).unwrap();
        let want = rows_of(&whole);
        for count in counts(lines) {
            let (got, width) = libsvm_in_parts(&t.0, count);
            assert_eq!(width, whole.x.ncols(), "case {case}, {count} parts");
            assert_eq!(got, want, "case {case}, {count} parts");
        }
    }
}

#[test]
fn one_line_files_in_many_parts() {
    for text in ["1 3:1", "1 3:1\n", "\n\n1 0:2\r\n", "# only\n-1 2:1 4:1\r"] {
        let t = TempFile::write("one.svm", text.as_bytes());
        let whole = read_libsvm::<f64>(&t.0, &LibsvmOptions::default()).unwrap();
        for count in [1, 2, 5, 40] {
            let (got, _) = libsvm_in_parts(&t.0, count);
            assert_eq!(got, rows_of(&whole), "{text:?} in {count} parts");
        }
    }
}

/// A random delimited file of `d` features and a label, with or without a header, blank and
/// comment lines (also before the header), padded and quoted fields, and the given line-end
/// style and final line end.
fn csv_text(
    s: &mut Stream,
    n: usize,
    d: usize,
    delim: &str,
    header: bool,
    style: usize,
    final_end: bool,
) -> String {
    let mut lines: Vec<String> = Vec::new();
    lines.push("# written by the test".into());
    lines.push(String::new());
    if header {
        let names: Vec<String> = (0..=d).map(|k| format!("col{k}")).collect();
        lines.push(names.join(delim));
    }
    for _ in 0..n {
        match s.below(12) {
            0 => lines.push("# comment".into()),
            1 => lines.push(" ".into()),
            _ => {
                let fields: Vec<String> = (0..=d)
                    .map(|_| {
                        let v = number(s);
                        match (delim, s.below(8)) {
                            (" ", _) => v,
                            (_, 0) => format!("\"{v}\""),
                            (_, 1) => format!("  {v} "),
                            _ => v,
                        }
                    })
                    .collect();
                lines.push(fields.join(delim));
            }
        }
    }
    let mut text = String::new();
    let last = lines.len() - 1;
    for (i, l) in lines.iter().enumerate() {
        text.push_str(l);
        if i < last || final_end {
            text.push_str(line_end(s, style));
        }
    }
    text
}

#[test]
fn csv_parts_concatenate_to_the_whole_file() {
    let mut s = Stream::new(11, 2);
    let delims = [",", "\t", ";", " "];
    for case in 0..16 {
        let header = case % 2 == 0;
        let style = (case / 2) % 4;
        let delim = delims[case % 4];
        let final_end = case % 5 != 0;
        let d = 1 + s.below(6);
        let text = csv_text(&mut s, 30, d, delim, header, style, final_end);
        let lines = text.split(['\n', '\r']).count();
        let t = TempFile::write("random.csv", text.as_bytes());
        for label_column in [LabelColumn::Last, LabelColumn::First] {
            let opts = CsvOptions {
                label_column,
                ..Default::default()
            };
            let whole = read_csv::<f64>(&t.0, &opts).unwrap();
            assert_eq!(whole.x.ncols(), d);
            let want = rows_of(&whole);
            for count in counts(lines) {
                let got = csv_in_parts(&t.0, &opts, count, d);
                assert_eq!(got, want, "case {case}, {count} parts:\n{text}");
            }
        }
    }
}

#[test]
fn the_header_is_skipped_only_where_it_is() {
    // Long comments before the header put it in a later part.
    let text = format!(
        "# {}\n\n# {}\r\nx,y\n1,2\n3,4\n5,6",
        "c".repeat(50),
        "d".repeat(50)
    );
    let t = TempFile::write("header.csv", text.as_bytes());
    let whole = read_csv::<f64>(&t.0, &CsvOptions::default()).unwrap();
    assert_eq!(whole.y, vec![2.0, 4.0, 6.0]);
    for count in 1..=20 {
        let got = csv_in_parts(&t.0, &CsvOptions::default(), count, 1);
        assert_eq!(got, rows_of(&whole), "{count} parts");
    }
    // A header alone is no data, for every part alike.
    let t = TempFile::write("header-only.csv", b"# c\nx,y\n");
    for index in 0..3 {
        let r = read_csv_shard::<f64>(&t.0, &CsvOptions::default(), Shard { index, count: 3 });
        assert!(matches!(r, Err(JokerError::EmptyData(_))), "{r:?}");
    }
}

#[test]
fn finish_rejects_indices_that_do_not_fit() {
    let t = TempFile::write("finish.svm", b"1 2:1 7:1\n-1 0:1 3:1\n");
    let part = |index| read_libsvm_shard::<f64>(&t.0, Shard { index, count: 2 }).unwrap();
    let second = part(1);
    assert_eq!((second.min_index(), second.max_index()), (Some(0), Some(3)));
    // Read as 1-based, the index 0 is an error naming the file.
    match second.finish(false, 10) {
        Err(JokerError::Parse { path, reason, .. }) => {
            assert_eq!(path, t.0);
            assert!(reason.contains("feature index 0"), "{reason}");
            assert!(
                reason.contains("of the part starting at byte 10"),
                "{reason}"
            );
        }
        other => panic!("expected a parse error, got {other:?}"),
    }
    // An index at or above the width is an error; below it, fine.
    let r = part(0).finish(true, 7);
    assert!(
        matches!(&r, Err(JokerError::Parse { reason, .. }) if reason.contains("index 7 is out of range")),
        "{r:?}"
    );
    let d = part(0).finish(true, 8).unwrap().unwrap();
    assert_eq!(rows_of(&d), vec![(1.0, vec![2, 7], vec![1.0, 1.0])]);
    let d = part(0).finish(false, 7).unwrap().unwrap();
    assert_eq!(rows_of(&d), vec![(1.0, vec![1, 6], vec![1.0, 1.0])]);
}

#[test]
fn compressed_files_and_bad_parts_are_named_errors() {
    let text = b"1 1:1\n-1 2:1\n";
    let gz = {
        use std::io::Write;
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(text).unwrap();
        e.finish().unwrap()
    };
    let t = TempFile::write("data.svm.gz", &gz);
    let e = read_libsvm_shard::<f64>(&t.0, Shard { index: 0, count: 2 }).unwrap_err();
    assert!(
        matches!(&e, JokerError::InvalidParameter { name: "path", reason }
            if reason.contains("gzip-compressed")
                && reason.contains("needs an uncompressed file on disk")
                && reason.contains("decompress it first")),
        "{e}"
    );
    let e = read_csv_shard::<f64>(&t.0, &CsvOptions::default(), Shard { index: 1, count: 2 });
    assert!(
        matches!(e, Err(JokerError::InvalidParameter { name: "path", .. })),
        "{e:?}"
    );
    let t = TempFile::write("data.svm", text);
    for (index, count) in [(2, 2), (0, 0), (9, 3)] {
        let r = shard_range(&t.0, Shard { index, count });
        assert!(
            matches!(r, Err(JokerError::InvalidParameter { name: "shard", .. })),
            "{r:?}"
        );
        let r = read_libsvm_shard::<f64>(&t.0, Shard { index, count });
        assert!(
            matches!(r, Err(JokerError::InvalidParameter { .. })),
            "{r:?}"
        );
    }
    let r = read_libsvm_shard::<f64>(Path::new("-"), Shard { index: 0, count: 1 });
    assert!(
        matches!(r, Err(JokerError::InvalidParameter { name: "path", .. })),
        "{r:?}"
    );
}

#[test]
fn real_files_in_four_parts() {
    let Some(dir) = common::data_dir("shard::real_files_in_four_parts") else {
        return;
    };
    for name in ["libsvm/a9a", "libsvm/cpusmall_scale"] {
        let path = dir.join(name);
        let whole = read_libsvm::<f64>(&path, &LibsvmOptions::default()).unwrap();
        let (got, width) = libsvm_in_parts(&path, 4);
        assert_eq!(width, whole.x.ncols(), "{name}");
        assert_eq!(got, rows_of(&whole), "{name}");
    }
    let path = dir.join("cadata/cal_housing.data");
    let whole = read_csv::<f64>(&path, &CsvOptions::default()).unwrap();
    assert_eq!(whole.len(), 20_640);
    let got = csv_in_parts(&path, &CsvOptions::default(), 4, 8);
    assert_eq!(got, rows_of(&whole));
}

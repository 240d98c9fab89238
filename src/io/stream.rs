//! Text files read a chunk at a time, pass after pass: the rows of an uncompressed LIBSVM or
//! CSV file without ever holding more than one chunk of them.
//!
//! A [`TextStream`] cuts the file into parts at line boundaries ([`shard_range`](super::shard_range))
//! and parses one part at a time with the readers of the whole file, so the parts' rows, in
//! order, are the file's rows. A LIBSVM file's index base and width are agreed on first (one
//! pass over the file, unless both are given), so that every part's rows have the same
//! columns.

use std::path::{Path, PathBuf};

use super::shard::{Shard, agreed_layout, read_csv_shard, read_libsvm_shard};
use super::{CsvOptions, LibsvmOptions, io_err};
use crate::data::Dataset;
use crate::error::Result;
use crate::scalar::Scalar;

/// The text formats [`TextStream`] reads.
#[derive(Clone, Debug)]
pub enum TextFormat {
    /// LIBSVM / SVMlight lines.
    Libsvm(LibsvmOptions),
    /// Delimited numbers.
    Csv(CsvOptions),
}

/// An uncompressed LIBSVM or CSV file cut into parts of about `chunk` bytes, each read and
/// parsed on its own ([`TextStream::part`]).
#[derive(Clone, Debug)]
pub struct TextStream {
    path: PathBuf,
    format: TextFormat,
    parts: usize,
    /// The data lines, where the first pass over a LIBSVM file counted them.
    rows: Option<usize>,
}

impl TextStream {
    /// The stream of the file at `path` in parts of about `chunk` bytes. A LIBSVM file whose
    /// index base or width is not given is read once here to find them (the smallest and the
    /// largest index), `progress(done, parts)` called after each part.
    ///
    /// # Errors
    /// Those of the sharded readers: standard input and compressed files cannot be cut into
    /// parts, an empty file, a malformed line (named by its part and line).
    pub fn open(
        path: &Path,
        format: &TextFormat,
        chunk: u64,
        mut progress: impl FnMut(usize, usize),
    ) -> Result<TextStream> {
        if super::is_stdin(path) {
            return Err(crate::error::invalid(
                "path",
                "the file is read a part at a time, pass after pass, which standard input \
                 (`-`) cannot be: save the data to a file first (for example `cat > data.svm`), \
                 and give that file",
            ));
        }
        let len = std::fs::metadata(path).map_err(|e| io_err(path, e))?.len();
        let parts = (len / chunk.max(1)).max(1) as usize;
        let mut rows = None;
        let format = match format {
            TextFormat::Libsvm(o) if o.zero_based.is_none() || o.n_features.is_none() => {
                let (mut min, mut max) = (None, None);
                let mut n = 0;
                for k in 0..parts {
                    let part = read_libsvm_shard::<f32>(
                        path,
                        Shard {
                            index: k,
                            count: parts,
                        },
                    )?;
                    min = [min, part.min_index()].into_iter().flatten().min();
                    max = [max, part.max_index()].into_iter().flatten().max();
                    n += part.len();
                    progress(k + 1, parts);
                }
                rows = Some(n);
                let (zero_based, width) = agreed_layout(o, min, max);
                TextFormat::Libsvm(LibsvmOptions {
                    zero_based: Some(zero_based),
                    n_features: Some(width),
                })
            }
            f => f.clone(),
        };
        Ok(TextStream {
            path: path.to_path_buf(),
            format,
            parts,
            rows,
        })
    }

    /// The number of data lines, where opening the stream counted them (a LIBSVM file whose
    /// index base or width was not given); `None` otherwise.
    pub fn rows(&self) -> Option<usize> {
        self.rows
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The number of parts.
    pub fn parts(&self) -> usize {
        self.parts
    }

    /// The rows of part `k` (`None`: a part without data lines) in precision `T`, with the
    /// columns every part shares.
    ///
    /// # Errors
    /// The readers' errors for the part's lines; the file's own errors (empty, not readable).
    pub fn part<T: Scalar>(&self, k: usize) -> Result<Option<Dataset<T>>> {
        let shard = Shard {
            index: k,
            count: self.parts,
        };
        match &self.format {
            TextFormat::Libsvm(o) => {
                let (zero_based, width) = (
                    o.zero_based.expect("agreed in open"),
                    o.n_features.expect("agreed in open"),
                );
                read_libsvm_shard::<T>(&self.path, shard)?.finish(zero_based, width)
            }
            TextFormat::Csv(o) => Ok(read_csv_shard::<T>(&self.path, o, shard)?.data),
        }
    }
}

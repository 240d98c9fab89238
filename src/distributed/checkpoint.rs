//! Checkpoints of a distributed fit, in global row order, so that a fit can resume on any
//! number of ranks.
//!
//! A checkpoint is the dual coefficients: `theta` follows from them (one pass over the rows).
//! At outer step `s` every rank writes the rows `start..end` it holds (in the file's row
//! order) to `alpha-<s>-<start>-<end>.bin`, each file written whole or not at all; when all
//! have, rank 0 writes `checkpoint.json`, which names them, and removes the files of the
//! checkpoint before. The last `checkpoint.json` therefore always names a complete set.
//!
//! File layout: the 8 bytes `JKRALPHA`, then `start`, `end`, the number of target columns
//! `T` and the outer step as little-endian `u64`, then the `(end - start) x T` coefficients,
//! column-major, as little-endian `f64`.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use super::Collective;
use crate::atomic_file::write_atomically;
use crate::error::{JokerError, Result, invalid};

const MAGIC: &[u8; 8] = b"JKRALPHA";
const HEADER: u64 = 8 + 4 * 8;
const MANIFEST: &str = "checkpoint.json";

/// Where and how often a distributed fit writes checkpoints.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CheckpointConfig {
    /// The folder (created if missing).
    pub dir: PathBuf,
    /// Write one every this many outer steps (0: by time only).
    pub every: usize,
    /// Also write one when this many seconds have passed since the last (or the start), as
    /// rank 0's clock says, so that every rank writes the same step.
    #[serde(default)]
    pub seconds: Option<f64>,
}

impl CheckpointConfig {
    /// Fails for a configuration that would never write (no step count and no time) or a time
    /// that is negative or not finite.
    pub fn validate(&self) -> Result<()> {
        match self.seconds {
            None if self.every == 0 => Err(invalid(
                "checkpoint",
                "give a number of outer steps (at least 1) or a number of seconds between checkpoints",
            )),
            Some(s) if !(s >= 0.0 && s.is_finite()) => Err(invalid(
                "checkpoint",
                format!("seconds between checkpoints must be >= 0 and finite, got {s}"),
            )),
            _ => Ok(()),
        }
    }

    /// Whether to write after outer step `outer`, `elapsed` seconds after the last write: the
    /// step count decides alike on every rank, the time as rank 0 sees it (one broadcast, only
    /// when a time is set).
    pub(crate) fn due(&self, outer: usize, elapsed: f64, comm: &dyn Collective) -> Result<bool> {
        let by_steps = self.every > 0 && outer % self.every == 0;
        let Some(s) = self.seconds else {
            return Ok(by_steps);
        };
        let mut due = [f64::from(u8::from(by_steps || elapsed >= s))];
        comm.decide(&mut due)?;
        Ok(due[0] != 0.0)
    }
}

/// The last complete checkpoint's description.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Manifest {
    /// The outer step it was written after.
    pub outer: usize,
    /// Rows over all ranks.
    pub rows: usize,
    /// Target columns.
    pub targets: usize,
    /// The files, each `(start, end, name)`, in row order.
    pub files: Vec<(usize, usize, String)>,
    /// The target columns' intercepts where the fit searches them (shifts of the targets, in
    /// the units the solver sees); empty otherwise, and in checkpoints written without them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub intercept: Vec<f64>,
}

fn io_err(path: &Path, source: std::io::Error) -> JokerError {
    JokerError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn file_name(outer: usize, start: usize, end: usize) -> String {
    format!("alpha-{outer}-{start}-{end}.bin")
}

/// Writes this rank's coefficients (`alpha`: `(end - start) x T`, column-major) for outer step
/// `outer`, then, once every rank has, the manifest (rank 0) with the target columns'
/// intercepts (`intercept`, the same on every rank; empty without them). Every rank calls it.
pub fn write(
    cfg: &CheckpointConfig,
    comm: &dyn Collective,
    (start, outer, targets): (usize, usize, usize),
    (alpha, intercept): (&[f64], &[f64]),
) -> Result<()> {
    let rows = alpha.len() / targets.max(1);
    let end = start + rows;
    std::fs::create_dir_all(&cfg.dir).map_err(|e| io_err(&cfg.dir, e))?;
    let name = file_name(outer, start, end);
    write_atomically(&cfg.dir.join(&name), |w| {
        w.write_all(MAGIC)?;
        for v in [start, end, targets, outer] {
            w.write_all(&(v as u64).to_le_bytes())?;
        }
        for a in alpha {
            w.write_all(&a.to_le_bytes())?;
        }
        Ok(())
    })?;
    // every rank's part, in rank order (which is row order)
    let parts = comm.gather(&[start as f64, end as f64])?;
    if comm.rank() == 0 {
        let files: Vec<(usize, usize, String)> = parts
            .iter()
            .map(|p| {
                (
                    p[0] as usize,
                    p[1] as usize,
                    file_name(outer, p[0] as usize, p[1] as usize),
                )
            })
            .collect();
        let old = read_manifest(&cfg.dir).ok().flatten();
        let manifest = Manifest {
            outer,
            rows: files.last().map_or(0, |f| f.1),
            targets,
            files,
            intercept: intercept.to_vec(),
        };
        let path = cfg.dir.join(MANIFEST);
        write_atomically(&path, |w| {
            serde_json::to_writer_pretty(&mut *w, &manifest).map_err(std::io::Error::other)
        })?;
        if let Some(old) = old.filter(|o| o.outer != outer) {
            for (_, _, f) in old.files {
                let _ = std::fs::remove_file(cfg.dir.join(f));
            }
        }
    }
    // no rank goes on (and maybe fails) before the manifest is written
    comm.sum(&mut [0.0])?;
    Ok(())
}

/// The manifest of the last complete checkpoint in `dir`, if there is one.
pub fn read_manifest(dir: &Path) -> Result<Option<Manifest>> {
    let path = dir.join(MANIFEST);
    match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| JokerError::ModelFormat(format!("{}: {e}", path.display()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_err(&path, e)),
    }
}

/// The coefficients of rows `start..start + rows` (`rows x T`, column-major) from the last
/// complete checkpoint in `dir`, whatever the number of ranks that wrote it; with the
/// checkpoint's outer step and intercepts (empty where it has none).
pub fn read(
    dir: &Path,
    start: usize,
    rows: usize,
    targets: usize,
) -> Result<(Vec<f64>, usize, Vec<f64>)> {
    let m = read_manifest(dir)?.ok_or_else(|| JokerError::Io {
        path: dir.join(MANIFEST),
        source: std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "no complete checkpoint here (checkpoint.json is missing)",
        ),
    })?;
    let end = start + rows;
    if m.targets != targets || end > m.rows {
        return Err(JokerError::ShapeMismatch(format!(
            "the checkpoint in {} holds {} rows and {} target columns; this fit has rows {start}..{end} of {} target columns",
            dir.display(),
            m.rows,
            m.targets,
            targets
        )));
    }
    let mut alpha = vec![0.0; rows * targets];
    let mut covered = 0;
    for (fs, fe, name) in &m.files {
        let (lo, hi) = ((*fs).max(start), (*fe).min(end));
        if lo >= hi {
            continue;
        }
        let path = dir.join(name);
        let mut f = std::fs::File::open(&path).map_err(|e| io_err(&path, e))?;
        let mut head = [0u8; HEADER as usize];
        f.read_exact(&mut head).map_err(|e| io_err(&path, e))?;
        let word = |k: usize| u64::from_le_bytes(head[8 + 8 * k..16 + 8 * k].try_into().unwrap());
        if &head[..8] != MAGIC
            || word(0) as usize != *fs
            || word(1) as usize != *fe
            || word(2) as usize != targets
        {
            return Err(JokerError::ModelFormat(format!(
                "{}: not the checkpoint file its manifest names",
                path.display()
            )));
        }
        let n_file = fe - fs;
        let mut buf = vec![0u8; (hi - lo) * 8];
        for t in 0..targets {
            let at = HEADER + 8 * (t * n_file + (lo - fs)) as u64;
            f.seek(SeekFrom::Start(at)).map_err(|e| io_err(&path, e))?;
            f.read_exact(&mut buf).map_err(|e| io_err(&path, e))?;
            for (k, c) in buf.chunks_exact(8).enumerate() {
                alpha[t * rows + (lo - start) + k] = f64::from_le_bytes(c.try_into().unwrap());
            }
        }
        covered += hi - lo;
    }
    if covered != rows {
        return Err(JokerError::ModelFormat(format!(
            "the checkpoint in {} does not cover rows {start}..{end}",
            dir.display()
        )));
    }
    if !(m.intercept.is_empty() || m.intercept.len() == targets) {
        return Err(JokerError::ModelFormat(format!(
            "the checkpoint in {} holds {} intercepts for {targets} target columns",
            dir.display(),
            m.intercept.len()
        )));
    }
    Ok((alpha, m.outer, m.intercept))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::distributed::{Single, Threads};

    #[test]
    fn written_on_three_ranks_read_on_two() {
        let dir = std::env::temp_dir().join(format!("joker-ckpt-{}", std::process::id()));
        let cfg = CheckpointConfig {
            dir: dir.clone(),
            every: 1,
            seconds: None,
        };
        let (n, tt) = (10usize, 2usize);
        // the coefficient of row i, column t
        let value = |i: usize, t: usize, step: usize| (i * 10 + t) as f64 + 0.25 + step as f64;
        let cuts = [0, 3, 7, 10];
        for step in [1, 2] {
            let group = Threads::group(3);
            std::thread::scope(|s| {
                for c in &group {
                    let cfg = &cfg;
                    s.spawn(move || {
                        let (a, b) = (cuts[c.rank()], cuts[c.rank() + 1]);
                        let alpha: Vec<f64> = (0..tt)
                            .flat_map(|t| (a..b).map(move |i| value(i, t, step)))
                            .collect();
                        let b0 = [0.5 * step as f64, -1.25];
                        write(cfg, c, (a, step, tt), (&alpha, &b0)).unwrap();
                    });
                }
            });
        }
        // the first checkpoint's files are gone, the second's are named
        assert!(!dir.join(file_name(1, 0, 3)).exists());
        let m = read_manifest(&dir).unwrap().unwrap();
        assert_eq!((m.outer, m.rows, m.targets), (2, n, tt));
        for (start, rows) in [(0, 5), (5, 5), (2, 6)] {
            let (alpha, outer, intercept) = read(&dir, start, rows, tt).unwrap();
            assert_eq!(outer, 2);
            assert_eq!(intercept, [1.0, -1.25]);
            for t in 0..tt {
                for k in 0..rows {
                    assert_eq!(alpha[t * rows + k], value(start + k, t, 2));
                }
            }
        }
        assert!(matches!(
            read(&dir, 8, 5, tt),
            Err(JokerError::ShapeMismatch(_))
        ));
        assert!(read(&dir, 0, 3, 1).is_err());
        let _ = Single;
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(matches!(read(&dir, 0, 1, 1), Err(JokerError::Io { .. })));
    }
}

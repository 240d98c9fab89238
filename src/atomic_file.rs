//! Files replaced whole or not at all.
//!
//! Every file joker writes (model files, predictions, converted data) goes to a temporary file
//! in the target's folder, is flushed to the disk and then renamed over the target. A failure
//! at any point (a full disk, a closed pipe, a serialisation error) leaves the old file as it
//! was and removes the temporary one; the error names the target path.
//!
//! Only regular files are replaced. A target that is a device, a pipe or a socket (`/dev/null`,
//! `/dev/stdout`, a FIFO) is written in place: a rename would put a regular file where the
//! device was, and for `/dev/null` under root every later reader of it would read our output.
//! A symbolic link is followed, so the file it points to is replaced and the link stays.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{JokerError, Result};

/// Writes `path` through `write`, atomically: readers see the old content or the new one,
/// never a part.
pub fn write_atomically(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<()> {
    let err = |source| JokerError::Io {
        path: path.to_path_buf(),
        source,
    };
    let target = match std::fs::metadata(path) {
        Ok(meta) if meta.is_dir() => {
            return Err(err(std::io::Error::new(
                std::io::ErrorKind::IsADirectory,
                "is a folder, not a file",
            )));
        }
        Ok(meta) if !meta.is_file() => return write_in_place(path, write).map_err(err),
        Ok(_) => std::fs::canonicalize(path).map_err(err)?,
        Err(_) => path.to_path_buf(),
    };
    let path = target.as_path();
    let (tmp, file) = create_temporary(path).map_err(err)?;
    let written = (|| {
        let mut w = BufWriter::new(file);
        write(&mut w)?;
        let file = w.into_inner().map_err(|e| e.into_error())?;
        if let Ok(meta) = std::fs::metadata(path) {
            // keep the permissions of the file being replaced
            file.set_permissions(meta.permissions())?;
        }
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(err(e));
    }
    Ok(())
}

/// Writes into an existing file that is not a regular one (a device, a pipe), which cannot be
/// replaced and has no old content to keep.
fn write_in_place(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let mut w = BufWriter::new(OpenOptions::new().write(true).open(path)?);
    write(&mut w)?;
    w.flush()
}

/// A new file beside `path` (same folder, so the rename stays on one file system), named
/// after it and hidden: `.name.<pid>.<k>.tmp`.
fn create_temporary(path: &Path) -> std::io::Result<(PathBuf, File)> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a file name"))?;
    loop {
        let k = COUNTER.fetch_add(1, Ordering::Relaxed);
        let mut tmp_name = std::ffi::OsString::from(".");
        tmp_name.push(name);
        tmp_name.push(format!(".{}.{k}.tmp", std::process::id()));
        let tmp = dir.join(tmp_name);
        match OpenOptions::new().write(true).create_new(true).open(&tmp) {
            Ok(f) => return Ok((tmp, f)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("joker-atomic-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn leftovers(dir: &Path) -> Vec<String> {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".tmp"))
            .collect()
    }

    #[test]
    fn a_failed_write_leaves_the_old_file_and_no_temporary() {
        let d = scratch("fail");
        let p = d.join("model.json");
        std::fs::write(&p, "old content").unwrap();
        let e = write_atomically(&p, |w| {
            w.write_all(b"half of the new")?;
            Err(std::io::Error::other("disk full"))
        })
        .unwrap_err();
        assert!(e.to_string().contains("model.json"), "{e}");
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "old content");
        assert!(leftovers(&d).is_empty(), "{:?}", leftovers(&d));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_successful_write_replaces_the_file() {
        let d = scratch("ok");
        let p = d.join("out.txt");
        std::fs::write(&p, "old").unwrap();
        write_atomically(&p, |w| w.write_all(b"new\n")).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "new\n");
        let q = d.join("fresh.txt");
        write_atomically(&q, |w| w.write_all(b"x")).unwrap();
        assert_eq!(std::fs::read_to_string(&q).unwrap(), "x");
        assert!(leftovers(&d).is_empty());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_device_is_written_in_place_not_replaced() {
        use std::os::unix::fs::FileTypeExt;
        let null = Path::new("/dev/null");
        let before = std::fs::metadata(null).unwrap().file_type();
        write_atomically(null, |w| w.write_all(b"not kept")).unwrap();
        let after = std::fs::metadata(null).unwrap().file_type();
        assert_eq!(before.is_char_device(), after.is_char_device());
        assert!(!after.is_file(), "/dev/null became a regular file");
    }

    #[test]
    fn a_fifo_receives_the_bytes_and_stays_a_fifo() {
        use std::os::unix::fs::FileTypeExt;
        let d = scratch("fifo");
        let p = d.join("pipe");
        let made = std::process::Command::new("mkfifo")
            .arg(&p)
            .status()
            .unwrap();
        assert!(made.success());
        // the reader reports through a channel, so that a writer that replaced the pipe (and
        // so never opened it) fails the test instead of leaving it waiting
        let (tx, rx) = std::sync::mpsc::channel();
        {
            let p = p.clone();
            std::thread::spawn(move || tx.send(std::fs::read(&p).unwrap()));
        }
        write_atomically(&p, |w| w.write_all(b"through the pipe")).unwrap();
        let got = rx.recv_timeout(std::time::Duration::from_secs(20));
        assert_eq!(got.as_deref(), Ok(&b"through the pipe"[..]));
        assert!(std::fs::symlink_metadata(&p).unwrap().file_type().is_fifo());
        assert!(leftovers(&d).is_empty(), "{:?}", leftovers(&d));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_link_is_followed_and_kept() {
        let d = scratch("link");
        let real = d.join("real.json");
        let link = d.join("link.json");
        std::fs::write(&real, "old").unwrap();
        std::os::unix::fs::symlink(&real, &link).unwrap();
        write_atomically(&link, |w| w.write_all(b"new")).unwrap();
        assert!(
            std::fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(std::fs::read_to_string(&real).unwrap(), "new");
        assert!(leftovers(&d).is_empty());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_folder_is_refused_and_left_alone() {
        let d = scratch("dir");
        let e = write_atomically(&d, |w| w.write_all(b"x")).unwrap_err();
        assert!(e.to_string().contains("folder"), "{e}");
        assert!(d.is_dir());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_missing_folder_is_an_error_naming_the_path() {
        let p = std::env::temp_dir().join("joker-no-such-folder-x7/model.json");
        let e = write_atomically(&p, |w| w.write_all(b"x")).unwrap_err();
        assert!(e.to_string().contains("joker-no-such-folder-x7"), "{e}");
    }
}

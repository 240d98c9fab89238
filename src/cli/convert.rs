//! `joker convert`: LIBSVM or CSV text into `.npy` rows (dense, or a directory of CSR arrays)
//! and labels, one chunk at a time.

use joker::io::npy::{CSR_FILES, Layout, convert, labels_path};

use super::args::ConvertArgs;
use super::progress::{end_line, progress_line};
use super::{CliError, CliResult, fail, refuse_overwriting_inputs, text_format};

/// Runs `joker convert`.
pub fn run(a: ConvertArgs) -> CliResult<()> {
    if a.csr {
        return run_csr(&a);
    }
    let rows = a
        .output
        .clone()
        .unwrap_or_else(|| a.input.with_extension("npy"));
    let labels = labels_path(&rows);
    if rows.extension().is_none_or(|e| e != "npy") {
        return fail(format!(
            "the rows file {} should end in .npy (its labels go to {})",
            rows.display(),
            labels.display()
        ));
    }
    for out in [&rows, &labels] {
        refuse_overwriting_inputs(out, "output file", &[("data file", &a.input)], false)?;
        if out.exists() && !a.force {
            return fail(format!(
                "{} exists; give --force to overwrite it",
                out.display()
            ));
        }
    }
    let start = std::time::Instant::now();
    let (n, d) = convert_with_progress(&a, &rows, Layout::Dense)?;
    println!(
        "wrote {n} rows of {d} float32 values to {} and their labels to {} in {:.1} s",
        rows.display(),
        labels.display(),
        start.elapsed().as_secs_f64()
    );
    Ok(())
}

/// `joker convert --csr`: a directory of CSR arrays. An existing directory is replaced with
/// `--force` only when it holds nothing but the files a conversion writes.
fn run_csr(a: &ConvertArgs) -> CliResult<()> {
    let dir = a
        .output
        .clone()
        .unwrap_or_else(|| a.input.with_extension("csr"));
    if dir.extension().is_some_and(|e| e == "npy") {
        return fail(format!(
            "{} ends in .npy; with --csr the output is a directory of CSR arrays",
            dir.display()
        ));
    }
    refuse_overwriting_inputs(&dir, "output directory", &[("data file", &a.input)], false)?;
    if dir.exists() {
        if !a.force {
            return fail(format!(
                "{} exists; give --force to replace it",
                dir.display()
            ));
        }
        let ours = std::fs::read_dir(&dir)
            .map_err(|e| CliError::Message(format!("cannot read {}: {e}", dir.display())))?
            .all(|e| {
                e.is_ok_and(|e| {
                    CSR_FILES.iter().any(|f| e.file_name() == *f)
                        && e.file_type().is_ok_and(|t| t.is_file())
                })
            });
        if !ours {
            return fail(format!(
                "{} holds other files than a conversion's ({}); refusing to replace it",
                dir.display(),
                CSR_FILES.join(", ")
            ));
        }
        std::fs::remove_dir_all(&dir)
            .map_err(|e| CliError::Message(format!("cannot remove {}: {e}", dir.display())))?;
    }
    let start = std::time::Instant::now();
    let (n, d) = convert_with_progress(a, &dir, Layout::Csr)?;
    println!(
        "wrote {n} rows of {d} columns as CSR arrays (float32 values) and their labels to {} in {:.1} s",
        dir.display(),
        start.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The conversion, with the chunks counted on standard error unless `--quiet`.
fn convert_with_progress(
    a: &ConvertArgs,
    out: &std::path::Path,
    layout: Layout,
) -> CliResult<(usize, usize)> {
    let format = text_format(&a.input, &a.data, a.n_features, None)?;
    let quiet = a.quiet;
    let done = convert(
        &a.input,
        &format,
        out,
        layout,
        a.chunk_mib.max(1) << 20,
        |done, total| {
            if !quiet {
                progress_line(&format!("converting: {done}/{total} chunks"));
            }
        },
    )?;
    end_line();
    Ok(done)
}

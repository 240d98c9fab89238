//! `joker convert`: LIBSVM or CSV text into `.npy` rows and labels, one chunk at a time.

use std::io::Write;

use joker::io::npy::{TextFormat, convert, labels_path};
use joker::io::{CsvOptions, LibsvmOptions, looks_like_libsvm_file};

use super::args::{ConvertArgs, FormatArg};
use super::{CliResult, data_format, fail, refuse_overwriting_inputs};

/// Runs `joker convert`.
pub fn run(a: ConvertArgs) -> CliResult<()> {
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
    let format = text_format(&a)?;
    let quiet = a.quiet;
    let start = std::time::Instant::now();
    let (n, d) = convert(
        &a.input,
        &format,
        &rows,
        a.chunk_mib.max(1) << 20,
        |done, total| {
            if !quiet {
                eprint!("\rconverting: {done}/{total} chunks");
                let _ = std::io::stderr().flush();
            }
        },
    )?;
    if !quiet {
        eprintln!();
    }
    println!(
        "wrote {n} rows of {d} float32 values to {} and their labels to {} in {:.1} s",
        rows.display(),
        labels.display(),
        start.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The input's format, from the options or the first data line.
fn text_format(a: &ConvertArgs) -> CliResult<TextFormat> {
    let libsvm = LibsvmOptions {
        zero_based: a.data.index_base,
        n_features: a.n_features,
    };
    let csv = CsvOptions {
        label_column: a.data.label_column.unwrap_or_default(),
        ..CsvOptions::default()
    };
    Ok(match data_format(&a.input, &a.data, a.n_features)? {
        FormatArg::Npy => return fail("the input is already .npy"),
        FormatArg::Libsvm => TextFormat::Libsvm(libsvm),
        FormatArg::Csv => TextFormat::Csv(csv),
        FormatArg::Auto if looks_like_libsvm_file(&a.input)? => TextFormat::Libsvm(libsvm),
        FormatArg::Auto => TextFormat::Csv(csv),
    })
}

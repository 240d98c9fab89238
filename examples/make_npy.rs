//! Writes a seeded synthetic classification set as `.npy` rows and labels (see `joker::io::npy`),
//! in rows generated and written a chunk at a time, so that files larger than memory can be
//! made for the out-of-core measurements (docs/out-of-core.md).
//!
//! The rows are 784-dimensional like MNIST's (any dimension can be asked for): a point `z` of
//! an 8-dimensional standard normal is embedded by a fixed random `d x 8` map, and uniform
//! noise of width 0.5 is added to each coordinate; the label is `+1` outside the sphere
//! `|z|^2 = 8` (a little under half the points) and `-1` inside, flipped for 2% of the rows.
//! A Gaussian kernel separates the classes up to the flips.
//!
//! ```text
//! cargo run --release --example make_npy -- ROWS.npy --rows 12000000 --dim 784 --seed 1
//! cargo run --release --example make_npy -- ROWS.csv --csv --rows 1000000 --dim 28
//! ```
//!
//! With `--csv` the same rows are written as text, one line per row with the label last (the
//! streamed fits of `joker train --stream`).

use std::io::Write;
use std::path::PathBuf;

use joker::io::npy::{RowWriter, labels_path, write_vector};
use joker::rng::Stream;
use rayon::prelude::*;

const LATENT: usize = 8;

/// Where the rows go: `.npy` rows (labels beside them) or CSV text (rows written so far).
enum Sink {
    Npy(RowWriter),
    Csv(std::io::BufWriter<std::fs::File>, usize),
}
const CHUNK: usize = 1 << 14;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (mut out, mut rows, mut dim, mut seed) = (None, 1_000_000usize, 784usize, 1u64);
    let mut csv = false;
    while let Some(a) = args.next() {
        let mut value = || args.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--rows" => rows = value()?.parse()?,
            "--dim" => dim = value()?.parse()?,
            "--seed" => seed = value()?.parse()?,
            "--csv" => csv = true,
            _ if out.is_none() => out = Some(PathBuf::from(a)),
            _ => return Err(format!("unexpected argument {a}").into()),
        }
    }
    let out = out.ok_or("give the rows file to write (NAME.npy)")?;
    // the embedding is the same for every seed: train and test sets share it
    let mut e = Stream::new(0x5EED, 1);
    let embed: Vec<f64> = (0..dim * LATENT)
        .map(|_| (e.uniform() - 0.5) * (12.0 / LATENT as f64).sqrt())
        .collect();
    let mut w = match csv {
        true => Sink::Csv(std::io::BufWriter::new(std::fs::File::create(&out)?), 0),
        false => Sink::Npy(RowWriter::create(&out, dim)?),
    };
    let mut labels = Vec::with_capacity(rows);
    let start = std::time::Instant::now();
    for c in 0..rows.div_ceil(CHUNK) {
        let len = CHUNK.min(rows - c * CHUNK);
        let block: Vec<(Vec<f32>, f64)> = (0..len)
            .into_par_iter()
            .map(|r| {
                let i = (c * CHUNK + r) as u64;
                let mut s = Stream::new(seed.wrapping_mul(0x9E37_79B9).wrapping_add(i), 7);
                let z: Vec<f64> = (0..LATENT)
                    .map(|_| {
                        // Box-Muller
                        let (u, v) = (s.uniform(), s.uniform());
                        (-2.0 * (1.0 - u).ln()).sqrt() * (std::f64::consts::TAU * v).cos()
                    })
                    .collect();
                let row = (0..dim)
                    .map(|j| {
                        let dot: f64 = (0..LATENT).map(|k| embed[j * LATENT + k] * z[k]).sum();
                        (dot + s.uniform() - 0.5) as f32
                    })
                    .collect();
                let outside = z.iter().map(|v| v * v).sum::<f64>() > LATENT as f64;
                let flip = s.uniform() < 0.02;
                (row, if outside != flip { 1.0 } else { -1.0 })
            })
            .collect();
        match &mut w {
            Sink::Npy(w) => {
                for (row, y) in &block {
                    w.push(row)?;
                    labels.push(*y);
                }
            }
            Sink::Csv(out, count) => {
                let text: Vec<String> = block
                    .par_iter()
                    .map(|(row, y)| {
                        let mut line = String::with_capacity(row.len() * 10);
                        for v in row {
                            line.push_str(&format!("{v:.5},"));
                        }
                        line.push_str(if *y > 0.0 { "1\n" } else { "-1\n" });
                        line
                    })
                    .collect();
                for line in text {
                    out.write_all(line.as_bytes())?;
                }
                *count += block.len();
            }
        }
        if c % 64 == 0 {
            eprint!(
                "\r{} of {rows} rows, {:.0} s",
                c * CHUNK + len,
                start.elapsed().as_secs_f64()
            );
        }
    }
    let n = match w {
        Sink::Npy(w) => {
            let n = w.finish()?;
            write_vector(&labels_path(&out), &labels)?;
            n
        }
        Sink::Csv(mut out, count) => {
            out.flush()?;
            count
        }
    };
    eprintln!(
        "\rwrote {n} rows of {dim} to {} in {:.0} s",
        out.display(),
        start.elapsed().as_secs_f64()
    );
    Ok(())
}

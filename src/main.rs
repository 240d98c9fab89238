//! `joker`: train and apply large-scale kernel machines from the command line.
//!
//! ```text
//! joker train -l svc -c 32 -m 10000 a9a a9a.model
//! joker predict a9a.t a9a.model a9a.predictions
//! joker info a9a.model
//! joker convert higgs.svm higgs.npy
//! joker demo
//! ```
//!
//! Every failure is reported as `error: <message>` on stderr with exit status 1; malformed
//! command lines get clap's usage message and exit status 2.

mod cli;

use std::process::ExitCode;

use clap::Parser;

use cli::args::{Cli, Command};
use cli::{CliError, report};

fn main() -> ExitCode {
    // A panic is a bug; report it like any other error instead of a backtrace.
    std::panic::set_hook(Box::new(|info| {
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into());
        let at = info
            .location()
            .map_or(String::new(), |l| format!(" at {}:{}", l.file(), l.line()));
        eprintln!("error: internal error (please report this bug): {msg}{at}");
    }));
    let args = Cli::parse();
    let result = std::panic::catch_unwind(move || match args.command {
        Command::Train(a) => cli::train::run(a),
        Command::Predict(a) => cli::predict::run(a),
        Command::Info(a) => cli::info::run(a),
        Command::Convert(a) => cli::convert::run(a),
        Command::Demo(a) => cli::demo::run(a),
    });
    match result {
        Ok(Ok(())) => ExitCode::SUCCESS,
        // A closed pipe (`joker predict ... | head`) is not worth a message.
        Ok(Err(CliError::BrokenPipe)) => ExitCode::SUCCESS,
        Ok(Err(CliError::Message(m))) => {
            report(&m);
            ExitCode::FAILURE
        }
        // The hook has printed the message.
        Err(_) => ExitCode::FAILURE,
    }
}

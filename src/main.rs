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

use std::alloc::{GlobalAlloc, Layout, System};
use std::process::ExitCode;

use clap::Parser;

use cli::args::{Cli, Command};
use cli::{CliError, report};

/// The system allocator, with a refused allocation turned into an error message and exit
/// status 1 instead of the standard library's abort (status 134). The library reserves its
/// large buffers fallibly and reports them as errors; this catches any buffer that is not, for
/// example a per-feature vector of a file with a feature index of 1e9 under `--max-memory 0`.
struct ExitOnRefusal;

/// Writes `error: cannot allocate N bytes ...` to stderr and ends the process with status 1,
/// without allocating (the allocator has just refused).
fn refused(size: usize) -> ! {
    let mut msg = [0u8; 256];
    let mut len = 0;
    let mut put = |bytes: &[u8]| {
        let n = bytes.len().min(msg.len() - len);
        msg[len..len + n].copy_from_slice(&bytes[..n]);
        len += n;
    };
    put(b"\nerror: memory: cannot allocate ");
    let mut digits = [0u8; 20];
    let mut k = digits.len();
    let mut v = size;
    loop {
        k -= 1;
        digits[k] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    put(&digits[k..]);
    put(b" bytes: the system refused the allocation (lower the data size, -m or --n, or set --max-memory to be told before the fit starts)\n");
    // SAFETY: `msg[..len]` is initialised memory that lives across the call; `write` and
    // `_exit` are async-signal-safe and do not allocate.
    unsafe {
        libc::write(2, msg.as_ptr().cast(), len);
        libc::_exit(1)
    }
}

// SAFETY: every method forwards to `System` with the same arguments, so the allocator's
// contract is `System`'s; only a null result (a refusal) is handled, by ending the process.
unsafe impl GlobalAlloc for ExitOnRefusal {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's layout (non-zero size, as `alloc` requires).
        let p = unsafe { System.alloc(layout) };
        if p.is_null() && !joker::memory::in_fallible_allocation() {
            refused(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as in `alloc`.
        let p = unsafe { System.alloc_zeroed(layout) };
        if p.is_null() && !joker::memory::in_fallible_allocation() {
            refused(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator, that is from `System`, with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` came from `System` with `layout`; the caller upholds `new_size`'s rules.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if p.is_null() && !joker::memory::in_fallible_allocation() {
            refused(new_size);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: ExitOnRefusal = ExitOnRefusal;

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

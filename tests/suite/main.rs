//! The integration tests, one module per subject in one test binary: each binary would compile
//! the library's generic solvers again, so one binary builds several times faster than one per
//! file. Run a subject alone with its module path, e.g.
//! `cargo test --release --test suite -- real_data:: --nocapture`.
//! The MPI tests (`tests/mpi.rs`) stay a binary of their own: they need the `mpi` feature.

#[path = "../common/mod.rs"]
mod common;

mod api;
mod cli;
mod distributed;
mod dsg;
mod gpu;
mod header;
mod io;
mod krr;
mod multiclass;
mod npy;
mod nystrom;
mod proba;
mod readme_snippets;
mod real_data;
mod shard;
mod solver;
mod tr_vectors;

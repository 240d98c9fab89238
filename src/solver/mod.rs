//! Solvers: the DBCD-TR outer loop ([`dbcd`]) and its block solver ([`trust_region`]), plus
//! the decision function they share with prediction ([`decision`]).

pub mod dbcd;
pub mod decision;
pub mod krr;
pub mod trust_region;

pub use dbcd::{Progress, Solution, SolverConfig, StopReason, Timings};
pub use trust_region::{RadiusRule, TrustRegion};

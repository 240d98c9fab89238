//! Solvers: the DBCD-TR outer loop ([`dbcd`]) and its block solver ([`trust_region`]), and
//! full kernel ridge regression ([`krr`]); the doubly stochastic gradient solvers DSG,
//! UDSG and CDSG ([`dsg`]). The decision function they share with prediction
//! is [`crate::backend::predict`].

pub mod dbcd;
pub mod dsg;
pub mod krr;
pub mod trust_region;

pub use dbcd::pbm::{Combine, PbmConfig};
pub use dbcd::{Progress, Solution, SolverConfig, StopReason, Timings, WorkingSet};
pub use dsg::{DsgConfig, DsgVariant, StepSize};
pub use trust_region::{RadiusRule, TrModel, TrNorm, TrustRegion};

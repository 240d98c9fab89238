//! # joker: large-scale kernel machines
//!
//! Joker solves the dual of a regularised kernel machine,
//! `min_a 1/2 a^T K a + sum_i f_i(a_i)` over a box, by dual block coordinate descent with a
//! trust region (DBCD-TR) and a truncated, box-aware CG-Steihaug inner solver, over exact
//! kernels or random Fourier features (Zhang and Lai, ICML 2025).

#![warn(missing_docs)]
// `!(x > 0.0)` is used on purpose throughout: it is true for NaN, which must fail every
// positivity check; `x <= 0.0` would let NaN through.
#![allow(clippy::neg_cmp_op_on_partial_ord)]

pub mod data;
pub mod error;
pub mod io;
pub mod rng;
pub mod scalar;
#[doc(hidden)]
pub mod simd;

pub use data::{CsrMatrix, Dataset, DenseMatrix, Features};
pub use error::{JokerError, Result};
pub use scalar::Scalar;
pub mod atomic_file;
pub mod backend;
pub mod calibration;
pub mod device;
pub mod distributed;
pub mod estimator;
pub mod features;
#[doc(hidden)]
pub mod ffi;
pub mod kernel;
#[doc(hidden)]
pub mod linalg;
pub mod loss;
pub mod memory;
pub mod model;
pub mod nystrom;
pub mod preprocess;
pub mod solver;

pub use device::Device;
pub use estimator::{
    AUTO_EPSILON, ClassWeight, FitOptions, GrowthStage, Joker, JokerBuilder, ReadingFn, SearchGrid,
};
pub use features::{Centers, FeatureKind};
pub use kernel::{Bandwidth, Kernel, KernelKind, MaternNu};
pub use loss::Loss;
pub use memory::MemoryLimit;
pub use model::{Model, Precision, SearchCandidate, SearchRecord, Task};
pub use preprocess::Multiclass;
pub use solver::krr::{KrrConfig, KrrMethod};
pub use solver::{
    Combine, DsgConfig, DsgVariant, PbmConfig, Progress, RadiusRule, SolverConfig, StepSize,
    StopReason, TrModel, TrNorm, TrustRegion, WorkingSet,
};

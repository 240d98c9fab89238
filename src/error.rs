//! One error type for the whole library: every fallible call returns [`Result`], and no input,
//! however malformed, makes the library panic.

use std::path::PathBuf;

/// Everything that can go wrong in joker, with enough context to fix it.
#[derive(Debug, thiserror::Error)]
pub enum JokerError {
    /// A parameter is outside its valid range (for example `lambda <= 0` or `M = 0`).
    #[error("invalid parameter `{name}`: {reason}")]
    InvalidParameter {
        /// The parameter's name as the user knows it.
        name: &'static str,
        /// What is wrong and what is allowed.
        reason: String,
    },
    /// The input data has no rows (or no columns).
    #[error("empty data: {0}")]
    EmptyData(String),
    /// A NaN or an infinity in the features, the targets or the weights.
    #[error("non-finite value in {what} at row {row}, column {col}")]
    NonFinite {
        /// Which input ("features", "targets", "sample weights", ...).
        what: &'static str,
        /// Zero-based row index.
        row: usize,
        /// Zero-based column index (0 for vectors).
        col: usize,
    },
    /// Two inputs whose sizes must agree do not.
    #[error("shape mismatch: {0}")]
    ShapeMismatch(String),
    /// The labels do not fit the loss (for example a real-valued target for a classifier).
    #[error("labels do not fit the loss: {0}")]
    InvalidLabels(String),
    /// A data file could not be parsed.
    #[error("{path}:{line}: {reason}")]
    Parse {
        /// The file being read.
        path: PathBuf,
        /// One-based line number.
        line: usize,
        /// What was wrong with the line.
        reason: String,
    },
    /// An I/O failure, with the path involved.
    #[error("cannot read or write {path}: {source}")]
    Io {
        /// The file involved.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A model file is malformed, or was written by a newer format version.
    #[error("model file: {0}")]
    ModelFormat(String),
    /// A request would need more memory than allowed.
    #[error("memory: {0}")]
    Memory(String),
    /// The solver produced a non-finite value (a bug or extreme input scaling).
    #[error("numerical failure: {0}")]
    Numerical(String),
    /// The requested device cannot be used.
    #[error("device: {0}")]
    Device(String),
    /// A distributed fit failed across its processes: another rank failed or left, or a
    /// collective operation failed.
    #[error("distributed: {0}")]
    Distributed(String),
    /// The model was used in a way it does not support (for example probabilities from an SVM).
    #[error("unsupported: {0}")]
    Unsupported(String),
}

/// `Result` with [`JokerError`].
pub type Result<T> = std::result::Result<T, JokerError>;

/// Builds an [`JokerError::InvalidParameter`].
pub(crate) fn invalid(name: &'static str, reason: impl Into<String>) -> JokerError {
    JokerError::InvalidParameter {
        name,
        reason: reason.into(),
    }
}

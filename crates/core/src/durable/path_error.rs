//! An I/O error that names its file ([`with_path`], [`AtPath`]), and the
//! OS error code under it ([`os_error`]).
//!
//! Invariant: the cause is kept whole (its kind, its OS error code) and
//! said once in the message, never again as its `source()`.

use std::io;
use std::path::{Path, PathBuf};

/// An I/O error that says which file it is about, as every message we print
/// must; the original is kept whole (with its OS error code: [`os_error`]),
/// and so is its kind.
pub fn with_path(error: io::Error, path: &Path) -> io::Error {
    io::Error::new(error.kind(), AtPath { path: path.to_path_buf(), cause: error })
}

/// An error about the file at `path`. Its message says its cause, so the
/// cause is not also its `source()`: the crate's errors print each cause
/// once, whoever prints the chain.
#[derive(Debug, thiserror::Error)]
#[error("{}: {cause}", path.display())]
pub struct AtPath {
    /// The file.
    pub path: PathBuf,
    /// What went wrong.
    pub cause: io::Error,
}

/// The OS error code of `error`, or of the error it wraps ([`with_path`]).
pub fn os_error(error: &io::Error) -> Option<i32> {
    error.raw_os_error().or_else(|| {
        error.get_ref().and_then(|inner| inner.downcast_ref::<AtPath>()).and_then(|at| os_error(&at.cause))
    })
}

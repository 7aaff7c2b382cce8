//! [`StoreError`]: why the store did not do what a request asked, typed at
//! the async boundary ([`super::AsyncStore`]) so the server maps each kind
//! to its answer without reading error text.
//!
//! Invariants: the store's refusals that are not faults (a state format
//! this binary does not know, a token's unreadable metadata) are told apart
//! here, once; everything else is the file system's error, kept whole with
//! its path and OS error code in its source chain.

use std::io;

use super::format::FormatError;
use super::tokens::MetaUnreadable;

/// Why the store did not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// `state-format` names a layout this binary does not know: nothing is
    /// written until it names one it does.
    #[error(transparent)]
    Format(FormatError),
    /// A presented token's metadata cannot be read now: it admits nobody
    /// until it can (the node retries).
    #[error(transparent)]
    TokenMeta(MetaUnreadable),
    /// A file a decision depends on cannot be read: the decision is
    /// refused, never taken as if the file said nothing (the node retries).
    #[error(transparent)]
    Undecidable(Undecidable),
    /// The file system failed, or the store found a file it cannot use.
    #[error(transparent)]
    Io(io::Error),
}

impl From<io::Error> for StoreError {
    /// The store's writers report refusals as I/O errors (every write goes
    /// through one helper that knows nothing of requests): told apart here.
    fn from(error: io::Error) -> Self {
        let inner = error.get_ref();
        if let Some(why) = inner.and_then(|e| e.downcast_ref::<FormatError>()) {
            return StoreError::Format(why.clone());
        }
        if let Some(why) = inner.and_then(|e| e.downcast_ref::<MetaUnreadable>()) {
            return StoreError::TokenMeta(why.clone());
        }
        if let Some(why) = inner.and_then(|e| e.downcast_ref::<Undecidable>()) {
            return StoreError::Undecidable(why.clone());
        }
        StoreError::Io(error)
    }
}

/// What could not be told, for the node (the cause, with its path, is
/// logged where it was met).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the endpoint cannot tell {0} now (a state file cannot be read); retry later")]
pub struct Undecidable(pub &'static str);

impl Undecidable {
    /// `cause` logged, and this refusal as the I/O error the store's
    /// callers pass on.
    pub fn refuse(what: &'static str, cause: &io::Error) -> io::Error {
        tracing::error!(cause = %cause, os_error = crate::durable::os_error(cause), "cannot tell {what}: refused");
        io::Error::other(Undecidable(what))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_are_told_apart_and_faults_keep_their_cause() {
        let meta = io::Error::other(MetaUnreadable("tokens.meta.json: EOF".into()));
        assert!(matches!(StoreError::from(meta), StoreError::TokenMeta(_)));
        let fault = crate::durable::with_path(io::Error::from_raw_os_error(28), std::path::Path::new("/s"));
        match StoreError::from(fault) {
            StoreError::Io(e) => assert_eq!(crate::durable::os_error(&e), Some(28)),
            other => panic!("{other:?}"),
        }
    }
}

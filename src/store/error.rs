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
        StoreError::Io(error)
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

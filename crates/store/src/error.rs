//! [`StoreError`]: why the store did not do what a request asked, typed at
//! the async boundary ([`super::AsyncStore`]) so the server maps each kind
//! to its answer without reading error text.
//!
//! It is the store's leaf: every error type the store's modules return
//! lives here, so no module imports another for its error.
//!
//! Invariants: the store's refusals that are not faults (a state format
//! this binary does not know, a token's unreadable metadata) are told apart
//! here, once; everything else is the file system's error, kept whole with
//! its path and OS error code in its source chain.

use std::io;
use std::path::PathBuf;

/// Where the upgrade guide is, for every refusal of a state format.
pub(crate) const UPGRADE_GUIDE: &str = "docs/upgrading.md";

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
    /// What was asked cannot be done as asked, whatever is retried: the
    /// asker's to change (a token listed already, a prefix that names no
    /// single token). Never a fault, never "retry".
    #[error(transparent)]
    Refused(Refusal),
    /// The file system failed, or the store found a file it cannot use.
    #[error(transparent)]
    Io(io::Error),
}

/// A request the store will not carry out as given: said to whoever
/// asked, in words that never include a token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// `tokens add` of a token the file lists already.
    #[error("refusing: the token given is listed already")]
    TokenListed,
    /// `tokens add` of a token revoked before: a use is never given back.
    #[error("refusing: the token given was revoked; choose another")]
    TokenRevoked,
    /// `tokens add` of a token that admitted a node before.
    #[error("refusing: the token given has admitted a node before; choose another")]
    TokenSpent,
    /// `tokens add` that would grow a file past its bound.
    #[error(
        "refusing: {file} would be over the {mib} MiB it may hold; revoke or tidy spent tokens out of it first"
    )]
    TooLarge {
        /// `tokens` or `tokens.meta.json`.
        file: &'static str,
        /// Its bound.
        mib: u64,
    },
    /// `tokens revoke` of a prefix too short to name one token.
    #[error(
        "a prefix needs {0} characters or more (of the token, or of its SHA-256 as `tokens list` shows it)"
    )]
    PrefixTooShort(usize),
    /// `tokens revoke` of what no listed token is or starts with.
    #[error("no token matches")]
    NoSuchToken,
    /// `tokens revoke` of a prefix several tokens share: each redacted, with its fingerprint.
    #[error("the prefix matches {} tokens; give more of it:{}", .0.len(), .0.iter().map(|(shown, sha)| format!("\n  {shown}  {sha}")).collect::<String>())]
    AmbiguousToken(Vec<(String, String)>),
}

/// What the store's methods that may refuse return: a refusal is made as
/// its variant where it is met and travels typed to the caller, never as
/// an I/O error told apart again later.
pub type StoreResult<T> = Result<T, StoreError>;

impl From<io::Error> for StoreError {
    /// A fault of the file system, nothing else: refusals are never I/O errors.
    fn from(error: io::Error) -> Self {
        StoreError::Io(error)
    }
}

impl From<Refusal> for StoreError {
    fn from(why: Refusal) -> Self {
        StoreError::Refused(why)
    }
}

impl From<FormatError> for StoreError {
    fn from(why: FormatError) -> Self {
        StoreError::Format(why)
    }
}

impl StoreError {
    /// Whether this is the file system's `kind` of error (a refusal is none).
    pub fn is_io(&self, kind: io::ErrorKind) -> bool {
        matches!(self, StoreError::Io(e) if e.kind() == kind)
    }
}

/// What could not be told, for the node (the cause, with its path, is
/// logged where it was met).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the endpoint cannot tell {0} now (a state file cannot be read); retry later")]
pub struct Undecidable(pub &'static str);

impl Undecidable {
    /// `cause` logged, and this refusal as the store's callers pass it on.
    pub fn refuse(what: &'static str, cause: &io::Error) -> StoreError {
        tracing::error!(cause = %cause, os_error = janus_core::durable::os_error(cause), "cannot tell {what}: refused");
        StoreError::Undecidable(Undecidable(what))
    }
}

/// Why this binary must not write to a state directory.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    /// A newer binary laid the directory out.
    #[error(
        "{} says the state directory is in format {found}, but this janus-registration ({}) understands formats up to {understands}: run a version that knows format {found} ({UPGRADE_GUIDE})",
        path.display(), env!("CARGO_PKG_VERSION")
    )]
    Newer {
        /// The marker.
        path: PathBuf,
        /// The format it names.
        found: u32,
        /// The newest this binary knows (the format module's `CURRENT`).
        understands: u32,
    },
    /// The state directory is another user's, and this one may not read it.
    #[error(
        "{} cannot be read by this user ({user}): the state directory belongs to {owner}; run the command as {owner} (e.g. sudo -u {owner} janus-registration …)",
        path.display()
    )]
    NotPermitted {
        /// The file refused.
        path: PathBuf,
        /// Who runs the command.
        user: String,
        /// Who owns the state directory.
        owner: String,
    },
    /// The marker exists but says nothing this binary can read.
    #[error(
        "{} cannot be read as a state format ({why}); refusing to write under a layout this version cannot tell ({UPGRADE_GUIDE})",
        path.display()
    )]
    Unreadable {
        /// The marker.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
    },
}

/// Why a token's metadata cannot be relied on now.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the registration token's metadata cannot be read ({0}); tokens it governs admit nobody until tokens.meta.json reads again"
)]
pub struct MetaUnreadable(pub String);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_keep_their_cause() {
        let fault =
            janus_core::durable::with_path(io::Error::from_raw_os_error(28), std::path::Path::new("/s"));
        match StoreError::from(fault) {
            StoreError::Io(e) => assert_eq!(janus_core::durable::os_error(&e), Some(28)),
            other => panic!("{other:?}"),
        }
    }
}

//! [`AdminError`]: why an admin command failed, said once with its cause.

/// Why an admin command failed; it changed nothing, unless it says so.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    /// The state directory could not be read or written.
    #[error(transparent)]
    State(#[from] std::io::Error),
    /// The store refused (a state format this binary does not know, a
    /// file a decision depends on that cannot be read), or failed.
    #[error(transparent)]
    Store(#[from] janus_store::StoreError),
    /// The command names no node (or no event, or no pending CA).
    #[error("{0}")]
    NotFound(String),
    /// The command's name for a node fits several: they are listed.
    #[error("{0}")]
    Ambiguous(String),
    /// A check the admin asked for failed, or the node's state forbids the change.
    #[error("{0}")]
    Refused(String),
    /// Arguments that cannot be used as given.
    #[error("{0}")]
    Usage(String),
    /// A file given on the command line (`--console`, `--token-file`) cannot be read.
    #[error("{}: {cause}", path.display())]
    Read {
        /// The file.
        path: std::path::PathBuf,
        /// The underlying error.
        cause: std::io::Error,
    },
    /// `tokens revoke` found no single token for what it was given.
    #[error("cannot revoke {key:?}: {cause}")]
    Revoke {
        /// What the admin gave.
        key: String,
        /// The underlying error.
        cause: janus_store::StoreError,
    },
}

pub(crate) type Result<T> = std::result::Result<T, AdminError>;

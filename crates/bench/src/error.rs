//! Why a swarm stops: each failure with the file, endpoint or state
//! directory it concerns.

use std::path::{Path, PathBuf};

/// Why a swarm stopped, or could not start.
#[derive(Debug, thiserror::Error)]
pub enum SwarmError {
    /// The endpoint cannot be reached as configured.
    #[error(transparent)]
    Http(#[from] janus_agent::http::HttpError),
    /// Minting a simulated node's CA.
    #[error(transparent)]
    Mint(#[from] janus_core::pki::mint::MintError),
    /// A file the command was given.
    #[error("{}: {cause}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        cause: std::io::Error,
    },
    /// The state directory the swarm approves in (`--approve-in`).
    #[error("approving in {}: {cause}", path.display())]
    Approve {
        /// The state directory.
        path: PathBuf,
        /// The store's refusal or failure.
        cause: janus_store::StoreError,
    },
}

impl SwarmError {
    pub(crate) fn file(path: &Path) -> impl FnOnce(std::io::Error) -> SwarmError + '_ {
        move |cause| SwarmError::File { path: path.to_path_buf(), cause }
    }

    pub(crate) fn approving(path: &Path) -> impl FnOnce(janus_store::StoreError) -> SwarmError + '_ {
        move |cause| SwarmError::Approve { path: path.to_path_buf(), cause }
    }
}

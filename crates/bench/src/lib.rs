//! The load generator, a tool beside the product: `janus-swarm` drives
//! many simulated nodes against one endpoint and reports rates, latency
//! percentiles and errors (`scripts/bench.py`, the replica labs).
//!
//! Invariants: nothing here ships in `janus-registration` (the product
//! binary has no load generator; the container image copies only it); a
//! simulated node is a node on the wire ([`janus_agent::http`]: a new TLS
//! connection per request, the body and headers janusd sends); approvals
//! it makes (`--approve-in`) go through the store as an admin command's
//! do, durably and audited, by the user `janus-swarm`.

pub mod swarm;

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
    fn file(path: &Path) -> impl FnOnce(std::io::Error) -> SwarmError + '_ {
        move |cause| SwarmError::File { path: path.to_path_buf(), cause }
    }

    fn approving(path: &Path) -> impl FnOnce(janus_store::StoreError) -> SwarmError + '_ {
        move |cause| SwarmError::Approve { path: path.to_path_buf(), cause }
    }
}

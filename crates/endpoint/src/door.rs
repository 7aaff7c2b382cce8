//! Doors: listeners served beside the nodes' port by the same process (the
//! admin API is one), given the server's own store, certificate and end.
//!
//! The endpoint knows no door by name: a crate above it implements
//! [`Door`] and the command line adds it to [`crate::ServeConfig::doors`].
//! Invariants: a door is opened once the state directory is laid out and
//! the nodes' port is about to serve; it ends when [`Shared::handle`] shuts
//! down, and long-lived answers (streams) end when [`Shared::closing`]
//! turns true, at the start of the grace period.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use janus_core::tls::CurrentCert;
use janus_store::AsyncStore;

/// What a door serves with.
pub struct Shared {
    /// The server's own store: one per process.
    pub store: AsyncStore,
    /// The state directory.
    pub state: PathBuf,
    /// The fleet directory (`root.crt`, `bundle.json`).
    pub fleet: PathBuf,
    /// The certificate every port presents, replaced on reload.
    pub cert: Arc<CurrentCert>,
    /// Time a client gets for its TLS handshake.
    pub handshake_timeout: Duration,
    /// Time a client gets for its request head.
    pub head_timeout: Duration,
    /// Shuts the door's listener down with the others.
    pub handle: axum_server::Handle<SocketAddr>,
    /// Becomes true when the server stops.
    pub closing: tokio::sync::watch::Receiver<bool>,
}

/// The task serving a door; its error is logged when the server stops.
pub type Serving = tokio::task::JoinHandle<std::io::Result<()>>;

/// A listener served beside the nodes' port.
pub trait Door: Send + Sync + std::fmt::Debug {
    /// What the logs call it.
    fn name(&self) -> &'static str;
    /// Binds and starts serving on the current runtime; an error stops
    /// `serve` before the nodes' port opens.
    fn open(&self, shared: Shared) -> std::io::Result<Serving>;
}

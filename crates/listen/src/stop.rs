//! One shutdown for every listener of the process: when the server is told
//! to stop, no listener takes a new connection, long-lived answers (event
//! streams) end, and in-flight requests get the grace period.
//!
//! Invariants: every listener's handle comes from [`Stop::handle`], so none
//! is forgotten; [`Stop::closing`] turns true before any handle shuts down,
//! so a stream ends at the start of the grace period and never holds it
//! whole.

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::sync::watch;

/// The process's shutdown, shared by its listeners.
#[derive(Clone, Debug)]
pub struct Stop {
    closing: watch::Receiver<bool>,
    grace: Duration,
}

impl Stop {
    /// A stop that begins when `shutdown` resolves and gives in-flight
    /// requests `grace`. Spawned on the current runtime.
    pub fn on(shutdown: impl Future<Output = ()> + Send + 'static, grace: Duration) -> Self {
        let (tell, closing) = watch::channel(false);
        tokio::spawn(async move {
            shutdown.await;
            tracing::info!(grace_secs = grace.as_secs(), "shutting down: no new connections");
            let _ = tell.send(true);
            // Held until every receiver is gone, so `closing` never reads as
            // an ended stop that never began.
            tell.closed().await;
        });
        Stop { closing, grace }
    }

    /// A listener's handle: shut down gracefully when the stop begins.
    pub fn handle(&self) -> axum_server::Handle<SocketAddr> {
        let handle = axum_server::Handle::new();
        let (mut closing, grace, shut) = (self.closing.clone(), self.grace, handle.clone());
        tokio::spawn(async move {
            // An error is the sender gone: the stop task ended with the runtime.
            let _ = closing.wait_for(|closing| *closing).await;
            shut.graceful_shutdown(Some(grace));
        });
        handle
    }

    /// Turns true when the stop begins: long-lived answers end on it.
    pub fn closing(&self) -> watch::Receiver<bool> {
        self.closing.clone()
    }
}

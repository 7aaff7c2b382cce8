//! `serve` and `demo` as one process: the nodes' port (`janus_endpoint`)
//! and the admin listener (`janus_admin`), siblings composed here over one
//! store, one certificate (replaced on reload for both) and one shutdown
//! ([`janus_listen::Stop`]).
//!
//! Invariants: every startup check of both, the admin CA included, is made
//! before any socket is bound ([`prepare`]); then both ports are bound
//! ([`Checked::bind`]), so a port in use stops the start before anything
//! is served or laid out; the state directory is laid out once, before
//! either serves ([`Bound::serve`]).

use std::future::Future;
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;

use janus_admin::listener::{AdminApiConfig, AdminApiRefused, AdminListener, Shared};
use janus_endpoint::{App, Prepared, ServeConfig, StartupError};
use janus_listen::Stop;

/// Why `serve` does not start.
#[derive(Debug, thiserror::Error)]
pub enum NotServed {
    /// A check of the nodes' port.
    #[error(transparent)]
    Endpoint(#[from] StartupError),
    /// A check of the admin listener.
    #[error(transparent)]
    Admin(#[from] AdminApiRefused),
    /// A port cannot be bound.
    #[error("cannot listen on {addr}: {cause}")]
    Bind {
        /// The address.
        addr: String,
        /// The underlying error.
        cause: std::io::Error,
    },
}

/// Both listeners, every check passed, nothing bound.
pub struct Checked {
    endpoint: Prepared,
    admin: Option<AdminListener>,
}

/// Every startup check, the nodes' port's then the admin listener's.
pub fn prepare(config: ServeConfig, admin: Option<&AdminApiConfig>) -> Result<Checked, NotServed> {
    let endpoint = janus_endpoint::prepare(config)?;
    let admin = match admin {
        Some(admin) => Some(AdminListener::prepare(admin, &endpoint.config().fleet, endpoint.cert())?),
        None => None,
    };
    Ok(Checked { endpoint, admin })
}

impl Checked {
    /// Binds the nodes' port on `listen`, then the admin listener's.
    pub fn bind(self, listen: &str) -> Result<Bound, NotServed> {
        let bind = |addr: &str| {
            janus_listen::bind(addr).map_err(|cause| NotServed::Bind { addr: addr.to_string(), cause })
        };
        let listener = bind(listen)?;
        let admin = match self.admin {
            Some(admin) => Some((bind(&admin.listen().to_string())?, admin)),
            None => None,
        };
        let local = |listener: &TcpListener, addr: &str| {
            listener.local_addr().map_err(|cause| NotServed::Bind { addr: addr.to_string(), cause })
        };
        let addr = local(&listener, listen)?;
        let admin_addr = match &admin {
            Some((bound, prepared)) => Some(local(bound, &prepared.listen().to_string())?),
            None => None,
        };
        Ok(Bound { addr, admin_addr, endpoint: self.endpoint, listener, admin })
    }
}

/// Both listeners bound, not serving yet.
pub struct Bound {
    /// Where the nodes' port listens.
    pub addr: SocketAddr,
    /// Where the admin listener listens, when there is one.
    pub admin_addr: Option<SocketAddr>,
    endpoint: Prepared,
    listener: TcpListener,
    admin: Option<(TcpListener, AdminListener)>,
}

impl Bound {
    /// What every request of the nodes' port shares (its store, metrics).
    pub fn app(&self) -> Arc<App> {
        self.endpoint.app()
    }

    /// Lays out the state, then serves both until `shutdown` resolves; in-flight
    /// requests then get the grace period (`--shutdown-grace`).
    pub async fn serve(self, shutdown: impl Future<Output = ()> + Send + 'static) -> std::io::Result<()> {
        let config = self.endpoint.config();
        crate::settings::log_effective(config, self.addr, self.admin_addr);
        let stop = Stop::on(shutdown, config.shutdown_grace);
        let shared = Shared {
            store: self.endpoint.store(),
            state: config.state.clone(),
            handshake_timeout: config.handshake_timeout,
            head_timeout: config.head_timeout,
            stop: stop.clone(),
        };
        self.endpoint.lay_out().await?;
        let admin = self.admin.map(|(listener, admin)| {
            tokio::spawn(async move {
                // Said when it happens, not when the nodes' port stops.
                if let Err(e) = admin.serve(listener, shared).await {
                    tracing::error!(listener = "admin API", cause = %e, "a listener failed");
                }
            })
        });
        let served = self.endpoint.serve(self.listener, stop).await;
        if let Some(admin) = admin
            && let Err(e) = admin.await
        {
            tracing::error!(listener = "admin API", cause = %e, "a listener panicked");
        }
        served
    }
}

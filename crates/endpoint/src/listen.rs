//! Serving a [`Prepared`] server: the nodes' port (the connection table,
//! then TLS, HTTP/1.1 with bounded heads), the metrics port, the doors
//! beside them; graceful shutdown; failed accepts counted.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::{get, post};
use axum_server::tls_rustls::{RustlsAcceptor, RustlsConfig};

use crate::app::App;
use crate::config::{LISTEN_BACKLOG, MAX_HEAD_BYTES, METRICS_MAX_CONNECTIONS};
use crate::startup::Prepared;
use crate::{accept, door, metrics, routes};

/// Binds `addr` with [`LISTEN_BACKLOG`].
pub fn bind(addr: &str) -> std::io::Result<std::net::TcpListener> {
    use std::net::ToSocketAddrs;
    let addr = addr
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| std::io::Error::other(format!("{addr} resolves to nothing")))?;
    use rustix::net::{AddressFamily, SocketFlags, SocketType};
    let family = if addr.is_ipv4() { AddressFamily::INET } else { AddressFamily::INET6 };
    let socket = rustix::net::socket_with(family, SocketType::STREAM, SocketFlags::CLOEXEC, None)?;
    rustix::net::sockopt::set_socket_reuseaddr(&socket, true)?;
    rustix::net::bind(&socket, &addr)?;
    rustix::net::listen(&socket, LISTEN_BACKLOG)?;
    Ok(std::net::TcpListener::from(socket))
}

/// The routes: `POST /register`, `GET /register/{id}`, `GET /healthz`; 404 for the rest.
pub fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/register", post(routes::announce))
        .route("/register/{id}", get(routes::poll))
        .route("/healthz", get(routes::healthz))
        .route("/livez", get(routes::livez))
        .fallback(routes::not_found)
        .method_not_allowed_fallback(routes::method_not_allowed)
        .layer(axum::middleware::from_fn_with_state(app.clone(), routes::count_request))
        .layer(routes::traced())
        .with_state(app)
}

impl Prepared {
    /// The TLS listener's acceptor: the connection table (its caps, its
    /// evictions counted), then the handshake within its time.
    fn tls_acceptor(&self) -> std::io::Result<accept::Shedding<RustlsAcceptor<accept::ConnectionCap>>> {
        let rustls = RustlsConfig::from_config(Arc::new(
            janus_core::tls::server_config(self.cert.clone()).map_err(std::io::Error::other)?,
        ));
        let evicted = metrics::OutcomeLabels { outcome: "evicted" };
        let cap = accept::ConnectionCap::new(accept::Caps {
            max: self.config.max_connections,
            per_source: self.config.max_connections_per_source,
            per_network: self.config.max_connections_per_network,
            evict: true,
            shed_within: false,
        })
        .counting_evictions(self.app.metrics.connection_failures.get_or_create(&evicted).clone());
        Ok(accept::Shedding {
            tls: RustlsAcceptor::new(rustls)
                .handshake_timeout(self.config.handshake_timeout)
                .acceptor(cap.clone()),
            cap,
            handshake: self.config.handshake_timeout,
            proxy: self.config.proxy_protocol.clone().into(),
        })
    }

    /// The probes' own door, when `--metrics-listen` asks for it: plain
    /// HTTP, its own connection cap, so a flooded TLS port never fails a
    /// liveness or readiness probe. Started on this runtime.
    fn spawn_metrics(
        &self,
        handle: axum_server::Handle<SocketAddr>,
    ) -> std::io::Result<Option<tokio::task::JoinHandle<std::io::Result<()>>>> {
        let Some(addr) = self.config.metrics_listen else { return Ok(None) };
        let head_timeout = self.config.head_timeout;
        let plain = bind(&addr.to_string())?;
        plain.set_nonblocking(true)?;
        tracing::info!(metrics_listen = %plain.local_addr()?, "serving metrics over plain HTTP");
        let metrics = Router::new()
            .route("/metrics", get(routes::metrics))
            .route("/healthz", get(routes::healthz))
            .route("/livez", get(routes::livez))
            .with_state(self.app.clone());
        let failures = self.app.clone();
        let mut server = axum_server::from_tcp(plain)?
            .acceptor(accept::ConnectionCap::new(accept::Caps {
                max: METRICS_MAX_CONNECTIONS,
                per_source: 0,
                per_network: 0,
                evict: false,
                shed_within: false,
            }))
            .accept_error_handler(move |peer, error| count_accept_error(&failures, peer.is_some(), error))
            .handle(handle)
            .http1_only()
            .first_request_timeout(head_timeout);
        // One request per connection: an idle scraper holds nothing.
        server.http_builder().http1().keep_alive(false).header_read_timeout(Some(head_timeout));
        Ok(Some(tokio::spawn(server.serve(metrics.into_make_service()))))
    }

    /// Opens every door, each with its own handle, after the nodes' port's checks.
    fn open_doors(
        &self,
        closing: &tokio::sync::watch::Receiver<bool>,
    ) -> std::io::Result<Vec<(&'static str, axum_server::Handle<SocketAddr>, door::Serving)>> {
        let mut opened = Vec::new();
        for door in &self.config.doors {
            let handle = axum_server::Handle::new();
            let shared = door::Shared {
                store: self.app.store.clone(),
                state: self.config.state.clone(),
                fleet: self.config.fleet.clone(),
                cert: self.cert.clone(),
                handshake_timeout: self.config.handshake_timeout,
                head_timeout: self.config.head_timeout,
                handle: handle.clone(),
                closing: closing.clone(),
            };
            opened.push((door.name(), handle, door.open(shared)?));
        }
        Ok(opened)
    }

    /// The application state, for tests.
    pub fn app(&self) -> Arc<App> {
        self.app.clone()
    }

    /// Serves on `listener` until `shutdown` resolves, then lets in-flight
    /// requests finish for at most the configured grace period.
    pub async fn serve(
        self,
        listener: std::net::TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        self.app
            .store
            .lay_out()
            .await
            .map_err(|e| std::io::Error::other(format!("the state directory is not usable: {e}")))?;
        listener.set_nonblocking(true)?;
        let local = listener.local_addr()?;
        let acceptor = self.tls_acceptor()?;
        let background = self.start_background().await?;
        let (closing, doors_closing) = tokio::sync::watch::channel(false);
        let handle = axum_server::Handle::new();
        let metrics_handle = axum_server::Handle::new();
        let mut listeners = vec![("metrics", self.spawn_metrics(metrics_handle.clone())?)];
        let mut handles = vec![handle.clone(), metrics_handle];
        for (name, door_handle, serving) in self.open_doors(&doors_closing)? {
            handles.push(door_handle);
            listeners.push((name, Some(serving)));
        }
        tokio::spawn(stop_on(shutdown, self.config.shutdown_grace, closing, handles));
        let head_timeout = self.config.head_timeout;
        let failures = self.app.clone();
        let mut server = axum_server::from_tcp(listener)?
            .acceptor(acceptor)
            .accept_error_handler(move |peer, error| count_accept_error(&failures, peer.is_some(), error))
            .handle(handle)
            .http1_only()
            .first_request_timeout(head_timeout);
        server
            .http_builder()
            .http1()
            .keep_alive(self.config.keep_alive)
            .max_buf_size(MAX_HEAD_BYTES)
            .header_read_timeout(Some(head_timeout));
        tracing::info!(listen = %local, "serving");
        let app = self.app.clone();
        let served = server.serve(router(self.app).into_make_service_with_connect_info::<SocketAddr>()).await;
        background.stop(&app).await;
        for (name, task) in listeners {
            let Some(task) = task else { continue };
            match task.await {
                Ok(Err(e)) => tracing::error!(listener = name, cause = %e, "a listener failed"),
                Err(e) => tracing::error!(listener = name, cause = %e, "a listener panicked"),
                Ok(Ok(())) => {}
            }
        }
        served
    }
}

/// Once `shutdown` resolves: no new connections on any listener, event
/// streams ended (they would hold the grace period whole), and in-flight
/// requests given `grace`.
async fn stop_on(
    shutdown: impl Future<Output = ()>,
    grace: Duration,
    closing: tokio::sync::watch::Sender<bool>,
    handles: Vec<axum_server::Handle<SocketAddr>>,
) {
    shutdown.await;
    tracing::info!(grace_secs = grace.as_secs(), "shutting down: no new connections");
    let _ = closing.send(true);
    for handle in handles {
        handle.graceful_shutdown(Some(grace));
    }
}

/// Counts a connection that never carried a request, by why: our caps
/// (typed, see [`accept::Refused`]), the process out of file descriptors at
/// accept (`emfile`; the accept loop then waits 50 ms instead of spinning),
/// or its TLS handshake. `accepted` is false for an error of the listener
/// itself.
fn count_accept_error(app: &App, accepted: bool, error: &std::io::Error) {
    let reason = match accept::Refused::of(error) {
        Some(accept::Refused::Cap) => "connection_cap",
        Some(accept::Refused::SourceCap) => "source_cap",
        Some(accept::Refused::NetworkCap) => "network_cap",
        // Counted by the table when it evicted.
        Some(accept::Refused::Evicted) => return,
        Some(accept::Refused::HandshakeTimeout) => "tls",
        None if !accepted
            && error.raw_os_error().is_some_and(|code| {
                code == rustix::io::Errno::MFILE.raw_os_error()
                    || code == rustix::io::Errno::NFILE.raw_os_error()
            }) =>
        {
            "emfile"
        }
        None if !accepted => "accept",
        None => "tls",
    };
    // The accept loop retries every 50 ms: once a minute is enough to be read.
    if reason == "emfile" && app.emfile_logged.due(Duration::from_secs(60)) {
        tracing::warn!(
            "out of file descriptors at accept: raise the open-file limit or lower --max-connections \
             (said at most once a minute; counted in janus_registration_connection_failures_total)"
        );
    }
    metrics::Metrics::outcome(&app.metrics.connection_failures, reason);
}

//! Serving a [`Prepared`] server: the nodes' port (the connection table,
//! then TLS, HTTP/1.1 with bounded heads) and the metrics port, each shut
//! down by the process's one [`Stop`]; failed accepts counted.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::{get, post};
use axum_server::tls_rustls::{RustlsAcceptor, RustlsConfig};

use janus_core::tls::CurrentCert;
use janus_listen::{Stop, accept, bind};
use janus_store::AsyncStore;

use crate::app::App;
use crate::config::{MAX_HEAD_BYTES, METRICS_MAX_CONNECTIONS, ServeConfig};
use crate::startup::Prepared;
use crate::{metrics, routes};

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
        .layer(janus_listen::trace::traced())
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

    /// The application state, for tests.
    pub fn app(&self) -> Arc<App> {
        self.app.clone()
    }

    /// The store every request of the process shares (the admin
    /// listener serves on it too).
    pub fn store(&self) -> AsyncStore {
        self.app.store.clone()
    }

    /// The certificate every port presents, replaced when a reload finds a new one.
    pub fn cert(&self) -> Arc<CurrentCert> {
        self.cert.clone()
    }

    /// What it was told, after the startup checks (a lowered connection cap).
    pub fn config(&self) -> &ServeConfig {
        &self.config
    }

    /// Lays out the state directory (checked by [`crate::prepare`], made
    /// now that the ports are bound: a port in use leaves no tree behind).
    pub async fn lay_out(&self) -> std::io::Result<()> {
        self.app
            .store
            .lay_out()
            .await
            .map_err(|e| std::io::Error::other(format!("the state directory is not usable: {e}")))
    }

    /// Serves on `listener`, the state laid out ([`Prepared::lay_out`]),
    /// until `stop` begins; in-flight requests then get its grace period.
    pub async fn serve(self, listener: std::net::TcpListener, stop: Stop) -> std::io::Result<()> {
        listener.set_nonblocking(true)?;
        let local = listener.local_addr()?;
        let acceptor = self.tls_acceptor()?;
        let background = self.start_background().await?;
        let metrics = self.spawn_metrics(stop.handle())?;
        let head_timeout = self.config.head_timeout;
        let failures = self.app.clone();
        let mut server = axum_server::from_tcp(listener)?
            .acceptor(acceptor)
            .accept_error_handler(move |peer, error| count_accept_error(&failures, peer.is_some(), error))
            .handle(stop.handle())
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
        if let Some(task) = metrics {
            match task.await {
                Ok(Err(e)) => tracing::error!(listener = "metrics", cause = %e, "a listener failed"),
                Err(e) => tracing::error!(listener = "metrics", cause = %e, "a listener panicked"),
                Ok(Ok(())) => {}
            }
        }
        served
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

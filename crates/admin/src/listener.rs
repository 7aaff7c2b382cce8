//! The admin listener (`serve --admin-listen`): the admin API for
//! programs and the console for people, on one port, for orchestrators
//! that cannot `exec` into the endpoint's container (Kubernetes without
//! `pods/exec`) and admins with a browser.
//!
//! Invariants: off unless asked for, on a listener of its own (never the
//! nodes' port); every connection presents a client certificate chained
//! to the admin CA (`--admin-ca`, refused at startup when it is the
//! fleet's root or issuing CA: a certificate the fleet signed gives no
//! admin power), checked by the handshake; each request is allowed only
//! what the credential's scopes say ([`crate::credential`]); every change
//! goes through the admin model's functions on the state directory (the
//! files stay the source of truth, a server on any replica sees it),
//! audited as `api (<name>)` or `console (<name>)`. Bounded as the nodes' port is: 64
//! connections, 32 from one source and 48 from one network; a full table
//! evicts the oldest connection that has sent no request, silent ones (no
//! byte yet) first, and a source or network at its cap sheds its own
//! oldest silent one, so strangers churning connections that say nothing
//! cannot keep a credential holder out; 16 KiB bodies; a deadline on each
//! request's work; 8 event streams, 2 per credential.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use axum_server::accept::Accept;
use axum_server::tls_rustls::{RustlsAcceptor, RustlsConfig};
use rustls::pki_types::CertificateDer;
use tokio::net::TcpStream;

use janus_core::tls::CurrentCert;
use janus_listen::Stop;
use janus_listen::accept::{Capped, Caps, ConnectionCap, Shedding, Stamped};
use janus_store::AsyncStore;

use crate::credential::{Authenticated, Caller};
use crate::web::{AdminState, layers};

/// Connections the admin listener holds at once.
pub const MAX_CONNECTIONS: usize = 64;
/// Of them, from one source address (an IPv6 /64): room for an
/// orchestrator's concurrent requests, not for the whole table.
pub const MAX_CONNECTIONS_PER_SOURCE: usize = 32;
/// Of them, from one network (an IPv4 /24, an IPv6 /48).
pub const MAX_CONNECTIONS_PER_NETWORK: usize = 48;

/// Where the admin API listens and whom it trusts.
#[derive(Debug, Clone)]
pub struct AdminApiConfig {
    /// The address to listen on.
    pub listen: SocketAddr,
    /// The admin CA's certificate (PEM): credentials must chain to it.
    pub ca: PathBuf,
}

/// Why the admin API cannot start.
#[derive(Debug, thiserror::Error)]
#[error("refusing to serve the admin API: {0}")]
pub struct AdminApiRefused(String);

/// The admin CA's certificates, refused when empty, when one is among the
/// fleet's CAs (its root, the bundle's issuing CAs, an `issuing.crt` beside
/// them) or signed by one: a certificate the fleet's keys can make gives
/// no admin power. A fleet file that cannot be read refuses too: the check
/// is never skipped on a guess.
pub fn admin_roots(ca: &Path, fleet: &Path) -> Result<rustls::RootCertStore, AdminApiRefused> {
    let refuse = |why: String| AdminApiRefused(format!("--admin-ca {}: {why}", ca.display()));
    let pem = std::fs::read(ca).map_err(|e| refuse(e.to_string()))?;
    let certs = janus_core::pki::all_certificates(&pem, "--admin-ca").map_err(|e| refuse(e.to_string()))?;
    if certs.is_empty() {
        return Err(refuse("holds no certificate".into()));
    }
    let fleet_cas = fleet_cas(fleet).map_err(|e| refuse(format!("the fleet's CAs cannot be read: {e}")))?;
    for (what, fleet_ca) in &fleet_cas {
        if certs.contains(fleet_ca) {
            return Err(refuse(format!(
                "it is the fleet's {what}: admin credentials need a CA of their own (certs admin-ca)"
            )));
        }
    }
    for (what, fleet_ca) in &fleet_cas {
        if certs.iter().any(|c| janus_core::pki::signed_by(c, fleet_ca)) {
            return Err(refuse(format!(
                "it is signed by the fleet's {what}: admin credentials need a CA of their own (certs admin-ca)"
            )));
        }
    }
    let mut roots = rustls::RootCertStore::empty();
    for cert in certs {
        roots.add(cert.to_vec().into()).map_err(|e| refuse(format!("a CA rustls cannot use: {e}")))?;
    }
    Ok(roots)
}

/// Every CA of the fleet at `fleet`, named: `root.crt`, each issuing CA of
/// the signed `bundle.json`, and `issuing.crt` where the directory has one.
fn fleet_cas(fleet: &Path) -> Result<Vec<(String, CertificateDer<'static>)>, String> {
    let loaded = janus_core::pki::Fleet::load(fleet).map_err(|e| e.to_string())?;
    let payload =
        janus_core::pki::verify_bundle(&loaded.root_der, &loaded.bundle).map_err(|e| e.to_string())?;
    let mut cas = vec![("root.crt".to_string(), loaded.root_der.clone())];
    for (i, pem) in payload.issuing_cas.iter().enumerate() {
        let what = format!("bundle.json's issuing CA {i}");
        cas.push((
            what.clone(),
            janus_core::pki::first_certificate(pem.as_bytes(), &what).map_err(|e| e.to_string())?,
        ));
    }
    let issuing = fleet.join("issuing.crt");
    match std::fs::read(&issuing) {
        Ok(pem) => {
            for der in janus_core::pki::all_certificates(&pem, "issuing.crt").map_err(|e| e.to_string())? {
                cas.push(("issuing.crt".to_string(), der));
            }
        }
        // The recommended deployment gives the endpoint no issuing.crt: the bundle's are checked.
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("{}: {e}", issuing.display())),
    }
    Ok(cas)
}

/// The admin listener, its startup checks passed (the admin CA, the TLS
/// configuration), no socket bound yet.
#[derive(Debug)]
pub struct AdminListener {
    listen: SocketAddr,
    tls: Arc<rustls::ServerConfig>,
}

/// What the admin listener serves with, shared with the nodes' port: one
/// store, one state directory, one shutdown, the same time limits.
pub struct Shared {
    /// The process's store.
    pub store: AsyncStore,
    /// The state directory.
    pub state: PathBuf,
    /// Time a client gets for its TLS handshake.
    pub handshake_timeout: Duration,
    /// Time a client gets for its request head.
    pub head_timeout: Duration,
    /// The process's shutdown.
    pub stop: Stop,
}

impl AdminListener {
    /// Every check the admin listener makes, before any socket is bound:
    /// the admin CA ([`admin_roots`]) against the fleet at `fleet`, and the
    /// TLS configuration presenting `cert` (the nodes' port's, replaced on
    /// reload for both).
    pub fn prepare(
        config: &AdminApiConfig,
        fleet: &Path,
        cert: Arc<CurrentCert>,
    ) -> Result<Self, AdminApiRefused> {
        let roots = admin_roots(&config.ca, fleet)?;
        let tls = janus_core::tls::admin_server_config(cert, roots)
            .map_err(|e| AdminApiRefused(format!("TLS configuration: {e}")))?;
        Ok(AdminListener { listen: config.listen, tls: Arc::new(tls) })
    }

    /// Where it is to listen.
    pub fn listen(&self) -> SocketAddr {
        self.listen
    }

    /// Serves the admin API and the console on `listener` until `shared.stop` ends it.
    pub async fn serve(self, listener: std::net::TcpListener, shared: Shared) -> io::Result<()> {
        let (handshake, head) = (shared.handshake_timeout, shared.head_timeout);
        listener.set_nonblocking(true)?;
        tracing::info!(admin_listen = %listener.local_addr()?, "serving the admin API");
        let cap = ConnectionCap::new(Caps {
            max: MAX_CONNECTIONS,
            per_source: MAX_CONNECTIONS_PER_SOURCE,
            per_network: MAX_CONNECTIONS_PER_NETWORK,
            evict: true,
            shed_within: true,
        });
        let tls = RustlsAcceptor::new(RustlsConfig::from_config(self.tls))
            .handshake_timeout(handshake)
            .acceptor(cap.clone());
        // The nodes' port's shedding: a handshake within the table's pressure,
        // and a connection marked once its first request arrives, so only
        // those that sent none are evicted.
        let acceptor = Shedding { tls: Authenticating { tls }, cap, handshake, proxy: Arc::new([]) };
        let mut server = axum_server::from_tcp(listener)?
            .acceptor(acceptor)
            .handle(shared.stop.handle())
            .http1_only()
            .first_request_timeout(head);
        server.http_builder().http1().keep_alive(true).header_read_timeout(Some(head));
        let state = AdminState::new(shared.store, shared.state, shared.stop.closing());
        server.serve(router(state).into_make_service()).await
    }
}

/// The whole admin listener: the API's routes and the console's, the
/// fallback, and the layers every request and answer passes through.
pub(crate) fn router(state: AdminState) -> axum::Router {
    crate::api::routes()
        .router
        .merge(crate::console::routes())
        .fallback(|request: axum::extract::Request| async move {
            let missing =
                crate::AdminError::new(crate::Code::RouteNotFound, "no such route: see GET /v1/openapi.json");
            crate::web::refusal(request.uri().path(), missing)
        })
        .layer(axum::extract::DefaultBodyLimit::max(16 * 1024))
        // Outermost last: the cross-site rule sees a request before any
        // route; every answer, its refusals too, gets the headers.
        .layer(axum::middleware::from_fn(layers::framework_errors))
        .layer(axum::middleware::from_fn(layers::cross_site))
        .layer(axum::middleware::from_fn(layers::headers))
        .layer(crate::web::trace::traced())
        .with_state(state)
}

/// The TLS handshake, then the credential it verified, given to every
/// request of the connection ([`Authenticated`], [`Stamped`]).
#[derive(Clone)]
struct Authenticating {
    tls: RustlsAcceptor<ConnectionCap>,
}

impl<S> Accept<TcpStream, S> for Authenticating
where
    S: Send + 'static,
    RustlsAcceptor<ConnectionCap>:
        Accept<TcpStream, S, Stream = tokio_rustls::server::TlsStream<Capped<TcpStream>>>,
    <RustlsAcceptor<ConnectionCap> as Accept<TcpStream, S>>::Future: Send + 'static,
    <RustlsAcceptor<ConnectionCap> as Accept<TcpStream, S>>::Service: Send + 'static,
{
    type Stream = tokio_rustls::server::TlsStream<Capped<TcpStream>>;
    type Service = Stamped<<RustlsAcceptor<ConnectionCap> as Accept<TcpStream, S>>::Service, Authenticated>;
    type Future = Pin<Box<dyn Future<Output = io::Result<(Self::Stream, Self::Service)>> + Send>>;

    fn accept(&self, stream: TcpStream, service: S) -> Self::Future {
        let handshake = self.tls.accept(stream, service);
        Box::pin(async move {
            let (stream, service) = handshake.await?;
            let caller = match stream.get_ref().1.peer_certificates().and_then(|chain| chain.first()) {
                Some(leaf) => Caller::from_der(leaf),
                None => Err(crate::credential::NoPower("no client certificate".into())),
            };
            let caller: Authenticated = Arc::new(caller);
            Ok((stream, Stamped::new(service, caller)))
        })
    }
}

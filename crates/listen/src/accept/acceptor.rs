//! The acceptor: a PROXY header read from a trusted balancer, then the
//! TLS handshake within a time that shrinks under pressure, each
//! connection marked once its first request reaches the router (never
//! evicted after).

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum_server::accept::Accept;
use tokio::net::TcpStream;

use super::table::{Capped, ConnectionCap, Refused, RequestMark};
/// The time a handshake gets when the table is at `occupancy`: the full
/// `configured` time below three quarters, then a second (a node on a
/// working network needs a few round trips, an idle attacker all of it).
pub fn handshake_time(configured: Duration, occupancy: f64) -> Duration {
    if occupancy >= PRESSURE { configured.min(PRESSED_HANDSHAKE) } else { configured }
}

/// A connection's service that sets its [`RequestMark`] at each request.
#[derive(Clone)]
pub struct Marking<S> {
    inner: S,
    mark: RequestMark,
    /// The source its PROXY header named: each request carries it.
    source: Option<SocketAddr>,
}

impl<S, B> tower_service::Service<axum::http::Request<B>> for Marking<S>
where
    S: tower_service::Service<axum::http::Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: axum::http::Request<B>) -> S::Future {
        self.mark.set();
        if let Some(source) = self.source {
            request.extensions_mut().insert(crate::proxy::ProxiedSource(source));
        }
        self.inner.call(request)
    }
}

/// From this occupancy on, handshakes get [`PRESSED_HANDSHAKE`].
const PRESSURE: f64 = 0.75;
/// The time a handshake gets under pressure.
const PRESSED_HANDSHAKE: Duration = Duration::from_secs(1);

/// The TLS acceptor with the table's bookkeeping around it: the handshake
/// within [`handshake_time`] of the table's occupancy at accept, and the
/// connection's service [`Marking`] its requests, so the connection is never
/// evicted once one arrived.
#[derive(Clone)]
pub struct Shedding<A> {
    /// The TLS acceptor (over a [`ConnectionCap`]).
    pub tls: A,
    /// The table the TLS acceptor's inner acceptor fills.
    pub cap: ConnectionCap,
    /// The handshake time when there is no pressure.
    pub handshake: Duration,
    /// The balancers whose connections start with a PROXY header (`--proxy-protocol`).
    pub proxy: Arc<[crate::proxy::Trusted]>,
}

impl<A, S> Accept<TcpStream, S> for Shedding<A>
where
    A: Accept<TcpStream, S, Stream = tokio_rustls::server::TlsStream<Capped<TcpStream>>>
        + Clone
        + Send
        + Sync
        + 'static,
    A::Future: Send + 'static,
    S: Send + 'static,
    A::Service: Send + 'static,
{
    type Stream = A::Stream;
    type Service = Marking<A::Service>;
    type Future = Pin<Box<dyn std::future::Future<Output = io::Result<(A::Stream, Self::Service)>> + Send>>;

    fn accept(&self, mut stream: TcpStream, service: S) -> Self::Future {
        let within = handshake_time(self.handshake, self.cap.occupancy());
        let (tls, proxy) = (self.tls.clone(), self.proxy.clone());
        Box::pin(async move {
            let handshake = async move {
                // Only a listed balancer is asked whose connection it passes on.
                let listed =
                    stream.peer_addr().is_ok_and(|peer| crate::proxy::expected_from(&proxy, peer.ip()));
                let source = if listed { crate::proxy::read_header(&mut stream).await? } else { None };
                // The cap admits the connection as the accept is made (not polled).
                let accepting = crate::proxy::SOURCE.sync_scope(source, || tls.accept(stream, service));
                let (stream, service) = accepting.await?;
                Ok::<_, io::Error>((stream, service, source))
            };
            let (stream, service, source) = tokio::time::timeout(within, handshake)
                .await
                .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, Refused::HandshakeTimeout))??;
            stream.get_ref().0.mark_handshaken();
            let mark = stream.get_ref().0.request_mark();
            Ok((stream, Marking { inner: service, mark, source }))
        })
    }
}

/// A connection's service that hands each of its requests a clone of
/// `value`, what its accept established (the admin listener's credential,
/// read once from the handshake).
#[derive(Clone)]
pub struct Stamped<S, T> {
    inner: S,
    value: T,
}

impl<S, T> Stamped<S, T> {
    /// `inner`, each request given `value`.
    pub fn new(inner: S, value: T) -> Self {
        Stamped { inner, value }
    }
}

impl<S, T, B> tower_service::Service<axum::http::Request<B>> for Stamped<S, T>
where
    S: tower_service::Service<axum::http::Request<B>>,
    T: Clone + Send + Sync + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: axum::http::Request<B>) -> S::Future {
        request.extensions_mut().insert(self.value.clone());
        self.inner.call(request)
    }
}

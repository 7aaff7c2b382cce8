//! The endpoint's TLS: one rustls configuration whose certificate can be
//! swapped while serving, and an acceptor that caps open connections, in
//! all and per source.
//!
//! Invariants: every handshake is offered a certificate whatever its SNI (a
//! node in fleet mode asks for `controller.fleet.janus`; aborting on an
//! unknown name would make it loop forever, janus-node-side.md §2.3); TLS 1.2
//! and 1.3 only; no client certificate; HTTP/1.1 only.

use std::collections::HashMap;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, RwLock};
use std::task::{Context, Poll};

use axum_server::accept::Accept;
use rustls::ServerConfig;
use rustls::crypto::CryptoProvider;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The crypto provider of every TLS session in this crate: aws-lc-rs, chosen
/// by measurement over ring (README "Performance": less server CPU per
/// handshake, and the X25519MLKEM768 key exchange Go 1.26 nodes offer),
/// with AES-128-GCM-SHA256 preferred, as Go's client (janusd) prefers it on
/// hardware with AES: it is also the cheaper handshake.
pub fn provider() -> Arc<CryptoProvider> {
    #[cfg(not(feature = "ring-provider"))]
    let mut provider = rustls::crypto::aws_lc_rs::default_provider();
    #[cfg(feature = "ring-provider")]
    let mut provider = rustls::crypto::ring::default_provider();
    provider.cipher_suites.sort_by_key(|suite| match suite.suite() {
        rustls::CipherSuite::TLS13_AES_128_GCM_SHA256 => 0,
        rustls::CipherSuite::TLS13_AES_256_GCM_SHA384 => 1,
        rustls::CipherSuite::TLS13_CHACHA20_POLY1305_SHA256 => 2,
        rustls::CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256 => 3,
        _ => 4,
    });
    Arc::new(provider)
}

/// Serves the current certificate to every client, whatever name it asks for.
#[derive(Debug)]
pub struct CurrentCert(RwLock<Arc<CertifiedKey>>);

impl CurrentCert {
    pub fn new(key: Arc<CertifiedKey>) -> Self {
        CurrentCert(RwLock::new(key))
    }

    /// Takes effect at the next handshake; the caller has checked `key`.
    pub fn replace(&self, key: Arc<CertifiedKey>) {
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = key;
    }
}

impl ResolvesServerCert for CurrentCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.read().unwrap_or_else(|e| e.into_inner()).clone())
    }
}

pub fn server_config(cert: Arc<CurrentCert>) -> Result<ServerConfig, rustls::Error> {
    let mut config = ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?
        .with_no_client_auth()
        .with_cert_resolver(cert);
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    // Nodes never resume a session (a new Go transport per request): tickets
    // would cost a server-side encryption each and never be used.
    config.send_tls13_tickets = 0;
    Ok(config)
}

/// Why a connection was closed at accept, before any handshake work.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    #[error("connection cap reached")]
    Cap,
    #[error("per-source connection cap reached")]
    SourceCap,
}

impl Refused {
    /// The reason an accept error carries, if it is one of ours.
    pub fn of(error: &io::Error) -> Option<&Refused> {
        error.get_ref().and_then(|e| e.downcast_ref::<Refused>())
    }
}

/// Refuses a connection outright when `max` are already open, or when its
/// source (an IPv4 address, an IPv6 /64) holds `per_source` already
/// (0: no per-source cap), before any handshake work: a flood costs us a
/// closed socket and no more, and one source cannot starve the others.
#[derive(Clone)]
pub struct ConnectionCap {
    all: Arc<Semaphore>,
    per_source: usize,
    sources: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

impl ConnectionCap {
    pub fn new(max: usize, per_source: usize) -> Self {
        ConnectionCap { all: Arc::new(Semaphore::new(max)), per_source, sources: Arc::default() }
    }

    fn admit(&self, stream: &TcpStream) -> Result<(OwnedSemaphorePermit, Option<SourceSlot>), Refused> {
        let permit = self.all.clone().try_acquire_owned().map_err(|_| Refused::Cap)?;
        let source = stream.peer_addr().ok().map(|a| super::limits::source_key(a.ip()));
        let slot = match source {
            Some(ip) if self.per_source > 0 => {
                let mut sources = self.sources.lock().unwrap_or_else(|e| e.into_inner());
                let open = sources.entry(ip).or_insert(0);
                if *open >= self.per_source {
                    return Err(Refused::SourceCap);
                }
                *open += 1;
                Some(SourceSlot { ip, sources: self.sources.clone() })
            }
            _ => None,
        };
        Ok((permit, slot))
    }
}

/// One open connection counted against its source; uncounted when dropped.
struct SourceSlot {
    ip: IpAddr,
    sources: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

impl Drop for SourceSlot {
    fn drop(&mut self) {
        let mut sources = self.sources.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(open) = sources.get_mut(&self.ip) {
            *open -= 1;
            if *open == 0 {
                sources.remove(&self.ip);
            }
        }
    }
}

impl<S> Accept<TcpStream, S> for ConnectionCap {
    type Stream = Capped<TcpStream>;
    type Service = S;
    type Future = std::future::Ready<io::Result<(Capped<TcpStream>, S)>>;

    fn accept(&self, stream: TcpStream, service: S) -> <Self as Accept<TcpStream, S>>::Future {
        // Answers are written in a few small TLS records: without this, Nagle
        // holds the last one for the client's delayed ACK (40 ms).
        let _ = stream.set_nodelay(true);
        std::future::ready(match self.admit(&stream) {
            Ok((permit, slot)) => Ok((Capped { inner: stream, _permit: permit, _source: slot }, service)),
            Err(refused) => Err(io::Error::other(refused)),
        })
    }
}

/// A stream that gives its connection slot back when dropped.
pub struct Capped<I> {
    inner: I,
    _permit: OwnedSemaphorePermit,
    _source: Option<SourceSlot>,
}

impl<I: AsyncRead + Unpin> AsyncRead for Capped<I> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for Capped<I> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

//! Accepting connections: a cap on open connections, in all and per source,
//! applied before any handshake work.
//!
//! Invariants: a refused connection costs a closed socket and no more; every
//! accepted stream holds its slots until it is dropped; refusals are typed
//! ([`Refused`]) so the accept loop counts them without matching error text.

use std::collections::HashMap;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use axum_server::accept::Accept;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Why a connection was closed at accept, before any handshake work.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    /// Every connection slot is taken.
    #[error("connection cap reached")]
    Cap,
    /// This source holds all the slots it may.
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
    /// At most `max` connections, `per_source` of them from one source (0: no such cap).
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

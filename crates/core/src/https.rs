//! The one HTTPS client connection: the node's requests (the agent), the
//! admin client's and the tests' all open theirs here.
//!
//! Invariants: a new TCP connection (from a given source address when
//! asked), a TLS handshake checked by the caller's configuration for the
//! caller's name, then hyper's HTTP/1.1 client connection with the
//! caller's bounds; the connection is driven by a task that ends when the
//! [`Opened`] is dropped, so nothing outlives its exchange. A peer that
//! closes without TLS's `close_notify` has ended its answer (a body up to
//! the close, as Go reads one), not failed it.

use std::net::IpAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::client::conn::http1;
use rustls::ClientConfig;
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

/// Why a connection could not be opened, by stage.
#[derive(Debug)]
pub enum OpenError {
    /// No TCP connection (refused, unreachable, no such name).
    Connect(std::io::Error),
    /// The TLS handshake failed (a certificate not trusted, among others).
    Tls(std::io::Error),
    /// The HTTP/1.1 connection could not start.
    Http(hyper::Error),
}

/// An open connection: requests go through `sender`; the connection's
/// task ends when this is dropped.
pub struct Opened {
    /// Sends requests on the connection.
    pub sender: http1::SendRequest<Full<Bytes>>,
    _connection: AbortOnDrop<Result<(), hyper::Error>>,
}

/// Where and how to connect.
pub struct Dial<'a> {
    /// `host:port`.
    pub address: &'a str,
    /// The local address to connect from; the kernel's choice when `None`.
    pub source: Option<IpAddr>,
    /// The name the server's certificate is checked for.
    pub name: ServerName<'static>,
    /// Whom to trust, and the credential to present, if any.
    pub config: Arc<ClientConfig>,
}

/// Opens a connection as `dial` says, with hyper's client set up by `http`.
pub async fn open(dial: Dial<'_>, http: &http1::Builder) -> Result<Opened, OpenError> {
    let tcp = connect(dial.address, dial.source).await.map_err(OpenError::Connect)?;
    let _ = tcp.set_nodelay(true);
    let tls = TlsConnector::from(dial.config).connect(dial.name, tcp).await.map_err(OpenError::Tls)?;
    over(tls, http).await.map_err(OpenError::Http)
}

/// HTTP/1.1 over `io`, a stream already open (TLS, or a test's pipe).
pub async fn over<S>(io: S, http: &http1::Builder) -> Result<Opened, hyper::Error>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (sender, connection) = http.handshake(hyper_util::rt::TokioIo::new(EndWithoutNotify(io))).await?;
    Ok(Opened { sender, _connection: AbortOnDrop(tokio::spawn(connection)) })
}

async fn connect(address: &str, source: Option<IpAddr>) -> std::io::Result<TcpStream> {
    let Some(source) = source else { return TcpStream::connect(address).await };
    let target = tokio::net::lookup_host(address)
        .await?
        .next()
        .ok_or_else(|| std::io::Error::other("the address resolves to nothing"))?;
    let socket =
        if target.is_ipv4() { tokio::net::TcpSocket::new_v4()? } else { tokio::net::TcpSocket::new_v6()? };
    socket.bind(std::net::SocketAddr::new(source, 0))?;
    socket.connect(target).await
}

/// A task aborted when its handle goes.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A stream whose peer closing without TLS's `close_notify` reads as an
/// end, not an error: it has still said all it had to (a body up to the
/// close, as Go reads one).
struct EndWithoutNotify<S>(S);

impl<S: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for EndWithoutNotify<S> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        match std::pin::Pin::new(&mut self.0).poll_read(cx, buf) {
            std::task::Poll::Ready(Err(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                std::task::Poll::Ready(Ok(()))
            }
            other => other,
        }
    }
}

impl<S: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for EndWithoutNotify<S> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

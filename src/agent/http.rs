//! The node's HTTPS client, as janusd's Go client behaves on the wire: a new
//! TLS connection for every request, HTTP/1.1 without ALPN, Go's default
//! headers, 10 s for the whole exchange, at most 64 KiB of an answer read.
//!
//! TLS as the node does it: with a fleet root, the endpoint is
//! checked through it for the name `controller.fleet.janus`; only when that
//! fails on certificate verification is the same request sent again, checked
//! against `ca.crt` for the host of the address.

use std::io::Read as _;
use std::sync::Arc;
use std::time::Duration;

use rustls::ClientConfig;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use crate::pki::FLEET_CONTROLLER_NAME;
use crate::protocol::MAX_BODY;

/// How long one exchange may take, connection to last byte (Go's client timeout in janusd).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
const MAX_HEAD: usize = 16 * 1024;
/// Go's transport has no fixed header count; 100 is far more than any endpoint sends.
const MAX_HEADERS: usize = 100;

/// How the endpoint's certificate was checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// Through the fleet root, for the name `controller.fleet.janus`.
    Fleet,
    /// Through `ca.crt`, for the host of the address.
    Certificate,
}

/// Why an exchange with the endpoint failed.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// No connection, or it broke.
    #[error("{url}: {cause}")]
    Connect {
        /// The URL asked.
        url: String,
        /// The underlying error.
        cause: std::io::Error,
    },
    /// The TLS handshake failed.
    #[error("{url}: tls: {cause}")]
    Tls {
        /// The URL asked.
        url: String,
        /// The underlying error.
        cause: std::io::Error,
    },
    /// The exchange took longer than [`REQUEST_TIMEOUT`].
    #[error("{url}: the exchange took longer than {}s", REQUEST_TIMEOUT.as_secs())]
    Timeout {
        /// The URL asked.
        url: String,
    },
    /// The endpoint answered something that is not HTTP/1.1 as Go reads it.
    #[error("{url}: {reason}")]
    Protocol {
        /// The URL asked.
        url: String,
        /// Why.
        reason: String,
    },
    /// The client cannot be set up (a CA file it cannot use).
    #[error("{0}")]
    Config(String),
}

impl HttpError {
    /// Whether this is the certificate-verification failure after which a
    /// node tries `ca.crt` (Go's `*tls.CertificateVerificationError`).
    pub fn is_certificate_verification(&self) -> bool {
        match self {
            HttpError::Tls { cause, .. } => matches!(
                cause.get_ref().and_then(|e| e.downcast_ref::<rustls::Error>()),
                Some(rustls::Error::InvalidCertificate(_))
            ),
            _ => false,
        }
    }
}

/// An answer: its status, its headers and at most 64 KiB of its body.
#[derive(Debug, Clone, Default)]
pub struct Answer {
    /// The status code.
    pub status: u16,
    /// The headers, in order, names as sent.
    pub headers: Vec<(String, String)>,
    /// The body, decoded, at most 64 KiB.
    pub body: Vec<u8>,
}

impl Answer {
    /// The first header called `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// The body as the node quotes it in messages: trimmed, lossy UTF-8.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).trim().to_string()
    }
}

/// A request: method, path, extra headers, body.
#[derive(Debug, Clone, Default)]
pub struct Request<'a> {
    /// `GET` or `POST`.
    pub method: &'a str,
    /// The path, e.g. `/register`.
    pub path: &'a str,
    /// Headers beyond Go's defaults.
    pub headers: Vec<(&'a str, String)>,
    /// The body, for a `POST`.
    pub body: Option<&'a [u8]>,
}

/// The registration endpoint as a node knows it.
#[derive(Clone)]
pub struct Endpoint {
    /// `host:port`, as provisioned; also the `Host:` header.
    pub address: String,
    fleet: Option<Arc<ClientConfig>>,
    certificate: Option<Arc<ClientConfig>>,
    timeout: Duration,
    /// The local address to connect from (a node has one; tests use several loopbacks).
    source: Option<std::net::IpAddr>,
}

impl Endpoint {
    /// `fleet_root` and `controller_ca` are PEM; either may be empty.
    pub fn new(address: &str, fleet_root: &[u8], controller_ca: &[u8]) -> Result<Self, HttpError> {
        Ok(Endpoint {
            address: address.to_string(),
            fleet: client_config(fleet_root)?,
            certificate: client_config(controller_ca)?,
            timeout: REQUEST_TIMEOUT,
            source: None,
        })
    }

    /// An endpoint checked by `config` alone, in certificate mode.
    pub fn from_config(address: &str, config: Arc<ClientConfig>) -> Self {
        Endpoint {
            address: address.to_string(),
            fleet: None,
            certificate: Some(config),
            timeout: REQUEST_TIMEOUT,
            source: None,
        }
    }

    /// The same endpoint with another time limit per exchange.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The same endpoint, connecting from `source`.
    pub fn with_source(mut self, source: std::net::IpAddr) -> Self {
        self.source = Some(source);
        self
    }

    async fn connect(&self) -> std::io::Result<TcpStream> {
        let Some(source) = self.source else { return TcpStream::connect(&self.address).await };
        let target = tokio::net::lookup_host(&self.address)
            .await?
            .next()
            .ok_or_else(|| std::io::Error::other("the address resolves to nothing"))?;
        let socket = if target.is_ipv4() {
            tokio::net::TcpSocket::new_v4()?
        } else {
            tokio::net::TcpSocket::new_v6()?
        };
        socket.bind(std::net::SocketAddr::new(source, 0))?;
        socket.connect(target).await
    }

    /// Sends `request`, fleet mode first when a fleet root is known.
    pub async fn send(&self, request: &Request<'_>) -> Result<(Answer, Via), HttpError> {
        if let Some(fleet) = &self.fleet {
            let name = ServerName::try_from(FLEET_CONTROLLER_NAME).expect("a valid DNS name");
            match self.exchange(fleet.clone(), name, request).await {
                Ok(answer) => return Ok((answer, Via::Fleet)),
                Err(e) if e.is_certificate_verification() && self.certificate.is_some() => {}
                Err(e) => return Err(e),
            }
        }
        let Some(certificate) = &self.certificate else {
            return Err(HttpError::Config("no CA to check the endpoint with (ca.crt is empty)".into()));
        };
        let host = host_of(&self.address);
        let name = ServerName::try_from(host.to_string())
            .map_err(|_| HttpError::Config(format!("{host:?} is neither a DNS name nor an IP address")))?;
        let answer = self.exchange(certificate.clone(), name, request).await?;
        Ok((answer, Via::Certificate))
    }

    async fn exchange(
        &self,
        config: Arc<ClientConfig>,
        name: ServerName<'static>,
        request: &Request<'_>,
    ) -> Result<Answer, HttpError> {
        let url = format!("https://{}{}", self.address, request.path);
        match tokio::time::timeout(self.timeout, self.exchange_untimed(config, name, request, &url)).await {
            Ok(result) => result,
            Err(_) => Err(HttpError::Timeout { url }),
        }
    }

    async fn exchange_untimed(
        &self,
        config: Arc<ClientConfig>,
        name: ServerName<'static>,
        request: &Request<'_>,
        url: &str,
    ) -> Result<Answer, HttpError> {
        let tcp = self.connect().await.map_err(|cause| HttpError::Connect { url: url.to_string(), cause })?;
        let _ = tcp.set_nodelay(true);
        let mut tls = TlsConnector::from(config)
            .connect(name, tcp)
            .await
            .map_err(|cause| HttpError::Tls { url: url.to_string(), cause })?;
        let io = |cause: std::io::Error| HttpError::Connect { url: url.to_string(), cause };
        tls.write_all(&request_bytes(&self.address, request)).await.map_err(io)?;
        tls.flush().await.map_err(io)?;
        read_answer(&mut tls, url).await
    }
}

fn client_config(pem: &[u8]) -> Result<Option<Arc<ClientConfig>>, HttpError> {
    let certs =
        crate::pki::all_certificates(pem, "a CA file").map_err(|e| HttpError::Config(e.to_string()))?;
    if certs.is_empty() {
        return Ok(None);
    }
    let mut roots = rustls::RootCertStore::empty();
    for cert in certs {
        roots
            .add(CertificateDer::from(cert.to_vec()))
            .map_err(|e| HttpError::Config(format!("a CA the client cannot use: {e}")))?;
    }
    let config = crate::tls::client_config(roots).map_err(|e| HttpError::Config(e.to_string()))?;
    Ok(Some(Arc::new(config)))
}

/// The host part of `host:port`, without IPv6 brackets.
pub fn host_of(address: &str) -> &str {
    let host = address.rsplit_once(':').map_or(address, |(h, _)| h);
    host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host)
}

/// The request head and body in the order Go's client writes them.
fn request_bytes(address: &str, request: &Request<'_>) -> Vec<u8> {
    let mut head = format!(
        "{} {} HTTP/1.1\r\nHost: {address}\r\nUser-Agent: Go-http-client/1.1\r\n",
        request.method, request.path
    );
    if let Some(body) = request.body {
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    for (name, value) in &request.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("Accept-Encoding: gzip\r\n\r\n");
    let mut bytes = head.into_bytes();
    if let Some(body) = request.body {
        bytes.extend_from_slice(body);
    }
    bytes
}

/// What the agent makes of `bytes` as the whole of an answer (for tests and
/// fuzzing): [`read_answer`] over bytes that are all there, polled once (a
/// slice never makes a reader wait).
pub fn parse_answer(bytes: &[u8]) -> Result<Answer, HttpError> {
    let mut stream = bytes;
    let mut reading = std::pin::pin!(read_answer(&mut stream, "https://fuzz/"));
    match reading.as_mut().poll(&mut std::task::Context::from_waker(std::task::Waker::noop())) {
        std::task::Poll::Ready(answer) => answer,
        std::task::Poll::Pending => unreachable!("a byte slice is always ready"),
    }
}

/// Reads one answer as Go's transport does: any framing (`Content-Length`,
/// chunked, or up to the close), interim 1xx heads skipped, a gzip body
/// decoded (janusd asked for it) with `Content-Encoding` and
/// `Content-Length` then dropped; the body is cut at 64 KiB, as the node's
/// `io.LimitReader` cuts it.
async fn read_answer<S: tokio::io::AsyncRead + Unpin>(
    stream: &mut S,
    url: &str,
) -> Result<Answer, HttpError> {
    let mut incoming = Incoming { stream, buf: Vec::with_capacity(4096), url };
    let (status, mut headers) = loop {
        let (status, headers) = incoming.head().await?;
        if !(100..200).contains(&status) || status == 101 {
            break (status, headers);
        }
    };
    let header = |name: &str| {
        headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.trim().to_string())
    };
    let chunked = header("transfer-encoding").is_some_and(|v| v.to_ascii_lowercase().ends_with("chunked"));
    let gzip = header("content-encoding").is_some_and(|v| v.eq_ignore_ascii_case("gzip"));
    // Enough raw bytes for 64 KiB once decoded: gzip never grows data by more
    // than a few bytes per block.
    let raw_limit = if gzip { 2 * MAX_BODY } else { MAX_BODY };
    let raw = if status == 204 || status == 304 {
        Vec::new()
    } else if chunked {
        incoming.chunked_body(raw_limit).await?
    } else if let Some(length) = header("content-length") {
        let length: usize = length.parse().map_err(|_| incoming.bad(format!("Content-Length {length:?}")))?;
        incoming.exactly(length.min(raw_limit)).await?
    } else {
        incoming.until_close(raw_limit).await?
    };
    let body = if gzip {
        headers.retain(|(n, _)| {
            !n.eq_ignore_ascii_case("content-encoding") && !n.eq_ignore_ascii_case("content-length")
        });
        let mut decoded = Vec::new();
        let read =
            flate2::read::GzDecoder::new(raw.as_slice()).take(MAX_BODY as u64).read_to_end(&mut decoded);
        match read {
            Ok(_) => decoded,
            Err(e) => return Err(incoming.bad(format!("gzip: {e}"))),
        }
    } else {
        raw
    };
    Ok(Answer { status, headers, body })
}

/// The bytes read from a connection and not yet used.
struct Incoming<'a, S> {
    stream: &'a mut S,
    buf: Vec<u8>,
    url: &'a str,
}

impl<S: tokio::io::AsyncRead + Unpin> Incoming<'_, S> {
    fn bad(&self, reason: String) -> HttpError {
        HttpError::Protocol { url: self.url.to_string(), reason }
    }

    /// Reads more; `false` once the peer has closed.
    async fn fill(&mut self) -> Result<bool, HttpError> {
        let mut chunk = [0u8; 8192];
        match self.stream.read(&mut chunk).await {
            Ok(0) => Ok(false),
            Ok(n) => {
                self.buf.extend_from_slice(&chunk[..n]);
                Ok(true)
            }
            // A peer that closes without close_notify has still said all it had to.
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(false),
            Err(cause) => Err(HttpError::Connect { url: self.url.to_string(), cause }),
        }
    }

    /// One status line and its headers, parsed by `httparse`.
    async fn head(&mut self) -> Result<(u16, Vec<(String, String)>), HttpError> {
        loop {
            let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
            let mut response = httparse::Response::new(&mut slots);
            match response.parse(&self.buf) {
                Ok(httparse::Status::Complete(len)) => {
                    let status = response.code.unwrap_or_default();
                    let headers = response
                        .headers
                        .iter()
                        .map(|h| (h.name.to_string(), String::from_utf8_lossy(h.value).into_owned()))
                        .collect();
                    self.buf.drain(..len);
                    return Ok((status, headers));
                }
                Ok(httparse::Status::Partial) if self.buf.len() > MAX_HEAD => {
                    return Err(self.bad("the answer's head is larger than 16 KiB".into()));
                }
                Ok(httparse::Status::Partial) => {
                    if !self.fill().await? {
                        return Err(self.bad("the connection closed before an answer".into()));
                    }
                }
                Err(e) => return Err(self.bad(format!("not an HTTP answer: {e}"))),
            }
        }
    }

    /// `n` bytes, or an error if the peer closes first.
    async fn exactly(&mut self, n: usize) -> Result<Vec<u8>, HttpError> {
        while self.buf.len() < n {
            if !self.fill().await? {
                return Err(self.bad(format!("the body ended after {} of {n} bytes", self.buf.len())));
            }
        }
        Ok(self.buf.drain(..n).collect())
    }

    /// Everything until the peer closes, cut at `limit`.
    async fn until_close(&mut self, limit: usize) -> Result<Vec<u8>, HttpError> {
        while self.buf.len() < limit && self.fill().await? {}
        self.buf.truncate(limit);
        Ok(std::mem::take(&mut self.buf))
    }

    /// A chunked body, cut at `limit` (the rest is never read: the
    /// connection is closed after one exchange).
    async fn chunked_body(&mut self, limit: usize) -> Result<Vec<u8>, HttpError> {
        let mut body = Vec::new();
        while body.len() < limit {
            let size = match httparse::parse_chunk_size(&self.buf) {
                Ok(httparse::Status::Complete((len, size))) => {
                    self.buf.drain(..len);
                    size
                }
                Ok(httparse::Status::Partial) if self.buf.len() > MAX_HEAD => {
                    return Err(self.bad("a chunk size line is larger than 16 KiB".into()));
                }
                Ok(httparse::Status::Partial) => {
                    if !self.fill().await? {
                        return Err(self.bad("the chunked body ended without its last chunk".into()));
                    }
                    continue;
                }
                Err(_) => return Err(self.bad("a chunk size is not hexadecimal".into())),
            };
            if size == 0 {
                break;
            }
            let wanted = usize::try_from(size).unwrap_or(usize::MAX).min(limit - body.len());
            body.extend(self.exactly(wanted).await?);
            if wanted as u64 == size && self.exactly(2).await? != b"\r\n" {
                return Err(self.bad("a chunk does not end with CRLF".into()));
            }
        }
        Ok(body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts() {
        assert_eq!(host_of("10.0.2.2:8443"), "10.0.2.2");
        assert_eq!(host_of("[::1]:8443"), "::1");
        assert_eq!(host_of("controller.example:8443"), "controller.example");
    }

    #[test]
    fn request_head_is_go_shaped() {
        let req = Request {
            method: "POST",
            path: "/register",
            headers: vec![("Content-Type", "application/json".into())],
            body: Some(b"{}"),
        };
        let bytes = String::from_utf8(request_bytes("10.0.2.2:18900", &req)).unwrap();
        assert_eq!(
            bytes,
            "POST /register HTTP/1.1\r\nHost: 10.0.2.2:18900\r\nUser-Agent: Go-http-client/1.1\r\nContent-Length: 2\r\nContent-Type: application/json\r\nAccept-Encoding: gzip\r\n\r\n{}"
        );
    }

    fn answer(bytes: &[u8]) -> Result<Answer, HttpError> {
        let mut stream = bytes;
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(read_answer(&mut stream, "https://test"))
    }

    fn gzipped(data: &[u8]) -> Vec<u8> {
        use std::io::Write;
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        encoder.write_all(data).unwrap();
        encoder.finish().unwrap()
    }

    #[test]
    fn reads_content_length_and_stops_there() {
        let a = answer(b"HTTP/1.1 202 Accepted\r\nContent-Length: 5\r\n\r\nhello, and more").unwrap();
        assert_eq!((a.status, a.body.as_slice()), (202, &b"hello"[..]));
    }

    #[test]
    fn reads_chunked_bodies() {
        let a = answer(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4;ext=1\r\n{\"a\"\r\n2\r\n:1\r\n1\r\n}\r\n0\r\n\r\n")
            .unwrap();
        assert_eq!(a.body, br#"{"a":1}"#);
    }

    #[test]
    fn reads_until_close_without_a_length() {
        let a = answer(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nall of it").unwrap();
        assert_eq!(a.body, b"all of it");
    }

    #[test]
    fn decodes_gzip_as_go_does() {
        let body = gzipped(br#"{"id":"x"}"#);
        let mut bytes = format!(
            "HTTP/1.1 201 Created\r\nContent-Encoding: gzip\r\nContent-Length: {}\r\n\r\n",
            body.len()
        )
        .into_bytes();
        bytes.extend_from_slice(&body);
        let a = answer(&bytes).unwrap();
        assert_eq!(a.body, br#"{"id":"x"}"#);
        assert_eq!(a.header("content-encoding"), None, "Go drops it once decoded");
        assert_eq!(a.header("content-length"), None);
    }

    #[test]
    fn decodes_gzip_in_chunks_and_cuts_at_64_kib() {
        let body = gzipped(&vec![b'a'; 200_000]);
        let mut bytes =
            b"HTTP/1.1 400 Bad Request\r\nContent-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n"
                .to_vec();
        for piece in body.chunks(100) {
            bytes.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
            bytes.extend_from_slice(piece);
            bytes.extend_from_slice(b"\r\n");
        }
        bytes.extend_from_slice(b"0\r\n\r\n");
        let a = answer(&bytes).unwrap();
        assert_eq!(a.body.len(), MAX_BODY);
    }

    #[test]
    fn skips_interim_answers() {
        let a = answer(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n").unwrap();
        assert_eq!((a.status, a.body.len()), (204, 0));
    }

    #[test]
    fn refuses_what_is_not_http() {
        for bytes in [
            &b"SSH-2.0-OpenSSH\r\n\r\n"[..],
            b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcXY",
            b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\n\r\nnot gzip",
            b"HTTP/1.1 200 OK\r\n",
        ] {
            assert!(
                matches!(answer(bytes), Err(HttpError::Protocol { .. })),
                "{:?}",
                String::from_utf8_lossy(bytes)
            );
        }
    }
}

//! The node's HTTPS client, as janusd's Go client behaves on the wire: a new
//! TLS connection for every request, HTTP/1.1 without ALPN, Go's default
//! headers, 10 s for the whole exchange, at most 64 KiB of an answer read.
//! HTTP/1.1 itself is hyper's client connection, told to write what Go writes.
//!
//! TLS as the node does it: with a fleet root, the endpoint is
//! checked through it for the name `controller.fleet.janus`; only when that
//! fails on certificate verification is the same request sent again, checked
//! against `ca.crt` for the host of the address.

use std::io::Read as _;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use rustls::ClientConfig;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use janus_core::https::{self, OpenError};
use janus_core::pki::FLEET_CONTROLLER_NAME;
use janus_core::protocol::MAX_BODY;

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
        let dial = https::Dial { address: &self.address, source: self.source, name, config };
        let opened = match https::open(dial, &go_http()).await {
            Ok(opened) => opened,
            Err(OpenError::Connect(cause)) => return Err(HttpError::Connect { url: url.to_string(), cause }),
            Err(OpenError::Tls(cause)) => return Err(HttpError::Tls { url: url.to_string(), cause }),
            Err(OpenError::Http(e)) => return Err(broken(url, e)),
        };
        exchange_over(opened, &self.address, request, url).await
    }
}

fn client_config(pem: &[u8]) -> Result<Option<Arc<ClientConfig>>, HttpError> {
    let certs =
        janus_core::pki::all_certificates(pem, "a CA file").map_err(|e| HttpError::Config(e.to_string()))?;
    if certs.is_empty() {
        return Ok(None);
    }
    let mut roots = rustls::RootCertStore::empty();
    for cert in certs {
        roots
            .add(CertificateDer::from(cert.to_vec()))
            .map_err(|e| HttpError::Config(format!("a CA the client cannot use: {e}")))?;
    }
    let config = janus_core::tls::client_config(roots).map_err(|e| HttpError::Config(e.to_string()))?;
    Ok(Some(Arc::new(config)))
}

/// The host part of `host:port`, without IPv6 brackets.
pub fn host_of(address: &str) -> &str {
    let host = address.rsplit_once(':').map_or(address, |(h, _)| h);
    host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host)
}

/// The request as Go's client writes it: `Host`, `User-Agent`,
/// `Content-Length` (with a body), the caller's headers, `Accept-Encoding:
/// gzip`, in that order and title case (hyper writes a header map in its
/// insertion order; `request_head_is_go_shaped` holds every byte).
fn go_request(address: &str, request: &Request<'_>) -> Result<hyper::Request<Full<Bytes>>, HttpError> {
    let mut built = hyper::Request::builder()
        .method(request.method)
        .uri(request.path)
        .header("Host", address)
        .header("User-Agent", "Go-http-client/1.1");
    if let Some(body) = request.body {
        built = built.header("Content-Length", body.len());
    }
    for (name, value) in &request.headers {
        built = built.header(*name, value.as_str());
    }
    built
        .header("Accept-Encoding", "gzip")
        .body(Full::new(Bytes::copy_from_slice(request.body.unwrap_or_default())))
        .map_err(|e| HttpError::Config(format!("a request the client cannot send: {e}")))
}

/// What the agent makes of `bytes` as the whole of an answer (for tests and
/// fuzzing): the same exchange as over TLS ([`exchange_over`]), over an
/// in-memory pipe whose other end says `bytes` and closes.
pub fn parse_answer(bytes: &[u8]) -> Result<Answer, HttpError> {
    thread_local! {
        static RUNTIME: tokio::runtime::Runtime =
            tokio::runtime::Builder::new_current_thread().build().expect("a current-thread runtime");
    }
    let bytes = bytes.to_vec();
    RUNTIME.with(|runtime| {
        runtime.block_on(async move {
            // Room for the request, which nobody reads.
            let (ours, mut theirs) = tokio::io::duplex(bytes.len() + 4096);
            let answering = tokio::spawn(async move {
                // The answer after the request's head, as an endpoint gives it
                // (hyper refuses bytes that come before its request).
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && theirs.read(&mut byte).await.is_ok_and(|n| n == 1) {
                    head.push(byte[0]);
                }
                let _ = theirs.write_all(&bytes).await;
                let _ = theirs.shutdown().await;
                // Held open until the exchange is over: its close is the answer's end.
                let mut rest = Vec::new();
                let _ = theirs.read_to_end(&mut rest).await;
            });
            let request = Request { method: "GET", path: "/register/x", ..Default::default() };
            let answer = match https::over(ours, &go_http()).await {
                Ok(opened) => exchange_over(opened, "fuzz", &request, "https://fuzz/").await,
                Err(e) => Err(broken("https://fuzz/", e)),
            };
            answering.abort();
            answer
        })
    })
}

/// hyper's client as Go's transport reads an answer: header names written
/// as Go writes them, a head of at most 16 KiB, [`MAX_HEADERS`] headers.
fn go_http() -> hyper::client::conn::http1::Builder {
    let mut http = hyper::client::conn::http1::Builder::new();
    http.title_case_headers(true).max_buf_size(MAX_HEAD).max_headers(MAX_HEADERS);
    http
}

/// The connection broke (reset, refused): a connect error; anything else,
/// a short body included, is an answer that is not HTTP as Go reads it.
fn broken(url: &str, e: hyper::Error) -> HttpError {
    let bad = |reason: String| HttpError::Protocol { url: url.to_string(), reason };
    let io = std::error::Error::source(&e).and_then(|s| s.downcast_ref::<std::io::Error>());
    match io {
        Some(cause) if !is_framing(cause.kind()) => HttpError::Connect {
            url: url.to_string(),
            cause: std::io::Error::new(cause.kind(), format!("{e}: {cause}")),
        },
        Some(cause) => bad(format!("not an HTTP answer: {e}: {cause}")),
        None => bad(format!("not an HTTP answer: {e}")),
    }
}

/// One exchange over an opened connection, as Go's transport makes it: any
/// framing (`Content-Length`, chunked, or up to the close), interim 1xx
/// heads skipped, at most [`MAX_HEADERS`] headers in a head of at most 16
/// KiB, a gzip body decoded (janusd asked for it) with `Content-Encoding`
/// and `Content-Length` then dropped; the body is cut at 64 KiB, as the
/// node's `io.LimitReader` cuts it, and the rest never read.
async fn exchange_over(
    mut opened: https::Opened,
    address: &str,
    request: &Request<'_>,
    url: &str,
) -> Result<Answer, HttpError> {
    let bad = |reason: String| HttpError::Protocol { url: url.to_string(), reason };
    let broken = |e: hyper::Error| broken(url, e);
    let response = opened.sender.send_request(go_request(address, request)?).await.map_err(broken)?;
    let status = response.status().as_u16();
    let mut headers: Vec<(String, String)> = response
        .headers()
        .iter()
        .map(|(n, v)| (n.as_str().to_string(), String::from_utf8_lossy(v.as_bytes()).into_owned()))
        .collect();
    let gzip = response
        .headers()
        .get(hyper::header::CONTENT_ENCODING)
        .is_some_and(|v| v.as_bytes().trim_ascii().eq_ignore_ascii_case(b"gzip"));
    // Enough raw bytes for 64 KiB once decoded: gzip never grows data by more
    // than a few bytes per block.
    let raw_limit = if gzip { 2 * MAX_BODY } else { MAX_BODY };
    let mut body = response.into_body();
    let mut raw = Vec::new();
    while raw.len() < raw_limit {
        match body.frame().await {
            None => break,
            Some(Ok(frame)) => raw.extend_from_slice(frame.data_ref().map_or(&[][..], |d| d.as_ref())),
            Some(Err(e)) => return Err(broken(e)),
        }
    }
    raw.truncate(raw_limit);
    // One request per connection: closed now, the rest never read.
    drop(opened);
    if !gzip {
        return Ok(Answer { status, headers, body: raw });
    }
    headers.retain(|(n, _)| {
        !n.eq_ignore_ascii_case("content-encoding") && !n.eq_ignore_ascii_case("content-length")
    });
    let mut decoded = Vec::new();
    match flate2::read::GzDecoder::new(raw.as_slice()).take(MAX_BODY as u64).read_to_end(&mut decoded) {
        Ok(_) => Ok(Answer { status, headers, body: decoded }),
        Err(e) => Err(bad(format!("gzip: {e}"))),
    }
}

/// Whether hyper's I/O error of `kind` is about the bytes (a short body, a
/// bad chunk size line) rather than the connection.
fn is_framing(kind: std::io::ErrorKind) -> bool {
    use std::io::ErrorKind::{InvalidData, InvalidInput, UnexpectedEof};
    matches!(kind, InvalidData | InvalidInput | UnexpectedEof)
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

    /// The bytes hyper writes for `request`, read off the other end of a pipe.
    fn sent(request: &Request<'_>) -> String {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        runtime.block_on(async {
            let (ours, mut theirs) = tokio::io::duplex(1 << 16);
            let opened = https::over(ours, &go_http()).await.unwrap();
            let exchange = exchange_over(opened, "10.0.2.2:18900", request, "https://test/");
            let reading = async {
                let mut bytes = vec![0; 4096];
                let n = theirs.read(&mut bytes).await.unwrap();
                theirs.write_all(b"HTTP/1.1 204 No Content\r\n\r\n").await.unwrap();
                String::from_utf8(bytes[..n].to_vec()).unwrap()
            };
            let (answer, bytes) = tokio::join!(exchange, reading);
            assert_eq!(answer.unwrap().status, 204);
            bytes
        })
    }

    #[test]
    fn request_head_is_go_shaped() {
        let post = Request {
            method: "POST",
            path: "/register",
            headers: vec![("Content-Type", "application/json".into())],
            body: Some(b"{}"),
        };
        assert_eq!(
            sent(&post),
            "POST /register HTTP/1.1\r\nHost: 10.0.2.2:18900\r\nUser-Agent: Go-http-client/1.1\r\nContent-Length: 2\r\nContent-Type: application/json\r\nAccept-Encoding: gzip\r\n\r\n{}"
        );
        let poll = Request {
            method: "GET",
            path: "/register/0123",
            headers: vec![("Authorization", "Bearer s".into())],
            body: None,
        };
        assert_eq!(
            sent(&poll),
            "GET /register/0123 HTTP/1.1\r\nHost: 10.0.2.2:18900\r\nUser-Agent: Go-http-client/1.1\r\nAuthorization: Bearer s\r\nAccept-Encoding: gzip\r\n\r\n"
        );
    }

    fn answer(bytes: &[u8]) -> Result<Answer, HttpError> {
        parse_answer(bytes)
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
                "{:?}: {:?}",
                String::from_utf8_lossy(bytes),
                answer(bytes)
            );
        }
    }
}

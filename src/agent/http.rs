//! The node's HTTPS client, as janusd's Go client behaves on the wire: a new
//! TLS connection for every request, HTTP/1.1 without ALPN, Go's default
//! headers, 10 s for the whole exchange, at most 64 KiB of an answer read.
//!
//! TLS follows janus-node-side.md §2: with a fleet root, the endpoint is
//! checked through it for the name `controller.fleet.janus`; only when that
//! fails on certificate verification is the same request sent again, checked
//! against `ca.crt` for the host of the address.

use std::sync::Arc;
use std::time::Duration;

use rustls::ClientConfig;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use crate::pki::FLEET_CONTROLLER_NAME;
use crate::protocol::MAX_BODY;

pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
const MAX_HEAD: usize = 16 * 1024;

/// How the endpoint's certificate was checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    Fleet,
    Certificate,
}

#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("{url}: {source}")]
    Connect { url: String, source: std::io::Error },
    #[error("{url}: tls: {source}")]
    Tls { url: String, source: std::io::Error },
    #[error("{url}: the exchange took longer than {}s", REQUEST_TIMEOUT.as_secs())]
    Timeout { url: String },
    #[error("{url}: {reason}")]
    Protocol { url: String, reason: String },
    #[error("{0}")]
    Config(String),
}

impl HttpError {
    /// Whether this is the certificate-verification failure after which a
    /// node tries `ca.crt` (Go's `*tls.CertificateVerificationError`).
    pub fn is_certificate_verification(&self) -> bool {
        match self {
            HttpError::Tls { source, .. } => matches!(
                source.get_ref().and_then(|e| e.downcast_ref::<rustls::Error>()),
                Some(rustls::Error::InvalidCertificate(_))
            ),
            _ => false,
        }
    }
}

/// An answer: its status, its headers and at most 64 KiB of its body.
#[derive(Debug, Clone, Default)]
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
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
    pub method: &'a str,
    pub path: &'a str,
    pub headers: Vec<(&'a str, String)>,
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

    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

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
        let tcp =
            self.connect().await.map_err(|source| HttpError::Connect { url: url.to_string(), source })?;
        let _ = tcp.set_nodelay(true);
        let mut tls = TlsConnector::from(config)
            .connect(name, tcp)
            .await
            .map_err(|source| HttpError::Tls { url: url.to_string(), source })?;
        let io = |source: std::io::Error| HttpError::Connect { url: url.to_string(), source };
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
    let mut config = ClientConfig::builder_with_provider(crate::server::tls::provider())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| HttpError::Config(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    // janusd builds a new http.Transport for every request: no session cache,
    // so every request is a full handshake. So are ours.
    config.resumption = rustls::client::Resumption::disabled();
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

async fn read_answer<S: tokio::io::AsyncRead + Unpin>(
    stream: &mut S,
    url: &str,
) -> Result<Answer, HttpError> {
    let bad = |reason: String| HttpError::Protocol { url: url.to_string(), reason };
    let mut buf = Vec::with_capacity(4096);
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(i) = find(&buf, b"\r\n\r\n") {
            break i + 4;
        }
        if buf.len() > MAX_HEAD {
            return Err(bad("the answer's head is larger than 16 KiB".into()));
        }
        let n = read_some(stream, &mut chunk, url).await?;
        if n == 0 {
            return Err(bad("the connection closed before an answer".into()));
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status: u16 = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad(format!("not an HTTP answer: {status_line:?}")))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_string(), v.trim().to_string()))
        .collect();
    let content_length = headers
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse::<usize>().ok());
    let mut body = buf[head_end..].to_vec();
    let wanted = content_length.unwrap_or(usize::MAX).min(MAX_BODY);
    while body.len() < wanted {
        let n = read_some(stream, &mut chunk, url).await?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    body.truncate(wanted.min(body.len()));
    Ok(Answer { status, headers, body })
}

async fn read_some<S: tokio::io::AsyncRead + Unpin>(
    stream: &mut S,
    chunk: &mut [u8],
    url: &str,
) -> Result<usize, HttpError> {
    match stream.read(chunk).await {
        Ok(n) => Ok(n),
        // A peer that closes without close_notify has still said all it had to.
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(0),
        Err(source) => Err(HttpError::Connect { url: url.to_string(), source }),
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
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
}

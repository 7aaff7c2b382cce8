//! `healthcheck`: asks a running endpoint's `GET /healthz` and exits 0 or 1,
//! for a container's HEALTHCHECK (no curl in the image). With `live`, any
//! HTTP answer counts: the process is alive and serving, even while it says
//! it cannot admit (a full disk, a newer state format) - a liveness probe
//! that restarted it then would only add restarts to the outage.
//!
//! It accepts whatever certificate the server shows, for this one call only:
//! it runs beside the server, sends no secret, and only reads a status.
//! With `plain`, it asks the plain-HTTP metrics listener instead, which
//! serves `/healthz` and `/livez` too: a flood of the TLS port cannot fail
//! a probe that goes there.

use std::sync::Arc;

use janus_agent::http::{Endpoint, Request};

/// Why the endpoint is not healthy.
#[derive(Debug, thiserror::Error)]
pub enum HealthError {
    /// It answered with another status than 200; `body` says why.
    #[error("{addr} is unhealthy ({status}): {body}")]
    Unhealthy {
        /// The endpoint asked.
        addr: String,
        /// The status it answered.
        status: u16,
        /// The body it answered with.
        body: String,
    },
    /// No answer at all.
    #[error("{addr} does not answer: {why}")]
    Unreachable {
        /// The endpoint asked.
        addr: String,
        /// The underlying error.
        why: String,
    },
}

/// How long a plain probe waits for its answer.
const PLAIN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Calls `https://ADDR/healthz` (`http://ADDR/…` with `plain`, and
/// `/livez` when `live` too); `Ok` carries the server's JSON answer.
/// `live`: any answer is `Ok` (the liveness question), not only a 200.
pub async fn check(addr: &str, live: bool, plain: bool) -> Result<String, HealthError> {
    let (status, body) = if plain {
        let path = if live { "/livez" } else { "/healthz" };
        plain_get(addr, path).await?
    } else {
        let endpoint = Endpoint::from_config(addr, Arc::new(janus_core::tls::insecure_client_config()));
        let request = Request { method: "GET", path: "/healthz", ..Default::default() };
        let (answer, _) = endpoint
            .send(&request)
            .await
            .map_err(|source| HealthError::Unreachable { addr: addr.into(), why: source.to_string() })?;
        (answer.status, answer.text())
    };
    if status == 200 || live {
        Ok(body)
    } else {
        Err(HealthError::Unhealthy { addr: addr.into(), status, body })
    }
}

/// One HTTP/1.1 GET over plain TCP, the whole answer read (the listener
/// closes after one request): its status and body.
async fn plain_get(addr: &str, path: &str) -> Result<(u16, String), HealthError> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let unreachable = |e: std::io::Error| HealthError::Unreachable { addr: addr.into(), why: e.to_string() };
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await?;
        let head = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
        stream.write_all(head.as_bytes()).await?;
        let mut answer = Vec::new();
        stream.take(1 << 16).read_to_end(&mut answer).await?;
        Ok::<_, std::io::Error>(answer)
    };
    let answer = tokio::time::timeout(PLAIN_TIMEOUT, exchange)
        .await
        .map_err(|_| unreachable(std::io::Error::new(std::io::ErrorKind::TimedOut, "no answer in 5 s")))?
        .map_err(unreachable)?;
    let text = String::from_utf8_lossy(&answer);
    let status = text.split(' ').nth(1).and_then(|s| s.parse().ok());
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b).to_string();
    match status {
        Some(status) => Ok((status, body)),
        None => Err(unreachable(std::io::Error::new(std::io::ErrorKind::InvalidData, "not an HTTP answer"))),
    }
}

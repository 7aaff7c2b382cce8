//! `healthcheck`: asks a running endpoint's `GET /healthz` and exits 0 or 1,
//! for a container's HEALTHCHECK (no curl in the image). With `live`, any
//! HTTP answer counts: the process is alive and serving, even while it says
//! it cannot admit (a full disk, a newer state format) - a liveness probe
//! that restarted it then would only add restarts to the outage.
//!
//! It accepts whatever certificate the server shows, for this one call only:
//! it runs beside the server, sends no secret, and only reads a status.

use std::sync::Arc;

use crate::agent::http::{Endpoint, HttpError, Request};

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
    #[error("{addr} does not answer: {source}")]
    Unreachable {
        /// The endpoint asked.
        addr: String,
        /// The underlying error.
        source: HttpError,
    },
}

/// Calls `https://ADDR/healthz`; `Ok` carries the server's JSON answer.
/// `live`: any answer is `Ok` (the liveness question), not only a 200.
pub async fn check(addr: &str, live: bool) -> Result<String, HealthError> {
    let endpoint = Endpoint::from_config(addr, Arc::new(crate::tls::insecure_client_config()));
    let request = Request { method: "GET", path: "/healthz", ..Default::default() };
    match endpoint.send(&request).await {
        Ok((answer, _)) if answer.status == 200 || live => Ok(answer.text()),
        Ok((answer, _)) => {
            Err(HealthError::Unhealthy { addr: addr.into(), status: answer.status, body: answer.text() })
        }
        Err(source) => Err(HealthError::Unreachable { addr: addr.into(), source }),
    }
}

//! The admin API's client: what the CLI uses with `--server URL
//! --client-cert FILE --client-key FILE --server-ca FILE`, as `puppetserver
//! ca` and `tctl` use theirs, and what the tests drive the API with.
//!
//! Invariants: the server is checked as nodes check it in fleet mode (its
//! certificate for `controller.fleet.janus`, chained to `--server-ca`, the
//! fleet's `root.crt`), so one certificate serves both ports; one request
//! per connection; answers are bounded (64 MiB: a million nodes' listing
//! is about 2 GiB, so a listing that large is refused, not buffered).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use rustls::ClientConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use serde_json::Value;

use crate::pki::FLEET_CONTROLLER_NAME;

/// The largest answer read.
const MAX_ANSWER: usize = 64 << 20;
/// How long one exchange (not an event stream) may take.
const TIMEOUT: Duration = Duration::from_secs(60);

/// An admin API at `host:port`, with a credential.
#[derive(Clone)]
pub struct AdminClient {
    address: String,
    config: Arc<ClientConfig>,
}

/// An answer: its status and JSON body.
#[derive(Debug)]
pub struct Reply {
    /// The HTTP status.
    pub status: u16,
    /// The body, `null` when it is not JSON.
    pub body: Value,
}

impl AdminClient {
    /// `server` is `https://HOST:PORT` (or `HOST:PORT`); the rest PEM.
    pub fn new(server: &str, server_ca: &[u8], cert: &[u8], key: &[u8]) -> Result<Self, String> {
        let mut roots = rustls::RootCertStore::empty();
        for der in crate::pki::all_certificates(server_ca, "--server-ca").map_err(|e| e.to_string())? {
            roots.add(CertificateDer::from(der.to_vec())).map_err(|e| format!("--server-ca: {e}"))?;
        }
        if roots.is_empty() {
            return Err("--server-ca holds no certificate: give the fleet's root.crt".into());
        }
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert)
            .collect::<Result<_, _>>()
            .map_err(|e| format!("--client-cert: {e}"))?;
        if chain.is_empty() {
            return Err("--client-cert holds no certificate".into());
        }
        let key = PrivateKeyDer::from_pem_slice(key).map_err(|e| format!("--client-key: {e}"))?;
        let config = crate::tls::admin_client_config(roots, chain, key).map_err(|e| e.to_string())?;
        Ok(Self::from_config(server, Arc::new(config)))
    }

    /// With a client configuration made elsewhere (tests: one without a credential).
    pub fn from_config(server: &str, config: Arc<ClientConfig>) -> Self {
        let address = server.trim_start_matches("https://").trim_end_matches('/').to_string();
        AdminClient { address, config }
    }

    async fn send(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> Result<hyper::Response<hyper::body::Incoming>, String> {
        let url = format!("https://{}{path}", self.address);
        let tcp = tokio::net::TcpStream::connect(&self.address).await.map_err(|e| format!("{url}: {e}"))?;
        let name = ServerName::try_from(FLEET_CONTROLLER_NAME).expect("a valid DNS name");
        let tls = tokio_rustls::TlsConnector::from(self.config.clone())
            .connect(name, tcp)
            .await
            .map_err(|e| format!("{url}: TLS: {e}"))?;
        let (mut sender, connection) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
                .await
                .map_err(|e| format!("{url}: {e}"))?;
        tokio::spawn(connection);
        let bytes = body.map(|b| b.to_string().into_bytes()).unwrap_or_default();
        let request = hyper::Request::builder()
            .method(method)
            .uri(path)
            .header("Host", &self.address)
            .header("Content-Type", "application/json")
            .body(Full::new(Bytes::from(bytes)))
            .map_err(|e| format!("{url}: {e}"))?;
        sender.send_request(request).await.map_err(|e| format!("{url}: {e}"))
    }

    /// One request and its whole answer.
    pub async fn call(&self, method: &str, path: &str, body: Option<&Value>) -> Result<Reply, String> {
        let exchange = async {
            let response = self.send(method, path, body).await?;
            let status = response.status().as_u16();
            let limited = http_body_util::Limited::new(response.into_body(), MAX_ANSWER);
            let bytes = limited.collect().await.map_err(|e| format!("the answer: {e}"))?.to_bytes();
            Ok(Reply { status, body: serde_json::from_slice(&bytes).unwrap_or(Value::Null) })
        };
        tokio::time::timeout(TIMEOUT, exchange)
            .await
            .map_err(|_| format!("no answer in {}s", TIMEOUT.as_secs()))?
    }

    /// `GET /v1/events`: each event's data, as it comes, to `each` (until
    /// it returns false or the stream ends).
    pub async fn events(&self, path: &str, mut each: impl FnMut(Value) -> bool) -> Result<(), String> {
        let response = self.send("GET", path, None).await?;
        let status = response.status().as_u16();
        let mut body = response.into_body();
        if status != 200 {
            let bytes = body.collect().await.map(|c| c.to_bytes()).unwrap_or_default();
            return Err(refusal(status, &serde_json::from_slice(&bytes).unwrap_or(Value::Null)));
        }
        let mut pending = Vec::new();
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| format!("the event stream: {e}"))?;
            let Some(data) = frame.data_ref() else { continue };
            pending.extend_from_slice(data);
            while let Some(end) = pending.windows(2).position(|w| w == b"\n\n") {
                let message: Vec<u8> = pending.drain(..end + 2).collect();
                let text = String::from_utf8_lossy(&message);
                for line in text.lines() {
                    if let Some(data) = line.strip_prefix("data:")
                        && let Ok(value) = serde_json::from_str(data.trim_start())
                        && !each(value)
                    {
                        return Ok(());
                    }
                }
            }
            if pending.len() > MAX_ANSWER {
                return Err("an event larger than 64 MiB".into());
            }
        }
        Ok(())
    }
}

/// What a refused request says: its status and the server's `error`.
pub fn refusal(status: u16, body: &Value) -> String {
    match body["error"].as_str() {
        Some(error) => format!("the admin API answered {status}: {error}"),
        None => format!("the admin API answered {status}"),
    }
}

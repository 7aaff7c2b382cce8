//! The admin API's client: what the CLI uses with `--server URL
//! --client-cert FILE --client-key FILE --server-ca FILE`, as `puppetserver
//! ca` and `tctl` use theirs, and what the tests drive the API with: one
//! typed method per route, over the same types the server takes and
//! answers ([`super::wire`]); a refusal comes back as its [`super::Problem`],
//! code included.
//!
//! Invariants: the server is checked as nodes check it in fleet mode (its
//! certificate for `controller.fleet.janus`, chained to `--server-ca`, the
//! fleet's `root.crt`), so one certificate serves both ports; one request
//! per connection; answers are bounded (64 MiB: a million nodes' listing
//! is about 2 GiB, so a listing that large is refused, not buffered).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use rustls::ClientConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use serde_json::Value;

use super::wire::{Approval, Decided, NewTokensBody, TokenRevoked, TokensMade};
use crate::credential::Caller;
use crate::model::NodeFilter;
use crate::nodes::{NodeDetail, NodeList};
use crate::web::Problem;
use janus_core::https;
use janus_core::pki::FLEET_CONTROLLER_NAME;

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

/// Why a request through the admin client did not give its answer.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The credential or the server's CA cannot be used.
    #[error("{0}")]
    Setup(String),
    /// The server could not be reached, or the exchange broke.
    #[error("{url}: {cause}")]
    Exchange {
        /// What was asked.
        url: String,
        /// Why it failed.
        cause: String,
    },
    /// No answer in time.
    #[error("no answer in {}s", .0.as_secs())]
    Timeout(Duration),
    /// The API refused: its problem document, code included.
    #[error("the admin API answered {}: {} (code: {})", .0.status, .0.detail, .0.code)]
    Refused(Box<Problem>),
    /// An answer the API does not document (a proxy's, another server's).
    #[error("the admin API answered {status} with what it does not document: {said}")]
    Unexpected {
        /// Its status.
        status: u16,
        /// Its body, cut short.
        said: String,
    },
}

/// An answer: its status and JSON body.
#[derive(Debug)]
pub struct Reply {
    /// The HTTP status.
    pub status: u16,
    /// The body, `null` when it is not JSON.
    pub body: Value,
}

/// An answer as it came: its status, headers and body.
#[derive(Debug)]
pub struct RawReply {
    /// The HTTP status.
    pub status: u16,
    /// Its headers.
    pub headers: hyper::HeaderMap,
    /// Its body.
    pub body: Vec<u8>,
}

impl RawReply {
    /// The body as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

impl AdminClient {
    /// `server` is `https://HOST:PORT` (or `HOST:PORT`); the rest PEM.
    pub fn new(server: &str, server_ca: &[u8], cert: &[u8], key: &[u8]) -> Result<Self, ClientError> {
        let setup = ClientError::Setup;
        let mut roots = rustls::RootCertStore::empty();
        for der in
            janus_core::pki::all_certificates(server_ca, "--server-ca").map_err(|e| setup(e.to_string()))?
        {
            roots.add(CertificateDer::from(der.to_vec())).map_err(|e| setup(format!("--server-ca: {e}")))?;
        }
        if roots.is_empty() {
            return Err(setup("--server-ca holds no certificate: give the fleet's root.crt".into()));
        }
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert)
            .collect::<Result<_, _>>()
            .map_err(|e| setup(format!("--client-cert: {e}")))?;
        if chain.is_empty() {
            return Err(setup("--client-cert holds no certificate".into()));
        }
        let key = PrivateKeyDer::from_pem_slice(key).map_err(|e| setup(format!("--client-key: {e}")))?;
        let config =
            janus_core::tls::admin_client_config(roots, chain, key).map_err(|e| setup(e.to_string()))?;
        Ok(Self::from_config(server, Arc::new(config)))
    }

    /// With a client configuration made elsewhere (tests: one without a credential).
    pub fn from_config(server: &str, config: Arc<ClientConfig>) -> Self {
        let address = server.trim_start_matches("https://").trim_end_matches('/').to_string();
        AdminClient { address, config }
    }

    /// Sends one request on a new connection; the answer's body is read
    /// while the returned [`https::Opened`] is held.
    async fn send(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> Result<(hyper::Response<hyper::body::Incoming>, https::Opened), ClientError> {
        let bytes = body.map(|b| b.to_string().into_bytes()).unwrap_or_default();
        self.send_raw(method, path, &[("Content-Type", "application/json")], bytes).await
    }

    /// Sends one request with these headers (beside `Host`) and body.
    async fn send_raw(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        bytes: Vec<u8>,
    ) -> Result<(hyper::Response<hyper::body::Incoming>, https::Opened), ClientError> {
        let url = format!("https://{}{path}", self.address);
        let broke = |cause: String| ClientError::Exchange { url: url.clone(), cause };
        let name = ServerName::try_from(FLEET_CONTROLLER_NAME).expect("a valid DNS name");
        let dial = https::Dial { address: &self.address, source: None, name, config: self.config.clone() };
        let mut opened = match https::open(dial, &hyper::client::conn::http1::Builder::new()).await {
            Ok(opened) => opened,
            Err(https::OpenError::Connect(e)) => return Err(broke(e.to_string())),
            Err(https::OpenError::Tls(e)) => return Err(broke(format!("TLS: {e}"))),
            Err(https::OpenError::Http(e)) => return Err(broke(e.to_string())),
        };
        let mut request = hyper::Request::builder().method(method).uri(path).header("Host", &self.address);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let request = request.body(Full::new(Bytes::from(bytes))).map_err(|e| broke(e.to_string()))?;
        let response = opened.sender.send_request(request).await.map_err(|e| broke(e.to_string()))?;
        Ok((response, opened))
    }

    /// One request and its whole answer.
    pub async fn call(&self, method: &str, path: &str, body: Option<&Value>) -> Result<Reply, ClientError> {
        let exchange = async {
            let (response, _opened) = self.send(method, path, body).await?;
            let status = response.status().as_u16();
            let limited = http_body_util::Limited::new(response.into_body(), MAX_ANSWER);
            let bytes = limited.collect().await.map_err(|e| answer_broke(path, e))?.to_bytes();
            Ok(Reply { status, body: serde_json::from_slice(&bytes).unwrap_or(Value::Null) })
        };
        tokio::time::timeout(TIMEOUT, exchange).await.map_err(|_| ClientError::Timeout(TIMEOUT))?
    }

    /// One request whose answer is `T` when it succeeds, its problem when refused.
    async fn typed<T: serde::de::DeserializeOwned>(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> Result<T, ClientError> {
        let reply = self.call(method, path, body).await?;
        if (200..300).contains(&reply.status) {
            return serde_json::from_value(reply.body.clone()).map_err(|_| unexpected(&reply));
        }
        match serde_json::from_value::<Problem>(reply.body.clone()) {
            Ok(problem) => Err(ClientError::Refused(Box::new(problem))),
            Err(_) => Err(unexpected(&reply)),
        }
    }

    /// `GET /v1/whoami`.
    pub async fn whoami(&self) -> Result<Caller, ClientError> {
        self.typed("GET", "/v1/whoami", None).await
    }

    /// `POST /v1/tokens`: the tokens made, each said once.
    pub async fn add_tokens(&self, asked: &NewTokensBody) -> Result<TokensMade, ClientError> {
        self.typed("POST", "/v1/tokens", Some(&json(asked)?)).await
    }

    /// `DELETE /v1/tokens/{sha256_prefix}`.
    pub async fn revoke_token(&self, sha256_prefix: &str) -> Result<TokenRevoked, ClientError> {
        self.typed("DELETE", &format!("/v1/tokens/{}", segment(sha256_prefix)), None).await
    }

    /// `GET /v1/nodes` with `filter`.
    pub async fn list_nodes(&self, filter: &NodeFilter) -> Result<NodeList, ClientError> {
        let mut query = form_urlencoded::Serializer::new(String::new());
        for (on, state) in
            [(filter.pending, "pending"), (filter.admitted, "admitted"), (filter.rejected, "rejected")]
        {
            if on {
                query.append_pair("state", state);
            }
        }
        for (key, value) in &filter.labels {
            query.append_pair("label", &format!("{key}={value}"));
        }
        if let Some(since) = filter.admitted_since {
            query.append_pair("admitted_since", &janus_core::clock::unix_to_rfc3339(since));
        }
        self.typed("GET", &format!("/v1/nodes?{}", query.finish()), None).await
    }

    /// `GET /v1/nodes/{id}`.
    pub async fn show_node(&self, key: &str) -> Result<NodeDetail, ClientError> {
        self.typed("GET", &format!("/v1/nodes/{}", segment(key)), None).await
    }

    /// `POST /v1/nodes/{id}/approve`.
    pub async fn approve(&self, key: &str, approval: &Approval) -> Result<Decided, ClientError> {
        self.typed("POST", &format!("/v1/nodes/{}/approve", segment(key)), Some(&json(approval)?)).await
    }

    /// `POST /v1/nodes/{id}/reject`.
    pub async fn reject(&self, key: &str) -> Result<Decided, ClientError> {
        self.typed("POST", &format!("/v1/nodes/{}/reject", segment(key)), Some(&serde_json::json!({}))).await
    }

    /// One request with these headers and body, and its whole answer as
    /// bytes (the console's pages and forms; tests).
    pub async fn exchange(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Vec<u8>,
    ) -> Result<RawReply, ClientError> {
        let exchange = async {
            let (response, _opened) = self.send_raw(method, path, headers, body).await?;
            let (parts, body) = response.into_parts();
            let limited = http_body_util::Limited::new(body, MAX_ANSWER);
            let bytes = limited.collect().await.map_err(|e| answer_broke(path, e))?.to_bytes();
            Ok(RawReply { status: parts.status.as_u16(), headers: parts.headers, body: bytes.to_vec() })
        };
        tokio::time::timeout(TIMEOUT, exchange).await.map_err(|_| ClientError::Timeout(TIMEOUT))?
    }

    /// `GET /v1/events`: each event's data, as it comes, to `each` (until
    /// it returns false or the stream ends).
    pub async fn events(&self, path: &str, each: impl FnMut(Value) -> bool) -> Result<(), ClientError> {
        self.events_with(path, &[], each).await
    }

    /// An event stream asked for with these headers (the console's: its
    /// cookie and origin), each event's data to `each` as [`Self::events`].
    pub async fn events_with(
        &self,
        path: &str,
        headers: &[(&str, &str)],
        mut each: impl FnMut(Value) -> bool,
    ) -> Result<(), ClientError> {
        let (response, _opened) = self.send_raw("GET", path, headers, Vec::new()).await?;
        let status = response.status().as_u16();
        let mut body = response.into_body();
        if status != 200 {
            let bytes = body.collect().await.map(|c| c.to_bytes()).unwrap_or_default();
            let reply = Reply { status, body: serde_json::from_slice(&bytes).unwrap_or(Value::Null) };
            return Err(match serde_json::from_value::<Problem>(reply.body.clone()) {
                Ok(problem) => ClientError::Refused(Box::new(problem)),
                Err(_) => unexpected(&reply),
            });
        }
        let mut pending = Vec::new();
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| answer_broke(path, e))?;
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
                return Err(ClientError::Unexpected { status, said: "an event larger than 64 MiB".into() });
            }
        }
        Ok(())
    }
}

/// The credential and the server's CA from files (`--client-cert`, `--client-key`, `--server-ca`).
pub fn from_files(
    server: &str,
    cert: &Path,
    key: &Path,
    server_ca: &Path,
) -> Result<AdminClient, ClientError> {
    let read = |flag: &str, path: &Path| {
        std::fs::read(path).map_err(|e| ClientError::Setup(format!("{flag} {}: {e}", path.display())))
    };
    AdminClient::new(
        server,
        &read("--server-ca", server_ca)?,
        &read("--client-cert", cert)?,
        &read("--client-key", key)?,
    )
}

/// A node's or token's key as a URL path segment (percent-encoded).
fn segment(key: &str) -> String {
    form_urlencoded::byte_serialize(key.as_bytes()).collect::<String>().replace('+', "%20")
}

fn json(body: &impl serde::Serialize) -> Result<Value, ClientError> {
    serde_json::to_value(body).map_err(|e| ClientError::Setup(e.to_string()))
}

fn unexpected(reply: &Reply) -> ClientError {
    ClientError::Unexpected { status: reply.status, said: reply.body.to_string().chars().take(200).collect() }
}

fn answer_broke(path: &str, error: impl std::fmt::Display) -> ClientError {
    ClientError::Exchange { url: path.to_string(), cause: format!("the answer: {error}") }
}

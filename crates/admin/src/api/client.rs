//! The admin API's client: what the CLI uses with `--server URL
//! --client-cert FILE --client-key FILE --server-ca FILE`, as `puppetserver
//! ca` and `tctl` use theirs, and what the tests drive the API with.
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

use crate::{NodesCommand, TokensCommand};
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
    pub fn new(server: &str, server_ca: &[u8], cert: &[u8], key: &[u8]) -> Result<Self, String> {
        let mut roots = rustls::RootCertStore::empty();
        for der in janus_core::pki::all_certificates(server_ca, "--server-ca").map_err(|e| e.to_string())? {
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
        let config = janus_core::tls::admin_client_config(roots, chain, key).map_err(|e| e.to_string())?;
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
    ) -> Result<(hyper::Response<hyper::body::Incoming>, https::Opened), String> {
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
    ) -> Result<(hyper::Response<hyper::body::Incoming>, https::Opened), String> {
        let url = format!("https://{}{path}", self.address);
        let name = ServerName::try_from(FLEET_CONTROLLER_NAME).expect("a valid DNS name");
        let dial = https::Dial { address: &self.address, source: None, name, config: self.config.clone() };
        let mut opened = match https::open(dial, &hyper::client::conn::http1::Builder::new()).await {
            Ok(opened) => opened,
            Err(https::OpenError::Connect(e)) => return Err(format!("{url}: {e}")),
            Err(https::OpenError::Tls(e)) => return Err(format!("{url}: TLS: {e}")),
            Err(https::OpenError::Http(e)) => return Err(format!("{url}: {e}")),
        };
        let mut request = hyper::Request::builder().method(method).uri(path).header("Host", &self.address);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let request = request.body(Full::new(Bytes::from(bytes))).map_err(|e| format!("{url}: {e}"))?;
        let response = opened.sender.send_request(request).await.map_err(|e| format!("{url}: {e}"))?;
        Ok((response, opened))
    }

    /// One request and its whole answer.
    pub async fn call(&self, method: &str, path: &str, body: Option<&Value>) -> Result<Reply, String> {
        let exchange = async {
            let (response, _opened) = self.send(method, path, body).await?;
            let status = response.status().as_u16();
            let limited = http_body_util::Limited::new(response.into_body(), MAX_ANSWER);
            let bytes = limited.collect().await.map_err(|e| format!("the answer: {e}"))?.to_bytes();
            Ok(Reply { status, body: serde_json::from_slice(&bytes).unwrap_or(Value::Null) })
        };
        tokio::time::timeout(TIMEOUT, exchange)
            .await
            .map_err(|_| format!("no answer in {}s", TIMEOUT.as_secs()))?
    }

    /// One request with these headers and body, and its whole answer as
    /// bytes (the console's pages and forms; tests).
    pub async fn exchange(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Vec<u8>,
    ) -> Result<RawReply, String> {
        let exchange = async {
            let (response, _opened) = self.send_raw(method, path, headers, body).await?;
            let (parts, body) = response.into_parts();
            let limited = http_body_util::Limited::new(body, MAX_ANSWER);
            let bytes = limited.collect().await.map_err(|e| format!("the answer: {e}"))?.to_bytes();
            Ok(RawReply { status: parts.status.as_u16(), headers: parts.headers, body: bytes.to_vec() })
        };
        tokio::time::timeout(TIMEOUT, exchange)
            .await
            .map_err(|_| format!("no answer in {}s", TIMEOUT.as_secs()))?
    }

    /// `GET /v1/events`: each event's data, as it comes, to `each` (until
    /// it returns false or the stream ends).
    pub async fn events(&self, path: &str, each: impl FnMut(Value) -> bool) -> Result<(), String> {
        self.events_with(path, &[], each).await
    }

    /// An event stream asked for with these headers (the console's: its
    /// cookie and origin), each event's data to `each` as [`Self::events`].
    pub async fn events_with(
        &self,
        path: &str,
        headers: &[(&str, &str)],
        mut each: impl FnMut(Value) -> bool,
    ) -> Result<(), String> {
        let (response, _opened) = self.send_raw("GET", path, headers, Vec::new()).await?;
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

/// The credential and the server's CA from files (`--client-cert`, `--client-key`, `--server-ca`).
pub fn from_files(server: &str, cert: &Path, key: &Path, server_ca: &Path) -> Result<AdminClient, String> {
    let read =
        |flag: &str, path: &Path| std::fs::read(path).map_err(|e| format!("{flag} {}: {e}", path.display()));
    AdminClient::new(
        server,
        &read("--server-ca", server_ca)?,
        &read("--client-cert", cert)?,
        &read("--client-key", key)?,
    )
}

/// The answer's body, or why the API refused.
fn accepted(reply: Reply) -> Result<Value, String> {
    if (200..300).contains(&reply.status) { Ok(reply.body) } else { Err(refusal(reply.status, &reply.body)) }
}

/// A node as a URL's path segment: the admin API takes ids and plain names.
fn node_segment(key: &str) -> Result<&str, String> {
    if !key.is_empty() && key.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-')) {
        Ok(key)
    } else {
        Err(format!(
            "{:?}: through --server, name a node by its id or a name of letters, digits, '.', '_' or '-'",
            janus_core::terminal::escape(key)
        ))
    }
}

fn lines(values: &[Value]) -> String {
    values.iter().map(janus_core::terminal::json_text).collect::<Vec<_>>().join("\n")
}

/// `nodes …` through the admin API; what to print (JSON).
pub async fn nodes(client: &AdminClient, command: &NodesCommand) -> Result<String, String> {
    match command {
        NodesCommand::List(args) => {
            let mut query = form_urlencoded::Serializer::new(String::new());
            for (on, state) in
                [(args.pending, "pending"), (args.admitted, "admitted"), (args.rejected, "rejected")]
            {
                if on {
                    query.append_pair("state", state);
                }
            }
            for (key, value) in &args.labels {
                query.append_pair("label", &format!("{key}={value}"));
            }
            if let Some(since) = args.admitted_since {
                query.append_pair("admitted_since", &janus_core::clock::unix_to_rfc3339(since));
            }
            let body = accepted(client.call("GET", &format!("/v1/nodes?{}", query.finish()), None).await?)?;
            // As `nodes list --state` says them: on stderr, the listing goes on.
            for why in body["unreadable"].as_array().map(Vec::as_slice).unwrap_or_default() {
                let why = why.as_str().unwrap_or_default();
                eprintln!(
                    "janus-registration: skipped an unreadable record: {}",
                    janus_core::terminal::escape(why)
                );
            }
            Ok(lines(body["nodes"].as_array().map(Vec::as_slice).unwrap_or_default()))
        }
        NodesCommand::Show(args) => {
            let path = format!("/v1/nodes/{}", node_segment(&args.id)?);
            Ok(janus_core::terminal::json_text(&accepted(client.call("GET", &path, None).await?)?))
        }
        NodesCommand::Approve(args) => {
            let (Some(id), Some(expected), None, false) =
                (&args.id, &args.expect_ca_sha256, &args.console, args.unchecked)
            else {
                return Err(
                    "through --server, nodes approve takes ID --expect-ca-sha256 HEX: the admin API \
                            always checks the node's CA"
                        .into(),
                );
            };
            let path = format!("/v1/nodes/{}/approve", node_segment(id)?);
            let body = serde_json::json!({ "expect_ca_sha256": expected, "force": args.force });
            Ok(janus_core::terminal::json_text(
                &accepted(client.call("POST", &path, Some(&body)).await?)?["node"],
            ))
        }
        NodesCommand::Reject(args) => {
            let path = format!("/v1/nodes/{}/reject", node_segment(&args.id)?);
            Ok(janus_core::terminal::json_text(&accepted(client.call("POST", &path, None).await?)?["node"]))
        }
        NodesCommand::Watch(args) => {
            if args.once {
                return Err("through --server, nodes watch follows: --once is for the state directory".into());
            }
            let path = match args.since {
                Some(since) => format!("/v1/events?since={}s", since.as_secs()),
                None => "/v1/events".into(),
            };
            client
                .events(&path, |event| {
                    use std::io::Write;
                    let mut out = std::io::stdout().lock();
                    writeln!(out, "{}", janus_core::terminal::json_text(&event))
                        .and_then(|()| out.flush())
                        .is_ok()
                })
                .await?;
            Ok(String::new())
        }
        NodesCommand::Forget(_) | NodesCommand::History(_) => {
            Err("the admin API does not offer this: run it where the state directory is (--state)".into())
        }
    }
}

/// `tokens …` through the admin API; what to print (JSON).
pub async fn tokens(client: &AdminClient, command: &TokensCommand) -> Result<String, String> {
    match command {
        TokensCommand::Add(args) => {
            let mut body = serde_json::json!({
                "labels": args.labels.iter().cloned().collect::<std::collections::BTreeMap<_, _>>(),
            });
            match &args.token {
                Some(token) => body["token"] = token.clone().into(),
                None => body["count"] = args.count.into(),
            }
            if let Some(uses) = args.uses {
                body["uses"] = uses.into();
            }
            if let Some(description) = &args.description {
                body["description"] = description.clone().into();
            }
            if let Some(expires_in) = args.expires_in {
                body["expires_in"] = format!("{}s", expires_in.as_secs()).into();
            }
            let made = accepted(client.call("POST", "/v1/tokens", Some(&body)).await?)?;
            Ok(lines(made["tokens"].as_array().map(Vec::as_slice).unwrap_or_default()))
        }
        TokensCommand::Revoke(args) => {
            let path = format!("/v1/tokens/{}", node_segment(&args.token)?);
            Ok(janus_core::terminal::json_text(&accepted(client.call("DELETE", &path, None).await?)?))
        }
        TokensCommand::List(_) => {
            Err("the admin API does not list tokens: run it where the state directory is (--state)".into())
        }
    }
}

//! The protocol-2 wire format, defined once and shared by the server and the
//! agent: the announcement a node POSTs to `/register`, the answers, the trust.
//!
//! Invariants: what the agent sends is byte-for-byte what janusd sends
//! (field order, compact JSON, Go's HTML escaping, token omitted when empty);
//! what the server accepts is validated here, field by field, and no error
//! message ever names `service_cert_pem` (a node that reads that word in a
//! 400 falls back to protocol 1 and posts its admin key).

use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::pki::NodeCa;

/// The only protocol this crate speaks; protocol 1 carries a private key.
pub const PROTOCOL: u64 = 2;
/// Larger answers are cut by the node; larger requests are refused by the server.
pub const MAX_BODY: usize = 64 * 1024;
/// The longest name accepted (a DNS name's limit).
pub const MAX_NAME: usize = 253;
/// The shortest poll secret accepted, in characters.
pub const MIN_SECRET: usize = 32;
/// The longest poll secret accepted.
pub const MAX_SECRET: usize = 512;
/// The longest registration token accepted.
pub const MAX_TOKEN: usize = 512;
/// The port janusd's API listens on, which it announces.
pub const NODE_API_PORT: u16 = 9505;

/// Writes a secret as its plain text (serde's `serialize_with`): the wire
/// and the node's own files need it; `Debug` never shows it.
pub fn expose<S: serde::Serializer>(secret: &SecretString, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(secret.expose_secret())
}

fn is_empty(secret: &SecretString) -> bool {
    secret.expose_secret().is_empty()
}

/// The announcement exactly as janusd serialises it (`announceRequest`).
#[derive(Debug, Clone, Serialize)]
pub struct AnnounceRequest {
    /// Always 2.
    pub protocol: u64,
    /// The node's hostname.
    pub name: String,
    /// Its node API's `host:port`.
    pub address: String,
    /// Its CA certificate, PEM.
    pub ca_cert_pem: String,
    /// The registration token; not sent when empty.
    #[serde(skip_serializing_if = "is_empty", serialize_with = "expose")]
    pub registration_token: SecretString,
    /// A fresh random secret, hex, the node's proof at its polls.
    #[serde(serialize_with = "expose")]
    pub poll_secret: SecretString,
}

impl AnnounceRequest {
    /// Compact JSON with Go's `encoding/json` escaping of `<`, `>`, `&`,
    /// U+2028 and U+2029 (those characters only ever occur inside strings).
    pub fn to_go_json(&self) -> Vec<u8> {
        let plain = serde_json::to_string(self).expect("strings always serialise");
        go_escape(&plain).into_bytes()
    }
}

/// `json` with `<`, `>`, `&`, U+2028 and U+2029 escaped as Go's `encoding/json` escapes them.
pub fn go_escape(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

/// The fleet's trust: the root's PEM text and the bundle file's bytes, base64.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Trust {
    /// The fleet root, PEM.
    pub root_cert: String,
    /// The signed bundle file's bytes, standard base64.
    pub bundle: String,
}

/// The 201 answer to an announcement.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AnnounceAnswer {
    /// The node's id, for its polls.
    pub id: String,
    /// Whether the node is admitted now.
    #[serde(default)]
    pub admitted: bool,
    /// The fleet's trust, when admitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trust: Option<Trust>,
}

/// The body of every error answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ErrorBody {
    /// What was wrong, in one sentence.
    pub error: String,
}

/// Why an announcement is refused; its text is the 400's `error`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Refusal(pub String);

/// What the node says is `protocol < 2`, and also what a body carrying a key gets.
pub const PROTOCOL_2_ONLY: &str = "protocol 2 only";

/// A validated announcement.
#[derive(Debug, Clone)]
pub struct Announcement {
    /// The node's hostname.
    pub name: String,
    /// Its node API's `host:port`.
    pub address: String,
    /// Its CA certificate, PEM, exactly one block.
    pub ca_cert_pem: String,
    /// Its CA's SHA-256, lowercase hex.
    pub ca_sha256: String,
    /// Empty when the node was given none.
    pub registration_token: SecretString,
    /// The poll secret; only its hash is stored.
    pub poll_secret: SecretString,
}

impl Announcement {
    /// Validates a POST body. Unknown fields are ignored.
    pub fn parse(body: &[u8]) -> Result<Self, Refusal> {
        let refuse = |m: &str| Refusal(m.to_string());
        let value: Value = serde_json::from_slice(body).map_err(|_| refuse("not JSON"))?;
        let Value::Object(fields) = value else {
            return Err(refuse("the body must be a JSON object"));
        };
        // A protocol-1 body carries a private key: refuse it without reading
        // further, so the key is neither logged nor stored.
        if fields.contains_key("service_key_pem") {
            return Err(refuse(PROTOCOL_2_ONLY));
        }
        match fields.get("protocol").and_then(Value::as_u64) {
            Some(p) if p >= PROTOCOL => {}
            _ => return Err(refuse(PROTOCOL_2_ONLY)),
        }
        let name = required_string(&fields, "name")?;
        if name.len() > MAX_NAME || !name.chars().all(is_hostname_char) {
            return Err(refuse("name must be a hostname: at most 253 letters, digits, '-', '.' or '_'"));
        }
        let address = required_string(&fields, "address")?;
        check_address(&address)?;
        let poll_secret = required_string(&fields, "poll_secret")?;
        if !(MIN_SECRET..=MAX_SECRET).contains(&poll_secret.len()) || !is_visible_ascii(&poll_secret) {
            return Err(refuse("poll_secret must be 32 to 512 printable ASCII characters without spaces"));
        }
        let registration_token = match fields.get("registration_token") {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(t)) if is_presentable_token(t) => t.clone(),
            Some(_) => {
                return Err(refuse(
                    "registration_token must be a string of at most 512 printable ASCII characters",
                ));
            }
        };
        let ca_cert_pem = required_string(&fields, "ca_cert_pem")?;
        let ca = NodeCa::check(&ca_cert_pem)
            .map_err(|_| refuse("ca_cert_pem must be exactly one PEM CERTIFICATE block, with only whitespace around it, holding a CA certificate (basicConstraints CA:TRUE)"))?;
        Ok(Announcement {
            name,
            address,
            ca_cert_pem,
            ca_sha256: ca.sha256,
            registration_token: registration_token.into(),
            poll_secret: poll_secret.into(),
        })
    }
}

fn required_string(fields: &Map<String, Value>, field: &str) -> Result<String, Refusal> {
    match fields.get(field) {
        Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
        Some(Value::String(_)) | None | Some(Value::Null) => Err(Refusal(format!("{field} is required"))),
        Some(_) => Err(Refusal(format!("{field} must be a string"))),
    }
}

fn is_hostname_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_')
}

/// Printable ASCII without the space: secrets and tokens travel in headers
/// and in a whitespace-separated file, where a space cannot survive.
fn is_visible_ascii(s: &str) -> bool {
    s.bytes().all(|b| b.is_ascii_graphic())
}

/// A registration token a node can present: printable ASCII without the
/// space, at most [`MAX_TOKEN`] bytes. The announcement's parser and every
/// admin command that takes a token hold it to this one rule.
pub fn is_presentable_token(token: &str) -> bool {
    token.len() <= MAX_TOKEN && is_visible_ascii(token)
}

/// What [`is_presentable_token`] refuses, said to an admin.
pub fn unpresentable_token_reason() -> String {
    format!("must be at most {MAX_TOKEN} printable ASCII characters, without spaces")
}

/// `host:port`, port 1-65535, an IPv6 host in brackets.
pub fn check_address(address: &str) -> Result<(), Refusal> {
    let refuse =
        || Refusal("address must be host:port with a port from 1 to 65535 (IPv6 in brackets)".into());
    let (host, port) = if let Some(rest) = address.strip_prefix('[') {
        let (v6, port) = rest.split_once("]:").ok_or_else(refuse)?;
        v6.parse::<std::net::Ipv6Addr>().map_err(|_| refuse())?;
        (None, port)
    } else {
        let (host, port) = address.rsplit_once(':').ok_or_else(refuse)?;
        (Some(host), port)
    };
    if let Some(host) = host
        && (host.is_empty() || host.len() > MAX_NAME || !host.chars().all(is_hostname_char))
    {
        return Err(refuse());
    }
    match port.parse::<u16>() {
        Ok(p) if p >= 1 && !port.starts_with('+') => Ok(()),
        _ => Err(refuse()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_a_secret() {
        let req = AnnounceRequest {
            protocol: 2,
            name: "edge-2".into(),
            address: "10.0.2.15:9505".into(),
            ca_cert_pem: String::new(),
            registration_token: "s3cr3t-token".into(),
            poll_secret: "s3cr3t-poll".into(),
        };
        let shown = format!("{req:?}");
        assert!(!shown.contains("s3cr3t") && shown.contains("REDACTED"), "{shown}");
        let announcement = Announcement {
            name: req.name.clone(),
            address: req.address.clone(),
            ca_cert_pem: String::new(),
            ca_sha256: String::new(),
            registration_token: Default::default(),
            poll_secret: req.poll_secret.clone(),
        };
        let shown = format!("{announcement:?}");
        assert!(!shown.contains("s3cr3t") && shown.contains("REDACTED"), "{shown}");
    }

    #[test]
    fn announce_request_is_go_json() {
        let req = AnnounceRequest {
            protocol: 2,
            name: "edge-2".into(),
            address: "10.0.2.15:9505".into(),
            ca_cert_pem: "-----BEGIN CERTIFICATE-----\na+b/c<&>\n".into(),
            registration_token: Default::default(),
            poll_secret: "ab".into(),
        };
        let json = String::from_utf8(req.to_go_json()).unwrap();
        assert_eq!(
            json,
            r#"{"protocol":2,"name":"edge-2","address":"10.0.2.15:9505","ca_cert_pem":"-----BEGIN CERTIFICATE-----\na+b/c\u003c\u0026\u003e\n","poll_secret":"ab"}"#
        );
        let with_token = AnnounceRequest { registration_token: "t".into(), ..req };
        let json = String::from_utf8(with_token.to_go_json()).unwrap();
        assert!(
            json.contains(r#""ca_cert_pem":"#)
                && json.contains(r#","registration_token":"t","poll_secret":"ab"}"#)
        );
    }

    #[test]
    fn addresses() {
        for ok in ["10.0.2.15:9505", "[fe80::1]:9505", "node-1.example:1", "h:65535"] {
            assert!(check_address(ok).is_ok(), "{ok}");
        }
        for bad in
            ["10.0.2.15", ":9505", "h:0", "h:65536", "h:+1", "fe80::1:9505", "[zz]:1", "h h:1", "[::1]9505"]
        {
            assert!(check_address(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn answer_round_trip() {
        let a = AnnounceAnswer { id: "x".into(), admitted: false, trust: None };
        let json = serde_json::to_string(&a).unwrap();
        assert_eq!(json, r#"{"id":"x","admitted":false}"#);
        let back: AnnounceAnswer = serde_json::from_str(&json).unwrap();
        assert!(!back.admitted && back.trust.is_none());
    }
}

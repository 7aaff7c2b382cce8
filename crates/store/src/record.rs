//! A node's record (`nodes/<id>.json`, the reference's fields and ours),
//! what the notes of `approved/<id>` and `rejected/<id>` say, where a node
//! stands, and how a record is read.
//!
//! Invariants: a record keeps the fields another tool or a later version
//! wrote (`extra`, written back on rewrite); a record read is read through
//! a fresh open (a replica's write is seen); a missing record is `None`,
//! any other failure an error, never absent.

use std::io;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use janus_core::durable;

use crate::{AdmittedBy, DecidedBy, NodeId};

/// The record (or the part of it `T` names) at `path` through a fresh
/// open; `None` when there is none.
pub(crate) fn read_record_at<T: serde::de::DeserializeOwned>(path: &Path) -> io::Result<Option<T>> {
    match durable::read_fresh(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| durable::with_path(io::Error::new(io::ErrorKind::InvalidData, e), path)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(durable::with_path(e, path)),
    }
}

/// 64 lowercase hex digits: safe as a file name.
pub(crate) fn is_sha256_hex(s: &str) -> bool {
    janus_core::pki::is_hex(s, 64)
}

/// Why the state cannot be relied on now (`/healthz` says it with a 503).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Unhealthy(pub String);

/// A node's record, `nodes/<id>.json`, as the reference writes it, with our additions.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct NodeRecord {
    /// The node id.
    pub id: NodeId,
    /// The name it announced.
    pub name: String,
    /// The address it announced.
    pub address: String,
    /// Its CA certificate, PEM.
    pub ca_cert_pem: String,
    /// Whether it was admitted when the record was written (the approval file decides).
    pub admitted: bool,
    /// Hex SHA-256 of the poll secret: whoever reads the state can't poll as the node.
    pub poll_secret_sha256: String,
    /// Hex SHA-256 of the CA's DER, as the node's console line shows it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_sha256: Option<String>,
    /// RFC 3339 UTC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub announced_at: Option<String>,
    /// The TCP source: behind a NAT the announced address is the node's inside one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer_address: Option<String>,
    /// `token` when a registration token admitted the node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admitted_by: Option<AdmittedBy>,
    /// The ledger name of the token this node presented, written before the
    /// use is claimed, so that an admission a crash cut short is found and
    /// finished (`Store::recover`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_claim: Option<String>,
    /// The first 12 hex digits of the SHA-256 of the listed token it
    /// presented (the one that admitted it when `admitted_by` is `token`),
    /// as its `admitted` event names them: the orchestrator's link from the
    /// token it put in a VM to the node that came up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_sha256_prefix: Option<String>,
    /// That token's labels (`tokens add --label`), as they were when it admitted the node.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub token_labels: std::collections::BTreeMap<String, String>,
    /// A token admission finished by a recovery (the node's request failed
    /// after its use was claimed, or its server died): no answer told the
    /// node, so the same CA presenting the same token is answered with this
    /// record whatever the readmit window says, once (then cleared).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub admission_unanswered: bool,
    /// Fields another tool (or a later version) wrote: kept on rewrite.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A pending record as the periodic scan sees it.
pub struct Pending {
    /// The node.
    pub id: NodeId,
    /// `announced_at` as Unix seconds.
    pub announced: Option<i64>,
    /// The token use this record claims (while a token admission is under way).
    pub token_claim: Option<String>,
    /// False for a record that says admitted but has no approval yet, and
    /// for a claim (a token admission under way, or one a crash cut short,
    /// which recovery finishes).
    pub awaits_admin: bool,
}

/// Where a node stands, derived from the files alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum NodeState {
    /// Waiting for an admin.
    Pending,
    /// Admitted: its approval exists.
    Admitted,
    /// Rejected: its polls get 404.
    Rejected,
}

/// Who decided on a node, and how: the content of `approved/<id>` (what
/// `nodes approve`, a token and the admission command write) and of
/// `rejected/<id>` (`nodes reject`, a rejected CA); an empty file (`touch`)
/// is its owner's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DecisionNote {
    /// What made it: a token, a command, the admission command; a
    /// hand-made file (empty, or not ours) is the file's.
    pub by: DecidedBy,
    /// Who: the admin user, or the owner of a hand-made file.
    pub user: String,
}

/// An approval file that names no node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct OrphanApproval {
    /// Its name under `approved/`.
    pub file: String,
    /// The id it may have meant: one a character away, or the id of the
    /// node whose name it is.
    pub nearest: Option<String>,
    /// Whether `nearest` is the node whose name the file is.
    pub by_name: bool,
}

impl std::fmt::Display for OrphanApproval {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let file = janus_core::terminal::escape(&self.file);
        write!(f, "approved/{file} names no node and is not acted on")?;
        match (&self.nearest, self.by_name) {
            (Some(id), true) => {
                write!(f, ": {file} is a node's name; its id is {id} (approve it as approved/{id})")
            }
            (Some(id), false) => write!(f, ": did you mean approved/{id}?"),
            (None, _) => Ok(()),
        }
    }
}

/// What a server's maintenance found last, and which files it has logged.
#[derive(Debug, Default)]
pub(crate) struct OrphansSeen {
    pub(crate) last: Vec<OrphanApproval>,
    pub(crate) logged: std::collections::HashSet<String>,
}

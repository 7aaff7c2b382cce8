//! The state directory, laid out as the reference lays it out, so an existing
//! one keeps working: `tokens`, `nodes/<id>.json`, `approved/<id>`.
//!
//! Files are the source of truth: nothing is cached between requests, so an
//! approval created by hand (`touch approved/<id>`) or by another process
//! counts at the very next request. Every write goes through
//! [`atomic::write_atomic`]. All methods block: call them off the async runtime.

pub mod atomic;
pub mod id;
pub mod tokens;

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub use atomic::write_atomic;
pub use id::NodeId;
pub use tokens::Tokens;

/// `nodes/<id>.json`: the reference's fields first, then what an admin needs.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct NodeRecord {
    pub id: String,
    pub name: String,
    pub address: String,
    pub ca_cert_pem: String,
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
    pub admitted_by: Option<String>,
    /// Fields another tool (or a later version) wrote: kept on rewrite.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

pub struct Store {
    dir: PathBuf,
    pub tokens: Tokens,
}

impl Store {
    /// Opens `dir`, creating it and its `nodes/` and `approved/` (0700) when missing.
    pub fn open(dir: &Path) -> io::Result<Self> {
        for sub in ["", "nodes", "approved"] {
            atomic::ensure_private_dir(&dir.join(sub))?;
        }
        Ok(Store { dir: dir.to_path_buf(), tokens: Tokens::new(dir) })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn record_path(&self, id: &NodeId) -> PathBuf {
        self.dir.join("nodes").join(format!("{id}.json"))
    }

    pub fn approval_path(&self, id: &NodeId) -> PathBuf {
        self.dir.join("approved").join(id.as_str())
    }

    pub fn write_record(&self, record: &NodeRecord) -> io::Result<()> {
        let id = NodeId::parse(&record.id).ok_or_else(|| io::Error::other("a record with a malformed id"))?;
        let json = serde_json::to_vec_pretty(record).map_err(io::Error::other)?;
        write_atomic(&self.record_path(&id), &json, 0o600)
    }

    /// The record, or `None` when there is none for `id`.
    pub fn read_record(&self, id: &NodeId) -> io::Result<Option<NodeRecord>> {
        let path = self.record_path(id);
        match fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| atomic::with_path(io::Error::new(io::ErrorKind::InvalidData, e), &path)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(atomic::with_path(e, &path)),
        }
    }

    /// Creates `approved/<id>` durably (idempotent).
    pub fn approve(&self, id: &NodeId) -> io::Result<()> {
        write_atomic(&self.approval_path(id), b"", 0o600)
    }

    pub fn is_approved(&self, id: &NodeId) -> bool {
        self.approval_path(id).exists()
    }

    /// Whether new files can be created in the state directory.
    pub fn check_writable(&self) -> io::Result<()> {
        let probe = (self.dir).join(format!("{}healthz-{}", atomic::TEMP_PREFIX, std::process::id()));
        fs::write(&probe, b"").map_err(|e| atomic::with_path(e, &self.dir))?;
        fs::remove_file(&probe).map_err(|e| atomic::with_path(e, &probe))
    }
}

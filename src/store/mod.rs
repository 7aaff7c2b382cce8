//! The state directory, laid out as the reference lays it out, so an existing
//! one keeps working: `tokens`, `nodes/<id>.json`, `approved/<id>`. Ours on
//! top: `rejected/<id>` (polls get 404), `rejected-cas/<sha256>`,
//! `delivered/<id>` (the trust went out once), `tokens.meta.json` (expiry
//! and uses), `token-uses/` and its key (the ledger), `audit/`, and
//! `state-format` (which of these layouts it is: [`format`]).
//!
//! Files are the source of truth: nothing is cached between requests, so an
//! approval created by hand (`touch approved/<id>`) or by another process
//! counts at the very next request. Every write goes through
//! [`crate::durable`]'s helpers, none through a link it did not make. A state
//! directory anyone may write to is refused; a subdirectory removed under a
//! running server is made again at the next write. All methods block: call
//! them off the async runtime.

pub mod admission;
pub mod audit;
pub mod error;
pub mod event;
pub mod format;
pub mod id;
pub mod ledger;
pub mod maintain;
pub mod on_pool;
pub mod poll;
pub mod tokens;

use std::fs;
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::durable;

/// The record at `path` through a fresh open; `None` when there is none.
fn read_record_at(path: &Path) -> io::Result<Option<NodeRecord>> {
    match durable::read_fresh(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| durable::with_path(io::Error::new(io::ErrorKind::InvalidData, e), path)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(durable::with_path(e, path)),
    }
}

/// Removes those of `temps` older than [`STALE_TEMP_AGE`].
fn remove_stale(temps: &[PathBuf]) {
    for temp in temps {
        let old = fs::symlink_metadata(temp)
            .ok()
            .filter(|m| m.is_file())
            .and_then(|m| m.modified().ok())
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age > STALE_TEMP_AGE);
        if old && fs::remove_file(temp).is_ok() {
            tracing::info!(file = %temp.display(), "removed a temp file a crash left behind");
        }
    }
}

/// A node id as a number, for compact sets of ids.
fn id_number(name: &str) -> Option<u128> {
    NodeId::parse(name).and_then(|id| u128::from_str_radix(id.as_str(), 16).ok())
}

/// 64 lowercase hex digits: safe as a file name.
fn is_sha256_hex(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Refuses a directory others may write to, as ssh's StrictModes does:
/// anyone could plant records, approvals or links there. Group-writable
/// stays allowed (a Kubernetes fsGroup volume is).
fn refuse_world_writable(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    match fs::metadata(dir) {
        Ok(meta) if meta.permissions().mode() & 0o002 != 0 => Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{} is world-writable (mode {:o}): anyone on this host could plant approvals there; run chmod o-w on it",
                dir.display(),
                meta.permissions().mode() & 0o7777
            ),
        )),
        _ => Ok(()),
    }
}

pub use audit::Audit;
pub use durable::write_atomic;
pub use error::StoreError;
pub use event::{AuditEvent, DecidedBy};
pub use id::NodeId;
pub use on_pool::AsyncStore;
pub use tokens::Tokens;

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
    pub admitted_by: Option<String>,
    /// The ledger name of the token this node presented, written before the
    /// use is claimed, so that an admission a crash cut short is found and
    /// finished ([`Store::recover`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_claim: Option<String>,
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

/// The last listing of the record directories: when, their times then, what it found.
type UnsettledListing = (std::time::Instant, Vec<Option<std::time::SystemTime>>, Listing);

/// What one listing of the record directories found.
#[derive(Debug, Clone, Default)]
struct Listing {
    /// Records with neither approval nor rejection.
    unsettled: Vec<NodeId>,
    /// Token admissions under way, or cut short: `nodes/.claim-<id>.json`.
    claims: Vec<NodeId>,
}

/// The name prefix of a token admission's claim in `nodes/`.
const CLAIM_PREFIX: &str = ".claim-";

/// The state directory: every read and write of it.
pub struct Store {
    dir: PathBuf,
    /// `tokens` and the ledger.
    tokens: Tokens,
    /// The audit trail.
    audit: Audit,
    unsettled: std::sync::Mutex<Option<UnsettledListing>>,
    /// Set while `state-format` names a layout this binary does not know:
    /// every write is refused until it names one it does.
    format_refusal: std::sync::RwLock<Option<format::FormatError>>,
    /// How long after a token admission the same CA presenting the spent
    /// token again is answered `admitted` (its answer was lost).
    readmit_window: std::time::Duration,
    /// The last announcement whose writes failed for want of room or
    /// permission, and when: `/healthz` reports it until a write succeeds
    /// or it is [`WRITE_FAILURE_MEMORY`] old.
    write_failure: std::sync::Mutex<Option<(std::time::Instant, String)>>,
    /// When each rejected CA's repeated announcements were last audited.
    rejected_ca_audited: std::sync::Mutex<std::collections::HashMap<String, std::time::Instant>>,
}

/// A rejected CA announcing again within this is one burst: one audit entry.
const REJECTED_BURST: std::time::Duration = std::time::Duration::from_secs(60);
/// How many rejected CAs' bursts are remembered (the oldest go first).
const REJECTED_BURSTS_KEPT: usize = 4096;

/// How long a failed write keeps `/healthz` unavailable without a later success.
const WRITE_FAILURE_MEMORY: std::time::Duration = std::time::Duration::from_secs(30);

/// What the health probe writes in each directory an admission writes to:
/// larger than a record, so a nearly full disk fails it as it fails them.
const PROBE_BYTES: usize = 8 * 1024;

/// The readmit window by default: longer than janusd's retries take to
/// reach their 2-minute pace (5 s, 10 s, 20 s, 40 s, 80 s, 120 s, …).
pub const DEFAULT_READMIT_WINDOW: std::time::Duration = std::time::Duration::from_secs(10 * 60);

/// Where a node stands, derived from the files alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum NodeState {
    /// Waiting for an admin.
    Pending,
    /// Admitted: its approval exists.
    Admitted,
    /// Rejected: its polls get 404.
    Rejected,
}

/// Who approved a node: the content `nodes approve` and the admission policy
/// write into `approved/<id>`; an empty file (`touch`) is its owner's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Approval {
    /// What made it: a token, a command, the admission command; a
    /// hand-made file (empty, or not ours) is the file's.
    pub by: DecidedBy,
    /// Who: the admin user, or the owner of a hand-made file.
    pub user: String,
}

const SUBDIRS: [&str; 7] =
    ["nodes", "approved", "rejected", "delivered", "rejected-cas", ledger::LEDGER_DIR, audit::AUDIT_DIR];

/// How old a `.tmp-*` file must be before startup takes it for a crash's leftover.
const STALE_TEMP_AGE: std::time::Duration = std::time::Duration::from_secs(60);

impl Store {
    /// Opens `dir`, creating it and its subdirectories (0700) when missing,
    /// after refusing one anybody may write to, or one whose `state-format`
    /// this binary does not know; an unmarked one is marked once laid out.
    pub fn open(dir: &Path) -> io::Result<Self> {
        let store = Self::at(dir);
        store.lay_out()?;
        Ok(store)
    }

    /// What `serve` checks before it binds its port, creating nothing: an
    /// existing directory is not world-writable and its format is known; a
    /// missing one has an existing parent (only the last level is made: a
    /// typo in `--state` must not start an empty endpoint).
    pub fn check_before_open(dir: &Path) -> io::Result<()> {
        if dir.exists() {
            refuse_world_writable(dir)?;
            return format::read(dir).map(|_| ()).map_err(io::Error::other);
        }
        let parent = dir.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        if !parent.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "{} does not exist, nor does its parent {}: make the parent first (the endpoint makes only \
                     the state directory itself, 0700), or check --state for a typo",
                    dir.display(),
                    parent.display()
                ),
            ));
        }
        Ok(())
    }

    /// The store a server process will use, nothing made yet: [`Store::lay_out`]
    /// once its port is bound.
    pub fn for_server(dir: &Path) -> Self {
        let mut store = Self::at(dir);
        store.audit = Audit::for_server(dir);
        store
    }

    /// Makes the directory and its subdirectories (0700) when missing, after
    /// refusing one anybody may write to or one whose `state-format` this
    /// binary does not know, and migrates and marks an unmarked one. A first
    /// start says so in one line.
    pub fn lay_out(&self) -> io::Result<()> {
        let dir = &self.dir;
        refuse_world_writable(dir)?;
        let found = format::read(dir).map_err(io::Error::other)?;
        let made = self.make_missing()?;
        if made.first() == Some(dir) {
            tracing::info!(dir = %dir.display(), "laid out a new state directory");
        } else if !made.is_empty() {
            let names: Vec<String> =
                made.iter().filter_map(|d| d.file_name()).map(|n| n.to_string_lossy().into_owned()).collect();
            tracing::info!(dir = %dir.display(), made = %names.join(", "), "made the state directory's missing subdirectories");
        }
        for sub in std::iter::once(dir.to_path_buf()).chain(SUBDIRS.iter().map(|s| dir.join(s))) {
            refuse_world_writable(&sub)?;
        }
        if found != Some(format::CURRENT) {
            format::migrate(dir, found)?;
        }
        Ok(())
    }

    /// Sets the readmit window (`serve --readmit-window`).
    pub fn with_readmit_window(mut self, window: std::time::Duration) -> Self {
        self.readmit_window = window;
        self
    }

    /// How long after a token admission its CA presenting the spent token
    /// again is still answered `admitted` with the first id.
    pub fn readmit_window(&self) -> std::time::Duration {
        self.readmit_window
    }

    /// Reads `state-format` again (every maintenance pass): a format this
    /// binary does not know stops every write from now on, and says why; a
    /// known one lifts that; a marker removed meanwhile is written again.
    pub fn check_format(&self) -> Result<(), format::FormatError> {
        let read = format::read(&self.dir);
        let mut refusal = self.format_refusal.write().unwrap_or_else(|e| e.into_inner());
        match &read {
            Err(e) if refusal.as_ref() != Some(e) => {
                tracing::error!(reason = %e, "stopped writing to the state directory: every announcement and poll gets 503");
            }
            Ok(_) if refusal.is_some() => tracing::info!("the state format is one this version knows again"),
            _ => {}
        }
        *refusal = read.as_ref().err().cloned();
        drop(refusal);
        match read {
            Ok(None) => format::migrate(&self.dir, None).map_err(|e| format::FormatError::Unreadable {
                path: self.dir.join(format::FILE),
                why: format!("cannot be written again: {e}"),
            }),
            Ok(Some(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Why nothing may be written now, when the state's format is one this
    /// binary does not know (as of the last [`Store::check_format`]).
    pub fn format_refusal(&self) -> Option<format::FormatError> {
        self.format_refusal.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Removes what crashes left behind: `.tmp-*` files older than a minute,
    /// in every state directory. The server does it at its first
    /// maintenance pass, after the socket is bound: with a million records
    /// it is a listing of millions of names.
    pub fn remove_leftovers(&self) {
        // nodes/, approved/ and rejected/ hold millions of names: their
        // leftovers go during the listing every maintenance pass makes.
        let small = SUBDIRS.iter().filter(|s| !matches!(**s, "nodes" | "approved" | "rejected"));
        for sub in std::iter::once(self.dir.clone()).chain(small.map(|s| self.dir.join(s))) {
            let removed = durable::remove_stale_temps(&sub, STALE_TEMP_AGE);
            if removed > 0 {
                tracing::info!(dir = %sub.display(), removed, "removed temp files a crash left behind");
            }
        }
    }

    /// Makes the state directory and each subdirectory that is missing
    /// (someone removed them under a running server), logging each.
    pub fn ensure_layout(&self) -> io::Result<()> {
        for made in self.make_missing()? {
            tracing::warn!(dir = %made.display(), "made a missing state directory again");
        }
        Ok(())
    }

    /// Makes what is missing of the directory and its subdirectories; what it made.
    fn make_missing(&self) -> io::Result<Vec<PathBuf>> {
        let mut made = Vec::new();
        for sub in std::iter::once(self.dir.clone()).chain(SUBDIRS.iter().map(|s| self.dir.join(s))) {
            if !sub.is_dir() {
                durable::ensure_private_dir(&sub)?;
                made.push(sub);
            }
        }
        Ok(made)
    }

    /// [`write_atomic`], making the layout again when a directory went missing.
    fn write_file(&self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        self.in_layout(|| write_atomic(path, bytes, 0o600))
    }

    /// `write`, made once more after remaking missing subdirectories: a
    /// directory removed under a running server costs a retry, not a failure.
    /// Refused outright while the state's format is one this binary does
    /// not know: every write of the store starts here.
    fn in_layout<T>(&self, write: impl Fn() -> io::Result<T>) -> io::Result<T> {
        if let Some(refusal) = self.format_refusal() {
            return Err(io::Error::other(refusal));
        }
        match write() {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                self.ensure_layout()?;
                write()
            }
            other => other,
        }
    }

    /// The store of `dir`, nothing looked at or made yet.
    fn at(dir: &Path) -> Self {
        Store {
            dir: dir.to_path_buf(),
            tokens: Tokens::new(dir),
            audit: Audit::new(dir),
            unsettled: Default::default(),
            format_refusal: Default::default(),
            readmit_window: DEFAULT_READMIT_WINDOW,
            write_failure: Default::default(),
            rejected_ca_audited: Default::default(),
        }
    }

    /// Opens an existing state directory without creating anything else than
    /// our own subdirectories (admin commands).
    pub fn open_existing(dir: &Path) -> io::Result<Self> {
        Self::refuse_unknown_or_missing(dir)?;
        Self::open(dir)
    }

    /// Opens an existing state directory to read it only: nothing is made,
    /// marked or migrated (admin commands that only show).
    pub fn open_to_read(dir: &Path) -> io::Result<Self> {
        Self::refuse_unknown_or_missing(dir)?;
        Ok(Self::at(dir))
    }

    fn refuse_unknown_or_missing(dir: &Path) -> io::Result<()> {
        format::read(dir).map_err(io::Error::other)?;
        if !dir.join("nodes").is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "{} is not a state directory (it has no nodes/): start `janus-registration serve --state {}` \
                     once to lay it out, or check --state for a typo",
                    dir.display(),
                    dir.display()
                ),
            ));
        }
        Ok(())
    }

    /// The state directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Appends `event` to the audit trail, durably.
    pub fn record(&self, event: AuditEvent) -> io::Result<()> {
        self.audit.record(event)
    }

    /// The audit trail ([`Audit`]): read, searched, followed.
    pub fn audit_trail(&self) -> &Audit {
        &self.audit
    }

    /// Appends new tokens with their metadata ([`Tokens::add`]).
    pub fn add_tokens(&self, tokens: &[String], meta: &tokens::TokenMeta) -> io::Result<()> {
        self.tokens.add(tokens, meta)
    }

    /// Blanks spent and expired tokens, auditing expiries ([`Tokens::sweep`]); how many expired.
    pub fn sweep_tokens(&self) -> io::Result<usize> {
        self.tokens.sweep(&self.audit)
    }

    /// The tokens with a use left, redacted ([`Tokens::list`]).
    pub fn list_tokens(&self) -> io::Result<Vec<tokens::TokenInfo>> {
        self.tokens.list()
    }

    /// Revokes the token `key` names ([`Tokens::revoke`]); its fingerprint.
    pub fn revoke_token(&self, key: &str) -> io::Result<String> {
        self.tokens.revoke(key)
    }

    /// Why the tokens' metadata cannot be read now, if it cannot.
    pub fn token_meta_unreadable(&self) -> Option<tokens::MetaUnreadable> {
        self.tokens.meta_unreadable()
    }

    /// `nodes/<id>.json`.
    pub fn record_path(&self, id: &NodeId) -> PathBuf {
        self.dir.join("nodes").join(format!("{id}.json"))
    }

    /// `approved/<id>`.
    pub fn approval_path(&self, id: &NodeId) -> PathBuf {
        self.dir.join("approved").join(id.as_str())
    }

    /// Writes a record durably (temp file, fsync, rename, directory fsync).
    pub fn write_record(&self, record: &NodeRecord) -> io::Result<()> {
        let json = serde_json::to_vec_pretty(record).map_err(io::Error::other)?;
        self.write_file(&self.record_path(&record.id), &json)
    }

    /// The record, or `None` when there is none for `id`.
    pub fn read_record(&self, id: &NodeId) -> io::Result<Option<NodeRecord>> {
        read_record_at(&self.record_path(id))
    }

    /// `nodes/.claim-<id>.json`: a token admission's record while its use is
    /// claimed, until the record at `nodes/<id>.json` says admitted. It has
    /// its own name so that `nodes/<id>.json` never names the file the
    /// ledger's marker links to: a network filesystem's client that saw
    /// that name once kept reading the linked file after another host
    /// renamed the admitted record over it (GlusterFS; docs/deploying.md "Several
    /// replicas").
    pub fn claim_path(&self, id: &NodeId) -> PathBuf {
        self.dir.join("nodes").join(format!("{CLAIM_PREFIX}{id}.json"))
    }

    /// The record, or the claim a token admission left before writing it.
    pub fn read_record_or_claim(&self, id: &NodeId) -> io::Result<Option<NodeRecord>> {
        if let Some(record) = self.read_record(id)? {
            return Ok(Some(record));
        }
        match read_record_at(&self.claim_path(id)) {
            // A claim no process wrote whole is no record of anyone's.
            Err(e) if e.kind() == io::ErrorKind::InvalidData => Ok(None),
            other => other,
        }
    }

    fn marker(&self, sub: &str, id: &NodeId) -> PathBuf {
        self.dir.join(sub).join(id.as_str())
    }

    /// Creates `approved/<id>` durably, saying who approved (idempotent).
    pub fn approve(&self, id: &NodeId, by: DecidedBy, user: &str) -> io::Result<()> {
        let note = serde_json::to_vec(&Approval { by, user: user.into() }).map_err(io::Error::other)?;
        self.write_file(&self.approval_path(id), &note)
    }

    /// Whether `approved/<id>` exists.
    pub fn is_approved(&self, id: &NodeId) -> bool {
        durable::present(&self.approval_path(id)).unwrap_or(false)
    }

    /// Who approved `id`, when it is approved.
    pub fn approval(&self, id: &NodeId) -> Option<Approval> {
        use std::os::unix::fs::MetadataExt;
        let path = self.approval_path(id);
        let meta = durable::retry_stale(|| fs::metadata(&path)).ok()?;
        let note = durable::read_fresh(&path).unwrap_or_default();
        Some(
            serde_json::from_slice(&note).unwrap_or_else(|_| Approval {
                by: DecidedBy::ApprovalFile,
                user: audit::user_name(meta.uid()),
            }),
        )
    }

    /// Whether `id` is rejected; when that cannot be told, it is (a
    /// rejected node must never get the trust through a stale handle).
    pub fn is_rejected(&self, id: &NodeId) -> bool {
        durable::present(&self.marker("rejected", id)).unwrap_or(true)
    }

    /// Who rejected `id`, when it is rejected.
    pub fn rejection(&self, id: &NodeId) -> Option<Approval> {
        let note = durable::read_fresh(&self.marker("rejected", id)).ok()?;
        Some(
            serde_json::from_slice(&note)
                .unwrap_or_else(|_| Approval { by: DecidedBy::RejectionFile, user: "".into() }),
        )
    }

    /// Whether polls of `id` get 404: rejected, unless the rejection came
    /// from its CA alone and an admin made `approved/<id>` anyway.
    pub fn poll_refused(&self, id: &NodeId) -> bool {
        self.is_rejected(id)
            && !(self.is_approved(id) && self.rejection(id).is_some_and(|r| r.by == DecidedBy::RejectedCa))
    }

    /// Marks `id` rejected (its polls get 404) and withdraws any approval;
    /// its CA (`ca_sha256`) is rejected too, so the node's later
    /// announcements are rejected at once.
    pub fn reject(&self, id: &NodeId, ca_sha256: &str, user: &str) -> io::Result<()> {
        let note = serde_json::to_vec(&Approval { by: DecidedBy::Command, user: user.into() })
            .map_err(io::Error::other)?;
        if is_sha256_hex(ca_sha256) {
            let why = serde_json::to_vec(&serde_json::json!({"id": id.as_str(), "user": user}))
                .map_err(io::Error::other)?;
            self.write_file(&self.dir.join("rejected-cas").join(ca_sha256), &why)?;
        }
        self.write_file(&self.marker("rejected", id), &note)?;
        durable::remove_durably(&self.approval_path(id))
    }

    /// Marks `id` rejected because its CA is (audited by the caller).
    pub fn reject_for_ca(&self, id: &NodeId) -> io::Result<()> {
        let note = serde_json::to_vec(&Approval { by: DecidedBy::RejectedCa, user: String::new() })
            .map_err(io::Error::other)?;
        self.write_file(&self.marker("rejected", id), &note)
    }

    /// Whether an admin rejected this CA.
    pub fn is_ca_rejected(&self, ca_sha256: &str) -> bool {
        is_sha256_hex(ca_sha256) && self.dir.join("rejected-cas").join(ca_sha256).exists()
    }

    /// Lifts the rejection of a CA (`nodes forget` of its rejected record).
    pub fn lift_ca_rejection(&self, ca_sha256: &str) -> io::Result<()> {
        if !is_sha256_hex(ca_sha256) {
            return Ok(());
        }
        durable::remove_durably(&self.dir.join("rejected-cas").join(ca_sha256))
    }

    /// Removes every file about `id`. Rejection is by CA and only the
    /// admin's own decision lifts it: forgetting the very record an admin
    /// rejected (`rejected-cas/<sha256>` names it) lifts its CA's rejection,
    /// and that CA is returned (the caller audits it); forgetting any other
    /// record — a later announcement the server rejected for its CA, say —
    /// never does.
    pub fn forget(&self, id: &NodeId) -> io::Result<Option<String>> {
        let mut lifted = None;
        if self.rejection(id).is_some_and(|r| r.by == DecidedBy::Command)
            && let Some(ca) = self.read_record(id).ok().flatten().and_then(|r| r.ca_sha256)
            && self.ca_rejected_as(&ca).as_ref() == Some(id)
        {
            self.lift_ca_rejection(&ca)?;
            lifted = Some(ca);
        }
        durable::remove_durably(&self.record_path(id))?;
        durable::remove_durably(&self.claim_path(id))?;
        for sub in ["approved", "rejected", "delivered"] {
            durable::remove_durably(&self.marker(sub, id))?;
        }
        Ok(lifted)
    }

    /// Records `id` as the latest announcement of the rejected CA
    /// `ca_sha256` (in its `rejected-cas/` note) and returns the one it
    /// replaces, when that one was a later announcement the server rejected
    /// itself (never the record the admin rejected).
    pub fn replace_latest_of_rejected_ca(&self, ca_sha256: &str, id: &NodeId) -> io::Result<Option<NodeId>> {
        let path = self.dir.join("rejected-cas").join(ca_sha256);
        let mut note: Map<String, Value> = durable::read_fresh(&path)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_default();
        let previous = note.get("latest").and_then(Value::as_str).and_then(NodeId::parse);
        note.insert("latest".into(), Value::String(id.to_string()));
        self.write_file(&path, &serde_json::to_vec(&note).map_err(io::Error::other)?)?;
        Ok(previous.filter(|p| {
            p != id
                && self.rejection(p).is_some_and(|r| r.by == DecidedBy::RejectedCa)
                && self.ca_rejected_as(ca_sha256).as_ref() != Some(p)
        }))
    }

    /// Forgets each rejected CA's latest announcement once it is older than
    /// `max_age` seconds (the pending age limit): a rejected CA's records
    /// expire as pending ones do. Looked at again right before: only a
    /// record the server rejected for its CA, still that CA's latest. The
    /// ids forgotten, for the caller to audit.
    pub fn expire_rejected_duplicates(&self, now: i64, max_age: i64) -> io::Result<Vec<NodeId>> {
        let mut forgotten = Vec::new();
        let mut cas = Vec::new();
        self.each_name("rejected-cas", |name| {
            if is_sha256_hex(name) {
                cas.push(name.to_string());
            }
        })?;
        for ca in cas {
            let path = self.dir.join("rejected-cas").join(&ca);
            let Some(mut note) = durable::read_fresh(&path)
                .ok()
                .and_then(|bytes| serde_json::from_slice::<Map<String, Value>>(&bytes).ok())
            else {
                continue;
            };
            let Some(latest) = note.get("latest").and_then(Value::as_str).and_then(NodeId::parse) else {
                continue;
            };
            let Some(record) = self.read_record(&latest)? else { continue };
            let rfc3339 = &time::format_description::well_known::Rfc3339;
            let announced = record
                .announced_at
                .as_deref()
                .and_then(|t| time::OffsetDateTime::parse(t, rfc3339).ok())
                .map(|t| t.unix_timestamp());
            let by_ca = self.rejection(&latest).is_some_and(|r| r.by == DecidedBy::RejectedCa);
            if !by_ca
                || announced.is_none_or(|t| now - t <= max_age)
                || self.ca_rejected_as(&ca).as_ref() == Some(&latest)
            {
                continue;
            }
            note.remove("latest");
            self.write_file(&path, &serde_json::to_vec(&note).map_err(io::Error::other)?)?;
            self.forget(&latest)?;
            forgotten.push(latest);
        }
        Ok(forgotten)
    }

    /// Whether an announcement of the rejected CA `ca_sha256` starts a new
    /// burst (its first in [`REJECTED_BURST`]): only those are audited.
    fn first_of_burst(&self, ca_sha256: &str) -> bool {
        let mut seen = self.rejected_ca_audited.lock().unwrap_or_else(|e| e.into_inner());
        let now = std::time::Instant::now();
        if seen.get(ca_sha256).is_some_and(|at| now.duration_since(*at) < REJECTED_BURST) {
            return false;
        }
        if seen.len() >= REJECTED_BURSTS_KEPT {
            seen.retain(|_, at| now.duration_since(*at) < REJECTED_BURST);
        }
        seen.insert(ca_sha256.to_string(), now);
        true
    }

    /// The record whose rejection by an admin rejected this CA.
    fn ca_rejected_as(&self, ca_sha256: &str) -> Option<NodeId> {
        if !is_sha256_hex(ca_sha256) {
            return None;
        }
        let note = durable::read_fresh(&self.dir.join("rejected-cas").join(ca_sha256)).ok()?;
        let note: Value = serde_json::from_slice(&note).ok()?;
        note.get("id").and_then(Value::as_str).and_then(NodeId::parse)
    }

    /// Forgets a pending record the age limit expired — if it still is
    /// pending right now: the listing it came from may be a pass old, and
    /// an admin may approve or reject it meanwhile. Only the record goes
    /// (a pending record has no approval to remove); if an approval
    /// appears between the look and the removal, the record is written
    /// back. `before` runs once the record is known to be pending, before
    /// it goes (the audit event). True when it was forgotten.
    pub fn forget_expired(&self, id: &NodeId, before: impl FnOnce() -> io::Result<()>) -> io::Result<bool> {
        let settled = |store: &Self| {
            durable::present(&store.approval_path(id)).unwrap_or(true)
                || durable::present(&store.marker("rejected", id)).unwrap_or(true)
        };
        if settled(self) {
            return Ok(false);
        }
        let path = self.record_path(id);
        let bytes = match durable::read_fresh(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(durable::with_path(e, &path)),
        };
        before()?;
        durable::remove_durably(&path)?;
        if settled(self) {
            self.write_file(&path, &bytes)?;
            tracing::info!(node = %id, "an admin settled a node as it was being forgotten: its record is back");
            return Ok(false);
        }
        Ok(true)
    }

    /// Whether the trust went out to `id` already.
    pub fn was_delivered(&self, id: &NodeId) -> bool {
        durable::present(&self.marker("delivered", id)).unwrap_or(false)
    }

    /// Marks the trust as gone out to `id`: true for the first marking
    /// across processes. Callers audit the delivery before marking, so a
    /// crash in between repeats the event rather than losing it; for the
    /// same reason the mark is not `fsync`'d: losing it costs a repeated
    /// event, which readers drop.
    pub fn mark_delivered(&self, id: &NodeId) -> io::Result<bool> {
        let path = self.marker("delivered", id);
        let create = || {
            fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(durable::libc_nofollow())
                .open(&path)
        };
        match self.in_layout(create) {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
            Err(e) => Err(durable::with_path(e, &path)),
        }
    }

    /// The record's state, from the approval and rejection files.
    pub fn state_of(&self, record: &NodeRecord) -> NodeState {
        if self.poll_refused(&record.id) {
            NodeState::Rejected
        } else if self.is_approved(&record.id) || record.admitted {
            NodeState::Admitted
        } else {
            NodeState::Pending
        }
    }

    /// Calls `each` with every record in `nodes/` that parses as `T`, one at a
    /// time (temp files skipped): a state of 100,000 records is never held in
    /// memory at once. Returns the unreadable ones' errors.
    pub fn scan<T: serde::de::DeserializeOwned>(
        &self,
        mut each: impl FnMut(NodeId, T),
    ) -> io::Result<Vec<String>> {
        let dir = self.dir.join("nodes");
        let mut problems = Vec::new();
        for entry in fs::read_dir(&dir).map_err(|e| durable::with_path(e, &dir))? {
            let entry = entry.map_err(|e| durable::with_path(e, &dir))?;
            let name = entry.file_name();
            let Some(id) = name.to_str().and_then(|n| n.strip_suffix(".json")).and_then(NodeId::parse) else {
                continue;
            };
            match durable::read_fresh(&entry.path()) {
                Ok(bytes) => match serde_json::from_slice(&bytes) {
                    Ok(record) => each(id, record),
                    Err(e) => problems.push(format!("{}: {e}", entry.path().display())),
                },
                // Forgotten between the listing and the read.
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => problems.push(format!("{}: {e}", entry.path().display())),
            }
        }
        Ok(problems)
    }

    /// Every whole record in `nodes/`, and the unreadable ones' errors.
    pub fn list_records(&self) -> io::Result<(Vec<NodeRecord>, Vec<String>)> {
        let mut records = Vec::new();
        let problems = self.scan(|_, record: NodeRecord| records.push(record))?;
        Ok((records, problems))
    }

    /// The ids with a record and neither `approved/<id>` nor `rejected/<id>`:
    /// three directory listings and no file opened, so the cost is that of
    /// listing names, whatever the number of admitted records. Ids are kept
    /// as 128-bit numbers (16 bytes each) while the listing runs.
    pub fn unsettled_ids(&self) -> io::Result<Vec<NodeId>> {
        Ok(self.list_names()?.unsettled)
    }

    /// The listing behind [`Store::unsettled_ids`], with the claims seen in it.
    fn list_names(&self) -> io::Result<Listing> {
        let mut settled: Vec<u128> = Vec::new();
        // The crash leftovers among these names are seen in the same listing.
        let mut temps: Vec<PathBuf> = Vec::new();
        for sub in ["approved", "rejected"] {
            self.each_name(sub, |name| {
                if let Some(n) = id_number(name) {
                    settled.push(n);
                } else if name.starts_with(durable::TEMP_PREFIX) {
                    temps.push(self.dir.join(sub).join(name));
                }
            })?;
        }
        // Sorted numbers, 16 bytes an id: a million settled records cost
        // 16 MiB while the listing runs, not a set of strings.
        settled.sort_unstable();
        let mut listing = Listing::default();
        self.each_name("nodes", |name| {
            if let Some(n) = name.strip_suffix(".json").and_then(id_number)
                && settled.binary_search(&n).is_err()
                && let Some(id) = name.strip_suffix(".json").and_then(NodeId::parse)
            {
                listing.unsettled.push(id);
            } else if let Some(id) =
                name.strip_prefix(CLAIM_PREFIX).and_then(|n| n.strip_suffix(".json")).and_then(NodeId::parse)
            {
                listing.claims.push(id);
            } else if name.starts_with(durable::TEMP_PREFIX) {
                temps.push(self.dir.join("nodes").join(name));
            }
        })?;
        remove_stale(&temps);
        Ok(listing)
    }

    /// Calls `each` with every name in a subdirectory (none when it is
    /// missing), without holding the listing.
    fn each_name(&self, sub: &str, mut each: impl FnMut(&str)) -> io::Result<()> {
        let dir = self.dir.join(sub);
        let entries = match fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(durable::with_path(e, &dir)),
        };
        for entry in entries {
            let entry = entry.map_err(|e| durable::with_path(e, &dir))?;
            if let Some(name) = entry.file_name().to_str() {
                each(name);
            }
        }
        Ok(())
    }

    /// The ids with `rejected/<id>`.
    pub fn rejected_ids(&self) -> io::Result<Vec<NodeId>> {
        let mut ids = Vec::new();
        self.each_name("rejected", |n| ids.extend(NodeId::parse(n)))?;
        Ok(ids)
    }

    /// The ids with `approved/<id>`.
    pub fn approved_ids(&self) -> io::Result<Vec<NodeId>> {
        let mut ids = Vec::new();
        self.each_name("approved", |n| ids.extend(NodeId::parse(n)))?;
        Ok(ids)
    }

    /// [`Store::list_names`], but listed again only when one of the three
    /// directories changed (its mtime) or `reconcile_every` passed since
    /// the last listing: an idle server lists nothing, however many records
    /// are admitted. The periodic listing is the backstop for filesystems
    /// whose directory times lag (a network filesystem's other clients).
    fn listing_cached(&self, reconcile_every: std::time::Duration) -> io::Result<Listing> {
        let stamps: Vec<Option<std::time::SystemTime>> = ["nodes", "approved", "rejected"]
            .iter()
            .map(|sub| fs::metadata(self.dir.join(sub)).and_then(|m| m.modified()).ok())
            .collect();
        // A time within the last seconds may hide a second change made in
        // the same clock tick: only a settled directory time is trusted.
        let settled = stamps.iter().flatten().all(|t| t.elapsed().is_ok_and(|age| age.as_secs() >= 2));
        let mut cache = self.unsettled.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((at, known, listing)) = cache.as_ref()
            && settled
            && *known == stamps
            && at.elapsed() < reconcile_every
        {
            return Ok(listing.clone());
        }
        let listing = self.list_names()?;
        *cache = Some((std::time::Instant::now(), stamps, listing.clone()));
        Ok(listing)
    }

    /// Records with neither approval nor rejection, read one by one (only
    /// those): the pending ones, and those a crash left between a token's
    /// claim and the end of their admission. What the pending cap, the age
    /// limit and crash recovery need. Age: the record's `announced_at`, else
    /// the file's mtime (a record the reference wrote has no time of its own).
    pub fn pending(&self, reconcile_every: std::time::Duration) -> io::Result<Vec<Pending>> {
        #[derive(Deserialize)]
        struct Summary {
            #[serde(default)]
            admitted: bool,
            #[serde(default)]
            announced_at: Option<String>,
            #[serde(default)]
            token_claim: Option<String>,
        }
        let rfc3339 = &time::format_description::well_known::Rfc3339;
        let mut pending = Vec::new();
        let listing = self.listing_cached(reconcile_every)?;
        let claims = listing.claims.iter().map(|id| (id, true));
        for (id, is_claim) in listing.unsettled.iter().map(|id| (id, false)).chain(claims) {
            let id = id.clone();
            let path = if is_claim { self.claim_path(&id) } else { self.record_path(&id) };
            let Ok(bytes) = durable::read_fresh(&path) else { continue }; // forgotten meanwhile
            let Ok(s) = serde_json::from_slice::<Summary>(&bytes) else { continue };
            let at = s.announced_at.and_then(|t| time::OffsetDateTime::parse(&t, rfc3339).ok());
            let announced = at.map(|t| t.unix_timestamp()).or_else(|| {
                use std::os::unix::fs::MetadataExt;
                fs::metadata(&path).ok().map(|m| m.mtime())
            });
            // Admitted by its record alone: a token admission between its
            // record and its approval (recovery finishes it), or the reference's.
            let awaits_admin = !s.admitted && !is_claim;
            pending.push(Pending { id, announced, token_claim: s.token_claim, awaits_admin });
        }
        Ok(pending)
    }

    /// Notes how an announcement's writes went: a failure for want of room
    /// or permission (ENOSPC, EDQUOT, EROFS, EACCES) makes `/healthz` say
    /// so until a write succeeds again.
    pub fn note_writes<T>(&self, result: &io::Result<T>) {
        let mut failure = self.write_failure.lock().unwrap_or_else(|e| e.into_inner());
        match result {
            Ok(_) => *failure = None,
            Err(e) if is_lack_of_room_or_right(e) => {
                *failure = Some((std::time::Instant::now(), e.to_string()));
            }
            Err(_) => {}
        }
    }

    /// Whether the state can be relied on: no announcement's write failed
    /// for want of room or permission lately, a durable write (with
    /// `fsync`) of a record's size succeeds in every directory a token
    /// admission writes to, and `tokens` and `tokens.meta.json` read and
    /// parse.
    pub fn check_health(&self) -> Result<(), Unhealthy> {
        if let Some(refusal) = self.format_refusal() {
            return Err(Unhealthy(refusal.to_string()));
        }
        if let Some((at, why)) = self.write_failure.lock().unwrap_or_else(|e| e.into_inner()).as_ref()
            && at.elapsed() < WRITE_FAILURE_MEMORY
        {
            return Err(Unhealthy(format!(
                "announcements fail to write ({}s ago): {why}",
                at.elapsed().as_secs()
            )));
        }
        self.ensure_layout().map_err(|e| Unhealthy(e.to_string()))?;
        let probe_name = format!("{}healthz-{}", durable::TEMP_PREFIX, std::process::id());
        let probe = vec![b'.'; PROBE_BYTES];
        let dirs = [".", "nodes", ledger::LEDGER_DIR, "approved", audit::AUDIT_DIR];
        for sub in dirs {
            let path = self.dir.join(sub).join(&probe_name);
            let written = durable::create_exclusive(&path, &probe, 0o600);
            let _ = fs::remove_file(&path);
            written.map_err(|e| Unhealthy(format!("state directory not writable: {e}")))?;
        }
        self.tokens.health()
    }
}

/// Whether `e` says the file system refuses writes: full, over quota,
/// read-only, or not ours to write.
fn is_lack_of_room_or_right(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::StorageFull
            | io::ErrorKind::QuotaExceeded
            | io::ErrorKind::ReadOnlyFilesystem
            | io::ErrorKind::PermissionDenied
    )
}

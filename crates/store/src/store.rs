//! The state directory's handle ([`Store`]): opening it, laying it out,
//! the one write path (`Store::in_layout`) and what every other module of
//! the store builds on (its subdirectories, the record paths, the write
//! failures remembered). The decisions, polls, admissions, listings and
//! maintenance are `impl Store` blocks of their own modules.
//!
//! Invariants: a state directory anyone may write to is refused; a
//! subdirectory removed under a running server is made again, under the
//! tokens lock, at the next write.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use janus_core::durable;
use janus_core::durable::write_atomic;

use crate::{
    Admitted, Audit, AuditEvent, NodeId, NodeRecord, StoreResult, Tokens, audit, format, ledger, locality,
    migrate, read_record_at, tokens,
};

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

/// The last listing of the record directories: when, their times then, what it found.
pub(crate) type UnsettledListing = (tokio::time::Instant, Vec<Option<std::time::SystemTime>>, Listing);

/// What one listing of the record directories found.
#[derive(Debug, Clone, Default)]
pub(crate) struct Listing {
    /// Records with neither approval nor rejection.
    pub(crate) unsettled: Vec<NodeId>,
    /// Token admissions under way, or cut short: `nodes/.claim-<id>.json`.
    pub(crate) claims: Vec<NodeId>,
}

/// The name prefix of a token admission's claim in `nodes/`.
pub(crate) const CLAIM_PREFIX: &str = ".claim-";

/// The state directory: every read and write of it.
pub struct Store {
    pub(crate) dir: PathBuf,
    /// `tokens` and the ledger.
    pub(crate) tokens: Tokens,
    /// The audit trail.
    pub(crate) audit: Audit,
    pub(crate) unsettled: std::sync::Mutex<Option<UnsettledListing>>,
    /// Set while `state-format` names a layout this binary does not know:
    /// every write is refused until it names one it does.
    pub(crate) format_refusal: std::sync::RwLock<Option<format::FormatError>>,
    /// How long after a token admission the same CA presenting the spent
    /// token again is answered `admitted` (its answer was lost).
    pub(crate) readmit_window: std::time::Duration,
    /// The last announcement whose writes failed for want of room or
    /// permission, and when: `/healthz` reports it until a write succeeds
    /// or it is [`WRITE_FAILURE_MEMORY`] old.
    pub(crate) write_failure: std::sync::Mutex<Option<(tokio::time::Instant, String)>>,
    /// When each rejected CA's repeated announcements were last audited.
    pub(crate) rejected_ca_audited: std::sync::Mutex<std::collections::HashMap<String, tokio::time::Instant>>,
    /// Whether every state directory was on a local filesystem at the last
    /// look ([`Store::look_at_locality`]); false until looked at, so a store
    /// never looked at takes the network filesystem's precautions.
    pub(crate) all_local: std::sync::atomic::AtomicBool,
    /// The approval files naming no node that the last maintenance pass found.
    pub(crate) orphans: std::sync::Mutex<super::record::OrphansSeen>,
}

/// A rejected CA announcing again within this is one burst: one audit entry.
pub(crate) const REJECTED_BURST: std::time::Duration = std::time::Duration::from_secs(60);
/// How many rejected CAs' bursts are remembered (the oldest go first).
pub(crate) const REJECTED_BURSTS_KEPT: usize = 4096;

/// How long a failed write keeps `/healthz` unavailable without a later success.
pub(crate) const WRITE_FAILURE_MEMORY: std::time::Duration = std::time::Duration::from_secs(30);

/// What the health probe writes in each directory an admission writes to:
/// larger than a record, so a nearly full disk fails it as it fails them.
pub(crate) const PROBE_BYTES: usize = 8 * 1024;

/// The readmit window by default: longer than janusd's retries take to
/// reach their 2-minute pace (5 s, 10 s, 20 s, 40 s, 80 s, 120 s, …).
pub const DEFAULT_READMIT_WINDOW: std::time::Duration = std::time::Duration::from_secs(10 * 60);

pub(crate) const SUBDIRS: [&str; 8] = [
    "nodes",
    "approved",
    "rejected",
    "delivered",
    "rejected-cas",
    ledger::LEDGER_DIR,
    audit::AUDIT_DIR,
    APPROVAL_REMOVED_DIR,
];

/// `approval-removed/<id>`: the removal of `approved/<id>` after the trust
/// went out was audited (once).
pub(crate) const APPROVAL_REMOVED_DIR: &str = "approval-removed";

/// How old a `.tmp-*` file must be before startup takes it for a crash's leftover.
pub(crate) const STALE_TEMP_AGE: std::time::Duration = std::time::Duration::from_secs(60);

impl Store {
    /// Opens `dir`, creating it and its subdirectories (0700) when missing,
    /// after refusing one anybody may write to, or one whose `state-format`
    /// this binary does not know; an unmarked one is marked once laid out.
    pub fn open(dir: &Path) -> StoreResult<Self> {
        let store = Self::at(dir);
        store.lay_out()?;
        Ok(store)
    }

    /// What `serve` checks before it binds its port, creating nothing: an
    /// existing directory is not world-writable and its format is known; a
    /// missing one has an existing parent (only the last level is made: a
    /// typo in `--state` must not start an empty endpoint).
    pub fn check_before_open(dir: &Path) -> StoreResult<()> {
        if durable::Presence::of(dir).known()? {
            refuse_world_writable(dir)?;
            return Ok(format::read(dir).map(|_| ())?);
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
            )
            .into());
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
    pub fn lay_out(&self) -> StoreResult<()> {
        let dir = &self.dir;
        refuse_world_writable(dir)?;
        let found = format::read(dir)?;
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
            migrate::migrate(dir, found)?;
        }
        Ok(())
    }

    /// Sets the readmit window (`serve --readmit-window`).
    pub fn with_readmit_window(mut self, window: std::time::Duration) -> Self {
        self.readmit_window = window;
        self
    }

    /// Reads `state-format` again (every maintenance pass): a format this
    /// binary does not know stops every write from now on, and says why; a
    /// known one lifts that; a marker removed meanwhile is written again.
    pub(crate) fn check_format(&self) -> Result<(), format::FormatError> {
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
            Ok(None) => migrate::migrate(&self.dir, None).map_err(|e| format::FormatError::Unreadable {
                path: self.dir.join(format::FILE),
                why: format!("cannot be written again: {e}"),
            }),
            Ok(Some(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Why nothing may be written now, when the state's format is one this
    /// binary does not know (as of the last `Store::check_format`).
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
    pub(crate) fn ensure_layout(&self) -> io::Result<()> {
        for made in self.make_missing()? {
            tracing::warn!(dir = %made.display(), "made a missing state directory again");
        }
        Ok(())
    }

    /// Makes what is missing of the directory and its subdirectories; what it made.
    pub(crate) fn make_missing(&self) -> io::Result<Vec<PathBuf>> {
        let mut made = Vec::new();
        if !self.dir.is_dir() {
            durable::ensure_private_dir(&self.dir)?;
            made.push(self.dir.clone());
        }
        let subdirs = || SUBDIRS.iter().map(|s| self.dir.join(s));
        if subdirs().all(|sub| sub.is_dir()) {
            return Ok(made);
        }
        // Made under the tokens lock, and looked for again under it: on
        // GlusterFS (10.3, replica 3) three hosts making the same new
        // directory at once left one brick holding it under another gfid,
        // EIO on two mounts of three for good (docs/deploying.md).
        let _locked = self.tokens.lock()?;
        for sub in subdirs() {
            if !sub.is_dir() {
                durable::ensure_private_dir(&sub)?;
                made.push(sub);
            }
        }
        Ok(made)
    }

    /// [`write_atomic`], making the layout again when a directory went missing.
    pub(crate) fn write_file(&self, path: &Path, bytes: &[u8]) -> StoreResult<()> {
        self.in_layout(|| write_atomic(path, bytes, 0o600))
    }

    /// `write`, made once more after remaking missing subdirectories: a
    /// directory removed under a running server costs a retry, not a failure.
    /// Refused outright while the state's format is one this binary does
    /// not know: every write of the store starts here.
    pub(crate) fn in_layout<T>(&self, write: impl Fn() -> io::Result<T>) -> StoreResult<T> {
        if let Some(refusal) = self.format_refusal() {
            return Err(refusal.into());
        }
        match write() {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                self.ensure_layout()?;
                Ok(write()?)
            }
            other => Ok(other?),
        }
    }

    /// The store of `dir`, nothing looked at or made yet.
    pub(crate) fn at(dir: &Path) -> Self {
        Store {
            dir: dir.to_path_buf(),
            tokens: Tokens::new(dir),
            audit: Audit::new(dir),
            unsettled: Default::default(),
            format_refusal: Default::default(),
            readmit_window: DEFAULT_READMIT_WINDOW,
            write_failure: Default::default(),
            rejected_ca_audited: Default::default(),
            all_local: Default::default(),
            orphans: Default::default(),
        }
    }

    /// Opens an existing state directory without creating anything else than
    /// our own subdirectories (admin commands).
    pub fn open_existing(dir: &Path) -> StoreResult<Self> {
        Self::refuse_unknown_or_missing(dir)?;
        Self::open(dir)
    }

    /// Opens an existing state directory to read it only: nothing is made,
    /// marked or migrated (admin commands that only show).
    pub fn open_to_read(dir: &Path) -> StoreResult<Self> {
        Self::refuse_unknown_or_missing(dir)?;
        Ok(Self::at(dir))
    }

    pub(crate) fn refuse_unknown_or_missing(dir: &Path) -> StoreResult<()> {
        format::read(dir)?;
        if !dir.join("nodes").is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "{} is not a state directory (it has no nodes/): lay it out with `janus-registration init \
                     --state {}` (or a first `serve`), or check --state for a typo",
                    dir.display(),
                    dir.display()
                ),
            )
            .into());
        }
        Ok(())
    }

    /// The state directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// An admission decided outside an announcement (an admin's command,
    /// the admission command): `approved/<id>` made durably,
    /// saying who, then its `admitted` event. One decision, one method.
    pub fn admit(&self, admitted: Admitted) -> StoreResult<()> {
        self.approve(&admitted.id, admitted.by, admitted.user.as_deref().unwrap_or(""))?;
        Ok(self.audit.record(admitted.into())?)
    }

    /// Every audit event about node `id`, oldest first (`nodes history`).
    pub fn history(&self, id: &NodeId) -> io::Result<Vec<serde_json::Value>> {
        self.audit.history(id.as_str())
    }

    /// Appends new tokens with their metadata ([`Tokens::add`]).
    pub fn add_tokens(&self, tokens: &[String], meta: &tokens::TokenMeta) -> StoreResult<()> {
        self.tokens.add(tokens, meta)?;
        let added: Vec<AuditEvent> = tokens
            .iter()
            .map(|t| AuditEvent::TokenAdded {
                token_sha256_prefix: audit::token_fingerprint(t),
                expires_at: meta.expires_at.map(janus_core::clock::unix_to_rfc3339),
                uses: meta.uses.unwrap_or(1),
                user: meta.added_by.clone(),
            })
            .collect();
        Ok(self.audit.record_all(&added)?)
    }

    /// Blanks spent and expired tokens, auditing expiries ([`Tokens::sweep`]); how many expired.
    pub fn sweep_tokens(&self) -> StoreResult<usize> {
        self.tokens.sweep(&self.audit, janus_core::clock::now_unix())
    }

    /// The tokens with a use left, redacted ([`Tokens::list`]).
    pub fn list_tokens(&self) -> StoreResult<Vec<tokens::TokenInfo>> {
        self.tokens.list()
    }

    /// Revokes the token `key` names ([`Tokens::revoke`]); its fingerprint.
    pub fn revoke_token(&self, key: &str, user: &str) -> StoreResult<String> {
        let fingerprint = self.tokens.revoke(key)?;
        self.audit.record(AuditEvent::TokenRevoked {
            token_sha256_prefix: fingerprint.clone(),
            user: user.into(),
        })?;
        Ok(fingerprint)
    }

    /// Why the tokens' metadata cannot be read now, if it cannot.
    pub fn token_meta_unreadable(&self) -> Option<tokens::MetaUnreadable> {
        self.tokens.meta_unreadable()
    }

    /// `nodes/<id>.json`.
    pub(crate) fn record_path(&self, id: &NodeId) -> PathBuf {
        self.dir.join("nodes").join(format!("{id}.json"))
    }

    /// `approved/<id>`.
    pub(crate) fn approval_path(&self, id: &NodeId) -> PathBuf {
        self.dir.join("approved").join(id.as_str())
    }

    /// Writes a record durably (temp file, fsync, rename, directory fsync).
    pub(crate) fn write_record(&self, record: &NodeRecord) -> StoreResult<()> {
        let json = serde_json::to_vec_pretty(record).map_err(io::Error::other)?;
        self.write_file(&self.record_path(&record.id), &json)
    }

    /// The record, or `None` when there is none for `id`.
    pub fn read_record(&self, id: &NodeId) -> StoreResult<Option<NodeRecord>> {
        Ok(read_record_at(&self.record_path(id))?)
    }

    /// `nodes/.claim-<id>.json`: a token admission's record while its use is
    /// claimed, until the record at `nodes/<id>.json` says admitted. It has
    /// its own name so that `nodes/<id>.json` never names the file the
    /// ledger's marker links to: a network filesystem's client that saw
    /// that name once kept reading the linked file after another host
    /// renamed the admitted record over it (GlusterFS; docs/deploying.md "Several
    /// replicas").
    pub(crate) fn claim_path(&self, id: &NodeId) -> PathBuf {
        self.dir.join("nodes").join(format!("{CLAIM_PREFIX}{id}.json"))
    }

    /// The record, or the claim a token admission left before writing it.
    /// Neither found on a network filesystem, the file server is asked
    /// again: a negative entry this client cached (it looked while another
    /// host's admission was between its claim and its record) would part a
    /// use from the node that holds it.
    pub(crate) fn read_record_or_claim(&self, id: &NodeId) -> StoreResult<Option<NodeRecord>> {
        let here = || -> StoreResult<Option<NodeRecord>> {
            if let Some(record) = self.read_record(id)? {
                return Ok(Some(record));
            }
            match read_record_at(&self.claim_path(id)) {
                // A claim no process wrote whole is no record of anyone's.
                Err(e) if e.kind() == io::ErrorKind::InvalidData => Ok(None),
                other => Ok(other?),
            }
        };
        match here()? {
            None if !self.reads_cannot_hang() => {
                let path = self.record_path(id);
                durable::revalidate_parent(&path).map_err(|e| durable::with_path(e, &path))?;
                here()
            }
            found => Ok(found),
        }
    }

    /// Looks again whether no read of the state can hang: the directory and
    /// every subdirectory on a local filesystem ([`locality`]); remembered
    /// for [`Store::reads_cannot_hang`]. Returns what the look before said,
    /// and what this one says. Blocks.
    pub(crate) fn look_at_locality(&self) -> (bool, bool) {
        let local = locality::all_local(
            std::iter::once(self.dir.clone())
                .chain(SUBDIRS.iter().map(|s| self.dir.join(s)))
                .collect::<Vec<_>>()
                .iter()
                .map(PathBuf::as_path),
        );
        (self.all_local.swap(local, std::sync::atomic::Ordering::Relaxed), local)
    }

    /// Whether every state directory was on a local filesystem at the last
    /// [`Store::look_at_locality`].
    pub(crate) fn reads_cannot_hang(&self) -> bool {
        self.all_local.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Whether `path` names a file now, as the file server has it: on a
    /// network filesystem its directory is opened first
    /// ([`durable::present_at_server`]); on a local one, whose kernel has
    /// no other host's names to miss, the `open` and `close` are spared
    /// (two of a poll's system calls).
    pub(crate) fn present_now(&self, path: &Path) -> io::Result<bool> {
        if self.reads_cannot_hang() { durable::present(path) } else { durable::present_at_server(path) }
    }

    pub(crate) fn marker(&self, sub: &str, id: &NodeId) -> PathBuf {
        self.dir.join(sub).join(id.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Replicas starting at once on a new state directory make its
    /// subdirectories one at a time: while another process holds the tokens
    /// lock, nothing is made; once it lets go, everything is.
    #[test]
    fn missing_subdirectories_are_made_under_the_tokens_lock() {
        let dir = tempfile::tempdir().unwrap();
        let held = durable::open_or_create(&dir.path().join(tokens::LOCK_FILE), 0o600).unwrap();
        held.lock().unwrap();
        let store = Store::at(dir.path());
        let making = std::thread::spawn(move || store.make_missing().map(|made| made.len()));
        // A negative can only be looked at for a while: long enough for a
        // mkdir that did not wait to show.
        std::thread::sleep(std::time::Duration::from_millis(300));
        assert!(!making.is_finished(), "waits for the lock");
        assert!(fs::symlink_metadata(dir.path().join("nodes")).is_err(), "made nothing meanwhile");
        drop(held);
        assert_eq!(making.join().unwrap().unwrap(), SUBDIRS.len());
        assert!(SUBDIRS.iter().all(|s| dir.path().join(s).is_dir()));
    }

    /// Records as the reference writes them (`json.dump(value, f,
    /// indent=2)`) and as earlier versions of ours did (our fields after
    /// its five, another tool's field kept): read into a typed record and
    /// written again, the same bytes.
    #[test]
    fn records_read_and_write_what_the_reference_and_earlier_versions_wrote() {
        let reference = r#"{
  "id": "0123456789abcdef0123456789abcdef",
  "name": "edge-1",
  "address": "10.0.2.15:9505",
  "ca_cert_pem": "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
  "admitted": false,
  "poll_secret_sha256": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
}"#;
        let ours = r#"{
  "id": "fedcba9876543210fedcba9876543210",
  "name": "edge-2",
  "address": "[fe80::1]:9505",
  "ca_cert_pem": "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
  "admitted": true,
  "poll_secret_sha256": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
  "ca_sha256": "2bcdf132aa00aa00aa00aa00aa00aa00aa00aa00aa00aa00aa00aa00aa00aa00",
  "announced_at": "2026-11-29T10:00:00Z",
  "peer_address": "192.0.2.7:40000",
  "admitted_by": "token",
  "rack": "4"
}"#;
        for text in [reference, ours] {
            let record: NodeRecord = serde_json::from_str(text).unwrap();
            assert_eq!(String::from_utf8(serde_json::to_vec_pretty(&record).unwrap()).unwrap(), text);
        }
        let malformed = reference.replace("0123456789abcdef0123456789abcdef", "../../etc/passwd");
        assert!(serde_json::from_str::<NodeRecord>(&malformed).is_err(), "an id is parsed, never trusted");
    }
}

//! `DIR/tokens`: registration tokens, whitespace-separated as the reference
//! reads it, and `DIR/tokens.meta.json`: the expiry and number of uses of the
//! tokens `tokens add` made, keyed by each token's SHA-256 (never the token).
//!
//! The file says which tokens exist; whether a use is spent is decided by
//! the [`Ledger`] alone, so a copy of `tokens` read a moment ago, or put back
//! by an editor, never admits twice. Invariants on the file, which belongs
//! to the admin:
//! - it is never replaced, truncated or emptied by this crate: a spent token's
//!   bytes are overwritten with spaces in place (under an exclusive `flock`
//!   on `DIR/tokens.lock`, after checking they still hold that token), new
//!   tokens are appended, so bytes an admin appends meanwhile are kept, and a
//!   symlinked or hard-linked `tokens` is edited through every name it has;
//! - a UTF-8 BOM is skipped; a line whose first non-blank character is `#`
//!   is a comment; a word that is not UTF-8 is unusable and blocks nothing;
//! - a token listed twice is one token (its uses come from the metadata);
//! - a token's metadata goes only with its last use (spent for good, or
//!   revoked), never because the token is missing from the list a moment;
//!   `add`, `sweep` and `revoke` read both files under the lock;
//! - a `tokens.meta.json` that cannot be read or parsed fails closed: the
//!   tokens it governed (as its last good copy, `tokens.meta.last-good.json`,
//!   says) admit nobody (503: the node retries), without a good copy every
//!   token does, nothing is blanked or swept, and [`Tokens::health`] says
//!   why; plain tokens (in no good copy) keep working;
//! - `token_expired` is audited once per token: the metadata records it.
//!
//! Reads are cached by the file's identity (device, inode, size, times), so
//! a mass boot against 100,000 tokens parses the file once, not per node.

use std::collections::{BTreeMap, HashMap};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::audit::{Audit, token_fingerprint};
use super::ledger::{Ledger, Mac};
use crate::durable::{append_durably, with_path, write_atomic};
use crate::pki::sha256_hex;

/// The admin's token list, one per line.
pub const TOKENS_FILE: &str = "tokens";
/// Our per-token metadata: expiry, uses, description.
pub const META_FILE: &str = "tokens.meta.json";
/// The last copy of [`META_FILE`] that parsed, kept to fail closed with.
pub const META_GOOD_FILE: &str = "tokens.meta.last-good.json";
/// The lock every writer of `tokens` takes.
pub const LOCK_FILE: &str = "tokens.lock";
/// How many characters a prefix naming a token needs (as node ids need).
pub const MIN_PREFIX: usize = 6;
/// Tokens shorter than this are flagged by `tokens list`: guessable.
pub const WEAK_BELOW: usize = 16;

/// What `tokens add` knows about a token beyond the token itself.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenMeta {
    /// Unix seconds; absent: never expires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<i64>,
    /// How many nodes the token admits in all, counted by the ledger; absent:
    /// one. (`uses_left`, as earlier versions wrote it, reads as the uses
    /// still to come, which an empty ledger makes the same thing.)
    #[serde(default, alias = "uses_left", skip_serializing_if = "Option::is_none")]
    pub uses: Option<u32>,
    /// When it was added (RFC 3339).
    #[serde(default)]
    pub added_at: String,
    /// Who added it.
    #[serde(default)]
    pub added_by: String,
    /// What the admin said the tokens are for (`tokens add --description`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// `token_expired` was audited: never again, even while the token
    /// stays listed (a `tokens` file this process cannot write).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub expiry_audited: bool,
}

impl TokenMeta {
    fn expired(&self, now: i64) -> bool {
        self.expires_at.is_some_and(|t| t <= now)
    }
    /// How many nodes the token admits in all.
    pub fn total_uses(&self) -> u32 {
        self.uses.unwrap_or(1).max(1)
    }
}

/// A token as `tokens list` shows it: redacted.
#[derive(Debug, Clone, Serialize)]
pub struct TokenInfo {
    /// The token, redacted.
    pub shown: String,
    /// The first characters of its SHA-256, to revoke it by.
    pub sha256_prefix: String,
    /// RFC 3339, as the audit trail writes times.
    pub expires_at: Option<String>,
    /// Uses not yet spent.
    pub uses_left: u32,
    /// Who added it.
    pub added_by: String,
    /// What it is for.
    pub description: Option<String>,
    /// Shorter than [`WEAK_BELOW`] characters.
    pub weak: bool,
}

/// What a presented token is worth.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Offer {
    /// Not in the file (or empty): the node waits for an admin.
    Unknown,
    /// Listed, but past its expiry.
    Expired,
    /// Listed, but its metadata cannot be read now: it admits nobody until
    /// it can (the node retries).
    Unreadable(MetaUnreadable),
    /// Listed and in date: it admits if the ledger has a free use.
    Valid {
        /// The token's ledger name.
        mac: Mac,
        /// How many nodes it admits in all.
        uses: u32,
    },
}

/// Why a token's metadata cannot be relied on now.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the registration token's metadata cannot be read ({0}); tokens it governs admit nobody until tokens.meta.json reads again"
)]
pub struct MetaUnreadable(pub String);

/// A file's identity: any write by anyone changes one of these.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    fn of(meta: &fs::Metadata) -> Stamp {
        Stamp {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        }
    }
}

/// `tokens` as last read: each usable token with the offsets of its copies.
#[derive(Default)]
struct Listed {
    stamp: Option<Stamp>,
    tokens: HashMap<String, Vec<u64>>,
    /// Each token once, in file order, for listings: blanked ones stay here
    /// until the next read (removing one would cost a scan of 100,000), so
    /// readers keep only those still in `tokens`.
    order: Vec<String>,
    /// Read since the last sweep looked for spent tokens: someone else
    /// wrote the file (or it is the first read), so a spent token may be
    /// back. Our own blanking does not set it.
    unswept: bool,
}

#[derive(Default)]
struct MetaCache {
    stamp: Option<Stamp>,
    /// The file's metadata, or the last good copy while it is broken.
    meta: Arc<BTreeMap<String, TokenMeta>>,
    /// Why the file cannot be read now; while set, tokens `meta` holds
    /// admit nobody, nothing is blanked, and nothing is swept.
    error: Option<String>,
    /// Whether `meta` is known good (false while broken with no good copy at
    /// hand: then every token fails closed).
    known: bool,
}

/// `tokens`: read through a cache, never replaced, spent tokens blanked in place.
pub struct Tokens {
    path: PathBuf,
    meta_path: PathBuf,
    lock_path: PathBuf,
    /// Who spent which use.
    pub ledger: Ledger,
    listed: Mutex<Listed>,
    meta: Mutex<MetaCache>,
    /// Spent tokens waiting for their bytes to be blanked, when a tidier
    /// thread runs (the server); `None`: blanked by the caller.
    tidy: Mutex<Option<Vec<String>>>,
    tidy_wake: Condvar,
    /// One edit of the files at a time in this process (the flock is per
    /// open file description, so threads need their own exclusion).
    editing: Mutex<()>,
}

impl Tokens {
    /// The tokens of the state directory `state_dir`.
    pub fn new(state_dir: &Path) -> Self {
        Tokens {
            path: state_dir.join(TOKENS_FILE),
            meta_path: state_dir.join(META_FILE),
            lock_path: state_dir.join(LOCK_FILE),
            ledger: Ledger::new(state_dir),
            listed: Mutex::new(Listed::default()),
            meta: Mutex::new(MetaCache::default()),
            tidy: Mutex::new(None),
            tidy_wake: Condvar::new(),
            editing: Mutex::new(()),
        }
    }

    /// What `token` is worth now: the file as it is (re-read when it
    /// changed) and the metadata's expiry and uses.
    pub fn offer(&self, token: &str) -> io::Result<Offer> {
        if token.is_empty() {
            return Ok(Offer::Unknown);
        }
        self.refresh()?;
        if !self.listed().tokens.contains_key(token) {
            return Ok(Offer::Unknown);
        }
        let (meta, unreadable) = self.meta_in_force(token);
        if let Some(why) = unreadable {
            return Ok(Offer::Unreadable(why));
        }
        if meta.expired(now_unix()) {
            return Ok(Offer::Expired);
        }
        Ok(Offer::Valid { mac: self.ledger.mac(token)?, uses: meta.total_uses() })
    }

    /// Called once every use of `token` is spent: its bytes in `tokens` are
    /// blanked, by the tidier thread when one runs (batched, one `fsync` per
    /// batch), else now. Tidying is cosmetic (the ledger decides), so its
    /// failure is logged, not returned.
    pub fn spent(&self, token: &str) {
        let mut queue = self.tidy.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(queue) = queue.as_mut() {
            queue.push(token.to_string());
            self.tidy_wake.notify_one();
            return;
        }
        drop(queue);
        if let Err(e) = self.blank_spent(&[token.to_string()]) {
            tracing::warn!(cause = %e, "could not blank a spent token in the tokens file");
        }
    }

    /// Asks the next sweep to look at spent tokens again: one was spent
    /// while another admission of it was still under way.
    pub fn sweep_later(&self) {
        self.listed().unswept = true;
    }

    /// One turn of the tidier thread: waits up to `wait` for spent tokens,
    /// then blanks them as one batch (one `fsync`). From its first turn on,
    /// [`Tokens::spent`] queues instead of blanking.
    pub fn tidy_turn(&self, wait: std::time::Duration) {
        let batch = {
            let mut queue = self.tidy.lock().unwrap_or_else(|e| e.into_inner());
            if queue.is_none() {
                *queue = Some(Vec::new());
            }
            if queue.as_ref().is_some_and(Vec::is_empty) {
                queue = self.tidy_wake.wait_timeout(queue, wait).unwrap_or_else(|e| e.into_inner()).0;
            }
            queue.as_mut().map(std::mem::take).unwrap_or_default()
        };
        if batch.is_empty() {
            return;
        }
        if let Err(e) = self.blank_spent(&batch) {
            tracing::warn!(cause = %e, "could not blank spent tokens in the tokens file");
        }
    }

    /// The listed tokens, each once, in file order.
    fn listed_in_order(&self) -> Vec<String> {
        let listed = self.listed();
        listed.order.iter().filter(|t| listed.tokens.contains_key(*t)).cloned().collect()
    }

    /// Blanks what the tidier has queued and not done yet: at shutdown, so a
    /// stopped server leaves no spent token listed.
    pub fn flush_tidy(&self) {
        let batch = self.tidy.lock().unwrap_or_else(|e| e.into_inner()).as_mut().map(std::mem::take);
        if let Some(batch) = batch.filter(|b| !b.is_empty())
            && let Err(e) = self.blank_spent(&batch)
        {
            tracing::warn!(cause = %e, "could not blank spent tokens in the tokens file");
        }
    }

    /// Blanks tokens spent for good, and drops their metadata with them:
    /// their last use is gone, and the ledger says so if one comes back.
    fn blank_spent(&self, tokens: &[String]) -> io::Result<()> {
        let _editing = self.editing.lock().unwrap_or_else(|e| e.into_inner());
        let _lock = self.lock()?;
        self.blank_locked(tokens)?;
        if self.meta_unreadable().is_some() {
            return Ok(());
        }
        let mut meta = self.read_meta()?;
        let before = meta.len();
        for token in tokens {
            meta.remove(&sha256_hex(token.as_bytes()));
        }
        if meta.len() != before {
            self.write_meta(&meta)?;
        }
        Ok(())
    }

    /// Overwrites every copy of each of `tokens` in the file with spaces, in
    /// place, where the bytes still hold that token; the caller holds both
    /// locks. The cached listing is locked from before the writes until the
    /// file's new identity is recorded, so a reader never takes our own
    /// write for someone else's and parses the whole file again. Nothing is
    /// blanked while the metadata cannot be read: which tokens are spent
    /// for good cannot be told (a sweep once it reads again does it).
    fn blank_locked(&self, tokens: &[String]) -> io::Result<()> {
        if self.meta_unreadable().is_some() {
            self.listed().unswept = true;
            return Ok(());
        }
        // Through a symlink on purpose: the admin's list may live elsewhere.
        let file = match OpenOptions::new().read(true).write(true).open(&self.path) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            // A list the admin keeps read-only (a Kubernetes Secret): the
            // ledger and the metadata decide; blanking is cosmetic.
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::ReadOnlyFilesystem | io::ErrorKind::PermissionDenied
                ) =>
            {
                tracing::debug!(file = %self.path.display(), cause = %e, "the tokens file is read-only: spent tokens stay listed");
                return Ok(());
            }
            Err(e) => return Err(with_path(e, &self.path)),
        };
        let mut listed = self.listed();
        let before = Stamp::of(&file.metadata()?);
        if listed.stamp != Some(before) {
            *listed = self.reread(&file)?;
        }
        let mut changed = false;
        for token in tokens {
            let Some(offsets) = listed.tokens.remove(token) else { continue };
            for offset in offsets {
                let mut there = vec![0u8; token.len()];
                if file.read_exact_at(&mut there, offset).is_ok() && there == token.as_bytes() {
                    file.write_all_at(&vec![b' '; token.len()], offset)
                        .map_err(|e| with_path(e, &self.path))?;
                    changed = true;
                }
            }
        }
        let after = Stamp::of(&file.metadata()?);
        // Our own write changed the times; anyone else's (an append changes
        // the size) makes the next reader parse the file again.
        listed.stamp = (after.size == before.size).then_some(after);
        drop(listed);
        if changed {
            file.sync_data().map_err(|e| with_path(e, &self.path))?;
        }
        Ok(())
    }

    /// Blanks spent and expired tokens, auditing each expiry once (before
    /// its token goes: a crash may repeat the event, never lose it), and
    /// drops the metadata of tokens spent for good: the server's periodic
    /// sweep, and `tokens list`. Both files are read under the lock, so a
    /// token `add` is making meanwhile keeps its metadata; a token missing
    /// from the list keeps its metadata too (an editor's moment, a link
    /// briefly dangling). While the metadata cannot be read, nothing is
    /// swept. Returns how many expired.
    pub fn sweep(&self, audit: &Audit) -> io::Result<usize> {
        let _editing = self.editing.lock().unwrap_or_else(|e| e.into_inner());
        let _lock = self.lock()?;
        self.refresh()?;
        let mut meta = match self.read_meta() {
            Ok(meta) => meta,
            Err(e) => {
                self.note_meta_error(&e);
                return Ok(0);
            }
        };
        let now = now_unix();
        let unswept = std::mem::take(&mut self.listed().unswept);
        let listed = self.listed_in_order();
        let mut gone = Vec::new();
        let mut expired = 0;
        let mut under_way = false;
        let mut meta_changed = false;
        for token in &listed {
            let hash = sha256_hex(token.as_bytes());
            let entry = meta.get(&hash).cloned().unwrap_or_default();
            if entry.expired(now) {
                if !entry.expiry_audited {
                    audit
                        .record("token_expired", json!({"token_sha256_prefix": token_fingerprint(token)}))?;
                    expired += 1;
                    if let Some(entry) = meta.get_mut(&hash) {
                        entry.expiry_audited = true;
                        meta_changed = true;
                    }
                }
                gone.push(token.clone());
            } else if unswept {
                // Only after someone else wrote the file: the ledger is
                // asked once per token per change, not at every pass.
                let mac = self.ledger.mac(token)?;
                if self.ledger.used(&mac, entry.total_uses()) < entry.total_uses() {
                    continue;
                }
                if self.ledger.spent_for_good(&mac, entry.total_uses())? {
                    gone.push(token.clone());
                    meta_changed |= meta.remove(&hash).is_some();
                } else {
                    // An admission under way: asked again at the next pass.
                    under_way = true;
                }
            }
        }
        if meta_changed {
            self.write_meta(&meta)?;
        }
        if under_way {
            self.listed().unswept = true;
        }
        if !gone.is_empty() {
            self.blank_locked(&gone)?;
        }
        Ok(expired)
    }

    /// Appends new tokens, their metadata written first so a token never
    /// appears without its expiry (absent metadata: one use, no expiry).
    pub fn add(&self, tokens: &[String], meta: &TokenMeta) -> io::Result<()> {
        let _editing = self.editing.lock().unwrap_or_else(|e| e.into_inner());
        let _lock = self.lock()?;
        let plain = TokenMeta { added_at: String::new(), added_by: String::new(), ..meta.clone() };
        if plain != TokenMeta::default() || !meta.added_by.is_empty() {
            let mut book = self.read_meta()?;
            for t in tokens {
                book.insert(sha256_hex(t.as_bytes()), meta.clone());
            }
            self.write_meta(&book)?;
        }
        let mut text = String::new();
        if !ends_with_newline(&self.path)? {
            text.push('\n');
        }
        for t in tokens {
            text.push_str(t);
            text.push('\n');
        }
        append_durably(&self.path, text.as_bytes(), 0o600, true)
    }

    /// The tokens with a use left, redacted, in file order.
    pub fn list(&self) -> io::Result<Vec<TokenInfo>> {
        self.refresh()?;
        let order = self.listed_in_order();
        let mut out = Vec::new();
        for t in &order {
            let (meta, _) = self.meta_in_force(t);
            let left =
                meta.total_uses().saturating_sub(self.ledger.used(&self.ledger.mac(t)?, meta.total_uses()));
            if left > 0 {
                out.push(TokenInfo {
                    shown: redact(t),
                    sha256_prefix: token_fingerprint(t),
                    expires_at: meta.expires_at.map(crate::clock::unix_to_rfc3339),
                    uses_left: left,
                    added_by: meta.added_by,
                    description: meta.description,
                    weak: t.chars().count() < WEAK_BELOW,
                });
            }
        }
        Ok(out)
    }

    /// Revokes the token equal to `key`, or the one token starting with it,
    /// or the one whose SHA-256 fingerprint (as listed) starts with it:
    /// every use is filled in the ledger (so a copy of the file that still
    /// lists it admits nobody), then its bytes are blanked. Returns the
    /// token's fingerprint.
    pub fn revoke(&self, key: &str) -> io::Result<String> {
        let _editing = self.editing.lock().unwrap_or_else(|e| e.into_inner());
        let _lock = self.lock()?;
        self.refresh()?;
        let order = self.listed_in_order();
        let token = if order.iter().any(|t| t == key) {
            key.to_string()
        } else {
            // A prefix names a token only from 6 characters on, as node ids:
            // `tokens revoke 5` must not revoke whichever token starts so.
            if key.chars().count() < MIN_PREFIX {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "a prefix needs {MIN_PREFIX} characters or more (of the token, or of its SHA-256 as \
                         `tokens list` shows it)"
                    ),
                ));
            }
            let by_hash = key.bytes().all(|b| b.is_ascii_hexdigit());
            let matching: Vec<&String> = order
                .iter()
                .filter(|t| {
                    t.starts_with(key)
                        || (by_hash && sha256_hex(t.as_bytes()).starts_with(&key.to_ascii_lowercase()))
                })
                .collect();
            match matching.as_slice() {
                [] => return Err(io::Error::new(io::ErrorKind::NotFound, "no token matches")),
                [one] => (*one).clone(),
                many => {
                    let mut message = format!("the prefix matches {} tokens; give more of it:", many.len());
                    for t in many {
                        message.push_str(&format!("\n  {}  {}", redact(t), token_fingerprint(t)));
                    }
                    return Err(io::Error::new(io::ErrorKind::InvalidInput, message));
                }
            }
        };
        // Every use it could have: from the file as it is now, or the good
        // copy while the file is broken (more markers than uses are harmless).
        let mut meta = self.read_meta().ok();
        let uses = match &meta {
            Some(meta) => meta.get(&sha256_hex(token.as_bytes())).cloned().unwrap_or_default().total_uses(),
            None => self.meta_in_force(&token).0.total_uses(),
        };
        self.ledger.revoke(&self.ledger.mac(&token)?, uses)?;
        if let Some(meta) = meta.as_mut()
            && meta.remove(&sha256_hex(token.as_bytes())).is_some()
        {
            self.write_meta(meta)?;
        }
        self.blank_locked(std::slice::from_ref(&token))?;
        Ok(token_fingerprint(&token))
    }

    /// Why the files cannot be relied on, if they cannot: `tokens` present
    /// but unreadable, or `tokens.meta.json` unparsable.
    pub fn health(&self) -> Result<(), super::Unhealthy> {
        self.refresh().map_err(|e| super::Unhealthy(e.to_string()))?;
        match self.meta_unreadable() {
            Some(why) => Err(super::Unhealthy(why.to_string())),
            None => Ok(()),
        }
    }

    /// Why the metadata cannot be read now, if it cannot.
    pub fn meta_unreadable(&self) -> Option<MetaUnreadable> {
        self.meta_snapshot();
        self.meta.lock().unwrap_or_else(|e| e.into_inner()).error.clone().map(MetaUnreadable)
    }

    /// Re-reads `tokens` when its identity changed.
    fn refresh(&self) -> io::Result<()> {
        let file = match crate::durable::retry_stale(|| File::open(&self.path)) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                *self.listed() = Listed::default();
                return Ok(());
            }
            Err(e) => return Err(with_path(e, &self.path)),
        };
        let mut listed = self.listed();
        let stamp = Stamp::of(&file.metadata().map_err(|e| with_path(e, &self.path))?);
        if listed.stamp != Some(stamp) {
            *listed = self.reread(&file)?;
        }
        Ok(())
    }

    fn reread(&self, mut file: &File) -> io::Result<Listed> {
        let stamp = Stamp::of(&file.metadata()?);
        let mut bytes = Vec::with_capacity(stamp.size as usize);
        file.seek(io::SeekFrom::Start(0))?;
        file.read_to_end(&mut bytes).map_err(|e| with_path(e, &self.path))?;
        let mut listed = Listed { stamp: Some(stamp), unswept: true, ..Listed::default() };
        for (word, offset) in parse(&bytes) {
            let offsets = listed.tokens.entry(word.to_string()).or_default();
            if offsets.is_empty() {
                listed.order.push(word.to_string());
            }
            offsets.push(offset);
        }
        Ok(listed)
    }

    fn listed(&self) -> MutexGuard<'_, Listed> {
        self.listed.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `token`'s metadata, and why it cannot be relied on now: the file is
    /// broken and the token had metadata in its last good copy, or there
    /// is no good copy at all.
    fn meta_in_force(&self, token: &str) -> (TokenMeta, Option<MetaUnreadable>) {
        let meta = self.meta_snapshot();
        let entry = meta.get(&sha256_hex(token.as_bytes())).cloned();
        let cache = self.meta.lock().unwrap_or_else(|e| e.into_inner());
        let unreadable = match &cache.error {
            Some(why) if !cache.known || entry.is_some() => Some(MetaUnreadable(why.clone())),
            _ => None,
        };
        (entry.unwrap_or_default(), unreadable)
    }

    /// The metadata in force: re-read when the file changed. When it does
    /// not parse, the last good copy (this process's, else the one kept
    /// beside it), with the error kept; a file that parses is kept as the
    /// good copy.
    fn meta_snapshot(&self) -> Arc<BTreeMap<String, TokenMeta>> {
        let mut cache = self.meta.lock().unwrap_or_else(|e| e.into_inner());
        let stamp = fs::metadata(&self.meta_path).ok().map(|m| Stamp::of(&m));
        if stamp == cache.stamp && (cache.stamp.is_some() || cache.known || cache.error.is_some()) {
            return cache.meta.clone();
        }
        cache.stamp = stamp;
        match self.read_meta() {
            Ok(meta) => {
                if *cache.meta != meta || !cache.known {
                    self.keep_good_copy(&meta);
                }
                cache.meta = Arc::new(meta);
                cache.error = None;
                cache.known = true;
            }
            Err(e) => {
                if !cache.known {
                    match read_meta_at(&self.good_path()) {
                        Ok(good) => {
                            cache.meta = Arc::new(good);
                            cache.known = self.good_path().exists();
                        }
                        Err(_) => cache.known = false,
                    }
                }
                tracing::error!(
                    cause = %e, good_copy = cache.known,
                    "tokens.meta.json cannot be read: the tokens it governs admit nobody until it reads again"
                );
                cache.error = Some(e.to_string());
            }
        }
        cache.meta.clone()
    }

    /// Records a read failure of the metadata seen under the lock.
    fn note_meta_error(&self, e: &io::Error) {
        let mut cache = self.meta.lock().unwrap_or_else(|e| e.into_inner());
        cache.error = Some(e.to_string());
        cache.stamp = None;
    }

    fn good_path(&self) -> PathBuf {
        self.meta_path.with_file_name(META_GOOD_FILE)
    }

    /// Keeps `meta` beside the file as the last good copy (best effort:
    /// the file itself is what counts while it reads).
    fn keep_good_copy(&self, meta: &BTreeMap<String, TokenMeta>) {
        if meta.is_empty() && !self.meta_path.exists() {
            return;
        }
        let written = serde_json::to_vec_pretty(meta)
            .map_err(io::Error::other)
            .and_then(|bytes| write_atomic(&self.good_path(), &bytes, 0o600));
        if let Err(e) = written {
            tracing::warn!(cause = %e, "could not keep the last good copy of tokens.meta.json");
        }
    }

    fn read_meta(&self) -> io::Result<BTreeMap<String, TokenMeta>> {
        read_meta_at(&self.meta_path)
    }

    fn write_meta(&self, meta: &BTreeMap<String, TokenMeta>) -> io::Result<()> {
        if meta.is_empty() && !self.meta_path.exists() {
            return Ok(());
        }
        write_atomic(&self.meta_path, &serde_json::to_vec_pretty(meta).map_err(io::Error::other)?, 0o600)?;
        self.keep_good_copy(meta);
        Ok(())
    }

    /// The cross-process lock on edits of the files, held until the
    /// returned file is dropped.
    pub fn lock(&self) -> io::Result<File> {
        let file = crate::durable::open_or_create(&self.lock_path, 0o600)?;
        file.lock().map_err(|e| with_path(e, &self.lock_path))?;
        Ok(file)
    }
}

/// A metadata file: empty when missing.
fn read_meta_at(path: &Path) -> io::Result<BTreeMap<String, TokenMeta>> {
    match crate::durable::read_fresh(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map_err(|e| with_path(io::Error::new(io::ErrorKind::InvalidData, e), path)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(BTreeMap::new()),
        Err(e) => Err(with_path(e, path)),
    }
}

/// The usable words of a tokens file with their byte offsets: a leading BOM
/// skipped, comment lines (first non-blank `#`) skipped, words that are not
/// UTF-8 left out.
pub fn parse(bytes: &[u8]) -> Vec<(&str, u64)> {
    let start = if bytes.starts_with(b"\xEF\xBB\xBF") { 3 } else { 0 };
    let mut words = Vec::new();
    let mut line_start = start;
    for line in bytes[start..].split(|&b| b == b'\n') {
        let first = line.iter().find(|&&b| !is_separator_byte(b));
        if first != Some(&b'#') {
            let mut at = 0;
            for word in line.split(|&b| is_separator_byte(b)) {
                if let (false, Ok(text)) = (word.is_empty(), std::str::from_utf8(word)) {
                    // Non-ASCII white space splits too (U+00A0, U+2028, …).
                    let base = line_start + at;
                    let mut from = 0;
                    for (i, c) in text.char_indices() {
                        if is_separator(c) {
                            if i > from {
                                words.push((&text[from..i], (base + from) as u64));
                            }
                            from = i + c.len_utf8();
                        }
                    }
                    if from < text.len() {
                        words.push((&text[from..], (base + from) as u64));
                    }
                }
                at += word.len() + 1;
            }
        }
        line_start += line.len() + 1;
    }
    words
}

/// What separates tokens: what the reference's `str.split()` takes for
/// white space (Unicode's, and the ASCII separators U+001C–U+001F).
pub fn is_separator(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// [`is_separator`] for the ASCII bytes (vertical tab included, which
/// `u8::is_ascii_whitespace` leaves out).
fn is_separator_byte(b: u8) -> bool {
    b.is_ascii() && is_separator(b as char)
}

fn ends_with_newline(path: &Path) -> io::Result<bool> {
    let file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(true),
        Err(e) => return Err(with_path(e, path)),
    };
    let size = file.metadata()?.len();
    if size == 0 {
        return Ok(true);
    }
    let mut last = [0u8];
    file.read_exact_at(&mut last, size - 1)?;
    Ok(last[0] == b'\n')
}

/// The first 6 characters, then an ellipsis: enough to tell tokens apart.
pub fn redact(token: &str) -> String {
    let shown: String = token.chars().take(6).collect();
    format!("{shown}…")
}

/// Now, as Unix seconds.
pub fn now_unix() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// A new token: 128 bits from the OS CSPRNG, as 32 lowercase hex characters.
pub fn generate() -> String {
    crate::pki::hex(&rand::random::<[u8; 16]>())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &[u8]) -> Vec<&str> {
        parse(text).into_iter().map(|(w, _)| w).collect()
    }

    #[test]
    fn the_file_format() {
        assert_eq!(words(b"\xEF\xBB\xBFfirst second\n"), ["first", "second"]);
        assert_eq!(words(b"  # rack 3 tokens\nreal\n#x\n"), ["real"]);
        assert_eq!(words(b"ok \xFF\xFEbad other\r\n"), ["ok", "other"]);
        let text = b"a  b\n\tc";
        for (word, at) in parse(text) {
            assert_eq!(&text[at as usize..at as usize + word.len()], word.as_bytes());
        }
    }

    #[test]
    fn blanking_keeps_every_other_byte_and_appends() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(TOKENS_FILE);
        fs::write(&path, "# list\nkeep spent\nspent\n").unwrap();
        let tokens = Tokens::new(dir.path());
        assert!(matches!(tokens.offer("spent").unwrap(), Offer::Valid { uses: 1, .. }));
        tokens.spent("spent");
        assert_eq!(fs::read_to_string(&path).unwrap(), "# list\nkeep      \n     \n");
        assert_eq!(tokens.offer("spent").unwrap(), Offer::Unknown);
        tokens.add(&["new".into()], &TokenMeta::default()).unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "# list\nkeep      \n     \nnew\n");
        assert!(matches!(tokens.offer("new").unwrap(), Offer::Valid { .. }));
    }

    #[test]
    fn tokens_split_where_the_reference_splits_them() {
        // Found by the tokens_file fuzz target: a vertical tab is white space
        // to Python's str.split(), which the reference reads `tokens` with.
        let text = "one\x0btwo\x0cthree\x1cfour\u{a0}five\u{2028}six seven\n";
        let words: Vec<&str> = parse(text.as_bytes()).into_iter().map(|(w, _)| w).collect();
        assert_eq!(words, ["one", "two", "three", "four", "five", "six", "seven"]);
        for (word, offset) in parse(text.as_bytes()) {
            assert_eq!(&text.as_bytes()[offset as usize..offset as usize + word.len()], word.as_bytes());
        }
        assert!(parse(b"\x00\x0b\x00\x0a").iter().all(|(w, _)| !w.contains('\x0b')));
    }

    #[test]
    fn uses_expiry_and_revocation() {
        let dir = tempfile::tempdir().unwrap();
        let tokens = Tokens::new(dir.path());
        let audit = Audit::new(dir.path());
        tokens.add(&["multi".into()], &TokenMeta { uses: Some(3), ..Default::default() }).unwrap();
        let past = TokenMeta { expires_at: Some(now_unix() - 1), ..Default::default() };
        tokens.add(&["old".into()], &past).unwrap();
        tokens.add(&["plain-and-long-enough".into()], &TokenMeta::default()).unwrap();
        let list = tokens.list().unwrap();
        assert_eq!(list.iter().find(|t| t.shown == "multi…").unwrap().uses_left, 3);
        assert!(list.iter().find(|t| t.shown == "multi…").unwrap().weak);
        assert!(!list.iter().find(|t| t.shown == "plain-…").unwrap().weak);
        assert_eq!(tokens.offer("old").unwrap(), Offer::Expired);
        assert_eq!(tokens.sweep(&audit).unwrap(), 1);
        assert!(fs::read_to_string(audit.path()).unwrap().contains("token_expired"));
        assert!(tokens.revoke("plain").unwrap_err().to_string().contains("6 characters or more"));
        tokens.revoke("plain-").unwrap();
        let left: Vec<String> = tokens.list().unwrap().into_iter().map(|t| t.shown).collect();
        assert_eq!(left, ["multi…"]);
        // A revoked token put back by hand admits nobody: its uses are filled.
        tokens.add(&["plain-and-long-enough".into()], &TokenMeta::default()).unwrap();
        let Offer::Valid { mac, uses } = tokens.offer("plain-and-long-enough").unwrap() else { panic!() };
        assert_eq!(tokens.ledger.used(&mac, uses), uses);
    }

    #[test]
    fn a_broken_meta_file_fails_closed_for_its_tokens_and_plain_tokens_keep_working() {
        let dir = tempfile::tempdir().unwrap();
        let tokens = Tokens::new(dir.path());
        tokens.add(&["short".into()], &TokenMeta { uses: Some(2), ..Default::default() }).unwrap();
        assert!(tokens.health().is_ok());
        let good = fs::read(dir.path().join(META_FILE)).unwrap();
        fs::write(dir.path().join(META_FILE), b"{broken").unwrap();
        assert!(tokens.health().unwrap_err().0.contains(META_FILE));
        assert!(matches!(tokens.offer("short").unwrap(), Offer::Unreadable(_)), "governed: admits nobody");
        fs::write(dir.path().join(TOKENS_FILE), b"short\nplain\n").unwrap();
        assert!(matches!(tokens.offer("plain").unwrap(), Offer::Valid { uses: 1, .. }), "plain: works");
        // A fresh process (a restarted replica, `tokens list`) has the good copy kept beside it.
        let fresh = Tokens::new(dir.path());
        assert!(matches!(fresh.offer("short").unwrap(), Offer::Unreadable(_)));
        assert!(matches!(fresh.offer("plain").unwrap(), Offer::Valid { uses: 1, .. }));
        // Without any good copy, every token fails closed.
        fs::remove_file(dir.path().join(META_GOOD_FILE)).unwrap();
        let fresh = Tokens::new(dir.path());
        assert!(matches!(fresh.offer("plain").unwrap(), Offer::Unreadable(_)));
        // Fixed: the metadata is back, uses and all.
        fs::write(dir.path().join(META_FILE), good).unwrap();
        assert!(matches!(fresh.offer("short").unwrap(), Offer::Valid { uses: 2, .. }));
        assert!(fresh.health().is_ok());
    }
}

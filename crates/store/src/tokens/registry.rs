//! [`Tokens`]: the tokens file and its metadata as one handle, what a
//! presented token is worth now ([`Offer`]), and the admin's edits (add,
//! list, revoke, sweep), each under the tokens lock.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex};

use serde::Serialize;

use super::metadata::{MetaCache, MetaUnreadable, TokenMeta};
use super::words::{Listed, ends_with_newline};
use crate::presented::Presented;

use crate::AuditEvent;
use crate::audit::{Audit, token_fingerprint};
use crate::error::Refusal;
use crate::ledger::{Ledger, Mac};
use janus_core::clock::now_unix;
use janus_core::durable::{append_durably, with_path};
use janus_core::pki::sha256_hex;

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
    /// Its labels (`tokens add --label`).
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub labels: std::collections::BTreeMap<String, String>,
    /// Its metadata cannot be read now: its expiry and uses are unknown
    /// (shown as such, never as "never" and one use), and it admits nobody.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub metadata_unreadable: bool,
}

/// What a presented token is worth.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Offer {
    /// Not in the file (or empty): the node waits for an admin.
    Unknown,
    /// Listed, but past its expiry.
    Expired,
    /// Listed, but `tokens revoke` revoked it.
    Revoked,
    /// Listed, but its metadata cannot be read now: it admits nobody until
    /// it can (the node retries).
    Unreadable(MetaUnreadable),
    /// Listed and in date: it admits if the ledger has a free use.
    Valid {
        /// The token's ledger name.
        mac: Mac,
        /// How many nodes it admits in all.
        uses: u32,
        /// Its labels, for the records of the nodes it admits.
        labels: std::collections::BTreeMap<String, String>,
    },
}

/// `tokens`: read through a cache, never replaced, spent tokens blanked in place.
pub struct Tokens {
    pub(crate) path: PathBuf,
    pub(crate) meta_path: PathBuf,
    pub(crate) lock_path: PathBuf,
    /// Who spent which use.
    pub(crate) ledger: Ledger,
    pub(super) listed: Mutex<Listed>,
    pub(super) meta: Mutex<MetaCache>,
    /// Spent tokens waiting for their bytes to be blanked, when a tidier
    /// thread runs (the server); `None`: blanked by the caller.
    pub(crate) tidy: Mutex<Option<Vec<String>>>,
    pub(crate) tidy_wake: Condvar,
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
        }
    }

    /// [`Tokens::offer_presented`] of `token` as a node would present it:
    /// for tests, which name tokens by their text.
    #[cfg(test)]
    pub(crate) fn offer(&self, token: &str) -> crate::StoreResult<Offer> {
        match Presented::new(secrecy::SecretString::from(token), &self.ledger)? {
            Some(token) => self.offer_presented(&token),
            None => Ok(Offer::Unknown),
        }
    }

    /// What the presented `token` is worth now: the file as it is
    /// (re-read when it changed) and the metadata's expiry and uses; its
    /// MAC and hash as it carries them, none computed again.
    pub fn offer_presented(&self, token: &Presented) -> crate::StoreResult<Offer> {
        // Unreadable (EACCES, EIO, past its size bound): refused, never "not listed".
        self.refresh().map_err(|e| crate::error::Undecidable::refuse("whether this token is listed", &e))?;
        if !self.listed().tokens.contains_key(token.sha256()) {
            return Ok(Offer::Unknown);
        }
        let (meta, unreadable) = self.meta_in_force_of(token.sha256());
        if let Some(why) = unreadable {
            return Ok(Offer::Unreadable(why));
        }
        if meta.expired(now_unix()) {
            return Ok(Offer::Expired);
        }
        if self.ledger.is_revoked(token.mac())? {
            return Ok(Offer::Revoked);
        }
        Ok(Offer::Valid { mac: token.mac().clone(), uses: meta.total_uses(), labels: meta.labels })
    }

    /// Blanks spent tokens and those expired at `now` (Unix seconds: the
    /// caller's clock, so tests give any time), auditing each expiry once (before
    /// its token goes: a crash may repeat the event, never lose it), and
    /// drops the metadata of tokens spent for good: the server's periodic
    /// sweep, and `tokens list`. Both files are read under the lock, so a
    /// token `add` is making meanwhile keeps its metadata; a token missing
    /// from the list keeps its metadata too (an editor's moment, a link
    /// briefly dangling). While the metadata cannot be read, nothing is
    /// swept. Returns how many expired.
    pub fn sweep(&self, audit: &Audit, now: i64) -> crate::StoreResult<usize> {
        let locked = self.lock()?;
        self.refresh()?;
        let (mut meta, seen) = match self.read_meta_for_edit() {
            Ok(read) => read,
            Err(e) => {
                self.note_meta_error(&e);
                return Ok(0);
            }
        };
        let unswept = std::mem::take(&mut self.listed().unswept);
        let listed = self.listed_in_order();
        let mut gone = Vec::new();
        let mut expired = 0;
        let mut under_way = false;
        let mut meta_changed = false;
        let mut unexpired = Vec::new();
        for token in &listed {
            let hash = sha256_hex(token.as_bytes());
            match meta.get_mut(&hash) {
                Some(entry) if entry.expired(now) => {
                    if !entry.expiry_audited {
                        let event =
                            AuditEvent::TokenExpired { token_sha256_prefix: token_fingerprint(token) };
                        audit.record(event)?;
                        expired += 1;
                        entry.expiry_audited = true;
                        meta_changed = true;
                    }
                    gone.push(token.clone());
                }
                _ => unexpired.push((token, hash)),
            }
        }
        if unswept {
            // Only after someone else wrote the file: the ledger is asked
            // once per token per change, not at every pass, and first all
            // at once, then closely for those that may be spent.
            let macs = self.ledger.macs(unexpired.iter().map(|(t, _)| t.as_str()))?;
            let uses = |hash: &String| meta.get(hash).map_or(1, TokenMeta::total_uses);
            let asked: Vec<_> =
                macs.into_iter().zip(&unexpired).map(|(mac, (_, h))| (mac, uses(h))).collect();
            let maybe = self.ledger.maybe_all_used(&asked)?;
            for (((mac, uses), (token, hash)), may_be_spent) in asked.iter().zip(&unexpired).zip(maybe) {
                if !may_be_spent {
                    continue;
                }
                if self.ledger.spent_for_good(mac, *uses)? {
                    gone.push((*token).clone());
                    meta_changed |= meta.remove(hash).is_some();
                } else {
                    // An admission under way: asked again at the next pass.
                    under_way = true;
                }
            }
        }
        if meta_changed {
            self.write_meta(&locked, &meta, seen)?;
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
    pub fn add(&self, tokens: &[String], meta: &TokenMeta) -> crate::StoreResult<()> {
        let locked = self.lock()?;
        self.refuse_reuse(tokens)?;
        let mut text = String::new();
        if !ends_with_newline(&self.path)? {
            text.push('\n');
        }
        for t in tokens {
            text.push_str(t);
            text.push('\n');
        }
        self.refuse_past_bound(text.len() as u64)?;
        let plain = TokenMeta { added_at: String::new(), added_by: String::new(), ..meta.clone() };
        if plain != TokenMeta::default() || !meta.added_by.is_empty() {
            let (mut book, seen) = self.read_meta_for_edit()?;
            for t in tokens {
                book.insert(sha256_hex(t.as_bytes()), meta.clone());
            }
            self.write_meta(&locked, &book, seen)?;
        }
        Ok(append_durably(&self.path, text.as_bytes(), 0o600, true)?)
    }

    /// Refuses, under the lock, a token listed already, one that ever
    /// admitted a node, and one revoked: a token is listed once, and a use
    /// is never given back. The message does not say the token.
    fn refuse_reuse(&self, tokens: &[String]) -> crate::StoreResult<()> {
        self.refresh()?;
        for token in tokens {
            if self.listed().tokens.contains_key(&sha256_hex(token.as_bytes())) {
                return Err(Refusal::TokenListed.into());
            }
            let Some(mac) = self.ledger.mac_if_keyed(token)? else { continue };
            // Revoking claims every use: asked first, to say which it was.
            if self.ledger.is_revoked(&mac)? {
                return Err(Refusal::TokenRevoked.into());
            }
            if self.ledger.holder(&mac, 1)?.is_some() {
                return Err(Refusal::TokenSpent.into());
            }
        }
        Ok(())
    }

    /// Refuses to grow `tokens` by `more` bytes past [`super::words::MAX_FILE_BYTES`].
    fn refuse_past_bound(&self, more: u64) -> crate::StoreResult<()> {
        let size = match std::fs::metadata(&self.path) {
            Ok(meta) => meta.len(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => 0,
            Err(e) => return Err(with_path(e, &self.path).into()),
        };
        if size + more <= super::words::MAX_FILE_BYTES {
            return Ok(());
        }
        Err(Refusal::TooLarge { file: TOKENS_FILE, mib: super::words::MAX_FILE_BYTES >> 20 }.into())
    }

    /// The tokens with a use left, redacted, in file order.
    pub fn list(&self) -> crate::StoreResult<Vec<TokenInfo>> {
        self.refresh()?;
        let order = self.listed_in_order();
        let mut out = Vec::new();
        for t in &order {
            let (meta, unreadable) = self.meta_in_force(t);
            let left =
                meta.total_uses().saturating_sub(self.ledger.used(&self.ledger.mac(t)?, meta.total_uses()));
            if left > 0 {
                out.push(TokenInfo {
                    shown: redact(t),
                    sha256_prefix: token_fingerprint(t),
                    expires_at: meta.expires_at.map(janus_core::clock::unix_to_rfc3339),
                    uses_left: left,
                    added_by: meta.added_by,
                    description: meta.description,
                    weak: t.chars().count() < WEAK_BELOW,
                    labels: meta.labels,
                    metadata_unreadable: unreadable.is_some(),
                });
            }
        }
        Ok(out)
    }

    /// Revokes the token equal to `key`, or the one token starting with it,
    /// or the one whose SHA-256 fingerprint (as listed) starts with it:
    /// the ledger marks it revoked (so a copy of the file that still
    /// lists it admits nobody, whatever its metadata says or fails to say),
    /// then its bytes are blanked. Returns the token's fingerprint.
    pub fn revoke(&self, key: &str) -> crate::StoreResult<String> {
        let locked = self.lock()?;
        self.refresh()?;
        let order = self.listed_in_order();
        let token = if order.iter().any(|t| t == key) {
            key.to_string()
        } else {
            // A prefix names a token only from 6 characters on, as node ids:
            // `tokens revoke 5` must not revoke whichever token starts so.
            if key.chars().count() < MIN_PREFIX {
                return Err(Refusal::PrefixTooShort(MIN_PREFIX).into());
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
                [] => return Err(Refusal::NoSuchToken.into()),
                [one] => (*one).clone(),
                many => {
                    let shown = many.iter().map(|t| (redact(t), token_fingerprint(t))).collect();
                    return Err(Refusal::AmbiguousToken(shown).into());
                }
            }
        };
        // Final whatever the metadata says: the ledger's `.revoked` mark
        // governs every use. Its entry goes with it while the metadata
        // reads (a sweep drops it later otherwise).
        let mut meta = self.read_meta_for_edit().ok();
        let uses = match &meta {
            Some((meta, _)) => {
                meta.get(&sha256_hex(token.as_bytes())).cloned().unwrap_or_default().total_uses()
            }
            None => self.meta_in_force(&token).0.total_uses(),
        };
        self.ledger.revoke(&self.ledger.mac(&token)?, uses)?;
        // Revoked from here on, durably: what follows is tidying, and its
        // failure (a full disk) must not say the revoke failed.
        let tidied = (|| {
            if let Some((meta, seen)) = meta.as_mut()
                && meta.remove(&sha256_hex(token.as_bytes())).is_some()
            {
                self.write_meta(&locked, meta, *seen)?;
            }
            Ok::<(), crate::StoreError>(self.blank_locked(std::slice::from_ref(&token))?)
        })();
        if let Err(e) = tidied {
            self.listed().unswept = true;
            tracing::warn!(cause = %e, "revoked; its bytes and metadata go at a later sweep");
        }
        Ok(token_fingerprint(&token))
    }

    /// Why the files cannot be relied on, if they cannot: `tokens` present
    /// but unreadable, or `tokens.meta.json` unparsable.
    pub fn health(&self) -> Result<(), crate::Unhealthy> {
        self.refresh().map_err(|e| crate::Unhealthy(e.to_string()))?;
        match self.meta_unreadable() {
            Some(why) => Err(crate::Unhealthy(why.to_string())),
            None => Ok(()),
        }
    }

    /// The lock on edits of the files, held until the guard drops: this
    /// process's turn for `tokens.lock` (one per path, however many stores
    /// the process holds), then the cross-process flock, within the
    /// process's bound ([`janus_core::durable::lock`]).
    pub fn lock(&self) -> io::Result<EditLock> {
        Ok(EditLock { held: janus_core::durable::lock::lock(&self.lock_path, 0o600)? })
    }
}

/// An edit's hold of the token files' lock ([`Tokens::lock`]).
pub struct EditLock {
    held: janus_core::durable::lock::Held,
}

impl EditLock {
    /// Proves at the file server that this edit still holds the lock, just
    /// before it replaces a file the lock guards: a byte written to the
    /// lock file and `fdatasync`'d. On NFS the write carries the lock's
    /// state and the server checks it, so a host that stalled past its
    /// lease (the server gave the lock to another host meanwhile) gets
    /// EIO here, where a `stat` or an `open` can be answered from its
    /// client's caches and a read delegation it no longer holds (seen in
    /// the lab: a resumed host's stalled `tokens add` went on and
    /// overwrote another host's edit). Locally it costs a small write.
    /// Never through a second name: a lock file linked elsewhere refuses
    /// the edit instead of being written.
    pub(super) fn prove_held(&self, lock_path: &std::path::Path) -> io::Result<()> {
        use std::os::unix::fs::{FileExt, MetadataExt};
        let file = self.held.file();
        if file.metadata()?.nlink() != 1 {
            return Err(with_path(
                io::Error::other(
                    "refusing: it has a second link (or none), and an edit writes to it; remove the other \
                     name (or the planted file) and run the edit again",
                ),
                lock_path,
            ));
        }
        let fenced = file.write_all_at(b"\n", 0).and_then(|()| file.sync_data());
        fenced.map_err(|e| {
            with_path(
                io::Error::new(
                    e.kind(),
                    format!(
                        "refusing: this edit could not prove it still holds the tokens lock ({e}; the lock \
                         was lost: a stalled host whose NFS lease expired?); nothing written, run the edit again"
                    ),
                ),
                lock_path,
            )
        })
    }
}

/// The first 6 characters, then an ellipsis: enough to tell tokens apart.
pub fn redact(token: &str) -> String {
    let shown: String = token.chars().take(6).collect();
    format!("{shown}…")
}

/// A new token: 128 bits from the OS CSPRNG, as 32 lowercase hex characters.
pub fn generate() -> String {
    janus_core::pki::hex(&rand::random::<[u8; 16]>())
}

#[cfg(test)]
#[allow(clippy::disallowed_methods, reason = "tests write and look at files by hand, as an admin does")]
mod tests {
    use super::*;
    use crate::tokens::parse;
    use std::fs;

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
        let Offer::Valid { mac, uses: 1, .. } = tokens.offer("spent").unwrap() else { panic!() };
        tokens.spent("spent");
        assert_eq!(fs::read_to_string(&path).unwrap(), "# list\nkeep spent\nspent\n", "a use left: kept");
        tokens.ledger.revoke(&mac, 1).unwrap();
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
        assert_eq!(tokens.sweep(&audit, now_unix()).unwrap(), 1);
        assert!(fs::read_to_string(audit.path()).unwrap().contains("token_expired"));
        assert!(tokens.revoke("plain").unwrap_err().to_string().contains("6 characters or more"));
        tokens.revoke("plain-").unwrap();
        let left: Vec<String> = tokens.list().unwrap().into_iter().map(|t| t.shown).collect();
        assert_eq!(left, ["multi…"]);
        // `add` does not list a revoked token again; put back by hand, it
        // admits nobody: its uses are filled.
        let again = tokens.add(&["plain-and-long-enough".into()], &TokenMeta::default()).unwrap_err();
        assert!(again.to_string().contains("was revoked"), "{again}");
        janus_core::durable::append_durably(
            &dir.path().join(TOKENS_FILE),
            b"plain-and-long-enough\n",
            0o600,
            true,
        )
        .unwrap();
        assert_eq!(tokens.offer("plain-and-long-enough").unwrap(), Offer::Revoked);
    }

    #[test]
    fn a_sweep_of_a_long_file_blanks_the_spent_tokens_and_keeps_the_rest() {
        // Past LOOKUPS_UP_TO, the sweep asks one listing of the ledger.
        let dir = tempfile::tempdir().unwrap();
        let names: Vec<String> = (0..crate::ledger::LOOKUPS_UP_TO + 20).map(|i| format!("t{i:04}")).collect();
        fs::write(dir.path().join(TOKENS_FILE), names.join("\n") + "\n").unwrap();
        let earlier = Tokens::new(dir.path());
        let macs = earlier.ledger.macs(names.iter().map(String::as_str)).unwrap();
        for i in [3, 400, 530] {
            earlier.ledger.revoke(&macs[i], 1).unwrap();
        }
        // A use claimed by an admission still under way: not spent for good.
        fs::create_dir_all(dir.path().join("nodes")).unwrap();
        let claim = dir.path().join("nodes").join(".claim-x.json");
        fs::write(&claim, format!("{{\"id\":\"{}\"}}", crate::NodeId::generate())).unwrap();
        assert!(earlier.ledger.claim(&macs[7], 1, &claim, None).unwrap());
        let sweeping = Tokens::new(dir.path());
        sweeping.sweep(&Audit::new(dir.path()), now_unix()).unwrap();
        let left = String::from_utf8(fs::read(dir.path().join(TOKENS_FILE)).unwrap()).unwrap();
        let left: Vec<&str> = left.split_whitespace().collect();
        let kept: Vec<&str> = names
            .iter()
            .enumerate()
            .filter(|(i, _)| ![3, 400, 530].contains(i))
            .map(|(_, n)| n.as_str())
            .collect();
        assert_eq!(left, kept, "the revoked ones blanked, the one under way and the unspent kept");
        assert!(sweeping.listed().unswept, "the one under way is looked at again");
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

    #[test]
    fn an_edit_never_writes_through_a_second_link_to_the_lock_file() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let canary = outside.path().join("canary");
        fs::write(&canary, b"").unwrap();
        fs::hard_link(&canary, dir.path().join(LOCK_FILE)).unwrap();
        let tokens = Tokens::new(dir.path());
        let refused =
            tokens.add(&["first".into()], &TokenMeta { uses: Some(2), ..Default::default() }).unwrap_err();
        assert!(refused.to_string().contains("has a second link"), "{refused}");
        assert_eq!(fs::read(&canary).unwrap(), b"", "the other name's file is untouched");
        assert!(Tokens::new(dir.path()).read_meta().unwrap().is_empty(), "no metadata written");
    }

    #[test]
    fn an_edit_that_cannot_prove_its_lock_writes_no_metadata() {
        let dir = tempfile::tempdir().unwrap();
        let tokens = Tokens::new(dir.path());
        tokens.add(&["first".into()], &TokenMeta { uses: Some(2), ..Default::default() }).unwrap();
        let (mut book, seen) = tokens.read_meta_for_edit().unwrap();
        book.insert(sha256_hex(b"second"), TokenMeta { uses: Some(5), ..Default::default() });
        // The lock's file as a lost lock leaves it on NFS: its write fails
        // (here a read-only handle, EBADF; there EIO from the server).
        let lost = EditLock {
            held: janus_core::durable::lock::Held::pretend(
                fs::File::open(&tokens.lock_path).unwrap(),
                &tokens.lock_path,
            ),
        };
        let refused = tokens.write_meta(&lost, &book, seen).unwrap_err();
        assert!(refused.to_string().contains("could not prove it still holds the tokens lock"), "{refused}");
        drop(lost);
        let fresh = Tokens::new(dir.path());
        assert!(!fresh.read_meta().unwrap().contains_key(&sha256_hex(b"second")), "nothing written");
        assert!(matches!(fresh.offer("first").unwrap(), Offer::Valid { uses: 2, .. }));
    }

    #[test]
    fn an_edit_whose_lock_was_lost_writes_nothing_over_another_hosts_edit() {
        let dir = tempfile::tempdir().unwrap();
        let stalled = Tokens::new(dir.path());
        stalled.add(&["first".into()], &TokenMeta { uses: Some(2), ..Default::default() }).unwrap();
        // The stalled host read the metadata under a lock it then lost
        // (here: never took), and another host edited meanwhile.
        let (mut book, seen) = stalled.read_meta_for_edit().unwrap();
        let other = Tokens::new(dir.path());
        other.add(&["second".into()], &TokenMeta { uses: Some(3), ..Default::default() }).unwrap();
        book.insert(sha256_hex(b"third"), TokenMeta::default());
        let locked = stalled.lock().unwrap();
        let refused = stalled.write_meta(&locked, &book, seen).unwrap_err();
        drop(locked);
        assert!(refused.to_string().contains("another process wrote it"), "{refused}");
        let fresh = Tokens::new(dir.path());
        assert!(matches!(fresh.offer("second").unwrap(), Offer::Valid { uses: 3, .. }), "its edit kept");
        assert!(matches!(fresh.offer("first").unwrap(), Offer::Valid { uses: 2, .. }));
        // What it read, written at once, is written: the fence is no lock of its own.
        let (book, seen) = fresh.read_meta_for_edit().unwrap();
        let locked = fresh.lock().unwrap();
        fresh.write_meta(&locked, &book, seen).unwrap();
    }
}

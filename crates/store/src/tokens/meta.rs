//! `DIR/tokens.meta.json`: what `tokens add` knows about each token beyond
//! the token itself (expiry, uses, who added it, why), keyed by the token's
//! SHA-256, never the token; and its last good copy,
//! `tokens.meta.last-good.json`, kept beside it to fail closed with.
//!
//! Invariants: read through a cache keyed by the file's identity; a file
//! that does not parse, holds a value past its bound ([`MAX_USES`],
//! [`MAX_DESCRIPTION`]), or is missing while its last good copy governs
//! tokens (moved aside for an edit, left out of a restored backup) makes
//! the tokens that copy governs admit nobody ([`MetaUnreadable`]: the node
//! retries), and every token when there is no good copy: a missing file is
//! "no metadata" only when nothing ever had any. Every write is atomic
//! ([`write_atomic`]) and refreshes the good copy, always under the tokens
//! lock (a reader that finds the file changed keeps the copy only if it
//! can take the lock, and reads the file again under it).

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::metadata::*;
use super::words::Stamp;
use super::{META_GOOD_FILE, Tokens};
use janus_core::durable::{with_path, write_atomic};
use janus_core::pki::sha256_hex;

use crate::ledger::METADATA_EXISTED;

impl Tokens {
    /// Why the metadata cannot be read now, if it cannot.
    pub fn meta_unreadable(&self) -> Option<MetaUnreadable> {
        self.meta_snapshot();
        self.meta.lock().unwrap_or_else(|e| e.into_inner()).error.clone().map(MetaUnreadable)
    }

    /// `token`'s metadata, and why it cannot be relied on now: the file is
    /// broken and the token had metadata in its last good copy, or there
    /// is no good copy at all.
    pub(super) fn meta_in_force(&self, token: &str) -> (TokenMeta, Option<MetaUnreadable>) {
        self.meta_in_force_of(&sha256_hex(token.as_bytes()))
    }

    /// [`Tokens::meta_in_force`] of the token whose SHA-256 (hex) is `sha256`.
    pub(super) fn meta_in_force_of(&self, sha256: &str) -> (TokenMeta, Option<MetaUnreadable>) {
        let meta = self.meta_snapshot();
        let entry = meta.get(sha256).cloned();
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
    pub(super) fn meta_snapshot(&self) -> Arc<BTreeMap<String, TokenMeta>> {
        let mut cache = self.meta.lock().unwrap_or_else(|e| e.into_inner());
        let stamp_of = |path: &Path| fs::metadata(path).ok().map(|m| Stamp::of(&m));
        let file = stamp_of(&self.meta_path);
        let good = if file.is_none() { stamp_of(&self.good_path()) } else { None };
        // Both gone: whether the state had metadata decides, so its mark is watched too.
        let marker = if file.is_none() && good.is_none() {
            stamp_of(&self.ledger.dir().join(METADATA_EXISTED))
        } else {
            None
        };
        let stamp = Some((file, good, marker));
        if stamp == cache.stamp {
            return cache.meta.clone();
        }
        cache.stamp = stamp;
        match self.read_meta() {
            Ok(meta) => {
                if (*cache.meta != meta || !cache.known) && !self.keep_good_copy_if_unlocked() {
                    // Someone is editing (maybe this process): looked at again next time.
                    cache.stamp = None;
                }
                cache.meta = Arc::new(meta);
                cache.error = None;
                cache.known = true;
            }
            Err(e) => {
                // What the disk says now, never this process's last read: a
                // fresh process decides from the good copy on disk (every
                // writer refreshes it under the lock) or, without one, fails
                // every token closed, and so does this one. A memory older
                // than a token would take a token of many uses, or an
                // expiring one, for a plain one.
                match read_meta_at(&self.good_path()) {
                    Ok(Some(good)) => {
                        cache.meta = Arc::new(good);
                        cache.known = true;
                    }
                    Ok(None) | Err(_) => {
                        cache.meta = Arc::default();
                        cache.known = false;
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
    pub(super) fn note_meta_error(&self, e: &io::Error) {
        let mut cache = self.meta.lock().unwrap_or_else(|e| e.into_inner());
        cache.error = Some(e.to_string());
        cache.stamp = None;
    }

    pub(super) fn good_path(&self) -> PathBuf {
        self.meta_path.with_file_name(META_GOOD_FILE)
    }

    /// Keeps the metadata as its good copy, read again under the tokens
    /// lock, so two processes never leave an older copy over a newer one;
    /// false when the lock is held (an edit under way writes the copy itself).
    fn keep_good_copy_if_unlocked(&self) -> bool {
        // Through the process's one turn for the path: while an edit of
        // this process holds it, the lock file is not opened a second time
        // (on NFS closing it would drop the edit's lock for every host).
        let Ok(Some(_lock)) = janus_core::durable::lock::try_lock(&self.lock_path, 0o600) else {
            return false;
        };
        if let Ok(meta) = self.read_meta() {
            // A state whose metadata an earlier version wrote is marked at
            // its first read here.
            if !meta.is_empty()
                && let Err(e) = self.mark_metadata_existed()
            {
                tracing::warn!(cause = %e, "could not mark that this state has token metadata");
            }
            self.keep_good_copy(&meta);
        }
        true
    }

    /// Keeps `meta` beside the file as the last good copy (best effort:
    /// the file itself is what counts while it reads). An empty one is
    /// kept only over a copy that governs something (nothing is written
    /// for a state directory that never had metadata).
    pub(super) fn keep_good_copy(&self, meta: &BTreeMap<String, TokenMeta>) {
        if meta.is_empty() && !matches!(read_meta_at(&self.good_path()), Ok(Some(good)) if !good.is_empty()) {
            return;
        }
        let written = serde_json::to_vec_pretty(meta)
            .map_err(io::Error::other)
            .and_then(|bytes| write_atomic(&self.good_path(), &bytes, 0o600));
        if let Err(e) = written {
            tracing::warn!(cause = %e, "could not keep the last good copy of tokens.meta.json");
        }
    }

    /// The metadata, read now. A missing file is no metadata only when its
    /// last good copy governs nothing either: else the file was moved aside
    /// or lost, and reading it as empty would make an expired token valid
    /// and a token of many uses a one-use token (fail closed: an error).
    pub(super) fn read_meta(&self) -> io::Result<BTreeMap<String, TokenMeta>> {
        if let Some(meta) = read_meta_at(&self.meta_path)? {
            return Ok(meta);
        }
        match read_meta_at(&self.good_path()) {
            // Both gone: "no metadata" only if the state never had any. The
            // ledger says whether it had (a restored backup that left
            // tokens.meta*.json out keeps token-uses/, which its uses need).
            Ok(None) if self.metadata_existed()? => Err(with_path(
                io::Error::new(
                    io::ErrorKind::NotFound,
                    format!(
                        "it is missing, and so is its last good copy {META_GOOD_FILE}, but this state had \
                         token metadata ({}/{METADATA_EXISTED}): a token's expiry and uses cannot be told; \
                         put them back from a backup; if the metadata is gone for good, remove {}/{METADATA_EXISTED} \
                         (every listed token then admits one node, with no expiry)",
                        super::super::ledger::LEDGER_DIR,
                        super::super::ledger::LEDGER_DIR
                    ),
                ),
                &self.meta_path,
            )),
            Ok(None) => Ok(BTreeMap::new()),
            Ok(Some(good)) if good.is_empty() => Ok(BTreeMap::new()),
            Ok(Some(good)) => Err(with_path(
                io::Error::new(
                    io::ErrorKind::NotFound,
                    format!(
                        "it is missing, but its last good copy {META_GOOD_FILE} governs {} token(s): put it back \
                         (or copy {META_GOOD_FILE} to it); if their metadata is gone for good, remove \
                         {META_GOOD_FILE} and {}/{METADATA_EXISTED} too",
                        good.len(),
                        super::super::ledger::LEDGER_DIR
                    ),
                ),
                &self.meta_path,
            )),
            Err(e) => Err(e),
        }
    }

    /// Whether this state ever had token metadata: `token-uses/metadata-existed`,
    /// made the first time metadata was written; a look that fails is an error.
    fn metadata_existed(&self) -> io::Result<bool> {
        let marker = self.ledger.dir().join(METADATA_EXISTED);
        janus_core::durable::present(&marker).map_err(|e| with_path(e, &marker))
    }

    /// Makes the mark [`Tokens::metadata_existed`] looks for, once: under
    /// the lock, before metadata that governs a token is first written.
    fn mark_metadata_existed(&self) -> io::Result<()> {
        if self.metadata_existed()? {
            return Ok(());
        }
        janus_core::durable::ensure_private_dir(self.ledger.dir())?;
        let marker = self.ledger.dir().join(METADATA_EXISTED);
        janus_core::durable::create_exclusive(&marker, b"", 0o600).map(|_| ())
    }

    /// The metadata for an edit under the lock, with what the edit saw of
    /// the file for [`Tokens::write_meta`] to check.
    pub(super) fn read_meta_for_edit(&self) -> io::Result<(BTreeMap<String, TokenMeta>, MetaSeen)> {
        let seen = self.meta_seen()?;
        let meta = self.read_meta()?;
        stall_in_tokens_edit();
        Ok((meta, seen))
    }

    /// The name's identity as the file server has it now. Opened, not
    /// `stat`ed: an NFS client answers `stat` from its attribute cache (up to
    /// 60 s old by default, and a frozen host's cache still looks fresh when
    /// it resumes), and in CI a host resumed past its lease saw the file it
    /// had read and overwrote another host's edit. `open` asks the server for
    /// the name (close-to-open: NFSv4 opens by name and revalidates), and
    /// `fstat` then tells that file. A symlink is stamped as itself.
    fn meta_seen(&self) -> io::Result<MetaSeen> {
        use std::os::unix::fs::OpenOptionsExt;
        let flags = (rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK).bits() as i32;
        let opened = janus_core::durable::retry_stale(|| {
            fs::OpenOptions::new().read(true).custom_flags(flags).open(&self.meta_path)?.metadata()
        });
        let found = match opened {
            Err(e) if e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) => {
                fs::symlink_metadata(&self.meta_path)
            }
            other => other,
        };
        match found {
            Ok(meta) => Ok(MetaSeen(Some(Stamp::of(&meta)))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(MetaSeen(None)),
            Err(e) => Err(with_path(e, &self.meta_path)),
        }
    }

    /// Writes the metadata an edit read as `seen` and changed, unless the
    /// file is no longer what it read (see [`MetaSeen`]) or the edit cannot
    /// prove at the file server that it still holds `locked`.
    pub(super) fn write_meta(
        &self,
        locked: &super::EditLock,
        meta: &BTreeMap<String, TokenMeta>,
        seen: MetaSeen,
    ) -> crate::StoreResult<()> {
        if self.meta_seen()? != seen && !only_the_lock_is_checked() {
            return Err(with_path(
                io::Error::other(
                    "refusing: another process wrote it while this edit held the tokens lock (the lock was \
                     lost: a stalled host whose NFS lease expired?); nothing written, run the edit again",
                ),
                &self.meta_path,
            )
            .into());
        }
        if meta.is_empty() && matches!(read_meta_at(&self.meta_path), Ok(None)) {
            self.keep_good_copy(meta);
            return Ok(());
        }
        let bytes = serde_json::to_vec_pretty(meta).map_err(io::Error::other)?;
        if bytes.len() as u64 > MAX_META_BYTES {
            return Err(crate::Refusal::TooLarge { file: super::META_FILE, mib: MAX_META_BYTES >> 20 }.into());
        }
        // Last, right before the rename: the shorter the moment between the
        // proof and the write, the less a stall there can lose.
        locked.prove_held(&self.lock_path)?;
        // Once in a state's life, after the proof (a refused edit leaves no
        // mark of metadata that was never written), before the file.
        if !meta.is_empty() {
            self.mark_metadata_existed()?;
        }
        write_atomic(&self.meta_path, &bytes, 0o600)?;
        self.keep_good_copy(meta);
        Ok(())
    }
}

/// A test hook: while the file `JANUS_REGISTRATION_TEST_STALL_IN_TOKENS_EDIT`
/// names exists, an edit that has read the metadata under the lock waits
/// before writing it (having made `<that file>.reached`), as a host frozen mid-edit does (the lab's lease
/// run, scripts/replicas-on-nfs.sh). Read once; compiled into debug builds
/// only: no release build reads it.
#[cfg(not(debug_assertions))]
fn stall_in_tokens_edit() {}

/// Test hook: with `JANUS_REGISTRATION_TEST_ONLY_THE_LOCK_IS_CHECKED` set,
/// an edit skips its metadata identity check, so that the lab's lease run
/// shows what the lock's proof ([`super::EditLock::prove_held`]) refuses
/// alone. Debug builds only: no release build reads it.
#[cfg(not(debug_assertions))]
fn only_the_lock_is_checked() -> bool {
    false
}

#[cfg(debug_assertions)]
fn only_the_lock_is_checked() -> bool {
    std::env::var_os("JANUS_REGISTRATION_TEST_ONLY_THE_LOCK_IS_CHECKED").is_some()
}

#[cfg(debug_assertions)]
fn stall_in_tokens_edit() {
    static STALL_WHILE: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    let stall_while = STALL_WHILE
        .get_or_init(|| std::env::var_os("JANUS_REGISTRATION_TEST_STALL_IN_TOKENS_EDIT").map(PathBuf::from));
    if let Some(path) = stall_while {
        // Said where the harness can see it: the edit holds the lock now.
        let mut reached = path.clone().into_os_string();
        reached.push(".reached");
        let _ = janus_core::durable::write_atomic(std::path::Path::new(&reached), b"", 0o644);
        // fold: a debug build's test hook: no decision
        while janus_core::durable::present(path).unwrap_or(false) {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
}

#[cfg(test)]
#[allow(clippy::disallowed_methods, reason = "tests write and look at files by hand, as an admin does")]
mod tests {
    use super::*;

    #[test]
    fn a_metadata_file_with_labels_out_of_bounds_is_unreadable() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens.meta.json");
        let with = |labels: BTreeMap<String, String>| {
            let entry = TokenMeta { labels, ..Default::default() };
            let book: BTreeMap<String, TokenMeta> = [("ab".repeat(32), entry)].into();
            janus_core::durable::write_atomic(&path, &serde_json::to_vec(&book).unwrap(), 0o600).unwrap();
            read_meta_at(&path)
        };
        let fine: BTreeMap<String, String> = [("vm".to_string(), "web-3".to_string())].into();
        assert_eq!(with(fine.clone()).unwrap().unwrap().values().next().unwrap().labels, fine);
        let many: BTreeMap<String, String> =
            (0..=MAX_LABELS).map(|n| (format!("k{n}"), "v".into())).collect();
        let e = with(many).unwrap_err().to_string();
        assert!(e.contains("has labels out of bounds: more than 16 labels"), "{e}");
        let e = with([("bad key".to_string(), "v".to_string())].into()).unwrap_err().to_string();
        assert!(e.contains("a label key must be"), "{e}");
        let e = with([("k".to_string(), "v".repeat(MAX_LABEL_VALUE + 1))].into()).unwrap_err().to_string();
        assert!(e.contains("a label value must be at most 253"), "{e}");
    }

    /// What a process remembers of the metadata, against what is on disk.
    #[derive(Debug, Clone, Copy)]
    enum LastRead {
        None,
        OlderThanTheToken,
        Current,
    }

    #[derive(Debug, Clone, Copy, PartialEq)]
    enum OnDisk {
        Fine,
        Missing,
        Broken,
    }

    #[derive(Debug, Clone, Copy)]
    enum Kind {
        Plain,
        MultiUse,
        Expired,
    }

    /// An offer as a decision: whether it admits, and with what uses.
    fn decision(offer: super::super::Offer) -> String {
        use super::super::Offer;
        match offer {
            Offer::Valid { uses, labels, .. } => format!("admits, {uses} use(s), labels {labels:?}"),
            Offer::Unreadable(_) => "refused: metadata unreadable".into(),
            other => format!("refused: {other:?}"),
        }
    }

    fn lay(path: &Path, how: OnDisk) {
        match how {
            OnDisk::Fine => {}
            OnDisk::Missing => fs::remove_file(path).unwrap(),
            OnDisk::Broken => fs::write(path, b"{ broken").unwrap(),
        }
    }

    /// Issue 53: whatever this process read before, a decision is the one
    /// a fresh process makes from the disk as it is, in every combination
    /// of the metadata file, its good copy, the mark that the state had
    /// metadata, this process's last read and the kind of token.
    #[test]
    fn a_process_memory_is_never_more_permissive_than_the_disk() {
        use super::super::Tokens;
        const T: &str = "token-under-test-0001";
        const SEED: &str = "seed-token-0000000001";
        let disks = [OnDisk::Fine, OnDisk::Missing, OnDisk::Broken];
        let mut cases = 0;
        for file in disks {
            for good in disks {
                for marker in [true, false] {
                    for last in [LastRead::None, LastRead::OlderThanTheToken, LastRead::Current] {
                        for kind in [Kind::Plain, Kind::MultiUse, Kind::Expired] {
                            let dir = tempfile::tempdir().unwrap();
                            let state = dir.path();
                            // The state has metadata: a token of two uses.
                            let seed = TokenMeta { uses: Some(2), ..Default::default() };
                            Tokens::new(state).add(&[SEED.into()], &seed).unwrap();
                            let process = Tokens::new(state);
                            if let LastRead::OlderThanTheToken = last {
                                process.offer(SEED).unwrap();
                            }
                            // Another process (or replica) adds the token.
                            let writer = Tokens::new(state);
                            match kind {
                                Kind::Plain => {
                                    let mut listed = fs::read(state.join(super::super::TOKENS_FILE)).unwrap();
                                    listed.extend_from_slice(format!("{T}\n").as_bytes());
                                    fs::write(state.join(super::super::TOKENS_FILE), listed).unwrap();
                                }
                                Kind::MultiUse => {
                                    let meta = TokenMeta { uses: Some(3), ..Default::default() };
                                    writer.add(&[T.into()], &meta).unwrap();
                                }
                                Kind::Expired => {
                                    let past = janus_core::clock::now_unix() - 60;
                                    let meta = TokenMeta { expires_at: Some(past), ..Default::default() };
                                    writer.add(&[T.into()], &meta).unwrap();
                                }
                            }
                            if let LastRead::Current = last {
                                process.offer(T).unwrap();
                            }
                            lay(&state.join(super::super::META_FILE), file);
                            lay(&state.join(super::super::META_GOOD_FILE), good);
                            let mark = state.join(crate::ledger::LEDGER_DIR).join(METADATA_EXISTED);
                            if !marker {
                                fs::remove_file(&mark).unwrap();
                            }
                            let fresh = decision(Tokens::new(state).offer(T).unwrap());
                            let this = decision(process.offer(T).unwrap());
                            let case = format!(
                                "file {file:?}, good copy {good:?}, marker {marker}, last read {last:?}, {kind:?}"
                            );
                            assert_eq!(this, fresh, "{case}");
                            // And what the disk cannot tell is never taken for a plain token.
                            if file != OnDisk::Fine && good != OnDisk::Fine && marker {
                                assert!(this.starts_with("refused"), "{case}: {this}");
                            }
                            cases += 1;
                        }
                    }
                }
            }
        }
        assert_eq!(cases, 162);
    }
}

//! `DIR/token-uses/`: the ledger that decides, exactly once, which node a
//! token's use admitted. Each use is a marker `<mac>-<n>` (n = 1 for a
//! one-time token, 1..=N for a token of N uses) made with `link`, which
//! fails when the name exists: a hard link to the record of the node it
//! admitted, as that record was when the use was claimed. Beside it,
//! `<mac>.ca-<sha256>` links the same record under the CA that spent the
//! use (the first use that CA spent), so the node whose answer was lost is
//! found by name, not by reading every marker. Uses are claimed in order and
//! never given back, so the spent ones are a prefix `1..=k`: the first free
//! use is found by bisection, in O(log N) lookups. `<mac>` is the
//! HMAC-SHA256 of the token under `DIR/token-uses.key` (32 random bytes,
//! 0600, made on first use), so the ledger never reveals a token, not even
//! a weak one to a dictionary.
//!
//! `tokens revoke` writes `<mac>.revoked`: a token named there admits
//! nobody again, whatever its metadata says (or fails to say) about its
//! uses, whatever copy of `tokens` lists it.
//!
//! Invariants: the file server resolves the exclusive create atomically, so
//! two processes, on two hosts, never both win a use, whatever copy of
//! `tokens` each read; a use once recorded admits nobody else, even when an
//! editor puts the token back. Markers are never removed: an admission
//! that fails after its claim is finished later, never undone. Counting
//! uses is a bisection, never a loop over them.

use std::collections::HashMap;
use std::fs;
use std::io::{self, Read};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use hmac::{Hmac, KeyInit, Mac as _};
use sha2::Sha256;

use super::NodeId;
use janus_core::durable::{
    create_exclusive, ensure_private_dir, libc_nofollow, link_new, present, present_at_server, retry_stale,
    sync_dir, with_path,
};

/// The most nodes one token may admit: `tokens add --uses` refuses more, and
/// a metadata file that says more is unreadable (fail closed). Every use is
/// a marker here, and sweeping a spent token looks at each.
pub const MAX_USES: u32 = 10_000;

/// The ledger's directory: one marker per use of a token.
pub const LEDGER_DIR: &str = "token-uses";

/// In the ledger's directory: this state has had token metadata, so its
/// loss (with its last good copy) is undecidable, never "no metadata".
pub(crate) const METADATA_EXISTED: &str = "metadata-existed";
/// The HMAC key that names a token's markers without the token.
pub(crate) const KEY_FILE: &str = "token-uses.key";
/// What a marker filled by `tokens revoke` holds instead of a node id.
const REVOKED: &str = "revoked";
/// Up to how many tokens [`Ledger::maybe_all_used`] looks each up rather
/// than listing the ledger: a few lookups each against a listing of every
/// use ever recorded.
pub(crate) const LOOKUPS_UP_TO: usize = 512;

/// `token`'s name in the ledger under `key`.
fn mac_under(key: &[u8; 32], token: &str) -> Mac {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(key).expect("HMAC takes a key of any length");
    mac.update(token.as_bytes());
    Mac(janus_core::pki::hex(&mac.finalize().into_bytes()))
}

/// A token as the ledger names it: hex HMAC-SHA256 under the state's key.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Mac(String);

impl Mac {
    /// The MAC as hex.
    pub fn as_str(&self) -> &str {
        &self.0
    }
    /// A MAC read back from a record's `token_claim`.
    pub fn parse(s: &str) -> Option<Mac> {
        janus_core::pki::is_hex(s, 64).then(|| Mac(s.to_string()))
    }
}

/// Who holds a use: a node, or a revocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Holder {
    /// This node holds it.
    Node(NodeId),
    /// The token was revoked: the use is nobody's.
    Revoked,
}

/// The token ledger: who spent which use of which token.
pub struct Ledger {
    dir: PathBuf,
    key_path: PathBuf,
    /// The key and the inode it was read from: a state directory recreated
    /// under a running server has a new key, and a stale one would name
    /// uses other processes cannot see.
    key: Mutex<Option<(u64, [u8; 32])>>,
}

impl Ledger {
    /// The ledger of the state directory `state_dir`.
    pub fn new(state_dir: &Path) -> Self {
        Ledger { dir: state_dir.join(LEDGER_DIR), key_path: state_dir.join(KEY_FILE), key: Mutex::new(None) }
    }

    /// The ledger's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The ledger's name for `token`.
    pub fn mac(&self, token: &str) -> io::Result<Mac> {
        Ok(mac_under(&self.key()?, token))
    }

    /// [`Ledger::mac`] of each of `tokens`, the key read once.
    pub fn macs<'t>(&self, tokens: impl IntoIterator<Item = &'t str>) -> io::Result<Vec<Mac>> {
        let key = self.key()?;
        Ok(tokens.into_iter().map(|t| mac_under(&key, t)).collect())
    }

    /// For each `(mac, uses)`, whether the ledger may hold all its uses
    /// (revoked, or its last use recorded): what a sweep asks of every
    /// listed token before it looks closer ([`Ledger::spent_for_good`]).
    /// Up to [`LOOKUPS_UP_TO`] tokens, by lookups; more, by one listing of
    /// the directory, which costs what the ledger holds instead of a few
    /// lookups per token (a sweep of a 100,000-token file took a core for
    /// seconds under a burst). A marker made after the listing is missed:
    /// the token is then taken for not spent yet and stays listed until a
    /// later sweep, never the other way (markers are never removed). A
    /// listing that fails refuses the sweep.
    pub fn maybe_all_used(&self, tokens: &[(Mac, u32)]) -> io::Result<Vec<bool>> {
        if tokens.len() <= LOOKUPS_UP_TO {
            return Ok(tokens
                .iter()
                .map(|(mac, uses)| self.used(mac, *uses) >= (*uses).min(MAX_USES))
                .collect());
        }
        let mut wanted: HashMap<&str, Vec<usize>> = HashMap::with_capacity(tokens.len());
        for (at, (mac, _)) in tokens.iter().enumerate() {
            wanted.entry(mac.as_str()).or_default().push(at);
        }
        let mut all_used = vec![false; tokens.len()];
        let entries = match fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(all_used),
            Err(e) => return Err(with_path(e, &self.dir)),
        };
        for entry in entries {
            let name = entry.map_err(|e| with_path(e, &self.dir))?.file_name();
            let Some((mac, rest)) = name.to_str().and_then(|n| n.split_at_checked(64)) else { continue };
            let Some(ats) = wanted.get(mac) else { continue };
            for &at in ats {
                let last = tokens[at].1.min(MAX_USES);
                let last_use = rest.strip_prefix('-').and_then(|n| n.parse::<u32>().ok()) == Some(last);
                all_used[at] |= last_use || rest == ".revoked";
            }
        }
        Ok(all_used)
    }

    /// [`Ledger::mac`] once the ledger has its key; `None` before: then no
    /// use of any token was ever claimed nor any revoked. Makes no key.
    pub fn mac_if_keyed(&self, token: &str) -> io::Result<Option<Mac>> {
        if !janus_core::durable::present(&self.key_path).map_err(|e| with_path(e, &self.key_path))? {
            return Ok(None);
        }
        self.mac(token).map(Some)
    }

    /// Records use number `n` of `mac` as held by the record at `record`
    /// (`nodes/<id>.json`, already written whole): the marker is a hard
    /// link to it, made with `link`, which fails when the name exists and
    /// which the file server decides atomically. True when this call won
    /// the use; then both directories are `fsync`'d (the record's first: a
    /// durable marker never names a record that is not). One link instead
    /// of a second file saves a round of `fsync`s per admission.
    pub fn claim(&self, mac: &Mac, n: u32, record: &Path, ca_sha256: Option<&str>) -> io::Result<bool> {
        let marker = self.marker(mac, n);
        let linked = match link_new(record, &marker) {
            Err(e) if e.kind() == io::ErrorKind::NotFound && !self.dir.is_dir() => {
                ensure_private_dir(&self.dir)?;
                tracing::warn!(dir = %self.dir.display(), "recreated the missing token ledger directory");
                link_new(record, &marker)
            }
            other => other,
        };
        if !linked.map_err(|e| with_path(e, &marker))? {
            return Ok(false);
        }
        // The same CA's first use keeps its entry (the answer lost was that one's).
        if let Some(ca) = ca_sha256.filter(|ca| super::is_sha256_hex(ca)) {
            let index = self.by_ca(mac, ca);
            link_new(record, &index).map_err(|e| with_path(e, &index))?;
        }
        // A failed sync leaves the marker: another process may already have
        // seen it and finished the admission. The claim's owner reports the
        // error; the admission is finished later, as after a crash.
        let synced = record.parent().map_or(Ok(()), sync_dir).and_then(|()| sync_dir(&self.dir));
        synced.map_err(|e| with_path(e, &marker))?;
        Ok(true)
    }

    /// Who holds use `n` of `mac`, if anyone: the marker holds the node's
    /// record as it was when the use was claimed (or, as earlier versions
    /// wrote, just its id). An unreadable marker counts as held: a use is
    /// never given twice on doubt.
    pub fn holder(&self, mac: &Mac, n: u32) -> io::Result<Option<Holder>> {
        self.holder_at(&self.marker(mac, n))
    }

    fn holder_at(&self, path: &Path) -> io::Result<Option<Holder>> {
        let path = path.to_path_buf();
        let read = retry_stale(|| {
            let mut text = String::new();
            let mut file = fs::OpenOptions::new().read(true).custom_flags(libc_nofollow()).open(&path)?;
            file.read_to_string(&mut text)?;
            Ok(text)
        });
        let text = match read {
            Ok(text) => text,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            // Held, but not readable as text: a use is never given twice on doubt.
            Err(e) if e.kind() == io::ErrorKind::InvalidData => String::new(),
            Err(e) => return Err(with_path(e, &path)),
        };
        let text = text.trim();
        let id = match text.starts_with('{') {
            true => serde_json::from_str::<serde_json::Value>(text)
                .ok()
                .and_then(|record| record.get("id").and_then(|id| id.as_str()).and_then(NodeId::parse)),
            false => NodeId::parse(text),
        };
        Ok(Some(id.map_or(Holder::Revoked, Holder::Node)))
    }

    /// Who spent a use of `mac` with the CA `ca_sha256`, if anyone: one
    /// lookup by name, whatever the number of uses.
    pub fn holder_by_ca(&self, mac: &Mac, ca_sha256: &str) -> io::Result<Option<Holder>> {
        if !super::is_sha256_hex(ca_sha256) {
            return Ok(None);
        }
        self.holder_at(&self.by_ca(mac, ca_sha256))
    }

    /// The first use of `mac` (1..=`uses`) not spent yet, `uses + 1` when all
    /// are: uses are claimed in order and never given back, so the spent
    /// ones are a prefix and bisection finds its end in O(log uses)
    /// lookups. (A hole that earlier versions' undo left below it is
    /// skipped: fewer admissions, never more.)
    pub fn first_free(&self, mac: &Mac, uses: u32) -> u32 {
        let uses = uses.min(MAX_USES);
        let (mut spent, mut free) = (0u32, uses + 1);
        while free - spent > 1 {
            let mid = spent + (free - spent) / 2;
            // A marker that cannot be looked at is taken as spent: fewer admissions, never more.
            // fold: a marker that cannot be looked at counts as claimed: fewer uses, never more
            if present(&self.marker(mac, mid)).unwrap_or(true) {
                spent = mid;
            } else {
                free = mid;
            }
        }
        free
    }

    /// Whether `tokens revoke` revoked `mac`: when that cannot be told, it
    /// is an error (the admission refuses: 503, the node retries).
    pub fn is_revoked(&self, mac: &Mac) -> super::StoreResult<bool> {
        let path = self.revoked_path(mac);
        // As the file server has it: another host's revoke, unseen through
        // a negative entry this NFS client cached, would admit on.
        present_at_server(&path).map_err(|e| {
            super::error::Undecidable::refuse("whether this token was revoked", &with_path(e, &path))
        })
    }

    /// Links use `n` of `mac` under the CA `ca_sha256` that spent it, where
    /// its claim stopped before doing so (a replica stalled or killed
    /// between the two links).
    pub fn index_use_by_ca(&self, mac: &Mac, n: u32, ca_sha256: &str) -> io::Result<()> {
        if !super::is_sha256_hex(ca_sha256) {
            return Ok(());
        }
        let index = self.by_ca(mac, ca_sha256);
        match link_new(&self.marker(mac, n), &index) {
            Ok(true) => sync_dir(&self.dir).map_err(|e| with_path(e, &self.dir)),
            Ok(false) => Ok(()),
            Err(e) => Err(with_path(e, &index)),
        }
    }

    /// Indexes every marker under the CA that spent it (state format 1 to
    /// 2: markers made before the index). Returns how many were indexed.
    pub fn index_by_ca(&self, state_dir: &Path) -> io::Result<usize> {
        let entries = match fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
            Err(e) => return Err(with_path(e, &self.dir)),
        };
        let mut indexed = 0;
        for entry in entries {
            let entry = entry.map_err(|e| with_path(e, &self.dir))?;
            let name = entry.file_name();
            let Some((mac, n)) = name.to_str().and_then(|n| n.rsplit_once('-')) else { continue };
            let (Some(mac), true) = (Mac::parse(mac), n.parse::<u32>().is_ok()) else { continue };
            let text = fs::read_to_string(entry.path()).unwrap_or_default();
            let record: serde_json::Value = serde_json::from_str(text.trim()).unwrap_or_default();
            // Earlier markers hold just the id: its record says the CA.
            let ca = record.get("ca_sha256").and_then(|c| c.as_str()).map(str::to_string).or_else(|| {
                let id = NodeId::parse(text.trim())?;
                // fold: the CA index is a shortcut; a marker left unindexed is found by reading every marker
                let record = fs::read(state_dir.join("nodes").join(format!("{id}.json"))).ok()?;
                let record: serde_json::Value = serde_json::from_slice(&record).ok()?; // fold: as above
                record.get("ca_sha256")?.as_str().map(str::to_string)
            });
            let Some(ca) = ca.filter(|ca| super::is_sha256_hex(ca)) else { continue };
            if link_new(&entry.path(), &self.by_ca(&mac, &ca)).map_err(|e| with_path(e, &entry.path()))? {
                indexed += 1;
            }
        }
        if indexed > 0 {
            sync_dir(&self.dir).map_err(|e| with_path(e, &self.dir))?;
        }
        Ok(indexed)
    }

    /// How many of the `uses` uses of `mac` are recorded (all of them once
    /// it is revoked): the prefix [`Ledger::first_free`] finds.
    pub fn used(&self, mac: &Mac, uses: u32) -> u32 {
        // fold: for counting only: a revocation that cannot be told counts every use spent
        if self.is_revoked(mac).unwrap_or(true) {
            return uses;
        }
        self.first_free(mac, uses) - 1
    }

    /// Whether every one of the `uses` uses of `mac` is spent for good:
    /// revoked, or held by a node whose admission ended (approved, or
    /// rejected since). A use claimed by an admission still under way is
    /// not: that admission may fail and give the use back, and a token
    /// blanked from `tokens` meanwhile would be lost to its node.
    pub fn spent_for_good(&self, mac: &Mac, uses: u32) -> super::StoreResult<bool> {
        if self.is_revoked(mac)? {
            return Ok(true);
        }
        let state = self.dir.parent().unwrap_or(&self.dir);
        for n in 1..=uses.min(MAX_USES) {
            match self.holder(mac, n)? {
                None => return Ok(false),
                Some(Holder::Revoked) => {}
                Some(Holder::Node(id)) => {
                    let ended = ["approved", "rejected"]
                        .iter()
                        // fold: an admission whose end cannot be told is not spent for good: its token stays listed
                        .any(|sub| present(&state.join(sub).join(id.as_str())).unwrap_or(false));
                    if !ended {
                        return Ok(false);
                    }
                }
            }
        }
        Ok(true)
    }

    /// Revokes `mac` for good (`tokens revoke`): `<mac>.revoked`, durably,
    /// so it admits nobody even if a copy of `tokens` still lists it and
    /// whatever its metadata says; and its next free use is filled, so a
    /// one-use token reads as spent to earlier versions too.
    pub fn revoke(&self, mac: &Mac, uses: u32) -> io::Result<()> {
        ensure_private_dir(&self.dir)?;
        create_exclusive(&self.revoked_path(mac), REVOKED.as_bytes(), 0o600)?;
        // For earlier versions only: the mark above is what counts.
        let next = self.first_free(mac, uses);
        if next <= uses.min(MAX_USES)
            && let Err(e) = create_exclusive(&self.marker(mac, next), REVOKED.as_bytes(), 0o600)
        {
            tracing::warn!(cause = %e, "revoked; could not fill its next use for earlier versions");
        }
        Ok(())
    }

    fn revoked_path(&self, mac: &Mac) -> PathBuf {
        self.dir.join(format!("{}.revoked", mac.0))
    }

    fn marker(&self, mac: &Mac, n: u32) -> PathBuf {
        self.dir.join(format!("{}-{n}", mac.0))
    }

    fn by_ca(&self, mac: &Mac, ca_sha256: &str) -> PathBuf {
        self.dir.join(format!("{}.ca-{ca_sha256}", mac.0))
    }

    /// The key, made on first use. Two processes making it at once: only one
    /// exclusive creation wins, and both read the winner's.
    fn key(&self) -> io::Result<[u8; 32]> {
        let mut cached = self.key.lock().unwrap_or_else(|e| e.into_inner());
        let inode = fs::symlink_metadata(&self.key_path).ok().map(|m| m.ino());
        if let (Some((known, key)), Some(now)) = (cached.as_ref(), inode)
            && *known == now
        {
            return Ok(*key);
        }
        let open = || fs::OpenOptions::new().read(true).custom_flags(libc_nofollow()).open(&self.key_path);
        // Opened by name, not judged by the `stat` above, and asked of the
        // file server again before it is taken for missing.
        let mut file = match open() {
            Ok(file) => file,
            // The file server has it: this client's negative entry was stale
            // (on NFS a name another host made stays unseen, its `open`
            // too, until the directory is revalidated).
            Err(e)
                if e.kind() == io::ErrorKind::NotFound
                    && janus_core::durable::present_at_server(&self.key_path)? =>
            {
                open().map_err(|e| with_path(e, &self.key_path))?
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                // A ledger that holds uses names them under the key that is
                // gone: a new key would make every spent token spendable again.
                if self.holds_uses()? {
                    return Err(with_path(
                        io::Error::new(
                            io::ErrorKind::NotFound,
                            format!(
                                "it is missing, but {LEDGER_DIR}/ holds the uses it names: no token can be \
                                 told spent or not; put it back from a backup"
                            ),
                        ),
                        &self.key_path,
                    ));
                }
                self.make_key()?;
                open().map_err(|e| with_path(e, &self.key_path))?
            }
            Err(e) => return Err(with_path(e, &self.key_path)),
        };
        let mut key = [0u8; 32];
        file.read_exact(&mut key).map_err(|e| with_path(e, &self.key_path))?;
        let inode = file.metadata()?.ino();
        *cached = Some((inode, key));
        Ok(key)
    }

    /// Whether the ledger's directory holds any use, revocation or index
    /// (anything but the metadata mark); a listing that fails is an error.
    fn holds_uses(&self) -> io::Result<bool> {
        let entries = match fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(with_path(e, &self.dir)),
        };
        for entry in entries {
            let entry = entry.map_err(|e| with_path(e, &self.dir))?;
            if entry.file_name() != METADATA_EXISTED {
                return Ok(true);
            }
        }
        Ok(false)
    }

    fn make_key(&self) -> io::Result<()> {
        let key: [u8; 32] = rand::random();
        if create_exclusive(&self.key_path, &key, 0o600)? {
            tracing::info!(key = %self.key_path.display(), "made the token ledger's key");
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::disallowed_methods, reason = "tests write and look at files by hand, as an admin does")]
mod tests {
    use super::*;

    #[test]
    fn markers_made_before_the_index_are_indexed_by_their_ca() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = Ledger::new(dir.path());
        fs::create_dir_all(dir.path().join("nodes")).unwrap();
        let mac = ledger.mac("token").unwrap();
        let (a, b) = (NodeId::generate(), NodeId::generate());
        let (ca_a, ca_b) = ("a".repeat(64), "b".repeat(64));
        // A marker holding the claim record, and one holding just an id (earlier versions).
        let claim = dir.path().join("claim.json");
        fs::write(&claim, format!("{{\"id\":\"{a}\",\"ca_sha256\":\"{ca_a}\"}}")).unwrap();
        assert!(ledger.claim(&mac, 1, &claim, None).unwrap());
        fs::write(ledger.dir.join(format!("{}-2", mac.as_str())), b.as_str()).unwrap();
        fs::write(
            dir.path().join("nodes").join(format!("{b}.json")),
            format!("{{\"ca_sha256\":\"{ca_b}\"}}"),
        )
        .unwrap();
        assert_eq!(ledger.holder_by_ca(&mac, &ca_a).unwrap(), None);
        assert_eq!(ledger.index_by_ca(dir.path()).unwrap(), 2);
        assert_eq!(ledger.holder_by_ca(&mac, &ca_a).unwrap(), Some(Holder::Node(a)));
        assert_eq!(ledger.holder_by_ca(&mac, &ca_b).unwrap(), Some(Holder::Node(b)));
        assert_eq!(ledger.index_by_ca(dir.path()).unwrap(), 0, "idempotent");
        assert_eq!(ledger.first_free(&mac, 5), 3);
    }

    #[test]
    fn each_use_is_won_once_and_the_key_stays() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = Ledger::new(dir.path());
        let mac = ledger.mac("token").unwrap();
        assert_eq!(ledger.mac("token").unwrap(), mac);
        assert_ne!(ledger.mac("other").unwrap(), mac);
        assert!(!mac.as_str().contains("token"));
        let (a, b) = (NodeId::generate(), NodeId::generate());
        let record = |id: &NodeId| {
            let path = dir.path().join(format!("{id}.json"));
            fs::write(&path, format!("{{\"id\":\"{id}\"}}")).unwrap();
            path
        };
        let ca = "c".repeat(64);
        assert_eq!(ledger.first_free(&mac, 3), 1);
        assert!(ledger.claim(&mac, 1, &record(&a), Some(&ca)).unwrap());
        assert!(!ledger.claim(&mac, 1, &record(&b), Some(&ca)).unwrap());
        assert_eq!(ledger.first_free(&mac, 3), 2);
        assert_eq!(ledger.holder_by_ca(&mac, &ca).unwrap(), Some(Holder::Node(a.clone())));
        assert_eq!(ledger.holder_by_ca(&mac, &"d".repeat(64)).unwrap(), None);
        assert_eq!(ledger.holder(&mac, 1).unwrap(), Some(Holder::Node(a)));
        assert_eq!(ledger.used(&mac, 3), 1);
        // Another process on the same directory names the token alike.
        assert_eq!(Ledger::new(dir.path()).mac("token").unwrap(), mac);
        let mode = fs::metadata(dir.path().join(KEY_FILE)).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o600);
        ledger.revoke(&mac, 3).unwrap();
        assert!(ledger.is_revoked(&mac).unwrap());
        assert_eq!(ledger.used(&mac, 3), 3);
        assert!(ledger.spent_for_good(&mac, 3).unwrap());
        assert_eq!(ledger.holder(&mac, 2).unwrap(), Some(Holder::Revoked));
        // Counting the uses of a token with the most uses there are is a
        // bisection: a handful of lookups, not one per use.
        let other = ledger.mac("other").unwrap();
        assert_eq!(ledger.first_free(&other, u32::MAX), 1, "no overflow, bounded");
        assert_eq!(ledger.used(&other, MAX_USES), 0);
    }

    /// Issue 53's class: a file missing where one should be. The key gone
    /// behind a running process (or a restored backup without it) while
    /// the ledger holds uses: refused, never a new key under which every
    /// spent token is new again; in the process that had it too.
    #[test]
    fn a_missing_key_with_uses_recorded_refuses_instead_of_making_a_new_one() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = Ledger::new(dir.path());
        ledger.mac("token").unwrap();
        fs::remove_file(dir.path().join(KEY_FILE)).unwrap();
        // No use recorded yet: a new key revives nothing.
        let mac = ledger.mac("token").unwrap();
        let record = dir.path().join("record.json");
        fs::write(&record, "{}").unwrap();
        assert!(ledger.claim(&mac, 1, &record, None).unwrap());
        fs::remove_file(dir.path().join(KEY_FILE)).unwrap();
        for process in [&ledger, &Ledger::new(dir.path())] {
            let refused = process.mac("token").unwrap_err().to_string();
            assert!(refused.contains("holds the uses it names"), "{refused}");
        }
        assert!(!dir.path().join(KEY_FILE).exists(), "no new key made");
    }

    #[test]
    fn a_listing_and_lookups_agree_on_which_tokens_may_be_spent() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = Ledger::new(dir.path());
        let record = dir.path().join("record.json");
        fs::write(&record, "{}").unwrap();
        let names: Vec<String> = (0..LOOKUPS_UP_TO + 100).map(|i| format!("token-{i}")).collect();
        let macs = ledger.macs(names.iter().map(String::as_str)).unwrap();
        assert_eq!(macs[7], ledger.mac("token-7").unwrap(), "one key read or many, the same names");
        // 0: one use, spent; 1: three uses, one spent; 2: two uses, both
        // spent; 3: revoked, nothing spent; 4: more uses than a token can
        // have, the most there are spent (a bisection of a few lookups).
        let uses = |i: usize| [1, 3, 2, 5, MAX_USES + 9].get(i).copied().unwrap_or(1);
        for (i, n) in [(0, 1), (1, 1), (2, 1), (2, 2)] {
            assert!(ledger.claim(&macs[i], n, &record, None).unwrap());
        }
        ledger.revoke(&macs[3], 5).unwrap();
        for n in 1..=MAX_USES {
            fs::hard_link(&record, ledger.marker(&macs[4], n)).unwrap();
        }
        let asked: Vec<(Mac, u32)> = macs.iter().enumerate().map(|(i, m)| (m.clone(), uses(i))).collect();
        let listed = ledger.maybe_all_used(&asked).unwrap();
        let looked_up: Vec<bool> =
            asked.iter().map(|one| ledger.maybe_all_used(std::slice::from_ref(one)).unwrap()[0]).collect();
        assert_eq!(listed, looked_up);
        assert_eq!(&listed[..6], [true, false, true, true, true, false]);
        assert_eq!(listed.iter().filter(|m| **m).count(), 4);
        // The same token asked twice is answered twice.
        let twice = [asked[0].clone(), asked[0].clone()];
        assert_eq!(
            ledger.maybe_all_used(&[&twice[..], &asked[..LOOKUPS_UP_TO]].concat()).unwrap()[..2],
            [true, true]
        );
    }
}

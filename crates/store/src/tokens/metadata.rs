//! `tokens.meta.json`'s entries ([`TokenMeta`]) and their bounds, how the
//! file is read ([`read_meta_at`]) and what is kept of it between reads
//! ([`MetaCache`]).
//!
//! Invariant: an entry past its bound makes the whole file unreadable,
//! never a token with a guessed value.

use std::collections::BTreeMap;
use std::io;
use std::path::Path;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::words::Stamp;
use janus_core::durable::with_path;

pub use crate::error::MetaUnreadable;
pub use crate::ledger::MAX_USES;
/// The longest description, in characters, `tokens add` takes and the
/// metadata file may hold.
pub const MAX_DESCRIPTION: usize = 1_000;

/// The largest `tokens.meta.json` (and its good copy) read or written:
/// about 64,000 entries with the longest descriptions, far more with
/// none. A larger file is unreadable (fail closed); `tokens add` refuses
/// to make one.
pub(super) const MAX_META_BYTES: u64 = 64 << 20;

/// The most labels a token carries (`tokens add --label`).
pub const MAX_LABELS: usize = 16;
/// The longest label key, in characters: letters, digits, `.`, `_`, `-`, `/`.
pub const MAX_LABEL_KEY: usize = 63;
/// The longest label value, in characters (any text, escaped where shown).
pub const MAX_LABEL_VALUE: usize = 253;

/// Why `labels` is out of its bounds, if it is: the one check for
/// `tokens add` and for every read of the metadata.
pub fn labels_refusal(labels: &BTreeMap<String, String>) -> Option<String> {
    if labels.len() > MAX_LABELS {
        return Some(format!("more than {MAX_LABELS} labels"));
    }
    for (key, value) in labels {
        let key_ok = (1..=MAX_LABEL_KEY).contains(&key.chars().count())
            && key.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'/'));
        if !key_ok {
            return Some(format!(
                "a label key must be 1 to {MAX_LABEL_KEY} letters, digits, '.', '_', '-' or '/'"
            ));
        }
        if value.chars().count() > MAX_LABEL_VALUE {
            return Some(format!("a label value must be at most {MAX_LABEL_VALUE} characters"));
        }
    }
    None
}

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
    /// The orchestrator's labels (`tokens add --label KEY=VALUE`), copied
    /// into the record of each node the token admits.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// `token_expired` was audited: never again, even while the token
    /// stays listed (a `tokens` file this process cannot write).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub expiry_audited: bool,
}

impl TokenMeta {
    pub(super) fn expired(&self, now: i64) -> bool {
        self.expires_at.is_some_and(|t| t <= now)
    }
    /// How many nodes the token admits in all.
    pub fn total_uses(&self) -> u32 {
        self.uses.unwrap_or(1).max(1)
    }
}

#[derive(Default)]
pub(super) struct MetaCache {
    /// The identity of the file when it was read, and of its good copy
    /// while the file is missing (removing the copy settles a loss);
    /// `None`: never read, or to be read again.
    pub(super) stamp: Option<(Option<Stamp>, Option<Stamp>, Option<Stamp>)>,
    /// The file's metadata, or the last good copy while it is broken.
    pub(super) meta: Arc<BTreeMap<String, TokenMeta>>,
    /// Why the file cannot be read now; while set, tokens `meta` holds
    /// admit nobody, nothing is blanked, and nothing is swept.
    pub(super) error: Option<String>,
    /// Whether `meta` is known good (false while broken with no good copy at
    /// hand: then every token fails closed).
    pub(super) known: bool,
}

/// What an edit saw of `tokens.meta.json` when it read it under the lock:
/// the name's identity (`None`: absent), taken before the read. Its write
/// refuses once the name is another file: someone wrote it meanwhile,
/// which the lock excludes unless this process lost it (an NFSv4 lease
/// that expired while its host was stalled: the server gave the lock to
/// another host), and writing would undo their edit. What is left is the
/// moment between the check and the rename.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "an edit's metadata write checks what its read saw"]
pub(super) struct MetaSeen(pub(super) Option<Stamp>);

/// A metadata file, every entry within its bounds; `None` when missing.
pub(super) fn read_meta_at(path: &Path) -> io::Result<Option<BTreeMap<String, TokenMeta>>> {
    let bytes = match janus_core::durable::read_at_most(path, MAX_META_BYTES) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(with_path(e, path)),
    };
    let invalid = |why: String| with_path(io::Error::new(io::ErrorKind::InvalidData, why), path);
    let meta: BTreeMap<String, TokenMeta> =
        serde_json::from_slice(&bytes).map_err(|e| invalid(e.to_string()))?;
    for (hash, entry) in &meta {
        let at = hash.get(..12).unwrap_or(hash);
        if entry.uses.is_some_and(|n| n > MAX_USES) {
            return Err(invalid(format!("the token {at}… says more than {MAX_USES} uses")));
        }
        if entry.description.as_ref().is_some_and(|d| d.chars().count() > MAX_DESCRIPTION) {
            return Err(invalid(format!(
                "the token {at}… has a description over {MAX_DESCRIPTION} characters"
            )));
        }
        if let Some(why) = labels_refusal(&entry.labels) {
            return Err(invalid(format!("the token {at}… has labels out of bounds: {why}")));
        }
    }
    Ok(Some(meta))
}

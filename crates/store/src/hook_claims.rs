//! `DIR/on-admitted/<id>-<hash>`: which replica runs `--on-admitted` for
//! one admission. The hash is the admission event's [`identity`] (the
//! event but for its time), so a crash's repeat of the event finds the
//! first one's claim and the program runs at most once for it.
//!
//! Invariants: a claim is made with an exclusive link (the file server
//! decides between replicas, never this process alone); a claim that cannot
//! be made is said as an error (the caller decides, and logs); claims older
//! than the caller's bound are removed, nothing else is.

use std::io;

use serde_json::Value;

use super::follow::identity;
use super::{NodeId, Store, StoreResult};
use janus_core::durable;

/// The claims' directory in the state directory.
pub(crate) const HOOK_CLAIMS: &str = "on-admitted";

impl Store {
    /// Claims the run of the program for the admission `event`: true when
    /// this process made the claim, false when one was there (another
    /// replica's, or this event's earlier copy).
    pub fn claim_hook_run(&self, event: &Value) -> StoreResult<bool> {
        let Some(id) = event["id"].as_str().and_then(NodeId::parse) else {
            return Ok(false);
        };
        let dir = self.dir.join(HOOK_CLAIMS);
        let name = format!("{id}-{}", &janus_core::pki::sha256_hex(identity(event).as_bytes())[..16]);
        self.in_layout(|| {
            durable::ensure_private_dir(&dir)?;
            durable::create_exclusive(&dir.join(&name), b"", 0o600)
        })
    }

    /// Removes the claims last changed before `before` (Unix seconds).
    pub fn prune_hook_claims(&self, before: i64) -> io::Result<usize> {
        use std::os::unix::fs::MetadataExt;
        let dir = self.dir.join(HOOK_CLAIMS);
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
            Err(e) => return Err(durable::with_path(e, &dir)),
        };
        let mut removed = 0;
        for entry in entries {
            let entry = entry.map_err(|e| durable::with_path(e, &dir))?;
            let old = entry
                .metadata()
                .map(|meta| meta.mtime() < before)
                .map_err(|e| durable::with_path(e, &entry.path()))?;
            if old {
                durable::remove_durably(&entry.path())?;
                removed += 1;
            }
        }
        Ok(removed)
    }
}

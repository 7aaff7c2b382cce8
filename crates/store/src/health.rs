//! Whether the state can be relied on now, as `/healthz` reports it, in two
//! grades. *Unavailable* (503, readiness fails): no node can be served — a
//! state format this binary does not know, or a durable write of a
//! record's size failing in a directory every admission writes to.
//! *Degraded* (200, said in the body and in metrics): some nodes are
//! refused but others served — token metadata that cannot be read (its
//! tokens refused, tokenless announcements and polls served), an
//! unreadable `tokens`, a recent announcement whose write failed for want
//! of room or permission while the probe writes succeed.
//!
//! Invariants: `/healthz` is never 200 while the writes it covers fail (the
//! probe makes them each time); a failed announcement is remembered for
//! [`WRITE_FAILURE_MEMORY`] or until a write succeeds; the probe files are
//! removed whatever happens. One stray comma in a file an admin edits
//! never takes the only replica out of a Service.

use std::fs;
use std::io;

use super::{PROBE_BYTES, Store, StoreError, StoreResult, Unhealthy, WRITE_FAILURE_MEMORY, audit, ledger};
use janus_core::durable;

impl Store {
    /// Notes how an announcement's writes went: a failure for want of room
    /// or permission (ENOSPC, EDQUOT, EROFS, EACCES) makes `/healthz` say
    /// so until a write succeeds again.
    pub(super) fn note_writes<T>(&self, result: &StoreResult<T>) {
        let mut failure = self.write_failure.lock().unwrap_or_else(|e| e.into_inner());
        match result {
            Ok(_) => *failure = None,
            Err(StoreError::Io(e)) if is_lack_of_room_or_right(e) => {
                *failure = Some((tokio::time::Instant::now(), e.to_string()));
            }
            Err(_) => {}
        }
    }

    /// Whether the state can be relied on: `Err` when no node can be
    /// served (a state format this binary does not know, a durable write
    /// with `fsync` of a record's size failing in a directory a token
    /// admission writes to), else what is degraded (an announcement's write
    /// that failed lately for want of room or permission, `tokens` or
    /// `tokens.meta.json` unreadable), empty when nothing is.
    pub(super) fn check_health(&self) -> Result<Vec<String>, Unhealthy> {
        if let Some(refusal) = self.format_refusal() {
            return Err(Unhealthy(refusal.to_string()));
        }
        self.ensure_layout().map_err(|e| Unhealthy(e.to_string()))?;
        let probe_name = format!("{}healthz-{}", durable::TEMP_PREFIX, std::process::id());
        let probe = vec![b'.'; PROBE_BYTES];
        let dirs = [".", "nodes", ledger::LEDGER_DIR, "approved", audit::AUDIT_DIR];
        for sub in dirs {
            let path = self.dir.join(sub).join(&probe_name);
            let written = durable::create_exclusive(&path, &probe, 0o600);
            #[expect(clippy::disallowed_methods, reason = "the health probe's own file: a note, never state")]
            let _ = fs::remove_file(&path);
            written.map_err(|e| Unhealthy(format!("state directory not writable: {e}")))?;
        }
        let mut degraded = Vec::new();
        if let Some((at, why)) = self.write_failure.lock().unwrap_or_else(|e| e.into_inner()).as_ref()
            && at.elapsed() < WRITE_FAILURE_MEMORY
        {
            degraded
                .push(format!("an announcement failed to write ({}s ago): {why}", at.elapsed().as_secs()));
        }
        if let Err(why) = self.tokens.health() {
            degraded.push(why.0);
        }
        // Said, never acted on: an admin's file that approves nobody.
        degraded.extend(self.orphans_seen().iter().map(ToString::to_string));
        Ok(degraded)
    }
}

/// Whether `e` says the file system refuses writes: full, over quota,
/// read-only, or not ours to write.
pub(super) fn is_lack_of_room_or_right(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::StorageFull
            | io::ErrorKind::QuotaExceeded
            | io::ErrorKind::ReadOnlyFilesystem
            | io::ErrorKind::PermissionDenied
    )
}

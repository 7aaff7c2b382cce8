//! The periodic pass that keeps the state whole and bounded: missing
//! directories made again, token admissions a crash cut short finished,
//! pending records counted and those past the age limit forgotten, a
//! rejected CA's stale announcements forgotten, spent and expired tokens
//! swept.
//!
//! Invariants: under a `state-format` this binary does not know, nothing is
//! touched. An admission is recovered only once no live process can still
//! be finishing it ([`RECOVERY_GRACE_SECS`]). A record is forgotten only
//! after its event is in the audit trail, and only if it is still pending
//! right then (an approval made since stands).

use std::time::Duration;

use super::error::StoreResult;
use super::{AuditEvent, DecidedBy, NodeId, Pending, Store};

/// How old an unfinished token admission must be before maintenance
/// finishes it: far longer than any admission takes.
pub(crate) const RECOVERY_GRACE_SECS: i64 = 30;

/// What a maintenance pass is bounded by.
#[derive(Debug, Clone, Copy)]
pub struct MaintenanceLimits {
    /// A pending record older than this is forgotten (as is a rejected CA's latest announcement).
    pub pending_max_age: Duration,
    /// How often the record directories are listed even though their times say nothing changed.
    pub reconcile_every: Duration,
}

/// What a maintenance pass found and did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Report {
    /// Nothing was looked at: the state's format is one this binary does not know.
    pub paused: bool,
    /// Records waiting for an admin, after the pass.
    pub pending: usize,
    /// Token admissions a crash cut short, finished.
    pub recovered: usize,
    /// Records forgotten for their age.
    pub forgotten: usize,
    /// Tokens that expired in this pass.
    pub tokens_expired: usize,
    /// Nodes holding the trust whose approval file is gone.
    pub approvals_removed: usize,
    /// Approval files that name no node.
    pub orphan_approvals: usize,
}

impl Store {
    /// One maintenance pass at `now` (Unix seconds).
    pub fn maintain(&self, now: i64, limits: MaintenanceLimits) -> StoreResult<Report> {
        let mut report = Report::default();
        if self.check_format().is_err() {
            report.paused = true;
            return Ok(report);
        }
        self.ensure_layout()?;
        let max_age = limits.pending_max_age.as_secs() as i64;
        for Pending { id, announced, token_claim, awaits_admin } in self.pending(limits.reconcile_every)? {
            // Only an admission no live process can still be finishing: two
            // replicas renaming the same record at once lost its name on
            // GlusterFS, and a fresh approval may not be visible yet.
            let settled_for = announced.map_or(i64::MAX, |t| now - t);
            let recovered = match token_claim {
                Some(claim) if settled_for >= RECOVERY_GRACE_SECS => self.recover(&id, &claim)?,
                _ => false,
            };
            report.recovered += usize::from(recovered);
            if recovered {
                continue;
            }
            // Holding the trust, its approval removed by hand: said once,
            // never forgotten for its age nor counted pending.
            match self.trust_kept_without_approval(&id, awaits_admin) {
                Ok(false) => {}
                Ok(true) => {
                    report.approvals_removed += 1;
                    continue;
                }
                // Unknown: left as it is (never forgotten on a guess), and
                // counted pending (the cap never undercounts).
                Err(e) => {
                    tracing::warn!(node = %id, cause = %e, "cannot tell whether this node holds the trust: left as it is");
                    report.pending += 1;
                    continue;
                }
            }
            if !awaits_admin {
                continue;
            }
            if announced.is_some_and(|t| now - t > max_age) {
                // The event first: once the record is gone its poll says 404,
                // and whoever sees that finds the reason in the trail (a crash
                // in between repeats the event, which readers drop).
                let forgotten = self.forget_expired(&id, || {
                    self.audit.record(AuditEvent::forgotten(
                        id.clone(),
                        DecidedBy::Expiry,
                        None,
                        Some("pending longer than the limit"),
                    ))
                })?;
                if forgotten {
                    tracing::info!(node = %id, "forgot a pending node past the age limit");
                    report.forgotten += 1;
                    continue;
                }
            }
            report.pending += 1;
        }
        for id in self.expire_rejected_duplicates(now, max_age)? {
            self.audit.record(AuditEvent::forgotten(
                id.clone(),
                DecidedBy::Expiry,
                None,
                Some("a rejected CA's announcement older than the limit"),
            ))?;
            tracing::info!(node = %id, "forgot a rejected CA's announcement past the age limit");
            report.forgotten += 1;
        }
        self.tidy_approval_removed_marks()?;
        // Only said, never acted on: a failed look never stops the pass.
        match self.note_orphans() {
            Ok(count) => report.orphan_approvals = count,
            Err(e) => tracing::warn!(cause = %e, "cannot look for approval files that name no node"),
        }
        report.tokens_expired = self.tokens.sweep(&self.audit, now)?;
        Ok(report)
    }

    /// Whether the unsettled node `id` holds the trust with its approval
    /// removed (audited once when so). Only records that say admitted, or
    /// whose trust went out, are read.
    fn trust_kept_without_approval(&self, id: &NodeId, awaits_admin: bool) -> StoreResult<bool> {
        if awaits_admin && !self.delivered_now(id)? {
            return Ok(false);
        }
        let Some(record) = self.read_record(id)? else { return Ok(false) };
        if !self.approval_removed(&record)? {
            return Ok(false);
        }
        self.note_approval_removed(&record)?;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::NodeRecord;
    use crate::tokens::TokenMeta;

    /// Expiry in the time the pass is given, never the wall clock's: a
    /// year after the wall clock nothing has waited for it, and the
    /// thresholds hold to the second.
    #[test]
    fn records_and_tokens_expire_at_the_time_the_pass_is_given() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("state")).unwrap();
        let t0 = janus_core::clock::now_unix() + 365 * 86_400;
        let limits =
            MaintenanceLimits { pending_max_age: Duration::from_secs(3600), reconcile_every: Duration::ZERO };
        let token = "expires-in-a-minute-0001".to_string();
        store
            .add_tokens(
                std::slice::from_ref(&token),
                &TokenMeta { expires_at: Some(t0 + 60), ..Default::default() },
            )
            .unwrap();
        let record: NodeRecord = serde_json::from_value(serde_json::json!({
            "id": "0123456789abcdef0123456789abcdef", "name": "edge-1", "address": "10.0.2.15:9505",
            "ca_cert_pem": "x", "admitted": false, "poll_secret_sha256": "00",
            "announced_at": janus_core::clock::unix_to_rfc3339(t0),
        }))
        .unwrap();
        store.write_record(&record).unwrap();

        let at = |now| store.maintain(now, limits).unwrap();
        assert_eq!(at(t0 + 59).tokens_expired, 0, "a second before its expiry");
        assert_eq!(at(t0 + 60).tokens_expired, 1, "at its expiry");
        assert_eq!(at(t0 + 61).tokens_expired, 0, "expired once");
        assert_eq!(at(t0 + 3600).forgotten, 0, "pending an hour: not past the limit");
        let forgotten = at(t0 + 3601);
        assert_eq!((forgotten.forgotten, forgotten.pending), (1, 0), "past the limit by a second");
        let trail = std::fs::read_dir(dir.path().join("state/audit")).unwrap().count();
        assert!(trail > 0, "both audited");
    }
}

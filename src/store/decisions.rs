//! Who decided on a node, as files: `approved/<id>` (with a note saying
//! by whom), `rejected/<id>`, `rejected-cas/<sha256>`, `delivered/<id>`, and
//! forgetting a node's files.
//!
//! Invariants: a file present decides (a `touch`ed approval counts at the
//! next request); when a rejection cannot be told it is assumed (a rejected
//! node never gets the trust through a stale handle); a CA's rejection is
//! lifted only by forgetting the very record an admin rejected; an expired
//! record is looked at again right before it goes, and an approval made
//! meanwhile stands.

use std::fs;
use std::io;
use std::os::unix::fs::OpenOptionsExt;

use serde_json::{Map, Value};

use super::{
    Approval, DecidedBy, NodeId, NodeRecord, NodeState, REJECTED_BURST, REJECTED_BURSTS_KEPT, Store, audit,
    is_sha256_hex,
};
use crate::durable;

impl Store {
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
    pub(super) fn first_of_burst(&self, ca_sha256: &str) -> bool {
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
    pub(super) fn ca_rejected_as(&self, ca_sha256: &str) -> Option<NodeId> {
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
}

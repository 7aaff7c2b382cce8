//! Who decided on a node, as files: `approved/<id>` (with a note saying
//! by whom), `rejected/<id>`, `rejected-cas/<sha256>`, `delivered/<id>`, and
//! forgetting a node's files.
//!
//! Invariants: a file present decides (a `touch`ed approval counts at the
//! next request); when a rejection cannot be told it is assumed (a rejected
//! node never gets the trust through a stale handle), and when a CA's
//! rejection cannot be told the announcement is refused (503), never taken
//! as "not rejected"; a CA's rejection is lifted only by forgetting the
//! very record an admin rejected. Every change of a `rejected-cas/` note
//! (made, its `latest` replaced, lifted) happens under `DIR/decisions.lock`
//! with the note read again under it, so a lift is never written back and
//! a rejected CA's records stay two however many announce at once. Nothing
//! here removes an approval (forced, or `touch`ed) but `nodes reject` and
//! `nodes forget`: the server forgets a record only after looking, under
//! the lock, that it is not approved, and puts it back if an approval
//! appeared while it went.

use std::fs;
use std::io;
use std::os::unix::fs::OpenOptionsExt;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::error::Undecidable;
use super::error::{StoreError, StoreResult};
use super::{
    APPROVAL_REMOVED_DIR, AuditEvent, DecidedBy, DecisionNote, NodeId, NodeRecord, NodeState, REJECTED_BURST,
    REJECTED_BURSTS_KEPT, Store, audit, is_sha256_hex,
};
use janus_core::durable;

impl Store {
    /// Creates `approved/<id>` durably, saying who approved (idempotent).
    pub(super) fn approve(&self, id: &NodeId, by: DecidedBy, user: &str) -> StoreResult<()> {
        let note = serde_json::to_vec(&DecisionNote { by, user: user.into() }).map_err(io::Error::other)?;
        self.write_file(&self.approval_path(id), &note)
    }

    /// Whether `approved/<id>` exists, as the file server has it now (an
    /// approval another host made is not hidden by a negative entry this
    /// one cached), or (refused) why that cannot be told. One method per
    /// fact, and no lossy twin: a caller cannot pick a failure policy by
    /// picking a name.
    pub fn approved_now(&self, id: &NodeId) -> StoreResult<bool> {
        let path = self.approval_path(id);
        self.present_now(&path)
            .map_err(|e| Undecidable::refuse("whether this node is approved", &durable::with_path(e, &path)))
    }

    /// Who approved `id` and when (Unix seconds: when `approved/<id>` was
    /// last written, so an admin's `touch` is an admission at that time),
    /// `None` when it is not approved, or (refused) why that cannot be told.
    pub fn approval(&self, id: &NodeId) -> StoreResult<Option<(DecisionNote, i64)>> {
        use std::os::unix::fs::MetadataExt;
        let path = self.approval_path(id);
        let refuse =
            |e: io::Error| Undecidable::refuse("who approved this node", &durable::with_path(e, &path));
        // The name's own owner and content: a link is not followed.
        let meta = match durable::retry_stale(|| fs::symlink_metadata(&path)) {
            Ok(meta) => meta,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(refuse(e)),
        };
        let note = match durable::read_own(&path) {
            Ok(note) => note,
            // Withdrawn between the two looks.
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(refuse(e)),
        };
        // An empty or foreign file is an admin's `touch`: theirs, in their name.
        let decided = serde_json::from_slice(&note).unwrap_or_else(|_| DecisionNote {
            by: DecidedBy::ApprovalFile,
            user: audit::user_name(meta.uid()),
        });
        Ok(Some((decided, meta.mtime())))
    }

    /// Whether `id` is rejected, as the file server has it now, or (refused)
    /// why that cannot be told: never taken on a guess either way.
    pub fn rejected_now(&self, id: &NodeId) -> StoreResult<bool> {
        let path = self.marker("rejected", id);
        self.present_now(&path)
            .map_err(|e| Undecidable::refuse("whether this node is rejected", &durable::with_path(e, &path)))
    }

    /// Who rejected `id`, `None` when it is not rejected, or (refused) why
    /// that cannot be told.
    pub fn rejection(&self, id: &NodeId) -> StoreResult<Option<DecisionNote>> {
        let path = self.marker("rejected", id);
        let note = match durable::read_fresh(&path) {
            Ok(note) => note,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(Undecidable::refuse("who rejected this node", &durable::with_path(e, &path)));
            }
        };
        // A file an admin made by hand is a rejection all the same.
        Ok(Some(
            serde_json::from_slice(&note)
                .unwrap_or_else(|_| DecisionNote { by: DecidedBy::RejectionFile, user: "".into() }),
        ))
    }

    /// Whether `id` was rejected at its announcement for its CA alone (not
    /// by a command), or (refused) why that cannot be told.
    pub fn rejected_for_ca_only(&self, id: &NodeId) -> StoreResult<bool> {
        Ok(self.rejection(id)?.is_some_and(|r| r.by == DecidedBy::RejectedCa))
    }

    /// Whether polls of `id` get 404 (rejected, unless the rejection came
    /// from its CA alone and an admin made `approved/<id>` anyway), or why
    /// it cannot be told: a poll answers that with 503, never 404, for a
    /// node told 404 forgets its enrollment and announces again only an
    /// hour later, without its token.
    pub fn poll_refused_now(&self, id: &NodeId) -> StoreResult<bool> {
        self.poll_refused_looked(id)
            .map_err(|e| Undecidable::refuse("whether this node's polls are refused", &e))
    }

    /// [`Store::poll_refused_now`]'s looks, each error with its path.
    fn poll_refused_looked(&self, id: &NodeId) -> io::Result<bool> {
        let rejection = self.marker("rejected", id);
        if !self.present_now(&rejection).map_err(|e| durable::with_path(e, &rejection))? {
            return Ok(false);
        }
        let approval = self.approval_path(id);
        if !self.present_now(&approval).map_err(|e| durable::with_path(e, &approval))? {
            return Ok(true);
        }
        match durable::read_fresh(&rejection) {
            // An approval overrides a rejection of the CA alone; a note that
            // does not parse is an admin's own file, which it does not.
            Ok(note) => {
                Ok(serde_json::from_slice::<DecisionNote>(&note)
                    .map_or(true, |r| r.by != DecidedBy::RejectedCa))
            }
            // Lifted between the two looks.
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(durable::with_path(e, &rejection)),
        }
    }

    /// An admin's rejection of `id` (its polls get 404), withdrawing any
    /// approval; its CA (`ca_sha256`) is rejected too, so the node's later
    /// announcements are rejected at once; then its `rejected` event. One
    /// decision, one method.
    pub fn reject(&self, id: &NodeId, ca_sha256: &str, user: &str) -> StoreResult<()> {
        self.write_rejection(id, ca_sha256, user)?;
        Ok(self.audit.record(AuditEvent::Rejected {
            id: id.clone(),
            by: DecidedBy::Command,
            user: Some(user.to_string()),
            ca_sha256: Some(ca_sha256.to_string()),
        })?)
    }

    fn write_rejection(&self, id: &NodeId, ca_sha256: &str, user: &str) -> StoreResult<()> {
        let note = serde_json::to_vec(&DecisionNote { by: DecidedBy::Command, user: user.into() })
            .map_err(io::Error::other)?;
        if is_sha256_hex(ca_sha256) {
            let _lock = self.decisions_lock()?;
            let note = CaRejection { id: Some(id.clone()), user: Some(user.into()), ..Default::default() };
            self.write_ca_rejection(ca_sha256, &note)?;
        }
        self.write_file(&self.marker("rejected", id), &note)?;
        Ok(durable::remove_durably(&self.approval_path(id))?)
    }

    /// Marks `id` rejected because its CA is (audited by the caller).
    pub(super) fn reject_for_ca(&self, id: &NodeId) -> StoreResult<()> {
        let note = serde_json::to_vec(&DecisionNote { by: DecidedBy::RejectedCa, user: String::new() })
            .map_err(io::Error::other)?;
        self.write_file(&self.marker("rejected", id), &note)
    }

    /// Whether an admin rejected this CA; an error when that cannot be
    /// told (the caller refuses what depends on it).
    pub fn is_ca_rejected(&self, ca_sha256: &str) -> StoreResult<bool> {
        Ok(self.ca_rejection(ca_sha256)?.is_some())
    }

    /// The note of a rejected CA: `None` when it is not rejected, an
    /// error when that cannot be told. A note that does not parse (an
    /// admin's `touch`), or a link in its place (not followed), rejects the
    /// CA, naming no record.
    pub(super) fn ca_rejection(&self, ca_sha256: &str) -> StoreResult<Option<CaRejection>> {
        if !is_sha256_hex(ca_sha256) {
            return Ok(None);
        }
        let path = self.ca_rejection_path(ca_sha256);
        // Absent only as the file server has it (a negative entry an NFS
        // client cached hid another host's rejection for about 20 s).
        let refuse = |e| Undecidable::refuse("whether this CA is rejected", &durable::with_path(e, &path));
        if !self.present_now(&path).map_err(refuse)? {
            return Ok(None);
        }
        match durable::read_own(&path) {
            Ok(bytes) => Ok(Some(serde_json::from_slice(&bytes).unwrap_or_default())),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) if durable::is_a_link(&e) => Ok(Some(CaRejection::default())),
            Err(e) => Err(refuse(e)),
        }
    }

    fn ca_rejection_path(&self, ca_sha256: &str) -> std::path::PathBuf {
        self.dir.join("rejected-cas").join(ca_sha256)
    }

    fn write_ca_rejection(&self, ca_sha256: &str, note: &CaRejection) -> StoreResult<()> {
        let bytes = serde_json::to_vec(note).map_err(io::Error::other)?;
        self.write_file(&self.ca_rejection_path(ca_sha256), &bytes)
    }

    /// The lock every change of a `rejected-cas/` note takes
    /// (`DIR/decisions.lock`): this process's turn, then the cross-process
    /// flock ([`durable::lock`]), held until the returned guard drops.
    pub(super) fn decisions_lock(&self) -> StoreResult<durable::lock::Held> {
        let path = self.dir.join(DECISIONS_LOCK);
        self.in_layout(|| durable::lock::lock(&path, 0o600))
    }

    /// An admin's `nodes forget`: every file about `id` removed, then its
    /// `forgotten` event and, when it lifted its CA's rejection, the
    /// `ca_unrejected` one; the CA lifted, if any. One decision, one method.
    pub fn forget(&self, id: &NodeId, user: &str) -> StoreResult<Option<String>> {
        let lifted = self.remove_all_of(id)?;
        let mut events =
            vec![AuditEvent::forgotten(id.clone(), DecidedBy::Command, Some(user.to_string()), None)];
        if let Some(ca) = &lifted {
            events.push(AuditEvent::CaUnrejected {
                id: id.clone(),
                ca_sha256: ca.clone(),
                user: user.to_string(),
            });
        }
        self.audit.record_all(&events)?;
        Ok(lifted)
    }

    /// Removes every file about `id`. Rejection is by CA and only the
    /// admin's own decision lifts it: forgetting the very record an admin
    /// rejected (`rejected-cas/<sha256>` names it) lifts its CA's rejection,
    /// and that CA is returned; forgetting any other record — a later
    /// announcement the server rejected for its CA, say — never does.
    fn remove_all_of(&self, id: &NodeId) -> StoreResult<Option<String>> {
        let mut lifted = None;
        if self.rejection(id)?.is_some_and(|r| r.by == DecidedBy::Command)
            && let Some(ca) = self.read_record(id)?.and_then(|r| r.ca_sha256)
            && is_sha256_hex(&ca)
        {
            let _lock = self.decisions_lock()?;
            if self.ca_rejection(&ca)?.is_some_and(|note| note.id.as_ref() == Some(id)) {
                durable::remove_durably(&self.ca_rejection_path(&ca))?;
                lifted = Some(ca);
            }
        }
        durable::remove_durably(&self.record_path(id))?;
        durable::remove_durably(&self.claim_path(id))?;
        for sub in ["approved", "rejected", "delivered"] {
            durable::remove_durably(&self.marker(sub, id))?;
        }
        Ok(lifted)
    }

    /// Stores `record`, rejected at once, if its CA is rejected — looked at
    /// again under the lock, so a rejection lifted meanwhile is not written
    /// back — as the CA's latest announcement; the one it replaces goes
    /// (unless an admin approved it or it is the one they rejected), so a
    /// rejected CA holds two records at most. `None`: the CA is not
    /// rejected (any more), nothing was written.
    pub(super) fn store_for_rejected_ca(
        &self,
        record: &NodeRecord,
        ca_sha256: &str,
    ) -> StoreResult<Option<()>> {
        let _lock = self.decisions_lock()?;
        let Some(mut note) = self.ca_rejection(ca_sha256)? else { return Ok(None) };
        self.write_record(record)?;
        self.reject_for_ca(&record.id)?;
        let previous = note.latest.replace(record.id.clone());
        self.write_ca_rejection(ca_sha256, &note)?;
        if let Some(previous) = previous.filter(|p| *p != record.id && note.id.as_ref() != Some(p))
            && self.rejected_for_ca_only(&previous)?
        {
            self.forget_duplicate(&previous)?;
        }
        Ok(Some(()))
    }

    /// Forgets a later announcement the server rejected for its CA, never
    /// an approved one: its approval (forced, or `touch`ed) is an admin's
    /// decision. Approval is looked at before and after the record goes,
    /// and a record approved meanwhile is put back; `approved/<id>` is
    /// never removed here. True when it went.
    fn forget_duplicate(&self, id: &NodeId) -> StoreResult<bool> {
        // fold: an approval that cannot be told is assumed: the record is kept
        let approved = |store: &Self| durable::present(&store.approval_path(id)).unwrap_or(true);
        if !self.remove_record_unless(id, approved, || Ok(()))? {
            return Ok(false);
        }
        for sub in ["rejected", "delivered"] {
            durable::remove_durably(&self.marker(sub, id))?;
        }
        Ok(true)
    }

    /// Removes `id`'s record unless `decided` (an admin's decision, looked
    /// at before and, since one may come meanwhile, after: then the record
    /// is written back). `before` runs once the record is known to go (its
    /// audit event). True when it went.
    fn remove_record_unless(
        &self,
        id: &NodeId,
        decided: impl Fn(&Self) -> bool,
        before: impl FnOnce() -> io::Result<()>,
    ) -> StoreResult<bool> {
        if decided(self) {
            return Ok(false);
        }
        let path = self.record_path(id);
        let bytes = match durable::read_fresh(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(durable::with_path(e, &path).into()),
        };
        before()?;
        durable::remove_durably(&path)?;
        if decided(self) {
            self.write_file(&path, &bytes)?;
            tracing::info!(node = %id, "an admin decided on a node as it was being forgotten: its record is back");
            return Ok(false);
        }
        Ok(true)
    }

    /// Forgets each rejected CA's latest announcement once it is older than
    /// `max_age` seconds (the pending age limit): a rejected CA's records
    /// expire as pending ones do. Looked at again under the lock right
    /// before: only a record the server rejected for its CA, still that
    /// CA's latest, not approved. The ids forgotten, for the caller to audit.
    pub(super) fn expire_rejected_duplicates(&self, now: i64, max_age: i64) -> StoreResult<Vec<NodeId>> {
        let mut forgotten = Vec::new();
        let mut cas = Vec::new();
        self.each_name("rejected-cas", |name| {
            if is_sha256_hex(name) {
                cas.push(name.to_string());
            }
        })?;
        for ca in cas {
            let _lock = self.decisions_lock()?;
            let Some(mut note) = self.ca_rejection(&ca)? else { continue };
            let Some(latest) = note.latest.clone() else { continue };
            let Some(record) = self.read_record(&latest)? else { continue };
            let rfc3339 = &time::format_description::well_known::Rfc3339;
            let announced = record
                .announced_at
                .as_deref()
                .and_then(|t| time::OffsetDateTime::parse(t, rfc3339).ok())
                .map(|t| t.unix_timestamp());
            let by_ca = self.rejected_for_ca_only(&latest)?;
            if !by_ca || announced.is_none_or(|t| now - t <= max_age) || note.id.as_ref() == Some(&latest) {
                continue;
            }
            if self.forget_duplicate(&latest)? {
                note.latest = None;
                self.write_ca_rejection(&ca, &note)?;
                forgotten.push(latest);
            }
        }
        Ok(forgotten)
    }

    /// Whether an announcement of the rejected CA `ca_sha256` starts a new
    /// burst (its first in [`REJECTED_BURST`]): only those are audited.
    pub(super) fn first_of_burst(&self, ca_sha256: &str) -> bool {
        let mut seen = self.rejected_ca_audited.lock().unwrap_or_else(|e| e.into_inner());
        let now = tokio::time::Instant::now();
        if seen.get(ca_sha256).is_some_and(|at| now.duration_since(*at) < REJECTED_BURST) {
            return false;
        }
        if seen.len() >= REJECTED_BURSTS_KEPT {
            seen.retain(|_, at| now.duration_since(*at) < REJECTED_BURST);
        }
        seen.insert(ca_sha256.to_string(), now);
        true
    }

    /// Forgets a pending record the age limit expired — if it still is
    /// pending right now: the listing it came from may be a pass old, and
    /// an admin may approve or reject it meanwhile. Only the record goes
    /// (a pending record has no approval to remove); if an approval
    /// appears between the look and the removal, the record is written
    /// back. `before` runs once the record is known to be pending, before
    /// it goes (the audit event). True when it was forgotten.
    pub(super) fn forget_expired(
        &self,
        id: &NodeId,
        before: impl FnOnce() -> io::Result<()>,
    ) -> StoreResult<bool> {
        // A decision that cannot be told is assumed: the record is kept.
        let settled = |store: &Self| {
            durable::present(&store.approval_path(id)).unwrap_or(true) // fold: kept, never forgotten
                || durable::present(&store.marker("rejected", id)).unwrap_or(true) // fold: kept
        };
        self.remove_record_unless(id, settled, before)
    }

    /// Whether the trust went out to `id` already, or why that cannot be told.
    pub(super) fn was_delivered(&self, id: &NodeId) -> io::Result<bool> {
        let path = self.marker("delivered", id);
        durable::present(&path).map_err(|e| durable::with_path(e, &path))
    }

    /// Marks the trust as gone out to `id`: true for the first marking
    /// across processes. Callers audit the delivery before marking, so a
    /// crash in between repeats the event rather than losing it; for the
    /// same reason the mark is not `fsync`'d: losing it costs a repeated
    /// event, which readers drop.
    pub(super) fn mark_delivered(&self, id: &NodeId) -> StoreResult<bool> {
        let path = self.marker("delivered", id);
        #[expect(
            clippy::disallowed_methods,
            reason = "the delivered marker: O_EXCL decides the first delivery; not fsync'd on purpose (see above)"
        )]
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
            Err(e) if e.is_io(io::ErrorKind::AlreadyExists) => Ok(false),
            Err(StoreError::Io(e)) => Err(durable::with_path(e, &path).into()),
            Err(refused) => Err(refused),
        }
    }

    /// The record's state, from the approval and rejection files, or
    /// (refused) why it cannot be told: a state shown or acted on is never
    /// a guess.
    pub fn state_of(&self, record: &NodeRecord) -> StoreResult<NodeState> {
        Ok(if self.poll_refused_now(&record.id)? {
            NodeState::Rejected
        } else if record.admitted || self.approved_now(&record.id)? || self.delivered_now(&record.id)? {
            // The trust went out: admitted, whether or not its approval
            // file is still there (its removal withdraws nothing).
            NodeState::Admitted
        } else {
            NodeState::Pending
        })
    }

    /// Whether the trust went out to `id` (`delivered/<id>`), or (refused)
    /// why that cannot be told.
    pub(crate) fn delivered_now(&self, id: &NodeId) -> StoreResult<bool> {
        self.was_delivered(id).map_err(|e| Undecidable::refuse("whether the trust went out", &e))
    }

    /// Whether `record`'s node holds the fleet's trust (its token's answer
    /// carried it, or a poll delivered it) and its approval file is gone
    /// since: an admin removed it by hand. Not while an admission is under
    /// way (its claim file is there until its approval is written), nor
    /// for a rejected node.
    pub fn approval_removed(&self, record: &NodeRecord) -> StoreResult<bool> {
        let id = &record.id;
        if self.approved_now(id)? || self.poll_refused_now(id)? || self.admission_under_way(id)? {
            return Ok(false);
        }
        Ok(record.admitted || self.delivered_now(id)?)
    }

    /// Whether a token admission of `id` is under way: its claim file stays
    /// until its approval is written, so an approval missing meanwhile is
    /// not one removed.
    pub(crate) fn admission_under_way(&self, id: &NodeId) -> StoreResult<bool> {
        let claim = self.claim_path(id);
        Ok(durable::present(&claim).map_err(|e| durable::with_path(e, &claim))?)
    }

    /// Audits, once across processes, that `record`'s approval was removed
    /// after its node got the trust: the event first, then the mark
    /// (`approval-removed/<id>`), so a crash in between repeats the event
    /// (readers drop repeats) rather than lose it. True when this call said it.
    pub(crate) fn note_approval_removed(&self, record: &NodeRecord) -> StoreResult<bool> {
        let mark = self.marker(APPROVAL_REMOVED_DIR, &record.id);
        if durable::present(&mark).map_err(|e| durable::with_path(e, &mark))? {
            return Ok(false);
        }
        let noticed_by =
            self.audit.path().file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        self.audit.record(AuditEvent::ApprovalRemoved {
            id: record.id.clone(),
            name: record.name.clone(),
            noticed_by,
        })?;
        durable::create_exclusive(&mark, b"", 0o600)?;
        tracing::warn!(
            node = %record.id,
            "the approval of a node that already holds the fleet's trust was removed: it stays admitted (the trust cannot be taken back here)"
        );
        Ok(true)
    }

    /// Removes the marks of approvals that are back, or of nodes forgotten.
    /// A mark whose node cannot be looked at now is kept (logged): at worst
    /// a removal is not said again, and the pass goes on.
    pub(crate) fn tidy_approval_removed_marks(&self) -> StoreResult<()> {
        let mut ids = Vec::new();
        self.each_name(APPROVAL_REMOVED_DIR, |name| ids.extend(NodeId::parse(name)))?;
        for id in ids {
            let record = self.record_path(&id);
            let back = self.approved_now(&id).and_then(|approved| {
                Ok(approved || !durable::present(&record).map_err(|e| durable::with_path(e, &record))?)
            });
            let removed = match back {
                Ok(true) => {
                    durable::remove_durably(&self.marker(APPROVAL_REMOVED_DIR, &id)).map_err(Into::into)
                }
                Ok(false) => Ok(()),
                Err(e) => Err(e),
            };
            if let Err(e) = removed {
                tracing::warn!(node = %id, cause = %e, "an approval-removed mark is kept: its node cannot be looked at now");
            }
        }
        Ok(())
    }
}

/// The lock file every change of a `rejected-cas/` note is made under.
pub(crate) const DECISIONS_LOCK: &str = "decisions.lock";

/// `rejected-cas/<sha256>`: which record an admin rejected the CA with, by
/// whom, and the CA's latest announcement since. Written with its fields
/// in this order, as earlier versions' sorted maps wrote them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(super) struct CaRejection {
    /// The record `nodes reject` rejected: forgetting it lifts the rejection.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "lenient_id")]
    pub id: Option<NodeId>,
    /// The CA's latest announcement since, rejected at once.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "lenient_id")]
    pub latest: Option<NodeId>,
    /// The admin who rejected it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// Fields another tool (or a later version) wrote: kept on rewrite.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// An id that does not parse names no record (it was never ours).
fn lenient_id<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<NodeId>, D::Error> {
    Ok(Option::<Value>::deserialize(d)?.as_ref().and_then(Value::as_str).and_then(NodeId::parse))
}

//! What an announcement does to the state, ordered so that a crash, a full
//! disk or a failed write at any point leaves all or nothing of a token
//! admission:
//!
//! 1. the claim, `nodes/.claim-<id>.json`: the record, pending, naming the
//!    token's ledger entry (`token_claim`), written whole;
//! 2. the claim of a use in the [`super::ledger`], a hard link to that
//!    file, and the `fsync` of both directories: the commit point;
//! 3. the record `nodes/<id>.json` saying `admitted` and the audit events
//!    (`announced`, `admitted`, `trust_delivered`), one after the other; then
//!    `approved/<id>` — the answer goes out only after all of them; then
//!    the claim file is removed (the marker keeps its content).
//!
//! `nodes/<id>.json` is thus never the file the marker links to: on
//! GlusterFS a client that had looked that name up kept reading the linked
//! (old) file after another host renamed the admitted record over it.
//!
//! Past the commit point nothing is ever undone: a write that fails there
//! (a full disk) is a crash like any other. The claim file stays, and the
//! admission is finished by whoever comes first — the node announcing
//! again (same CA, same token: answered `admitted` with the first id), or
//! a maintenance pass (`Store::recover`) once the claim is 30 s old. So
//! no process ever releases a use or removes a record or an approval that
//! another process may have finished meanwhile (a replica that stalled
//! after its claim, then failed), and `tokens revoke` is final: no use is
//! ever given back. A token's use is thus bound to the CA that spent it.
//!
//! An admission is *finished* once its claim file is gone; from then on an
//! admin's decision about it stands: a removed `approved/<id>` is not made
//! again by recovery, nor by the node announcing again. The same CA
//! presenting the spent token again (the node whose answer was lost) is
//! answered `admitted` with its first id: whatever the time while the
//! admission is unfinished (a failed admission never spends a token: its
//! use is that node's); once finished, while it is still approved, within
//! the readmit window (`--readmit-window`) after it, or at any age the
//! first time when a recovery finished it (no answer had told the node:
//! the record says `admission_unanswered`). (Earlier versions kept the pending record at `nodes/<id>.json`
//! itself; such a record, pending and naming its claim, is unfinished and
//! recovered the same way.)

use std::io;

use secrecy::SecretString;

use super::error::{StoreError, StoreResult};
use super::ledger::{Holder, Mac};
use super::presented::Presented;
use super::tokens::Offer;
use super::{AuditEvent, DecidedBy, NodeId, NodeRecord, Store};
use janus_core::durable;

/// How far a recovery looks for a record's use among a token's uses.
const MAX_USES_SCANNED: u32 = super::tokens::MAX_USES;

/// How many of a spent token's latest uses an announcement of the same CA
/// looks at when the CA index names none: the claims whose process stopped
/// between the marker and the index are the latest ones.
const RECENT_USES_LOOKED_AT: u32 = 8;

/// What became of an announcement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Admitted: by a token, or as the same CA that spent it.
    Admitted,
    /// Stored; it waits for an admin (or the admission command).
    Pending,
    /// Its CA was rejected: stored and rejected at once (polls get 404).
    RejectedCa,
    /// It did not admit, and the caller said there is no room for one
    /// more record that does not: nothing was stored.
    NoRoom,
}

/// The outcome, and the id the node is told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admission {
    /// The id the node is told.
    pub id: NodeId,
    /// What became of it.
    pub outcome: Outcome,
}

impl Admission {
    /// Whether the node is admitted.
    pub fn admitted(&self) -> bool {
        self.outcome == Outcome::Admitted
    }
}

/// A claim whose token had no use left for it: the token's ledger entry,
/// its uses, and the claim file that waits.
struct SpentClaim<'a> {
    mac: &'a Mac,
    uses: u32,
    claim_path: &'a std::path::Path,
}

impl Store {
    /// Stores `record` (whose id is new and which says not admitted) and
    /// admits it when `token` has a free use. Returns the id the node is
    /// to be told, which is an earlier one when the same CA spent this
    /// token before (its answer was lost). Without `room` (the pending cap
    /// is reached), an announcement that does not admit stores nothing.
    pub fn announce(
        &self,
        record: NodeRecord,
        token: SecretString,
        bundle_version: u64,
        room: bool,
    ) -> StoreResult<Admission> {
        let admission = Presented::new(token, &self.tokens.ledger)
            .map_err(StoreError::from)
            .and_then(|token| self.store_announcement(record, token.as_ref(), bundle_version, room));
        self.note_writes(&admission);
        admission
    }

    fn store_announcement(
        &self,
        mut record: NodeRecord,
        token: Option<&Presented>,
        bundle_version: u64,
        room: bool,
    ) -> StoreResult<Admission> {
        let id = record.id.clone();
        // Before any token: a rejected CA spends no use.
        if let Some(answer) = self.answer_for_rejected_ca(&record, token.is_some(), room)? {
            return Ok(answer);
        }
        let Some(token) = token else {
            return self.pending_without_a_use(record, None, bundle_version, room);
        };
        // Looked for even when the token is no longer listed: its last
        // use blanked it from the file.
        if let Some(earlier) = self.holder_with_same_ca(token.mac(), &record)?
            && let Some(admission) = self.readmit(earlier, &record, token, bundle_version)?
        {
            return Ok(admission);
        }
        let offer = self.tokens.offer_presented(token)?;
        if let Offer::Unreadable(why) = offer {
            // Fail closed, and the node retries later (503): stored as
            // pending it would drop its token.
            return Err(StoreError::TokenMeta(why));
        }
        let Offer::Valid { mac, uses, labels } = offer else {
            return self.pending_without_a_use(record, Some(token), bundle_version, room);
        };
        record.token_claim = Some(mac.as_str().to_string());
        // In the claim, so a recovery finishes with them; a node left
        // pending (every use spent) keeps them too: the token it presented.
        record.token_sha256_prefix = Some(token.fingerprint().to_string());
        record.token_labels = labels;
        // Whole but not yet durable: the claim makes it so, with its marker.
        let claim_path = self.write_claim(&record)?;
        if self.claim_a_use(&mut record, token, &mac, uses, &claim_path, bundle_version)? {
            return Ok(Admission { id, outcome: Outcome::Admitted });
        }
        let spent = SpentClaim { mac: &mac, uses, claim_path: &claim_path };
        self.pending_with_every_use_spent(&record, token, spent, bundle_version, room)
    }

    /// A token that offers no use (none given, unlisted, spent, revoked,
    /// expired): the node waits for an admin. Unless this CA spent it
    /// (and it was blanked, its metadata gone) through a replica that
    /// stopped before linking the CA index: then it is readmitted.
    fn pending_without_a_use(
        &self,
        record: NodeRecord,
        token: Option<&Presented>,
        bundle_version: u64,
        room: bool,
    ) -> StoreResult<Admission> {
        if let Some(token) = token
            && let Some(earlier) =
                self.recent_holder_with_same_ca(token.mac(), &record, super::tokens::MAX_USES)?
            && let Some(admission) = self.readmit(earlier, &record, token, bundle_version)?
        {
            return Ok(admission);
        }
        if !room {
            return Ok(Admission { id: record.id, outcome: Outcome::NoRoom });
        }
        self.write_record(&record)?;
        self.audit.record(announced(&record, token.is_some()))?;
        Ok(Admission { id: record.id, outcome: Outcome::Pending })
    }

    /// A claim made, but every use was spent meanwhile. By this CA, maybe,
    /// through a replica that stalled or died between its marker and its
    /// CA index: found among the latest uses, the index is made and the
    /// node readmitted. Else the node waits for an admin, as without a
    /// token; its claim, linked nowhere, becomes its record. The token is
    /// blanked once no admission of it can still fail and give a use back
    /// (else the next sweep does it).
    fn pending_with_every_use_spent(
        &self,
        record: &NodeRecord,
        token: &Presented,
        spent: SpentClaim<'_>,
        bundle_version: u64,
        room: bool,
    ) -> StoreResult<Admission> {
        let id = record.id.clone();
        if let Some(earlier) = self.recent_holder_with_same_ca(spent.mac, record, spent.uses)?
            && let Some(admission) = self.readmit(earlier, record, token, bundle_version)?
        {
            durable::remove_durably(spent.claim_path)?;
            return Ok(admission);
        }
        if self.tokens.ledger.spent_for_good(spent.mac, spent.uses)? {
            self.tokens.spent(token.expose());
        } else {
            self.tokens.sweep_later();
        }
        if !room {
            durable::remove_durably(spent.claim_path)?;
            return Ok(Admission { id, outcome: Outcome::NoRoom });
        }
        let record_path = self.record_path(&id);
        // Linked nowhere (its marker was never made): the record a later
        // write renames over must not live on through a second name.
        durable::rename_durably(spent.claim_path, &record_path)?;
        self.audit.record(announced(record, true))?;
        Ok(Admission { id, outcome: Outcome::Pending })
    }

    /// The answer to an announcement of a rejected CA (stored rejected at
    /// once, audited at the first of a burst), or none: the CA is not
    /// rejected, or its rejection was lifted just now.
    fn answer_for_rejected_ca(
        &self,
        record: &NodeRecord,
        token_presented: bool,
        room: bool,
    ) -> StoreResult<Option<Admission>> {
        let Some(ca) = record.ca_sha256.clone() else { return Ok(None) };
        if !self.is_ca_rejected(&ca)? {
            return Ok(None);
        }
        if !room {
            return Ok(Some(Admission { id: record.id.clone(), outcome: Outcome::NoRoom }));
        }
        if self.store_for_rejected_ca(record, &ca)?.is_none() {
            return Ok(None);
        }
        if self.first_of_burst(&ca) {
            self.audit.record_all(&[
                announced(record, token_presented),
                AuditEvent::Rejected {
                    id: record.id.clone(),
                    by: DecidedBy::RejectedCa,
                    user: None,
                    ca_sha256: Some(ca),
                },
            ])?;
        }
        Ok(Some(Admission { id: record.id.clone(), outcome: Outcome::RejectedCa }))
    }

    /// Claims the first free use of `mac` (of `uses`) for the claim at
    /// `claim_path` and finishes the admission: true when one was won.
    /// Past a won claim there is no undo; an error there is finished by
    /// the node's retry or a recovery.
    fn claim_a_use(
        &self,
        record: &mut NodeRecord,
        token: &Presented,
        mac: &Mac,
        uses: u32,
        claim_path: &std::path::Path,
        bundle_version: u64,
    ) -> StoreResult<bool> {
        let id = record.id.clone();
        for n in self.tokens.ledger.first_free(mac, uses)..=uses {
            if !self.tokens.ledger.claim(mac, n, claim_path, record.ca_sha256.as_deref())? {
                continue;
            }
            stall_after_claim();
            if let Err(e) = self.finish(record, Some(token), Some(bundle_version)) {
                // Past the commit point: no undo (another process may
                // finish it meanwhile); the node's retry or recovery does.
                tracing::error!(
                    node = %id, cause = %e,
                    "a token admission failed after its use was claimed; the node's next announcement, \
                     or maintenance once it is 30 s old, finishes it"
                );
                return Err(e);
            }
            self.remove_claim(&id);
            // Blanked from `tokens` only once no claimed use can still
            // be unfinished (another admission of this token).
            if n == uses {
                if uses == 1 || self.tokens.ledger.spent_for_good(mac, uses)? {
                    self.tokens.spent(token.expose());
                } else {
                    self.tokens.sweep_later();
                }
            }
            return Ok(true);
        }
        Ok(false)
    }

    /// Finishes an admission whose use a crash left claimed but unfinished
    /// (its claim file, or an earlier version's record, names the claim),
    /// and removes a claim file that is done with: its admission finished,
    /// or its claim never won a use (the node got no answer and announces
    /// again). True when `id` held a use of `claim` and is now admitted.
    /// Callers wait until no live process can still be finishing it.
    pub(super) fn recover(&self, id: &NodeId, claim: &str) -> StoreResult<bool> {
        let Some(mac) = Mac::parse(claim) else { return Ok(false) };
        if !self.is_unfinished(id)? {
            // Finished: an approval removed since is an admin's decision.
            return Ok(false);
        }
        if self.approved_now(id)? {
            self.remove_claim(id);
            return Ok(false);
        }
        for n in 1..=MAX_USES_SCANNED {
            match self.tokens.ledger.holder(&mac, n)? {
                None => break,
                Some(Holder::Node(holder)) if holder == *id => {
                    let Some(mut record) = self.read_record_or_claim(id)? else { return Ok(false) };
                    // No answer went out: the trust is delivered when the
                    // node announces again, however late (the mark lifts the
                    // readmit window for it, once).
                    record.admission_unanswered = true;
                    self.finish(&mut record, None, None)?;
                    self.remove_claim(id);
                    tracing::warn!(node = %id, "finished a token admission a crash had cut short");
                    return Ok(true);
                }
                Some(_) => {}
            }
        }
        self.remove_claim(id);
        Ok(false)
    }

    /// Whether `id`'s token admission is unfinished: its claim file is
    /// there, or (earlier versions) its record is pending and names a
    /// claim. A finished one is never finished again.
    fn is_unfinished(&self, id: &NodeId) -> StoreResult<bool> {
        if durable::present(&self.claim_path(id))? {
            return Ok(true);
        }
        Ok(self.read_record(id)?.is_some_and(|r| !r.admitted && r.token_claim.is_some()))
    }

    /// Step 1: the claim file, whole, its name not yet durable (the claim
    /// of a use syncs the directory).
    fn write_claim(&self, record: &NodeRecord) -> StoreResult<std::path::PathBuf> {
        let id = record.id.clone();
        let json = serde_json::to_vec_pretty(record).map_err(io::Error::other)?;
        let path = self.claim_path(&id);
        self.in_layout(|| durable::write_new(&path, &json, 0o600))?;
        Ok(path)
    }

    /// Removes a claim file that is done with; one left behind is removed
    /// by a later recovery.
    #[expect(
        clippy::disallowed_methods,
        reason = "a claim done with: losing its removal costs a later recovery's look, never a decision"
    )]
    fn remove_claim(&self, id: &NodeId) {
        if let Err(e) = std::fs::remove_file(self.claim_path(id))
            && e.kind() != io::ErrorKind::NotFound
        {
            tracing::warn!(node = %id, cause = %e, "could not remove a finished admission's claim file");
        }
    }

    /// Step 3 of the module's order: the record, then the audit events
    /// (each `fsync`'d), then the approval, which ends recovery (a
    /// record without approval is read by every maintenance pass; a crash
    /// anywhere before is finished by a recovery, which writes all again). `delivering` is the bundle version
    /// the answer carries, `None` when no answer goes out (a recovery).
    fn finish(
        &self,
        record: &mut NodeRecord,
        token: Option<&Presented>,
        delivering: Option<u64>,
    ) -> StoreResult<()> {
        let id = record.id.clone();
        if !self.is_unfinished(&id)? {
            // Another process finished it while this one stalled: what it
            // made, and what an admin decided since, stand.
            return Ok(());
        }
        let admitted = {
            // The claim says the token (a recovery has it no more); the
            // node's presented token otherwise (records of earlier versions).
            let prefix = record
                .token_sha256_prefix
                .clone()
                .or_else(|| token.map(|token| token.fingerprint().to_string()));
            super::Admitted {
                token_labels: record.token_labels.clone(),
                ..super::Admitted::by_token(id.clone(), prefix)
            }
        };
        let mut events = vec![announced(record, true), admitted.into()];
        if let Some(bundle_version) = delivering {
            events.push(AuditEvent::TrustDelivered { id: id.clone(), bundle_version });
        }
        // No `delivered/<id>` for an answer that carries the trust: it would
        // cost an inode per admission, and janusd does not poll once its
        // answer admitted it; a poll that comes anyway audits a second
        // `trust_delivered`, which readers drop as a repeat.
        // The record saying admitted and the audit events one after the other, the
        // approval last: until it exists the record is listed as unsettled,
        // so a crash anywhere here is found and finished by a recovery.
        record.admitted = true;
        record.admitted_by = Some(super::AdmittedBy::Known(DecidedBy::Token));
        // One after the other on this (blocking-pool) thread: a thread of
        // their own per admission would mean a thousand in a boot storm.
        fault_in_finish("record")?;
        self.write_record(record)?;
        self.audit.record_all(&events)?;
        fault_in_finish("approval")?;
        self.approve(&id, DecidedBy::Token, "")
    }

    /// The earlier node that spent a use of `mac` with the CA `fresh`
    /// presents, if any: found by name in the ledger's CA index, so an
    /// announcement costs the same whatever the number of uses.
    fn holder_with_same_ca(&self, mac: &Mac, fresh: &NodeRecord) -> StoreResult<Option<NodeRecord>> {
        let Some(ca) = fresh.ca_sha256.as_deref() else { return Ok(None) };
        let Some(Holder::Node(holder)) = self.tokens.ledger.holder_by_ca(mac, ca)? else { return Ok(None) };
        if self.rejected_now(&holder)? {
            return Ok(None);
        }
        Ok(self.read_record_or_claim(&holder)?.filter(|earlier| earlier.ca_sha256.as_deref() == Some(ca)))
    }

    /// The holder of one of the latest [`RECENT_USES_LOOKED_AT`] uses of
    /// `mac` whose record has `fresh`'s CA, its CA index made now: a claim
    /// whose process stalled or died before it linked the index.
    fn recent_holder_with_same_ca(
        &self,
        mac: &Mac,
        fresh: &NodeRecord,
        uses: u32,
    ) -> StoreResult<Option<NodeRecord>> {
        let Some(ca) = fresh.ca_sha256.as_deref() else { return Ok(None) };
        // One lookup for a token nobody used (a guess, a typo).
        if self.tokens.ledger.holder(mac, 1)?.is_none() {
            return Ok(None);
        }
        let last = self.tokens.ledger.first_free(mac, uses) - 1;
        for n in (last.saturating_sub(RECENT_USES_LOOKED_AT) + 1..=last).rev() {
            let Some(Holder::Node(holder)) = self.tokens.ledger.holder(mac, n)? else { continue };
            if self.rejected_now(&holder)? {
                continue;
            }
            if let Some(earlier) = self.read_record_or_claim(&holder)?
                && earlier.ca_sha256.as_deref() == Some(ca)
            {
                self.tokens.ledger.index_use_by_ca(mac, n, ca)?;
                return Ok(Some(earlier));
            }
        }
        Ok(None)
    }

    /// The node that spent this token announced again (its answer was
    /// lost): answered `admitted` with its first id. An unfinished
    /// admission (its claim still there: a fault or a crash after the
    /// claim) is finished now, whatever its age: the node was never told,
    /// and its token's use is its own. A finished one is answered within
    /// the readmit window, or at any age once if a recovery finished it
    /// (no answer told the node), and only while its approval stands (an
    /// admin who withdrew it decided). The record is not changed but for
    /// that mark: not its name, address, peer address or poll secret
    /// (janusd never polls after an admitting answer). `None`: not
    /// honoured; the token counts as spent.
    fn readmit(
        &self,
        mut earlier: NodeRecord,
        fresh: &NodeRecord,
        token: &Presented,
        bundle_version: u64,
    ) -> StoreResult<Option<Admission>> {
        let id = earlier.id.clone();
        if self.is_unfinished(&id)? {
            self.finish(&mut earlier, Some(token), Some(bundle_version))?;
            self.remove_claim(&id);
        } else if !(self.within_readmit_window(&earlier) || earlier.admission_unanswered)
            || !self.approved_now(&id)?
        {
            return Ok(None);
        } else if earlier.admission_unanswered {
            // Told now: from here the window governs it, as any other.
            earlier.admission_unanswered = false;
            self.write_record(&earlier)?;
        }
        self.audit.record(AuditEvent::Readmitted {
            id: earlier.id.clone(),
            by: DecidedBy::Token,
            token_sha256_prefix: token.fingerprint().to_string(),
            peer_address: fresh.peer_address.clone(),
            address: fresh.address.clone(),
            ca_sha256: fresh.ca_sha256.clone(),
            bundle_version,
        })?;
        // The process that claimed the use may have died before blanking
        // it. Blanked only when its uses are known: a token this process
        // cannot see now (unlisted a moment, its metadata unreadable) is
        // left to the sweep, which reads both files under the lock — taking
        // it for a one-use token would blank it and drop the metadata of
        // its other uses (found by the randomized adversary).
        match self.tokens.offer_presented(token)? {
            Offer::Valid { uses, .. } if self.tokens.ledger.spent_for_good(token.mac(), uses)? => {
                self.tokens.spent(token.expose())
            }
            _ => self.tokens.sweep_later(),
        }
        tracing::info!(node = %id, "the node that spent this token announced again: answered with its first id");
        Ok(Some(Admission { id, outcome: Outcome::Admitted }))
    }
}

impl Store {
    /// Whether `earlier` announced within the readmit window (`--readmit-window`).
    fn within_readmit_window(&self, earlier: &NodeRecord) -> bool {
        let announced = earlier.announced_at.as_deref().and_then(|t| {
            time::OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339).ok()
        });
        announced.is_some_and(|at| {
            let age = janus_core::clock::now_utc() - at;
            age >= time::Duration::ZERO && age.unsigned_abs() <= self.readmit_window
        })
    }
}

/// A test hook: while the file `JANUS_REGISTRATION_TEST_STALL_AFTER_CLAIM`
/// names exists, a process that has just won a token's use waits before
/// finishing it, as a replica stopped (SIGSTOP) or stuck in an `fsync`
/// right after its commit point does. Read once; unset, it costs nothing.
/// Compiled into debug builds only (the tests'): no release build reads it.
#[cfg(not(debug_assertions))]
fn stall_after_claim() {}

#[cfg(debug_assertions)]
fn stall_after_claim() {
    static STALL_WHILE: std::sync::OnceLock<Option<std::path::PathBuf>> = std::sync::OnceLock::new();
    let stall_while = STALL_WHILE.get_or_init(|| {
        std::env::var_os("JANUS_REGISTRATION_TEST_STALL_AFTER_CLAIM").map(std::path::PathBuf::from)
    });
    if let Some(path) = stall_while {
        // fold: a debug build's test hook: no decision
        while durable::present(path).unwrap_or(false) {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
}

/// The `announced` event: what the node said, never its secret or token.
/// A test hook: while the file `JANUS_REGISTRATION_TEST_FAULT_IN_FINISH`
/// names holds `step` (`record` or `approval`), finishing an admission
/// fails there with ENOSPC, as a full disk makes the write of the record
/// or of the approval fail after the use was claimed. Read once; compiled
/// into debug builds only (the tests'): no release build reads it.
#[cfg(not(debug_assertions))]
fn fault_in_finish(_step: &str) -> io::Result<()> {
    Ok(())
}

#[cfg(debug_assertions)]
fn fault_in_finish(step: &str) -> io::Result<()> {
    static FAULT_WHILE: std::sync::OnceLock<Option<std::path::PathBuf>> = std::sync::OnceLock::new();
    let fault_while = FAULT_WHILE.get_or_init(|| {
        std::env::var_os("JANUS_REGISTRATION_TEST_FAULT_IN_FINISH").map(std::path::PathBuf::from)
    });
    match fault_while.as_deref().map(std::fs::read_to_string) {
        Some(Ok(named)) if named.trim() == step => Err(io::Error::from_raw_os_error(28)),
        _ => Ok(()),
    }
}

fn announced(record: &NodeRecord, token_presented: bool) -> AuditEvent {
    AuditEvent::Announced {
        id: record.id.clone(),
        name: record.name.clone(),
        address: record.address.clone(),
        peer_address: record.peer_address.clone(),
        ca_sha256: record.ca_sha256.clone(),
        token_presented,
    }
}

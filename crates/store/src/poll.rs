//! What a node's poll (`GET /register/<id>` with its poll secret) reads of
//! the state, and the one write it may cause: the audit trail of the
//! trust's first delivery.
//!
//! Invariants: the presented secret is hashed and compared with the
//! record's hash in constant time; an unknown id, a wrong secret and a
//! rejected node are the same answer ([`PollAnswer::Unknown`]), so a
//! client cannot tell them apart. 404 makes a node forget its enrollment,
//! so it is answered only on what the file server says: a look that fails
//! refuses the poll (503, the node retries), and on a network filesystem an
//! absent record, rejection override or approval is looked up again at the
//! server (its directory opened first). The usual poll costs a 1 KiB read
//! (only the secret's hash is parsed out of it) and three `stat`s
//! ([`Look`], which writes nothing); only the first delivery reads the
//! approval and writes.

use std::io;

use subtle::ConstantTimeEq;

use super::error::{StoreResult, Undecidable};
use super::{AuditEvent, DecidedBy, DecisionNote, NodeId, Store};
use janus_core::durable;
use janus_core::pki::sha256_hex;

/// What a poll is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PollAnswer {
    /// No such node, not its secret, or rejected: 404.
    Unknown,
    /// Waiting for an admin: 202.
    Pending,
    /// Admitted: 200 with the trust.
    Admitted,
    /// Admitted, and this is the trust's first delivery (audited now): 200
    /// with the trust; says how the node was admitted.
    FirstDelivery(AdmittedHow),
}

/// How a node was admitted, as `janus_registration_admissions_total`
/// counts it: by a token or the admission command (at their answer), or by
/// an approval (at the trust's first delivery) made with a file, the
/// command line, the admin API or the console.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdmittedHow {
    /// A registration token.
    Token,
    /// The admission command (`serve --admission-command`).
    Policy,
    /// An approval file made by hand (`touch approved/<id>`).
    File,
    /// `nodes approve` on the command line.
    Cli,
    /// The admin API.
    Api,
    /// The admin console.
    Console,
}

impl AdmittedHow {
    /// Its label value.
    pub fn label(self) -> &'static str {
        match self {
            AdmittedHow::Token => "token",
            AdmittedHow::Policy => "policy",
            AdmittedHow::File => "file",
            AdmittedHow::Cli => "cli",
            AdmittedHow::Api => "api",
            AdmittedHow::Console => "console",
        }
    }

    /// How the approval `note` admitted its node.
    pub fn of(note: &DecisionNote) -> Self {
        match note.by {
            DecidedBy::Token => AdmittedHow::Token,
            DecidedBy::Policy => AdmittedHow::Policy,
            DecidedBy::Command if note.user.starts_with("api (") => AdmittedHow::Api,
            DecidedBy::Command if note.user.starts_with("console (") => AdmittedHow::Console,
            DecidedBy::Command => AdmittedHow::Cli,
            _ => AdmittedHow::File,
        }
    }
}

impl PollAnswer {
    /// Its outcome in `janus_registration_polls_total`, beside what it answers.
    pub fn outcome(&self) -> &'static str {
        match self {
            PollAnswer::Unknown => "unknown",
            PollAnswer::Pending => "pending",
            PollAnswer::Admitted | PollAnswer::FirstDelivery(_) => "admitted",
        }
    }
}

/// What a poll finds without writing anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Look {
    /// The answer, as it stands.
    Answer(PollAnswer),
    /// Approved, and the trust's first delivery is still to be audited:
    /// only [`Store::poll`] may answer it.
    FirstDelivery,
}

impl Store {
    /// Where the node `id` stands for a poll presenting `secret`. The
    /// first poll that finds it approved audits the delivery of the trust
    /// (`bundle_version`), then marks it delivered: a crash in between
    /// repeats the events at the next poll (readers drop repeats), never
    /// loses them.
    pub fn poll(&self, id: &NodeId, secret: &[u8], bundle_version: u64) -> StoreResult<PollAnswer> {
        match self.look(id, secret)? {
            Look::Answer(answer) => Ok(answer),
            Look::FirstDelivery => {
                // Removed between the two looks: still pending. Unreadable:
                // refused (503), never "pending" on a guess.
                let Some((approval, _)) = self.approval(id)? else { return Ok(PollAnswer::Pending) };
                self.record_first_delivery(id, &approval, bundle_version)?;
                Ok(PollAnswer::FirstDelivery(AdmittedHow::of(&approval)))
            }
        }
    }

    /// A poll's reads: the record's secret hash and three `stat`s at most,
    /// nothing written.
    pub(super) fn look(&self, id: &NodeId, secret: &[u8]) -> StoreResult<Look> {
        // Only the hash is needed on the usual path: the rest of the record
        // (its PEM, above all) is skipped, not copied.
        #[derive(serde::Deserialize)]
        struct SecretHash {
            poll_secret_sha256: String,
        }
        let path = self.record_path(id);
        let Some(stored) = (match super::read_record_at::<SecretHash>(&path)? {
            // Absent here: 404 makes the node forget its enrollment, so on a
            // network filesystem the file server is asked again. A negative
            // entry this client cached (it looked the id up while another
            // host's admission had claimed its use but not yet written the
            // record) hid the record for seconds.
            None if !self.reads_cannot_hang() => {
                durable::revalidate_parent(&path).map_err(|e| durable::with_path(e, &path))?;
                super::read_record_at::<SecretHash>(&path)?
            }
            found => found,
        }) else {
            return Ok(Look::Answer(PollAnswer::Unknown));
        };
        let presented = sha256_hex(secret);
        let matches: bool = presented.as_bytes().ct_eq(stored.poll_secret_sha256.as_bytes()).into();
        // A look that fails refuses the poll (503: the node retries): never
        // 404 (it would forget its enrollment) nor 200 on a guess.
        let undecidable = |what| move |e: io::Error| Undecidable::refuse(what, &e);
        Ok(Look::Answer(if !matches || self.poll_refused_now(id)? {
            PollAnswer::Unknown
        } else if !self.approved_now(id)? {
            PollAnswer::Pending
        } else if self.was_delivered(id).map_err(undecidable("whether the trust went out"))? {
            PollAnswer::Admitted
        } else {
            return Ok(Look::FirstDelivery);
        }))
    }

    fn record_first_delivery(
        &self,
        id: &NodeId,
        approval: &DecisionNote,
        bundle_version: u64,
    ) -> StoreResult<()> {
        let mut events = Vec::new();
        // A `touch`ed approval has no event yet: the node learns it now. Over a
        // rejected CA it wins (the admin acted on purpose), and says so.
        if approval.by == DecidedBy::ApprovalFile {
            events.push(
                super::Admitted::by_file(id.clone(), approval.user.clone(), self.rejected_now(id)?).into(),
            );
        }
        events.push(AuditEvent::TrustDelivered { id: id.clone(), bundle_version });
        self.audit.record_all(&events)?;
        self.mark_delivered(id)?;
        Ok(())
    }
}

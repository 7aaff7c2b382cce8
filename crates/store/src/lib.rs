//! The state directory, laid out as the reference lays it out, so an existing
//! one keeps working: `tokens`, `nodes/<id>.json`, `approved/<id>`. Ours on
//! top: `rejected/<id>` (polls get 404), `rejected-cas/<sha256>`,
//! `delivered/<id>` (the trust went out once), `tokens.meta.json` (expiry
//! and uses), `token-uses/` and its key (the ledger), `audit/`, and
//! `state-format` (which of these layouts it is: [`format`]).
//!
//! Files are the source of truth: nothing is cached between requests, so an
//! approval created by hand (`touch approved/<id>`) or by another process
//! counts at the very next request. Every write goes through
//! [`janus_core::durable`]'s helpers, none through a link it did not make. A state
//! directory anyone may write to is refused; a subdirectory removed under a
//! running server is made again at the next write. All methods block:
//! async code reaches the store through [`AsyncStore`] (`on_pool`), which
//! runs them on the blocking pool (a poll's reads excepted, on a local
//! filesystem: `locality`).
//!
//! The surface, by what its callers do (everything else is the store's own):
//!
//! | callers | methods |
//! |---|---|
//! | open (every command) | `open`, `open_existing`, `open_to_read`, `check_before_open`, `for_server`, `lay_out` |
//! | announce (the server) | `announce`, `format_refusal` |
//! | poll (the server) | `poll` |
//! | decide (admins, the admission command) | `admit`, `reject`, `forget`, `add_tokens`, `revoke_token` |
//! | list (admins) | `scan`, `list_records`, `read_record`, `state_of`, `approval`, `rejection`, `poll_refused_now`, `approved_now`, `rejected_now`, `is_ca_rejected`, `unsettled_ids`, `approved_ids`, `rejected_ids`, `list_tokens`, `token_meta_unreadable`, `history`, `node_view`, `with_node` |
//! | follow (`audit --follow`, `nodes watch`, `--on-admitted`) | [`follow::Follower`] |
//! | maintain (the server's loop, `tokens list`) | `maintain`, `sweep_tokens`, `remove_leftovers` |
//!
//! Each decision is one method that writes it and its audit event together:
//! no caller approves, rejects or forgets and then audits by itself.
//!
//! Here: opening, laying out and the one write path (`Store::in_layout`).
//! Records and decisions: `decisions` (approve, reject, forget), `poll`,
//! `admission` (an announcement, a token's use); finding them:
//! `listing`; keeping them bounded: `maintain`; reporting: `health`,
//! `audit` (`event`); the tokens: [`tokens`], `ledger`.

mod admission;
mod audit;
mod decisions;
mod error;
mod event;
pub mod follow;
pub mod format;
mod health;
mod hook_claims;
mod id;
mod ledger;
mod listing;
mod locality;
mod maintain;
mod migrate;
mod on_pool;
mod orphans;
mod poll;
mod presented;
mod record;
mod store;
mod tidier;
pub mod tokens;
mod view;

// The facade: what the store's callers need, and nothing else. The
// handle and its async twin; the records, ids and views; the decisions
// and events; the errors; the token as presented; the tokens file's
// vocabulary (`tokens`) and the audit trail's followers (`follow`).
pub use admission::{Admission, Outcome};
pub use audit::{Audit, current_user, is_admin_name, token_fingerprint};
pub use error::{MetaUnreadable, Refusal, StoreError, StoreResult};
pub use event::{Admitted, AdmittedBy, AuditEvent, DecidedBy};

pub use id::NodeId;
pub use ledger::{LEDGER_DIR, Ledger, Mac};
pub use maintain::MaintenanceLimits;
pub use on_pool::{AsyncStore, HEALTH_STALL};
pub use poll::{AdmittedHow, PollAnswer};
pub use presented::Presented;
pub use record::{DecisionNote, NodeRecord, NodeState, OrphanApproval, Pending, Unhealthy};
pub use store::{DEFAULT_READMIT_WINDOW, Store};
pub use tidier::Tidier;
pub use tokens::Tokens;
pub use view::{NodeView, ca_sha256_of};

pub(crate) use record::{is_sha256_hex, read_record_at};
pub(crate) use store::{
    APPROVAL_REMOVED_DIR, CLAIM_PREFIX, Listing, PROBE_BYTES, REJECTED_BURST, REJECTED_BURSTS_KEPT,
    STALE_TEMP_AGE, WRITE_FAILURE_MEMORY,
};

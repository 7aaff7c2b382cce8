//! Day-2 operation on the state directory, with or without a running
//! server (which sees every change at its next request: files are the
//! source of truth): the admin requests as types ([`model`]), the
//! functions that carry them out ([`approve`], [`reject`], [`forget`],
//! [`tokens`]…), their refusals as codes ([`AdminError`]), and the admin
//! listener that serves them to programs ([`api`]) and people
//! ([`console`]). The command line that prints them is the binary's.
//!
//! Invariants: every change goes through the store (durable writes, the
//! tokens lock `serve` takes) and is audited with the [`Actor`] given,
//! which names the surface and the admin; tokens are said once, when
//! made, and redacted everywhere after; a check an admin asked for (an
//! expected fingerprint, a console log) that fails changes nothing.

pub mod api;
mod audit;
pub mod console;
pub mod credential;
mod error;
mod find;
pub mod listener;
pub mod model;
mod nodes;
mod state;
pub mod tokens;
mod watch;
pub(crate) mod web;
pub use watch::{Followed, follow, next_decisions};

pub use self::nodes::{
    Decision, NodeDetail, NodeList, approve, approve_ca, forget, history, newest_first, node_list, reject,
    scan_nodes, show_node,
};
pub use audit::{AuditEntry, audit_entry};
pub(crate) use error::Result;
pub use error::{AdminError, Code, Field, Hint, Surface, Then};
pub use model::{
    Actor, Approve, ApproveCa, CONSOLE_MARKER, Check, Fingerprint, Mint, NewTokens, NodeFilter, Revoke,
    console_fingerprint,
};
pub use state::{open_state, open_state_to_read};

pub use janus_store::{NodeView, ca_sha256_of};

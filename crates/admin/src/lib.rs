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

use std::path::Path;

pub mod api;
mod audit;
pub mod console;
pub mod credential;
mod error;
mod find;
pub mod listener;
pub mod model;
mod nodes;
pub mod tokens;
mod watch;
pub(crate) mod web;
pub use watch::{Followed, follow, next_decisions};

pub use self::nodes::{
    Decision, NodeDetail, NodeList, approve, approve_ca, forget, history, node_list, reject, scan_nodes,
    show_node,
};
pub use audit::{AuditEntry, audit_entry};
pub(crate) use error::Result;
pub use error::{AdminError, Code, Field, Hint, Surface, Then};
use find::{Among, find};
pub use model::{
    Actor, Approve, ApproveCa, CONSOLE_MARKER, Check, Fingerprint, Mint, NewTokens, NodeFilter, Revoke,
};

use janus_store::{NodeRecord, Store};

pub use janus_store::view::{NodeView, ca_sha256_of};

/// `record` as `nodes list --json` shows it (see [`Store::node_view`]).
fn view(store: &Store, record: &NodeRecord) -> Result<NodeView> {
    Ok(store.node_view(record)?)
}

/// The CA fingerprint of the last `pki: this node's CA: SHA-256 <hex>` line.
pub fn console_fingerprint(log: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(log);
    let mut last = None;
    let mut rest = text.as_ref();
    while let Some(at) = rest.find(CONSOLE_MARKER) {
        let after = &rest[at + CONSOLE_MARKER.len()..];
        let hex: String = after.chars().take(64).collect();
        if janus_core::pki::is_hex(&hex, 64) {
            last = Some(hex);
        }
        rest = after;
    }
    last
}

/// The state directory, for a command that writes: what it creates belongs
/// to the directory's owner, also when an admin runs it as root.
pub fn open_state(state: &Path) -> Result<Store> {
    // A missing or foreign directory is said as such (`open_to_read` makes
    // nothing) before anything looks at its owner.
    Store::open_to_read(state)?;
    janus_core::durable::create_as_owner_of(state)?;
    Ok(Store::open(state)?)
}

/// The state directory, for a command that only reads: nothing is created
/// or marked (a missing `audit/` stays missing).
pub fn open_state_to_read(state: &Path) -> Result<Store> {
    Ok(Store::open_to_read(state)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_console_line_wins() {
        let a = "a".repeat(64);
        let b = "b".repeat(64);
        let log = format!(
            "[  1.0] pki: this node's CA: SHA-256 {a}\nnoise\n[ 9.0] pki: this node's CA: SHA-256 {b}\r\n"
        );
        assert_eq!(console_fingerprint(log.as_bytes()), Some(b));
        assert_eq!(console_fingerprint(b"nothing"), None);
        assert_eq!(console_fingerprint(b"pki: this node's CA: SHA-256 abc"), None);
    }
}

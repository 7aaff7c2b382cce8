//! The admin commands, `nodes` and `tokens`: day-2 operation on the state
//! directory itself, with or without a running server (which sees every
//! change at its next request: files are the source of truth).
//!
//! Invariants: every change goes through the store (durable writes, the
//! tokens lock `serve` takes) and is audited with the user who made it;
//! tokens are printed once, when made, and redacted everywhere after; a
//! check an admin asked for (`--expect-ca-sha256`, `--console`) that fails
//! changes nothing.

use std::path::Path;

pub mod api;
mod audit;
pub mod console;
mod error;
mod find;
mod nodes;
pub mod tokens;
pub mod user_data;
mod watch;
pub use watch::{Followed, follow};

pub use self::nodes::{
    Decision, NodeDetail, NodeList, approve, forget, history, node_list, nodes, reject, show_node,
};
pub use self::tokens::tokens;
pub use audit::{audit_trail, event_line};
pub use error::AdminError;
pub(crate) use error::Result;
use find::{Among, find};

use janus_core::terminal::escape;
use janus_store::{NodeRecord, Store};

/// The console line a node prints for its CA, and nothing else.
pub const CONSOLE_MARKER: &str = "pki: this node's CA: SHA-256 ";

pub mod args;
pub use args::{
    ApproveArgs, IdArg, ListArgs, NodesCommand, RevokeArgs, ShowArgs, TokensAddArgs, TokensCommand,
    TokensListArgs, WatchArgs,
};

pub use janus_store::view::{NodeView, ca_sha256_of};

/// `record` as `nodes list --json` shows it (see [`Store::node_view`]).
fn view(store: &Store, record: &NodeRecord) -> Result<NodeView> {
    Ok(store.node_view(record)?)
}

/// Lowercase hex, colons and spaces dropped: fingerprints as people paste them.
pub fn normalize_fingerprint(s: &str) -> Result<String> {
    let hex: String = s.chars().filter(|c| !matches!(c, ':' | ' ')).collect::<String>().to_lowercase();
    if janus_core::pki::is_hex(&hex, 64) {
        Ok(hex)
    } else {
        Err(AdminError::Usage(format!(
            "{:?} is not a SHA-256 fingerprint: --expect-ca-sha256 and --ca-sha256 take the 64 hex digits the \
             node's console prints after `SHA-256` (colons and upper case are fine), e.g. --expect-ca-sha256 2bcdf132…",
            escape(s)
        )))
    }
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
fn open(state: &Path) -> Result<Store> {
    // A missing or foreign directory is said as such (`open_to_read` makes
    // nothing) before anything looks at its owner.
    Store::open_to_read(state)?;
    janus_core::durable::create_as_owner_of(state)?;
    Ok(Store::open(state)?)
}

/// The state directory, for a command that only reads: nothing is created
/// or marked (a missing `audit/` stays missing).
fn open_to_read(state: &Path) -> Result<Store> {
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

    #[test]
    fn fingerprints_as_people_paste_them() {
        let hex = "AB".repeat(32);
        assert_eq!(normalize_fingerprint(&hex).unwrap(), "ab".repeat(32));
        let colons = vec!["AB"; 32].join(":");
        assert_eq!(normalize_fingerprint(&colons).unwrap(), "ab".repeat(32));
        assert!(normalize_fingerprint("abc").is_err());
    }
}

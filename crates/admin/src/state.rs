//! Opening the state directory for an admin command, and a record as the
//! admin surfaces show it.
//!
//! Invariants: a command that only reads creates and marks nothing; what a
//! command that writes creates belongs to the directory's owner, also when
//! an admin runs it as root.

use std::path::Path;

use janus_store::NodeView;
use janus_store::{NodeRecord, Store};

use crate::error::Result;

/// `record` as `nodes list --json` shows it (see [`Store::node_view`]).
pub(crate) fn view(store: &Store, record: &NodeRecord) -> Result<NodeView> {
    Ok(store.node_view(record)?)
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

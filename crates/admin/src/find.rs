//! Naming a node as admins do: by id, by a prefix of one (6 hex digits or
//! more), or by name; an ambiguous or unknown key fails, listing the
//! candidates or the names nearest to it, never guessing.

use std::fmt::Write as _;

use janus_core::terminal::escape;
use janus_store::ca_sha256_of;
use janus_store::{NodeId, NodeRecord, NodeState, Store};

use crate::Result;
use crate::error::{AdminError, Code};

/// The records a command may name a node among.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Among {
    /// Waiting for approval (`nodes approve`).
    Pending,
    /// Not rejected yet (`nodes reject`).
    NotRejected,
    /// Every record (`show`, `history`, `forget`).
    All,
}

impl Among {
    /// Whether a record in `state` is among these.
    pub(crate) fn takes(self, state: NodeState) -> bool {
        match self {
            Among::Pending => state == NodeState::Pending,
            Among::NotRejected => state != NodeState::Rejected,
            Among::All => true,
        }
    }
}

/// The node `key` names: its id; a prefix of an id (6 hex digits or more)
/// that only one record `among` has; or a name only one record `among`
/// carries. An ambiguous key lists the candidates and fails.
pub(crate) fn find(store: &Store, key: &str, among: Among) -> Result<(NodeId, NodeRecord)> {
    find_where(store, key, among, |_| true)
}

/// [`find`] among the records `keep` takes: a name several records carry
/// resolves to the one whose CA a console log names (`nodes approve NAME
/// --console LOG`).
pub(crate) fn find_where(
    store: &Store,
    key: &str,
    among: Among,
    keep: impl Fn(&NodeRecord) -> bool,
) -> Result<(NodeId, NodeRecord)> {
    if let Some(node) = NodeId::parse(key) {
        return match store.read_record(&node)? {
            Some(record) => Ok((node, record)),
            // No path: the words reach admin API clients too.
            None => Err(AdminError::new(Code::NodeNotFound, format!("there is no node {key}"))),
        };
    }
    // No record is named so (names are checked when announced): not found,
    // as any other name no node has.
    if key.contains('/') || key.contains("..") || key.is_empty() {
        return Err(AdminError::new(Code::NodeNotFound, format!("no node is named {:?}", escape(key))));
    }
    let candidates: Vec<NodeId> = match among {
        Among::Pending => store.unsettled_ids()?,
        Among::NotRejected | Among::All => store.record_ids()?,
    };
    let lower = key.to_ascii_lowercase();
    let by_prefix = key.len() >= 6 && lower.bytes().all(|b| b.is_ascii_hexdigit());
    let mut matches = Vec::new();
    for id in candidates {
        if by_prefix && !id.as_str().starts_with(&lower) {
            continue;
        }
        // A record that cannot be read, or whose state cannot be told,
        // refuses the resolution: skipped, it could make an ambiguous name
        // look like one node's.
        let Some(record) = store.read_record(&id)? else { continue };
        if (by_prefix || record.name == key) && keep(&record) && among.takes(store.state_of(&record)?) {
            matches.push((id, record));
        }
    }
    match matches.len() {
        1 => Ok(matches.remove(0)),
        0 => Err(AdminError::new(Code::NodeNotFound, no_match(store, key, among)?)),
        n => {
            let mut out = format!("{:?} matches {n} nodes; name one by its id:", escape(key));
            for (id, record) in &matches {
                let _ = write!(out, "\n  {id}  {}  {}", escape(&record.name), ca_sha256_of(record));
            }
            Err(AdminError::new(Code::AmbiguousName, out))
        }
    }
}

/// Why no node matches `key`, with what the person may have meant: ids
/// need 6 hex digits; a name or id one or two letters away.
fn no_match(store: &Store, key: &str, among: Among) -> Result<String> {
    let mut message = format!("no node matches {:?}", escape(key));
    let short_hex = key.len() < 6 && key.bytes().all(|b| b.is_ascii_hexdigit());
    if short_hex {
        message.push_str(&format!(
            "; an id prefix needs 6 hex digits or more (e.g. {}{})",
            key,
            &"a1b2c3"[key.len().min(6)..]
        ));
        return Ok(message);
    }
    let lower = key.to_ascii_lowercase();
    let mut best: Option<(usize, String)> = None;
    store.scan(|id, record: NodeRecord| {
        // Only a hint: a record whose state cannot be told is not suggested.
        if !matches!(store.state_of(&record), Ok(state) if among.takes(state)) {
            return;
        }
        for candidate in [record.name.clone(), id.as_str()[..lower.len().clamp(6, 32)].to_string()] {
            let d = janus_core::nearest::edit_distance(&lower, &candidate.to_ascii_lowercase());
            if d <= 2 && best.as_ref().is_none_or(|(b, _)| d < *b) {
                best = Some((d, candidate));
            }
        }
    })?;
    if let Some((_, guess)) = best {
        message.push_str(&format!("; did you mean {}?", escape(&guess)));
    }
    Ok(message)
}

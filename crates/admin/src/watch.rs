//! `nodes watch`: the audit trail's decisions about nodes as they happen,
//! for programs: one JSON line per admission (`admitted`, `readmitted`),
//! rejection and forget, each with the node as `nodes list --json` shows it
//! (when its record is still there), so an orchestrator learns which node
//! came up for which VM without reading every record.
//!
//! Invariants: it only reads (the audit files, then the record an event
//! names), through the trail's one follower ([`Follower`]: flat memory,
//! each event once, a crash's repeat dropped).

use crate::error::Result;
use crate::error::Surface;
use janus_store::Store;
use janus_store::follow::{Follower, LOOK_EVERY};

/// Which of the trail's events a follower passes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Followed {
    /// The decisions `nodes watch` prints, each with its node.
    Decisions,
    /// Every event, by its kind alone (`{"event": "announced"}`): what
    /// the console needs to know that its page is out of date.
    Kinds,
}

/// The decisions appended since `follower`'s last look, each with its node.
pub fn next_decisions(follower: &mut Follower, store: &Store) -> Result<Vec<serde_json::Value>> {
    next_events(follower, store, Followed::Decisions)
}

fn next_events(follower: &mut Follower, store: &Store, followed: Followed) -> Result<Vec<serde_json::Value>> {
    let mut events = follower.next(store)?;
    if followed == Followed::Kinds {
        return Ok(events
            .iter()
            .map(|event| serde_json::json!({ "event": crate::audit_entry(event).kind() }))
            .collect());
    }
    events.retain(|event| crate::audit_entry(event).is_decision());
    for event in &mut events {
        store.with_node(event);
    }
    Ok(events)
}

/// The admin API's event streams: the trail's events `followed` says (the
/// decisions `nodes watch` prints, or every event's kind), sent to
/// `sender` until its receiver goes away; a trail that cannot be read is
/// said once as an `error` object and ends the stream.
pub async fn follow(
    mut state: std::path::PathBuf,
    since: Option<std::time::Duration>,
    sender: tokio::sync::mpsc::Sender<serde_json::Value>,
    followed: Followed,
) {
    let mut follower = Follower::since(since);
    loop {
        let looked = tokio::task::spawn_blocking(move || {
            let decisions = crate::state::open_state_to_read(&state)
                .and_then(|store| next_events(&mut follower, &store, followed));
            (state, follower, decisions)
        })
        .await;
        let Ok((back, again, decisions)) = looked else { return };
        (state, follower) = (back, again);
        let decisions = match decisions {
            Ok(decisions) => decisions,
            Err(e) => {
                let _ = sender.send(serde_json::json!({ "event": "error", "code": e.code, "error": e.said(Surface::Api) })).await;
                return;
            }
        };
        for decision in decisions {
            if sender.send(decision).await.is_err() {
                return;
            }
        }
        if sender.is_closed() {
            return;
        }
        tokio::time::sleep(LOOK_EVERY).await;
    }
}

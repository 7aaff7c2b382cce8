//! `nodes watch`: the audit trail's decisions about nodes as they happen,
//! for programs: one JSON line per admission (`admitted`, `readmitted`),
//! rejection and forget, each with the node as `nodes list --json` shows it
//! (when its record is still there), so an orchestrator learns which node
//! came up for which VM without reading every record.
//!
//! Invariants: it only reads (the audit files, then the record an event
//! names); memory stays flat however long it follows (offsets per audit
//! file, and the last [`REMEMBERED`] events to drop the repeats a crash
//! leaves, which the trail keeps rather than lose an event).

use std::collections::{HashSet, VecDeque};
use std::io::Write;

use super::{Result, WatchArgs, view};
use crate::clock::now_unix;
use crate::store::{NodeId, Store};
use crate::terminal;

/// The events `nodes watch` prints.
const WATCHED: [&str; 4] = ["admitted", "readmitted", "rejected", "forgotten"];
/// How many recent events are remembered to drop repeats.
const REMEMBERED: usize = 10_000;

/// What a follower of the trail keeps between looks: offsets per file,
/// the earliest time it reports, and the recent events (repeats dropped).
struct Follower {
    read_up_to: std::collections::HashMap<std::path::PathBuf, (u64, u64)>,
    from: i128,
    seen: (HashSet<String>, VecDeque<String>),
}

impl Follower {
    /// From `since` ago; without it, only what happens from now on.
    fn new(since: Option<std::time::Duration>) -> Self {
        let from =
            since.map_or(now_unix() as i128 * 1000, |d| (now_unix() - d.as_secs() as i64) as i128 * 1000);
        Follower { read_up_to: Default::default(), from, seen: Default::default() }
    }

    /// The decisions appended since the last look, each with its node.
    fn next(&mut self, store: &Store) -> Result<Vec<serde_json::Value>> {
        let mut decisions = Vec::new();
        for mut event in store.audit_trail().follow(&mut self.read_up_to)? {
            let kind = event["event"].as_str().unwrap_or_default().to_string();
            let at = event["at"].as_str().and_then(crate::clock::rfc3339_millis).unwrap_or(0);
            if !WATCHED.contains(&kind.as_str()) || at < self.from || !first_time(&mut self.seen, &event) {
                continue;
            }
            with_node(store, &mut event);
            decisions.push(event);
        }
        Ok(decisions)
    }
}

/// Follows (or, with `--once`, prints) the decisions; returns once the
/// reader went away or, with `--once`, at the end of the trail.
pub fn watch(store: &Store, args: &WatchArgs) -> Result<String> {
    let mut follower = Follower::new(args.since);
    loop {
        let decisions = follower.next(store)?;
        let mut out = std::io::stdout().lock();
        for event in decisions {
            if writeln!(out, "{}", terminal::json_text(&event)).is_err() {
                return Ok(String::new()); // the reader went away
            }
        }
        let _ = out.flush();
        if args.once {
            return Ok(String::new());
        }
        std::thread::sleep(std::time::Duration::from_secs(1));
    }
}

/// The admin API's event stream: the decisions `nodes watch` prints, sent
/// to `sender` until its receiver goes away; a trail that cannot be read
/// is said once as an `error` object and ends the stream.
pub async fn follow_decisions(
    mut state: std::path::PathBuf,
    since: Option<std::time::Duration>,
    sender: tokio::sync::mpsc::Sender<serde_json::Value>,
) {
    let mut follower = Follower::new(since);
    loop {
        let looked = tokio::task::spawn_blocking(move || {
            let decisions = super::open_to_read(&state).and_then(|store| follower.next(&store));
            (state, follower, decisions)
        })
        .await;
        let Ok((back, again, decisions)) = looked else { return };
        (state, follower) = (back, again);
        let decisions = match decisions {
            Ok(decisions) => decisions,
            Err(e) => {
                let _ = sender.send(serde_json::json!({ "event": "error", "error": e.to_string() })).await;
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
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
}

/// Adds to a decision's `event` the node it names, as `nodes list --json`
/// shows it, while its record is there: what `nodes watch` prints and
/// `serve --on-admitted` gives its program.
/// A record that cannot be read or told is said as `node_unreadable`
/// (why), never left out as if forgotten.
pub fn with_node(store: &Store, event: &mut serde_json::Value) {
    let Some(id) = event["id"].as_str().and_then(NodeId::parse) else { return };
    let shown = store
        .read_record(&id)
        .map_err(super::AdminError::from)
        .and_then(|record| record.map(|record| view(store, &record)).transpose());
    match shown {
        Ok(Some(node)) => event["node"] = serde_json::to_value(node).unwrap_or_default(),
        Ok(None) => {}
        Err(e) => event["node_unreadable"] = serde_json::Value::String(e.to_string()),
    }
}

/// Whether `event` is not a repeat of one of the last [`REMEMBERED`].
fn first_time(seen: &mut (HashSet<String>, VecDeque<String>), event: &serde_json::Value) -> bool {
    let mut key = event.clone();
    if let Some(fields) = key.as_object_mut() {
        fields.remove("at");
    }
    let key = key.to_string();
    if !seen.0.insert(key.clone()) {
        return false;
    }
    seen.1.push_back(key);
    if seen.1.len() > REMEMBERED
        && let Some(oldest) = seen.1.pop_front()
    {
        seen.0.remove(&oldest);
    }
    true
}

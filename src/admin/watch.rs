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

/// Follows (or, with `--once`, prints) the decisions; returns once the
/// reader went away or, with `--once`, at the end of the trail.
pub fn watch(store: &Store, args: &WatchArgs) -> Result<String> {
    // Without --since, only what happens from now on.
    let from =
        args.since.map_or(now_unix() as i128 * 1000, |d| (now_unix() - d.as_secs() as i64) as i128 * 1000);
    let mut read_up_to = std::collections::HashMap::new();
    let mut seen: (HashSet<String>, VecDeque<String>) = Default::default();
    loop {
        let events = store.audit_trail().follow(&mut read_up_to)?;
        let mut out = std::io::stdout().lock();
        for mut event in events {
            let kind = event["event"].as_str().unwrap_or_default().to_string();
            let at = event["at"].as_str().and_then(crate::clock::rfc3339_millis).unwrap_or(0);
            if !WATCHED.contains(&kind.as_str()) || at < from || !first_time(&mut seen, &event) {
                continue;
            }
            with_node(store, &mut event);
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

/// Adds to a decision's `event` the node it names, as `nodes list --json`
/// shows it, while its record is there: what `nodes watch` prints and
/// `serve --on-admitted` gives its program.
pub fn with_node(store: &Store, event: &mut serde_json::Value) {
    let record =
        event["id"].as_str().and_then(NodeId::parse).and_then(|id| store.read_record(&id).ok().flatten());
    if let Some(record) = record {
        event["node"] = serde_json::to_value(view(store, &record)).unwrap_or_default();
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

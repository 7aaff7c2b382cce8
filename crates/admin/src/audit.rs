//! `audit`: the trail for people (one line per event, every value
//! escaped) or as JSON, followed with the store's one follower.

use std::fmt::Write as _;
use std::path::Path;

use janus_core::clock::now_unix;
use janus_core::terminal::{self, escape};

use crate::{Result, open_to_read};

/// One audit event for people: time, event, then the other fields as
/// `key=value`, every value escaped.
pub fn event_line(event: &serde_json::Value) -> String {
    let at = event["at"].as_str().unwrap_or("-");
    let kind = event["event"].as_str().unwrap_or("-");
    let mut line = format!("{}  {:<16}", escape(at), escape(kind));
    if let Some(fields) = event.as_object() {
        for (key, value) in fields.iter().filter(|(k, _)| !matches!(k.as_str(), "at" | "event")) {
            let value = match value {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            let _ = write!(line, " {}={}", escape(key), escape(&value));
        }
    }
    line
}

/// `audit`: every writer's events merged in time order, from `since` ago
/// on, a crash's repeat once; with `follow`, new events as they are
/// written, until interrupted (the trail's one follower).
pub fn audit_trail(state: &Path, since: Option<std::time::Duration>, follow: bool, json: bool) -> Result<()> {
    use std::io::Write;
    let store = open_to_read(state)?;
    let from = since.map(|d| (now_unix() - d.as_secs() as i64) as i128 * 1000);
    let mut follower = janus_store::follow::Follower::from(from);
    loop {
        let events = follower.next(&store)?;
        let mut out = std::io::stdout().lock();
        for event in events {
            let line = if json { terminal::json_text(&event) } else { event_line(&event) };
            if writeln!(out, "{line}").is_err() {
                return Ok(()); // the reader went away (`| head`)
            }
        }
        let _ = out.flush();
        if !follow {
            return Ok(());
        }
        std::thread::sleep(janus_store::follow::LOOK_EVERY);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_audit_lines_keys_are_escaped_too() {
        // Found by the audit_line fuzz target: a key with DEL in it, from an
        // audit file someone else wrote, reached the terminal raw.
        let event: serde_json::Value = serde_json::from_slice(b"\n{\"\x7fvevv\"\n:{}}").unwrap();
        let shown = event_line(&event);
        assert!(!shown.contains('\u{7f}') && shown.contains("\\x7fvevv="), "{shown:?}");
        let event = serde_json::json!({"at": "t", "event": "e", "k\u{1b}[2J\u{2028}": "v"});
        assert!(!event_line(&event).chars().any(|c| c == '\u{1b}' || c == '\u{2028}'));
    }
}

//! `DIR/audit.jsonl`: the append-only record of who admitted what.
//!
//! Invariants: one JSON object per line, appended with a single `write` on an
//! `O_APPEND` descriptor (so lines from several processes never interleave),
//! never through a symlink, and `fsync`'d before the caller answers; never a
//! secret or a token, only a token's fingerprint (the first 12 hex digits of
//! its SHA-256). Events are written before the marker that suppresses them
//! (`delivered/<id>`, a token's use), so a crash may repeat an event but
//! never lose one: readers drop an event equal to an earlier one but for
//! its time.

use std::io;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use super::atomic::with_path;

pub const AUDIT_FILE: &str = "audit.jsonl";

#[derive(Debug, Clone)]
pub struct Audit {
    path: PathBuf,
}

impl Audit {
    pub fn new(state_dir: &Path) -> Self {
        Audit { path: state_dir.join(AUDIT_FILE) }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `{"at", "event", ...fields}` durably.
    pub fn record(&self, event: &str, fields: Value) -> io::Result<()> {
        self.record_all(&[(event, fields)])
    }

    /// Appends several events with one write and one `fsync`.
    pub fn record_all(&self, events: &[(&str, Value)]) -> io::Result<()> {
        let at = crate::clock::now_rfc3339();
        let mut bytes = Vec::new();
        for (event, fields) in events {
            let mut line = Map::new();
            line.insert("at".into(), json!(at));
            line.insert("event".into(), json!(event));
            if let Value::Object(fields) = fields {
                line.extend(fields.clone());
            }
            serde_json::to_writer(&mut bytes, &Value::Object(line)).map_err(io::Error::other)?;
            bytes.push(b'\n');
        }
        super::atomic::append_durably(&self.path, &bytes, 0o600, false)
    }

    /// Every event about node `id`, oldest first.
    pub fn history(&self, id: &str) -> io::Result<Vec<Value>> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(vec![]),
            Err(e) => return Err(with_path(e, &self.path)),
        };
        let mut seen = std::collections::HashSet::new();
        Ok(text
            .lines()
            .filter(|l| l.contains(id))
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|v| v.get("id").and_then(Value::as_str) == Some(id))
            .filter(|v| seen.insert(without_time(v)))
            .collect())
    }
}

/// An event as text without its time: two events equal but for the time
/// are one event written twice (a crash between an event and its marker).
fn without_time(event: &Value) -> String {
    let mut event = event.clone();
    if let Some(fields) = event.as_object_mut() {
        fields.remove("at");
    }
    event.to_string()
}

/// How a token appears in the audit trail and listings: never itself.
pub fn token_fingerprint(token: &str) -> String {
    crate::pki::sha256_hex(token.as_bytes())[..12].to_string()
}

/// The user running this process, for the audit trail.
pub fn current_user() -> String {
    std::env::var("SUDO_USER")
        .or_else(|_| std::env::var("USER"))
        .ok()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| user_name(current_uid()))
}

fn current_uid() -> u32 {
    use std::os::unix::fs::MetadataExt;
    // The owner of a file this process just made is its uid.
    std::fs::metadata("/proc/self").map(|m| m.uid()).unwrap_or(u32::MAX)
}

/// The name of `uid` from /etc/passwd, or `uid:N`.
pub fn user_name(uid: u32) -> String {
    std::fs::read_to_string("/etc/passwd")
        .ok()
        .and_then(|passwd| {
            passwd.lines().find_map(|line| {
                let mut fields = line.split(':');
                let name = fields.next()?;
                let id: u32 = fields.nth(1)?.parse().ok()?;
                (id == uid).then(|| name.to_string())
            })
        })
        .unwrap_or_else(|| format!("uid:{uid}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appends_lines_and_finds_a_nodes_history() {
        let dir = tempfile::tempdir().unwrap();
        let audit = Audit::new(dir.path());
        audit.record("announced", json!({"id": "a1", "name": "x"})).unwrap();
        audit.record("announced", json!({"id": "b2"})).unwrap();
        audit.record("admitted", json!({"id": "a1", "by": "token"})).unwrap();
        audit.record("admitted", json!({"id": "a1", "by": "token"})).unwrap();
        let history = audit.history("a1").unwrap();
        assert_eq!(history.len(), 2);
        assert_eq!(history[1]["by"], "token");
        assert!(history[0]["at"].as_str().unwrap().ends_with('Z'));
        assert_eq!(user_name(0), "root");
        assert_eq!(token_fingerprint("t").len(), 12);
    }
}

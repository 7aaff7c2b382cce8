//! The audit trail: the append-only record of who admitted what, one file
//! per writer in `DIR/audit/`: `serve-<host>-<pid>.jsonl` for each server
//! process, `admin-<host>.jsonl` for the admin commands of one host. Two
//! hosts never append to one file: on a network filesystem (NFS, GlusterFS)
//! `O_APPEND` from two clients is not atomic and lines tear. Readers merge
//! every file, and `DIR/audit.jsonl` as earlier versions wrote it, in time
//! order.
//!
//! Invariants: one JSON object per line, appended with a single `write` on an
//! `O_APPEND` descriptor (so lines from the processes of one host never
//! interleave), never through a symlink, and `fsync`'d before the caller answers; never a
//! secret or a token, only a token's fingerprint (the first 12 hex digits of
//! its SHA-256). Events are written before the marker that suppresses them
//! (`delivered/<id>`, a token's use), so a crash may repeat an event but
//! never lose one: readers drop an event equal to an earlier one but for
//! its time.

use std::io;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use super::event::AuditEvent;
use janus_core::durable::with_path;

/// The single trail earlier versions wrote: still read, never written.
pub(crate) const LEGACY_AUDIT_FILE: &str = "audit.jsonl";
/// The audit trail's directory: one file per writer.
pub(crate) const AUDIT_DIR: &str = "audit";

/// The audit trail: this process's file to append to, every file to read.
#[derive(Debug, Clone)]
pub struct Audit {
    dir: PathBuf,
    path: PathBuf,
}

impl Audit {
    /// The trail as an admin command on this host writes it.
    pub fn new(state_dir: &Path) -> Self {
        Self::writing_as(state_dir, &format!("admin-{}", host_name()))
    }

    /// The trail as this server process writes it.
    pub fn for_server(state_dir: &Path) -> Self {
        Self::writing_as(state_dir, &server_writer())
    }

    fn writing_as(state_dir: &Path, writer: &str) -> Self {
        let dir = state_dir.join(AUDIT_DIR);
        let path = dir.join(format!("{writer}.jsonl"));
        Audit { dir, path }
    }

    /// The file this process appends to.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every event of the trail, every writer's, in time order (a file's
    /// own order kept within a second). Unparsable lines are skipped, with
    /// a warning naming the file and how many.
    pub fn events(&self) -> io::Result<Vec<Value>> {
        self.events_matching(|_| true)
    }

    /// Every file of the trail: `audit.jsonl` as earlier versions wrote
    /// it, then each writer's file.
    fn sources(&self) -> io::Result<Vec<PathBuf>> {
        let mut sources = vec![self.dir.parent().unwrap_or(Path::new(".")).join(LEGACY_AUDIT_FILE)];
        match std::fs::read_dir(&self.dir) {
            Ok(entries) => {
                let mut names: Vec<PathBuf> = entries
                    .flatten()
                    .map(|e| e.path())
                    .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
                    .collect();
                names.sort();
                sources.extend(names);
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(with_path(e, &self.dir)),
        }
        Ok(sources)
    }

    /// Offsets at the end of every file of the trail now: [`Audit::follow`]
    /// from them reads only what is appended after (a writer's file made
    /// later is read from its start).
    pub fn end_offsets(&self) -> io::Result<std::collections::HashMap<PathBuf, (u64, u64)>> {
        use std::os::unix::fs::MetadataExt;
        let mut ends = std::collections::HashMap::new();
        for source in self.sources()? {
            match std::fs::metadata(&source) {
                Ok(meta) => {
                    ends.insert(source, (meta.ino(), meta.len()));
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(with_path(e, &source)),
            }
        }
        Ok(ends)
    }

    /// The events appended since the last call (all of them at the first),
    /// in time order: `audit --follow` reads only what each file gained,
    /// from where it stopped, and remembers offsets, not lines. A file
    /// replaced or cut short is read again from its start.
    pub fn follow(
        &self,
        read_up_to: &mut std::collections::HashMap<PathBuf, (u64, u64)>,
    ) -> io::Result<Vec<Value>> {
        use std::io::{Read, Seek};
        use std::os::unix::fs::MetadataExt;
        let mut events = Vec::new();
        for source in self.sources()? {
            let mut file = match std::fs::File::open(&source) {
                Ok(file) => file,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(with_path(e, &source)),
            };
            let meta = file.metadata().map_err(|e| with_path(e, &source))?;
            let (inode, mut from) = read_up_to.get(&source).copied().unwrap_or((meta.ino(), 0));
            if inode != meta.ino() || meta.len() < from {
                from = 0;
            }
            if meta.len() == from {
                continue;
            }
            file.seek(io::SeekFrom::Start(from)).map_err(|e| with_path(e, &source))?;
            let mut bytes = Vec::new();
            file.read_to_end(&mut bytes).map_err(|e| with_path(e, &source))?;
            // Only whole lines: a line being appended is read next time.
            let whole = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |at| at + 1);
            let text = String::from_utf8_lossy(&bytes[..whole]);
            events.extend(text.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()));
            read_up_to.insert(source, (meta.ino(), from + whole as u64));
        }
        events.sort_by_cached_key(|e| {
            e["at"].as_str().and_then(janus_core::clock::rfc3339_millis).unwrap_or(0)
        });
        Ok(events)
    }

    fn events_matching(&self, keep: impl Fn(&str) -> bool) -> io::Result<Vec<Value>> {
        let mut events = Vec::new();
        for source in self.sources()? {
            let text = match janus_core::durable::read_fresh(&source) {
                Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(with_path(e, &source)),
            };
            let before = events.len();
            let mut lines = 0;
            for line in text.lines().filter(|l| keep(l)) {
                lines += 1;
                events.extend(serde_json::from_str::<Value>(line).ok());
            }
            let torn = lines - (events.len() - before);
            if torn > 0 {
                tracing::warn!(
                    file = %source.display(),
                    lines = torn,
                    "skipped audit lines that do not parse (a write a crash or a full disk cut short, or a hand edit)"
                );
            }
        }
        events.sort_by_cached_key(|e| {
            e["at"].as_str().and_then(janus_core::clock::rfc3339_millis).unwrap_or(0)
        });
        Ok(events)
    }

    /// Appends `{"at", "event", ...fields}` durably.
    pub(crate) fn record(&self, event: AuditEvent) -> io::Result<()> {
        self.record_all(&[event])
    }

    /// Appends several events with one write and one `fsync`. Each line is
    /// the event's JSON value with `at` added, keys sorted, as every
    /// version wrote them.
    pub(crate) fn record_all(&self, events: &[AuditEvent]) -> io::Result<()> {
        let at = janus_core::clock::now_rfc3339_millis();
        let mut bytes = Vec::new();
        for event in events {
            let mut line = match serde_json::to_value(event).map_err(io::Error::other)? {
                Value::Object(fields) => fields,
                _ => Map::new(),
            };
            line.insert("at".into(), json!(at));
            serde_json::to_writer(&mut bytes, &Value::Object(line)).map_err(io::Error::other)?;
            bytes.push(b'\n');
        }
        match janus_core::durable::append_grouped(&self.path, bytes.clone(), 0o600) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                janus_core::durable::ensure_private_dir(&self.dir)?;
                janus_core::durable::append_grouped(&self.path, bytes, 0o600)
            }
            other => other,
        }
    }

    /// Every event about node `id`, oldest first, repeats dropped.
    pub fn history(&self, id: &str) -> io::Result<Vec<Value>> {
        let mut seen = std::collections::HashSet::new();
        Ok(self
            .events_matching(|l| l.contains(id))?
            .into_iter()
            .filter(|v| v.get("id").and_then(Value::as_str) == Some(id))
            .filter(|v| seen.insert(without_time(v)))
            .collect())
    }
}

/// This machine's name, as a file name (the pod's name in Kubernetes).
fn host_name() -> String {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .unwrap_or_default();
    let name: String =
        name.trim().chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect();
    if name.is_empty() { "host".into() } else { name }
}

/// A server process's own file: no other process on any host appends to it.
fn server_writer() -> String {
    format!("serve-{}-{}", host_name(), std::process::id())
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

/// How many hex digits of a token's SHA-256 are its fingerprint.
pub(crate) const FINGERPRINT_DIGITS: usize = 12;

/// How a token appears in the audit trail and listings: never itself.
pub fn token_fingerprint(token: &str) -> String {
    janus_core::pki::sha256_hex(token.as_bytes())[..FINGERPRINT_DIGITS].to_string()
}

/// Whether `name` may name an admin in the audit trail: 1 to 64 letters,
/// digits, `.`, `_`, `-` or `@`.
pub fn is_admin_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'@'))
}

/// The user running this process, for the audit trail of a command run
/// without `--as`: sudo's caller, else the login name, else the uid's.
pub fn current_user() -> String {
    std::env::var("SUDO_USER")
        .or_else(|_| std::env::var("USER"))
        .ok()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| user_name(current_uid()))
}

fn current_uid() -> u32 {
    rustix::process::getuid().as_raw()
}

/// The name of `uid` as the system's user database says it (NSS: files,
/// LDAP, sssd), or `uid:N`.
pub(crate) fn user_name(uid: u32) -> String {
    uzers::get_user_by_uid(uid)
        .map(|user| user.name().to_string_lossy().into_owned())
        .unwrap_or_else(|| format!("uid:{uid}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Admitted, DecidedBy, NodeId};

    #[test]
    fn appends_lines_and_finds_a_nodes_history() {
        let dir = tempfile::tempdir().unwrap();
        let audit = Audit::new(dir.path());
        let (a1, b2) = (NodeId::generate(), NodeId::generate());
        let announced = |id: &NodeId| AuditEvent::Announced {
            id: id.clone(),
            name: "x".into(),
            address: "10.0.2.15:9505".into(),
            peer_address: None,
            ca_sha256: None,
            token_presented: false,
        };
        audit.record(announced(&a1)).unwrap();
        audit.record(announced(&b2)).unwrap();
        audit.record(Admitted::new(a1.clone(), DecidedBy::Token, None).into()).unwrap();
        audit.record(Admitted::new(a1.clone(), DecidedBy::Token, None).into()).unwrap();
        let history = audit.history(a1.as_str()).unwrap();
        assert_eq!(history.len(), 2);
        assert_eq!(history[1]["by"], "token");
        assert!(history[0]["at"].as_str().unwrap().ends_with('Z'));
        assert_eq!(user_name(0), "root");
        assert_eq!(user_name(4_000_000_000), "uid:4000000000", "no such user: its number");
        assert_eq!(token_fingerprint("t").len(), 12);
    }
}

//! The admin commands, `nodes` and `tokens`: day-2 operation on the state
//! directory itself, with or without a running server (which sees every
//! change at its next request: files are the source of truth).
//!
//! Invariants: every change goes through the store (durable writes, the
//! tokens lock `serve` takes) and is audited with the user who made it;
//! tokens are printed once, when made, and redacted everywhere after; a
//! check an admin asked for (`--expect-ca-sha256`, `--console`) that fails
//! changes nothing.

use std::fmt::Write as _;
use std::path::Path;

pub mod api;
mod nodes;
pub mod tokens;
pub mod user_data;
mod watch;
pub use watch::follow_decisions;

pub use self::nodes::{
    Decision, NodeDetail, NodeList, approve, forget, history, node_list, nodes, reject, show_node,
};
pub use self::tokens::tokens;

use janus_core::clock::now_unix;
use janus_core::terminal::{self, escape};
use janus_store::{NodeId, NodeRecord, NodeState, Store};

/// The console line a node prints for its CA, and nothing else.
pub const CONSOLE_MARKER: &str = "pki: this node's CA: SHA-256 ";

/// Why an admin command failed; it changed nothing, unless it says so.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    /// The state directory could not be read or written.
    #[error(transparent)]
    State(#[from] std::io::Error),
    /// The store refused (a state format this binary does not know, a
    /// file a decision depends on that cannot be read), or failed.
    #[error(transparent)]
    Store(#[from] janus_store::StoreError),
    /// The command names no node (or no event, or no pending CA).
    #[error("{0}")]
    NotFound(String),
    /// The command's name for a node fits several: they are listed.
    #[error("{0}")]
    Ambiguous(String),
    /// A check the admin asked for failed, or the node's state forbids the change.
    #[error("{0}")]
    Refused(String),
    /// Arguments that cannot be used as given.
    #[error("{0}")]
    Usage(String),
    /// A file given on the command line (`--console`, `--token-file`) cannot be read.
    #[error("{}: {cause}", path.display())]
    Read {
        /// The file.
        path: std::path::PathBuf,
        /// The underlying error.
        cause: std::io::Error,
    },
    /// `tokens revoke` found no single token for what it was given.
    #[error("cannot revoke {key:?}: {cause}")]
    Revoke {
        /// What the admin gave.
        key: String,
        /// The underlying error.
        cause: janus_store::StoreError,
    },
}

type Result<T> = std::result::Result<T, AdminError>;

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

/// The records a command may name a node among.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Among {
    /// Waiting for approval (`nodes approve`).
    Pending,
    /// Not rejected yet (`nodes reject`).
    NotRejected,
    /// Every record (`show`, `history`, `forget`).
    All,
}

impl Among {
    /// Whether a record in `state` is among these.
    fn takes(self, state: NodeState) -> bool {
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
fn find(store: &Store, key: &str, among: Among) -> Result<(NodeId, NodeRecord)> {
    if let Some(node) = NodeId::parse(key) {
        return match store.read_record(&node)? {
            Some(record) => Ok((node, record)),
            None => Err(AdminError::NotFound(format!("there is no node {key} in {}", store.dir().display()))),
        };
    }
    if key.contains('/') || key.contains("..") || key.is_empty() {
        return Err(AdminError::Usage(format!("{:?} is not a node id, id prefix or name", escape(key))));
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
        if (by_prefix || record.name == key) && among.takes(store.state_of(&record)?) {
            matches.push((id, record));
        }
    }
    match matches.len() {
        1 => Ok(matches.remove(0)),
        0 => Err(AdminError::NotFound(no_match(store, key, among)?)),
        n => {
            let mut out = format!("{:?} matches {n} nodes; name one by its id:", escape(key));
            for (id, record) in &matches {
                let _ = write!(out, "\n  {id}  {}  {}", escape(&record.name), ca_sha256_of(record));
            }
            Err(AdminError::Ambiguous(out))
        }
    }
}

/// Why no node matches `key`, with what the person may have meant: ids
/// need 6 hex digits; a name or id one or two letters away.
fn no_match(store: &Store, key: &str, among: Among) -> Result<String> {
    let mut message = format!("no node matches {:?} in {}", escape(key), store.dir().display());
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
            let d = edit_distance(&lower, &candidate.to_ascii_lowercase());
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

/// Levenshtein distance, for "did you mean".
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut previous = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let here = row[j + 1];
            row[j + 1] = (row[j + 1] + 1).min(row[j] + 1).min(previous + usize::from(ca != *cb));
            previous = here;
        }
    }
    row[b.len()]
}

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

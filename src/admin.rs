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

use serde::Serialize;
use serde_json::json;

use crate::cli::{NodesCommand, TokensCommand};
use crate::pki;
use crate::store::audit::{current_user, token_fingerprint};
use crate::store::tokens::{self, TokenMeta, now_unix};
use crate::store::{NodeId, NodeRecord, NodeState, Store};
use crate::terminal::{self, escape, escape_lines};

/// The console line a node prints for its CA, and nothing else.
pub const CONSOLE_MARKER: &str = "pki: this node's CA: SHA-256 ";

type Result<T> = std::result::Result<T, String>;

/// One node as `nodes list --json` gives it: stable field names.
#[derive(Debug, Serialize)]
pub struct NodeView {
    pub id: String,
    pub name: String,
    pub address: String,
    pub peer_address: Option<String>,
    pub ca_sha256: String,
    pub state: NodeState,
    pub announced_at: Option<String>,
    pub admitted_by: Option<String>,
}

fn view(store: &Store, record: &NodeRecord) -> NodeView {
    let admitted_by = NodeId::parse(&record.id)
        .and_then(|id| store.approval(&id))
        .map(|a| if a.user.is_empty() { a.by } else { format!("{} ({})", a.by, a.user) })
        .or_else(|| record.admitted_by.clone());
    NodeView {
        id: record.id.clone(),
        name: record.name.clone(),
        address: record.address.clone(),
        peer_address: record.peer_address.clone(),
        ca_sha256: ca_sha256_of(record),
        state: store.state_of(record),
        announced_at: record.announced_at.clone(),
        admitted_by,
    }
}

/// The record's CA fingerprint; computed for records the reference wrote.
fn ca_sha256_of(record: &NodeRecord) -> String {
    record.ca_sha256.clone().unwrap_or_else(|| {
        pki::first_certificate(record.ca_cert_pem.as_bytes(), "ca_cert_pem")
            .map(|der| pki::sha256_hex(&der))
            .unwrap_or_else(|_| "unparsable".into())
    })
}

/// Lowercase hex, colons and spaces dropped: fingerprints as people paste them.
pub fn normalize_fingerprint(s: &str) -> Result<String> {
    let hex: String = s.chars().filter(|c| !matches!(c, ':' | ' ')).collect::<String>().to_lowercase();
    if hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(hex)
    } else {
        Err(format!("{s:?} is not a SHA-256 fingerprint (64 hex digits)"))
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
        if hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            last = Some(hex);
        }
        rest = after;
    }
    last
}

fn open(state: &Path) -> Result<Store> {
    Store::open_existing(state).map_err(|e| e.to_string())
}

fn find(store: &Store, id: &str) -> Result<(NodeId, NodeRecord)> {
    let node =
        NodeId::parse(id).ok_or_else(|| format!("{id:?} is not a node id (32 lowercase hex digits)"))?;
    match store.read_record(&node).map_err(|e| e.to_string())? {
        Some(record) => Ok((node, record)),
        None => Err(format!("there is no node {id} in {}", store.dir().display())),
    }
}

fn audit(store: &Store, event: &str, fields: serde_json::Value) -> Result<()> {
    store.audit.record(event, fields).map_err(|e| e.to_string())
}

pub fn nodes(state: &Path, command: &NodesCommand) -> Result<String> {
    let store = open(state)?;
    match command {
        NodesCommand::List(args) => list(&store, args),
        NodesCommand::Show(args) => {
            let (_, record) = find(&store, &args.id)?;
            Ok(show(&store, &record))
        }
        NodesCommand::Approve(args) => approve(&store, args),
        NodesCommand::Reject(args) => {
            let (id, record) = find(&store, &args.id)?;
            let user = current_user();
            let ca = ca_sha256_of(&record);
            store.reject(&id, &ca, &user).map_err(|e| e.to_string())?;
            audit(
                &store,
                "rejected",
                json!({"id": id.as_str(), "by": "command", "user": user, "ca_sha256": ca}),
            )?;
            Ok(format!(
                "rejected {id} ({}) and its CA {}: its polls get 404 from now on, and its later \
                 announcements (new ids, same CA) are rejected at once; `nodes forget {id}` lifts that",
                escape(&record.name),
                escape(&ca)
            ))
        }
        NodesCommand::Forget(args) => {
            let (id, _) = find(&store, &args.id)?;
            store.forget(&id).map_err(|e| e.to_string())?;
            audit(&store, "forgotten", json!({"id": id.as_str(), "by": "command", "user": current_user()}))?;
            Ok(format!("forgot {id}"))
        }
        NodesCommand::History(args) => {
            let events = store.audit.history(&args.id).map_err(|e| e.to_string())?;
            if events.is_empty() {
                return Err(format!("the audit trail has no events for {}", args.id));
            }
            Ok(events.iter().map(terminal::json_text).collect::<Vec<_>>().join("\n"))
        }
    }
}

/// `nodes list` with a filter: the matching records, grouped by CA.
fn list(store: &Store, args: &crate::cli::ListArgs) -> Result<String> {
    if !(args.pending || args.admitted || args.rejected) {
        return list_all_streaming(store, args.json);
    }
    // Only the records the filter can show are read: the unsettled ones
    // (no approval, no rejection: names listed, not files opened) for
    // --pending, the rejected ones for --rejected.
    let mut ids = Vec::new();
    if args.pending {
        ids.extend(store.unsettled_ids().map_err(|e| e.to_string())?);
    }
    if args.rejected {
        ids.extend(store.rejected_ids().map_err(|e| e.to_string())?);
    }
    if args.admitted {
        ids.extend(store.approved_ids().map_err(|e| e.to_string())?);
    }
    ids.sort();
    ids.dedup();
    let mut views: Vec<NodeView> = Vec::new();
    let mut problems = Vec::new();
    for id in ids {
        match store.read_record(&id) {
            Ok(Some(record)) => views.push(view(store, &record)),
            Ok(None) => {}
            Err(e) => problems.push(e.to_string()),
        }
    }
    let wanted = |s: NodeState| {
        (args.pending && s == NodeState::Pending)
            || (args.admitted && s == NodeState::Admitted)
            || (args.rejected && s == NodeState::Rejected)
    };
    views.retain(|v| wanted(v.state));
    // Re-announcements of one node share its CA: keep them together, oldest first.
    views.sort_by(|a, b| (&a.ca_sha256, &a.announced_at, &a.id).cmp(&(&b.ca_sha256, &b.announced_at, &b.id)));
    let mut out = String::new();
    for problem in problems {
        eprintln!("janus-registration: skipped an unreadable record: {}", escape(&problem));
    }
    if args.json {
        for v in &views {
            let _ = writeln!(out, "{}", terminal::json_text(v));
        }
        return Ok(out.trim_end().to_string());
    }
    let _ = writeln!(out, "{}", list_header());
    let mut previous: Option<&str> = None;
    for v in &views {
        if previous.is_some() && previous != Some(v.ca_sha256.as_str()) {
            out.push('\n');
        }
        let same = previous == Some(v.ca_sha256.as_str());
        previous = Some(&v.ca_sha256);
        let _ = writeln!(out, "{}", list_row(v, same));
    }
    let _ = write!(out, "{} node(s)", views.len());
    Ok(out)
}

/// `nodes list` of every record: each line printed as its record is read,
/// so the first lines of a million appear at once (unsorted, ungrouped).
fn list_all_streaming(store: &Store, json: bool) -> Result<String> {
    use std::io::Write;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    if !json {
        let _ = writeln!(out, "{}", list_header());
    }
    let mut count = 0usize;
    let problems = store
        .scan(|_, record: NodeRecord| {
            let v = view(store, &record);
            let line = if json { terminal::json_text(&v) } else { list_row(&v, false) };
            // A closed pipe (`| head`) ends the listing quietly.
            if writeln!(out, "{line}").is_ok() {
                count += 1;
            }
        })
        .map_err(|e| e.to_string())?;
    let _ = out.flush();
    for problem in problems {
        eprintln!("janus-registration: skipped an unreadable record: {}", escape(&problem));
    }
    Ok(if json { String::new() } else { format!("{count} node(s)") })
}

fn list_header() -> String {
    format!(
        "{:<32}  {:<20}  {:<22}  {:<22}  {:<8}  {:>5}  CA SHA-256",
        "ID", "NAME", "ADDRESS", "PEER", "STATE", "AGE"
    )
}

/// One row of `nodes list`, every field from the node escaped.
fn list_row(v: &NodeView, same_ca: bool) -> String {
    format!(
        "{:<32}  {:<20}  {:<22}  {:<22}  {:<8}  {:>5}  {}{}",
        escape(&v.id),
        escape(&v.name),
        escape(&v.address),
        escape(v.peer_address.as_deref().unwrap_or("-")),
        format!("{:?}", v.state).to_lowercase(),
        age(v.announced_at.as_deref()),
        escape(&v.ca_sha256),
        if same_ca { "  (same CA: re-announced)" } else { "" }
    )
}

fn approve(store: &Store, args: &crate::cli::ApproveArgs) -> Result<String> {
    let user = current_user();
    if let Some(hex) = &args.ca_sha256 {
        let want = normalize_fingerprint(hex)?;
        let (records, _) = store.list_records().map_err(|e| e.to_string())?;
        if store.is_ca_rejected(&want) && !args.force {
            return Err(rejected_ca_refusal(&want));
        }
        // With --force, the records rejected only because their CA was are
        // approved too: what the admin asked for.
        let approvable = |r: &NodeRecord| match store.state_of(r) {
            NodeState::Pending => true,
            NodeState::Rejected => args.force && rejected_for_ca_only(store, r),
            NodeState::Admitted => false,
        };
        let matching: Vec<&NodeRecord> =
            records.iter().filter(|r| approvable(r) && ca_sha256_of(r) == want).collect();
        if matching.is_empty() {
            return Err(format!("no pending node has the CA SHA-256 {want}"));
        }
        let mut out = String::new();
        for record in matching {
            let id = NodeId::parse(&record.id).ok_or("a record with a malformed id")?;
            store.approve(&id, "command", &user).map_err(|e| e.to_string())?;
            audit(
                store,
                "admitted",
                json!({"id": record.id, "by": "command", "user": user, "checked_ca_sha256": want}),
            )?;
            let _ = writeln!(out, "approved {} ({})", escape(&record.id), escape(&record.name));
        }
        return Ok(out.trim_end().to_string());
    }
    let id = args.id.as_deref().ok_or("name the node to approve, or give --ca-sha256")?;
    let (node, record) = find(store, id)?;
    if store.is_rejected(&node) && !(args.force && rejected_for_ca_only(store, &record)) {
        return Err(format!("{id} was rejected; the node announces again with a new id, approve that one"));
    }
    let have = ca_sha256_of(&record);
    if store.is_ca_rejected(&have) && !args.force {
        return Err(rejected_ca_refusal(&have));
    }
    let expected = match (&args.expect_ca_sha256, &args.console) {
        (Some(hex), _) => Some(normalize_fingerprint(hex)?),
        (None, Some(path)) => {
            let log = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
            Some(
                console_fingerprint(&log)
                    .ok_or_else(|| format!("{} shows no line `{CONSOLE_MARKER}<hex>` yet", path.display()))?,
            )
        }
        (None, None) => None,
    };
    if let Some(want) = &expected
        && *want != have
    {
        return Err(format!(
            "refusing: {id}'s CA is SHA-256 {have}, but the node's console shows {want} - not that node"
        ));
    }
    store.approve(&node, "command", &user).map_err(|e| e.to_string())?;
    audit(
        store,
        "admitted",
        json!({"id": id, "by": "command", "user": user, "checked_ca_sha256": expected}),
    )?;
    Ok(match expected {
        Some(_) => {
            format!(
                "approved {id} ({}): its CA matches; it gets the trust at its next poll",
                escape(&record.name)
            )
        }
        None => format!(
            "approved {id} ({}) without a fingerprint check; it gets the trust at its next poll",
            escape(&record.name)
        ),
    })
}

pub fn tokens(state: &Path, command: &TokensCommand) -> Result<String> {
    let store = open(state)?;
    match command {
        TokensCommand::Add(args) => {
            if args.count == 0 || args.uses == Some(0) {
                return Err("--count and --uses must be at least 1".into());
            }
            let made: Vec<String> = (0..args.count).map(|_| tokens::generate()).collect();
            let user = current_user();
            let meta = TokenMeta {
                expires_at: args.expires_in.map(|d| now_unix() + d.as_secs() as i64),
                uses: args.uses.filter(|&n| n > 1),
                added_at: crate::clock::now_rfc3339(),
                added_by: user.clone(),
            };
            store.tokens.add(&made, &meta).map_err(|e| e.to_string())?;
            for t in &made {
                audit(
                    &store,
                    "token_added",
                    json!({"token_sha256_prefix": token_fingerprint(t), "expires_at": meta.expires_at.map(crate::clock::unix_to_rfc3339), "uses": args.uses.unwrap_or(1), "user": user}),
                )?;
            }
            Ok(made.join("\n"))
        }
        TokensCommand::List(args) => {
            store.tokens.sweep(&store.audit).map_err(|e| e.to_string())?;
            let list = store.tokens.list().map_err(|e| e.to_string())?;
            if args.json {
                return Ok(list.iter().map(terminal::json_text).collect::<Vec<_>>().join("\n"));
            }
            let mut out = format!(
                "{:<10}  {:<12}  {:<20}  {:>9}  ADDED BY\n",
                "TOKEN", "SHA-256", "EXPIRES", "USES LEFT"
            );
            for t in &list {
                let expires =
                    t.expires_at.map(crate::clock::unix_to_rfc3339).unwrap_or_else(|| "never".into());
                let _ = writeln!(
                    out,
                    "{:<10}  {:<12}  {:<20}  {:>9}  {}{}",
                    escape(&t.shown),
                    t.sha256_prefix,
                    expires,
                    t.uses_left,
                    if t.added_by.is_empty() { "-".into() } else { escape(&t.added_by) },
                    if t.weak { "  WEAK" } else { "" }
                );
            }
            let _ = write!(out, "{} token(s)", list.len());
            let weak = list.iter().filter(|t| t.weak).count();
            if weak > 0 {
                let _ = write!(
                    out,
                    "\nwarning: {weak} token(s) shorter than {} characters (WEAK): guessable; make tokens with `tokens add`",
                    tokens::WEAK_BELOW
                );
            }
            Ok(out)
        }
        TokensCommand::Revoke(args) => {
            let fingerprint = store
                .tokens
                .revoke(&args.token)
                .map_err(|e| format!("cannot revoke {:?}: {e}", args.token))?;
            audit(
                &store,
                "token_revoked",
                json!({"token_sha256_prefix": fingerprint, "user": current_user()}),
            )?;
            Ok(format!("revoked the token with SHA-256 {fingerprint}…"))
        }
    }
}

/// Rejected at its announcement because its CA was, not by a command.
fn rejected_for_ca_only(store: &Store, record: &NodeRecord) -> bool {
    NodeId::parse(&record.id)
        .and_then(|id| store.rejection(&id))
        .is_some_and(|r| r.by == crate::store::BY_REJECTED_CA)
}

fn rejected_ca_refusal(ca: &str) -> String {
    format!(
        "refusing: the CA SHA-256 {ca} was rejected (`nodes reject`); approve it anyway with --force, \
         or lift the rejection with `nodes forget` of the rejected record"
    )
}

/// `nodes show`: what an admin checks before approving, every field from
/// the node escaped, the fingerprint computed from the stored PEM.
fn show(store: &Store, record: &NodeRecord) -> String {
    let v = view(store, record);
    let mut out = String::new();
    let field = |out: &mut String, label: &str, value: &str| {
        let _ = writeln!(out, "{label:<14}{}", escape(value));
    };
    field(&mut out, "id:", &v.id);
    field(&mut out, "name:", &v.name);
    field(&mut out, "address:", &v.address);
    field(&mut out, "peer address:", v.peer_address.as_deref().unwrap_or("-"));
    field(&mut out, "state:", &format!("{:?}", v.state).to_lowercase());
    field(&mut out, "announced:", v.announced_at.as_deref().unwrap_or("-"));
    field(&mut out, "admitted by:", v.admitted_by.as_deref().unwrap_or("-"));
    let strict = pki::NodeCa::check(&record.ca_cert_pem).is_ok();
    match pki::first_certificate(record.ca_cert_pem.as_bytes(), "ca_cert_pem") {
        Ok(der) => {
            let computed = pki::sha256_hex(&der);
            if let Ok(cert) = pki::parse(&der, "ca_cert_pem") {
                field(&mut out, "CA subject:", &cert.subject().to_string());
                let validity = cert.validity();
                let now = now_unix();
                let flag = if validity.not_after.timestamp() < now {
                    "  EXPIRED"
                } else if validity.not_before.timestamp() > now {
                    "  NOT YET VALID"
                } else {
                    ""
                };
                let range = format!("{} to {}{flag}", validity.not_before, validity.not_after);
                field(&mut out, "CA valid:", &range);
            }
            field(&mut out, "CA SHA-256:", &computed);
            if let Some(stored) = record.ca_sha256.as_deref().filter(|s| *s != computed) {
                let _ = writeln!(
                    out,
                    "WARNING: the record's stored ca_sha256 ({}) is not its certificate's; the line above is \
                     computed from the stored PEM",
                    escape(stored)
                );
            }
            if store.is_ca_rejected(&computed) {
                let _ = writeln!(out, "WARNING: this CA was rejected (`nodes reject`)");
            }
            let _ = writeln!(out, "The node's console shows: {CONSOLE_MARKER}{computed}");
        }
        Err(e) => {
            let _ = writeln!(
                out,
                "WARNING: the stored ca_cert_pem holds no certificate: {}",
                escape(&e.to_string())
            );
        }
    }
    if !strict {
        let _ = writeln!(
            out,
            "WARNING: the stored ca_cert_pem is not exactly one CA certificate block (shown escaped)"
        );
    }
    out.push_str(&escape_lines(record.ca_cert_pem.trim_end()));
    out
}

/// `3m`, `5h`, `2d` since an RFC 3339 time.
fn age(at: Option<&str>) -> String {
    let Some(t) =
        at.and_then(|t| time::OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339).ok())
    else {
        return "-".into();
    };
    let secs = (now_unix() - t.unix_timestamp()).max(0);
    match secs {
        s if s < 120 => format!("{s}s"),
        s if s < 7200 => format!("{}m", s / 60),
        s if s < 172_800 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    }
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

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

use crate::pki;
use crate::store::audit::{current_user, token_fingerprint};
use crate::store::tokens::{self, TokenMeta, now_unix};
use crate::store::{NodeId, NodeRecord, NodeState, Store};
use crate::terminal::{self, escape, escape_lines};

/// The console line a node prints for its CA, and nothing else.
pub const CONSOLE_MARKER: &str = "pki: this node's CA: SHA-256 ";

/// Why an admin command failed; it changed nothing, unless it says so.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    /// The state directory could not be read or written.
    #[error(transparent)]
    State(#[from] std::io::Error),
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
    /// The serial-console log given to `--console` cannot be read.
    #[error("{}: {source}", path.display())]
    Console {
        /// The file.
        path: std::path::PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// `tokens revoke` found no single token for what it was given.
    #[error("cannot revoke {key:?}: {source}")]
    Revoke {
        /// What the admin gave.
        key: String,
        /// The underlying error.
        source: std::io::Error,
    },
}

type Result<T> = std::result::Result<T, AdminError>;

/// `nodes` subcommands, as the command line gives them.
#[derive(Debug, Clone)]
pub enum NodesCommand {
    /// A table (or JSON lines) of nodes.
    List(ListFilter),
    /// One node's record in full.
    Show {
        /// The node: its id, a unique id prefix, or its unique name.
        node: String,
        /// JSON instead of text.
        json: bool,
    },
    /// Admit one node, or every pending node of one CA.
    Approve(Approval),
    /// Refuse a node and its CA.
    Reject {
        /// The node: its id, a unique id prefix, or its unique name.
        node: String,
    },
    /// Remove a node's record and markers.
    Forget {
        /// The node: its id, a unique id prefix, or its unique name.
        node: String,
    },
    /// A node's audit events.
    History {
        /// The node: its id, a unique id prefix, or its unique name.
        node: String,
        /// JSON instead of text.
        json: bool,
    },
}

/// Which nodes `nodes list` shows: every one when no filter is set.
#[derive(Debug, Clone, Default)]
pub struct ListFilter {
    /// Only nodes waiting for approval.
    pub pending: bool,
    /// Only admitted nodes.
    pub admitted: bool,
    /// Only rejected nodes.
    pub rejected: bool,
    /// One JSON object per node and line instead of a table.
    pub json: bool,
}

/// `nodes approve`: the node (or `ca_sha256`), and the check made first.
#[derive(Debug, Clone, Default)]
pub struct Approval {
    /// The node: its id, a unique id prefix, or its unique pending name.
    pub node: Option<String>,
    /// Refuse unless the node's CA has this SHA-256.
    pub expect_ca_sha256: Option<String>,
    /// Approve without any check of the node's CA.
    pub unchecked: bool,
    /// A serial-console log whose last CA line must match the node's CA.
    pub console: Option<std::path::PathBuf>,
    /// Approve every pending node with this CA SHA-256 instead of one node.
    pub ca_sha256: Option<String>,
    /// Approve even when the node's CA was rejected.
    pub force: bool,
}

/// `tokens` subcommands, as the command line gives them.
#[derive(Debug, Clone)]
pub enum TokensCommand {
    /// Make `count` tokens and print them, once.
    Add(NewTokens),
    /// The tokens, redacted.
    List {
        /// JSON instead of text.
        json: bool,
    },
    /// Remove the one token `key` names.
    Revoke {
        /// What the admin gave.
        key: String,
    },
}

/// What `tokens add` makes.
#[derive(Debug, Clone)]
pub struct NewTokens {
    /// How many tokens.
    pub count: usize,
    /// What they are for, shown by `tokens list`.
    pub description: Option<String>,
    /// They stop admitting this long from now.
    pub expires_in: Option<std::time::Duration>,
    /// Nodes each token admits (1 when absent).
    pub uses: Option<u32>,
}

/// One node as `nodes list --json` gives it: stable field names.
#[derive(Debug, Serialize)]
pub struct NodeView {
    /// The node id.
    pub id: String,
    /// The name the node announced.
    pub name: String,
    /// The address the node announced.
    pub address: String,
    /// The address its announcement came from.
    pub peer_address: Option<String>,
    /// The SHA-256 of its CA certificate (DER), as its console prints it.
    pub ca_sha256: String,
    /// Pending, admitted or rejected.
    pub state: NodeState,
    /// When it announced (RFC 3339), if the record says.
    pub announced_at: Option<String>,
    /// Who or what admitted it.
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
        Err(AdminError::Usage(format!("{s:?} is not a SHA-256 fingerprint (64 hex digits)")))
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
    Ok(Store::open_existing(state)?)
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
        Among::NotRejected | Among::All => {
            let mut all = Vec::new();
            store.scan(|id, _: serde::de::IgnoredAny| all.push(id))?;
            all
        }
    };
    let applies = |record: &NodeRecord| match among {
        Among::Pending => store.state_of(record) == NodeState::Pending,
        Among::NotRejected => store.state_of(record) != NodeState::Rejected,
        Among::All => true,
    };
    let lower = key.to_ascii_lowercase();
    let by_prefix = key.len() >= 6 && lower.bytes().all(|b| b.is_ascii_hexdigit());
    let mut matches = Vec::new();
    for id in candidates {
        if by_prefix && !id.as_str().starts_with(&lower) {
            continue;
        }
        let Ok(Some(record)) = store.read_record(&id) else { continue };
        if (by_prefix || record.name == key) && applies(&record) {
            matches.push((id, record));
        }
    }
    match matches.len() {
        1 => Ok(matches.remove(0)),
        0 => Err(AdminError::NotFound(format!(
            "no node matches {:?} in {}",
            escape(key),
            store.dir().display()
        ))),
        n => {
            let mut out = format!("{:?} matches {n} nodes; name one by its id:", escape(key));
            for (id, record) in &matches {
                let _ = write!(out, "\n  {id}  {}  {}", escape(&record.name), ca_sha256_of(record));
            }
            Err(AdminError::Ambiguous(out))
        }
    }
}

fn audit(store: &Store, event: &str, fields: serde_json::Value) -> Result<()> {
    Ok(store.audit.record(event, fields)?)
}

/// Runs a `nodes` subcommand; `Ok` is what to print (empty when it printed already).
pub fn nodes(state: &Path, command: &NodesCommand) -> Result<String> {
    let store = open(state)?;
    match command {
        NodesCommand::List(args) => list(&store, args),
        NodesCommand::Show { node, json } => {
            let (_, record) = find(&store, node, Among::All)?;
            Ok(if *json { show_json(&store, &record) } else { show(&store, &record) })
        }
        NodesCommand::Approve(args) => approve(&store, args),
        NodesCommand::Reject { node } => {
            let (id, record) = find(&store, node, Among::NotRejected)
                .or_else(|e| find(&store, node, Among::All).map_err(|_| e))?;
            if store.is_rejected(&id) {
                return Ok(format!("{id} ({}) is already rejected; nothing changed", escape(&record.name)));
            }
            let user = current_user();
            let ca = ca_sha256_of(&record);
            store.reject(&id, &ca, &user)?;
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
        NodesCommand::Forget { node } => {
            let (id, _) = find(&store, node, Among::All)?;
            store.forget(&id)?;
            audit(&store, "forgotten", json!({"id": id.as_str(), "by": "command", "user": current_user()}))?;
            Ok(format!("forgot {id}"))
        }
        NodesCommand::History { node, json } => {
            // A forgotten node has events but no record: its id still works.
            let id = match NodeId::parse(node) {
                Some(id) => id,
                None => find(&store, node, Among::All)?.0,
            };
            let events = store.audit.history(id.as_str())?;
            if events.is_empty() {
                return Err(AdminError::NotFound(format!("the audit trail has no events for {id}")));
            }
            let render = |e: &serde_json::Value| if *json { terminal::json_text(e) } else { event_line(e) };
            Ok(events.iter().map(render).collect::<Vec<_>>().join("\n"))
        }
    }
}

/// `nodes list` with a filter: the matching records, grouped by CA.
fn list(store: &Store, args: &ListFilter) -> Result<String> {
    if !(args.pending || args.admitted || args.rejected) {
        return list_all_streaming(store, args.json);
    }
    // Only the records the filter can show are read: the unsettled ones
    // (no approval, no rejection: names listed, not files opened) for
    // --pending, the rejected ones for --rejected.
    let mut ids = Vec::new();
    if args.pending {
        ids.extend(store.unsettled_ids()?);
    }
    if args.rejected {
        ids.extend(store.rejected_ids()?);
    }
    if args.admitted {
        ids.extend(store.approved_ids()?);
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
    let problems = store.scan(|_, record: NodeRecord| {
        let v = view(store, &record);
        let line = if json { terminal::json_text(&v) } else { list_row(&v, false) };
        // A closed pipe (`| head`) ends the listing quietly.
        if writeln!(out, "{line}").is_ok() {
            count += 1;
        }
    })?;
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

fn approve(store: &Store, args: &Approval) -> Result<String> {
    let user = current_user();
    if let Some(hex) = &args.ca_sha256 {
        let want = normalize_fingerprint(hex)?;
        let (records, _) = store.list_records()?;
        if store.is_ca_rejected(&want) && !args.force {
            return Err(AdminError::Refused(rejected_ca_refusal(&want)));
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
            let approved: Vec<&str> = records
                .iter()
                .filter(|r| store.state_of(r) == NodeState::Admitted && ca_sha256_of(r) == want)
                .map(|r| r.id.as_str())
                .collect();
            if !approved.is_empty() {
                return Ok(format!("already approved ({}); nothing changed", approved.join(", ")));
            }
            return Err(AdminError::NotFound(format!("no pending node has the CA SHA-256 {want}")));
        }
        let mut out = String::new();
        for record in matching {
            let id = NodeId::parse(&record.id).ok_or_else(|| {
                AdminError::NotFound(format!("a record with a malformed id: {:?}", escape(&record.id)))
            })?;
            store.approve(&id, "command", &user)?;
            audit(
                store,
                "admitted",
                json!({"id": record.id, "by": "command", "user": user, "checked_ca_sha256": want}),
            )?;
            let _ = writeln!(out, "approved {} ({})", escape(&record.id), escape(&record.name));
        }
        return Ok(out.trim_end().to_string());
    }
    let id = args
        .node
        .as_deref()
        .ok_or_else(|| AdminError::Usage("name the node to approve, or give --ca-sha256".into()))?;
    let (node, record) = find(store, id, Among::Pending).or_else(|e| match NodeId::parse(id) {
        Some(_) => Err(e),
        // An admitted node named again: say so rather than "no match".
        None => find(store, id, Among::All).map_err(|_| e),
    })?;
    let id = node.as_str();
    if store.is_approved(&node) && !store.poll_refused(&node) {
        return Ok(format!("{id} ({}) is already approved; nothing changed", escape(&record.name)));
    }
    if store.is_rejected(&node) && !(args.force && rejected_for_ca_only(store, &record)) {
        return Err(AdminError::Refused(format!(
            "{id} was rejected; the node announces again with a new id, approve that one"
        )));
    }
    let have = ca_sha256_of(&record);
    if store.is_ca_rejected(&have) && !args.force {
        return Err(AdminError::Refused(rejected_ca_refusal(&have)));
    }
    if args.expect_ca_sha256.is_none() && args.console.is_none() && !args.unchecked {
        return Err(AdminError::Usage(format!(
            "approving {id} needs a check of its CA against the node's console: --console LOG, or \
             --expect-ca-sha256 HEX (the line `{CONSOLE_MARKER}<hex>` on its console), or --unchecked \
             to trust whoever announced under that name"
        )));
    }
    let expected = match (&args.expect_ca_sha256, &args.console) {
        (Some(hex), _) => Some(normalize_fingerprint(hex)?),
        (None, Some(path)) => {
            let log =
                std::fs::read(path).map_err(|source| AdminError::Console { path: path.clone(), source })?;
            Some(console_fingerprint(&log).ok_or_else(|| {
                AdminError::Refused(format!("{} shows no line `{CONSOLE_MARKER}<hex>` yet", path.display()))
            })?)
        }
        (None, None) => None,
    };
    if let Some(want) = &expected
        && *want != have
    {
        return Err(AdminError::Refused(format!(
            "refusing: {id}'s CA is SHA-256 {have}, but the node's console shows {want} - not that node"
        )));
    }
    store.approve(&node, "command", &user)?;
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

/// Runs a `tokens` subcommand; `Ok` is what to print.
pub fn tokens(state: &Path, command: &TokensCommand) -> Result<String> {
    let store = open(state)?;
    match command {
        TokensCommand::Add(args) => {
            if args.count == 0 || args.uses == Some(0) {
                return Err(AdminError::Usage("--count and --uses must be at least 1".into()));
            }
            let made: Vec<String> = (0..args.count).map(|_| tokens::generate()).collect();
            let user = current_user();
            let meta = TokenMeta {
                description: args.description.clone(),
                expires_at: args.expires_in.map(|d| now_unix() + d.as_secs() as i64),
                uses: args.uses.filter(|&n| n > 1),
                added_at: crate::clock::now_rfc3339(),
                added_by: user.clone(),
            };
            store.tokens.add(&made, &meta)?;
            for t in &made {
                audit(
                    &store,
                    "token_added",
                    json!({"token_sha256_prefix": token_fingerprint(t), "expires_at": meta.expires_at.map(crate::clock::unix_to_rfc3339), "uses": args.uses.unwrap_or(1), "user": user}),
                )?;
            }
            Ok(made.join("\n"))
        }
        TokensCommand::List { json } => {
            store.tokens.sweep(&store.audit)?;
            let list = store.tokens.list()?;
            if *json {
                return Ok(list.iter().map(terminal::json_text).collect::<Vec<_>>().join("\n"));
            }
            let mut out = format!(
                "{:<10}  {:<12}  {:<20}  {:>9}  {:<12}  DESCRIPTION\n",
                "TOKEN", "SHA-256", "EXPIRES", "USES LEFT", "ADDED BY"
            );
            for t in &list {
                let expires = t.expires_at.clone().unwrap_or_else(|| "never".into());
                let _ = writeln!(
                    out,
                    "{:<10}  {:<12}  {:<20}  {:>9}  {:<12}  {}{}",
                    escape(&t.shown),
                    t.sha256_prefix,
                    expires,
                    t.uses_left,
                    if t.added_by.is_empty() { "-".into() } else { escape(&t.added_by) },
                    escape(t.description.as_deref().unwrap_or("-")),
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
        TokensCommand::Revoke { key } => {
            let fingerprint =
                store.tokens.revoke(key).map_err(|source| AdminError::Revoke { key: key.clone(), source })?;
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

/// One audit event for people: time, event, then the other fields as
/// `key=value`, every value escaped.
fn event_line(event: &serde_json::Value) -> String {
    let at = event["at"].as_str().unwrap_or("-");
    let kind = event["event"].as_str().unwrap_or("-");
    let mut line = format!("{}  {:<16}", escape(at), escape(kind));
    if let Some(fields) = event.as_object() {
        for (key, value) in fields.iter().filter(|(k, _)| !matches!(k.as_str(), "at" | "event")) {
            let value = match value {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            let _ = write!(line, " {key}={}", escape(&value));
        }
    }
    line
}

/// `nodes show --json`: the list's fields and what `show` computes.
fn show_json(store: &Store, record: &NodeRecord) -> String {
    let mut value = serde_json::to_value(view(store, record)).unwrap_or_default();
    if let Ok(der) = pki::first_certificate(record.ca_cert_pem.as_bytes(), "ca_cert_pem") {
        let computed = pki::sha256_hex(&der);
        value["ca_sha256"] = json!(computed);
        value["stored_ca_sha256_matches"] = json!(record.ca_sha256.as_deref().is_none_or(|s| s == computed));
        if let Ok(cert) = pki::parse(&der, "ca_cert_pem") {
            let validity = cert.validity();
            value["ca_subject"] = json!(cert.subject().to_string());
            value["ca_not_before"] = json!(crate::clock::unix_to_rfc3339(validity.not_before.timestamp()));
            value["ca_not_after"] = json!(crate::clock::unix_to_rfc3339(validity.not_after.timestamp()));
        }
        value["ca_rejected"] = json!(store.is_ca_rejected(&computed));
    }
    value["ca_cert_pem"] = json!(record.ca_cert_pem);
    terminal::json_text(&value)
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

/// `audit`: every writer's events merged in time order, from `since` ago
/// on; with `follow`, new events as they are written, until interrupted
/// (checked every second; an event is printed once).
pub fn audit_trail(state: &Path, since: Option<std::time::Duration>, follow: bool, json: bool) -> Result<()> {
    use std::io::Write;
    let store = open(state)?;
    let from = since.map(|d| (now_unix() - d.as_secs() as i64) as i128 * 1000);
    let mut printed = std::collections::HashSet::new();
    loop {
        let events = store.audit.events()?;
        let mut out = std::io::stdout().lock();
        for event in events {
            let at = event["at"].as_str().and_then(crate::clock::rfc3339_millis).unwrap_or(0);
            if from.is_some_and(|from| at < from) || !printed.insert(event.to_string()) {
                continue;
            }
            let line = if json { terminal::json_text(&event) } else { event_line(&event) };
            if writeln!(out, "{line}").is_err() {
                return Ok(()); // the reader went away (`| head`)
            }
        }
        let _ = out.flush();
        if !follow {
            return Ok(());
        }
        std::thread::sleep(std::time::Duration::from_secs(1));
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

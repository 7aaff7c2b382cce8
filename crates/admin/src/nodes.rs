//! `nodes`: list, show, approve, reject, forget and history, on records
//! named by id, id prefix or name ([`super::find`]).

use std::fmt::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::{
    AdminError, Among, ApproveArgs, CONSOLE_MARKER, IdArg, ListArgs, NodeView, NodesCommand, Result,
    ShowArgs, ca_sha256_of, console_fingerprint, event_line, find, normalize_fingerprint, open, open_to_read,
    view,
};
use janus_core::clock::now_unix;
use janus_core::pki;
use janus_core::terminal::{self, escape, escape_lines};
use janus_store::audit::current_user;
use janus_store::{Admitted, NodeId, NodeRecord, NodeState, Store};

/// What `nodes approve`, `reject` and `forget` did: printed by the CLI,
/// answered by the admin API.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Decision {
    /// Whether anything was written (false: it was so already).
    pub changed: bool,
    /// What was done and what follows from it, for people (escaped).
    pub said: String,
    /// The nodes it concerns, by id: what a caller shows next, never
    /// resolved again by name.
    pub ids: Vec<String>,
}

impl Decision {
    fn changed(said: String, ids: Vec<String>) -> Self {
        Decision { changed: true, said, ids }
    }

    fn unchanged(said: String, ids: Vec<String>) -> Self {
        Decision { changed: false, said, ids }
    }
}

/// One node as `nodes show --json` gives it: the list's fields and what
/// is computed from the stored CA certificate.
#[derive(Debug, Clone, Serialize)]
pub struct NodeDetail {
    /// What `nodes list --json` says of it (`ca_sha256` computed from the PEM).
    #[serde(flatten)]
    pub view: NodeView,
    /// Whether the record's stored fingerprint is its certificate's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stored_ca_sha256_matches: Option<bool>,
    /// The CA certificate's subject, as the certificate says it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ca_subject: Option<String>,
    /// Its validity (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ca_not_before: Option<String>,
    /// Its validity's end (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ca_not_after: Option<String>,
    /// Whether its CA is rejected (`nodes reject`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ca_rejected: Option<bool>,
}

/// Runs a `nodes` subcommand on the state directory; `Ok` is what to print
/// (empty when it printed already).
pub fn nodes(state: &Path, command: &NodesCommand) -> Result<String> {
    let store = match command {
        NodesCommand::List(_) | NodesCommand::Show(_) | NodesCommand::History(_) | NodesCommand::Watch(_) => {
            open_to_read(state)?
        }
        _ => open(state)?,
    };
    match command {
        NodesCommand::List(args) => list(&store, args),
        NodesCommand::Watch(args) => super::watch::watch(&store, args),
        NodesCommand::Show(ShowArgs { id: node, json }) => {
            let (_, record) = find(&store, node, Among::All)?;
            Ok(if *json { terminal::json_text(&detail(&store, &record)?) } else { show(&store, &record)? })
        }
        NodesCommand::Approve(args) => Ok(approve(&store, args)?.said),
        NodesCommand::Reject(IdArg { id: node }) => Ok(reject(&store, node)?.said),
        NodesCommand::Forget(IdArg { id: node }) => Ok(forget(&store, node)?.said),
        NodesCommand::History(ShowArgs { id: node, json }) => {
            let events = history(&store, node)?;
            let render = |e: &serde_json::Value| if *json { terminal::json_text(e) } else { event_line(e) };
            Ok(events.iter().map(render).collect::<Vec<_>>().join("\n"))
        }
    }
}

/// `nodes show`: the node `key` names (id, prefix or name), among all.
pub fn show_node(store: &Store, key: &str) -> Result<NodeDetail> {
    let (_, record) = find(store, key, Among::All)?;
    detail(store, &record)
}

/// `nodes reject`: the node `key` names and its CA, rejected in the caller's name.
pub fn reject(store: &Store, key: &str) -> Result<Decision> {
    let (id, record) =
        find(store, key, Among::NotRejected).or_else(|e| find(store, key, Among::All).map_err(|_| e))?;
    let ca = ca_sha256_of(&record);
    let ids = vec![id.to_string()];
    // Rejected, and its CA with it: unless that was lifted since (a
    // `nodes forget` of the record the CA was rejected with), and
    // then this rejects the CA again.
    let ca_rejected = !janus_core::pki::is_hex(&ca, 64) || store.is_ca_rejected(&ca)?;
    if store.rejected_now(&id)? && ca_rejected {
        return Ok(Decision::unchanged(
            format!("{id} ({}) is already rejected; nothing changed", escape(&record.name)),
            ids,
        ));
    }
    let was_admitted = store.state_of(&record)? == NodeState::Admitted;
    store.reject(&id, &ca, &current_user())?;
    if was_admitted {
        // Its trust went out (in the answer, or at a poll): a
        // rejection cannot call it back, and the node, trusted, never
        // announces again, so no undo is offered for it.
        return Ok(Decision::changed(
            format!(
                "rejected {id} ({}) and its CA {}: it was admitted, so it may hold the fleet's trust \
                 already, which a rejection cannot take back (rotate the fleet's issuing CA to revoke \
                 it); its polls get 404 from now on, and announcements of its CA are rejected at once",
                escape(&record.name),
                escape(&ca)
            ),
            ids,
        ));
    }
    Ok(Decision::changed(
        format!(
            "rejected {id} ({}) and its CA {}: its polls get 404 from now on, and its later \
             announcements (new ids, same CA) are rejected at once; `nodes forget {id}` lifts that",
            escape(&record.name),
            escape(&ca)
        ),
        ids,
    ))
}

/// `nodes forget`: every file of the node `key` names, in the caller's name.
pub fn forget(store: &Store, key: &str) -> Result<Decision> {
    let (id, _) = find(store, key, Among::All)?;
    let ids = vec![id.to_string()];
    Ok(match store.forget(&id, &current_user())? {
        Some(ca) => Decision::changed(
            format!(
                "forgot {id}, the record you rejected, and lifted the rejection of its CA {}: its next \
                 announcement waits for approval again",
                escape(&ca)
            ),
            ids,
        ),
        None => Decision::changed(format!("forgot {id}"), ids),
    })
}

/// `nodes history`: the audit trail's events of the node `key` names; a
/// forgotten node has events but no record, and its id still works.
pub fn history(store: &Store, key: &str) -> Result<Vec<serde_json::Value>> {
    let id = match NodeId::parse(key) {
        Some(id) => id,
        None => find(store, key, Among::All)?.0,
    };
    let events = store.history(&id)?;
    if events.is_empty() {
        return Err(AdminError::NotFound(format!("the audit trail has no events for {id}")));
    }
    Ok(events)
}

/// The records a filtered `nodes list` shows, grouped by CA, and the
/// records it could not read.
fn filtered(store: &Store, args: &ListArgs) -> Result<(Vec<NodeView>, Vec<String>)> {
    let admitted = args.admitted || args.admitted_since.is_some();
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
    if admitted {
        ids.extend(store.approved_ids()?);
    }
    ids.sort();
    ids.dedup();
    let mut views: Vec<NodeView> = Vec::new();
    let mut problems = Vec::new();
    for id in ids {
        match store
            .read_record(&id)
            .map_err(AdminError::from)
            .and_then(|r| r.map(|r| view(store, &r)).transpose())
        {
            Ok(Some(v)) => views.push(v),
            Ok(None) => {}
            Err(e) => problems.push(unreadable_record(&id, &e)),
        }
    }
    let wanted = |s: NodeState| {
        (args.pending && s == NodeState::Pending)
            || (admitted && s == NodeState::Admitted)
            || (args.rejected && s == NodeState::Rejected)
    };
    // --admitted-since: by the approval's own time (`admitted_at`, whole
    // seconds), so a node re-admitted after the orchestrator's last look is seen again.
    let since = args.admitted_since.map(janus_core::clock::unix_to_rfc3339);
    let recent = |v: &NodeView| match (&since, &v.admitted_at) {
        (None, _) => true,
        _ if v.state != NodeState::Admitted => true,
        (Some(since), Some(at)) => {
            janus_core::clock::rfc3339_millis(at) >= janus_core::clock::rfc3339_millis(since)
        }
        (Some(_), None) => false,
    };
    views.retain(|v| wanted(v.state) && v.has_labels(&args.labels) && recent(v));
    // Re-announcements of one node share its CA: keep them together, oldest first.
    views.sort_by(|a, b| (&a.ca_sha256, &a.announced_at, &a.id).cmp(&(&b.ca_sha256, &b.announced_at, &b.id)));
    Ok((views, problems))
}

/// What `nodes list` found: the nodes, and the records it could not show
/// (each a reason, with its path): a listing is a view, so it goes on past
/// them, and says so.
#[derive(Debug, Clone, Serialize)]
pub struct NodeList {
    /// As `nodes list --json` shows them.
    pub nodes: Vec<NodeView>,
    /// Why each record left out could not be read or told.
    pub unreadable: Vec<String>,
}

/// The nodes `args` asks for, as `nodes list --json` shows them: filtered
/// ones grouped by CA, oldest first; all of them in directory order. For
/// the admin API, which answers with them at once.
pub fn node_list(store: &Store, args: &ListArgs) -> Result<NodeList> {
    if !args.filters_by_state() {
        let mut nodes = Vec::new();
        let mut unreadable = Vec::new();
        let mut problems = store.scan(|_, record: NodeRecord| match view(store, &record) {
            Ok(v) if v.has_labels(&args.labels) => nodes.push(v),
            Ok(_) => {}
            Err(e) => unreadable.push(unreadable_record(&record.id, &e)),
        })?;
        problems.append(&mut unreadable);
        return Ok(NodeList { nodes, unreadable: problems });
    }
    let (nodes, unreadable) = filtered(store, args)?;
    Ok(NodeList { nodes, unreadable })
}

/// A record a listing could not show, as its reader is told: by id and
/// the kind of failure, never the server's path (the path and the whole
/// cause go to the log).
fn unreadable_record(id: &NodeId, error: &AdminError) -> String {
    tracing::warn!(node = %id, cause = %error, "a record cannot be read or told: left out of a listing");
    let io = match error {
        AdminError::State(e) | AdminError::Store(janus_store::StoreError::Io(e)) => Some(e),
        _ => None,
    };
    match io {
        Some(e) => format!("{id}: cannot be read now ({})", e.kind()),
        None => format!("{id}: cannot be read or told now"),
    }
}

fn say_skipped(problems: Vec<String>) {
    for problem in problems {
        eprintln!("janus-registration: skipped an unreadable record: {}", escape(&problem));
    }
}

/// `nodes list` with a filter: the matching records, grouped by CA.
fn list(store: &Store, args: &ListArgs) -> Result<String> {
    if !args.filters_by_state() {
        return list_all_streaming(store, args.json, &args.labels);
    }
    let (views, problems) = filtered(store, args)?;
    let mut out = String::new();
    say_skipped(problems);
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
fn list_all_streaming(store: &Store, json: bool, labels: &[(String, String)]) -> Result<String> {
    use std::io::Write;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    if !json {
        let _ = writeln!(out, "{}", list_header());
    }
    let mut count = 0usize;
    let mut unshown = Vec::new();
    let mut problems = store.scan(|_, record: NodeRecord| {
        let v = match view(store, &record) {
            Ok(v) => v,
            Err(e) => return unshown.push(e.to_string()),
        };
        if !v.has_labels(labels) {
            return;
        }
        let line = if json { terminal::json_text(&v) } else { list_row(&v, false) };
        // A closed pipe (`| head`) ends the listing quietly.
        if writeln!(out, "{line}").is_ok() {
            count += 1;
        }
    })?;
    let _ = out.flush();
    problems.append(&mut unshown);
    say_skipped(problems);
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

/// `nodes approve`: every pending node of one CA (`--ca-sha256`), or one
/// node checked against its console.
pub fn approve(store: &Store, args: &ApproveArgs) -> Result<Decision> {
    if let Some(hex) = &args.ca_sha256 {
        return approve_by_ca(store, &normalize_fingerprint(hex)?, args.force);
    }
    let id = args
        .id
        .as_deref()
        .ok_or_else(|| AdminError::Usage("name the node to approve, or give --ca-sha256".into()))?;
    approve_one(store, id, args)
}

/// `nodes approve --ca-sha256 HEX`: every pending record of that CA (with
/// `--force`, those rejected only for their CA too).
fn approve_by_ca(store: &Store, want: &str, force: bool) -> Result<Decision> {
    let user = current_user();
    let (records, unreadable) = store.list_records()?;
    // A record left unread could be one of this CA's: which ones an
    // approval by CA covers cannot be told.
    if let Some(why) = unreadable.first() {
        return Err(AdminError::Store(janus_store::StoreError::Io(std::io::Error::other(format!(
            "cannot tell which records have the CA {want}: {why}"
        )))));
    }
    let ca_rejected = store.is_ca_rejected(want)?;
    if ca_rejected && !force {
        return Err(AdminError::Refused(rejected_ca_refusal(want)));
    }
    let mut matching = Vec::new();
    let mut approved = Vec::new();
    for record in records.iter().filter(|r| ca_sha256_of(r) == want) {
        // With --force, the records rejected only because their CA was are
        // approved too: what the admin asked for.
        match store.state_of(record)? {
            NodeState::Pending => matching.push(record),
            NodeState::Rejected if force && store.rejected_for_ca_only(&record.id)? => matching.push(record),
            NodeState::Rejected => {}
            NodeState::Admitted => approved.push(record.id.to_string()),
        }
    }
    if matching.is_empty() {
        if !approved.is_empty() {
            let said = format!("already approved ({}); nothing changed", approved.join(", "));
            return Ok(Decision::unchanged(said, approved));
        }
        return Err(AdminError::NotFound(format!("no pending node has the CA SHA-256 {want}")));
    }
    let forced = force && ca_rejected;
    let mut out = String::new();
    let mut ids = Vec::new();
    for record in matching {
        store.admit(Admitted::by_command(record.id.clone(), user.clone(), Some(want.to_string()), forced))?;
        let _ = writeln!(out, "approved {} ({})", record.id, escape(&record.name));
        ids.push(record.id.to_string());
    }
    Ok(Decision::changed(out.trim_end().to_string(), ids))
}

/// `nodes approve ID`: one node, its CA checked against its console
/// (`--console`, `--expect-ca-sha256`) unless `--unchecked`.
fn approve_one(store: &Store, id: &str, args: &ApproveArgs) -> Result<Decision> {
    let user = current_user();
    let (node, record) =
        find(store, id, Among::Pending).or_else(|e| match (&e, &args.console, NodeId::parse(id)) {
            // A name several pending records carry: the one whose CA the
            // console log names, when exactly one has it.
            (AdminError::Ambiguous(_), Some(_), _) => match expected_fingerprint(args, id)? {
                Some(want) => crate::find::find_where(store, id, Among::Pending, |r| ca_sha256_of(r) == want)
                    .map_err(|_| e),
                None => Err(e),
            },
            (_, _, Some(_)) => Err(e),
            // An admitted node named again: say so rather than "no match".
            (_, _, None) => find(store, id, Among::All).map_err(|_| e),
        })?;
    let id = node.as_str();
    let ids = vec![id.to_string()];
    if store.approved_now(&node)? && !store.poll_refused_now(&node)? {
        let said = format!("{id} ({}) is already approved; nothing changed", escape(&record.name));
        return Ok(Decision::unchanged(said, ids));
    }
    let for_ca_only = store.rejected_for_ca_only(&node)?;
    if store.rejected_now(&node)? && !(args.force && for_ca_only) {
        return Err(AdminError::Refused(if for_ca_only {
            format!(
                "{id} was rejected because its CA {} was (`nodes reject`), and so is every later \
                 announcement of that CA; approve this one anyway with --force, or lift the rejection \
                 with `nodes forget` of the record you rejected",
                ca_sha256_of(&record)
            )
        } else {
            format!(
                "{id} was rejected with `nodes reject`; its CA's later announcements are rejected too. \
                 To admit it after all: `nodes forget {id}` lifts the rejection, then approve its next \
                 announcement"
            )
        }));
    }
    let have = ca_sha256_of(&record);
    if store.is_ca_rejected(&have)? && !args.force {
        return Err(AdminError::Refused(rejected_ca_refusal(&have)));
    }
    let expected = expected_fingerprint(args, id)?;
    if let Some(want) = &expected
        && *want != have
    {
        let source = match &args.console {
            Some(log) if args.expect_ca_sha256.is_none() => format!("the console log {}", log.display()),
            _ => args.expected_from.unwrap_or("--expect-ca-sha256").to_string(),
        };
        return Err(AdminError::Refused(format!(
            "refusing: {id}'s CA is SHA-256 {have}, but {source} says {want} - not that node"
        )));
    }
    let forced = args.force && store.is_ca_rejected(&have)?;
    store.admit(Admitted::by_command(node.clone(), user, expected.clone(), forced))?;
    let said = match expected {
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
    };
    Ok(Decision::changed(said, ids))
}

/// The CA fingerprint the admin expects `id` to have: given, or read from
/// the node's console log; none with `--unchecked`, refused with neither.
fn expected_fingerprint(args: &ApproveArgs, id: &str) -> Result<Option<String>> {
    match (&args.expect_ca_sha256, &args.console) {
        (Some(hex), _) => Ok(Some(normalize_fingerprint(hex)?)),
        (None, Some(path)) => {
            let log = std::fs::read(path).map_err(|cause| AdminError::Read { path: path.clone(), cause })?;
            let shown = console_fingerprint(&log).ok_or_else(|| {
                AdminError::Refused(format!("{} shows no line `{CONSOLE_MARKER}<hex>` yet", path.display()))
            })?;
            Ok(Some(shown))
        }
        (None, None) if args.unchecked => Ok(None),
        (None, None) => Err(AdminError::Usage(format!(
            "approving {id} needs a check of its CA against the node's console: --console LOG, or \
             --expect-ca-sha256 HEX (the line `{CONSOLE_MARKER}<hex>` on its console), or --unchecked \
             to trust whoever announced under that name"
        ))),
    }
}

fn rejected_ca_refusal(ca: &str) -> String {
    format!(
        "refusing: the CA SHA-256 {ca} was rejected (`nodes reject`); approve it anyway with --force, \
         or lift the rejection with `nodes forget` of the record you rejected"
    )
}

/// `nodes show --json`: the list's fields and what `show` computes; a
/// CA's rejection that cannot be told refuses, as every state read does.
fn detail(store: &Store, record: &NodeRecord) -> Result<NodeDetail> {
    let mut detail = NodeDetail {
        view: view(store, record)?,
        stored_ca_sha256_matches: None,
        ca_subject: None,
        ca_not_before: None,
        ca_not_after: None,
        ca_rejected: None,
    };
    if let Ok(der) = pki::first_certificate(record.ca_cert_pem.as_bytes(), "ca_cert_pem") {
        let computed = pki::sha256_hex(&der);
        detail.stored_ca_sha256_matches = Some(record.ca_sha256.as_deref().is_none_or(|s| s == computed));
        if let Ok(cert) = pki::parse(&der, "ca_cert_pem") {
            let validity = cert.validity();
            detail.ca_subject = Some(cert.subject().to_string());
            detail.ca_not_before = Some(janus_core::clock::unix_to_rfc3339(validity.not_before.timestamp()));
            detail.ca_not_after = Some(janus_core::clock::unix_to_rfc3339(validity.not_after.timestamp()));
        }
        detail.ca_rejected = Some(store.is_ca_rejected(&computed)?);
        detail.view.ca_sha256 = computed;
    }
    Ok(detail)
}

/// `nodes show`: what an admin checks before approving, every field from
/// the node escaped, the fingerprint computed from the stored PEM.
fn show(store: &Store, record: &NodeRecord) -> Result<String> {
    let v = view(store, record)?;
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
            match store.is_ca_rejected(&computed) {
                Ok(true) => {
                    let _ = writeln!(out, "WARNING: this CA was rejected (`nodes reject`)");
                }
                Ok(false) => {}
                Err(e) => {
                    let _ = writeln!(
                        out,
                        "WARNING: whether this CA was rejected cannot be told: {}",
                        escape(&e.to_string())
                    );
                }
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
    Ok(out)
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

//! The command line's `nodes`, `tokens` and `audit`: each turns its
//! arguments into the admin model's request ([`crate::admin_args`]), runs
//! it on the state directory (or through the admin API with `--server`)
//! and renders what came back as text for people or JSON lines for
//! programs. The admin library returns values; this module prints them.
//!
//! Invariants: every value from a node is escaped before it reaches the
//! terminal; a listing of every record prints each line as it is read
//! (the first lines of a million at once); a refusal carries its code.

use std::fmt::Write as _;
use std::path::Path;

use crate::admin_args::{
    Approval, ListArgs, ListOrder, NodesCommand, ShowArgs, TokensCommand, TokensListArgs, WatchArgs,
};
use janus_admin::api::client::{AdminClient, ClientError};
use janus_admin::api::wire::{Approval as ApprovalBody, NewTokensBody};
use janus_admin::tokens::TokenList;
use janus_admin::{Actor, AdminError, NodeDetail, NodeView, Surface};
use janus_core::clock::now_unix;
use janus_core::terminal::{self, escape, escape_lines};
use janus_store::{OrphanApproval, Store};

/// An admin command's refusal as the command line says it: its words and
/// its code (`… (code: fingerprint_mismatch)`), or, when the command was
/// asked for JSON, one line a program reads: the API's problem fields
/// (`code`, `status`, `title`, `detail`, `field`), said in the command line's words.
#[derive(Debug)]
pub struct Refused {
    error: AdminError,
    /// Whether the command was asked for JSON.
    pub json: bool,
    /// Whether the error's words are the JSON line already (the API's, through `--server`).
    raw: bool,
}

impl Refused {
    /// `error`, for a command asked for JSON or not.
    pub fn new(error: AdminError, json: bool) -> Self {
        Refused { error, json, raw: false }
    }
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let code = self.error.code;
        if self.raw {
            return f.write_str(&self.error.said(Surface::Command));
        }
        if !self.json {
            return write!(f, "{} (code: {code})", self.error);
        }
        let problem = serde_json::json!({
            "code": code,
            "status": code.status(),
            "title": code.title(),
            "detail": self.error.said(Surface::Command),
            "field": self.error.field.map(|field| field.name(Surface::Command)),
        });
        f.write_str(&terminal::json_text(&problem))
    }
}

impl std::error::Error for Refused {}

/// A failure through `--server`: the API's refusal, with its code, as the
/// command line says one (with `--json`, the problem's line); any other
/// failure as it is.
pub fn remote_failure(error: ClientError, json: bool) -> Box<dyn std::error::Error> {
    match error {
        ClientError::Refused(problem) if json => {
            let line = serde_json::json!({
                "code": problem.code,
                "status": problem.status,
                "title": problem.title,
                "detail": problem.detail,
                "field": problem.field,
            });
            Box::new(Refused {
                error: AdminError::new(problem.code, terminal::json_text(&line)),
                json: true,
                raw: true,
            })
        }
        other => Box::new(other),
    }
}

/// Runs a `nodes` subcommand on the state directory for `actor`; `Ok` is
/// what to print (empty when it printed already).
pub fn nodes(state: &Path, command: &NodesCommand, actor: &Actor) -> Result<String, AdminError> {
    let store = match command {
        NodesCommand::List(_) | NodesCommand::Show(_) | NodesCommand::History(_) | NodesCommand::Watch(_) => {
            janus_admin::open_state_to_read(state)?
        }
        _ => janus_admin::open_state(state)?,
    };
    match command {
        NodesCommand::List(args) => {
            let (listed, orphans) = list(&store, args)?;
            Ok(with_orphans(listed, orphans, args.json))
        }
        NodesCommand::Watch(args) => watch(&store, args),
        NodesCommand::Show(ShowArgs { id, json }) => {
            let detail = janus_admin::show_node(&store, id)?;
            Ok(if *json { terminal::json_text(&detail) } else { show(&detail) })
        }
        NodesCommand::Approve(args) => Ok(match args.request()? {
            Approval::One(request) => janus_admin::approve(&store, &request, actor)?.said,
            Approval::OfCa(request) => janus_admin::approve_ca(&store, &request, actor)?.said,
        }),
        NodesCommand::Reject(args) => Ok(janus_admin::reject(&store, &args.id, actor)?.said),
        NodesCommand::Forget(args) => Ok(janus_admin::forget(&store, &args.id, actor)?.said),
        NodesCommand::History(ShowArgs { id, json }) => {
            let events = janus_admin::history(&store, id)?;
            let render = |e: &serde_json::Value| if *json { terminal::json_text(e) } else { event_line(e) };
            Ok(events.iter().map(render).collect::<Vec<_>>().join("\n"))
        }
    }
}

/// `nodes list`, in the order asked, and the approval files that name no node.
fn list(store: &Store, args: &ListArgs) -> Result<(String, Vec<OrphanApproval>), AdminError> {
    if !args.filter().filters_by_state() {
        let listed = match args.sort {
            ListOrder::Directory => list_all(store, args.json, &args.labels),
            _ => list_sorted(store, args),
        }?;
        let orphans = store.orphan_approvals().unwrap_or_else(|e| {
            eprintln!("janus-registration: cannot look for approval files that name no node: {e}");
            Vec::new()
        });
        return Ok((listed, orphans));
    }
    let mut listed = janus_admin::node_list(store, &args.filter())?;
    say_skipped(&listed.unreadable);
    if args.sort == ListOrder::Oldest {
        listed.nodes.reverse();
    }
    Ok((list_grouped(&listed.nodes, args.json), listed.orphan_approvals))
}

/// A listing, then a line for each approval file that names no node: at the
/// end of the table, or on stderr beside JSON lines (stdout stays JSON).
fn with_orphans(listed: String, orphans: Vec<OrphanApproval>, json: bool) -> String {
    if json {
        for orphan in &orphans {
            eprintln!("janus-registration: {orphan}");
        }
        return listed;
    }
    let mut out = listed;
    for orphan in &orphans {
        let _ = write!(out, "\nWARNING: {orphan}");
    }
    out
}

fn say_skipped(problems: &[String]) {
    for problem in problems {
        eprintln!("janus-registration: skipped an unreadable record: {}", escape(problem));
    }
}

/// `nodes list` with a filter: grouped by CA, oldest first.
fn list_grouped(views: &[NodeView], json: bool) -> String {
    let mut out = String::new();
    if json {
        for v in views {
            let _ = writeln!(out, "{}", terminal::json_text(v));
        }
        return out.trim_end().to_string();
    }
    let _ = writeln!(out, "{}", list_header());
    let mut previous: Option<&str> = None;
    for v in views {
        if previous.is_some() && previous != Some(v.ca_sha256.as_str()) {
            out.push('\n');
        }
        let same = previous == Some(v.ca_sha256.as_str());
        previous = Some(&v.ca_sha256);
        let _ = writeln!(out, "{}", list_row(v, same));
    }
    let _ = write!(out, "{} node(s)", views.len());
    out
}

/// `nodes list` of every record: each line printed as its record is read.
fn list_all(store: &Store, json: bool, labels: &[(String, String)]) -> Result<String, AdminError> {
    use std::io::Write;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    if !json {
        let _ = writeln!(out, "{}", list_header());
    }
    let mut count = 0usize;
    let problems = janus_admin::scan_nodes(store, labels, |v| {
        let line = if json { terminal::json_text(&v) } else { list_row(&v, false) };
        // A closed pipe (`| head`) ends the listing quietly.
        if writeln!(out, "{line}").is_ok() {
            count += 1;
        }
    })?;
    let _ = out.flush();
    say_skipped(&problems);
    Ok(if json { String::new() } else { format!("{count} node(s)") })
}

/// `nodes list` of every record, newest (or oldest) first: read whole,
/// then sorted; the table keeps no CA certificate in memory.
fn list_sorted(store: &Store, args: &ListArgs) -> Result<String, AdminError> {
    let mut views = Vec::new();
    let problems = janus_admin::scan_nodes(store, &args.labels, |mut v| {
        if !args.json {
            v.ca_cert_pem = String::new();
        }
        views.push(v);
    })?;
    janus_admin::newest_first(&mut views);
    if args.sort == ListOrder::Oldest {
        views.reverse();
    }
    say_skipped(&problems);
    let mut out = String::new();
    if args.json {
        for v in &views {
            let _ = writeln!(out, "{}", terminal::json_text(v));
        }
        return Ok(out.trim_end().to_string());
    }
    let _ = writeln!(out, "{}", list_header());
    for v in &views {
        let _ = writeln!(out, "{}", list_row(v, false));
    }
    let _ = write!(out, "{} node(s)", views.len());
    Ok(out)
}

fn list_header() -> String {
    format!(
        "{:<32}  {:<20}  {:<22}  {:<22}  {:<8}  {:>5}  CA SHA-256",
        "ID", "NAME", "ADDRESS", "PEER", "STATE", "AGE"
    )
}

/// What `nodes show` says of a node whose approval file was removed after
/// it got the trust.
const APPROVAL_REMOVED: &str = "approval:     its file approved/<id> was removed after the node got the fleet's trust: \
the node stays admitted and keeps the trust (removing the file withdraws nothing it has). To stop trusting it, \
remove it at the Janus Controller (docs/state.md); `nodes reject` stops its polls here.";

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
        if same_ca { "  (same CA: re-announced)" } else { "" },
    ) + if v.approval_removed { "  (approval file removed: it keeps the trust)" } else { "" }
}

/// `3m`, `5h`, `2d` since an RFC 3339 time.
fn age(at: Option<&str>) -> String {
    at.and_then(janus_core::clock::Age::of).map_or_else(|| "-".into(), |age| age.short())
}

/// `nodes show`: what an admin checks before approving, every field from
/// the node escaped, the fingerprint computed from the stored PEM.
fn show(detail: &NodeDetail) -> String {
    let v = &detail.view;
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
    if v.approval_removed {
        let _ = writeln!(out, "{APPROVAL_REMOVED}");
    }
    if let Some(subject) = &detail.ca_subject {
        field(&mut out, "CA subject:", subject);
    }
    if let (Some(from), Some(to)) = (&detail.ca_not_before, &detail.ca_not_after) {
        let seconds = |t: &str| janus_core::clock::rfc3339_millis(t).unwrap_or_default() / 1000;
        let now = i128::from(now_unix());
        let flag = if seconds(to) < now {
            "  EXPIRED"
        } else if seconds(from) > now {
            "  NOT YET VALID"
        } else {
            ""
        };
        field(&mut out, "CA valid:", &format!("{from} to {to}{flag}"));
    }
    match detail.ca_rejected {
        Some(rejected) => {
            field(&mut out, "CA SHA-256:", &v.ca_sha256);
            if detail.stored_ca_sha256_matches == Some(false) {
                let _ = writeln!(
                    out,
                    "WARNING: the record's stored ca_sha256 is not its certificate's; the line above is computed \
                     from the stored PEM"
                );
            }
            if rejected {
                let _ = writeln!(out, "WARNING: this CA was rejected (`nodes reject`)");
            }
            let _ = writeln!(out, "The node's console shows: {}{}", janus_admin::CONSOLE_MARKER, v.ca_sha256);
        }
        None => {
            let _ = writeln!(out, "WARNING: the stored ca_cert_pem holds no certificate");
        }
    }
    if janus_core::pki::NodeCa::check(&v.ca_cert_pem).is_err() {
        let _ = writeln!(
            out,
            "WARNING: the stored ca_cert_pem is not exactly one CA certificate block (shown escaped)"
        );
    }
    out.push_str(&escape_lines(v.ca_cert_pem.trim_end()));
    out
}

/// `nodes watch`: the decisions as they happen (with `--once`, those there
/// are), one JSON line each; returns once the reader went away.
fn watch(store: &Store, args: &WatchArgs) -> Result<String, AdminError> {
    use std::io::Write;
    let mut follower = janus_store::follow::Follower::since(args.since);
    loop {
        let decisions = janus_admin::next_decisions(&mut follower, store)?;
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
        std::thread::sleep(janus_store::follow::LOOK_EVERY);
    }
}

/// Runs a `tokens` subcommand on the state directory for `actor`; `Ok` is what to print.
pub fn tokens(state: &Path, command: &TokensCommand, actor: &Actor) -> Result<String, AdminError> {
    let store = janus_admin::open_state(state)?;
    match command {
        TokensCommand::Add(args) => {
            let made = janus_admin::tokens::add(&store, &args.request()?, actor)?;
            if !args.json {
                return Ok(made.iter().map(|t| t.token.as_str()).collect::<Vec<_>>().join("\n"));
            }
            Ok(made.iter().map(terminal::json_text).collect::<Vec<_>>().join("\n"))
        }
        TokensCommand::List(TokensListArgs { json }) => {
            let listed = janus_admin::tokens::list(&store)?;
            if *json {
                return Ok(listed.tokens.iter().map(terminal::json_text).collect::<Vec<_>>().join("\n"));
            }
            Ok(token_table(&listed))
        }
        TokensCommand::Revoke(args) => {
            let revoked = janus_admin::tokens::revoke(&store, &args.request(), actor)?;
            Ok(format!("revoked the token with SHA-256 {}…", revoked.sha256_prefix))
        }
    }
}

/// `tokens list`: redacted, with expiry, uses left, labels and warnings.
fn token_table(listed: &TokenList) -> String {
    let mut out = format!(
        "{:<10}  {:<12}  {:<20}  {:>9}  {:<12}  {:<20}  DESCRIPTION\n",
        "TOKEN", "SHA-256", "EXPIRES", "USES LEFT", "ADDED BY", "LABELS"
    );
    for t in &listed.tokens {
        let (expires, uses_left) = match (&t.expires_at, t.metadata_unreadable) {
            (_, true) => ("unknown".to_string(), "?".to_string()),
            (Some(at), false) => (at.clone(), t.uses_left.to_string()),
            (None, false) => ("never".to_string(), t.uses_left.to_string()),
        };
        let labels: Vec<String> =
            t.labels.iter().map(|(k, v)| format!("{}={}", escape(k), escape(v))).collect();
        let _ = writeln!(
            out,
            "{:<10}  {:<12}  {:<20}  {:>9}  {:<12}  {:<20}  {}{}",
            escape(&t.shown),
            t.sha256_prefix,
            expires,
            uses_left,
            if t.added_by.is_empty() { "-".into() } else { escape(&t.added_by) },
            if labels.is_empty() { "-".into() } else { labels.join(",") },
            escape(t.description.as_deref().unwrap_or("-")),
            if t.weak { "  WEAK" } else { "" }
        );
    }
    let _ = write!(out, "{} token(s)", listed.tokens.len());
    for warning in &listed.warnings {
        let _ = write!(out, "\nwarning: {}", escape(warning));
    }
    out
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
pub fn audit_trail(
    state: &Path,
    since: Option<std::time::Duration>,
    follow: bool,
    json: bool,
) -> Result<(), AdminError> {
    use std::io::Write;
    let store = janus_admin::open_state_to_read(state)?;
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

/// What a remote command cannot do, said as the local ones say a refusal.
fn offline(what: &str) -> ClientError {
    ClientError::Setup(format!(
        "the admin API does not offer {what}: run it where the state directory is (--state)"
    ))
}

/// `nodes …` through the admin API; what to print (JSON).
pub async fn remote_nodes(client: &AdminClient, command: &NodesCommand) -> Result<String, ClientError> {
    let refused = |e: AdminError| ClientError::Setup(e.said(Surface::Command));
    match command {
        NodesCommand::List(args) => {
            let listed = client.list_nodes(&args.filter()).await?;
            say_skipped(&listed.unreadable);
            Ok(listed.nodes.iter().map(terminal::json_text).collect::<Vec<_>>().join("\n"))
        }
        NodesCommand::Show(args) => Ok(terminal::json_text(&client.show_node(&args.id).await?)),
        NodesCommand::Approve(args) => {
            let (Some(id), Some(expected), None, false, None) =
                (&args.id, &args.expect_ca_sha256, &args.console, args.unchecked, &args.ca_sha256)
            else {
                return Err(ClientError::Setup(
                    "through --server, nodes approve takes ID --expect-ca-sha256 HEX: the admin API always checks \
                     the node's CA"
                        .into(),
                ));
            };
            args.request().map_err(refused)?;
            let body = ApprovalBody { expect_ca_sha256: expected.clone(), force: args.force };
            Ok(terminal::json_text(&client.approve(id, &body).await?.node))
        }
        NodesCommand::Reject(args) => Ok(terminal::json_text(&client.reject(&args.id).await?.node)),
        NodesCommand::Watch(args) => {
            if args.once {
                return Err(ClientError::Setup(
                    "through --server, nodes watch follows: --once is for the state directory".into(),
                ));
            }
            let path = match args.since {
                Some(since) => format!("/v1/events?since={}s", since.as_secs()),
                None => "/v1/events".into(),
            };
            client
                .events(&path, |event| {
                    use std::io::Write;
                    let mut out = std::io::stdout().lock();
                    writeln!(out, "{}", terminal::json_text(&event)).and_then(|()| out.flush()).is_ok()
                })
                .await?;
            Ok(String::new())
        }
        NodesCommand::Forget(_) => Err(offline("forgetting a node")),
        NodesCommand::History(_) => Err(offline("a node's history")),
    }
}

/// `tokens …` through the admin API; what to print (JSON).
pub async fn remote_tokens(client: &AdminClient, command: &TokensCommand) -> Result<String, ClientError> {
    match command {
        TokensCommand::Add(args) => {
            // The same bounds, checked here first: the same refusal either way.
            args.request().map_err(|e| ClientError::Setup(e.said(Surface::Command)))?;
            let body = NewTokensBody {
                count: args.token.is_none().then_some(args.count as u64),
                uses: args.uses.map(u64::from),
                expires_in_seconds: args.expires_in.map(|d| d.as_secs().max(1)),
                description: args.description.clone(),
                labels: args.labels.iter().cloned().collect(),
                token: args.token.clone(),
            };
            let made = client.add_tokens(&body).await?;
            Ok(made.tokens.iter().map(terminal::json_text).collect::<Vec<_>>().join("\n"))
        }
        TokensCommand::Revoke(args) => {
            // Only a fingerprint goes into the URL (and the server's log): never a token.
            let prefix = janus_admin::model::token_prefix(&args.token)
                .map_err(|e| ClientError::Setup(e.said(Surface::Command)))?;
            Ok(terminal::json_text(&client.revoke_token(&prefix).await?))
        }
        TokensCommand::List(_) => Err(offline("a token listing")),
    }
}

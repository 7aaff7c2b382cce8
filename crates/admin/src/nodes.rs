//! `nodes`: list, show, approve, reject, forget and history, on records
//! named by id, id prefix or name ([`super::find`]); each returns its
//! value, and each change is made for the [`Actor`] it is given, its words
//! in that actor's surface's terms.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::error::{AdminError, Code, Field, Hint, Surface};
use crate::find::{Among, find};
use crate::model::console_fingerprint;
use crate::model::{Actor, Approve, ApproveCa, CONSOLE_MARKER, Check, Fingerprint, NodeFilter};
use crate::state::view;
use janus_core::pki;
use janus_core::terminal::escape;
use janus_store::{Admitted, NodeId, NodeRecord, NodeState, Store};
use janus_store::{NodeView, ca_sha256_of};

/// What `nodes approve`, `reject` and `forget` did: printed by the CLI,
/// answered by the admin API.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
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
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
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

/// `nodes show`: the node `key` names (id, prefix or name), among all.
pub fn show_node(store: &Store, key: &str) -> Result<NodeDetail> {
    let (_, record) = find(store, key, Among::All)?;
    detail(store, &record)
}

/// `nodes reject`: the node `key` names and its CA, rejected in the caller's name.
pub fn reject(store: &Store, key: &str, actor: &Actor) -> Result<Decision> {
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
    store.reject(&id, &ca, &actor.audit_name())?;
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
             announcements (new ids, same CA) are rejected at once; {}",
            escape(&record.name),
            escape(&ca),
            Hint::ForgetLifts(Some(id.to_string())).say(actor.surface)
        ),
        ids,
    ))
}

/// `nodes forget`: every file of the node `key` names, in the caller's name.
pub fn forget(store: &Store, key: &str, actor: &Actor) -> Result<Decision> {
    let (id, _) = find(store, key, Among::All)?;
    let ids = vec![id.to_string()];
    Ok(match store.forget(&id, &actor.audit_name())? {
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
        return Err(AdminError::new(Code::NoHistory, format!("the audit trail has no events for {id}")));
    }
    Ok(events)
}

/// The records a filtered `nodes list` shows, grouped by CA, and the
/// records it could not read.
fn filtered(store: &Store, args: &NodeFilter) -> Result<(Vec<NodeView>, Vec<String>)> {
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
    // Re-announcements of one node share its CA: kept together, the group
    // of the newest announcement first, and newest first within a group.
    newest_first(&mut views);
    let mut newest_of_ca: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for (rank, v) in views.iter().enumerate() {
        newest_of_ca.entry(v.ca_sha256.clone()).or_insert(rank);
    }
    views.sort_by_key(|v| newest_of_ca[&v.ca_sha256]);
    Ok((views, problems))
}

/// Newest announcement first (as the console lists nodes), then by id;
/// records that say no time (the reference writes none) last. Stable.
pub fn newest_first(views: &mut [NodeView]) {
    let at = |v: &NodeView| v.announced_at.as_deref().and_then(janus_core::clock::rfc3339_millis);
    views.sort_by(|a, b| at(b).cmp(&at(a)).then_with(|| a.id.cmp(&b.id)));
}

/// What `nodes list` found: the nodes, and the records it could not show
/// (each a reason, with its path): a listing is a view, so it goes on past
/// them, and says so.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct NodeList {
    /// As `nodes list --json` shows them.
    pub nodes: Vec<NodeView>,
    /// Why each record left out could not be read or told.
    pub unreadable: Vec<String>,
    /// Approval files that name no node (never acted on), each with the
    /// id it may have meant.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub orphan_approvals: Vec<janus_store::OrphanApproval>,
}

/// The approval files that name no node; none (logged) when that cannot
/// be told: a listing is a view, and this is only said, never acted on.
fn orphans(store: &Store) -> Vec<janus_store::OrphanApproval> {
    store.orphan_approvals().unwrap_or_else(|e| {
        tracing::warn!(cause = %e, "cannot look for approval files that name no node");
        Vec::new()
    })
}

/// The nodes `args` asks for, as `nodes list --json` shows them, newest
/// announcement first: filtered ones grouped by CA (the group of the
/// newest first). For the admin API and the console, which answer with
/// them at once.
pub fn node_list(store: &Store, args: &NodeFilter) -> Result<NodeList> {
    if !args.filters_by_state() {
        let mut nodes = Vec::new();
        let mut unreadable = Vec::new();
        let mut problems = store.scan(|_, record: NodeRecord| match view(store, &record) {
            Ok(v) if v.has_labels(&args.labels) => nodes.push(v),
            Ok(_) => {}
            Err(e) => unreadable.push(unreadable_record(&record.id, &e)),
        })?;
        problems.append(&mut unreadable);
        newest_first(&mut nodes);
        return Ok(NodeList { nodes, unreadable: problems, orphan_approvals: orphans(store) });
    }
    let (nodes, unreadable) = filtered(store, args)?;
    Ok(NodeList { nodes, unreadable, orphan_approvals: orphans(store) })
}

/// Every record with these `labels`, each as read, to `each` (a million
/// records' first lines at once: unsorted, ungrouped); what could not be
/// shown is returned, each a reason.
pub fn scan_nodes(
    store: &Store,
    labels: &[(String, String)],
    mut each: impl FnMut(NodeView),
) -> Result<Vec<String>> {
    let mut unshown = Vec::new();
    let mut problems = store.scan(|_, record: NodeRecord| match view(store, &record) {
        Ok(v) if v.has_labels(labels) => each(v),
        Ok(_) => {}
        Err(e) => unshown.push(unreadable_record(&record.id, &e)),
    })?;
    problems.append(&mut unshown);
    Ok(problems)
}

/// A record a listing could not show, as its reader is told: by id and
/// the kind of failure, never the server's path (the path and the whole
/// cause go to the log).
fn unreadable_record(id: &NodeId, error: &AdminError) -> String {
    tracing::warn!(node = %id, cause = %error, "a record cannot be read or told: left out of a listing");
    match error.code {
        Code::StateUnreadable | Code::DiskFull | Code::LockTimeout => {
            format!("{id}: cannot be read now ({})", error.said(Surface::Api))
        }
        _ => format!("{id}: cannot be read or told now"),
    }
}

/// `nodes approve --ca-sha256 HEX`: every pending record of that CA (with
/// `force`, those rejected only for their CA too), for `actor`.
pub fn approve_ca(store: &Store, request: &ApproveCa, actor: &Actor) -> Result<Decision> {
    let (want, force) = (request.ca.hex(), request.force);
    let (records, unreadable) = store.list_records()?;
    // A record left unread could be one of this CA's: which ones an
    // approval by CA covers cannot be told.
    if let Some(why) = unreadable.first() {
        tracing::warn!(cause = %why, "an approval by CA cannot tell which records it covers");
        return Err(AdminError::new(
            Code::StateUnreadable,
            format!("cannot tell which records have the CA {want}: a record cannot be read now"),
        ));
    }
    let ca_rejected = store.is_ca_rejected(want)?;
    if ca_rejected && !force {
        return Err(rejected_ca_refusal(want));
    }
    let mut matching = Vec::new();
    let mut approved = Vec::new();
    for record in records.iter().filter(|r| ca_sha256_of(r) == want) {
        // With force, the records rejected only because their CA was are
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
        return Err(AdminError::new(
            Code::NodeNotFound,
            format!("no pending node has the CA SHA-256 {want}"),
        ));
    }
    let forced = force && ca_rejected;
    let mut out = String::new();
    let mut ids = Vec::new();
    for record in matching {
        let admitted =
            Admitted::by_command(record.id.clone(), actor.audit_name(), Some(want.to_string()), forced);
        store.admit(admitted)?;
        let _ = writeln!(out, "approved {} ({})", record.id, escape(&record.name));
        ids.push(record.id.to_string());
    }
    Ok(Decision::changed(out.trim_end().to_string(), ids))
}

/// `nodes approve ID`, `POST /v1/nodes/{id}/approve`, the console's
/// approve form: one node, its CA checked as `request` says, for `actor`.
pub fn approve(store: &Store, request: &Approve, actor: &Actor) -> Result<Decision> {
    let key = request.node.as_str();
    let (node, record) =
        find(store, key, Among::Pending).or_else(|e| match (&request.check, NodeId::parse(key)) {
            // A name several pending records carry: the one whose CA the
            // console log names, when exactly one has it.
            (Check::ConsoleLog(_), _) if e.code == Code::AmbiguousName => match expected(&request.check)? {
                Some(want) => {
                    crate::find::find_where(store, key, Among::Pending, |r| ca_sha256_of(r) == want.hex())
                        .map_err(|_| e)
                }
                None => Err(e),
            },
            (_, Some(_)) => Err(e),
            // An admitted node named again: say so rather than "no match".
            (_, None) => find(store, key, Among::All).map_err(|_| e),
        })?;
    let id = node.as_str();
    let ids = vec![id.to_string()];
    if store.approved_now(&node)? && !store.poll_refused_now(&node)? {
        let said = format!("{id} ({}) is already approved; nothing changed", escape(&record.name));
        return Ok(Decision::unchanged(said, ids));
    }
    let for_ca_only = store.rejected_for_ca_only(&node)?;
    if store.rejected_now(&node)? && !(request.force && for_ca_only) {
        return Err(if for_ca_only {
            AdminError::new(
                Code::CaRejected,
                format!(
                    "{id} was rejected because its CA {} was, and so is every later announcement of that CA",
                    ca_sha256_of(&record)
                ),
            )
            .with_hint(Hint::Force)
        } else {
            AdminError::new(
                Code::NodeRejected,
                format!(
                    "{id} was rejected; its CA's later announcements are rejected too. To admit it after all, \
                     lift the rejection, then approve its next announcement"
                ),
            )
            .with_hint(Hint::ForgetLifts(Some(id.to_string())))
        });
    }
    let have = ca_sha256_of(&record);
    if store.is_ca_rejected(&have)? && !request.force {
        return Err(rejected_ca_refusal(&have));
    }
    let expected = expected(&request.check)?;
    if let Some(want) = &expected
        && want.hex() != have
    {
        let source = match (&request.check, actor.surface) {
            (Check::ConsoleLog(log), _) => format!("the console log {}", log.display()),
            (_, surface) => Field::ExpectedFingerprint.name(surface).to_string(),
        };
        return Err(AdminError::new(
            Code::FingerprintMismatch,
            format!("refusing: {id}'s CA is SHA-256 {have}, but {source} says {want} - not that node"),
        )
        .on(Field::ExpectedFingerprint));
    }
    let forced = request.force && store.is_ca_rejected(&have)?;
    let checked = expected.as_ref().map(|f| f.hex().to_string());
    store.admit(Admitted::by_command(node.clone(), actor.audit_name(), checked, forced))?;
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

/// The CA fingerprint the check expects: given, or read from the node's
/// console log; none unchecked.
fn expected(check: &Check) -> Result<Option<Fingerprint>> {
    match check {
        Check::Expected(fingerprint) => Ok(Some(fingerprint.clone())),
        Check::ConsoleLog(path) => {
            let log = std::fs::read(path).map_err(|cause| {
                AdminError::new(Code::FileUnreadable, format!("{}: {cause}", path.display()))
            })?;
            let shown = console_fingerprint(&log).ok_or_else(|| {
                AdminError::new(
                    Code::NoConsoleLine,
                    format!("{} shows no line `{CONSOLE_MARKER}<hex>` yet", path.display()),
                )
            })?;
            Ok(Fingerprint::from_hex(&shown))
        }
        Check::Unchecked => Ok(None),
    }
}

fn rejected_ca_refusal(ca: &str) -> AdminError {
    AdminError::new(Code::CaRejected, format!("refusing: the CA SHA-256 {ca} was rejected"))
        .with_hint(Hint::ForgetLifts(None))
        .with_hint(Hint::Force)
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

//! The console's pages, rendered on the server (maud: each template is
//! Rust, checked at compile time, and every value it interpolates is
//! HTML-escaped).
//!
//! Invariants: text a node or a record controls (names, addresses, labels,
//! subjects, audit fields) reaches a page only through [`Shown`], which
//! shows its controls, format and bidi characters as the terminal escaping
//! does (`\u{202e}`), then HTML-escapes it; no page carries a script or a
//! style inline (the Content-Security-Policy allows neither) nor anything
//! from another origin; no page shows a poll secret, and a token is shown
//! only on the answer that minted it; each form carries the CSRF token.

use maud::{DOCTYPE, Markup, Render, html};

use crate::credential::{Caller, Scope};
use crate::tokens::{AddedToken, TokenList};
use crate::{NodeDetail, NodeList, NodeView};
use janus_store::NodeState;

/// Node- or record-controlled text, as a person may safely read it.
pub struct Shown<'a>(pub &'a str);

impl Render for Shown<'_> {
    fn render_to(&self, buffer: &mut String) {
        janus_core::terminal::escape(self.0).as_ref().render_to(buffer)
    }
}

/// What every page knows: who is looking, and the token its forms carry.
pub struct Frame<'a> {
    /// The credential.
    pub caller: &'a Caller,
    /// Its forms' CSRF token.
    pub csrf: &'a str,
}

/// A page's outcome line: what an action did or why it did not.
pub enum Said<'a> {
    /// Done (or so already).
    Done(&'a str),
    /// Refused: nothing changed; the words, and the code programs read.
    Refused(&'a str, crate::error::Code),
}

/// The page around `body`.
pub fn layout(frame: &Frame<'_>, title: &str, said: Option<Said<'_>>, body: Markup) -> Markup {
    let scopes: Vec<&str> = frame.caller.scopes.iter().map(|s| s.name()).collect();
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="referrer" content="same-origin";
                title { (title) " · janus-registration" }
                link rel="stylesheet" href="/console/assets/console.css";
                script src="/console/assets/console.js" defer {}
            }
            body {
                header {
                    nav {
                        a href="/console/" { "Pending" }
                        a href="/console/nodes" { "Nodes" }
                        a href="/console/tokens" { "Tokens" }
                    }
                    p .who { "Signed in with the credential " b { (Shown(&frame.caller.name)) }
                        " (" (scopes.join(", ")) ")" }
                }
                main {
                    h1 { (title) }
                    @match said {
                        Some(Said::Done(words)) => p .said.done role="status" { (Shown(words)) },
                        Some(Said::Refused(words, code)) => p .said.refused role="alert" data-code=(code) { (Shown(words)) },
                        None => {}
                    }
                    (body)
                }
            }
        }
    }
}

/// A SHA-256 as the node's console prints it, one run of hex digits: its
/// groups of four are spacing only (the stylesheet's), so a copy is the run.
pub fn fingerprint(hex: &str) -> Markup {
    let groups: Vec<&str> = hex.as_bytes().chunks(4).map(|c| std::str::from_utf8(c).unwrap_or("?")).collect();
    // A break is allowed between groups (never inside one): in a table the
    // fingerprint takes two lines of eight groups, and the table fits 1280 px.
    html! { code .fingerprint title=(Shown(hex)) { @for (i, group) in groups.iter().enumerate() {
    @if i > 0 { wbr; } span { (Shown(group)) } } } }
}

fn age(at: Option<&str>) -> String {
    at.and_then(janus_core::clock::Age::of).map_or_else(|| "?".into(), |age| age.words())
}

/// The subject of the CA certificate a node announced, as it says it.
fn ca_subject(pem: &str) -> String {
    janus_core::pki::first_certificate(pem.as_bytes(), "ca_cert_pem")
        .ok()
        .and_then(|der| janus_core::pki::parse(&der, "ca_cert_pem").map(|c| c.subject().to_string()).ok())
        .unwrap_or_else(|| "unparsable".into())
}

fn labels(labels: &std::collections::BTreeMap<String, String>) -> Markup {
    html! {
        @for (key, value) in labels {
            span .label { (Shown(key)) "=" (Shown(value)) }
        }
    }
}

fn state(state: NodeState) -> &'static str {
    match state {
        NodeState::Pending => "pending",
        NodeState::Admitted => "admitted",
        NodeState::Rejected => "rejected",
    }
}

/// Rows a page shows at most: a fleet of 100,000 records is filtered, not
/// sent to a browser whole.
pub const ROWS_AT_MOST: usize = 500;

/// What the console says of a node whose approval file was removed after it got the trust.
const APPROVAL_REMOVED: &str = "Its approval file was removed after it got the fleet's trust: it stays admitted and \
keeps the trust (removing the file withdraws nothing it has). To stop trusting it, remove it at the Janus \
Controller; rejecting it here stops its polls.";

fn node_rows(all: &[NodeView]) -> Markup {
    let nodes = &all[..all.len().min(ROWS_AT_MOST)];
    html! {
        @if all.len() > nodes.len() {
            p .said.refused { "Showing the newest " (nodes.len()) " of " (all.len()) " nodes; "
                (all.len() - nodes.len()) " not shown: search by fingerprint, name, id or address to find one." }
        }
        table .nodes {
            thead { tr { th { "Name" } th { "Address" } th { "State" } th { "Age" } th { "Labels" }
                th { "Token" } th { "CA SHA-256" } th { "CA subject" } } }
            tbody {
                @for node in nodes {
                    tr data-id=(node.id) {
                        td { a href={ "/console/nodes/" (node.id) } { (Shown(&node.name)) } }
                        td { (Shown(&node.address))
                            @if let Some(peer) = &node.peer_address { br; small { "from " (Shown(peer)) } } }
                        td { (state(node.state))
                            @if node.approval_removed { br; small .weak title=(APPROVAL_REMOVED) { "approval file removed" } } }
                        td { (age(node.announced_at.as_deref())) }
                        td { (labels(&node.token_labels)) }
                        td { @if let Some(t) = &node.token_sha256_prefix { code { (Shown(t)) } } @else { "none" } }
                        td .fingerprint { (fingerprint(&node.ca_sha256)) }
                        // Truncated to fit the table; the whole subject on hover.
                        @let subject = ca_subject(&node.ca_cert_pem);
                        td .subject title=(subject.as_str()) { (Shown(&subject)) }
                    }
                }
            }
        }
    }
}

fn unreadable(list: &NodeList) -> Markup {
    html! {
        @if !list.unreadable.is_empty() {
            div .said.refused role="alert" {
                p { (list.unreadable.len()) " record(s) could not be read or told, and are not shown:" }
                ul { @for why in &list.unreadable { li { (Shown(why)) } } }
            }
        }
        @if !list.orphan_approvals.is_empty() {
            div .said.refused role="alert" .orphans {
                p { (list.orphan_approvals.len()) " approval file(s) name no node, and are not acted on:" }
                ul { @for orphan in &list.orphan_approvals { li { (Shown(&orphan.to_string())) } } }
            }
        }
    }
}

/// The search field: what an admin holds of a node.
fn search_form(action: &str, search: &super::search::Search, hidden: Markup) -> Markup {
    html! {
        form .filter method="get" action=(action) {
            (hidden)
            label { "Search "
                input name="q" size="40" value=(search.typed)
                    placeholder="fingerprint (or its first digits), name, id or address"; }
            button { "Search" }
            @if !search.is_empty() { " " a href=(action) { "clear" } }
        }
    }
}

/// The pending nodes (those `search` asks for, newest first), kept live by
/// the event stream while nothing is searched.
pub fn pending(frame: &Frame<'_>, list: &NodeList, search: &super::search::Search) -> Markup {
    let body = html! {
        (search_form("/console/", search, html! {}))
        p .live { "Live: " span #live-status { "not following (no script)" } }
        div #live data-live {
            (unreadable(list))
            @if list.nodes.is_empty() && search.is_empty() {
                p .empty { "No node is waiting." }
            } @else if list.nodes.is_empty() {
                p .empty { "No waiting node matches." }
            } @else {
                (node_rows(&list.nodes))
            }
        }
        p { "Approve a node on its page, with the CA fingerprint its console printed." }
    };
    layout(frame, "Pending nodes", None, body)
}

/// A filter of the nodes page, as its query says it.
#[derive(Debug, Default, Clone)]
pub struct Filter {
    /// `pending`, `admitted`, `rejected`, or all.
    pub state: Option<String>,
    /// `KEY=VALUE`, or none.
    pub label: Option<String>,
    /// What to search for (fingerprint, name, id, address).
    pub search: super::search::Search,
}

/// Every node, filtered by state and label.
pub fn nodes(frame: &Frame<'_>, list: &NodeList, filter: &Filter) -> Markup {
    let chosen = filter.state.as_deref().unwrap_or("");
    let body = html! {
        form .filter method="get" action="/console/nodes" {
            label { "State "
                select name="state" {
                    @for (value, name) in [("", "all"), ("pending", "pending"), ("admitted", "admitted"), ("rejected", "rejected")] {
                        option value=(value) selected[chosen == value] { (name) }
                    }
                }
            }
            label { " Label " input name="label" placeholder="key=value" value=(filter.label.as_deref().unwrap_or("")); }
            label { " Search " input name="q" value=(filter.search.typed)
                placeholder="fingerprint, name, id or address"; }
            button { "Filter" }
        }
        (unreadable(list))
        @if list.nodes.is_empty() { p .empty { "No node matches." } } @else { (node_rows(&list.nodes)) }
    };
    layout(frame, "Nodes", None, body)
}

/// One node: what it announced, its CA, its history, and the decisions
/// the credential may make.
pub fn node(
    frame: &Frame<'_>,
    node: &NodeDetail,
    history: &[serde_json::Value],
    said: Option<Said<'_>>,
    typed: Option<&str>,
) -> Markup {
    let v = &node.view;
    let body = html! {
        @if let Some(typed) = typed { (mismatch(&v.ca_sha256, typed)) }
        dl .node {
            dt { "Name" } dd { (Shown(&v.name)) }
            dt { "Id" } dd { code { (v.id) } }
            dt { "State" } dd { (state(v.state)) }
            @if v.approval_removed { dt { "Approval" } dd .weak { (APPROVAL_REMOVED) } }
            dt { "Address" } dd { (Shown(&v.address)) }
            dt { "Announced from" } dd { (Shown(v.peer_address.as_deref().unwrap_or("?"))) }
            dt { "Announced" } dd { (Shown(v.announced_at.as_deref().unwrap_or("?"))) " (" (age(v.announced_at.as_deref())) " ago)" }
            @if let Some(by) = &v.admitted_by { dt { "Admitted by" } dd { (Shown(by)) } }
            dt { "Token" } dd { @if let Some(t) = &v.token_sha256_prefix { code { (Shown(t)) } } @else { "none presented" } }
            dt { "Labels" } dd { (labels(&v.token_labels)) }
            dt { "CA SHA-256" } dd { (fingerprint(&v.ca_sha256)) }
            dt { "CA subject" } dd { (Shown(node.ca_subject.as_deref().unwrap_or("?"))) }
            @if node.ca_rejected == Some(true) { dt { "CA" } dd { "rejected: every node with this CA is refused" } }
        }
        (decisions(frame, node))
        h2 { "History" }
        table .history {
            thead { tr { th { "When" } th { "Event" } th { "By" } th { "Details" } } }
            tbody { @for event in history { (history_row(event)) } }
        }
    };
    layout(frame, &format!("Node {}", janus_core::terminal::escape(&v.name)), said, body)
}

fn decisions(frame: &Frame<'_>, node: &NodeDetail) -> Markup {
    let v = &node.view;
    let may_approve = frame.caller.may(Scope::Approve) && v.state != NodeState::Admitted;
    let may_reject = frame.caller.may(Scope::Reject) && v.state != NodeState::Rejected;
    let may_forget = frame.caller.may(Scope::Reject) && v.state == NodeState::Rejected;
    html! {
        @if may_approve {
            form .decide method="post" action={ "/console/nodes/" (v.id) "/approve" } {
                h2 { "Approve" }
                p { "Type or paste the SHA-256 the node's console printed (" code { "pki: this node's CA: SHA-256 …" }
                    "). The node is approved only if it is this node's CA's." }
                input type="hidden" name=(super::csrf::FIELD) value=(frame.csrf);
                label { "CA SHA-256 " input name="expect_ca_sha256" required autocomplete="off" spellcheck="false" size="72"; }
                button { "Approve" }
            }
        } @else if v.state != NodeState::Admitted {
            p .hint { "Approving needs a credential with the " code { "approve" } " scope." }
        }
        @if may_reject {
            // A page that says what rejecting does first: never one click.
            form .decide method="get" action={ "/console/nodes/" (v.id) "/reject" } {
                h2 { "Reject" }
                button .danger { "Reject…" }
            }
        } @else if v.state != NodeState::Rejected {
            p .hint { "Rejecting needs a credential with the " code { "reject" } " scope." }
        }
        @if may_forget {
            form .decide method="get" action={ "/console/nodes/" (v.id) "/forget" } {
                h2 { "Undo the rejection" }
                p { "Forgets this record and lifts the rejection of its CA: the node may announce again." }
                button { "Forget…" }
            }
        } @else if v.state == NodeState::Rejected {
            p .hint { "Undoing a rejection needs a credential with the " code { "reject" } " scope." }
        }
    }
}

/// What a confirmation page asks: the action, its words, and where it posts.
pub struct Confirm {
    /// The page's title ("Reject web-3?").
    pub title: String,
    /// What will happen, and what it cannot undo.
    pub what: Vec<String>,
    /// The values it acts on, shown whole (name, id, fingerprint, token).
    pub about: Vec<(&'static str, String)>,
    /// Where the form posts.
    pub action: String,
    /// The button's words.
    pub button: &'static str,
    /// Where "Cancel" leads.
    pub back: String,
    /// Whether the action is one to be careful with (red).
    pub danger: bool,
}

/// A second step before an action that is not undone by a click: says
/// what will happen and to what, and posts only from its own form.
pub fn confirm(frame: &Frame<'_>, asked: &Confirm) -> Markup {
    let body = html! {
        dl .node {
            @for (name, value) in &asked.about { dt { (name) } dd { code .whole { (Shown(value)) } } }
        }
        @for line in &asked.what { p { (Shown(line)) } }
        form .decide method="post" action=(asked.action) {
            input type="hidden" name=(super::csrf::FIELD) value=(frame.csrf);
            input type="hidden" name="confirmed" value="yes";
            @if asked.danger { button .danger { (asked.button) } } @else { button { (asked.button) } }
            " " a href=(asked.back) { "Cancel" }
        }
    };
    layout(frame, &asked.title, None, body)
}

/// A fingerprint that did not match, as the node's and as typed, each
/// digit that differs marked.
pub fn mismatch(node: &str, typed: &str) -> Markup {
    let marked = |this: &str, other: &str| -> Markup {
        let other: Vec<char> = other.chars().collect();
        html! {
            code .whole {
                @for (i, c) in this.chars().enumerate() {
                    @if other.get(i) == Some(&c) { (c) } @else { mark { (c) } }
                }
            }
        }
    };
    html! {
        dl .mismatch {
            dt { "The node's CA" } dd { (marked(node, typed)) }
            dt { "You typed" } dd { (marked(typed, node)) }
        }
    }
}

fn history_row(event: &serde_json::Value) -> Markup {
    let text = |key: &str| event[key].as_str().unwrap_or_default().to_string();
    let mut details = event.clone();
    if let Some(map) = details.as_object_mut() {
        for key in ["at", "event", "by", "user", "id"] {
            map.remove(key);
        }
    }
    // An admin's surface and name (`console (alice)`) say who; an older
    // event's bare name is said after how.
    let by = match (text("by"), text("user")) {
        (by, user) if user.is_empty() => by,
        (_, actor) if actor.ends_with(')') => actor,
        (by, user) => format!("{by} ({user})"),
    };
    html! {
        tr {
            td { (Shown(&text("at"))) }
            td { (Shown(&event_in_words(event))) }
            td { (Shown(&by)) }
            td { details { summary { "JSON" } code { (Shown(&janus_core::terminal::json_text(&details))) } } }
        }
    }
}

/// An audit event as a sentence: what happened, and from where (read as
/// a typed event; one of a kind this version does not know, by its kind).
fn event_in_words(event: &serde_json::Value) -> String {
    use janus_store::AuditEvent;
    let from = |peer: &Option<String>| peer.as_ref().map(|p| format!(" from {p}")).unwrap_or_default();
    match crate::audit_entry(event) {
        crate::AuditEntry::Known { event, .. } => match event {
            AuditEvent::Announced { peer_address, token_presented, .. } => {
                format!(
                    "announced{}{}",
                    from(&peer_address),
                    if token_presented { ", with a token" } else { "" }
                )
            }
            AuditEvent::Admitted(admitted) => match admitted.token_sha256_prefix {
                Some(token) => format!("admitted by the token {token}"),
                None => "admitted".into(),
            },
            AuditEvent::Readmitted { peer_address, .. } => {
                format!(
                    "announced again{} with the token it spent: answered with this id",
                    from(&peer_address)
                )
            }
            AuditEvent::TrustDelivered { .. } => "given the fleet's trust".into(),
            AuditEvent::Rejected { .. } => "rejected".into(),
            AuditEvent::Forgotten { .. } => "forgotten".into(),
            AuditEvent::CaUnrejected { .. } => "its CA's rejection lifted".into(),
            AuditEvent::ApprovalRemoved { noticed_by, .. } => {
                format!("its approval file removed by hand (noticed by {noticed_by}); it keeps the trust")
            }
            other => crate::AuditEntry::Known { at: String::new(), event: other }.kind().replace('_', " "),
        },
        unknown => unknown.kind().replace('_', " "),
    }
}

/// The tokens: fingerprints, uses, expiry, labels; minting and revoking
/// for a credential with the `tokens` scope. `minted` is shown once.
pub fn tokens(frame: &Frame<'_>, list: &TokenList, minted: &[AddedToken], said: Option<Said<'_>>) -> Markup {
    let may = frame.caller.may(Scope::Tokens);
    let body = html! {
        @if !minted.is_empty() {
            div .minted role="status" {
                p { b { "Shown once:" } " copy these tokens now; the console and the state keep only their SHA-256." }
                // Each token alone on its line, labelled, with its own copy
                // button: copying the line copies the token and nothing else.
                @for (n, t) in minted.iter().enumerate() {
                    div .minted-token {
                        label for={ "minted-" (n) } { "Token" }
                        input .token id={ "minted-" (n) } type="text" readonly value=(t.token.as_str()) size="40";
                        button type="button" .copy data-copy={ "minted-" (n) } { "Copy" }
                        small .hint { "SHA-256 prefix (what lists show; not the token): " code { (Shown(&t.sha256_prefix)) } }
                    }
                }
            }
        }
        @for warning in &list.warnings { p .said.refused { (Shown(warning)) } }
        @if list.tokens.len() > ROWS_AT_MOST {
            p .said.refused { "Showing " (ROWS_AT_MOST) " of " (list.tokens.len()) " tokens (an admin on the state directory lists them all)." }
        }
        table .tokens {
            thead { tr { th { "SHA-256 prefix" } th { "Uses left" } th { "Expires" } th { "Labels" }
                th { "Description" } th { "Added by" } @if may { th {} } } }
            tbody {
                @if list.tokens.is_empty() {
                    tr { td .empty colspan="7" { "No tokens: mint one below, or with " code { "tokens add" } " on the state directory." } }
                }
                @for t in list.tokens.iter().take(ROWS_AT_MOST) {
                    tr {
                        td { code { (Shown(&t.sha256_prefix)) } @if t.weak { " " span .weak { "WEAK" } } }
                        td { @if t.metadata_unreadable { "unknown" } @else { (t.uses_left) } }
                        td { @if t.metadata_unreadable { "unknown" } @else { (Shown(t.expires_at.as_deref().unwrap_or("never"))) } }
                        td { (labels(&t.labels)) }
                        td { (Shown(t.description.as_deref().unwrap_or(""))) }
                        td { (Shown(&t.added_by)) }
                        @if may {
                            // A page that says what revoking does first: never one click.
                            td { form method="get" action={ "/console/tokens/" (Shown(&t.sha256_prefix)) "/revoke" } {
                                button .danger { "Revoke…" } } }
                        }
                    }
                }
            }
        }
        @if may { (mint_form(frame)) } @else {
            p .hint { "Minting and revoking tokens need a credential with the " code { "tokens" } " scope." }
        }
    };
    layout(frame, "Tokens", said, body)
}

fn mint_form(frame: &Frame<'_>) -> Markup {
    html! {
        form .mint method="post" action="/console/tokens" {
            h2 { "Mint tokens" }
            input type="hidden" name=(super::csrf::FIELD) value=(frame.csrf);
            // Each form is done once: a re-sent one (a reload) is refused, not minted again.
            input type="hidden" name="once" value=(janus_core::pki::hex(&rand::random::<[u8; 16]>()));
            label { "How many " input name="count" type="number" min="1" max="1000" value="1"; }
            label { " Uses each " input name="uses" type="number" min="1" value="1"; }
            label { " Expires in " input name="expires_in" placeholder="24h"; }
            label { " Description " input name="description"; }
            label { " Labels " input name="labels" placeholder="pool=gpu,zone=b"; }
            button { "Mint" }
        }
    }
}

/// What an action that leaves no page of its own did (a forgotten node).
pub fn done(frame: &Frame<'_>, title: &str, said: &str) -> Markup {
    layout(
        frame,
        title,
        Some(Said::Done(said)),
        html! { p { a href="/console/" { "Back to the pending nodes" } } },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_text_is_shown_escaped_for_people_then_for_html() {
        let shown = html! { (Shown("a<b>&\"\u{202e}\u{200b}\u{1b}[2K")) }.into_string();
        assert_eq!(shown, "a&lt;b&gt;&amp;&quot;\\u{202e}\\u{200b}\\x1b[2K");
    }

    #[test]
    fn a_page_shows_at_most_its_rows_and_says_so() {
        let node = |i: usize| NodeView {
            id: format!("{i:032x}"),
            name: format!("web-{i}"),
            address: "10.0.0.1:9505".into(),
            peer_address: None,
            ca_sha256: "ab".repeat(32),
            state: NodeState::Pending,
            announced_at: None,
            admitted_by: None,
            admitted_at: None,
            ca_cert_pem: String::new(),
            token_sha256_prefix: None,
            token_labels: Default::default(),
            approval_removed: false,
        };
        let list = NodeList {
            nodes: (0..ROWS_AT_MOST + 1).map(node).collect(),
            unreadable: vec![],
            orphan_approvals: vec![],
        };
        let caller =
            Caller { name: "alice".into(), scopes: vec![Scope::Read], certificate_sha256: String::new() };
        let page = nodes(&Frame { caller: &caller, csrf: "t" }, &list, &Filter::default()).into_string();
        assert!(page.contains(&format!("Showing the newest {ROWS_AT_MOST} of {}", ROWS_AT_MOST + 1)));
        assert!(page.contains("1 not shown"));
        assert_eq!(page.matches("<tr data-id=").count(), ROWS_AT_MOST);
    }

    /// The lint (clippy.toml `disallowed-types`) sees `PreEscaped` named
    /// as a type; this sees it called, through `Markup`, in any console file.
    #[test]
    fn no_console_file_builds_markup_from_a_string() {
        let files = [
            ("pages.rs", include_str!("pages.rs")),
            ("mod.rs", include_str!("mod.rs")),
            ("serve.rs", include_str!("serve.rs")),
        ];
        for (file, text) in files {
            assert!(!text.contains(concat!("PreEscaped", "(")), "{file} builds markup from a string");
        }
    }
}

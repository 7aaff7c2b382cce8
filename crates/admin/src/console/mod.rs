//! The admin console: pages for people on the admin listener (`serve
//! --admin-listen`), beside the admin API and over the same typed
//! functions: the pending nodes (live), every node filtered by state and
//! label, one node with its history and its decisions, the tokens.
//!
//! Invariants: no new trust path: the same handshake (a client
//! certificate from the admin CA), the same scopes (`read` sees,
//! `approve`, `reject` and `tokens` act), the same audit trail under the
//! credential's name; an approval is made only when the fingerprint the
//! person typed is the node's CA's (`--expect-ca-sha256`'s rule), never
//! pre-filled; every form passes [`csrf::check`] before its handler runs,
//! and every answer carries a Content-Security-Policy that allows nothing
//! but this origin's own stylesheet and script (no inline code, no other
//! origin, no framing); a mint form is done once (a re-sent form is
//! refused, not minted again); nothing a client sends makes a 409.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::{Path, RawQuery, Request};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Router};
use maud::Markup;

use crate::credential::{Caller, Scope};
use crate::error::{AdminError, Code, Field, Surface};
use crate::model::{Actor, Approve, Check, Fingerprint, Mint, NewTokens, NodeFilter, Revoke};
use crate::web::{AdminState, Needs, Routes, on_store, query};
use pages::{Filter, Frame, Said};

pub mod csrf;
pub mod pages;
pub mod search;
mod serve;

pub use crate::web::layers::CONTENT_SECURITY_POLICY;

/// What the console keeps between requests: its form key, and the mint
/// forms already done.
#[derive(Default)]
pub struct Console {
    key: csrf::Key,
    done: Mutex<DoneForms>,
}

/// The mint forms already sent, the newest [`DoneForms::KEPT`].
#[derive(Default)]
struct DoneForms {
    order: VecDeque<String>,
    seen: HashSet<String>,
}

impl DoneForms {
    const KEPT: usize = 4096;

    /// Whether `once` is new (and now kept).
    fn first(&mut self, once: &str) -> bool {
        if !self.seen.insert(once.to_string()) {
            return false;
        }
        self.order.push_back(once.to_string());
        if self.order.len() > Self::KEPT
            && let Some(old) = self.order.pop_front()
        {
            self.seen.remove(&old);
        }
        true
    }

    /// `once` may be sent again: its work was refused, nothing was done.
    fn forget(&mut self, once: &str) {
        if self.seen.remove(once) {
            self.order.retain(|kept| kept != once);
        }
    }
}

/// The console's routes: a page (`GET`) needs only its scope; a form
/// (`POST`) its scope, then [`checked_form`] (the CSRF check).
fn build() -> Routes {
    use axum::routing::{get, post};
    let read = Needs::Scope(Scope::Read);
    let form =
        |handler| axum::routing::MethodRouter::route_layer(handler, axum::middleware::from_fn(checked_form));
    let (approve_, reject_, tokens_) =
        (Needs::Scope(Scope::Approve), Needs::Scope(Scope::Reject), Needs::Scope(Scope::Tokens));
    Routes::new()
        .route(Method::GET, "/console/", read, get(pending_page))
        .route(Method::GET, "/console/nodes", read, get(nodes_page))
        .route(Method::GET, "/console/nodes/{id}", read, get(node_page))
        .route(Method::POST, "/console/nodes/{id}/approve", approve_, form(post(approve)))
        .route(Method::GET, "/console/nodes/{id}/reject", reject_, get(reject_confirm))
        .route(Method::POST, "/console/nodes/{id}/reject", reject_, form(post(reject)))
        .route(Method::GET, "/console/nodes/{id}/forget", reject_, get(forget_confirm))
        .route(Method::POST, "/console/nodes/{id}/forget", reject_, form(post(forget)))
        .route(Method::GET, "/console/tokens", read, get(tokens_page))
        .route(Method::POST, "/console/tokens", tokens_, form(post(mint)))
        .route(Method::GET, "/console/tokens/{prefix}/revoke", tokens_, get(revoke_confirm))
        .route(Method::POST, "/console/tokens/{prefix}/revoke", tokens_, form(post(revoke)))
        .route(Method::GET, "/console/events", read, get(serve::events))
        .route(Method::GET, "/console/assets/{file}", Needs::Credential, get(serve::asset))
}

/// Every console route's method, path and what it needs, as `routes`
/// serves them: what the tests walk (every form refuses a post without
/// its token; every route a credential without its scope).
pub fn table() -> Vec<(Method, &'static str, Needs)> {
    build().table
}

/// The console's routes, merged into the admin listener's router.
pub(crate) fn routes() -> Router<AdminState> {
    build()
        .router
        // A person who types the admin port's address lands on the console.
        .route("/", axum::routing::get(|| async { axum::response::Redirect::to("/console/") }))
        .route("/console", axum::routing::get(|| async { axum::response::Redirect::to("/console/") }))
        .layer(Extension(Arc::new(Console::default())))
}

/// A form's fields, read once its CSRF check passed.
#[derive(Clone)]
struct Fields(HashMap<String, String>);

impl Fields {
    fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str).filter(|v| !v.trim().is_empty())
    }
}

/// Reads a form (16 KiB at most, `application/x-www-form-urlencoded`),
/// refuses it unless [`csrf::check`] passes, and hands its fields on.
async fn checked_form(Extension(console): Extension<Arc<Console>>, request: Request, next: Next) -> Response {
    let (mut parts, body) = request.into_parts();
    let Some(caller) = parts.extensions.get::<Caller>().cloned() else {
        return failed(AdminError::new(Code::CredentialInvalid, "no credential"));
    };
    let form_type = parts.headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default();
    if !form_type.starts_with("application/x-www-form-urlencoded") {
        return failed(AdminError::new(
            Code::InvalidRequest,
            "a console form is sent as application/x-www-form-urlencoded",
        ));
    }
    let Ok(bytes) = axum::body::to_bytes(body, 16 * 1024).await else {
        return failed(AdminError::new(
            Code::BodyTooLarge,
            "the form is larger than 16 KiB, or was cut short",
        ));
    };
    let fields: HashMap<String, String> = form_urlencoded::parse(&bytes).into_owned().collect();
    if let Err(why) =
        csrf::check(&console.key, &parts.headers, &caller, fields.get(csrf::FIELD).map(String::as_str))
    {
        return failed(why);
    }
    parts.extensions.insert(Fields(fields));
    next.run(Request::from_parts(parts, Body::empty())).await
}

/// An error answered as a page: the listener's one page refusal.
pub(crate) fn failed(error: AdminError) -> Response {
    crate::web::page_refusal(error)
}

/// A page as the answer's body.
fn html(markup: Markup) -> axum::response::Html<String> {
    axum::response::Html(markup.into_string())
}

/// The browser's name and this credential's form token in it; a new
/// browser gets its cookie with the page.
fn frame_of(console: &Console, headers: &HeaderMap, caller: &Caller) -> (String, Option<HeaderValue>) {
    match csrf::browser(headers) {
        Some(browser) => (console.key.token(caller, &browser), None),
        None => {
            let (browser, cookie) = csrf::new_browser();
            (console.key.token(caller, &browser), Some(cookie))
        }
    }
}

/// A page, answered with `status` and the browser's cookie when new.
fn page(status: StatusCode, cookie: Option<HeaderValue>, render: impl FnOnce() -> Markup) -> Response {
    let mut response = (status, html(render())).into_response();
    if let Some(cookie) = cookie {
        response.headers_mut().insert(header::SET_COOKIE, cookie);
    }
    response
}

/// What every page handler takes.
struct Asked {
    state: AdminState,
    caller: Caller,
    console: Arc<Console>,
    csrf: String,
    cookie: Option<HeaderValue>,
}

impl axum::extract::FromRequestParts<AdminState> for Asked {
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &AdminState,
    ) -> Result<Self, Response> {
        let (Some(caller), Some(console)) =
            (parts.extensions.get::<Caller>().cloned(), parts.extensions.get::<Arc<Console>>().cloned())
        else {
            return Err(failed(AdminError::new(Code::CredentialInvalid, "no credential")));
        };
        let (csrf, cookie) = frame_of(&console, &parts.headers, &caller);
        Ok(Asked { state: state.clone(), caller, console, csrf, cookie })
    }
}

impl Asked {
    /// Who acts: the credential, through the console.
    fn actor(&self) -> Actor {
        self.caller.actor(Surface::Console)
    }

    /// `work` on the store, for this page's actor.
    async fn on_store<T: Send + 'static>(
        &self,
        work: impl FnOnce(&janus_store::Store, &Actor) -> Result<T, AdminError> + Send + 'static,
    ) -> Result<T, AdminError> {
        on_store(&self.state, self.actor(), work).await
    }

    fn frame(&self) -> Frame<'_> {
        Frame { caller: &self.caller, csrf: &self.csrf }
    }
}

async fn pending_page(asked: Asked, RawQuery(raw): RawQuery) -> Response {
    let mut search = search::Search::default();
    match query::pairs(raw.as_deref(), &["q"]) {
        Ok(pairs) => pairs.iter().for_each(|(_, typed)| search = search::Search::new(typed)),
        Err(refused) => return failed(refused),
    }
    let filter = NodeFilter { pending: true, ..NodeFilter::default() };
    match asked.on_store(move |store, _| crate::node_list(store, &filter)).await {
        Ok(mut list) => {
            list.nodes = search::found(list.nodes, &search);
            page(StatusCode::OK, asked.cookie.clone(), || pages::pending(&asked.frame(), &list, &search))
        }
        Err(e) => failed(e),
    }
}

async fn nodes_page(asked: Asked, RawQuery(raw): RawQuery) -> Response {
    let (filter, args) = match nodes_filter(raw.as_deref()) {
        Ok(both) => both,
        Err(refused) => return failed(refused),
    };
    match asked.on_store(move |store, _| crate::node_list(store, &args)).await {
        Ok(mut list) => {
            list.nodes = search::found(list.nodes, &filter.search);
            page(StatusCode::OK, asked.cookie.clone(), || pages::nodes(&asked.frame(), &list, &filter))
        }
        Err(e) => failed(e),
    }
}

/// The nodes page's filter: as the page shows it, and as the listing takes it.
fn nodes_filter(raw: Option<&str>) -> Result<(Filter, NodeFilter), AdminError> {
    let mut filter = Filter::default();
    let mut args = NodeFilter::default();
    for (key, value) in query::pairs(raw, &["q", "state", "label"])? {
        match (key.as_str(), value.as_str()) {
            ("q", typed) => filter.search = search::Search::new(typed),
            ("state", "") | ("label", "") => {}
            ("state", "pending") => args.pending = true,
            ("state", "admitted") => args.admitted = true,
            ("state", "rejected") => args.rejected = true,
            ("state", _) => {
                return Err(AdminError::field(Field::State, "must be pending, admitted or rejected"));
            }
            (_, label) => args.labels.push(crate::model::parse_label(label, Field::LabelFilter)?),
        }
        match key.as_str() {
            "state" => filter.state = Some(value),
            "label" => filter.label = Some(value),
            _ => {}
        }
    }
    Ok((filter, args))
}

/// One node and its history, as they stand now.
async fn node_and_history(
    asked: &Asked,
    id: String,
) -> Result<(crate::NodeDetail, Vec<serde_json::Value>), AdminError> {
    asked
        .on_store(move |store, _| {
            let node = crate::show_node(store, &id)?;
            let history = match crate::history(store, &node.view.id) {
                Err(AdminError { code: Code::NoHistory, .. }) => Vec::new(),
                other => other?,
            };
            Ok((node, history))
        })
        .await
}

async fn node_page(asked: Asked, Path(id): Path<String>) -> Response {
    match node_and_history(&asked, id).await {
        Ok((node, history)) => page(StatusCode::OK, asked.cookie.clone(), || {
            pages::node(&asked.frame(), &node, &history, None, None)
        }),
        Err(e) => failed(e),
    }
}

/// A decision's answer: the node's page as it stands now, with what the
/// decision did, or (refused, with the refusal's status) why not.
async fn after_decision(asked: Asked, id: String, decided: Result<crate::Decision, AdminError>) -> Response {
    after_decision_typed(asked, id, decided, None).await
}

/// [`after_decision`], with the fingerprint the person typed: a mismatch
/// shows both, the digits that differ marked.
async fn after_decision_typed(
    asked: Asked,
    id: String,
    decided: Result<crate::Decision, AdminError>,
    typed: Option<String>,
) -> Response {
    let mismatched = matches!(decided, Err(AdminError { code: Code::FingerprintMismatch, .. }));
    let (status, said, id) = match decided {
        Ok(decision) => {
            let id = decision.ids.first().cloned().unwrap_or(id);
            (StatusCode::OK, Ok(decision.said), id)
        }
        Err(e) if e.is_the_states() => return failed(e),
        Err(e) => (status_of(&e), Err((e.said(Surface::Console), e.code)), id),
    };
    match node_and_history(&asked, id).await {
        Ok((node, history)) => page(status, asked.cookie.clone(), || {
            let said = match &said {
                Ok(done) => Said::Done(done),
                Err((why, code)) => Said::Refused(why, *code),
            };
            let typed = typed.as_deref().filter(|_| mismatched);
            pages::node(&asked.frame(), &node, &history, Some(said), typed)
        }),
        Err(e) => failed(e),
    }
}

/// A refusal's status, for a page that says it beside the form.
fn status_of(error: &AdminError) -> StatusCode {
    StatusCode::from_u16(error.code.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

async fn approve(asked: Asked, Extension(fields): Extension<Fields>, Path(id): Path<String>) -> Response {
    let Some(expected) = fields.get("expect_ca_sha256") else {
        let refused = Err(AdminError::new(
            Code::CheckRequired,
            "type the CA SHA-256 the node's console printed: the console approves only against it",
        ));
        return after_decision(asked, id, refused).await;
    };
    let fingerprint = match Fingerprint::parse(expected, Field::ExpectedFingerprint) {
        Ok(fingerprint) => fingerprint,
        Err(refused) => return after_decision(asked, id, Err(refused)).await,
    };
    let typed = Some(fingerprint.hex().to_string());
    let request = Approve { node: id.clone(), check: Check::Expected(fingerprint), force: false };
    let decided = asked.on_store(move |store, actor| crate::approve(store, &request, actor)).await;
    after_decision_typed(asked, id, decided, typed).await
}

/// What rejecting does, as the confirmation says it.
const REJECT_SAYS: [&str; 2] = [
    "Rejects this node and its CA: its polls are answered 404 from now on, and its later announcements (new \
     ids, same CA) are rejected at once.",
    "It does not take back the fleet's trust from a node that was admitted (it may hold it already: rotate \
     the fleet's issuing CA to revoke it). Undo it on the node's page afterwards (Forget), with the reject scope.",
];

/// The node `id` names, for a confirmation page.
async fn node_named(asked: &Asked, id: String) -> Result<crate::NodeDetail, AdminError> {
    asked.on_store(move |store, _| crate::show_node(store, &id)).await
}

fn about_node(node: &crate::NodeDetail) -> Vec<(&'static str, String)> {
    let v = &node.view;
    vec![("Name", v.name.clone()), ("Id", v.id.clone()), ("CA SHA-256", v.ca_sha256.clone())]
}

/// A node's second step: the confirmation `asking` makes of the node `id` names.
async fn node_confirm(
    asked: Asked,
    id: String,
    asking: impl FnOnce(&crate::NodeDetail) -> pages::Confirm,
) -> Response {
    match node_named(&asked, id).await {
        Ok(node) => {
            let asking = asking(&node);
            page(StatusCode::OK, asked.cookie.clone(), || pages::confirm(&asked.frame(), &asking))
        }
        Err(e) => failed(e),
    }
}

/// `GET /console/nodes/{id}/reject`: what rejecting it does, then the form.
async fn reject_confirm(asked: Asked, Path(id): Path<String>) -> Response {
    node_confirm(asked, id, |node| {
        let v = &node.view;
        pages::Confirm {
            title: format!("Reject {}?", janus_core::terminal::escape(&v.name)),
            what: REJECT_SAYS.iter().map(|s| s.to_string()).collect(),
            about: about_node(node),
            action: format!("/console/nodes/{}/reject", v.id),
            button: "Reject",
            back: format!("/console/nodes/{}", v.id),
            danger: true,
        }
    })
    .await
}

async fn reject(asked: Asked, Extension(fields): Extension<Fields>, Path(id): Path<String>) -> Response {
    if fields.get("confirmed") != Some("yes") {
        return reject_confirm(asked, Path(id)).await;
    }
    let key = id.clone();
    let decided = asked.on_store(move |store, actor| crate::reject(store, &key, actor)).await;
    after_decision(asked, id, decided).await
}

/// `GET /console/nodes/{id}/forget`: the undo of a rejection, confirmed first.
async fn forget_confirm(asked: Asked, Path(id): Path<String>) -> Response {
    node_confirm(asked, id, |node| {
        let v = &node.view;
        pages::Confirm {
            title: format!("Forget {}?", janus_core::terminal::escape(&v.name)),
            what: vec![
                "Forgets this record and lifts the rejection of its CA: the node (or another with the same CA) \
                 may announce again, and waits for an admin as any other."
                    .into(),
            ],
            about: about_node(node),
            action: format!("/console/nodes/{}/forget", v.id),
            button: "Forget and lift the rejection",
            back: format!("/console/nodes/{}", v.id),
            danger: false,
        }
    })
    .await
}

async fn forget(asked: Asked, Extension(fields): Extension<Fields>, Path(id): Path<String>) -> Response {
    if fields.get("confirmed") != Some("yes") {
        return forget_confirm(asked, Path(id)).await;
    }
    let key = id.clone();
    // Only a rejected record is forgotten here: the undo of a rejection.
    let forgot = asked
        .on_store(move |store, actor| {
            let shown = crate::show_node(store, &key)?;
            if shown.view.state != janus_store::NodeState::Rejected {
                return Err(AdminError::new(
                    Code::NotRejected,
                    format!(
                        "{} is not rejected: the console forgets only a rejected record (the undo of a rejection)",
                        shown.view.id
                    ),
                ));
            }
            crate::forget(store, &key, actor)
        })
        .await;
    match forgot {
        Ok(decision) => page(StatusCode::OK, asked.cookie.clone(), || {
            pages::done(&asked.frame(), "Forgotten", &decision.said)
        }),
        Err(e) if e.is_the_states() => failed(e),
        Err(e) => after_decision(asked, id, Err(e)).await,
    }
}

async fn tokens_page(asked: Asked) -> Response {
    tokens_answer(asked, StatusCode::OK, Vec::new(), None).await
}

/// The tokens page as the tokens stand now, with what was just done.
async fn tokens_answer(
    asked: Asked,
    status: StatusCode,
    minted: Vec<crate::tokens::AddedToken>,
    said: Option<Result<String, AdminError>>,
) -> Response {
    match asked.on_store(|store, _| crate::tokens::list(store)).await {
        Ok(list) => page(status, asked.cookie.clone(), || {
            let refused =
                said.as_ref().and_then(|s| s.as_ref().err()).map(|e| (e.said(Surface::Console), e.code));
            let said = match (&said, &refused) {
                (Some(Ok(done)), _) => Some(Said::Done(done)),
                (_, Some((why, code))) => Some(Said::Refused(why, *code)),
                _ => None,
            };
            pages::tokens(&asked.frame(), &list, &minted, said)
        }),
        Err(e) => failed(e),
    }
}

/// The mint form's fields as the request they ask for, or why not (the
/// form's label named).
fn mint_request(fields: &Fields) -> Result<NewTokens, AdminError> {
    let number = |name: &str, field: Field| -> Result<Option<u64>, AdminError> {
        fields
            .get(name)
            .map(|v| v.trim().parse::<u64>().map_err(|_| AdminError::field(field, "must be a whole number")))
            .transpose()
    };
    let expires_in = fields
        .get("expires_in")
        .map(|v| {
            janus_core::clock::parse_duration(v.trim()).map_err(|_| {
                AdminError::field(Field::ExpiresIn, "must be a duration, such as 90m, 24h or 7d")
            })
        })
        .transpose()?;
    let mut labels = Vec::new();
    for label in fields.get("labels").unwrap_or_default().split(',').map(str::trim).filter(|l| !l.is_empty())
    {
        labels.push(crate::model::parse_label(label, Field::Labels)?);
    }
    let count = number("count", Field::Count)?.unwrap_or(1);
    let request = NewTokens {
        mint: Mint::Count(usize::try_from(count).unwrap_or(usize::MAX)),
        uses: number("uses", Field::Uses)?.map(|n| u32::try_from(n).unwrap_or(u32::MAX)),
        expires_in,
        description: fields.get("description").map(str::to_string),
        labels: NewTokens::labels_from(labels)?,
    };
    request.check()?;
    Ok(request)
}

async fn mint(asked: Asked, Extension(fields): Extension<Fields>) -> Response {
    let request = match mint_request(&fields) {
        Ok(request) => request,
        Err(why) => {
            return tokens_answer(asked, status_of(&why), Vec::new(), Some(Err(why))).await;
        }
    };
    let once = fields.get("once").unwrap_or_default().to_string();
    let done = || asked.console.done.lock().unwrap_or_else(|e| e.into_inner());
    if !janus_core::pki::is_hex(&once, 32) || !done().first(&once) {
        let why = "this mint form was sent already (its tokens were shown on its first answer, once): \
                   nothing was minted again; mint from a fresh form";
        let resent = AdminError::new(Code::FormResent, why);
        return tokens_answer(asked, status_of(&resent), Vec::new(), Some(Err(resent))).await;
    }
    let minted = asked.on_store(move |store, actor| crate::tokens::add(store, &request, actor)).await;
    match &minted {
        // Refused, or failed to write: nothing was minted, so the form may
        // be sent again. (Past the deadline it may have been: kept done.)
        Err(e) if e.code != Code::DeadlineExceeded => done().forget(&once),
        _ => {}
    }
    let minted = minted.map(|made| (format!("minted {} token(s)", made.len()), made));
    after_tokens(asked, minted).await
}

/// `GET /console/tokens/{prefix}/revoke`: what revoking it does, then the form.
async fn revoke_confirm(asked: Asked, Path(prefix): Path<String>) -> Response {
    let key = match crate::model::token_prefix(&prefix) {
        Ok(key) => key,
        Err(why) => return failed(why),
    };
    let asking = pages::Confirm {
        title: "Revoke this token?".into(),
        what: vec![
            "Revokes the token for good: it admits no node again, whatever the tokens file lists. Nodes it \
             admitted stay admitted. This cannot be undone: mint a new token instead."
                .into(),
        ],
        about: vec![("Token SHA-256 prefix", key.clone())],
        action: format!("/console/tokens/{key}/revoke"),
        button: "Revoke",
        back: "/console/tokens".into(),
        danger: true,
    };
    page(StatusCode::OK, asked.cookie.clone(), || pages::confirm(&asked.frame(), &asking))
}

async fn revoke(asked: Asked, Extension(fields): Extension<Fields>, Path(prefix): Path<String>) -> Response {
    if fields.get("confirmed") != Some("yes") {
        return revoke_confirm(asked, Path(prefix)).await;
    }
    let key = match crate::model::token_prefix(&prefix) {
        Ok(key) => key,
        Err(why) => {
            return tokens_answer(asked, status_of(&why), Vec::new(), Some(Err(why))).await;
        }
    };
    let request = Revoke { key };
    let revoked = asked.on_store(move |store, actor| crate::tokens::revoke(store, &request, actor)).await;
    after_tokens(asked, revoked.map(|r| (format!("revoked the token {}", r.sha256_prefix), Vec::new()))).await
}

/// A token action's answer: the tokens page with what it did (and the
/// tokens it made), or why not; a state that cannot be told is a page of its own.
async fn after_tokens(
    asked: Asked,
    done: Result<(String, Vec<crate::tokens::AddedToken>), AdminError>,
) -> Response {
    match done {
        Ok((said, made)) => tokens_answer(asked, StatusCode::OK, made, Some(Ok(said))).await,
        Err(e) if e.is_the_states() => failed(e),
        Err(e) => tokens_answer(asked, status_of(&e), Vec::new(), Some(Err(e))).await,
    }
}

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
use axum::handler::Handler;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::MethodRouter;
use axum::{Extension, Router};
use maud::Markup;

use crate::api::error::AdminApiError;
use crate::api::routes::{Api, on_store};
use crate::api::{Caller, Needs, Scope};
use crate::{ApproveArgs, ListArgs, TokensAddArgs};
use janus_endpoint::answer::{ErrorAnswer, Refused};
use pages::{Filter, Frame, Said};

pub mod csrf;
pub mod pages;
pub mod search;
mod serve;

pub use serve::CONTENT_SECURITY_POLICY;

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

/// The console's routes under construction: a page (`GET`) or a form
/// (`POST`) goes in with the scope it needs, a form behind [`csrf::check`]
/// too; the builder picks the method, and nothing else adds a route, so
/// none is without its checks.
struct Routes {
    router: Router<Api>,
    table: Vec<(Method, &'static str, Needs)>,
}

impl Routes {
    /// A `GET`: it changes nothing, so it needs only its scope.
    fn page<H: Handler<T, Api>, T: 'static>(mut self, path: &'static str, needs: Needs, handler: H) -> Self {
        self.table.push((Method::GET, path, needs));
        self.router = self.router.route(path, guarded(needs, axum::routing::get(handler)));
        self
    }

    /// A `POST`: its scope, then [`checked_form`] (the CSRF check).
    fn form<H: Handler<T, Api>, T: 'static>(mut self, path: &'static str, needs: Needs, handler: H) -> Self {
        self.table.push((Method::POST, path, needs));
        let checked = axum::routing::post(handler).route_layer(axum::middleware::from_fn(checked_form));
        self.router = self.router.route(path, guarded(needs, checked));
        self
    }
}

/// `handler` behind the check of `needs`.
fn guarded(needs: Needs, handler: MethodRouter<Api>) -> MethodRouter<Api> {
    handler.route_layer(axum::middleware::from_fn(move |r: Request, n: Next| guard(needs, r, n)))
}

fn build() -> Routes {
    let read = Needs::Scope(Scope::Read);
    let routes = Routes { router: Router::new(), table: Vec::new() };
    routes
        .page("/console/", read, pending_page)
        .page("/console/nodes", read, nodes_page)
        .page("/console/nodes/{id}", read, node_page)
        .form("/console/nodes/{id}/approve", Needs::Scope(Scope::Approve), approve)
        .page("/console/nodes/{id}/reject", Needs::Scope(Scope::Reject), reject_confirm)
        .form("/console/nodes/{id}/reject", Needs::Scope(Scope::Reject), reject)
        .page("/console/nodes/{id}/forget", Needs::Scope(Scope::Reject), forget_confirm)
        .form("/console/nodes/{id}/forget", Needs::Scope(Scope::Reject), forget)
        .page("/console/tokens", read, tokens_page)
        .form("/console/tokens", Needs::Scope(Scope::Tokens), mint)
        .page("/console/tokens/{prefix}/revoke", Needs::Scope(Scope::Tokens), revoke_confirm)
        .form("/console/tokens/{prefix}/revoke", Needs::Scope(Scope::Tokens), revoke)
        .page("/console/events", read, serve::events)
        .page("/console/assets/{file}", Needs::Credential, serve::asset)
}

/// Every console route's method, path and what it needs, as [`routes`]
/// serves them: what the tests walk (every form refuses a post without
/// its token; every route a credential without its scope).
pub fn table() -> Vec<(Method, &'static str, Needs)> {
    build().table
}

/// The console's routes, added to the admin API's router.
pub(crate) fn routes(api: &Api) -> Router<Api> {
    build()
        .router
        // A person who types the admin port's address lands on the console.
        .route("/", axum::routing::get(|| async { axum::response::Redirect::to("/console/") }))
        .route("/console", axum::routing::get(|| async { axum::response::Redirect::to("/console/") }))
        .layer(Extension(api.console.clone()))
}

/// The route's check, the API's own, answered as a page.
async fn guard(needs: Needs, mut request: Request, next: Next) -> Response {
    match crate::api::routes::permitted(needs, &request) {
        Ok(caller) => {
            request.extensions_mut().insert(caller);
            next.run(request).await
        }
        Err(refused) => failed(refused),
    }
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
        return failed(AdminApiError::Forbidden("no credential".into()));
    };
    let form_type = parts.headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default();
    if !form_type.starts_with("application/x-www-form-urlencoded") {
        return failed(AdminApiError::BadRequest(
            "a console form is sent as application/x-www-form-urlencoded".into(),
        ));
    }
    let Ok(bytes) = axum::body::to_bytes(body, 16 * 1024).await else {
        return failed(AdminApiError::BadRequest("the form is larger than 16 KiB, or was cut short".into()));
    };
    let fields: HashMap<String, String> = form_urlencoded::parse(&bytes).into_owned().collect();
    if let Err(why) =
        csrf::check(&console.key, &parts.headers, &caller, fields.get(csrf::FIELD).map(String::as_str))
    {
        return failed(AdminApiError::Forbidden(why));
    }
    parts.extensions.insert(Fields(fields));
    next.run(Request::from_parts(parts, Body::empty())).await
}

/// An error answered as a page: the API's status table, words and
/// `Retry-After`, and the same line in the log.
pub(crate) fn failed(error: AdminApiError) -> Response {
    let said = error.said();
    let title = match error.status() {
        StatusCode::FORBIDDEN => "Refused",
        StatusCode::NOT_FOUND => "Not found",
        StatusCode::SERVICE_UNAVAILABLE => "Not now",
        StatusCode::INTERNAL_SERVER_ERROR => "Failed",
        _ => "Not done",
    };
    let mut response = (error.status(), html(pages::failure(title, &said))).into_response();
    if let Some(secs) = error.retry_after() {
        response.headers_mut().insert(header::RETRY_AFTER, secs.max(1).into());
    }
    response.extensions_mut().insert(Refused { level: error.log_level(), said, cause: error.withheld() });
    response
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
    api: Api,
    caller: Caller,
    console: Arc<Console>,
    csrf: String,
    cookie: Option<HeaderValue>,
}

impl axum::extract::FromRequestParts<Api> for Asked {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut axum::http::request::Parts, api: &Api) -> Result<Self, Response> {
        let Some(caller) = parts.extensions.get::<Caller>().cloned() else {
            return Err(failed(AdminApiError::Forbidden("no credential".into())));
        };
        Ok(Asked::new(api.clone(), caller, &parts.headers))
    }
}

impl Asked {
    fn new(api: Api, caller: Caller, headers: &HeaderMap) -> Self {
        let console = api.console.clone();
        let (csrf, cookie) = frame_of(&console, headers, &caller);
        Asked { api, caller, console, csrf, cookie }
    }

    fn frame(&self) -> Frame<'_> {
        Frame { caller: &self.caller, csrf: &self.csrf }
    }
}

fn list_args() -> ListArgs {
    ListArgs::everything()
}

async fn pending_page(asked: Asked, RawQuery(query): RawQuery) -> Response {
    let mut search = search::Search::default();
    for (key, value) in form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
        match key.as_ref() {
            "q" => search = search::Search::new(&value),
            other => return failed(AdminApiError::BadRequest(format!("{other:?} is not a parameter: q"))),
        }
    }
    let args = ListArgs { pending: true, ..list_args() };
    match on_store(&asked.api, &asked.caller, move |store| crate::node_list(store, &args)).await {
        Ok(mut list) => {
            list.nodes = search::found(list.nodes, &search);
            page(StatusCode::OK, asked.cookie.clone(), || pages::pending(&asked.frame(), &list, &search))
        }
        Err(e) => failed(e),
    }
}

async fn nodes_page(asked: Asked, RawQuery(query): RawQuery) -> Response {
    let mut filter = Filter::default();
    let mut args = list_args();
    for (key, value) in form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
        match (key.as_ref(), value.as_ref()) {
            ("q", typed) => filter.search = search::Search::new(typed),
            ("state", "") | ("label", "") => {}
            ("state", "pending") => args.pending = true,
            ("state", "admitted") => args.admitted = true,
            ("state", "rejected") => args.rejected = true,
            ("label", label) => match crate::args::parse_label(label) {
                Ok(pair) => args.labels.push(pair),
                Err(why) => return failed(AdminApiError::BadRequest(format!("label: {why}"))),
            },
            (other, _) => {
                return failed(AdminApiError::BadRequest(format!(
                    "{other:?} is not a filter: state, label, q"
                )));
            }
        }
        match key.as_ref() {
            "state" => filter.state = Some(value.into_owned()),
            "label" => filter.label = Some(value.into_owned()),
            _ => {}
        }
    }
    match on_store(&asked.api, &asked.caller, move |store| crate::node_list(store, &args)).await {
        Ok(mut list) => {
            list.nodes = search::found(list.nodes, &filter.search);
            page(StatusCode::OK, asked.cookie.clone(), || pages::nodes(&asked.frame(), &list, &filter))
        }
        Err(e) => failed(e),
    }
}

/// One node and its history, as they stand now.
async fn node_and_history(
    asked: &Asked,
    id: String,
) -> Result<(crate::NodeDetail, Vec<serde_json::Value>), AdminApiError> {
    on_store(&asked.api, &asked.caller, move |store| {
        let node = crate::show_node(store, &id)?;
        let history = match crate::history(store, &node.view.id) {
            Err(crate::AdminError::NotFound(_)) => Vec::new(),
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
async fn after_decision(
    asked: Asked,
    id: String,
    decided: Result<crate::Decision, AdminApiError>,
) -> Response {
    after_decision_typed(asked, id, decided, None).await
}

/// [`after_decision`], with the fingerprint the person typed: a mismatch
/// shows both, the digits that differ marked.
async fn after_decision_typed(
    asked: Asked,
    id: String,
    decided: Result<crate::Decision, AdminApiError>,
    typed: Option<String>,
) -> Response {
    let mismatched = matches!(decided, Err(AdminApiError::CheckFailed(_)));
    let (status, said, id) = match decided {
        Ok(decision) => {
            let id = decision.ids.first().cloned().unwrap_or(id);
            (StatusCode::OK, Ok(decision.said), id)
        }
        Err(e @ (AdminApiError::Unavailable(_) | AdminApiError::Internal(_))) => return failed(e),
        Err(e) => (e.status(), Err(e.to_string()), id),
    };
    match node_and_history(&asked, id).await {
        Ok((node, history)) => page(status, asked.cookie.clone(), || {
            let said = match &said {
                Ok(done) => Said::Done(done),
                Err(why) => Said::Refused(why),
            };
            let typed = typed.as_deref().filter(|_| mismatched);
            pages::node(&asked.frame(), &node, &history, Some(said), typed)
        }),
        Err(e) => failed(e),
    }
}

async fn approve(asked: Asked, Extension(fields): Extension<Fields>, Path(id): Path<String>) -> Response {
    let Some(expected) = fields.get("expect_ca_sha256").map(str::to_string) else {
        let refused = Err(AdminApiError::BadRequest(
            "type the CA SHA-256 the node's console printed: the console approves only against it".into(),
        ));
        return after_decision(asked, id, refused).await;
    };
    let typed = crate::normalize_fingerprint(&expected).ok();
    let args = ApproveArgs {
        id: Some(id.clone()),
        expect_ca_sha256: Some(expected),
        unchecked: false,
        console: None,
        ca_sha256: None,
        force: false,
        expected_from: Some("the fingerprint you typed"),
    };
    let decided = on_store(&asked.api, &asked.caller, move |store| crate::approve(store, &args)).await;
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
async fn node_named(asked: &Asked, id: String) -> Result<crate::NodeDetail, AdminApiError> {
    on_store(&asked.api, &asked.caller, move |store| crate::show_node(store, &id)).await
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
    let decided = on_store(&asked.api, &asked.caller, move |store| crate::reject(store, &key)).await;
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
    let forgot = on_store(&asked.api, &asked.caller, move |store| {
        let shown = crate::show_node(store, &key)?;
        if shown.view.state != janus_store::NodeState::Rejected {
            return Err(crate::AdminError::Refused(format!(
                "{} is not rejected: the console forgets only a rejected record (the undo of a rejection)",
                shown.view.id
            )));
        }
        crate::forget(store, &key)
    })
    .await;
    match forgot {
        Ok(decision) => page(StatusCode::OK, asked.cookie.clone(), || {
            pages::done(&asked.frame(), "Forgotten", &decision.said)
        }),
        Err(e @ (AdminApiError::Unavailable(_) | AdminApiError::Internal(_))) => failed(e),
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
    said: Option<Result<String, String>>,
) -> Response {
    match on_store(&asked.api, &asked.caller, crate::tokens::list).await {
        Ok(list) => page(status, asked.cookie.clone(), || {
            let said = match &said {
                Some(Ok(done)) => Some(Said::Done(done)),
                Some(Err(why)) => Some(Said::Refused(why)),
                None => None,
            };
            pages::tokens(&asked.frame(), &list, &minted, said)
        }),
        Err(e) => failed(e),
    }
}

/// The mint form's fields as `tokens add` takes them.
fn mint_args(fields: &Fields) -> Result<TokensAddArgs, String> {
    let number = |name: &str| -> Result<Option<u64>, String> {
        fields
            .get(name)
            .map(|v| v.trim().parse::<u64>().map_err(|_| format!("{name}: not a number: {v:?}")))
            .transpose()
    };
    let expires_in = fields
        .get("expires_in")
        .map(|v| janus_core::clock::parse_duration(v.trim()).map_err(|e| format!("expires in: {e}")))
        .transpose()?;
    let mut labels = Vec::new();
    for label in fields.get("labels").unwrap_or_default().split(',').map(str::trim).filter(|l| !l.is_empty())
    {
        labels.push(crate::args::parse_label(label).map_err(|e| format!("labels: {e}"))?);
    }
    Ok(TokensAddArgs {
        count: usize::try_from(number("count")?.unwrap_or(1)).unwrap_or(usize::MAX),
        description: fields.get("description").map(str::to_string),
        expires_in,
        uses: number("uses")?.map(|n| u32::try_from(n).unwrap_or(u32::MAX)),
        token: None,
        token_file: None,
        json: true,
        labels,
    })
}

async fn mint(asked: Asked, Extension(fields): Extension<Fields>) -> Response {
    let args = match mint_args(&fields) {
        Ok(args) => args,
        Err(why) => return tokens_answer(asked, StatusCode::BAD_REQUEST, Vec::new(), Some(Err(why))).await,
    };
    let once = fields.get("once").unwrap_or_default().to_string();
    let done = || asked.console.done.lock().unwrap_or_else(|e| e.into_inner());
    if !janus_core::pki::is_hex(&once, 32) || !done().first(&once) {
        let why = "this mint form was sent already (its tokens were shown on its first answer, once): \
                   nothing was minted again; mint from a fresh form";
        return tokens_answer(asked, StatusCode::BAD_REQUEST, Vec::new(), Some(Err(why.into()))).await;
    }
    let minted = on_store(&asked.api, &asked.caller, move |store| crate::tokens::add(store, &args)).await;
    match &minted {
        // Refused, or failed to write: nothing was minted, so the form may
        // be sent again. (Past the deadline it may have been: kept done.)
        Err(e) if !matches!(e, AdminApiError::Unavailable(_)) => done().forget(&once),
        _ => {}
    }
    let minted = minted.map(|made| (format!("minted {} token(s)", made.len()), made));
    after_tokens(asked, minted).await
}

/// `GET /console/tokens/{prefix}/revoke`: what revoking it does, then the form.
async fn revoke_confirm(asked: Asked, Path(prefix): Path<String>) -> Response {
    let key = match crate::api::routes::token_prefix(&prefix) {
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
    let key = match crate::api::routes::token_prefix(&prefix) {
        Ok(key) => key,
        Err(why) => {
            return tokens_answer(asked, StatusCode::BAD_REQUEST, Vec::new(), Some(Err(why.to_string())))
                .await;
        }
    };
    let revoked = on_store(&asked.api, &asked.caller, move |store| crate::tokens::revoke(store, &key)).await;
    after_tokens(asked, revoked.map(|r| (format!("revoked the token {}", r.sha256_prefix), Vec::new()))).await
}

/// A token action's answer: the tokens page with what it did (and the
/// tokens it made), or why not; a state that cannot be told is a page of its own.
async fn after_tokens(
    asked: Asked,
    done: Result<(String, Vec<crate::tokens::AddedToken>), AdminApiError>,
) -> Response {
    match done {
        Ok((said, made)) => tokens_answer(asked, StatusCode::OK, made, Some(Ok(said))).await,
        Err(e @ (AdminApiError::Unavailable(_) | AdminApiError::Internal(_))) => failed(e),
        Err(e) => {
            let status = e.status();
            tokens_answer(asked, status, Vec::new(), Some(Err(e.to_string()))).await
        }
    }
}

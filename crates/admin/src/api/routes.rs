//! The admin API's routes: each added with the scope it needs through
//! [`Routes::route`], the only way a route is added, so a route without a
//! scope is not written; each handler runs the admin commands' typed
//! functions on the server's own store ([`AsyncStore`]), for the caller's
//! name, within [`REQUEST_DEADLINE`], and answers their values as JSON.
//!
//! Invariants: a request whose credential lacks the route's scope is
//! answered 403 before anything is read; bodies are JSON with known fields
//! only; nothing re-parses printed text; no answer is 409; a token is said
//! only in the answer that made it, and a revoke names it by its SHA-256
//! prefix, as that answer says it; at most [`MAX_WORK`] requests' state
//! work runs at once (a hung mount holds that many pool threads, no more);
//! event streams are bounded in all ([`MAX_STREAMS`]) and per credential
//! ([`MAX_STREAMS_PER_CREDENTIAL`]), and end when the server stops.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{DefaultBodyLimit, Path, RawQuery, Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::MethodRouter;
use axum::{Extension, Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};

use super::error::AdminApiError;
use super::{Authenticated, Caller, Scope};
use crate::{AdminError, ApproveArgs, ListArgs, TokensAddArgs};
use janus_store::{AsyncStore, Store};

/// Event streams open at once, at most.
pub const MAX_STREAMS: usize = 8;
/// Of them, held by one credential: one reader cannot take them all.
pub const MAX_STREAMS_PER_CREDENTIAL: usize = 2;
/// Requests whose state work runs at once, at most.
pub const MAX_WORK: usize = 16;
/// How long a request's work may take before it is answered 503 (the
/// state on a hung mount): its pool thread stays with it, its permit too.
pub const REQUEST_DEADLINE: Duration = Duration::from_secs(30);

/// What a route needs of the caller's credential.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Needs {
    /// A valid credential, whatever its scopes (`whoami`).
    Credential,
    /// A credential with this scope.
    Scope(Scope),
}

/// What every handler shares.
#[derive(Clone)]
pub(crate) struct Api {
    /// The server's own store: one per process, its locks shared.
    pub store: AsyncStore,
    /// The state directory, for the event stream's follower.
    pub state: Arc<PathBuf>,
    pub streams: Arc<StreamSlots>,
    pub work: Arc<tokio::sync::Semaphore>,
    pub deadline: Duration,
    /// Set when the server stops: open event streams end.
    pub closing: tokio::sync::watch::Receiver<bool>,
    /// The console's form key and the mint forms it has done.
    pub console: Arc<crate::console::Console>,
}

impl Api {
    pub fn new(store: AsyncStore, state: PathBuf, closing: tokio::sync::watch::Receiver<bool>) -> Self {
        Api {
            store,
            state: Arc::new(state),
            streams: Arc::default(),
            work: Arc::new(tokio::sync::Semaphore::new(MAX_WORK)),
            deadline: REQUEST_DEADLINE,
            closing,
            console: Arc::default(),
        }
    }
}

/// The router under construction: routes go in with what they need.
struct Routes {
    router: Router<Api>,
    table: Vec<(Method, &'static str, Needs)>,
}

impl Routes {
    /// Adds `handler` at `method` `path`, behind the check of `needs`.
    fn route(mut self, method: Method, path: &'static str, needs: Needs, handler: MethodRouter<Api>) -> Self {
        let checked = handler.route_layer(axum::middleware::from_fn(move |request: Request, next: Next| {
            require(needs, request, next)
        }));
        self.router = self.router.route(path, checked);
        self.table.push((method, path, needs));
        self
    }
}

/// Every route, the method, path and what it needs: the table the
/// OpenAPI document and the tests walk.
pub fn table() -> Vec<(Method, &'static str, Needs)> {
    build().table
}

fn build() -> Routes {
    use axum::routing::{delete, get, post};
    let routes = Routes { router: Router::new(), table: Vec::new() };
    routes
        .route(Method::GET, "/v1/whoami", Needs::Credential, get(whoami))
        .route(Method::POST, "/v1/tokens", Needs::Scope(Scope::Tokens), post(add_tokens))
        .route(
            Method::DELETE,
            "/v1/tokens/{sha256_prefix}",
            Needs::Scope(Scope::Tokens),
            delete(revoke_token),
        )
        .route(Method::GET, "/v1/nodes", Needs::Scope(Scope::Read), get(list_nodes))
        .route(Method::GET, "/v1/nodes/{id}", Needs::Scope(Scope::Read), get(show_node))
        .route(Method::POST, "/v1/nodes/{id}/approve", Needs::Scope(Scope::Approve), post(approve))
        .route(Method::POST, "/v1/nodes/{id}/reject", Needs::Scope(Scope::Reject), post(reject))
        .route(Method::GET, "/v1/events", Needs::Scope(Scope::Read), get(events))
        .route(Method::GET, "/v1/openapi.json", Needs::Credential, get(openapi))
}

pub(super) fn router(api: Api) -> Router {
    build()
        .router
        .merge(crate::console::routes(&api))
        .fallback(|request: Request| async move {
            let missing = AdminApiError::NotFound("no such route: see GET /v1/openapi.json".into());
            super::layers::refusal(request.uri().path(), missing)
        })
        .layer(DefaultBodyLimit::max(16 * 1024))
        // Outermost last: the cross-site rule sees a request before any
        // route; every answer, its refusals too, gets the headers.
        .layer(axum::middleware::from_fn(super::layers::framework_errors))
        .layer(axum::middleware::from_fn(super::layers::cross_site))
        .layer(axum::middleware::from_fn(super::layers::headers))
        .layer(super::traced())
        .with_state(api)
}

/// The route's check: the caller, when its credential has what the route
/// needs, goes to the handler in the request's extensions; 403 otherwise.
async fn require(needs: Needs, mut request: Request, next: Next) -> Response {
    match permitted(needs, &request) {
        Ok(caller) => {
            request.extensions_mut().insert(caller);
            next.run(request).await
        }
        Err(refused) => refused.into_response(),
    }
}

/// The caller, when its credential has what `needs` says; why not
/// otherwise: the one check of the API's routes and the console's.
pub(crate) fn permitted<B>(needs: Needs, request: &axum::http::Request<B>) -> Result<Caller, AdminApiError> {
    let caller = match request.extensions().get::<Authenticated>().map(|a| a.as_ref()) {
        Some(Ok(caller)) => caller.clone(),
        Some(Err(why)) => return Err(AdminApiError::Forbidden(why.clone())),
        None => return Err(AdminApiError::Forbidden("no client certificate".into())),
    };
    if let Needs::Scope(scope) = needs
        && !caller.may(scope)
    {
        return Err(AdminApiError::Forbidden(format!(
            "the credential {:?} may not {}: it lacks the scope {:?}",
            caller.name,
            what(scope),
            scope.name()
        )));
    }
    Ok(caller)
}

fn what(scope: Scope) -> &'static str {
    match scope {
        Scope::Tokens => "make or revoke tokens",
        Scope::Read => "read nodes or events",
        Scope::Approve => "approve nodes",
        Scope::Reject => "reject nodes",
    }
}

type Answer = Result<Response, AdminApiError>;

/// Runs `work` on the server's store, on the blocking pool, its audit
/// events in `caller`'s name; 503 when [`MAX_WORK`] requests' work is
/// running and none finishes within the deadline, or this one does not.
pub(crate) async fn on_store<T: Send + 'static>(
    api: &Api,
    caller: &Caller,
    work: impl FnOnce(&Store) -> Result<T, AdminError> + Send + 'static,
) -> Result<T, AdminApiError> {
    let name = caller.name.clone();
    let deadline = api.deadline;
    let (store, slots) = (api.store.clone(), api.work.clone());
    let run = async move {
        let permit = slots.acquire_owned().await.map_err(|e| AdminApiError::Internal(e.to_string()))?;
        let done = store
            .run(move |store| {
                let _permit = permit; // held while the work runs, however long
                janus_store::audit::acting_for_here(&name, || work(store))
            })
            .await;
        match done {
            Ok(done) => done.map_err(AdminApiError::from),
            // A panic's words are ours: logged, never sent.
            Err(failed) => Err(AdminApiError::Internal(format!("the request's task failed: {failed}"))),
        }
    };
    tokio::time::timeout(deadline, run).await.unwrap_or_else(|_| {
        Err(AdminApiError::Unavailable(format!(
            "the state did not answer within {} s (a hung mount?); what was asked may still be done: \
             look before you retry",
            deadline.as_secs()
        )))
    })
}

async fn whoami(Extension(caller): Extension<Caller>) -> Json<Caller> {
    Json(caller)
}

/// `POST /v1/tokens`: `tokens add`, its fields as the body's.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NewTokens {
    count: Option<usize>,
    uses: Option<u32>,
    expires_in: Option<String>,
    description: Option<String>,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    token: Option<String>,
}

type Body<T> = Result<Json<T>, axum::extract::rejection::JsonRejection>;

async fn add_tokens(
    State(api): State<Api>,
    Extension(caller): Extension<Caller>,
    body: Body<NewTokens>,
) -> Answer {
    let Json(asked) = body.map_err(bad_body)?;
    if asked.token.is_some() && asked.count.is_some() {
        return Err(AdminApiError::BadRequest("give token or count, not both".into()));
    }
    let expires_in = match asked.expires_in.as_deref().map(janus_core::clock::parse_duration) {
        Some(Err(e)) => return Err(AdminApiError::BadRequest(format!("expires_in: {e}"))),
        Some(Ok(d)) => Some(d),
        None => None,
    };
    let args = TokensAddArgs {
        count: asked.count.unwrap_or(1),
        description: asked.description,
        expires_in,
        uses: asked.uses,
        token: asked.token,
        token_file: None,
        json: true,
        labels: asked.labels.into_iter().collect(),
    };
    let made = on_store(&api, &caller, move |store| crate::tokens::add(store, &args)).await?;
    Ok((StatusCode::CREATED, Json(json!({ "tokens": made }))).into_response())
}

/// `DELETE /v1/tokens/<sha256 prefix>`: by the fingerprint `POST /v1/tokens` said.
async fn revoke_token(
    State(api): State<Api>,
    Extension(caller): Extension<Caller>,
    Path(prefix): Path<String>,
) -> Answer {
    let key = token_prefix(&prefix)?;
    let revoked = on_store(&api, &caller, move |store| crate::tokens::revoke(store, &key)).await?;
    Ok(Json(json!({ "revoked": revoked })).into_response())
}

/// A token's SHA-256 prefix as a revoke names it (12 to 64 hex digits), lower case.
pub(crate) fn token_prefix(prefix: &str) -> Result<String, AdminApiError> {
    if !(12..=64).contains(&prefix.len()) || !prefix.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(AdminApiError::BadRequest(
            "a token is revoked by its SHA-256 prefix, 12 to 64 hex digits (as POST /v1/tokens says it)"
                .into(),
        ));
    }
    Ok(prefix.to_lowercase())
}

/// `GET /v1/nodes?state=pending|admitted|rejected&label=K=V&admitted_since=WHEN`.
async fn list_nodes(
    State(api): State<Api>,
    Extension(caller): Extension<Caller>,
    RawQuery(query): RawQuery,
) -> Answer {
    let mut args = ListArgs::everything();
    let bad = AdminApiError::BadRequest;
    for (key, value) in form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
        match key.as_ref() {
            "state" => match value.as_ref() {
                "pending" => args.pending = true,
                "admitted" => args.admitted = true,
                "rejected" => args.rejected = true,
                other => return Err(bad(format!("state={other:?}: pending, admitted or rejected"))),
            },
            "label" => args.labels.push(crate::args::parse_label(&value).map_err(bad)?),
            "admitted_since" => {
                args.admitted_since =
                    Some(janus_core::clock::parse_since(&value).map_err(|e| bad(e.to_string()))?)
            }
            other => return Err(bad(format!("{other:?} is not a filter: state, label, admitted_since"))),
        }
    }
    let listed = on_store(&api, &caller, move |store| crate::node_list(store, &args)).await?;
    Ok(Json(listed).into_response())
}

async fn show_node(
    State(api): State<Api>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Answer {
    let shown = on_store(&api, &caller, move |store| crate::show_node(store, &id)).await?;
    Ok(Json(shown).into_response())
}

/// `POST /v1/nodes/<id>/approve`: the CA's SHA-256 the orchestrator expects is required.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Approval {
    expect_ca_sha256: String,
    #[serde(default)]
    force: bool,
}

async fn approve(
    State(api): State<Api>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    body: Body<Approval>,
) -> Answer {
    let Json(approval) = body.map_err(bad_body)?;
    let args = ApproveArgs {
        id: Some(id),
        expect_ca_sha256: Some(approval.expect_ca_sha256),
        unchecked: false,
        console: None,
        ca_sha256: None,
        force: approval.force,
        expected_from: Some("expect_ca_sha256"),
    };
    decided(&api, &caller, move |store| crate::approve(store, &args)).await
}

/// `POST /v1/nodes/<id>/reject`: a JSON body with no field (`{}`), or none.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Rejection {}

async fn reject(
    State(api): State<Api>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> Answer {
    if !body.iter().all(u8::is_ascii_whitespace) {
        serde_json::from_slice::<Rejection>(&body).map_err(|e| {
            AdminApiError::BadRequest(format!("the body is not what this route takes ({{}} or none): {e}"))
        })?;
    }
    decided(&api, &caller, move |store| crate::reject(store, &id)).await
}

/// A decision's answer: what it did, and the node it names as it stands
/// now, shown by the id the decision resolved (never by the name again).
async fn decided(
    api: &Api,
    caller: &Caller,
    decide: impl FnOnce(&Store) -> Result<crate::Decision, AdminError> + Send + 'static,
) -> Answer {
    let (decision, node) = on_store(api, caller, move |store| {
        let decision = decide(store)?;
        let node = match decision.ids.first() {
            Some(id) => Some(crate::show_node(store, id)?),
            None => None,
        };
        Ok((decision, node))
    })
    .await?;
    Ok(Json(json!({ "said": decision.said, "changed": decision.changed, "node": node })).into_response())
}

fn bad_body(rejection: axum::extract::rejection::JsonRejection) -> AdminApiError {
    let said = format!("the body is not what this route takes: {}", rejection.body_text());
    match rejection.status() {
        StatusCode::PAYLOAD_TOO_LARGE => AdminApiError::TooLarge("the body is larger than 16 KiB".into()),
        StatusCode::UNSUPPORTED_MEDIA_TYPE => AdminApiError::NotJson(said),
        _ => AdminApiError::BadRequest(said),
    }
}

/// `GET /v1/openapi.json`: the API described (OpenAPI 3.1).
async fn openapi() -> Json<Value> {
    Json(super::openapi::document())
}

/// `GET /v1/events[?since=1h]`: Server-Sent Events, one per admission,
/// readmission, rejection and forget, each as `nodes watch` prints it.
async fn events(
    State(api): State<Api>,
    Extension(caller): Extension<Caller>,
    RawQuery(query): RawQuery,
) -> Answer {
    let mut since = None;
    for (key, value) in form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
        match key.as_ref() {
            "since" => {
                since = Some(
                    janus_core::clock::parse_duration(&value)
                        .map_err(|e| AdminApiError::BadRequest(format!("since: {e}")))?,
                )
            }
            other => return Err(AdminApiError::BadRequest(format!("{other:?} is not a parameter: since"))),
        }
    }
    event_stream(&api, &caller, since, crate::Followed::Decisions, None)
}

/// An event stream of what `followed` says, in one of the credential's
/// stream slots (503 when none is free), its events named by their kind
/// or all `name`; it ends when the reader goes or the server stops.
pub(crate) fn event_stream(
    api: &Api,
    caller: &Caller,
    since: Option<Duration>,
    followed: crate::Followed,
    name: Option<&'static str>,
) -> Answer {
    let slot = api.streams.take(&caller.name)?;
    let (sender, receiver) = tokio::sync::mpsc::channel::<Value>(64);
    let state = api.state.clone();
    let mut closing = api.closing.clone();
    tokio::spawn(async move {
        let _slot = slot;
        // The server stopping ends the stream (its sender dropped), so a
        // shutdown does not wait out its grace on open streams.
        tokio::select! {
            () = crate::follow(state.as_ref().clone(), since, sender, followed) => {}
            _ = closing.wait_for(|closed| *closed) => {}
        }
    });
    let stream = Received { receiver, name };
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))).into_response())
}

/// Open event streams, by credential name.
#[derive(Default)]
pub(crate) struct StreamSlots {
    open: Mutex<HashMap<String, usize>>,
}

/// One open stream's place, given back when dropped.
pub(crate) struct StreamSlot {
    slots: Arc<StreamSlots>,
    name: String,
}

impl StreamSlots {
    fn take(self: &Arc<Self>, name: &str) -> Result<StreamSlot, AdminApiError> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if open.values().sum::<usize>() >= MAX_STREAMS {
            return Err(AdminApiError::Unavailable(format!("{MAX_STREAMS} event streams are open already")));
        }
        let mine = open.entry(name.to_string()).or_insert(0);
        if *mine >= MAX_STREAMS_PER_CREDENTIAL {
            return Err(AdminApiError::Unavailable(format!(
                "the credential {name:?} holds {MAX_STREAMS_PER_CREDENTIAL} event streams already: close one"
            )));
        }
        *mine += 1;
        Ok(StreamSlot { slots: self.clone(), name: name.to_string() })
    }
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        let mut open = self.slots.open.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = open.get_mut(&self.name) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.name);
            }
        }
    }
}

/// The events a follower sends, as a stream of events named by their
/// kind, or all by one name.
struct Received {
    receiver: tokio::sync::mpsc::Receiver<Value>,
    name: Option<&'static str>,
}

impl futures_core::Stream for Received {
    type Item = Result<Event, std::convert::Infallible>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        let name = self.name;
        self.receiver.poll_recv(cx).map(|decision| {
            decision.map(|d| {
                let kind = name.unwrap_or_else(|| d["event"].as_str().unwrap_or("event")).to_string();
                Ok(Event::default().event(kind).data(d.to_string()))
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_credential_holds_two_streams_and_all_hold_eight() {
        let slots = Arc::new(StreamSlots::default());
        let a: Vec<_> = (0..2).map(|_| slots.take("a").unwrap()).collect();
        assert!(matches!(slots.take("a"), Err(AdminApiError::Unavailable(_))), "a third for one credential");
        let others: Vec<_> = (0..6).map(|i| slots.take(&format!("o{}", i / 2)).unwrap()).collect();
        assert!(slots.take("fresh").is_err(), "eight in all");
        drop(a);
        assert!(slots.take("a").is_ok(), "slots come back");
        drop(others);
        assert!(slots.open.lock().unwrap().len() <= 1);
    }

    /// Work on a hung mount: the request is answered 503 at its deadline,
    /// and its permit is held until the work returns. (Real time, a short
    /// deadline: blocking work keeps a paused clock from advancing.)
    #[tokio::test]
    async fn work_past_its_deadline_is_answered_503_and_keeps_its_permit() {
        let dir = tempfile::tempdir().unwrap();
        let store = AsyncStore::new(Store::open(dir.path()).unwrap());
        let (_closing, closed) = tokio::sync::watch::channel(false);
        let mut api = Api::new(store, dir.path().to_path_buf(), closed);
        api.deadline = Duration::from_millis(100);
        let caller = Caller {
            name: "orchestrator".into(),
            scopes: vec![Scope::Read],
            certificate_sha256: String::new(),
        };
        let (release, hung) = std::sync::mpsc::channel::<()>();
        let answer = on_store(&api, &caller, move |_| {
            let _ = hung.recv(); // a read that does not return
            Ok(())
        })
        .await;
        match answer {
            Err(AdminApiError::Unavailable(why)) => assert!(why.contains("did not answer within"), "{why}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(api.work.available_permits(), MAX_WORK - 1, "the hung work keeps its permit");
        release.send(()).unwrap();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while api.work.available_permits() < MAX_WORK {
            assert!(tokio::time::Instant::now() < deadline, "the permit came back when the work returned");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    #[test]
    fn every_route_needs_a_credential_and_all_but_two_a_scope() {
        let table = table();
        let unscoped: Vec<&str> =
            table.iter().filter(|(_, _, needs)| *needs == Needs::Credential).map(|(_, p, _)| *p).collect();
        assert_eq!(unscoped, ["/v1/whoami", "/v1/openapi.json"]);
    }
}

//! The admin API's routes: each one scope, each the admin command's own
//! code run on the blocking pool for the caller's name, and one mapping
//! from the commands' errors to statuses ([`ApiError`]).
//!
//! Invariants: a request whose credential lacks the route's scope is
//! answered 403 before anything is read; bodies are JSON with known fields
//! only; no answer is 409 (a node would take it for protocol 1, and the
//! port is not theirs, but the rule holds everywhere); a token is said only
//! in the answer that made it (nothing here logs a request), and a revoke
//! names it by its SHA-256 prefix, as that answer says it.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{DefaultBodyLimit, Extension, Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{Authenticated, Caller, Scope};
use crate::admin::{
    AdminError, ApproveArgs, IdArg, ListArgs, NodesCommand, RevokeArgs, ShowArgs, TokensAddArgs,
    TokensCommand,
};

/// Event streams open at once, at most.
const MAX_STREAMS: usize = 8;

#[derive(Clone)]
struct Api {
    state: Arc<PathBuf>,
    streams: Arc<tokio::sync::Semaphore>,
}

pub(super) fn router(state: PathBuf) -> Router {
    let api = Api { state: Arc::new(state), streams: Arc::new(tokio::sync::Semaphore::new(MAX_STREAMS)) };
    Router::new()
        .route("/v1/whoami", get(whoami))
        .route("/v1/tokens", post(add_tokens))
        .route("/v1/tokens/{sha256_prefix}", delete(revoke_token))
        .route("/v1/nodes", get(list_nodes))
        .route("/v1/nodes/{id}", get(show_node))
        .route("/v1/nodes/{id}/approve", post(approve))
        .route("/v1/nodes/{id}/reject", post(reject))
        .route("/v1/events", get(events))
        .fallback(|| async {
            ApiError(StatusCode::NOT_FOUND, "no such route: see docs/orchestrating.md".into())
        })
        .layer(DefaultBodyLimit::max(16 * 1024))
        .with_state(api)
}

/// An answer that is not a success: its status and what to say.
#[derive(Debug)]
pub struct ApiError(StatusCode, String);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.0, Json(json!({ "error": self.1 }))).into_response()
    }
}

/// The one table from the commands' errors to statuses.
impl From<AdminError> for ApiError {
    fn from(error: AdminError) -> Self {
        let status = match &error {
            AdminError::NotFound(_) => StatusCode::NOT_FOUND,
            AdminError::Ambiguous(_) | AdminError::Usage(_) | AdminError::Console { .. } => {
                StatusCode::BAD_REQUEST
            }
            AdminError::Refused(_) => StatusCode::UNPROCESSABLE_ENTITY,
            AdminError::Revoke { .. } => StatusCode::NOT_FOUND,
            AdminError::State(_) | AdminError::Store(_) => StatusCode::SERVICE_UNAVAILABLE,
        };
        ApiError(status, crate::terminal::escape(&error.to_string()).into_owned())
    }
}

type Answer = Result<Response, ApiError>;

/// The caller, when its credential allows `scope`.
fn allowed(authenticated: &Authenticated, scope: Scope) -> Result<Caller, ApiError> {
    match authenticated.as_ref() {
        Ok(caller) if caller.may(scope) => Ok(caller.clone()),
        Ok(caller) => Err(ApiError(
            StatusCode::FORBIDDEN,
            format!(
                "the credential {:?} may not {}: it lacks the scope {:?}",
                caller.name,
                what(scope),
                scope.name()
            ),
        )),
        Err(why) => Err(ApiError(StatusCode::FORBIDDEN, why.clone())),
    }
}

fn what(scope: Scope) -> &'static str {
    match scope {
        Scope::Tokens => "make or revoke tokens",
        Scope::Read => "read nodes or events",
        Scope::Approve => "approve nodes",
        Scope::Reject => "reject nodes",
    }
}

/// Runs `work` on the blocking pool, its audit events in `caller`'s name.
async fn as_caller<T: Send + 'static>(
    caller: &Caller,
    work: impl FnOnce() -> Result<T, AdminError> + Send + 'static,
) -> Result<T, ApiError> {
    let name = caller.name.clone();
    match tokio::task::spawn_blocking(move || crate::store::audit::acting_for_here(&name, work)).await {
        Ok(done) => Ok(done?),
        Err(e) => Err(ApiError(StatusCode::INTERNAL_SERVER_ERROR, format!("the request's task failed: {e}"))),
    }
}

fn json_lines(text: &str) -> Vec<Value> {
    text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
}

async fn whoami(Extension(authenticated): Extension<Authenticated>) -> Answer {
    match authenticated.as_ref() {
        Ok(caller) => Ok(Json(caller).into_response()),
        Err(why) => Err(ApiError(StatusCode::FORBIDDEN, why.clone())),
    }
}

/// `POST /v1/tokens`: `tokens add --json`, its fields as the body's.
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

async fn add_tokens(
    State(api): State<Api>,
    Extension(authenticated): Extension<Authenticated>,
    body: Result<Json<NewTokens>, axum::extract::rejection::JsonRejection>,
) -> Answer {
    let caller = allowed(&authenticated, Scope::Tokens)?;
    let Json(asked) = body.map_err(bad_body)?;
    if asked.token.is_some() && asked.count.is_some() {
        return Err(ApiError(StatusCode::BAD_REQUEST, "give token or count, not both".into()));
    }
    let expires_in = match asked.expires_in.as_deref().map(crate::clock::parse_duration) {
        Some(Err(e)) => return Err(ApiError(StatusCode::BAD_REQUEST, format!("expires_in: {e}"))),
        Some(Ok(d)) => Some(d),
        None => None,
    };
    let command = TokensCommand::Add(TokensAddArgs {
        count: asked.count.unwrap_or(1),
        description: asked.description,
        expires_in,
        uses: asked.uses,
        token: asked.token,
        json: true,
        labels: asked.labels.into_iter().collect(),
    });
    let state = api.state.clone();
    let made = as_caller(&caller, move || crate::admin::tokens(&state, &command)).await?;
    Ok((StatusCode::CREATED, Json(json!({ "tokens": json_lines(&made) }))).into_response())
}

/// `DELETE /v1/tokens/<sha256 prefix>`: by the fingerprint `POST /v1/tokens` said.
async fn revoke_token(
    State(api): State<Api>,
    Extension(authenticated): Extension<Authenticated>,
    Path(prefix): Path<String>,
) -> Answer {
    let caller = allowed(&authenticated, Scope::Tokens)?;
    if !(12..=64).contains(&prefix.len()) || !prefix.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(ApiError(
            StatusCode::BAD_REQUEST,
            "a token is revoked by its SHA-256 prefix, 12 to 64 hex digits (as POST /v1/tokens says it)"
                .into(),
        ));
    }
    let command = TokensCommand::Revoke(RevokeArgs { token: prefix.to_lowercase() });
    let state = api.state.clone();
    let said = as_caller(&caller, move || crate::admin::tokens(&state, &command)).await?;
    Ok(Json(json!({ "revoked": said })).into_response())
}

/// `GET /v1/nodes?state=pending|admitted|rejected&label=K=V&admitted_since=WHEN`.
async fn list_nodes(
    State(api): State<Api>,
    Extension(authenticated): Extension<Authenticated>,
    RawQuery(query): RawQuery,
) -> Answer {
    let caller = allowed(&authenticated, Scope::Read)?;
    let mut args = ListArgs {
        pending: false,
        admitted: false,
        rejected: false,
        json: true,
        admitted_since: None,
        labels: Vec::new(),
    };
    let bad = |why: String| ApiError(StatusCode::BAD_REQUEST, why);
    for (key, value) in form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
        match key.as_ref() {
            "state" => match value.as_ref() {
                "pending" => args.pending = true,
                "admitted" => args.admitted = true,
                "rejected" => args.rejected = true,
                other => return Err(bad(format!("state={other:?}: pending, admitted or rejected"))),
            },
            "label" => args.labels.push(crate::admin::args::parse_label(&value).map_err(bad)?),
            "admitted_since" => {
                args.admitted_since = Some(crate::clock::parse_since(&value).map_err(|e| bad(e.to_string()))?)
            }
            other => return Err(bad(format!("{other:?} is not a filter: state, label, admitted_since"))),
        }
    }
    let state = api.state.clone();
    let views = as_caller(&caller, move || crate::admin::node_views(&state, &args)).await?;
    Ok(Json(json!({ "nodes": views })).into_response())
}

async fn show_node(
    State(api): State<Api>,
    Extension(authenticated): Extension<Authenticated>,
    Path(id): Path<String>,
) -> Answer {
    let caller = allowed(&authenticated, Scope::Read)?;
    let shown = node_json(&api, &caller, id).await?;
    Ok(Json(shown).into_response())
}

async fn node_json(api: &Api, caller: &Caller, id: String) -> Result<Value, ApiError> {
    let state = api.state.clone();
    let command = NodesCommand::Show(ShowArgs { id, json: true });
    let text = as_caller(caller, move || crate::admin::nodes(&state, &command)).await?;
    serde_json::from_str(&text).map_err(|e| ApiError(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))
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
    Extension(authenticated): Extension<Authenticated>,
    Path(id): Path<String>,
    body: Result<Json<Approval>, axum::extract::rejection::JsonRejection>,
) -> Answer {
    let caller = allowed(&authenticated, Scope::Approve)?;
    let Json(approval) = body.map_err(bad_body)?;
    let command = NodesCommand::Approve(ApproveArgs {
        id: Some(id.clone()),
        expect_ca_sha256: Some(approval.expect_ca_sha256),
        unchecked: false,
        console: None,
        ca_sha256: None,
        force: approval.force,
    });
    let state = api.state.clone();
    let said = as_caller(&caller, move || crate::admin::nodes(&state, &command)).await?;
    Ok(Json(json!({ "said": said, "node": node_json(&api, &caller, id).await? })).into_response())
}

async fn reject(
    State(api): State<Api>,
    Extension(authenticated): Extension<Authenticated>,
    Path(id): Path<String>,
) -> Answer {
    let caller = allowed(&authenticated, Scope::Reject)?;
    let command = NodesCommand::Reject(IdArg { id: id.clone() });
    let state = api.state.clone();
    let said = as_caller(&caller, move || crate::admin::nodes(&state, &command)).await?;
    Ok(Json(json!({ "said": said, "node": node_json(&api, &caller, id).await? })).into_response())
}

fn bad_body(rejection: axum::extract::rejection::JsonRejection) -> ApiError {
    ApiError(
        StatusCode::BAD_REQUEST,
        format!("the body is not what this route takes: {}", rejection.body_text()),
    )
}

/// `GET /v1/events[?since=1h]`: Server-Sent Events, one per admission,
/// readmission, rejection and forget, each as `nodes watch` prints it.
async fn events(
    State(api): State<Api>,
    Extension(authenticated): Extension<Authenticated>,
    RawQuery(query): RawQuery,
) -> Answer {
    allowed(&authenticated, Scope::Read)?;
    let mut since = None;
    for (key, value) in form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
        match key.as_ref() {
            "since" => {
                since = Some(
                    crate::clock::parse_duration(&value)
                        .map_err(|e| ApiError(StatusCode::BAD_REQUEST, format!("since: {e}")))?,
                )
            }
            other => {
                return Err(ApiError(
                    StatusCode::BAD_REQUEST,
                    format!("{other:?} is not a parameter: since"),
                ));
            }
        }
    }
    let Ok(slot) = api.streams.clone().try_acquire_owned() else {
        return Err(ApiError(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("{MAX_STREAMS} event streams are open already"),
        ));
    };
    let (sender, receiver) = tokio::sync::mpsc::channel::<Value>(64);
    let state = api.state.clone();
    tokio::spawn(async move {
        let _slot = slot;
        crate::admin::follow_decisions(state.as_ref().clone(), since, sender).await;
    });
    let stream = Received(receiver);
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))).into_response())
}

/// The decisions a follower sends, as a stream of events named by kind.
struct Received(tokio::sync::mpsc::Receiver<Value>);

impl futures_core::Stream for Received {
    type Item = Result<Event, std::convert::Infallible>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        self.0.poll_recv(cx).map(|decision| {
            decision.map(|d| {
                let kind = d["event"].as_str().unwrap_or("event").to_string();
                Ok(Event::default().event(kind).data(d.to_string()))
            })
        })
    }
}

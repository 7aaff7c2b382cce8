//! The admin API's routes, each added with the scope it needs through the
//! web layer's builder ([`crate::web::Routes`]); each handler turns its
//! request into the admin model's ([`super::wire`]), runs the admin
//! functions on the server's own store for the credential's [`Actor`]
//! (`api (<name>)`), and answers their values as JSON.
//!
//! Invariants: bodies are JSON with known fields only; a refusal is
//! problem+json with its code; nothing re-parses printed text; no answer
//! is 409; a token is said only in the answer that made it, and a revoke
//! names it by its SHA-256 prefix, as that answer says it.

use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};

use super::wire::{self, Approval, Decided, NewTokensBody, Rejection, TokenRevoked, TokensMade};
use crate::credential::{Caller, Scope};
use crate::error::{AdminError, Field, Surface};
use crate::model::{Actor, Approve, Check, NodeFilter, Revoke};
use crate::web::{AdminState, Needs, Routes, on_store, problem, query};
use janus_store::Store;

type Answer = Result<Response, Refusal>;

/// An API refusal: problem+json.
pub(crate) struct Refusal(AdminError);

impl From<AdminError> for Refusal {
    fn from(error: AdminError) -> Self {
        Refusal(error)
    }
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        problem(self.0)
    }
}

/// Every route, the method, path and what it needs: the table the
/// OpenAPI document and the tests walk.
pub fn table() -> Vec<(Method, &'static str, Needs)> {
    routes().table
}

pub(crate) fn routes() -> Routes {
    use axum::routing::{delete, get, post};
    Routes::new()
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

/// The credential's actor on the API.
fn actor(caller: &Caller) -> Actor {
    caller.actor(Surface::Api)
}

async fn whoami(Extension(caller): Extension<Caller>) -> Json<Caller> {
    Json(caller)
}

async fn add_tokens(
    State(state): State<AdminState>,
    Extension(caller): Extension<Caller>,
    body: Bytes,
) -> Answer {
    let asked: NewTokensBody = wire::object(&body)?;
    let request = asked.request()?;
    let made =
        on_store(&state, actor(&caller), move |store, actor| crate::tokens::add(store, &request, actor))
            .await?;
    Ok((StatusCode::CREATED, Json(TokensMade { tokens: made })).into_response())
}

/// `DELETE /v1/tokens/<sha256 prefix>`: by the fingerprint `POST /v1/tokens` said.
async fn revoke_token(
    State(state): State<AdminState>,
    Extension(caller): Extension<Caller>,
    Path(prefix): Path<String>,
) -> Answer {
    let request = Revoke { key: wire::token_prefix(&prefix)? };
    let revoked =
        on_store(&state, actor(&caller), move |store, actor| crate::tokens::revoke(store, &request, actor))
            .await?;
    Ok(Json(TokenRevoked { revoked }).into_response())
}

/// The filter a listing's query asks for: `state` (repeatable),
/// `label=K=V` (repeatable: all of them), `admitted_since`.
pub(crate) fn node_filter(raw: Option<&str>) -> Result<NodeFilter, AdminError> {
    let mut filter = NodeFilter::default();
    for (key, value) in query::pairs(raw, &["state", "label", "admitted_since"])? {
        match (key.as_str(), value.as_str()) {
            ("state", "pending") => filter.pending = true,
            ("state", "admitted") => filter.admitted = true,
            ("state", "rejected") => filter.rejected = true,
            ("state", _) => return Err(AdminError::field(Field::State, "must be pending, admitted or rejected")),
            ("label", label) => filter.labels.push(crate::model::parse_label(label, Field::LabelFilter)?),
            (_, since) => {
                filter.admitted_since = Some(janus_core::clock::parse_since(since).map_err(|_| {
                    AdminError::field(
                        Field::AdmittedSince,
                        "must be an RFC 3339 time (2026-12-01T08:00:00Z) or a duration ago (90s, 15m, 12h, 10d)",
                    )
                })?)
            }
        }
    }
    Ok(filter)
}

/// `GET /v1/nodes?state=pending|admitted|rejected&label=K=V&admitted_since=WHEN`.
async fn list_nodes(
    State(state): State<AdminState>,
    Extension(caller): Extension<Caller>,
    RawQuery(raw): RawQuery,
) -> Answer {
    let filter = node_filter(raw.as_deref())?;
    let listed = on_store(&state, actor(&caller), move |store, _| crate::node_list(store, &filter)).await?;
    Ok(Json(listed).into_response())
}

async fn show_node(
    State(state): State<AdminState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Answer {
    let shown = on_store(&state, actor(&caller), move |store, _| crate::show_node(store, &id)).await?;
    Ok(Json(shown).into_response())
}

/// `POST /v1/nodes/<id>/approve`: the CA's SHA-256 the orchestrator expects is required.
async fn approve(
    State(state): State<AdminState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    body: Bytes,
) -> Answer {
    let approval: Approval = wire::object(&body)?;
    let request =
        Approve { node: id, check: Check::Expected(approval.fingerprint()?), force: approval.force };
    decided(&state, &caller, move |store, actor| crate::approve(store, &request, actor)).await
}

/// `POST /v1/nodes/<id>/reject`: a JSON body with no field (`{}`), or none.
async fn reject(
    State(state): State<AdminState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    body: Bytes,
) -> Answer {
    // `{}`, or (as clients before codes sent it) no body.
    if !body.iter().all(u8::is_ascii_whitespace) {
        wire::object::<Rejection>(&body)?;
    }
    decided(&state, &caller, move |store, actor| crate::reject(store, &id, actor)).await
}

/// A decision's answer: what it did, and the node it names as it stands
/// now, shown by the id the decision resolved (never by the name again).
async fn decided(
    state: &AdminState,
    caller: &Caller,
    decide: impl FnOnce(&Store, &Actor) -> Result<crate::Decision, AdminError> + Send + 'static,
) -> Answer {
    let (decision, node) = on_store(state, actor(caller), move |store, actor| {
        let decision = decide(store, actor)?;
        let node = match decision.ids.first() {
            Some(id) => Some(crate::show_node(store, id)?),
            None => None,
        };
        Ok((decision, node))
    })
    .await?;
    Ok(Json(Decided { said: decision.said, changed: decision.changed, node }).into_response())
}

/// `GET /v1/openapi.json`: the API described (OpenAPI 3.1).
async fn openapi() -> Json<serde_json::Value> {
    Json(document())
}

/// The API's OpenAPI document, derived from its route table.
pub fn document() -> serde_json::Value {
    super::openapi::document_of(&table())
}

/// `GET /v1/events[?since=1h]`: Server-Sent Events, one per admission,
/// readmission, rejection and forget, each as `nodes watch` prints it.
async fn events(
    State(state): State<AdminState>,
    Extension(caller): Extension<Caller>,
    RawQuery(raw): RawQuery,
) -> Answer {
    let mut since = None;
    for (_, value) in query::pairs(raw.as_deref(), &["since"])? {
        since = Some(wire::duration(&value, Field::Since)?);
    }
    Ok(state.open_stream(&caller, since, crate::Followed::Decisions, None)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_route_needs_a_credential_and_all_but_two_a_scope() {
        let table = table();
        let unscoped: Vec<&str> =
            table.iter().filter(|(_, _, needs)| *needs == Needs::Credential).map(|(_, p, _)| *p).collect();
        assert_eq!(unscoped, ["/v1/whoami", "/v1/openapi.json"]);
    }
}

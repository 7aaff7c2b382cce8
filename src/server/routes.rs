//! The handlers: extract, validate (protocol), act on the state (store),
//! answer (protocol types or [`ApiError`]). File work runs on the blocking
//! pool, so a slow disk never stalls the async workers.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, Path, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::json;
use subtle::ConstantTimeEq;

use super::App;
use super::error::ApiError;
use super::metrics::{Metrics, route_of};
use crate::pki::sha256_hex;
use crate::protocol::{AnnounceAnswer, Announcement, MAX_BODY};
use crate::store::{NodeId, NodeRecord};

/// How long a client may take to send its body once its headers arrived.
const BODY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

pub async fn announce(
    State(app): State<Arc<App>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let answer = announce_or_refuse(&app, peer, headers, body).await;
    let outcome = match &answer {
        Ok((true, _)) => "admitted_by_token",
        Ok((false, _)) => "pending",
        Err(ApiError::BadRequest(_)) => "refused_bad_request",
        Err(ApiError::TooLarge) => "refused_too_large",
        Err(ApiError::Timeout) => "refused_timeout",
        Err(ApiError::TooMany(_)) => "refused_rate_limited",
        Err(ApiError::Unavailable(_)) => "refused_pending_cap",
        Err(_) => "refused_internal",
    };
    Metrics::outcome(&app.metrics.announcements, outcome);
    answer.map(|(admitted, answer)| {
        tracing::info!(node = %answer.id, admitted, "node announced");
        (StatusCode::CREATED, Json(answer)).into_response()
    })
}

/// The announcement's answer (and whether it admitted), or why it is refused.
async fn announce_or_refuse(
    app: &Arc<App>,
    peer: SocketAddr,
    headers: HeaderMap,
    body: Body,
) -> Result<(bool, AnnounceAnswer), ApiError> {
    app.limiter.check(peer.ip()).map_err(ApiError::TooMany)?;
    let body = read_body(&headers, body).await?;
    let announcement = Announcement::parse(&body)?;
    if announcement.registration_token.is_empty() && app.pending.get() >= app.limits.max_pending {
        return Err(ApiError::Unavailable(
            "too many announcements are pending approval; try again later (a registration token still admits)"
                .into(),
        ));
    }
    let trust = app.trust();
    let blocking_app = app.clone();
    let answer = tokio::task::spawn_blocking(move || admit_or_hold(&blocking_app, announcement, peer))
        .await
        .map_err(|e| ApiError::Internal(e.to_string()))??;
    Ok((answer.admitted, AnnounceAnswer { trust: answer.admitted.then(|| trust.trust.clone()), ..answer }))
}

/// Consumes the token (durably) before the record says `admitted`, and both
/// before the answer: a crash in between never admits twice. The audit trail
/// has the announcement (and the admission) before the node has its answer.
fn admit_or_hold(
    app: &App,
    announcement: Announcement,
    peer: SocketAddr,
) -> Result<AnnounceAnswer, ApiError> {
    let id = NodeId::generate();
    let token = announcement.registration_token;
    let admitted = app.store.tokens.consume(&token, &app.store.audit)?;
    let record = NodeRecord {
        id: id.to_string(),
        name: announcement.name,
        address: announcement.address,
        ca_cert_pem: announcement.ca_cert_pem,
        admitted,
        poll_secret_sha256: sha256_hex(announcement.poll_secret.as_bytes()),
        ca_sha256: Some(announcement.ca_sha256),
        announced_at: Some(crate::clock::now_rfc3339()),
        peer_address: Some(peer.to_string()),
        admitted_by: admitted.then(|| "token".to_string()),
        extra: Default::default(),
    };
    if admitted {
        // Two files in two directories, each fsync'd: written side by side.
        let (written, approved) = std::thread::scope(|scope| {
            let approving = scope.spawn(|| app.store.approve(&id, "token", ""));
            (app.store.write_record(&record), approving.join())
        });
        written?;
        approved.map_err(|_| ApiError::Internal("the approval writer panicked".into()))??;
    } else {
        app.store.write_record(&record)?;
    }
    let announced = json!({
        "id": record.id, "name": record.name, "address": record.address,
        "peer_address": record.peer_address, "ca_sha256": record.ca_sha256,
        "token_presented": !token.is_empty(),
    });
    if admitted {
        app.store.first_delivery(&id)?;
        let fingerprint = crate::store::audit::token_fingerprint(&token);
        let version = app.trust().fleet.bundle_version;
        app.store.audit.record_all(&[
            ("announced", announced),
            ("admitted", json!({"id": record.id, "by": "token", "token_sha256_prefix": fingerprint})),
            ("trust_delivered", json!({"id": record.id, "bundle_version": version})),
        ])?;
    } else {
        app.store.audit.record("announced", announced)?;
        app.pending.bump();
        if let Some(policy) = &app.policy {
            policy.submit(record.clone());
        }
    }
    Ok(AnnounceAnswer { id: id.to_string(), admitted, trust: None })
}

pub async fn poll(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let answer = poll_answer(&app, &id, &headers).await;
    let outcome = match &answer {
        Ok(r) if r.status() == StatusCode::OK => "admitted",
        Ok(_) => "pending",
        Err(ApiError::NotFound) => "unknown",
        Err(_) => "error",
    };
    Metrics::outcome(&app.metrics.polls, outcome);
    answer
}

async fn poll_answer(app: &Arc<App>, id: &str, headers: &HeaderMap) -> Result<Response, ApiError> {
    let id = NodeId::parse(id).ok_or(ApiError::NotFound)?;
    let secret = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.as_bytes().strip_prefix(b"Bearer "))
        .ok_or(ApiError::NotFound)?;
    let presented = sha256_hex(secret);
    // Reads only, inline: a stat and a 1 KiB read from the page cache cost
    // less than a hand-off to the blocking pool (measured, README "Performance").
    let record = app.store.read_record(&id)?.ok_or(ApiError::NotFound)?;
    let matches: bool = presented.as_bytes().ct_eq(record.poll_secret_sha256.as_bytes()).into();
    if !matches || app.store.is_rejected(&id) {
        return Err(ApiError::NotFound);
    }
    // Two stats on the usual path; the approval's content is read only for
    // the first delivery, which audits who approved.
    let approved = if !app.store.is_approved(&id) {
        false
    } else if app.store.was_delivered(&id) {
        true
    } else if let Some(approval) = app.store.approval(&id) {
        // The first delivery writes the audit trail: off the async workers.
        let blocking_app = app.clone();
        tokio::task::spawn_blocking(move || record_first_delivery(&blocking_app, &id, &record, &approval))
            .await
            .map_err(|e| ApiError::Internal(e.to_string()))??;
        true
    } else {
        false
    };
    if !approved {
        return Ok(StatusCode::ACCEPTED.into_response());
    }
    let trust = app.trust();
    Ok((StatusCode::OK, [(header::CONTENT_TYPE, "application/json")], trust.trust_json.clone())
        .into_response())
}

/// Audits the first delivery of the trust to `id` (once, across processes).
fn record_first_delivery(
    app: &App,
    id: &NodeId,
    record: &NodeRecord,
    approval: &crate::store::Approval,
) -> Result<(), ApiError> {
    if app.store.first_delivery(id)? {
        let audit = &app.store.audit;
        // A `touch`ed approval has no event yet: the node learns it now.
        if approval.by == "approval-file" {
            audit
                .record("admitted", json!({"id": record.id, "by": "approval-file", "user": approval.user}))?;
        }
        let version = app.trust().fleet.bundle_version;
        audit.record("trust_delivered", json!({"id": record.id, "bundle_version": version}))?;
    }
    Ok(())
}

/// 200 while the fleet is loaded and the state directory takes new files.
pub async fn healthz(State(app): State<Arc<App>>) -> Response {
    let blocking_app = app.clone();
    let writable = tokio::task::spawn_blocking(move || blocking_app.state_writable()).await;
    match writable {
        Ok(Ok(())) => (StatusCode::OK, Json(serde_json::json!({"status": "ok"}))).into_response(),
        Ok(Err(e)) => {
            tracing::warn!(cause = %e, "health check: state directory not writable");
            let reason =
                serde_json::json!({"status": "unavailable", "reason": "state directory not writable"});
            (StatusCode::SERVICE_UNAVAILABLE, Json(reason)).into_response()
        }
        Err(e) => ApiError::Internal(e.to_string()).into_response(),
    }
}

/// `GET /metrics` on the plain-HTTP metrics listener.
pub async fn metrics(State(app): State<Arc<App>>) -> Response {
    app.metrics.pending.set(app.pending.get() as i64);
    let content_type = "application/openmetrics-text; version=1.0.0; charset=utf-8";
    ([(header::CONTENT_TYPE, content_type)], app.metrics.encode()).into_response()
}

pub async fn not_found() -> ApiError {
    ApiError::NotFound
}

async fn read_body(headers: &HeaderMap, body: Body) -> Result<Bytes, ApiError> {
    let declared =
        headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_BODY as u64) {
        return Err(ApiError::TooLarge);
    }
    match tokio::time::timeout(BODY_TIMEOUT, axum::body::to_bytes(body, MAX_BODY)).await {
        Err(_) => Err(ApiError::Timeout),
        Ok(Ok(bytes)) => Ok(bytes),
        Ok(Err(e)) => {
            let too_large = e.into_inner().is::<http_body_util::LengthLimitError>();
            Err(if too_large {
                ApiError::TooLarge
            } else {
                ApiError::BadRequest("the request body could not be read".into())
            })
        }
    }
}

/// One line per request: method, path (with the id), status, latency, peer.
/// Headers are never logged: the poll secret travels in one.
pub async fn log_request(State(app): State<Arc<App>>, request: Request, next: Next) -> Response {
    let started = Instant::now();
    let route = route_of(request.extensions().get::<axum::extract::MatchedPath>().map(|m| m.as_str()));
    let method = request.method().clone();
    let path = request.uri().path().to_string();
    let peer =
        request.extensions().get::<ConnectInfo<SocketAddr>>().map(|c| c.0.to_string()).unwrap_or_default();
    let response = next.run(request).await;
    let status = response.status().as_u16();
    app.metrics.requests.get_or_create(&super::metrics::RequestLabels { route, status }).inc();
    app.metrics
        .latency
        .get_or_create(&super::metrics::RouteLabels { route })
        .observe(started.elapsed().as_secs_f64());
    tracing::info!(
        %method,
        path = %truncate(&path, 128),
        status = response.status().as_u16(),
        latency_us = started.elapsed().as_micros() as u64,
        %peer,
        "request"
    );
    response
}

fn truncate(s: &str, max: usize) -> &str {
    match s.char_indices().nth(max) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

//! The handlers: extract, validate (protocol), act on the state (store),
//! answer (protocol types or [`ApiError`]). The state is reached only
//! through [`janus_store::AsyncStore`], one hand-off to the blocking pool
//! per request, so a slow disk never stalls the async workers.

use std::net::SocketAddr;
use std::sync::Arc;
use tokio::time::Instant;

use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, Path, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use secrecy::ExposeSecret;

use super::App;
use super::error::ApiError;
use super::metrics::{Metrics, route_of};
use janus_core::pki::sha256_hex;
use janus_core::protocol::{AnnounceAnswer, Announcement, MAX_BODY};
use janus_store::Outcome;
use janus_store::PollAnswer;
use janus_store::{NodeId, NodeRecord};

/// `POST /register`: validates, stores, admits when a token allows, answers 201.
pub(crate) async fn announce(
    State(app): State<Arc<App>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    proxied: Option<axum::Extension<janus_listen::proxy::ProxiedSource>>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    // Behind a listed balancer, the node is whom its PROXY header named.
    let peer = proxied.map_or(peer, |source| source.0.0);
    let answer = announce_or_refuse(&app, peer, headers, body).await;
    let outcome = match &answer {
        Ok((true, _)) => {
            app.metrics.admitted(janus_store::AdmittedHow::Token, true);
            "admitted_by_token"
        }
        Ok((false, _)) => "pending",
        Err(refused) => refused.announcement_outcome(),
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
    app.store.format_refusal().map_or(Ok(()), Err)?;
    app.limiter.check(peer.ip()).map_err(ApiError::TooMany)?;
    let body = read_body(&headers, body, app.body_timeout).await?;
    let announcement = Announcement::parse(&body)?;
    // Full: only an announcement a token admits gets in, with or without a
    // token (a made-up token must not be a way around the cap).
    let room = app.pending.get() < app.limits.max_pending;
    let full = || {
        ApiError::Unavailable(
            "too many announcements are pending approval; try again later (a registration token still admits)"
                .into(),
        )
    };
    if !room && announcement.registration_token.expose_secret().is_empty() {
        return Err(full());
    }
    let trust = app.trust();
    let record = NodeRecord {
        id: NodeId::generate(),
        name: announcement.name,
        address: announcement.address,
        ca_cert_pem: announcement.ca_cert_pem,
        admitted: false,
        poll_secret_sha256: sha256_hex(announcement.poll_secret.expose_secret().as_bytes()),
        ca_sha256: Some(announcement.ca_sha256),
        announced_at: Some(janus_core::clock::now_rfc3339()),
        peer_address: Some(peer.to_string()),
        admitted_by: None,
        token_claim: None,
        token_sha256_prefix: None,
        token_labels: Default::default(),
        admission_unanswered: false,
        extra: Default::default(),
    };
    // The whole admission in one hand-off to the blocking pool:
    // [`janus_store::admission`] orders its writes so that a crash or a
    // full disk leaves all of it or none.
    let admission =
        app.store.announce(record, announcement.registration_token, trust.fleet.bundle_version, room).await?;
    match admission.outcome {
        Outcome::NoRoom => return Err(full()),
        // The admission command decides on every announcement that did not
        // admit (no token, or a token that admitted nobody), but a rejected CA's.
        Outcome::Pending => {
            app.pending.bump();
            if let Some(policy) = &app.policy
                && !policy.submit(admission.id.clone())
            {
                app.metrics.admission_queue_full.inc();
            }
        }
        Outcome::Admitted | Outcome::RejectedCa => {}
    }
    let admitted = admission.admitted();
    let answer = AnnounceAnswer {
        id: admission.id.to_string(),
        admitted,
        trust: admitted.then(|| trust.trust.clone()),
    };
    Ok((admitted, answer))
}

/// `GET /register/{id}`: with the poll secret, the node's state (and trust once admitted).
pub(crate) async fn poll(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let answer = poll_answer(&app, &id, &headers).await;
    Metrics::outcome(
        &app.metrics.polls,
        answer.as_ref().map_or_else(ApiError::poll_outcome, PollAnswer::outcome),
    );
    let answer = answer?;
    if let PollAnswer::FirstDelivery(how) = answer {
        app.metrics.admitted(how, false);
    }
    match answer {
        PollAnswer::Unknown => Err(ApiError::NotFound),
        PollAnswer::Pending => Ok(StatusCode::ACCEPTED.into_response()),
        PollAnswer::Admitted | PollAnswer::FirstDelivery(_) => {
            let trust = app.trust();
            Ok((StatusCode::OK, [(header::CONTENT_TYPE, "application/json")], trust.trust_json.clone())
                .into_response())
        }
    }
}

async fn poll_answer(app: &Arc<App>, id: &str, headers: &HeaderMap) -> Result<PollAnswer, ApiError> {
    app.store.format_refusal().map_or(Ok(()), Err)?;
    let id = NodeId::parse(id).ok_or(ApiError::NotFound)?;
    let secret = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.as_bytes().strip_prefix(b"Bearer "))
        .ok_or(ApiError::NotFound)?;
    let version = app.trust().fleet.bundle_version;
    Ok(app.store.poll(id, secret.to_vec(), version).await?)
}

/// 200 while the fleet is loaded and the state can be relied on: a durable
/// write succeeds and the tokens files read and parse; else 503 and why.
pub(crate) async fn healthz(State(app): State<Arc<App>>) -> Response {
    let mut health = app.store.health().await;
    if let Ok(degraded) = &mut health {
        for refused in [&app.cert_refused, &app.fleet_refused] {
            degraded.extend(refused.lock().unwrap_or_else(|e| e.into_inner()).clone());
        }
    }
    let degraded = health.as_ref().map_or(0, Vec::len);
    app.metrics.degraded.set(degraded as i64);
    app.metrics.unavailable.set(i64::from(health.is_err()));
    match health {
        Ok(degraded) if degraded.is_empty() => {
            (StatusCode::OK, Json(serde_json::json!({"status": "ok"}))).into_response()
        }
        // Some nodes are refused, others served: ready, and saying why.
        Ok(degraded) => {
            tracing::warn!(degraded = %degraded.join("; "), "health check: degraded");
            let body = serde_json::json!({"status": "degraded", "degraded": degraded});
            (StatusCode::OK, Json(body)).into_response()
        }
        Err(reason) => {
            tracing::warn!(cause = %reason, "health check failed");
            let reason = serde_json::json!({"status": "unavailable", "reason": reason.to_string()});
            (StatusCode::SERVICE_UNAVAILABLE, Json(reason)).into_response()
        }
    }
}

/// `GET /livez`: the process answers; nothing is read (liveness).
pub(crate) async fn livez() -> Response {
    (StatusCode::OK, Json(serde_json::json!({"status": "alive"}))).into_response()
}

/// `GET /metrics` on the plain-HTTP metrics listener.
pub(crate) async fn metrics(State(app): State<Arc<App>>) -> Response {
    app.metrics.pending.set(app.pending.get() as i64);
    let content_type = "application/openmetrics-text; version=1.0.0; charset=utf-8";
    ([(header::CONTENT_TYPE, content_type)], app.metrics.encode()).into_response()
}

/// Every other path: 404 with a JSON error.
pub(crate) async fn not_found() -> ApiError {
    ApiError::NotFound
}

/// A routed path with another method: 405 with a JSON error (axum's own
/// has an empty body).
pub(crate) async fn method_not_allowed() -> ApiError {
    ApiError::MethodNotAllowed
}

/// The body, at most [`MAX_BODY`], within `timeout` once the head is in.
async fn read_body(headers: &HeaderMap, body: Body, timeout: std::time::Duration) -> Result<Bytes, ApiError> {
    let declared =
        headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_BODY as u64) {
        return Err(ApiError::TooLarge);
    }
    match tokio::time::timeout(timeout, axum::body::to_bytes(body, MAX_BODY)).await {
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

/// Counts each request by route and status, and its latency, for `/metrics`.
pub(crate) async fn count_request(State(app): State<Arc<App>>, request: Request, next: Next) -> Response {
    let started = Instant::now();
    let route = route_of(request.extensions().get::<axum::extract::MatchedPath>().map(|m| m.as_str()));
    let response = next.run(request).await;
    let status = response.status().as_u16();
    app.metrics.requests.get_or_create(&super::metrics::RequestLabels { route, status }).inc();
    app.metrics
        .latency
        .get_or_create(&super::metrics::RouteLabels { route })
        .observe(started.elapsed().as_secs_f64());
    response
}

//! What the console serves besides pages: its one stylesheet and one
//! script (compiled in: nothing is fetched from elsewhere), the event
//! stream that keeps the pending list live, and the headers every console
//! answer carries.
//!
//! Invariants: every answer under `/console` carries the
//! Content-Security-Policy below (this origin's own stylesheet, script and
//! event stream; no inline code, no frames, forms posted here only),
//! `nosniff`, a referrer for this origin only (`no-referrer` would make the browser send `Origin: null` with each form, which the CSRF check refuses) and `no-store` (a page may hold a token minted
//! once); the event stream says only which kind of event happened (never
//! a node's text), is opened only from the console's own pages (their
//! origin and cookie), and takes its slot from the admin API's streams.

use axum::Extension;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::failed;
use crate::api::Caller;
use crate::api::error::AdminApiError;
use crate::api::routes::Api;

/// The policy: this origin's own stylesheet, script and event stream.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

const STYLESHEET: &str = include_str!("console.css");
const SCRIPT: &str = include_str!("console.js");

/// Adds the console's headers to every answer.
pub async fn headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    for (name, value) in [
        (header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "same-origin"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::CACHE_CONTROL, "no-store"),
        (header::HeaderName::from_static("cross-origin-opener-policy"), "same-origin"),
        (header::HeaderName::from_static("cross-origin-resource-policy"), "same-origin"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}

/// `GET /console/assets/{console.css,console.js}`.
pub async fn asset(Path(file): Path<String>) -> Response {
    let (body, kind) = match file.as_str() {
        "console.css" => (STYLESHEET, "text/css; charset=utf-8"),
        "console.js" => (SCRIPT, "text/javascript; charset=utf-8"),
        _ => return failed(AdminApiError::NotFound("no such asset".into())),
    };
    (StatusCode::OK, [(header::CONTENT_TYPE, kind)], body).into_response()
}

/// `GET /console/events`: one `changed` event whenever the audit trail
/// gains one (an announcement, a decision, a token), saying only its kind.
pub async fn events(
    State(api): State<Api>,
    Extension(caller): Extension<Caller>,
    headers: axum::http::HeaderMap,
) -> Response {
    // Another site could otherwise make the admin's browser hold this
    // credential's stream slots (the API's too) with an <img> or an EventSource.
    if let Err(why) = super::csrf::same_origin(&headers) {
        return failed(AdminApiError::Forbidden(why));
    }
    crate::api::routes::event_stream(&api, &caller, None, crate::Followed::Kinds, Some("changed"))
        .unwrap_or_else(failed)
}

//! What the console serves besides pages: its one stylesheet and one
//! script (compiled in: nothing is fetched from elsewhere), and the event
//! stream that keeps the pending list live (the Content-Security-Policy
//! every answer carries is the web layer's: [`crate::web::layers`]).
//!
//! Invariants: the policy allows this origin's own stylesheet, script and
//! event stream; no inline code, no frames, forms posted here only; the event stream says only which kind of event happened (never
//! a node's text), is opened only from the console's own pages (their
//! origin and cookie), and takes its slot from the admin API's streams.

use axum::Extension;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::credential::Caller;
use crate::error::{AdminError, Code};
use crate::web::AdminState;
use crate::web::page_refusal as failed;

const STYLESHEET: &str = include_str!("console.css");
const SCRIPT: &str = include_str!("console.js");

/// `GET /console/assets/{console.css,console.js}`.
pub(crate) async fn asset(Path(file): Path<String>) -> Response {
    let (body, kind) = match file.as_str() {
        "console.css" => (STYLESHEET, "text/css; charset=utf-8"),
        "console.js" => (SCRIPT, "text/javascript; charset=utf-8"),
        _ => return failed(AdminError::new(Code::RouteNotFound, "no such asset")),
    };
    (StatusCode::OK, [(header::CONTENT_TYPE, kind)], body).into_response()
}

/// `GET /console/events`: one `changed` event whenever the audit trail
/// gains one (an announcement, a decision, a token), saying only its kind.
pub(crate) async fn events(
    State(state): State<AdminState>,
    Extension(caller): Extension<Caller>,
    headers: axum::http::HeaderMap,
) -> Response {
    // Another site could otherwise make the admin's browser hold this
    // credential's stream slots (the API's too) with an <img> or an EventSource.
    if let Err(why) = super::csrf::same_origin(&headers) {
        return failed(why);
    }
    state.open_stream(&caller, None, crate::Followed::Kinds, Some("changed")).unwrap_or_else(failed)
}

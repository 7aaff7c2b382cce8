//! The one error design of every listener (the nodes' port, the admin
//! API): an error enum per listener maps each failure to a status, a log
//! level and the words a client may read, in one table each; this module
//! turns that into the answer and carries to the request's log line what
//! the client was not told.
//!
//! Invariants: every error answer is JSON `{"error": "..."}`; a fault's
//! cause is logged once, by the listener's request span, never sent; a
//! 503 says when to retry (`Retry-After`); never 409.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

/// How a listener's error answers.
pub trait ErrorAnswer: std::fmt::Display {
    /// Its status (the listener's one table).
    fn status(&self) -> StatusCode;
    /// How loud its request's log line is.
    fn log_level(&self) -> tracing::Level;
    /// Seconds a client should wait before retrying, when it should.
    fn retry_after(&self) -> Option<u64>;
    /// What the client reads: the error's words, made safe for it.
    fn said(&self) -> String;
    /// A fault's cause and OS error code: logged, not sent.
    fn withheld(&self) -> Option<(String, Option<i32>)> {
        None
    }
}

/// What the request's log line says of an error answer, carried on it.
#[derive(Debug, Clone)]
pub struct Refused {
    /// The line's level.
    pub level: tracing::Level,
    /// What the client was told.
    pub said: String,
    /// A fault's cause (and OS error code), which the client was not told.
    pub cause: Option<(String, Option<i32>)>,
}

/// The answer to `error`.
pub fn answer(error: &impl ErrorAnswer) -> Response {
    let said = error.said();
    let mut response = (error.status(), Json(serde_json::json!({ "error": said }))).into_response();
    if let Some(secs) = error.retry_after() {
        response.headers_mut().insert(axum::http::header::RETRY_AFTER, secs.max(1).into());
    }
    response.extensions_mut().insert(Refused { level: error.log_level(), said, cause: error.withheld() });
    response
}

/// The [`Refused`] an answer carries, if it is an error answer.
pub fn refused(response: &Response) -> Option<&Refused> {
    response.extensions().get::<Refused>()
}

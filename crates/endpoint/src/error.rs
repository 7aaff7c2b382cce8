//! The one place that knows HTTP statuses: every way a request can fail maps
//! to its status and a JSON `{"error": "..."}` body here.
//!
//! Invariants: never 409, and never a body naming `service_cert_pem` (either
//! makes a node post its admin key); internal causes are logged (once, by the
//! request's span, from [`janus_listen::answer::Refused`]), not sent. The answer
//! itself is made by [`crate::answer`], as the admin API's is.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use janus_core::protocol::Refusal;
use janus_store::StoreError;

use janus_listen::answer::{ErrorAnswer, answer};

/// Every error answer: one place maps each to its status and JSON body.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// Bad input; the message names the field.
    #[error("{0}")]
    BadRequest(String),
    /// Unknown path, unknown or malformed id, missing or wrong poll secret:
    /// the node cannot tell them apart, and must not.
    #[error("not found")]
    NotFound,
    /// A routed path asked with another method (405).
    #[error("method not allowed: this path takes another method")]
    MethodNotAllowed,
    /// The body is larger than the protocol allows (413).
    #[error("the request body is larger than 64 KiB")]
    TooLarge,
    /// The body did not arrive in time (408).
    #[error("the request body did not arrive in time")]
    Timeout,
    /// This source announced too often; the node retries by itself.
    #[error("too many announcements from this address; retry in {}s", .0.as_secs())]
    TooMany(std::time::Duration),
    /// Too many pending announcements: a token still admits.
    #[error("{0}")]
    Unavailable(String),
    /// A state file the decision depends on cannot be read now (a token's
    /// metadata, a CA's rejection): refused, never guessed (503; the node
    /// retries).
    #[error("{0}")]
    Undecidable(String),
    /// The state directory is in a format this version does not know: it
    /// writes nothing until an upgrade (503; the node retries).
    #[error("{0}")]
    StateFormat(String),
    /// Our fault (500); the cause is logged (with its sources), not sent.
    #[error("internal error: {0}")]
    Internal(std::io::Error),
}

impl From<Refusal> for ApiError {
    fn from(r: Refusal) -> Self {
        ApiError::BadRequest(r.0)
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            // Not faults: the node retries later.
            StoreError::TokenMeta(why) => ApiError::Undecidable(why.to_string()),
            StoreError::Undecidable(why) => ApiError::Undecidable(why.to_string()),
            StoreError::Format(why) => ApiError::StateFormat(why.to_string()),
            StoreError::Io(cause) => ApiError::Internal(cause),
            // No node's request asks the store for an edit it could refuse:
            // one reaching here is ours to fix.
            StoreError::Refused(why) => ApiError::Internal(std::io::Error::other(why)),
        }
    }
}

impl From<janus_store::format::FormatError> for ApiError {
    fn from(e: janus_store::format::FormatError) -> Self {
        ApiError::StateFormat(e.to_string())
    }
}

impl ApiError {
    /// The HTTP status of this error.
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::NotFound => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::Timeout => StatusCode::REQUEST_TIMEOUT,
            ApiError::TooMany(_) => StatusCode::TOO_MANY_REQUESTS,
            ApiError::Unavailable(_) | ApiError::Undecidable(_) | ApiError::StateFormat(_) => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// Its outcome in `janus_registration_announcements_total`: the one
    /// table of them, beside the statuses, so no handler matches again.
    pub fn announcement_outcome(&self) -> &'static str {
        match self {
            ApiError::BadRequest(_) => "refused_bad_request",
            ApiError::TooLarge => "refused_too_large",
            ApiError::Timeout => "refused_timeout",
            ApiError::TooMany(_) => "refused_rate_limited",
            ApiError::Unavailable(_) => "refused_pending_cap",
            ApiError::StateFormat(_) => "refused_state_format",
            ApiError::Undecidable(_) => "refused_state_unreadable",
            ApiError::NotFound | ApiError::MethodNotAllowed | ApiError::Internal(_) => "refused_internal",
        }
    }

    /// How loud its request's log line is: a fault is an error, a state the
    /// admin must fix (unreadable files, an unknown format, the pending cap
    /// full) a warning, and what a client did wrong the ordinary request line.
    pub fn log_level(&self) -> tracing::Level {
        match self {
            ApiError::Internal(_) => tracing::Level::ERROR,
            ApiError::Unavailable(_) | ApiError::Undecidable(_) | ApiError::StateFormat(_) => {
                tracing::Level::WARN
            }
            ApiError::BadRequest(_)
            | ApiError::NotFound
            | ApiError::MethodNotAllowed
            | ApiError::TooLarge
            | ApiError::Timeout
            | ApiError::TooMany(_) => tracing::Level::INFO,
        }
    }

    /// Its outcome in `janus_registration_polls_total`.
    pub fn poll_outcome(&self) -> &'static str {
        match self {
            ApiError::NotFound => "unknown",
            _ => "error",
        }
    }
}

impl ErrorAnswer for ApiError {
    fn status(&self) -> StatusCode {
        ApiError::status(self)
    }

    fn log_level(&self) -> tracing::Level {
        ApiError::log_level(self)
    }

    /// A rate limit's own wait; 10 s for a file an admin is fixing
    /// (janusd's backoff paces it); 60 s for the pending cap (room comes
    /// back as admins act or records age out) and a newer format (once a
    /// version that knows it serves).
    fn retry_after(&self) -> Option<u64> {
        match self {
            ApiError::TooMany(retry) => Some(retry.as_secs()),
            ApiError::Undecidable(_) => Some(10),
            ApiError::Unavailable(_) | ApiError::StateFormat(_) => Some(60),
            _ => None,
        }
    }

    /// Belt and braces: whatever a future message says, `service_cert_pem`
    /// never leaves (a node would send its admin key).
    fn said(&self) -> String {
        let message = match self {
            ApiError::Internal(_) => "internal error".to_string(),
            other => other.to_string(),
        };
        message.replace("service_cert_pem", "service credential")
    }

    fn withheld(&self) -> Option<(String, Option<i32>)> {
        match self {
            ApiError::Internal(cause) => Some((cause.to_string(), janus_core::durable::os_error(cause))),
            _ => None,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        answer(&self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_409_never_the_fallback_word() {
        let all = [
            ApiError::BadRequest("service_cert_pem is required".into()),
            ApiError::NotFound,
            ApiError::MethodNotAllowed,
            ApiError::TooLarge,
            ApiError::Timeout,
            ApiError::TooMany(std::time::Duration::from_secs(3)),
            ApiError::Unavailable("x".into()),
            ApiError::Undecidable("w".into()),
            ApiError::StateFormat("z".into()),
            ApiError::Internal(std::io::Error::other("y")),
        ];
        for e in all {
            assert_ne!(e.status(), StatusCode::CONFLICT);
            let response = e.into_response();
            let body = futures_body(response);
            assert!(!body.contains("service_cert_pem"), "{body}");
        }
    }

    #[test]
    fn each_answer_carries_its_log_level() {
        let cases = [
            (ApiError::Internal(std::io::Error::other("y")), tracing::Level::ERROR),
            (ApiError::Undecidable("w".into()), tracing::Level::WARN),
            (ApiError::StateFormat("z".into()), tracing::Level::WARN),
            (ApiError::Unavailable("x".into()), tracing::Level::WARN),
            (ApiError::NotFound, tracing::Level::INFO),
            (ApiError::BadRequest("b".into()), tracing::Level::INFO),
            (ApiError::TooMany(std::time::Duration::from_secs(1)), tracing::Level::INFO),
        ];
        for (error, level) in cases {
            let response = error.into_response();
            assert_eq!(janus_listen::answer::refused(&response).map(|r| r.level), Some(level));
        }
    }

    fn futures_body(response: Response) -> String {
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let bytes = rt.block_on(axum::body::to_bytes(response.into_body(), 1 << 16)).unwrap();
        String::from_utf8(bytes.to_vec()).unwrap()
    }
}

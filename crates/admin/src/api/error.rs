//! [`AdminApiError`]: every way an admin API request fails, and the one
//! table from each to its status, its body and its log level.
//!
//! Invariants: a client's mistake is 400 (404 for what does not exist, 403
//! for a scope the credential lacks, 422 for a check it asked for that
//! failed), never 503, so a client that retries on 503 does not retry it
//! for ever; a state that cannot be told or written now is 503 with
//! `Retry-After`, so such a client retries; our own fault is 500 and its
//! cause is logged, never sent; never 409. Every refusal is logged once,
//! by the request's trace layer (`AdminLine`), with the
//! credential's name.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use crate::AdminError;
use janus_store::{Refusal, StoreError};

use janus_endpoint::answer::{ErrorAnswer, answer};

/// Why an admin API request was not done.
#[derive(Debug, thiserror::Error)]
pub enum AdminApiError {
    /// A body, filter or argument the route does not take (400).
    #[error("{0}")]
    BadRequest(String),
    /// No valid credential, or one without the route's scope (403).
    #[error("{0}")]
    Forbidden(String),
    /// A request a browser sent on another site's behalf (403): see
    /// [`super::layers`].
    #[error("{0}")]
    CrossSite(String),
    /// No such node, token or route (404).
    #[error("{0}")]
    NotFound(String),
    /// A method the route does not take (405).
    #[error("{0}")]
    MethodNotAllowed(String),
    /// A body larger than the listener takes (413).
    #[error("{0}")]
    TooLarge(String),
    /// A request that changes something, not declared JSON (415).
    #[error("{0}")]
    NotJson(String),
    /// A check the client asked for failed (a CA that is not the expected
    /// one), or the node's state forbids the change: nothing changed (422).
    #[error("{0}")]
    CheckFailed(String),
    /// The state cannot be read, told or written now (an unreadable file,
    /// a full disk, a lock held too long, the request's deadline): nothing
    /// was decided on a guess; retry later (503).
    #[error("{0}")]
    Unavailable(String),
    /// Our fault (500): the cause is logged, not sent.
    #[error("internal error")]
    Internal(String),
}

impl AdminApiError {
    /// The one status table.
    pub fn status(&self) -> StatusCode {
        match self {
            AdminApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            AdminApiError::Forbidden(_) | AdminApiError::CrossSite(_) => StatusCode::FORBIDDEN,
            AdminApiError::NotFound(_) => StatusCode::NOT_FOUND,
            AdminApiError::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            AdminApiError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            AdminApiError::NotJson(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            AdminApiError::CheckFailed(_) => StatusCode::UNPROCESSABLE_ENTITY,
            AdminApiError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            AdminApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// How loud its request's log line is: our fault an error, a state the
    /// admin must look at a warning, a client's mistake the plain line.
    pub fn log_level(&self) -> tracing::Level {
        match self {
            AdminApiError::Internal(_) => tracing::Level::ERROR,
            AdminApiError::Unavailable(_) | AdminApiError::Forbidden(_) | AdminApiError::CrossSite(_) => {
                tracing::Level::WARN
            }
            AdminApiError::BadRequest(_)
            | AdminApiError::NotFound(_)
            | AdminApiError::CheckFailed(_)
            | AdminApiError::MethodNotAllowed(_)
            | AdminApiError::TooLarge(_)
            | AdminApiError::NotJson(_) => tracing::Level::INFO,
        }
    }
}

impl ErrorAnswer for AdminApiError {
    fn status(&self) -> StatusCode {
        AdminApiError::status(self)
    }

    fn log_level(&self) -> tracing::Level {
        AdminApiError::log_level(self)
    }

    /// A state that cannot be told now is worth asking again soon.
    fn retry_after(&self) -> Option<u64> {
        matches!(self, AdminApiError::Unavailable(_)).then_some(5)
    }

    /// Escaped as a terminal shows it: the words may carry a node's name.
    fn said(&self) -> String {
        match self {
            AdminApiError::Internal(_) => "internal error: see the server's log".to_string(),
            other => janus_core::terminal::escape(&other.to_string()).into_owned(),
        }
    }

    fn withheld(&self) -> Option<(String, Option<i32>)> {
        match self {
            AdminApiError::Internal(cause) => Some((cause.clone(), None)),
            _ => None,
        }
    }
}

impl IntoResponse for AdminApiError {
    fn into_response(self) -> Response {
        answer(&self)
    }
}

impl From<StoreError> for AdminApiError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::Refused(Refusal::NoSuchToken) => AdminApiError::NotFound(error.to_string()),
            StoreError::Refused(_) => AdminApiError::BadRequest(error.to_string()),
            StoreError::Undecidable(_) | StoreError::TokenMeta(_) | StoreError::Format(_) => {
                AdminApiError::Unavailable(error.to_string())
            }
            // A file system's failure (EIO, ENOSPC, a lost lock): not the
            // client's; its words (paths, OS errors) stay in the log.
            StoreError::Io(cause) => AdminApiError::Unavailable(format!(
                "the state cannot be read or written now ({})",
                kind_of(&cause)
            )),
        }
    }
}

/// An I/O error's kind, as a client may be told it: no path, no text.
fn kind_of(error: &std::io::Error) -> String {
    match janus_core::durable::os_error(error) {
        Some(code) => format!("{}, OS error {code}", error.kind()),
        None => error.kind().to_string(),
    }
}

impl From<AdminError> for AdminApiError {
    fn from(error: AdminError) -> Self {
        match error {
            AdminError::NotFound(why) => AdminApiError::NotFound(why),
            AdminError::Ambiguous(why) | AdminError::Usage(why) => AdminApiError::BadRequest(why),
            AdminError::Refused(why) => AdminApiError::CheckFailed(why),
            AdminError::Read { path, cause } => {
                AdminApiError::BadRequest(format!("{}: {cause}", path.display()))
            }
            AdminError::Store(store) => store.into(),
            AdminError::Revoke { key, cause } => match AdminApiError::from(cause) {
                AdminApiError::Unavailable(why) => AdminApiError::Unavailable(why),
                other => {
                    let status = other.status();
                    let said = format!("cannot revoke {key:?}: {other}");
                    if status == StatusCode::NOT_FOUND {
                        AdminApiError::NotFound(said)
                    } else {
                        AdminApiError::BadRequest(said)
                    }
                }
            },
            AdminError::State(cause) => AdminApiError::from(StoreError::Io(cause)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clients_mistake_is_never_503_and_a_fault_never_4xx() {
        let io = || {
            janus_core::durable::with_path(
                std::io::Error::from_raw_os_error(28),
                std::path::Path::new("/s/t"),
            )
        };
        let cases: Vec<(AdminApiError, u16)> = vec![
            (StoreError::Refused(Refusal::TokenListed).into(), 400),
            (StoreError::Refused(Refusal::TokenSpent).into(), 400),
            (StoreError::Refused(Refusal::TokenRevoked).into(), 400),
            (StoreError::Refused(Refusal::TooLarge { file: "tokens", mib: 64 }).into(), 400),
            (StoreError::Refused(Refusal::AmbiguousToken(vec![])).into(), 400),
            (
                AdminError::Revoke { key: "ab".into(), cause: StoreError::Refused(Refusal::NoSuchToken) }
                    .into(),
                404,
            ),
            (AdminError::Revoke { key: "ab".into(), cause: StoreError::Io(io()) }.into(), 503),
            (AdminError::Ambiguous("two".into()).into(), 400),
            (AdminError::NotFound("none".into()).into(), 404),
            (AdminError::Store(StoreError::Io(io())).into(), 503),
        ];
        for (error, status) in cases {
            assert_eq!(error.status().as_u16(), status, "{error:?}");
            assert_ne!(error.status(), StatusCode::CONFLICT);
        }
        // A fault's words stay in the log: no path reaches the client.
        let said = AdminApiError::from(StoreError::Io(io())).to_string();
        assert!(!said.contains("/s/t") && said.contains("OS error 28"), "{said}");
        let response = AdminApiError::Internal("a panic: secret detail".into()).into_response();
        let refused = janus_endpoint::answer::refused(&response).unwrap();
        assert_eq!(refused.cause.as_ref().map(|(cause, _)| cause.as_str()), Some("a panic: secret detail"));
    }
}

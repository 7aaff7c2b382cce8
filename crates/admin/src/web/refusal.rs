//! A refusal in the shape its reader reads: `application/problem+json`
//! ([`Problem`], RFC 9457) for the API, the console's page for a person.
//!
//! Invariants: the shape follows the path (`/console…` a page, everything
//! else problem+json); status, code and `Retry-After` come from the code;
//! every refusal carries the [`Refused`] the request's log line reads.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use janus_listen::answer::Refused;

use crate::error::{AdminError, Code, Surface};

/// The surface a path belongs to: the console's pages, or the API.
pub(crate) fn surface_of(path: &str) -> Surface {
    if path == "/console" || path.starts_with("/console/") { Surface::Console } else { Surface::Api }
}

/// A refusal in the shape its path's reader reads.
pub(crate) fn refusal(path: &str, error: AdminError) -> Response {
    match surface_of(path) {
        Surface::Console => page_refusal(error),
        _ => problem(error),
    }
}

/// The RFC 9457 document of a refusal, as the API answers it.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct Problem {
    /// `urn:janus-registration:error:<code>`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The code's title, the same for every refusal of it.
    pub title: String,
    /// The HTTP status.
    pub status: u16,
    /// What went wrong with this request, and the way out.
    pub detail: String,
    /// What a program acts on (docs/orchestrating.md's code table).
    pub code: Code,
    /// The request's field it concerns, as the API names it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// The detail again, for clients of the `{"error": …}` answers before codes.
    pub error: String,
}

impl Problem {
    /// `error` as the API says it.
    pub fn of(error: &AdminError) -> Problem {
        let detail = janus_core::terminal::escape(&error.said(Surface::Api)).into_owned();
        Problem {
            kind: format!("urn:janus-registration:error:{}", error.code),
            title: error.code.title().to_string(),
            status: error.code.status(),
            detail: detail.clone(),
            code: error.code,
            field: error.field.map(|f| f.name(Surface::Api).to_string()),
            error: detail,
        }
    }
}

/// The API's refusal: problem+json, `Retry-After` where a retry helps,
/// and the line the trace layer logs.
pub(crate) fn problem(error: AdminError) -> Response {
    let problem = Problem::of(&error);
    let status = StatusCode::from_u16(problem.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let body = serde_json::to_vec(&problem).unwrap_or_default();
    let mut response = (status, body).into_response();
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/problem+json"));
    marked(&mut response, &error, problem.detail);
    response
}

/// The console's refusal: a page with the same status, words and `Retry-After`.
pub(crate) fn page_refusal(error: AdminError) -> Response {
    let said = janus_core::terminal::escape(&error.said(Surface::Console)).into_owned();
    let title = match error.code.status() {
        403 => "Refused",
        404 => "Not found",
        503 => "Not now",
        500 => "Failed",
        _ => "Not done",
    };
    let status = StatusCode::from_u16(error.code.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response =
        (status, axum::response::Html(failure_page(title, &said, error.code).into_string())).into_response();
    marked(&mut response, &error, said);
    response
}

/// `Retry-After` and the trace layer's line on a refusal's answer.
fn marked(response: &mut Response, error: &AdminError, said: String) {
    if let Some(secs) = error.code.retry_after() {
        response.headers_mut().insert(header::RETRY_AFTER, secs.into());
    }
    let cause = error.cause().map(|c| (c.to_string(), None));
    response.extensions_mut().insert(Refused {
        level: error.code.log_level(),
        said: format!("{}: {said}", error.code),
        cause,
    });
}

/// A refusal's page, in the console's frame (its stylesheet, no script).
pub(crate) fn failure_page(title: &str, said: &str, code: Code) -> maud::Markup {
    maud::html! {
        (maud::DOCTYPE)
        html lang="en" {
            head { meta charset="utf-8"; title { (title) " · janus-registration" }
                link rel="stylesheet" href="/console/assets/console.css"; }
            body { main { h1 { (title) } p .said.refused role="alert" data-code=(code) { (said) }
                p { a href="/console/" { "Back to the console" } } } }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_problem_says_its_code_status_and_field_in_the_apis_words() {
        let refused = AdminError::field(crate::Field::Count, "must be between 1 and 100000");
        let problem = Problem::of(&refused);
        assert_eq!(
            (problem.status, problem.code, problem.field.as_deref()),
            (400, Code::InvalidField, Some("count"))
        );
        assert_eq!(problem.detail, "count must be between 1 and 100000");
        let response = super::problem(AdminError::new(Code::LockTimeout, "locked"));
        assert_eq!(response.headers()[header::CONTENT_TYPE], "application/problem+json");
        assert_eq!(response.headers()[header::RETRY_AFTER], "5");
    }
}

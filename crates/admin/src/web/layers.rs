//! What every request and answer on the admin listener passes through,
//! whatever its route (the API's, the console's, the fallback): the
//! cross-site rule, the headers that refuse framing, and the one shape of
//! a refusal, the framework's own included.
//!
//! Invariants, held by construction (these are layers on the whole
//! router, not per route, so a route added later is under them too):
//! - a request a browser sends on another site's behalf is refused before
//!   any route sees it: a `Sec-Fetch-Site` other than `same-origin` or
//!   `none`, an `Origin` that is not this listener's own, and on the API a
//!   state-changing request (`POST`, `PUT`, `PATCH`) whose body is not
//!   declared `application/json` (a cross-site `<form>` or `no-cors` fetch
//!   can send only form or text bodies; `DELETE` cannot be sent cross-site
//!   without a preflight, which this listener never answers with CORS
//!   headers). Programs (curl, the CLI, an orchestrator) send none of the
//!   browser headers and are not affected;
//! - every answer refuses to be framed (`X-Frame-Options: DENY`, the
//!   console's Content-Security-Policy with `frame-ancestors 'none'`) and
//!   is `no-store`;
//! - every refusal is the documented problem+json, or under `/console`
//!   the console's error page: an error answer the framework made (a path
//!   parameter that is not UTF-8, a wrong method, a body too large) is
//!   said again in that shape, its status kept.

use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;

use super::refusal;
use crate::error::{AdminError, Code};

/// The framework's own error text read back, at most this many bytes.
const FRAMEWORK_TEXT_AT_MOST: usize = 1024;

/// The policy every answer carries: this origin's own stylesheet, script
/// and event stream; no inline code, no frames, forms posted here only.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// Adds the headers every answer carries: no framing, no sniffing, no
/// caching (a page may hold a token minted once), this origin only.
pub(crate) async fn headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    for (name, value) in [
        (header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        // `no-referrer` would make a browser send `Origin: null` with each
        // console form, which the cross-site rule refuses.
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

/// The cross-site rule: see the module's invariants.
pub(crate) async fn cross_site(request: Request, next: Next) -> Response {
    match browser_refusal(request.headers()) {
        Some(refused) => refusal(request.uri().path(), refused),
        None => next.run(request).await,
    }
}

/// Why a request is one a browser sent on another site's behalf, if it is.
pub(crate) fn browser_refusal(headers: &HeaderMap) -> Option<AdminError> {
    if let Some(site) = headers.get("sec-fetch-site") {
        let site = site.to_str().unwrap_or("(not text)");
        if !matches!(site, "same-origin" | "none") {
            return Some(AdminError::new(
                Code::CrossSite,
                format!(
                    "the browser says this request comes from another site (Sec-Fetch-Site: {}): the admin \
                 listener answers only its own pages, and programs (which send no such header)",
                    janus_core::terminal::escape(site)
                ),
            ));
        }
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or("(not text)");
        let host = headers.get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or_default();
        if host.is_empty() || !origin.eq_ignore_ascii_case(&format!("https://{host}")) {
            return Some(AdminError::new(
                Code::CrossSite,
                format!(
                    "the request was sent from another origin ({}), not this listener's: refused",
                    janus_core::terminal::escape(origin)
                ),
            ));
        }
    }
    None
}

/// The API's `POST` routes take only a body declared `application/json`:
/// a cross-site `<form>` or `no-cors` fetch can send only form or text
/// bodies (PUT, PATCH and DELETE cannot be sent cross-site without a
/// preflight). A layer on each such route, added by [`super::Routes::route`]
/// itself, so a method no route takes is 405 first.
pub(crate) async fn json_declared(request: Request, next: Next) -> Response {
    if declares_json(request.headers()) {
        return next.run(request).await;
    }
    let refused = AdminError::new(
        Code::NotJson,
        "a request that changes something is sent with Content-Type: application/json (its body JSON, {} where \
         the route takes no field)",
    );
    refusal(request.uri().path(), refused)
}

/// Whether the body is declared `application/json` (parameters allowed).
fn declares_json(headers: &HeaderMap) -> bool {
    let Some(kind) = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    kind.split(';').next().is_some_and(|media| media.trim().eq_ignore_ascii_case("application/json"))
}

/// Says the framework's own error answers (they carry no [`Refused`]) again
/// as the listener's documented refusal, their status kept.
///
/// [`Refused`]: janus_listen::answer::Refused
pub(crate) async fn framework_errors(request: Request, next: Next) -> Response {
    let path = request.uri().path().to_string();
    let response = next.run(request).await;
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) || is_ours(&response) {
        return response;
    }
    let (parts, body) = response.into_parts();
    let text = match axum::body::to_bytes(body, FRAMEWORK_TEXT_AT_MOST).await {
        Ok(bytes) => String::from_utf8_lossy(&bytes).trim().to_string(),
        Err(_) => String::new(),
    };
    let error = framework_error(status, &parts.headers, &text);
    let mut said = refusal(&path, error);
    // What the framework said beside its status (`Allow` on a 405) stays.
    if let Some(allow) = parts.headers.get(header::ALLOW) {
        said.headers_mut().insert(header::ALLOW, allow.clone());
    }
    said
}

/// Whether an error answer is already in the listener's shape: one of its
/// refusals (which carry [`Refused`](janus_listen::answer::Refused)), or
/// a console page said with a refusal's status (a node's page after a
/// refused decision). The framework's own are plain text or empty.
fn is_ours(response: &Response) -> bool {
    let kind = response.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default();
    janus_listen::answer::refused(response).is_some() || kind.starts_with("text/html")
}

/// The framework's answer `status` (with its `headers` and `text`) as one of ours.
fn framework_error(status: StatusCode, headers: &HeaderMap, text: &str) -> AdminError {
    let text = janus_core::terminal::escape(text);
    match status {
        StatusCode::METHOD_NOT_ALLOWED => {
            let allowed =
                headers.get(header::ALLOW).and_then(|v| v.to_str().ok()).unwrap_or("another method");
            AdminError::new(
                Code::MethodNotAllowed,
                format!("this route takes {allowed}: see GET /v1/openapi.json"),
            )
        }
        StatusCode::PAYLOAD_TOO_LARGE => {
            AdminError::new(Code::BodyTooLarge, "the body is larger than 16 KiB")
        }
        StatusCode::UNSUPPORTED_MEDIA_TYPE => {
            AdminError::new(Code::NotJson, format!("the body's type: {text}"))
        }
        StatusCode::NOT_FOUND => {
            AdminError::new(Code::RouteNotFound, "no such route: see GET /v1/openapi.json")
        }
        s if s.is_client_error() && text.is_empty() => {
            AdminError::new(Code::InvalidRequest, "the request is not valid")
        }
        s if s.is_client_error() => {
            AdminError::new(Code::InvalidRequest, format!("the request is not valid: {text}"))
        }
        _ => AdminError::internal(format!("the framework answered {status}: {text}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        map.insert(header::HOST, HeaderValue::from_static("admin.example:9443"));
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    #[test]
    fn what_a_browser_sends_for_another_site_is_refused_and_a_program_is_not() {
        let json = ("content-type", "application/json");
        let refused = |h: &[(&'static str, &str)], _path: &str| browser_refusal(&headers(h));
        assert!(refused(&[json], "/v1/nodes/x/reject").is_none(), "a program");
        assert!(refused(&[("content-type", "application/json; charset=utf-8")], "/v1/tokens").is_none());
        for site in ["cross-site", "same-site", "other"] {
            assert!(
                matches!(
                    refused(&[json, ("sec-fetch-site", site)], "/v1/tokens"),
                    Some(AdminError { code: Code::CrossSite, .. })
                ),
                "{site}"
            );
        }
        for site in ["same-origin", "none"] {
            assert!(refused(&[json, ("sec-fetch-site", site)], "/v1/tokens").is_none(), "{site}");
        }
        for origin in ["https://evil.example", "null", "http://admin.example:9443", "https://admin.example"] {
            assert!(
                matches!(
                    refused(&[json, ("origin", origin)], "/v1/tokens"),
                    Some(AdminError { code: Code::CrossSite, .. })
                ),
                "{origin}"
            );
        }
        assert!(refused(&[json, ("origin", "https://admin.example:9443")], "/v1/tokens").is_none());
        for kind in
            [None, Some("text/plain"), Some("application/x-www-form-urlencoded"), Some("multipart/form-data")]
        {
            let h: Vec<(&'static str, &str)> = kind.map(|k| ("content-type", k)).into_iter().collect();
            assert!(!declares_json(&headers(&h)), "{kind:?}");
        }
        assert!(declares_json(&headers(&[json])));
        assert!(browser_refusal(&headers(&[])).is_none(), "a program sends none of a browser's headers");
    }
}

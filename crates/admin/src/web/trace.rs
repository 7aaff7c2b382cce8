//! The admin listener's request spans: method, path and the credential's
//! name. The line each request logs is the nodes' port's own (one trace
//! layer for both listeners: [`janus_listen::trace::traced_with`]): its
//! status and time, and for a refusal what it said, its code first (for a
//! fault, its cause).

use crate::credential::Authenticated;

/// The admin listener's trace layer.
pub(crate) fn traced() -> janus_listen::trace::Traced<AdminSpan> {
    janus_listen::trace::traced_with(AdminSpan)
}

/// A request's span: method, path and the credential's name (`-` for none).
#[derive(Clone, Copy)]
pub(crate) struct AdminSpan;

impl<B> tower_http::trace::MakeSpan<B> for AdminSpan {
    fn make_span(&mut self, request: &axum::http::Request<B>) -> tracing::Span {
        let credential = match request.extensions().get::<Authenticated>().map(|a| a.as_ref().as_ref()) {
            Some(Ok(caller)) => janus_core::terminal::escape(&caller.name).into_owned(),
            _ => "-".to_string(),
        };
        tracing::info_span!(
            "admin_request",
            method = %request.method(),
            path = %request.uri().path(),
            credential = %credential
        )
    }
}

//! The admin listener's request spans and log lines: one per request,
//! with the credential's name, and for a refusal what it said (its code
//! first) or, for a fault, its cause.

use std::time::Duration;

use crate::credential::Authenticated;

/// The admin API's request spans and log lines: tower-http's
/// [`TraceLayer`](tower_http::trace::TraceLayer), as on the nodes' port.
pub(crate) type Traced = tower_http::trace::TraceLayer<
    tower_http::classify::SharedClassifier<tower_http::classify::ServerErrorsAsFailures>,
    AdminSpan,
    (),
    AdminLine,
    (),
    (),
    (),
>;

pub(crate) fn traced() -> Traced {
    tower_http::trace::TraceLayer::new_for_http()
        .make_span_with(AdminSpan)
        .on_request(())
        .on_response(AdminLine)
        .on_body_chunk(())
        .on_eos(())
        .on_failure(())
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

/// One line per request, in its span: its status and time, and for a
/// refusal what it said (for a fault, its cause).
#[derive(Clone, Copy)]
pub(crate) struct AdminLine;

impl<B> tower_http::trace::OnResponse<B> for AdminLine {
    fn on_response(self, response: &axum::http::Response<B>, latency: Duration, _: &tracing::Span) {
        let status = response.status().as_u16();
        let latency_us = latency.as_micros() as u64;
        match response.extensions().get::<janus_endpoint::answer::Refused>() {
            Some(refused) if refused.level == tracing::Level::ERROR => {
                let cause = refused.cause.as_ref().map_or(refused.said.as_str(), |(cause, _)| cause);
                tracing::error!(status, latency_us, cause = %cause, "admin request failed")
            }
            Some(refused) if refused.level == tracing::Level::WARN => {
                tracing::warn!(status, latency_us, why = %refused.said, "admin request refused")
            }
            Some(refused) => tracing::info!(status, latency_us, why = %refused.said, "admin request refused"),
            None => tracing::info!(status, latency_us, "admin request"),
        }
    }
}

//! Every listener's request spans and their one log line: tower-http's
//! trace layer with the listener's span maker (the nodes' port's
//! [`RequestSpan`], the admin listener's own) and [`RequestLine`].
//!
//! Invariants: a header is never in a span or line (the poll secret and
//! the registration token travel in them); an error answer's level and
//! words come from the [`Refused`] it carries, and a fault's cause is
//! logged here once, never sent.

use std::net::SocketAddr;

use axum::extract::ConnectInfo;

use crate::answer::Refused;
use crate::proxy::ProxiedSource;

/// Every listener's request spans and log lines: tower-http's
/// [`TraceLayer`](tower_http::trace::TraceLayer) with the listener's span
/// (`S`: the nodes' port's [`RequestSpan`], the admin listener's own) and
/// the one line ([`RequestLine`]).
pub type Traced<S = RequestSpan> = tower_http::trace::TraceLayer<
    tower_http::classify::SharedClassifier<tower_http::classify::ServerErrorsAsFailures>,
    S,
    (),
    RequestLine,
    (),
    (),
    (),
>;

/// The trace layer with [`RequestSpan`]'s spans.
pub fn traced() -> Traced {
    traced_with(RequestSpan)
}

/// The trace layer of a listener whose requests' spans `span` makes.
pub fn traced_with<S>(span: S) -> Traced<S> {
    tower_http::trace::TraceLayer::new_for_http()
        .make_span_with(span)
        .on_request(())
        .on_response(RequestLine)
        .on_body_chunk(())
        .on_eos(())
        .on_failure(())
}

/// The span every line logged while a request is served carries (the
/// store's too, on the blocking pool: `AsyncStore` carries the span
/// there): a request number, method, path (with the id, cut at 128
/// characters) and peer (the PROXY header's source, when trusted).
/// Headers are never in it: the poll secret travels in one.
#[derive(Clone, Copy)]
pub struct RequestSpan;

impl<B> tower_http::trace::MakeSpan<B> for RequestSpan {
    fn make_span(&mut self, request: &axum::http::Request<B>) -> tracing::Span {
        static NEXT_REQUEST: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let peer = match request.extensions().get::<ProxiedSource>() {
            Some(proxied) => proxied.0.to_string(),
            None => request
                .extensions()
                .get::<ConnectInfo<SocketAddr>>()
                .map(|c| c.0.to_string())
                .unwrap_or_default(),
        };
        tracing::info_span!(
            "request",
            id = NEXT_REQUEST.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            method = %request.method(),
            path = %truncate(request.uri().path(), 128),
            %peer,
        )
    }
}

/// One line per request, in its span: status and latency, at the level
/// its answer asks ([`Refused`]), with what a refusal said
/// (`why`); an internal error's cause on a line of its own before it,
/// logged here once (the answer itself says only "internal error").
#[derive(Clone, Copy)]
pub struct RequestLine;

impl<B> tower_http::trace::OnResponse<B> for RequestLine {
    fn on_response(
        self,
        response: &axum::http::Response<B>,
        latency: std::time::Duration,
        _: &tracing::Span,
    ) {
        let status = response.status().as_u16();
        let refused = response.extensions().get::<Refused>();
        if let Some((cause, os_error)) = refused.and_then(|r| r.cause.as_ref()) {
            tracing::error!(cause = %cause, os_error, "request failed");
        }
        let latency_us = latency.as_micros() as u64;
        let Some(refused) = refused else {
            return tracing::info!(status, latency_us, "request");
        };
        let why = refused.said.as_str();
        match refused.level {
            tracing::Level::ERROR => tracing::error!(status, latency_us, why, "request"),
            tracing::Level::WARN => tracing::warn!(status, latency_us, why, "request"),
            _ => tracing::info!(status, latency_us, why, "request"),
        }
    }
}

fn truncate(s: &str, max: usize) -> &str {
    match s.char_indices().nth(max) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

//! The router's answers without a socket: `router(..).oneshot(..)`, as
//! axum's examples test handlers, beside the TLS tests that drive the same
//! routes as a node does. Quick to read and to fail: each answer's status
//! and its JSON error.

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use tower::ServiceExt;

use crate::common::*;
use janus_endpoint as server;

/// One request through a fresh router over `fx`'s state; the status and body.
async fn ask(fx: &Fixture, method: &str, path: &str, body: Vec<u8>) -> (StatusCode, serde_json::Value) {
    let prepared = server::prepare(fx.config()).expect("startup checks pass");
    prepared.app().store.lay_out().await.unwrap();
    let mut request = Request::builder().method(method).uri(path).body(Body::from(body)).unwrap();
    let peer: std::net::SocketAddr = "192.0.2.7:40000".parse().unwrap();
    request.extensions_mut().insert(ConnectInfo(peer));
    let answer = server::router(prepared.app()).oneshot(request).await.unwrap();
    let status = answer.status();
    let bytes = answer.into_body().collect().await.unwrap().to_bytes();
    (status, serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null))
}

#[tokio::test]
async fn every_refusal_is_its_status_with_a_json_error() {
    let fx = Fixture::new();
    let id = "0123456789abcdef0123456789abcdef";
    for (method, path, body, expected) in [
        ("GET", "/", "", StatusCode::NOT_FOUND),
        ("GET", "/register", "", StatusCode::METHOD_NOT_ALLOWED),
        ("DELETE", &format!("/register/{id}") as &str, "", StatusCode::METHOD_NOT_ALLOWED),
        ("GET", &format!("/register/{id}"), "", StatusCode::NOT_FOUND),
        ("GET", "/register/not-an-id", "", StatusCode::NOT_FOUND),
        ("POST", "/register", "{", StatusCode::BAD_REQUEST),
        ("POST", "/register", r#"{"protocol":1}"#, StatusCode::BAD_REQUEST),
    ] {
        let (status, body) = ask(&fx, method, path, body.as_bytes().to_vec()).await;
        assert_eq!(status, expected, "{method} {path}: {body}");
        let error =
            body["error"].as_str().unwrap_or_else(|| panic!("{method} {path}: no JSON error: {body}"));
        assert!(!error.contains("service_cert_pem"), "{error}");
    }
}

#[tokio::test]
async fn a_valid_announcement_is_201_with_its_id() {
    let fx = Fixture::new();
    let ca = janus_registration::certs::mint_node_ca("edge").unwrap();
    let (status, body) = ask(&fx, "POST", "/register", announcement("edge", &ca, "", &new_secret())).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["id"].as_str().map(str::len), Some(32), "{body}");
    assert_eq!(body["admitted"], false);
}

#[tokio::test]
async fn an_internal_error_is_logged_once_naming_its_request() {
    let fx = Fixture::new();
    let server = Process::start(&fx.serve_args());
    let client = node_client(&fx, server.addr);
    // `nodes/` a file: the record cannot be written (ENOTDIR), a fault of ours.
    // The server's first maintenance pass may make it again in between: again, then.
    let nodes = fx.state().join("nodes");
    let replaced = wait_for(std::time::Duration::from_secs(10), || {
        let _ = std::fs::remove_dir_all(&nodes);
        std::fs::write(&nodes, b"").is_ok()
    });
    assert!(replaced, "nodes/ could not be replaced by a file");
    let ca = janus_registration::certs::mint_node_ca("edge").unwrap();
    let answer = post(&client, &announcement("edge", &ca, "", &new_secret())).await;
    assert_eq!(answer.status, 500, "{}", answer.text());
    assert_eq!(json(&answer)["error"], "internal error", "the cause is not sent");
    let logged = |s: &Process| s.log().lines().filter(|l| l.contains("request failed")).count();
    assert!(wait_for(std::time::Duration::from_secs(10), || logged(&server) >= 1), "{}", server.log());
    let log = server.log();
    let failed: Vec<&str> = log.lines().filter(|l| l.contains("request failed")).collect();
    assert_eq!(failed.len(), 1, "once: {failed:?}");
    assert!(failed[0].contains("method=POST") && failed[0].contains("path=/register"), "{}", failed[0]);
    assert!(failed[0].contains("nodes"), "with its cause: {}", failed[0]);
    // The store's own lines for it carry the same request span.
    let id = failed[0].split("request{id=").nth(1).and_then(|r| r.split_whitespace().next()).unwrap();
    let spanned = log.lines().filter(|l| l.contains(&format!("request{{id={id} "))).count();
    assert!(spanned >= 2, "the failure and the request's own line, in one span: {log}");
}

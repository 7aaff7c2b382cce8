//! Every input the endpoint refuses, and how: a 400 whose JSON error names the
//! field and never says `service_cert_pem`, or a 413 for an oversized body.

use crate::common::*;
use janus_registration::certs;
use serde_json::json;

#[tokio::test]
async fn every_bad_announcement_is_a_400_naming_the_field() {
    let fx = Fixture::new();
    fx.write_tokens("t1\n");
    let server = InProcess::start(fx.config()).await;
    let client = node_client(&fx, server.addr);
    let ca = certs::mint_node_ca("edge").unwrap();
    let leaf = fx.controller.cert_pem.clone();
    let secret = new_secret();
    let good = json!({
        "protocol": 2, "name": "edge", "address": "10.0.2.15:9505",
        "ca_cert_pem": ca.cert_pem, "poll_secret": secret,
    });
    let with = |field: &str, value: serde_json::Value| {
        let mut body = good.clone();
        body[field] = value;
        body.to_string().into_bytes()
    };
    let cases = bad_announcements(&good, &leaf);
    for (what, body, names) in cases {
        let answer = post(&client, &body).await;
        assert_eq!(answer.status, 400, "{what}: {}", answer.text());
        let error = json(&answer)["error"].as_str().unwrap_or_default().to_string();
        assert!(error.contains(names), "{what}: {error:?} should name {names:?}");
        assert!(!answer.text().contains("service_cert_pem"), "{what}");
    }
    // The key-carrying body was refused without a trace; nothing was stored.
    assert_eq!(records(&fx.state()).len(), 0);
    fx.expect_tokens("t1\n");

    // Unknown fields are ignored; an absent or null token is no token.
    let mut extra = good.clone();
    extra["future_field"] = json!({"x": 1});
    extra["registration_token"] = serde_json::Value::Null;
    let answer = post(&client, extra.to_string().as_bytes()).await;
    assert_eq!(answer.status, 201, "{}", answer.text());
    let answer = post(&client, &with("address", json!("[fe80::1]:9505"))).await;
    assert_eq!(answer.status, 201, "{}", answer.text());
    server.stop().await;
}

#[tokio::test]
async fn a_body_over_64_kib_is_a_413() {
    let fx = Fixture::new();
    let server = InProcess::start(fx.config()).await;
    let client = node_client(&fx, server.addr);
    let big = format!("{{\"protocol\":2,\"pad\":\"{}\"}}", "x".repeat(70 * 1024));
    let answer = post(&client, big.as_bytes()).await;
    assert_eq!(answer.status, 413, "{}", answer.text());
    assert!(json(&answer)["error"].as_str().unwrap().contains("64 KiB"));
    server.stop().await;
}

#[tokio::test]
async fn a_chunked_body_over_64_kib_is_a_413_too() {
    let fx = Fixture::new();
    let server = InProcess::start(fx.config()).await;
    let client = node_client(&fx, server.addr);
    // No Content-Length: the limit must hold while reading.
    let mut chunked = Vec::new();
    for _ in 0..80 {
        chunked.extend_from_slice(format!("{:x}\r\n", 1024).as_bytes());
        chunked.extend_from_slice(&[b'x'; 1024]);
        chunked.extend_from_slice(b"\r\n");
    }
    chunked.extend_from_slice(b"0\r\n\r\n");
    let answer = post_chunked(&client.address, &chunked).await;
    assert_eq!(answer, 413);
    server.stop().await;
}

/// The node's client always sends Content-Length; a chunked body needs a raw
/// head on a plain rustls connection.
async fn post_chunked(addr: &str, body: &[u8]) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let config = std::sync::Arc::new(janus_core::tls::insecure_client_config());
    let name = rustls::pki_types::ServerName::try_from("controller.fleet.janus").unwrap();
    let mut tls = tokio_rustls::TlsConnector::from(config).connect(name, tcp).await.unwrap();
    let mut bytes = b"POST /register HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    bytes.extend_from_slice(body);
    let _ = tls.write_all(&bytes).await;
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(std::time::Duration::from_secs(10), tls.read_to_end(&mut answer)).await;
    let text = String::from_utf8_lossy(&answer);
    text.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0)
}

/// Every announcement body the endpoint refuses, made from `good`: what it
/// is, the body, and the words its 400 must name. `leaf` is a certificate
/// that is not a CA.
fn bad_announcements(good: &serde_json::Value, leaf: &str) -> Vec<(&'static str, Vec<u8>, &'static str)> {
    let with = |field: &str, value: serde_json::Value| {
        let mut body = good.clone();
        body[field] = value;
        body.to_string().into_bytes()
    };
    let without = |field: &str| {
        let mut body = good.clone();
        body.as_object_mut().unwrap().remove(field);
        body.to_string().into_bytes()
    };
    vec![
        ("not JSON", b"{not json".to_vec(), "not JSON"),
        ("empty body", b"".to_vec(), "not JSON"),
        ("an array", b"[]".to_vec(), "object"),
        ("null", b"null".to_vec(), "object"),
        ("a string", b"\"x\"".to_vec(), "object"),
        ("protocol as a string", with("protocol", json!("2")), "protocol 2 only"),
        ("protocol 1", with("protocol", json!(1)), "protocol 2 only"),
        ("protocol 2.5", with("protocol", json!(2.5)), "protocol 2 only"),
        ("protocol missing", without("protocol"), "protocol 2 only"),
        // A protocol-1 body's key field (no real key: made up at run time).
        (
            "a private key",
            with("service_key_pem", json!(format!("-----BEGIN {} KEY-----", "PRIVATE"))),
            "protocol 2 only",
        ),
        ("name missing", without("name"), "name"),
        ("name empty", with("name", json!("")), "name"),
        ("name a number", with("name", json!(7)), "name"),
        ("name too long", with("name", json!("a".repeat(254))), "name"),
        ("name with a slash", with("name", json!("../etc")), "name"),
        ("name with a space", with("name", json!("edge 2")), "name"),
        ("address missing", without("address"), "address"),
        ("address without port", with("address", json!("10.0.2.15")), "address"),
        ("address port 0", with("address", json!("10.0.2.15:0")), "address"),
        ("address port 65536", with("address", json!("10.0.2.15:65536")), "address"),
        ("address unbracketed IPv6", with("address", json!("fe80::1:9505")), "address"),
        ("address bad host", with("address", json!("a b:9505")), "address"),
        ("secret missing", without("poll_secret"), "poll_secret"),
        ("secret short", with("poll_secret", json!("a".repeat(31))), "poll_secret"),
        ("secret long", with("poll_secret", json!("a".repeat(513))), "poll_secret"),
        ("secret not ASCII", with("poll_secret", json!("é".repeat(40))), "poll_secret"),
        ("secret with a space", with("poll_secret", json!(format!("{} x", "a".repeat(40)))), "poll_secret"),
        ("token too long", with("registration_token", json!("t".repeat(513))), "registration_token"),
        ("token not printable", with("registration_token", json!("t1\n")), "registration_token"),
        ("token a number", with("registration_token", json!(1)), "registration_token"),
        ("CA missing", without("ca_cert_pem"), "ca_cert_pem"),
        ("CA not PEM", with("ca_cert_pem", json!("hello")), "ca_cert_pem"),
        (
            "CA garbage PEM",
            with("ca_cert_pem", json!("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")),
            "ca_cert_pem",
        ),
        ("CA a leaf", with("ca_cert_pem", json!(leaf)), "ca_cert_pem"),
    ]
}

//! The seed's answer tables, over real TLS, against a server in this process.

use crate::common::*;
use base64::Engine;
use janus_core::pki;
use janus_registration::certs;

#[tokio::test]
async fn a_known_token_admits_at_once_and_only_once() {
    let fx = Fixture::new();
    fx.write_tokens("other-1\nthe-token\nother-2\n");
    let server = InProcess::start(fx.config()).await;
    let client = node_client(&fx, server.addr);
    let ca = certs::mint_node_ca("edge-2").unwrap();
    let secret = new_secret();

    let answer = post(&client, &announcement("edge-2", &ca, "the-token", &secret)).await;
    assert_eq!(answer.status, 201, "{}", answer.text());
    let body = json(&answer);
    let id = body["id"].as_str().unwrap().to_string();
    assert_eq!(id.len(), 32);
    assert!(id.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
    assert_eq!(body["admitted"], true);
    assert_eq!(body["trust"]["root_cert"], fx.fleet.root.cert_pem.as_str());
    let bundle =
        base64::engine::general_purpose::STANDARD.decode(body["trust"]["bundle"].as_str().unwrap()).unwrap();
    assert_eq!(bundle, fx.fleet.bundle_json);

    fx.expect_tokens("other-1\nother-2\n");
    assert!(fx.state().join("approved").join(&id).exists());
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fx.state().join("nodes").join(format!("{id}.json"))).unwrap())
            .unwrap();
    assert_eq!(record["id"], id.as_str());
    assert_eq!(record["name"], "edge-2");
    assert_eq!(record["address"], "10.0.2.15:9505");
    assert_eq!(record["ca_cert_pem"], ca.cert_pem.as_str());
    assert_eq!(record["admitted"], true);
    assert_eq!(record["admitted_by"], "token");
    assert_eq!(record["poll_secret_sha256"], pki::sha256_hex(secret.as_bytes()));
    let console = certs::console_line(&ca.cert_pem).unwrap();
    assert!(console.ends_with(record["ca_sha256"].as_str().unwrap()));
    assert!(record["peer_address"].as_str().unwrap().starts_with("127.0.0.1:"));
    assert!(record["announced_at"].as_str().unwrap().ends_with('Z'));

    // The same token from another node: spent, so that node waits.
    let stranger = certs::mint_node_ca("edge-9").unwrap();
    let again = post(&client, &announcement("edge-9", &stranger, "the-token", &new_secret())).await;
    assert_eq!(again.status, 201);
    assert_eq!(json(&again)["admitted"], false);
    assert!(json(&again).get("trust").is_none());
    assert_ne!(json(&again)["id"], id.as_str());

    // The same node again (janusd re-announces, new secret, same token, when
    // it lost the answer or failed to apply the trust): its first id,
    // admitted, with the trust; its record is not changed by it.
    let record_before = records(&fx.state()).into_iter().find(|r| r["id"] == id.as_str()).unwrap();
    let again = post(&client, &announcement("edge-2", &ca, "the-token", &new_secret())).await;
    assert_eq!(json(&again)["admitted"], true);
    assert_eq!(json(&again)["id"], id.as_str());
    assert!(json(&again)["trust"]["bundle"].is_string());
    let record_after = records(&fx.state()).into_iter().find(|r| r["id"] == id.as_str()).unwrap();
    assert_eq!(record_after, record_before, "name, address, peer address and secret stay");
    assert!(audit_trail(&fx.state()).contains("\"event\":\"readmitted\""));

    // The node polls with the secret it was admitted with: the trust.
    let poll = get(&client, &format!("/register/{id}"), Some(&secret)).await;
    assert_eq!(poll.status, 200);
    server.stop().await;
}

#[tokio::test]
async fn an_unknown_token_waits_for_the_approval_file() {
    let fx = Fixture::new();
    fx.write_tokens("some-token\n");
    let server = InProcess::start(fx.config()).await;
    let client = node_client(&fx, server.addr);
    let ca = certs::mint_node_ca("edge-3").unwrap();
    let secret = new_secret();

    let answer = post(&client, &announcement("edge-3", &ca, "not-a-token", &secret)).await;
    assert_eq!(answer.status, 201);
    let body = json(&answer);
    assert_eq!(body["admitted"], false);
    let id = body["id"].as_str().unwrap().to_string();
    fx.expect_tokens("some-token\n");
    let record = records(&fx.state());
    assert_eq!(record[0]["admitted"], false);
    assert!(record[0].get("admitted_by").is_none());

    let path = format!("/register/{id}");
    let pending = get(&client, &path, Some(&secret)).await;
    assert_eq!(pending.status, 202);
    assert!(pending.body.is_empty());

    std::fs::write(fx.state().join("approved").join(&id), b"").unwrap();
    let admitted = get(&client, &path, Some(&secret)).await;
    assert_eq!(admitted.status, 200);
    let trust = json(&admitted);
    assert_eq!(trust["root_cert"], fx.fleet.root.cert_pem.as_str());
    let bundle = base64::engine::general_purpose::STANDARD.decode(trust["bundle"].as_str().unwrap()).unwrap();
    assert_eq!(bundle, fx.fleet.bundle_json);
    assert!(admitted.body.len() < 64 * 1024);
    assert_eq!(get(&client, &path, Some(&secret)).await.status, 200, "stays 200");
    server.stop().await;
}

#[tokio::test]
async fn polls_without_the_right_secret_or_id_are_404() {
    let fx = Fixture::new();
    let server = InProcess::start(fx.config()).await;
    let client = node_client(&fx, server.addr);
    let ca = certs::mint_node_ca("edge-4").unwrap();
    let secret = new_secret();
    let id = json(&post(&client, &announcement("edge-4", &ca, "", &secret)).await)["id"]
        .as_str()
        .unwrap()
        .to_string();
    std::fs::write(fx.state().join("approved").join(&id), b"").unwrap();
    let path = format!("/register/{id}");

    assert_eq!(get(&client, &path, None).await.status, 404, "no secret");
    assert_eq!(get(&client, &path, Some(&new_secret())).await.status, 404, "wrong secret");
    let basic = janus_agent::http::Request {
        method: "GET",
        path: &path,
        headers: vec![("Authorization", format!("Basic {secret}"))],
        body: None,
    };
    assert_eq!(client.send(&basic).await.unwrap().0.status, 404, "not Bearer");
    let unknown = "0123456789abcdef0123456789abcdef";
    assert_eq!(get(&client, &format!("/register/{unknown}"), Some(&secret)).await.status, 404);
    for malformed in ["ABCDEF", "..%2F..%2Fetc%2Fpasswd", &id.to_uppercase(), &format!("{id}0")] {
        let answer = get(&client, &format!("/register/{malformed}"), Some(&secret)).await;
        assert_eq!(answer.status, 404, "{malformed}");
    }
    assert_eq!(get(&client, &path, Some(&secret)).await.status, 200);
    server.stop().await;
}

#[tokio::test]
async fn other_paths_and_methods_are_never_409_nor_redirects() {
    let fx = Fixture::new();
    let server = InProcess::start(fx.config()).await;
    let client = node_client(&fx, server.addr);
    // 405 where the path is routed for another method, 404 where it is not.
    for (method, path, expected) in [
        ("GET", "/", 404),
        ("GET", "/register", 405),
        ("PUT", "/register", 405),
        ("DELETE", "/register/0123456789abcdef0123456789abcdef", 405),
        ("POST", "/register/", 404),
        ("POST", "/register/0123456789abcdef0123456789abcdef", 405),
        ("GET", "/nodes", 404),
    ] {
        let request = janus_agent::http::Request { method, path, headers: vec![], body: Some(b"{}") };
        let answer = client.send(&request).await.unwrap().0;
        assert_eq!(answer.status, expected, "{method} {path}: {}", answer.text());
        assert!(json(&answer)["error"].is_string(), "{method} {path}: a JSON error: {}", answer.text());
    }
    server.stop().await;
}

#[tokio::test]
async fn answers_close_the_connection() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let fx = Fixture::new();
    let server = InProcess::start(fx.config()).await;
    let mut roots = rustls::RootCertStore::empty();
    roots.add(pki::first_certificate(fx.fleet.root.cert_pem.as_bytes(), "root").unwrap()).unwrap();
    let config = rustls::ClientConfig::builder_with_provider(janus_core::tls::provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("controller.fleet.janus").unwrap();
    let mut tls =
        tokio_rustls::TlsConnector::from(std::sync::Arc::new(config)).connect(name, tcp).await.unwrap();
    tls.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
    let mut all = Vec::new();
    // The server closes after one answer: read_to_end returns instead of hanging.
    let read = tokio::time::timeout(std::time::Duration::from_secs(10), tls.read_to_end(&mut all)).await;
    assert!(read.is_ok(), "the connection stayed open");
    let text = String::from_utf8_lossy(&all).to_lowercase();
    assert!(text.starts_with("http/1.1 200"), "{text}");
    assert!(text.contains("connection: close"), "{text}");
    assert!(text.contains("content-length:"), "{text}");
    assert!(text.contains("content-type: application/json"), "{text}");
    server.stop().await;
}

#[tokio::test]
async fn any_sni_or_none_gets_a_certificate_over_tls_1_2_and_1_3() {
    let fx = Fixture::new();
    let server = InProcess::start(fx.config()).await;
    let provider = janus_core::tls::provider();
    for version in [&rustls::version::TLS12, &rustls::version::TLS13] {
        for sni in ["controller.fleet.janus", "unknown.example", "127.0.0.1"] {
            let config = rustls::ClientConfig::builder_with_provider(provider.clone())
                .with_protocol_versions(&[version])
                .unwrap()
                .dangerous()
                .with_custom_certificate_verifier(janus_core::tls::accept_any_certificate())
                .with_no_client_auth();
            let tcp = tokio::net::TcpStream::connect(server.addr).await.unwrap();
            let name = rustls::pki_types::ServerName::try_from(sni).unwrap();
            let tls = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config)).connect(name, tcp).await;
            let tls = tls.unwrap_or_else(|e| panic!("{version:?} {sni}: {e}"));
            assert_eq!(tls.get_ref().1.protocol_version(), Some(version.version));
        }
    }
    // In certificate mode a node checks the address's host: no fleet name needed.
    let root = fx.fleet.root.cert_pem.as_bytes();
    let by_name =
        janus_agent::http::Endpoint::new(&format!("localhost:{}", server.addr.port()), b"", root).unwrap();
    assert_eq!(get(&by_name, "/healthz", None).await.status, 200);
    server.stop().await;
}

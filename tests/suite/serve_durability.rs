//! Exactly-once tokens under concurrency (threads and processes), state that
//! survives restarts and kill -9, secrets that never reach disk or logs, and
//! clients that cannot hold connections open.

use std::collections::HashSet;
use std::time::Duration;

use crate::common::*;
use janus_registration::certs;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_token_presented_32_times_at_once_admits_one_node() {
    let fx = Fixture::new();
    fx.write_tokens("before\nshared\nafter\n");
    let server = InProcess::start(fx.config()).await;
    let client = node_client(&fx, server.addr);
    let tasks: Vec<_> = (0..32)
        .map(|i| {
            let client = client.clone();
            // 32 different nodes: the same CA again would be the same node.
            let ca = certs::mint_node_ca(&format!("edge-{i}")).unwrap();
            let body = announcement("edge", &ca, "shared", &new_secret());
            tokio::spawn(async move { post(&client, &body).await })
        })
        .collect();
    let mut admitted = 0;
    for task in tasks {
        let answer = task.await.unwrap();
        assert_eq!(answer.status, 201, "{}", answer.text());
        if json(&answer)["admitted"] == true {
            admitted += 1;
        }
    }
    assert_eq!(admitted, 1);
    fx.expect_tokens("before\nafter\n");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_server_processes_share_the_tokens_exactly_once() {
    let fx = Fixture::new();
    let tokens: Vec<String> = (0..40).map(|i| format!("race-{i}")).collect();
    fx.write_tokens(&format!("keep-1\n{}\nkeep-2\n", tokens.join("\n")));
    let a = Process::start(&fx.serve_args());
    let b = Process::start(&fx.serve_args());
    let ca = certs::mint_node_ca("edge").unwrap();
    let mut tasks = Vec::new();
    for token in &tokens {
        for addr in [a.addr, b.addr] {
            let client = node_client(&fx, addr);
            let body = announcement("edge", &ca, token, &new_secret());
            tasks.push(tokio::spawn(async move { post(&client, &body).await }));
        }
    }
    let mut admitted_ids = HashSet::new();
    for task in tasks {
        let answer = task.await.unwrap();
        assert_eq!(answer.status, 201, "{}", answer.text());
        let body = json(&answer);
        if body["admitted"] == true {
            admitted_ids.insert(body["id"].as_str().unwrap().to_string());
        }
    }
    assert_eq!(admitted_ids.len(), tokens.len(), "each token admits exactly one node");
    fx.expect_tokens("keep-1\nkeep-2\n");
    let admitted_records = records(&fx.state()).iter().filter(|r| r["admitted"] == true).count();
    assert_eq!(admitted_records, tokens.len());
}

#[tokio::test]
async fn the_state_survives_a_restart() {
    let fx = Fixture::new();
    let ca = certs::mint_node_ca("edge").unwrap();
    let mut first = Process::start(&fx.serve_args());
    let client = node_client(&fx, first.addr);
    let (id, secret, _) = announce(&client, "edge", &ca, "").await;
    first.kill();

    let second = Process::start(&fx.serve_args());
    let client = node_client(&fx, second.addr);
    let path = format!("/register/{id}");
    assert_eq!(get(&client, &path, Some(&secret)).await.status, 202);
    std::fs::write(fx.state().join("approved").join(&id), b"").unwrap();
    assert_eq!(get(&client, &path, Some(&secret)).await.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kill_9_mid_burst_leaves_only_whole_records_and_loses_no_answered_one() {
    let fx = Fixture::new();
    let mut server = Process::start(&fx.serve_args());
    let ca = certs::mint_node_ca("edge").unwrap();
    let client = node_client(&fx, server.addr);
    let answered_so_far = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let tasks: Vec<_> = (0..300)
        .map(|_| {
            let client = client.clone();
            let body = announcement("edge", &ca, "", &new_secret());
            let answered = answered_so_far.clone();
            tokio::spawn(async move {
                let answer = try_post(&client, &body).await;
                if answer.as_ref().is_some_and(|a| a.status == 201) {
                    answered.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                }
                answer
            })
        })
        .collect();
    // Mid-burst: some answers are out, most are not.
    assert!(
        wait_for(Duration::from_secs(30), || answered_so_far.load(std::sync::atomic::Ordering::SeqCst) >= 20)
    );
    server.kill();
    let mut answered = Vec::new();
    for task in tasks {
        if let Some(answer) = task.await.unwrap()
            && answer.status == 201
        {
            answered.push(json(&answer)["id"].as_str().unwrap().to_string());
        }
    }
    let on_disk: HashSet<String> =
        records(&fx.state()).iter().map(|r| r["id"].as_str().unwrap().to_string()).collect();
    assert!(!answered.is_empty());
    for id in &answered {
        assert!(on_disk.contains(id), "{id} was answered 201 but is not on disk");
    }
}

#[tokio::test]
async fn secrets_and_tokens_appear_in_no_log_and_secrets_in_no_file() {
    let fx = Fixture::new();
    let token = "tok-9f8e7d6c5b4a39281706f5e4d3c2b1a0";
    fx.write_tokens(&format!("{token}\n"));
    let server = Process::start(&fx.serve_args());
    let client = node_client(&fx, server.addr);
    let ca = certs::mint_node_ca("edge").unwrap();
    let (secret_a, secret_b) = (new_secret(), new_secret());
    let admitted = json(&post(&client, &announcement("edge-a", &ca, token, &secret_a)).await);
    let pending = json(&post(&client, &announcement("edge-b", &ca, "unknown-token-1234", &secret_b)).await);
    for (answer, secret) in [(&admitted, &secret_a), (&pending, &secret_b)] {
        let path = format!("/register/{}", answer["id"].as_str().unwrap());
        get(&client, &path, Some(secret)).await;
        get(&client, &path, Some("wrong-secret-wrong-secret-wrong-secret")).await;
    }
    assert!(wait_for(Duration::from_secs(10), || server.log().matches("request").count() >= 6));
    let log = server.log();
    for secret in [&secret_a, &secret_b] {
        assert!(!log.contains(secret.as_str()), "a poll secret reached the log");
        for file in files_below(&fx.state()) {
            let bytes = std::fs::read(&file).unwrap();
            assert!(!String::from_utf8_lossy(&bytes).contains(secret.as_str()), "{}", file.display());
        }
    }
    assert!(!log.contains(token) && !log.contains("unknown-token-1234"), "a token reached the log");
    assert!(!log.contains("wrong-secret"), "a presented secret reached the log");
}

#[tokio::test]
async fn a_client_that_sends_nothing_is_cut_off() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let fx = Fixture::new();
    let mut config = fx.config();
    // Short, so that the test does not wait out the defaults (10 s, 5 s, 10 s).
    config.handshake_timeout = Duration::from_millis(500);
    config.head_timeout = Duration::from_millis(500);
    config.body_timeout = Duration::from_millis(500);
    let server = InProcess::start(config).await;
    // Before the handshake.
    let mut silent = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let mut buf = [0u8; 64];
    let closed = tokio::time::timeout(Duration::from_secs(30), silent.read(&mut buf)).await;
    assert!(matches!(closed, Ok(Ok(0)) | Ok(Err(_))), "not closed: {closed:?}");

    // After the handshake, with no request.
    let config = std::sync::Arc::new(janus_core::tls::insecure_client_config());
    let tcp = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("controller.fleet.janus").unwrap();
    let mut tls = tokio_rustls::TlsConnector::from(config.clone()).connect(name.clone(), tcp).await.unwrap();
    let closed = tokio::time::timeout(Duration::from_secs(30), tls.read(&mut buf)).await;
    assert!(matches!(closed, Ok(Ok(0)) | Ok(Err(_))), "not closed: {closed:?}");

    // A head, then less body than it announced: 408, a JSON error.
    let tcp = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let mut tls = tokio_rustls::TlsConnector::from(config).connect(name, tcp).await.unwrap();
    let head = "POST /register HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"protocol\"";
    tls.write_all(head.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(30), tls.read_to_end(&mut answer)).await;
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("\"error\""), "{answer}");
    server.stop().await;
}

#[tokio::test]
async fn connections_beyond_the_cap_are_refused_and_the_slot_comes_back() {
    use tokio::io::AsyncReadExt;
    let fx = Fixture::new();
    let config = janus_endpoint::ServeConfig { max_connections: 2, ..fx.config() };
    let server = InProcess::start(config).await;
    let _held: Vec<_> = futures_connect(server.addr, 2).await;
    // The third is closed at once, without a handshake.
    let mut third = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let mut buf = [0u8; 8];
    let closed = tokio::time::timeout(Duration::from_secs(5), third.read(&mut buf)).await;
    assert!(matches!(closed, Ok(Ok(0)) | Ok(Err(_))), "not refused: {closed:?}");
    drop(_held);
    let client = node_client(&fx, server.addr);
    let mut ok = false;
    for _ in 0..100 {
        let request = janus_agent::http::Request { method: "GET", path: "/healthz", ..Default::default() };
        if let Ok((answer, _)) = client.send(&request).await
            && answer.status == 200
        {
            ok = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(ok, "a freed slot serves again");
    server.stop().await;
}

/// `n` connections that finished their handshake, so each holds its slot.
async fn futures_connect(
    addr: std::net::SocketAddr,
    n: usize,
) -> Vec<tokio_rustls::client::TlsStream<tokio::net::TcpStream>> {
    let config = std::sync::Arc::new(janus_core::tls::insecure_client_config());
    let mut out = Vec::new();
    for _ in 0..n {
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let name = rustls::pki_types::ServerName::try_from("controller.fleet.janus").unwrap();
        out.push(tokio_rustls::TlsConnector::from(config.clone()).connect(name, tcp).await.unwrap());
    }
    out
}

//! Deployment: the Dockerfile cannot rot, health and metrics answer, JSON
//! logs carry node ids and no secrets, and several replicas share one state
//! directory safely, one of them killed mid-load.

use std::collections::HashSet;
use std::process::Command;
use std::time::Duration;

use crate::common::*;
use janus_registration::certs;

fn dockerfile() -> String {
    std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("Dockerfile")).unwrap()
}

/// The JSON array after `keyword` on its (continued) line.
fn exec_form(text: &str, keyword: &str) -> Vec<String> {
    let joined = text.replace("\\\n", " ");
    let line = joined
        .lines()
        .find(|l| l.trim_start().starts_with(keyword))
        .unwrap_or_else(|| panic!("no {keyword}"));
    let array = &line[line.find('[').unwrap()..=line.rfind(']').unwrap()];
    serde_json::from_str(array).unwrap()
}

fn env_of(text: &str) -> Vec<(String, String)> {
    let joined = text.replace("\\\n", " ");
    joined
        .lines()
        .filter(|l| l.trim_start().starts_with("ENV "))
        .flat_map(|l| l.trim_start()[4..].split_whitespace().map(str::to_string).collect::<Vec<_>>())
        .filter_map(|kv| kv.split_once('=').map(|(k, v)| (k.to_string(), v.to_string())))
        .collect()
}

#[test]
fn the_dockerfile_matches_the_binary_and_the_documented_paths() {
    let text = dockerfile();
    let entrypoint = exec_form(&text, "ENTRYPOINT");
    let cmd = exec_form(&text, "CMD");
    let healthcheck = exec_form(&text, "HEALTHCHECK");
    assert_eq!(entrypoint, ["/usr/local/bin/janus-registration"]);
    assert_eq!(healthcheck[0], "/usr/local/bin/janus-registration");
    let env = env_of(&text);
    let get = |k: &str| env.iter().find(|(key, _)| key == k).map(|(_, v)| v.clone()).unwrap_or_default();
    assert_eq!(get("JANUS_REGISTRATION_STATE"), "/var/lib/janus-registration");
    assert!(text.contains("VOLUME [\"/var/lib/janus-registration\"]"));
    assert!(text.contains("EXPOSE 8443") && get("JANUS_REGISTRATION_LISTEN").ends_with(":8443"));
    assert!(text.contains("STOPSIGNAL SIGTERM") && text.contains("USER 65532"));
    assert!(
        text.contains("cargo build --profile dist --locked")
            && text.contains("target/dist/janus-registration")
    );
    let readme =
        std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    for (key, value) in &env {
        assert!(readme.contains(value.as_str()), "README documents {key}={value}");
    }

    // The image's command, with the image's environment, is a valid `serve`:
    // it gets past argument parsing to the startup checks (no fleet here).
    let (code, _, stderr) = cli_exit(Command::new(BIN).args(&cmd).envs(env.iter().map(|(k, v)| (k, v))));
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("/etc/janus-registration/fleet"), "{stderr}");
    // The health check too: parsed, then no server to ask.
    let (code, _, stderr) = cli_exit(Command::new(BIN).args(&healthcheck[1..]));
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("does not answer"), "{stderr}");
}

#[test]
fn the_container_check_says_plainly_when_it_skips() {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/container-check.sh");
    let docker_works = Command::new("docker").arg("info").output().is_ok_and(|o| o.status.success());
    if docker_works {
        eprintln!("SKIPPED here: a Docker engine is present; run scripts/container-check.sh by hand");
        return;
    }
    let output = Command::new("bash").arg(script).output().unwrap();
    assert!(output.status.success());
    assert!(String::from_utf8_lossy(&output.stdout).contains("SKIPPED: no Docker engine"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_metrics_and_json_logs() {
    let fx = Fixture::new();
    let metrics_port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut args = fx.serve_args();
    args.extend(["--log-format", "json", "--metrics-listen"].map(String::from));
    args.push(format!("127.0.0.1:{metrics_port}"));
    let server = Process::start(&args);
    let (ok, stdout, stderr) = cli(&["healthcheck", "--addr", &server.addr.to_string()]);
    assert!(ok && stdout.contains("ok"), "{stdout} {stderr}");

    let client = node_client(&fx, server.addr);
    let ca = certs::mint_node_ca("edge").unwrap();
    let (id, secret, _) = announce(&client, "edge", &ca, "").await;
    assert_eq!(get(&client, &format!("/register/{id}"), Some(&secret)).await.status, 202);
    assert_eq!(post(&client, b"[]").await.status, 400);

    let scrape = || {
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", metrics_port)).unwrap();
        use std::io::{Read, Write};
        stream.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
        let mut text = String::new();
        stream.read_to_string(&mut text).unwrap();
        text
    };
    let text = scrape();
    for expected in [
        "janus_registration_requests_total{route=\"/register\",status=\"201\"} 1",
        "janus_registration_announcements_total{outcome=\"pending\"} 1",
        "janus_registration_announcements_total{outcome=\"refused_bad_request\"} 1",
        "janus_registration_polls_total{outcome=\"pending\"} 1",
        "janus_registration_bundle_version 1",
        "janus_registration_request_duration_seconds_bucket",
        "janus_registration_certificate_not_after_seconds",
        "janus_registration_pending_records 1",
    ] {
        assert!(text.contains(expected), "{expected} missing from:\n{text}");
    }
    // A client that never finishes a handshake is counted.
    drop(std::net::TcpStream::connect(server.addr).unwrap());
    assert!(wait_for(Duration::from_secs(20), || scrape()
        .contains("janus_registration_connection_failures_total{outcome=\"tls\"}")));

    assert!(wait_for(Duration::from_secs(10), || server.log().contains(&format!("/register/{id}"))));
    let log = server.log();
    for line in log.lines() {
        let parsed: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|_| panic!("not JSON: {line}"));
        assert!(parsed["fields"].is_object(), "{line}");
    }
    assert!(log.lines().any(|l| l.contains("\"node\":\"") && l.contains(&id)), "node lines carry the id");
    assert!(!log.contains(&secret));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_replicas_on_one_state_directory_survive_a_kill_9() {
    let fx = Fixture::new();
    let tokens: Vec<String> = (0..30).map(|i| format!("replica-token-{i}")).collect();
    fx.write_tokens(&tokens.join("\n"));
    let mut replicas: Vec<Process> = (0..3).map(|_| Process::start(&fx.serve_args())).collect();
    let addrs: Vec<_> = replicas.iter().map(|r| r.addr).collect();
    let ca = certs::mint_node_ca("edge").unwrap();

    // 90 announcements, tokens and tokenless, spread over the replicas;
    // one replica dies part way through, as a load balancer would see it.
    let mut tasks = Vec::new();
    for i in 0..90 {
        let token = if i % 3 == 0 { tokens[i / 3].clone() } else { String::new() };
        let fx_root = fx.fleet.root.cert_pem.clone();
        let addrs = addrs.clone();
        let ca = ca.clone();
        tasks.push(tokio::spawn(async move {
            // Another replica when one does not answer: a load balancer's retry.
            for attempt in 0..addrs.len() {
                let addr = addrs[(i + attempt) % addrs.len()];
                let client = janus_registration::agent::http::Endpoint::new(
                    &addr.to_string(),
                    fx_root.as_bytes(),
                    b"",
                )
                .unwrap();
                let secret = new_secret();
                let body = announcement("edge", &ca, &token, &secret);
                let request = janus_registration::agent::http::Request {
                    method: "POST",
                    path: "/register",
                    headers: vec![("Content-Type", "application/json".into())],
                    body: Some(&body),
                };
                if let Ok((answer, _)) = client.send(&request).await
                    && answer.status == 201
                {
                    let body = json(&answer);
                    return Some((
                        body["id"].as_str().unwrap().to_string(),
                        secret,
                        body["admitted"] == true,
                        token,
                    ));
                }
            }
            None
        }));
        if i == 45 {
            replicas[0].kill();
        }
    }
    let mut answered = Vec::new();
    for task in tasks {
        answered.push(task.await.unwrap().expect("some replica answered"));
    }
    let admitted_tokens: Vec<&String> = answered.iter().filter(|a| a.2).map(|a| &a.3).collect();
    let unique: HashSet<&&String> = admitted_tokens.iter().collect();
    assert_eq!(admitted_tokens.len(), unique.len(), "no token admitted two nodes");
    assert!(admitted_tokens.iter().all(|t| !t.is_empty()));
    let left = fx.tokens();
    for t in &tokens {
        let used = admitted_tokens.contains(&t);
        assert_ne!(used, left.split_whitespace().any(|x| x == t), "{t} is either used or still in the file");
    }

    // Every record whole; every answered id on disk.
    let on_disk: HashSet<String> =
        records(&fx.state()).iter().map(|r| r["id"].as_str().unwrap().to_string()).collect();
    for (id, ..) in &answered {
        assert!(on_disk.contains(id), "{id} answered but not on disk");
    }

    // Approve the pending ones with the admin command; any live replica hands out the trust.
    let pending: Vec<_> = answered.iter().filter(|a| !a.2).collect();
    for (id, ..) in pending.iter().take(10) {
        let (ok, _, stderr) = admin(&fx.state(), &["nodes", "approve", id, "--unchecked"]);
        assert!(ok, "{stderr}");
    }
    for (n, (id, secret, admitted, _)) in answered.iter().enumerate() {
        let approved = *admitted || pending.iter().take(10).any(|p| &p.0 == id);
        let client = node_client(&fx, addrs[1 + n % 2]);
        let status = get(&client, &format!("/register/{id}"), Some(secret)).await.status;
        assert_eq!(status, if approved { 200 } else { 202 }, "{id}");
    }
}

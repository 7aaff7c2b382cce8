//! The agent against a real endpoint over real TLS: every answer handled as
//! janusd handles it, and the trust applied (or refused) as janusd does.

use secrecy::ExposeSecret;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use crate::common::*;
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use janus_agent::{Agent, Step};
use janus_core::pki;
use janus_registration::certs;
use rcgen::SigningKey;

async fn run_until_admitted(agent: &Agent) -> Step {
    tokio::time::timeout(Duration::from_secs(30), agent.run()).await.expect("admitted in time").unwrap()
}

#[tokio::test]
async fn a_token_admits_at_once_and_both_token_files_are_emptied() {
    let fx = Fixture::new();
    fx.write_tokens("the-token\nother\n");
    let server = InProcess::start(fx.config()).await;
    let node = fx.dir.path().join("node");
    let root = &fx.fleet.root.cert_pem;
    provision_node(&node, server.addr, root, root, "the-token");
    let (config, lines) = agent_config(&node);
    let agent = Agent::new(config.clone()).unwrap();
    assert_eq!(run_until_admitted(&agent).await, Step::Admitted);

    fx.expect_tokens("other\n");
    assert!(!node.join("token").exists(), "the node drops its token");
    assert!(node.join("registered").exists());
    assert!(!node.join("enrollment.json").exists());
    assert_eq!(std::fs::read_to_string(node.join("fleet/root.crt")).unwrap(), *root);
    let stored = std::fs::read(node.join("fleet/bundle.json")).unwrap();
    assert!(stored.starts_with(b"{\"payload\":\"") && !stored.contains(&b'\n'), "canonical, compact");
    let root_der = pki::first_certificate(root.as_bytes(), "root").unwrap();
    assert_eq!(pki::verify_bundle(&root_der, &stored).unwrap().version, 1);

    let record = &records(&fx.state())[0];
    let ca_line = format!("pki: this node's CA: SHA-256 {}", record["ca_sha256"].as_str().unwrap());
    assert!(said(&lines, &ca_line), "the console shows the CA the endpoint recorded");
    assert!(said(
        &lines,
        &format!("selfregister: the Controller at {} checked through its fleet's root", server.addr)
    ));
    assert!(said(
        &lines,
        &format!("selfregister: admitted by Controller at {} - the node trusts its fleet", server.addr)
    ));
    assert_eq!(record["name"], "edge-test");
    assert_eq!(record["address"], "127.0.0.1:9505");

    // A restart after admission announces nothing.
    let again = Agent::new(config).unwrap();
    assert_eq!(again.step().await, Step::Idle);
    assert_eq!(records(&fx.state()).len(), 1);
    server.stop().await;
}

#[tokio::test]
async fn an_unknown_token_waits_resumes_after_a_restart_and_an_approval_file_admits() {
    let fx = Fixture::new();
    fx.write_tokens("known\n");
    let server = InProcess::start(fx.config()).await;
    let node = fx.dir.path().join("node");
    let root = &fx.fleet.root.cert_pem;
    provision_node(&node, server.addr, root, root, "not-a-token");
    let (config, lines) = agent_config(&node);
    let agent = Agent::new(config.clone()).unwrap();
    assert_eq!(agent.step().await, Step::Pending);
    let enrollment = node.join("enrollment.json");
    assert_eq!(std::fs::metadata(&enrollment).unwrap().permissions().mode() & 0o777, 0o600);
    assert!(!node.join("token").exists(), "the token is dropped once the enrollment is saved");
    let record = &records(&fx.state())[0];
    let hash = record["ca_sha256"].as_str().unwrap();
    assert!(said(&lines, &format!("awaiting approval - check it shows this node's CA as SHA-256 {hash}")));
    fx.expect_tokens("known\n");

    // A restarted agent polls with the saved enrollment: no second announcement.
    let restarted = Agent::new(config).unwrap();
    assert_eq!(restarted.step().await, Step::Pending);
    assert_eq!(records(&fx.state()).len(), 1);

    let id = record["id"].as_str().unwrap();
    std::fs::write(fx.state().join("approved").join(id), b"").unwrap();
    assert_eq!(run_until_admitted(&restarted).await, Step::Admitted);
    assert!(node.join("registered").exists() && !enrollment.exists());
    assert_eq!(records(&fx.state()).len(), 1);
    server.stop().await;
}

#[tokio::test]
async fn a_certificate_from_another_fleet_falls_back_to_ca_crt_only_on_verification_errors() {
    let fx = Fixture::new();
    let other = certs::mint_fleet("Other", 1).unwrap();
    let foreign = certs::mint_controller(&other.issuing, 30, &["127.0.0.1".to_string()]).unwrap();
    certs::write_pair(&fx.dir.path().join("controller"), &foreign, true).unwrap();
    fx.write_tokens("tok\n");
    let server = InProcess::start(fx.config()).await;

    // ca.crt checks the certificate for 127.0.0.1: the node falls back and is admitted.
    let node = fx.dir.path().join("node");
    provision_node(&node, server.addr, &fx.fleet.root.cert_pem, &other.root.cert_pem, "tok");
    let (config, lines) = agent_config(&node);
    let agent = Agent::new(config).unwrap();
    assert_eq!(run_until_admitted(&agent).await, Step::Admitted);
    assert!(said(&lines, "checked with controller_ca_cert"));
    assert!(!said(&lines, "checked through its fleet's root"));

    // Without a ca.crt there is nothing to fall back to: an error, nothing written.
    let lone = fx.dir.path().join("lone");
    provision_node(&lone, server.addr, &fx.fleet.root.cert_pem, "", "");
    let (config, _) = agent_config(&lone);
    let step = Agent::new(config).unwrap().step().await;
    assert!(matches!(&step, Step::Failed(why) if why.contains("registration failed")), "{step:?}");
    assert!(!lone.join("enrollment.json").exists() && !lone.join("registered").exists());
    server.stop().await;
}

#[tokio::test]
async fn an_endpoint_handing_another_fleet_is_refused_and_nothing_is_written() {
    let ours = certs::mint_fleet("Ours", 1).unwrap();
    let fx = Fixture::new();
    fx.write_tokens("tok\n");
    let server = InProcess::start(fx.config()).await;
    let node = fx.dir.path().join("node");
    // Provisioned with our fleet; the endpoint (checked with ca.crt) serves its own.
    provision_node(&node, server.addr, &ours.root.cert_pem, &fx.fleet.root.cert_pem, "tok");
    let (config, _) = agent_config(&node);
    let step = Agent::new(config).unwrap().step().await;
    assert!(matches!(&step, Step::Failed(why) if why.contains("the trust of another fleet")), "{step:?}");
    assert!(!node.join("fleet").exists() && !node.join("registered").exists());
    assert!(node.join("token").exists(), "a refused admission keeps the token for the next attempt");
    server.stop().await;
}

fn signed_bundle(root_key_pem: &str, payload: &str, tamper: bool) -> String {
    let key = rcgen::KeyPair::from_pem(root_key_pem).unwrap();
    let mut signature = key.sign(payload.as_bytes()).unwrap();
    if tamper {
        let last = signature.len() - 3;
        signature[last] ^= 0x55;
    }
    let bundle =
        serde_json::json!({"payload": BASE64.encode(payload), "signature": BASE64.encode(signature)});
    BASE64.encode(bundle.to_string())
}

#[tokio::test]
async fn tampered_unversioned_or_foreign_bundles_are_refused() {
    let fx = Fixture::new();
    let fake = FakeEndpoint::start(&fx).await;
    let root = &fx.fleet.root.cert_pem;
    let issuing = &fx.fleet.issuing.cert_pem;
    let stranger = certs::mint_fleet("Stranger", 1).unwrap().issuing.cert_pem;
    let payload =
        |version: u64, ca: &str| serde_json::json!({"version": version, "issuing_cas": [ca]}).to_string();
    let cases = [
        (
            "tampered signature",
            signed_bundle(fx.fleet.root.key_pem.expose_secret(), &payload(2, issuing), true),
            "signature",
        ),
        (
            "version 0",
            signed_bundle(fx.fleet.root.key_pem.expose_secret(), &payload(0, issuing), false),
            "no version",
        ),
        (
            "foreign issuing CA",
            signed_bundle(fx.fleet.root.key_pem.expose_secret(), &payload(2, &stranger), false),
            "isn't a CA the fleet's root signed",
        ),
    ];
    for (what, bundle, expected) in cases {
        let node = fx.dir.path().join(what.replace(' ', "-"));
        provision_node(&node, fake.addr, root, root, "tok");
        let answer =
            serde_json::json!({"id": "n1", "admitted": true, "trust": {"root_cert": root, "bundle": bundle}});
        fake.answer_post(201, &answer.to_string());
        let (config, _) = agent_config(&node);
        let step = Agent::new(config).unwrap().step().await;
        assert!(matches!(&step, Step::Failed(why) if why.contains(expected)), "{what}: {step:?}");
        assert!(!node.join("fleet").exists() && !node.join("registered").exists(), "{what}");
    }
}

#[tokio::test]
async fn a_404_forgets_the_enrollment_and_announces_again_without_the_token() {
    let fx = Fixture::new();
    let fake = FakeEndpoint::start(&fx).await;
    let root = &fx.fleet.root.cert_pem;
    let node = fx.dir.path().join("node");
    provision_node(&node, fake.addr, root, root, "tok-1");
    fake.answer_post(201, r#"{"id":"0123456789abcdef0123456789abcdef","admitted":false}"#);
    fake.answer_get(404, "");
    let (config, lines) = agent_config(&node);
    let agent = Agent::new(config).unwrap();
    assert_eq!(agent.step().await, Step::Pending);
    assert_eq!(agent.step().await, Step::Unknown);
    assert!(!node.join("enrollment.json").exists());
    assert!(said(
        &lines,
        "doesn't know this node's enrollment any more (rejected, or lost) - announcing again in 100ms"
    ));
    assert_eq!(agent.step().await, Step::Pending);
    let posts = fake.posts.lock().unwrap().clone();
    assert_eq!(posts.len(), 2);
    let first: serde_json::Value = serde_json::from_str(&posts[0]).unwrap();
    let second: serde_json::Value = serde_json::from_str(&posts[1]).unwrap();
    assert_eq!(first["registration_token"], "tok-1");
    assert!(second.get("registration_token").is_none(), "{}", posts[1]);
    assert_ne!(first["poll_secret"], second["poll_secret"], "a new secret for each announcement");
}

#[tokio::test]
async fn the_announcement_is_janusds_byte_for_byte() {
    let fx = Fixture::new();
    let fake = FakeEndpoint::start(&fx).await;
    let root = &fx.fleet.root.cert_pem;
    let node = fx.dir.path().join("node");
    provision_node(&node, fake.addr, root, root, "tok");
    fake.answer_post(201, r#"{"id":"x","admitted":false}"#);
    let (config, _) = agent_config(&node);
    let agent = Agent::new(config).unwrap();
    agent.step().await;
    let body = fake.posts.lock().unwrap()[0].clone();
    let ca = std::fs::read_to_string(node.join("pki/ca.crt")).unwrap();
    let secret: serde_json::Value = serde_json::from_str(&body).unwrap();
    let secret = secret["poll_secret"].as_str().unwrap().to_string();
    assert!(secret.len() == 64 && secret.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
    let expected = format!(
        r#"{{"protocol":2,"name":"edge-test","address":"127.0.0.1:9505","ca_cert_pem":{},"registration_token":"tok","poll_secret":"{secret}"}}"#,
        serde_json::to_string(&ca).unwrap()
    );
    assert_eq!(body, expected);
    assert!(!body.contains("PRIVATE KEY") && !body.contains("service_"));
}

#[tokio::test]
async fn a_409_or_a_400_naming_service_cert_pem_is_a_protocol_violation_other_errors_back_off() {
    let fx = Fixture::new();
    let fake = FakeEndpoint::start(&fx).await;
    let root = &fx.fleet.root.cert_pem;
    let cases: [(u16, &str, bool); 5] = [
        (409, "fleet isn't set up yet", true),
        (
            400,
            r#"{"error":"name, address, ca_cert_pem, service_cert_pem, and service_key_pem are all required"}"#,
            true,
        ),
        (400, "decode request: junk", false),
        (500, "oops", false),
        (201, "not json", false),
    ];
    for (i, (status, body, violation)) in cases.into_iter().enumerate() {
        let node = fx.dir.path().join(format!("node-{i}"));
        provision_node(&node, fake.addr, root, root, "");
        fake.answer_post(status, body);
        let (config, _) = agent_config(&node);
        let agent = Agent::new(config).unwrap();
        let step = agent.step().await;
        if violation {
            assert!(matches!(step, Step::ProtocolViolation(_)), "{status} {body}: {step:?}");
            assert!(agent.run().await.is_err(), "--fail-on-fallback ends the agent");
        } else {
            assert!(matches!(step, Step::Failed(_)), "{status} {body}: {step:?}");
        }
    }
    for post in fake.posts.lock().unwrap().iter() {
        assert!(!post.contains("PRIVATE KEY") && !post.contains("service_key_pem"));
    }
}

#[tokio::test]
async fn the_agent_survives_the_server_restarting_mid_poll() {
    let fx = Fixture::new();
    let server = InProcess::start(fx.config()).await;
    let addr = server.addr;
    let node = fx.dir.path().join("node");
    let root = &fx.fleet.root.cert_pem;
    provision_node(&node, addr, root, root, "");
    let (config, lines) = agent_config(&node);
    let agent = Agent::new(config).unwrap();
    assert_eq!(agent.step().await, Step::Pending);
    server.stop().await;

    let running = tokio::spawn(async move { agent.run().await });
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !said(&lines, "ask the Controller about the enrollment") {
        assert!(tokio::time::Instant::now() < deadline, "the agent should fail and back off");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let restarted = InProcess::start_on(fx.config(), addr).await;
    let id = records(&fx.state())[0]["id"].as_str().unwrap().to_string();
    std::fs::write(fx.state().join("approved").join(id), b"").unwrap();
    let step = tokio::time::timeout(Duration::from_secs(30), running).await.unwrap().unwrap().unwrap();
    assert_eq!(step, Step::Admitted);
    restarted.stop().await;
}

/// Our agent against the reference endpoint, when python3 and the file are here.
#[tokio::test]
async fn the_agent_works_against_the_reference_endpoint() {
    let reference =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/reference/registration-server.py");
    let python =
        std::process::Command::new("python3").arg("--version").output().is_ok_and(|o| o.status.success());
    if !reference.exists() || !python {
        skipped(&format!("python3 or {} is missing", reference.display()));
        return;
    }
    let fx = Fixture::new();
    std::fs::create_dir_all(fx.state()).unwrap();
    fx.write_tokens("ref-token\n");
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let mut child = std::process::Command::new("python3")
        .arg(&reference)
        .args(["--listen", &addr.to_string(), "--fleet"])
        .arg(fx.fleet_dir())
        .arg("--cert")
        .arg(fx.cert())
        .arg("--key")
        .arg(fx.key())
        .arg("--state")
        .arg(fx.state())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    assert!(wait_for(Duration::from_secs(20), || std::net::TcpStream::connect(addr).is_ok()));
    let root = &fx.fleet.root.cert_pem;

    let admitted = fx.dir.path().join("admitted");
    provision_node(&admitted, addr, root, root, "ref-token");
    let (config, _) = agent_config(&admitted);
    let agent = Agent::new(config).unwrap();
    assert_eq!(run_until_admitted(&agent).await, Step::Admitted);
    fx.expect_tokens("");

    let waiting = fx.dir.path().join("waiting");
    provision_node(&waiting, addr, root, root, "");
    let (config, _) = agent_config(&waiting);
    let agent = Agent::new(config).unwrap();
    assert_eq!(agent.step().await, Step::Pending);
    let enrollment: serde_json::Value =
        serde_json::from_slice(&std::fs::read(waiting.join("enrollment.json")).unwrap()).unwrap();
    std::fs::write(fx.state().join("approved").join(enrollment["id"].as_str().unwrap()), b"").unwrap();
    assert_eq!(run_until_admitted(&agent).await, Step::Admitted);
    let _ = child.kill();
    let _ = child.wait();
}

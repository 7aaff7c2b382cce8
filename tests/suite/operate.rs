//! Day-2 operation: the admin commands on a live state directory, the audit
//! trail, token expiry and uses, the admission command, live reload and the
//! limits that keep the endpoint up.

use secrecy::ExposeSecret;
use std::process::Command;
use std::time::Duration;

use crate::common::*;
use base64::Engine;
use janus_endpoint::PolicyConfig;
use janus_registration::certs;

#[tokio::test]
async fn nodes_list_show_approve_reject_forget_and_history() {
    let fx = Fixture::new();
    let server = InProcess::start(fx.config()).await;
    let client = node_client(&fx, server.addr);
    let (ca_a, ca_b) = (certs::mint_node_ca("edge-a").unwrap(), certs::mint_node_ca("edge-b").unwrap());
    let (a1, s1, _) = announce(&client, "edge-a", &ca_a, "").await;
    let (a2, s2, _) = announce(&client, "edge-a", &ca_a, "").await;
    let (b1, sb, _) = announce(&client, "edge-b", &ca_b, "").await;
    let state = fx.state();

    let (ok, out, _) = admin(&state, &["nodes", "list"]);
    assert!(ok && out.contains("3 node(s)"), "{out}");
    // A filtered listing groups a node's re-announcements by their CA.
    let (ok, out, _) = admin(&state, &["nodes", "list", "--pending"]);
    assert!(ok && out.contains("(same CA: re-announced)") && out.contains("3 node(s)"), "{out}");
    let (_, out, _) = admin(&state, &["nodes", "list", "--json", "--pending"]);
    let lines: Vec<serde_json::Value> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 3);
    assert!(
        lines
            .iter()
            .all(|l| l["state"] == "pending" && l["peer_address"].as_str().unwrap().starts_with("127.0.0.1"))
    );

    let (ok, out, _) = admin(&state, &["nodes", "show", &b1]);
    assert!(ok && out.contains("Janus node CA: edge-b"), "{out}");
    assert!(
        out.contains(&format!("The node's console shows: pki: this node's CA: SHA-256 {}", ca_hash(&ca_b))),
        "{out}"
    );

    // A fingerprint that is not the node's changes nothing.
    let (ok, _, err) = admin(&state, &["nodes", "approve", &b1, "--expect-ca-sha256", &ca_hash(&ca_a)]);
    assert!(!ok && err.contains("not that node"), "{err}");
    assert_eq!(get(&client, &format!("/register/{b1}"), Some(&sb)).await.status, 202);
    // The console's last line decides.
    let console = fx.dir.path().join("edge-b.log");
    let old = ca_hash(&ca_a);
    std::fs::write(
        &console,
        format!(
            "boot\npki: this node's CA: SHA-256 {old}\nmore\n[2.1] pki: this node's CA: SHA-256 {}\n",
            ca_hash(&ca_b)
        ),
    )
    .unwrap();
    let (ok, out, err) = admin(&state, &["nodes", "approve", &b1, "--console", console.to_str().unwrap()]);
    assert!(ok && out.contains("its CA matches"), "{out}{err}");
    assert_eq!(get(&client, &format!("/register/{b1}"), Some(&sb)).await.status, 200);

    // Every pending record of one CA at once.
    let (ok, out, _) = admin(&state, &["nodes", "approve", "--ca-sha256", &ca_hash(&ca_a).to_uppercase()]);
    assert!(ok && out.contains(&a1) && out.contains(&a2), "{out}");
    assert_eq!(get(&client, &format!("/register/{a1}"), Some(&s1)).await.status, 200);

    let (ok, _, _) = admin(&state, &["nodes", "reject", &a2]);
    assert!(ok);
    assert_eq!(get(&client, &format!("/register/{a2}"), Some(&s2)).await.status, 404);
    let (_, out, _) = admin(&state, &["nodes", "list", "--rejected", "--json"]);
    assert_eq!(out.lines().count(), 1);
    assert!(out.contains(&a2));

    let (ok, _, _) = admin(&state, &["nodes", "forget", &a2]);
    assert!(ok);
    assert!(!state.join("nodes").join(format!("{a2}.json")).exists());
    for verb in ["show", "reject", "forget", "approve"] {
        let mut args = vec!["nodes", verb, "0123456789abcdef0123456789abcdef"];
        if verb == "approve" {
            args.push("--unchecked");
        }
        let (ok, _, err) = admin(&state, &args);
        assert!(!ok && err.contains("there is no node"), "{verb}: {err}");
    }
    let (ok, _, err) = admin(&state, &["nodes", "show", "../x"]);
    assert!(!ok && err.contains("no node is named"), "{err}");

    let (ok, out, _) = admin(&state, &["nodes", "history", &b1, "--json"]);
    assert!(ok, "{out}");
    let events: Vec<serde_json::Value> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let kinds: Vec<&str> = events.iter().map(|e| e["event"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["announced", "admitted", "trust_delivered"]);
    assert_eq!(events[1]["by"], "command");
    assert_eq!(events[1]["user"], "command (alice)");
    assert_eq!(events[1]["checked_ca_sha256"], ca_hash(&ca_b));
    let trail = audit_trail(&state);
    for secret in [&s1, &s2, &sb] {
        assert!(!trail.contains(secret.as_str()));
    }
    server.stop().await;
}

#[tokio::test]
async fn a_touched_approval_is_audited_with_its_owner_at_the_first_delivery() {
    let fx = Fixture::new();
    let server = InProcess::start(fx.config()).await;
    let client = node_client(&fx, server.addr);
    let (id, secret, _) = announce(&client, "edge", &certs::mint_node_ca("edge").unwrap(), "").await;
    std::fs::write(fx.state().join("approved").join(&id), b"").unwrap();
    for _ in 0..2 {
        assert_eq!(get(&client, &format!("/register/{id}"), Some(&secret)).await.status, 200);
    }
    let (_, out, _) = admin(&fx.state(), &["nodes", "history", &id, "--json"]);
    let events: Vec<serde_json::Value> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(events.len(), 3, "{out}");
    assert_eq!(events[1]["by"], "approval-file");
    assert_eq!(events[1]["user"], "root");
    assert_eq!(events[2]["event"], "trust_delivered", "once, however often it polls");
    server.stop().await;
}

#[tokio::test]
async fn tokens_add_list_revoke_with_uses_and_expiry() {
    let fx = Fixture::new();
    fx.write_tokens("hand-written-token\n");
    let server = InProcess::start(fx.config()).await;
    let client = node_client(&fx, server.addr);
    let state = fx.state();
    let (ok, out, _) = admin(&state, &["tokens", "add", "--count", "2", "--uses", "2", "--expires-in", "1h"]);
    assert!(ok);
    let made: Vec<String> = out.lines().map(str::to_string).collect();
    assert_eq!(made.len(), 2);
    assert!(made.iter().all(|t| t.len() == 32 && t.bytes().all(|b| b.is_ascii_hexdigit())));

    let (ok, list, _) = admin(&state, &["tokens", "list"]);
    assert!(ok && list.contains("3 token(s)"), "{list}");
    assert!(!made.iter().any(|t| list.contains(t.as_str())), "listing redacts");
    assert!(!list.contains("hand-written-token"));

    // Two uses, then none.
    let ca = certs::mint_node_ca("edge").unwrap();
    for expected in [true, true, false] {
        let ca = certs::mint_node_ca("edge").unwrap();
        let answer = post(&client, &announcement("edge", &ca, &made[0], &new_secret())).await;
        assert_eq!(json(&answer)["admitted"], expected);
    }
    // A plain token, as the reference reads them, still admits once.
    let answer = post(&client, &announcement("edge", &ca, "hand-written-token", &new_secret())).await;
    assert_eq!(json(&answer)["admitted"], true);

    // An expired token admits nobody and leaves the file.
    let meta_path = state.join("tokens.meta.json");
    let mut meta: serde_json::Value = serde_json::from_slice(&std::fs::read(&meta_path).unwrap()).unwrap();
    for entry in meta.as_object_mut().unwrap().values_mut() {
        entry["expires_at"] = serde_json::json!(1);
    }
    std::fs::write(&meta_path, meta.to_string()).unwrap();
    let answer = post(&client, &announcement("edge", &ca, &made[1], &new_secret())).await;
    assert_eq!(json(&answer)["admitted"], false);
    let left = eventually(|| async { fx.tokens() }, |t| !t.contains(&made[1])).await;
    assert!(!left.contains(&made[1]), "the sweep blanks it");

    let (ok, out, _) = admin(&state, &["tokens", "add"]);
    assert!(ok);
    let (ok, _, err) = admin(&state, &["tokens", "revoke", "zzzzzz"]);
    assert!(!ok && err.contains("no token matches"), "{err}");
    let (ok, _, err) = admin(&state, &["tokens", "revoke", &out.trim()[..1]]);
    assert!(
        !ok && err.contains("a prefix needs 6 characters or more (of the token, or of its SHA-256"),
        "one character revokes nothing: {err}"
    );
    let (ok, _, _) = admin(&state, &["tokens", "revoke", &out.trim()[..8]]);
    assert!(ok);
    fx.expect_tokens("");

    let trail = audit_trail(&state);
    for event in ["token_added", "token_expired", "token_revoked"] {
        assert!(trail.contains(event), "{event}");
    }
    for t in made.iter().chain([&"hand-written-token".to_string()]) {
        assert!(!trail.contains(t.as_str()), "a token reached the audit trail");
    }
    server.stop().await;
}

#[test]
fn admin_commands_fail_with_one_sentence() {
    let dir = tempfile::tempdir().unwrap();
    let (ok, _, err) = admin(&dir.path().join("nope"), &["nodes", "list"]);
    assert!(!ok && err.contains("is not a state directory"), "{err}");
    let (ok, _, stderr) =
        cli_with(Command::new(BIN).args(["nodes", "list"]).env_remove("JANUS_REGISTRATION_STATE"));
    assert!(!ok && stderr.contains("--state"), "{stderr}");
    for help in
        [&["nodes", "approve", "--help"][..], &["tokens", "add", "--help"], &["nodes", "list", "--help"]]
    {
        assert!(cli(help).1.contains("Example"), "{help:?}");
    }
}

/// A wrapper that runs `scripts/admit-by-console.sh` on `console_dir`.
fn console_policy(fx: &Fixture, console_dir: &std::path::Path) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/admit-by-console.sh");
    let wrapper = fx.dir.path().join("policy.sh");
    std::fs::write(
        &wrapper,
        format!("#!/bin/sh\nJANUS_CONSOLE_DIR='{}' exec '{}'\n", console_dir.display(), script.display()),
    )
    .unwrap();
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    wrapper
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admission_command_admits_by_console_and_leaves_the_rest_pending() {
    let fx = Fixture::new();
    let consoles = fx.dir.path().join("consoles");
    std::fs::create_dir(&consoles).unwrap();
    let (known, unknown) = (certs::mint_node_ca("known").unwrap(), certs::mint_node_ca("unknown").unwrap());
    std::fs::write(
        consoles.join("known.log"),
        format!("x\n{}\n", certs::console_line(&known.cert_pem).unwrap()),
    )
    .unwrap();
    let mut config = fx.config();
    config.admission = Some(PolicyConfig {
        command: console_policy(&fx, &consoles),
        timeout: Duration::from_secs(10),
        concurrency: 2,
        queue: 256,
    });
    let server = InProcess::start(config).await;
    let client = node_client(&fx, server.addr);
    let (yes, yes_secret, _) = announce(&client, "known", &known, "").await;
    let (no, no_secret, _) = announce(&client, "unknown", &unknown, "").await;
    let path = format!("/register/{yes}");
    let status =
        eventually(|| async { get(&client, &path, Some(&yes_secret)).await.status }, |s| *s == 200).await;
    assert_eq!(status, 200, "the console shows its CA: admitted by policy");
    // The approval is audited as the policy's (the line follows the file).
    let trail_has = |needle: &str| audit_trail(&fx.state()).contains(needle);
    assert!(wait_for(Duration::from_secs(10), || trail_has("\"by\":\"policy\"")));
    assert_eq!(get(&client, &format!("/register/{no}"), Some(&no_secret)).await.status, 202);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_admission_command_is_cut_off_and_the_node_stays_pending() {
    use std::os::unix::fs::PermissionsExt;
    let fx = Fixture::new();
    let slow = fx.dir.path().join("slow.sh");
    let pid_file = fx.dir.path().join("pid");
    std::fs::write(
        &slow,
        format!("#!/bin/sh\necho $$ > '{}.tmp'\nmv '{0}.tmp' '{0}'\nsleep 30\nexit 0\n", pid_file.display()),
    )
    .unwrap();
    std::fs::set_permissions(&slow, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut config = fx.config();
    config.admission =
        Some(PolicyConfig { command: slow, timeout: Duration::from_millis(300), concurrency: 1, queue: 256 });
    let server = InProcess::start(config).await;
    let client = node_client(&fx, server.addr);
    let started = std::time::Instant::now();
    let (id, secret, status) = announce(&client, "edge", &certs::mint_node_ca("edge").unwrap(), "").await;
    assert_eq!(status, 201);
    assert!(started.elapsed() < Duration::from_secs(10), "the answer does not wait for the command");
    assert!(wait_for(Duration::from_secs(10), || pid_file.exists()));
    let pid = std::fs::read_to_string(&pid_file).unwrap().trim().to_string();
    // Killed at the timeout: it can no longer approve, and did not.
    let dead = || match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // After the command name in parentheses: the state, Z once killed and not yet reaped.
        Ok(stat) => stat.rsplit(')').next().is_some_and(|rest| rest.trim_start().starts_with('Z')),
        Err(_) => true,
    };
    assert!(wait_for(Duration::from_secs(10), dead));
    assert_eq!(get(&client, &format!("/register/{id}"), Some(&secret)).await.status, 202);
    server.stop().await;
}

#[tokio::test]
async fn a_burst_per_source_then_429_and_other_sources_go_on() {
    let fx = Fixture::new();
    let mut config = fx.config();
    config.limits.burst = 3;
    config.limits.refill_every = Duration::from_secs(600);
    let server = InProcess::start(config).await;
    let client = node_client(&fx, server.addr);
    let ca = certs::mint_node_ca("edge").unwrap();
    for _ in 0..3 {
        assert_eq!(announce(&client, "edge", &ca, "").await.2, 201);
    }
    let answer = post(&client, &announcement("edge", &ca, "", &new_secret())).await;
    assert_eq!(answer.status, 429, "{}", answer.text());
    let retry: u64 = answer.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=600).contains(&retry), "{retry}");
    // Another source address (another loopback) has its own bucket.
    let elsewhere = node_client(&fx, server.addr).with_source("127.0.0.2".parse().unwrap());
    assert_eq!(announce(&elsewhere, "edge", &ca, "").await.2, 201);
    server.stop().await;
}

#[tokio::test]
async fn past_the_pending_cap_tokenless_get_503_and_tokens_still_admit() {
    let fx = Fixture::new();
    fx.write_tokens("tok\n");
    let mut config = fx.config();
    config.limits.max_pending = 2;
    let server = InProcess::start(config).await;
    let client = node_client(&fx, server.addr);
    let ca = certs::mint_node_ca("edge").unwrap();
    assert_eq!(announce(&client, "edge", &ca, "").await.2, 201);
    // The cap may be reached early until the next pass (a record a pass
    // counted while the announcement also bumped it), never late.
    let second = eventually(|| async { announce(&client, "edge", &ca, "").await.2 }, |s| *s == 201).await;
    assert_eq!(second, 201);
    let refused = post(&client, &announcement("edge", &ca, "", &new_secret())).await;
    assert_eq!(refused.status, 503);
    assert!(json(&refused)["error"].as_str().unwrap().contains("pending"));
    let admitted = post(&client, &announcement("edge", &ca, "tok", &new_secret())).await;
    assert_eq!(admitted.status, 201);
    assert_eq!(json(&admitted)["admitted"], true);
    server.stop().await;
}

#[tokio::test]
async fn pending_records_past_the_age_limit_are_forgotten_and_audited() {
    let fx = Fixture::new();
    let mut config = fx.config();
    config.limits.pending_max_age = Duration::ZERO;
    let server = InProcess::start(config).await;
    let client = node_client(&fx, server.addr);
    let (id, secret, _) = announce(&client, "edge", &certs::mint_node_ca("edge").unwrap(), "").await;
    let path = format!("/register/{id}");
    let status =
        eventually(|| async { get(&client, &path, Some(&secret)).await.status }, |s| *s == 404).await;
    assert_eq!(status, 404, "forgotten: the node announces again after its 404");
    let trail = audit_trail(&fx.state());
    assert!(trail.contains("\"event\":\"forgotten\"") && trail.contains("\"by\":\"expiry\""), "{trail}");
    server.stop().await;
}

fn served_bundle_version(trust: &serde_json::Value) -> u64 {
    let bundle = base64::engine::general_purpose::STANDARD.decode(trust["bundle"].as_str().unwrap()).unwrap();
    let signed: serde_json::Value = serde_json::from_slice(&bundle).unwrap();
    let payload =
        base64::engine::general_purpose::STANDARD.decode(signed["payload"].as_str().unwrap()).unwrap();
    serde_json::from_slice::<serde_json::Value>(&payload).unwrap()["version"].as_u64().unwrap()
}

#[tokio::test]
async fn a_new_bundle_and_a_renewed_certificate_are_served_without_a_restart() {
    let fx = Fixture::new();
    let mut args = fx.serve_args();
    args.extend(["--reload-every".into(), "200ms".into()]);
    let server = Process::start(&args);
    let (client, path, secret) = approved_node(&fx, server.addr).await;
    assert_eq!(served_bundle_version(&json(&get(&client, &path, Some(&secret)).await)), 1);

    let (ok, _, stderr) = cli_with(
        Command::new(BIN)
            .args(["certs", "fleet", "--out"])
            .arg(fx.fleet_dir())
            .args(["--bundle-version", "2"]),
    );
    assert!(ok, "{stderr}");
    let served = || async { served_bundle_version(&json(&get(&client, &path, Some(&secret)).await)) };
    let version = eventually(served, |v| *v == 2).await;
    assert_eq!(version, 2, "the new bundle is served from the next request");

    // A bad bundle is refused; the last good one keeps being served.
    std::fs::write(fx.fleet_dir().join("bundle.json"), b"garbage").unwrap();
    assert!(
        wait_for(Duration::from_secs(20), || server.log().contains("refused the changed fleet")),
        "{}",
        server.log()
    );
    assert_eq!(served_bundle_version(&json(&get(&client, &path, Some(&secret)).await)), 2);

    // A renewed certificate is used for the next handshakes.
    let leaf_der = || {
        let pem = std::fs::read(fx.cert()).unwrap();
        janus_core::pki::first_certificate(&pem, "cert").unwrap().to_vec()
    };
    let before = leaf_der();
    assert_eq!(presented_certificate(server.addr).await, before);
    let (ok, _, stderr) = cli_with(
        Command::new(BIN)
            .args(["certs", "controller", "--fleet"])
            .arg(fx.fleet_dir())
            .arg("--out")
            .arg(fx.dir.path().join("controller"))
            .args(["--san", "127.0.0.1", "--renew-within", "400d"]),
    );
    assert!(ok, "{stderr}");
    let after = leaf_der();
    assert_ne!(before, after);
    let presented = eventually(|| presented_certificate(server.addr), |p| *p == after).await;
    assert_eq!(presented, after);

    // A key that does not match is refused; the last good pair stays.
    std::fs::write(fx.key(), certs::mint_node_ca("x").unwrap().key_pem.expose_secret()).unwrap();
    assert!(
        wait_for(Duration::from_secs(20), || server.log().contains("refused the changed certificate")),
        "{}",
        server.log()
    );
    assert_eq!(presented_certificate(server.addr).await, after);
    assert_eq!(get(&client, &path, Some(&secret)).await.status, 200);
}

#[test]
fn certs_controller_refuses_a_san_no_client_could_match() {
    let fx = Fixture::new();
    let out = fx.dir.path().join("refused");
    for (san, said) in [
        (
            "127.0.0.1:8443",
            "janus-registration: --san \"127.0.0.1:8443\": a host:port, not a name: give the host alone (--san 127.0.0.1)",
        ),
        ("not a name!", "janus-registration: --san \"not a name!\": neither an IP address nor a DNS name"),
    ] {
        let (ok, _, stderr) = cli_with(
            Command::new(BIN)
                .args(["certs", "controller", "--fleet"])
                .arg(fx.fleet_dir())
                .arg("--out")
                .arg(&out)
                .args(["--san", san]),
        );
        assert!(!ok, "{san}");
        assert_eq!(stderr.trim(), said);
        assert!(!out.with_extension("crt").exists(), "nothing written for {san}");
    }
}

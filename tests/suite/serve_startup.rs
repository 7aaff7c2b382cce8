//! Startup checks: each refusal is one clear sentence and a non-zero exit,
//! before any socket is bound.

use secrecy::ExposeSecret;
use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use crate::common::*;
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use janus_registration::certs;
use rcgen::SigningKey;

fn serve_fails(fx: &Fixture, expected: &str) {
    let (ok, _, stderr) = cli(&fx.serve_args());
    assert!(!ok, "serve should refuse to start ({expected})");
    assert!(stderr.contains(expected), "stderr should say {expected:?}: {stderr}");
    assert!(!stderr.contains("serving"), "nothing may be bound: {stderr}");
}

fn signed(root_key_pem: &str, payload: &str) -> Vec<u8> {
    let key = rcgen::KeyPair::from_pem(root_key_pem).unwrap();
    let signature = key.sign(payload.as_bytes()).unwrap();
    serde_json::json!({"payload": BASE64.encode(payload), "signature": BASE64.encode(signature)})
        .to_string()
        .into_bytes()
}

#[test]
fn a_root_that_is_not_a_ca_is_refused() {
    let fx = Fixture::new();
    let leaf = fx.controller.cert_pem.split_inclusive("-----END CERTIFICATE-----\n").next().unwrap();
    std::fs::write(fx.fleet_dir().join("root.crt"), leaf).unwrap();
    serve_fails(&fx, "is not a CA certificate");
}

#[test]
fn a_root_that_is_not_self_signed_is_refused() {
    let fx = Fixture::new();
    std::fs::write(fx.fleet_dir().join("root.crt"), &fx.fleet.issuing.cert_pem).unwrap();
    serve_fails(&fx, "is not self-signed");
}

#[test]
fn a_bundle_signed_by_another_root_is_refused() {
    let fx = Fixture::new();
    let other = certs::mint_fleet("Other", 1).unwrap();
    std::fs::write(fx.fleet_dir().join("bundle.json"), &other.bundle_json).unwrap();
    serve_fails(&fx, "signature does not verify");
}

#[test]
fn a_bundle_of_version_0_is_refused() {
    let fx = Fixture::new();
    let payload = serde_json::json!({"version": 0, "issuing_cas": [fx.fleet.issuing.cert_pem]}).to_string();
    std::fs::write(
        fx.fleet_dir().join("bundle.json"),
        signed(fx.fleet.root.key_pem.expose_secret(), &payload),
    )
    .unwrap();
    serve_fails(&fx, "the bundle has no version");
}

#[test]
fn a_bundle_listing_a_ca_the_root_did_not_sign_is_refused() {
    let fx = Fixture::new();
    let other = certs::mint_fleet("Other", 1).unwrap();
    let payload = serde_json::json!({"version": 3, "issuing_cas": [other.issuing.cert_pem]}).to_string();
    std::fs::write(
        fx.fleet_dir().join("bundle.json"),
        signed(fx.fleet.root.key_pem.expose_secret(), &payload),
    )
    .unwrap();
    serve_fails(&fx, "isn't a CA the fleet's root signed");
}

#[test]
fn a_bundle_that_is_not_json_is_refused() {
    let fx = Fixture::new();
    std::fs::write(fx.fleet_dir().join("bundle.json"), b"not json").unwrap();
    serve_fails(&fx, "bundle");
}

#[test]
fn a_key_that_does_not_match_the_certificate_is_refused() {
    let fx = Fixture::new();
    let other = certs::mint_node_ca("x").unwrap();
    std::fs::write(fx.key(), other.key_pem.expose_secret()).unwrap();
    serve_fails(&fx, "does not match the certificate");
}

#[test]
fn an_expired_certificate_is_refused() {
    let fx = Fixture::new();
    let expired = certs::mint_controller(&fx.fleet.issuing, -1, &[]).unwrap();
    certs::write_pair(&fx.dir.path().join("controller"), &expired, true).unwrap();
    serve_fails(&fx, "expired");
}

#[test]
fn a_missing_fleet_is_refused() {
    let fx = Fixture::new();
    std::fs::remove_file(fx.fleet_dir().join("root.crt")).unwrap();
    serve_fails(&fx, "cannot read");
}

#[test]
fn a_certificate_from_another_fleet_starts_with_a_warning_and_creates_the_state() {
    let fx = Fixture::new();
    let other = certs::mint_fleet("Other", 1).unwrap();
    let foreign = certs::mint_controller(&other.issuing, 30, &[]).unwrap();
    certs::write_pair(&fx.dir.path().join("controller"), &foreign, true).unwrap();
    let server = Process::start(&fx.serve_args());
    assert!(server.log().contains("does not verify for controller.fleet.janus"), "{}", server.log());
    for dir in ["", "nodes", "approved"] {
        let mode = std::fs::metadata(fx.state().join(dir)).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "{dir}");
    }
}

#[test]
fn sigterm_stops_the_server_cleanly() {
    let fx = Fixture::new();
    let mut server = Process::start(&fx.serve_args());
    let pid = server.child.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let mut exit = None;
    assert!(wait_for(std::time::Duration::from_secs(20), || {
        exit = server.child.try_wait().unwrap();
        exit.is_some()
    }));
    assert!(exit.unwrap().success(), "{}", server.log());
    assert!(server.log().contains("shutting down"));
}

#[test]
fn a_server_whose_stderr_is_gone_still_serves_and_stops() {
    use std::io::{BufRead, BufReader};
    let fx = Fixture::new();
    let mut child = Command::new(BIN)
        .args(fx.serve_args())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let addr = lines
        .by_ref()
        .map_while(Result::ok)
        .find_map(|l| {
            l.split("serving listen=").nth(1).map(|a| a.split_whitespace().next().unwrap().to_string())
        })
        .expect("the server says where it serves");
    // The log collector dies: every log line from now on fails to write.
    drop(lines);
    assert!(cli(&["healthcheck", "--addr", &addr]).0, "a request is served, its log line dropped");
    let pid = child.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let mut exit = None;
    let stopped = wait_for(std::time::Duration::from_secs(20), || {
        exit = child.try_wait().unwrap();
        exit.is_some()
    });
    if !stopped {
        let _ = child.kill();
    }
    assert!(stopped && exit.unwrap().success(), "SIGTERM stops it");
}

#[test]
fn settings_that_cannot_work_are_refused_not_raised() {
    let fx = Fixture::new();
    for (flag, value, said) in [
        ("--max-connections", "0", "--max-connections must be at least 1"),
        ("--admission-queue", "0", "--admission-queue must be at least 1"),
        ("--maintenance-every", "10ms", "--maintenance-every must be at least 100ms"),
        ("--reload-every", "0s", "--reload-every must be at least 100ms"),
    ] {
        let mut args = fx.serve_args();
        args.extend([flag.to_string(), value.to_string()]);
        let (ok, _, stderr) = cli(&args);
        assert!(!ok && stderr.contains(said), "{flag} {value}: {stderr}");
        assert!(!fx.state().join("nodes").exists(), "{flag} {value}: refused before anything is laid out");
    }
}

/// Issue 61: a mistyped `JANUS_REGISTRATION_*` variable is said at startup,
/// with the nearest name, and the effective settings are one line.
#[test]
fn startup_warns_of_a_mistyped_variable_and_says_the_effective_settings() {
    let fx = Fixture::new();
    let mut command = Command::new(BIN);
    command
        .args(fx.serve_args())
        .env("JANUS_REGISTRATION_MAX_PENDNG", "5")
        .env("JANUS_REGISTRATION_MAX_PENDING", "77");
    let server = Process::start_command(command);
    let said = |needle: &str| wait_for(std::time::Duration::from_secs(10), || server.log().contains(needle));
    assert!(
        said(
            "JANUS_REGISTRATION_MAX_PENDNG names no setting and is ignored: did you mean JANUS_REGISTRATION_MAX_PENDING?"
        ),
        "{}",
        server.log()
    );
    assert!(said(" settings "), "{}", server.log());
    let line = server.log().lines().find(|l| l.contains(" settings ")).unwrap().to_string();
    for field in [
        format!("listen={}", server.addr),
        "max_pending=77".into(),
        "admin_listen=off".into(),
        "max_pending=".into(),
    ] {
        assert!(line.contains(&field), "{field} in {line}");
    }
    assert!(!server.log().contains("JANUS_REGISTRATION_MAX_PENDING names"), "{}", server.log());
}

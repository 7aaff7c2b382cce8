//! `certs` against an implementation we did not write: openssl verifies what
//! we mint, and we verify a fleet openssl made the way `fleet.sh` makes it.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use crate::common::*;
use janus_core::pki;

fn run(args: &[&str], dir: &Path) -> String {
    let (ok, stdout, stderr) = cli_with(Command::new(BIN).args(args).current_dir(dir));
    assert!(ok, "{args:?}: {stderr}");
    stdout
}

fn fails(args: &[&str], dir: &Path) -> String {
    let (ok, _, stderr) = cli_with(Command::new(BIN).args(args).current_dir(dir));
    assert!(!ok, "{args:?} should fail");
    stderr
}

fn openssl(args: &[&str], dir: &Path) -> String {
    let output = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl is installed (.ci/run installs it)");
    assert!(
        output.status.success(),
        "openssl {args:?}: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).to_string()
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn openssl_accepts_what_certs_mints_and_serve_starts_on_it() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    run(&["certs", "fleet", "--out", "fleet", "--name", "Interop"], d);
    run(&["certs", "controller", "--fleet", "fleet", "--out", "controller", "--san", "127.0.0.1"], d);
    for key in ["fleet/root.key", "fleet/issuing.key", "controller.key"] {
        assert_eq!(mode(&d.join(key)), 0o600, "{key}");
    }

    openssl(&["verify", "-CAfile", "fleet/root.crt", "fleet/issuing.crt"], d);
    let chain = std::fs::read_to_string(d.join("controller.crt")).unwrap();
    let leaf = chain.split_inclusive("-----END CERTIFICATE-----\n").next().unwrap();
    std::fs::write(d.join("leaf.crt"), leaf).unwrap();
    openssl(
        &[
            "verify",
            "-CAfile",
            "fleet/root.crt",
            "-untrusted",
            "fleet/issuing.crt",
            "-purpose",
            "sslserver",
            "-verify_hostname",
            "controller.fleet.janus",
            "leaf.crt",
        ],
        d,
    );
    let text = openssl(&["x509", "-in", "leaf.crt", "-noout", "-text"], d);
    assert!(text.contains("CA:FALSE") && text.contains("TLS Web Server Authentication"), "{text}");
    let root_text = openssl(&["x509", "-in", "fleet/root.crt", "-noout", "-text"], d);
    assert!(root_text.contains("CA:TRUE") && root_text.contains("Certificate Sign, CRL Sign"), "{root_text}");

    // The bundle's signature, checked by openssl over the exact payload bytes.
    let bundle: serde_json::Value =
        serde_json::from_slice(&std::fs::read(d.join("fleet/bundle.json")).unwrap()).unwrap();
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD;
    std::fs::write(d.join("payload"), b64.decode(bundle["payload"].as_str().unwrap()).unwrap()).unwrap();
    std::fs::write(d.join("signature"), b64.decode(bundle["signature"].as_str().unwrap()).unwrap()).unwrap();
    let pubkey = openssl(&["x509", "-in", "fleet/root.crt", "-pubkey", "-noout"], d);
    std::fs::write(d.join("root.pub"), pubkey).unwrap();
    let verified =
        openssl(&["dgst", "-sha256", "-verify", "root.pub", "-signature", "signature", "payload"], d);
    assert!(verified.contains("Verified OK"), "{verified}");

    // And serve takes it without the fleet-mode warning.
    let path = |p: &str| d.join(p).display().to_string();
    let args_abs = vec![
        "serve".to_string(),
        "--listen".into(),
        "127.0.0.1:0".into(),
        "--fleet".into(),
        path("fleet"),
        "--cert".into(),
        path("controller.crt"),
        "--key".into(),
        path("controller.key"),
        "--state".into(),
        path("state"),
    ];
    let server = Process::start(&args_abs);
    assert!(!server.log().contains("does not verify"), "{}", server.log());
}

/// `fleet.sh`'s openssl commands, and our bundle check on their result.
#[test]
fn a_fleet_made_by_openssl_verifies_with_our_code() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let bundle = fleet_by_openssl(d);

    let root_der = pki::first_certificate(&std::fs::read(d.join("root.crt")).unwrap(), "root").unwrap();
    pki::check_self_signed_ca(&root_der, "root").unwrap();
    assert_eq!(pki::verify_bundle(&root_der, bundle.as_bytes()).unwrap().version, 1);
    let fleet = pki::Fleet::load(d).unwrap();
    assert_eq!(fleet.bundle_version, 1);

    // Our controller certificate, signed by openssl's issuing CA, serves that fleet.
    std::fs::create_dir(d.join("f")).unwrap();
    for f in ["root.crt", "bundle.json", "issuing.crt", "issuing.key"] {
        std::fs::copy(d.join(f), d.join("f").join(f)).unwrap();
    }
    run(&["certs", "controller", "--fleet", "f", "--out", "controller"], d);
    let chain = d.join("controller.crt");
    let key = d.join("controller.key");
    let provider = janus_core::tls::provider();
    let identity = pki::ServedIdentity::load(&chain, &key, &provider).unwrap();
    identity.verify_for_fleet(&fleet.root_der, provider).unwrap();
}

/// `fleet.sh`'s steps in `d`: a root and an issuing CA made by openssl,
/// and the bundle naming the issuing CA, signed by the root with
/// `openssl dgst`; the bundle's bytes.
fn fleet_by_openssl(d: &std::path::Path) -> String {
    cas_by_openssl(d);
    let issuing = std::fs::read_to_string(d.join("issuing.crt")).unwrap();
    // jq pretty-prints the payload: its exact bytes are what is signed.
    let payload = serde_json::to_string_pretty(&serde_json::json!({
        "version": 1, "issued": "2026-11-29T12:00:00Z", "issuing_cas": [issuing],
    }))
    .unwrap();
    std::fs::write(d.join("payload.json"), &payload).unwrap();
    openssl(&["dgst", "-sha256", "-sign", "root.key", "-out", "payload.sig", "payload.json"], d);
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD;
    let bundle = serde_json::to_string_pretty(&serde_json::json!({
        "payload": b64.encode(&payload),
        "signature": b64.encode(std::fs::read(d.join("payload.sig")).unwrap()),
    }))
    .unwrap();
    std::fs::write(d.join("bundle.json"), &bundle).unwrap();
    bundle
}

/// A root and an issuing CA signed by it, as `fleet.sh` makes them with
/// openssl, in `d`.
fn cas_by_openssl(d: &std::path::Path) {
    std::fs::write(
        d.join("root.ext"),
        "basicConstraints = critical,CA:TRUE\nkeyUsage = critical,keyCertSign,cRLSign\nsubjectKeyIdentifier = hash\n",
    )
    .unwrap();
    std::fs::write(
        d.join("issuing.ext"),
        "basicConstraints = critical,CA:TRUE,pathlen:0\nkeyUsage = critical,keyCertSign,cRLSign\nsubjectKeyIdentifier = hash\n",
    )
    .unwrap();
    openssl(
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-subj",
            "/CN=Example fleet root",
            "-keyout",
            "root.key",
            "-out",
            "root.crt",
            "-days",
            "7300",
            "-extensions",
            "v3_ca",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ],
        d,
    );
    openssl(
        &[
            "req",
            "-new",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-subj",
            "/CN=Example orchestrator",
            "-keyout",
            "issuing.key",
            "-out",
            "issuing.csr",
        ],
        d,
    );
    openssl(
        &[
            "x509",
            "-req",
            "-in",
            "issuing.csr",
            "-CA",
            "root.crt",
            "-CAkey",
            "root.key",
            "-CAcreateserial",
            "-sha256",
            "-days",
            "730",
            "-extfile",
            "issuing.ext",
            "-out",
            "issuing.crt",
        ],
        d,
    );
}

#[test]
fn certs_refuses_to_overwrite_and_resigns_only_upward() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    run(&["certs", "fleet", "--out", "fleet"], d);
    let err = fails(&["certs", "fleet", "--out", "fleet"], d);
    assert!(err.contains("refusing to overwrite"), "{err}");
    let said = run(&["certs", "fleet", "--out", "fleet", "--bundle-version", "5"], d);
    assert!(said.contains("version 5"), "{said}");
    let fleet = pki::Fleet::load(&d.join("fleet")).unwrap();
    assert_eq!(fleet.bundle_version, 5);
    let err = fails(&["certs", "fleet", "--out", "fleet", "--bundle-version", "5"], d);
    assert!(err.contains("higher version"), "{err}");

    run(&["certs", "controller", "--fleet", "fleet", "--out", "c", "--days", "30"], d);
    let err = fails(&["certs", "controller", "--fleet", "fleet", "--out", "c"], d);
    assert!(err.contains("refusing to overwrite"), "{err}");
    let before = std::fs::read(d.join("c.crt")).unwrap();
    let said = run(&["certs", "controller", "--fleet", "fleet", "--out", "c", "--renew-within", "10d"], d);
    assert!(said.contains("not renewed"), "{said}");
    assert_eq!(std::fs::read(d.join("c.crt")).unwrap(), before);
    let said = run(&["certs", "controller", "--fleet", "fleet", "--out", "c", "--renew-within", "31d"], d);
    assert!(said.contains("wrote"), "{said}");
    assert_ne!(std::fs::read(d.join("c.crt")).unwrap(), before);
    assert_eq!(mode(&d.join("c.key")), 0o600);

    let said = run(&["certs", "node-ca", "--name", "edge-9", "--out", "edge-9"], d);
    let pem = std::fs::read_to_string(d.join("edge-9.crt")).unwrap();
    let der = pki::first_certificate(pem.as_bytes(), "ca").unwrap();
    assert!(said.contains(&format!("pki: this node's CA: SHA-256 {}", pki::sha256_hex(&der))), "{said}");
    let text = openssl(&["x509", "-in", "edge-9.crt", "-noout", "-subject", "-ext", "basicConstraints"], d);
    assert!(text.contains("Janus node CA: edge-9") && text.contains("CA:TRUE"), "{text}");
    assert_eq!(mode(&d.join("edge-9.key")), 0o600);
    let err = fails(&["certs", "node-ca", "--name", "edge-9", "--out", "edge-9"], d);
    assert!(err.contains("refusing to overwrite"), "{err}");
}

#[test]
fn demo_lays_out_the_example_state_and_serves_it() {
    let dir = tempfile::tempdir().unwrap();
    let dir_arg = dir.path().to_str().unwrap();
    let args: Vec<String> =
        ["demo", "--dir", dir_arg, "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"]
            .iter()
            .map(|s| s.to_string())
            .collect();
    let server = Process::start(&args);
    let state = dir.path().join("demo-state");
    assert!(state.join("nodes").join(format!("{}.json", janus_registration::demo::EXAMPLE_NODE_ID)).exists());
    assert!(state.join("approved").is_dir());
    assert_eq!(
        std::fs::read_to_string(state.join("tokens")).unwrap(),
        janus_registration::demo::EXAMPLE_TOKENS
    );
    assert_eq!(mode(&dir.path().join("certs/fleet/root.key")), 0o600);
    let root = std::fs::read(dir.path().join("certs/fleet/root.crt")).unwrap();
    let client = janus_agent::http::Endpoint::new(&server.addr.to_string(), &root, &root).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let path = format!("/register/{}", janus_registration::demo::EXAMPLE_NODE_ID);
    let answer = rt.block_on(get(&client, &path, Some(janus_registration::demo::EXAMPLE_POLL_SECRET)));
    assert_eq!(answer.status, 202, "the example node is pending");
}

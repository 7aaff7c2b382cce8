//! The admin API (issue 32): an orchestrator's control path without
//! `exec`, over HTTPS with client certificates from an admin CA of its
//! own, each credential allowed what its scopes say. Driven with the
//! crate's own client, as the CLI's `--server` uses it.

use std::net::SocketAddr;
use std::time::Duration;

use janus_admin::api::Scope;
use janus_admin::api::client::AdminClient;
use janus_admin::listener::AdminApiConfig;
use janus_registration::certs::{self, Minted};
use secrecy::ExposeSecret;
use serde_json::json;

use crate::common::*;

/// A server with the admin API on, trusting `admin_ca`; its admin address.
pub(crate) async fn with_admin_api(fx: &Fixture, admin_ca: &Minted) -> (InProcess, SocketAddr) {
    let ca_file = fx.dir.path().join("admin-ca.crt");
    std::fs::write(&ca_file, &admin_ca.cert_pem).unwrap();
    let admin = AdminApiConfig { listen: "127.0.0.1:0".parse().unwrap(), ca: ca_file };
    let server = InProcess::start_with(fx.config(), Some(&admin), "127.0.0.1:0".parse().unwrap()).await;
    let admin = server.admin_addr.expect("the admin API is bound before it serves");
    (server, admin)
}

pub(crate) fn credential(ca: &Minted, name: &str, scopes: &[Scope]) -> Minted {
    let now = janus_core::clock::now_utc();
    valid_credential(ca, name, scopes, now - time::Duration::minutes(5), now + time::Duration::days(1))
}

pub(crate) fn valid_credential(
    ca: &Minted,
    name: &str,
    scopes: &[Scope],
    from: time::OffsetDateTime,
    to: time::OffsetDateTime,
) -> Minted {
    let uris: Vec<String> = scopes.iter().map(|s| s.uri()).collect();
    certs::mint_admin(ca, name, &uris, from, to).unwrap()
}

pub(crate) fn client(fx: &Fixture, admin: SocketAddr, credential: &Minted) -> AdminClient {
    AdminClient::new(
        &format!("https://{admin}"),
        fx.fleet.root.cert_pem.as_bytes(),
        credential.cert_pem.as_bytes(),
        credential.key_pem.expose_secret().as_bytes(),
    )
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_orchestrator_mints_correlates_approves_rejects_and_watches_through_the_api() {
    let fx = Fixture::new();
    let admin_ca = certs::mint_admin_ca("test admin CA").unwrap();
    let (server, admin) = with_admin_api(&fx, &admin_ca).await;
    let api = client(&fx, admin, &credential(&admin_ca, "orchestrator-1", &Scope::ALL));
    let me = api.call("GET", "/v1/whoami", None).await.unwrap();
    assert_eq!(me.body, json!({"name": "orchestrator-1", "scopes": ["tokens", "read", "approve", "reject"]}));

    let made = api
        .call("POST", "/v1/tokens", Some(&json!({"labels": {"vm": "web-20"}, "expires_in_seconds": 3600})))
        .await
        .unwrap();
    assert_eq!(made.status, 201, "{:?}", made.body);
    let token = made.body["tokens"][0]["token"].as_str().unwrap().to_string();
    let prefix = made.body["tokens"][0]["sha256_prefix"].as_str().unwrap().to_string();
    let nodes = node_client(&fx, server.addr);
    let ca = certs::mint_node_ca("web-20").unwrap();
    let (by_token, _, status) = announce(&nodes, "web-20", &ca, &token).await;
    assert_eq!(status, 201);
    let listed = api.call("GET", "/v1/nodes?label=vm%3Dweb-20", None).await.unwrap();
    assert_eq!(listed.status, 200);
    let found = listed.body["nodes"].as_array().unwrap();
    assert_eq!(found.len(), 1, "{:?}", listed.body);
    assert_eq!(found[0]["id"], by_token.as_str());
    assert_eq!(found[0]["state"], "admitted");
    assert_eq!(found[0]["ca_cert_pem"], ca.cert_pem.as_str());

    let pending_ca = certs::mint_node_ca("web-21").unwrap();
    let (pending, secret, _) = announce(&nodes, "web-21", &pending_ca, "").await;
    let listed = api.call("GET", "/v1/nodes?state=pending", None).await.unwrap();
    assert_eq!(listed.body["nodes"][0]["id"], pending.as_str());
    let path = format!("/v1/nodes/{pending}/approve");
    let unchecked = api.call("POST", &path, Some(&json!({}))).await.unwrap();
    assert_eq!(unchecked.status, 400, "the CA's SHA-256 is required: {:?}", unchecked.body);
    let wrong = api.call("POST", &path, Some(&json!({"expect_ca_sha256": "ab".repeat(32)}))).await.unwrap();
    assert_eq!(wrong.status, 422, "{:?}", wrong.body);
    assert_eq!(
        get(&nodes, &format!("/register/{pending}"), Some(&secret)).await.status,
        202,
        "still pending"
    );
    let right =
        api.call("POST", &path, Some(&json!({"expect_ca_sha256": ca_hash(&pending_ca)}))).await.unwrap();
    assert_eq!(right.status, 200, "{:?}", right.body);
    assert_eq!(right.body["node"]["state"], "admitted");
    assert_eq!(get(&nodes, &format!("/register/{pending}"), Some(&secret)).await.status, 200);

    let (other, _, _) = announce(&nodes, "web-22", &certs::mint_node_ca("web-22").unwrap(), "").await;
    let rejected = api.call("POST", &format!("/v1/nodes/{other}/reject"), None).await.unwrap();
    assert_eq!(rejected.status, 200, "{:?}", rejected.body);
    assert_eq!(rejected.body["node"]["state"], "rejected");
    let shown = api.call("GET", &format!("/v1/nodes/{other}"), None).await.unwrap();
    assert_eq!(shown.body["state"], "rejected");
    assert_eq!(api.call("GET", "/v1/nodes/nosuchnode", None).await.unwrap().status, 404);

    let spare = api.call("POST", "/v1/tokens", Some(&json!({"description": "spare"}))).await.unwrap();
    let spare_prefix = spare.body["tokens"][0]["sha256_prefix"].as_str().unwrap();
    let revoked = api.call("DELETE", &format!("/v1/tokens/{spare_prefix}"), None).await.unwrap();
    assert_eq!(revoked.status, 200, "{:?}", revoked.body);
    let (ok, listed, _) = admin_cmd(&fx, &["tokens", "list", "--json"]);
    assert!(ok && listed.trim().is_empty(), "the spare is gone and the first is spent: {listed}");
    let not_a_fingerprint = api.call("DELETE", "/v1/tokens/not-a-fingerprint", None).await.unwrap();
    assert_eq!(not_a_fingerprint.status, 400, "{:?}", not_a_fingerprint.body);
    let spent = api.call("DELETE", &format!("/v1/tokens/{prefix}"), None).await.unwrap();
    assert_eq!(spent.status, 404, "a spent token is not listed: {:?}", spent.body);

    // Audited with the credential's name.
    let trail = audit_trail(&fx.state());
    let approved = trail
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|e| e["event"] == "admitted" && e["id"] == pending.as_str())
        .expect("an admitted event");
    assert_eq!(approved["user"], "api (orchestrator-1)", "{approved}");

    // The event stream, from an hour back: both admissions and the rejection.
    let mut seen = Vec::new();
    let stream = api.events("/v1/events?since=1h", |event| {
        seen.push(event);
        seen.len() < 3
    });
    tokio::time::timeout(Duration::from_secs(20), stream).await.expect("three events").unwrap();
    let kinds: Vec<&str> = seen.iter().map(|e| e["event"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["admitted", "admitted", "rejected"], "{seen:?}");
    assert_eq!(seen[0]["node"]["token_labels"]["vm"], "web-20");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_refuses_no_certificate_a_nodes_another_cas_an_expired_one_and_a_missing_scope() {
    let fx = Fixture::new();
    let admin_ca = certs::mint_admin_ca("test admin CA").unwrap();
    let (server, admin) = with_admin_api(&fx, &admin_ca).await;
    let refused = |what: &str, result: Result<_, janus_admin::api::client::ClientError>| match result {
        Err(_) => {}
        Ok(janus_admin::api::client::Reply { status, body }) => {
            panic!("{what}: answered {status} {body}")
        }
    };
    // No certificate at all.
    let mut roots = rustls::RootCertStore::empty();
    roots.add(pem_der(&fx.fleet.root.cert_pem)).unwrap();
    let anonymous = janus_core::tls::client_config(roots).unwrap();
    let anonymous = AdminClient::from_config(&admin.to_string(), std::sync::Arc::new(anonymous));
    refused("no certificate", anonymous.call("GET", "/v1/whoami", None).await);
    // A node's CA certificate, as a node has one.
    let node = certs::mint_node_ca("web-30").unwrap();
    refused("a node's certificate", client(&fx, admin, &node).call("GET", "/v1/whoami", None).await);
    // A credential from another admin CA.
    let other_ca = certs::mint_admin_ca("another admin CA").unwrap();
    let foreign = credential(&other_ca, "intruder", &Scope::ALL);
    refused("another CA's credential", client(&fx, admin, &foreign).call("GET", "/v1/whoami", None).await);
    // An expired one from the right CA.
    let now = janus_core::clock::now_utc();
    let expired = valid_credential(
        &admin_ca,
        "old",
        &Scope::ALL,
        now - time::Duration::days(2),
        now - time::Duration::days(1),
    );
    refused("an expired credential", client(&fx, admin, &expired).call("GET", "/v1/whoami", None).await);
    // The endpoint's own certificate, signed by the fleet: no admin power.
    refused(
        "the fleet's certificate",
        client(&fx, admin, &fx.controller).call("GET", "/v1/whoami", None).await,
    );

    // A scope it lacks: 403, and nothing done.
    let reader = client(&fx, admin, &credential(&admin_ca, "dashboard", &[Scope::Read]));
    let denied = reader.call("POST", "/v1/tokens", Some(&json!({}))).await.unwrap();
    assert_eq!(denied.status, 403);
    assert_eq!(
        denied.body["error"],
        "the credential \"dashboard\" may not make or revoke tokens: it lacks the scope \"tokens\""
    );
    let (ok, listed, _) = admin_cmd(&fx, &["tokens", "list", "--json"]);
    assert!(ok && listed.trim().is_empty(), "nothing minted: {listed}");
    let nodes = node_client(&fx, server.addr);
    let ca = certs::mint_node_ca("web-31").unwrap();
    let (id, secret, _) = announce(&nodes, "web-31", &ca, "").await;
    let approve = json!({"expect_ca_sha256": ca_hash(&ca)});
    let denied = reader.call("POST", &format!("/v1/nodes/{id}/approve"), Some(&approve)).await.unwrap();
    assert_eq!(denied.status, 403, "{:?}", denied.body);
    assert_eq!(reader.call("POST", &format!("/v1/nodes/{id}/reject"), None).await.unwrap().status, 403);
    assert_eq!(get(&nodes, &format!("/register/{id}"), Some(&secret)).await.status, 202, "still pending");
    assert_eq!(reader.call("GET", "/v1/nodes", None).await.unwrap().status, 200, "reading is its scope");
    let minter = client(&fx, admin, &credential(&admin_ca, "minter", &[Scope::Tokens]));
    assert_eq!(minter.call("GET", "/v1/nodes", None).await.unwrap().status, 403);
    assert_eq!(minter.call("GET", "/v1/events", None).await.unwrap().status, 403);
    // Bad input: a clear JSON error.
    let bad =
        minter.call("POST", "/v1/tokens", Some(&json!({"count": 2, "token": "x".repeat(20)}))).await.unwrap();
    assert_eq!(bad.status, 400);
    let unknown = minter.call("POST", "/v1/tokens", Some(&json!({"colour": "red"}))).await.unwrap();
    assert_eq!(unknown.status, 400, "{:?}", unknown.body);
    assert!(unknown.body["error"].as_str().unwrap().contains("unknown field `colour`"), "{:?}", unknown.body);
    server.stop().await;
}

/// Refused before any socket is bound: the nodes' port given is one this
/// test holds, so a server that bound first would say the port is in use.
#[test]
fn serve_refuses_an_admin_ca_that_is_the_fleets_before_binding_any_port() {
    let fx = Fixture::new();
    let root = fx.fleet_dir().join("root.crt");
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let mut args = fx.serve_args();
    args[2] = held.local_addr().unwrap().to_string();
    let out = std::process::Command::new(BIN)
        .args(args)
        .args(["--admin-listen", "127.0.0.1:0", "--admin-ca", root.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("it is the fleet's root.crt: admin credentials need a CA of their own (certs admin-ca)"),
        "{err}"
    );
    assert!(!err.contains("cannot listen"), "checked before the nodes' port was bound: {err}");
    // And the admin listener's port in use is said as such, after every check passed.
    let admin_ca = janus_registration::certs::mint_admin_ca("test admin CA").unwrap();
    let ca_file = fx.dir.path().join("admin-ca.crt");
    std::fs::write(&ca_file, &admin_ca.cert_pem).unwrap();
    let out = std::process::Command::new(BIN)
        .args(fx.serve_args())
        .args([
            "--admin-listen",
            &held.local_addr().unwrap().to_string(),
            "--admin-ca",
            ca_file.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot listen on") && err.contains("in use"), "{err}");
}

fn pem_der(pem: &str) -> rustls::pki_types::CertificateDer<'static> {
    janus_core::pki::first_certificate(pem.as_bytes(), "pem").unwrap().to_vec().into()
}

fn admin_cmd(fx: &Fixture, args: &[&str]) -> (bool, String, String) {
    admin(&fx.state(), args)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_goes_through_the_api_with_server_and_client_cert() {
    let fx = Fixture::new();
    let admin_ca = certs::mint_admin_ca("test admin CA").unwrap();
    let (server, admin) = with_admin_api(&fx, &admin_ca).await;
    let write = |name: &str, minted: &Minted| {
        let prefix = fx.dir.path().join(name);
        certs::write_pair(&prefix, minted, false).unwrap();
        prefix
    };
    let full = write("orchestrator", &credential(&admin_ca, "orchestrator-2", &Scope::ALL));
    let reader = write("reader", &credential(&admin_ca, "reader", &[Scope::Read]));
    let server_url = format!("https://{admin}");
    let root = fx.fleet_dir().join("root.crt");
    let through = |credential: &std::path::Path, args: &[&str]| {
        let out = std::process::Command::new(BIN)
            .args(args)
            .args(["--server", &server_url, "--server-ca", root.to_str().unwrap()])
            .arg("--client-cert")
            .arg(credential.with_extension("crt"))
            .arg("--client-key")
            .arg(credential.with_extension("key"))
            .output()
            .unwrap();
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        (out.status.success(), text(&out.stdout), text(&out.stderr))
    };
    let (ok, out, err) = through(&full, &["tokens", "add", "--label", "vm=web-40"]);
    assert!(ok, "{err}");
    let token: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    let nodes = node_client(&fx, server.addr);
    let ca = certs::mint_node_ca("web-40").unwrap();
    let (id, _, _) = announce(&nodes, "web-40", &ca, token["token"].as_str().unwrap()).await;
    let (ok, out, err) = through(&reader, &["nodes", "list", "--label", "vm=web-40"]);
    assert!(ok, "{err}");
    let listed: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(listed["id"], id.as_str());
    assert_eq!(listed["token_sha256_prefix"], token["sha256_prefix"]);
    let pending_ca = certs::mint_node_ca("web-41").unwrap();
    let (pending, _, _) = announce(&nodes, "web-41", &pending_ca, "").await;
    let (ok, _, err) = through(&full, &["nodes", "approve", &pending, "--unchecked"]);
    assert!(!ok);
    assert!(err.contains("through --server, nodes approve takes ID --expect-ca-sha256 HEX"), "{err}");
    let (ok, _, err) =
        through(&reader, &["nodes", "approve", &pending, "--expect-ca-sha256", &ca_hash(&pending_ca)]);
    assert!(!ok);
    assert!(
        err.contains("the admin API answered 403: the credential \"reader\" may not approve nodes")
            && err.contains("(code: scope_missing)"),
        "{err}"
    );
    let (ok, out, err) =
        through(&full, &["nodes", "approve", &pending, "--expect-ca-sha256", &ca_hash(&pending_ca)]);
    assert!(ok, "{err}");
    assert!(out.contains("\"state\":\"admitted\""), "{out}");
    server.stop().await;
}

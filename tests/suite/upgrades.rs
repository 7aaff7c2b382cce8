//! Upgrades: state directories the reference and our builds before the
//! token ledger made (laid out here, file by file, as those versions wrote
//! them) are served and marked with `state-format`; a newer format is
//! refused at start, and stops admissions when it appears under a running
//! server.

use std::path::Path;
use std::process::Command;

use crate::common::*;
use janus_core::pki::sha256_hex;
use janus_registration::certs::{self, Minted};
use janus_store::format;

/// A node as an older version stored it: its CA, id and poll secret.
struct OldNode {
    ca: Minted,
    id: String,
    secret: String,
}

impl OldNode {
    fn new(n: u8) -> Self {
        OldNode {
            ca: certs::mint_node_ca(&format!("old-{n}")).unwrap(),
            id: format!("{n:02x}").repeat(16),
            secret: new_secret(),
        }
    }

    /// `nodes/<id>.json` exactly as the reference writes it
    /// (`json.dump(value, f, indent=2)`, its five fields in its order).
    fn reference_record(&self, admitted: bool) -> String {
        let text = |s: &str| serde_json::to_string(s).unwrap();
        format!(
            "{{\n  \"id\": {},\n  \"name\": {},\n  \"address\": \"10.0.2.15:9505\",\n  \"ca_cert_pem\": {},\n  \"admitted\": {admitted},\n  \"poll_secret_sha256\": \"{}\"\n}}",
            text(&self.id),
            text(&format!("old-{}", &self.id[..2])),
            text(&self.ca.cert_pem),
            sha256_hex(self.secret.as_bytes()),
        )
    }
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// Whether the answer to announcing `ca` with `token` admitted it.
async fn admits(client: &janus_agent::http::Endpoint, ca: &Minted, token: &str) -> bool {
    let answer = post(client, &announcement("new", ca, token, &new_secret())).await;
    assert_eq!(answer.status, 201, "{}", answer.text());
    json(&answer)["admitted"] == true
}

async fn poll_status(client: &janus_agent::http::Endpoint, node: &OldNode) -> u16 {
    get(client, &format!("/register/{}", node.id), Some(&node.secret)).await.status
}

fn format_marker(state: &Path) -> String {
    std::fs::read_to_string(state.join(format::FILE)).unwrap_or_default()
}

#[tokio::test]
async fn a_state_directory_the_reference_made_is_served_and_marked() {
    let fx = Fixture::new();
    let state = fx.state();
    // The reference's layout: tokens (a spent one removed from the file),
    // nodes/, approved/ (empty files), nothing else.
    let (by_token, pending, by_hand) = (OldNode::new(1), OldNode::new(2), OldNode::new(3));
    write(&state.join("tokens"), "fresh-token-1\nfresh-token-2\n");
    write(&state.join("nodes").join(format!("{}.json", by_token.id)), &by_token.reference_record(true));
    write(&state.join("approved").join(&by_token.id), "");
    write(&state.join("nodes").join(format!("{}.json", pending.id)), &pending.reference_record(false));
    write(&state.join("nodes").join(format!("{}.json", by_hand.id)), &by_hand.reference_record(false));
    write(&state.join("approved").join(&by_hand.id), "");
    let record_before = std::fs::read(state.join("nodes").join(format!("{}.json", pending.id))).unwrap();
    std::fs::set_permissions(&state, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();

    let server = Process::start(&fx.serve_args());
    assert_eq!(format_marker(&state), format!("{}\n", format::CURRENT), "marked once laid out");
    assert!(server.log().contains("marked the state directory's format"), "{}", server.log());
    let client = node_client(&fx, server.addr);
    assert_eq!(poll_status(&client, &by_token).await, 200, "admitted by a token: still admitted");
    assert_eq!(poll_status(&client, &by_hand).await, 200, "approved by hand: still admitted");
    assert_eq!(poll_status(&client, &pending).await, 202, "pending: still pending");
    assert_eq!(
        std::fs::read(state.join("nodes").join(format!("{}.json", pending.id))).unwrap(),
        record_before,
        "a record is read as it is, never rewritten by the migration"
    );

    // The token the reference spent (gone from the file) admits nobody; a
    // listed one admits exactly one node.
    let ca = || certs::mint_node_ca("new").unwrap();
    assert!(!admits(&client, &ca(), "spent-by-the-reference").await);
    assert!(admits(&client, &ca(), "fresh-token-1").await);
    assert!(!admits(&client, &ca(), "fresh-token-1").await, "one use, once");
    assert!(admits(&client, &ca(), "fresh-token-2").await);
    fx.expect_tokens("");
}

#[tokio::test]
async fn a_state_directory_from_before_the_ledger_keeps_its_spent_tokens_spent() {
    let fx = Fixture::new();
    let state = fx.state();
    // As our builds before the ledger (3c57a3d) left it: tokens consumed
    // from the file, `uses_left` counted down in tokens.meta.json, approvals
    // saying who, delivered marks, one audit.jsonl, no token-uses/.
    let (admitted, pending) = (OldNode::new(4), OldNode::new(5));
    write(&state.join("tokens"), "multi-token-left-2\none-use-token\n");
    let meta = serde_json::json!({
        sha256_hex(b"multi-token-left-2"): {"uses_left": 2, "added_at": "2026-11-20T10:00:00Z", "added_by": "root"},
    });
    write(&state.join("tokens.meta.json"), &serde_json::to_string_pretty(&meta).unwrap());
    let mut record: serde_json::Value = serde_json::from_str(&admitted.reference_record(true)).unwrap();
    record["ca_sha256"] = ca_hash(&admitted.ca).into();
    record["announced_at"] = "2026-11-21T09:00:00Z".into();
    record["peer_address"] = "10.0.2.15:40000".into();
    record["admitted_by"] = "token".into();
    write(
        &state.join("nodes").join(format!("{}.json", admitted.id)),
        &serde_json::to_string_pretty(&record).unwrap(),
    );
    write(&state.join("approved").join(&admitted.id), r#"{"by":"token","user":""}"#);
    write(&state.join("delivered").join(&admitted.id), "");
    write(&state.join("nodes").join(format!("{}.json", pending.id)), &pending.reference_record(false));
    write(
        &state.join("audit.jsonl"),
        &format!(
            "{{\"time\":\"2026-11-21T09:00:00Z\",\"event\":\"admitted\",\"id\":\"{}\",\"by\":\"token\"}}\n",
            admitted.id
        ),
    );
    std::fs::set_permissions(&state, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();

    let server = Process::start(&fx.serve_args());
    assert_eq!(format_marker(&state), format!("{}\n", format::CURRENT));
    let client = node_client(&fx, server.addr);
    assert_eq!(poll_status(&client, &admitted).await, 200);
    assert_eq!(poll_status(&client, &pending).await, 202);
    // The spent token is absent from the file: spent for good. The one
    // counted down to 2 uses admits exactly 2 more nodes.
    let ca = || certs::mint_node_ca("new").unwrap();
    assert!(!admits(&client, &ca(), "token-the-old-build-spent").await);
    assert!(admits(&client, &ca(), "multi-token-left-2").await);
    assert!(admits(&client, &ca(), "multi-token-left-2").await);
    assert!(!admits(&client, &ca(), "multi-token-left-2").await, "2 uses left meant 2");
    assert!(admits(&client, &ca(), "one-use-token").await);
    assert!(!admits(&client, &ca(), "one-use-token").await);
    // The earlier trail is still read alongside the new one.
    let (ok, history, stderr) = admin(&state, &["nodes", "history", &admitted.id]);
    assert!(ok && history.contains("admitted"), "{history} {stderr}");
}

#[test]
fn a_newer_format_is_refused_at_start_and_nothing_is_written() {
    let fx = Fixture::new();
    let state = fx.state();
    std::fs::create_dir(&state).unwrap();
    std::fs::set_permissions(&state, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    write(&state.join(format::FILE), "3\n");
    let (code, _, stderr) = cli_exit(Command::new(BIN).args(fx.serve_args()));
    assert_eq!(code, Some(1), "{stderr}");
    let expected = format!(
        "says the state directory is in format 3, but this janus-registration ({}) understands formats up to 2: run a version that knows format 3 (docs/upgrading.md)",
        env!("CARGO_PKG_VERSION")
    );
    assert!(stderr.contains(&expected), "{stderr}");
    // Admin commands refuse it the same way.
    for args in [&["tokens", "add"][..], &["nodes", "list"][..]] {
        let (ok, _, stderr) = admin(&state, args);
        assert!(!ok && stderr.contains(&expected), "{args:?}: {stderr}");
    }
    let names: Vec<String> =
        std::fs::read_dir(&state).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    assert_eq!(names, [format::FILE], "nothing laid out under a format this version does not know");

    // A marker that is not a number is refused too (fail closed).
    write(&state.join(format::FILE), "two\n");
    let (code, _, stderr) = cli_exit(Command::new(BIN).args(fx.serve_args()));
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("cannot be read as a state format"), "{stderr}");
}

#[tokio::test]
async fn a_newer_format_appearing_under_a_running_server_stops_admissions() {
    let fx = Fixture::new();
    fx.write_tokens("token-a\ntoken-b\n");
    let mut args = fx.serve_args();
    args.extend(["--maintenance-every".into(), "200ms".into()]);
    let server = Process::start(&args);
    let client = node_client(&fx, server.addr);
    let (client2, path, secret) = approved_node(&fx, server.addr).await;
    assert!(admits(&client, &certs::mint_node_ca("a").unwrap(), "token-a").await);

    // `write` truncates before it writes, as an admin's `echo 3 >` does: a pass may
    // read the file empty in between and refuse for that (fail closed) before it
    // reads the 3, so wait for the reason, not the first 503.
    write(&fx.state().join(format::FILE), "3\n");
    let names_format_3 = |a: &janus_agent::http::Answer| a.status == 503 && a.text().contains("format 3");
    let health = eventually(|| get(&client, "/healthz", None), names_format_3).await;
    assert_eq!(health.status, 503, "within a maintenance pass");
    assert!(json(&health)["reason"].as_str().unwrap().contains("format 3"), "{}", health.text());
    let refused =
        post(&client, &announcement("b", &certs::mint_node_ca("b").unwrap(), "token-b", &new_secret())).await;
    assert_eq!(refused.status, 503, "{}", refused.text());
    assert_eq!(refused.header("retry-after"), Some("60"));
    assert!(json(&refused)["error"].as_str().unwrap().contains("docs/upgrading.md"));
    assert_eq!(get(&client2, &path, Some(&secret)).await.status, 503, "polls wait too");
    fx.expect_tokens("token-b\n");
    assert!(records(&fx.state()).iter().all(|r| r["name"] != "b"), "nothing stored");

    // Back to a format this version knows: it serves again.
    write(&fx.state().join(format::FILE), "2\n");
    let health = eventually(|| get(&client, "/healthz", None), |a| a.status == 200).await;
    assert_eq!(health.status, 200, "{}", health.text());
    assert!(admits(&client, &certs::mint_node_ca("b").unwrap(), "token-b").await);
}

#[tokio::test]
async fn before_a_rollback_tokens_list_blanks_every_spent_token() {
    let fx = Fixture::new();
    fx.write_tokens("spent-here\nstill-free\n");
    let mut server = Process::start(&fx.serve_args());
    let client = node_client(&fx, server.addr);
    assert!(admits(&client, &certs::mint_node_ca("a").unwrap(), "spent-here").await);
    server.kill();
    // As an older build that reads only `tokens` would find it if the
    // blanking had not happened yet (put back by hand here).
    fx.write_tokens("spent-here\nstill-free\n");
    let (ok, _, stderr) = admin(&fx.state(), &["tokens", "list"]);
    assert!(ok, "{stderr}");
    fx.expect_tokens("still-free\n");
}

//! Token metadata that cannot be lost, and abuse that stays bounded: a
//! token briefly missing from the list keeps its expiry and uses, adds
//! racing the sweep keep theirs, a broken `tokens.meta.json` fails closed
//! and blanks nothing, `token_expired` is audited once even when the list
//! cannot be changed, and a rejected CA announcing in a loop holds two
//! records at most.

use std::fs;
use std::time::Duration;

use crate::common::*;
use janus_registration::certs::{self, Minted};
use janus_store::tokens::META_FILE;

fn meta(state: &std::path::Path) -> serde_json::Value {
    serde_json::from_slice(&fs::read(state.join(META_FILE)).unwrap_or_default()).unwrap_or_default()
}

async fn admitted(client: &janus_agent::http::Endpoint, ca: &Minted, token: &str) -> u16 {
    let answer = post(client, &announcement("edge", ca, token, &new_secret())).await;
    if answer.status == 201 && json(&answer)["admitted"] == true { 200 } else { answer.status }
}

fn fast_maintenance(fx: &Fixture) -> Process {
    let mut args = fx.serve_args();
    args.extend(["--maintenance-every".into(), "100ms".into()]);
    Process::start(&args)
}

fn passes(server: &Process) -> usize {
    server.log().matches("state scanned").count()
}

fn wait_passes(server: &Process, more: usize) {
    let start = passes(server);
    assert!(wait_for(Duration::from_secs(30), || passes(server) >= start + more), "{}", server.log());
}

#[tokio::test]
async fn a_token_briefly_missing_from_the_list_keeps_its_expiry_and_uses() {
    let fx = Fixture::new();
    fx.write_tokens("");
    let server = fast_maintenance(&fx);
    let token = add_token(&fx.state(), &["--expires-in", "1h", "--uses", "3"]);
    let entries = || meta(&fx.state()).as_object().map_or(0, |m| m.len());
    assert_eq!(entries(), 1);
    // Commented out for a while, as an admin does.
    fs::write(fx.state().join("tokens"), format!("# {token}\n")).unwrap();
    wait_passes(&server, 5);
    assert_eq!(entries(), 1, "kept while the token is not listed");
    // Behind the documented symlink, pointing nowhere for a while.
    fs::remove_file(fx.state().join("tokens")).unwrap();
    std::os::unix::fs::symlink(fx.dir.path().join("nowhere"), fx.state().join("tokens")).unwrap();
    wait_passes(&server, 5);
    assert_eq!(entries(), 1, "kept while the list is missing");
    fs::write(fx.dir.path().join("nowhere"), format!("{token}\n")).unwrap();
    let client = node_client(&fx, server.addr);
    for n in 0..3 {
        assert_eq!(admitted(&client, &certs::mint_node_ca(&format!("e{n}")).unwrap(), &token).await, 200);
    }
    assert_eq!(admitted(&client, &certs::mint_node_ca("e3").unwrap(), &token).await, 201, "3 uses, not more");
    // The tidier drops it just after the answer (state.md), in its own thread.
    let gone = || meta(&fx.state()).as_object().and_then(|m| m.values().next().cloned()).is_none();
    assert!(wait_for(Duration::from_secs(20), gone), "the metadata goes with the last use");
}

#[test]
fn tokens_added_while_the_sweep_runs_keep_their_metadata() {
    let fx = Fixture::new();
    fx.write_tokens("");
    let server = fast_maintenance(&fx);
    let added: Vec<String> = (0..40).map(|_| add_token(&fx.state(), &["--uses", "2"])).collect();
    wait_passes(&server, 3);
    let meta = meta(&fx.state());
    for token in &added {
        let hash = janus_core::pki::sha256_hex(token.as_bytes());
        assert_eq!(meta[&hash]["uses"], 2, "{token}'s metadata was kept");
    }
}

#[tokio::test]
async fn a_broken_meta_file_fails_closed_and_blanks_nothing() {
    let fx = Fixture::new();
    fx.write_tokens("plain-token-0001\n");
    let mut server = fast_maintenance(&fx);
    let multi = add_token(&fx.state(), &["--uses", "3"]);
    let client = node_client(&fx, server.addr);
    assert_eq!(admitted(&client, &certs::mint_node_ca("a").unwrap(), &multi).await, 200);
    server.kill();

    // One stray comma, then a restarted replica.
    let good = fs::read_to_string(fx.state().join(META_FILE)).unwrap();
    fs::write(fx.state().join(META_FILE), good.replacen('{', "{,", 1)).unwrap();
    let server = fast_maintenance(&fx);
    let client = node_client(&fx, server.addr);
    let answer =
        post(&client, &announcement("b", &certs::mint_node_ca("b").unwrap(), &multi, &new_secret())).await;
    assert_eq!(answer.status, 503, "fails closed, the node retries: {}", answer.text());
    assert!(answer.header("retry-after").is_some());
    assert_eq!(
        admitted(&client, &certs::mint_node_ca("p").unwrap(), "plain-token-0001").await,
        200,
        "plain works"
    );
    let health = get(&client, "/healthz", None).await;
    assert_eq!((health.status, json(&health)["status"].as_str()), (200, Some("degraded")), "still ready");
    assert!(health.text().contains(META_FILE), "{}", health.text());
    let (ok, out, _) = admin(&fx.state(), &["tokens", "list"]);
    assert!(ok && out.contains("warning: the registration token's metadata cannot be read"), "{out}");
    wait_passes(&server, 5);
    assert!(fx.tokens().contains(&multi), "nothing blanked while broken");

    // Fixed: its two uses left are there.
    fs::write(fx.state().join(META_FILE), &good).unwrap();
    assert_eq!(admitted(&client, &certs::mint_node_ca("c").unwrap(), &multi).await, 200);
    assert_eq!(admitted(&client, &certs::mint_node_ca("d").unwrap(), &multi).await, 200);
    assert_eq!(admitted(&client, &certs::mint_node_ca("e").unwrap(), &multi).await, 201);
}

#[test]
fn token_expired_is_audited_once_when_the_list_cannot_be_changed() {
    let fx = Fixture::new();
    let secret_volume = fx.dir.path().join("secret");
    let Some(_mount) = Tmpfs::mount(&secret_volume, "1m") else {
        skipped("mount -t tmpfs is refused here");
        return;
    };
    fs::write(secret_volume.join("tokens"), "").unwrap();
    fs::create_dir_all(fx.state().join("nodes")).unwrap();
    std::os::unix::fs::symlink(secret_volume.join("tokens"), fx.state().join("tokens")).unwrap();
    for _ in 0..5 {
        add_token(&fx.state(), &["--expires-in", "1h"]);
    }
    // Now read-only, as a Kubernetes Secret is.
    let remounted = std::process::Command::new("mount")
        .args(["-o", "remount,ro"])
        .arg(&secret_volume)
        .status()
        .is_ok_and(|s| s.success());
    assert!(remounted);
    // Expired a minute ago, as an admin's hand edit says: no waiting on the clock.
    let meta_path = fx.state().join("tokens.meta.json");
    let mut meta: serde_json::Value = serde_json::from_slice(&fs::read(&meta_path).unwrap()).unwrap();
    for entry in meta.as_object_mut().unwrap().values_mut() {
        entry["expires_at"] = serde_json::json!(janus_core::clock::now_unix() - 60);
    }
    fs::write(&meta_path, serde_json::to_vec(&meta).unwrap()).unwrap();
    let server = fast_maintenance(&fx);
    wait_passes(&server, 20);
    let expired = audit_trail(&fx.state()).matches("\"event\":\"token_expired\"").count();
    assert_eq!(expired, 5, "once per token, however many passes");
}

#[tokio::test]
async fn a_rejected_ca_announcing_in_a_loop_holds_two_records_at_most() {
    let fx = Fixture::new();
    let server = Process::start(&fx.serve_args());
    let client = node_client(&fx, server.addr);
    let ca = certs::mint_node_ca("edge").unwrap();
    let (first, _, _) = announce(&client, "edge", &ca, "").await;
    let (ok, _, err) = admin(&fx.state(), &["nodes", "reject", &first]);
    assert!(ok, "{err}");
    let mut last = String::new();
    for _ in 0..60 {
        let (id, _, status) = announce(&client, "edge", &ca, "").await;
        assert_eq!(status, 201);
        last = id;
    }
    let of_ca: Vec<_> =
        records(&fx.state()).into_iter().filter(|r| r["ca_sha256"] == ca_hash(&ca).as_str()).collect();
    assert_eq!(of_ca.len(), 2, "the rejected one and the latest");
    assert!(
        of_ca.iter().any(|r| r["id"] == first.as_str()) && of_ca.iter().any(|r| r["id"] == last.as_str())
    );
    let rejected_lines = audit_trail(&fx.state()).matches("\"by\":\"rejected-ca\"").count();
    assert!(rejected_lines <= 2, "one audit entry per burst, not per announcement: {rejected_lines}");
    // The latest can still be approved on purpose.
    let (ok, out, err) = admin(&fx.state(), &["nodes", "approve", &last, "--unchecked", "--force"]);
    assert!(ok, "{out} {err}");
}

#[tokio::test]
async fn a_rejected_cas_latest_announcement_expires_as_pending_ones_do() {
    let fx = Fixture::new();
    let mut args = fx.serve_args();
    args.extend(["--pending-max-age".into(), "2s".into(), "--maintenance-every".into(), "100ms".into()]);
    let server = Process::start(&args);
    let client = node_client(&fx, server.addr);
    let ca = certs::mint_node_ca("edge").unwrap();
    let (first, _, _) = announce(&client, "edge", &ca, "").await;
    let (ok, _, err) = admin(&fx.state(), &["nodes", "reject", &first]);
    assert!(ok, "{err}");
    let (duplicate, _, _) = announce(&client, "edge", &ca, "").await;
    let gone = || !fx.state().join("nodes").join(format!("{duplicate}.json")).exists();
    assert!(wait_for(Duration::from_secs(20), gone), "the duplicate expires: {}", server.log());
    assert!(fx.state().join("nodes").join(format!("{first}.json")).exists(), "the rejected record stays");
    let (_, _, status) = announce(&client, "edge", &ca, "").await;
    assert_eq!(status, 201);
    let (ok, list, _) = admin(&fx.state(), &["nodes", "list", "--rejected"]);
    assert!(ok && list.contains(&first), "the CA stays rejected: {list}");
}

#[test]
fn read_only_admin_commands_create_nothing() {
    let fx = Fixture::new();
    let server = Process::start(&fx.serve_args());
    drop(server);
    fs::remove_dir_all(fx.state().join("audit")).unwrap();
    let before = files_below(&fx.state());
    for args in [&["nodes", "list"][..], &["nodes", "list", "--pending"][..], &["audit"][..]] {
        let (ok, _, err) = admin(&fx.state(), args);
        assert!(ok, "{args:?}: {err}");
    }
    assert!(!fx.state().join("audit").exists(), "audit/ is not made again by a command that only reads");
    assert_eq!(files_below(&fx.state()), before);
}

/// Issue 53: both metadata files removed behind a running server whose
/// last read of them predates the token (added by the CLI meanwhile): the
/// server decides as a fresh process does, from the disk (refused, 503:
/// the node retries), never from its memory (the token taken for a plain
/// one: admitted once, its other uses lost; an expired one admitting).
#[tokio::test]
async fn both_metadata_files_removed_behind_a_running_server_refuse_what_they_governed() {
    let fx = Fixture::new();
    fx.write_tokens("");
    let mut args = fx.serve_args();
    args.extend(["--maintenance-every".into(), "1h".into()]);
    let server = Process::start(&args);
    let client = node_client(&fx, server.addr);
    let seed = add_token(&fx.state(), &["--uses", "2"]);
    assert_eq!(admitted(&client, &certs::mint_node_ca("seed").unwrap(), &seed).await, 200, "read once");
    let many = add_token(&fx.state(), &["--uses", "3"]);
    let expired = add_token(&fx.state(), &["--expires-in", "1s"]);
    // Past its expiry, by the clock the server reads (no waiting).
    let mut book = meta(&fx.state());
    for entry in book.as_object_mut().unwrap().values_mut() {
        if entry.get("expires_at").is_some() {
            entry["expires_at"] = (janus_core::clock::now_unix() - 60).into();
        }
    }
    let edited = serde_json::to_vec(&book).unwrap();
    fs::write(fx.state().join(META_FILE), &edited).unwrap();
    fs::write(fx.state().join("tokens.meta.last-good.json"), &edited).unwrap();
    for file in [META_FILE, "tokens.meta.last-good.json"] {
        fs::remove_file(fx.state().join(file)).unwrap();
    }
    for token in [&many, &expired] {
        let ca = certs::mint_node_ca("edge").unwrap();
        assert_eq!(admitted(&client, &ca, token).await, 503, "refused until the metadata is back");
    }
    // Put back: the token of three uses admits three.
    fs::write(fx.state().join(META_FILE), &edited).unwrap();
    for n in 0..3 {
        let ca = certs::mint_node_ca(&format!("e{n}")).unwrap();
        assert_eq!(admitted(&client, &ca, &many).await, 200, "use {n}");
    }
    assert_ne!(admitted(&client, &certs::mint_node_ca("late").unwrap(), &expired).await, 200);
}

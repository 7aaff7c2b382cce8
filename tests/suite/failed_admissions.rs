//! A failed admission never spends a token (issue 53, item 3), as plexd
//! promises its bootstrap tokens: whatever fails after a token's use is
//! claimed (ENOSPC on the record or on the approval, a SIGKILL), the
//! node's retry with the same token and CA, however late, completes that
//! admission for that node with its first id. The fault is injected by a
//! debug build's hook (`JANUS_REGISTRATION_TEST_FAULT_IN_FINISH`), the
//! crash by SIGKILL while the claim is held (the stall hook), and "past
//! the readmit window" by the claim's announcement moved an hour back.

use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::common::*;
use janus_registration::certs::{self, Minted};

const TOKEN: &str = "failed-admission-token-0001";

/// Moves the announcement of every record and claim in `nodes/` an hour
/// back: as if the fault (or the server's absence) lasted past the window.
fn an_hour_ago(state: &Path) {
    let hour_ago = janus_core::clock::unix_to_rfc3339(janus_core::clock::now_unix() - 3600);
    for entry in fs::read_dir(state.join("nodes")).unwrap().flatten() {
        let path = entry.path();
        let Ok(mut record) = serde_json::from_slice::<serde_json::Value>(&fs::read(&path).unwrap()) else {
            continue;
        };
        record["announced_at"] = hour_ago.clone().into();
        // In place (the claim's marker is a link to this file: a rename
        // would leave the ledger's copy as it was).
        fs::write(&path, serde_json::to_vec(&record).unwrap()).unwrap();
    }
}

fn server_with(fx: &Fixture, env: &[(&str, &Path)], maintenance: &str) -> Process {
    let mut command = Command::new(BIN);
    command.args(fx.serve_args()).args(["--readmit-window", "10m", "--maintenance-every", maintenance]);
    for (name, value) in env {
        command.env(name, value);
    }
    Process::start_command(command)
}

async fn announce_again(fx: &Fixture, server: &Process, ca: &Minted) -> (u16, serde_json::Value) {
    let answer = post(&node_client(fx, server.addr), &announcement("edge", ca, TOKEN, &new_secret())).await;
    (answer.status, serde_json::from_slice(&answer.body).unwrap_or_default())
}

fn claims(state: &Path) -> Vec<String> {
    fs::read_dir(state.join("nodes"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".claim-"))
        .collect()
}

/// A fault on `step` after the claim, lasting past the readmit window;
/// then the node's retry, before any recovery (`recovered: false`) or
/// after maintenance finished the admission (`true`).
async fn a_fault_past_the_window(step: &str, recovered: bool) {
    let fx = Fixture::new();
    fx.write_tokens(&format!("{TOKEN}\n"));
    let fault = fx.dir.path().join("fault");
    fs::write(&fault, step).unwrap();
    let maintenance = if recovered { "100ms" } else { "1h" };
    let server = server_with(&fx, &[("JANUS_REGISTRATION_TEST_FAULT_IN_FINISH", &fault)], maintenance);
    let ca = certs::mint_node_ca("edge").unwrap();
    let (status, body) = announce_again(&fx, &server, &ca).await;
    assert!(status >= 500, "{step}: the node is told to retry: {status} {body}");
    assert!(!body.to_string().contains("service_cert_pem"));
    let claimed = claims(&fx.state());
    assert_eq!(claimed.len(), 1, "{step}: the use is claimed, the admission unfinished");
    let first = claimed[0].trim_start_matches(".claim-").trim_end_matches(".json").to_string();
    // The fault lasts past the window; then it is fixed.
    an_hour_ago(&fx.state());
    fs::remove_file(&fault).unwrap();
    if recovered {
        // Maintenance finishes the admission meanwhile: no answer told the node.
        let claim = fx.state().join("nodes").join(&claimed[0]);
        assert!(wait_for(Duration::from_secs(30), || !claim.exists()), "{step}: recovered: {}", server.log());
        assert!(fx.state().join("approved").join(&first).exists());
    }
    let (status, body) = announce_again(&fx, &server, &ca).await;
    assert_eq!(status, 201, "{step}: {body}");
    assert_eq!(body["admitted"], true, "{step}, recovered {recovered}: the retry completes it: {body}");
    assert_eq!(body["id"], first.as_str(), "{step}: with its first id");
    assert!(body["trust"]["bundle"].is_string(), "{step}: and the trust");
    assert!(claims(&fx.state()).is_empty());
    let pending = records(&fx.state()).into_iter().filter(|r| r["admitted"] != true).count();
    assert_eq!(pending, 0, "{step}: no record parked pending under a new id");
    // Told once: a later retry past the window is governed by the window again.
    let (_, body) = announce_again(&fx, &server, &ca).await;
    assert_eq!(body["admitted"], false, "{step}: {body}");
    // One token, one node: another CA with it waits.
    let (_, body) = announce_again(&fx, &server, &certs::mint_node_ca("other").unwrap()).await;
    assert_eq!(body["admitted"], false, "{step}: {body}");
}

#[tokio::test]
async fn a_fault_on_the_record_past_the_window_leaves_the_token_to_its_node() {
    if !cfg!(debug_assertions) {
        return skipped("a release build has no fault hook");
    }
    a_fault_past_the_window("record", false).await;
    a_fault_past_the_window("record", true).await;
}

#[tokio::test]
async fn a_fault_on_the_approval_past_the_window_leaves_the_token_to_its_node() {
    if !cfg!(debug_assertions) {
        return skipped("a release build has no fault hook");
    }
    a_fault_past_the_window("approval", false).await;
    a_fault_past_the_window("approval", true).await;
}

/// SIGKILL right after the claim; the server stays down past the window;
/// restarted, its maintenance finishes the admission; the node's retry
/// gets its first id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigkill_after_the_claim_with_the_server_down_past_the_window_leaves_the_token_to_its_node() {
    if !cfg!(debug_assertions) {
        return skipped("a release build has no stall hook");
    }
    let fx = Fixture::new();
    fx.write_tokens(&format!("{TOKEN}\n"));
    let stall = fx.dir.path().join("stall");
    fs::write(&stall, b"").unwrap();
    let mut server = server_with(&fx, &[("JANUS_REGISTRATION_TEST_STALL_AFTER_CLAIM", &stall)], "1h");
    let ca = certs::mint_node_ca("edge").unwrap();
    let client = node_client(&fx, server.addr);
    let body = announcement("edge", &ca, TOKEN, &new_secret());
    let lost = tokio::spawn(async move { post(&client, &body).await });
    let ledger = fx.state().join("token-uses");
    let claimed = || {
        fs::read_dir(&ledger)
            .is_ok_and(|d| d.flatten().any(|e| is_use_marker(&e.file_name().to_string_lossy())))
    };
    assert!(wait_for(Duration::from_secs(10), claimed), "the use is claimed");
    server.kill();
    let _ = lost.await;
    let claim = claims(&fx.state());
    assert_eq!(claim.len(), 1);
    let first = claim[0].trim_start_matches(".claim-").trim_end_matches(".json").to_string();
    an_hour_ago(&fx.state());
    let server = server_with(&fx, &[], "100ms");
    let path = fx.state().join("nodes").join(&claim[0]);
    assert!(wait_for(Duration::from_secs(30), || !path.exists()), "recovered: {}", server.log());
    let (status, body) = announce_again(&fx, &server, &ca).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["admitted"], true, "{body}");
    assert_eq!(body["id"], first.as_str(), "its first id");
    assert!(audit_trail(&fx.state()).contains("\"event\":\"readmitted\""));
}

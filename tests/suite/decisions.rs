//! An admin's decision sticks and a token admits one node, against the
//! races of replicas, maintenance and admins: a stalled replica never
//! undoes another's admission, a removed approval stays removed, a
//! rejection is lifted only by forgetting the record the admin rejected, a
//! spent token is honoured only within its window, expiry never deletes an
//! approval made meanwhile, a full disk never tears the audit trail, and
//! `/healthz` says when the writes an admission needs fail.

use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::common::*;
use janus_registration::certs::{self, Minted};
use janus_store::NodeId;

/// The ids the answers to announcing `ca` with `token` gave, and whether admitted.
async fn announce_with(
    client: &janus_agent::http::Endpoint,
    ca: &Minted,
    token: &str,
    secret: &str,
) -> (String, bool) {
    let answer = post(client, &announcement("edge", ca, token, secret)).await;
    assert_eq!(answer.status, 201, "{}", answer.text());
    let body = json(&answer);
    (body["id"].as_str().unwrap().to_string(), body["admitted"] == true)
}

fn admitted_events(state: &Path, id: &str) -> usize {
    audit_trail(state).lines().filter(|l| l.contains("\"event\":\"admitted\"") && l.contains(id)).count()
}

/// How many maintenance passes the server has logged.
fn passes(server: &Process) -> usize {
    server.log().matches("state scanned").count()
}

fn wait_passes(server: &Process, more: usize) {
    let start = passes(server);
    assert!(
        wait_for(Duration::from_secs(30), || passes(server) >= start + more),
        "maintenance ran: {}",
        server.log()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_replica_never_undoes_an_admission_another_finished() {
    // The stall is a hook of debug builds only (`cargo test --release` has none).
    if !cfg!(debug_assertions) {
        return skipped("a release build has no stall hook");
    }
    let fx = Fixture::new();
    fx.write_tokens("the-token\n");
    let stall = fx.dir.path().join("stall");
    fs::write(&stall, b"").unwrap();
    let mut a = Command::new(BIN);
    a.args(fx.serve_args()).env("JANUS_REGISTRATION_TEST_STALL_AFTER_CLAIM", &stall);
    let a = Process::start_command(a);
    let b = Process::start(&fx.serve_args());
    let (to_a, to_b) = (node_client(&fx, a.addr), node_client(&fx, b.addr));
    let ca = certs::mint_node_ca("edge").unwrap();
    let first_secret = new_secret();

    // Replica A wins the use, then stalls before finishing.
    let body = announcement("edge", &ca, "the-token", &first_secret);
    let stalled = tokio::spawn(async move { post(&to_a, &body).await });
    let ledger = fx.state().join("token-uses");
    assert!(
        wait_for(Duration::from_secs(10), || fs::read_dir(&ledger).is_ok_and(|d| d.count() > 0)),
        "A claimed the use"
    );
    // The node times out and announces again to B: answered with A's id.
    let (id, admitted) = announce_with(&to_b, &ca, "the-token", &new_secret()).await;
    assert!(admitted, "B finishes the admission A claimed");
    let approval = fx.state().join("approved").join(&id);
    assert!(approval.exists());

    // A resumes. Whatever it meets now, it undoes nothing B finished.
    fs::remove_file(&stall).unwrap();
    let answer = stalled.await.unwrap();
    assert_eq!(answer.status, 201, "{}", answer.text());
    assert_eq!(json(&answer)["id"], id.as_str());
    assert!(approval.exists(), "the approval stays");
    let markers = fs::read_dir(&ledger)
        .unwrap()
        .filter(|e| is_use_marker(&e.as_ref().unwrap().file_name().to_string_lossy()));
    assert_eq!(markers.count(), 1, "the use stays spent");
    let client = node_client(&fx, b.addr);
    assert_eq!(get(&client, &format!("/register/{id}"), Some(&first_secret)).await.status, 200);
    // Another CA with the token: spent, it waits.
    let (_, admitted) =
        announce_with(&client, &certs::mint_node_ca("x").unwrap(), "the-token", &new_secret()).await;
    assert!(!admitted, "one token, one node");
}

#[tokio::test]
async fn a_removed_approval_stays_removed() {
    let fx = Fixture::new();
    fx.write_tokens("the-token\n");
    let mut args = fx.serve_args();
    args.extend(["--maintenance-every".into(), "100ms".into(), "--reconcile-every".into(), "100ms".into()]);
    let server = Process::start(&args);
    let client = node_client(&fx, server.addr);
    let ca = certs::mint_node_ca("edge").unwrap();
    let secret = new_secret();
    let (id, admitted) = announce_with(&client, &ca, "the-token", &secret).await;
    assert!(admitted);
    assert_eq!(admitted_events(&fx.state(), &id), 1);

    // docs/state.md allows it by hand: the admin withdraws the approval.
    fs::remove_file(fx.state().join("approved").join(&id)).unwrap();
    wait_passes(&server, 5);
    assert!(!fx.state().join("approved").join(&id).exists(), "recovery does not make it again");
    assert_eq!(admitted_events(&fx.state(), &id), 1, "nor audits a second admission");
    assert_eq!(get(&client, &format!("/register/{id}"), Some(&secret)).await.status, 202);

    // The node announcing again with its spent token is not admitted either.
    let (again, admitted) = announce_with(&client, &ca, "the-token", &new_secret()).await;
    assert!(!admitted, "a withdrawn node waits for an admin");
    assert_ne!(again, id);
    assert!(!fx.state().join("approved").join(&id).exists());
}

#[tokio::test]
async fn forgetting_any_record_but_the_rejected_one_keeps_its_ca_rejected() {
    let fx = Fixture::new();
    fx.write_tokens("token-1\ntoken-2\n");
    let server = Process::start(&fx.serve_args());
    let client = node_client(&fx, server.addr);
    let ca = certs::mint_node_ca("edge").unwrap();
    let (rejected, _) = announce_with(&client, &ca, "", &new_secret()).await;
    let (ok, out, err) = admin(&fx.state(), &["nodes", "reject", &rejected]);
    assert!(ok, "{out} {err}");
    // A later announcement of that CA: rejected by the server, a duplicate.
    let (duplicate, admitted) = announce_with(&client, &ca, "", &new_secret()).await;
    assert!(!admitted);
    let (ok, _, err) = admin(&fx.state(), &["nodes", "forget", &duplicate]);
    assert!(ok, "{err}");
    // Routine clean-up lifted nothing: a token does not admit that CA.
    let (_, admitted) = announce_with(&client, &ca, "token-1", &new_secret()).await;
    assert!(!admitted, "the CA the admin rejected stays rejected");
    let (ok, list, _) = admin(&fx.state(), &["nodes", "list"]);
    assert!(ok && list.contains("rejected"), "{list}");

    // Forgetting the record the admin rejected is the explicit lift, audited.
    let (ok, out, err) = admin(&fx.state(), &["nodes", "forget", &rejected]);
    assert!(ok, "{err}");
    assert!(out.contains("lifted the rejection of its CA"), "{out}");
    assert!(audit_trail(&fx.state()).contains("\"event\":\"ca_unrejected\""));
    let (_, admitted) = announce_with(&client, &ca, "token-2", &new_secret()).await;
    assert!(admitted, "lifted: the token admits it");
}

#[tokio::test]
async fn rejecting_again_a_record_whose_cas_rejection_was_lifted_rejects_the_ca_again() {
    let fx = Fixture::new();
    fx.write_tokens("token-1\n");
    let server = Process::start(&fx.serve_args());
    let client = node_client(&fx, server.addr);
    let ca = certs::mint_node_ca("edge").unwrap();
    let (first, _) = announce_with(&client, &ca, "", &new_secret()).await;
    assert!(admin(&fx.state(), &["nodes", "reject", &first]).0);
    // Rejected by the server for its CA, then the CA's rejection lifted.
    let (later, _) = announce_with(&client, &ca, "", &new_secret()).await;
    let (ok, out, _) = admin(&fx.state(), &["nodes", "forget", &first]);
    assert!(ok && out.contains("lifted"), "{out}");
    // Still rejected itself, but its CA no longer: rejecting it again is no
    // "nothing changed", it rejects the CA again.
    let (ok, out, err) = admin(&fx.state(), &["nodes", "reject", &later]);
    assert!(ok && !out.contains("nothing changed"), "{out} {err}");
    assert!(fx.state().join("rejected-cas").join(ca_hash(&ca)).exists(), "the CA is rejected again");
    let (_, admitted) = announce_with(&client, &ca, "token-1", &new_secret()).await;
    assert!(!admitted, "a token does not admit the CA rejected again");
    let (ok, out, _) = admin(&fx.state(), &["nodes", "reject", &later]);
    assert!(ok && out.contains("nothing changed"), "now both are: {out}");
}

#[tokio::test]
async fn a_spent_token_is_honoured_for_its_node_only_within_the_window() {
    let fx = Fixture::new();
    fx.write_tokens("the-token\n");
    let mut args = fx.serve_args();
    args.extend(["--readmit-window".into(), "10m".into()]);
    let server = Process::start(&args);
    let client = node_client(&fx, server.addr);
    let ca = certs::mint_node_ca("edge").unwrap();
    let (id, admitted) = announce_with(&client, &ca, "the-token", &new_secret()).await;
    assert!(admitted);
    let (again, admitted) = announce_with(&client, &ca, "the-token", &new_secret()).await;
    assert!(admitted && again == id, "within the window: the first id");
    // Past the window: its record says it announced an hour ago (the window
    // is counted from there), rather than waiting for the clock.
    let path = fx.state().join("nodes").join(format!("{id}.json"));
    let mut record: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    record["announced_at"] = janus_core::clock::unix_to_rfc3339(janus_core::clock::now_unix() - 3600).into();
    let temp = path.with_extension("edit");
    std::fs::write(&temp, serde_json::to_vec(&record).unwrap()).unwrap();
    std::fs::rename(&temp, &path).unwrap();
    let (later, admitted) = announce_with(&client, &ca, "the-token", &new_secret()).await;
    assert!(!admitted, "past the window a spent token is spent");
    assert_ne!(later, id);
    let record = records(&fx.state()).into_iter().find(|r| r["id"] == id.as_str()).unwrap();
    assert!(!record["peer_address"].is_null());
}

#[tokio::test]
async fn expiry_never_deletes_an_approval_made_while_it_runs() {
    let fx = Fixture::new();
    const N: usize = 1500;
    // Pending records two days old, as any version writes them.
    let nodes = fx.state().join("nodes");
    fs::create_dir_all(&nodes).unwrap();
    let ca = certs::mint_node_ca("edge").unwrap();
    let ids: Vec<NodeId> = (0..N).map(|_| NodeId::generate()).collect();
    for id in &ids {
        let record = serde_json::json!({
            "id": id.as_str(), "name": "edge", "address": "10.0.2.15:9505", "ca_cert_pem": ca.cert_pem,
            "admitted": false, "poll_secret_sha256": "00", "announced_at": "2026-01-01T00:00:00Z",
        });
        fs::write(nodes.join(format!("{id}.json")), record.to_string()).unwrap();
    }
    let mut args = fx.serve_args();
    args.extend(["--pending-max-age".into(), "1d".into(), "--maintenance-every".into(), "100ms".into()]);
    let server = Process::start(&args);
    // The admin approves every one of them while the passes run.
    let approved = fx.state().join("approved");
    for id in &ids {
        fs::write(approved.join(id.as_str()), b"").unwrap();
    }
    wait_passes(&server, 3);
    let kept = ids.iter().filter(|id| approved.join(id.as_str()).exists()).count();
    assert_eq!(kept, N, "every approval made stays");
    let with_record = ids.iter().filter(|id| nodes.join(format!("{id}.json")).exists()).count();
    let forgotten = audit_trail(&fx.state()).matches("\"event\":\"forgotten\"").count();
    assert!(with_record + forgotten >= N, "{with_record} records kept, {forgotten} forgotten");
    assert!(forgotten < N, "the race was run: some approvals came first");
}

/// A server whose state directory is a 2 MiB tmpfs; `None` (and SKIPPED
/// said) where mounting is refused.
fn on_a_small_disk(fx: &Fixture) -> Option<(Tmpfs, Process)> {
    let Some(mount) = Tmpfs::mount(&fx.state(), "2m") else {
        skipped("mount -t tmpfs is refused here");
        return None;
    };
    Some((mount, Process::start(&fx.serve_args())))
}

/// Fills the state directory's disk to within `leave` bytes of full; the filler.
fn fill_leaving(state: &Path, leave: u64) -> std::path::PathBuf {
    let filler = state.join("filler.bin");
    let free = rustix::fs::statvfs(state).map(|s| s.f_bavail * s.f_frsize).unwrap();
    fs::write(&filler, vec![b'x'; free.saturating_sub(leave) as usize]).unwrap();
    filler
}

#[tokio::test]
async fn a_full_disk_never_tears_the_audit_trail() {
    let fx = Fixture::new();
    // The audit trail on a disk of its own, filled but for the last page of
    // the server's file: an event that crosses into a new page is written
    // in part, then refused (ENOSPC).
    let audit = fx.state().join("audit");
    let Some(_mount) = Tmpfs::mount(&audit, "256k") else {
        skipped("mount -t tmpfs is refused here");
        return;
    };
    let server = Process::start(&fx.serve_args());
    let client = node_client(&fx, server.addr);
    let ca = certs::mint_node_ca("edge").unwrap();
    announce_with(&client, &ca, "", &new_secret()).await;
    let filler = fill_leaving(&audit, 0);
    let mut refused = 0;
    for _ in 0..100 {
        if post(&client, &announcement("edge", &ca, "", &new_secret())).await.status != 201 {
            refused += 1;
            if refused == 3 {
                break;
            }
        }
    }
    assert_eq!(refused, 3, "the audit disk filled");
    fs::remove_file(&filler).unwrap();
    let (id, _) = announce_with(&client, &ca, "", &new_secret()).await;
    for entry in fs::read_dir(&audit).unwrap() {
        let text = fs::read_to_string(entry.unwrap().path()).unwrap();
        assert!(text.ends_with('\n'));
        for line in text.lines() {
            serde_json::from_str::<serde_json::Value>(line)
                .unwrap_or_else(|e| panic!("torn line {line:?}: {e}"));
        }
    }
    assert!(audit_trail(&fx.state()).contains(&id), "the next event is whole");
}

#[tokio::test]
async fn healthz_says_when_a_nearly_full_disk_fails_admissions() {
    let fx = Fixture::new();
    let Some((_mount, server)) = on_a_small_disk(&fx) else { return };
    let client = node_client(&fx, server.addr);
    assert_eq!(get(&client, "/healthz", None).await.status, 200);
    // Room for a small file (one page), not for the writes of an admission.
    let filler = fill_leaving(&fx.state(), 6 * 1024);
    let health = eventually(|| get(&client, "/healthz", None), |a| a.status == 503).await;
    assert_eq!(health.status, 503, "{}", health.text());
    fs::remove_file(&filler).unwrap();
    let health = eventually(|| get(&client, "/healthz", None), |a| a.status == 200).await;
    assert_eq!(health.status, 200, "recovers once writes succeed: {}", health.text());
}

#[tokio::test]
async fn healthz_says_when_an_admin_command_as_root_left_audit_unwritable() {
    let fx = Fixture::new();
    let nobody = NOBODY;
    if !can_run_as_nobody() {
        skipped("cannot run the server as another user here (setpriv, needs root)");
        return;
    }
    // The server runs as its own user (nobody here), owning its state and
    // able to read the fleet and certificate.
    fs::create_dir(fx.state()).unwrap();
    Command::new("chown").args(["-R", &format!("{nobody}:{nobody}")]).arg(fx.dir.path()).status().unwrap();
    Command::new("chmod").args(["0755"]).arg(fx.dir.path()).status().unwrap();
    let mut command = as_nobody(BIN);
    command.args(fx.serve_args());
    let server = Process::start_command(command);
    let client = node_client(&fx, server.addr);
    assert_eq!(get(&client, "/healthz", None).await.status, 200);

    // An admin removes audit/ and runs a command as root: what it makes
    // belongs to the state directory's owner, so the server can still write.
    fs::remove_dir_all(fx.state().join("audit")).unwrap();
    let (ok, _, err) = admin(&fx.state(), &["tokens", "add"]);
    assert!(ok, "{err}");
    for path in files_below(&fx.state()).into_iter().chain([fx.state().join("audit")]) {
        use std::os::unix::fs::MetadataExt;
        let owner = fs::symlink_metadata(&path).unwrap().uid();
        assert_eq!(owner.to_string(), nobody, "{} belongs to the service", path.display());
    }
    assert_eq!(get(&client, "/healthz", None).await.status, 200);
    // As an earlier version's command left it: audit/ made again, root's.
    fs::remove_dir_all(fx.state().join("audit")).unwrap();
    fs::create_dir(fx.state().join("audit")).unwrap();
    fs::set_permissions(fx.state().join("audit"), std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .unwrap();
    let health = eventually(|| get(&client, "/healthz", None), |a| a.status == 503).await;
    assert_eq!(health.status, 503, "{}", health.text());
    assert!(health.text().contains("audit"), "{}", health.text());
    let ca = certs::mint_node_ca("e").unwrap();
    let answer = post(&client, &announcement("edge", &ca, "", &new_secret())).await;
    assert_eq!(answer.status, 500);
    // Given back to the server's user: the next announcement is stored, and
    // the endpoint is healthy again.
    Command::new("chown").args(["-R", &format!("{nobody}:{nobody}")]).arg(fx.state()).status().unwrap();
    announce_with(&client, &ca, "", &new_secret()).await;
    let health = eventually(|| get(&client, "/healthz", None), |a| a.status == 200).await;
    assert_eq!(health.status, 200, "{}", health.text());
}

//! The state directory under abuse: links, appends and editor-style
//! replacements of `tokens` during bursts, kill -9 mid-burst, a full disk
//! (a small tmpfs), a directory removed under the server, planted links,
//! a world-writable directory, crash leftovers. After each, a token has
//! admitted exactly one node, all or nothing.

use std::collections::HashSet;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use crate::common::*;
use janus_registration::certs::{self, Minted};
use janus_store::{LEDGER_DIR, Ledger};
use janus_store::{NodeId, NodeRecord, Store};

/// Every use in the ledger belongs to a whole admission, and every token
/// admission holds a use: the all-or-nothing invariant. Returns the number
/// of token admissions.
/// Where a token admission's claim waits for its record (docs/state.md).
fn claim_file(state: &Path, id: &NodeId) -> std::path::PathBuf {
    state.join("nodes").join(format!(".claim-{id}.json"))
}

fn whole_admissions(state: &Path) -> Result<usize, String> {
    let trail = audit_trail(state);
    let mut holders = HashSet::new();
    for entry in fs::read_dir(state.join(LEDGER_DIR)).into_iter().flatten().flatten() {
        if !is_use_marker(&entry.file_name().to_string_lossy()) {
            continue; // a claim's temp file, left by a kill before its link; the index by CA
        }
        // A marker is a link to the holder's record as it was when claimed.
        let holder: serde_json::Value =
            serde_json::from_slice(&fs::read(entry.path()).unwrap_or_default()).unwrap_or_default();
        let Some(id) = holder["id"].as_str().and_then(NodeId::parse) else { continue };
        let record = records(state).into_iter().find(|r| r["id"] == id.as_str());
        let Some(record) = record else { return Err(format!("use held by {id}, which has no record")) };
        if record["admitted"] != true {
            return Err(format!("use held by {id}, whose record is not admitted"));
        }
        if !state.join("approved").join(id.as_str()).exists() {
            return Err(format!("use held by {id}, which has no approval"));
        }
        if !trail.lines().any(|l| l.contains("\"event\":\"admitted\"") && l.contains(id.as_str())) {
            return Err(format!("use held by {id}, which has no admitted event"));
        }
        holders.insert(id.to_string());
    }
    for record in records(state) {
        let by_token = record["admitted_by"] == "token";
        if by_token && !holders.contains(record["id"].as_str().unwrap()) {
            return Err(format!("{} says admitted by token but holds no use", record["id"]));
        }
    }
    Ok(holders.len())
}

fn node_cas(n: usize) -> Vec<Minted> {
    (0..n).map(|i| certs::mint_node_ca(&format!("edge-{i}")).unwrap()).collect()
}

/// Announces `tokens[i]` with `cas[i]`, all at once; the ids answered admitted.
async fn burst(client: &janus_agent::http::Endpoint, tokens: &[String], cas: &[Minted]) -> Vec<String> {
    let tasks: Vec<_> = tokens
        .iter()
        .zip(cas)
        .map(|(token, ca)| {
            let client = client.clone();
            let body = announcement("edge", ca, token, &new_secret());
            tokio::spawn(async move { try_post(&client, &body).await })
        })
        .collect();
    let mut admitted = Vec::new();
    for task in tasks {
        if let Some(answer) = task.await.unwrap()
            && answer.status == 201
            && json(&answer)["admitted"] == true
        {
            admitted.push(json(&answer)["id"].as_str().unwrap().to_string());
        }
    }
    admitted
}

fn names(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i:04}-long-enough")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn appends_during_a_burst_are_kept_and_each_admits() {
    let fx = Fixture::new();
    let first = names("first", 60);
    fx.write_tokens(&format!("{}\n", first.join("\n")));
    let server = InProcess::start(fx.config()).await;
    let client = node_client(&fx, server.addr);
    let appended = names("appended", 60);
    let path = fx.state().join("tokens");
    let writer = {
        let appended = appended.clone();
        std::thread::spawn(move || {
            use std::io::Write;
            for t in appended {
                // `echo T >> tokens`, as an admin does while nodes boot.
                let mut file = fs::OpenOptions::new().append(true).open(&path).unwrap();
                file.write_all(format!("{t}\n").as_bytes()).unwrap();
            }
        })
    };
    let admitted = burst(&client, &first, &node_cas(60)).await;
    writer.join().unwrap();
    assert_eq!(admitted.len(), 60);
    fx.expect_tokens(&appended.iter().map(|t| format!("{t}\n")).collect::<String>());
    let admitted = burst(&client, &appended, &node_cas(60)).await;
    assert_eq!(admitted.len(), 60, "every appended token admits");
    assert_eq!(whole_admissions(&fx.state()), Ok(120));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_editor_putting_spent_tokens_back_admits_nobody_twice() {
    let fx = Fixture::new();
    let tokens = names("t", 80);
    let original = format!("{}\n", tokens.join("\n"));
    fx.write_tokens(&original);
    let server = InProcess::start(fx.config()).await;
    let client = node_client(&fx, server.addr);
    let state = fx.state();
    let editor = std::thread::spawn(move || {
        // Copy, edit, `mv` over: the copy predates the burst's consumptions.
        for round in 0..20 {
            let copy = state.join(format!(".tokens.swp{round}"));
            fs::write(&copy, &original).unwrap();
            fs::rename(&copy, state.join("tokens")).unwrap();
            std::thread::sleep(Duration::from_millis(5));
        }
    });
    let first = burst(&client, &tokens, &node_cas(80)).await;
    editor.join().unwrap();
    // Every token is back in the file now; none admits a second node.
    let again = burst(&client, &tokens, &node_cas(80)).await;
    assert_eq!(first.len(), 80);
    assert!(again.is_empty(), "{} tokens admitted twice", again.len());
    assert_eq!(whole_admissions(&fx.state()), Ok(80));
    server.stop().await;
}

#[tokio::test]
async fn symlinked_and_hard_linked_tokens_are_edited_in_place() {
    let fx = Fixture::new();
    fs::create_dir_all(fx.state()).unwrap();
    let elsewhere = fx.dir.path().join("kept-elsewhere");
    fs::write(&elsewhere, "via-link-0001-long\nstays-0001-long\n").unwrap();
    std::os::unix::fs::symlink(&elsewhere, fx.state().join("tokens")).unwrap();
    let server = InProcess::start(fx.config()).await;
    let client = node_client(&fx, server.addr);
    let ca = certs::mint_node_ca("edge").unwrap();
    let answer = post(&client, &announcement("edge", &ca, "via-link-0001-long", &new_secret())).await;
    assert_eq!(json(&answer)["admitted"], true);
    fx.expect_tokens("stays-0001-long\n");
    assert!(fs::symlink_metadata(fx.state().join("tokens")).unwrap().is_symlink(), "still a link");
    assert_eq!(
        fs::read_to_string(&elsewhere).unwrap().split_whitespace().collect::<Vec<_>>(),
        ["stays-0001-long"]
    );

    // A backup made as a hard link sees the same edit, and is never emptied.
    fs::remove_file(fx.state().join("tokens")).unwrap();
    fs::write(fx.state().join("tokens"), "hard-0001-long\nkept-0001-long\n").unwrap();
    let backup = fx.dir.path().join("tokens.backup");
    fs::hard_link(fx.state().join("tokens"), &backup).unwrap();
    let ca = certs::mint_node_ca("edge2").unwrap();
    let answer = post(&client, &announcement("edge2", &ca, "hard-0001-long", &new_secret())).await;
    assert_eq!(json(&answer)["admitted"], true);
    fx.expect_tokens("kept-0001-long\n");
    assert_eq!(fs::read_to_string(&backup).unwrap(), fs::read_to_string(fx.state().join("tokens")).unwrap());
    server.stop().await;
}

#[tokio::test]
async fn a_bom_and_comment_lines_are_not_tokens() {
    let fx = Fixture::new();
    fx.write_tokens("\u{feff}first-token-long\n# rack 3 tokens\n  #also a comment\n");
    let server = InProcess::start(fx.config()).await;
    let client = node_client(&fx, server.addr);
    let ca = certs::mint_node_ca("edge").unwrap();
    for (token, admits) in [("rack", false), ("#also", false), ("first-token-long", true)] {
        let answer = post(&client, &announcement("edge", &ca, token, &new_secret())).await;
        assert_eq!(json(&answer)["admitted"], admits, "{token}");
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kill_9_during_token_bursts_leaves_every_admission_whole() {
    let fx = Fixture::new();
    let tokens = names("k", 240);
    fx.write_tokens(&format!("{}\n", tokens.join("\n")));
    let mut args = fx.serve_args();
    args.extend(["--maintenance-every".into(), "200ms".into()]);
    let mut answered = Vec::new();
    for round in 0..3 {
        let mut server = Process::start(&args);
        let client = node_client(&fx, server.addr);
        let chunk = tokens[round * 80..(round + 1) * 80].to_vec();
        let cas = node_cas(80);
        let tasks = tokio::spawn({
            let client = client.clone();
            async move { burst(&client, &chunk, &cas).await }
        });
        // Mid-burst: some uses claimed, most not.
        let state = fx.state();
        let claimed = || fs::read_dir(state.join(LEDGER_DIR)).map(|d| d.count()).unwrap_or(0);
        let before = claimed();
        assert!(wait_for(Duration::from_secs(30), || claimed() >= before + 10));
        server.kill();
        answered.extend(tasks.await.unwrap());
    }
    // A restart finishes what the crashes cut short, once no live process
    // could still be finishing it (30 s after its announcement).
    let server = Process::start(&args);
    let mut last = Err(String::new());
    assert!(
        wait_for(Duration::from_secs(60), || {
            last = whole_admissions(&fx.state());
            last.is_ok()
        }),
        "{last:?}"
    );
    let admissions = last.unwrap();
    let on_disk: HashSet<String> =
        records(&fx.state()).iter().map(|r| r["id"].as_str().unwrap().into()).collect();
    assert!(answered.iter().all(|id| on_disk.contains(id)), "an answered admission was lost");
    assert!(admissions >= answered.len());
    // Uses and the tokens still listed account for every token.
    let listed = fx.tokens().lines().count();
    let spent = tokens.len() - tokens.iter().filter(|t| fx.tokens().contains(t.as_str())).count();
    assert!(spent <= admissions, "{spent} tokens gone, {admissions} admissions, {listed} listed");
    let shared = names_renamed_over_with_a_second_link(&fx.state());
    assert!(shared.is_empty(), "{shared:?}");
    drop(server);
}

/// The rename-trap guard: a node left pending by a spent token gets its
/// claim renamed to its record, which must then be linked nowhere else (a
/// later approval renames over it); a second link an admin's copy made is
/// reported.
#[tokio::test]
async fn no_name_renamed_over_has_a_second_link() {
    let fx = Fixture::new();
    fx.write_tokens("only-once\n");
    let server = InProcess::start(fx.config()).await;
    let client = node_client(&fx, server.addr);
    let (first, ..) = announce(&client, "first", &certs::mint_node_ca("first").unwrap(), "only-once").await;
    let (second, _, status) =
        announce(&client, "second", &certs::mint_node_ca("second").unwrap(), "only-once").await;
    assert_eq!(status, 201);
    let pending = records(&fx.state()).into_iter().find(|r| r["id"] == second.as_str()).unwrap();
    assert_eq!(pending["admitted"], false, "a spent token leaves the second node pending");
    let (ok, _, err) = admin(&fx.state(), &["nodes", "approve", &second, "--unchecked"]);
    assert!(ok, "{err}");
    assert_eq!(names_renamed_over_with_a_second_link(&fx.state()), Vec::<String>::new());
    let record = fx.state().join("nodes").join(format!("{first}.json"));
    fs::hard_link(&record, fx.state().join("first-backup.json")).unwrap();
    assert_eq!(names_renamed_over_with_a_second_link(&fx.state()).len(), 2, "the record and its copy");
}

/// Where a crash right after a token's claim leaves the pending record.
#[derive(Clone, Copy, PartialEq)]
enum CutShort {
    /// `nodes/.claim-<id>.json`, as this version writes it.
    ClaimFile,
    /// `nodes/<id>.json`, as earlier versions wrote it.
    EarlierRecord,
}

/// The state a crash right after the claim leaves: a pending record (where
/// `form` says) that names the token's ledger entry, and the use held by a
/// link to it. `age` is how long ago it announced.
fn cut_short_admission(fx: &Fixture, token: &str, ca: &Minted, form: CutShort, age: i64) -> NodeId {
    // Laid out as a server leaves it: the ledger's key, the directories.
    Store::open(&fx.state()).unwrap();
    let ledger = Ledger::new(&fx.state());
    let mac = ledger.mac(token).unwrap();
    let id = NodeId::generate();
    let record = NodeRecord {
        id: id.clone(),
        name: "edge".into(),
        address: "10.0.2.15:9505".into(),
        ca_cert_pem: ca.cert_pem.clone(),
        admitted: false,
        poll_secret_sha256: "0".repeat(64),
        ca_sha256: Some(janus_core::pki::sha256_hex(
            &janus_core::pki::first_certificate(ca.cert_pem.as_bytes(), "ca").unwrap(),
        )),
        announced_at: Some(janus_core::clock::unix_to_rfc3339(janus_core::clock::now_unix() - age)),
        peer_address: None,
        admitted_by: None,
        token_claim: Some(mac.as_str().into()),
        token_sha256_prefix: None,
        token_labels: Default::default(),
        admission_unanswered: false,
        extra: Default::default(),
    };
    let held = match form {
        CutShort::ClaimFile => claim_file(&fx.state(), &id),
        CutShort::EarlierRecord => fx.state().join("nodes").join(format!("{id}.json")),
    };
    let json = serde_json::to_vec_pretty(&record).unwrap();
    janus_core::durable::write_new(&held, &json, 0o600).unwrap();
    // (An earlier version's record is indexed by the migration to format 2.)
    assert!(ledger.claim(&mac, 1, &held, record.ca_sha256.as_deref()).unwrap());
    assert!(whole_admissions(&fx.state()).is_err());
    id
}

#[tokio::test]
async fn an_admission_a_crash_cut_short_is_finished_and_the_node_gets_its_first_id_back() {
    for form in [CutShort::ClaimFile, CutShort::EarlierRecord] {
        crash_window_healed(form).await;
    }
}

async fn crash_window_healed(form: CutShort) {
    let fx = Fixture::new();
    fx.write_tokens("crash-token-0001-long\n");
    let ca = certs::mint_node_ca("edge").unwrap();
    // A minute ago: maintenance leaves younger ones to a live process.
    let id = cut_short_admission(&fx, "crash-token-0001-long", &ca, form, 60);

    let server = InProcess::start(fx.config()).await;
    let state = fx.state();
    let healed = eventually(|| async { whole_admissions(&state) }, |r| r.is_ok()).await;
    assert_eq!(healed, Ok(1));
    // janusd got no answer: it announces again, new secret, same token.
    let client = node_client(&fx, server.addr);
    let answer = post(&client, &announcement("edge", &ca, "crash-token-0001-long", &new_secret())).await;
    assert_eq!(answer.status, 201);
    assert_eq!(json(&answer)["admitted"], true);
    assert_eq!(json(&answer)["id"], id.as_str(), "the first id");
    assert!(json(&answer)["trust"]["bundle"].is_string(), "and the trust");
    // Another CA with the same token is not that node.
    let other = certs::mint_node_ca("other").unwrap();
    let answer = post(&client, &announcement("other", &other, "crash-token-0001-long", &new_secret())).await;
    assert_eq!(json(&answer)["admitted"], false);
    assert_eq!(whole_admissions(&fx.state()), Ok(1));
    assert!(!claim_file(&fx.state(), &id).exists(), "the finished admission's claim file is removed");
    server.stop().await;
}

#[tokio::test]
async fn the_same_ca_announcing_while_its_admission_is_cut_short_is_admitted_with_its_first_id() {
    let fx = Fixture::new();
    fx.write_tokens("crash-token-0002-long\n");
    let ca = certs::mint_node_ca("edge").unwrap();
    // Just now: no maintenance pass touches it yet; the node's retry finishes it.
    let id = cut_short_admission(&fx, "crash-token-0002-long", &ca, CutShort::ClaimFile, 0);
    let server = InProcess::start(fx.config()).await;
    let client = node_client(&fx, server.addr);
    let answer = post(&client, &announcement("edge", &ca, "crash-token-0002-long", &new_secret())).await;
    assert_eq!(json(&answer)["admitted"], true, "{}", answer.text());
    assert_eq!(json(&answer)["id"], id.as_str());
    assert!(json(&answer)["trust"]["bundle"].is_string(), "and the trust");
    assert_eq!(whole_admissions(&fx.state()), Ok(1));
    assert!(!claim_file(&fx.state(), &id).exists());
    server.stop().await;
}

#[tokio::test]
async fn a_claim_file_left_after_its_admission_finished_is_removed() {
    let fx = Fixture::new();
    fx.write_tokens("left-over-0001-long\n");
    let ca = certs::mint_node_ca("edge").unwrap();
    // Killed after the approval, before the claim file's removal.
    let id = cut_short_admission(&fx, "left-over-0001-long", &ca, CutShort::ClaimFile, 60);
    let store = Store::open(&fx.state()).unwrap();
    store.admit(janus_store::Admitted::by_token(id.clone(), None)).unwrap();
    let server = InProcess::start(fx.config()).await;
    let claim = claim_file(&fx.state(), &id);
    let gone = eventually(|| async { !claim.exists() }, |gone| *gone).await;
    assert!(gone, "the leftover claim file is removed");
    assert!(store.approved_now(&id).unwrap());
    server.stop().await;
}

#[test]
fn a_sweep_while_an_admission_is_under_way_leaves_its_token_listed() {
    let fx = Fixture::new();
    fx.write_tokens("under-way-0001-long\n");
    let ca = certs::mint_node_ca("edge").unwrap();
    // A use claimed, the admission not finished (no approval yet).
    let id = cut_short_admission(&fx, "under-way-0001-long", &ca, CutShort::ClaimFile, 0);
    let store = Store::open(&fx.state()).unwrap();
    store.sweep_tokens().unwrap();
    assert!(fx.tokens().contains("under-way-0001-long"), "blanked while its admission could still fail");
    // Had it failed, the use would come back and the token admit again:
    // still listed, it can. It finishes instead: the next sweep blanks it.
    store.admit(janus_store::Admitted::by_token(id.clone(), None)).unwrap();
    store.sweep_tokens().unwrap();
    assert!(!fx.tokens().contains("under-way-0001-long"), "spent for good, still listed");
}

#[tokio::test]
async fn the_state_directory_removed_and_made_again_under_the_server() {
    let fx = Fixture::new();
    let server = InProcess::start(fx.config()).await;
    let client = node_client(&fx, server.addr);
    fs::remove_dir_all(fx.state()).unwrap();
    fs::create_dir(fx.state()).unwrap();
    fs::set_permissions(fx.state(), fs::Permissions::from_mode(0o700)).unwrap();
    fx.write_tokens("after-rm-0001-long\n");
    let ca = certs::mint_node_ca("edge").unwrap();
    let answer = post(&client, &announcement("edge", &ca, "after-rm-0001-long", &new_secret())).await;
    assert_eq!(answer.status, 201, "{}", answer.text());
    assert_eq!(json(&answer)["admitted"], true);
    assert_eq!(whole_admissions(&fx.state()), Ok(1));
    let health = get(&client, "/healthz", None).await;
    assert_eq!(health.status, 200);
    server.stop().await;
}

#[tokio::test]
async fn healthz_says_why_the_tokens_files_cannot_be_relied_on() {
    let fx = Fixture::new();
    fx.write_tokens("plain-token-0001-long\n");
    let mut config = fx.config();
    config.maintenance_every = Duration::from_secs(3600);
    let server = InProcess::start(config).await;
    let client = node_client(&fx, server.addr);
    assert_eq!(get(&client, "/healthz", None).await.status, 200);
    fs::write(fx.state().join("tokens.meta.json"), b"{not json").unwrap();
    // Degraded, not unavailable: one typo must not take the replica out of service.
    let health = eventually(|| get(&client, "/healthz", None), |a| json(a)["status"] == "degraded").await;
    assert_eq!(health.status, 200);
    assert!(health.text().contains("tokens.meta.json"), "{}", health.text());
    // With no good copy to tell which tokens it governs, every token fails
    // closed (503: the node retries), as a fresh process decides (issue
    // 53: this process having read "no metadata" before changes nothing).
    let ca = certs::mint_node_ca("edge").unwrap();
    let answer = post(&client, &announcement("edge", &ca, "plain-token-0001-long", &new_secret())).await;
    assert_eq!(answer.status, 503, "{}", answer.text());
    // A `tokens` that cannot be read.
    fs::remove_file(fx.state().join("tokens.meta.json")).unwrap();
    fs::remove_file(fx.state().join("tokens")).unwrap();
    fs::create_dir(fx.state().join("tokens")).unwrap();
    let health = eventually(
        || get(&client, "/healthz", None),
        |a| json(a)["status"] == "degraded" && a.text().contains("tokens"),
    )
    .await;
    assert_eq!(health.status, 200);
    server.stop().await;
}

#[test]
fn a_world_writable_state_directory_is_refused_and_leftovers_removed() {
    let fx = Fixture::new();
    fs::create_dir_all(fx.state()).unwrap();
    fs::set_permissions(fx.state(), fs::Permissions::from_mode(0o777)).unwrap();
    let (ok, _, err) = cli(&fx.serve_args());
    assert!(!ok && err.contains("world-writable"), "{err}");
    // Group-writable stays allowed; old temp files go, fresh ones stay.
    fs::set_permissions(fx.state(), fs::Permissions::from_mode(0o770)).unwrap();
    let old = fx.state().join(".tmp-tokens-0123");
    fs::write(&old, b"").unwrap();
    let hour_ago = std::time::SystemTime::now() - Duration::from_secs(3600);
    fs::File::options().write(true).open(&old).unwrap().set_modified(hour_ago).unwrap();
    let fresh = fx.state().join(".tmp-nodes-4567");
    fs::write(&fresh, b"").unwrap();
    let store = Store::open(&fx.state()).unwrap();
    let old_record_temp = fx.state().join("nodes").join(".tmp-0123.json-89ab");
    fs::write(&old_record_temp, b"{").unwrap();
    fs::File::options().write(true).open(&old_record_temp).unwrap().set_modified(hour_ago).unwrap();
    // The server does both at its first maintenance pass, after binding.
    store.remove_leftovers();
    store.unsettled_ids().unwrap();
    assert!(!old.exists() && fresh.exists() && !old_record_temp.exists());
}

#[tokio::test]
async fn a_planted_link_is_never_written_through() {
    let fx = Fixture::new();
    fx.write_tokens("planted-0001-long\n");
    let server = InProcess::start(fx.config()).await;
    let client = node_client(&fx, server.addr);
    let victim = fx.dir.path().join("victim");
    fs::write(&victim, b"precious\n").unwrap();
    // This process's own audit file, as the server in it writes it.
    let audit_file = janus_store::Audit::for_server(&fx.state()).path().to_path_buf();
    std::os::unix::fs::symlink(&victim, &audit_file).unwrap();
    let ca = certs::mint_node_ca("edge").unwrap();
    let answer = post(&client, &announcement("edge", &ca, "planted-0001-long", &new_secret())).await;
    assert_eq!(answer.status, 500, "{}", answer.text());
    assert_eq!(fs::read(&victim).unwrap(), b"precious\n");
    // The admission failed after its claim: nothing is undone, and the
    // node's retry (same CA, same token) finishes it once the link is gone.
    fs::remove_file(&audit_file).unwrap();
    let answer = post(&client, &announcement("edge", &ca, "planted-0001-long", &new_secret())).await;
    assert_eq!(json(&answer)["admitted"], true);
    assert_eq!(whole_admissions(&fx.state()), Ok(1));
    server.stop().await;
}

#[tokio::test]
async fn a_full_disk_spends_no_token_and_the_retry_admits() {
    let fx = Fixture::new();
    let Some(_mount) = Tmpfs::mount(&fx.state(), "1m") else {
        skipped("mount -t tmpfs is refused here");
        return;
    };
    fx.write_tokens("full-disk-0001-long\n");
    let mut config = fx.config();
    config.maintenance_every = Duration::from_secs(3600);
    let server = InProcess::start(config).await;
    let client = node_client(&fx, server.addr);
    // Fill the disk, then every write of the admission fails somewhere.
    let filler = fx.state().join("filler");
    let _ = fs::write(&filler, vec![b'x'; 2 << 20]);
    let ca = certs::mint_node_ca("edge").unwrap();
    let answer = post(&client, &announcement("edge", &ca, "full-disk-0001-long", &new_secret())).await;
    assert_eq!(answer.status, 500, "{}", answer.text());
    assert!(!answer.text().contains("service_cert_pem"));
    // The writes it covers fail: never 200 then.
    let health = eventually(|| get(&client, "/healthz", None), |a| a.status == 503).await;
    assert!(health.text().contains("not writable"), "{}", health.text());
    assert_eq!(whole_admissions(&fx.state()), Ok(0), "no use spent by a failed admission");
    fs::remove_file(&filler).unwrap();
    let answer = post(&client, &announcement("edge", &ca, "full-disk-0001-long", &new_secret())).await;
    assert_eq!(json(&answer)["admitted"], true, "the node's retry is admitted");
    assert_eq!(whole_admissions(&fx.state()), Ok(1));
    let health = eventually(|| get(&client, "/healthz", None), |a| a.status == 200).await;
    assert_eq!(health.status, 200, "healthy again once a write succeeds: {}", health.text());
    server.stop().await;
}

//! The fourth round of attacks (issue 29), each a test: a missing
//! `tokens.meta.json` fails closed, a revoke is final without its metadata,
//! numbers from outside are bounded, a dangling `tokens` link is refused,
//! an admin's forced approval is never undone by an announcement, and a
//! node whose claim stalled before its CA index is readmitted, not parked,
//! and a poll or a readmission whose decisions cannot be looked up is
//! refused, not answered on a guess.

use std::fs;

use crate::common::*;
use janus_registration::certs;
use janus_store::tokens::{META_FILE, META_GOOD_FILE};

async fn status_of(client: &janus_agent::http::Endpoint, name: &str, token: &str) -> (u16, bool) {
    let ca = certs::mint_node_ca(name).unwrap();
    let answer = post(client, &announcement(name, &ca, token, &new_secret())).await;
    let admitted = answer.status == 201 && json(&answer)["admitted"] == true;
    (answer.status, admitted)
}

#[tokio::test]
async fn a_missing_metadata_file_fails_closed_while_its_good_copy_governs() {
    let fx = Fixture::new();
    fx.write_tokens("");
    let server = InProcess::start(fx.config()).await;
    let client = node_client(&fx, server.addr);
    let expired = add_token(&fx.state(), &["--expires-in", "1h"]);
    let multi = add_token(&fx.state(), &["--uses", "5"]);
    assert_eq!(status_of(&client, "m0", &multi).await, (201, true));
    assert_eq!(status_of(&client, "m1", &multi).await, (201, true));
    // Moved aside for an edit, in which the first token's hour is up.
    let aside = fx.dir.path().join("meta.edit");
    let mut book: serde_json::Value =
        serde_json::from_slice(&fs::read(fx.state().join(META_FILE)).unwrap()).unwrap();
    for entry in book.as_object_mut().unwrap().values_mut() {
        if entry.get("expires_at").is_some() {
            entry["expires_at"] = (janus_core::clock::now_unix() - 10).into();
        }
    }
    fs::write(&aside, serde_json::to_vec(&book).unwrap()).unwrap();
    fs::remove_file(fx.state().join(META_FILE)).unwrap();
    for token in [&expired, &multi] {
        let (status, admitted) = status_of(&client, "x", token).await;
        assert_eq!((status, admitted), (503, false), "refused while its metadata is missing");
    }
    let health = get(&client, "/healthz", None).await;
    assert!(String::from_utf8_lossy(&health.body).contains(META_FILE), "{:?}", health.body);
    let (ok, _, err) = admin(&fx.state(), &["tokens", "add"]);
    assert!(!ok && err.contains(META_GOOD_FILE), "an add would drop what the copy governs: {err}");
    // Put back: the multi-use token still has its 3 uses, nothing was blanked.
    fs::rename(&aside, fx.state().join(META_FILE)).unwrap();
    assert!(fx.tokens().contains(&multi), "not blanked while its metadata was missing");
    assert_eq!(status_of(&client, "x", &expired).await, (201, false), "still expired");
    for n in 2..5 {
        assert_eq!(status_of(&client, &format!("m{n}"), &multi).await, (201, true), "use {n}");
    }
    assert_eq!(status_of(&client, "m5", &multi).await, (201, false), "5 uses, not more");
    server.stop().await;
}

#[tokio::test]
async fn a_missing_metadata_file_whose_loss_is_settled_reads_as_none() {
    let fx = Fixture::new();
    fx.write_tokens("");
    let server = InProcess::start(fx.config()).await;
    let client = node_client(&fx, server.addr);
    let token = add_token(&fx.state(), &["--uses", "2"]);
    fs::remove_file(fx.state().join(META_FILE)).unwrap();
    assert_eq!(status_of(&client, "a", &token).await.0, 503);
    // The admin settles the loss as the message says: the good copy goes
    // too, and the ledger's mark that the state had metadata.
    fs::remove_file(fx.state().join(META_GOOD_FILE)).unwrap();
    assert_eq!(status_of(&client, "a", &token).await.0, 503, "the state knows it had metadata");
    fs::remove_file(fx.state().join("token-uses/metadata-existed")).unwrap();
    assert_eq!(status_of(&client, "a", &token).await, (201, true), "a plain token now");
    assert_eq!(status_of(&client, "b", &token).await, (201, false), "one use");
    server.stop().await;
}

#[tokio::test]
async fn a_revoke_is_final_even_while_the_metadata_is_missing() {
    let fx = Fixture::new();
    fx.write_tokens("");
    let server = InProcess::start(fx.config()).await;
    let client = node_client(&fx, server.addr);
    let token = add_token(&fx.state(), &["--uses", "5"]);
    let backup_tokens = fx.tokens();
    let aside = fx.dir.path().join("meta.edit");
    fs::rename(fx.state().join(META_FILE), &aside).unwrap();
    let (ok, out, err) = admin(&fx.state(), &["tokens", "revoke", &token]);
    assert!(ok, "{out}{err}");
    // Metadata and a backup of `tokens` put back.
    fs::rename(&aside, fx.state().join(META_FILE)).unwrap();
    fx.write_tokens(&backup_tokens);
    for n in 0..5 {
        assert_eq!(status_of(&client, &format!("r{n}"), &token).await, (201, false), "revoked: pending");
    }
    let (ok, out, _) = admin(&fx.state(), &["tokens", "list"]);
    assert!(ok && out.contains("0 token(s)"), "{out}");
    server.stop().await;
}

#[test]
fn numbers_from_outside_are_bounded() {
    let fx = Fixture::new();
    fx.write_tokens("");
    janus_store::Store::open(&fx.state()).unwrap();
    for (args, says) in [
        (vec!["--uses", "4294967295"], "--uses must be between 1 and 10000"),
        (vec!["--uses", "0"], "--uses must be between 1 and 10000"),
        (vec!["--count", "0"], "--count must be between 1"),
        (vec!["--count", "100001"], "--count must be between 1"),
        (vec!["--expires-in", "3651d"], "at most 10 years"),
    ] {
        let mut all = vec!["tokens", "add"];
        all.extend(&args);
        let (ok, _, err) = admin(&fx.state(), &all);
        assert!(!ok && err.contains(says), "{args:?}: {err}");
    }
    let long = "d".repeat(1001);
    let (ok, _, err) = admin(&fx.state(), &["tokens", "add", "--description", &long]);
    assert!(!ok && err.contains("at most 1000 characters"), "{err}");
    assert_eq!(fx.tokens(), "", "nothing written by a refused add");
    // A hand edit past the bound makes the metadata unreadable: fail closed.
    let token = add_token(&fx.state(), &["--uses", "10000"]);
    let text = fs::read_to_string(fx.state().join(META_FILE)).unwrap().replace("10000", "4294967295");
    fs::write(fx.state().join(META_FILE), text).unwrap();
    let (ok, out, _) = admin(&fx.state(), &["tokens", "list"]);
    assert!(ok && out.contains("more than 10000 uses"), "{out}");
    assert!(!out.contains(&token[..6]) || out.contains("warning"), "{out}");
}

#[test]
fn tokens_add_through_a_dangling_link_is_refused() {
    let fx = Fixture::new();
    let target = fx.dir.path().join("elsewhere").join("tokens");
    fs::create_dir_all(target.parent().unwrap()).unwrap();
    let _ = fs::remove_file(fx.state().join("tokens"));
    janus_store::Store::open(&fx.state()).unwrap();
    std::os::unix::fs::symlink(&target, fx.state().join("tokens")).unwrap();
    let (ok, _, err) = admin(&fx.state(), &["tokens", "add"]);
    assert!(!ok && err.contains("which does not exist"), "{err}");
    assert!(fs::symlink_metadata(&target).is_err(), "no file made at the link's target");
    fs::write(&target, "").unwrap();
    add_token(&fx.state(), &[]);
    assert_eq!(fs::read_to_string(&target).unwrap().lines().count(), 1, "added through the link");
}

/// Rejects `ca`'s first announcement with `nodes reject`; its id.
async fn rejected_ca(fx: &Fixture, client: &janus_agent::http::Endpoint, ca: &certs::Minted) -> String {
    let (first, _, _) = announce(client, "edge", ca, "").await;
    let (ok, _, err) = admin(&fx.state(), &["nodes", "reject", &first]);
    assert!(ok, "{err}");
    first
}

#[tokio::test]
async fn a_forced_approval_outlives_the_rejected_cas_next_announcements() {
    let fx = Fixture::new();
    let mut args = fx.serve_args();
    args.extend(["--pending-max-age".into(), "1s".into(), "--maintenance-every".into(), "100ms".into()]);
    let server = Process::start(&args);
    let client = node_client(&fx, server.addr);
    let ca = certs::mint_node_ca("edge").unwrap();
    rejected_ca(&fx, &client, &ca).await;
    let (forced, _, _) = announce(&client, "edge", &ca, "").await;
    let (ok, out, err) = admin(&fx.state(), &["nodes", "approve", &forced, "--unchecked", "--force"]);
    assert!(ok, "{out} {err}");
    let (touched, _, _) = announce(&client, "edge", &ca, "").await;
    fs::write(fx.state().join("approved").join(&touched), b"").unwrap();
    // Anyone may announce with the CA's (public) certificate.
    for _ in 0..5 {
        assert_eq!(announce(&client, "edge", &ca, "").await.2, 201);
    }
    let passes = |s: &Process| s.log().matches("state scanned").count();
    let start = passes(&server);
    assert!(
        wait_for(std::time::Duration::from_secs(30), || passes(&server) >= start + 20),
        "{}",
        server.log()
    );
    for id in [&forced, &touched] {
        assert!(fx.state().join("nodes").join(format!("{id}.json")).exists(), "{id}'s record stays");
        assert!(fx.state().join("approved").join(id).exists(), "{id}'s approval stays");
    }
}

#[tokio::test]
async fn concurrent_announcements_of_a_rejected_ca_keep_two_records() {
    let fx = Fixture::new();
    let server = Process::start(&fx.serve_args());
    let client = node_client(&fx, server.addr);
    let ca = certs::mint_node_ca("edge").unwrap();
    rejected_ca(&fx, &client, &ca).await;
    let body = std::sync::Arc::new(announcement("edge", &ca, "", &new_secret()));
    let tasks: Vec<_> = (0..64)
        .map(|_| {
            let (client, body) = (client.clone(), body.clone());
            tokio::spawn(async move { post(&client, &body).await.status })
        })
        .collect();
    for task in tasks {
        assert_eq!(task.await.unwrap(), 201);
    }
    let of_ca = records(&fx.state()).into_iter().filter(|r| r["ca_sha256"] == ca_hash(&ca).as_str()).count();
    assert_eq!(of_ca, 2, "the rejected one and the latest, however many announce at once");
}

#[tokio::test]
async fn a_lifted_rejection_stays_lifted_while_the_ca_announces() {
    let fx = Fixture::new();
    let server = Process::start(&fx.serve_args());
    let client = node_client(&fx, server.addr);
    let ca = certs::mint_node_ca("edge").unwrap();
    let first = rejected_ca(&fx, &client, &ca).await;
    let body = std::sync::Arc::new(announcement("edge", &ca, "", &new_secret()));
    let flood: Vec<_> = (0..4)
        .map(|_| {
            let (client, body) = (client.clone(), body.clone());
            tokio::spawn(async move {
                for _ in 0..25 {
                    post(&client, &body).await;
                }
            })
        })
        .collect();
    let (ok, out, err) = admin(&fx.state(), &["nodes", "forget", &first]);
    assert!(ok && out.contains("lifted"), "{out} {err}");
    for task in flood {
        task.await.unwrap();
    }
    let note = fx.state().join("rejected-cas").join(ca_hash(&ca));
    assert!(!note.exists(), "not written back: {:?}", fs::read_to_string(&note));
    let (_, _, status) = announce(&client, "edge", &ca, "").await;
    assert_eq!(status, 201);
    let (ok, list, _) = admin(&fx.state(), &["nodes", "list", "--rejected"]);
    assert!(ok && !list.contains(&ca_hash(&ca)[..12]), "{list}");
}

#[tokio::test]
async fn an_unreadable_ca_rejection_refuses_the_announcement() {
    let fx = Fixture::new();
    let server = InProcess::start(fx.config()).await;
    let client = node_client(&fx, server.addr);
    let ca = certs::mint_node_ca("edge").unwrap();
    rejected_ca(&fx, &client, &ca).await;
    // A note that cannot be read (a directory where the file should be is
    // EISDIR for root too): neither "rejected" nor "not rejected" is known.
    let note = fx.state().join("rejected-cas").join(ca_hash(&ca));
    fs::remove_file(&note).unwrap();
    fs::create_dir(&note).unwrap();
    let answer = post(&client, &announcement("edge", &ca, "", &new_secret())).await;
    assert_eq!(answer.status, 503, "{}", String::from_utf8_lossy(&answer.body));
    assert!(json(&answer)["error"].is_string());
    server.stop().await;
}

#[tokio::test]
async fn a_link_in_place_of_a_ca_rejection_rejects_and_is_never_followed() {
    let fx = Fixture::new();
    let server = InProcess::start(fx.config()).await;
    let client = node_client(&fx, server.addr);
    let ca = certs::mint_node_ca("edge").unwrap();
    // A link to nothing: followed, it would read "not rejected".
    let target = fx.dir.path().join("nowhere");
    fs::create_dir_all(fx.state().join("rejected-cas")).unwrap();
    let note = fx.state().join("rejected-cas").join(ca_hash(&ca));
    std::os::unix::fs::symlink(&target, &note).unwrap();
    let (id, _, status) = announce(&client, "edge", &ca, "").await;
    assert_eq!(status, 201);
    let (ok, out, _) = admin(&fx.state(), &["nodes", "show", &id]);
    assert!(ok && out.contains("rejected"), "the CA's announcement is rejected: {out}");
    // Its next announcement rewrites the note in place of the link, never through it.
    announce(&client, "edge", &ca, "").await;
    assert!(fs::symlink_metadata(&target).is_err(), "nothing made at the link's target");
    assert!(!fs::symlink_metadata(&note).unwrap().file_type().is_symlink(), "the note replaced the link");
    server.stop().await;
}

#[tokio::test]
async fn a_retry_finds_its_use_when_the_ca_index_was_never_linked() {
    let fx = Fixture::new();
    fx.write_tokens("");
    let server = InProcess::start(fx.config()).await;
    let client = node_client(&fx, server.addr);
    let token = add_token(&fx.state(), &["--uses", "3"]);
    let ca = certs::mint_node_ca("edge").unwrap();
    let (first, _, status) = announce(&client, "edge", &ca, &token).await;
    assert_eq!(status, 201);
    for n in 0..2 {
        announce(&client, "other", &certs::mint_node_ca(&format!("o{n}")).unwrap(), &token).await;
    }
    // As a replica that died between the use's marker and its CA index leaves it.
    let index: Vec<_> = files_below(&fx.state().join("token-uses"))
        .into_iter()
        .filter(|p| p.file_name().unwrap().to_str().unwrap().contains(&format!(".ca-{}", ca_hash(&ca))))
        .collect();
    assert_eq!(index.len(), 1);
    fs::remove_file(&index[0]).unwrap();
    let answer = post(&client, &announcement("edge", &ca, &token, &new_secret())).await;
    assert_eq!((answer.status, json(&answer)["id"].as_str()), (201, Some(first.as_str())), "readmitted");
    assert_eq!(json(&answer)["admitted"], true);
    assert!(index[0].exists(), "the index is made");
    server.stop().await;
}

#[tokio::test]
async fn a_certificate_from_another_fleet_is_refused_on_reload_and_healthz_says_so() {
    use janus_registration::certs as mint;
    let fx = Fixture::new();
    let server = InProcess::start(fx.config()).await;
    let client = node_client(&fx, server.addr);
    let before = presented_certificate(server.addr).await;
    // A pair copied from another fleet: in date, matching, for the right
    // name, but chaining to a root no node here trusts.
    let other = mint::mint_fleet("other", 1).unwrap();
    let stranger = mint::mint_controller(&other.issuing, 30, &["127.0.0.1".into()]).unwrap();
    let good = (fs::read(fx.cert()).unwrap(), fs::read(fx.key()).unwrap());
    certs::write_pair(&fx.dir.path().join("controller"), &stranger, true).unwrap();
    let degraded = eventually(
        || get(&client, "/healthz", None),
        |a| String::from_utf8_lossy(&a.body).contains("changed certificate was refused"),
    )
    .await;
    assert_eq!(degraded.status, 200, "degraded, still serving");
    assert_eq!(json(&degraded)["status"], "degraded");
    assert_eq!(presented_certificate(server.addr).await, before, "the last good pair stays");
    // Put right: served, and healthy again.
    fs::write(fx.key(), &good.1).unwrap();
    fs::write(fx.cert(), &good.0).unwrap();
    let healthy = eventually(|| get(&client, "/healthz", None), |a| json(a)["status"] == "ok").await;
    assert_eq!(healthy.status, 200);
    server.stop().await;
}

#[tokio::test]
async fn a_typo_in_the_metadata_degrades_but_keeps_the_replica_ready() {
    let fx = Fixture::new();
    fx.write_tokens("");
    let server = InProcess::start(fx.config()).await;
    let client = node_client(&fx, server.addr);
    let token = add_token(&fx.state(), &["--uses", "2"]);
    let text = fs::read_to_string(fx.state().join(META_FILE)).unwrap();
    fs::write(fx.state().join(META_FILE), text.replacen('{', "{,", 1)).unwrap();
    let health = eventually(|| get(&client, "/healthz", None), |a| json(a)["status"] == "degraded").await;
    assert_eq!(health.status, 200, "ready: tokenless nodes and polls are served");
    assert!(json(&health)["degraded"][0].as_str().unwrap().contains(META_FILE), "{}", health.text());
    assert_eq!(status_of(&client, "t", &token).await.0, 503, "its tokens refused");
    assert_eq!(status_of(&client, "n", "").await, (201, false), "tokenless: served");
    server.stop().await;
}

#[test]
fn the_probes_have_a_plain_door_of_their_own() {
    let fx = Fixture::new();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut args = fx.serve_args();
    args.extend(["--metrics-listen".to_string(), format!("127.0.0.1:{port}")]);
    args.extend(["--maintenance-every".into(), "200ms".into()]);
    let _server = Process::start(&args);
    let addr = format!("127.0.0.1:{port}");
    let (ok, out, err) = cli(&["healthcheck", "--plain", "--addr", &addr]);
    assert!(ok && out.contains("\"status\":\"ok\""), "{out} {err}");
    let (ok, out, err) = cli(&["healthcheck", "--plain", "--live", "--addr", &addr]);
    assert!(ok && out.contains("alive"), "{out} {err}");
    // Unready (a state format this binary does not know): readiness fails, liveness holds.
    fs::write(fx.state().join("state-format"), "999\n").unwrap();
    let unready =
        wait_for(std::time::Duration::from_secs(20), || !cli(&["healthcheck", "--plain", "--addr", &addr]).0);
    assert!(unready);
    assert!(cli(&["healthcheck", "--plain", "--live", "--addr", &addr]).0);
}

/// Found by the randomized adversary: a server that last read the metadata
/// before a token was added, then found the file broken, took the new
/// token for a plain one: it admitted once, and the tidier dropped the
/// metadata of its other uses.
#[tokio::test]
async fn a_token_added_since_a_replica_last_looked_is_governed_while_the_file_is_broken() {
    let fx = Fixture::new();
    fx.write_tokens("");
    let mut config = fx.config();
    config.maintenance_every = std::time::Duration::from_secs(3600);
    let server = InProcess::start(config).await;
    let client = node_client(&fx, server.addr);
    let first = add_token(&fx.state(), &["--uses", "2"]);
    assert_eq!(status_of(&client, "a", &first).await, (201, true), "the replica has read the metadata");
    let token = add_token(&fx.state(), &["--uses", "3"]);
    let good = fs::read(fx.state().join(META_FILE)).unwrap();
    fs::write(fx.state().join(META_FILE), b"{,").unwrap();
    assert_eq!(status_of(&client, "b", &token).await.0, 503, "governed by the good copy on disk");
    fs::write(fx.state().join(META_FILE), good).unwrap();
    for n in 0..3 {
        assert_eq!(status_of(&client, &format!("c{n}"), &token).await, (201, true), "use {n}: none lost");
    }
    assert_eq!(status_of(&client, "d", &token).await, (201, false));
    server.stop().await;
}

#[tokio::test]
async fn a_refused_fleet_is_said_until_a_good_one_is_back() {
    let fx = Fixture::new();
    let mut args = fx.serve_args();
    args.extend(["--reload-every".into(), "200ms".into()]);
    let server = Process::start(&args);
    let client = node_client(&fx, server.addr);
    let bundle = fx.fleet_dir().join("bundle.json");
    let good = fs::read(&bundle).unwrap();
    fs::write(&bundle, b"{\"version\":2}").unwrap();
    let degraded = eventually(
        || get(&client, "/healthz", None),
        |a| String::from_utf8_lossy(&a.body).contains("changed fleet was refused"),
    )
    .await;
    assert_eq!(
        (degraded.status, json(&degraded)["status"].as_str()),
        (200, Some("degraded")),
        "{}",
        server.log()
    );
    fs::write(&bundle, good).unwrap();
    let healthy = eventually(|| get(&client, "/healthz", None), |a| json(a)["status"] == "ok").await;
    assert_eq!(healthy.status, 200, "{}", server.log());
}

/// Grows `path` past 64 MiB with comment lines, as a runaway script might.
fn grow_past_64_mib(path: &std::path::Path) {
    use std::io::Write;
    let mut file = fs::OpenOptions::new().append(true).create(true).open(path).unwrap();
    let line = format!("# {}\n", "x".repeat(1021));
    let block = line.repeat(1024);
    for _ in 0..=64 {
        file.write_all(block.as_bytes()).unwrap();
    }
}

#[tokio::test]
async fn a_tokens_file_past_its_size_bound_is_refused_not_read() {
    let fx = Fixture::new();
    fx.write_tokens("");
    let server = InProcess::start(fx.config()).await;
    let client = node_client(&fx, server.addr);
    let token = add_token(&fx.state(), &[]);
    grow_past_64_mib(&fx.state().join("tokens"));
    let ca = certs::mint_node_ca("edge").unwrap();
    let answer = post(&client, &announcement("edge", &ca, &token, &new_secret())).await;
    assert_eq!(answer.status, 503, "refused, never taken as not listed: {}", answer.text());
    assert!(json(&answer)["error"].as_str().unwrap().contains("cannot tell"), "{}", answer.text());
    let health = try_get(&client, "/healthz", None).await.unwrap();
    assert_eq!(health.status, 200, "tokenless nodes are still served");
    assert!(health.text().contains("64 MiB"), "degraded, and why: {}", health.text());
    let (ok, _, err) = admin(&fx.state(), &["tokens", "add"]);
    assert!(!ok && err.contains("64 MiB"), "{err}");
    server.stop().await;
}

#[tokio::test]
async fn a_metadata_file_past_its_size_bound_is_unreadable() {
    let fx = Fixture::new();
    fx.write_tokens("");
    let server = InProcess::start(fx.config()).await;
    let client = node_client(&fx, server.addr);
    let token = add_token(&fx.state(), &["--uses", "3"]);
    grow_past_64_mib(&fx.state().join(META_FILE));
    let ca = certs::mint_node_ca("edge").unwrap();
    let answer = post(&client, &announcement("edge", &ca, &token, &new_secret())).await;
    assert_eq!(answer.status, 503, "{}", answer.text());
    assert!(answer.text().contains("64 MiB"), "{}", answer.text());
    let (ok, _, err) = admin(&fx.state(), &["tokens", "add", "--uses", "2"]);
    assert!(!ok && err.contains("64 MiB"), "{err}");
    server.stop().await;
}

/// A state subdirectory moved aside and an empty file put in its place, so
/// a name looked up in it is ENOTDIR (for root too: no permission bit can
/// refuse root); put back when dropped.
struct FileInPlaceOf(std::path::PathBuf, std::path::PathBuf);

impl FileInPlaceOf {
    fn dir(dir: &std::path::Path) -> Self {
        let aside = dir.with_extension("aside");
        fs::rename(dir, &aside).unwrap();
        fs::write(dir, b"").unwrap();
        FileInPlaceOf(dir.to_path_buf(), aside)
    }
}

impl Drop for FileInPlaceOf {
    fn drop(&mut self) {
        fs::remove_file(&self.0).unwrap();
        fs::rename(&self.1, &self.0).unwrap();
    }
}

/// A poll whose decision files cannot be looked up is refused (503): never
/// answered 404, which makes a node forget its enrollment and announce
/// again an hour later without its token, nor 202 or 200 on a guess. Once
/// they can be looked up, the poll is answered again.
#[tokio::test]
async fn a_poll_that_cannot_look_at_its_decisions_is_refused_not_answered() {
    let fx = Fixture::new();
    let server = InProcess::start(fx.config()).await;
    let (client, path, secret) = approved_node(&fx, server.addr).await;
    for sub in ["rejected", "approved", "delivered"] {
        let _unlookable = FileInPlaceOf::dir(&fx.state().join(sub));
        let answer = get(&client, &path, Some(&secret)).await;
        assert_eq!(answer.status, 503, "{sub}: {}", String::from_utf8_lossy(&answer.body));
        assert!(json(&answer)["error"].as_str().unwrap().contains("cannot tell"), "{sub}");
    }
    assert_eq!(get(&client, &path, Some(&secret)).await.status, 200);
    server.stop().await;
}

/// The node that spent a token announces again (its answer was lost) while
/// its approval, or its rejection, cannot be looked up: refused (503, the
/// node retries), never parked as a new pending record on a guess; once
/// they can be, it is readmitted with its first id.
#[tokio::test]
async fn a_readmission_that_cannot_look_at_its_decisions_is_refused_not_parked() {
    let fx = Fixture::new();
    fx.write_tokens("the-token\n");
    let server = InProcess::start(fx.config()).await;
    let client = node_client(&fx, server.addr);
    let ca = certs::mint_node_ca("edge").unwrap();
    let (id, _, status) = announce(&client, "edge", &ca, "the-token").await;
    assert_eq!(status, 201);
    let records_before = records(&fx.state()).len();
    for sub in ["rejected", "approved"] {
        let _unlookable = FileInPlaceOf::dir(&fx.state().join(sub));
        let answer = post(&client, &announcement("edge", &ca, "the-token", &new_secret())).await;
        assert_eq!(answer.status, 503, "{sub}: {}", String::from_utf8_lossy(&answer.body));
        assert!(json(&answer).get("service_cert_pem").is_none());
    }
    assert_eq!(records(&fx.state()).len(), records_before, "nothing parked");
    let answer = post(&client, &announcement("edge", &ca, "the-token", &new_secret())).await;
    assert_eq!((answer.status, json(&answer)["admitted"].as_bool()), (201, Some(true)));
    assert_eq!(json(&answer)["id"], id.as_str(), "its first id");
    server.stop().await;
}

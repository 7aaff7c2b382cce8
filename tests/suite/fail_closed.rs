//! The fourth round of attacks (issue 29), each a test: a missing
//! `tokens.meta.json` fails closed, a revoke is final without its metadata,
//! numbers from outside are bounded, a dangling `tokens` link is refused,
//! an admin's forced approval is never undone by an announcement, and a
//! node whose claim stalled before its CA index is readmitted, not parked.

use std::fs;

use crate::common::*;
use janus_registration::certs;
use janus_registration::store::tokens::{META_FILE, META_GOOD_FILE};

async fn status_of(
    client: &janus_registration::agent::http::Endpoint,
    name: &str,
    token: &str,
) -> (u16, bool) {
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
            entry["expires_at"] = (janus_registration::clock::now_unix() - 10).into();
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
    // The admin settles the loss as the message says: the good copy goes too.
    fs::remove_file(fx.state().join(META_GOOD_FILE)).unwrap();
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
    janus_registration::store::Store::open(&fx.state()).unwrap();
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
    janus_registration::store::Store::open(&fx.state()).unwrap();
    std::os::unix::fs::symlink(&target, fx.state().join("tokens")).unwrap();
    let (ok, _, err) = admin(&fx.state(), &["tokens", "add"]);
    assert!(!ok && err.contains("which does not exist"), "{err}");
    assert!(fs::symlink_metadata(&target).is_err(), "no file made at the link's target");
    fs::write(&target, "").unwrap();
    add_token(&fx.state(), &[]);
    assert_eq!(fs::read_to_string(&target).unwrap().lines().count(), 1, "added through the link");
}

//! The orchestrator's interface (issue 32), as a program uses it: tokens it
//! chose, registered with `tokens add --token`, and what `tokens add
//! --json` says of each token, to match the audit trail by.

use crate::common::*;
use janus_registration::certs;
use janus_registration::pki::sha256_hex;

/// A fixture whose state directory is laid out, as `serve` leaves it.
fn laid_out() -> Fixture {
    let fx = Fixture::new();
    janus_registration::store::Store::open(&fx.state()).unwrap();
    fx
}

fn json_lines(out: &str) -> Vec<serde_json::Value> {
    out.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"))).collect()
}

#[tokio::test]
async fn a_token_the_orchestrator_chose_admits_one_node_and_is_never_listed_again() {
    let fx = laid_out();
    let chosen = "vm-web-3-6f1c2a9b8e7d4c3b";
    let (ok, out, err) =
        admin(&fx.state(), &["tokens", "add", "--token", chosen, "--description", "vm web-3", "--json"]);
    assert!(ok, "{err}");
    let lines = json_lines(&out);
    assert_eq!(lines.len(), 1, "{out}");
    let said = &lines[0];
    assert_eq!(said["token"], chosen);
    assert_eq!(said["sha256"], sha256_hex(chosen.as_bytes()));
    assert_eq!(said["sha256_prefix"], sha256_hex(chosen.as_bytes())[..12]);
    assert_eq!(said["uses"], 1);
    assert_eq!(said["description"], "vm web-3");
    assert!(said["expires_at"].is_null(), "{said}");
    let (ok, _, err) = admin(&fx.state(), &["tokens", "add", "--token", chosen]);
    assert!(!ok);
    assert!(err.contains("refusing: the token given is listed already"), "{err}");
    assert!(!err.contains(chosen), "a refusal never says the token: {err}");

    let server = InProcess::start(fx.config()).await;
    let client = node_client(&fx, server.addr);
    let ca = certs::mint_node_ca("web-3").unwrap();
    let (id, _, status) = announce(&client, "web-3", &ca, chosen).await;
    assert_eq!(status, 201, "admitted by the chosen token");
    let (ok, trail, err) = admin(&fx.state(), &["audit", "--json"]);
    assert!(ok, "{err}");
    let admitted =
        json_lines(&trail).into_iter().find(|e| e["event"] == "admitted" && e["id"] == id.as_str());
    assert_eq!(admitted.expect("an admitted event")["token_sha256_prefix"], said["sha256_prefix"]);
    let (ok, _, err) = admin(&fx.state(), &["tokens", "add", "--token", chosen]);
    assert!(!ok, "a spent token is never listed again");
    assert!(err.contains("refusing: the token given has admitted a node before; choose another"), "{err}");
}

#[test]
fn a_revoked_token_is_not_registered_again() {
    let fx = laid_out();
    let chosen = "orchestrator-chosen-0001";
    add_token(&fx.state(), &["--token", chosen]);
    let (ok, _, err) = admin(&fx.state(), &["tokens", "revoke", chosen]);
    assert!(ok, "{err}");
    let (ok, _, err) = admin(&fx.state(), &["tokens", "add", "--token", chosen]);
    assert!(!ok);
    assert!(err.contains("refusing: the token given was revoked; choose another"), "{err}");
}

#[test]
fn a_chosen_token_a_node_could_not_present_or_anyone_could_guess_is_refused() {
    let fx = laid_out();
    let long = "x".repeat(513);
    let printable = "--token must be at most 512 printable ASCII characters, without spaces";
    for (token, says) in [
        ("short-token", "--token must be at least 16 characters: a shorter one is guessable"),
        ("with a space in it, long", printable),
        ("tab\tinside-the-token", printable),
        ("ünïcode-token-value-x", printable),
        (long.as_str(), printable),
        (
            "#looks-like-a-comment-line",
            "--token must not start with '#': the tokens file reads that line as a comment",
        ),
    ] {
        let (ok, _, err) = admin(&fx.state(), &["tokens", "add", "--token", token]);
        assert!(!ok, "{token:?} refused");
        assert!(err.contains(says), "{token:?}: {err}");
    }
    let (ok, _, err) = admin(&fx.state(), &["tokens", "add", "--token", "abcdefghijklmnop", "--count", "2"]);
    assert!(!ok);
    assert!(err.contains("cannot be used with"), "{err}");
    let (ok, listed, err) = admin(&fx.state(), &["tokens", "list", "--json"]);
    assert!(ok, "{err}");
    assert_eq!(listed.trim(), "", "nothing was listed");
}

#[test]
fn tokens_add_json_says_each_tokens_expiry_and_uses() {
    let fx = laid_out();
    let (ok, out, err) =
        admin(&fx.state(), &["tokens", "add", "--count", "2", "--expires-in", "2h", "--uses", "3", "--json"]);
    assert!(ok, "{err}");
    let lines = json_lines(&out);
    assert_eq!(lines.len(), 2, "{out}");
    for said in &lines {
        let token = said["token"].as_str().unwrap();
        assert_eq!(said["sha256"], sha256_hex(token.as_bytes()));
        assert_eq!(said["uses"], 3);
        assert!(said["description"].is_null());
        let expires = said["expires_at"].as_str().unwrap();
        assert!(expires.ends_with('Z') && expires.len() == 20, "RFC 3339 in UTC: {expires}");
    }
    assert_ne!(lines[0]["token"], lines[1]["token"]);
}

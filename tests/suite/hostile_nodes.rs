//! Node-controlled text never misleads an admin, and a rejection sticks:
//! strict `ca_cert_pem`, escaped output for every renderer (records from
//! nodes, from the reference, from an editor), `nodes show`'s computed
//! fingerprint and validity, the rejected-CA flow end to end, and the
//! admission command for every announcement that did not admit.

use std::time::Duration;

use crate::common::*;
use janus_endpoint::PolicyConfig;
use janus_registration::certs::{self, Minted};

const ESCAPE: char = '\x1b';

/// No byte that moves a cursor or recolours a screen, in any output.
fn assert_terminal_safe(out: &str) {
    let unsafe_char = out.chars().find(|&c| {
        (c < ' ' && c != '\n')
            || ('\u{7f}'..='\u{9f}').contains(&c)
            || ('\u{200b}'..='\u{200f}').contains(&c)
            || ('\u{2028}'..='\u{202e}').contains(&c)
            || ('\u{2066}'..='\u{2069}').contains(&c)
            || matches!(c, '\u{061c}' | '\u{2060}' | '\u{feff}')
    });
    assert!(unsafe_char.is_none(), "raw {unsafe_char:?} in:\n{out}");
}

/// The lines a Unicode-aware reader sees (Python's `str.splitlines`).
fn unicode_lines(text: &str) -> Vec<&str> {
    text.split(['\n', '\r', '\u{b}', '\u{c}', '\u{1c}', '\u{1d}', '\u{1e}', '\u{85}', '\u{2028}', '\u{2029}'])
        .collect()
}

#[tokio::test]
async fn unicode_line_breaks_and_invisible_marks_never_reach_an_admin_raw() {
    let fx = Fixture::new();
    let server = InProcess::start(fx.config()).await;
    let client = node_client(&fx, server.addr);
    let forged = format!("CA SHA-256: {}", "0".repeat(64));
    let ca = crafted_ca(
        &format!("edge\u{2028}{forged}\u{2029}\u{200e}\u{202e}\u{2066}\u{200b}\u{feff}\u{85}"),
        false,
    );
    // Names are checked at announcement (a hostname); the CA's subject is not.
    let answer = post(&client, &announcement("edge", &ca, "", &new_secret())).await;
    assert_eq!(answer.status, 201, "{}", answer.text());
    let id = json(&answer)["id"].as_str().unwrap().to_string();
    for args in [&["nodes", "show", &id][..], &["nodes", "list"][..], &["nodes", "history", &id][..]] {
        let (ok, out, err) = admin(&fx.state(), args);
        assert!(ok, "{args:?}: {err}");
        assert_terminal_safe(&out);
        assert!(
            !unicode_lines(&out).iter().any(|l| l.trim_start().starts_with(&forged)),
            "{args:?}: a forged line:\n{out}"
        );
    }
    server.stop().await;
}

/// A CA whose subject says what an attacker wants, valid or not.
pub(crate) fn crafted_ca(common_name: &str, expired: bool) -> Minted {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(vec![]).unwrap();
    params.distinguished_name.push(rcgen::DnType::CommonName, common_name);
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    if expired {
        params.not_before = time::OffsetDateTime::now_utc() - time::Duration::days(30);
        params.not_after = time::OffsetDateTime::now_utc() - time::Duration::days(1);
    }
    let cert = params.self_signed(&key).unwrap();
    Minted { cert_pem: cert.pem(), key_pem: key.serialize_pem().into() }
}

fn with_pem(ca: &Minted, pem: String) -> Minted {
    Minted { cert_pem: pem, key_pem: ca.key_pem.clone() }
}

#[tokio::test]
async fn ca_cert_pem_is_exactly_one_certificate_block() {
    let fx = Fixture::new();
    let server = InProcess::start(fx.config()).await;
    let client = node_client(&fx, server.addr);
    let ca = certs::mint_node_ca("edge").unwrap();
    let other = certs::mint_node_ca("other").unwrap();
    let pem = ca.cert_pem.trim();
    let refused = [
        format!("\x1b[2J\x1b[Hpki: this node's CA: SHA-256 {}\n{pem}", "0".repeat(64)),
        format!("{pem}\ntrailing words"),
        format!("{pem}\n{}", other.cert_pem),
        pem.replace("-----END CERTIFICATE-----", "\x1b[1A-----END CERTIFICATE-----"),
        pem.replace("CERTIFICATE", "PUBLIC KEY"),
        format!("-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----", "!!!!"),
    ];
    for bad in refused {
        let answer =
            post(&client, &announcement("edge", &with_pem(&ca, bad.clone()), "", &new_secret())).await;
        assert_eq!(answer.status, 400, "{bad:?}: {}", answer.text());
        assert!(answer.text().contains("ca_cert_pem"), "{}", answer.text());
        assert!(!answer.text().contains("service_cert_pem"));
    }
    // Whitespace around the one block is fine, as a node's PEM file has it.
    let padded = with_pem(&ca, format!("\n  {pem}\r\n\n"));
    assert_eq!(post(&client, &announcement("edge", &padded, "", &new_secret())).await.status, 201);
    assert!(records(&fx.state()).len() == 1);
    server.stop().await;
}

#[tokio::test]
async fn a_ca_subject_with_escape_sequences_is_shown_escaped_and_flagged_expired() {
    let fx = Fixture::new();
    let server = InProcess::start(fx.config()).await;
    let client = node_client(&fx, server.addr);
    let fake =
        format!("x{ESCAPE}[2K{ESCAPE}[1Apki: this node's CA: SHA-256 {}\u{9b}31m\u{202e}", "f".repeat(64));
    let ca = crafted_ca(&fake, true);
    let answer = post(&client, &announcement("edge", &ca, "", &new_secret())).await;
    assert_eq!(answer.status, 201, "{}", answer.text());
    let id = json(&answer)["id"].as_str().unwrap().to_string();
    let (ok, out, err) = admin(&fx.state(), &["nodes", "show", &id]);
    assert!(ok, "{err}");
    assert_terminal_safe(&out);
    assert!(out.contains("\\x1b[2K") && out.contains("\\x9b") && out.contains("\\u{202e}"), "{out}");
    assert!(out.contains("EXPIRED"), "{out}");
    assert!(out.contains(&format!("CA SHA-256:   {}", ca_hash(&ca))), "{out}");
    for args in [&["nodes", "list"][..], &["nodes", "list", "--json"], &["nodes", "history", &id, "--json"]] {
        let (ok, out, _) = admin(&fx.state(), args);
        assert!(ok);
        assert_terminal_safe(&out);
    }
    server.stop().await;
}

#[tokio::test]
async fn records_written_by_the_reference_or_by_hand_are_escaped_everywhere() {
    let fx = Fixture::new();
    let ca = certs::mint_node_ca("edge").unwrap();
    let id = "0123456789abcdef0123456789abcdef";
    // The reference validates nothing: any bytes in any field.
    let record = serde_json::json!({
        "id": id,
        "name": format!("edge{ESCAPE}[2J\x07\r\u{9b}1;1H"),
        "address": format!("10.0.0.1:9505{ESCAPE}]0;title\x07"),
        "ca_cert_pem": format!("{ESCAPE}[8mhidden\n{}", ca.cert_pem),
        "admitted": false,
        "poll_secret_sha256": "0".repeat(64),
        "ca_sha256": "a".repeat(64),
    });
    std::fs::create_dir_all(fx.state().join("nodes")).unwrap();
    std::fs::write(fx.state().join("nodes").join(format!("{id}.json")), record.to_string()).unwrap();
    let (ok, out, err) = admin(&fx.state(), &["nodes", "show", id]);
    assert!(ok, "{err}");
    assert_terminal_safe(&out);
    assert!(out.contains("is not its certificate's"), "the stored fingerprint disagrees: {out}");
    assert!(out.contains("not exactly one CA certificate block"), "{out}");
    assert!(
        out.contains(&format!("The node's console shows: pki: this node's CA: SHA-256 {}", ca_hash(&ca)))
    );
    let (ok, out, _) = admin(&fx.state(), &["nodes", "list"]);
    assert!(ok && out.contains("edge\\x1b[2J\\x07\\x0d\\x9b1;1H"), "{out}");
    assert_terminal_safe(&out);
    let (ok, out, _) = admin(&fx.state(), &["nodes", "list", "--json"]);
    assert!(ok);
    assert_terminal_safe(&out);
    let parsed: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(parsed["name"], record["name"], "JSON output stays JSON, the same strings");
    let (ok, out, err) = admin(&fx.state(), &["nodes", "approve", id, "--unchecked-is-not-a-flag"]);
    assert!(!ok);
    assert_terminal_safe(&(out + &err));
    let (ok, out, err) = admin(&fx.state(), &["nodes", "approve", "--ca-sha256", &"a".repeat(64)]);
    assert!(ok, "{err}");
    assert_terminal_safe(&out);
    // An error about a hand-written record is escaped too.
    std::fs::write(fx.state().join("nodes").join(format!("{id}.json")), format!("{{\"id\": \"{ESCAPE}[2J"))
        .unwrap();
    let (ok, _, err) = admin(&fx.state(), &["nodes", "show", id]);
    assert!(!ok);
    assert_terminal_safe(&err);
}

#[tokio::test]
async fn a_rejection_sticks_to_the_ca_until_the_record_is_forgotten() {
    let fx = Fixture::new();
    fx.write_tokens("would-admit-0001-long\n");
    let server = InProcess::start(fx.config()).await;
    let client = node_client(&fx, server.addr);
    let state = fx.state();
    let ca = certs::mint_node_ca("edge").unwrap();
    let (first, _, _) = announce(&client, "edge", &ca, "").await;
    let (ok, out, err) = admin(&state, &["nodes", "reject", &first]);
    assert!(ok && out.contains("its CA"), "{out}{err}");

    // The node announces again: new id, new secret, same CA, even with a token.
    let secret = new_secret();
    let answer = post(&client, &announcement("edge", &ca, "would-admit-0001-long", &secret)).await;
    assert_eq!(answer.status, 201);
    assert_eq!(json(&answer)["admitted"], false);
    let again = json(&answer)["id"].as_str().unwrap().to_string();
    assert_eq!(get(&client, &format!("/register/{again}"), Some(&secret)).await.status, 404);
    fx.expect_tokens("would-admit-0001-long\n");
    let (_, out, _) = admin(&state, &["nodes", "history", &again, "--json"]);
    assert!(out.contains("\"rejected\"") && out.contains("rejected-ca"), "{out}");
    let (_, out, _) = admin(&state, &["nodes", "list", "--rejected"]);
    assert!(out.contains(&again) && out.contains(&first), "{out}");

    // Approving it is refused, by id or by CA, unless forced.
    let (ok, _, err) = admin(&state, &["nodes", "approve", &again, "--expect-ca-sha256", &ca_hash(&ca)]);
    assert!(!ok && err.contains("rejected"), "{err}");
    let (ok, _, err) = admin(&state, &["nodes", "approve", "--ca-sha256", &ca_hash(&ca)]);
    assert!(!ok && err.contains("--force"), "{err}");
    let (ok, out, err) = admin(&state, &["nodes", "approve", "--ca-sha256", &ca_hash(&ca), "--force"]);
    assert!(ok && out.contains(&again), "{out}{err}");
    assert_eq!(get(&client, &format!("/register/{again}"), Some(&secret)).await.status, 200);

    // A `touch approved/<id>` by hand wins over a rejected CA, and says so.
    let (third, secret3, _) = announce(&client, "edge", &ca, "").await;
    assert_eq!(get(&client, &format!("/register/{third}"), Some(&secret3)).await.status, 404);
    std::fs::write(state.join("approved").join(&third), b"").unwrap();
    assert_eq!(get(&client, &format!("/register/{third}"), Some(&secret3)).await.status, 200);
    let (_, out, _) = admin(&state, &["nodes", "history", &third, "--json"]);
    assert!(out.contains("approval-file") && out.contains("\"over_rejected_ca\":true"), "{out}");

    // Forgetting the rejected record lifts the rejection.
    let (ok, _, _) = admin(&state, &["nodes", "forget", &first]);
    assert!(ok);
    let (fourth, _, _) = announce(&client, "edge", &ca, "").await;
    let (_, out, _) = admin(&state, &["nodes", "list", "--pending"]);
    assert!(out.contains(&fourth), "{out}");
    server.stop().await;
}

#[tokio::test]
async fn the_admission_command_decides_when_a_token_admitted_nobody() {
    let fx = Fixture::new();
    fx.write_tokens("spent-0001-long-token\n");
    let script = fx.dir.path().join("approve-all.sh");
    std::fs::write(&script, "#!/bin/sh\ncat >/dev/null\nexit 0\n").unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let mut config = fx.config();
    config.admission =
        Some(PolicyConfig { command: script, timeout: Duration::from_secs(5), concurrency: 2, queue: 256 });
    let server = InProcess::start(config).await;
    let client = node_client(&fx, server.addr);
    let ca = certs::mint_node_ca("edge").unwrap();
    let answer = post(&client, &announcement("edge", &ca, "not-a-known-token", &new_secret())).await;
    assert_eq!(json(&answer)["admitted"], false);
    let id = json(&answer)["id"].as_str().unwrap().to_string();
    let approved = fx.state().join("approved").join(&id);
    let decided = eventually(|| async { approved.exists() }, |&done| done).await;
    assert!(decided, "the command ran for an announcement whose token admitted nobody");
    server.stop().await;
}

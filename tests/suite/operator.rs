//! The admin commands as salt-key, kubeadm token and puppetserver ca users
//! expect them: checked approvals, nodes named by prefix or name, repeats
//! that say "already", text for people and JSON for machines, a global
//! audit view, shell completions and a manual page, and a demo that never
//! wipes a running demo's state.

use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::*;
use janus_registration::certs;

async fn announced(client: &janus_agent::http::Endpoint, name: &str) -> String {
    announce(client, name, &certs::mint_node_ca(name).unwrap(), "").await.0
}

fn events_of(state: &std::path::Path, id: &str, event: &str) -> usize {
    audit_trail(state)
        .lines()
        .filter(|l| l.contains(id) && l.contains(&format!("\"event\":\"{event}\"")))
        .count()
}

#[tokio::test]
async fn approvals_are_checked_named_flexibly_and_idempotent() {
    let fx = Fixture::new();
    let server = InProcess::start(fx.config()).await;
    let client = node_client(&fx, server.addr);
    let state = fx.state();
    let a1 = announced(&client, "edge-a").await;
    let _a2 = announced(&client, "edge-a").await;
    let b = announced(&client, "edge-b").await;

    // No check, no approval: the command says which flag to give.
    let (ok, _, err) = admin(&state, &["nodes", "approve", "edge-b"]);
    assert!(!ok && err.contains("--console") && err.contains("--unchecked"), "{err}");
    let (ok, out, err) = admin(&state, &["nodes", "approve", "edge-b", "--unchecked"]);
    assert!(ok && out.contains(&b), "{out}{err}");
    // Again: already, exit 0, no second event.
    let (ok, out, _) = admin(&state, &["nodes", "approve", &b, "--unchecked"]);
    assert!(ok && out.contains("already approved"), "{out}");
    assert_eq!(events_of(&state, &b, "admitted"), 1);

    // An ambiguous name lists its candidates and fails; a prefix picks one.
    let (ok, _, err) = admin(&state, &["nodes", "approve", "edge-a", "--unchecked"]);
    assert!(!ok && err.contains("matches 2 nodes") && err.contains(&a1), "{err}");
    let (ok, _, err) = admin(&state, &["nodes", "show", &a1[..5]]);
    assert!(!ok, "five digits are not a prefix: {err}");
    let (ok, out, _) = admin(&state, &["nodes", "show", &a1[..8], "--json"]);
    assert!(ok, "{out}");
    let shown: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(shown["id"], a1.as_str());
    assert!(shown["ca_subject"].as_str().unwrap().contains("edge-a") && shown["ca_not_after"].is_string());

    // Reject twice: already, one event.
    for expected in ["rejected", "already rejected"] {
        let (ok, out, _) = admin(&state, &["nodes", "reject", &a1[..10]]);
        assert!(ok && out.contains(expected), "{out}");
    }
    assert_eq!(events_of(&state, &a1, "rejected"), 1);

    // History: text for people, JSON for machines.
    let (ok, text, _) = admin(&state, &["nodes", "history", &b]);
    assert!(
        ok && text.lines().next().unwrap().contains("announced") && text.contains("by=command"),
        "{text}"
    );
    let (_, lines, _) = admin(&state, &["nodes", "history", &b, "--json"]);
    assert!(lines.lines().all(|l| serde_json::from_str::<serde_json::Value>(l).is_ok()));

    // The global view: every writer's events, and an earlier version's
    // audit.jsonl, merged in time order; --since drops the old ones.
    std::fs::write(
        state.join("audit.jsonl"),
        "{\"at\":\"2020-01-01T00:00:00Z\",\"event\":\"announced\",\"id\":\"old-one\"}\n",
    )
    .unwrap();
    let (ok, all, _) = admin(&state, &["audit", "--json"]);
    assert!(
        ok && all.lines().next().unwrap().contains("old-one") && all.contains(&a1) && all.contains(&b),
        "{all}"
    );
    let (ok, recent, _) = admin(&state, &["audit", "--since", "1h"]);
    assert!(ok && !recent.contains("old-one") && recent.contains(&b), "{recent}");
    server.stop().await;
}

#[tokio::test]
async fn audit_follow_prints_new_events_as_they_come() {
    let fx = Fixture::new();
    let server = InProcess::start(fx.config()).await;
    let client = node_client(&fx, server.addr);
    announced(&client, "first").await;
    let mut follower = Command::new(BIN)
        .args(["audit", "--follow", "--json", "--state"])
        .arg(fx.state())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = follower.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let first = rx.recv_timeout(Duration::from_secs(10)).expect("the existing event");
    assert!(first.contains("first"));
    let later = announced(&client, "later").await;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let mut seen = false;
    while !seen && std::time::Instant::now() < deadline {
        seen = rx.recv_timeout(Duration::from_millis(200)).is_ok_and(|l| l.contains(&later));
    }
    let _ = follower.kill();
    let _ = follower.wait();
    assert!(seen, "the new event was followed");
    server.stop().await;
}

#[test]
fn tokens_have_descriptions_rfc3339_times_and_revoke_by_their_listed_hash() {
    let fx = Fixture::new();
    std::fs::create_dir_all(fx.state().join("nodes")).unwrap();
    let state = fx.state();
    let (ok, made, _) =
        admin(&state, &["tokens", "add", "--count", "2", "--expires-in", "2h", "--description", "rack 3"]);
    assert!(ok);
    let (ok, list, _) = admin(&state, &["tokens", "list"]);
    assert!(ok && list.contains("rack 3"), "{list}");
    let (_, lines, _) = admin(&state, &["tokens", "list", "--json"]);
    let first: serde_json::Value = serde_json::from_str(lines.lines().next().unwrap()).unwrap();
    let expires = first["expires_at"].as_str().unwrap();
    assert!(expires.ends_with('Z') && expires.contains('T'), "{expires}");
    assert_eq!(first["description"], "rack 3");
    let hash = first["sha256_prefix"].as_str().unwrap().to_string();
    let (ok, out, err) = admin(&state, &["tokens", "revoke", &hash[..8]]);
    assert!(ok, "{out}{err}");
    let (_, lines, _) = admin(&state, &["tokens", "list", "--json"]);
    assert_eq!(lines.lines().count(), 1, "{lines}");
    assert!(!lines.contains(&hash));
    assert_eq!(made.lines().count(), 2);
}

#[test]
fn completions_and_a_manual_page() {
    for shell in ["bash", "zsh", "fish"] {
        let (ok, text, _) = cli(&["completions", shell]);
        assert!(ok && text.contains("janus-registration") && text.contains("approve"), "{shell}");
    }
    let (ok, page, _) = cli(&["manpage"]);
    assert!(ok && page.starts_with(".ie") || page.contains(".TH"), "{page}");
}

#[test]
fn a_second_demo_never_touches_a_running_demos_state() {
    let dir = tempfile::tempdir().unwrap();
    let args = |listen: &str| {
        vec![
            "demo".to_string(),
            "--dir".into(),
            dir.path().to_str().unwrap().into(),
            "--listen".into(),
            listen.into(),
            "--admin-listen".into(),
            "127.0.0.1:0".into(),
        ]
    };
    let demo = Process::start(&args("127.0.0.1:0"));
    let state = dir.path().join("demo-state");
    let example = state.join("nodes").join("8f14e45fceea167a5a36dedd4bea2543.json");
    let record: serde_json::Value = serde_json::from_slice(&std::fs::read(&example).unwrap()).unwrap();
    let announced = record["announced_at"].as_str().unwrap();
    let now = janus_core::clock::now_rfc3339();
    assert_eq!(announced[..13], now[..13], "the example is announced when the demo starts");
    let sentinel = state.join("approved").join("0123456789abcdef0123456789abcdef");
    std::fs::write(&sentinel, b"").unwrap();
    let (ok, _, err) = cli(&args("127.0.0.1:0"));
    assert!(!ok && err.contains("already running"), "{err}");
    assert!(sentinel.exists(), "the running demo's state is untouched");
    drop(demo);
}

#[test]
fn every_option_has_help_and_every_group_an_example() {
    use clap::CommandFactory;
    fn walk(command: &clap::Command, path: &str) {
        for arg in command.get_arguments() {
            let id = arg.get_id().as_str();
            if matches!(id, "help" | "version") {
                continue;
            }
            assert!(arg.get_help().is_some(), "{path} --{id} has no description");
        }
        for sub in command.get_subcommands() {
            walk(sub, &format!("{path} {}", sub.get_name()));
        }
    }
    let cli = janus_registration::cli::Cli::command();
    walk(&cli, "janus-registration");
    for group in ["nodes", "tokens", "certs", "agent", "audit"] {
        let sub = cli.find_subcommand(group).unwrap();
        let help = sub.get_after_help().map(|h| h.to_string()).unwrap_or_default();
        assert!(help.contains("Example"), "{group} shows no example");
    }
    let log_format = cli.get_arguments().find(|a| a.get_id() == "log_format").unwrap();
    assert_eq!(log_format.get_help_heading(), Some("Logging"));
}

/// Issue 55: `demo` serves the admin console for a credential it mints
/// (with its PKCS#12), and the commands it prints import that credential
/// into a fresh Chromium profile (its NSS database made when missing) and
/// a fresh Firefox one, as a person would run them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_serves_the_console_and_its_import_commands_work() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap().to_string();
    let args: Vec<String> =
        ["demo", "--dir", &path, "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"]
            .map(String::from)
            .to_vec();
    let demo = Process::start(&args);
    let mut admin = None;
    assert!(
        wait_for(Duration::from_secs(20), || {
            admin = demo
                .log()
                .split("admin_listen=")
                .nth(1)
                .and_then(|r| r.split_whitespace().next()?.parse().ok());
            admin.is_some()
        }),
        "the console listens: {}",
        demo.log()
    );
    let admin: std::net::SocketAddr = admin.unwrap();
    let certs_dir = dir.path().join("certs");
    let read = |name: &str| std::fs::read(certs_dir.join(name)).unwrap();
    let client = janus_admin::api::client::AdminClient::new(
        &format!("https://{admin}"),
        &read("fleet/root.crt"),
        &read("demo-admin.crt"),
        &read("demo-admin.key"),
    )
    .unwrap();
    let page = client.exchange("GET", "/console/", &[("Sec-Fetch-Site", "none")], Vec::new()).await.unwrap();
    assert_eq!(page.status, 200, "{}", page.text());
    assert!(page.text().contains("Pending nodes") && page.text().contains("demo-admin"), "{}", page.text());
    drop(demo);

    // The import commands, as printed.
    let demo_admin = janus_registration::demo::mint_admin_missing(&certs_dir).unwrap();
    let said =
        janus_registration::demo::console_instructions(&demo_admin, &certs_dir.join("fleet/root.crt"), 8444)
            .unwrap();
    let block = |from: &str, launch: &str| -> Vec<String> {
        said.split(from)
            .nth(1)
            .unwrap()
            .lines()
            .skip(1)
            .take_while(|l| !l.trim_start().starts_with(launch))
            .map(|l| l.trim().to_string())
            .collect()
    };
    let chromium = block("Chromium on Linux", "chromium ");
    let firefox = block("Firefox (", "firefox ");
    assert_eq!((chromium.len(), firefox.len()), (3, 3), "{said}");
    if Command::new("pk12util").arg("-h").output().is_err() {
        return skipped("pk12util (libnss3-tools) is not installed");
    }
    let home = tempfile::tempdir().unwrap();
    for line in chromium.iter().chain(&firefox) {
        let ran = Command::new("sh").arg("-c").arg(line).env("HOME", home.path()).output().unwrap();
        assert!(ran.status.success(), "{line}: {}", String::from_utf8_lossy(&ran.stderr));
    }
    let firefox_db = format!("sql:{}", certs_dir.join("firefox-profile").display());
    let chromium_db = format!("sql:{}/.pki/nssdb", home.path().display());
    for db in [chromium_db, firefox_db] {
        let listed = Command::new("certutil").args(["-L", "-d", &db]).output().unwrap();
        let listed = String::from_utf8_lossy(&listed.stdout).to_string();
        assert!(listed.contains("janus DEVELOPMENT fleet") && listed.contains("u,u,u"), "{db}: {listed}");
    }
}

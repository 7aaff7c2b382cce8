//! A new operator's frictions, each pinned by the sentence a person sees: a
//! typo'd `--state`, a port in use, a first start, a rejected CA's node,
//! short and ambiguous prefixes, `certs` into a new directory, a closed
//! pipe, one manual page per command, suggestions, and the demo's lock.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::*;
use janus_registration::certs;

fn serve_with_state(fx: &Fixture, state: &std::path::Path, listen: &str) -> Vec<String> {
    let mut args = fx.serve_args();
    let at = args.iter().position(|a| a == "--state").unwrap();
    args[at + 1] = state.to_str().unwrap().to_string();
    let at = args.iter().position(|a| a == "--listen").unwrap();
    args[at + 1] = listen.to_string();
    args
}

#[test]
fn a_typo_in_state_starts_nothing_and_says_so() {
    let fx = Fixture::new();
    let typo = fx.dir.path().join("nope").join("deeper").join("state");
    let (code, _, err) = cli_exit(Command::new(BIN).args(serve_with_state(&fx, &typo, "127.0.0.1:0")));
    assert_eq!(code, Some(1), "{err}");
    let expected = format!(
        "{} does not exist, nor does its parent {}: make the parent first (the endpoint makes only the state \
         directory itself, 0700), or check --state for a typo",
        typo.display(),
        typo.parent().unwrap().display()
    );
    assert!(err.contains(&expected), "{err}");
    assert!(!fx.dir.path().join("nope").exists(), "nothing made");
}

#[test]
fn a_port_in_use_leaves_no_state_behind() {
    let fx = Fixture::new();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let listen = taken.local_addr().unwrap().to_string();
    let state = fx.dir.path().join("fresh-state");
    let (code, _, err) = cli_exit(Command::new(BIN).args(serve_with_state(&fx, &state, &listen)));
    assert_eq!(code, Some(1));
    assert!(err.contains(&format!("cannot listen on {listen}")), "{err}");
    assert!(!state.exists(), "the state directory is made only once the port is bound");
}

#[test]
fn a_first_start_says_so_in_one_line() {
    let fx = Fixture::new();
    let server = Process::start(&fx.serve_args());
    let log = server.log();
    assert!(wait_for(Duration::from_secs(10), || server.log().contains("laid out a new state directory")));
    assert!(!log.contains("again"), "no alarming warning at a first start: {log}");
    assert_eq!(server.log().matches("laid out a new state directory").count(), 1);
}

#[tokio::test]
async fn approving_a_node_whose_ca_was_rejected_names_force_and_audits_it() {
    let fx = Fixture::new();
    let server = InProcess::start(fx.config()).await;
    let client = node_client(&fx, server.addr);
    let ca = certs::mint_node_ca("edge").unwrap();
    let (first, _, _) = announce(&client, "edge", &ca, "").await;
    let (ok, _, err) = admin(&fx.state(), &["nodes", "reject", &first]);
    assert!(ok, "{err}");
    let (again, _, _) = announce(&client, "edge", &ca, "").await;
    let (ok, _, err) = admin(&fx.state(), &["nodes", "approve", &again, "--unchecked"]);
    assert!(!ok);
    assert!(
        err.contains(&format!(
            "{again} was rejected because its CA {} was, and so is every later announcement of that CA; approve \
             it anyway with --force",
            ca_hash(&ca)
        )),
        "{err}"
    );
    let (ok, out, err) = admin(&fx.state(), &["nodes", "approve", &again, "--unchecked", "--force"]);
    assert!(ok, "{out} {err}");
    let trail = audit_trail(&fx.state());
    let admitted =
        trail.lines().find(|l| l.contains("\"event\":\"admitted\"") && l.contains(&again)).unwrap();
    assert!(admitted.contains("\"forced_over_rejected_ca\":true"), "{admitted}");
    server.stop().await;
}

#[test]
fn token_prefixes_need_six_characters_and_ambiguity_lists_candidates() {
    let fx = Fixture::new();
    fx.write_tokens("abcdef-first-token\nabcdef-second-token\n");
    std::fs::create_dir_all(fx.state().join("nodes")).unwrap();
    let (ok, _, err) = admin(&fx.state(), &["tokens", "revoke", "a"]);
    assert!(!ok && err.contains("a prefix needs 6 characters or more"), "{err}");
    let (ok, _, err) = admin(&fx.state(), &["tokens", "revoke", "abcdef"]);
    assert!(!ok);
    assert!(
        err.contains("the prefix matches 2 tokens; give more of it:\n  abcdef…"),
        "lines, not \\x0a: {err}"
    );
    assert!(!err.contains("\\x0a"));
    assert_eq!(fx.tokens(), "abcdef-first-token\nabcdef-second-token\n", "nothing revoked");
}

#[tokio::test]
async fn our_own_multi_line_messages_print_as_lines_and_suggestions_are_made() {
    let fx = Fixture::new();
    let server = InProcess::start(fx.config()).await;
    let client = node_client(&fx, server.addr);
    for n in 0..2 {
        announce(&client, "edge-3", &certs::mint_node_ca(&format!("e{n}")).unwrap(), "").await;
    }
    let (ok, _, err) = admin(&fx.state(), &["nodes", "show", "edge-3"]);
    assert!(!ok && err.contains("\"edge-3\" matches 2 nodes; name one by its id:\n  "), "{err}");
    assert!(!err.contains("\\x0a"), "{err}");
    let (ok, _, err) = admin(&fx.state(), &["nodes", "show", "4b6a"]);
    assert!(!ok && err.contains("an id prefix needs 6 hex digits or more (e.g. 4b6ac3)"), "{err}");
    announce(&client, "edge-7", &certs::mint_node_ca("e7").unwrap(), "").await;
    let (ok, _, err) = admin(&fx.state(), &["nodes", "show", "edge-7x"]);
    assert!(!ok && err.contains("did you mean edge-7?"), "{err}");
    server.stop().await;
}

#[test]
fn certs_makes_its_directory_and_names_renew_within() {
    let dir = tempfile::tempdir().unwrap();
    let fleet = dir.path().join("fleet");
    let (ok, out, err) =
        cli(&["certs", "fleet", "--out", fleet.to_str().unwrap(), "--name", "Acme production"]);
    assert!(ok, "{err}");
    assert!(out.contains("wrote the fleet \"Acme production\"") && !out.contains("development"), "{out}");
    let out_prefix = dir.path().join("tls").join("controller");
    let controller =
        ["certs", "controller", "--fleet", fleet.to_str().unwrap(), "--out", out_prefix.to_str().unwrap()];
    let (ok, _, err) = cli(&controller);
    assert!(ok, "the missing tls/ is made: {err}");
    let (ok, _, err) = cli(&controller);
    assert!(!ok && err.contains("refusing to overwrite it. To renew it: --renew-within 10d"), "{err}");
}

#[test]
fn every_admin_command_on_a_missing_state_directory_says_what_to_run() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("missing");
    for command in [&["tokens", "add"][..], &["tokens", "list"], &["audit"], &["nodes", "list"]] {
        let (ok, _, err) = admin(&state, command);
        assert!(!ok, "{command:?}");
        let said = format!(
            "{} is not a state directory (it has no nodes/): lay it out with `janus-registration init --state {}`",
            state.display(),
            state.display()
        );
        assert!(err.contains(&said), "{command:?}: {err}");
    }
}

#[test]
fn tokens_add_on_a_new_state_directory_says_what_to_run() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    std::fs::create_dir(&state).unwrap();
    let (ok, _, err) = admin(&state, &["tokens", "add"]);
    assert!(!ok);
    assert!(
        err.contains(&format!(
            "is not a state directory (it has no nodes/): lay it out with `janus-registration init --state {}` (or a first `serve`)",
            state.display()
        )),
        "{err}"
    );
}

/// Runs `args` with its stdout read by a `head -1` that then goes away.
fn through_head(args: &[&str]) -> (Option<i32>, String) {
    let mut child =
        Command::new(BIN).args(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
    // The reader is gone: the pipe is closed.
    let output = child.wait_with_output().unwrap();
    (output.status.code(), String::from_utf8_lossy(&output.stderr).into_owned())
}

#[tokio::test]
async fn a_closed_pipe_ends_a_command_quietly() {
    let fx = Fixture::new();
    let server = InProcess::start(fx.config()).await;
    let client = node_client(&fx, server.addr);
    for n in 0..300 {
        announce(&client, &format!("edge-{n}"), &certs::mint_node_ca("e").unwrap(), "").await;
    }
    let state = fx.state();
    let state = state.to_str().unwrap();
    for args in [
        &["completions", "bash"][..],
        &["nodes", "list", "--state", state][..],
        &["audit", "--state", state][..],
        &["manpage"][..],
    ] {
        let (code, err) = through_head(args);
        assert_eq!(code, Some(0), "{args:?}: {err}");
        assert!(!err.contains("panicked") && !err.contains("backtrace"), "{args:?}: {err}");
    }
    server.stop().await;
}

#[test]
fn manpage_out_writes_one_page_per_command() {
    let dir = tempfile::tempdir().unwrap();
    let (ok, out, err) = cli(&["manpage", "--out", dir.path().to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(out.starts_with("wrote ") && out.contains("manual pages"), "{out}");
    for page in ["janus-registration.1", "janus-registration-serve.1", "janus-registration-nodes-approve.1"] {
        let text = std::fs::read_to_string(dir.path().join(page)).unwrap();
        assert!(text.contains(".TH"), "{page}");
    }
}

#[test]
fn flags_say_their_form_with_an_example() {
    let serve = |flags: &[&str]| {
        let mut args = vec!["serve"];
        args.extend_from_slice(flags);
        args.extend(["--fleet", "f", "--cert", "c", "--key", "k", "--state", "s"]);
        cli(&args)
    };
    let (ok, _, err) = serve(&["--listen", "8443"]);
    assert!(!ok && err.contains("\"8443\" is not HOST:PORT (no port); e.g. 0.0.0.0:8443"), "{err}");
    let (ok, _, err) = serve(&["--listen", "127.0.0.1:99999"]);
    assert!(!ok && err.contains("\"127.0.0.1:99999\": port 99999 is out of range (0-65535)"), "{err}");
    let (ok, _, err) = cli(&["healthcheck", "--addr", "127.0.0.1"]);
    assert!(!ok && err.contains("\"127.0.0.1\" is not HOST:PORT (no port); e.g. 0.0.0.0:8443"), "{err}");
    let (ok, _, err) = serve(&["--shutdown-grace", "ten"]);
    assert!(!ok && err.contains("is not a duration such as 90s"), "{err}");
    // Units, as every other duration (bare seconds still read).
    let fx = Fixture::new();
    for grace in ["10s", "10"] {
        let mut args = fx.serve_args();
        args.extend(["--shutdown-grace".into(), grace.into()]);
        drop(Process::start(&args));
    }
}

#[tokio::test]
async fn audit_times_have_a_fixed_width() {
    let fx = Fixture::new();
    let server = InProcess::start(fx.config()).await;
    let client = node_client(&fx, server.addr);
    for n in 0..20 {
        announce(&client, &format!("edge-{n}"), &certs::mint_node_ca("e").unwrap(), "").await;
    }
    let (ok, out, _) = admin(&fx.state(), &["audit"]);
    assert!(ok);
    for line in out.lines() {
        let at = line.split_whitespace().next().unwrap();
        assert_eq!(at.len(), "2026-12-01T03:24:41.524Z".len(), "{line}");
    }
    server.stop().await;
}

#[test]
fn the_demo_says_when_it_starts_afresh_and_removes_its_lock() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("demo-state").join("approved")).unwrap();
    let mut child = Command::new(BIN)
        .args(["demo", "--dir", dir.path().to_str().unwrap(), "--listen", "127.0.0.1:0"])
        .args(["--admin-listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut banner = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while std::time::Instant::now() < deadline {
        match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(line) => {
                banner.push(line.clone());
                if line.contains("polls with") {
                    break;
                }
            }
            Err(_) => continue,
        }
    }
    let banner = banner.join("\n");
    assert!(banner.contains("existed: the demo starts afresh from the example state every time"), "{banner}");
    assert!(banner.contains("What it prints is the node's serial-console log"), "{banner}");
    assert!(!banner.contains("/path/to/serial.log"), "{banner}");
    assert!(dir.path().join(".demo.lock").exists());
    Command::new("kill").arg("-TERM").arg(child.id().to_string()).status().unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    assert!(!dir.path().join(".demo.lock").exists(), "the lock goes with the demo");
}

#[test]
fn a_fleet_directory_holding_the_fleets_keys_is_said_at_start() {
    let fx = Fixture::new();
    assert!(
        fx.fleet_dir().join("issuing.key").exists(),
        "certs fleet writes the keys beside the certificates"
    );
    let server = Process::start(&fx.serve_args());
    let said = "the fleet's private key is in the directory --fleet serves: the endpoint needs only root.crt \
                and bundle.json; keep the keys where certificates are minted, off this machine";
    assert!(wait_for(Duration::from_secs(10), || server.log().contains(said)), "{}", server.log());
    for key in ["root.key", "issuing.key"] {
        assert!(server.log().contains(&format!("{}", fx.fleet_dir().join(key).display())), "names {key}");
    }
}

#[tokio::test]
async fn rejecting_an_admitted_node_says_its_trust_cannot_be_taken_back_and_offers_no_undo() {
    let fx = Fixture::new();
    let token = {
        janus_store::Store::open(&fx.state()).unwrap();
        add_token(&fx.state(), &[])
    };
    let server = InProcess::start(fx.config()).await;
    let client = node_client(&fx, server.addr);
    let ca = certs::mint_node_ca("edge").unwrap();
    let (id, _, status) = announce(&client, "edge", &ca, &token).await;
    assert_eq!(status, 201);
    let (ok, out, err) = admin(&fx.state(), &["nodes", "reject", &id]);
    assert!(ok, "{err}");
    assert!(
        out.contains(&format!(
            "rejected {id} (edge) and its CA {}: it was admitted, so it may hold the fleet's trust already, which \
             a rejection cannot take back (rotate the fleet's issuing CA to revoke it); its polls get 404 from now \
             on, and announcements of its CA are rejected at once",
            ca_hash(&ca)
        )),
        "{out}"
    );
    assert!(!out.contains("nodes forget"), "no undo that cannot apply: {out}");
}

#[tokio::test]
async fn a_mismatched_expected_fingerprint_is_named_as_what_the_admin_gave() {
    let fx = Fixture::new();
    let server = InProcess::start(fx.config()).await;
    let client = node_client(&fx, server.addr);
    let ca = certs::mint_node_ca("edge").unwrap();
    let (id, _, _) = announce(&client, "edge", &ca, "").await;
    let other = "ab".repeat(32);
    let (ok, _, err) = admin(&fx.state(), &["nodes", "approve", &id, "--expect-ca-sha256", &other]);
    assert!(!ok);
    assert!(
        err.contains(&format!(
            "refusing: {id}'s CA is SHA-256 {}, but --expect-ca-sha256 says {other} - not that node",
            ca_hash(&ca)
        )),
        "{err}"
    );
}

#[tokio::test]
async fn an_admin_named_with_as_is_who_the_audit_trail_credits() {
    let fx = Fixture::new();
    janus_store::Store::open(&fx.state()).unwrap();
    let server = InProcess::start(fx.config()).await;
    let client = node_client(&fx, server.addr);
    let ca = certs::mint_node_ca("edge").unwrap();
    let (id, _, _) = announce(&client, "edge", &ca, "").await;
    let (ok, _, err) = admin(&fx.state(), &["nodes", "approve", &id, "--unchecked", "--as", "carol@ops"]);
    assert!(ok, "{err}");
    let (ok, _, err) = cli_with(
        Command::new(BIN)
            .args(["tokens", "add", "--state"])
            .arg(fx.state())
            .env("JANUS_REGISTRATION_ADMIN", "dave"),
    );
    assert!(ok, "{err}");
    let (ok, trail, _) = admin(&fx.state(), &["audit", "--json"]);
    assert!(ok);
    let events: Vec<serde_json::Value> = trail.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let approved = events.iter().find(|e| e["event"] == "admitted" && e["id"] == id.as_str()).unwrap();
    assert_eq!(approved["user"], "command (carol@ops)", "not the process's user (alice)");
    let added = events.iter().find(|e| e["event"] == "token_added").unwrap();
    assert_eq!(added["user"], "command (dave)");
    let (ok, _, err) = admin(&fx.state(), &["tokens", "add", "--as", "not a name"]);
    assert!(!ok);
    assert!(err.contains("--as must be 1 to 64 letters, digits, '.', '_', '-' or '@'"), "{err}");
}

/// Issue 55: `tokens list` shows each token's labels (its JSON always did).
#[test]
fn tokens_list_shows_labels() {
    let fx = Fixture::new();
    fx.write_tokens("");
    for sub in ["nodes", "approved"] {
        std::fs::create_dir_all(fx.state().join(sub)).unwrap();
    }
    add_token(&fx.state(), &["--label", "pool=gpu", "--label", "zone=b"]);
    add_token(&fx.state(), &[]);
    let (ok, listed, err) = admin(&fx.state(), &["tokens", "list"]);
    assert!(ok, "{err}");
    assert!(listed.lines().next().unwrap().contains("LABELS"), "{listed}");
    assert!(listed.contains("pool=gpu,zone=b"), "{listed}");
}

/// Issue 55: `--help` tells an admin how to get a credential for the admin
/// API and the console.
#[test]
fn help_mentions_admin_credentials() {
    for args in [&["--help"][..], &["certs", "--help"][..]] {
        let (ok, out, err) = cli(args);
        assert!(ok, "{err}");
        assert!(out.contains("certs admin-ca") && out.contains("certs admin --ca"), "{args:?}: {out}");
    }
}

/// Issue 55: `nodes approve NAME --console LOG`, where two pending records
/// carry NAME, approves the one whose CA the log names; a log naming
/// neither leaves the name ambiguous.
#[tokio::test]
async fn approve_by_a_shared_name_picks_the_record_the_console_names() {
    let fx = Fixture::new();
    let server = InProcess::start(fx.config()).await;
    let client = node_client(&fx, server.addr);
    let (first_ca, second_ca) =
        (certs::mint_node_ca("web-5").unwrap(), certs::mint_node_ca("web-5").unwrap());
    let (first, _, _) = announce(&client, "web-5", &first_ca, "").await;
    let (second, _, _) = announce(&client, "web-5", &second_ca, "").await;
    let log = fx.dir.path().join("web-5.log");
    let state = fx.state();
    let approve = |log: &std::path::Path| {
        admin(&state, &["nodes", "approve", "web-5", "--console", log.to_str().unwrap()])
    };
    std::fs::write(
        &log,
        format!("boot\n{}\n", certs::console_line(&certs::mint_node_ca("x").unwrap().cert_pem).unwrap()),
    )
    .unwrap();
    let (ok, _, err) = approve(&log);
    assert!(!ok && err.contains("matches 2 nodes"), "a log naming neither: {err}");
    std::fs::write(&log, format!("boot\n{}\n", certs::console_line(&second_ca.cert_pem).unwrap())).unwrap();
    let (ok, out, err) = approve(&log);
    assert!(ok, "{err}");
    assert!(out.contains(&second), "{out}");
    assert!(fx.state().join("approved").join(&second).exists());
    assert!(!fx.state().join("approved").join(&first).exists(), "not the other");
    server.stop().await;
}

/// Issue 55: an orchestrator mints tokens before the first start: `init`
/// lays the state out, and the commands that need one say so.
#[test]
fn init_lays_out_a_state_so_tokens_can_be_minted_before_the_first_start() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let state_arg = state.to_str().unwrap();
    let (ok, _, err) = cli(&["tokens", "add", "--state", state_arg]);
    assert!(!ok && err.contains("janus-registration init --state"), "{err}");
    let (ok, out, err) = cli(&["init", "--state", state_arg]);
    assert!(ok && out.contains("laid out"), "{err}");
    let (ok, token, err) = cli(&["tokens", "add", "--state", state_arg, "--uses", "2"]);
    assert!(ok, "{err}");
    assert!(std::fs::read_to_string(state.join("tokens")).unwrap().contains(token.trim()));
    let (ok, _, err) = cli(&["init", "--state", dir.path().join("no/such/parent").to_str().unwrap()]);
    assert!(!ok && err.contains("make the parent first"), "{err}");
}

/// Issue 55: a user who cannot read the state directory is told whose it
/// is and to run as that user; a read-only command never says it refuses
/// to write.
#[test]
fn another_users_state_names_its_owner() {
    let fx = Fixture::new();
    if !can_run_as_nobody() {
        return skipped("cannot run a command as another user here (setpriv, needs root)");
    }
    let state = fx.state();
    let (ok, _, err) = cli(&["init", "--state", state.to_str().unwrap()]);
    assert!(ok, "{err}");
    // A directory others may enter but not read (as serve's 0700 is to them, less strictly).
    std::fs::set_permissions(&state, std::os::unix::fs::PermissionsExt::from_mode(0o711)).unwrap();
    std::fs::set_permissions(fx.dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    for command in [&["nodes", "list"][..], &["tokens", "list"]] {
        let (_, _, err) = cli_with(as_nobody(BIN).args(command).args(["--state", state.to_str().unwrap()]));
        assert!(
            err.contains("cannot be read by this user") && err.contains("run the command as"),
            "{command:?}: {err}"
        );
        assert!(!err.contains("refusing to write"), "{command:?}: {err}");
    }
}

//! The orchestrator's interface (issue 32), as a program uses it: tokens it
//! chose, registered with `tokens add --token`, and what `tokens add
//! --json` says of each token, to match the audit trail by.

use crate::common::*;
use janus_core::pki::sha256_hex;
use janus_registration::certs;

/// A fixture whose state directory is laid out, as `serve` leaves it.
fn laid_out() -> Fixture {
    let fx = Fixture::new();
    janus_store::Store::open(&fx.state()).unwrap();
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

/// The specification's `user-data.sh`, its two `jq -n` programs verbatim.
fn spec_user_data(args: &[&str], fleet: &std::path::Path) -> Option<String> {
    let script = r#"set -euo pipefail
mode=$1 fleet=$2 hostname=$3
case $mode in
  fleet)
    jq -n --arg hostname "$hostname" --rawfile root "$fleet/root.crt" --rawfile bundle "$fleet/bundle.json" \
      '{fleet_root_cert: $root, fleet_bundle: ($bundle | fromjson), network: {hostname: $hostname}}'
    ;;
  announce)
    jq -n --arg hostname "$hostname" --arg address "$4" --arg token "$5" --rawfile root "$fleet/root.crt" \
      '{controller_address: $address, controller_ca_cert: $root, controller_fleet_root_cert: $root,
        registration_token: $token, network: {hostname: $hostname}}'
    ;;
esac"#;
    let jq = std::process::Command::new("jq").arg("--version").output();
    if !jq.is_ok_and(|o| o.status.success()) {
        skipped("jq is not installed (CI installs it): the specification's user-data.sh cannot run");
        return None;
    }
    let out = std::process::Command::new("bash")
        .args(["-c", script, "user-data.sh", args[0], fleet.to_str().unwrap()])
        .args(&args[1..])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    Some(String::from_utf8(out.stdout).unwrap())
}

#[test]
fn user_data_is_byte_for_byte_what_the_specifications_script_prints() {
    let fx = laid_out();
    let fleet = fx.fleet_dir();
    let ours = |args: &[&str]| {
        let (ok, out, err) = cli_with(std::process::Command::new(BIN).arg("user-data").args(args));
        assert!(ok, "{err}");
        out
    };
    let fleet_arg = fleet.to_str().unwrap();
    let made = ours(&["fleet", "--fleet", fleet_arg, "--hostname", "edge-3"]);
    let announced = ours(&[
        "announce",
        "--fleet",
        fleet_arg,
        "--hostname",
        "edge-3",
        "--address",
        "10.0.2.2:8443",
        "--token",
        "t0k3n-abc",
    ]);
    let tokenless =
        ours(&["announce", "--fleet", fleet_arg, "--hostname", "edge-3", "--address", "10.0.2.2:8443"]);
    let parsed: serde_json::Value = serde_json::from_str(&announced).unwrap();
    assert_eq!(parsed["registration_token"], "t0k3n-abc");
    assert_eq!(parsed["network"]["hostname"], "edge-3");
    if let Some(spec) = spec_user_data(&["fleet", "edge-3"], &fleet) {
        assert_eq!(made, spec, "user-data fleet");
        let spec = spec_user_data(&["announce", "edge-3", "10.0.2.2:8443", "t0k3n-abc"], &fleet).unwrap();
        assert_eq!(announced, spec, "user-data announce");
        let spec = spec_user_data(&["announce", "edge-3", "10.0.2.2:8443", ""], &fleet).unwrap();
        assert_eq!(tokenless, spec, "user-data announce without a token");
    }
}

#[tokio::test]
async fn user_data_with_a_new_token_admits_the_node_that_boots_with_it() {
    let fx = laid_out();
    let fleet = fx.fleet_dir();
    let (ok, out, err) = cli_with(
        std::process::Command::new(BIN)
            .args(["user-data", "announce", "--fleet", fleet.to_str().unwrap(), "--hostname", "vm-7"])
            .args(["--address", "127.0.0.1:8443", "--new-token", "--description", "vm-7", "--state"])
            .arg(fx.state()),
    );
    assert!(ok, "{err}");
    let said: serde_json::Value = serde_json::from_str(&out).unwrap();
    let token = said["registration_token"].as_str().unwrap().to_string();
    assert_eq!(token.len(), 32, "a minted token: {said}");
    let (ok, listed, _) = admin(&fx.state(), &["tokens", "list"]);
    assert!(ok && listed.contains("vm-7"), "registered with its description: {listed}");
    let server = InProcess::start(fx.config()).await;
    let client = node_client(&fx, server.addr);
    let ca = certs::mint_node_ca("vm-7").unwrap();
    let (_, _, status) = announce(&client, "vm-7", &ca, &token).await;
    assert_eq!(status, 201, "the node booting with it is admitted");
}

#[test]
fn user_data_refuses_what_a_node_could_not_use_before_reading_or_minting() {
    let fx = laid_out();
    let fleet = fx.fleet_dir();
    let fleet = fleet.to_str().unwrap();
    let refused = |args: &[&str], says: &str| {
        let (ok, _, err) = cli_with(std::process::Command::new(BIN).arg("user-data").args(args));
        assert!(!ok, "{args:?}");
        assert!(err.contains(says), "{args:?}: {err}");
    };
    let hostname = "--hostname must be a hostname: labels of 1 to 63 letters, digits or '-'";
    refused(&["fleet", "--fleet", fleet, "--hostname=-edge"], hostname);
    refused(&["fleet", "--fleet", fleet, "--hostname", "edge 3"], hostname);
    refused(&["fleet", "--fleet", fleet, "--hostname", "a..b"], hostname);
    refused(
        &["fleet", "--fleet", "/nonexistent-fleet", "--hostname", "edge"],
        "is --fleet a fleet directory",
    );
    let announce = ["announce", "--fleet", fleet, "--hostname", "edge"];
    fn with<'a>(announce: &[&'a str], more: &[&'a str]) -> Vec<&'a str> {
        [announce, more].concat()
    }
    refused(
        &with(&announce, &["--address", "10.0.2.2"]),
        "--address must be host:port with a port from 1 to 65535",
    );
    refused(&with(&announce, &["--address", "10.0.2.2:0"]), "--address must be host:port");
    refused(
        &with(&announce, &["--address", "h:1", "--token", "a b"]),
        "--token must be at most 512 printable ASCII",
    );
    refused(&with(&announce, &["--address", "h:1", "--new-token"]), "--state");
    refused(
        &with(&announce, &["--address", "h:1", "--token", "abc", "--new-token", "--state", "x"]),
        "cannot be used with",
    );
    let (ok, listed, _) = admin(&fx.state(), &["tokens", "list", "--json"]);
    assert!(ok && listed.trim().is_empty(), "nothing minted: {listed}");
}

#[tokio::test]
async fn a_tokens_labels_follow_the_node_it_admits_into_its_record_event_and_listing() {
    let fx = laid_out();
    let (ok, out, err) =
        admin(&fx.state(), &["tokens", "add", "--label", "vm=web-3", "--label", "rack=4", "--json"]);
    assert!(ok, "{err}");
    let said = &json_lines(&out)[0];
    assert_eq!(said["labels"], serde_json::json!({"vm": "web-3", "rack": "4"}));
    let token = said["token"].as_str().unwrap().to_string();
    let other = add_token(&fx.state(), &["--label", "vm=web-4"]);
    let server = InProcess::start(fx.config()).await;
    let client = node_client(&fx, server.addr);
    let ca = certs::mint_node_ca("web-3").unwrap();
    let (id, _, status) = announce(&client, "web-3", &ca, &token).await;
    assert_eq!(status, 201);
    let (_, _, status) = announce(&client, "web-4", &certs::mint_node_ca("web-4").unwrap(), &other).await;
    assert_eq!(status, 201);
    let (ok, listed, err) = admin(&fx.state(), &["nodes", "list", "--json", "--label", "vm=web-3"]);
    assert!(ok, "{err}");
    let nodes = json_lines(&listed);
    assert_eq!(nodes.len(), 1, "only web-3's node: {listed}");
    let node = &nodes[0];
    assert_eq!(node["id"], id.as_str());
    assert_eq!(node["token_sha256_prefix"], said["sha256_prefix"]);
    assert_eq!(node["token_labels"], serde_json::json!({"vm": "web-3", "rack": "4"}));
    assert_eq!(node["ca_cert_pem"], ca.cert_pem.as_str(), "the CA in the same call");
    let (ok, listed, _) = admin(&fx.state(), &["nodes", "list", "--admitted", "--json", "--label", "rack=4"]);
    assert!(ok && json_lines(&listed).len() == 1, "{listed}");
    let (ok, listed, _) = admin(&fx.state(), &["nodes", "list", "--json", "--label", "vm=nope"]);
    assert!(ok && listed.trim().is_empty(), "{listed}");
    let (ok, trail, _) = admin(&fx.state(), &["audit", "--json"]);
    assert!(ok);
    let admitted =
        json_lines(&trail).into_iter().find(|e| e["event"] == "admitted" && e["id"] == id.as_str());
    assert_eq!(admitted.unwrap()["token_labels"]["vm"], "web-3", "the admitted event says them");
}

#[test]
fn labels_out_of_their_bounds_are_refused_and_nothing_is_added() {
    let fx = laid_out();
    let many: Vec<String> = (0..17).map(|n| format!("k{n}=v")).collect();
    let mut too_many = vec!["tokens", "add"];
    for label in &many {
        too_many.extend(["--label", label.as_str()]);
    }
    let long_value = format!("k={}", "v".repeat(254));
    let long_key = format!("{}=v", "k".repeat(64));
    for (args, says) in [
        (vec!["tokens", "add", "--label", "novalue"], "a label is KEY=VALUE"),
        (vec!["tokens", "add", "--label", "=v"], "--label: a label key must be 1 to 63 letters, digits"),
        (vec!["tokens", "add", "--label", "sp ace=v"], "--label: a label key must be 1 to 63"),
        (vec!["tokens", "add", "--label", &long_key], "--label: a label key must be 1 to 63"),
        (
            vec!["tokens", "add", "--label", &long_value],
            "--label: a label value must be at most 253 characters",
        ),
        (vec!["tokens", "add", "--label", "a=1", "--label", "a=2"], "--label gives the same key twice"),
        (too_many.clone(), "--label: more than 16 labels"),
    ] {
        let (ok, _, err) = admin(&fx.state(), &args);
        assert!(!ok, "{args:?}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    let (ok, listed, _) = admin(&fx.state(), &["tokens", "list", "--json"]);
    assert!(ok && listed.trim().is_empty(), "{listed}");
}

#[tokio::test]
async fn nodes_watch_says_each_admission_rejection_and_forget_once_with_the_node() {
    let fx = laid_out();
    let token = add_token(&fx.state(), &["--label", "vm=web-5"]);
    // Follows from now on: started before anything happens.
    let mut follower = std::process::Command::new(BIN)
        .args(["nodes", "watch", "--state"])
        .arg(fx.state())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let reader = {
        let (stdout, lines) = (follower.stdout.take().unwrap(), lines.clone());
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
                lines.lock().unwrap().push(line);
            }
        })
    };
    let server = InProcess::start(fx.config()).await;
    let client = node_client(&fx, server.addr);
    let ca = certs::mint_node_ca("web-5").unwrap();
    let (id, _, status) = announce(&client, "web-5", &ca, &token).await;
    assert_eq!(status, 201);
    let seen = |n: usize| lines.lock().unwrap().len() >= n;
    assert!(wait_for(std::time::Duration::from_secs(10), || seen(1)), "the admission is said as it happens");
    let (ok, _, err) = admin(&fx.state(), &["nodes", "reject", &id]);
    assert!(ok, "{err}");
    let (ok, _, err) = admin(&fx.state(), &["nodes", "forget", &id]);
    assert!(ok, "{err}");
    assert!(wait_for(std::time::Duration::from_secs(10), || seen(3)), "{:?}", lines.lock().unwrap());
    let _ = follower.kill();
    let _ = follower.wait();
    let _ = reader.join();
    let said: Vec<serde_json::Value> =
        lines.lock().unwrap().iter().map(|l| serde_json::from_str(l).unwrap()).collect();
    let kinds: Vec<&str> = said.iter().map(|e| e["event"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["admitted", "rejected", "forgotten"], "no announcement, delivery or token event");
    assert_eq!(said[0]["id"], id.as_str());
    assert_eq!(said[0]["node"]["token_labels"]["vm"], "web-5", "the node, with its token's labels");
    assert_eq!(said[0]["node"]["ca_cert_pem"], ca.cert_pem.as_str());
    assert!(said[2].get("node").is_none(), "a forgotten node's record is gone: {}", said[2]);
    // --once --since: what is there, each once.
    let (ok, out, err) = admin(&fx.state(), &["nodes", "watch", "--once", "--since", "1h"]);
    assert!(ok, "{err}");
    assert_eq!(json_lines(&out).len(), 3, "{out}");
}

#[tokio::test]
async fn nodes_list_admitted_since_shows_the_nodes_admitted_after_a_time_with_when() {
    let fx = laid_out();
    let server = InProcess::start(fx.config()).await;
    let client = node_client(&fx, server.addr);
    let mut ids = Vec::new();
    for name in ["web-6", "web-7"] {
        let token = add_token(&fx.state(), &[]);
        let (id, _, status) = announce(&client, name, &certs::mint_node_ca(name).unwrap(), &token).await;
        assert_eq!(status, 201);
        ids.push(id);
    }
    // A pending node is never listed as admitted.
    let (_, _, status) = announce(&client, "web-8", &certs::mint_node_ca("web-8").unwrap(), "").await;
    assert_eq!(status, 201);
    // web-6 was admitted two hours ago, as far as its approval says.
    let two_hours_ago = janus_core::clock::now_unix() - 7200;
    let touched = std::process::Command::new("touch")
        .args(["-h", "-d", &format!("@{two_hours_ago}")])
        .arg(fx.state().join("approved").join(&ids[0]))
        .status()
        .unwrap();
    assert!(touched.success());
    let listed = |since: &str| {
        let (ok, out, err) = admin(&fx.state(), &["nodes", "list", "--json", "--admitted-since", since]);
        assert!(ok, "{err}");
        json_lines(&out)
    };
    let recent = listed("1h");
    assert_eq!(recent.len(), 1, "{recent:?}");
    assert_eq!(recent[0]["id"], ids[1].as_str());
    assert_eq!(recent[0]["state"], "admitted");
    let at = recent[0]["admitted_at"].as_str().expect("admitted_at");
    assert!(janus_core::clock::rfc3339_millis(at).is_some(), "RFC 3339: {at}");
    let three_hours_ago = janus_core::clock::unix_to_rfc3339(two_hours_ago - 3600);
    let both = listed(&three_hours_ago);
    assert_eq!(both.len(), 2, "an RFC 3339 time: {both:?}");
    assert_eq!(
        both.iter().find(|n| n["id"] == ids[0].as_str()).unwrap()["admitted_at"],
        janus_core::clock::unix_to_rfc3339(two_hours_ago)
    );
    let (ok, _, err) = admin(&fx.state(), &["nodes", "list", "--admitted-since", "yesterday"]);
    assert!(!ok);
    assert!(
        err.contains(
            "\"yesterday\" is neither a duration ago (such as 90s, 15m, 12h, 10d) nor an RFC 3339 time"
        ),
        "{err}"
    );
}

/// An `--on-admitted` program that keeps what it is given in `out`, one
/// file per run (named by its pid), then runs `then`.
fn keeping_program(fx: &Fixture, out: &std::path::Path, then: &str) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(out).unwrap();
    let program = fx.dir.path().join("on-admitted.sh");
    let script = format!(
        "#!/bin/sh\ncat > '{dir}/.run.'$$\nmv '{dir}/.run.'$$ '{dir}/run.'$$\necho $$ > '{dir}/.pid'\nmv '{dir}/.pid' '{dir}/pid'\n{then}\n",
        dir = out.display()
    );
    std::fs::write(&program, script).unwrap();
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    program
}

/// What each run of a [`keeping_program`] was given.
fn runs(out: &std::path::Path) -> Vec<serde_json::Value> {
    let mut files: Vec<_> = std::fs::read_dir(out)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("run."))
        .collect();
    files.sort();
    files.iter().map(|f| serde_json::from_slice(&std::fs::read(f).unwrap()).unwrap()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_admitted_runs_once_per_admission_on_one_replica_with_the_node() {
    use janus_endpoint::OnAdmittedConfig;
    let fx = laid_out();
    let out = fx.dir.path().join("runs");
    let mut config = fx.config();
    config.on_admitted = Some(OnAdmittedConfig {
        command: keeping_program(&fx, &out, "exit 0"),
        timeout: std::time::Duration::from_secs(10),
    });
    // Two replicas on one state directory.
    let (a, b) = (InProcess::start(config.clone()).await, InProcess::start(config).await);
    let (to_a, to_b) = (node_client(&fx, a.addr), node_client(&fx, b.addr));
    let token = add_token(&fx.state(), &["--label", "vm=web-9"]);
    let ca = certs::mint_node_ca("web-9").unwrap();
    let (by_token, _, status) = announce(&to_a, "web-9", &ca, &token).await;
    assert_eq!(status, 201);
    let (pending, _, status) = announce(&to_b, "web-10", &certs::mint_node_ca("web-10").unwrap(), "").await;
    assert_eq!(status, 201);
    let (ok, _, err) = admin(&fx.state(), &["nodes", "approve", &pending, "--unchecked"]);
    assert!(ok, "{err}");
    let third = add_token(&fx.state(), &[]);
    let (last, _, status) = announce(&to_b, "web-11", &certs::mint_node_ca("web-11").unwrap(), &third).await;
    assert_eq!(status, 201);
    assert!(
        wait_for(std::time::Duration::from_secs(20), || runs(&out).len() >= 3),
        "a token's admission, an admin's approval and another token's: {:?}",
        runs(&out)
    );
    let given = runs(&out);
    let mut ids: Vec<&str> = given.iter().map(|r| r["id"].as_str().unwrap()).collect();
    ids.sort();
    let mut expected = vec![by_token.as_str(), pending.as_str(), last.as_str()];
    expected.sort();
    assert_eq!(ids, expected, "each admission once, on one of the two replicas");
    let web_9 = given.iter().find(|r| r["id"] == by_token.as_str()).unwrap();
    assert_eq!(web_9["event"], "admitted");
    assert_eq!(web_9["by"], "token");
    assert_eq!(web_9["node"]["name"], "web-9");
    assert_eq!(web_9["node"]["token_labels"]["vm"], "web-9");
    assert_eq!(web_9["node"]["ca_cert_pem"], ca.cert_pem.as_str());
    assert!(web_9["node"].get("poll_secret_sha256").is_none(), "no secret's hash: {web_9}");
    let approved = given.iter().find(|r| r["id"] == pending.as_str()).unwrap();
    assert_eq!(approved["by"], "command", "{approved}");
    a.stop().await;
    b.stop().await;
    assert_eq!(runs(&out).len(), 3, "no replica ran one twice");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_on_admitted_program_is_killed_and_the_node_stays_admitted() {
    use janus_endpoint::OnAdmittedConfig;
    let fx = laid_out();
    let out = fx.dir.path().join("runs");
    let mut config = fx.config();
    config.on_admitted = Some(OnAdmittedConfig {
        command: keeping_program(&fx, &out, "sleep 30; exit 1"),
        timeout: std::time::Duration::from_millis(300),
    });
    let server = InProcess::start(config).await;
    let client = node_client(&fx, server.addr);
    let token = add_token(&fx.state(), &[]);
    let (id, secret, status) =
        announce(&client, "web-12", &certs::mint_node_ca("web-12").unwrap(), &token).await;
    assert_eq!(status, 201);
    let pid_file = out.join("pid");
    assert!(wait_for(std::time::Duration::from_secs(20), || pid_file.exists()), "it ran");
    let pid = std::fs::read_to_string(&pid_file).unwrap().trim().to_string();
    let dead = || match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat.rsplit(')').next().is_some_and(|rest| rest.trim_start().starts_with('Z')),
        Err(_) => true,
    };
    assert!(wait_for(std::time::Duration::from_secs(10), dead), "killed at its timeout");
    assert_eq!(get(&client, &format!("/register/{id}"), Some(&secret)).await.status, 200, "still admitted");
    let (ok, listed, _) = admin(&fx.state(), &["nodes", "list", "--admitted", "--json"]);
    assert!(ok && json_lines(&listed).len() == 1, "{listed}");
    server.stop().await;
}

/// An admitted event a crash repeated (the same event, a later time) runs
/// the program at most once: within one follower, and across a restart
/// (the claim is named by the event but for its time).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_repeated_admission_runs_the_program_once() {
    use janus_endpoint::OnAdmittedConfig;
    let fx = laid_out();
    let out = fx.dir.path().join("runs");
    let mut config = fx.config();
    config.on_admitted = Some(OnAdmittedConfig {
        command: keeping_program(&fx, &out, "exit 0"),
        timeout: std::time::Duration::from_secs(10),
    });
    let server = InProcess::start(config.clone()).await;
    let client = node_client(&fx, server.addr);
    let token = add_token(&fx.state(), &[]);
    let (first, _, _) = announce(&client, "web-30", &certs::mint_node_ca("web-30").unwrap(), &token).await;
    assert!(wait_for(std::time::Duration::from_secs(20), || runs(&out).len() == 1), "ran once");
    // The crash's repeat: the admitted event again, a second later, in another writer's file.
    let trail = audit_trail(&fx.state());
    let admitted = trail
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|e| e["event"] == "admitted" && e["id"] == first.as_str())
        .unwrap();
    let repeat = |at: &str| {
        let mut again = admitted.clone();
        again["at"] = at.into();
        let file = fx.state().join("audit").join("admin-crashed.jsonl");
        let mut text = std::fs::read_to_string(&file).unwrap_or_default();
        text.push_str(&format!("{again}\n"));
        std::fs::write(&file, text).unwrap();
    };
    repeat(&janus_core::clock::now_rfc3339());
    // Another admission after it: once it has run, the repeat was looked at.
    let second = add_token(&fx.state(), &[]);
    announce(&client, "web-31", &certs::mint_node_ca("web-31").unwrap(), &second).await;
    assert!(wait_for(std::time::Duration::from_secs(20), || runs(&out).len() >= 2), "the second ran");
    server.stop().await;
    // A restarted server follows from the trail's end: a repeat after it
    // finds the first run's claim.
    let server = InProcess::start(config).await;
    repeat(&janus_core::clock::now_rfc3339());
    let third = add_token(&fx.state(), &[]);
    let client = node_client(&fx, server.addr);
    announce(&client, "web-32", &certs::mint_node_ca("web-32").unwrap(), &third).await;
    assert!(wait_for(std::time::Duration::from_secs(20), || runs(&out).len() >= 3), "the third ran");
    server.stop().await;
    let ids: Vec<String> = runs(&out).iter().map(|r| r["id"].as_str().unwrap().to_string()).collect();
    assert_eq!(ids.iter().filter(|id| **id == first).count(), 1, "the repeated admission ran once: {ids:?}");
    assert_eq!(ids.len(), 3, "{ids:?}");
}

/// The program gets a cleared environment (none of the server's secrets),
/// its output reaches the log, and one that cannot run refuses startup.
#[test]
fn the_on_admitted_program_gets_no_secrets_and_its_output_is_logged() {
    use std::os::unix::fs::PermissionsExt;
    let fx = laid_out();
    let program = fx.dir.path().join("env.sh");
    let seen = fx.dir.path().join("seen-env");
    std::fs::write(
        &program,
        format!("#!/bin/sh\nenv > '{}'\necho 'it went wrong here' >&2\nexit 3\n", seen.display()),
    )
    .unwrap();
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut command = std::process::Command::new(BIN);
    command
        .args(fx.serve_args())
        .arg("--on-admitted")
        .arg(&program)
        .env("AWS_SECRET_ACCESS_KEY", "do-not-pass-this-on")
        .env("LANG", "C.UTF-8");
    let server = Process::start_command(command);
    let token = add_token(&fx.state(), &[]);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let client = node_client(&fx, server.addr);
    rt.block_on(announce(&client, "web-33", &certs::mint_node_ca("web-33").unwrap(), &token));
    assert!(
        wait_for(std::time::Duration::from_secs(20), || server.log().contains("it went wrong here")),
        "its stderr in the log: {}",
        server.log()
    );
    let env = std::fs::read_to_string(&seen).unwrap();
    assert!(!env.contains("AWS_SECRET_ACCESS_KEY"), "{env}");
    assert!(env.contains("LANG=C.UTF-8") && env.contains("PATH="), "the kept ones: {env}");
    assert!(server.log().contains("code=3"), "{}", server.log());
    drop(server);
    let (ok, _, err) = cli(&[
        fx.serve_args(),
        vec!["--on-admitted".into(), fx.dir.path().join("missing.sh").display().to_string()],
    ]
    .concat());
    assert!(!ok);
    assert!(err.contains("--on-admitted") && err.contains("missing.sh"), "refused at startup: {err}");
}

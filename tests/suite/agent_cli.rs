//! The `agent` command as a user runs it, and the load generator
//! (`janus-swarm`, a tool beside the product: run here through its library,
//! with the arguments its command line takes).

use std::process::Command;
use std::time::Duration;

use crate::common::*;

/// `janus-swarm ARGS`: its report, or why it failed.
fn swarm(args: &[&str]) -> Result<String, janus_bench::SwarmError> {
    #[derive(clap::Parser)]
    struct Swarm {
        #[command(flatten)]
        args: janus_bench::swarm::SwarmArgs,
    }
    let parsed =
        <Swarm as clap::Parser>::parse_from(std::iter::once("janus-swarm").chain(args.iter().copied()));
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    runtime.block_on(janus_bench::swarm::run_command(&parsed.args))
}

#[test]
fn agent_from_user_data_exits_pending_then_admitted() {
    let fx = Fixture::new();
    let server = Process::start(&fx.serve_args());
    let root = &fx.fleet.root.cert_pem;
    let user_data = serde_json::json!({
        "controller_address": server.addr.to_string(), "controller_ca_cert": root,
        "controller_fleet_root_cert": root, "registration_token": "not-a-token",
        "network": {"hostname": "edge-3"},
    });
    let ud = fx.dir.path().join("user-data.json");
    std::fs::write(&ud, user_data.to_string()).unwrap();
    let node = fx.dir.path().join("node");
    let agent = || {
        cli_exit(Command::new(BIN).args([
            "agent",
            "--dir",
            node.to_str().unwrap(),
            "--user-data",
            ud.to_str().unwrap(),
            "--once",
        ]))
    };
    let (code, stdout, _) = agent();
    assert_eq!(code, Some(2), "pending: {stdout}");
    assert!(stdout.contains("pki: this node's CA: SHA-256 "), "{stdout}");
    assert!(stdout.contains("as edge-3 ("), "{stdout}");
    assert!(!node.join("token").exists());

    let id = records(&fx.state())[0]["id"].as_str().unwrap().to_string();
    std::fs::write(fx.state().join("approved").join(&id), b"").unwrap();
    let (code, stdout, _) = agent();
    assert_eq!(code, Some(0), "{stdout}");
    assert!(node.join("registered").exists());
    // The user-data does not provision a second time: the dropped token stays dropped.
    assert!(!node.join("token").exists());
    // Run again (the demo's commands, a second time through): it says why
    // it does nothing, and how to start over (issue 55).
    let announced = records(&fx.state()).len();
    let (code, stdout, _) = agent();
    assert_eq!(code, Some(0), "{stdout}");
    assert!(stdout.contains("is registered already") && stdout.contains("another --dir"), "{stdout}");
    assert_eq!(records(&fx.state()).len(), announced, "nothing announced");

    let bad = fx.dir.path().join("bad.json");
    std::fs::write(&bad, r#"{"registration_token":"t"}"#).unwrap();
    let n2 = fx.dir.path().join("n2");
    let (code, _, stderr) = cli_exit(Command::new(BIN).args([
        "agent",
        "--dir",
        n2.to_str().unwrap(),
        "--user-data",
        bad.to_str().unwrap(),
    ]));
    assert_eq!(code, Some(1));
    assert!(stderr.contains("registration_token needs controller_address"), "{stderr}");

    let n3 = fx.dir.path().join("n3");
    let (code, _, stderr) =
        cli_exit(Command::new(BIN).args(["agent", "--once", "--dir", n3.to_str().unwrap()]));
    assert_eq!(code, Some(1));
    assert!(stderr.contains("has no address file"), "{stderr}");
}

#[test]
fn swarm_reports_rates_and_writes_json() {
    let fx = Fixture::new();
    fx.write_tokens("s1 s2 s3\n");
    let server = Process::start(&fx.serve_args());
    let tokens = fx.dir.path().join("swarm-tokens");
    std::fs::write(&tokens, "s1\ns2\ns3\n").unwrap();
    let json = fx.dir.path().join("report.json");
    let root = fx.fleet_dir().join("root.crt");
    let addr = server.addr.to_string();
    let stdout = swarm(&[
        "--addr",
        &addr,
        "--fleet-root",
        root.to_str().unwrap(),
        "--nodes",
        "12",
        "--concurrency",
        "4",
        "--polls",
        "2",
        "--tokens",
        tokens.to_str().unwrap(),
        "--approve-in",
        fx.state().to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ])
    .unwrap();
    assert!(stdout.contains("announce") && stdout.contains("poll"), "{stdout}");
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(report["announce"]["outcomes"]["201"], 12);
    assert_eq!(report["admitted_in_answer"], 3);
    assert_eq!(report["poll"]["outcomes"]["200"], 24, "every node approved or admitted gets its trust");
    fx.expect_tokens("");
}

#[test]
fn swarm_polls_another_replica_and_says_who_was_not_given_the_trust() {
    let fx = Fixture::new();
    fx.write_tokens("r1 r2 r3\n");
    let (announced_to, polled) = (Process::start(&fx.serve_args()), Process::start(&fx.serve_args()));
    let tokens = fx.dir.path().join("swarm-tokens");
    std::fs::write(&tokens, "r1\nr2\nr3\n").unwrap();
    let json = fx.dir.path().join("report.json");
    let root = fx.fleet_dir().join("root.crt");
    let addr = announced_to.addr.to_string();
    let swarm_polling = |poll_addr: String| {
        swarm(&[
            "--addr",
            &addr,
            "--poll-addr",
            &poll_addr,
            "--fleet-root",
            root.to_str().unwrap(),
            "--nodes",
            "5",
            "--polls",
            "1",
            "--tokens",
            tokens.to_str().unwrap(),
            "--json",
            json.to_str().unwrap(),
        ])
        .unwrap()
    };
    let stdout = swarm_polling(polled.addr.to_string());
    assert!(stdout.contains("3 in their answer, 0 of them never given the trust"), "{stdout}");
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(report["admitted_in_answer"], 3);
    assert_eq!(report["poll"]["outcomes"]["200"], 3, "the other replica hands the trust: {report}");
    assert_eq!(report["poll"]["outcomes"]["202"], 2, "and holds the tokenless: {report}");
    assert_eq!(report["admitted_untrusted_in_poll"], 0);

    // Polled where nothing answers, the admitted are said to be without trust.
    fx.write_tokens("r4 r5 r6\n");
    std::fs::write(&tokens, "r4\nr5\nr6\n").unwrap();
    let nowhere = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let stdout = swarm_polling(nowhere.to_string());
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(report["admitted_in_answer"], 3, "{report}");
    assert_eq!(report["admitted_untrusted_in_poll"], 3, "{report}");
    // And what their last polls were answered, with their ids to look up.
    assert_eq!(report["untrusted_poll_outcomes"]["error"], 3, "{report}");
    assert_eq!(report["untrusted_ids"].as_array().map(Vec::len), Some(3), "{report}");
    assert!(stdout.contains(r#"(last answered {"error": 3})"#), "{stdout}");
}

#[test]
fn swarm_keeps_polling_through_an_outage_when_told_to() {
    let fx = Fixture::new();
    fx.write_tokens("q1 q2\n");
    let server = Process::start(&fx.serve_args());
    let tokens = fx.dir.path().join("swarm-tokens");
    std::fs::write(&tokens, "q1\nq2\n").unwrap();
    let json = fx.dir.path().join("report.json");
    // The replica polled is not up yet: nothing listens on its port.
    let later = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let args: Vec<String> = [
        "--addr",
        &server.addr.to_string(),
        "--poll-addr",
        &later.to_string(),
        "--fleet-root",
        fx.fleet_dir().join("root.crt").to_str().unwrap(),
        "--nodes",
        "2",
        "--polls",
        "1",
        "--poll-retry-for",
        "60s",
        "--tokens",
        tokens.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]
    .map(String::from)
    .into();
    let running = std::thread::spawn(move || swarm(&args.iter().map(String::as_str).collect::<Vec<_>>()));
    assert!(wait_for(Duration::from_secs(30), || records(&fx.state()).len() == 2), "both announced");
    let mut args = fx.serve_args();
    args[2] = later.to_string();
    let _polled = Process::start(&args);
    running.join().unwrap().unwrap();
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(report["admitted_in_answer"], 2, "{report}");
    assert_eq!(report["poll"]["outcomes"]["200"], 2, "each poll retried until it was answered: {report}");
    assert_eq!(report["admitted_untrusted_in_poll"], 0, "{report}");
}

#[test]
fn the_shipped_binary_has_no_load_generator() {
    let (code, _, stderr) = cli_exit(Command::new(BIN).args(["agent", "swarm", "--addr", "127.0.0.1:1"]));
    assert_eq!(code, Some(2), "refused as an unknown argument: {stderr}");
    assert!(stderr.contains("unexpected argument 'swarm'"), "{stderr}");
    let (_, help, _) = cli_exit(Command::new(BIN).args(["agent", "--help"]));
    assert!(!help.contains("swarm"), "{help}");
}

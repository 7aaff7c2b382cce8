//! Issue 61: what an admin's files say is true (an approval removed after
//! the trust went out, an approval file that names no node), and a state
//! backed up while served and restored elsewhere keeps every spent use.

use std::time::Duration;

use crate::common::*;
use janus_registration::certs;

/// A server that runs maintenance often, on `fx`'s state, forgetting
/// pending nodes after `pending_max_age`.
fn busy_server(fx: &Fixture, pending_max_age: &str) -> Process {
    let mut args = fx.serve_args();
    args.extend(
        ["--maintenance-every", "100ms", "--reconcile-every", "100ms", "--pending-max-age"].map(String::from),
    );
    args.push(pending_max_age.to_string());
    Process::start(&args)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_removed_after_the_trust_is_audited_and_shown_as_admitted() {
    let fx = Fixture::new();
    let server = busy_server(&fx, "1s");
    let client = node_client(&fx, server.addr);
    let ca = certs::mint_node_ca("edge-1").unwrap();
    let (id, secret, _) = announce(&client, "edge-1", &ca, "").await;
    let (ok, _, err) = admin(&fx.state(), &["nodes", "approve", &id, "--expect-ca-sha256", &ca_hash(&ca)]);
    assert!(ok, "{err}");
    assert_eq!(
        get(&client, &format!("/register/{id}"), Some(&secret)).await.status,
        200,
        "the trust went out"
    );
    std::fs::remove_file(fx.state().join("approved").join(&id)).unwrap();

    // Audited once, by the maintenance that noticed it.
    let trail = || audit_trail(&fx.state());
    assert!(
        wait_for(Duration::from_secs(20), || trail().contains("\"event\":\"approval_removed\"")),
        "{}",
        trail()
    );
    // Past the pending age limit (1 s) and many passes: never forgotten, audited once.
    let passes = || server.log().matches("state scanned").count();
    let seen = passes();
    assert!(wait_for(Duration::from_secs(20), || passes() >= seen + 3), "{}", server.log());
    assert!(
        fx.state().join("nodes").join(format!("{id}.json")).exists(),
        "a node holding the trust is never forgotten"
    );
    assert_eq!(trail().matches("\"event\":\"approval_removed\"").count(), 1, "{}", trail());

    let (ok, shown, err) = admin(&fx.state(), &["nodes", "show", &id]);
    assert!(ok && shown.contains("state:        admitted"), "{shown} {err}");
    assert!(
        shown.contains("was removed after the node got the fleet's trust")
            && shown.contains("Janus Controller"),
        "{shown}"
    );
    let (ok, listed, _) = admin(&fx.state(), &["nodes", "list"]);
    assert!(ok && listed.contains("(approval file removed: it keeps the trust)"), "{listed}");
    let (ok, pending, _) = admin(&fx.state(), &["nodes", "list", "--pending"]);
    assert!(ok && !pending.contains(&id), "not pending: {pending}");
    let (ok, json, _) = admin(&fx.state(), &["nodes", "show", &id, "--json"]);
    let view: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert!(ok && view["state"] == "admitted" && view["approval_removed"] == true, "{json}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_file_that_names_no_node_is_said_with_the_nearest_id_and_never_acted_on() {
    let fx = Fixture::new();
    let server = busy_server(&fx, "1d");
    let client = node_client(&fx, server.addr);
    let ca = certs::mint_node_ca("edge-2").unwrap();
    let (id, secret, _) = announce(&client, "edge-2", &ca, "").await;
    // One digit off, and the node's name: neither admits it.
    let last = id.chars().last().unwrap();
    let typo = format!("{}{}", &id[..31], if last == '0' { '1' } else { '0' });
    for name in [typo.as_str(), "edge-2", "nobody-at-all"] {
        std::fs::write(fx.state().join("approved").join(name), b"").unwrap();
    }
    let (ok, listed, err) = admin(&fx.state(), &["nodes", "list"]);
    assert!(ok, "{err}");
    assert!(
        listed.contains(&format!(
            "WARNING: approved/{typo} names no node and is not acted on: did you mean approved/{id}?"
        )),
        "{listed}"
    );
    assert!(
        listed.contains(&format!(
            "approved/edge-2 names no node and is not acted on: edge-2 is a node's name; its id is {id}"
        )),
        "{listed}"
    );
    assert!(
        listed.contains("approved/nobody-at-all names no node and is not acted on\n")
            || listed.ends_with("approved/nobody-at-all names no node and is not acted on"),
        "{listed}"
    );
    // /healthz's details, and the log once per file.
    let health =
        eventually(|| get(&client, "/healthz", None), |a| json(a).to_string().contains("nobody-at-all"))
            .await;
    assert_eq!(health.status, 200, "said, not unhealthy");
    let passes = || server.log().matches("state scanned").count();
    let seen = passes();
    assert!(wait_for(Duration::from_secs(20), || passes() >= seen + 3));
    assert_eq!(
        server.log().lines().filter(|l| l.contains("janus_store::orphans") && l.contains(&typo)).count(),
        1,
        "{}",
        server.log()
    );
    // Never acted on: the node is still pending.
    assert_eq!(get(&client, &format!("/register/{id}"), Some(&secret)).await.status, 202);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_of_a_served_state_restores_with_every_spent_use_spent() {
    let fx = Fixture::new();
    let server = Process::start(&fx.serve_args());
    let client = node_client(&fx, server.addr);
    let once = add_token(&fx.state(), &[]);
    let twice = add_token(&fx.state(), &["--uses", "2"]);
    let (_, _, status) = announce(&client, "spent", &certs::mint_node_ca("spent").unwrap(), &once).await;
    assert_eq!(status, 201);
    let (_, _, status) = announce(&client, "half", &certs::mint_node_ca("half").unwrap(), &twice).await;
    assert_eq!(status, 201);
    let work = tempfile::tempdir().unwrap();
    // A link planted in the state is never followed into the copy.
    let secret = work.path().join("not-state");
    std::fs::write(&secret, b"not for the backup").unwrap();
    std::os::unix::fs::symlink(&secret, fx.state().join("nodes").join("planted.json")).unwrap();
    let file = work.path().join("state.tar.gz");
    let (ok, said, err) =
        cli(&["backup", "--state", fx.state().to_str().unwrap(), "--out", file.to_str().unwrap()]);
    assert!(ok && said.contains("backed up"), "{said} {err}");
    drop(server);

    let restored = work.path().join("restored");
    let (ok, said, err) =
        cli(&["restore", "--from", file.to_str().unwrap(), "--state", restored.to_str().unwrap()]);
    assert!(ok && said.contains("A token spent AFTER that time admits again"), "{said} {err}");
    assert!(!restored.join("nodes").join("planted.json").exists(), "the planted link is not copied");
    // Into a directory that is not empty (a served one is laid out): refused.
    let (ok, _, err) =
        cli(&["restore", "--from", file.to_str().unwrap(), "--state", fx.state().to_str().unwrap()]);
    assert!(!ok && err.contains("is not empty"), "{err}");

    let mut args = fx.serve_args();
    let at = args.iter().position(|a| a == "--state").unwrap();
    args[at + 1] = restored.to_str().unwrap().to_string();
    let server = Process::start(&args);
    let client = node_client(&fx, server.addr);
    let (_, _, status) = announce(&client, "again", &certs::mint_node_ca("again").unwrap(), &once).await;
    assert_eq!(status, 201);
    let (ok, nodes, _) = admin(&restored, &["nodes", "list", "--json"]);
    assert!(ok);
    let state_of = |name: &str| {
        nodes
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .find(|v| v["name"] == name)
            .unwrap()["state"]
            .clone()
    };
    assert_eq!(state_of("spent"), "admitted");
    assert_eq!(state_of("again"), "pending", "a use spent before the backup stays spent");
    let (_, _, status) =
        announce(&client, "other-half", &certs::mint_node_ca("other-half").unwrap(), &twice).await;
    assert_eq!(status, 201);
    let (_, nodes, _) = admin(&restored, &["nodes", "list", "--json"]);
    let admitted_half =
        nodes.lines().filter(|l| l.contains("\"other-half\"") && l.contains("\"admitted\"")).count();
    assert_eq!(admitted_half, 1, "the use left is left: {nodes}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_list_is_newest_first_unless_asked_otherwise() {
    let fx = Fixture::new();
    let server = Process::start(&fx.serve_args());
    let client = node_client(&fx, server.addr);
    let mut ids = Vec::new();
    for (name, at) in
        [("old", "2026-01-01T00:00:00Z"), ("new", "2026-03-01T00:00:00Z"), ("mid", "2026-02-01T00:00:00Z")]
    {
        let (id, _, _) = announce(&client, name, &certs::mint_node_ca(name).unwrap(), "").await;
        let path = fx.state().join("nodes").join(format!("{id}.json"));
        let mut record: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        record["announced_at"] = at.into();
        std::fs::write(&path, serde_json::to_vec(&record).unwrap()).unwrap();
        ids.push(id);
    }
    let order = |args: &[&str]| {
        let mut all = vec!["nodes", "list"];
        all.extend(args);
        let (ok, out, err) = admin(&fx.state(), &all);
        assert!(ok, "{err}");
        let position =
            |name: &str| out.find(&format!("  {name} ")).unwrap_or_else(|| panic!("{name} in {out}"));
        let mut names = ["old", "new", "mid"];
        names.sort_by_key(|n| position(n));
        names.join(",")
    };
    assert_eq!(order(&[]), "new,mid,old");
    assert_eq!(order(&["--pending"]), "new,mid,old");
    assert_eq!(order(&["--sort", "oldest"]), "old,mid,new");
    assert_eq!(order(&["--pending", "--sort", "oldest"]), "old,mid,new");
}

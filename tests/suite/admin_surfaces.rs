//! The admin surfaces held to the endpoint's standard (issue 46): a
//! client's mistake is 400/404 and never 503, a fault is 503 and never the
//! 404 an idempotent client takes for success, decisions answer the node
//! they decided on, every route checks its scope, one lock file open per
//! process, and strangers churning connections do not keep a credential
//! holder out.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use janus_admin::api::{Needs, Scope};
use janus_registration::certs;
use serde_json::json;

use crate::admin_api::{client, credential, with_admin_api};
use crate::common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clients_mistake_is_said_once_and_a_fault_is_503_never_404() {
    let fx = Fixture::new();
    let admin_ca = certs::mint_admin_ca("test admin CA").unwrap();
    let (server, admin) = with_admin_api(&fx, &admin_ca).await;
    let api = client(&fx, admin, &credential(&admin_ca, "orchestrator", &Scope::ALL));
    let chosen = "a-chosen-token-of-the-orchestrator-0001";
    let made = api.call("POST", "/v1/tokens", Some(&json!({"token": chosen}))).await.unwrap();
    assert_eq!(made.status, 201, "{:?}", made.body);
    // A retrying client must not retry these: 422 with its code, each saying why.
    let again = api.call("POST", "/v1/tokens", Some(&json!({"token": chosen}))).await.unwrap();
    assert_eq!((again.status, again.body["code"].as_str()), (422, Some("token_exists")), "{:?}", again.body);
    assert!(again.body["error"].as_str().unwrap().contains("listed already"), "{:?}", again.body);
    let nodes = node_client(&fx, server.addr);
    let (_, _, status) = announce(&nodes, "web-60", &certs::mint_node_ca("web-60").unwrap(), chosen).await;
    assert_eq!(status, 201);
    let spent = api.call("POST", "/v1/tokens", Some(&json!({"token": chosen}))).await.unwrap();
    assert!(eventually_status(&api, chosen, 422, "admitted a node before").await, "{:?}", spent.body);
    for bad in [json!({"count": 0}), json!({"uses": 1_000_000}), json!({"expires_in_seconds": 400_000_000})] {
        let refused = api.call("POST", "/v1/tokens", Some(&bad)).await.unwrap();
        assert_eq!(refused.status, 400, "{bad}: {:?}", refused.body);
    }
    // A revoke that cannot look at the tokens file: 503 with Retry-After, not 404.
    let spare = api.call("POST", "/v1/tokens", Some(&json!({}))).await.unwrap();
    let prefix = spare.body["tokens"][0]["sha256_prefix"].as_str().unwrap().to_string();
    let tokens = fx.state().join("tokens");
    let kept = std::fs::read(&tokens).unwrap();
    std::fs::remove_file(&tokens).unwrap();
    std::fs::create_dir(&tokens).unwrap();
    let failed = api.call("DELETE", &format!("/v1/tokens/{prefix}"), None).await.unwrap();
    assert_eq!(failed.status, 503, "{:?}", failed.body);
    assert!(!failed.body["error"].as_str().unwrap().contains(fx.state().to_str().unwrap()), "no path sent");
    std::fs::remove_dir(&tokens).unwrap();
    std::fs::write(&tokens, kept).unwrap();
    let revoked = api.call("DELETE", &format!("/v1/tokens/{prefix}"), None).await.unwrap();
    assert_eq!(revoked.status, 200, "{:?}", revoked.body);
    let gone = api.call("DELETE", &format!("/v1/tokens/{prefix}"), None).await.unwrap();
    assert_eq!(gone.status, 404, "revoked: no longer listed: {:?}", gone.body);
    server.stop().await;
}

/// The tokens file is read through a cache that notices changes by time
/// and size: a refusal may take a reload to say its newest reason.
async fn eventually_status(
    api: &janus_admin::api::client::AdminClient,
    token: &str,
    status: u16,
    says: &str,
) -> bool {
    for _ in 0..50 {
        let answer = api.call("POST", "/v1/tokens", Some(&json!({"token": token}))).await.unwrap();
        if answer.status == status && answer.body["error"].as_str().unwrap_or_default().contains(says) {
            return true;
        }
        assert_ne!(answer.status, 503, "a client's mistake is never 503: {:?}", answer.body);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approving_by_name_beside_an_admitted_namesake_answers_the_node_it_approved() {
    let fx = Fixture::new();
    let admin_ca = certs::mint_admin_ca("test admin CA").unwrap();
    let (server, admin) = with_admin_api(&fx, &admin_ca).await;
    let api = client(&fx, admin, &credential(&admin_ca, "orchestrator", &Scope::ALL));
    let token = add_token(&fx.state(), &[]);
    let nodes = node_client(&fx, server.addr);
    // A VM rebuilt under its hostname: the first admitted, the second pending.
    let (first, _, status) =
        announce(&nodes, "web-70", &certs::mint_node_ca("web-70").unwrap(), &token).await;
    assert_eq!(status, 201);
    let rebuilt_ca = certs::mint_node_ca("web-70").unwrap();
    let (rebuilt, _, _) = announce(&nodes, "web-70", &rebuilt_ca, "").await;
    let approved = api
        .call("POST", "/v1/nodes/web-70/approve", Some(&json!({"expect_ca_sha256": ca_hash(&rebuilt_ca)})))
        .await
        .unwrap();
    assert_eq!(approved.status, 200, "{:?}", approved.body);
    assert_eq!(approved.body["changed"], true);
    assert_eq!(approved.body["node"]["id"], rebuilt.as_str(), "the node approved, by its id");
    assert_eq!(approved.body["node"]["state"], "admitted");
    // The name alone now names two: a read by name says so.
    let shown = api.call("GET", "/v1/nodes/web-70", None).await.unwrap();
    assert_eq!(
        (shown.status, shown.body["code"].as_str()),
        (422, Some("ambiguous_name")),
        "{:?}",
        shown.body
    );
    assert!(shown.body["error"].as_str().unwrap().contains(first.as_str()), "{:?}", shown.body);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_is_refused_to_every_credential_without_its_scope() {
    let fx = Fixture::new();
    let admin_ca = certs::mint_admin_ca("test admin CA").unwrap();
    let (server, admin) = with_admin_api(&fx, &admin_ca).await;
    let mut held: Vec<(String, Vec<Scope>)> = vec![("no-scope".into(), vec![])];
    held.extend(Scope::ALL.iter().map(|s| (format!("only-{}", s.name()), vec![*s])));
    let table = janus_admin::api::route_table();
    assert!(table.len() >= 9, "{table:?}");
    for (name, scopes) in &held {
        let api = client(&fx, admin, &credential(&admin_ca, name, scopes));
        for (method, path, needs) in &table {
            let path = path.replace("{sha256_prefix}", "0123456789ab").replace("{id}", "nosuchnode");
            let allowed = match needs {
                Needs::Credential => true,
                Needs::Scope(scope) => scopes.contains(scope),
            };
            let status = if path == "/v1/events" {
                // A stream: refused at once, or open until we stop reading.
                let stream = api.events(&path, |_| false);
                match tokio::time::timeout(Duration::from_millis(500), stream).await {
                    Err(_) => 200,
                    Ok(Err(why)) if why.to_string().contains("403") => 403,
                    Ok(other) => panic!("{name} {path}: {other:?}"),
                }
            } else {
                let body = (method.as_str() == "POST").then(|| json!({}));
                api.call(method.as_str(), &path, body.as_ref()).await.unwrap().status
            };
            assert_eq!(status == 403, !allowed, "{name}: {method} {path} answered {status}");
        }
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_api_edits_and_the_sweep_hold_one_open_file_of_the_tokens_lock() {
    let fx = Fixture::new();
    let admin_ca = certs::mint_admin_ca("test admin CA").unwrap();
    // The sweep every 200 ms (the fixture's maintenance pace) runs beside them.
    let (server, admin_addr) = with_admin_api(&fx, &admin_ca).await;
    let api = client(&fx, admin_addr, &credential(&admin_ca, "orchestrator", &Scope::ALL));
    // Counted by the lock module as its files open and close (a scan of
    // /proc/self/fd is not atomic: a file closed and reopened between two
    // of its reads counts twice).
    let lock = fx.state().join("tokens.lock");
    let edits: Vec<_> = (0..16)
        .map(|i| {
            let api = api.clone();
            tokio::spawn(async move {
                let made = api.call("POST", "/v1/tokens", Some(&json!({"count": 3}))).await.unwrap();
                assert_eq!(made.status, 201, "{i}: {:?}", made.body);
                let prefix = made.body["tokens"][0]["sha256_prefix"].as_str().unwrap().to_string();
                let revoked = api.call("DELETE", &format!("/v1/tokens/{prefix}"), None).await.unwrap();
                assert_eq!(revoked.status, 200, "{i}: {:?}", revoked.body);
            })
        })
        .collect();
    for edit in edits {
        edit.await.unwrap();
    }
    let most = janus_core::durable::lock::most_open_at_once(&lock);
    assert_eq!(most, 1, "never two open files of tokens.lock in one process (0: never locked)");
    let (ok, listed, err) = admin(&fx.state(), &["tokens", "list", "--json"]);
    assert!(ok, "{err}");
    assert_eq!(listed.lines().count(), 32, "16 x 3 made, 16 revoked: {listed}");
    server.stop().await;
}

#[test]
fn a_command_waiting_on_a_lock_says_so_and_gives_up_after_lock_wait() {
    let fx = Fixture::new();
    let state = fx.state();
    for sub in ["nodes", "approved"] {
        std::fs::create_dir_all(state.join(sub)).unwrap();
    }
    let (ok, _, err) = admin(&state, &["tokens", "list"]);
    assert!(ok, "{err}");
    let lock = state.join("tokens.lock");
    let mut holder = std::process::Command::new("flock")
        .arg("-o")
        .arg(&lock)
        .args(["sleep", "60"])
        .spawn()
        .expect("flock(1) from util-linux");
    assert!(
        wait_for(Duration::from_secs(10), || std::fs::File::open(&lock).is_ok_and(|f| f.try_lock().is_err())),
        "flock took the lock"
    );
    let (ok, _, err) = admin(&state, &["tokens", "add", "--lock-wait", "2s"]);
    let _ = holder.kill();
    let _ = holder.wait();
    assert!(!ok);
    assert!(err.contains("waiting for a lock"), "said after a second: {err}");
    assert!(err.contains("gave up waiting for its lock after 2 s (--lock-wait); held by pid "), "{err}");
    assert!(err.contains("(flock)"), "the holder named: {err}");
    let (ok, _, err) = admin(&state, &["tokens", "add", "--lock-wait", "2s"]);
    assert!(ok, "once let go: {err}");
}

/// Strangers opening connections that say nothing, and opening again as
/// soon as they are closed, from the holder's own address and from many.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strangers_churning_connections_do_not_keep_a_credential_holder_out() {
    let fx = Fixture::new();
    let admin_ca = certs::mint_admin_ca("test admin CA").unwrap();
    let (server, admin) = with_admin_api(&fx, &admin_ca).await;
    let api = client(&fx, admin, &credential(&admin_ca, "orchestrator", &[Scope::Read]));
    // One stranger's address beside the holder's (127.0.0.1), in its /24; then many.
    for sources in [vec!["127.0.0.2".to_string()], many_sources()] {
        let stop = Arc::new(AtomicBool::new(false));
        let opened = Arc::new(AtomicUsize::new(0));
        let churners: Vec<_> = (0..96)
            .map(|i| churn(admin, sources[i % sources.len()].parse().unwrap(), stop.clone(), opened.clone()))
            .collect();
        // The table full of them before the holder comes.
        let filled = opened.clone();
        assert!(
            wait_for_async(Duration::from_secs(20), move || filled.load(Ordering::Acquire) >= 200).await,
            "the strangers churn"
        );
        // A client retries a connection that failed, as any does; under
        // pressure a handshake gets a second, which a loaded test machine
        // can miss once.
        let mut served = 0;
        for _ in 0..10 {
            for _attempt in 0..3 {
                if api.call("GET", "/v1/whoami", None).await.is_ok_and(|r| r.status == 200) {
                    served += 1;
                    break;
                }
            }
        }
        stop.store(true, Ordering::Release);
        for churner in churners {
            churner.abort();
        }
        assert_eq!(served, 10, "from {} source(s): a holder served every time", sources.len());
    }
    server.stop().await;
}

/// Issue 53: strangers flooding the admin listener from the holder's own
/// address (127.0.0.1), with connections that say nothing and with TLS
/// handshakes that present no credential: the holder's requests succeed at
/// the first try, 10 of 10 (no retry).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_gets_in_at_the_first_try_under_a_flood_from_its_own_address() {
    let fx = Fixture::new();
    let admin_ca = certs::mint_admin_ca("test admin CA").unwrap();
    let (server, admin) = with_admin_api(&fx, &admin_ca).await;
    let api = client(&fx, admin, &credential(&admin_ca, "orchestrator", &[Scope::Read]));
    // A client with no credential: its handshakes fail, and it tries again.
    let root = fx.fleet.root.cert_pem.clone();
    let stranger = {
        let mut roots = rustls::RootCertStore::empty();
        for der in janus_core::pki::all_certificates(root.as_bytes(), "root").unwrap() {
            roots.add(der).unwrap();
        }
        let config = rustls::ClientConfig::builder_with_provider(janus_core::tls::provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        janus_admin::api::client::AdminClient::from_config(&admin.to_string(), Arc::new(config))
    };
    // The strangers are another program on the holder's host: their own
    // runtime, on a thread of their own (sharing the holder's runtime would
    // keep the holder's task from sending its hello).
    let own: std::net::IpAddr = "127.0.0.1".parse().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let opened = Arc::new(AtomicUsize::new(0));
    let strangers = {
        let (stop, opened) = (stop.clone(), opened.clone());
        std::thread::spawn(move || {
            let runtime =
                tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
            runtime.block_on(async move {
                let mut flood: Vec<_> =
                    (0..64).map(|_| churn(admin, own, stop.clone(), opened.clone())).collect();
                for _ in 0..16 {
                    let (stranger, stop) = (stranger.clone(), stop.clone());
                    flood.push(tokio::spawn(async move {
                        while !stop.load(Ordering::Acquire) {
                            let _ = stranger.call("GET", "/v1/whoami", None).await;
                        }
                    }));
                }
                while !stop.load(Ordering::Acquire) {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                for task in flood {
                    task.abort();
                }
            })
        })
    };
    let filled = opened.clone();
    assert!(
        wait_for_async(Duration::from_secs(20), move || filled.load(Ordering::Acquire) >= 200).await,
        "the strangers churn"
    );
    // The holder is a program of its own too (the CLI, an orchestrator).
    let holder = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async move {
            let mut first_try = 0;
            let mut failures = Vec::new();
            for _ in 0..10 {
                match api.call("GET", "/v1/whoami", None).await {
                    Ok(reply) if reply.status == 200 => first_try += 1,
                    other => failures.push(format!("{other:?}")),
                }
            }
            (first_try, failures)
        })
    });
    let (first_try, failures) = tokio::task::spawn_blocking(move || holder.join().unwrap()).await.unwrap();
    stop.store(true, Ordering::Release);
    strangers.join().unwrap();
    assert_eq!(first_try, 10, "served at the first try under the flood: {failures:?}");
    server.stop().await;
}

/// Addresses in 24 networks of 127/8, four each.
fn many_sources() -> Vec<String> {
    (1..=24).flat_map(|net| (1..=4).map(move |host| format!("127.0.{net}.{host}"))).collect()
}

fn churn(
    admin: SocketAddr,
    source: std::net::IpAddr,
    stop: Arc<AtomicBool>,
    opened: Arc<AtomicUsize>,
) -> tokio::task::JoinHandle<()> {
    use tokio::io::AsyncReadExt;
    tokio::spawn(async move {
        while !stop.load(Ordering::Acquire) {
            let socket = tokio::net::TcpSocket::new_v4().unwrap();
            if socket.bind(SocketAddr::new(source, 0)).is_err() {
                return;
            }
            let Ok(mut stream) = socket.connect(admin).await else {
                tokio::time::sleep(Duration::from_millis(5)).await;
                continue;
            };
            opened.fetch_add(1, Ordering::AcqRel);
            // Say nothing; go again once closed.
            let mut byte = [0u8; 1];
            let _ = stream.read(&mut byte).await;
        }
    })
}

async fn wait_for_async(deadline: Duration, condition: impl Fn() -> bool) -> bool {
    let until = tokio::time::Instant::now() + deadline;
    while tokio::time::Instant::now() < until {
        if condition() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    condition()
}

// ---- The fail-closed edges: each refuses where it answered on a guess. ----

/// A restored backup that left out `tokens.meta.json` and its last good
/// copy: the state knows it had metadata (the ledger's mark), so a token
/// made with an expiry admits nobody and is not listed as never expiring.
#[tokio::test]
async fn a_backup_restored_without_the_token_metadata_fails_closed() {
    let fx = Fixture::new();
    fx.write_tokens("");
    let server = InProcess::start(fx.config()).await;
    let client = node_client(&fx, server.addr);
    let token = add_token(&fx.state(), &["--expires-in", "1h"]);
    for file in [janus_store::tokens::META_FILE, janus_store::tokens::META_GOOD_FILE] {
        std::fs::remove_file(fx.state().join(file)).unwrap();
    }
    let ca = certs::mint_node_ca("restored").unwrap();
    let answer = post(&client, &announcement("restored", &ca, &token, &new_secret())).await;
    assert_eq!(answer.status, 503, "{}", String::from_utf8_lossy(&answer.body));
    let (ok, listed, err) = admin(&fx.state(), &["tokens", "list"]);
    assert!(!ok || listed.contains("warning") || err.contains("metadata"), "said: {listed} {err}");
    assert!(!listed.contains("never"), "not listed as never expiring: {listed}");
    server.stop().await;
}

/// A first delivery whose approval note cannot be read: 503, never 200 on
/// a guess of who approved nor 202.
#[tokio::test]
async fn a_first_delivery_whose_approval_cannot_be_read_is_refused() {
    let fx = Fixture::new();
    let server = InProcess::start(fx.config()).await;
    let client = node_client(&fx, server.addr);
    let (id, secret, _) = announce(&client, "edge", &certs::mint_node_ca("edge").unwrap(), "").await;
    // Approved, but the note is unreadable (a directory in its place: EISDIR).
    let approval = fx.state().join("approved").join(&id);
    std::fs::create_dir(&approval).unwrap();
    let answer = get(&client, &format!("/register/{id}"), Some(&secret)).await;
    assert_eq!(answer.status, 503, "{}", String::from_utf8_lossy(&answer.body));
    std::fs::remove_dir(&approval).unwrap();
    std::fs::write(&approval, b"").unwrap();
    assert_eq!(get(&client, &format!("/register/{id}"), Some(&secret)).await.status, 200);
    server.stop().await;
}

/// `nodes forget` of a record whose rejection cannot be read is refused
/// before anything is removed (it would leave a rejection of its CA no
/// command can lift); a name two records carry, one unreadable, is not
/// resolved to the other.
#[tokio::test]
async fn forget_and_names_refuse_on_what_they_cannot_read() {
    let fx = Fixture::new();
    let server = InProcess::start(fx.config()).await;
    let client = node_client(&fx, server.addr);
    let (rejected, _, _) = announce(&client, "web-90", &certs::mint_node_ca("web-90").unwrap(), "").await;
    let (ok, _, err) = admin(&fx.state(), &["nodes", "reject", &rejected]);
    assert!(ok, "{err}");
    let note = fx.state().join("rejected").join(&rejected);
    let kept = std::fs::read(&note).unwrap();
    std::fs::remove_file(&note).unwrap();
    std::fs::create_dir(&note).unwrap();
    let (ok, _, err) = admin(&fx.state(), &["nodes", "forget", &rejected]);
    assert!(!ok, "refused");
    assert!(err.contains("cannot tell"), "{err}");
    assert!(fx.state().join("nodes").join(format!("{rejected}.json")).exists(), "nothing removed");
    std::fs::remove_dir(&note).unwrap();
    std::fs::write(&note, kept).unwrap();
    // Two records named web-91, one of them unreadable.
    let (first, _, _) = announce(&client, "web-91", &certs::mint_node_ca("web-91").unwrap(), "").await;
    let (second, _, _) = announce(&client, "web-91", &certs::mint_node_ca("web-91b").unwrap(), "").await;
    let record = fx.state().join("nodes").join(format!("{first}.json"));
    let kept = std::fs::read(&record).unwrap();
    std::fs::write(&record, b"{ not json").unwrap();
    let (ok, shown, err) = admin(&fx.state(), &["nodes", "show", "web-91"]);
    assert!(!ok, "not resolved to {second}: {shown}");
    assert!(err.contains(&format!("{first}.json")), "the unreadable record named: {err}");
    std::fs::write(&record, kept).unwrap();
    let (ok, _, err) = admin(&fx.state(), &["nodes", "show", "web-91"]);
    assert!(!ok && err.contains("matches 2 nodes"), "{err}");
    server.stop().await;
}

/// The pending count behind `--max-pending` counts a record it cannot read.
#[tokio::test]
async fn the_pending_cap_counts_records_it_cannot_read() {
    let fx = Fixture::new();
    let mut config = fx.config();
    config.limits.max_pending = 2;
    let server = InProcess::start(config).await;
    let client = node_client(&fx, server.addr);
    let ca = certs::mint_node_ca("edge").unwrap();
    assert_eq!(announce(&client, "edge", &ca, "").await.2, 201);
    std::fs::write(fx.state().join("nodes").join(format!("{}.json", "ab".repeat(16))), b"{ broken").unwrap();
    let refused = eventually(
        || async { post(&client, &announcement("edge", &ca, "", &new_secret())).await.status },
        |s| *s == 503,
    )
    .await;
    assert_eq!(refused, 503, "two pending: the readable one and the broken one");
    server.stop().await;
}

/// The admin CA's refusal reads the bundle's issuing CAs: the recommended
/// deployment gives the endpoint no `issuing.crt`.
#[test]
fn serve_refuses_an_admin_ca_that_is_the_bundles_issuing_ca() {
    let fx = Fixture::new();
    assert!(
        !fx.fleet_dir().join("issuing.crt").exists() || {
            std::fs::remove_file(fx.fleet_dir().join("issuing.crt")).unwrap();
            true
        }
    );
    let issuing = fx.dir.path().join("issuing-as-admin-ca.crt");
    std::fs::write(&issuing, &fx.fleet.issuing.cert_pem).unwrap();
    let out = std::process::Command::new(BIN)
        .args(fx.serve_args())
        .args(["--admin-listen", "127.0.0.1:0", "--admin-ca", issuing.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("it is the fleet's bundle.json's issuing CA 0"), "{err}");
}

/// Tokens off argv: `--token-file FILE` and `-` (standard input) wherever
/// a token is given; a token on the command line is taken, with a warning.
#[tokio::test]
async fn tokens_are_given_in_files_or_on_standard_input_not_on_argv() {
    use std::io::Write;
    let fx = Fixture::new();
    let server = InProcess::start(fx.config()).await;
    let file = fx.dir.path().join("chosen.token");
    let chosen = "from-a-file-not-the-command-line-01";
    std::fs::write(&file, format!("{chosen}\n")).unwrap();
    let (ok, out, err) =
        admin(&fx.state(), &["tokens", "add", "--json", "--token-file", file.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(!err.contains("warning"), "{err}");
    let added: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(added["token"], chosen);
    let (ok, _, err) =
        admin(&fx.state(), &["tokens", "add", "--token", "on-the-command-line-is-readable-01"]);
    assert!(ok, "{err}");
    assert!(err.contains("warning: --token puts the token on the command line"), "{err}");
    // The user-data's token from standard input.
    let mut child = std::process::Command::new(BIN)
        .args(["user-data", "announce", "--fleet"])
        .arg(fx.fleet_dir())
        .args(["--hostname", "web-95", "--address", "127.0.0.1:1", "--token-file", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(format!("{chosen}\n").as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let user_data: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(user_data["registration_token"], chosen);
    // Revoked by the token from standard input.
    let mut child = std::process::Command::new(BIN)
        .args(["tokens", "revoke", "-", "--state"])
        .arg(fx.state())
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(chosen.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let (_, listed, _) = admin(&fx.state(), &["tokens", "list", "--json"]);
    assert!(!listed.contains(&added["sha256_prefix"].as_str().unwrap().to_string()), "{listed}");
    server.stop().await;
}

/// An open event stream does not hold a shutdown for its grace: with a
/// grace of ten minutes, the server stops as soon as it is told to.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_event_streams_end_when_the_server_stops() {
    let fx = Fixture::new();
    let admin_ca = certs::mint_admin_ca("test admin CA").unwrap();
    let ca_file = fx.dir.path().join("admin-ca.crt");
    std::fs::write(&ca_file, &admin_ca.cert_pem).unwrap();
    let mut config = fx.config();
    config.shutdown_grace = Duration::from_secs(600);
    let admin = janus_admin::listener::AdminApiConfig { listen: "127.0.0.1:0".parse().unwrap(), ca: ca_file };
    let server = InProcess::start_with(config, Some(&admin), "127.0.0.1:0".parse().unwrap()).await;
    let admin = server.admin_addr.unwrap();
    let api = client(&fx, admin, &credential(&admin_ca, "dashboard", &[Scope::Read]));
    let streams: Vec<_> = (0..2)
        .map(|_| {
            let api = api.clone();
            tokio::spawn(async move { api.events("/v1/events", |_| true).await })
        })
        .collect();
    // Both open before the stop (a third for the credential is refused: the two hold their slots).
    let third = async {
        loop {
            let probe = tokio::time::timeout(Duration::from_millis(300), api.events("/v1/events", |_| true));
            match probe.await {
                Ok(Err(why)) if why.to_string().contains("503") => return,
                // Opened (the two were not both open yet): dropped, tried again.
                _ => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(20), third).await.expect("two streams open");
    tokio::time::timeout(Duration::from_secs(60), server.stop()).await.expect("stopped without its grace");
    for stream in streams {
        let _ = tokio::time::timeout(Duration::from_secs(10), stream).await.expect("the stream ended");
    }
}

//! The adversary on the admin surfaces (issue 46): the admin API's token
//! edits, approvals and rejections, with credentials of every scope,
//! racing the CLI's edits, the sweep and the hand edits; announcements
//! through a listed PROXY balancer naming sources; and `--on-admitted` on
//! both replicas across stops and kills. Their promises join the
//! checker's: a credential without a route's scope changes nothing (403),
//! no answer is 409 or a 500 outside a full disk, a proxied node's record
//! carries the source its header named, and no admission runs the program
//! twice unless a replica said it could not claim it.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};

use janus_admin::api::Scope;
use janus_admin::api::client::AdminClient;
use secrecy::ExposeSecret;
use tokio::io::AsyncWriteExt;

use super::*;

/// API calls made, and of them refused for a scope the credential lacked.
pub(super) static API_CALLS: AtomicU64 = AtomicU64::new(0);
pub(super) static API_FORBIDDEN: AtomicU64 = AtomicU64::new(0);
/// Requests another site's page sent through the admin's browser, all refused.
pub(super) static CROSS_SITE: AtomicU64 = AtomicU64::new(0);
/// Announcements through the listed balancer that were answered 201.
pub(super) static PROXIED: AtomicU64 = AtomicU64::new(0);
/// Runs of the `--on-admitted` program seen at the schedules' ends.
pub(super) static HOOK_RUNS: AtomicU64 = AtomicU64::new(0);

/// The balancer's address: listed with `--proxy-protocol`, so its
/// connections start with a header; the nodes' own (127.0.0.1) do not.
const BALANCER: &str = "127.0.0.2";

/// What the servers are started with beyond the nodes' port, and the
/// credentials the workers pick from.
pub(super) struct Surfaces {
    credentials: Vec<(Vec<Scope>, Arc<janus_registration::certs::Minted>)>,
}

fn admin_ca_file(fx: &Fixture) -> std::path::PathBuf {
    fx.dir.path().join("adversary-admin-ca.crt")
}

fn hook(fx: &Fixture) -> std::path::PathBuf {
    fx.dir.path().join("adversary-on-admitted.sh")
}

fn hook_runs(fx: &Fixture) -> std::path::PathBuf {
    fx.dir.path().join("adversary-on-admitted.runs")
}

/// The admin CA, the hook and the credentials, made before the fixture is
/// handed over to the servers' user (so they can read them).
pub(super) fn prepare(fx: &Fixture) -> Surfaces {
    use std::os::unix::fs::PermissionsExt;
    let ca = janus_registration::certs::mint_admin_ca("adversary admin CA").unwrap();
    fs::write(admin_ca_file(fx), &ca.cert_pem).unwrap();
    // One file per run: what it was given.
    fs::create_dir_all(hook_runs(fx)).unwrap();
    let script = format!(
        "#!/bin/sh\ncat > '{dir}/.run.'$$\nmv '{dir}/.run.'$$ '{dir}/run.'$$\n",
        dir = hook_runs(fx).display()
    );
    fs::write(hook(fx), script).unwrap();
    fs::set_permissions(hook(fx), fs::Permissions::from_mode(0o755)).unwrap();
    let now = janus_core::clock::now_utc();
    let scopes: Vec<Vec<Scope>> = vec![
        Scope::ALL.to_vec(),
        vec![Scope::Tokens],
        vec![Scope::Read],
        vec![Scope::Approve, Scope::Reject],
        vec![],
    ];
    let credentials = scopes
        .into_iter()
        .enumerate()
        .map(|(i, scopes)| {
            let uris: Vec<String> = scopes.iter().map(|s| s.uri()).collect();
            let minted = janus_registration::certs::mint_admin(
                &ca,
                &format!("adversary-{i}"),
                &uris,
                now - time::Duration::minutes(5),
                now + time::Duration::days(1),
            )
            .unwrap();
            (scopes, Arc::new(minted))
        })
        .collect();
    Surfaces { credentials }
}

/// The servers' flags for the surfaces.
pub(super) fn serve_args(fx: &Fixture) -> Vec<String> {
    vec![
        "--admin-listen".into(),
        "127.0.0.1:0".into(),
        "--admin-ca".into(),
        admin_ca_file(fx).display().to_string(),
        "--on-admitted".into(),
        hook(fx).display().to_string(),
        "--proxy-protocol".into(),
        BALANCER.into(),
    ]
}

/// Whether a 5xx is as promised: the disk filled or writes were denied
/// since `disk` was read, or the server logged only a want of room.
fn excused(world: &World, disk: u64, mark: &Option<(Arc<Mutex<String>>, usize)>) -> bool {
    if world.disk_was_full(disk) {
        return true;
    }
    let failures = World::failures_since(mark);
    let for_want_of_room = |l: &String| l.contains("(os error 28)") || l.contains("(os error 122)");
    !failures.is_empty() && failures.iter().all(for_want_of_room)
}

/// A running server's admin address (the newest its log names), its index and epoch.
fn admin_of(world: &World, rng: &mut StdRng) -> Option<(SocketAddr, usize, u64)> {
    let (_, server, epoch) = world.running(rng)?;
    let (log, _) = world.log_mark(server)?;
    let log = log.lock().unwrap();
    let line = log.lines().rev().find(|l| l.contains("serving the admin API"))?;
    let addr = line.split("admin_listen=").nth(1)?.split_whitespace().next()?.parse().ok()?;
    Some((addr, server, epoch))
}

fn client_of(
    world: &World,
    admin: SocketAddr,
    credential: &janus_registration::certs::Minted,
) -> AdminClient {
    AdminClient::new(
        &format!("https://{admin}"),
        world.fx.fleet.root.cert_pem.as_bytes(),
        credential.cert_pem.as_bytes(),
        credential.key_pem.expose_secret().as_bytes(),
    )
    .unwrap()
}

/// One API call by a random credential: its scopes and the reply, or
/// `None` when no server runs or the call got no answer from one stopped
/// or killed meanwhile (an answer missing from a running one is logged).
async fn call(
    world: &Arc<World>,
    rng: &mut StdRng,
    method: &'static str,
    path: String,
    body: Option<serde_json::Value>,
) -> Option<(Vec<Scope>, janus_admin::api::client::Reply)> {
    let surfaces = world.surfaces.as_ref()?;
    let (scopes, credential) = surfaces.credentials[rng.random_range(0..surfaces.credentials.len())].clone();
    let (admin, server, epoch) = admin_of(world, rng)?;
    let client = client_of(world, admin, &credential);
    API_CALLS.fetch_add(1, Ordering::Relaxed);
    let disk = world.disk_epoch.load(Ordering::SeqCst);
    let mark = world.log_mark(server);
    // Within a deadline of its own: a stopped server holds the call.
    let reply =
        tokio::time::timeout(Duration::from_secs(40), client.call(method, &path, body.as_ref())).await;
    match reply {
        Ok(Ok(reply)) => {
            if reply.status == 403 {
                API_FORBIDDEN.fetch_add(1, Ordering::Relaxed);
            }
            let fault = reply.status == 409 || (reply.status >= 500 && reply.status != 503);
            if reply.status == 409 || (fault && !excused(world, disk, &mark)) {
                world.log(Event::Failed {
                    what: format!("the admin API answered {method} {path} {}: {}", reply.status, reply.body),
                });
            }
            Some((scopes, reply))
        }
        _ if world.still_running(server, epoch) && !world.servers[server].lock().unwrap().stopped => {
            let log = world.server_log(server);
            world.log(Event::Unanswered {
                what: format!("the admin API {method} {path}; its log ends:\n{log}"),
            });
            None
        }
        _ => None,
    }
}

/// A scope the credential lacks must be 403, and the scope it has never 403.
fn scope_held(world: &World, scopes: &[Scope], needs: Scope, status: u16, what: &str) -> bool {
    let held = scopes.contains(&needs);
    if held == (status == 403) {
        world.log(Event::Failed { what: format!("{what} with scopes {scopes:?} answered {status}") });
    }
    held && status != 403
}

/// `POST /v1/tokens`, uses and expiry as `tokens add` makes them.
pub(super) async fn add_token(world: &Arc<World>, rng: &mut StdRng) {
    let (uses, expiring) = (rng.random_range(1..=3u32), rng.random_bool(0.3));
    let mut body = serde_json::json!({ "uses": uses });
    if expiring {
        body["expires_in_seconds"] = 1.into();
    }
    // An admin's hand edit of the metadata and an API edit do not overlap
    // in the model: the edit holds the hands, as the CLI's add does (an
    // async lock: the schedule's workers are never blocked on it).
    let _hands = world.meta_hands.lock().await;
    if world.meta_away.lock().unwrap().is_some() {
        return;
    }
    let Some((scopes, reply)) = call(world, rng, "POST", "/v1/tokens".into(), Some(body)).await else {
        return;
    };
    let after = now_unix();
    if scope_held(world, &scopes, Scope::Tokens, reply.status, "POST /v1/tokens") && reply.status == 201 {
        for made in reply.body["tokens"].as_array().into_iter().flatten() {
            world.tokens.lock().unwrap().push(Token {
                token: made["token"].as_str().unwrap().to_string(),
                uses,
                expired_by: expiring.then_some(after + 1),
            });
        }
    }
}

/// `DELETE /v1/tokens/<sha256 prefix>`.
pub(super) async fn revoke(world: &Arc<World>, rng: &mut StdRng) {
    let token = {
        let tokens = world.tokens.lock().unwrap();
        if tokens.is_empty() {
            return;
        }
        tokens[rng.random_range(0..tokens.len())].token.clone()
    };
    let prefix = janus_core::pki::sha256_hex(token.as_bytes())[..12].to_string();
    let Some((scopes, reply)) = call(world, rng, "DELETE", format!("/v1/tokens/{prefix}"), None).await else {
        // No answer: it may have been revoked.
        world.log(Event::RevokeTried { token });
        return;
    };
    let end = world.tick();
    if scope_held(world, &scopes, Scope::Tokens, reply.status, "DELETE /v1/tokens") {
        match reply.status {
            200 => world.log(Event::Revoked { token, end }),
            // Not listed (spent, revoked already): nothing changed.
            404 => {}
            _ => world.log(Event::RevokeTried { token }),
        }
    }
}

/// `POST /v1/nodes/<id>/approve` with the CA its console would show.
pub(super) async fn approve(world: &Arc<World>, rng: &mut StdRng) {
    let Some((id, ca, _)) = random_node(world, rng) else { return };
    let expected = world.ca_hashes.lock().unwrap()[ca].clone();
    let start = world.tick();
    let body = serde_json::json!({ "expect_ca_sha256": expected });
    let path = format!("/v1/nodes/{id}/approve");
    let Some((scopes, reply)) = call(world, rng, "POST", path, Some(body)).await else { return };
    if scope_held(world, &scopes, Scope::Approve, reply.status, "approve")
        && reply.status == 200
        && reply.body["changed"] == true
    {
        let record = record_exists(world, &id);
        world.log(Event::Approved { id, start, record });
    }
}

/// `POST /v1/nodes/<id>/reject`.
pub(super) async fn reject(world: &Arc<World>, rng: &mut StdRng) {
    let Some((id, ca, _)) = random_node(world, rng) else { return };
    let start = world.tick();
    let Some((scopes, reply)) = call(world, rng, "POST", format!("/v1/nodes/{id}/reject"), None).await else {
        // No answer: it may have rejected (and withdrawn an approval).
        let end = world.tick();
        world.log(Event::Withdrew { id, end });
        return;
    };
    let end = world.tick();
    if scope_held(world, &scopes, Scope::Reject, reply.status, "reject") {
        world.log(Event::Withdrew { id, end });
        if reply.status == 200 {
            world.log(Event::CaRejected { ca, start, end });
        }
    }
}

/// Another site's page driving the admin's browser (issue 53): a
/// cross-site form, a `no-cors` fetch or an iframe, at a route an admin's
/// credential may use (every scope), must be refused (403, or 415 for a
/// body that is not JSON) and change nothing: the checker's promises
/// (approvals stand, tokens admit their uses) see any change it made.
pub(super) async fn cross_site(world: &Arc<World>, rng: &mut StdRng) {
    let Some(surfaces) = world.surfaces.as_ref() else { return };
    let Some((admin, server, epoch)) = admin_of(world, rng) else { return };
    let credential = surfaces.credentials[0].1.clone(); // every scope
    let client = client_of(world, admin, &credential);
    let node = random_node(world, rng).map_or_else(|| "0".repeat(32), |(id, _, _)| id);
    let (method, path) = match rng.random_range(0..6u8) {
        0 => ("POST", format!("/v1/nodes/{node}/reject")),
        1 => ("POST", format!("/v1/nodes/{node}/approve")),
        2 => ("POST", "/v1/tokens".to_string()),
        3 => ("GET", "/v1/events".to_string()),
        4 => ("POST", format!("/console/nodes/{node}/reject")),
        _ => ("GET", "/console/events".to_string()),
    };
    let post = method == "POST";
    let mut headers = vec![("Sec-Fetch-Site", "cross-site")];
    let (kind, origin) = match rng.random_range(0..3u8) {
        0 => ("application/x-www-form-urlencoded", Some("https://evil.example")), // a form
        1 => ("text/plain;charset=UTF-8", Some("https://evil.example")),          // a no-cors fetch
        _ => ("", None),                                                          // an iframe
    };
    if post && !kind.is_empty() {
        headers.push(("Content-Type", kind));
    }
    if let Some(origin) = origin.filter(|_| post) {
        headers.push(("Origin", origin));
    }
    let body = if post { b"confirmed=yes&expect_ca_sha256=00&count=1".to_vec() } else { Vec::new() };
    let reply =
        tokio::time::timeout(Duration::from_secs(40), client.exchange(method, &path, &headers, body)).await;
    match reply {
        Ok(Ok(reply)) if reply.status == 403 || reply.status == 415 => {
            CROSS_SITE.fetch_add(1, Ordering::Relaxed);
        }
        Ok(Ok(reply)) => world.log(Event::Failed {
            what: format!(
                "another site's {method} {path} ({headers:?}) answered {}: {}",
                reply.status,
                reply.text()
            ),
        }),
        _ if world.still_running(server, epoch) && !world.servers[server].lock().unwrap().stopped => {
            world.log(Event::Unanswered { what: format!("another site's {method} {path}") });
        }
        _ => {}
    }
}

/// A tokenless announcement through the listed balancer, its header
/// naming a source: the record says that source.
pub(super) async fn proxied_announcement(world: &Arc<World>, rng: &mut StdRng) {
    let Some((addr, server, epoch)) = world.running(rng) else { return };
    let source = format!("203.0.113.{}:{}", rng.random_range(1..255u8), rng.random_range(1024..65535u16));
    let ca = pick_ca(world, rng, 1.0);
    let minted = world.cas.lock().unwrap()[ca].clone();
    let secret = new_secret();
    let body = announcement("proxied", &minted, "", &secret);
    let disk = world.disk_epoch.load(Ordering::SeqCst);
    let mark = world.log_mark(server);
    let answered =
        tokio::time::timeout(Duration::from_secs(30), announce_through_balancer(world, addr, &source, &body))
            .await;
    match answered {
        Ok(Some((201, id))) => {
            PROXIED.fetch_add(1, Ordering::Relaxed);
            let record = fs::read(world.state().join("nodes").join(format!("{id}.json"))).unwrap_or_default();
            let record: serde_json::Value = serde_json::from_slice(&record).unwrap_or_default();
            // Forgotten meanwhile (an age limit, an admin) says nothing.
            if record.is_object() && record["peer_address"] != source.as_str() {
                world.log(Event::Failed {
                    what: format!("a proxied node's record says {} for {source}", record["peer_address"]),
                });
            }
            world.log(Event::Answer {
                start: world.tick(),
                wall: now_unix(),
                token: String::new(),
                ca,
                id: id.clone(),
                admitted: false,
            });
            world.nodes.lock().unwrap().push(Node { id, ca, secret });
        }
        Ok(Some((status, _)))
            if status == 409 || (status >= 500 && status != 503 && !excused(world, disk, &mark)) =>
        {
            world.log(Event::Failed { what: format!("a proxied announcement answered {status}") });
        }
        Ok(Some(_)) => {}
        _ if world.still_running(server, epoch) && !world.servers[server].lock().unwrap().stopped => {
            let log = world.server_log(server);
            world.log(Event::Unanswered { what: format!("a proxied announcement; its log ends:\n{log}") });
        }
        _ => {}
    }
}

/// The status and id of an announcement sent from the balancer's address
/// with a v1 header naming `source`; `None` when refused or cut.
async fn announce_through_balancer(
    world: &World,
    addr: SocketAddr,
    source: &str,
    body: &[u8],
) -> Option<(u16, String)> {
    let socket = tokio::net::TcpSocket::new_v4().ok()?;
    socket.bind(SocketAddr::new(BALANCER.parse::<IpAddr>().unwrap(), 0)).ok()?;
    let mut tcp = socket.connect(addr).await.ok()?;
    let (ip, port) = source.rsplit_once(':').unwrap();
    tcp.write_all(format!("PROXY TCP4 {ip} 127.0.0.1 {port} {}\r\n", addr.port()).as_bytes()).await.ok()?;
    announce_over(&world.fx, tcp, addr, body).await
}

/// The hook's promise, at the schedule's end: each admission (an
/// `admitted` event, but for its time) ran the program at most once, unless
/// a replica said it could not claim it (it then runs anyway, as a
/// repeated notice is safer than a lost one). A node admitted, withdrawn
/// and admitted again is two admissions.
pub(super) fn check_hook(world: &World) -> Vec<String> {
    let mut counts: HashMap<String, (String, usize)> = HashMap::new();
    for entry in fs::read_dir(hook_runs(&world.fx)).into_iter().flatten().flatten() {
        if !entry.file_name().to_string_lossy().starts_with("run.") {
            continue;
        }
        let bytes = fs::read(entry.path()).unwrap_or_default();
        let Ok(mut given) = serde_json::from_slice::<serde_json::Value>(&bytes) else { continue };
        let id = given["id"].as_str().unwrap_or_default().to_string();
        if let Some(fields) = given.as_object_mut() {
            fields.remove("node");
            fields.remove("node_unreadable");
        }
        let key = janus_store::follow::identity(&given);
        counts.entry(key).or_insert((id, 0)).1 += 1;
    }
    HOOK_RUNS.fetch_add(counts.values().map(|(_, n)| *n as u64).sum(), Ordering::Relaxed);
    let logs = world.all_logs();
    counts
        .values()
        .filter(|(id, n)| {
            *n > 1
                && !logs.lines().any(|l| l.contains("cannot claim the admission") && l.contains(id.as_str()))
        })
        .map(|(id, n)| {
            format!(
                "--on-admitted ran {n} times for one admission of {id}, no replica said it could not claim it"
            )
        })
        .collect()
}

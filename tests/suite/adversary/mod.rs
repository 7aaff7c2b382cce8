//! A randomized adversary, model-based, as FoundationDB's simulation and
//! Jepsen's checkers test their promises: a seeded generator drives, from
//! four concurrent workers, two `serve` processes on one state directory —
//! announcements (tokens, tokenless, the same CA again, a spent token from
//! another CA), polls, and the admin's actions (approve checked and
//! `--force`, `touch approved/<id>`, `rm approved/<id>`, reject, forget,
//! `tokens add` with uses and expiry, `tokens revoke`, `tokens.meta.json`
//! moved aside and back, broken and fixed, it and its good copy removed
//! together, `tokens` put back from a backup; another site's page driving
//! the admin's browser at the admin listener)
//! — while servers are stopped (SIGSTOP) and killed (SIGKILL, restarted).
//! Every operation is logged with the order it started and ended in.
//!
//! Then a checker reads the files and the log, and asserts: no token
//! admitted more nodes than its uses; no revoked or expired token admitted
//! one; every admin approval stands until the admin changes it; a CA's
//! rejection sticks until the `nodes forget` that lifts it, and admits
//! nobody meanwhile; no acknowledged admission is lost; no record or audit
//! line is torn; no request to a running server went unanswered; each
//! server ends on SIGTERM.
//!
//! `JANUS_ADVERSARY_SECS` (default 10) is the budget: schedules of
//! [`STEPS`] steps run one after the other until it is spent, schedule `i`
//! seeded `JANUS_ADVERSARY_SEED + i` (default: from the clock). A failure
//! prints the seed: `JANUS_ADVERSARY_SEED=<seed> JANUS_ADVERSARY_SECS=1`
//! replays that schedule (the workers' interleaving varies, the choices
//! each makes do not).

use std::collections::HashMap;
use std::fs;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use crate::common::*;
use janus_agent::http::Request;
use janus_core::clock::now_unix;
use janus_registration::certs::{self, Minted};
use janus_store::tokens::{META_FILE, META_GOOD_FILE};

/// The most of its disk a schedule's state took, at its end (the filler gone).
static LARGEST_STATE: AtomicU64 = AtomicU64::new(0);
/// 500s for want of room the fill's bookkeeping did not foresee (the
/// server's log said ENOSPC while no fill was known).
static UNFORESEEN_ENOSPC: AtomicU64 = AtomicU64::new(0);

/// Operations per schedule, over all workers.
const STEPS: usize = 200;
const WORKERS: usize = 4;
const SERVERS: usize = 2;

#[derive(Debug, Clone)]
enum Event {
    /// An announcement's answer.
    Answer {
        start: u64,
        wall: i64,
        token: String,
        ca: usize,
        id: String,
        admitted: bool,
    },
    /// A request to a server that was running throughout got no answer.
    Unanswered {
        what: String,
    },
    /// An announcement a killed or stopped server did not answer: it may
    /// have spent a use of its token (recovery finishes such a claim).
    MaybeAdmitted {
        token: String,
        ca: usize,
        start: u64,
        wall: i64,
    },
    /// A hand edit (for the record of a failing schedule).
    #[allow(dead_code, reason = "read in the kept event log (Debug)")]
    Hand {
        what: String,
        at: String,
    },
    /// An announcement refused for now (503).
    Refused {
        token: String,
        why: String,
    },
    /// A request got an answer no promise allows (a 500, a 409).
    Failed {
        what: String,
    },
    Revoked {
        token: String,
        end: u64,
    },
    RevokeTried {
        token: String,
    },
    /// An admin approval (command, `--force`, touch), and whether the record was there.
    Approved {
        id: String,
        start: u64,
        record: bool,
    },
    /// An admin took a node's approval away (rm, reject, forget).
    Withdrew {
        id: String,
        end: u64,
    },
    CaRejected {
        ca: usize,
        start: u64,
        end: u64,
    },
    CaLifted {
        ca: usize,
        end: u64,
    },
}

struct Token {
    token: String,
    uses: u32,
    /// Unix seconds by which it has expired for sure.
    expired_by: Option<i64>,
}

struct Node {
    id: String,
    ca: usize,
    secret: String,
}

struct Server {
    process: Option<Process>,
    stopped: bool,
    /// Bumped at each kill and each stop: a request that spans one is
    /// excused (a server stopped most of a handshake's 5 s closes it).
    epoch: u64,
}

struct World {
    /// The state directory's own tmpfs, when mounting is allowed here:
    /// the disk can then be filled to nearly full, and freed. First, so
    /// that it is unmounted before the fixture's directory goes.
    disk: Option<Tmpfs>,
    fx: Fixture,
    servers: Vec<Mutex<Server>>,
    seq: AtomicU64,
    events: Mutex<Vec<Event>>,
    tokens: Mutex<Vec<Token>>,
    cas: Mutex<Vec<Arc<Minted>>>,
    ca_hashes: Mutex<Vec<String>>,
    nodes: Mutex<Vec<Node>>,
    /// `tokens.meta.json`'s exact bytes while it is moved aside or broken.
    meta_away: Mutex<Option<(Vec<u8>, bool)>>,
    /// Its last good copy's bytes, while both are removed behind the servers.
    good_away: Mutex<Option<Vec<u8>>>,
    tokens_backup: Mutex<Option<Vec<u8>>>,
    /// Serializes the hand edits of `tokens.meta.json` with `tokens add`
    /// (an admin does one thing at a time with one file).
    meta_hands: tokio::sync::Mutex<()>,
    /// The threads that will send a stopped server its SIGCONT: joined
    /// before the liveness phase, which needs every server running.
    resumes: Mutex<Vec<std::thread::JoinHandle<()>>>,
    /// Bumped each time the disk is filled or freed: a request that spans
    /// one may fail with a 500 (ENOSPC), as promised.
    disk_epoch: AtomicU64,
    /// One fill or free (or denial of writes) at a time; held across a
    /// denial's health probes.
    disk_hands: tokio::sync::Mutex<()>,
    /// The uid the servers run as when this test runs as root (the admin
    /// commands then run as root, as under `sudo`): `None` otherwise.
    owner: Option<u32>,
    /// The links planted in the state directory, to a canary outside it or
    /// to nothing, that no writer may follow ([`owners`]).
    links: Mutex<Vec<std::path::PathBuf>>,
    /// The admin surfaces' credentials ([`surfaces`]).
    surfaces: Option<surfaces::Surfaces>,
    /// The logs of the server processes killed and replaced.
    past_logs: Mutex<String>,
}

impl World {
    fn tick(&self) -> u64 {
        self.seq.fetch_add(1, Ordering::SeqCst)
    }
    fn log(&self, event: Event) {
        self.events.lock().unwrap().push(event);
    }
    /// Whether the disk was full at some point since `epoch` was read.
    fn disk_was_full(&self, epoch: u64) -> bool {
        let now = self.disk_epoch.load(Ordering::SeqCst);
        now != epoch || now % 2 == 1
    }

    fn state(&self) -> std::path::PathBuf {
        self.fx.state()
    }

    /// A running server's address, its index and epoch.
    fn running(&self, rng: &mut StdRng) -> Option<(std::net::SocketAddr, usize, u64)> {
        let start = rng.random_range(0..SERVERS);
        (0..SERVERS).map(|k| (start + k) % SERVERS).find_map(|i| {
            let server = self.servers[i].lock().unwrap();
            match (&server.process, server.stopped) {
                (Some(p), false) => Some((p.addr, i, server.epoch)),
                _ => None,
            }
        })
    }

    /// The warnings and errors at the end of server `i`'s log.
    fn server_log(&self, i: usize) -> String {
        let mut server = self.servers[i].lock().unwrap();
        let epoch = server.epoch;
        let Some(process) = server.process.as_mut() else { return "(no process)".into() };
        let exited = process.child.try_wait().ok().flatten();
        let log = process.log();
        let lines: Vec<&str> =
            log.lines().filter(|l| l.contains(" ERROR ") || l.contains(" WARN ")).collect();
        format!(
            "server at {} epoch {epoch} exited {exited:?}:\n{}",
            process.addr,
            lines[lines.len().saturating_sub(8)..].join("\n")
        )
    }

    /// Server `i`'s log so far: the handle to read it and its length now.
    fn log_mark(&self, i: usize) -> Option<(Arc<Mutex<String>>, usize)> {
        let server = self.servers[i].lock().unwrap();
        let log = server.process.as_ref()?.log.clone();
        let len = log.lock().unwrap().len();
        Some((log, len))
    }

    /// The `request failed` lines logged after `mark`, waiting up to 2 s
    /// for one: stderr is read by a thread, so a line may lag its answer.
    fn failures_since(mark: &Option<(Arc<Mutex<String>>, usize)>) -> Vec<String> {
        let Some((log, from)) = mark else { return vec![] };
        let failed = || -> Vec<String> {
            let log = log.lock().unwrap();
            log.get(*from..)
                .unwrap_or("")
                .lines()
                .filter(|l| l.contains("request failed"))
                .map(String::from)
                .collect()
        };
        wait_for(Duration::from_secs(2), || !failed().is_empty());
        failed()
    }

    /// Everything the servers' processes logged, the killed ones' too.
    fn all_logs(&self) -> String {
        let mut whole = self.past_logs.lock().unwrap().clone();
        for server in &self.servers {
            if let Some(process) = server.lock().unwrap().process.as_ref() {
                whole.push_str(&process.log());
            }
        }
        whole
    }

    fn still_running(&self, i: usize, epoch: u64) -> bool {
        let server = self.servers[i].lock().unwrap();
        server.epoch == epoch && server.process.is_some()
    }
}

fn serve_args(fx: &Fixture) -> Vec<String> {
    let mut args = fx.serve_args();
    args.extend(
        ["--maintenance-every", "150ms", "--pending-max-age", "1h", "--shutdown-grace", "2s"]
            .map(String::from),
    );
    args.extend(surfaces::serve_args(fx));
    args
}

/// Runs one admin command; whether it succeeded, and its output.
fn admin_cmd(world: &World, args: &[&str]) -> (bool, String) {
    let (ok, out, err) = admin(&world.state(), args);
    (ok, format!("{out}{err}"))
}

async fn step(world: &Arc<World>, rng: &mut StdRng) {
    let roll = rng.random_range(0..120u32);
    match roll {
        0..=5 => add_token(world, rng).await,
        6..=35 => announce_with_token(world, rng).await,
        36..=43 => announce_tokenless(world, rng).await,
        44..=51 => poll(world, rng).await,
        52..=57 => approve(world, rng, false).await,
        58..=60 => approve(world, rng, true).await,
        61..=63 => touch_approval(world, rng),
        64..=66 => remove_approval(world, rng),
        67..=69 => reject(world, rng).await,
        70..=72 => forget(world, rng).await,
        73..=77 => revoke(world, rng).await,
        78..=83 => {
            let (world, coin) = (world.clone(), rng.random_bool(0.5));
            tokio::task::spawn_blocking(move || meta_by_hand(&world, coin)).await.unwrap()
        }
        // Both metadata files removed behind the running servers (issue
        // 53): they must fail closed as a fresh process would, whatever
        // they read before.
        112..=114 => {
            // Half the time a token the servers have not read yet: added
            // by the CLI just before, and announced with while both are away.
            let fresh = rng.random_bool(0.5);
            let away = world.meta_away.lock().unwrap().is_some();
            if fresh && away {
                let hands = world.clone();
                tokio::task::spawn_blocking(move || both_metadata_files_away(&hands)).await.unwrap();
            }
            let fresh = match fresh {
                true => add_token_with(world, rng.random_range(2..=3), rng.random_bool(0.3)).await,
                false => None,
            };
            let hands = world.clone();
            tokio::task::spawn_blocking(move || both_metadata_files_away(&hands)).await.unwrap();
            if let Some(token) = fresh {
                let ca = pick_ca(world, rng, 1.0);
                send_announcement(world, rng, token, ca).await;
            }
        }
        84..=87 => tokens_backup(world, rng),
        88..=93 => stop_a_server(world, rng),
        94..=95 => kill_a_server(world, rng).await,
        96..=97 => {
            // Within 4 KiB of full: less than the health probe's 8 KiB write.
            let (world, leave) = (world.clone(), rng.random_range(0..4 * 1024u64));
            tokio::task::spawn_blocking(move || fill_or_free(&world, leave)).await.unwrap();
        }
        98..=100 => owners::plant_link(world, rng),
        101..=102 => owners::deny_writes(world, rng).await,
        103..=104 => surfaces::add_token(world, rng).await,
        105..=106 => surfaces::revoke(world, rng).await,
        107..=108 => surfaces::approve(world, rng).await,
        109 => surfaces::reject(world, rng).await,
        110..=111 => surfaces::proxied_announcement(world, rng).await,
        115..=116 => surfaces::cross_site(world, rng).await,
        _ => tokio::time::sleep(Duration::from_millis(rng.random_range(0..300))).await,
    }
}

async fn add_token(world: &Arc<World>, rng: &mut StdRng) {
    let (uses, expiring) = (rng.random_range(1..=3u32), rng.random_bool(0.3));
    add_token_with(world, uses, expiring).await;
}

/// `tokens add --uses USES` (`--expires-in 1s` when `expiring`); the token.
async fn add_token_with(world: &Arc<World>, uses: u32, expiring: bool) -> Option<String> {
    let world2 = world.clone();
    let out = tokio::task::spawn_blocking(move || {
        let _hands = world2.meta_hands.blocking_lock();
        // An admin adds no token while the file is in their editor.
        if world2.meta_away.lock().unwrap().is_some() {
            return ((false, String::new()), 0);
        }
        let mut args = vec!["tokens".to_string(), "add".into(), "--uses".into(), uses.to_string()];
        if expiring {
            args.extend(["--expires-in".into(), "1s".into()]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        // The token is stdout alone: a warning the command logs on stderr
        // (a full disk kept it from refreshing tokens.meta.last-good.json)
        // is not part of it.
        let (ok, out, _) = admin(&world2.state(), &args);
        ((ok, out), now_unix())
    })
    .await
    .unwrap();
    let ((ok, text), after) = out;
    let token = text.trim().to_string();
    if ok {
        world.tokens.lock().unwrap().push(Token {
            token: token.clone(),
            uses,
            expired_by: expiring.then_some(after + 1),
        });
    }
    ok.then_some(token)
}

/// A new CA (with probability `fresh`), or one that announced before.
fn pick_ca(world: &World, rng: &mut StdRng, fresh: f64) -> usize {
    let mut cas = world.cas.lock().unwrap();
    if cas.is_empty() || rng.random_bool(fresh) {
        let ca = certs::mint_node_ca(&format!("edge-{}", cas.len())).unwrap();
        world.ca_hashes.lock().unwrap().push(ca_hash(&ca));
        cas.push(Arc::new(ca));
        return cas.len() - 1;
    }
    rng.random_range(0..cas.len())
}

async fn send_announcement(world: &Arc<World>, rng: &mut StdRng, token: String, ca: usize) {
    let Some((addr, server, epoch)) = world.running(rng) else { return };
    let minted = world.cas.lock().unwrap()[ca].clone();
    let secret = new_secret();
    let body = announcement("edge", &minted, &token, &secret);
    let client = node_client(&world.fx, addr);
    let (start, wall) = (world.tick(), now_unix());
    let disk = world.disk_epoch.load(Ordering::SeqCst);
    let mark = world.log_mark(server);
    let request = Request {
        method: "POST",
        path: "/register",
        headers: vec![("Content-Type", "application/json".into())],
        body: Some(&body),
    };
    let answer = client.send(&request).await.map(|(a, _)| a).map_err(|e| e.to_string());
    match answer {
        Ok(answer) if answer.status == 201 => {
            let value = json(&answer);
            let id = value["id"].as_str().unwrap_or_default().to_string();
            let admitted = value["admitted"] == true;
            world.log(Event::Answer { start, wall, token, ca, id: id.clone(), admitted });
            world.nodes.lock().unwrap().push(Node { id, ca, secret });
        }
        // A write that failed for want of room: a 500 the node retries.
        Ok(answer) if answer.status == 500 && world.disk_was_full(disk) => {
            world.log(Event::MaybeAdmitted { token, ca, start, wall })
        }
        Ok(answer) if answer.status != 503 => {
            // A 500 whose cause the server logged as a want of room (ENOSPC,
            // EDQUOT) is as promised, whenever the disk filled.
            let failures = World::failures_since(&mark);
            let for_want_of_room = |l: &String| l.contains("(os error 28)") || l.contains("(os error 122)");
            if answer.status == 500 && !failures.is_empty() && failures.iter().all(for_want_of_room) {
                // Counted and said: the fill's bookkeeping did not foresee it.
                UNFORESEEN_ENOSPC.fetch_add(1, Ordering::Relaxed);
                world.log(Event::MaybeAdmitted { token, ca, start, wall });
                return;
            }
            let log = world.server_log(server);
            world.log(Event::Failed {
                what: format!(
                    "an announcement answered {}: {}; the failures it logged since it was sent: {failures:?}; \
                     its log ends:\n{log}",
                    answer.status,
                    answer.text()
                ),
            });
        }
        Ok(answer) => world.log(Event::Refused { token, why: answer.text() }),
        Err(why) if world.still_running(server, epoch) => {
            let log = world.server_log(server);
            world.log(Event::Unanswered {
                what: format!("an announcement to server {server} ({why}); its log ends:\n{log}"),
            });
        }
        // Killed or stopped meanwhile: it may have spent a use all the same.
        Err(_) => world.log(Event::MaybeAdmitted { token, ca, start, wall }),
    }
}

async fn announce_with_token(world: &Arc<World>, rng: &mut StdRng) {
    let token = {
        let tokens = world.tokens.lock().unwrap();
        if tokens.is_empty() {
            return;
        }
        // The newest half the time: it is the one with uses left.
        let n = if rng.random_bool(0.5) { tokens.len() - 1 } else { rng.random_range(0..tokens.len()) };
        tokens[n].token.clone()
    };
    let ca = pick_ca(world, rng, 0.6);
    send_announcement(world, rng, token, ca).await;
}

async fn announce_tokenless(world: &Arc<World>, rng: &mut StdRng) {
    let ca = pick_ca(world, rng, 0.5);
    send_announcement(world, rng, String::new(), ca).await;
}

async fn poll(world: &Arc<World>, rng: &mut StdRng) {
    let Some((id, secret)) = random_node(world, rng).map(|n| (n.0, n.2)) else { return };
    let Some((addr, server, epoch)) = world.running(rng) else { return };
    let client = node_client(&world.fx, addr);
    let path = format!("/register/{id}");
    let disk = world.disk_epoch.load(Ordering::SeqCst);
    let headers = vec![("Authorization", format!("Bearer {secret}"))];
    let request = Request { method: "GET", path: &path, headers, body: None };
    let answer = client.send(&request).await.map(|(a, _)| a).map_err(|e| e.to_string());
    match answer {
        Ok(answer) if answer.status >= 500 && answer.status != 503 && !world.disk_was_full(disk) => {
            world
                .log(Event::Failed { what: format!("a poll answered {}: {}", answer.status, answer.text()) });
        }
        Ok(_) => {}
        Err(why) if world.still_running(server, epoch) => {
            let log = world.server_log(server);
            world.log(Event::Unanswered {
                what: format!("a poll to server {server} ({why}); its log ends:\n{log}"),
            });
        }
        _ => {}
    }
}

fn random_node(world: &World, rng: &mut StdRng) -> Option<(String, usize, String)> {
    let nodes = world.nodes.lock().unwrap();
    (!nodes.is_empty()).then(|| {
        let n = &nodes[rng.random_range(0..nodes.len())];
        (n.id.clone(), n.ca, n.secret.clone())
    })
}

fn record_exists(world: &World, id: &str) -> bool {
    world.state().join("nodes").join(format!("{id}.json")).exists()
}

async fn approve(world: &Arc<World>, rng: &mut StdRng, force: bool) {
    let Some((id, _, _)) = random_node(world, rng) else { return };
    approve_node(world, id, force).await;
}

async fn approve_node(world: &Arc<World>, id: String, force: bool) {
    let world2 = world.clone();
    tokio::task::spawn_blocking(move || {
        let mut args = vec!["nodes", "approve", &id, "--unchecked"];
        if force {
            args.push("--force");
        }
        let start = world2.tick();
        let (ok, out) = admin_cmd(&world2, &args);
        if ok && out.contains("approved") && !out.contains("nothing changed") {
            let record = record_exists(&world2, &id);
            world2.log(Event::Approved { id, start, record });
        }
    })
    .await
    .unwrap();
}

fn touch_approval(world: &Arc<World>, rng: &mut StdRng) {
    let Some((id, _, _)) = random_node(world, rng) else { return };
    let path = world.state().join("approved").join(&id);
    // Not `exists`: a dangling link planted there is not written through.
    if fs::symlink_metadata(&path).is_ok() {
        return;
    }
    let start = world.tick();
    // `create_new` (O_EXCL) fails on a link planted meanwhile.
    if fs::OpenOptions::new().write(true).create_new(true).open(&path).is_err() {
        return; // a full disk, or a link
    }
    let record = record_exists(world, &id);
    world.log(Event::Approved { id, start, record });
}

fn remove_approval(world: &Arc<World>, rng: &mut StdRng) {
    let Some((id, _, _)) = random_node(world, rng) else { return };
    let _ = fs::remove_file(world.state().join("approved").join(&id));
    let end = world.tick();
    world.log(Event::Withdrew { id, end });
}

async fn reject(world: &Arc<World>, rng: &mut StdRng) {
    let Some((id, ca, _)) = random_node(world, rng) else { return };
    reject_node(world, id, ca).await;
}

async fn reject_node(world: &Arc<World>, id: String, ca: usize) {
    let start = world.tick();
    let world2 = world.clone();
    tokio::task::spawn_blocking(move || {
        let (ok, _) = admin_cmd(&world2, &["nodes", "reject", &id]);
        let end = world2.tick();
        world2.log(Event::Withdrew { id, end });
        if ok {
            world2.log(Event::CaRejected { ca, start, end });
        }
    })
    .await
    .unwrap();
}

async fn forget(world: &Arc<World>, rng: &mut StdRng) {
    let Some((id, ca, _)) = random_node(world, rng) else { return };
    forget_node(world, id, ca).await;
}

async fn forget_node(world: &Arc<World>, id: String, ca: usize) {
    let world2 = world.clone();
    tokio::task::spawn_blocking(move || {
        let (ok, out) = admin_cmd(&world2, &["nodes", "forget", &id]);
        let end = world2.tick();
        world2.log(Event::Withdrew { id, end });
        // A forget that failed partway (its audit line on a full disk) may
        // have lifted the rejection before it failed.
        if !ok || out.contains("lifted") {
            world2.log(Event::CaLifted { ca, end });
        }
    })
    .await
    .unwrap();
}

async fn revoke(world: &Arc<World>, rng: &mut StdRng) {
    let token = {
        let tokens = world.tokens.lock().unwrap();
        if tokens.is_empty() {
            return;
        }
        tokens[rng.random_range(0..tokens.len())].token.clone()
    };
    revoke_token(world, token).await;
}

async fn revoke_token(world: &Arc<World>, token: String) {
    let world2 = world.clone();
    tokio::task::spawn_blocking(move || {
        let (ok, _) = admin_cmd(&world2, &["tokens", "revoke", &token]);
        let end = world2.tick();
        if ok {
            world2.log(Event::Revoked { token, end });
        } else {
            // A revoke refused (a full disk) may still have made its mark.
            world2.log(Event::RevokeTried { token });
        }
    })
    .await
    .unwrap();
}

/// Moves `tokens.meta.json` aside or breaks it (an editor, a stray
/// comma), or puts back exactly what was there.
fn meta_by_hand(world: &Arc<World>, aside: bool) {
    // Waited for by trying: the named scenarios call this on a worker.
    let _hands = loop {
        if let Ok(hands) = world.meta_hands.try_lock() {
            break hands;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let path = world.state().join(META_FILE);
    let mut away = world.meta_away.lock().unwrap();
    let at = janus_core::clock::now_rfc3339();
    let size = fs::metadata(&path).map(|m| m.len()).ok();
    world.log(Event::Hand {
        what: format!("meta: away={:?} size now {size:?}", away.as_ref().map(|a| a.1)),
        at,
    });
    match away.take() {
        // On a full disk the write fails (maybe halfway): still away, put back later.
        Some((bytes, broken)) => {
            if fs::write(&path, &bytes).is_err() {
                *away = Some((bytes, broken));
            } else if let Some(good) = world.good_away.lock().unwrap().take() {
                // Best effort: a missing good copy beside a file that reads is made again.
                let _ = fs::write(world.state().join(META_GOOD_FILE), good);
            }
        }
        None => {
            // A planted link is not the admin's file to edit.
            if fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink()) {
                return;
            }
            let Ok(bytes) = fs::read(&path) else { return };
            if aside {
                fs::remove_file(&path).unwrap();
                *away = Some((bytes, false));
            } else {
                let mut broken = bytes.clone();
                broken.insert(1, b',');
                *away = Some((bytes, true));
                let _ = fs::write(&path, broken);
            }
        }
    }
}

/// Removes `tokens.meta.json` and its last good copy at once (a restored
/// backup that left both out), or puts back what is away.
fn both_metadata_files_away(world: &Arc<World>) {
    let away = world.meta_away.lock().unwrap().is_some();
    if !away {
        let good = world.state().join(META_GOOD_FILE);
        if fs::symlink_metadata(&good).is_ok_and(|m| m.file_type().is_symlink()) {
            return;
        }
        let Ok(bytes) = fs::read(&good) else { return };
        *world.good_away.lock().unwrap() = Some(bytes);
        let _ = fs::remove_file(&good);
        world.log(Event::Hand {
            what: "the metadata's good copy removed".into(),
            at: janus_core::clock::now_rfc3339(),
        });
    }
    // Moves the file aside (its good copy gone too), or puts both back.
    meta_by_hand(world, true);
}

/// Keeps a copy of `tokens`, or puts an earlier copy back.
fn tokens_backup(world: &Arc<World>, rng: &mut StdRng) {
    let path = world.state().join("tokens");
    let mut backup = world.tokens_backup.lock().unwrap();
    let at = janus_core::clock::now_rfc3339();
    world.log(Event::Hand { what: format!("tokens backup held: {}", backup.is_some()), at });
    match backup.take() {
        Some(bytes) if rng.random_bool(0.7) => {
            let _ = fs::write(&path, bytes);
        }
        _ => *backup = fs::read(&path).ok(),
    }
}

/// Fills the state's disk to within `leave` bytes of full, or frees it.
fn fill_or_free(world: &World, leave: u64) {
    if world.disk.is_none() {
        return;
    }
    let _hands = world.disk_hands.blocking_lock();
    let filler = world.fx.dir.path().join("state").join("filler");
    let epoch = world.disk_epoch.load(Ordering::SeqCst);
    if epoch % 2 == 1 {
        // Freed, then said: a request that saw "full" may still fail.
        let _ = fs::remove_file(&filler);
        world.disk_epoch.fetch_add(1, Ordering::SeqCst);
        return;
    }
    // Said, then filled: a request that saw "free" and then fails for want
    // of room finds the epoch changed.
    world.disk_epoch.fetch_add(1, Ordering::SeqCst);
    let stat = rustix::fs::statvfs(world.state()).unwrap();
    let free = stat.f_bavail * stat.f_frsize;
    let _ = fs::write(&filler, vec![b'x'; free.saturating_sub(leave) as usize]);
}

fn signal(process: &Process, signal: rustix::process::Signal) {
    let pid = rustix::process::Pid::from_child(&process.child);
    let _ = rustix::process::kill_process(pid, signal);
}

/// SIGSTOPs one server while another runs, for up to 1.5 s.
fn stop_a_server(world: &Arc<World>, rng: &mut StdRng) {
    let i = rng.random_range(0..SERVERS);
    let others_run = (0..SERVERS).any(|k| k != i && !world.servers[k].lock().unwrap().stopped);
    let mut server = world.servers[i].lock().unwrap();
    let Some(process) = server.process.as_ref().filter(|_| others_run && !server.stopped) else { return };
    signal(process, rustix::process::Signal::STOP);
    server.stopped = true;
    server.epoch += 1;
    // From a thread of its own: the async workers may all be blocked on
    // a lock the stopped server holds.
    let (world, pause) = (world.clone(), Duration::from_millis(rng.random_range(100..1500)));
    let resume = std::thread::spawn({
        let world = world.clone();
        move || {
            std::thread::sleep(pause);
            let mut server = world.servers[i].lock().unwrap();
            if let Some(process) = &server.process {
                signal(process, rustix::process::Signal::CONT);
            }
            server.stopped = false;
        }
    });
    world.resumes.lock().unwrap().push(resume);
}

/// SIGKILLs one server and starts it again.
async fn kill_a_server(world: &Arc<World>, rng: &mut StdRng) {
    let i = rng.random_range(0..SERVERS);
    let old = {
        let mut server = world.servers[i].lock().unwrap();
        // Stopped, or being restarted by another worker.
        if server.stopped || server.process.is_none() {
            return;
        }
        server.epoch += 1;
        server.process.take()
    };
    if let Some(old) = &old {
        world.past_logs.lock().unwrap().push_str(&old.log());
    }
    drop(old); // Process's drop: SIGKILL, then wait
    let world2 = world.clone();
    let fresh =
        tokio::task::spawn_blocking(move || owners::start_server(&world2.fx, world2.owner)).await.unwrap();
    world.servers[i].lock().unwrap().process = Some(fresh);
}

/// The liveness phase: the admin lists every token again (a list put back
/// whole), then each is presented by new CAs until it admits no more.
async fn spend_every_use(world: &Arc<World>) {
    let listed: Vec<(String, u32)> =
        world.tokens.lock().unwrap().iter().map(|t| (t.token.clone(), t.uses)).collect();
    let text: String = listed.iter().map(|(t, _)| format!("{t}\n")).collect();
    let path = world.state().join("tokens");
    let mut file = fs::OpenOptions::new().append(true).create(true).open(&path).unwrap();
    std::io::Write::write_all(&mut file, text.as_bytes()).unwrap();
    let mut rng = StdRng::seed_from_u64(0);
    for (token, uses) in listed {
        for _ in 0..=uses {
            let ca = pick_ca(world, &mut rng, 1.0);
            send_announcement(world, &mut rng, token.clone(), ca).await;
        }
    }
}

/// Stops every server with SIGTERM; the ones that did not end in 20 s.
fn terminate(world: &World) -> Vec<String> {
    let mut stuck = Vec::new();
    for (i, server) in world.servers.iter().enumerate() {
        let mut server = server.lock().unwrap();
        let Some(process) = server.process.as_mut() else { continue };
        signal(process, rustix::process::Signal::CONT);
        signal(process, rustix::process::Signal::TERM);
        let ended = wait_for(Duration::from_secs(20), || process.child.try_wait().unwrap().is_some());
        if !ended {
            stuck.push(format!("server {i} still runs 20 s after SIGTERM"));
        }
    }
    stuck
}

/// Every broken promise the files and the log show.
fn check(world: &World) -> Vec<String> {
    let mut broken = terminate(world);
    broken.extend(owners::links_followed(world));
    broken.extend(surfaces::check_hook(world));
    let state = world.state();
    for name in names_renamed_over_with_a_second_link(&state) {
        broken.push(format!("{name} has a second link: a rename over it may go unseen on NFS"));
    }
    let events = world.events.lock().unwrap().clone();
    let tokens = world.tokens.lock().unwrap();
    let ca_hashes = world.ca_hashes.lock().unwrap().clone();
    broken.extend(torn(&state));
    let first_admitted = first_admissions(&events);
    broken.extend(token_promises(&tokens, &events, &first_admitted));
    broken.extend(decision_promises(&state, &events, &first_admitted, &ca_hashes));
    for event in &events {
        match event {
            Event::Unanswered { what } => broken.push(format!("{what} went unanswered by a running server")),
            Event::Failed { what } => broken.push(what.clone()),
            _ => {}
        }
    }
    broken
}

/// When each id was first answered admitted: (start, wall time, token, CA).
type FirstAdmitted<'a> = HashMap<&'a str, (u64, i64, &'a str, usize)>;

/// No record or audit line torn.
fn torn(state: &std::path::Path) -> Vec<String> {
    let mut broken = Vec::new();
    for path in files_below(&state.join("nodes")) {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if name.ends_with(".json") && !name.starts_with(".tmp-") {
            let bytes = fs::read(&path).unwrap_or_default();
            if serde_json::from_slice::<serde_json::Value>(&bytes).is_err() {
                broken.push(format!("torn record {name}"));
            }
        }
    }
    for line in audit_trail(state).lines().filter(|l| !l.trim().is_empty()) {
        if serde_json::from_str::<serde_json::Value>(line).is_err() {
            broken.push(format!("torn audit line {line:?}"));
        }
    }
    broken
}

fn first_admissions(events: &[Event]) -> FirstAdmitted<'_> {
    let mut first_admitted: FirstAdmitted<'_> = HashMap::new();
    for event in events {
        if let Event::Answer { start, wall, token, ca, id, admitted: true } = event {
            let seen = first_admitted.entry(id.as_str()).or_insert((*start, *wall, token.as_str(), *ca));
            if *start < seen.0 {
                *seen = (*start, *wall, token.as_str(), *ca);
            }
        }
    }
    first_admitted
}

/// A token admits at most its uses, none once revoked or expired, and
/// loses none.
fn token_promises(tokens: &[Token], events: &[Event], first_admitted: &FirstAdmitted<'_>) -> Vec<String> {
    let mut broken = Vec::new();
    for t in tokens.iter() {
        let admitted: Vec<_> =
            first_admitted.iter().filter(|(_, (_, _, token, _))| *token == t.token).collect();
        if admitted.len() > t.uses as usize {
            broken.push(format!("a token of {} uses admitted {} nodes", t.uses, admitted.len()));
        }
        for (id, (start, wall, _, ca)) in &admitted {
            // The same CA's announcement whose answer was lost may have
            // claimed the use earlier: past that commit point the
            // admission is finished, not undone, whatever came after.
            let claimed_by = |before: &dyn Fn(u64, i64) -> bool| {
                events.iter().any(|e| {
                    matches!(e, Event::MaybeAdmitted { token, ca: c, start, wall }
                        if *token == t.token && c == ca && before(*start, *wall))
                })
            };
            let revoked_before = events.iter().any(|e| {
                matches!(e, Event::Revoked { token, end } if *token == t.token && end < start
                    && !claimed_by(&|s, _| s < *end))
            });
            if revoked_before {
                broken.push(format!("a revoked token admitted {id}"));
            }
            if t.expired_by.is_some_and(|by| *wall > by && !claimed_by(&|_, w| w <= by)) {
                broken.push(format!("an expired token admitted {id}"));
            }
        }
    }
    // An admin's withdrawal that had not ended before `after` (after it, or running meanwhile).
    // No use lost: each token still listed, neither revoked nor expiring,
    // admitted exactly its uses once the liveness phase spent them all
    // (less the announcements a kill or a stop left unanswered).
    for t in tokens.iter().filter(|t| t.expired_by.is_none()) {
        let revoked = events.iter().any(
            |e| matches!(e, Event::Revoked { token, .. } | Event::RevokeTried { token } if *token == t.token),
        );
        let admitted = first_admitted.values().filter(|(_, _, token, _)| *token == t.token).count();
        let maybe = events
            .iter()
            .filter(|e| matches!(e, Event::MaybeAdmitted { token, .. } if *token == t.token))
            .count();
        if !revoked && admitted + maybe < t.uses as usize {
            let refusals: Vec<&str> = events
                .iter()
                .filter_map(|e| match e {
                    Event::Refused { token, why } if *token == t.token => Some(why.as_str()),
                    _ => None,
                })
                .collect();
            let pending = events
                .iter()
                .filter(|e| matches!(e, Event::Answer { token, admitted: false, .. } if *token == t.token))
                .count();
            broken.push(format!(
                "a token of {} uses admitted {admitted} nodes: its other uses were lost ({pending} answered \
                 pending, refused: {refusals:?})",
                t.uses
            ));
        }
    }
    broken
}

/// Every admin approval stands until the admin changes it; no
/// acknowledged admission is lost; a rejection sticks until the forget
/// that lifts it, and admits nobody meanwhile.
fn decision_promises(
    state: &std::path::Path,
    events: &[Event],
    first_admitted: &FirstAdmitted<'_>,
    ca_hashes: &[String],
) -> Vec<String> {
    let mut broken = Vec::new();
    let withdrawn_after = |id: &str, after: u64| {
        events.iter().any(|e| matches!(e, Event::Withdrew { id: w, end } if w == id && *end > after))
    };
    // Every admin approval stands until the admin changes it.
    for event in events {
        if let Event::Approved { id, start, record } = event
            && !withdrawn_after(id, *start)
        {
            if !state.join("approved").join(id).exists() {
                broken.push(format!("an admin's approval of {id} was undone"));
            }
            if *record && !state.join("nodes").join(format!("{id}.json")).exists() {
                broken.push(format!("the record of {id}, approved by an admin, was forgotten"));
            }
        }
    }
    // No acknowledged admission lost.
    for (id, (start, _, _, _)) in first_admitted {
        if !withdrawn_after(id, *start) {
            let record = fs::read(state.join("nodes").join(format!("{id}.json"))).ok();
            let admitted = record
                .and_then(|r| serde_json::from_slice::<serde_json::Value>(&r).ok())
                .is_some_and(|r| r["admitted"] == true);
            if !admitted || !state.join("approved").join(id).exists() {
                broken.push(format!("the acknowledged admission of {id} was lost"));
            }
        }
    }
    // A rejection sticks until the forget that lifts it, and admits nobody meanwhile.
    for event in events {
        let Event::CaRejected { ca, start: rejected, end } = event else { continue };
        // A forget that ended after the reject started may have lifted it.
        let lifted_after = |after: u64| {
            events.iter().any(|e| matches!(e, Event::CaLifted { ca: c, end } if c == ca && *end > after))
        };
        if !lifted_after(*rejected) && !state.join("rejected-cas").join(&ca_hashes[*ca]).exists() {
            broken.push(format!("the rejection of CA {ca} came undone"));
        }
        for other in events {
            if let Event::Answer { start, ca: c, id, admitted: true, .. } = other
                && c == ca
                && start > end
                && !lifted_after(*rejected)
            {
                broken.push(format!("rejected CA {ca} was admitted as {id}"));
            }
        }
    }
    broken
}

/// One schedule: fresh state, two servers, the steps, the checker.
/// A fresh state (on a tmpfs of its own where mounting is allowed) and
/// two servers on it.
fn new_world() -> Arc<World> {
    let fx = Fixture::new();
    let disk = Tmpfs::mount(&fx.state(), "16m");
    static SAID: std::sync::Once = std::sync::Once::new();
    if disk.is_none() {
        SAID.call_once(|| skipped("mount -t tmpfs is refused here: no schedule fills the disk"));
    }
    fx.write_tokens("");
    let surfaces = Some(surfaces::prepare(&fx));
    let owner = owners::hand_over(&fx);
    let servers = (0..SERVERS)
        .map(|_| {
            let process = owners::start_server(&fx, owner);
            Mutex::new(Server { process: Some(process), stopped: false, epoch: 0 })
        })
        .collect();
    Arc::new(World {
        disk,
        fx,
        servers,
        seq: AtomicU64::new(0),
        events: Mutex::default(),
        tokens: Mutex::default(),
        cas: Mutex::default(),
        ca_hashes: Mutex::default(),
        nodes: Mutex::default(),
        meta_away: Mutex::default(),
        good_away: Mutex::default(),
        tokens_backup: Mutex::default(),
        resumes: Mutex::default(),
        meta_hands: tokio::sync::Mutex::default(),
        disk_epoch: AtomicU64::new(0),
        disk_hands: tokio::sync::Mutex::default(),
        owner,
        links: Mutex::default(),
        surfaces,
        past_logs: Mutex::default(),
    })
}

/// Puts back what the schedule left away, spends every use left, stops the
/// servers and checks every promise: what it found broken.
async fn finish(world: &Arc<World>) -> Vec<String> {
    // Room comes back, and whatever is away, before the servers stop, as an admin would do.
    if world.disk_epoch.load(Ordering::SeqCst) % 2 == 1 {
        let world = world.clone();
        tokio::task::spawn_blocking(move || fill_or_free(&world, 0)).await.unwrap();
    }
    if let Some((bytes, _)) = world.meta_away.lock().unwrap().take()
        && let Err(e) = fs::write(world.state().join(META_FILE), bytes)
    {
        // What holds the disk, to say why.
        let du = std::process::Command::new("du").arg("-a").arg(world.state()).output().unwrap();
        let mut lines: Vec<String> = String::from_utf8_lossy(&du.stdout).lines().map(String::from).collect();
        lines.sort_by_key(|l| {
            std::cmp::Reverse(l.split_whitespace().next().and_then(|n| n.parse::<u64>().ok()))
        });
        panic!(
            "tokens.meta.json could not be put back ({e}); the disk's epoch {}; du:\n{}",
            world.disk_epoch.load(Ordering::SeqCst),
            lines[..lines.len().min(12)].join("\n")
        );
    }
    owners::remove_links(world);
    // Every stopped server resumed: the last SIGCONT sent, not hoped for.
    let resumes = std::mem::take(&mut *world.resumes.lock().unwrap());
    tokio::task::spawn_blocking(move || resumes.into_iter().for_each(|r| r.join().unwrap())).await.unwrap();
    spend_every_use(world).await;
    if world.disk.is_some()
        && let Ok(stat) = rustix::fs::statvfs(world.state())
    {
        let used = (stat.f_blocks - stat.f_bfree) * stat.f_frsize;
        LARGEST_STATE.fetch_max(used, Ordering::Relaxed);
    }
    let world = world.clone();
    tokio::task::spawn_blocking(move || check(&world)).await.unwrap()
}

/// One schedule: what it broke, and how many events it logged.
async fn schedule(seed: u64) -> (Vec<String>, usize) {
    let world = new_world();
    let workers: Vec<_> = (0..WORKERS as u64)
        .map(|w| {
            let world = world.clone();
            tokio::spawn(async move {
                let mut rng = StdRng::seed_from_u64(seed.wrapping_mul(31).wrapping_add(w));
                for _ in 0..STEPS / WORKERS {
                    step(&world, &mut rng).await;
                }
            })
        })
        .collect();
    for worker in workers {
        worker.await.unwrap();
    }
    let broken = finish(&world).await;
    let steps = world.events.lock().unwrap().len();
    if !broken.is_empty() && std::env::var_os("JANUS_ADVERSARY_KEEP").is_some() {
        let kept = std::env::temp_dir().join(format!("adversary-{seed}"));
        let _ = std::process::Command::new("cp").arg("-a").arg(world.state()).arg(&kept).status();
        let log: Vec<String> = world.events.lock().unwrap().iter().map(|e| format!("{e:?}")).collect();
        let _ = fs::write(kept.join("adversary-events.txt"), log.join("\n"));
        eprintln!("adversary: the state of seed {seed} is kept in {}", kept.display());
    }
    (broken, steps)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_randomized_adversary_breaks_no_promise() {
    let budget = std::env::var("JANUS_ADVERSARY_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(10u64);
    let base = std::env::var("JANUS_ADVERSARY_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs()
    });
    let started = Instant::now();
    let (mut schedules, mut events) = (0u64, 0usize);
    while schedules == 0 || started.elapsed() < Duration::from_secs(budget) {
        let seed = base + schedules;
        let (broken, logged) = schedule(seed).await;
        assert!(
            broken.is_empty(),
            "seed {seed} broke {} promise(s) (replay: JANUS_ADVERSARY_SEED={seed} JANUS_ADVERSARY_SECS=1):\n{}",
            broken.len(),
            broken.join("\n")
        );
        schedules += 1;
        events += logged;
    }
    eprintln!(
        "adversary: {schedules} schedule(s) of {STEPS} steps, seeds {base}..={}, {events} events checked, \
         {} links planted, {} denials of writes said by /healthz, the largest state {} KiB of its 16 MiB \
         disk, {} 500s for want of room outside a known fill, {} admin API calls ({} refused for a scope), \
         {} proxied announcements, {} --on-admitted runs, {} cross-site requests refused, no promise broken",
        base + schedules - 1,
        owners::LINKS_PLANTED.load(Ordering::Relaxed),
        owners::DENIALS_SAID.load(Ordering::Relaxed),
        LARGEST_STATE.load(Ordering::Relaxed) / 1024,
        UNFORESEEN_ENOSPC.load(Ordering::Relaxed),
        surfaces::API_CALLS.load(Ordering::Relaxed),
        surfaces::API_FORBIDDEN.load(Ordering::Relaxed),
        surfaces::PROXIED.load(Ordering::Relaxed),
        surfaces::HOOK_RUNS.load(Ordering::Relaxed),
        surfaces::CROSS_SITE.load(Ordering::Relaxed),
    );
}

mod owners;
mod scenarios;
mod surfaces;

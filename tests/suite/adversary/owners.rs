//! The adversary's hands that need an owner other than the servers': when
//! this test runs as root, the state directory is handed to an unprivileged
//! uid the servers run as, and the admin commands keep running as root, as
//! under `sudo`: every file an admin command makes must stay the servers'
//! to read and rewrite. Writes can then be denied for real (a directory
//! made read-only stops the servers, not root), and `/healthz` asked while
//! they are: it must say so within a few seconds and keep saying it.
//!
//! Links are planted where a writer may create a file (an approval, a
//! rejected CA's note, `tokens.meta.json`), to a canary outside the state
//! directory or to nothing: the checker asserts that no writer followed one
//! (the canary unchanged, no dangling target created). The admin removes
//! the links still there before the servers stop.

use std::os::unix::fs::PermissionsExt;

use super::*;

/// The uid and gid the servers run as, when the test runs as root: an
/// unprivileged one that owns nothing else (the image's `nonroot`).
const SERVER_UID: u32 = 65532;

/// How many links were planted, and write denials `/healthz` said, in
/// this process: the adversary's summary reports them.
pub(super) static LINKS_PLANTED: AtomicU64 = AtomicU64::new(0);
pub(super) static DENIALS_SAID: AtomicU64 = AtomicU64::new(0);

const CANARY_TEXT: &[u8] = b"a canary: no writer of the state directory may reach this file\n";

/// Hands `fx`'s directory (certificates and state) to [`SERVER_UID`] when
/// this process is root; the uid the servers run as, if so.
pub(super) fn hand_over(fx: &Fixture) -> Option<u32> {
    static SAID: std::sync::Once = std::sync::Once::new();
    if !rustix::process::geteuid().is_root() {
        SAID.call_once(|| {
            skipped("not root: servers and admin commands run as one user, and no write is denied")
        });
        return None;
    }
    let chowned = std::process::Command::new("chown")
        .arg("-R")
        .arg(format!("{SERVER_UID}:{SERVER_UID}"))
        .arg(fx.dir.path())
        .status()
        .is_ok_and(|s| s.success());
    assert!(chowned, "chown -R of the fixture failed");
    fs::write(canary(fx), CANARY_TEXT).unwrap();
    Some(SERVER_UID)
}

/// A `serve` process on `fx`, as `owner` when there is one.
pub(super) fn start_server(fx: &Fixture, owner: Option<u32>) -> Process {
    let mut command = std::process::Command::new(BIN);
    command.args(serve_args(fx));
    if let Some(uid) = owner {
        std::os::unix::process::CommandExt::uid(&mut command, uid);
        std::os::unix::process::CommandExt::gid(&mut command, uid);
    }
    Process::start_command(command)
}

fn canary(fx: &Fixture) -> std::path::PathBuf {
    fx.dir.path().join("canary")
}

/// A target no file has, outside the state directory.
fn nowhere(fx: &Fixture, n: usize) -> std::path::PathBuf {
    fx.dir.path().join(format!("nowhere-{n}"))
}

/// Plants a link, to the canary or to nothing, where a writer may create a
/// file and nothing is: a node's approval, a CA's rejection note, or
/// `tokens.meta.json`.
pub(super) fn plant_link(world: &Arc<World>, rng: &mut StdRng) {
    let state = world.state();
    let (path, _hands) = match rng.random_range(0..3) {
        0 => {
            let Some((id, _, _)) = random_node(world, rng) else { return };
            (state.join("approved").join(id), None)
        }
        1 => {
            let hashes = world.ca_hashes.lock().unwrap();
            if hashes.is_empty() {
                return;
            }
            (state.join("rejected-cas").join(&hashes[rng.random_range(0..hashes.len())]), None)
        }
        _ => {
            // Not while the admin has the file in an editor (nor while an
            // edit is under way: then this one is skipped, never waited for).
            let Ok(hands) = world.meta_hands.try_lock() else { return };
            if world.meta_away.lock().unwrap().is_some() {
                return;
            }
            (state.join(META_FILE), Some(hands))
        }
    };
    let mut links = world.links.lock().unwrap();
    let target = if rng.random_bool(0.5) { canary(&world.fx) } else { nowhere(&world.fx, links.len()) };
    // `symlink` fails when the name is taken: only where nothing is.
    if std::os::unix::fs::symlink(&target, &path).is_ok() {
        let at = janus_core::clock::now_rfc3339();
        world.log(Event::Hand { what: format!("link {} -> {}", path.display(), target.display()), at });
        links.push(path);
        LINKS_PLANTED.fetch_add(1, Ordering::Relaxed);
    }
}

/// The admin takes away the planted links still there.
pub(super) fn remove_links(world: &World) {
    for path in world.links.lock().unwrap().iter() {
        if fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
            let _ = fs::remove_file(path);
        }
    }
}

/// The links some writer followed: the canary changed, a target made.
pub(super) fn links_followed(world: &World) -> Vec<String> {
    let mut followed = Vec::new();
    let planted = world.links.lock().unwrap().len();
    if world.owner.is_some() && fs::read(canary(&world.fx)).ok().as_deref() != Some(CANARY_TEXT) {
        followed.push("a writer followed a planted link: the canary outside the state changed".into());
    }
    for n in 0..planted {
        if fs::symlink_metadata(nowhere(&world.fx, n)).is_ok() {
            followed.push(format!("a writer followed a planted dangling link: it made {n}"));
        }
    }
    followed
}

/// Makes one directory the health probe writes to read-only for the
/// servers, asks `/healthz` of a running server until it is not 200
/// (within 5 s), then once more, and gives the mode back. Requests that
/// span it may fail (500) as on a full disk.
pub(super) async fn deny_writes(world: &Arc<World>, rng: &mut StdRng) {
    if world.owner.is_none() {
        return;
    }
    let sub = [".", "nodes", ledger_dir(), "approved", "audit"][rng.random_range(0..5)];
    let Some((addr, server, epoch)) = world.running(rng) else { return };
    let _hands = world.disk_hands.lock().await;
    // A full disk fails the probe already: nothing to learn.
    if world.disk_epoch.load(Ordering::SeqCst) % 2 == 1 {
        return;
    }
    let dir = world.state().join(sub);
    let Ok(mode) = fs::metadata(&dir).map(|m| m.permissions().mode()) else { return };
    // Said, then denied; given back, then said.
    world.disk_epoch.fetch_add(1, Ordering::SeqCst);
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o555)).unwrap();
    let said = unavailable_within(world, addr, Duration::from_secs(5)).await;
    let said_again = match said {
        Ok(()) => unavailable_within(world, addr, Duration::ZERO).await,
        Err(why) => Err(why),
    };
    fs::set_permissions(&dir, fs::Permissions::from_mode(mode)).unwrap();
    world.disk_epoch.fetch_add(1, Ordering::SeqCst);
    if said_again.is_ok() {
        DENIALS_SAID.fetch_add(1, Ordering::Relaxed);
    }
    if let Err(why) = said_again
        && world.still_running(server, epoch)
        && !world.servers[server].lock().unwrap().stopped
    {
        world.log(Event::Failed {
            what: format!("/healthz of server {server} while {sub}/ refused its writes: {why}"),
        });
    }
}

fn ledger_dir() -> &'static str {
    janus_store::LEDGER_DIR
}

/// Asks `/healthz` every 300 ms until it answers something other than 200,
/// for at most `within`; the last answer when it never did.
async fn unavailable_within(
    world: &World,
    addr: std::net::SocketAddr,
    within: Duration,
) -> Result<(), String> {
    let client = node_client(&world.fx, addr);
    let request = Request { method: "GET", path: "/healthz", headers: vec![], body: None };
    let deadline = Instant::now() + within;
    loop {
        let answer = client.send(&request).await.map(|(a, _)| a);
        let last = match answer {
            Ok(answer) if answer.status != 200 => return Ok(()),
            Ok(answer) => format!("200 {}", answer.text()),
            Err(e) => format!("no answer: {e}"),
        };
        if Instant::now() >= deadline {
            return Err(last);
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

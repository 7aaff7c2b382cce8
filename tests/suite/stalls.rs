//! The async boundary: a state file that stops answering (a hung network
//! mount's stand-in: `tokens` becomes a FIFO nobody writes, so opening it
//! blocks) stalls the work that needs it on the blocking pool, never the
//! async workers: polls and announcements are still answered, and
//! `/healthz` says the state is stalled instead of hanging; and SIGTERM
//! still ends the process.

use std::time::{Duration, Instant};

use crate::common::*;
use janus_registration::certs;

#[tokio::test]
async fn a_hung_state_file_stalls_no_worker_and_healthz_says_so() {
    let fx = Fixture::new();
    // In a process of its own: its stuck pool threads end with it.
    let mut args = fx.serve_args();
    args.extend(["--shutdown-grace".into(), "2s".into()]);
    let mut server = Process::start(&args);
    let (client, path, secret) = approved_node(&fx, server.addr).await;
    assert_eq!(get(&client, "/healthz", None).await.status, 200);

    let tokens = fx.state().join("tokens");
    let _ = std::fs::remove_file(&tokens);
    rustix::fs::mknodat(rustix::fs::CWD, &tokens, rustix::fs::FileType::Fifo, 0o600.into(), 0).unwrap();

    // The next check hangs on the FIFO: a pool thread blocked opening it,
    // as the kernel says (`wchan`), not guessed from a sleep. That the
    // check is then said after its 10 s is the virtual-time test below.
    let pid = server.child.id();
    let stuck_on_the_fifo = || {
        std::fs::read_dir(format!("/proc/{pid}/task")).into_iter().flatten().flatten().any(|task| {
            std::fs::read_to_string(task.path().join("wchan")).is_ok_and(|w| w == "wait_for_partner")
        })
    };
    let mut answers = Vec::new();
    let started = Instant::now();
    while !stuck_on_the_fifo() {
        answers.push(get(&client, "/healthz", None).await.status);
        assert!(started.elapsed() < Duration::from_secs(30), "no check stuck on the FIFO: {answers:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Probes are answered meanwhile, from the last result.
    for _ in 0..5 {
        answers.push(get(&client, "/healthz", None).await.status);
    }
    assert!(answers.iter().all(|status| *status == 200 || *status == 503), "{answers:?}");

    // The rest of the endpoint does not wait on the stuck file.
    assert_eq!(get(&client, &path, Some(&secret)).await.status, 200);
    let (id, _, status) = announce(&client, "edge", &certs::mint_node_ca("edge").unwrap(), "").await;
    assert_eq!((status, id.len()), (201, 32));

    // SIGTERM ends it, though pool threads are stuck on the FIFO: within
    // the grace and the runtime's straggler wait, with a deadline to spare.
    let pid = rustix::process::Pid::from_child(&server.child);
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    let mut exit = None;
    let ended = wait_for(Duration::from_secs(20), || {
        exit = server.child.try_wait().unwrap();
        exit.is_some()
    });
    assert!(ended, "still running 20 s after SIGTERM: {}", server.log());
    assert!(exit.unwrap().success(), "{}", server.log());
    server.kill();
}

/// The same promise in virtual time, without a process: the runtime's
/// clock is paused (`tokio::time::advance`), so the 10 s a stalled check
/// needs before it is said take no time at all.
#[tokio::test(start_paused = true)]
async fn a_stalled_health_check_is_said_after_its_time_in_virtual_time() {
    use janus_store::{AsyncStore, HEALTH_STALL, Store};
    let fx = Fixture::new();
    fx.write_tokens("");
    let store = AsyncStore::new(Store::open(&fx.state()).unwrap());
    store.lay_out().await.unwrap();
    assert!(store.health().await.is_ok(), "a first check, on a working state");
    let tokens = fx.state().join("tokens");
    tokens_become_a_fifo(&tokens);
    // Past the last result's freshness: answered from it, a new check started (it hangs on the FIFO).
    tokio::time::advance(Duration::from_millis(1100)).await;
    assert!(store.health().await.is_ok(), "the last result, while the next check runs");
    tokio::task::yield_now().await;
    tokio::time::advance(HEALTH_STALL - Duration::from_secs(1)).await;
    assert!(store.health().await.is_ok(), "not yet: the check has run 9 s");
    tokio::time::advance(Duration::from_secs(1)).await;
    let stalled = store.health().await.expect_err("said stalled once the check has run 10 s");
    assert!(stalled.to_string().contains("has not finished a health check"), "{stalled}");
    // A writer opens the FIFO and closes it: the stuck check reads an empty
    // `tokens` and ends (the pool's thread is given back before the runtime goes).
    assert!(let_the_fifo_reader_go(&tokens), "the check never opened the FIFO");
}

/// A probe that gives up while it waits on a check (its client's timeout
/// drops the request) leaves the check to finish: it is not left "running"
/// for good, every later `/healthz` a 503.
#[tokio::test(start_paused = true)]
async fn a_probe_that_gives_up_on_a_check_does_not_leave_it_running_for_good() {
    use janus_store::{AsyncStore, HEALTH_STALL, Store};
    let fx = Fixture::new();
    fx.write_tokens("");
    let store = AsyncStore::new(Store::open(&fx.state()).unwrap());
    store.lay_out().await.unwrap();
    assert!(store.health().await.is_ok(), "a first check, on a working state");
    // The last result too old to answer with: the next probe waits on a check, which hangs on a FIFO.
    tokio::time::advance(HEALTH_STALL + Duration::from_secs(1)).await;
    let tokens = fx.state().join("tokens");
    tokens_become_a_fifo(&tokens);
    // Polled once (the check starts), then dropped, as a request whose client went away.
    let gave_up = tokio::select! {
        biased;
        answer = store.health() => Some(answer),
        () = std::future::ready(()) => None,
    };
    assert!(gave_up.is_none(), "the probe waited on the hung check, and gave up");
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert!(let_the_fifo_reader_go(&tokens), "the check never opened the FIFO");
    std::fs::remove_file(&tokens).unwrap();
    fx.write_tokens("");
    // The check, unless cancelled with its probe, finishes; the next probes say 200.
    let mut healthy = false;
    for _ in 0..1000 {
        tokio::time::advance(HEALTH_STALL).await;
        if store.health().await.is_ok() {
            healthy = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(healthy, "still 503 10 s after the state works again: the cancelled check is taken as running");
}

/// Replaces `tokens` with a FIFO: a check that reads it hangs until a
/// writer opens it.
fn tokens_become_a_fifo(tokens: &std::path::Path) {
    std::fs::remove_file(tokens).unwrap();
    rustix::fs::mknodat(rustix::fs::CWD, tokens, rustix::fs::FileType::Fifo, 0o600.into(), 0).unwrap();
}

/// Opens the FIFO for writing and closes it, once a reader has it open
/// (within 10 s): the reader sees an empty file and goes on.
fn let_the_fifo_reader_go(fifo: &std::path::Path) -> bool {
    wait_for(Duration::from_secs(10), || {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
            .open(fifo)
            .is_ok()
    })
}

//! The store's health check in virtual time (the runtime's clock paused,
//! `tokio::time::advance`): a state file that stops answering (`tokens`
//! becomes a FIFO nobody writes, a hung mount's stand-in) is said stalled
//! after [`HEALTH_STALL`], never waited on; a probe that gives up leaves
//! the check to finish. The same promise through a server is the suite's
//! (`tests/suite/stalls.rs`).

#![allow(clippy::disallowed_methods, reason = "tests write and look at files by hand, as an admin does")]

use std::time::Duration;

use janus_store::{AsyncStore, HEALTH_STALL, Store};

/// The same promise in virtual time, without a process: the runtime's
/// clock is paused (`tokio::time::advance`), so the 10 s a stalled check
/// needs before it is said take no time at all.
#[tokio::test(start_paused = true)]
async fn a_stalled_health_check_is_said_after_its_time_in_virtual_time() {
    let state = tempfile::tempdir().unwrap();
    write_tokens(state.path());
    let store = AsyncStore::new(Store::open(state.path()).unwrap());
    store.lay_out().await.unwrap();
    assert!(store.health().await.is_ok(), "a first check, on a working state");
    let tokens = state.path().join("tokens");
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
    let state = tempfile::tempdir().unwrap();
    write_tokens(state.path());
    let store = AsyncStore::new(Store::open(state.path()).unwrap());
    store.lay_out().await.unwrap();
    assert!(store.health().await.is_ok(), "a first check, on a working state");
    // The last result too old to answer with: the next probe waits on a check, which hangs on a FIFO.
    tokio::time::advance(HEALTH_STALL + Duration::from_secs(1)).await;
    let tokens = state.path().join("tokens");
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
    write_tokens(state.path());
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
    use std::os::unix::fs::OpenOptionsExt;
    // Real time: the check's thread is blocking, outside the paused clock.
    for _ in 0..1000 {
        let opened = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
            .open(fifo)
            .is_ok();
        if opened {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

/// An empty `tokens`, as an admin leaves a new state directory.
fn write_tokens(state: &std::path::Path) {
    std::fs::write(state.join("tokens"), "").unwrap();
}

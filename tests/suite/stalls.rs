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

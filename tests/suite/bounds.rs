//! No client can exhaust the server: the pending cap holds with made-up
//! tokens, the admission command's queue and processes stay bounded, the
//! metrics listener and each source are capped, the open-file limit is
//! raised. Floods are bounded in count and time, on 127.0.0.0/8 only.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use crate::common::*;
use janus_registration::certs;

/// Whether the server closed `stream` within `within` (EOF or reset), as
/// a capped connection is at accept; false when it still waits for us.
fn closed_within(stream: &mut TcpStream, within: Duration) -> bool {
    stream.set_read_timeout(Some(within)).unwrap();
    let mut byte = [0u8; 1];
    match stream.read(&mut byte) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => !matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut),
    }
}

/// A TCP connection to `addr` from the source address `from`.
fn connect_from(from: &str, addr: SocketAddr) -> TcpStream {
    use rustix::net::{AddressFamily, SocketType};
    let socket = rustix::net::socket(AddressFamily::INET, SocketType::STREAM, None).unwrap();
    rustix::net::bind(&socket, &format!("{from}:0").parse::<SocketAddr>().unwrap()).unwrap();
    rustix::net::connect(&socket, &addr).unwrap();
    TcpStream::from(socket)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn scrape(port: u16) -> String {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut out = String::new();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let _ = stream.read_to_string(&mut out);
    out
}

/// The processes whose command line holds `marker`.
fn processes_with(marker: &str) -> usize {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().bytes().all(|b| b.is_ascii_digit()))
        .filter(|e| {
            std::fs::read(e.path().join("cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).replace('\0', " ").contains(marker))
        })
        .count()
}

#[tokio::test]
async fn the_pending_cap_holds_for_made_up_tokens_and_a_real_one_still_admits() {
    let fx = Fixture::new();
    fx.write_tokens("real-token-0001-long\n");
    let mut config = fx.config();
    config.limits.max_pending = 3;
    let server = InProcess::start(config).await;
    let client = node_client(&fx, server.addr);
    for i in 0..3 {
        let ca = certs::mint_node_ca("edge").unwrap();
        let answer = post(&client, &announcement("edge", &ca, &format!("made-up-{i}"), &new_secret())).await;
        assert_eq!(answer.status, 201, "{}", answer.text());
    }
    let ca = certs::mint_node_ca("edge").unwrap();
    for token in ["made-up-again", ""] {
        let answer = post(&client, &announcement("edge", &ca, token, &new_secret())).await;
        assert_eq!(answer.status, 503, "{token:?}: {}", answer.text());
        assert!(
            answer.headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("retry-after")),
            "{:?}",
            answer.headers
        );
    }
    assert_eq!(records(&fx.state()).len(), 3, "nothing stored past the cap");
    let answer = post(&client, &announcement("edge", &ca, "real-token-0001-long", &new_secret())).await;
    assert_eq!(json(&answer)["admitted"], true, "a token that admits still does");
    server.stop().await;
}

/// A server running `script` as its admission command (1 at a time, 2
/// queued) with `timeout`, its metrics on `metrics_port`.
fn with_admission_command(
    fx: &Fixture,
    script: &std::path::Path,
    timeout: &str,
    metrics_port: u16,
) -> Process {
    let mut args = fx.serve_args();
    args.extend(
        [
            "--admission-command",
            script.to_str().unwrap(),
            "--admission-timeout",
            timeout,
            "--admission-concurrency",
            "1",
            "--admission-queue",
            "2",
            "--metrics-listen",
            &format!("127.0.0.1:{metrics_port}"),
        ]
        .map(String::from),
    );
    Process::start(&args)
}

fn announce_pending(runtime: &tokio::runtime::Runtime, client: &janus_agent::http::Endpoint, n: usize) {
    runtime.block_on(async {
        for _ in 0..n {
            let ca = certs::mint_node_ca("edge").unwrap();
            assert_eq!(post(client, &announcement("edge", &ca, "", &new_secret())).await.status, 201);
        }
    });
}

#[test]
fn the_admission_command_is_bounded_in_queue_and_processes() {
    let fx = Fixture::new();
    // Hangs, and leaves a child of its own behind: both must go.
    let marker = format!("sleep {}", 3000 + std::process::id() % 1000);
    let script = fx.dir.path().join("hang.sh");
    std::fs::write(&script, format!("#!/bin/sh\n{marker} &\n{marker}\n")).unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    // The queue's bound, with a timeout no burst outlasts however slow the
    // machine: 1 runs, 2 wait, and every other one is turned away.
    let metrics_port = free_port();
    let server = with_admission_command(&fx, &script, "10m", metrics_port);
    announce_pending(&runtime, &node_client(&fx, server.addr), 20);
    let turned_away = scrape(metrics_port)
        .lines()
        .find(|l| l.starts_with("janus_registration_admission_queue_full_total"))
        .and_then(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .unwrap_or(0);
    assert_eq!(turned_away, 17, "20 announcements, 1 running and 2 queued");
    // Stopped as a supervisor stops it: its running command goes with it.
    let mut server = server;
    let pid = rustix::process::Pid::from_child(&server.child);
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    assert!(wait_for(Duration::from_secs(20), || server.child.try_wait().unwrap().is_some()), "stopped");
    let gone = wait_for(Duration::from_secs(5), || processes_with(&marker) == 0);
    let ps = std::process::Command::new("ps").args(["-eo", "pid,ppid,pgid,stat,etimes,args"]).output();
    let left: Vec<String> = ps
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .filter(|l| l.contains(&marker))
                .map(String::from)
                .collect()
        })
        .unwrap_or_default();
    assert!(gone, "none outlives the server: {left:?}\n{}", server.log());
    // One group at a time, killed whole at its timeout: never more than
    // the command and its child, however many timeouts pass.
    let server = with_admission_command(&fx, &script, "400ms", free_port());
    announce_pending(&runtime, &node_client(&fx, server.addr), 6);
    let deadline = Instant::now() + Duration::from_secs(3);
    while Instant::now() < deadline {
        let alive = processes_with(&marker);
        assert!(alive <= 2, "{alive} processes of the command alive with a concurrency of 1");
        std::thread::sleep(Duration::from_millis(25));
    }
    drop(server);
    assert!(wait_for(Duration::from_secs(5), || processes_with(&marker) == 0), "none outlives the server");
}

#[tokio::test]
async fn one_source_cannot_hold_every_connection() {
    let fx = Fixture::new();
    let mut config = fx.config();
    config.max_connections_per_source = 4;
    let server = InProcess::start(config).await;
    let addr = server.addr;
    let held = tokio::task::spawn_blocking(move || {
        let mut held: Vec<TcpStream> = (0..4).map(|_| connect_from("127.0.0.1", addr)).collect();
        let mut fifth = connect_from("127.0.0.1", addr);
        let over = closed_within(&mut fifth, Duration::from_secs(2));
        let mut other = connect_from("127.0.0.2", addr);
        let other_open = !closed_within(&mut other, Duration::from_millis(300));
        held.push(other);
        (over, other_open, held)
    })
    .await
    .unwrap();
    assert!(held.0, "the fifth connection from one source is closed at accept");
    assert!(held.1, "another source still gets in");
    drop(held.2);
    // The slots come back when the connections close (the server may not
    // have seen them close yet: a refused attempt is retried).
    let client = node_client(&fx, server.addr);
    let answer =
        eventually(|| try_get(&client, "/healthz", None), |a| a.as_ref().is_some_and(|a| a.status == 200))
            .await;
    assert_eq!(answer.map(|a| a.status), Some(200));
    server.stop().await;
}

#[tokio::test]
async fn idle_connections_from_many_addresses_never_shut_a_new_source_out() {
    let fx = Fixture::new();
    let mut config = fx.config();
    config.max_connections = 64;
    config.max_connections_per_source = 8;
    config.max_connections_per_network = 0;
    let server = InProcess::start(config).await;
    let addr = server.addr;
    // 17 sources in 17 networks, 8 idle connections each (no TLS sent):
    // more than the table holds; reopened as they are closed, for as long
    // as the test runs (bounded: at most 4 s, at most 2,000 connections).
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flooding = stop.clone();
    let opened_so_far = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counting = opened_so_far.clone();
    let flood = std::thread::spawn(move || {
        let sources: Vec<String> = (1..=17).map(|n| format!("127.{n}.0.1")).collect();
        let mut held: Vec<(String, TcpStream)> = Vec::new();
        let (started, mut opened) = (Instant::now(), 0);
        while !flooding.load(std::sync::atomic::Ordering::Relaxed)
            && started.elapsed() < Duration::from_secs(4)
        {
            // Each source tops up to 8; a closed one is reopened.
            held.retain_mut(|(_, s)| {
                s.set_nonblocking(true).unwrap();
                let mut byte = [0u8; 1];
                matches!(s.read(&mut byte), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
            });
            for source in &sources {
                while held.iter().filter(|(from, _)| from == source).count() < 8 && opened < 2_000 {
                    held.push((source.clone(), connect_from(source, addr)));
                    opened += 1;
                    counting.store(opened, std::sync::atomic::Ordering::Relaxed);
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        opened
    });
    // The table is full once the flood has had more connections than it
    // holds (then every new one evicted another): probed from then on.
    let full = eventually(
        || async { opened_so_far.load(std::sync::atomic::Ordering::Relaxed) },
        |opened| *opened > 64,
    )
    .await;
    assert!(full > 64, "the flood fills the table: {full} connections");
    let client = node_client(&fx, addr);
    let mut answered = 0;
    for _ in 0..20 {
        if try_get(&client, "/healthz", None).await.is_some_and(|a| a.status == 200) {
            answered += 1;
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let opened = flood.join().unwrap();
    assert!(opened > 64, "the flood filled the table: {opened} connections");
    assert_eq!(answered, 20, "a fresh source is answered every time");
    server.stop().await;
}

/// A TLS connection from `from` to `addr`, its handshake done.
async fn handshaken_from(
    from: &str,
    addr: SocketAddr,
) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(format!("{from}:0").parse().unwrap()).unwrap();
    let tcp = socket.connect(addr).await.unwrap();
    let config = std::sync::Arc::new(janus_core::tls::insecure_client_config());
    let name = rustls::pki_types::ServerName::try_from("controller.fleet.janus").unwrap();
    tokio_rustls::TlsConnector::from(config).connect(name, tcp).await.unwrap()
}

#[tokio::test]
async fn handshaken_connections_that_send_nothing_are_evicted_but_never_one_mid_request() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let fx = Fixture::new();
    let mut config = fx.config();
    config.max_connections = 16;
    config.max_connections_per_source = 0;
    config.max_connections_per_network = 0;
    let server = InProcess::start(config).await;
    let addr = server.addr;
    // A request whose headers are in and whose body is still to come.
    let body = announcement("edge", &certs::mint_node_ca("edge").unwrap(), "", &new_secret());
    let mut slow = handshaken_from("127.0.0.1", addr).await;
    let head = format!(
        "POST /register HTTP/1.1\r\nHost: controller.fleet.janus\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n",
        body.len()
    );
    slow.write_all(head.as_bytes()).await.unwrap();
    slow.flush().await.unwrap();
    // Past their handshakes, sending nothing: the whole table, from one source.
    let mut idle = Vec::new();
    for _ in 0..16 {
        idle.push(handshaken_from("127.7.0.1", addr).await);
    }
    let client = node_client(&fx, addr);
    for _ in 0..10 {
        let answer = try_get(&client, "/healthz", None).await;
        assert_eq!(answer.map(|a| a.status), Some(200), "a new source is answered");
    }
    let mut evicted = 0;
    for tls in &mut idle {
        let mut byte = [0u8; 1];
        let read = tokio::time::timeout(Duration::from_millis(200), tls.read(&mut byte)).await;
        if matches!(read, Ok(Ok(0)) | Ok(Err(_))) {
            evicted += 1;
        }
    }
    // One for the last of the 16, one (or more) for the new source's first.
    assert!(evicted >= 2, "idle connections made room: {evicted} closed");
    // The request under way was never cut off: its body goes, its answer comes.
    slow.write_all(&body).await.unwrap();
    let mut answer = vec![0u8; 16];
    slow.read_exact(&mut answer).await.unwrap();
    assert!(answer.starts_with(b"HTTP/1.1 201"), "{}", String::from_utf8_lossy(&answer));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_metrics_listener_is_capped_and_closes_idle_connections() {
    let fx = Fixture::new();
    let metrics_port = free_port();
    let mut config = fx.config();
    config.metrics_listen = Some(format!("127.0.0.1:{metrics_port}").parse().unwrap());
    // A short head time: the idle connections' end is seen sooner, not
    // guessed (each is waited for with a deadline).
    config.head_timeout = Duration::from_secs(1);
    let server = InProcess::start(config).await;
    let addr: SocketAddr = format!("127.0.0.1:{metrics_port}").parse().unwrap();
    let probe = move || {
        // Bound once the server serves (the metrics listener comes up beside it).
        assert!(
            wait_for(Duration::from_secs(10), || TcpStream::connect(addr).is_ok()),
            "the metrics port listens"
        );
        let mut idle: Vec<TcpStream> = (0..40).map(|_| connect_from("127.0.0.1", addr)).collect();
        let refused =
            idle.iter_mut().map(|s| closed_within(s, Duration::from_millis(200))).filter(|&c| c).count();
        // The idle ones that got in are closed after the header timeout.
        let all_closed = idle.iter_mut().all(|s| closed_within(s, Duration::from_secs(10)));
        (refused, all_closed, scrape(metrics_port))
    };
    let (refused, all_closed, scraped) = tokio::task::spawn_blocking(probe).await.unwrap();
    assert!(refused >= 40 - 16, "{refused} of 40 idle connections closed at once");
    assert!(all_closed, "every idle connection that got in is closed after the head time");
    assert!(scraped.contains("janus_registration_connection_failures_total"));
    server.stop().await;
}

#[test]
fn the_open_file_limit_is_raised_or_the_cap_lowered() {
    let fx = Fixture::new();
    let args = fx.serve_args().join(" ");
    // A soft limit of 256 under a hard one of 4096: raised to 4096.
    let mut raised = std::process::Command::new("sh")
        .args(["-c", &format!("ulimit -Sn 256 && ulimit -Hn 4096 && exec {BIN} {args}")])
        .env("RUST_LOG", "janus_registration=info")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = raised.id();
    let limits = || std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap_or_default();
    let seen = wait_for(Duration::from_secs(10), || {
        limits()
            .lines()
            .any(|l| l.starts_with("Max open files") && l.split_whitespace().nth(3) == Some("4096"))
    });
    let _ = raised.kill();
    let _ = raised.wait();
    assert!(seen, "{}", limits());
    // A hard limit of 300 cannot hold 1024 connections: the cap is lowered, and said so.
    let lowered = std::process::Command::new("sh")
        .args(["-c", &format!("ulimit -n 300 && exec timeout -s KILL 3 {BIN} {args} --max-connections 1024")])
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&lowered.stderr);
    assert!(log.contains("lowered it") && log.contains("max_connections=220"), "{log}");
}

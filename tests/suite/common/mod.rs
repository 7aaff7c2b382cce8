//! Shared test fixtures: a fleet and endpoint certificate minted with rcgen at
//! test time, a server on 127.0.0.1:0 (in process or as a real process), and
//! the node's own HTTPS client to talk to it.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use janus_agent::http::{Answer, Endpoint, Request};
use janus_core::protocol::AnnounceRequest;
use janus_endpoint::{self as server, ServeConfig};
use janus_registration::certs::{self, FleetMaterial, Minted};

pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_janus-registration");

/// A fleet on disk, the endpoint's certificate, and a state directory.
pub(crate) struct Fixture {
    pub dir: tempfile::TempDir,
    pub fleet: FleetMaterial,
    pub controller: Minted,
}

impl Fixture {
    pub(crate) fn new() -> Self {
        Self::with_sans(&["127.0.0.1".to_string(), "localhost".to_string()])
    }

    pub(crate) fn with_sans(sans: &[String]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let fleet = certs::mint_fleet("Test fleet", 1).unwrap();
        certs::write_fleet(&dir.path().join("fleet"), &fleet).unwrap();
        let controller = certs::mint_controller(&fleet.issuing, 30, sans).unwrap();
        certs::write_pair(&dir.path().join("controller"), &controller, false).unwrap();
        Fixture { dir, fleet, controller }
    }

    pub(crate) fn fleet_dir(&self) -> PathBuf {
        self.dir.path().join("fleet")
    }
    pub(crate) fn cert(&self) -> PathBuf {
        self.dir.path().join("controller.crt")
    }
    pub(crate) fn key(&self) -> PathBuf {
        self.dir.path().join("controller.key")
    }
    pub(crate) fn state(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    /// Defaults, but limits no test of the protocol trips over and quick
    /// reloads and maintenance.
    pub(crate) fn config(&self) -> ServeConfig {
        let mut config = ServeConfig::new(self.fleet_dir(), self.cert(), self.key(), self.state());
        config.max_connections = 256;
        // Every test client is 127.0.0.1: one source.
        config.max_connections_per_source = 256;
        config.shutdown_grace = Duration::from_secs(2);
        config.limits.burst = 1_000_000;
        config.reload_every = Duration::from_millis(200);
        config.maintenance_every = Duration::from_millis(200);
        config
    }

    pub(crate) fn write_tokens(&self, tokens: &str) {
        std::fs::create_dir_all(self.state()).unwrap();
        std::fs::write(self.state().join("tokens"), tokens).unwrap();
    }

    /// The tokens the file lists, one per line: spent ones are blanked in
    /// place (spaces), so the raw text keeps its length.
    pub(crate) fn tokens(&self) -> String {
        let text = std::fs::read_to_string(self.state().join("tokens")).unwrap_or_default();
        text.split_whitespace().map(|t| format!("{t}\n")).collect()
    }

    /// Waits until the file lists exactly `expected` (the server blanks spent
    /// tokens from a thread of its own, just after answering).
    pub(crate) fn expect_tokens(&self, expected: &str) {
        let settled = wait_for(Duration::from_secs(10), || self.tokens() == expected);
        assert!(settled, "the tokens file lists {:?}, not {expected:?}", self.tokens());
    }

    /// The serve arguments for a real process.
    pub(crate) fn serve_args(&self) -> Vec<String> {
        [
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--fleet",
            self.fleet_dir().to_str().unwrap(),
            "--cert",
            self.cert().to_str().unwrap(),
            "--key",
            self.key().to_str().unwrap(),
            "--state",
            self.state().to_str().unwrap(),
            "--rate-burst",
            "1000000",
            "--max-connections-per-source",
            "0",
            "--max-connections-per-network",
            "0",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    }
}

/// A server running in this test's runtime (both listeners, as `serve` runs them).
pub(crate) struct InProcess {
    pub addr: SocketAddr,
    /// The admin listener's address, when it has one.
    pub admin_addr: Option<SocketAddr>,
    pub app: std::sync::Arc<server::App>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
}

impl InProcess {
    pub(crate) async fn start(config: ServeConfig) -> Self {
        Self::start_on(config, "127.0.0.1:0".parse().unwrap()).await
    }

    pub(crate) async fn start_on(config: ServeConfig, addr: SocketAddr) -> Self {
        Self::start_with(config, None, addr).await
    }

    /// With the admin listener `admin` beside the nodes' port.
    pub(crate) async fn start_with(
        config: ServeConfig,
        admin: Option<&janus_admin::listener::AdminApiConfig>,
        addr: SocketAddr,
    ) -> Self {
        let checked = janus_registration::serving::prepare(config, admin).expect("startup checks pass");
        let bound = checked.bind(&addr.to_string()).unwrap();
        // As `serve` does before it serves (here before the tests look at it).
        bound.app().store.lay_out().await.unwrap();
        let (app, addr, admin_addr) = (bound.app(), bound.addr, bound.admin_addr);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(bound.serve(async move {
            let _ = stopped.await;
        }));
        InProcess { addr, admin_addr, app, stop: Some(stop), task: Some(task) }
    }

    pub(crate) async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        let _ = self.task.take().unwrap().await;
    }
}

/// A `janus-registration serve` process, its stderr collected.
pub(crate) struct Process {
    pub child: Child,
    pub addr: SocketAddr,
    pub log: Arc<Mutex<String>>,
}

impl Process {
    pub(crate) fn start(args: &[String]) -> Self {
        let mut command = Command::new(BIN);
        command.args(args);
        Self::start_command(command)
    }

    /// `command` (the binary, or a wrapper that runs it) as a server.
    pub(crate) fn start_command(mut command: Command) -> Self {
        let mut child = command
            .env("RUST_LOG", "janus_registration=debug")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let log = Arc::new(Mutex::new(String::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        let stderr = child.stderr.take().unwrap();
        let sink = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(addr) = serving_address(&line) {
                    let _ = tx.send(addr);
                }
                sink.lock().unwrap().push_str(&line);
                sink.lock().unwrap().push('\n');
            }
        });
        let Ok(addr) = rx.recv_timeout(Duration::from_secs(30)) else {
            // Not left running behind a failed test.
            let _ = child.kill();
            let _ = child.wait();
            panic!("the server did not start: {}", log.lock().unwrap());
        };
        Process { child, addr: addr.parse().unwrap(), log }
    }

    pub(crate) fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub(crate) fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }
}

/// The address in the "serving" log line, text or JSON.
fn serving_address(line: &str) -> Option<String> {
    if let Some(rest) = line.split("serving listen=").nth(1) {
        return rest.split_whitespace().next().map(str::to_string);
    }
    if line.contains("\"message\":\"serving\"") {
        let rest = line.split("\"listen\":\"").nth(1)?;
        return rest.split('"').next().map(str::to_string);
    }
    None
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The client a node provisioned with the fleet root uses.
pub(crate) fn node_client(fixture: &Fixture, addr: SocketAddr) -> Endpoint {
    let root = fixture.fleet.root.cert_pem.as_bytes();
    Endpoint::new(&addr.to_string(), root, root).unwrap()
}

pub(crate) fn announcement(name: &str, ca: &Minted, token: &str, secret: &str) -> Vec<u8> {
    AnnounceRequest {
        protocol: 2,
        name: name.into(),
        address: "10.0.2.15:9505".into(),
        ca_cert_pem: ca.cert_pem.clone(),
        registration_token: token.into(),
        poll_secret: secret.into(),
    }
    .to_go_json()
}

pub(crate) fn new_secret() -> String {
    janus_core::pki::hex(&rand::random::<[u8; 32]>())
}

pub(crate) async fn post(client: &Endpoint, body: &[u8]) -> Answer {
    try_post(client, body).await.expect("the endpoint answers")
}

/// The answer, or `None` when the connection failed (a server killed mid-request).
pub(crate) async fn try_post(client: &Endpoint, body: &[u8]) -> Option<Answer> {
    let request = Request {
        method: "POST",
        path: "/register",
        headers: vec![("Content-Type", "application/json".into())],
        body: Some(body),
    };
    client.send(&request).await.ok().map(|(answer, _)| answer)
}

pub(crate) async fn get(client: &Endpoint, path: &str, bearer: Option<&str>) -> Answer {
    try_get(client, path, bearer).await.expect("the endpoint answers")
}

/// The answer, or `None` when the connection failed (closed at accept, say).
pub(crate) async fn try_get(client: &Endpoint, path: &str, bearer: Option<&str>) -> Option<Answer> {
    let headers = bearer.map(|s| vec![("Authorization", format!("Bearer {s}"))]).unwrap_or_default();
    let request = Request { method: "GET", path, headers, body: None };
    client.send(&request).await.ok().map(|(answer, _)| answer)
}

pub(crate) fn json(answer: &Answer) -> serde_json::Value {
    serde_json::from_slice(&answer.body).unwrap_or_else(|_| panic!("not JSON: {}", answer.text()))
}

/// A port on 127.0.0.1 that refuses every connection while the socket is
/// held: bound, never listening. What a test uses for "no server there",
/// instead of a fixed port another program (a running demo) may serve.
pub(crate) fn refusing_port() -> (rustix::fd::OwnedFd, SocketAddr) {
    use rustix::net::{AddressFamily, SocketType, bind, getsockname, socket};
    let fd = socket(AddressFamily::INET, SocketType::STREAM, None).unwrap();
    bind(&fd, &SocketAddr::from(([127, 0, 0, 1], 0))).unwrap();
    let addr = getsockname(&fd).unwrap();
    let addr = SocketAddr::try_from(addr).unwrap();
    (fd, addr)
}

/// Polls `condition` until it holds or `deadline` passes.
pub(crate) fn wait_for(deadline: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < deadline {
        if condition() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    condition()
}

/// Every file below `dir`, recursively.
pub(crate) fn files_below(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                out.extend(files_below(&path));
            } else {
                out.push(path);
            }
        }
    }
    out
}

/// The rename trap (docs/deploying.md "Several replicas"): on NFS and
/// GlusterFS a client may go on resolving a name to the old file after
/// another host renamed a new one over it, for as long as the old file
/// lives on through a second link (seen for 11 s on NFSv4.2). The design
/// avoids it: only names nothing is ever renamed over share a file — the
/// ledger's markers and indexes (`token-uses/`, made by `link`, removed,
/// never replaced), claims (`nodes/.claim-*`, linked by their marker,
/// renamed to a record only when linked nowhere), a write's `.tmp-*` file
/// a crash left linked to its claim, and `tokens` (the admin's, edited in
/// place). Every other name with a second link is returned.
pub(crate) fn names_renamed_over_with_a_second_link(state: &Path) -> Vec<String> {
    use std::os::unix::fs::MetadataExt;
    files_below(state)
        .into_iter()
        .filter(|path| {
            let name = path.file_name().unwrap_or_default().to_string_lossy();
            let shared = path.starts_with(state.join("token-uses"))
                || name.starts_with(".claim-")
                || name.starts_with(".tmp-")
                || *path == state.join("tokens");
            !shared && std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file() && m.nlink() > 1)
        })
        .map(|path| path.display().to_string())
        .collect()
}

/// The parsed node records (temp files of interrupted writes skipped).
pub(crate) fn records(state: &Path) -> Vec<serde_json::Value> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(state.join("nodes")).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        if name.starts_with('.') {
            continue;
        }
        // A fresh open, ESTALE retried (a network filesystem); a record
        // forgotten or replaced between the listing and the read is skipped.
        let bytes = match janus_core::durable::read_fresh(&entry.path()) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => panic!("{name}: {e}"),
        };
        out.push(
            serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{name} is not a whole record: {e}")),
        );
    }
    out
}

/// A stand-in endpoint over real TLS that answers what a test tells it to:
/// for answers our own server would never give (409, bad bundles, 500).
pub(crate) struct FakeEndpoint {
    pub addr: SocketAddr,
    pub post: Arc<Mutex<(u16, String)>>,
    pub get: Arc<Mutex<(u16, String)>>,
    pub posts: Arc<Mutex<Vec<String>>>,
    handle: axum_server::Handle<SocketAddr>,
}

impl FakeEndpoint {
    pub(crate) async fn start(fx: &Fixture) -> Self {
        use axum::extract::State;
        use axum::http::{Method, StatusCode};
        type Shared = (Arc<Mutex<(u16, String)>>, Arc<Mutex<(u16, String)>>, Arc<Mutex<Vec<String>>>);
        let post = Arc::new(Mutex::new((500, "{}".to_string())));
        let get = Arc::new(Mutex::new((202, String::new())));
        let posts = Arc::new(Mutex::new(Vec::new()));
        let provider = janus_core::tls::provider();
        let identity = janus_core::pki::ServedIdentity::load(&fx.cert(), &fx.key(), &provider).unwrap();
        let cert = Arc::new(janus_core::tls::CurrentCert::new(identity.certified));
        let tls = janus_core::tls::server_config(cert).unwrap();
        let shared: Shared = (post.clone(), get.clone(), posts.clone());
        let app = axum::Router::new()
            .fallback(|State(s): State<Shared>, method: Method, body: String| async move {
                let (status, text) = if method == Method::POST {
                    s.2.lock().unwrap().push(body);
                    s.0.lock().unwrap().clone()
                } else {
                    s.1.lock().unwrap().clone()
                };
                (StatusCode::from_u16(status).unwrap(), text)
            })
            .with_state(shared);
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let handle = axum_server::Handle::new();
        let acceptor = axum_server::tls_rustls::RustlsAcceptor::new(
            axum_server::tls_rustls::RustlsConfig::from_config(Arc::new(tls)),
        );
        let server = axum_server::from_tcp(listener).unwrap().acceptor(acceptor).handle(handle.clone());
        tokio::spawn(server.serve(app.into_make_service()));
        FakeEndpoint { addr, post, get, posts, handle }
    }

    pub(crate) fn answer_post(&self, status: u16, body: &str) {
        *self.post.lock().unwrap() = (status, body.to_string());
    }

    pub(crate) fn answer_get(&self, status: u16, body: &str) {
        *self.get.lock().unwrap() = (status, body.to_string());
    }
}

impl Drop for FakeEndpoint {
    fn drop(&mut self) {
        self.handle.shutdown();
    }
}

/// A node directory provisioned as `user-data.sh announce` provisions it:
/// `ca.crt` and `fleet-root.crt` both the fleet's root.
pub(crate) fn provision_node(dir: &Path, addr: SocketAddr, fleet_root: &str, ca: &str, token: &str) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("address"), addr.to_string()).unwrap();
    std::fs::write(dir.join("ca.crt"), ca).unwrap();
    std::fs::write(dir.join("fleet-root.crt"), fleet_root).unwrap();
    if !token.is_empty() {
        std::fs::write(dir.join("token"), token).unwrap();
    }
}

/// An agent for `dir` with timings short enough for tests.
pub(crate) fn agent_config(dir: &Path) -> (janus_agent::AgentConfig, Arc<Mutex<Vec<String>>>) {
    use janus_agent::{AgentConfig, Console, Timings};
    let lines = Arc::new(Mutex::new(Vec::new()));
    let config = AgentConfig {
        dir: dir.to_path_buf(),
        node_ca: None,
        hostname: "edge-test".into(),
        advertise: None,
        timings: Timings {
            poll_every: Duration::from_millis(50),
            reannounce_after: Duration::from_millis(100),
            backoff_base: Duration::from_millis(20),
            backoff_cap: Duration::from_millis(200),
        },
        fail_on_fallback: true,
        console: Console::Capture(lines.clone()),
    };
    (config, lines)
}

pub(crate) fn said(lines: &Arc<Mutex<Vec<String>>>, needle: &str) -> bool {
    lines.lock().unwrap().iter().any(|l| l.contains(needle))
}

/// Re-evaluates `probe` until `done` holds of its value or 10 s pass; the last value.
pub(crate) async fn eventually<T, F, Fut>(mut probe: F, done: impl Fn(&T) -> bool) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = T>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let value = probe().await;
        if done(&value) || tokio::time::Instant::now() >= deadline {
            return value;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The binary run with `args` to its end: (success, stdout, stderr).
pub(crate) fn cli<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> (bool, String, String) {
    cli_with(Command::new(BIN).args(args))
}

/// `command` (the binary, set up by the caller) run to its end: (success, stdout, stderr).
pub(crate) fn cli_with(command: &mut Command) -> (bool, String, String) {
    let (code, stdout, stderr) = cli_exit(command);
    (code == Some(0), stdout, stderr)
}

/// `command` run to its end, for a test of its exit code: (code, stdout, stderr).
pub(crate) fn cli_exit(command: &mut Command) -> (Option<i32>, String, String) {
    let output = command.output().unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).to_string(),
        String::from_utf8_lossy(&output.stderr).to_string(),
    )
}

/// An admin command on `state`, as user alice: (success, stdout, stderr).
pub(crate) fn admin(state: &Path, args: &[&str]) -> (bool, String, String) {
    cli_with(Command::new(BIN).args(args).arg("--state").arg(state).env("USER", "alice"))
}

/// `tokens add` with `args`; the token.
pub(crate) fn add_token(state: &Path, args: &[&str]) -> String {
    let mut all = vec!["tokens", "add"];
    all.extend(args);
    let (ok, out, err) = admin(state, &all);
    assert!(ok, "{err}");
    out.trim().to_string()
}

/// Announces `name` with `ca` and `token` and a new poll secret, as a node
/// does: (the id, "" unless 201; the secret; the status).
pub(crate) async fn announce(
    client: &Endpoint,
    name: &str,
    ca: &Minted,
    token: &str,
) -> (String, String, u16) {
    let secret = new_secret();
    let answer = post(client, &announcement(name, ca, token, &secret)).await;
    let id =
        if answer.status == 201 { json(&answer)["id"].as_str().unwrap().to_string() } else { String::new() };
    (id, secret, answer.status)
}

/// The CA fingerprint as the node's console prints it.
pub(crate) fn ca_hash(ca: &Minted) -> String {
    certs::console_line(&ca.cert_pem).unwrap().rsplit(' ').next().unwrap().to_string()
}

/// The whole audit trail as text: every writer's file, and `audit.jsonl` as
/// earlier versions wrote it.
pub(crate) fn audit_trail(state: &Path) -> String {
    let mut files: Vec<PathBuf> = std::fs::read_dir(state.join("audit"))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    files.sort();
    files.insert(0, state.join("audit.jsonl"));
    files
        .iter()
        .filter_map(|f| janus_core::durable::read_fresh(f).ok())
        .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
        .collect()
}

/// The leaf certificate the endpoint presents in a fresh handshake (DER).
pub(crate) async fn presented_certificate(addr: std::net::SocketAddr) -> Vec<u8> {
    let config = std::sync::Arc::new(janus_core::tls::insecure_client_config());
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("controller.fleet.janus").unwrap();
    let tls = tokio_rustls::TlsConnector::from(config).connect(name, tcp).await.unwrap();
    tls.get_ref().1.peer_certificates().unwrap()[0].to_vec()
}

/// A node announced without a token and approved by `touch`: its client,
/// its poll path and its poll secret.
pub(crate) async fn approved_node(fx: &Fixture, addr: SocketAddr) -> (Endpoint, String, String) {
    let client = node_client(fx, addr);
    let (id, secret, _) = announce(&client, "edge", &certs::mint_node_ca("edge").unwrap(), "").await;
    std::fs::write(fx.state().join("approved").join(&id), b"").unwrap();
    (client, format!("/register/{id}"), secret)
}

/// A tmpfs of `size` at `at`, unmounted when dropped; `None` where mounting is refused.
pub(crate) struct Tmpfs(std::path::PathBuf);

impl Tmpfs {
    pub(crate) fn mount(at: &Path, size: &str) -> Option<Tmpfs> {
        std::fs::create_dir_all(at).unwrap();
        let status = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size},mode=0700"), "tmpfs"])
            .arg(at)
            .stderr(std::process::Stdio::null())
            .status();
        status.is_ok_and(|s| s.success()).then(|| Tmpfs(at.to_path_buf()))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Says a test could not run here, and why: on its output and, when CI asks
/// for it (`JANUS_TEST_SKIPS` names a file), in that file, which `.ci/run`
/// prints as a summary: no skip passes silently.
pub(crate) fn skipped(reason: &str) {
    let test = std::thread::current().name().unwrap_or("a test").to_string();
    eprintln!("SKIPPED: {test}: {reason}");
    if let Some(path) = std::env::var_os("JANUS_TEST_SKIPS") {
        use std::io::Write;
        if let Ok(mut file) = std::fs::OpenOptions::new().create(true).append(true).open(path) {
            let _ = writeln!(file, "{test}: {reason}");
        }
    }
}

/// Whether a name in `token-uses/` is a use's marker (`<mac>-<n>`), not a
/// temp file nor the index by CA (`<mac>.ca-<sha256>`).
pub(crate) fn is_use_marker(name: &str) -> bool {
    !name.starts_with('.') && !name.contains(".ca-")
}

/// Announces `body` over `tcp`, a connection the caller opened (and wrote a
/// PROXY header on, as a balancer does): the status and the id the answer
/// gives, `None` when the connection was refused or cut.
pub(crate) async fn announce_over(
    fx: &Fixture,
    tcp: tokio::net::TcpStream,
    addr: SocketAddr,
    body: &[u8],
) -> Option<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut roots = rustls::RootCertStore::empty();
    let root = janus_core::pki::first_certificate(fx.fleet.root.cert_pem.as_bytes(), "root").ok()?;
    roots.add(root.to_vec().into()).ok()?;
    let config = Arc::new(janus_core::tls::client_config(roots).ok()?);
    let name = rustls::pki_types::ServerName::try_from("controller.fleet.janus").ok()?;
    let mut tls = tokio_rustls::TlsConnector::from(config).connect(name, tcp).await.ok()?;
    let head = format!(
        "POST /register HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    tls.write_all(head.as_bytes()).await.ok()?;
    tls.write_all(body).await.ok()?;
    let mut answer = Vec::new();
    let _ = tls.read_to_end(&mut answer).await;
    let text = String::from_utf8_lossy(&answer).into_owned();
    let status = text.split(' ').nth(1)?.parse().ok()?;
    let id = text.split("\"id\":\"").nth(1).map(|rest| rest.chars().take(32).collect()).unwrap_or_default();
    Some((status, id))
}

/// The uid and gid `nobody` has here.
pub(crate) const NOBODY: &str = "65534";

/// Whether this process may run a command as [`NOBODY`] (setpriv, as root).
pub(crate) fn can_run_as_nobody() -> bool {
    Command::new("setpriv")
        .args(["--reuid", NOBODY, "--regid", NOBODY, "--clear-groups", "true"])
        .status()
        .is_ok_and(|s| s.success())
}

/// `program` run as [`NOBODY`] (see [`can_run_as_nobody`]).
pub(crate) fn as_nobody(program: &str) -> Command {
    let mut command = Command::new("setpriv");
    command.args(["--reuid", NOBODY, "--regid", NOBODY, "--clear-groups", program]);
    command
}

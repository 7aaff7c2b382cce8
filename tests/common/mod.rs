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

use janus_registration::agent::http::{Answer, Endpoint, Request};
use janus_registration::certs::{self, FleetMaterial, Minted};
use janus_registration::protocol::AnnounceRequest;
use janus_registration::server::{self, ServeConfig};

pub const BIN: &str = env!("CARGO_BIN_EXE_janus-registration");

/// A fleet on disk, the endpoint's certificate, and a state directory.
pub struct Fixture {
    pub dir: tempfile::TempDir,
    pub fleet: FleetMaterial,
    pub controller: Minted,
}

impl Fixture {
    pub fn new() -> Self {
        Self::with_sans(&["127.0.0.1".to_string(), "localhost".to_string()])
    }

    pub fn with_sans(sans: &[String]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let fleet = certs::mint_fleet("Test fleet", 1).unwrap();
        certs::write_fleet(&dir.path().join("fleet"), &fleet).unwrap();
        let controller = certs::mint_controller(&fleet.issuing, 30, sans).unwrap();
        certs::write_pair(&dir.path().join("controller"), &controller, false).unwrap();
        Fixture { dir, fleet, controller }
    }

    pub fn fleet_dir(&self) -> PathBuf {
        self.dir.path().join("fleet")
    }
    pub fn cert(&self) -> PathBuf {
        self.dir.path().join("controller.crt")
    }
    pub fn key(&self) -> PathBuf {
        self.dir.path().join("controller.key")
    }
    pub fn state(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    pub fn config(&self) -> ServeConfig {
        ServeConfig {
            fleet: self.fleet_dir(),
            cert: self.cert(),
            key: self.key(),
            state: self.state(),
            max_connections: 256,
            shutdown_grace: Duration::from_secs(2),
        }
    }

    pub fn write_tokens(&self, tokens: &str) {
        std::fs::create_dir_all(self.state()).unwrap();
        std::fs::write(self.state().join("tokens"), tokens).unwrap();
    }

    pub fn tokens(&self) -> String {
        std::fs::read_to_string(self.state().join("tokens")).unwrap_or_default()
    }

    /// The serve arguments for a real process.
    pub fn serve_args(&self) -> Vec<String> {
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
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    }
}

/// A server running in this test's runtime.
pub struct InProcess {
    pub addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
}

impl InProcess {
    pub async fn start(config: ServeConfig) -> Self {
        let prepared = server::prepare(config).expect("startup checks pass");
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(prepared.serve(listener, async move {
            let _ = stopped.await;
        }));
        InProcess { addr, stop: Some(stop), task: Some(task) }
    }

    pub async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        let _ = self.task.take().unwrap().await;
    }
}

/// A `janus-registration serve` process, its stderr collected.
pub struct Process {
    pub child: Child,
    pub addr: SocketAddr,
    pub log: Arc<Mutex<String>>,
}

impl Process {
    pub fn start(args: &[String]) -> Self {
        let mut child = Command::new(BIN)
            .args(args)
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
                if let Some(addr) = line.split("listen=").nth(1) {
                    let _ = tx.send(addr.split_whitespace().next().unwrap_or_default().to_string());
                }
                sink.lock().unwrap().push_str(&line);
                sink.lock().unwrap().push('\n');
            }
        });
        let addr = rx
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("the server did not start: {}", log.lock().unwrap()));
        Process { child, addr: addr.parse().unwrap(), log }
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The client a node provisioned with the fleet root uses.
pub fn node_client(fixture: &Fixture, addr: SocketAddr) -> Endpoint {
    let root = fixture.fleet.root.cert_pem.as_bytes();
    Endpoint::new(&addr.to_string(), root, root).unwrap()
}

pub fn announcement(name: &str, ca: &Minted, token: &str, secret: &str) -> Vec<u8> {
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

pub fn new_secret() -> String {
    janus_registration::pki::hex(&rand::random::<[u8; 32]>())
}

pub async fn post(client: &Endpoint, body: &[u8]) -> Answer {
    let request = Request {
        method: "POST",
        path: "/register",
        headers: vec![("Content-Type", "application/json".into())],
        body: Some(body),
    };
    client.send(&request).await.expect("the endpoint answers").0
}

pub async fn get(client: &Endpoint, path: &str, bearer: Option<&str>) -> Answer {
    let headers = bearer.map(|s| vec![("Authorization", format!("Bearer {s}"))]).unwrap_or_default();
    let request = Request { method: "GET", path, headers, body: None };
    client.send(&request).await.expect("the endpoint answers").0
}

pub fn json(answer: &Answer) -> serde_json::Value {
    serde_json::from_slice(&answer.body).unwrap_or_else(|_| panic!("not JSON: {}", answer.text()))
}

/// Polls `condition` until it holds or `deadline` passes.
pub fn wait_for(deadline: Duration, mut condition: impl FnMut() -> bool) -> bool {
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
pub fn files_below(dir: &Path) -> Vec<PathBuf> {
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

/// The parsed node records (temp files of interrupted writes skipped).
pub fn records(state: &Path) -> Vec<serde_json::Value> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(state.join("nodes")).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        if name.starts_with('.') {
            continue;
        }
        let bytes = std::fs::read(entry.path()).unwrap();
        out.push(
            serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{name} is not a whole record: {e}")),
        );
    }
    out
}

//! The node side of first contact, played as janusd plays it (announce over
//! protocol 2, poll while pending, check and apply the trust): the wire client in [`http`], the node's files
//! in [`node`], applying the trust in [`trust`], and here the state machine
//! of `selfRegisterIfConfigured`: announce, wait, poll, apply, with the
//! node's timings and its console lines, word for word.
//!
//! Invariants: nothing is sent but protocol 2 (never a key); a new poll
//! secret for every announcement; the token is dropped once an enrollment is
//! saved or the trust applied; a node with the `registered` mark does nothing.

pub mod http;
pub mod node;
pub mod trust;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{Answer, Endpoint, Request, Via};
use node::{Enrollment, NodeDir, NodeError, Provisioning};
use secrecy::ExposeSecret;

use janus_core::clock::go_duration;
use janus_core::protocol::{AnnounceAnswer, AnnounceRequest, NODE_API_PORT, PROTOCOL, Trust};

/// janusd's timings: a poll every 15 s while pending, a new announcement an
/// hour after a 404, and errors retried after 5 s doubling to 2 min; flags
/// shorten them for tests.
#[derive(Debug, Clone, Copy)]
pub struct Timings {
    /// While pending, the wait between polls.
    pub poll_every: Duration,
    /// After a 404, how long after the enrollment began to announce again.
    pub reannounce_after: Duration,
    /// The first wait after an error.
    pub backoff_base: Duration,
    /// The longest wait after errors.
    pub backoff_cap: Duration,
}

impl Default for Timings {
    fn default() -> Self {
        Timings {
            poll_every: Duration::from_secs(15),
            reannounce_after: Duration::from_secs(3600),
            backoff_base: Duration::from_secs(5),
            backoff_cap: Duration::from_secs(120),
        }
    }
}

impl Timings {
    /// `RetryDelay`: base, doubling, capped.
    pub fn retry_delay(&self, attempt: u32) -> Duration {
        let factor = 1u32.checked_shl(attempt.min(20)).unwrap_or(u32::MAX);
        self.backoff_base.saturating_mul(factor).min(self.backoff_cap)
    }
}

/// Where the node's console lines go.
#[derive(Clone, Default)]
pub enum Console {
    /// Printed with a timestamp, as janusd's console.
    #[default]
    Stdout,
    /// Kept in memory, for tests.
    Capture(Arc<Mutex<Vec<String>>>),
}

impl Console {
    /// Prints (or keeps) one console line.
    pub fn say(&self, line: &str) {
        match self {
            Console::Stdout => println!("{} {line}", janus_core::clock::now_rfc3339()),
            Console::Capture(lines) => lines.lock().unwrap_or_else(|e| e.into_inner()).push(line.to_string()),
        }
    }
}

/// Why the agent stopped, or could not start.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The node's directory, its CA or its user-data.
    #[error(transparent)]
    Node(#[from] NodeError),
    /// The endpoint cannot be reached as configured.
    #[error(transparent)]
    Http(#[from] http::HttpError),
    /// A file the command was given.
    #[error("{}: {cause}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        cause: std::io::Error,
    },
    /// Nothing to register with.
    #[error("{} has no address file: nothing to register with (provision it with --user-data)", .0.display())]
    NotProvisioned(PathBuf),
    /// The endpoint asked for protocol 1 (a key), which is never sent.
    #[error("{0}")]
    ProtocolViolation(String),
}

impl AgentError {
    fn file(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> AgentError + '_ {
        move |cause| AgentError::File { path: path.to_path_buf(), cause }
    }
}

/// The `agent` command as the command line gives it.
#[derive(Debug, Clone)]
pub struct AgentCommand {
    /// The node's directory.
    pub dir: PathBuf,
    /// A NoCloud user-data JSON that provisions `dir` first.
    pub user_data: Option<PathBuf>,
    /// The node CA (`PREFIX.crt`, `PREFIX.key`); minted under `pki/` when absent.
    pub node_ca: Option<PathBuf>,
    /// The hostname to announce (default: user-data's, else this machine's).
    pub name: Option<String>,
    /// The address to announce; found as janusd finds it when absent.
    pub advertise: Option<String>,
    /// One step, then an exit code.
    pub once: bool,
    /// The node's timings.
    pub timings: Timings,
    /// End with an error when the endpoint asks for protocol 1.
    pub fail_on_fallback: bool,
}

/// How an agent runs: the node's directory, what it announces, its timings.
#[derive(Clone)]
pub struct AgentConfig {
    /// The node's directory.
    pub dir: PathBuf,
    /// The node CA (`PREFIX.crt`, `PREFIX.key`); minted under `pki/` when absent.
    pub node_ca: Option<PathBuf>,
    /// The hostname to announce.
    pub hostname: String,
    /// The announced address; found as the node finds it when `None`.
    pub advertise: Option<String>,
    /// The node's timings.
    pub timings: Timings,
    /// A 409 or a 400 naming `service_cert_pem` ends the agent with an error.
    pub fail_on_fallback: bool,
    /// Where console lines go.
    pub console: Console,
}

/// What one step ended in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Nothing to do: no `address`, or the `registered` mark.
    Idle,
    /// Admitted, the trust applied.
    Admitted,
    /// Announced and waiting, or polled and still waiting (202).
    Pending,
    /// The endpoint forgot the enrollment (404): announce again later.
    Unknown,
    /// An error; retried with backoff.
    Failed(String),
    /// The endpoint asked for protocol 1 (a key): never done.
    ProtocolViolation(String),
}

/// One node: its directory, its CA, and how it runs.
pub struct Agent {
    config: AgentConfig,
    node: NodeDir,
    ca_pem: String,
    ca_sha256: String,
}

impl Agent {
    /// Opens the node's directory and its CA (minted when absent), and prints the CA's console line.
    pub fn new(config: AgentConfig) -> Result<Self, NodeError> {
        let node = NodeDir::open(&config.dir)?;
        let ca_pem = node.node_ca(config.node_ca.as_deref(), &config.hostname)?;
        let ca = janus_core::pki::NodeCa::check(&ca_pem).map_err(|e| NodeError::Invalid(e.to_string()))?;
        config.console.say(&format!("pki: this node's CA: SHA-256 {}", ca.sha256));
        Ok(Agent { config, node, ca_pem, ca_sha256: ca.sha256 })
    }

    /// The node's directory.
    pub fn node(&self) -> &NodeDir {
        &self.node
    }

    /// Runs until admitted (Ok) or a protocol violation (Err); never gives up otherwise.
    pub async fn run(&self) -> Result<Step, AgentError> {
        let mut attempt = 0;
        loop {
            let step = self.step().await;
            let wait = match &step {
                Step::Idle | Step::Admitted => return Ok(step),
                Step::ProtocolViolation(why) if self.config.fail_on_fallback => {
                    return Err(AgentError::ProtocolViolation(why.clone()));
                }
                Step::Pending => self.config.timings.poll_every,
                Step::Unknown => self.config.timings.reannounce_after,
                Step::Failed(_) | Step::ProtocolViolation(_) => {
                    attempt += 1;
                    self.config.timings.retry_delay(attempt - 1)
                }
            };
            if let Step::Failed(why) | Step::ProtocolViolation(why) = &step {
                self.config.console.say(&format!("selfregister: {why} - retrying in {}", go_duration(wait)));
            } else {
                attempt = 0;
            }
            tokio::time::sleep(wait).await;
        }
    }

    /// One step of `enroll`: poll a saved enrollment, or announce.
    pub async fn step(&self) -> Step {
        if self.node.is_registered() {
            return Step::Idle;
        }
        let provisioning = match self.node.provisioning() {
            Ok(Some(p)) => p,
            Ok(None) => return Step::Idle,
            Err(e) => return Step::Failed(format!("registration failed: {e}")),
        };
        let endpoint =
            match Endpoint::new(&provisioning.address, &provisioning.fleet_root, &provisioning.controller_ca)
            {
                Ok(e) => e,
                Err(e) => return Step::Failed(format!("registration failed: {e}")),
            };
        match self.node.enrollment() {
            Ok(Some(enrollment)) => self.poll(&endpoint, &provisioning, &enrollment).await,
            Ok(None) => self.announce(&endpoint, &provisioning).await,
            Err(e) => Step::Failed(format!("ask the Controller about the enrollment: {e}")),
        }
    }

    async fn announce(&self, endpoint: &Endpoint, provisioning: &Provisioning) -> Step {
        let addr = &provisioning.address;
        let fail = |why: String| Step::Failed(format!("registration failed: {why}"));
        let advertise = match &self.config.advertise {
            Some(a) => a.clone(),
            None => match detect_advertise_address(addr) {
                Ok(a) => a,
                Err(e) => return fail(format!("reach the Controller at {addr}: {e}")),
            },
        };
        let secret = janus_core::pki::hex(&rand::random::<[u8; 32]>());
        let request = AnnounceRequest {
            protocol: PROTOCOL,
            name: self.config.hostname.clone(),
            address: advertise.clone(),
            ca_cert_pem: self.ca_pem.clone(),
            registration_token: provisioning.token.clone(),
            poll_secret: secret.clone().into(),
        };
        self.config.console.say(&format!(
            "selfregister: announcing to Controller at {addr} as {} ({advertise}) - the node's CA: SHA-256 {}",
            self.config.hostname, self.ca_sha256
        ));
        let body = request.to_go_json();
        let post = Request {
            method: "POST",
            path: "/register",
            headers: vec![("Content-Type", "application/json".into())],
            body: Some(&body),
        };
        let (answer, via) = match endpoint.send(&post).await {
            Ok(a) => a,
            Err(e) => return fail(e.to_string()),
        };
        if answer.status == 409 || (answer.status == 400 && answer.text().contains("service_cert_pem")) {
            self.config.console.say(&format!(
                "selfregister: the Controller takes no keyless registration: {} - this agent never announces with a service credential",
                answer.text()
            ));
            return Step::ProtocolViolation(format!(
                "protocol violation: the Controller at {addr} asked for protocol 1 ({}: {}), which makes a real node send its admin key",
                status_text(answer.status),
                answer.text()
            ));
        }
        if answer.status != 201 {
            return fail(format!(
                "controller at {addr} refused registration ({}): {}",
                status_text(answer.status),
                answer.text()
            ));
        }
        let Some((enrolled, trust)) = parse_enrollment(&answer) else {
            return fail(format!(
                "controller at {addr} answered something else than an enrollment: {}",
                answer.text()
            ));
        };
        self.say_checked(addr, via);
        if let Some(trust) = trust {
            return match self.admit(addr, provisioning, &trust) {
                Ok(()) => Step::Admitted,
                Err(e) => fail(e.to_string()),
            };
        }
        let enrollment = Enrollment { id: enrolled.id, secret: secret.into() };
        if let Err(e) = self.node.save_enrollment(&enrollment).and_then(|_| self.node.remove_token()) {
            return fail(e.to_string());
        }
        self.config.console.say(&format!(
            "selfregister: announced to Controller at {addr}, awaiting approval - check it shows this node's CA as SHA-256 {}",
            self.ca_sha256
        ));
        Step::Pending
    }

    async fn poll(&self, endpoint: &Endpoint, provisioning: &Provisioning, enrollment: &Enrollment) -> Step {
        let addr = &provisioning.address;
        let fail = |why: String| Step::Failed(format!("ask the Controller about the enrollment: {why}"));
        let path = format!("/register/{}", enrollment.id);
        let get = Request {
            method: "GET",
            path: &path,
            headers: vec![("Authorization", format!("Bearer {}", enrollment.secret.expose_secret()))],
            body: None,
        };
        let answer = match endpoint.send(&get).await {
            Ok((answer, _)) => answer,
            Err(e) => return fail(e.to_string()),
        };
        match answer.status {
            202 => Step::Pending,
            404 => {
                if let Err(e) = self.node.remove_enrollment() {
                    return fail(e.to_string());
                }
                self.config.console.say(&format!(
                    "selfregister: the Controller at {addr} doesn't know this node's enrollment any more (rejected, or lost) - announcing again in {}",
                    go_duration(self.config.timings.reannounce_after)
                ));
                Step::Unknown
            }
            200 => match parse_trust(&answer.body) {
                None => fail(format!("controller at {addr} answered no trust: {}", answer.text())),
                Some(trust) => match self.admit(addr, provisioning, &trust) {
                    Ok(()) => Step::Admitted,
                    Err(e) => fail(e.to_string()),
                },
            },
            status => fail(format!("controller at {addr} ({}): {}", status_text(status), answer.text())),
        }
    }

    /// `admitted()`: check and apply the trust, mark, drop the enrollment and the token.
    fn admit(&self, addr: &str, provisioning: &Provisioning, trust: &Trust) -> Result<(), NodeError> {
        let applied = trust::apply(&self.node, &provisioning.fleet_root, trust)?;
        self.config.console.say(&format!(
            "pki: trusts the fleet of root {:?}, bundle version {}",
            applied.root_cn, applied.version
        ));
        if let Err(e) = self.node.mark_registered() {
            // As janusd: a failed mark is only logged; the next start polls again.
            self.config.console.say(&format!("selfregister: mark registered: {e}"));
        }
        self.node.remove_enrollment()?;
        self.node.remove_token()?;
        self.config
            .console
            .say(&format!("selfregister: admitted by Controller at {addr} - the node trusts its fleet"));
        Ok(())
    }

    fn say_checked(&self, addr: &str, via: Via) {
        let line = match via {
            Via::Fleet => format!("selfregister: the Controller at {addr} checked through its fleet's root"),
            Via::Certificate => {
                format!("selfregister: the Controller at {addr} checked with controller_ca_cert")
            }
        };
        self.config.console.say(&line);
    }
}

/// A 201's body as Go decodes it: a non-empty `id`, a boolean `admitted`,
/// and a trust only when admitted with one (its bundle valid base64).
fn parse_enrollment(answer: &Answer) -> Option<(AnnounceAnswer, Option<Trust>)> {
    let parsed: AnnounceAnswer = serde_json::from_slice(&answer.body).ok()?;
    if parsed.id.is_empty() {
        return None;
    }
    if let Some(trust) = &parsed.trust {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.decode(trust.bundle.as_bytes()).ok()?;
    }
    let trust = if parsed.admitted { parsed.trust.clone() } else { None };
    Some((parsed, trust))
}

/// A 200's body: a non-empty root and a non-empty, valid base64 bundle.
fn parse_trust(body: &[u8]) -> Option<Trust> {
    use base64::Engine;
    let trust: Trust = serde_json::from_slice(body).ok()?;
    let bundle = base64::engine::general_purpose::STANDARD.decode(trust.bundle.as_bytes()).ok()?;
    (!trust.root_cert.is_empty() && !bundle.is_empty()).then_some(trust)
}

/// `400 Bad Request`, as Go's `resp.Status` reads.
fn status_text(status: u16) -> String {
    let reason =
        axum::http::StatusCode::from_u16(status).ok().and_then(|s| s.canonical_reason()).unwrap_or("");
    format!("{status} {reason}").trim().to_string()
}

/// The local address the routing table picks toward the endpoint, with the
/// node API's port: a connected UDP socket sends nothing.
pub fn detect_advertise_address(controller: &str) -> std::io::Result<String> {
    use std::net::{ToSocketAddrs, UdpSocket};
    let target = controller
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| std::io::Error::other(format!("{controller} resolves to nothing")))?;
    let bind = if target.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" };
    let socket = UdpSocket::bind(bind)?;
    socket.connect(target)?;
    let local = socket.local_addr()?.ip();
    Ok(std::net::SocketAddr::new(local, NODE_API_PORT).to_string())
}

/// The machine's hostname, as `os.Hostname()` reads it; `janus` when unknown.
pub fn system_hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "janus".to_string())
}

/// `--once` exit codes.
pub const EXIT_ADMITTED: u8 = 0;
/// `--once`: an error; retried by the loop.
pub const EXIT_FAILED: u8 = 1;
/// `--once`: announced, or polled, and waiting for approval.
pub const EXIT_PENDING: u8 = 2;
/// `--once`: the endpoint asked for protocol 1 (a key).
pub const EXIT_PROTOCOL_VIOLATION: u8 = 3;

/// The `agent` command: provision from user-data if given, then one step
/// (`--once`) or the loop. Returns the exit code.
pub async fn run_command(args: &AgentCommand) -> Result<u8, AgentError> {
    let node = NodeDir::open(&args.dir)?;
    let mut hostname = None;
    if let Some(path) = &args.user_data {
        let bytes = std::fs::read(path).map_err(AgentError::file(path))?;
        hostname = node.provision_from_user_data(&bytes)?;
    }
    let config = AgentConfig {
        dir: args.dir.clone(),
        node_ca: args.node_ca.clone(),
        hostname: args.name.clone().or(hostname).unwrap_or_else(system_hostname),
        advertise: args.advertise.clone(),
        timings: args.timings,
        fail_on_fallback: args.fail_on_fallback,
        console: Console::Stdout,
    };
    if !node.is_registered() && node.provisioning()?.is_none() {
        return Err(AgentError::NotProvisioned(args.dir.clone()));
    }
    if node.is_registered() {
        // As janusd: a registered node never announces again. Said, so a
        // person rehearsing twice knows why nothing happened.
        config.console.say(&format!(
            "selfregister: {dir} is registered already ({mark}): nothing to announce. To register again \
             as a new node, give another --dir (or remove {dir})",
            dir = args.dir.display(),
            mark = node.path("registered").display()
        ));
        return Ok(EXIT_ADMITTED);
    }
    let agent = Agent::new(config)?;
    if args.once {
        let step = agent.step().await;
        if let Step::Failed(why) | Step::ProtocolViolation(why) = &step {
            agent.config.console.say(&format!("selfregister: {why}"));
        }
        return Ok(match step {
            Step::Idle | Step::Admitted => EXIT_ADMITTED,
            Step::Pending | Step::Unknown => EXIT_PENDING,
            Step::Failed(_) => EXIT_FAILED,
            Step::ProtocolViolation(_) => EXIT_PROTOCOL_VIOLATION,
        });
    }
    match agent.run().await {
        Ok(_) => Ok(EXIT_ADMITTED),
        Err(why) => {
            agent.config.console.say(&format!("selfregister: {why}"));
            Ok(EXIT_PROTOCOL_VIOLATION)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_delays_are_janusds() {
        let t = Timings::default();
        let got: Vec<u64> = (0..8).map(|a| t.retry_delay(a).as_secs()).collect();
        assert_eq!(got, [5, 10, 20, 40, 80, 120, 120, 120]);
    }

    #[test]
    fn advertise_address_uses_the_node_port() {
        let a = detect_advertise_address("127.0.0.1:8443").unwrap();
        assert_eq!(a, "127.0.0.1:9505");
        let v6 = detect_advertise_address("[::1]:8443");
        if let Ok(v6) = v6 {
            assert_eq!(v6, "[::1]:9505");
        }
    }

    #[test]
    fn enrollments_parse_as_go_would() {
        let answer =
            |body: &str| Answer { status: 201, body: body.as_bytes().to_vec(), ..Default::default() };
        assert!(parse_enrollment(&answer(r#"{"id":"x","admitted":false}"#)).is_some());
        assert!(parse_enrollment(&answer(r#"{"id":"x"}"#)).is_some());
        assert!(parse_enrollment(&answer(r#"{"id":"","admitted":false}"#)).is_none());
        assert!(parse_enrollment(&answer(r#"{"id":"x","admitted":"true"}"#)).is_none());
        assert!(
            parse_enrollment(&answer(
                r#"{"id":"x","admitted":true,"trust":{"root_cert":"r","bundle":"%%"}}"#
            ))
            .is_none()
        );
        assert!(parse_enrollment(&answer("not json")).is_none());
        let (_, trust) = parse_enrollment(&answer(r#"{"id":"x","admitted":true}"#)).unwrap();
        assert!(trust.is_none(), "admitted without trust waits");
    }
}

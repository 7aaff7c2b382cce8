//! What `serve` is told: [`ServeConfig`] and the defaults the command
//! line shows.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use janus_listen::proxy;

use crate::{limits, on_admitted, policy};

/// Where `serve` listens by default.
pub const DEFAULT_LISTEN: &str = "0.0.0.0:8443";
/// Connections open at once, by default.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;
/// Connections one source may hold open, by default.
pub const DEFAULT_MAX_CONNECTIONS_PER_SOURCE: usize = 64;
/// Connections one network (an IPv4 /24, an IPv6 /48) may hold open, by default.
pub const DEFAULT_MAX_CONNECTIONS_PER_NETWORK: usize = 256;
/// The metrics listener's cap: a scraper or two, never the main listener's files.
pub(crate) const METRICS_MAX_CONNECTIONS: usize = 16;
/// Files the process keeps besides connections: state, logs, the admission
/// command's pipes, the metrics listener's connections.
pub(crate) const OWN_FILES: usize = 64 + METRICS_MAX_CONNECTIONS;
/// A client must finish its TLS handshake, then its request head, within these.
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a client may take to send a request's head.
pub const DEFAULT_HEAD_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a client may take to send an announcement's body, by default.
pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(10);
/// How long shutdown waits for the tokens tidier's last flush.
pub(crate) const TIDIER_FLUSH: Duration = Duration::from_secs(2);
/// How long the runtime waits, once serving ended, for blocking-pool
/// threads (stuck in a hung file system, say) before the process exits anyway.
pub const SHUTDOWN_STRAGGLERS: Duration = Duration::from_secs(2);
/// Bounds request heads: enough for any header a node or a browser sends.
pub(crate) const MAX_HEAD_BYTES: usize = 32 * 1024;

/// Everything `serve` needs, from the command line or a test.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// The fleet directory: `root.crt`, `bundle.json`.
    pub fleet: PathBuf,
    /// The endpoint's certificate chain (PEM).
    pub cert: PathBuf,
    /// Its private key (PEM).
    pub key: PathBuf,
    /// The state directory.
    pub state: PathBuf,
    /// Connections open at once; more are closed at accept.
    pub max_connections: usize,
    /// How long in-flight requests get after SIGTERM.
    pub shutdown_grace: Duration,
    /// Rate and pending limits.
    pub limits: limits::LimitsConfig,
    /// The admission command, if any.
    pub admission: Option<policy::PolicyConfig>,
    /// The program run after each admission, if any.
    pub on_admitted: Option<on_admitted::OnAdmittedConfig>,
    /// How often the fleet and certificate files are looked at for changes.
    pub reload_every: Duration,
    /// How often pending records are counted and expired ones forgotten.
    pub maintenance_every: Duration,
    /// How often maintenance lists the record directories even though
    /// their times say nothing changed.
    pub reconcile_every: Duration,
    /// Where to serve Prometheus metrics over plain HTTP; off when `None`.
    pub metrics_listen: Option<SocketAddr>,
    /// The balancers whose connections start with a PROXY header.
    pub proxy_protocol: Vec<proxy::Trusted>,
    /// Time a client gets for its TLS handshake.
    pub handshake_timeout: Duration,
    /// Time a client gets for its request head (metrics listener too).
    pub head_timeout: Duration,
    /// Time a client gets for an announcement's body, once its head is in (408 after).
    pub body_timeout: Duration,
    /// Open connections one source (an IPv4 address, an IPv6 /64) may hold;
    /// 0: no per-source cap.
    pub max_connections_per_source: usize,
    /// Open connections one network (an IPv4 /24, an IPv6 /48) may hold;
    /// 0: no per-network cap.
    pub max_connections_per_network: usize,
    /// Keep connections open between requests (closed after 5 s idle);
    /// off by default: a node opens a new connection per request and never
    /// closes the old one, so the server must.
    pub keep_alive: bool,
    /// How long after a token admission the same CA presenting the spent
    /// token again is answered `admitted` with the first id.
    pub readmit_window: Duration,
}

impl ServeConfig {
    /// A configuration with every default but the four paths.
    pub fn new(fleet: PathBuf, cert: PathBuf, key: PathBuf, state: PathBuf) -> Self {
        ServeConfig {
            fleet,
            cert,
            key,
            state,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_connections_per_source: DEFAULT_MAX_CONNECTIONS_PER_SOURCE,
            max_connections_per_network: DEFAULT_MAX_CONNECTIONS_PER_NETWORK,
            handshake_timeout: DEFAULT_HANDSHAKE_TIMEOUT,
            head_timeout: DEFAULT_HEAD_TIMEOUT,
            body_timeout: DEFAULT_BODY_TIMEOUT,
            shutdown_grace: Duration::from_secs(10),
            limits: limits::LimitsConfig::default(),
            admission: None,
            on_admitted: None,
            reload_every: Duration::from_secs(5),
            readmit_window: janus_store::DEFAULT_READMIT_WINDOW,
            maintenance_every: Duration::from_secs(60),
            reconcile_every: Duration::from_secs(300),
            metrics_listen: None,
            proxy_protocol: Vec::new(),
            keep_alive: false,
        }
    }
}

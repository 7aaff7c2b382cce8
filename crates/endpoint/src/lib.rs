//! `serve`: the protocol-2 registration endpoint over HTTPS.
//!
//! It owns the startup checks (all made before a socket is bound), the router,
//! the connection policy (HTTP/1.1, `Connection: close` after every answer,
//! bounded handshake and header times, a cap on open connections) and
//! graceful shutdown. What each route does is in [`routes`]; what each failure
//! answers is in [`error`]; the state is in [`janus_store`].

pub mod accept;
pub mod answer;
pub mod door;
pub mod error;
pub mod limits;
pub mod metrics;
pub mod on_admitted;
pub mod policy;
pub mod program;
pub mod proxy;
pub mod reload;
pub mod routes;

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::routing::{get, post};
use axum_server::tls_rustls::{RustlsAcceptor, RustlsConfig};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;

use janus_core::pki::{Fleet, PkiError, ServedIdentity};
use janus_core::protocol::Trust;
use janus_store::maintain::MaintenanceLimits;
use janus_store::{AsyncStore, Store};

/// Where `serve` listens by default.
pub const DEFAULT_LISTEN: &str = "0.0.0.0:8443";
/// Connections open at once, by default.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;
/// Connections one source may hold open, by default.
pub const DEFAULT_MAX_CONNECTIONS_PER_SOURCE: usize = 64;
/// Connections one network (an IPv4 /24, an IPv6 /48) may hold open, by default.
pub const DEFAULT_MAX_CONNECTIONS_PER_NETWORK: usize = 256;
/// The metrics listener's cap: a scraper or two, never the main listener's files.
const METRICS_MAX_CONNECTIONS: usize = 16;
/// Files the process keeps besides connections: state, logs, the admission
/// command's pipes, the metrics listener's connections.
const OWN_FILES: usize = 64 + METRICS_MAX_CONNECTIONS;
/// Connections the kernel queues before accept: a boot storm of nodes each
/// opening a new connection overflows the usual 128, and a dropped SYN costs
/// the node a 1 s retransmit.
pub const LISTEN_BACKLOG: i32 = 4096;
/// A client must finish its TLS handshake, then its request head, within these.
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a client may take to send a request's head.
pub const DEFAULT_HEAD_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a client may take to send an announcement's body, by default.
pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(10);
/// How long shutdown waits for the tokens tidier's last flush.
const TIDIER_FLUSH: Duration = Duration::from_secs(2);
/// How long the runtime waits, once serving ended, for blocking-pool
/// threads (stuck in a hung file system, say) before the process exits anyway.
pub const SHUTDOWN_STRAGGLERS: Duration = Duration::from_secs(2);
/// Bounds request heads: enough for any header a node or a browser sends.
const MAX_HEAD_BYTES: usize = 32 * 1024;

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
    /// Listeners served beside the nodes' port (the admin API).
    pub doors: Vec<Arc<dyn door::Door>>,
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
            doors: Vec::new(),
            proxy_protocol: Vec::new(),
            keep_alive: false,
        }
    }
}

/// Why `serve` does not start.
#[derive(Debug, thiserror::Error)]
pub enum StartupError {
    /// The fleet cannot be served.
    #[error("the fleet in {dir} is not usable: {cause}")]
    Fleet {
        /// The fleet directory.
        dir: PathBuf,
        /// The underlying error.
        cause: PkiError,
    },
    /// The endpoint's certificate or key cannot be served.
    #[error("the endpoint's certificate is not usable: {0}")]
    Cert(PkiError),
    /// The state directory cannot be used.
    #[error("the state directory is not usable: {0}")]
    State(janus_store::StoreError),
    /// rustls refused the configuration.
    #[error("TLS configuration: {0}")]
    Tls(rustls::Error),
    /// A program the server would run (`--admission-command`, `--on-admitted`) cannot be.
    #[error("{flag} {}: {why}", program.display())]
    Program {
        /// The flag that names it.
        flag: &'static str,
        /// The program.
        program: PathBuf,
        /// Why it cannot be run.
        why: String,
    },
}

impl From<rustls::Error> for StartupError {
    fn from(e: rustls::Error) -> Self {
        StartupError::Tls(e)
    }
}

/// The fleet's trust, with the 200 answer already serialised.
pub struct ServedTrust {
    /// The fleet, checked.
    pub fleet: Fleet,
    /// What an admitted node is handed.
    pub trust: Trust,
    /// The same, as the JSON a poll answers with.
    pub trust_json: Bytes,
}

impl ServedTrust {
    /// The trust served for `fleet`.
    pub fn new(fleet: Fleet) -> Self {
        let trust = Trust { root_cert: fleet.root_pem.clone(), bundle: BASE64.encode(&fleet.bundle) };
        let trust_json = Bytes::from(serde_json::to_vec(&trust).expect("strings serialise"));
        ServedTrust { fleet, trust, trust_json }
    }
}

/// What every request shares.
pub struct App {
    /// The state directory, through its async face: no handler touches a file itself.
    pub store: AsyncStore,
    trust: RwLock<Arc<ServedTrust>>,
    /// The limits in force.
    pub limits: limits::LimitsConfig,
    /// Announcements per source.
    pub limiter: limits::RateLimiter,
    /// Pending records, as last counted.
    pub pending: limits::PendingCount,
    /// The admission command, if any.
    pub policy: Option<policy::Policy>,
    /// The program run after each admission, if any.
    pub on_admitted: Option<on_admitted::OnAdmitted>,
    /// What `/metrics` exports.
    pub metrics: metrics::Metrics,
    reconcile_every: Duration,
    /// Time a client gets for an announcement's body.
    body_timeout: Duration,
    /// Accepts failing for want of file descriptors are logged at most once a minute.
    emfile_logged: limits::LogThrottle,
    /// Why the last changed certificate was refused, until one is served
    /// again: `/healthz` says it (degraded).
    pub cert_refused: std::sync::Mutex<Option<String>>,
    /// The same for the fleet (`root.crt`, `bundle.json`).
    pub fleet_refused: std::sync::Mutex<Option<String>>,
}

impl App {
    /// The trust served now.
    pub fn trust(&self) -> Arc<ServedTrust> {
        self.trust.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Serves `trust` from the next request on.
    pub fn replace_trust(&self, trust: ServedTrust) {
        self.metrics.bundle_version.set(trust.fleet.bundle_version as i64);
        *self.trust.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(trust);
    }

    /// What bounds each maintenance pass.
    pub fn maintenance_limits(&self) -> MaintenanceLimits {
        MaintenanceLimits {
            pending_max_age: self.limits.pending_max_age,
            reconcile_every: self.reconcile_every,
        }
    }
}

/// A server that passed its startup checks and has not bound a socket yet.
pub struct Prepared {
    app: Arc<App>,
    cert: Arc<janus_core::tls::CurrentCert>,
    config: ServeConfig,
    /// The fleet and certificate files as they were before they were loaded.
    seen: reload::Seen,
}

/// Raises the soft open-file limit to the hard one (a common soft limit of
/// 1024 would fail accepts with EMFILE before the connection cap engages);
/// when even the hard limit cannot hold `max_connections` and our own
/// files, lowers the cap and says so.
fn fit_open_files(config: &mut ServeConfig) {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut limit = getrlimit(Resource::Nofile);
    if limit.current != limit.maximum {
        limit.current = limit.maximum;
        if let Err(e) = setrlimit(Resource::Nofile, limit) {
            tracing::warn!(cause = %e, "cannot raise the open-file limit");
        }
    }
    let Some(soft) = getrlimit(Resource::Nofile).current else { return };
    let room = usize::try_from(soft).unwrap_or(usize::MAX).saturating_sub(OWN_FILES).max(1);
    if config.max_connections > room {
        tracing::warn!(
            open_file_limit = soft,
            max_connections = room,
            asked = config.max_connections,
            "the open-file limit cannot hold --max-connections: lowered it"
        );
        config.max_connections = room;
    }
}

/// The files a reload looks at.
fn watched(config: &ServeConfig) -> reload::Watched {
    reload::Watched { fleet: config.fleet.clone(), cert: config.cert.clone(), key: config.key.clone() }
}

/// The endpoint reads only `root.crt` and `bundle.json` of the fleet; its
/// private keys beside them mean whoever takes this machine can mint
/// certificates the whole fleet trusts. Said at every start, not refused:
/// a development fleet (`demo`, `certs fleet`) keeps them there.
fn warn_of_fleet_keys(fleet: &std::path::Path) {
    for key in ["root.key", "issuing.key"] {
        let path = fleet.join(key);
        // fold: a warning only; a key that cannot be looked at is not warned of
        if janus_core::durable::present(&path).unwrap_or(false) {
            tracing::warn!(
                key = %path.display(),
                "the fleet's private key is in the directory --fleet serves: the endpoint needs only root.crt \
                 and bundle.json; keep the keys where certificates are minted, off this machine"
            );
        }
    }
}

/// Every startup check, in the order an operator would fix them.
pub fn prepare(mut config: ServeConfig) -> Result<Prepared, StartupError> {
    fit_open_files(&mut config);
    let seen = watched(&config).look();
    let fleet = Fleet::load(&config.fleet)
        .map_err(|cause| StartupError::Fleet { dir: config.fleet.clone(), cause })?;
    let identity = ServedIdentity::load(&config.cert, &config.key, &janus_core::tls::provider())
        .map_err(StartupError::Cert)?;
    if let Err(why) = identity.verify_for_fleet(&fleet.root_der, janus_core::tls::provider()) {
        tracing::warn!(
            cert = %config.cert.display(),
            reason = %why,
            "the served certificate does not verify for controller.fleet.janus through the fleet root: \
             nodes provisioned with the fleet root will fall back to controller_ca_cert"
        );
    }
    warn_of_fleet_keys(&config.fleet);
    if let Some(admission) = &config.admission {
        program::check_program("--admission-command", &admission.command)?;
    }
    if let Some(on_admitted) = &config.on_admitted {
        program::check_program("--on-admitted", &on_admitted.command)?;
    }
    // Checked now, made once the port is bound (`Prepared::serve`): a port
    // in use leaves no state tree behind.
    Store::check_before_open(&config.state).map_err(StartupError::State)?;
    let store = AsyncStore::new(Store::for_server(&config.state).with_readmit_window(config.readmit_window));
    tracing::info!(
        fleet_root_sha256 = %fleet.root_sha256,
        bundle_version = fleet.bundle_version,
        cert_not_after = %janus_core::clock::unix_to_rfc3339(identity.not_after),
        state = %config.state.display(),
        "fleet and certificate loaded"
    );
    let programs = Arc::new(program::Programs::default());
    let policy = config.admission.clone().map(|p| policy::Policy::new(p, store.clone(), programs.clone()));
    let on_admitted =
        config.on_admitted.clone().map(|c| on_admitted::OnAdmitted::new(c, store.clone(), programs.clone()));
    let app = App {
        store,
        trust: RwLock::new(Arc::new(ServedTrust::new(fleet))),
        limits: config.limits,
        limiter: limits::RateLimiter::new(config.limits),
        pending: limits::PendingCount::default(),
        policy,
        on_admitted,
        metrics: metrics::Metrics::default(),
        reconcile_every: config.reconcile_every,
        body_timeout: config.body_timeout,
        emfile_logged: Default::default(),
        cert_refused: Default::default(),
        fleet_refused: Default::default(),
    };
    app.metrics.bundle_version.set(app.trust().fleet.bundle_version as i64);
    app.metrics.cert_not_after.set(identity.not_after);
    Ok(Prepared {
        app: Arc::new(app),
        cert: Arc::new(janus_core::tls::CurrentCert::new(identity.certified)),
        config,
        seen,
    })
}

/// Binds `addr` with [`LISTEN_BACKLOG`].
pub fn bind(addr: &str) -> std::io::Result<std::net::TcpListener> {
    use std::net::ToSocketAddrs;
    let addr = addr
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| std::io::Error::other(format!("{addr} resolves to nothing")))?;
    use rustix::net::{AddressFamily, SocketFlags, SocketType};
    let family = if addr.is_ipv4() { AddressFamily::INET } else { AddressFamily::INET6 };
    let socket = rustix::net::socket_with(family, SocketType::STREAM, SocketFlags::CLOEXEC, None)?;
    rustix::net::sockopt::set_socket_reuseaddr(&socket, true)?;
    rustix::net::bind(&socket, &addr)?;
    rustix::net::listen(&socket, LISTEN_BACKLOG)?;
    Ok(std::net::TcpListener::from(socket))
}

/// The routes: `POST /register`, `GET /register/{id}`, `GET /healthz`; 404 for the rest.
pub fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/register", post(routes::announce))
        .route("/register/{id}", get(routes::poll))
        .route("/healthz", get(routes::healthz))
        .route("/livez", get(routes::livez))
        .fallback(routes::not_found)
        .method_not_allowed_fallback(routes::method_not_allowed)
        .layer(axum::middleware::from_fn_with_state(app.clone(), routes::count_request))
        .layer(routes::traced())
        .with_state(app)
}

impl Prepared {
    /// The TLS listener's acceptor: the connection table (its caps, its
    /// evictions counted), then the handshake within its time.
    fn tls_acceptor(&self) -> std::io::Result<accept::Shedding<RustlsAcceptor<accept::ConnectionCap>>> {
        let rustls = RustlsConfig::from_config(Arc::new(
            janus_core::tls::server_config(self.cert.clone()).map_err(std::io::Error::other)?,
        ));
        let evicted = metrics::OutcomeLabels { outcome: "evicted" };
        let cap = accept::ConnectionCap::new(accept::Caps {
            max: self.config.max_connections,
            per_source: self.config.max_connections_per_source,
            per_network: self.config.max_connections_per_network,
            evict: true,
            shed_within: false,
        })
        .counting_evictions(self.app.metrics.connection_failures.get_or_create(&evicted).clone());
        Ok(accept::Shedding {
            tls: RustlsAcceptor::new(rustls)
                .handshake_timeout(self.config.handshake_timeout)
                .acceptor(cap.clone()),
            cap,
            handshake: self.config.handshake_timeout,
            proxy: self.config.proxy_protocol.clone().into(),
        })
    }

    /// The probes' own door, when `--metrics-listen` asks for it: plain
    /// HTTP, its own connection cap, so a flooded TLS port never fails a
    /// liveness or readiness probe. Started on this runtime.
    fn spawn_metrics(
        &self,
        handle: axum_server::Handle<SocketAddr>,
    ) -> std::io::Result<Option<tokio::task::JoinHandle<std::io::Result<()>>>> {
        let Some(addr) = self.config.metrics_listen else { return Ok(None) };
        let head_timeout = self.config.head_timeout;
        let plain = bind(&addr.to_string())?;
        plain.set_nonblocking(true)?;
        tracing::info!(metrics_listen = %plain.local_addr()?, "serving metrics over plain HTTP");
        let metrics = Router::new()
            .route("/metrics", get(routes::metrics))
            .route("/healthz", get(routes::healthz))
            .route("/livez", get(routes::livez))
            .with_state(self.app.clone());
        let failures = self.app.clone();
        let mut server = axum_server::from_tcp(plain)?
            .acceptor(accept::ConnectionCap::new(accept::Caps {
                max: METRICS_MAX_CONNECTIONS,
                per_source: 0,
                per_network: 0,
                evict: false,
                shed_within: false,
            }))
            .accept_error_handler(move |peer, error| count_accept_error(&failures, peer.is_some(), error))
            .handle(handle)
            .http1_only()
            .first_request_timeout(head_timeout);
        // One request per connection: an idle scraper holds nothing.
        server.http_builder().http1().keep_alive(false).header_read_timeout(Some(head_timeout));
        Ok(Some(tokio::spawn(server.serve(metrics.into_make_service()))))
    }

    /// Opens every door, each with its own handle, after the nodes' port's checks.
    fn open_doors(
        &self,
        closing: &tokio::sync::watch::Receiver<bool>,
    ) -> std::io::Result<Vec<(&'static str, axum_server::Handle<SocketAddr>, door::Serving)>> {
        let mut opened = Vec::new();
        for door in &self.config.doors {
            let handle = axum_server::Handle::new();
            let shared = door::Shared {
                store: self.app.store.clone(),
                state: self.config.state.clone(),
                fleet: self.config.fleet.clone(),
                cert: self.cert.clone(),
                handshake_timeout: self.config.handshake_timeout,
                head_timeout: self.config.head_timeout,
                handle: handle.clone(),
                closing: closing.clone(),
            };
            opened.push((door.name(), handle, door.open(shared)?));
        }
        Ok(opened)
    }

    /// The application state, for tests.
    pub fn app(&self) -> Arc<App> {
        self.app.clone()
    }

    /// Serves on `listener` until `shutdown` resolves, then lets in-flight
    /// requests finish for at most the configured grace period.
    pub async fn serve(
        self,
        listener: std::net::TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        self.app
            .store
            .lay_out()
            .await
            .map_err(|e| std::io::Error::other(format!("the state directory is not usable: {e}")))?;
        listener.set_nonblocking(true)?;
        let local = listener.local_addr()?;
        let acceptor = self.tls_acceptor()?;
        let background = self.start_background().await?;
        let (closing, doors_closing) = tokio::sync::watch::channel(false);
        let handle = axum_server::Handle::new();
        let metrics_handle = axum_server::Handle::new();
        let mut listeners = vec![("metrics", self.spawn_metrics(metrics_handle.clone())?)];
        let mut handles = vec![handle.clone(), metrics_handle];
        for (name, door_handle, serving) in self.open_doors(&doors_closing)? {
            handles.push(door_handle);
            listeners.push((name, Some(serving)));
        }
        tokio::spawn(stop_on(shutdown, self.config.shutdown_grace, closing, handles));
        let head_timeout = self.config.head_timeout;
        let failures = self.app.clone();
        let mut server = axum_server::from_tcp(listener)?
            .acceptor(acceptor)
            .accept_error_handler(move |peer, error| count_accept_error(&failures, peer.is_some(), error))
            .handle(handle)
            .http1_only()
            .first_request_timeout(head_timeout);
        server
            .http_builder()
            .http1()
            .keep_alive(self.config.keep_alive)
            .max_buf_size(MAX_HEAD_BYTES)
            .header_read_timeout(Some(head_timeout));
        tracing::info!(listen = %local, "serving");
        let app = self.app.clone();
        let served = server.serve(router(self.app).into_make_service_with_connect_info::<SocketAddr>()).await;
        background.stop(&app).await;
        for (name, task) in listeners {
            let Some(task) = task else { continue };
            match task.await {
                Ok(Err(e)) => tracing::error!(listener = name, cause = %e, "a listener failed"),
                Err(e) => tracing::error!(listener = name, cause = %e, "a listener panicked"),
                Ok(Ok(())) => {}
            }
        }
        served
    }

    /// Starts what runs beside the listeners: the admission command, the
    /// tokens tidier, reloads, maintenance and the `--on-admitted` follower.
    async fn start_background(&self) -> std::io::Result<Background> {
        // Ends when the server's state is dropped. No request waits on it,
        // and a panic in one turn (a bug) costs that turn only.
        if let Some(policy) = &self.app.policy {
            policy.start();
        }
        let tidier = self.app.store.start_tidier()?;
        let mut tasks = vec![
            tokio::spawn(reload::run(
                self.app.clone(),
                self.cert.clone(),
                watched(&self.config),
                self.seen.clone(),
                self.config.reload_every,
            )),
            tokio::spawn(maintenance(self.app.clone(), self.config.maintenance_every)),
        ];
        if let Some(on_admitted) = &self.app.on_admitted {
            tasks.push(on_admitted.start().await);
        }
        Ok(Background { tasks, tidier })
    }
}

/// What runs beside the listeners, until serving ends.
struct Background {
    tasks: Vec<tokio::task::JoinHandle<()>>,
    tidier: janus_store::tokens::Tidier,
}

impl Background {
    /// Stops it all; the tidier's last flush is bounded.
    async fn stop(self, app: &App) {
        for task in self.tasks {
            task.abort();
        }
        if let Some(policy) = &app.policy {
            policy.stop();
        }
        if let Some(on_admitted) = &app.on_admitted {
            on_admitted.stop();
        }
        // Stopped and flushed off the async workers: no spent token stays
        // listed. Bounded: on a hung state mount the flush never returns,
        // and the ledger has what it would have blanked.
        let tidier = self.tidier;
        let flushed = tokio::time::timeout(TIDIER_FLUSH, tokio::task::spawn_blocking(move || drop(tidier)));
        if flushed.await.is_err() {
            tracing::warn!(
                secs = TIDIER_FLUSH.as_secs(),
                "the tokens tidier did not finish its flush: spent tokens may stay listed (the ledger has them)"
            );
        }
    }
}

/// Once `shutdown` resolves: no new connections on any listener, event
/// streams ended (they would hold the grace period whole), and in-flight
/// requests given `grace`.
async fn stop_on(
    shutdown: impl Future<Output = ()>,
    grace: Duration,
    closing: tokio::sync::watch::Sender<bool>,
    handles: Vec<axum_server::Handle<SocketAddr>>,
) {
    shutdown.await;
    tracing::info!(grace_secs = grace.as_secs(), "shutting down: no new connections");
    let _ = closing.send(true);
    for handle in handles {
        handle.graceful_shutdown(Some(grace));
    }
}

/// Counts a connection that never carried a request, by why: our caps
/// (typed, see [`accept::Refused`]), the process out of file descriptors at
/// accept (`emfile`; the accept loop then waits 50 ms instead of spinning),
/// or its TLS handshake. `accepted` is false for an error of the listener
/// itself.
fn count_accept_error(app: &App, accepted: bool, error: &std::io::Error) {
    let reason = match accept::Refused::of(error) {
        Some(accept::Refused::Cap) => "connection_cap",
        Some(accept::Refused::SourceCap) => "source_cap",
        Some(accept::Refused::NetworkCap) => "network_cap",
        // Counted by the table when it evicted.
        Some(accept::Refused::Evicted) => return,
        Some(accept::Refused::HandshakeTimeout) => "tls",
        None if !accepted
            && error.raw_os_error().is_some_and(|code| {
                code == rustix::io::Errno::MFILE.raw_os_error()
                    || code == rustix::io::Errno::NFILE.raw_os_error()
            }) =>
        {
            "emfile"
        }
        None if !accepted => "accept",
        None => "tls",
    };
    // The accept loop retries every 50 ms: once a minute is enough to be read.
    if reason == "emfile" && app.emfile_logged.due(Duration::from_secs(60)) {
        tracing::warn!(
            "out of file descriptors at accept: raise the open-file limit or lower --max-connections \
             (said at most once a minute; counted in janus_registration_connection_failures_total)"
        );
    }
    metrics::Metrics::outcome(&app.metrics.connection_failures, reason);
}

/// Runs [`Store::maintain`] at once (not before serving: a large state
/// must not delay startup) and then every `every`, on the blocking pool.
async fn maintenance(app: Arc<App>, every: Duration) {
    // The first pass also removes crash leftovers, and is logged at INFO.
    let mut first_pass_to_come = true;
    // The first tick is at once; a pass longer than `every` delays the
    // next one instead of running passes back to back.
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let started = tokio::time::Instant::now();
        let before = app.pending.before_scan();
        match app.store.maintain(first_pass_to_come, app.maintenance_limits()).await {
            Ok(report) => {
                if !report.paused {
                    app.pending.scanned(report.pending, before);
                }
                let ms = started.elapsed().as_millis() as u64;
                tracing::debug!(pending = report.pending, ms, "state scanned");
                if std::mem::take(&mut first_pass_to_come) {
                    tracing::info!(pending = report.pending, ms, "state scanned: pending records counted");
                }
            }
            Err(e) => tracing::error!(cause = %e, "state maintenance failed"),
        }
    }
}

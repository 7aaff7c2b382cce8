//! Every startup check, made before a socket is bound, in the order an
//! operator would fix them: the open-file limit, the fleet, the served
//! certificate, the programs, the state directory. What passes is a
//! [`Prepared`] server.

use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use janus_core::pki::{Fleet, PkiError, ServedIdentity};
use janus_store::{AsyncStore, Store};

use crate::app::{App, ServedTrust};
use crate::config::{OWN_FILES, ServeConfig};
use crate::{limits, metrics, on_admitted, policy, program, reload};

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
    #[error(transparent)]
    Program(#[from] program::Unusable),
}

impl From<rustls::Error> for StartupError {
    fn from(e: rustls::Error) -> Self {
        StartupError::Tls(e)
    }
}

/// A server that passed its startup checks and has not bound a socket yet.
pub struct Prepared {
    pub(crate) app: Arc<App>,
    pub(crate) cert: Arc<janus_core::tls::CurrentCert>,
    pub(crate) config: ServeConfig,
    /// The fleet and certificate files as they were before they were loaded.
    pub(crate) seen: reload::Seen,
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
pub(crate) fn watched(config: &ServeConfig) -> reload::Watched {
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
    // Checked now, made once the ports are bound (`Prepared::lay_out`): a port
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

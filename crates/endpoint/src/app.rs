//! [`App`]: what every request shares — the store's async face, the trust
//! served (replaced whole on reload), the limits and their counts, the
//! programs, the metrics.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use axum::body::Bytes;
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;

use janus_core::pki::Fleet;
use janus_core::protocol::Trust;
use janus_store::AsyncStore;
use janus_store::MaintenanceLimits;

use crate::{limits, metrics, on_admitted, policy};

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
    pub(crate) trust: RwLock<Arc<ServedTrust>>,
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
    pub(crate) reconcile_every: Duration,
    /// Time a client gets for an announcement's body.
    pub(crate) body_timeout: Duration,
    /// Accepts failing for want of file descriptors are logged at most once a minute.
    pub(crate) emfile_logged: limits::LogThrottle,
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

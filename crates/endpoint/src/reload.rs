//! Live reload, never a restart: a new `root.crt`/`bundle.json`, or a renewed
//! certificate and key, are checked and then served from the next request
//! (or handshake). A bad one is refused with a logged error and the last good
//! one kept, and `/healthz` says degraded until a good one is served. A
//! reload publishes only what a start would accept: a fleet whose bundle
//! verifies through its root; a certificate in date, matching its key, and
//! — whenever the one served now does — verifying for
//! `controller.fleet.janus` through the fleet root (served, or on disk).
//!
//! A change is found by a periodic look at the files' size, mtime and inode
//! (`--reload-every`, 5 s by default): no file-watch thread, and a renamed
//! Kubernetes `..data` link, an editor's rename or a network filesystem's
//! change are all caught the same way.

use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::{App, ServedTrust};
use janus_core::pki::{Fleet, ServedIdentity};
use janus_core::tls::CurrentCert;

/// What a reload looks at.
#[derive(Debug, Clone)]
pub(crate) struct Watched {
    /// The fleet directory.
    pub fleet: PathBuf,
    /// The endpoint's certificate chain.
    pub cert: PathBuf,
    /// Its key.
    pub key: PathBuf,
}

/// Each file's size, mtime and inode as last looked at (`None`: missing).
type FilesSeen = Vec<Option<(u64, i64, i64, u64)>>;

/// The watched files as they were before startup loaded them: a change made
/// between that load and the first periodic look is still a change.
#[derive(Debug, Clone)]
pub(crate) struct Seen {
    fleet: FilesSeen,
    cert: FilesSeen,
}

impl Watched {
    fn fleet_files(&self) -> Vec<PathBuf> {
        vec![self.fleet.join("root.crt"), self.fleet.join("bundle.json")]
    }

    fn cert_files(&self) -> Vec<PathBuf> {
        vec![self.cert.clone(), self.key.clone()]
    }

    /// The files as they are now (blocking: startup calls it before it loads them).
    pub(crate) fn look(&self) -> Seen {
        Seen { fleet: look_at(&self.fleet_files()), cert: look_at(&self.cert_files()) }
    }
}

fn look_at(paths: &[PathBuf]) -> FilesSeen {
    paths
        .iter()
        .map(|p| std::fs::metadata(p).ok().map(|m| (m.len(), m.mtime(), m.mtime_nsec(), m.ino())))
        .collect()
}

/// Runs until the runtime stops: looks at the files every `every` (on the
/// blocking pool: a `stat` on a hung mount must not stall a worker) and
/// reloads what changed since `seen` (taken before startup loaded them).
pub(crate) async fn run(
    app: Arc<App>,
    cert: Arc<CurrentCert>,
    watched: Watched,
    seen: Seen,
    every: Duration,
) {
    let (fleet_files, cert_files) = (watched.fleet_files(), watched.cert_files());
    let look = |fleet: Vec<PathBuf>, cert: Vec<PathBuf>| async move {
        tokio::task::spawn_blocking(move || (look_at(&fleet), look_at(&cert))).await.ok()
    };
    let Seen { fleet: mut fleet_seen, cert: mut cert_seen } = seen;
    loop {
        tokio::time::sleep(every).await;
        let Some((fleet_now, cert_now)) = look(fleet_files.clone(), cert_files.clone()).await else {
            continue;
        };
        if fleet_now != fleet_seen {
            fleet_seen = fleet_now;
            reload_fleet(&app, &watched).await;
        }
        if cert_now != cert_seen {
            cert_seen = cert_now;
            if let Some(not_after) = reload_cert(&app, &cert, &watched).await {
                app.metrics.cert_not_after.set(not_after);
            }
        }
    }
}

async fn reload_fleet(app: &Arc<App>, watched: &Watched) {
    let dir = watched.fleet.clone();
    match tokio::task::spawn_blocking(move || Fleet::load(&dir)).await {
        Ok(Ok(fleet)) => {
            *app.fleet_refused.lock().unwrap_or_else(|e| e.into_inner()) = None;
            let current = app.trust();
            if fleet.bundle == current.fleet.bundle && fleet.root_pem == current.fleet.root_pem {
                return;
            }
            tracing::info!(
                fleet_root_sha256 = %fleet.root_sha256,
                bundle_version = fleet.bundle_version,
                "reloaded the fleet: served from the next request"
            );
            app.replace_trust(ServedTrust::new(fleet));
        }
        Ok(Err(e)) => {
            tracing::error!(cause = %e, "refused the changed fleet; still serving the last good one");
            *app.fleet_refused.lock().unwrap_or_else(|e| e.into_inner()) =
                Some(format!("the changed fleet was refused (still serving the last good one): {e}"));
        }
        Err(e) => tracing::error!(cause = %e, "fleet reload failed"),
    }
}

/// Loads the changed certificate and key and serves them if a start would
/// (they parse, match, are in date), and if they still verify for
/// `controller.fleet.janus` through the fleet root whenever the ones served
/// now do: a copy from another fleet would fail every node's handshake.
/// A refusal is logged and said by `/healthz` (degraded) until a good
/// pair is served.
async fn reload_cert(app: &Arc<App>, cert: &Arc<CurrentCert>, watched: &Watched) -> Option<i64> {
    let (crt, key) = (watched.cert.clone(), watched.key.clone());
    let root = app.trust().fleet.root_der.clone();
    let fleet_dir = watched.fleet.clone();
    let served = cert.current();
    let loaded = tokio::task::spawn_blocking(move || {
        let identity = ServedIdentity::load(&crt, &key, &janus_core::tls::provider())?;
        let provider = janus_core::tls::provider();
        // The root served, or the one on disk (a rotation whose new root
        // is not reloaded yet).
        let on_disk = Fleet::load(&fleet_dir).ok().map(|f| f.root_der);
        let verifies = |who: &ServedIdentity| {
            who.verify_for_fleet(&root, provider.clone()).or_else(|why| {
                on_disk.as_ref().map_or(Err(why), |r| who.verify_for_fleet(r, provider.clone()))
            })
        };
        if let Err(why) = verifies(&identity) {
            if verifies(&ServedIdentity { certified: served, not_after: 0 }).is_ok() {
                return Err(why);
            }
            tracing::warn!(reason = %why, "the changed certificate does not verify through the fleet root (nor did the one it replaces)");
        }
        Ok(identity)
    })
    .await;
    let refused = |why: String| {
        tracing::error!(cause = %why, "refused the changed certificate; still serving the last good one");
        *app.cert_refused.lock().unwrap_or_else(|e| e.into_inner()) =
            Some(format!("the changed certificate was refused (still serving the last good one): {why}"));
    };
    match loaded {
        Ok(Ok(identity)) => {
            tracing::info!(
                cert_not_after = %janus_core::clock::unix_to_rfc3339(identity.not_after),
                "reloaded the certificate: used from the next handshake"
            );
            cert.replace(identity.certified);
            *app.cert_refused.lock().unwrap_or_else(|e| e.into_inner()) = None;
            return Some(identity.not_after);
        }
        Ok(Err(e)) => refused(e.to_string()),
        Err(e) => refused(e.to_string()),
    }
    None
}

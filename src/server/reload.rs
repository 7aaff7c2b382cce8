//! Live reload, never a restart: a new `root.crt`/`bundle.json`, or a renewed
//! certificate and key, are checked and then served from the next request
//! (or handshake). A bad one is refused with a logged error and the last good
//! one kept.
//!
//! Watch events (notify) are hints that make a change take effect at once;
//! correctness does not depend on them: a periodic look at the files' size,
//! mtime and inode catches whatever an event missed.

use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use notify::Watcher;

use super::{App, ServedTrust};
use crate::pki::{Fleet, ServedIdentity};
use crate::tls::CurrentCert;

/// What a reload looks at.
#[derive(Debug, Clone)]
pub struct Watched {
    /// The fleet directory.
    pub fleet: PathBuf,
    /// The endpoint's certificate chain.
    pub cert: PathBuf,
    /// Its key.
    pub key: PathBuf,
}

type Stamp = Vec<Option<(u64, i64, i64, u64)>>;

fn stamp(paths: &[PathBuf]) -> Stamp {
    paths
        .iter()
        .map(|p| std::fs::metadata(p).ok().map(|m| (m.len(), m.mtime(), m.mtime_nsec(), m.ino())))
        .collect()
}

/// Runs until the runtime stops: reloads on watch events and every `every`.
pub async fn run(app: Arc<App>, cert: Arc<CurrentCert>, watched: Watched, every: Duration) {
    let fleet_files = vec![watched.fleet.join("root.crt"), watched.fleet.join("bundle.json")];
    let cert_files = vec![watched.cert.clone(), watched.key.clone()];
    let (hint, mut hints) = tokio::sync::mpsc::channel::<()>(1);
    // Watch the directories (atomic renames replace the files' inodes), and
    // wake up only for events about our files, or their temp files.
    let names: Vec<std::ffi::OsString> =
        fleet_files.iter().chain(&cert_files).filter_map(|p| p.file_name().map(|n| n.to_owned())).collect();
    let watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        let ours = match &event {
            Ok(event) => event.paths.iter().any(|p| {
                p.file_name().is_some_and(|n| {
                    names
                        .iter()
                        .any(|name| n == name || n.to_string_lossy().contains(&*name.to_string_lossy()))
                })
            }),
            Err(_) => true,
        };
        if ours {
            let _ = hint.try_send(());
        }
    });
    let _watcher = match watcher {
        Ok(mut w) => {
            let mut dirs: Vec<PathBuf> =
                fleet_files.iter().chain(&cert_files).filter_map(|p| p.parent().map(PathBuf::from)).collect();
            dirs.sort();
            dirs.dedup();
            for dir in dirs {
                let dir = if dir.as_os_str().is_empty() { PathBuf::from(".") } else { dir };
                if let Err(e) = w.watch(&dir, notify::RecursiveMode::NonRecursive) {
                    tracing::warn!(dir = %dir.display(), cause = %e, "cannot watch; relying on the periodic check");
                }
            }
            Some(w)
        }
        Err(e) => {
            tracing::warn!(cause = %e, "no file watcher; relying on the periodic check");
            None
        }
    };
    let mut fleet_seen = stamp(&fleet_files);
    let mut cert_seen = stamp(&cert_files);
    loop {
        tokio::select! {
            _ = hints.recv() => {
                // Let a burst of events (temp file, rename) settle.
                tokio::time::sleep(Duration::from_millis(100)).await;
                while hints.try_recv().is_ok() {}
            }
            _ = tokio::time::sleep(every) => {}
        }
        let now = stamp(&fleet_files);
        if now != fleet_seen {
            fleet_seen = now;
            reload_fleet(&app, &watched).await;
        }
        let now = stamp(&cert_files);
        if now != cert_seen {
            cert_seen = now;
            if let Some(not_after) = reload_cert(&cert, &watched).await {
                app.metrics.cert_not_after.set(not_after);
            }
        }
    }
}

async fn reload_fleet(app: &Arc<App>, watched: &Watched) {
    let dir = watched.fleet.clone();
    match tokio::task::spawn_blocking(move || Fleet::load(&dir)).await {
        Ok(Ok(fleet)) => {
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
            tracing::error!(cause = %e, "refused the changed fleet; still serving the last good one")
        }
        Err(e) => tracing::error!(cause = %e, "fleet reload failed"),
    }
}

async fn reload_cert(cert: &Arc<CurrentCert>, watched: &Watched) -> Option<i64> {
    let (crt, key) = (watched.cert.clone(), watched.key.clone());
    let loaded =
        tokio::task::spawn_blocking(move || ServedIdentity::load(&crt, &key, &crate::tls::provider())).await;
    match loaded {
        Ok(Ok(identity)) => {
            tracing::info!(
                cert_not_after = %crate::clock::unix_to_rfc3339(identity.not_after),
                "reloaded the certificate: used from the next handshake"
            );
            cert.replace(identity.certified);
            return Some(identity.not_after);
        }
        Ok(Err(e)) => {
            tracing::error!(cause = %e, "refused the changed certificate; still serving the last good one")
        }
        Err(e) => tracing::error!(cause = %e, "certificate reload failed"),
    }
    None
}

//! What runs beside the listeners until serving ends: the admission
//! command's workers, the tokens tidier, reloads, maintenance and the
//! `--on-admitted` follower; stopped in order, the tidier's flush bounded.

use std::sync::Arc;
use std::time::Duration;

use crate::app::App;
use crate::config::TIDIER_FLUSH;
use crate::reload;
use crate::startup::{Prepared, watched};

impl Prepared {
    /// Starts what runs beside the listeners: the admission command, the
    /// tokens tidier, reloads, maintenance and the `--on-admitted` follower.
    pub(crate) async fn start_background(&self) -> std::io::Result<Background> {
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
pub(crate) struct Background {
    tasks: Vec<tokio::task::JoinHandle<()>>,
    tidier: janus_store::Tidier,
}

impl Background {
    /// Stops it all; the tidier's last flush is bounded.
    pub(crate) async fn stop(self, app: &App) {
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

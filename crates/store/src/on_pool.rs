//! The store's async face: the server's handlers, the admission command's
//! workers and the maintenance loop reach the state directory only through
//! [`AsyncStore`], whose every method that touches a file runs on Tokio's
//! blocking pool, but one: a poll's reads, while every directory they touch
//! is on a local filesystem ([`super::locality`]). So no async worker —
//! which also runs TLS handshakes — ever waits on a file system that can
//! hang: a stalled network filesystem, or [`janus_core::durable::retry_stale`]'s
//! sleeps on ESTALE, park a pool thread and that request only; on a local
//! disk a poll's `stat`s and 1 KiB read cost less than the hand-off to the
//! pool and back (two thread wake-ups) they would ride on.
//!
//! Invariants: nothing is written from an async worker, and nothing read
//! there unless the last look (at startup, at each health check and
//! maintenance pass, all on the pool) found every state directory local;
//! one hand-off per request otherwise (a poll's read and `stat`s, an
//! announcement's whole admission, each in one closure); `/healthz` waits
//! on the file system only when it has no recent result (its first probe,
//! or the first after [`HEALTH_STALL`] without probes): otherwise it answers
//! the last result while the next check runs in the background, and 503
//! once a check has run for [`HEALTH_STALL`] without finishing.

use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

use super::admission::Admission;
use super::format::FormatError;
use super::maintain::{MaintenanceLimits, Report};
use super::poll::{Look, PollAnswer};
use super::{DecidedBy, NodeId, NodeRecord, Store, StoreError, Unhealthy};

/// A health result is reused for this long: `/healthz` is the benchmark's
/// ceiling, so it must not cost a file write per request.
const HEALTH_FRESH: Duration = Duration::from_secs(1);
/// A health check running this long without finishing reports the state
/// stalled (a hung network filesystem): `/healthz` says 503 at once
/// instead of hanging the probe. A last result older than this is not
/// answered with.
pub const HEALTH_STALL: Duration = Duration::from_secs(10);

/// What a health check found: `Err` when no node can be served, else what
/// is degraded (empty: nothing).
pub(crate) type Health = Result<Vec<String>, Unhealthy>;

/// The store, called from async code.
#[derive(Clone)]
pub struct AsyncStore {
    store: Arc<Store>,
    health: Arc<HealthCache>,
}

#[derive(Default)]
struct HealthCache {
    /// The last finished check and when it finished.
    last: Mutex<Option<(Instant, Health)>>,
    /// When the check running now started (set and cleared by the holder
    /// of `checking` only).
    running_since: Mutex<Option<Instant>>,
    /// The one check's turn: held while a check runs.
    checking: Arc<tokio::sync::Mutex<()>>,
}

impl AsyncStore {
    /// The async face of `store`.
    pub fn new(store: Store) -> Self {
        AsyncStore { store: Arc::new(store), health: Arc::default() }
    }

    /// Looks again whether the state's reads can hang; on the pool only.
    fn look_at_locality(&self) -> impl Fn(&Store) + Send + 'static {
        move |store| {
            let (before, now) = store.look_at_locality();
            if before != now {
                if now {
                    tracing::info!("the state is on a local filesystem: polls are read on the async workers");
                } else {
                    tracing::info!(
                        "a state directory is on a filesystem whose reads can hang (or statfs failed): \
                         polls are read on the blocking pool"
                    );
                }
            }
        }
    }

    /// Runs `work` on the blocking pool; a panic in it is an error of this call only.
    pub(crate) async fn on_pool<T: Send + 'static>(
        &self,
        work: impl FnOnce(&Store) -> super::StoreResult<T> + Send + 'static,
    ) -> Result<T, StoreError> {
        let store = self.store.clone();
        // The caller's span (a request's) goes with the work: its log lines name it.
        let span = tracing::Span::current();
        match tokio::task::spawn_blocking(move || span.in_scope(|| work(&store))).await {
            Ok(done) => done,
            Err(e) => Err(StoreError::Io(io::Error::other(format!("a state task failed: {e}")))),
        }
    }

    /// Runs a command's `work` (its own error type) on the blocking pool,
    /// in the caller's span: the admin API's way to the store, so the
    /// server process keeps one store, one lock per lock file. `Err`: the
    /// work panicked (a bug), its text for the log.
    pub async fn run<T: Send + 'static, E: Send + 'static>(
        &self,
        work: impl FnOnce(&Store) -> Result<T, E> + Send + 'static,
    ) -> Result<Result<T, E>, String> {
        let store = self.store.clone();
        let span = tracing::Span::current();
        tokio::task::spawn_blocking(move || span.in_scope(|| work(&store))).await.map_err(|e| e.to_string())
    }

    /// Why nothing may be written now (memory only: no file is read).
    pub fn format_refusal(&self) -> Option<FormatError> {
        self.store.format_refusal()
    }

    /// Lays the state directory out ([`Store::lay_out`]).
    pub async fn lay_out(&self) -> Result<(), StoreError> {
        let look = self.look_at_locality();
        self.on_pool(move |store| {
            store.lay_out()?;
            look(store);
            Ok(())
        })
        .await
    }

    /// [`Store::announce`].
    pub async fn announce(
        &self,
        record: NodeRecord,
        token: secrecy::SecretString,
        bundle_version: u64,
        room: bool,
    ) -> Result<Admission, StoreError> {
        self.on_pool(move |store| store.announce(record, token, bundle_version, room)).await
    }

    /// [`Store::poll`]: its reads where they stand when they cannot hang;
    /// the first delivery (which writes), and any poll on a filesystem that
    /// can hang, on the pool.
    pub async fn poll(
        &self,
        id: NodeId,
        secret: Vec<u8>,
        bundle_version: u64,
    ) -> Result<PollAnswer, StoreError> {
        if self.store.reads_cannot_hang()
            && let Look::Answer(answer) = self.store.look(&id, &secret)?
        {
            return Ok(answer);
        }
        self.on_pool(move |store| store.poll(&id, &secret, bundle_version)).await
    }

    /// The record of `id` while no admin (nor anything else) decided on it.
    pub async fn undecided_record(&self, id: NodeId) -> Result<Option<NodeRecord>, StoreError> {
        self.on_pool(move |store| {
            if store.approved_now(&id)? || store.rejected_now(&id)? {
                return Ok(None);
            }
            store.read_record(&id)
        })
        .await
    }

    /// Approves `id` for the admission command `program`, audited.
    pub async fn admit_by_policy(&self, id: NodeId, program: String) -> Result<(), StoreError> {
        self.on_pool(move |store| store.admit(super::Admitted::new(id, DecidedBy::Policy, Some(program))))
            .await
    }

    /// One maintenance pass ([`Store::maintain`]), after removing what
    /// crashes left behind when `first` (the server's first pass).
    pub async fn maintain(&self, first: bool, limits: MaintenanceLimits) -> Result<Report, StoreError> {
        let look = self.look_at_locality();
        self.on_pool(move |store| {
            look(store);
            if first {
                store.remove_leftovers();
            }
            store.maintain(janus_core::clock::now_unix(), limits)
        })
        .await
    }

    /// Whether the state can be relied on (`Store::check_health`). A
    /// result is reused for `HEALTH_FRESH` (1 s); an older one is answered at
    /// once while a new check runs in the background, so no probe waits on
    /// the file system but the very first; once no check has finished for
    /// [`HEALTH_STALL`], the answer is that the state is stalled. One check
    /// runs at a time, however many probes come.
    pub async fn health(&self) -> Health {
        let last = self.health.last.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let Some((at, result)) = last else { return self.check_health_waiting().await };
        if at.elapsed() < HEALTH_FRESH {
            return result;
        }
        let running_since = *self.health.running_since.lock().unwrap_or_else(|e| e.into_inner());
        match running_since {
            Some(since) if since.elapsed() >= HEALTH_STALL => Err(stalled()),
            Some(_) => result,
            // An idle server's last result is too old to answer with.
            None if at.elapsed() >= HEALTH_STALL => self.check_health_waiting().await,
            None => {
                // Only the probe that takes the one check's turn starts it.
                if let Ok(turn) = self.health.checking.clone().try_lock_owned() {
                    let this = self.clone();
                    tokio::spawn(async move { this.run_health_check(turn).await });
                }
                result
            }
        }
    }

    /// Waits for the check running now, if any, and answers its result if
    /// fresh; else runs one.
    async fn check_health_waiting(&self) -> Health {
        let turn = self.health.checking.clone().lock_owned().await;
        let last = self.health.last.lock().unwrap_or_else(|e| e.into_inner()).clone();
        match last {
            Some((at, result)) if at.elapsed() < HEALTH_FRESH => result,
            _ => self.check_health_now(turn).await,
        }
    }

    /// A health check, awaited. It runs as a task of its own: a probe
    /// whose client gives up (its timeout) drops this future, and a check
    /// cancelled half-way would stay "running" for good, every `/healthz`
    /// after it a 503 until a restart.
    async fn check_health_now(&self, turn: tokio::sync::OwnedMutexGuard<()>) -> Health {
        let this = self.clone();
        tokio::spawn(async move { this.run_health_check(turn).await })
            .await
            .unwrap_or_else(|e| Err(Unhealthy(format!("the health check failed: {e}"))))
    }

    /// A health check on the pool, its result kept, run while holding the
    /// one check's `turn`; while it runs, others answer the previous result.
    async fn run_health_check(&self, turn: tokio::sync::OwnedMutexGuard<()>) -> Health {
        *self.health.running_since.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
        let cache = self.health.clone();
        let look = self.look_at_locality();
        let checked = self
            .on_pool(move |store| {
                look(store);
                let result = store.check_health();
                *cache.last.lock().unwrap_or_else(|e| e.into_inner()) =
                    Some((Instant::now(), result.clone()));
                Ok(result)
            })
            .await;
        *self.health.running_since.lock().unwrap_or_else(|e| e.into_inner()) = None;
        drop(turn);
        checked.unwrap_or_else(|e| Err(Unhealthy(e.to_string())))
    }

    /// The tokens tidier: one thread that batches blanking spent tokens,
    /// stopped and flushed when the returned guard is dropped.
    pub fn start_tidier(&self) -> io::Result<crate::tidier::Tidier> {
        crate::tidier::Tidier::start(self.store.clone())
    }
}

fn stalled() -> Unhealthy {
    Unhealthy(format!(
        "the state directory has not finished a health check in {} s: its file system may be hung",
        HEALTH_STALL.as_secs()
    ))
}

//! `--on-admitted`: the orchestrator's program, run once after each
//! admission however it was made (a token, the admission command, an
//! admin's `nodes approve` or approval file, on this replica or another),
//! given the admission on stdin as `nodes watch` prints it: the `admitted`
//! audit event and the node as `nodes list --json` shows it.
//!
//! Invariants: it follows the audit trail from the server's start, the one
//! place every writer's admissions meet, so the program runs after the
//! fact: it never delays an answer, and its failure, hang or absence is
//! logged, never written into a decision (nothing here writes one). Among
//! replicas on one state directory an admission's program runs on one:
//! the replica that creates `on-admitted/<id>-<event hash>` (an exclusive
//! link: the file server decides) runs it; one that cannot tell (the claim
//! fails) runs it too, as a repeated notice is safer than a lost one. At
//! most [`CONCURRENCY`] run at once, each in a process group of its own,
//! killed when it exits, at its timeout and at shutdown (the admission
//! command's runner). Claims older than [`CLAIMS_KEPT`] are removed. A
//! crash between a claim and its run loses that run: orchestrators
//! reconcile with `nodes list --admitted-since`.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

use crate::store::{AsyncStore, Store};

/// Programs running at once, at most.
pub const CONCURRENCY: usize = 4;
/// How long a claim is kept (a repeat of an event older than this is not expected).
const CLAIMS_KEPT: Duration = Duration::from_secs(86_400);
/// How often the trail is looked at.
const EVERY: Duration = Duration::from_secs(1);
/// The claims' directory in the state directory.
const CLAIMS: &str = "on-admitted";

/// The program and its bound.
#[derive(Debug, Clone)]
pub struct OnAdmittedConfig {
    /// The program.
    pub command: PathBuf,
    /// How long one run may take.
    pub timeout: Duration,
}

/// Runs the program after admissions.
pub struct OnAdmitted {
    config: OnAdmittedConfig,
    store: AsyncStore,
    /// The process groups alive now, to kill at shutdown.
    groups: Arc<Mutex<HashSet<i32>>>,
}

type Offsets = std::collections::HashMap<PathBuf, (u64, u64)>;

impl OnAdmitted {
    /// Ready; nothing runs before [`OnAdmitted::start`].
    pub fn new(config: OnAdmittedConfig, store: AsyncStore) -> Self {
        OnAdmitted { config, store, groups: Arc::default() }
    }

    /// Follows the trail from now on (where it ends when this returns:
    /// before the server answers anyone), until the task is aborted.
    pub async fn start(&self) -> tokio::task::JoinHandle<()> {
        let (config, store, groups) = (self.config.clone(), self.store.clone(), self.groups.clone());
        // fold: a trail that cannot be read now is followed from its start, so nothing after now is missed
        let from = store.on_pool(|store| Ok(admissions_since(store, None).0)).await.ok().flatten();
        tokio::spawn(follow(config, store, groups, from))
    }

    /// Kills every process group still running (at shutdown).
    pub fn stop(&self) {
        for group in self.groups.lock().unwrap_or_else(|e| e.into_inner()).drain() {
            super::policy::kill_group(group);
        }
    }
}

async fn follow(
    config: OnAdmittedConfig,
    store: AsyncStore,
    groups: Arc<Mutex<HashSet<i32>>>,
    mut offsets: Option<Offsets>,
) {
    let slots = Arc::new(tokio::sync::Semaphore::new(CONCURRENCY));
    let mut pruned_at = tokio::time::Instant::now();
    loop {
        let prune = pruned_at.elapsed() >= Duration::from_secs(3600);
        if prune {
            pruned_at = tokio::time::Instant::now();
        }
        let from = offsets.take();
        let looked = store
            .on_pool(move |store| {
                if prune {
                    prune_claims(store.dir());
                }
                Ok(admissions_since(store, from))
            })
            .await;
        let Ok((now_at, admissions)) = looked else {
            tokio::time::sleep(EVERY).await;
            continue; // the task failed: start again from the end
        };
        offsets = now_at;
        for admission in admissions {
            let Ok(slot) = slots.clone().acquire_owned().await else { return };
            let (config, groups) = (config.clone(), groups.clone());
            tokio::spawn(async move {
                let _slot = slot;
                run_once(&config, &groups, admission).await;
            });
        }
        tokio::time::sleep(EVERY).await;
    }
}

/// The admissions this replica claimed since `from` (the trail's end at
/// the first call), each with its node, and where the trail ends now.
fn admissions_since(store: &Store, from: Option<Offsets>) -> (Option<Offsets>, Vec<Value>) {
    let trail = store.audit_trail();
    let Some(mut offsets) = from else {
        return match trail.end_offsets() {
            Ok(ends) => (Some(ends), Vec::new()),
            Err(e) => {
                tracing::warn!(cause = %e, "--on-admitted cannot read the audit trail; it tries again");
                (None, Vec::new())
            }
        };
    };
    let events = match trail.follow(&mut offsets) {
        Ok(events) => events,
        Err(e) => {
            tracing::warn!(cause = %e, "--on-admitted cannot read the audit trail; it tries again");
            return (Some(offsets), Vec::new());
        }
    };
    let mut claimed = Vec::new();
    for mut event in events.into_iter().filter(|e| e["event"] == "admitted") {
        if claim(store.dir(), &event) {
            crate::admin::with_node(store, &mut event);
            claimed.push(event);
        }
    }
    (Some(offsets), claimed)
}

/// Whether this replica runs the program for `event`: it made its claim,
/// or could not tell whether another did.
fn claim(state: &Path, event: &Value) -> bool {
    let id = event["id"].as_str().unwrap_or_default();
    if crate::store::NodeId::parse(id).is_none() {
        return false;
    }
    let dir = state.join(CLAIMS);
    let name = format!("{id}-{}", &crate::pki::sha256_hex(event.to_string().as_bytes())[..16]);
    let made = crate::durable::ensure_private_dir(&dir)
        .and_then(|()| crate::durable::create_exclusive(&dir.join(name), b"", 0o600));
    match made {
        Ok(mine) => mine,
        Err(e) => {
            tracing::warn!(node = %id, cause = %e, "--on-admitted cannot claim the admission; runs it anyway");
            true
        }
    }
}

/// Removes the claims older than [`CLAIMS_KEPT`].
fn prune_claims(state: &Path) {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(state.join(CLAIMS)) else { return };
    let before = crate::clock::now_unix() - CLAIMS_KEPT.as_secs() as i64;
    for entry in entries.flatten() {
        if entry.metadata().is_ok_and(|meta| meta.mtime() < before) {
            // A claim is a note, not a decision: nothing to make durable.
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

async fn run_once(config: &OnAdmittedConfig, groups: &Arc<Mutex<HashSet<i32>>>, admission: Value) {
    let id = admission["id"].as_str().unwrap_or_default().to_string();
    match super::policy::run(&config.command, config.timeout, groups, &admission).await {
        Ok(0) => tracing::info!(node = %id, "the --on-admitted program ran"),
        Ok(code) => {
            tracing::warn!(node = %id, code, "the --on-admitted program failed; the node stays admitted")
        }
        Err(why) => {
            tracing::warn!(node = %id, reason = %why, "the --on-admitted program failed; the node stays admitted")
        }
    }
}

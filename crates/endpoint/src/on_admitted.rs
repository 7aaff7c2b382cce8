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
//! fails) runs it too, as a repeated notice is safer than a lost one. The
//! trail is read through its one follower, and a claim is named by the
//! event's identity (the event but for its time), so an event a crash
//! repeated runs the program at most once. At most [`CONCURRENCY`] run at
//! once, through the one runner ([`crate::program`]) (an environment of its
//! own, output kept for the log, the group killed before the program is
//! reaped, every wait bounded). Claims older than `CLAIMS_KEPT` are
//! removed. A crash between a claim and its run loses that run:
//! orchestrators reconcile with `nodes list --admitted-since`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use janus_store::follow::{Follower, LOOK_EVERY};
use janus_store::{AsyncStore, Store};

use crate::program::Programs;

/// Programs running at once, at most.
pub(crate) const CONCURRENCY: usize = 4;
/// How long a claim is kept (a repeat of an event older than this is not expected).
const CLAIMS_KEPT: Duration = Duration::from_secs(86_400);

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
    /// Runs the program, in process groups killed at shutdown.
    programs: Arc<Programs>,
}

impl OnAdmitted {
    /// Ready; nothing runs before [`OnAdmitted::start`].
    pub fn new(config: OnAdmittedConfig, store: AsyncStore, programs: Arc<Programs>) -> Self {
        OnAdmitted { config, store, programs }
    }

    /// Follows the trail from its end now (before the server answers
    /// anyone), until the task is aborted. A trail that cannot be read
    /// now is followed from its start, its events before now skipped by
    /// time: nothing after now is missed.
    pub async fn start(&self) -> tokio::task::JoinHandle<()> {
        let (config, store, programs) = (self.config.clone(), self.store.clone(), self.programs.clone());
        let follower = store.run(Follower::at_end).await;
        let follower = match follower {
            Ok(Ok(follower)) => follower,
            Ok(Err(e)) => {
                tracing::warn!(cause = %e, "--on-admitted cannot read the audit trail's end; follows from now by time");
                Follower::since(None)
            }
            Err(failed) => {
                tracing::error!(cause = %failed, "--on-admitted's first look failed; follows from now by time");
                Follower::since(None)
            }
        };
        tokio::spawn(follow(config, store, programs, follower))
    }

    /// Kills every program still running (at shutdown).
    pub fn stop(&self) {
        self.programs.stop();
    }
}

async fn follow(
    config: OnAdmittedConfig,
    store: AsyncStore,
    programs: Arc<Programs>,
    mut follower: Follower,
) {
    let slots = Arc::new(tokio::sync::Semaphore::new(CONCURRENCY));
    let mut pruned_at = tokio::time::Instant::now();
    loop {
        let prune = pruned_at.elapsed() >= Duration::from_secs(3600);
        if prune {
            pruned_at = tokio::time::Instant::now();
        }
        let looked = store
            .run(move |store| {
                if prune {
                    let before = janus_core::clock::now_unix() - CLAIMS_KEPT.as_secs() as i64;
                    if let Err(e) = store.prune_hook_claims(before) {
                        tracing::warn!(cause = %e, "--on-admitted could not remove old claims");
                    }
                }
                let admissions = claimed_admissions(store, &mut follower);
                Ok::<_, std::convert::Infallible>((follower, admissions))
            })
            .await;
        let admissions = match looked {
            Ok(Ok((back, admissions))) => {
                follower = back;
                admissions
            }
            Err(failed) => {
                // The follower went with the task: from now on, by time.
                tracing::error!(cause = %failed, "--on-admitted's look at the trail failed; follows from now");
                follower = Follower::since(None);
                Vec::new()
            }
        };
        for admission in admissions {
            let Ok(slot) = slots.clone().acquire_owned().await else { return };
            let (config, programs) = (config.clone(), programs.clone());
            tokio::spawn(async move {
                let _slot = slot;
                run_once(&config, &programs, admission).await;
            });
        }
        tokio::time::sleep(LOOK_EVERY).await;
    }
}

/// The admissions appended since the follower's last look that this
/// replica claimed, each with its node.
fn claimed_admissions(store: &Store, follower: &mut Follower) -> Vec<Value> {
    let events = match follower.next(store) {
        Ok(events) => events,
        Err(e) => {
            tracing::warn!(cause = %e, "--on-admitted cannot read the audit trail; it tries again");
            return Vec::new();
        }
    };
    let mut claimed = Vec::new();
    for mut event in events.into_iter().filter(|e| e["event"] == "admitted") {
        let mine = match store.claim_hook_run(&event) {
            Ok(mine) => mine,
            // A repeated notice is safer than a lost one.
            Err(e) => {
                let id = event["id"].as_str().unwrap_or_default();
                tracing::warn!(node = %id, cause = %e, "--on-admitted cannot claim the admission; runs it anyway");
                true
            }
        };
        if mine {
            store.with_node(&mut event);
            claimed.push(event);
        }
    }
    claimed
}

async fn run_once(config: &OnAdmittedConfig, programs: &Programs, admission: Value) {
    let id = admission["id"].as_str().unwrap_or_default().to_string();
    let ran = programs.run(&config.command, config.timeout, &admission).await;
    let said = ran.said();
    match ran.code {
        Ok(0) => tracing::info!(node = %id, output = %said, "the --on-admitted program ran"),
        Ok(code) => {
            tracing::warn!(node = %id, code, output = %said, "the --on-admitted program failed; the node stays admitted")
        }
        Err(why) => {
            tracing::warn!(node = %id, reason = %why, output = %said, "the --on-admitted program failed; the node stays admitted")
        }
    }
}

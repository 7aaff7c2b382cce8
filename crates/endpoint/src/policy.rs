//! `--admission-command`: an admin's program decides on every announcement
//! that did not admit, off the request path (the node has its
//! `admitted:false` answer already), as Puppet's policy executable and
//! Kubernetes' approvers do.
//!
//! Invariants: the program gets the node record as JSON on stdin, without
//! the poll secret's hash, read when its turn comes (a queued item is the
//! node's id only, and the queue is bounded: past it the node just stays
//! pending, so memory stays flat however many announce while the program
//! hangs); at most `concurrency` run at once, each in a process group of
//! its own that is killed once the program exits (before it is reaped, so
//! the group's id is never another's), at its timeout and at shutdown, so
//! no descendant outlives its slot; every wait after a kill is bounded.
//! The program is run by [`crate::program`]: only its kept environment,
//! and the last 4 KiB of its stdout and stderr go to the
//! log line of its run. Exit 0 approves (audited
//! as admitted by policy), exit 1 leaves the node pending; anything else is
//! logged and leaves it pending.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc;

use janus_store::{AsyncStore, NodeId};

use crate::program::Programs;

/// Announcements waiting for the admission command, at most, by default.
pub const DEFAULT_QUEUE: usize = 256;

/// The admission command and its bounds.
#[derive(Debug, Clone)]
pub struct PolicyConfig {
    /// The program.
    pub command: PathBuf,
    /// How long one run may take.
    pub timeout: Duration,
    /// Runs at once.
    pub concurrency: usize,
    /// Announcements waiting for the command, at most.
    pub queue: usize,
}

/// Runs the admission command on announcements that did not admit, bounded.
pub struct Policy {
    config: PolicyConfig,
    store: AsyncStore,
    queue: mpsc::Sender<NodeId>,
    /// Taken by [`Policy::start`], which needs the runtime.
    waiting: Mutex<Option<mpsc::Receiver<NodeId>>>,
    /// Runs the program, in process groups killed at shutdown.
    programs: Arc<Programs>,
    /// A full queue is logged at most once a minute.
    full_logged: super::limits::LogThrottle,
}

impl Policy {
    /// Starts the workers.
    pub fn new(config: PolicyConfig, store: AsyncStore, programs: Arc<Programs>) -> Self {
        let (queue, waiting) = mpsc::channel(config.queue.max(1));
        Policy {
            config,
            store,
            queue,
            waiting: Mutex::new(Some(waiting)),
            programs,
            full_logged: Default::default(),
        }
    }

    /// Starts the `concurrency` workers that take queued ids in turn.
    pub fn start(&self) {
        let Some(waiting) = self.waiting.lock().unwrap_or_else(|e| e.into_inner()).take() else { return };
        let waiting = Arc::new(tokio::sync::Mutex::new(waiting));
        for _ in 0..self.config.concurrency.max(1) {
            let (waiting, config, store, programs) =
                (waiting.clone(), self.config.clone(), self.store.clone(), self.programs.clone());
            tokio::spawn(async move {
                loop {
                    let next = waiting.lock().await.recv().await;
                    let Some(id) = next else { return };
                    decide_on(&config, &store, &programs, id).await;
                }
            });
        }
    }

    /// Queues a decision on `id`; false when the queue is full (the node
    /// stays pending, and that is logged at most once a minute).
    pub fn submit(&self, id: NodeId) -> bool {
        if self.queue.try_send(id).is_ok() {
            return true;
        }
        if self.full_logged.due(Duration::from_secs(60)) {
            tracing::warn!(
                queue = self.config.queue,
                "the admission command's queue is full: new pending nodes wait for an admin"
            );
        }
        false
    }

    /// Kills every program still running (at shutdown).
    pub fn stop(&self) {
        self.programs.stop();
    }
}

async fn decide_on(config: &PolicyConfig, store: &AsyncStore, programs: &Programs, id: NodeId) {
    // An admin may have decided first: then nothing is run.
    let record = match store.undecided_record(id.clone()).await {
        Ok(Some(record)) => record,
        Ok(None) => return, // decided or forgotten meanwhile
        Err(e) => {
            return tracing::warn!(node = %id, cause = %e, "the admission command's record is unreadable");
        }
    };
    let mut input = serde_json::to_value(&record).unwrap_or_default();
    if let Some(fields) = input.as_object_mut() {
        fields.remove("poll_secret_sha256");
        fields.remove("token_claim");
    }
    let ran = programs.run(&config.command, config.timeout, &input).await;
    let said = ran.said();
    match ran.code {
        Ok(0) => {
            let program = config.command.display().to_string();
            match store.admit_by_policy(id.clone(), program).await {
                Ok(()) => tracing::info!(node = %id, "admitted by the admission command"),
                Err(e) => {
                    tracing::error!(cause = %e, "admission command approved, but the approval could not be written")
                }
            }
        }
        Ok(1) => tracing::info!(node = %id, output = %said, "the admission command leaves the node pending"),
        Ok(code) => {
            tracing::warn!(node = %id, code, output = %said, "the admission command failed; the node stays pending")
        }
        Err(why) => {
            tracing::warn!(node = %id, reason = %why, output = %said, "the admission command failed; the node stays pending")
        }
    }
}

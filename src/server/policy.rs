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
//! its own that is killed after the program exits, at its timeout and at
//! shutdown, so no descendant outlives its slot. Exit 0 approves (audited
//! as admitted by policy), exit 1 leaves the node pending; anything else is
//! logged and leaves it pending.

use std::collections::HashSet;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;

use crate::store::{AsyncStore, NodeId};

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
    /// The process groups alive now, to kill at shutdown.
    groups: Arc<Mutex<HashSet<i32>>>,
    /// A full queue is logged at most once a minute.
    full_logged: super::limits::LogThrottle,
}

impl Policy {
    /// Starts the workers.
    pub fn new(config: PolicyConfig, store: AsyncStore) -> Self {
        let (queue, waiting) = mpsc::channel(config.queue.max(1));
        Policy {
            config,
            store,
            queue,
            waiting: Mutex::new(Some(waiting)),
            groups: Arc::default(),
            full_logged: Default::default(),
        }
    }

    /// Starts the `concurrency` workers that take queued ids in turn.
    pub fn start(&self) {
        let Some(waiting) = self.waiting.lock().unwrap_or_else(|e| e.into_inner()).take() else { return };
        let waiting = Arc::new(tokio::sync::Mutex::new(waiting));
        for _ in 0..self.config.concurrency.max(1) {
            let (waiting, config, store, groups) =
                (waiting.clone(), self.config.clone(), self.store.clone(), self.groups.clone());
            tokio::spawn(async move {
                loop {
                    let next = waiting.lock().await.recv().await;
                    let Some(id) = next else { return };
                    decide_on(&config, &store, &groups, id).await;
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

    /// Kills every process group still running (at shutdown).
    pub fn stop(&self) {
        for group in self.groups.lock().unwrap_or_else(|e| e.into_inner()).drain() {
            kill_group(group);
        }
    }
}

async fn decide_on(config: &PolicyConfig, store: &AsyncStore, groups: &Arc<Mutex<HashSet<i32>>>, id: NodeId) {
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
    match run(&config.command, config.timeout, groups, &input).await {
        Ok(0) => {
            let program = config.command.display().to_string();
            match store.admit_by_policy(id.clone(), program).await {
                Ok(()) => tracing::info!(node = %id, "admitted by the admission command"),
                Err(e) => {
                    tracing::error!(cause = %e, "admission command approved, but the approval could not be written")
                }
            }
        }
        Ok(1) => tracing::info!(node = %id, "the admission command leaves the node pending"),
        Ok(code) => tracing::warn!(node = %id, code, "the admission command failed; the node stays pending"),
        Err(why) => {
            tracing::warn!(node = %id, reason = %why, "the admission command failed; the node stays pending")
        }
    }
}

/// Why the admission command gave no exit code.
#[derive(Debug, thiserror::Error)]
pub(super) enum CommandFailed {
    #[error("{}: {cause}", command.display())]
    Spawn { command: std::path::PathBuf, cause: std::io::Error },
    #[error("cannot wait for it: {0}")]
    Wait(std::io::Error),
    #[error("timed out after {}s", .0.as_secs())]
    TimedOut(std::time::Duration),
    #[error("killed by a signal")]
    Killed,
}

/// Runs the command on `input` in a process group of its own; its exit
/// code, or why there is none. The whole group is killed once the command
/// is done, whatever it left running.
pub(super) async fn run(
    command: &std::path::Path,
    timeout: Duration,
    groups: &Arc<Mutex<HashSet<i32>>>,
    input: &serde_json::Value,
) -> Result<i32, CommandFailed> {
    let mut child = tokio::process::Command::new(command)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(|cause| CommandFailed::Spawn { command: command.to_path_buf(), cause })?;
    let group = child.id().and_then(|pid| i32::try_from(pid).ok());
    if let Some(group) = group {
        groups.lock().unwrap_or_else(|e| e.into_inner()).insert(group);
    }
    let mut stdin = child.stdin.take().expect("stdin was piped");
    let bytes = serde_json::to_vec(input).expect("a JSON value serialises");
    let run = async {
        // A program that does not read its input must not block the decision.
        let _ = stdin.write_all(&bytes).await;
        drop(stdin);
        child.wait().await
    };
    let outcome = tokio::time::timeout(timeout, run).await;
    if let Some(group) = group {
        kill_group(group);
        groups.lock().unwrap_or_else(|e| e.into_inner()).remove(&group);
    }
    match outcome {
        Err(_) => {
            // Reaped before the slot is given back: never more alive than slots.
            let _ = child.wait().await;
            Err(CommandFailed::TimedOut(timeout))
        }
        Ok(Err(e)) => Err(CommandFailed::Wait(e)),
        Ok(Ok(status)) => status.code().ok_or(CommandFailed::Killed),
    }
}

/// SIGKILL to every process of group `group` (gone already: nothing to do).
pub(super) fn kill_group(group: i32) {
    if let Some(pid) = rustix::process::Pid::from_raw(group) {
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
}

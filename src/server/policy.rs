//! `--admission-command`: an admin's program decides on tokenless
//! announcements, off the request path (the node has its `admitted:false`
//! answer already), as Puppet's policy executable and Kubernetes' approvers do.
//!
//! Invariants: the program gets the node record as JSON on stdin, without
//! the poll secret's hash; at most `concurrency` run at once; each is killed
//! after `timeout`. Exit 0 approves (audited as admitted by policy), exit 1
//! leaves the node pending; anything else is logged and leaves it pending.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::io::AsyncWriteExt;
use tokio::sync::Semaphore;

use crate::store::{NodeId, NodeRecord, Store};

#[derive(Debug, Clone)]
pub struct PolicyConfig {
    pub command: PathBuf,
    pub timeout: Duration,
    pub concurrency: usize,
}

pub struct Policy {
    config: PolicyConfig,
    store: Arc<Store>,
    slots: Arc<Semaphore>,
}

impl Policy {
    pub fn new(config: PolicyConfig, store: Arc<Store>) -> Self {
        let slots = Arc::new(Semaphore::new(config.concurrency.max(1)));
        Policy { config, store, slots }
    }

    /// Queues a decision on `record`; returns at once.
    pub fn submit(&self, record: NodeRecord) {
        let (config, store, slots) = (self.config.clone(), self.store.clone(), self.slots.clone());
        tokio::spawn(async move {
            let Ok(_slot) = slots.acquire_owned().await else { return };
            let id = record.id.clone();
            match decide(&config, record).await {
                Ok(0) => {
                    let Some(node) = NodeId::parse(&id) else { return };
                    let program = config.command.display().to_string();
                    let approved = tokio::task::spawn_blocking(move || -> std::io::Result<()> {
                        store.approve(&node, "policy", &program)?;
                        store
                            .audit
                            .record("admitted", json!({"id": node.as_str(), "by": "policy", "user": program}))
                    })
                    .await;
                    match approved {
                        Ok(Ok(())) => tracing::info!(node = %id, "admitted by the admission command"),
                        Ok(Err(e)) => {
                            tracing::error!(cause = %e, "admission command approved, but the approval could not be written")
                        }
                        Err(e) => tracing::error!(cause = %e, "admission task failed"),
                    }
                }
                Ok(1) => tracing::info!(node = %id, "the admission command leaves the node pending"),
                Ok(code) => {
                    tracing::warn!(node = %id, code, "the admission command failed; the node stays pending")
                }
                Err(why) => {
                    tracing::warn!(node = %id, reason = %why, "the admission command failed; the node stays pending")
                }
            }
        });
    }
}

/// Runs the command on `record`; its exit code, or why there is none.
async fn decide(config: &PolicyConfig, record: NodeRecord) -> Result<i32, String> {
    let mut input = serde_json::to_value(&record).map_err(|e| e.to_string())?;
    if let Some(fields) = input.as_object_mut() {
        fields.remove("poll_secret_sha256");
    }
    let mut child = tokio::process::Command::new(&config.command)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("{}: {e}", config.command.display()))?;
    let mut stdin = child.stdin.take().ok_or("no stdin")?;
    let bytes = serde_json::to_vec(&input).map_err(|e| e.to_string())?;
    let run = async {
        // A program that does not read its input must not block the decision.
        let _ = stdin.write_all(&bytes).await;
        drop(stdin);
        child.wait().await
    };
    match tokio::time::timeout(config.timeout, run).await {
        Err(_) => Err(format!("timed out after {}s", config.timeout.as_secs())),
        Ok(Err(e)) => Err(e.to_string()),
        Ok(Ok(status)) => status.code().ok_or_else(|| "killed by a signal".to_string()),
    }
}

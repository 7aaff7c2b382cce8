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
//! The program gets only [`KEPT_ENVIRONMENT`] of the server's environment,
//! and the last [`KEPT_OUTPUT`] bytes of its stdout and stderr go to the
//! log line of its run. Exit 0 approves (audited
//! as admitted by policy), exit 1 leaves the node pending; anything else is
//! logged and leaves it pending.

use std::collections::HashSet;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;

use janus_store::{AsyncStore, NodeId};

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
    let ran = run(&config.command, config.timeout, groups, &input).await;
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

/// The environment variables a program is given, when the server has
/// them; nothing else of the server's environment (in Kubernetes, every
/// Secret mounted as a variable) reaches it.
pub const KEPT_ENVIRONMENT: [&str; 6] = ["PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR"];
/// How much of a program's output (stdout and stderr, each) is kept for the log.
pub const KEPT_OUTPUT: usize = 4096;
/// How long the program is waited for once its group was killed.
const REAP_WAIT: Duration = Duration::from_secs(5);

/// How a run went: its exit code (or why there is none) and the last
/// [`KEPT_OUTPUT`] bytes of what it wrote.
pub(super) struct Ran {
    pub code: Result<i32, CommandFailed>,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
}

impl Ran {
    /// What the program wrote, for the log (escaped by the log's writer).
    pub fn said(&self) -> String {
        let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).trim().to_string();
        match (text(&self.stdout), text(&self.stderr)) {
            (out, err) if out.is_empty() => err,
            (out, err) if err.is_empty() => out,
            (out, err) => format!("{out} | stderr: {err}"),
        }
    }
}

/// Runs the command on `input` in a process group of its own, with only
/// [`KEPT_ENVIRONMENT`]; its exit code and output. The whole group is
/// killed once the command exits, before it is reaped (its pid, the
/// group's id, cannot be reused meanwhile), at its timeout, and every wait
/// after is bounded.
pub(super) async fn run(
    command: &std::path::Path,
    timeout: Duration,
    groups: &Arc<Mutex<HashSet<i32>>>,
    input: &serde_json::Value,
) -> Ran {
    let failed = |code| Ran { code: Err(code), stdout: Vec::new(), stderr: Vec::new() };
    let mut child = match tokio::process::Command::new(command)
        .env_clear()
        .envs(KEPT_ENVIRONMENT.iter().filter_map(|name| Some((*name, std::env::var_os(name)?))))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
    {
        Ok(child) => child,
        Err(cause) => return failed(CommandFailed::Spawn { command: command.to_path_buf(), cause }),
    };
    let Some(pid) = child.id().and_then(|pid| i32::try_from(pid).ok()) else {
        return failed(CommandFailed::Wait(std::io::Error::other("no pid")));
    };
    groups.lock().unwrap_or_else(|e| e.into_inner()).insert(pid);
    let stdout = tokio::spawn(kept(child.stdout.take().expect("stdout was piped")));
    let stderr = tokio::spawn(kept(child.stderr.take().expect("stderr was piped")));
    let mut stdin = child.stdin.take().expect("stdin was piped");
    let bytes = serde_json::to_vec(input).expect("a JSON value serialises");
    // The leader's exit, seen without reaping it (WNOWAIT): a zombie keeps
    // its pid, so the group is killed while its id is still ours.
    let exited = tokio::task::spawn_blocking(move || {
        let pid = rustix::process::Pid::from_raw(pid).expect("a positive pid");
        let options = rustix::process::WaitIdOptions::EXITED | rustix::process::WaitIdOptions::NOWAIT;
        rustix::process::waitid(rustix::process::WaitId::Pid(pid), options)
    });
    let run = async {
        // A program that does not read its input must not block the decision.
        let _ = stdin.write_all(&bytes).await;
        drop(stdin);
        exited.await
    };
    let timed_out = tokio::time::timeout(timeout, run).await.is_err();
    kill_group(pid);
    groups.lock().unwrap_or_else(|e| e.into_inner()).remove(&pid);
    // Reaped before the slot is given back: never more alive than slots.
    let code = match tokio::time::timeout(REAP_WAIT, child.wait()).await {
        Err(_) => Err(CommandFailed::Wait(std::io::Error::other("not reaped in time after SIGKILL"))),
        Ok(_) if timed_out => Err(CommandFailed::TimedOut(timeout)),
        Ok(Err(e)) => Err(CommandFailed::Wait(e)),
        Ok(Ok(status)) => status.code().ok_or(CommandFailed::Killed),
    };
    // Its group is dead: the pipes close; a descendant that escaped the
    // group (setsid) is not waited for.
    let output = |task: tokio::task::JoinHandle<Vec<u8>>| async move {
        tokio::time::timeout(REAP_WAIT, task).await.ok().and_then(Result::ok).unwrap_or_default()
    };
    Ran { code, stdout: output(stdout).await, stderr: output(stderr).await }
}

/// The last [`KEPT_OUTPUT`] bytes `pipe` gives, read to its end.
async fn kept(mut pipe: impl tokio::io::AsyncRead + Unpin) -> Vec<u8> {
    use tokio::io::AsyncReadExt;
    let mut kept = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match pipe.read(&mut chunk).await {
            Ok(0) | Err(_) => return kept,
            Ok(n) => {
                kept.extend_from_slice(&chunk[..n]);
                if kept.len() > KEPT_OUTPUT {
                    kept.drain(..kept.len() - KEPT_OUTPUT);
                }
            }
        }
    }
}

/// Refuses a program that cannot be run, at startup rather than at its
/// first admission: a path (with a `/`) must be an executable file; a bare
/// name one in the kept `PATH`.
pub fn check_program(flag: &'static str, program: &std::path::Path) -> Result<(), super::StartupError> {
    use std::os::unix::fs::PermissionsExt;
    let refuse = |why: String| super::StartupError::Program { flag, program: program.to_path_buf(), why };
    let runnable = |path: &std::path::Path| {
        std::fs::metadata(path).map(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
    };
    if program.as_os_str().is_empty() {
        return Err(refuse("no program given".into()));
    }
    if program.components().count() > 1 || program.is_absolute() {
        return match runnable(program) {
            Ok(true) => Ok(()),
            Ok(false) => Err(refuse("not an executable file".into())),
            Err(e) => Err(refuse(e.to_string())),
        };
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    // fold: a PATH entry that cannot be looked at holds no program
    if std::env::split_paths(&path).any(|dir| runnable(&dir.join(program)).unwrap_or(false)) {
        return Ok(());
    }
    Err(refuse("no executable file of that name in PATH".into()))
}

/// SIGKILL to every process of group `group` (gone already: nothing to do).
pub(super) fn kill_group(group: i32) {
    if let Some(pid) = rustix::process::Pid::from_raw(group) {
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
}

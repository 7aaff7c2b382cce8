//! Running a program the operator named (`--admission-command`,
//! `--on-admitted`): the one runner, and the one registry of the process
//! groups alive, killed at shutdown.
//!
//! Invariants: each run is in a process group of its own, killed once the
//! program exits (before it is reaped, so the group's id is never
//! another's) and at its timeout; every wait after a kill is bounded; the
//! program gets only [`KEPT_ENVIRONMENT`] of the server's environment,
//! and the last [`KEPT_OUTPUT`] bytes of its stdout and stderr are kept
//! for the log line of its run. A program that cannot be run is refused
//! at startup ([`check_program`]).

use std::collections::HashSet;
use std::process::Stdio;
use std::sync::Mutex;
use std::time::Duration;

use tokio::io::AsyncWriteExt;

/// Why a program gave no exit code.
#[derive(Debug, thiserror::Error)]
pub enum CommandFailed {
    /// It could not be started.
    #[error("{}: {cause}", command.display())]
    Spawn {
        /// The program.
        command: std::path::PathBuf,
        /// Why.
        cause: std::io::Error,
    },
    /// Its end could not be waited for.
    #[error("cannot wait for it: {0}")]
    Wait(std::io::Error),
    /// It ran past its time and was killed.
    #[error("timed out after {}s", .0.as_secs())]
    TimedOut(std::time::Duration),
    /// A signal ended it.
    #[error("killed by a signal")]
    Killed,
}

/// The environment variables a program is given, when the server has
/// them; nothing else of the server's environment (in Kubernetes, every
/// Secret mounted as a variable) reaches it.
pub(crate) const KEPT_ENVIRONMENT: [&str; 6] = ["PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR"];
/// How much of a program's output (stdout and stderr, each) is kept for the log.
pub(crate) const KEPT_OUTPUT: usize = 4096;
/// How long the program is waited for once its group was killed.
const REAP_WAIT: Duration = Duration::from_secs(5);

/// How a run went: its exit code (or why there is none) and the last
/// [`KEPT_OUTPUT`] bytes of what it wrote.
pub struct Ran {
    /// Its exit code, or why there is none.
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

/// The process groups of the programs running now: one registry per
/// server, so shutdown kills every program it started.
#[derive(Default)]
pub struct Programs {
    groups: Mutex<Groups>,
}

/// The groups running, and whether the server stopped (then a program
/// started after is killed as it registers: none outlives the server).
#[derive(Default)]
struct Groups {
    running: HashSet<i32>,
    stopped: bool,
}

impl Programs {
    /// Kills every process group still running (at shutdown), and every
    /// one started from now on.
    pub fn stop(&self) {
        let mut groups = self.groups.lock().unwrap_or_else(|e| e.into_inner());
        groups.stopped = true;
        for group in groups.running.drain() {
            kill_group(group);
        }
    }

    /// Runs `command` on `input` in a process group of its own, registered while it runs.
    pub async fn run(&self, command: &std::path::Path, timeout: Duration, input: &serde_json::Value) -> Ran {
        run(command, timeout, &self.groups, input).await
    }
}

/// Runs the command on `input` in a process group of its own, with only
/// [`KEPT_ENVIRONMENT`]; its exit code and output. The whole group is
/// killed once the command exits, before it is reaped (its pid, the
/// group's id, cannot be reused meanwhile), at its timeout, and every wait
/// after is bounded.
async fn run(
    command: &std::path::Path,
    timeout: Duration,
    groups: &Mutex<Groups>,
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
    {
        let mut groups = groups.lock().unwrap_or_else(|e| e.into_inner());
        if groups.stopped {
            // Started as the server stopped (a queued run): not left behind.
            kill_group(pid);
        } else {
            groups.running.insert(pid);
        }
    }
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
    groups.lock().unwrap_or_else(|e| e.into_inner()).running.remove(&pid);
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

/// A program the server would run (`--admission-command`, `--on-admitted`) that cannot be.
#[derive(Debug, thiserror::Error)]
#[error("{flag} {}: {why}", program.display())]
pub struct Unusable {
    /// The flag that names it.
    pub flag: &'static str,
    /// The program.
    pub program: std::path::PathBuf,
    /// Why it cannot be run.
    pub why: String,
}

/// Refuses a program that cannot be run, at startup rather than at its
/// first admission: a path (with a `/`) must be an executable file; a bare
/// name one in the kept `PATH`.
pub(crate) fn check_program(flag: &'static str, program: &std::path::Path) -> Result<(), Unusable> {
    use std::os::unix::fs::PermissionsExt;
    let refuse = |why: String| Unusable { flag, program: program.to_path_buf(), why };
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
fn kill_group(group: i32) {
    if let Some(pid) = rustix::process::Pid::from_raw(group) {
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
}

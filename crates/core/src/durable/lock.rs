//! File locks between processes, held once per path per process: the
//! state's lock files (`tokens.lock`, `decisions.lock`) are taken only
//! through [`lock`], whatever number of `Store`s a process holds.
//!
//! Invariants: a process has at most one open file of a lock path while
//! it holds or waits for its lock (on NFS the flock is a POSIX lock, which
//! closing *any* of the process's files of that path releases, so a second
//! open would drop the first holder's lock at the file server); the
//! process-wide turn is taken before the file is opened and given back
//! after it is closed; a wait longer than [`SAY_AFTER`] is said (with the
//! holder's pid and command when `/proc/locks` names it), and one longer
//! than the process's bound ([`set_wait`], `--lock-wait`) gives up with an
//! error that names the bound and the holder: nothing waits silently for
//! ever.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Condvar, LazyLock, Mutex, OnceLock};
use std::time::Duration;
use tokio::time::Instant;

/// A wait is said after this long.
pub const SAY_AFTER: Duration = Duration::from_secs(1);
/// The bound on a wait when the process set none.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(60);
/// How often a lock held by another process is tried again.
const RETRY: Duration = Duration::from_millis(20);

/// The lock paths this process holds or is taking, and the turn's wake-up.
static HELD: LazyLock<(Mutex<HashSet<PathBuf>>, Condvar)> = LazyLock::new(Default::default);
/// Of each lock path, the files this process has open now and the most it
/// ever had open at once: the one-file rule, observable atomically.
static OPEN: LazyLock<Mutex<HashMap<PathBuf, (usize, usize)>>> = LazyLock::new(Default::default);
/// This process's bound on a wait ([`set_wait`]).
static WAIT: OnceLock<Duration> = OnceLock::new();

/// Sets how long this process waits for a lock before it gives up (once,
/// at startup: `--lock-wait`); later calls change nothing.
pub fn set_wait(bound: Duration) {
    let _ = WAIT.set(bound);
}

fn wait_bound() -> Duration {
    WAIT.get().copied().unwrap_or(DEFAULT_WAIT)
}

/// The most files of the lock path `path` this process ever had open at
/// once through this module (0: none yet). The rule is that it never
/// exceeds 1; counted under one mutex as files open and close, so a
/// reader sees what was, where a scan of `/proc/self/fd` races the opens.
pub fn most_open_at_once(path: &Path) -> usize {
    OPEN.lock().unwrap_or_else(|e| e.into_inner()).get(path).map_or(0, |&(_, most)| most)
}

fn count_open(path: &Path, opened: bool) {
    let mut open = OPEN.lock().unwrap_or_else(|e| e.into_inner());
    let (now, most) = open.entry(path.to_path_buf()).or_default();
    if opened {
        *now += 1;
        *most = (*most).max(*now);
    } else {
        *now = now.saturating_sub(1);
    }
}

/// A lock held: the file (its flock) and this process's turn for its path.
#[derive(Debug)]
pub struct Held {
    file: Option<File>,
    path: PathBuf,
    /// Whether the file is counted in [`OPEN`] (not for a pretended one).
    counted: bool,
}

impl Held {
    /// A file as if it were locked, outside the registry: for tests that
    /// play a lock lost at the file server.
    #[cfg(any(test, feature = "testing"))]
    pub fn pretend(file: File, path: &Path) -> Held {
        Held { file: Some(file), path: path.to_path_buf(), counted: false }
    }

    /// The turn for `path`, taken: its file not yet open.
    fn turn(path: &Path) -> Held {
        Held { file: None, path: path.to_path_buf(), counted: true }
    }

    /// Opens the lock file (counted), within the turn.
    fn open(&mut self, mode: u32) -> io::Result<&File> {
        let file = super::open_or_create(&self.path, mode)?;
        count_open(&self.path, true);
        Ok(self.file.insert(file))
    }

    /// The locked file.
    pub fn file(&self) -> &File {
        self.file.as_ref().expect("held until dropped")
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        // The file first: the flock goes with it while the turn is still
        // ours, so no thread of this process opens a second file meanwhile.
        if self.file.take().is_some() && self.counted {
            count_open(&self.path, false);
        }
        let (held, turn) = &*HELD;
        held.lock().unwrap_or_else(|e| e.into_inner()).remove(&self.path);
        turn.notify_all();
    }
}

/// Takes the lock on `path` (made with `mode` when missing, never through
/// a link: [`super::open_or_create`]), this process's turn first, within
/// the process's bound in all.
pub fn lock(path: &Path, mode: u32) -> io::Result<Held> {
    lock_within(path, mode, wait_bound())
}

fn lock_within(path: &Path, mode: u32, bound: Duration) -> io::Result<Held> {
    let started = Instant::now();
    let mut said = false;
    let say = |said: &mut bool, holder: &str| {
        if !*said && started.elapsed() >= SAY_AFTER {
            *said = true;
            tracing::warn!(
                lock = %path.display(),
                holder,
                bound_secs = bound.as_secs(),
                "waiting for a lock (giving up after --lock-wait)"
            );
        }
    };
    let gave_up = |holder: &str| {
        super::with_path(
            io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "gave up waiting for its lock after {} s (--lock-wait); held by {holder}",
                    bound.as_secs()
                ),
            ),
            path,
        )
    };
    // This process's turn.
    let (held, turn) = &*HELD;
    let mut taken = held.lock().unwrap_or_else(|e| e.into_inner());
    while taken.contains(path) {
        let left = bound.saturating_sub(started.elapsed());
        if left.is_zero() {
            return Err(gave_up("another thread of this process"));
        }
        let step = left.min(SAY_AFTER);
        taken = turn.wait_timeout(taken, step).unwrap_or_else(|e| e.into_inner()).0;
        if taken.contains(path) && started.elapsed() >= SAY_AFTER && !said {
            drop(taken);
            say(&mut said, "another thread of this process");
            taken = held.lock().unwrap_or_else(|e| e.into_inner());
        }
    }
    taken.insert(path.to_path_buf());
    drop(taken);
    // From here the turn is ours: `Held`'s drop gives it back, on every path.
    let mut holding = Held::turn(path);
    let file = holding.open(mode)?;
    loop {
        match file.try_lock() {
            Ok(()) => break,
            Err(std::fs::TryLockError::WouldBlock) => {
                if started.elapsed() >= bound {
                    return Err(gave_up(&holder_of(file)));
                }
                if started.elapsed() >= SAY_AFTER && !said {
                    say(&mut said, &holder_of(file));
                }
                std::thread::sleep(RETRY);
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(super::with_path(e, path)),
        }
    }
    Ok(holding)
}

/// The lock on `path` if it is free now, in this process and outside it;
/// `None` when anyone holds it (nothing is waited for).
pub fn try_lock(path: &Path, mode: u32) -> io::Result<Option<Held>> {
    let (held, _) = &*HELD;
    {
        let mut taken = held.lock().unwrap_or_else(|e| e.into_inner());
        if !taken.insert(path.to_path_buf()) {
            return Ok(None);
        }
    }
    let mut holding = Held::turn(path);
    match holding.open(mode)?.try_lock() {
        Ok(()) => Ok(Some(holding)),
        Err(std::fs::TryLockError::WouldBlock) => Ok(None),
        Err(std::fs::TryLockError::Error(e)) => Err(super::with_path(e, path)),
    }
}

/// Who holds `file`'s lock, as `/proc/locks` names it on this host: `pid
/// N (command)`; "another process" where it cannot tell (another host's,
/// on a network filesystem).
fn holder_of(file: &File) -> String {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = file.metadata() else { return "another process".into() };
    let inode = meta.ino();
    let locks = std::fs::read_to_string("/proc/locks").unwrap_or_default();
    for line in locks.lines() {
        // "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF"
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (Some(pid), Some(device_inode)) = (fields.get(4), fields.get(5)) else { continue };
        if device_inode.rsplit(':').next().and_then(|i| i.parse::<u64>().ok()) == Some(inode) {
            let command = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            return format!("pid {pid} ({})", crate::terminal::escape(command.trim()));
        }
    }
    "another process".into()
}

#[cfg(test)]
#[allow(clippy::disallowed_methods, reason = "tests make files by hand, as an admin does")]
mod tests {
    use super::*;

    #[test]
    fn a_process_holds_one_open_file_of_a_lock_path_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens.lock");
        let first = lock(&path, 0o600).unwrap();
        // A second taker in this process waits for the turn, not for a
        // second open file (which, on NFS, would release the first's lock).
        let waited = lock_within(&path, 0o600, Duration::from_millis(50)).unwrap_err();
        assert_eq!(waited.kind(), io::ErrorKind::TimedOut);
        assert!(waited.to_string().contains("another thread of this process"), "{waited}");
        let opens = || {
            std::fs::read_dir("/proc/self/fd")
                .unwrap()
                .filter_map(|e| std::fs::read_link(e.unwrap().path()).ok())
                .filter(|target| *target == path)
                .count()
        };
        assert_eq!(opens(), 1, "one open file of the lock path");
        drop(first);
        assert_eq!(opens(), 0);
        let again = lock_within(&path, 0o600, Duration::from_millis(50)).unwrap();
        drop(again);
    }

    #[test]
    fn a_lock_another_process_holds_is_given_up_after_the_bound_naming_the_holder() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("decisions.lock");
        std::fs::write(&path, b"").unwrap();
        // Another process's lock: flock(1) holding it while it sleeps.
        // `-o`: the lock is flock's own, not inherited by `sleep`, so it
        // goes when flock is killed.
        let mut holder = std::process::Command::new("flock")
            .arg("-o")
            .arg(&path)
            .args(["sleep", "30"])
            .spawn()
            .expect("flock(1) from util-linux");
        let deadline = Instant::now() + Duration::from_secs(10);
        let taken_elsewhere = loop {
            let probe = std::fs::File::open(&path).unwrap();
            if probe.try_lock().is_err() {
                break true;
            }
            drop(probe);
            if Instant::now() > deadline {
                break false;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        assert!(taken_elsewhere, "flock took the lock");
        let refused = lock_within(&path, 0o600, Duration::from_millis(100)).unwrap_err();
        let _ = holder.kill();
        let _ = holder.wait();
        assert_eq!(refused.kind(), io::ErrorKind::TimedOut);
        let said = refused.to_string();
        assert!(said.contains("gave up waiting for its lock after 0 s (--lock-wait)"), "{said}");
        assert!(said.contains("held by pid ") && said.contains("(flock)"), "{said}");
        // The process's turn came back with the refusal.
        drop(lock_within(&path, 0o600, Duration::from_secs(5)).unwrap());
    }
}

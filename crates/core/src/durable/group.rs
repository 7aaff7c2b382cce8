//! Group commit: writers that wait on the same `fsync` share it. A writer
//! hands its part (an audit line, or nothing but the need for a directory's
//! `fsync` after its rename) to the file's [`Group`]; if no commit of that
//! file runs, it runs one for every part handed in so far, its own
//! included; otherwise it waits, and the next commit takes its part.
//!
//! Invariants: a writer is answered only with the outcome of a commit that
//! started after its part was handed in, so "answered, hence durable"
//! holds for each writer as it did alone; a commit that fails fails every
//! part it carried (each gets the error, its OS code kept); one commit per
//! file runs at a time in this process (other processes and hosts commit
//! on their own, as before). Durability costs per batch, not per request.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};

/// What a commit said, for every writer it carried.
type Outcome = Result<(), Shared>;

/// An error every writer of a failed commit gets a copy of.
#[derive(Clone)]
struct Shared {
    os_error: Option<i32>,
    /// The file the error named, when it named one ([`super::with_path`]).
    path: Option<PathBuf>,
    kind: io::ErrorKind,
    message: String,
}

impl Shared {
    fn of(error: &io::Error) -> Self {
        let path = error.get_ref().and_then(|e| e.downcast_ref::<super::AtPath>()).map(|at| at.path.clone());
        Shared { os_error: super::os_error(error), path, kind: error.kind(), message: error.to_string() }
    }

    /// The error as the committing writer got it: the OS code (what callers
    /// look at: ENOSPC, ELOOP…) and the file it named kept.
    fn to_error(&self) -> io::Error {
        match (self.os_error, &self.path) {
            (Some(code), Some(path)) => super::with_path(io::Error::from_raw_os_error(code), path),
            (Some(code), None) => io::Error::from_raw_os_error(code),
            (None, _) => io::Error::new(self.kind, self.message.clone()),
        }
    }
}

/// A writer's part and where its outcome goes.
struct Part<T> {
    item: T,
    outcome: Arc<OnceLock<Outcome>>,
}

/// The commits of one file.
pub struct Group<T> {
    state: Mutex<State<T>>,
    committed: Condvar,
}

struct State<T> {
    /// Handed in, not yet taken by a commit.
    waiting: Vec<Part<T>>,
    /// A commit runs now.
    running: bool,
}

impl<T> Default for Group<T> {
    fn default() -> Self {
        Group { state: Mutex::new(State { waiting: Vec::new(), running: false }), committed: Condvar::new() }
    }
}

impl<T> Group<T> {
    /// Hands `item` in and returns once a commit that carried it ended:
    /// `commit` (this writer's, or another's) is given every item handed in
    /// since the last commit started, in the order they came.
    pub fn commit(&self, item: T, commit: impl FnOnce(Vec<T>) -> io::Result<()>) -> io::Result<()> {
        let outcome = Arc::new(OnceLock::new());
        let mut state = self.lock();
        state.waiting.push(Part { item, outcome: outcome.clone() });
        let mut commit = Some(commit);
        loop {
            if let Some(done) = outcome.get() {
                return done.clone().map_err(|e| e.to_error());
            }
            if state.running {
                state = self.committed.wait(state).unwrap_or_else(PoisonError::into_inner);
                continue;
            }
            // No commit runs and this writer's part waits: it commits.
            let Some(run) = commit.take() else { unreachable!("a writer commits at most once") };
            state.running = true;
            let parts = std::mem::take(&mut state.waiting);
            drop(state);
            let (items, outcomes): (Vec<T>, Vec<_>) = parts.into_iter().map(|p| (p.item, p.outcome)).unzip();
            // Ends the commit however `run` ends, a panic included: its
            // writers get an error, and the next writer may commit.
            let running = Running { group: self, outcomes };
            let result = run(items);
            let said: Outcome = result.as_ref().map(|_| ()).map_err(Shared::of);
            for each in &running.outcomes {
                let _ = each.set(said.clone());
            }
            drop(running);
            // This writer's own error is returned as it was made.
            return result;
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A commit under way: when it ends, by returning or by a panic, every
/// writer it carried has an outcome (an error, if `run` gave none) and the
/// group is free for the next commit, its waiters woken.
struct Running<'a, T> {
    group: &'a Group<T>,
    outcomes: Vec<Arc<OnceLock<Outcome>>>,
}

impl<T> Drop for Running<'_, T> {
    fn drop(&mut self) {
        let panicked = Shared {
            os_error: None,
            path: None,
            kind: io::ErrorKind::Other,
            message: "the commit carrying this write panicked; nothing is known to be durable".into(),
        };
        for each in &self.outcomes {
            let _ = each.set(Err(panicked.clone()));
        }
        let mut state = self.group.lock();
        state.running = false;
        self.group.committed.notify_all();
    }
}

/// The group of `path` among `groups`, made at its first use. The paths are
/// the state's own files and directories: a handful per process.
pub fn of<T>(groups: &Mutex<HashMap<PathBuf, Arc<Group<T>>>>, path: &Path) -> Arc<Group<T>> {
    let mut groups = groups.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(group) = groups.get(path) {
        return group.clone();
    }
    groups.entry(path.to_path_buf()).or_default().clone()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A commit that panics frees the group and fails the writers it
    /// carried: later writers of the path are not left waiting for ever.
    #[test]
    fn a_commit_that_panics_fails_its_writers_and_frees_the_group() {
        let group = Arc::new(Group::<u32>::default());
        let (release, held) = std::sync::mpsc::channel::<()>();
        let held = Mutex::new(held);
        std::thread::scope(|s| {
            let panicking = s.spawn(|| {
                group.commit(0, |_| {
                    held.lock().unwrap().recv().unwrap();
                    panic!("a bug in a commit");
                })
            });
            while !group.lock().running {
                std::thread::yield_now();
            }
            let carried = s.spawn(|| group.commit(1, |_| Ok(())));
            while group.lock().waiting.is_empty() {
                std::thread::yield_now();
            }
            release.send(()).unwrap();
            assert!(panicking.join().is_err(), "the committing writer's thread panicked");
            // The waiting writer commits its own part next (it was not carried).
            assert!(carried.join().unwrap().is_ok());
        });
        // And a writer after it is not left waiting.
        assert!(
            group.commit(2, |items| if items == [2] { Ok(()) } else { Err(io::Error::other("x")) }).is_ok()
        );
        assert!(!group.lock().running);
    }

    #[test]
    fn writers_waiting_on_a_commit_share_the_next() {
        let group = Arc::new(Group::<u32>::default());
        let commits = Arc::new(AtomicUsize::new(0));
        let carried = Arc::new(Mutex::new(Vec::new()));
        // The first commit is held until every other writer has handed in.
        let (release, held) = std::sync::mpsc::channel::<()>();
        let held = Mutex::new(held);
        std::thread::scope(|s| {
            let first = s.spawn(|| {
                group.commit(0, |items| {
                    commits.fetch_add(1, Ordering::SeqCst);
                    held.lock().unwrap().recv().unwrap();
                    carried.lock().unwrap().push(items);
                    Ok(())
                })
            });
            while !group.lock().running {
                std::thread::yield_now();
            }
            let others: Vec<_> = (1..=8)
                .map(|n| {
                    let (group, commits, carried) = (&group, &commits, &carried);
                    s.spawn(move || {
                        group.commit(n, |items| {
                            commits.fetch_add(1, Ordering::SeqCst);
                            carried.lock().unwrap().push(items);
                            Ok(())
                        })
                    })
                })
                .collect();
            while group.lock().waiting.len() < 8 {
                std::thread::yield_now();
            }
            release.send(()).unwrap();
            first.join().unwrap().unwrap();
            for other in others {
                other.join().unwrap().unwrap();
            }
        });
        assert_eq!(commits.load(Ordering::SeqCst), 2, "eight waiting writers shared one commit");
        let carried = carried.lock().unwrap();
        assert_eq!(carried[0], vec![0]);
        let mut second = carried[1].clone();
        second.sort();
        assert_eq!(second, (1..=8).collect::<Vec<_>>());
    }

    #[test]
    fn a_failed_commit_fails_every_part_it_carried_with_its_os_error() {
        let group = Arc::new(Group::<u32>::default());
        let (release, held) = std::sync::mpsc::channel::<()>();
        let held = Mutex::new(held);
        std::thread::scope(|s| {
            let first = s.spawn(|| {
                group.commit(0, |_| {
                    held.lock().unwrap().recv().unwrap();
                    Ok(())
                })
            });
            while !group.lock().running {
                std::thread::yield_now();
            }
            let others: Vec<_> = (1..=3)
                .map(|n| {
                    let group = &group;
                    s.spawn(move || {
                        group.commit(n, |_| {
                            Err(super::super::with_path(io::Error::from_raw_os_error(28), Path::new("f")))
                        })
                    })
                })
                .collect();
            while group.lock().waiting.len() < 3 {
                std::thread::yield_now();
            }
            release.send(()).unwrap();
            assert!(first.join().unwrap().is_ok(), "the first commit did not carry the others");
            for other in others {
                let e = other.join().unwrap().unwrap_err();
                assert_eq!(super::super::os_error(&e), Some(28), "ENOSPC, for each writer: {e}");
                assert!(e.to_string().starts_with("f: "), "it names the file: {e}");
            }
        });
    }
}

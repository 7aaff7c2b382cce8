//! `DIR/tokens`: registration tokens, whitespace-separated as the reference
//! reads them, each admitting exactly one node.
//!
//! Invariants: a token is removed from the file durably before the caller may
//! answer 201; every other token survives; consumption is exactly-once across
//! threads (one writer at a time in this process) and across processes (an
//! exclusive `flock` on `DIR/tokens.lock`, a separate file because `tokens`
//! itself is replaced by rename). Concurrent consumptions are group-committed:
//! whoever finds no batch in flight leads, and consumes every token queued
//! meanwhile in one read and one durable rewrite, so a mass boot against a
//! large file costs one rewrite per batch, not one per node.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::{Mutex, mpsc};

use super::atomic::{with_path, write_atomic};

pub const TOKENS_FILE: &str = "tokens";
pub const LOCK_FILE: &str = "tokens.lock";

type Reply = mpsc::Sender<Result<bool, String>>;

#[derive(Default)]
struct Queue {
    waiting: Vec<(String, Reply)>,
    leader_active: bool,
}

pub struct Tokens {
    path: PathBuf,
    lock_path: PathBuf,
    queue: Mutex<Queue>,
}

impl Tokens {
    pub fn new(state_dir: &std::path::Path) -> Self {
        Tokens {
            path: state_dir.join(TOKENS_FILE),
            lock_path: state_dir.join(LOCK_FILE),
            queue: Mutex::new(Queue::default()),
        }
    }

    /// Consumes `token`: true when it was in the file (and now is not).
    /// Blocking: call it off the async runtime.
    pub fn consume(&self, token: &str) -> io::Result<bool> {
        if token.is_empty() {
            return Ok(false);
        }
        let (reply, answer) = mpsc::channel();
        let lead = {
            let mut queue = self.queue.lock().unwrap_or_else(|e| e.into_inner());
            queue.waiting.push((token.to_string(), reply));
            !std::mem::replace(&mut queue.leader_active, true)
        };
        if lead {
            self.lead_batches();
        }
        answer.recv().map_err(|_| io::Error::other("token batch abandoned"))?.map_err(io::Error::other)
    }

    fn lead_batches(&self) {
        loop {
            let batch = {
                let mut queue = self.queue.lock().unwrap_or_else(|e| e.into_inner());
                if queue.waiting.is_empty() {
                    queue.leader_active = false;
                    return;
                }
                std::mem::take(&mut queue.waiting)
            };
            let wanted: Vec<&str> = batch.iter().map(|(t, _)| t.as_str()).collect();
            match self.consume_batch(&wanted) {
                Ok(found) => {
                    for ((_, reply), hit) in batch.iter().zip(found) {
                        let _ = reply.send(Ok(hit));
                    }
                }
                Err(e) => {
                    for (_, reply) in &batch {
                        let _ = reply.send(Err(e.to_string()));
                    }
                }
            }
        }
    }

    /// One locked read-modify-write of the file for a whole batch.
    fn consume_batch(&self, wanted: &[&str]) -> io::Result<Vec<bool>> {
        let _lock = self.lock()?;
        let text = match fs::read_to_string(&self.path) {
            Ok(text) => text,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(vec![false; wanted.len()]),
            Err(e) => return Err(with_path(e, &self.path)),
        };
        let mut remaining: Vec<Option<&str>> = text.split_whitespace().map(Some).collect();
        let mut positions: HashMap<&str, Vec<usize>> = HashMap::new();
        for (i, t) in remaining.iter().enumerate().rev() {
            positions.entry(t.unwrap_or_default()).or_default().push(i);
        }
        let found: Vec<bool> = wanted
            .iter()
            .map(|t| match positions.get_mut(t).and_then(Vec::pop) {
                Some(i) => {
                    remaining[i] = None;
                    true
                }
                None => false,
            })
            .collect();
        if found.iter().any(|&hit| hit) {
            let mut out = String::with_capacity(text.len());
            for t in remaining.into_iter().flatten() {
                out.push_str(t);
                out.push('\n');
            }
            write_atomic(&self.path, out.as_bytes(), 0o600)?;
        }
        Ok(found)
    }

    /// The cross-process lock, held until the returned file is dropped.
    pub fn lock(&self) -> io::Result<File> {
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(&self.lock_path)
            .map_err(|e| with_path(e, &self.lock_path))?;
        file.lock().map_err(|e| with_path(e, &self.lock_path))?;
        Ok(file)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn consumes_each_token_once_and_keeps_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(TOKENS_FILE), "a b\n c\na\n").unwrap();
        let tokens = Tokens::new(dir.path());
        assert!(tokens.consume("a").unwrap());
        assert!(!tokens.consume("zz").unwrap());
        assert!(!tokens.consume("").unwrap());
        assert_eq!(fs::read_to_string(dir.path().join(TOKENS_FILE)).unwrap(), "b\nc\na\n");
        assert!(tokens.consume("a").unwrap());
        assert!(!tokens.consume("a").unwrap());
    }

    #[test]
    fn absent_file_admits_nobody() {
        let dir = tempfile::tempdir().unwrap();
        assert!(!Tokens::new(dir.path()).consume("a").unwrap());
    }

    #[test]
    fn concurrent_consumers_share_batches_exactly_once() {
        let dir = tempfile::tempdir().unwrap();
        let all: Vec<String> = (0..200).map(|i| format!("t{i}")).collect();
        fs::write(dir.path().join(TOKENS_FILE), all.join("\n")).unwrap();
        let tokens = Arc::new(Tokens::new(dir.path()));
        let handles: Vec<_> = (0..400)
            .map(|i| {
                let tokens = tokens.clone();
                std::thread::spawn(move || tokens.consume(&format!("t{}", i % 200)).unwrap())
            })
            .collect();
        let admitted = handles.into_iter().map(|h| h.join().unwrap()).filter(|&b| b).count();
        assert_eq!(admitted, 200);
        assert_eq!(fs::read_to_string(dir.path().join(TOKENS_FILE)).unwrap(), "");
    }
}

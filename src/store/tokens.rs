//! `DIR/tokens`: registration tokens, whitespace-separated as the reference
//! reads it, and `DIR/tokens.meta.json`: the expiry and use count of the
//! tokens `tokens add` made, keyed by each token's SHA-256 (never the token).
//!
//! Invariants: a token admits exactly one node per use, across threads (one
//! writer at a time in this process) and across processes (an exclusive
//! `flock` on `DIR/tokens.lock`, a separate file because `tokens` itself is
//! replaced by rename); a use is recorded durably before the caller may
//! answer; every other token survives. A token with no metadata, as written
//! by hand or by the reference, is a one-time token with no expiry. An
//! expired token admits nobody and is removed from both files.
//!
//! Concurrent consumptions are group-committed: whoever finds no batch in
//! flight leads, and consumes every token queued meanwhile in one read and
//! one durable rewrite, so a mass boot against a large file costs one
//! rewrite per batch, not one per node.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, mpsc};

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::atomic::{replace_via_spare, with_path, write_atomic};
use super::audit::{Audit, token_fingerprint};
use crate::pki::sha256_hex;

pub const TOKENS_FILE: &str = "tokens";
pub const META_FILE: &str = "tokens.meta.json";
pub const LOCK_FILE: &str = "tokens.lock";
/// Where the next version of `tokens` is written before it is swapped in.
pub const SPARE_FILE: &str = ".tokens.spare";

/// What `tokens add` knows about a token beyond the token itself.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenMeta {
    /// Unix seconds; absent: never expires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<i64>,
    /// Absent: one use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uses_left: Option<u32>,
    #[serde(default)]
    pub added_at: String,
    #[serde(default)]
    pub added_by: String,
}

impl TokenMeta {
    fn expired(&self, now: i64) -> bool {
        self.expires_at.is_some_and(|t| t <= now)
    }
}

/// A token as `tokens list` shows it: redacted.
#[derive(Debug, Clone, Serialize)]
pub struct TokenInfo {
    pub shown: String,
    pub sha256_prefix: String,
    pub expires_at: Option<i64>,
    pub uses_left: u32,
    pub added_by: String,
}

type Reply = mpsc::Sender<Result<bool, String>>;

#[derive(Default)]
struct Queue {
    waiting: Vec<(String, Reply)>,
    leader_active: bool,
}

pub struct Tokens {
    path: PathBuf,
    meta_path: PathBuf,
    lock_path: PathBuf,
    spare_path: PathBuf,
    queue: Mutex<Queue>,
}

/// Both files as read under the lock.
struct Book {
    tokens: Vec<String>,
    meta: BTreeMap<String, TokenMeta>,
}

impl Tokens {
    pub fn new(state_dir: &Path) -> Self {
        Tokens {
            path: state_dir.join(TOKENS_FILE),
            meta_path: state_dir.join(META_FILE),
            lock_path: state_dir.join(LOCK_FILE),
            spare_path: state_dir.join(SPARE_FILE),
            queue: Mutex::new(Queue::default()),
        }
    }

    /// Consumes one use of `token`: true when it admits. Blocking: call it
    /// off the async runtime.
    pub fn consume(&self, token: &str, audit: &Audit) -> io::Result<bool> {
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
            self.lead_batches(audit);
        }
        answer.recv().map_err(|_| io::Error::other("token batch abandoned"))?.map_err(io::Error::other)
    }

    fn lead_batches(&self, audit: &Audit) {
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
            match self.consume_batch(&wanted, audit) {
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

    /// One locked read-modify-write of both files for a whole batch. The
    /// tokens stay slices of the file's text: a mass boot against a file of
    /// 100,000 tokens must not allocate 100,000 strings per batch.
    fn consume_batch(&self, wanted: &[&str], audit: &Audit) -> io::Result<Vec<bool>> {
        let _lock = self.lock()?;
        let text = match fs::read_to_string(&self.path) {
            Ok(text) => text,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(vec![false; wanted.len()]),
            Err(e) => return Err(with_path(e, &self.path)),
        };
        let mut meta = self.read_meta()?;
        let now = now_unix();
        let expired: HashSet<String> =
            meta.iter().filter(|(_, m)| m.expired(now)).map(|(h, _)| h.clone()).collect();
        let mut asked: HashMap<&str, VecDeque<usize>> = HashMap::new();
        for (i, token) in wanted.iter().enumerate() {
            asked.entry(token).or_default().push_back(i);
        }
        let mut found = vec![false; wanted.len()];
        // The tokens to remove, as (start, end) byte ranges of the text, in order.
        let mut dropped: Vec<(usize, usize)> = Vec::new();
        let mut expired_fingerprints = Vec::new();
        let mut meta_changed = !expired.is_empty();
        let span = |t: &str| {
            let start = t.as_ptr() as usize - text.as_ptr() as usize;
            (start, start + t.len())
        };
        for token in text.split_whitespace() {
            if !expired.is_empty() && expired.contains(&sha256_hex(token.as_bytes())) {
                dropped.push(span(token));
                expired_fingerprints.push(token_fingerprint(token));
                continue;
            }
            let Some(requests) = asked.get_mut(token).filter(|r| !r.is_empty()) else { continue };
            let hash = sha256_hex(token.as_bytes());
            // Each request takes one use; the last use removes the token.
            while let Some(i) = requests.pop_front() {
                found[i] = true;
                match meta.get_mut(&hash) {
                    Some(m) if m.uses_left.is_some_and(|n| n > 1) => {
                        m.uses_left = m.uses_left.map(|n| n - 1);
                        meta_changed = true;
                    }
                    entry => {
                        if entry.is_some() {
                            meta.remove(&hash);
                            meta_changed = true;
                        }
                        dropped.push(span(token));
                        break;
                    }
                }
            }
        }
        meta.retain(|h, _| !expired.contains(h));
        if !dropped.is_empty() {
            self.write_text(&without(&text, &dropped))?;
        }
        if meta_changed {
            self.write_meta(&meta)?;
        }
        for fingerprint in expired_fingerprints {
            audit.record("token_expired", json!({"token_sha256_prefix": fingerprint}))?;
        }
        Ok(found)
    }

    /// Drops expired tokens from `book`; returns their fingerprints.
    fn take_expired(&self, book: &mut Book, now: i64) -> Vec<String> {
        let expired: HashSet<String> =
            book.meta.iter().filter(|(_, m)| m.expired(now)).map(|(h, _)| h.clone()).collect();
        if expired.is_empty() {
            return vec![];
        }
        let mut fingerprints = Vec::new();
        book.tokens.retain(|t| {
            let gone = expired.contains(&sha256_hex(t.as_bytes()));
            if gone {
                fingerprints.push(token_fingerprint(t));
            }
            !gone
        });
        book.meta.retain(|h, _| !expired.contains(h));
        fingerprints
    }

    /// Removes expired tokens from both files (the server's periodic sweep, `tokens list`).
    pub fn sweep_expired(&self, audit: &Audit) -> io::Result<usize> {
        let _lock = self.lock()?;
        let Some(mut book) = self.read()? else { return Ok(0) };
        let expired = self.take_expired(&mut book, now_unix());
        if !expired.is_empty() {
            self.write_tokens(&book.tokens.iter().map(String::as_str).collect::<Vec<_>>())?;
            self.write_meta(&book.meta)?;
            for fingerprint in &expired {
                audit.record("token_expired", json!({"token_sha256_prefix": fingerprint}))?;
            }
        }
        Ok(expired.len())
    }

    /// Appends new tokens with their metadata (absent metadata: one use, no expiry).
    pub fn add(&self, tokens: &[String], meta: &TokenMeta) -> io::Result<()> {
        let _lock = self.lock()?;
        let mut book = self.read()?.unwrap_or(Book { tokens: vec![], meta: BTreeMap::new() });
        book.tokens.extend(tokens.iter().cloned());
        let plain = TokenMeta { added_at: String::new(), added_by: String::new(), ..meta.clone() };
        if plain != TokenMeta::default() || !meta.added_by.is_empty() {
            for t in tokens {
                book.meta.insert(sha256_hex(t.as_bytes()), meta.clone());
            }
            self.write_meta(&book.meta)?;
        }
        self.write_tokens(&book.tokens.iter().map(String::as_str).collect::<Vec<_>>())
    }

    /// The tokens, redacted, with expiry and uses left.
    pub fn list(&self) -> io::Result<Vec<TokenInfo>> {
        let Some(book) = self.read()? else { return Ok(vec![]) };
        Ok(book
            .tokens
            .iter()
            .map(|t| {
                let meta = book.meta.get(&sha256_hex(t.as_bytes())).cloned().unwrap_or_default();
                TokenInfo {
                    shown: redact(t),
                    sha256_prefix: token_fingerprint(t),
                    expires_at: meta.expires_at,
                    uses_left: meta.uses_left.unwrap_or(1),
                    added_by: meta.added_by,
                }
            })
            .collect())
    }

    /// Removes the token equal to `key`, or the one token starting with it.
    /// Returns the removed token's fingerprint.
    pub fn revoke(&self, key: &str) -> io::Result<String> {
        let _lock = self.lock()?;
        let Some(mut book) = self.read()? else {
            return Err(io::Error::new(io::ErrorKind::NotFound, "there is no tokens file"));
        };
        let exact: Vec<usize> =
            book.tokens.iter().enumerate().filter(|(_, t)| *t == key).map(|(i, _)| i).collect();
        let matching = if exact.is_empty() {
            book.tokens.iter().enumerate().filter(|(_, t)| t.starts_with(key)).map(|(i, _)| i).collect()
        } else {
            exact
        };
        let token = match matching.as_slice() {
            [] => return Err(io::Error::new(io::ErrorKind::NotFound, "no token matches")),
            [i] => book.tokens[*i].clone(),
            _ if key.len() < 4 => {
                return Err(io::Error::new(io::ErrorKind::InvalidInput, "the prefix matches several tokens"));
            }
            _ if matching.iter().all(|&i| book.tokens[i] == book.tokens[matching[0]]) => {
                book.tokens[matching[0]].clone()
            }
            _ => {
                return Err(io::Error::new(io::ErrorKind::InvalidInput, "the prefix matches several tokens"));
            }
        };
        book.tokens.retain(|t| *t != token);
        book.meta.remove(&sha256_hex(token.as_bytes()));
        self.write_tokens(&book.tokens.iter().map(String::as_str).collect::<Vec<_>>())?;
        self.write_meta(&book.meta)?;
        Ok(token_fingerprint(&token))
    }

    fn read(&self) -> io::Result<Option<Book>> {
        let text = match fs::read_to_string(&self.path) {
            Ok(text) => text,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(with_path(e, &self.path)),
        };
        let meta = self.read_meta()?;
        Ok(Some(Book { tokens: text.split_whitespace().map(str::to_string).collect(), meta }))
    }

    fn read_meta(&self) -> io::Result<BTreeMap<String, TokenMeta>> {
        match fs::read(&self.meta_path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map_err(|e| with_path(io::Error::new(io::ErrorKind::InvalidData, e), &self.meta_path)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(BTreeMap::new()),
            Err(e) => Err(with_path(e, &self.meta_path)),
        }
    }

    fn write_tokens(&self, tokens: &[&str]) -> io::Result<()> {
        let mut out = String::with_capacity(tokens.iter().map(|t| t.len() + 1).sum());
        for t in tokens {
            out.push_str(t);
            out.push('\n');
        }
        self.write_text(&out)
    }

    fn write_text(&self, text: &str) -> io::Result<()> {
        replace_via_spare(&self.path, &self.spare_path, text.as_bytes(), 0o600)
    }

    fn write_meta(&self, meta: &BTreeMap<String, TokenMeta>) -> io::Result<()> {
        if meta.is_empty() && !self.meta_path.exists() {
            return Ok(());
        }
        write_atomic(&self.meta_path, &serde_json::to_vec_pretty(meta).map_err(io::Error::other)?, 0o600)
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

/// `text` without the byte ranges `dropped` (in order) and the whitespace
/// that follows each: every other byte of the file stays as it was.
fn without(text: &str, dropped: &[(usize, usize)]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut from = 0;
    for &(start, end) in dropped {
        out.push_str(&text[from..start]);
        let rest = &text[end..];
        from = end + (rest.len() - rest.trim_start().len());
    }
    out.push_str(&text[from..]);
    out
}

/// The first 6 characters, then an ellipsis: enough to tell tokens apart.
pub fn redact(token: &str) -> String {
    let shown: String = token.chars().take(6).collect();
    format!("{shown}…")
}

pub fn now_unix() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// A new token: 128 bits from the OS CSPRNG, as 32 lowercase hex characters.
pub fn generate() -> String {
    crate::pki::hex(&rand::random::<[u8; 16]>())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn audit(dir: &Path) -> Audit {
        Audit::new(dir)
    }

    #[test]
    fn consumes_each_token_once_and_keeps_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(TOKENS_FILE), "a b\n c\na\n").unwrap();
        let tokens = Tokens::new(dir.path());
        let audit = audit(dir.path());
        assert!(tokens.consume("a", &audit).unwrap());
        assert!(!tokens.consume("zz", &audit).unwrap());
        assert!(!tokens.consume("", &audit).unwrap());
        // Every other byte stays where it was.
        assert_eq!(fs::read_to_string(dir.path().join(TOKENS_FILE)).unwrap(), "b\n c\na\n");
        assert!(tokens.consume("a", &audit).unwrap());
        assert!(!tokens.consume("a", &audit).unwrap());
        assert!(!dir.path().join(META_FILE).exists(), "plain tokens need no metadata");
    }

    #[test]
    fn absent_file_admits_nobody() {
        let dir = tempfile::tempdir().unwrap();
        assert!(!Tokens::new(dir.path()).consume("a", &audit(dir.path())).unwrap());
    }

    #[test]
    fn concurrent_consumers_share_batches_exactly_once() {
        let dir = tempfile::tempdir().unwrap();
        let all: Vec<String> = (0..200).map(|i| format!("t{i}")).collect();
        fs::write(dir.path().join(TOKENS_FILE), all.join("\n")).unwrap();
        let tokens = Arc::new(Tokens::new(dir.path()));
        let audit = Arc::new(audit(dir.path()));
        let handles: Vec<_> = (0..400)
            .map(|i| {
                let (tokens, audit) = (tokens.clone(), audit.clone());
                std::thread::spawn(move || tokens.consume(&format!("t{}", i % 200), &audit).unwrap())
            })
            .collect();
        let admitted = handles.into_iter().map(|h| h.join().unwrap()).filter(|&b| b).count();
        assert_eq!(admitted, 200);
        assert_eq!(fs::read_to_string(dir.path().join(TOKENS_FILE)).unwrap(), "");
    }

    #[test]
    fn uses_and_expiry() {
        let dir = tempfile::tempdir().unwrap();
        let tokens = Tokens::new(dir.path());
        let audit = audit(dir.path());
        let thrice = TokenMeta { uses_left: Some(3), ..Default::default() };
        tokens.add(&["multi".into()], &thrice).unwrap();
        let past = TokenMeta { expires_at: Some(now_unix() - 1), ..Default::default() };
        tokens.add(&["old".into()], &past).unwrap();
        tokens.add(&["plain".into()], &TokenMeta::default()).unwrap();
        assert_eq!(tokens.list().unwrap().iter().find(|t| t.shown == "multi…").unwrap().uses_left, 3);
        assert!(!tokens.consume("old", &audit).unwrap(), "expired admits nobody");
        for _ in 0..3 {
            assert!(tokens.consume("multi", &audit).unwrap());
        }
        assert!(!tokens.consume("multi", &audit).unwrap());
        assert_eq!(fs::read_to_string(dir.path().join(TOKENS_FILE)).unwrap(), "plain\n");
        let trail = fs::read_to_string(audit.path()).unwrap();
        assert!(trail.contains("token_expired") && !trail.contains("\"old\""));
    }

    #[test]
    fn revoke_by_token_or_unique_prefix() {
        let dir = tempfile::tempdir().unwrap();
        let tokens = Tokens::new(dir.path());
        tokens.add(&["abcd1111".into(), "abcd2222".into(), "ffff".into()], &TokenMeta::default()).unwrap();
        assert!(tokens.revoke("abcd").is_err(), "ambiguous");
        assert!(tokens.revoke("zz").is_err());
        tokens.revoke("abcd2").unwrap();
        tokens.revoke("ffff").unwrap();
        assert_eq!(fs::read_to_string(dir.path().join(TOKENS_FILE)).unwrap(), "abcd1111\n");
    }
}

//! Following the audit trail as it grows: the one follower `audit
//! --follow`, `nodes watch`, the admin API's event stream and
//! `--on-admitted` share, and the one rule for repeats.
//!
//! Invariants: memory stays flat however long it follows (offsets per
//! file, and the identities of the last [`REMEMBERED`] events); an event
//! is given once: a repeat — the same event but for its time, as a crash
//! between an event and the marker that suppresses it leaves ([`identity`])
//! — is dropped; events come in time order within a look; a file that
//! cannot be read is an error of the look, and the next look starts where
//! this one stopped.

use std::collections::{HashMap, HashSet, VecDeque};
use std::io;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use crate::Store;

/// How often a follower looks at the trail again.
pub const LOOK_EVERY: Duration = Duration::from_secs(1);
/// How many recent events' identities are kept to drop repeats.
pub const REMEMBERED: usize = 10_000;

/// What an event is, for telling a repeat: the event without its time.
pub fn identity(event: &Value) -> String {
    let mut key = event.clone();
    if let Some(fields) = key.as_object_mut() {
        fields.remove("at");
    }
    key.to_string()
}

/// A reader of the trail that gives each event once, as it is appended.
pub struct Follower {
    read_up_to: HashMap<PathBuf, (u64, u64)>,
    /// Events before this time (Unix milliseconds) are skipped.
    from: i128,
    seen: HashSet<String>,
    order: VecDeque<String>,
}

impl Follower {
    /// From `from` (Unix milliseconds) on; `None`: every event the trail holds.
    pub fn from(from: Option<i128>) -> Self {
        Follower {
            read_up_to: HashMap::new(),
            from: from.unwrap_or(i128::MIN),
            seen: HashSet::new(),
            order: VecDeque::new(),
        }
    }

    /// From `ago` before now on; `None`: only what happens from now on.
    pub fn since(ago: Option<Duration>) -> Self {
        let now = janus_core::clock::now_unix();
        let from = ago.map_or(now, |d| now - d.as_secs() as i64);
        Self::from(Some(i128::from(from) * 1000))
    }

    /// Only what is appended after the trail's end now (whatever its events' times).
    pub fn at_end(store: &Store) -> io::Result<Self> {
        Ok(Follower { read_up_to: store.audit.end_offsets()?, ..Self::from(None) })
    }

    /// The events appended since the last look, each once, in time order.
    pub fn next(&mut self, store: &Store) -> io::Result<Vec<Value>> {
        let mut fresh = Vec::new();
        for event in store.audit.follow(&mut self.read_up_to)? {
            let at = event["at"].as_str().and_then(janus_core::clock::rfc3339_millis).unwrap_or(0);
            if at < self.from || !self.first_time(&event) {
                continue;
            }
            fresh.push(event);
        }
        Ok(fresh)
    }

    /// Whether `event` is not a repeat of one of the last [`REMEMBERED`].
    fn first_time(&mut self, event: &Value) -> bool {
        let key = identity(event);
        if !self.seen.insert(key.clone()) {
            return false;
        }
        self.order.push_back(key);
        if self.order.len() > REMEMBERED
            && let Some(oldest) = self.order.pop_front()
        {
            self.seen.remove(&oldest);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::Audit;
    use crate::event::AuditEvent;

    #[test]
    fn a_repeat_but_for_its_time_is_given_once() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let audit = Audit::new(dir.path());
        let mut follower = Follower::from(None);
        let revoked =
            || AuditEvent::TokenRevoked { token_sha256_prefix: "abcdef012345".into(), user: "a".into() };
        audit.record(revoked()).unwrap();
        assert_eq!(follower.next(&store).unwrap().len(), 1);
        // A crash repeated it (a later time): not given again.
        audit.record(revoked()).unwrap();
        assert!(follower.next(&store).unwrap().is_empty());
        let other = AuditEvent::TokenRevoked { token_sha256_prefix: "fedcba987654".into(), user: "a".into() };
        audit.record(other).unwrap();
        assert_eq!(follower.next(&store).unwrap().len(), 1);
        // From the end: nothing before it.
        let mut late = Follower::at_end(&store).unwrap();
        assert!(late.next(&store).unwrap().is_empty());
        drop(store);
    }
}

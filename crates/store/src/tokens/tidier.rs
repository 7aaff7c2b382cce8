//! Blanking spent tokens in `DIR/tokens`, batched: while the store's
//! tidier runs (`crate::tidier`, the server), a spent token is queued and
//! that thread blanks each batch with one `fsync`; otherwise (admin
//! commands) it is blanked at once. Blanking is cosmetic — the ledger
//! decides whether a use is spent — so its failures are logged, not
//! returned.

use std::time::Duration;

use super::{TokenMeta, Tokens};
use janus_core::pki::sha256_hex;

impl Tokens {
    /// Called once every use of `token` is spent: its bytes in `tokens` are
    /// blanked, by the tidier thread when one runs (batched, one `fsync` per
    /// batch), else now. Tidying is cosmetic (the ledger decides), so its
    /// failure is logged, not returned.
    pub fn spent(&self, token: &str) {
        let mut queue = self.tidy.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(queue) = queue.as_mut() {
            queue.push(token.to_string());
            self.tidy_wake.notify_one();
            return;
        }
        drop(queue);
        if let Err(e) = self.blank_spent(&[token.to_string()]) {
            tracing::warn!(cause = %e, "could not blank a spent token in the tokens file");
        }
    }

    /// Asks the next sweep to look at spent tokens again: one was spent
    /// while another admission of it was still under way.
    pub fn sweep_later(&self) {
        self.listed().unswept = true;
    }

    /// From now on [`Tokens::spent`] queues for the tidier instead of blanking.
    pub(crate) fn start_batching(&self) {
        let mut queue = self.tidy.lock().unwrap_or_else(|e| e.into_inner());
        if queue.is_none() {
            *queue = Some(Vec::new());
        }
    }

    /// One turn of the tidier thread: waits up to `wait` for spent tokens,
    /// then blanks them as one batch (one `fsync`).
    pub(crate) fn tidy_turn(&self, wait: Duration) {
        let batch = {
            let mut queue = self.tidy.lock().unwrap_or_else(|e| e.into_inner());
            if queue.as_ref().is_some_and(Vec::is_empty) {
                queue = self.tidy_wake.wait_timeout(queue, wait).unwrap_or_else(|e| e.into_inner()).0;
            }
            queue.as_mut().map(std::mem::take).unwrap_or_default()
        };
        if batch.is_empty() {
            return;
        }
        if let Err(e) = self.blank_spent(&batch) {
            tracing::warn!(cause = %e, "could not blank spent tokens in the tokens file");
        }
    }

    /// Blanks what the tidier has queued and not done yet, and turns
    /// batching off: at shutdown, so a stopped server leaves no spent token
    /// listed.
    pub(crate) fn flush_tidy(&self) {
        let batch = self.tidy.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(batch) = batch.filter(|b| !b.is_empty())
            && let Err(e) = self.blank_spent(&batch)
        {
            tracing::warn!(cause = %e, "could not blank spent tokens in the tokens file");
        }
    }

    /// Blanks tokens spent for good, and drops their metadata with them:
    /// their last use is gone, and the ledger says so if one comes back.
    /// Each is looked at again under the lock against the metadata as it
    /// is now: the caller decided with what it could see then (a token it
    /// took for a one-use token while the file was broken, say), and a
    /// token with a use left keeps its bytes and its metadata.
    pub(super) fn blank_spent(&self, tokens: &[String]) -> crate::StoreResult<()> {
        let locked = self.lock()?;
        if self.meta_unreadable().is_some() {
            self.listed().unswept = true;
            return Ok(());
        }
        let (mut meta, seen) = self.read_meta_for_edit()?;
        let mut done = Vec::new();
        for token in tokens {
            let uses = meta.get(&sha256_hex(token.as_bytes())).map_or(1, TokenMeta::total_uses);
            if self.ledger.spent_for_good(&self.ledger.mac(token)?, uses)? {
                done.push(token.clone());
            } else {
                // Not spent yet after all: the next sweep looks again.
                self.listed().unswept = true;
            }
        }
        self.blank_locked(&done)?;
        let before = meta.len();
        for token in &done {
            meta.remove(&sha256_hex(token.as_bytes()));
        }
        if meta.len() != before {
            self.write_meta(&locked, &meta, seen)?;
        }
        Ok(())
    }
}

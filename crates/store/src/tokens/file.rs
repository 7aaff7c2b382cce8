//! `DIR/tokens` itself: the admin's file, parsed as the reference reads it
//! (whitespace-separated, a BOM skipped, `#` lines comments), read through a
//! cache keyed by the file's identity, and spent tokens blanked in place.
//!
//! Invariants: the file is never replaced, truncated or emptied; a spent
//! token's bytes become spaces only where they still hold that token (under
//! the lock), so bytes an admin appends meanwhile are kept; our own
//! blanking never makes this process parse the file again.

use std::fs::{File, OpenOptions};
use std::io::{self, Seek};
use std::os::unix::fs::FileExt;
use std::sync::MutexGuard;

use super::Tokens;
use super::words::*;
use janus_core::durable::with_path;
use janus_core::pki::sha256_hex;

impl Tokens {
    /// Re-reads `tokens` when its identity changed.
    pub(super) fn refresh(&self) -> io::Result<()> {
        let file = match janus_core::durable::retry_stale(|| File::open(&self.path)) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                *self.listed() = Listed::default();
                return Ok(());
            }
            Err(e) => return Err(with_path(e, &self.path)),
        };
        let mut listed = self.listed();
        let stamp = Stamp::of(&file.metadata().map_err(|e| with_path(e, &self.path))?);
        if listed.stamp != Some(stamp) {
            *listed = self.reread(&file)?;
        }
        Ok(())
    }

    pub(super) fn reread(&self, mut file: &File) -> io::Result<Listed> {
        let stamp = Stamp::of(&file.metadata()?);
        file.seek(io::SeekFrom::Start(0))?;
        let bytes = janus_core::durable::read_open_at_most(file, MAX_FILE_BYTES)
            .map_err(|e| with_path(e, &self.path))?;
        let mut listed = Listed { stamp: Some(stamp), unswept: true, ..Listed::default() };
        for (word, offset) in parse(&bytes) {
            let sha256 = sha256_hex(word.as_bytes());
            let offsets = listed.tokens.entry(sha256.clone()).or_default();
            if offsets.is_empty() {
                listed.order.push((word.to_string(), sha256));
            }
            offsets.push(offset);
        }
        Ok(listed)
    }

    pub(super) fn listed(&self) -> MutexGuard<'_, Listed> {
        self.listed.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The listed tokens, each once, in file order.
    pub(super) fn listed_in_order(&self) -> Vec<String> {
        let listed = self.listed();
        listed
            .order
            .iter()
            .filter(|(_, sha256)| listed.tokens.contains_key(sha256))
            .map(|(t, _)| t.clone())
            .collect()
    }

    /// Overwrites every copy of each of `tokens` in the file with spaces, in
    /// place, where the bytes still hold that token; the caller holds both
    /// locks. The cached listing is locked from before the writes until the
    /// file's new identity is recorded, so a reader never takes our own
    /// write for someone else's and parses the whole file again. Nothing is
    /// blanked while the metadata cannot be read: which tokens are spent
    /// for good cannot be told (a sweep once it reads again does it).
    pub(super) fn blank_locked(&self, tokens: &[String]) -> io::Result<()> {
        if self.meta_unreadable().is_some() {
            self.listed().unswept = true;
            return Ok(());
        }
        // Through a symlink on purpose: the admin's list may live elsewhere.
        let file = match OpenOptions::new().read(true).write(true).open(&self.path) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            // A list the admin keeps read-only (a Kubernetes Secret): the
            // ledger and the metadata decide; blanking is cosmetic.
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::ReadOnlyFilesystem | io::ErrorKind::PermissionDenied
                ) =>
            {
                tracing::debug!(file = %self.path.display(), cause = %e, "the tokens file is read-only: spent tokens stay listed");
                return Ok(());
            }
            Err(e) => return Err(with_path(e, &self.path)),
        };
        let mut listed = self.listed();
        let before = Stamp::of(&file.metadata()?);
        if listed.stamp != Some(before) {
            *listed = self.reread(&file)?;
        }
        let mut changed = false;
        for token in tokens {
            let Some(offsets) = listed.tokens.remove(&sha256_hex(token.as_bytes())) else { continue };
            for offset in offsets {
                let mut there = vec![0u8; token.len()];
                if file.read_exact_at(&mut there, offset).is_ok() && there == token.as_bytes() {
                    file.write_all_at(&vec![b' '; token.len()], offset)
                        .map_err(|e| with_path(e, &self.path))?;
                    changed = true;
                }
            }
        }
        let after = Stamp::of(&file.metadata()?);
        // Our own write changed the times; anyone else's (an append changes
        // the size) makes the next reader parse the file again.
        listed.stamp = (after.size == before.size).then_some(after);
        drop(listed);
        if changed {
            file.sync_data().map_err(|e| with_path(e, &self.path))?;
        }
        Ok(())
    }
}

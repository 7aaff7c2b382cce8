//! `DIR/tokens` itself: the admin's file, parsed as the reference reads it
//! (whitespace-separated, a BOM skipped, `#` lines comments), read through a
//! cache keyed by the file's identity, and spent tokens blanked in place.
//!
//! Invariants: the file is never replaced, truncated or emptied; a spent
//! token's bytes become spaces only where they still hold that token (under
//! the lock), so bytes an admin appends meanwhile are kept; our own
//! blanking never makes this process parse the file again.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Seek};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::Path;
use std::sync::MutexGuard;

use super::Tokens;
use janus_core::durable::with_path;

/// The largest `tokens` file read: about two million tokens. A larger one
/// is unreadable (its tokens refused, `/healthz` degraded); `tokens add`
/// refuses to make one.
pub const MAX_FILE_BYTES: u64 = 64 << 20;

/// A file's identity: any write by anyone changes one of these.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Stamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    pub(super) fn of(meta: &fs::Metadata) -> Stamp {
        Stamp {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        }
    }
}

/// `tokens` as last read: each usable token with the offsets of its copies.
#[derive(Default)]
pub(super) struct Listed {
    pub(super) stamp: Option<Stamp>,
    pub(super) tokens: HashMap<String, Vec<u64>>,
    /// Each token once, in file order, for listings: blanked ones stay here
    /// until the next read (removing one would cost a scan of 100,000), so
    /// readers keep only those still in `tokens`.
    pub(super) order: Vec<String>,
    /// Read since the last sweep looked for spent tokens: someone else
    /// wrote the file (or it is the first read), so a spent token may be
    /// back. Our own blanking does not set it.
    pub(super) unswept: bool,
}

/// The usable words of a tokens file with their byte offsets: a leading BOM
/// skipped, comment lines (first non-blank `#`) skipped, words that are not
/// UTF-8 left out.
pub fn parse(bytes: &[u8]) -> Vec<(&str, u64)> {
    let start = if bytes.starts_with(b"\xEF\xBB\xBF") { 3 } else { 0 };
    let mut words = Vec::new();
    let mut line_start = start;
    for line in bytes[start..].split(|&b| b == b'\n') {
        let first = line.iter().find(|&&b| !is_separator_byte(b));
        if first != Some(&b'#') {
            let mut at = 0;
            for word in line.split(|&b| is_separator_byte(b)) {
                if let (false, Ok(text)) = (word.is_empty(), std::str::from_utf8(word)) {
                    // Non-ASCII white space splits too (U+00A0, U+2028, …).
                    let base = line_start + at;
                    let mut from = 0;
                    for (i, c) in text.char_indices() {
                        if is_separator(c) {
                            if i > from {
                                words.push((&text[from..i], (base + from) as u64));
                            }
                            from = i + c.len_utf8();
                        }
                    }
                    if from < text.len() {
                        words.push((&text[from..], (base + from) as u64));
                    }
                }
                at += word.len() + 1;
            }
        }
        line_start += line.len() + 1;
    }
    words
}

/// What separates tokens: what the reference's `str.split()` takes for
/// white space (Unicode's, and the ASCII separators U+001C–U+001F).
pub fn is_separator(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// [`is_separator`] for the ASCII bytes (vertical tab included, which
/// `u8::is_ascii_whitespace` leaves out).
pub(super) fn is_separator_byte(b: u8) -> bool {
    b.is_ascii() && is_separator(b as char)
}

pub(super) fn ends_with_newline(path: &Path) -> io::Result<bool> {
    let file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(true),
        Err(e) => return Err(with_path(e, path)),
    };
    let size = file.metadata()?.len();
    if size == 0 {
        return Ok(true);
    }
    let mut last = [0u8];
    file.read_exact_at(&mut last, size - 1)?;
    Ok(last[0] == b'\n')
}

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
            let offsets = listed.tokens.entry(word.to_string()).or_default();
            if offsets.is_empty() {
                listed.order.push(word.to_string());
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
        listed.order.iter().filter(|t| listed.tokens.contains_key(*t)).cloned().collect()
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
            let Some(offsets) = listed.tokens.remove(token) else { continue };
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

//! The tokens file's format and what is kept of it between reads: its
//! words as the reference reads them (whitespace-separated, a BOM skipped,
//! `#` lines comments), a file's identity ([`Stamp`]) and the cached
//! listing ([`Listed`]).
//!
//! Invariant: a word that is not UTF-8 is no token; a file over
//! [`MAX_FILE_BYTES`] is not read.

use std::collections::HashMap;
use std::fs::{self, File};
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::Path;

use janus_core::durable::with_path;

/// The largest `tokens` file read: about two million tokens. A larger one
/// is unreadable (its tokens refused, `/healthz` degraded); `tokens add`
/// refuses to make one.
pub(super) const MAX_FILE_BYTES: u64 = 64 << 20;

/// A file's identity: any write by anyone changes one of these.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Stamp {
    dev: u64,
    ino: u64,
    pub(super) size: u64,
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

/// `tokens` as last read: each usable token, by its SHA-256 (hex, the key
/// `tokens.meta.json` names it by), with the offsets of its copies. A
/// presented token is looked up by the hash it carries
/// (`crate::Presented`), never by its text.
#[derive(Default)]
pub(super) struct Listed {
    pub(super) stamp: Option<Stamp>,
    pub(super) tokens: HashMap<String, Vec<u64>>,
    /// Each token once, in file order, with its SHA-256, for listings and
    /// blanking: blanked ones stay here until the next read (removing one
    /// would cost a scan of 100,000), so readers keep only those still in
    /// `tokens`.
    pub(super) order: Vec<(String, String)>,
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

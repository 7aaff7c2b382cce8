//! `DIR/state-format`: which layout the state directory holds, as one
//! integer and a newline, so that a binary never writes under a layout it
//! does not know.
//!
//! The formats:
//! - **1**, no file: the reference's layout (`tokens`, `nodes/<id>.json`,
//!   `approved/<id>`), and ours before the marker existed. A token's use was
//!   decided by the `tokens` file alone.
//! - **2**: a token's use is decided by the ledger (`token-uses/`, whose
//!   markers link claim files `nodes/.claim-<id>.json`, and are indexed by
//!   the CA that spent them); every writer must know it, or a token admits
//!   twice. Spent tokens are blanked from `tokens` after the fact.
//!
//! Invariants: the marker is written only after the layout is made, with
//! [`janus_core::durable::write_atomic`]; a format newer than [`CURRENT`], or a
//! marker that cannot be read, refuses every write (fail closed); a missing
//! marker or an older format is migrated (`migrate`), then marked.

use std::io;
use std::path::Path;

use janus_core::durable;

pub use crate::error::FormatError;

/// The newest format this binary reads and writes.
pub const CURRENT: u32 = 2;
/// The marker's name in the state directory.
pub const FILE: &str = "state-format";

/// The format `dir` is marked with: `None` when unmarked (format 1, or a
/// directory not laid out yet), or why this binary must not write to it.
pub fn read(dir: &Path) -> Result<Option<u32>, FormatError> {
    let path = dir.join(FILE);
    let unreadable = |why: String| FormatError::Unreadable { path: path.clone(), why };
    let bytes = match durable::read_fresh(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        // Another user's state: said as such (who owns it, who asks), not
        // as a format this version cannot tell.
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
            use std::os::unix::fs::MetadataExt;
            let owner = std::fs::metadata(dir)
                .map_or_else(|_| "another user".into(), |m| crate::audit::user_name(m.uid()));
            let user = crate::audit::user_name(rustix::process::getuid().as_raw());
            return Err(FormatError::NotPermitted { path, user, owner });
        }
        Err(e) => return Err(unreadable(e.to_string())),
    };
    let text = std::str::from_utf8(&bytes).map_err(|_| unreadable("not text".into()))?;
    let found: u32 =
        text.trim_end_matches('\n').parse().ok().filter(|n| *n >= 1 && text.len() <= 11).ok_or_else(
            || {
                unreadable(format!(
                    "{:?} is not one positive integer and a newline",
                    janus_core::terminal::escape(text)
                ))
            },
        )?;
    if found > CURRENT {
        return Err(FormatError::Newer { path, found, understands: CURRENT });
    }
    Ok(Some(found))
}

/// Marks `dir` as [`CURRENT`], durably.
pub fn mark(dir: &Path, from: Option<u32>) -> io::Result<()> {
    durable::write_atomic(&dir.join(FILE), format!("{CURRENT}\n").as_bytes(), 0o600)?;
    tracing::info!(
        dir = %dir.display(),
        from = from.unwrap_or(1),
        to = CURRENT,
        "marked the state directory's format"
    );
    Ok(())
}

#[cfg(test)]
#[allow(clippy::disallowed_methods, reason = "tests write and look at files by hand, as an admin does")]
mod tests {
    use super::*;

    #[test]
    fn the_marker_is_one_integer_and_a_newline() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read(dir.path()), Ok(None));
        mark(dir.path(), None).unwrap();
        assert_eq!(std::fs::read_to_string(dir.path().join(FILE)).unwrap(), "2\n");
        assert_eq!(read(dir.path()), Ok(Some(CURRENT)));
        for (text, newer) in [("3\n", true), ("999\n", true), ("2", false), ("1\n", false)] {
            std::fs::write(dir.path().join(FILE), text).unwrap();
            assert_eq!(matches!(read(dir.path()), Err(FormatError::Newer { .. })), newer, "{text:?}");
        }
        for bad in ["", "\n", "two\n", "2\n3\n", "-1\n", "0\n", " 2\n", "99999999999999\n"] {
            std::fs::write(dir.path().join(FILE), bad).unwrap();
            assert!(matches!(read(dir.path()), Err(FormatError::Unreadable { .. })), "{bad:?}");
        }
    }

    #[test]
    fn a_newer_format_names_both_numbers_and_the_guide() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(FILE), "7\n").unwrap();
        let message = read(dir.path()).unwrap_err().to_string();
        assert!(
            message.contains("format 7")
                && message.contains("up to 2")
                && message.contains("docs/upgrading.md"),
            "{message}"
        );
    }
}

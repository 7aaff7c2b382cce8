//! The one helper through which every file this crate writes reaches the disk.
//!
//! Invariant: a reader (another process included) sees either the old file or
//! the whole new one, never a prefix, and once [`write_atomic`] returns the new
//! content survives a power cut: temp file in the same directory, `fsync`,
//! `rename`, then `fsync` of the directory that holds the new name.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The prefix of in-flight temp files; listings skip names that start with it.
pub const TEMP_PREFIX: &str = ".tmp-";

/// Replaces `path` with `bytes`, durably, with the given file mode.
pub fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    let dir = parent_of(path);
    let temp = temp_path(dir, path);
    let result = (|| {
        let mut file = OpenOptions::new().write(true).create_new(true).mode(mode).open(&temp)?;
        file.write_all(bytes)?;
        // The umask may have narrowed the mode asked for at creation.
        file.set_permissions(fs::Permissions::from_mode(mode))?;
        // Data and size; the name is made durable by the directory's fsync.
        file.sync_data()?;
        fs::rename(&temp, path)?;
        sync_dir(dir)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&temp);
    }
    result.map_err(|e| with_path(e, path))
}

/// Replaces `path` with `bytes` as [`write_atomic`] does, but writes into
/// `spare` (a file kept beside it) and swaps the two in one atomic step
/// (`renameat2` with `RENAME_EXCHANGE`): for a file rewritten many times a
/// second, such as the tokens during a mass boot, no inode is created or
/// freed, which ext4 charges for (it skips recently freed inodes one by one
/// at every allocation, so a stream of rewrites slows every file creation).
/// The caller holds a lock that serialises writers; where the filesystem
/// cannot exchange (NFS), this is a plain [`write_atomic`].
pub fn replace_via_spare(path: &Path, spare: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    use rustix::fs::{CWD, RenameFlags, renameat_with};
    if !path.exists() {
        return write_atomic(path, bytes, mode);
    }
    let result = (|| {
        let mut file = OpenOptions::new().write(true).create(true).truncate(true).mode(mode).open(spare)?;
        file.write_all(bytes)?;
        file.set_permissions(fs::Permissions::from_mode(mode))?;
        file.sync_data()?;
        match renameat_with(CWD, spare, CWD, path, RenameFlags::EXCHANGE) {
            Ok(()) => {
                sync_dir(parent_of(path))?;
                // The name `spare` now holds the old content (`file` follows its
                // inode, now `path`): nobody reads it, and it must not keep
                // tokens around. Emptied, not synced: it is scratch.
                OpenOptions::new().write(true).open(spare)?.set_len(0)?;
                Ok(true)
            }
            Err(e)
                if [rustix::io::Errno::INVAL, rustix::io::Errno::NOSYS, rustix::io::Errno::NOTSUP]
                    .contains(&e) =>
            {
                Ok(false)
            }
            Err(e) => Err(io::Error::from(e)),
        }
    })();
    match result {
        Ok(true) => Ok(()),
        Ok(false) => {
            let _ = fs::remove_file(spare);
            write_atomic(path, bytes, mode)
        }
        Err(e) => Err(with_path(e, path)),
    }
}

/// Removes `path` durably; a file already gone is not an error.
pub fn remove_durably(path: &Path) -> io::Result<()> {
    match fs::remove_file(path) {
        Ok(()) => sync_dir(parent_of(path)).map_err(|e| with_path(e, path)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(with_path(e, path)),
    }
}

/// Creates `dir` (and its parents) with mode 0700 when missing.
pub fn ensure_private_dir(dir: &Path) -> io::Result<()> {
    match fs::metadata(dir) {
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => {
            Err(with_path(io::Error::new(io::ErrorKind::AlreadyExists, "exists and is not a directory"), dir))
        }
        Err(_) => {
            fs::DirBuilder::new().recursive(true).mode(0o700).create(dir).map_err(|e| with_path(e, dir))?;
            sync_dir(parent_of(dir)).map_err(|e| with_path(e, dir))
        }
    }
}

/// Makes the names in `dir` (new, renamed, removed) durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// An I/O error that says which file it is about, as every message we print must.
pub fn with_path(error: io::Error, path: &Path) -> io::Error {
    io::Error::new(error.kind(), format!("{}: {error}", path.display()))
}

fn parent_of(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

fn temp_path(dir: &Path, path: &Path) -> PathBuf {
    let name = path.file_name().map(|n| n.to_string_lossy()).unwrap_or_default();
    let nonce: u64 = rand::random();
    dir.join(format!("{TEMP_PREFIX}{name}-{nonce:016x}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_whole_file_with_mode() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.json");
        write_atomic(&path, b"one", 0o600).unwrap();
        write_atomic(&path, b"two", 0o600).unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"two");
        let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let names: Vec<_> = fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1, "no temp file left behind");
    }

    #[test]
    fn replacing_via_a_spare_swaps_and_empties_it() {
        let dir = tempfile::tempdir().unwrap();
        let (path, spare) = (dir.path().join("tokens"), dir.path().join(".tokens.spare"));
        replace_via_spare(&path, &spare, b"a\nb\n", 0o600).unwrap();
        replace_via_spare(&path, &spare, b"b\n", 0o600).unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"b\n");
        assert_eq!(fs::read(&spare).unwrap(), b"", "the old content does not linger");
        use std::os::unix::fs::MetadataExt;
        let inode = fs::metadata(&path).unwrap().ino();
        replace_via_spare(&path, &spare, b"c\n", 0o600).unwrap();
        replace_via_spare(&path, &spare, b"d\n", 0o600).unwrap();
        assert_eq!(fs::metadata(&path).unwrap().ino(), inode, "two inodes take turns");
        assert_eq!(fs::read(&path).unwrap(), b"d\n");
    }

    #[test]
    fn error_names_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("missing-dir").join("f");
        let err = write_atomic(&path, b"x", 0o600).unwrap_err();
        assert!(err.to_string().contains("missing-dir"), "{err}");
    }
}

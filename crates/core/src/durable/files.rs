//! Durable writes and fresh reads of files and directories: atomic
//! replacement (temp file, fsync, rename, directory fsync), exclusive
//! creation, appends, removal, links, all refusing to follow a link they did
//! not make; reads bounded in size; the owner a root-run command adopts.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::group;
use super::path_error::{os_error, with_path};

/// The prefix of in-flight temp files; listings skip names that start with it.
pub const TEMP_PREFIX: &str = ".tmp-";

/// Who the files and directories this process creates belong to, when not
/// to itself: set once by an admin command run as root on a state directory
/// another user owns, so that what it makes stays the service's to write.
static OWNER: std::sync::OnceLock<(u32, u32)> = std::sync::OnceLock::new();

/// Makes every file and directory this process creates from now on belong
/// to `dir`'s owner and group, when this process runs as root and `dir`
/// belongs to someone else (an admin command under sudo). Returns the
/// owner adopted, if any.
pub fn create_as_owner_of(dir: &Path) -> io::Result<Option<(u32, u32)>> {
    if !rustix::process::geteuid().is_root() {
        return Ok(None);
    }
    let meta = fs::metadata(dir).map_err(|e| with_path(e, dir))?;
    if meta.uid() == 0 {
        return Ok(None);
    }
    let owner = *OWNER.get_or_init(|| (meta.uid(), meta.gid()));
    Ok(Some(owner))
}

/// Gives a file this process just created to the adopted owner, if any.
fn adopt(file: &File) -> io::Result<()> {
    match OWNER.get() {
        Some(&(uid, gid)) => std::os::unix::fs::fchown(file, Some(uid), Some(gid)),
        None => Ok(()),
    }
}

/// Opens (creating when missing, mode `mode`, never through a link) a file
/// this crate owns outside the durable writes: a lock file.
pub fn open_or_create(path: &Path, mode: u32) -> io::Result<File> {
    let existed = fs::symlink_metadata(path).is_ok();
    #[expect(
        clippy::disallowed_methods,
        reason = "the one opener of lock files: never through a link, adopted by the state's owner"
    )]
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(mode)
        .custom_flags(libc_nofollow())
        .open(path)
        .map_err(|e| with_path(e, path))?;
    if !existed {
        adopt(&file).map_err(|e| with_path(e, path))?;
    }
    Ok(file)
}

/// Replaces `path` with `bytes`, durably, with the given file mode.
pub fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    replace(path, bytes, mode)
}

/// The old file at `path` goes with the rename only if nothing else links
/// it: the crate never gives a replaced name a second link (see
/// [`rename_durably`]).
fn replace(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    let dir = parent_of(path);
    let temp = temp_path(dir, path);
    let result = (|| {
        write_temp(&temp, bytes, mode)?;
        #[expect(
            clippy::disallowed_methods,
            reason = "the one atomic replace: temp file fsync'd, the directory next"
        )]
        fs::rename(&temp, path)?;
        sync_dir(dir)
    })();
    if result.is_err() {
        #[expect(
            clippy::disallowed_methods,
            reason = "a failed write's temp file: its name was never published"
        )]
        let _ = fs::remove_file(&temp);
    }
    result.map_err(|e| with_path(e, path))
}

/// Creates `path` (which must not exist) with `bytes`, whole, and `fsync`s
/// its data, never through a link; the caller makes the name durable with
/// the directory's `fsync`. For a file that is linked elsewhere before it
/// is renamed or removed (a token admission's claim). Written under a temp
/// name and linked to `path` (which fails when the name exists): a process
/// killed mid-write leaves a `.tmp-*` file, never a torn file at `path`.
pub fn write_new(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    let temp = temp_path(parent_of(path), path);
    let linked = write_temp(&temp, bytes, mode).and_then(|()| link_new(&temp, path));
    #[expect(
        clippy::disallowed_methods,
        reason = "the temp name is dropped once linked or refused: the published name is the link"
    )]
    let _ = fs::remove_file(&temp);
    match linked {
        Ok(true) => Ok(()),
        // What was there already (a file, a planted link) is not ours to remove.
        Ok(false) => Err(with_path(io::Error::new(io::ErrorKind::AlreadyExists, "exists already"), path)),
        Err(e) => Err(with_path(e, path)),
    }
}

/// Writes a new temp file whole and `fsync`s its data, never through a
/// link: the first half of every durable write here.
fn write_temp(temp: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    #[expect(
        clippy::disallowed_methods,
        reason = "the temp file of every durable write: O_EXCL, never through a link"
    )]
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .custom_flags(libc_nofollow())
        .open(temp)?;
    adopt(&file)?;
    file.write_all(bytes)?;
    // The umask may have narrowed the mode asked for at creation.
    file.set_permissions(fs::Permissions::from_mode(mode))?;
    // Data and size; the name is made durable by the directory's fsync.
    file.sync_data()
}

/// Creates `path` with `bytes` only if no file (nor link) has that name,
/// durably and whole: the content is written and `fsync`'d under a temp
/// name, then linked to `path`. `link` fails when the name exists, and the
/// file server decides it atomically, so exactly one of several racing
/// processes (on several hosts) gets `Ok(true)`; the rest get `Ok(false)`.
/// A process killed at any point leaves the name free or holding the whole
/// content, never an empty file (at worst a `.tmp-*` file).
pub fn create_exclusive(path: &Path, bytes: &[u8], mode: u32) -> io::Result<bool> {
    let dir = parent_of(path);
    let temp = temp_path(dir, path);
    let linked = write_temp(&temp, bytes, mode).and_then(|()| link_new(&temp, path));
    #[expect(
        clippy::disallowed_methods,
        reason = "the temp name is dropped once linked or refused: the published name is the link"
    )]
    let _ = fs::remove_file(&temp);
    match linked {
        Ok(true) => {}
        Ok(false) => return Ok(false),
        Err(e) => return Err(with_path(e, path)),
    }
    if let Err(e) = sync_dir(dir) {
        // Not known to be durable: give the name back rather than half-own it.
        #[expect(
            clippy::disallowed_methods,
            reason = "a name not known durable is given back; its directory could not be synced anyway"
        )]
        let _ = fs::remove_file(path);
        return Err(with_path(e, path));
    }
    Ok(true)
}

/// Appends `bytes` to `path` with one `write` on an `O_APPEND` descriptor
/// and `fsync`s it, creating the file (mode `mode`) when missing.
/// `follow_links` is false for every file the crate owns (an attacker's
/// link is refused with ELOOP); true only for `tokens`, which an admin may
/// keep elsewhere.
///
/// All or nothing: under an exclusive `flock` (the processes of one host
/// may share a file), a write that fails or comes up short (a full disk)
/// is cut back to the size the file had, so the next append never glues
/// its line to half of this one. A crash can still leave a torn tail: in
/// the files the crate owns (line-oriented, `follow_links` false) it is cut
/// back to the last newline before the next append, with a warning: it was
/// never acknowledged.
pub fn append_durably(path: &Path, bytes: &[u8], mode: u32, follow_links: bool) -> io::Result<()> {
    let existed = fs::symlink_metadata(path).is_ok();
    if follow_links && existed && fs::metadata(path).is_err() {
        // A dangling link: creating its target here would make a file
        // with this process's owner and mode (root's, 0600, under sudo)
        // where the admin meant one of their own, which the server may
        // then be unable to read.
        let target = fs::read_link(path).map(|t| t.display().to_string()).unwrap_or_default();
        return Err(with_path(
            io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "it is a link to {target}, which does not exist: create that file (owned by the user \
                     the server runs as), or remove the link"
                ),
            ),
            path,
        ));
    }
    let flags = if follow_links { 0 } else { libc_nofollow() };
    #[expect(
        clippy::disallowed_methods,
        reason = "the one appender: O_APPEND, never through a link unless asked, fsync'd by the caller"
    )]
    let mut file = OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .mode(mode)
        .custom_flags(flags)
        .open(path)
        .map_err(|e| with_path(e, path))?;
    if !existed {
        adopt(&file).map_err(|e| with_path(e, path))?;
    }
    rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive)
        .map_err(|e| with_path(io::Error::from(e), path))?;
    let mut before = file.metadata().map_err(|e| with_path(e, path))?.len();
    if !follow_links && before > 0 {
        let whole = whole_lines_len(&mut file, before).map_err(|e| with_path(e, path))?;
        if whole < before {
            file.set_len(whole).map_err(|e| with_path(e, path))?;
            tracing::warn!(
                file = %path.display(),
                bytes = before - whole,
                "cut a torn last line (a write a crash cut short) before appending"
            );
            before = whole;
        }
    }
    if let Err(e) = file.write_all(bytes).and_then(|()| file.sync_data()) {
        // Whatever part of the write landed goes: the caller was not told it did.
        if file.set_len(before).and_then(|()| file.sync_data()).is_err() {
            tracing::error!(file = %path.display(), "could not cut back a failed append");
        }
        return Err(with_path(e, path));
    }
    if !existed {
        sync_dir(parent_of(path)).map_err(|e| with_path(e, path))?;
    }
    Ok(())
}

/// The length of `file` (of `len` bytes) up to and including its last
/// newline: `len` when it ends with one (or is empty).
fn whole_lines_len(file: &mut fs::File, len: u64) -> io::Result<u64> {
    use std::io::{Read, Seek, SeekFrom};
    let mut last = [0u8; 1];
    if len == 0 {
        return Ok(0);
    }
    file.seek(SeekFrom::Start(len - 1))?;
    file.read_exact(&mut last)?;
    if last[0] == b'\n' {
        return Ok(len);
    }
    let mut end = len;
    let mut chunk = [0u8; 4096];
    while end > 0 {
        let start = end.saturating_sub(chunk.len() as u64);
        let part = &mut chunk[..(end - start) as usize];
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(part)?;
        if let Some(at) = part.iter().rposition(|&b| b == b'\n') {
            return Ok(start + at as u64 + 1);
        }
        end = start;
    }
    Ok(0)
}

/// `O_NOFOLLOW`: opening a symbolic link fails instead of following it.
pub fn libc_nofollow() -> i32 {
    rustix::fs::OFlags::NOFOLLOW.bits() as i32
}

/// Removes `.tmp-*` files older than `older_than` from `dir`: what a crash
/// between a temp file's creation and its rename leaves behind. Returns
/// how many went.
pub fn remove_stale_temps(dir: &Path, older_than: std::time::Duration) -> usize {
    let Ok(entries) = fs::read_dir(dir) else { return 0 };
    let mut removed = 0;
    for entry in entries.flatten() {
        let stale = entry.file_name().to_str().is_some_and(|n| n.starts_with(TEMP_PREFIX))
            && entry
                .metadata()
                .ok()
                .filter(|m| m.is_file())
                .and_then(|m| m.modified().ok())
                .and_then(crate::clock::age_of)
                .is_some_and(|age| age > older_than);
        #[expect(clippy::disallowed_methods, reason = "a crash's temp file: its name was never published")]
        let gone = stale && fs::remove_file(entry.path()).is_ok();
        if gone {
            removed += 1;
        }
    }
    removed
}

/// How often a stale read is tried again (with a fresh open each time):
/// the pauses add up to 1.6 s, past GlusterFS's default 1 s entry cache.
const STALE_RETRIES: u32 = 8;

/// Runs `attempt` again, after a short pause, while it fails with ESTALE
/// (at most a few times): on NFS or GlusterFS a file another host replaced
/// by rename is stale for the handle this host had, and a fresh open (by
/// path) reaches the new one.
pub fn retry_stale<T>(mut attempt: impl FnMut() -> io::Result<T>) -> io::Result<T> {
    let mut tries = 0;
    loop {
        match attempt() {
            // ESTALE: a network filesystem's handle to a file another client replaced.
            Err(e)
                if e.raw_os_error() == Some(rustix::io::Errno::STALE.raw_os_error())
                    && tries < STALE_RETRIES =>
            {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis((5u64 << tries).min(500)));
            }
            other => return other,
        }
    }
}

/// The whole file, through a fresh open, stale handles retried.
pub fn read_fresh(path: &Path) -> io::Result<Vec<u8>> {
    /// A record's size, and more: read whole without asking the size.
    const SMALL: usize = 4096;
    retry_stale(|| {
        let file = File::open(path)?;
        // Not `fs::read`, which asks the file's size first (an `fstat`): a
        // system call more on every poll, for a record of about 1 KiB that
        // one read and the read that says EOF take whole. Only a larger file
        // (an audit trail) is asked its size, so its buffer is made once.
        let mut bytes = Vec::with_capacity(SMALL);
        io::Read::read_to_end(&mut io::Read::take(&file, SMALL as u64), &mut bytes)?;
        if bytes.len() == SMALL {
            let size = usize::try_from(file.metadata()?.len()).unwrap_or(usize::MAX);
            bytes.reserve(size.saturating_sub(SMALL));
            io::Read::read_to_end(&mut io::Read::take(&file, u64::MAX), &mut bytes)?;
        }
        Ok(bytes)
    })
}

/// Gives `existing`'s file a second name, `new`, if nothing (no file, no
/// link) has that name: `link(2)` neither follows nor replaces, and the
/// file server decides it atomically, so of several racing processes (on
/// several hosts) exactly one gets `Ok(true)`. The caller `fsync`s the
/// directory (several links may share one `fsync`).
pub fn link_new(existing: &Path, new: &Path) -> io::Result<bool> {
    #[expect(clippy::disallowed_methods, reason = "the one place a second name is given")]
    match fs::hard_link(existing, new) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(e),
    }
}

/// Reads a file this crate writes, never through a link: a link in its
/// place reads as ELOOP ([`is_a_link`]), stale handles retried. Not for
/// `tokens`, which an admin may link to a file of their own.
pub fn read_own(path: &Path) -> io::Result<Vec<u8>> {
    retry_stale(|| {
        let mut file = OpenOptions::new().read(true).custom_flags(libc_nofollow()).open(path)?;
        let mut bytes = Vec::new();
        io::Read::read_to_end(&mut file, &mut bytes)?;
        Ok(bytes)
    })
}

/// Reads `path` whole, following a link, stale handles retried: refused
/// (InvalidData, naming the bound) when it holds more than `max` bytes, so
/// a file's size never decides how much this process allocates.
pub fn read_at_most(path: &Path, max: u64) -> io::Result<Vec<u8>> {
    retry_stale(|| read_open_at_most(&File::open(path)?, max))
}

/// Reads an open file from where it is to its end, refused beyond `max`
/// bytes as [`read_at_most`] is.
pub fn read_open_at_most(file: &File, max: u64) -> io::Result<Vec<u8>> {
    let too_large = |size: u64| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{size} bytes, over the {} MiB such a file may hold", max >> 20),
        )
    };
    // Refused before any byte is read when its size says so; the read is
    // bounded too, for a file that grows meanwhile.
    let len = file.metadata()?.len();
    if len > max {
        return Err(too_large(len));
    }
    let mut bytes = Vec::with_capacity(len as usize);
    io::Read::read_to_end(&mut io::Read::take(file, max + 1), &mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(too_large(bytes.len() as u64));
    }
    Ok(bytes)
}

/// Whether `e` is the refusal of a link `O_NOFOLLOW` opened.
pub fn is_a_link(e: &io::Error) -> bool {
    os_error(e) == Some(rustix::io::Errno::LOOP.raw_os_error())
}

/// What a look at a name found: there, not there, or that cannot be told.
/// `Path::exists` folds the third into the second (an EACCES, an ESTALE,
/// an EIO reads as "absent"), which is how a decision fails open; it is a
/// disallowed method (clippy.toml), and every look goes through here.
#[derive(Debug)]
#[must_use = "decide what Unknown refuses"]
pub enum Presence {
    /// The name exists (a link counts: it is not followed).
    Present,
    /// The file system says there is no such name.
    Absent,
    /// The look failed: the decision that depends on it refuses.
    Unknown(io::Error),
}

impl Presence {
    /// Looks at `path` (not following a link), stale handles retried.
    pub fn of(path: &Path) -> Presence {
        match present(path) {
            Ok(true) => Presence::Present,
            Ok(false) => Presence::Absent,
            Err(e) => Presence::Unknown(e),
        }
    }

    /// Present or not, or the error a decision refuses with.
    pub fn known(self) -> io::Result<bool> {
        match self {
            Presence::Present => Ok(true),
            Presence::Absent => Ok(false),
            Presence::Unknown(e) => Err(e),
        }
    }
}

/// Renames `from` to `to` (in one directory) and makes it durable with the
/// directory's `fsync`.
///
/// `from` must be linked nowhere else: `to` is a name later writes rename
/// over, and on NFS and GlusterFS a client may go on resolving a name to
/// the old file after another host renamed over it, for as long as that
/// file lives on through a second link (docs/deploying.md "Several
/// replicas": the rename trap). Refused otherwise, in every build, and
/// when `from` cannot be looked at: a write that failed half-way on a
/// network filesystem (a temp name it could not remove, partitioned from
/// GlusterFS's other bricks) leaves a second name no code path expected.
/// The tests walk the state after their bursts for any such name.
pub fn rename_durably(from: &Path, to: &Path) -> io::Result<()> {
    let links = fs::symlink_metadata(from).map_err(|e| with_path(e, from))?.nlink();
    if links != 1 {
        let why = format!(
            "has {links} links: not renamed to {} (a rename over a file that lives on through a second \
             name may go unseen on another host)",
            to.display()
        );
        return Err(with_path(io::Error::other(why), from));
    }
    #[expect(clippy::disallowed_methods, reason = "the durable rename itself: the fsync follows")]
    fs::rename(from, to).map_err(|e| with_path(e, to))?;
    sync_dir(parent_of(to)).map_err(|e| with_path(e, to))
}

/// Whether `path` exists, stale handles retried; an error that persists
/// is returned, so a caller can fail closed ([`Presence`] names the three
/// answers).
pub fn present(path: &Path) -> io::Result<bool> {
    retry_stale(|| {
        fs::symlink_metadata(path).map(|_| true).or_else(|e| match e.kind() {
            io::ErrorKind::NotFound => Ok(false),
            _ => Err(e),
        })
    })
}

/// [`present`], as the file server has it now: the parent directory is
/// opened first, which makes an NFS client revalidate it (close-to-open)
/// and drop a negative entry it cached. Without it a name another host
/// made stayed unseen here for about 20 s (measured: docs/deploying.md),
/// and so did its `open`. For the decisions a name's absence allows (a
/// token not revoked, a node or a CA not rejected); on a local filesystem
/// it costs one `open` and `close` more.
pub fn present_at_server(path: &Path) -> io::Result<bool> {
    match revalidate_parent(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
        Ok(()) => present(path),
    }
}

/// Opens `path`'s directory and closes it: an NFS client revalidates the
/// directory (close-to-open) and drops the negative entries it cached in
/// it, so the next lookup of a name another host made since finds it.
pub fn revalidate_parent(path: &Path) -> io::Result<()> {
    retry_stale(|| File::open(parent_of(path))).map(drop)
}

/// Removes `path` durably; a file already gone is not an error.
#[expect(clippy::disallowed_methods, reason = "the one durable removal: the directory is synced after")]
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
            if let Some(&(uid, gid)) = OWNER.get() {
                std::os::unix::fs::lchown(dir, Some(uid), Some(gid)).map_err(|e| with_path(e, dir))?;
            }
            sync_dir(parent_of(dir)).map_err(|e| with_path(e, dir))
        }
    }
}

/// Makes the names in `dir` (new, renamed, removed) durable. Writers that
/// ask while one `fsync` of `dir` runs share the next ([`group`]): it
/// starts after each of them asked, so it covers every name they made.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    static DIRS: std::sync::LazyLock<GroupsOf<()>> = std::sync::LazyLock::new(Default::default);
    group::of(&DIRS, dir).commit((), |_| File::open(dir)?.sync_all())
}

/// Appends `bytes` as [`append_durably`] does (to a file the crate owns,
/// never through a link), with the bytes of every other writer of `path`
/// in this process that asked meanwhile: one `write` and one `fsync` per
/// batch ([`group`]), each writer answered once its bytes are durable.
pub fn append_grouped(path: &Path, bytes: Vec<u8>, mode: u32) -> io::Result<()> {
    static FILES: std::sync::LazyLock<GroupsOf<Vec<u8>>> = std::sync::LazyLock::new(Default::default);
    group::of(&FILES, path).commit(bytes, |parts| append_durably(path, &parts.concat(), mode, false))
}

/// The commit groups of some files, by path.
type GroupsOf<T> = std::sync::Mutex<std::collections::HashMap<PathBuf, std::sync::Arc<group::Group<T>>>>;

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
#[allow(clippy::disallowed_methods, reason = "tests write and look at files by hand, as an admin does")]
mod tests {
    use super::*;

    #[test]
    fn read_fresh_reads_small_and_large_files_whole() {
        let dir = tempfile::tempdir().unwrap();
        for size in [0, 1, 991, 4095, 4096, 4097, 3 * 4096 + 5, 1 << 20] {
            let path = dir.path().join(format!("f{size}"));
            let content: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
            fs::write(&path, &content).unwrap();
            assert_eq!(read_fresh(&path).unwrap(), content, "{size} bytes");
        }
        assert_eq!(read_fresh(&dir.path().join("gone")).unwrap_err().kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn with_path_names_the_file_and_keeps_the_cause() {
        let error = with_path(io::Error::from_raw_os_error(28), Path::new("/state/nodes/x.json"));
        assert_eq!(error.kind(), io::ErrorKind::StorageFull);
        assert!(error.to_string().starts_with("/state/nodes/x.json: "), "{error}");
        assert_eq!(os_error(&error), Some(28));
        let again = with_path(error, Path::new("/state"));
        assert_eq!(os_error(&again), Some(28));
        assert!(again.to_string().starts_with("/state: /state/nodes/x.json: "), "{again}");
    }

    /// A file with a second name is never renamed into place (the rename
    /// trap), nor one that cannot be looked at; one name alone is.
    #[test]
    fn present_at_server_says_what_present_says_here() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("made");
        fs::write(&file, b"").unwrap();
        std::os::unix::fs::symlink("nowhere", dir.path().join("link")).unwrap();
        for (name, there) in [("made", true), ("link", true), ("absent", false), ("gone/below", false)] {
            let path = dir.path().join(name);
            assert_eq!(present_at_server(&path).unwrap(), there, "{name}");
            assert_eq!(present(&path).unwrap(), there, "{name}");
        }
        // Under a file, not a directory: cannot be told.
        assert!(present_at_server(&file.join("below")).is_err());
    }

    #[test]
    fn a_file_with_a_second_link_is_not_renamed_into_place() {
        let dir = tempfile::tempdir().unwrap();
        let (claim, leftover, record) =
            (dir.path().join(".claim-a"), dir.path().join(".tmp-a"), dir.path().join("a.json"));
        assert!(create_exclusive(&claim, b"{}", 0o600).unwrap());
        assert!(link_new(&claim, &leftover).unwrap());
        let refused = rename_durably(&claim, &record).unwrap_err();
        assert!(refused.to_string().contains("has 2 links: not renamed"), "{refused}");
        assert!(!present(&record).unwrap(), "nothing renamed");
        assert!(rename_durably(&dir.path().join("missing"), &record).is_err(), "fails closed");
        fs::remove_file(&leftover).unwrap();
        rename_durably(&claim, &record).unwrap();
        assert_eq!(fs::read(&record).unwrap(), b"{}");
    }

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
    fn exclusive_creation_has_one_winner_and_refuses_links() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("marker");
        assert!(create_exclusive(&path, b"first", 0o600).unwrap());
        assert!(!create_exclusive(&path, b"second", 0o600).unwrap());
        assert_eq!(fs::read(&path).unwrap(), b"first");
        let target = dir.path().join("target");
        std::os::unix::fs::symlink(&target, dir.path().join("link")).unwrap();
        assert!(!create_exclusive(&dir.path().join("link"), b"x", 0o600).unwrap());
        assert!(!target.exists(), "a planted link is never followed");
        assert!(append_durably(&dir.path().join("link"), b"x", 0o600, false).is_err());
        assert!(!target.exists());
    }

    #[test]
    fn a_new_file_never_replaces_follows_or_removes_what_is_there() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".claim-x.json");
        write_new(&path, b"mine", 0o600).unwrap();
        assert!(write_new(&path, b"again", 0o600).is_err());
        assert_eq!(fs::read(&path).unwrap(), b"mine", "the existing file stays whole");
        let target = dir.path().join("target");
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert!(write_new(&link, b"x", 0o600).is_err());
        assert!(
            !target.exists() && fs::symlink_metadata(&link).is_ok(),
            "the link is neither followed nor removed"
        );
    }

    #[test]
    fn stale_temps_go_fresh_ones_stay() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(".tmp-old"), b"").unwrap();
        fs::write(dir.path().join("keep"), b"").unwrap();
        assert_eq!(remove_stale_temps(dir.path(), std::time::Duration::from_secs(60)), 0);
        assert_eq!(remove_stale_temps(dir.path(), std::time::Duration::ZERO), 1);
        assert!(dir.path().join("keep").exists());
    }

    #[test]
    fn error_names_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("missing-dir").join("f");
        let err = write_atomic(&path, b"x", 0o600).unwrap_err();
        assert!(err.to_string().contains("missing-dir"), "{err}");
    }
}

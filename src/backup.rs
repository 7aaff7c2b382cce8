//! `backup` and `restore`: a state directory as one gzip'd tar, and back.
//!
//! A backup is taken under the state's locks (`tokens.lock`, then
//! `decisions.lock`: no token, metadata or CA-rejection edit runs while it
//! is read), with the ledger (`token-uses/` and `token-uses.key`) read
//! last, so every use recorded before the backup began is in it: a token
//! spent before the backup stays spent after the restore, and uses left
//! stay left. The archive opens with `janus-backup.json` (what it is, when
//! it was taken); every other entry is `state/<path>`, a directory or a
//! regular file (`tokens` through its link, when it is one; no other link,
//! no temp file, no lock file).
//!
//! Invariants: a restore writes only into a directory that is missing or
//! empty (so never into one a server serves: a served state is laid out),
//! every file with the one durable writer (temp file, fsync, link, then
//! each directory's fsync), 0600 files in 0700 directories; an entry that
//! is not `state/` followed by plain path components, or not a file or a
//! directory, refuses the whole archive before anything is written.

use std::fs;
use std::io::{self, Read};
use std::path::{Component, Path, PathBuf};

use janus_core::durable;

/// The archive's first entry.
pub const MANIFEST: &str = "janus-backup.json";
/// What every state entry's path starts with.
const PREFIX: &str = "state";

/// What a backup took, and what a restore laid out.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Manifest {
    /// Always `janus-registration backup`.
    pub kind: String,
    /// The version that took it.
    pub version: String,
    /// When it was taken (RFC 3339).
    pub taken_at: String,
    /// How many files it holds.
    pub files: usize,
    /// Its state's format (`state-format`), when it says one.
    pub state_format: Option<String>,
}

/// Why a backup or a restore did not happen.
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    /// A file could not be read or written.
    #[error(transparent)]
    Io(#[from] io::Error),
    /// What was asked cannot be done as asked.
    #[error("{0}")]
    Refused(String),
}

/// Takes a consistent copy of `state` into `out` (replaced durably).
pub fn backup(state: &Path, out: &Path) -> Result<Manifest, BackupError> {
    if !state.join("nodes").is_dir() {
        return Err(BackupError::Refused(format!(
            "{} is not a state directory (no nodes/): nothing to back up",
            state.display()
        )));
    }
    let _tokens = durable::lock::lock(&state.join("tokens.lock"), 0o600)?;
    let _decisions = durable::lock::lock(&state.join("decisions.lock"), 0o600)?;
    let mut files = Vec::new();
    collect(state, Path::new(""), &mut files)?;
    // The ledger last: every use recorded before this point is in the copy.
    let ledger = |p: &PathBuf| p.starts_with(janus_store::LEDGER_DIR) || p == Path::new("token-uses.key");
    files.sort_by_key(|p| (ledger(p), p.clone()));
    let manifest = Manifest {
        kind: "janus-registration backup".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        taken_at: janus_core::clock::now_rfc3339(),
        files: files.iter().filter(|p| !p.as_os_str().is_empty()).count(),
        state_format: fs::read_to_string(state.join("state-format")).ok().map(|s| s.trim().to_string()),
    };
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let mut archive = tar::Builder::new(gz);
    let manifest_bytes = serde_json::to_vec_pretty(&manifest).map_err(io::Error::other)?;
    append(&mut archive, Path::new(MANIFEST), &manifest_bytes)?;
    for relative in &files {
        // `tokens` may be a link to the list kept elsewhere: its content.
        // Every other file is read without following a link (one planted
        // since the listing is refused, never copied from where it points).
        let path = state.join(relative);
        let read = if relative == Path::new("tokens") { fs::read(&path) } else { durable::read_own(&path) };
        let bytes = match read {
            Ok(bytes) => bytes,
            // Removed since the listing (a claim finished, a temp renamed).
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(durable::with_path(e, &path).into()),
        };
        append(&mut archive, &Path::new(PREFIX).join(relative), &bytes)?;
    }
    let bytes = archive.into_inner()?.finish()?;
    durable::write_atomic(out, &bytes, 0o600)?;
    Ok(manifest)
}

/// The regular files under `dir` (relative to the state), skipping temp
/// files, lock files and links (but `tokens`, read through its link).
fn collect(root: &Path, relative: &Path, files: &mut Vec<PathBuf>) -> io::Result<()> {
    let dir = root.join(relative);
    for entry in fs::read_dir(&dir).map_err(|e| durable::with_path(e, &dir))? {
        let entry = entry.map_err(|e| durable::with_path(e, &dir))?;
        let name = entry.file_name();
        let Some(text) = name.to_str() else { continue };
        if text.starts_with(durable::TEMP_PREFIX) || text.ends_with(".lock") {
            continue;
        }
        let path = relative.join(&name);
        let kind = entry.file_type()?;
        if kind.is_dir() {
            collect(root, &path, files)?;
        } else if kind.is_file() || (kind.is_symlink() && path == Path::new("tokens")) {
            files.push(path);
        }
    }
    Ok(())
}

fn append<W: io::Write>(archive: &mut tar::Builder<W>, path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut header = tar::Header::new_gnu();
    header.set_entry_type(tar::EntryType::Regular);
    header.set_size(bytes.len() as u64);
    header.set_mode(0o600);
    header.set_mtime(janus_core::clock::now_unix().max(0) as u64);
    header.set_cksum();
    archive.append_data(&mut header, path, bytes)
}

/// What a restore laid out.
#[derive(Debug)]
pub struct Restored {
    /// The backup's manifest.
    pub manifest: Manifest,
    /// The files written.
    pub files: usize,
}

/// Lays out the backup `from` into `state`, which must be missing or empty.
pub fn restore(from: &Path, state: &Path) -> Result<Restored, BackupError> {
    refuse_unless_empty(state)?;
    let file = fs::File::open(from).map_err(|e| durable::with_path(e, from))?;
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(file));
    let mut manifest: Option<Manifest> = None;
    let mut entries: Vec<(PathBuf, Vec<u8>)> = Vec::new();
    for entry in archive.entries().map_err(|e| durable::with_path(e, from))? {
        let mut entry = entry.map_err(|e| durable::with_path(e, from))?;
        let path = entry.path()?.into_owned();
        if !entry.header().entry_type().is_file() {
            return Err(refused_entry(from, &path, "not a regular file"));
        }
        let mut bytes = Vec::new();
        entry.read_to_end(&mut bytes)?;
        if path == Path::new(MANIFEST) {
            manifest = Some(serde_json::from_slice(&bytes).map_err(|e| {
                BackupError::Refused(format!("{}: its {MANIFEST} does not read: {e}", from.display()))
            })?);
            continue;
        }
        let relative =
            state_path(&path).ok_or_else(|| refused_entry(from, &path, "not a plain path under state/"))?;
        entries.push((relative, bytes));
    }
    let manifest = manifest.ok_or_else(|| {
        BackupError::Refused(format!("{} is not a janus-registration backup (no {MANIFEST})", from.display()))
    })?;
    durable::ensure_private_dir(state)?;
    let mut dirs = vec![state.to_path_buf()];
    for (relative, bytes) in &entries {
        let path = state.join(relative);
        let parent = path.parent().unwrap_or(state).to_path_buf();
        if !dirs.contains(&parent) {
            make_dirs(state, &parent, &mut dirs)?;
        }
        durable::write_new(&path, bytes, 0o600)?;
    }
    for dir in dirs.iter().rev() {
        durable::sync_dir(dir)?;
    }
    // The new directory's own name.
    if let Some(parent) = state.parent().filter(|p| !p.as_os_str().is_empty()) {
        durable::sync_dir(parent)?;
    }
    Ok(Restored { manifest, files: entries.len() })
}

/// What `restore` says: what it laid out, and what an older backup re-enables.
pub fn restored_words(restored: &Restored, state: &Path) -> String {
    let age =
        janus_core::clock::Age::of(&restored.manifest.taken_at).map_or_else(|| "?".into(), |a| a.words());
    format!(
        "restored {} files into {} from a backup taken at {} ({age} ago) by version {}.\n\
         Every use a token had spent by then is spent here too. A token spent AFTER that time admits again here: \
         if this backup is older than the state it replaces, revoke the tokens that were handed out since \
         (`tokens list --state {state}`, then `tokens revoke PREFIX`) before serving it.",
        restored.files,
        state.display(),
        restored.manifest.taken_at,
        restored.manifest.version,
        state = state.display(),
    )
}

/// Makes `dir` and its missing parents below `state`, 0700, noting each.
fn make_dirs(state: &Path, dir: &Path, made: &mut Vec<PathBuf>) -> io::Result<()> {
    if let Some(parent) = dir.parent()
        && parent != state
        && !made.iter().any(|d| d == parent)
    {
        make_dirs(state, parent, made)?;
    }
    durable::ensure_private_dir(dir)?;
    made.push(dir.to_path_buf());
    Ok(())
}

/// `state/a/b` as `a/b`, when every component is a plain name.
fn state_path(path: &Path) -> Option<PathBuf> {
    let rest = path.strip_prefix(PREFIX).ok()?;
    let plain = rest.components().all(|c| matches!(c, Component::Normal(_)));
    (plain && !rest.as_os_str().is_empty()).then(|| rest.to_path_buf())
}

fn refused_entry(from: &Path, path: &Path, why: &str) -> BackupError {
    BackupError::Refused(format!(
        "{}: its entry {} is {why}: nothing restored",
        from.display(),
        janus_core::terminal::escape(&path.display().to_string())
    ))
}

/// A restore writes only where nothing is: never over a state, served or not.
fn refuse_unless_empty(state: &Path) -> Result<(), BackupError> {
    match fs::read_dir(state) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(durable::with_path(e, state).into()),
        Ok(mut entries) => match entries.next() {
            None => Ok(()),
            Some(_) => Err(BackupError::Refused(format!(
                "{} is not empty: a restore lays out a new state directory, never over one (a server may be \
                 serving it); give an empty or missing directory",
                state.display()
            ))),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_paths_under_state_are_taken() {
        assert_eq!(state_path(Path::new("state/nodes/a.json")), Some(PathBuf::from("nodes/a.json")));
        for bad in ["state/../etc/passwd", "/state/tokens", "other/tokens", "state"] {
            assert_eq!(state_path(Path::new(bad)), None, "{bad}");
        }
    }
}

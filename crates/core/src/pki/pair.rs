//! Writing a minted pair to files: `PREFIX.crt` and `PREFIX.key`, for the
//! `certs` command and the agent (a node's own CA). Minting itself
//! ([`super::mint`]) writes nothing.
//!
//! Invariants: private keys are written 0600, the key before its
//! certificate; nothing that exists is overwritten unless asked, and that
//! is decided by the file system (an exclusive create), not by a look first.

use std::path::{Path, PathBuf};

use secrecy::ExposeSecret;

use super::mint::{MintError, Minted};
use crate::durable::{create_exclusive, remove_durably, write_atomic};

/// Writes `PREFIX.crt` (0644) and `PREFIX.key` (0600), the key first (a
/// reader that finds the new certificate finds its key). Without
/// `replace`, each is created only if no file has its name, decided by the
/// file system (no look-then-write window): an existing one is never
/// touched, and a key made for a certificate that could not be is removed.
pub fn write_pair(prefix: &Path, minted: &Minted, replace: bool) -> Result<(PathBuf, PathBuf), MintError> {
    let crt = with_suffix(prefix, "crt");
    let key = with_suffix(prefix, "key");
    let key_pem = minted.key_pem.expose_secret().as_bytes();
    if replace {
        write_atomic(&key, key_pem, 0o600)?;
        write_atomic(&crt, minted.cert_pem.as_bytes(), 0o644)?;
        return Ok((crt, key));
    }
    if !create_exclusive(&key, key_pem, 0o600)? {
        return Err(MintError::Exists(key));
    }
    match create_exclusive(&crt, minted.cert_pem.as_bytes(), 0o644) {
        Ok(true) => Ok((crt, key)),
        other => {
            let _ = remove_durably(&key);
            other?;
            Err(MintError::Exists(crt))
        }
    }
}

/// `prefix` with `.suffix` appended (`out` becomes `out.crt`).
pub fn with_suffix(prefix: &Path, suffix: &str) -> PathBuf {
    let mut s = prefix.as_os_str().to_owned();
    s.push(".");
    s.push(suffix);
    PathBuf::from(s)
}

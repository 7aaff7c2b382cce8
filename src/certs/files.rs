//! Reading what `certs` minted before: a PEM file's text, a certificate
//! and key pair; every error names its file.

use std::path::Path;

use janus_core::pki::mint::{MintError, Minted};

/// A file's text; the error names the file.
pub fn read_text(path: &Path) -> Result<String, MintError> {
    std::fs::read_to_string(path).map_err(|e| MintError::Io(janus_core::durable::with_path(e, path)))
}

/// A certificate and key pair from two PEM files.
pub fn read_minted(cert: &Path, key: &Path) -> Result<Minted, MintError> {
    Ok(Minted { cert_pem: read_text(cert)?, key_pem: read_text(key)?.into() })
}

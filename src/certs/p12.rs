//! `certs admin --p12`: an admin credential as a PKCS#12 file a person
//! imports into a browser (Firefox's certificate manager, Chromium's NSS
//! database through `pk12util`), for the admin console.
//!
//! Invariants: the file holds the credential's key, its certificate and
//! the admin CA's certificate (the chain a browser offers), encrypted with
//! PBES2 (PBKDF2-HMAC-SHA-256, AES-256-CBC) and MAC'd with HMAC-SHA-256:
//! what current NSS, Firefox and OpenSSL 3 read, no legacy cipher; it is
//! written 0600 and never over an existing file; its password is never
//! empty, said once (when generated) and never logged.

use std::path::{Path, PathBuf};

use p12_keystore::{Certificate, KeyStore, KeyStoreEntry, PrivateKey, PrivateKeyChain};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivatePkcs8KeyDer};
use secrecy::{ExposeSecret, SecretString};

use super::{MintError, Minted};

/// The shortest password a PKCS#12 is written with.
pub const MIN_PASSWORD: usize = 8;

/// PBKDF2 rounds for the key and the MAC: OpenSSL 3's default (2048) is
/// below what a file that leaves the machine should carry.
const ITERATIONS: u32 = 600_000;

/// The import password: the first line of `file`, or (no file) a new
/// random one, which the command prints once.
pub fn password(file: Option<&Path>) -> Result<(SecretString, bool), MintError> {
    let Some(file) = file else {
        return Ok((SecretString::from(janus_store::tokens::generate()), true));
    };
    let text = super::read_text(file)?;
    let line = text.lines().next().unwrap_or_default();
    if line.chars().count() < MIN_PASSWORD {
        return Err(MintError::Invalid(format!(
            "{}: a PKCS#12 password is at least {MIN_PASSWORD} characters (its first line)",
            file.display()
        )));
    }
    Ok((SecretString::from(line.to_string()), false))
}

/// `minted` (the credential) and `ca_pem` (its admin CA) as PKCS#12 bytes,
/// the key under `alias`, encrypted with `password`.
pub fn encode(
    minted: &Minted,
    ca_pem: &str,
    alias: &str,
    password: &SecretString,
) -> Result<Vec<u8>, MintError> {
    let bad = |what: &str, e: &dyn std::fmt::Display| MintError::Invalid(format!("PKCS#12: {what}: {e}"));
    let key = PrivatePkcs8KeyDer::from_pem_slice(minted.key_pem.expose_secret().as_bytes())
        .map_err(|e| bad("the key is not PKCS#8 PEM", &e))?;
    let key = PrivateKey::from_der(key.secret_pkcs8_der()).map_err(|e| bad("the key", &e))?;
    let mut chain = Vec::new();
    for (what, pem) in [("the credential", minted.cert_pem.as_str()), ("the admin CA", ca_pem)] {
        let der = CertificateDer::from_pem_slice(pem.as_bytes()).map_err(|e| bad(what, &e))?;
        chain.push(Certificate::from_der(&der).map_err(|e| bad(what, &e))?);
    }
    let leaf_id = janus_core::pki::sha256_hex(chain[0].as_der()).into_bytes();
    let mut store = KeyStore::new();
    store.add_entry(alias, KeyStoreEntry::PrivateKeyChain(PrivateKeyChain::new(leaf_id, key, chain)));
    store
        .writer(password.expose_secret())
        .encryption_iterations(ITERATIONS)
        .mac_iterations(ITERATIONS)
        .write()
        .map_err(|e| bad("writing", &e))
}

/// Writes `bytes` to `PREFIX.p12` (0600), never over an existing file.
pub fn write(prefix: &Path, bytes: &[u8]) -> Result<PathBuf, MintError> {
    let path = super::with_suffix(prefix, "p12");
    if !janus_core::durable::create_exclusive(&path, bytes, 0o600)? {
        return Err(MintError::Exists(path));
    }
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_credential_reads_back_with_its_password_and_its_chain() {
        let ca = crate::certs::mint_admin_ca("test admin CA").unwrap();
        let now = janus_core::clock::now_utc();
        let uri = janus_admin::api::Scope::Read.uri();
        let cred =
            crate::certs::mint_admin(&ca, "alice", &[uri], now, now + time::Duration::days(1)).unwrap();
        let password = SecretString::from("correct horse".to_string());
        let bytes = encode(&cred, &ca.cert_pem, "alice", &password).unwrap();
        let read = KeyStore::from_pkcs12(&bytes, "correct horse", p12_keystore::Pkcs12ImportPolicy::Strict)
            .expect("reads back");
        let (alias, chain) = read.private_key_chain().expect("a key");
        assert_eq!(alias, "alice");
        assert_eq!(chain.certs().len(), 2, "the credential, then the admin CA");
        assert!(KeyStore::from_pkcs12(&bytes, "wrong", p12_keystore::Pkcs12ImportPolicy::Strict).is_err());
    }

    #[test]
    fn a_short_password_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("pw");
        janus_core::durable::write_atomic(&file, b"short\nlonger second line", 0o600).unwrap();
        assert!(matches!(password(Some(&file)), Err(MintError::Invalid(_))));
        let (generated, said) = password(None).unwrap();
        assert!(said && generated.expose_secret().len() >= MIN_PASSWORD);
    }
}

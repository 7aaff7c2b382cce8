//! A registration token as a node presented it ([`Presented`]): the
//! secret, its name in the ledger (the HMAC under the state's key) and its
//! fingerprint, each computed once, where the announcement enters the
//! store, and carried as one value through the admission.
//!
//! Invariants: the secret is a `SecretString` from the handler down (its
//! `Debug` says `[REDACTED]`, it is zeroed when dropped) and is read only
//! to find and blank its copies in `DIR/tokens`; no lookup, log line or
//! audit event uses it but through its MAC or fingerprint.

use std::io;

use secrecy::{ExposeSecret, SecretString};

use janus_core::pki::sha256_hex;

use crate::audit::FINGERPRINT_DIGITS;
use crate::ledger::{Ledger, Mac};

/// A presented registration token: never empty.
pub struct Presented {
    secret: SecretString,
    mac: Mac,
    /// Its SHA-256 (hex): its key in `tokens.meta.json`; its first 12
    /// digits are its fingerprint.
    sha256: String,
}

impl Presented {
    /// `secret` named by `ledger` and fingerprinted; `None` for no token
    /// (an empty one). The ledger's key is read (made, on a state that has
    /// none yet) once here.
    pub fn new(secret: SecretString, ledger: &Ledger) -> io::Result<Option<Presented>> {
        if secret.expose_secret().is_empty() {
            return Ok(None);
        }
        let mac = ledger.mac(secret.expose_secret())?;
        let sha256 = sha256_hex(secret.expose_secret().as_bytes());
        Ok(Some(Presented { secret, mac, sha256 }))
    }

    /// Its name in the ledger.
    pub fn mac(&self) -> &Mac {
        &self.mac
    }

    /// Its fingerprint in the audit trail and listings (12 hex digits).
    pub fn fingerprint(&self) -> &str {
        &self.sha256[..FINGERPRINT_DIGITS]
    }

    /// Its SHA-256 (hex): its key in `tokens.meta.json`.
    pub fn sha256(&self) -> &str {
        &self.sha256
    }

    /// The token itself: only to find its copies in `DIR/tokens`.
    pub(crate) fn expose(&self) -> &str {
        self.secret.expose_secret()
    }
}

impl std::fmt::Debug for Presented {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Presented").field("fingerprint", &self.fingerprint()).finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::token_fingerprint;

    #[test]
    fn a_presented_token_is_named_once_and_never_shown() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = Ledger::new(dir.path());
        assert!(Presented::new(SecretString::from(""), &ledger).unwrap().is_none(), "no token");
        let presented = Presented::new(SecretString::from("a-registration-token"), &ledger).unwrap().unwrap();
        assert_eq!(presented.mac(), &ledger.mac("a-registration-token").unwrap());
        assert_eq!(presented.fingerprint(), token_fingerprint("a-registration-token"));
        let shown = format!("{presented:?}");
        assert!(
            !shown.contains("a-registration-token") && shown.contains(presented.fingerprint()),
            "{shown}"
        );
    }
}

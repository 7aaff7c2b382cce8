//! Certificates and keys as the fleet uses them: PEM and DER, fingerprints,
//! the fleet's root and signed bundle (loaded and verified), the identity
//! the endpoint serves. Invariant: PEM is read with rustls-pki-types'
//! PemObject; every signature is checked with the one crypto provider.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use rustls::client::danger::ServerCertVerifier;
use rustls::crypto::CryptoProvider;
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use x509_parser::prelude::{FromDer, X509Certificate};

/// The name a node asks for when it checks the endpoint through its fleet's root.
pub const FLEET_CONTROLLER_NAME: &str = "controller.fleet.janus";

/// Why a certificate, key or bundle is refused.
#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    /// The file cannot be read.
    #[error("cannot read {path}: {cause}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        cause: std::io::Error,
    },
    /// No `CERTIFICATE` block.
    #[error("{what} holds no PEM certificate")]
    NoCertificate {
        /// What was read (a file, a field, a certificate).
        what: String,
    },
    /// Not DER x509-parser reads.
    #[error("{what} is not a certificate x509 can parse: {reason}")]
    Unparsable {
        /// What was read (a file, a field, a certificate).
        what: String,
        /// Why.
        reason: String,
    },
    /// Not a CA certificate.
    #[error("{what} is not a CA certificate (basicConstraints CA:TRUE)")]
    NotCa {
        /// What was read (a file, a field, a certificate).
        what: String,
    },
    /// Not self-signed.
    #[error("{what} is not self-signed")]
    NotSelfSigned {
        /// What was read (a file, a field, a certificate).
        what: String,
    },
    /// The bundle does not verify; the text says how.
    #[error("{0}")]
    Bundle(String),
    /// The key is unusable or does not match.
    #[error("{0}")]
    Key(String),
    /// The endpoint's chain would not pass a node's fleet-mode check.
    #[error("{0}")]
    NotForFleet(String),
    /// Past its validity.
    #[error("{what} expired at {not_after}")]
    Expired {
        /// What was read (a file, a field, a certificate).
        what: String,
        /// When it expired.
        not_after: String,
    },
}

/// Lowercase hex SHA-256: the console's `pki: this node's CA: SHA-256 <hex>` format.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// Lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// Whether `s` is exactly `digits` lowercase hex digits, as [`hex`] writes
/// them: the one check of every id, MAC and fingerprint read back (a file
/// name made of one never leaves its directory).
pub fn is_hex(s: &str, digits: usize) -> bool {
    s.len() == digits && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The first PEM certificate in `pem`, as the node reads one (first block wins).
pub fn first_certificate(pem: &[u8], what: &str) -> Result<CertificateDer<'static>, PkiError> {
    all_certificates(pem, what)?
        .into_iter()
        .next()
        .ok_or_else(|| PkiError::NoCertificate { what: what.into() })
}

/// Every `CERTIFICATE` block in `pem`, in order (none is not an error).
pub fn all_certificates(pem: &[u8], what: &str) -> Result<Vec<CertificateDer<'static>>, PkiError> {
    CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| PkiError::Unparsable { what: what.into(), reason: e.to_string() })
}

/// Parses one DER certificate; `what` names it in errors.
pub fn parse<'a>(der: &'a [u8], what: &str) -> Result<X509Certificate<'a>, PkiError> {
    match X509Certificate::from_der(der) {
        Ok((_, cert)) => Ok(cert),
        Err(e) => Err(PkiError::Unparsable { what: what.into(), reason: e.to_string() }),
    }
}

fn is_ca(cert: &X509Certificate<'_>) -> bool {
    matches!(cert.basic_constraints(), Ok(Some(bc)) if bc.value.ca)
}

/// A node's CA certificate as announced: parsed, a CA, fingerprinted.
#[derive(Debug, Clone)]
pub struct NodeCa {
    /// The SHA-256 of its DER, lowercase hex, as the node's console prints it.
    pub sha256: String,
}

impl NodeCa {
    /// Exactly one PEM `CERTIFICATE` block with nothing but whitespace
    /// around it (text outside the block would reach an admin's terminal;
    /// a second certificate would be stored and never checked), holding a
    /// CA certificate.
    pub fn check(pem: &str) -> Result<Self, PkiError> {
        let what = "ca_cert_pem";
        let not_one_block = || PkiError::Unparsable {
            what: what.into(),
            reason: "not exactly one PEM CERTIFICATE block with only whitespace around it".into(),
        };
        let block = pem.trim_matches(|c: char| c.is_ascii_whitespace());
        let body = block
            .strip_prefix("-----BEGIN CERTIFICATE-----")
            .and_then(|rest| rest.strip_suffix("-----END CERTIFICATE-----"))
            .ok_or_else(not_one_block)?;
        if !body.bytes().all(|b| {
            b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=' | b'\n' | b'\r' | b' ' | b'\t')
        }) {
            return Err(not_one_block());
        }
        let der = first_certificate(block.as_bytes(), what)?;
        let cert = parse(&der, what)?;
        if !is_ca(&cert) {
            return Err(PkiError::NotCa { what: what.into() });
        }
        Ok(NodeCa { sha256: sha256_hex(&der) })
    }
}

/// The payload of a signed bundle (unknown fields, such as `limits`, are kept
/// out of the way: the node ignores them too).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BundlePayload {
    /// The bundle version; 0 is refused.
    pub version: u64,
    /// When it was issued (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issued: Option<String>,
    /// The issuing CAs (PEM), each signed by the root.
    pub issuing_cas: Vec<String>,
}

/// The signed bundle file: `{payload, signature}`, both standard base64.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SignedBundle {
    /// The payload JSON, standard base64.
    pub payload: String,
    /// The root's ECDSA-SHA256 signature of the payload, DER, standard base64.
    pub signature: String,
}

/// Verifies `bundle_bytes` against `root_der` exactly as the node's
/// `VerifyBundle` does, and returns the payload.
pub fn verify_bundle(root_der: &[u8], bundle_bytes: &[u8]) -> Result<BundlePayload, PkiError> {
    let bad = |m: String| PkiError::Bundle(m);
    let root = parse(root_der, "the fleet root")?;
    let signed: SignedBundle = serde_json::from_slice(bundle_bytes)
        .map_err(|e| bad(format!("the bundle is not {{payload, signature}} JSON: {e}")))?;
    let payload = BASE64
        .decode(signed.payload.as_bytes())
        .map_err(|e| bad(format!("the bundle's payload is not standard base64: {e}")))?;
    let signature = BASE64
        .decode(signed.signature.as_bytes())
        .map_err(|e| bad(format!("the bundle's signature is not standard base64: {e}")))?;
    let key = root.public_key().subject_public_key.data.as_ref();
    if !crate::tls::verify_ecdsa_sha256(key, &payload, &signature) {
        return Err(bad(
            "the bundle's signature does not verify with the fleet root's key (ECDSA-SHA256, DER)".into(),
        ));
    }
    let body: BundlePayload = serde_json::from_slice(&payload)
        .map_err(|e| bad(format!("the bundle's payload is not a bundle: {e}")))?;
    if body.version == 0 {
        return Err(bad("the bundle has no version".into()));
    }
    if let Some(issued) = &body.issued {
        let rfc3339 = &time::format_description::well_known::Rfc3339;
        time::OffsetDateTime::parse(issued, rfc3339)
            .map_err(|_| bad(format!("the bundle's issued time {issued:?} is not RFC 3339")))?;
    }
    for (i, pem) in body.issuing_cas.iter().enumerate() {
        let what = format!("issuing CA {i}");
        let der = first_certificate(pem.as_bytes(), &what)?;
        let ca = parse(&der, &what)?;
        if !is_ca(&ca) || ca.verify_signature(Some(root.public_key())).is_err() {
            return Err(bad(format!("issuing CA {i} ({}) isn't a CA the fleet's root signed", ca.subject())));
        }
    }
    Ok(body)
}

/// What a client certificate names: its first common name (when it has
/// one as text) and the URIs among its subject alternative names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Names {
    /// The subject's first common name.
    pub common_name: Option<String>,
    /// Its URI subject alternative names, in order.
    pub uris: Vec<String>,
}

/// The [`Names`] of the certificate `der`; `what` names it in an error.
pub fn names_of(der: &[u8], what: &str) -> Result<Names, PkiError> {
    let cert = parse(der, what)?;
    let common_name =
        cert.subject().iter_common_name().next().and_then(|cn| cn.as_str().ok()).map(str::to_string);
    let uris = match cert.subject_alternative_name() {
        Ok(Some(san)) => san
            .value
            .general_names
            .iter()
            .filter_map(|n| match n {
                x509_parser::extensions::GeneralName::URI(uri) => Some(uri.to_string()),
                _ => None,
            })
            .collect(),
        Ok(None) => Vec::new(),
        Err(e) => {
            return Err(PkiError::Unparsable {
                what: what.to_string(),
                reason: format!("its subject alternative name: {e}"),
            });
        }
    };
    Ok(Names { common_name, uris })
}

/// Whether `issuer`'s key signed `der` (both certificates, DER); false
/// when either does not parse.
pub fn signed_by(der: &[u8], issuer: &[u8]) -> bool {
    let (Ok(cert), Ok(issuer)) = (parse(der, "certificate"), parse(issuer, "issuer")) else { return false };
    cert.verify_signature(Some(issuer.public_key())).is_ok()
}

/// Checks that `der` is a self-signed CA certificate, as the node's `Fleet.Set` does.
pub fn check_self_signed_ca(der: &[u8], what: &str) -> Result<(), PkiError> {
    let cert = parse(der, what)?;
    if !is_ca(&cert) {
        return Err(PkiError::NotCa { what: what.into() });
    }
    if cert.verify_signature(None).is_err() {
        return Err(PkiError::NotSelfSigned { what: what.into() });
    }
    Ok(())
}

/// A fleet's trust as the endpoint hands it out: checked once, served many times.
#[derive(Debug, Clone)]
pub struct Fleet {
    /// The text of `root.crt`, byte for byte.
    pub root_pem: String,
    /// The root certificate, DER.
    pub root_der: CertificateDer<'static>,
    /// The bytes of `bundle.json`, byte for byte.
    pub bundle: Vec<u8>,
    /// The bundle's version.
    pub bundle_version: u64,
    /// The root's SHA-256, lowercase hex.
    pub root_sha256: String,
}

impl Fleet {
    /// Loads and checks `dir/root.crt` and `dir/bundle.json`.
    pub fn load(dir: &Path) -> Result<Self, PkiError> {
        let root_path = dir.join("root.crt");
        let bundle_path = dir.join("bundle.json");
        let root_bytes = read(&root_path)?;
        let bundle = read(&bundle_path)?;
        let root_pem = String::from_utf8(root_bytes).map_err(|_| PkiError::Unparsable {
            what: root_path.display().to_string(),
            reason: "not UTF-8 text".into(),
        })?;
        let what = root_path.display().to_string();
        let root_der = first_certificate(root_pem.as_bytes(), &what)?;
        check_self_signed_ca(&root_der, &what)?;
        let payload = verify_bundle(&root_der, &bundle).map_err(|e| match e {
            PkiError::Bundle(m) => PkiError::Bundle(format!("{}: {m}", bundle_path.display())),
            other => other,
        })?;
        Ok(Fleet {
            root_sha256: sha256_hex(&root_der),
            root_pem,
            root_der,
            bundle,
            bundle_version: payload.version,
        })
    }
}

/// The endpoint's own certificate chain and key, checked.
#[derive(Debug, Clone)]
pub struct ServedIdentity {
    /// The chain and signing key, as rustls serves them.
    pub certified: Arc<CertifiedKey>,
    /// Unix seconds.
    pub not_after: i64,
}

impl ServedIdentity {
    /// Loads and checks a chain and its key: the key matches, the leaf is valid now.
    pub fn load(cert_path: &Path, key_path: &Path, provider: &CryptoProvider) -> Result<Self, PkiError> {
        let cert_what = cert_path.display().to_string();
        let chain = all_certificates(&read(cert_path)?, &cert_what)?;
        if chain.is_empty() {
            return Err(PkiError::NoCertificate { what: cert_what });
        }
        let key = PrivateKeyDer::from_pem_slice(&read(key_path)?)
            .map_err(|e| PkiError::Key(format!("{} holds no usable private key: {e}", key_path.display())))?;
        let signing_key = provider
            .key_provider
            .load_private_key(key)
            .map_err(|e| PkiError::Key(format!("{} is not a key rustls can use: {e}", key_path.display())))?;
        let certified = CertifiedKey::new(chain, signing_key);
        certified.keys_match().map_err(|_| {
            PkiError::Key(format!(
                "the key {} does not match the certificate {}",
                key_path.display(),
                cert_path.display()
            ))
        })?;
        let leaf = parse(&certified.cert[0], &cert_what)?;
        let not_after = leaf.validity().not_after.timestamp();
        if !leaf.validity().is_valid() {
            return Err(PkiError::Expired {
                what: cert_what,
                not_after: leaf.validity().not_after.to_string(),
            });
        }
        Ok(ServedIdentity { certified: Arc::new(certified), not_after })
    }

    /// Whether a node provisioned with `fleet_root` accepts this chain in fleet
    /// mode (SNI and name `controller.fleet.janus`); the error says why not.
    pub fn verify_for_fleet(
        &self,
        fleet_root: &CertificateDer<'static>,
        provider: Arc<CryptoProvider>,
    ) -> Result<(), PkiError> {
        let refused = |e: &dyn std::fmt::Display| PkiError::NotForFleet(e.to_string());
        let mut roots = rustls::RootCertStore::empty();
        roots.add(fleet_root.clone()).map_err(|e| refused(&e))?;
        let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
            .build()
            .map_err(|e| refused(&e))?;
        let name = ServerName::try_from(FLEET_CONTROLLER_NAME).expect("a valid DNS name");
        verifier
            .verify_server_cert(
                &self.certified.cert[0],
                &self.certified.cert[1..],
                &name,
                &[],
                UnixTime::now(),
            )
            .map(|_| ())
            .map_err(|e| refused(&e))
    }
}

fn read(path: &Path) -> Result<Vec<u8>, PkiError> {
    std::fs::read(path).map_err(|cause| PkiError::Read { path: path.to_path_buf(), cause })
}

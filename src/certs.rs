//! `certs`: minting a development fleet, the endpoint's `controller.fleet.janus`
//! certificate and node CAs with rcgen, in the profiles a real node accepts:
//! CA certificates with basic constraints CA:TRUE and keyCertSign, a leaf
//! for the name `controller.fleet.janus` (plus any SANs asked for) signed by
//! the fleet's issuing CA, and a bundle signed by the root.
//!
//! Invariants: private keys are written 0600; nothing that exists is silently
//! overwritten; every key is ECDSA P-256 and every signature ECDSA-SHA256.
//! The minting functions return PEM text and write nothing, so tests mint
//! their certificates at run time with the very code users run.

use std::path::{Path, PathBuf};

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, PKCS_ECDSA_P256_SHA256, SerialNumber, SigningKey,
};
use time::{Duration, OffsetDateTime};

use crate::durable::write_atomic;
use crate::pki::{self, BundlePayload, FLEET_CONTROLLER_NAME, SignedBundle};

/// Why minting or writing certificates failed.
#[derive(Debug, thiserror::Error)]
pub enum CertsError {
    /// rcgen refused.
    #[error("{0}")]
    Mint(#[from] rcgen::Error),
    /// A file could not be read or written.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// A certificate, key or bundle does not pass our checks.
    #[error("{0}")]
    Pki(#[from] pki::PkiError),
    /// The file exists; nothing is overwritten.
    #[error("{} exists already; refusing to overwrite it", .0.display())]
    Exists(PathBuf),
    /// Arguments or files that cannot be used.
    #[error("{0}")]
    Invalid(String),
}

/// A certificate and its private key, both PEM.
#[derive(Clone)]
pub struct Minted {
    /// The certificate (PEM; the chain for an endpoint).
    pub cert_pem: String,
    /// Its private key (PEM).
    pub key_pem: String,
}

impl std::fmt::Debug for Minted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Minted")
            .field("cert_pem", &self.cert_pem)
            .field("key_pem", &crate::protocol::redacted(&self.key_pem))
            .finish()
    }
}

/// A development fleet: root, issuing CA and the signed bundle.
#[derive(Debug, Clone)]
pub struct FleetMaterial {
    /// The self-signed root.
    pub root: Minted,
    /// The issuing CA, signed by the root.
    pub issuing: Minted,
    /// `bundle.json`, signed by the root.
    pub bundle_json: Vec<u8>,
}

const DAY: i64 = 24 * 60 * 60;

fn params(
    common_name: &str,
    sans: Vec<String>,
    valid_days: i64,
    backdate: Duration,
) -> Result<CertificateParams, rcgen::Error> {
    let mut params = CertificateParams::new(sans)?;
    params.distinguished_name = rcgen::DistinguishedName::new();
    params.distinguished_name.push(DnType::CommonName, common_name);
    let now = OffsetDateTime::now_utc();
    params.not_before = now - backdate;
    params.not_after = now + Duration::seconds(valid_days * DAY);
    let mut serial: [u8; 16] = rand::random();
    serial[0] &= 0x7f;
    params.serial_number = Some(SerialNumber::from_slice(&serial));
    Ok(params)
}

fn new_key() -> Result<KeyPair, rcgen::Error> {
    KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)
}

/// Root (20 years, CA, keyCertSign+cRLSign), issuing CA (2 years, pathlen 0)
/// and a bundle of `version` listing the issuing CA.
pub fn mint_fleet(name: &str, version: u64) -> Result<FleetMaterial, CertsError> {
    let root_key = new_key()?;
    let mut root = params(&format!("{name} root"), vec![], 20 * 365, Duration::minutes(5))?;
    root.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    root.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let root_cert = root.self_signed(&root_key)?;
    let root_issuer = Issuer::new(root, &root_key);

    let issuing_key = new_key()?;
    let mut issuing = params(&format!("{name} issuing CA"), vec![], 2 * 365, Duration::minutes(5))?;
    issuing.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    issuing.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    issuing.use_authority_key_identifier_extension = true;
    let issuing_cert = issuing.signed_by(&issuing_key, &root_issuer)?;

    let root = Minted { cert_pem: root_cert.pem(), key_pem: root_key.serialize_pem() };
    let issuing = Minted { cert_pem: issuing_cert.pem(), key_pem: issuing_key.serialize_pem() };
    let bundle_json = sign_bundle(&root.key_pem, std::slice::from_ref(&issuing.cert_pem), version)?;
    Ok(FleetMaterial { root, issuing, bundle_json })
}

/// `bundle.json`: `{payload, signature}`, standard base64, the signature
/// ECDSA-SHA256 (DER) by the root over the exact payload bytes.
pub fn sign_bundle(root_key_pem: &str, issuing_cas: &[String], version: u64) -> Result<Vec<u8>, CertsError> {
    if version == 0 {
        return Err(CertsError::Invalid("a bundle's version must be greater than 0".into()));
    }
    let root_key = KeyPair::from_pem(root_key_pem)?;
    let payload = BundlePayload {
        version,
        issued: Some(crate::clock::now_rfc3339()),
        issuing_cas: issuing_cas.to_vec(),
    };
    let payload = serde_json::to_vec(&payload).expect("plain data serialises");
    let signature = root_key.sign(&payload)?;
    let signed = SignedBundle { payload: BASE64.encode(&payload), signature: BASE64.encode(&signature) };
    let mut json = serde_json::to_vec_pretty(&signed).expect("plain data serialises");
    json.push(b'\n');
    Ok(json)
}

/// The endpoint's certificate: CN and SAN `controller.fleet.janus` (plus
/// `extra_sans`, names or IPs), CA:FALSE, digitalSignature, serverAuth, signed
/// by the issuing CA. The PEM is the leaf followed by the issuing CA.
pub fn mint_controller(issuing: &Minted, days: i64, extra_sans: &[String]) -> Result<Minted, CertsError> {
    let issuing_key = KeyPair::from_pem(&issuing.key_pem)?;
    let issuer = Issuer::from_ca_cert_pem(&issuing.cert_pem, &issuing_key)?;
    let key = new_key()?;
    let mut sans = vec![FLEET_CONTROLLER_NAME.to_string()];
    sans.extend(extra_sans.iter().cloned());
    let mut leaf = params(FLEET_CONTROLLER_NAME, sans, days, Duration::minutes(5))?;
    leaf.is_ca = IsCa::ExplicitNoCa;
    leaf.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    leaf.use_authority_key_identifier_extension = true;
    let cert = leaf.signed_by(&key, &issuer)?;
    Ok(Minted {
        cert_pem: format!("{}{}", cert.pem(), ensure_newline(&issuing.cert_pem)),
        key_pem: key.serialize_pem(),
    })
}

/// A node's CA with the real node's profile: self-signed P-256,
/// `CN=Janus node CA: HOST`, CA:TRUE, 10 years, backdated an hour.
pub fn mint_node_ca(hostname: &str) -> Result<Minted, CertsError> {
    let key = new_key()?;
    let mut ca = params(&format!("Janus node CA: {hostname}"), vec![], 10 * 365, Duration::hours(1))?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages =
        vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::CrlSign];
    let cert = ca.self_signed(&key)?;
    Ok(Minted { cert_pem: cert.pem(), key_pem: key.serialize_pem() })
}

/// The node's console line for a CA certificate.
pub fn console_line(cert_pem: &str) -> Result<String, CertsError> {
    Ok(format!("pki: this node's CA: SHA-256 {}", fingerprint(cert_pem)?))
}

fn ensure_newline(s: &str) -> String {
    if s.ends_with('\n') { s.to_string() } else { format!("{s}\n") }
}

/// Writes a new file, refusing to replace one that exists.
pub fn write_new(path: &Path, bytes: &[u8], mode: u32) -> Result<(), CertsError> {
    if path.exists() {
        return Err(CertsError::Exists(path.to_path_buf()));
    }
    write_atomic(path, bytes, mode)?;
    Ok(())
}

/// Writes a fleet into `dir` (created 0700 when missing), refusing to touch
/// an existing one.
pub fn write_fleet(dir: &Path, fleet: &FleetMaterial) -> Result<(), CertsError> {
    crate::durable::ensure_private_dir(dir)?;
    let files: [(&str, &[u8], u32); 5] = [
        ("root.crt", fleet.root.cert_pem.as_bytes(), 0o644),
        ("root.key", fleet.root.key_pem.as_bytes(), 0o600),
        ("issuing.crt", fleet.issuing.cert_pem.as_bytes(), 0o644),
        ("issuing.key", fleet.issuing.key_pem.as_bytes(), 0o600),
        ("bundle.json", &fleet.bundle_json, 0o644),
    ];
    if let Some((name, _, _)) = files.iter().find(|(name, _, _)| dir.join(name).exists()) {
        return Err(CertsError::Exists(dir.join(name)));
    }
    for (name, bytes, mode) in files {
        write_new(&dir.join(name), bytes, mode)?;
    }
    Ok(())
}

/// Writes `PREFIX.crt` (0644) and `PREFIX.key` (0600).
pub fn write_pair(prefix: &Path, minted: &Minted, replace: bool) -> Result<(PathBuf, PathBuf), CertsError> {
    let crt = with_suffix(prefix, "crt");
    let key = with_suffix(prefix, "key");
    if !replace {
        for p in [&crt, &key] {
            if p.exists() {
                return Err(CertsError::Exists(p.clone()));
            }
        }
    }
    // The key first: a reader that finds the new certificate finds its key.
    write_atomic(&key, minted.key_pem.as_bytes(), 0o600)?;
    write_atomic(&crt, minted.cert_pem.as_bytes(), 0o644)?;
    Ok((crt, key))
}

/// `prefix` with `.suffix` appended (`out` becomes `out.crt`).
pub fn with_suffix(prefix: &Path, suffix: &str) -> PathBuf {
    let mut s = prefix.as_os_str().to_owned();
    s.push(".");
    s.push(suffix);
    PathBuf::from(s)
}

/// `certs` subcommands, as the command line gives them.
#[derive(Debug, Clone)]
pub enum CertsCommand {
    /// A development fleet in `out`; with `bundle_version`, only its bundle re-signed.
    Fleet {
        /// Where to write the fleet.
        out: PathBuf,
        /// The fleet's name, in its certificates' common names.
        name: String,
        /// Re-sign only the bundle, at this (higher) version.
        bundle_version: Option<u64>,
    },
    /// The endpoint's certificate, `out.crt` and `out.key`, from `fleet`'s issuing CA.
    Controller {
        /// The fleet directory (`issuing.crt`, `issuing.key`).
        fleet: PathBuf,
        /// Writes `out.crt` and `out.key`.
        out: PathBuf,
        /// Validity in days.
        days: i64,
        /// Extra subject alternative names.
        sans: Vec<String>,
        /// Renew only when the certificate expires within this.
        renew_within: Option<std::time::Duration>,
    },
    /// A node CA, `out.crt` and `out.key`.
    NodeCa {
        /// The node's hostname.
        name: String,
        /// Writes `out.crt` and `out.key`.
        out: PathBuf,
    },
}

/// Runs a `certs` subcommand; the returned text is what it did, for stdout.
pub fn run(command: &CertsCommand) -> Result<String, CertsError> {
    match command {
        CertsCommand::Fleet { out, name, bundle_version } => match bundle_version {
            None => {
                let fleet = mint_fleet(name, 1)?;
                write_fleet(out, &fleet)?;
                Ok(format!(
                    "wrote the fleet {:?} to {} (bundle version 1); root SHA-256 {}\n\
                     Its keys (root.key, issuing.key) sign everything the fleet trusts: keep them offline; \
                     the endpoint needs only root.crt and bundle.json",
                    crate::terminal::escape(name),
                    out.display(),
                    fingerprint(&fleet.root.cert_pem)?
                ))
            }
            Some(version) => resign_bundle(out, *version),
        },
        CertsCommand::Controller { fleet, out, days, sans, renew_within } => {
            let crt = with_suffix(out, "crt");
            if let Some(within) = renew_within
                && crt.exists()
            {
                let pem = std::fs::read(&crt).map_err(|e| crate::durable::with_path(e, &crt))?;
                let der = pki::first_certificate(&pem, &crt.display().to_string())?;
                let not_after =
                    pki::parse(&der, &crt.display().to_string())?.validity().not_after.timestamp();
                let deadline = OffsetDateTime::now_utc().unix_timestamp() + within.as_secs() as i64;
                if not_after > deadline {
                    return Ok(format!(
                        "{} is valid until {}: not renewed",
                        crt.display(),
                        crate::clock::unix_to_rfc3339(not_after)
                    ));
                }
            }
            let issuing = read_minted(&fleet.join("issuing.crt"), &fleet.join("issuing.key"))?;
            let minted = mint_controller(&issuing, *days, sans)?;
            // The directory it writes into, as `certs fleet` makes its own.
            if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
                crate::durable::ensure_private_dir(dir)?;
            }
            let (crt, key) = write_pair(out, &minted, renew_within.is_some()).map_err(|e| match e {
                CertsError::Exists(path) => CertsError::Invalid(format!(
                    "{} exists already; refusing to overwrite it. To renew it: --renew-within 10d \
                     (replaces it when it expires within 10 days; --renew-within 400d replaces it now)",
                    path.display()
                )),
                other => other,
            })?;
            Ok(format!("wrote {} and {} (controller.fleet.janus, {days} days)", crt.display(), key.display()))
        }
        CertsCommand::NodeCa { name, out } => {
            let minted = mint_node_ca(name)?;
            let (crt, key) = write_pair(out, &minted, false)?;
            Ok(format!("wrote {} and {}\n{}", crt.display(), key.display(), console_line(&minted.cert_pem)?))
        }
    }
}

fn resign_bundle(dir: &Path, version: u64) -> Result<String, CertsError> {
    let root_key = read_text(&dir.join("root.key"))?;
    let issuing = read_text(&dir.join("issuing.crt"))?;
    let root_der = pki::first_certificate(read_text(&dir.join("root.crt"))?.as_bytes(), "root.crt")?;
    let bundle_path = dir.join("bundle.json");
    if let Ok(existing) = std::fs::read(&bundle_path) {
        let current = pki::verify_bundle(&root_der, &existing)?.version;
        if version <= current {
            return Err(CertsError::Invalid(format!(
                "{} is at version {current}: a re-signed bundle needs a higher version",
                bundle_path.display()
            )));
        }
    }
    let bundle = sign_bundle(&root_key, &[issuing], version)?;
    pki::verify_bundle(&root_der, &bundle)?;
    write_atomic(&bundle_path, &bundle, 0o644)?;
    Ok(format!("re-signed {} at version {version}", bundle_path.display()))
}

/// A file's text; the error names the file.
pub fn read_text(path: &Path) -> Result<String, CertsError> {
    std::fs::read_to_string(path).map_err(|e| CertsError::Io(crate::durable::with_path(e, path)))
}

/// A certificate and key pair from two PEM files.
pub fn read_minted(cert: &Path, key: &Path) -> Result<Minted, CertsError> {
    Ok(Minted { cert_pem: read_text(cert)?, key_pem: read_text(key)? })
}

fn fingerprint(cert_pem: &str) -> Result<String, CertsError> {
    Ok(pki::sha256_hex(&pki::first_certificate(cert_pem.as_bytes(), "certificate")?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_a_key() {
        let minted = mint_node_ca("edge-1").unwrap();
        let shown = format!("{minted:?}");
        assert!(!shown.contains("PRIVATE KEY") && shown.contains("<redacted>"), "{shown}");
    }

    #[test]
    fn minted_fleet_passes_our_own_checks() {
        let fleet = mint_fleet("Test fleet", 7).unwrap();
        let root = pki::first_certificate(fleet.root.cert_pem.as_bytes(), "root").unwrap();
        pki::check_self_signed_ca(&root, "root").unwrap();
        let payload = pki::verify_bundle(&root, &fleet.bundle_json).unwrap();
        assert_eq!(payload.version, 7);
        assert!(mint_fleet("x", 0).is_err());
    }

    #[test]
    fn node_ca_is_a_ca_and_console_line_matches() {
        let ca = mint_node_ca("edge-2").unwrap();
        let checked = pki::NodeCa::check(&ca.cert_pem).unwrap();
        assert_eq!(
            console_line(&ca.cert_pem).unwrap(),
            format!("pki: this node's CA: SHA-256 {}", checked.sha256)
        );
    }

    #[test]
    fn a_bundle_signed_by_another_root_is_refused() {
        let a = mint_fleet("A", 1).unwrap();
        let b = mint_fleet("B", 1).unwrap();
        let root_a = pki::first_certificate(a.root.cert_pem.as_bytes(), "root").unwrap();
        assert!(pki::verify_bundle(&root_a, &b.bundle_json).is_err());
    }
}

//! Minting with rcgen, in the profiles a real node accepts: a development
//! fleet (root, issuing CA, signed bundle), the endpoint's
//! `controller.fleet.janus` certificate, and node CAs. Used by the `certs`
//! command (whose module writes them to files, and is their one public
//! path), the agent (a node's own CA) and tests.
//!
//! Invariants: every key is ECDSA P-256 and every signature ECDSA-SHA256;
//! the minting functions return PEM text and write nothing, so tests mint
//! their certificates at run time with the very code users run.

use std::path::PathBuf;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, PKCS_ECDSA_P256_SHA256, SerialNumber, SigningKey,
};
use secrecy::{ExposeSecret, SecretString};
use time::Duration;

use super::{BundlePayload, FLEET_CONTROLLER_NAME, PkiError, SignedBundle};

/// Why minting or writing certificates failed.
#[derive(Debug, thiserror::Error)]
pub enum MintError {
    /// rcgen refused.
    #[error(transparent)]
    Mint(#[from] rcgen::Error),
    /// A file could not be read or written.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// A certificate, key or bundle does not pass our checks.
    #[error(transparent)]
    Pki(#[from] PkiError),
    /// The file exists; nothing is overwritten.
    #[error("{} exists already; refusing to overwrite it", .0.display())]
    Exists(PathBuf),
    /// Arguments or files that cannot be used.
    #[error("{0}")]
    Invalid(String),
}

/// A certificate and its private key, both PEM (`Debug` never shows the key).
#[derive(Debug, Clone)]
pub struct Minted {
    /// The certificate (PEM; the chain for an endpoint).
    pub cert_pem: String,
    /// Its private key (PEM).
    pub key_pem: SecretString,
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
    let now = crate::clock::now_utc();
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
pub fn mint_fleet(name: &str, version: u64) -> Result<FleetMaterial, MintError> {
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

    let root = Minted { cert_pem: root_cert.pem(), key_pem: root_key.serialize_pem().into() };
    let issuing = Minted { cert_pem: issuing_cert.pem(), key_pem: issuing_key.serialize_pem().into() };
    let bundle_json =
        sign_bundle(root.key_pem.expose_secret(), std::slice::from_ref(&issuing.cert_pem), version)?;
    Ok(FleetMaterial { root, issuing, bundle_json })
}

/// `bundle.json`: `{payload, signature}`, standard base64, the signature
/// ECDSA-SHA256 (DER) by the root over the exact payload bytes.
pub fn sign_bundle(root_key_pem: &str, issuing_cas: &[String], version: u64) -> Result<Vec<u8>, MintError> {
    if version == 0 {
        return Err(MintError::Invalid("a bundle's version must be greater than 0".into()));
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

/// Refuses a SAN a TLS client could never match: a `host:port` (the port
/// would become part of a DNS name), or text that is neither an IP address
/// nor a DNS name (a leading `*.` wildcard allowed).
fn check_san(san: &str) -> Result<(), MintError> {
    if san.parse::<std::net::IpAddr>().is_ok() {
        return Ok(());
    }
    let refuse = |why: String| Err(MintError::Invalid(format!("--san {san:?}: {why}")));
    if let Ok(addr) = san.parse::<std::net::SocketAddr>() {
        return refuse(format!("a host:port, not a name: give the host alone (--san {})", addr.ip()));
    }
    if let Some((host, port)) = san.rsplit_once(':')
        && !port.is_empty()
        && port.bytes().all(|b| b.is_ascii_digit())
    {
        return refuse(format!("a host:port, not a name: give the host alone (--san {host})"));
    }
    let name = san.strip_prefix("*.").unwrap_or(san);
    if rustls_pki_types::DnsName::try_from(name).is_err() || name.parse::<std::net::IpAddr>().is_ok() {
        return refuse("neither an IP address nor a DNS name".into());
    }
    Ok(())
}

/// The endpoint's certificate: CN and SAN `controller.fleet.janus` (plus
/// `extra_sans`, names or IPs), CA:FALSE, digitalSignature, serverAuth, signed
/// by the issuing CA. The PEM is the leaf followed by the issuing CA.
pub fn mint_controller(issuing: &Minted, days: i64, extra_sans: &[String]) -> Result<Minted, MintError> {
    let issuing_key = KeyPair::from_pem(issuing.key_pem.expose_secret())?;
    let issuer = Issuer::from_ca_cert_pem(&issuing.cert_pem, &issuing_key)?;
    for san in extra_sans {
        check_san(san)?;
    }
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
        key_pem: key.serialize_pem().into(),
    })
}

/// An admin CA for `serve --admin-listen`: self-signed P-256, CA:TRUE,
/// pathlen 0, 10 years. It signs orchestrators' credentials only: it is
/// not the fleet's root, and nodes never trust it.
pub fn mint_admin_ca(name: &str) -> Result<Minted, MintError> {
    let key = new_key()?;
    let mut ca = params(name, vec![], 10 * 365, Duration::minutes(5))?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let cert = ca.self_signed(&key)?;
    Ok(Minted { cert_pem: cert.pem(), key_pem: key.serialize_pem().into() })
}

/// An admin's client certificate, signed by `admin_ca`: CN `name`,
/// clientAuth, what it may do as URI SANs (`scope_uris`), valid from
/// `not_before` to `not_after`.
pub fn mint_admin(
    admin_ca: &Minted,
    name: &str,
    scope_uris: &[String],
    not_before: time::OffsetDateTime,
    not_after: time::OffsetDateTime,
) -> Result<Minted, MintError> {
    let ca_key = KeyPair::from_pem(admin_ca.key_pem.expose_secret())?;
    let issuer = Issuer::from_ca_cert_pem(&admin_ca.cert_pem, &ca_key)?;
    let key = new_key()?;
    let mut leaf = params(name, vec![], 1, Duration::ZERO)?;
    (leaf.not_before, leaf.not_after) = (not_before, not_after);
    for uri in scope_uris {
        leaf.subject_alt_names.push(rcgen::SanType::URI(uri.as_str().try_into()?));
    }
    leaf.is_ca = IsCa::ExplicitNoCa;
    leaf.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    leaf.use_authority_key_identifier_extension = true;
    let cert = leaf.signed_by(&key, &issuer)?;
    Ok(Minted { cert_pem: cert.pem(), key_pem: key.serialize_pem().into() })
}

/// A node's CA with the real node's profile: self-signed P-256,
/// `CN=Janus node CA: HOST`, CA:TRUE, 10 years, backdated an hour.
pub fn mint_node_ca(hostname: &str) -> Result<Minted, MintError> {
    let key = new_key()?;
    let mut ca = params(&format!("Janus node CA: {hostname}"), vec![], 10 * 365, Duration::hours(1))?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages =
        vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::CrlSign];
    let cert = ca.self_signed(&key)?;
    Ok(Minted { cert_pem: cert.pem(), key_pem: key.serialize_pem().into() })
}

/// The node's console line for a CA certificate.
pub fn console_line(cert_pem: &str) -> Result<String, MintError> {
    Ok(format!("pki: this node's CA: SHA-256 {}", fingerprint(cert_pem)?))
}

fn ensure_newline(s: &str) -> String {
    if s.ends_with('\n') { s.to_string() } else { format!("{s}\n") }
}

fn fingerprint(cert_pem: &str) -> Result<String, MintError> {
    Ok(super::sha256_hex(&super::first_certificate(cert_pem.as_bytes(), "certificate")?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pki;

    #[test]
    fn a_san_is_an_ip_or_a_dns_name_never_a_host_port() {
        for good in ["127.0.0.1", "::1", "fe80::1", "controller.example", "*.fleet.example", "edge-3"] {
            assert!(check_san(good).is_ok(), "{good}");
        }
        for (bad, said) in [
            ("127.0.0.1:8443", "a host:port, not a name: give the host alone (--san 127.0.0.1)"),
            ("[::1]:8443", "a host:port, not a name: give the host alone (--san ::1)"),
            (
                "controller.example:8443",
                "a host:port, not a name: give the host alone (--san controller.example)",
            ),
            ("not a name!", "neither an IP address nor a DNS name"),
            ("", "neither an IP address nor a DNS name"),
        ] {
            let refused = check_san(bad).unwrap_err().to_string();
            assert_eq!(refused, format!("--san {bad:?}: {said}"));
        }
    }

    #[test]
    fn debug_never_shows_a_key() {
        let minted = mint_node_ca("edge-1").unwrap();
        let shown = format!("{minted:?}");
        assert!(!shown.contains("PRIVATE KEY") && shown.contains("REDACTED"), "{shown}");
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

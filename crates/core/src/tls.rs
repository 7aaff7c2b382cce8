//! TLS for every side of this crate: the one crypto provider, the server's
//! configuration (with a certificate that can be swapped while serving), and
//! the clients' configurations (the agent's, and the health check's that
//! accepts any certificate).
//!
//! Invariants: one crypto stack everywhere (aws-lc-rs; `ring-provider`
//! builds switch rustls, rcgen and every signature check together); TLS 1.2
//! and 1.3 only; HTTP/1.1 only; no session resumption on either side, since
//! janusd builds a new transport per request and would never use it.

use std::sync::{Arc, RwLock};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, ServerConfig, SignatureScheme};

#[cfg(all(feature = "aws-lc-rs", feature = "ring-provider"))]
compile_error!("one crypto stack: build ring with `--no-default-features --features ring-provider`");
#[cfg(not(any(feature = "aws-lc-rs", feature = "ring-provider")))]
compile_error!("no crypto stack: enable `aws-lc-rs` (the default) or `ring-provider`");

const VERSIONS: &[&rustls::SupportedProtocolVersion] = &[&rustls::version::TLS13, &rustls::version::TLS12];

/// The crypto provider of every TLS session and signature check in this
/// crate: aws-lc-rs, chosen by measurement over ring (docs/performance.md:
/// less server CPU per handshake, and the X25519MLKEM768 key exchange recent
/// Go clients offer), with AES-128-GCM-SHA256 preferred, as Go's client
/// (janusd) prefers it on hardware with AES: it is also the cheaper handshake.
pub fn provider() -> Arc<CryptoProvider> {
    // Built once: every listener, client and check shares it.
    static PROVIDER: std::sync::OnceLock<Arc<CryptoProvider>> = std::sync::OnceLock::new();
    PROVIDER.get_or_init(build_provider).clone()
}

fn build_provider() -> Arc<CryptoProvider> {
    #[cfg(feature = "aws-lc-rs")]
    let mut provider = rustls::crypto::aws_lc_rs::default_provider();
    #[cfg(not(feature = "aws-lc-rs"))]
    let mut provider = rustls::crypto::ring::default_provider();
    provider.cipher_suites.sort_by_key(|suite| match suite.suite() {
        rustls::CipherSuite::TLS13_AES_128_GCM_SHA256 => 0,
        rustls::CipherSuite::TLS13_AES_256_GCM_SHA384 => 1,
        rustls::CipherSuite::TLS13_CHACHA20_POLY1305_SHA256 => 2,
        rustls::CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256 => 3,
        _ => 4,
    });
    Arc::new(provider)
}

/// Whether `signature` (ASN.1 DER) over `message` verifies with an ECDSA
/// P-256 or P-384 `public_key` (the subjectPublicKey bits) and SHA-256: the
/// fleet bundle's signature, as the node checks it.
pub fn verify_ecdsa_sha256(public_key: &[u8], message: &[u8], signature: &[u8]) -> bool {
    use rustls::pki_types::alg_id;
    provider()
        .signature_verification_algorithms
        .all
        .iter()
        .filter(|alg| alg.signature_alg_id() == alg_id::ECDSA_SHA256)
        .filter(|alg| [alg_id::ECDSA_P256, alg_id::ECDSA_P384].contains(&alg.public_key_alg_id()))
        .any(|alg| alg.verify_signature(public_key, message, signature).is_ok())
}

/// Serves the current certificate to every client, whatever name it asks
/// for: a node in fleet mode asks for `controller.fleet.janus`, and aborting
/// on a name we do not know would make it retry forever.
#[derive(Debug)]
pub struct CurrentCert(RwLock<Arc<CertifiedKey>>);

impl CurrentCert {
    /// Serves `key` until it is replaced.
    pub fn new(key: Arc<CertifiedKey>) -> Self {
        CurrentCert(RwLock::new(key))
    }

    /// What is served now.
    pub fn current(&self) -> Arc<CertifiedKey> {
        self.0.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Takes effect at the next handshake; the caller has checked `key`.
    pub fn replace(&self, key: Arc<CertifiedKey>) {
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = key;
    }
}

impl ResolvesServerCert for CurrentCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.read().unwrap_or_else(|e| e.into_inner()).clone())
    }
}

/// The endpoint's configuration: no client certificate, HTTP/1.1, no tickets.
pub fn server_config(cert: Arc<CurrentCert>) -> Result<ServerConfig, rustls::Error> {
    let config = ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(VERSIONS)?
        .with_no_client_auth()
        .with_cert_resolver(cert);
    Ok(one_request_per_handshake(config))
}

/// HTTP/1.1, and no session resumption: clients never resume one.
fn one_request_per_handshake(mut config: ServerConfig) -> ServerConfig {
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    // Nodes never resume a session: tickets would cost a server-side
    // encryption each and never be used.
    config.send_tls13_tickets = 0;
    // Nor TLS 1.2 session ids: the default cache would hold 256 sessions
    // for clients that never come back with them.
    config.session_storage = Arc::new(rustls::server::NoServerSessionStorage {});
    config
}

/// The admin listener's configuration: the endpoint's certificate, and a
/// client certificate required, chained to `admin_roots` (the admin CA,
/// never the fleet's trust) and valid now; HTTP/1.1, no tickets.
pub fn admin_server_config(
    cert: Arc<CurrentCert>,
    admin_roots: RootCertStore,
) -> Result<ServerConfig, rustls::Error> {
    let verifier =
        rustls::server::WebPkiClientVerifier::builder_with_provider(admin_roots.into(), provider())
            .build()
            .map_err(|e| rustls::Error::General(e.to_string()))?;
    let config = ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(VERSIONS)?
        .with_client_cert_verifier(verifier)
        .with_cert_resolver(cert);
    Ok(one_request_per_handshake(config))
}

/// An admin API client: trusting `roots`, presenting `chain` with `key`.
pub fn admin_client_config(
    roots: RootCertStore,
    chain: Vec<CertificateDer<'static>>,
    key: rustls::pki_types::PrivateKeyDer<'static>,
) -> Result<ClientConfig, rustls::Error> {
    let mut config = ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(VERSIONS)?
        .with_root_certificates(roots)
        .with_client_auth_cert(chain, key)?;
    config.resumption = rustls::client::Resumption::disabled();
    Ok(config)
}

/// A client trusting `roots` only, every request a full handshake (as janusd's).
pub fn client_config(roots: RootCertStore) -> Result<ClientConfig, rustls::Error> {
    let mut config = ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(VERSIONS)?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.resumption = rustls::client::Resumption::disabled();
    Ok(config)
}

/// A client that skips certificate checks (handshake signatures are still
/// verified): for the health check, which runs beside the server, sends no
/// secret and only reads a status.
pub fn insecure_client_config() -> ClientConfig {
    ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(VERSIONS)
        .expect("the provider supports TLS 1.2 and 1.3")
        .dangerous()
        .with_custom_certificate_verifier(accept_any_certificate())
        .with_no_client_auth()
}

/// The verifier behind [`insecure_client_config`].
pub fn accept_any_certificate() -> Arc<dyn ServerCertVerifier> {
    Arc::new(AcceptAnyCertificate(provider()))
}

#[derive(Debug)]
struct AcceptAnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AcceptAnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

//! `healthcheck`: asks a running endpoint's `GET /healthz` and exits 0 or 1,
//! for a container's HEALTHCHECK (no curl in the image).
//!
//! It accepts whatever certificate the server shows, for this one call only:
//! it runs beside the server, sends no secret, and only reads a status.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

use crate::agent::http::{Endpoint, Request};

/// Calls `https://ADDR/healthz`; `Ok` carries the server's JSON answer.
pub async fn check(addr: &str) -> Result<String, String> {
    let endpoint = Endpoint::from_config(addr, Arc::new(insecure_client_config()));
    let request = Request { method: "GET", path: "/healthz", ..Default::default() };
    match endpoint.send(&request).await {
        Ok((answer, _)) if answer.status == 200 => Ok(answer.text()),
        Ok((answer, _)) => Err(format!("{addr} is unhealthy ({}): {}", answer.status, answer.text())),
        Err(e) => Err(format!("{addr} does not answer: {e}")),
    }
}

/// A client configuration that skips certificate checks (signatures still verified).
pub fn insecure_client_config() -> rustls::ClientConfig {
    rustls::ClientConfig::builder_with_provider(crate::server::tls::provider())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .expect("the provider supports TLS 1.2 and 1.3")
        .dangerous()
        .with_custom_certificate_verifier(accept_any_certificate())
        .with_no_client_auth()
}

/// The verifier behind [`insecure_client_config`].
pub fn accept_any_certificate() -> Arc<dyn ServerCertVerifier> {
    Arc::new(AcceptAnyCertificate(crate::server::tls::provider()))
}

#[derive(Debug)]
struct AcceptAnyCertificate(Arc<rustls::crypto::CryptoProvider>);

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

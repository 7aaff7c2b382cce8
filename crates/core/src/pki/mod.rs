//! Every check this crate makes on certificates, keys and the fleet's signed
//! bundle: the one module that touches DER.
//!
//! It owns: parsing PEM (through `rustls-pki-types`' `PemObject`), telling a CA
//! certificate, the SHA-256 fingerprint in the node's console format, loading
//! and verifying a fleet (`root.crt`, a self-signed CA; `bundle.json`,
//! `{payload, signature}` in standard base64, the payload signed by the
//! root's ECDSA key with SHA-256, naming a version and issuing CAs the root
//! signed: what a node checks before it trusts a fleet), and loading the
//! endpoint's certificate and key. Nothing here does network I/O; file reads
//! are whole-file and small.

mod certificate;
pub mod mint;
pub mod pair;

pub use certificate::*;

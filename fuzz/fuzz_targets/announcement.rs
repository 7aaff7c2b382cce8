//! An announcement body, parsed and validated as `POST /register` does
//! (JSON, every field, the CA's PEM): never a panic; a refusal never names
//! the field that makes janusd send its admin key.
#![no_main]
use janus_core::protocol::Announcement;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|body: &[u8]| {
    if let Err(refusal) = Announcement::parse(body) {
        assert!(!refusal.0.contains("service_cert_pem"), "{refusal}");
    }
});

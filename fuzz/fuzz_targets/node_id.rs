//! A node id, as a request path or an admin command gives it: accepted
//! only as 32 lowercase hex digits (safe as a file name), never a panic.
#![no_main]
use janus_registration::store::NodeId;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    let Ok(text) = std::str::from_utf8(bytes) else { return };
    if let Some(id) = NodeId::parse(text) {
        let s = id.as_str();
        assert!(s.len() == 32 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')), "{s:?}");
        assert!(!s.contains('/') && !s.contains('.'));
    }
});

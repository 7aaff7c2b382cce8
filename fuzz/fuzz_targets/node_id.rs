//! A node id, as a request path or an admin command gives it, or as a
//! record's `"id"` reads it: accepted only as 32 lowercase hex digits (safe
//! as a file name), the same by both ways in, never a panic.
#![no_main]
use janus_store::NodeId;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    let Ok(text) = std::str::from_utf8(bytes) else { return };
    if let Some(id) = NodeId::parse(text) {
        let s = id.as_str();
        assert!(s.len() == 32 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')), "{s:?}");
        assert!(!s.contains('/') && !s.contains('.'));
    }
    // A record's id goes through serde: it must accept exactly what parse does.
    let from_json = serde_json::from_value::<NodeId>(serde_json::Value::String(text.to_string())).ok();
    assert_eq!(from_json, NodeId::parse(text), "{text:?}");
});

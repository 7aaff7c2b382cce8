//! An answer from an endpoint, as the agent reads it (head, 1xx, chunked,
//! gzip, any framing): never a panic, and never a body over 64 KiB.
#![no_main]
use janus_agent::http::parse_answer;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    if let Ok(answer) = parse_answer(bytes) {
        assert!(answer.body.len() <= 64 * 1024);
    }
});

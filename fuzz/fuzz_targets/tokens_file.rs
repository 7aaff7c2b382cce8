//! A `tokens` file and a `tokens.meta.json`, as the server reads them: never
//! a panic; every token found is the bytes at its offset, with nothing the
//! reference's `str.split()` takes for white space in it.
#![no_main]
use std::collections::BTreeMap;

use janus_store::tokens::{TokenMeta, is_separator, parse};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    for (word, offset) in parse(bytes) {
        let at = offset as usize;
        assert_eq!(&bytes[at..at + word.len()], word.as_bytes());
        assert!(!word.is_empty() && !word.chars().any(is_separator), "{word:?}");
    }
    let _ = serde_json::from_slice::<BTreeMap<String, TokenMeta>>(bytes);
});

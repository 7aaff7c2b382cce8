//! A PROXY protocol header as a listed balancer (or anyone in a listed
//! network) sends it: v1 lines and v2 headers with their TLVs parse to a
//! source or a refusal, never a panic; a source is only ever of the
//! family the header says.
#![no_main]
use janus_listen::proxy::{V2_MAX, parse_v1, parse_v2};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    if let Some(line) = bytes.strip_suffix(b"\r\n") {
        if line.len() + 2 <= 107 {
            if let Ok(Some(source)) = parse_v1(line) {
                let tcp4 = line.starts_with(b"PROXY TCP4 ");
                assert_eq!(source.is_ipv4(), tcp4, "{:?}", String::from_utf8_lossy(line));
            }
        }
    }
    if bytes.len() >= 16 {
        let head: [u8; 16] = bytes[..16].try_into().unwrap();
        let rest = &bytes[16..];
        if rest.len() <= V2_MAX {
            if let Ok(Some(source)) = parse_v2(&head, rest) {
                assert!(matches!(head[13], 0x11 | 0x21), "a source only from TCP over IPv4 or IPv6");
                assert_eq!(source.is_ipv4(), head[13] == 0x11);
            }
        }
    }
});

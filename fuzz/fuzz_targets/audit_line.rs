//! An audit line (anyone with write access to `audit/` may have written
//! it), rendered as `nodes history` and `audit` show it: never a panic, and
//! nothing that can repaint a terminal or forge a line reaches it raw.
#![no_main]
use janus_registration::admin_cli::event_line;
use libfuzzer_sys::fuzz_target;

/// The characters that must never reach a terminal raw: written out here
/// on purpose, not taken from `terminal`, so that the oracle does not share
/// a gap with the escaper it checks.
fn is_unsafe(c: char) -> bool {
    matches!(
        c,
        '\u{0}'..='\u{1f}'
            | '\u{7f}'..='\u{9f}'
            | '\u{061c}'
            | '\u{200b}'..='\u{200f}'
            | '\u{2028}'..='\u{202e}'
            | '\u{2060}'
            | '\u{2066}'..='\u{2069}'
            | '\u{feff}'
    )
}

fuzz_target!(|line: &[u8]| {
    let Ok(text) = std::str::from_utf8(line) else { return };
    let Ok(event) = serde_json::from_str::<serde_json::Value>(text) else { return };
    let shown = event_line(&event);
    assert!(!shown.chars().any(is_unsafe), "{shown:?}");
});

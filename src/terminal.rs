//! Text on its way to a terminal. Names, addresses, CA subjects and PEM
//! text come from nodes, or from records the reference or an admin wrote,
//! and a control character among them can repaint an admin's screen (a
//! fake fingerprint line over the real one). Every renderer of the admin
//! commands, every error the binary prints and every text-format log line
//! goes through [`escape`] (or [`escape_lines`]): C0 controls, DEL, C1
//! controls and the Unicode bidirectional overrides are shown as `\xNN` or
//! `\u{NNNN}`, never sent raw. JSON output goes through [`json_text`]: still
//! JSON, with the same characters as `\uNNNN` escapes.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::io;

/// Whether `c` can move the cursor, change colours, or change what a
/// reader sees as lines or their order: C0 and C1 controls (U+0085 among
/// them), DEL, the line and paragraph separators (U+2028, U+2029: a new
/// line to any tool that splits lines as Unicode does), bidi marks,
/// embeddings, overrides and isolates (U+061C, U+200E, U+200F,
/// U+202A–U+202E, U+2066–U+2069), and zero-width characters (U+200B–U+200D,
/// U+2060, U+FEFF) that hide text or make two strings look alike.
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

/// `text` with every unsafe character shown as an escape; borrowed when
/// there is none.
pub fn escape(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_unsafe) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            c if (c as u32) < 0x100 && is_unsafe(c) => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if is_unsafe(c) => {
                let _ = write!(out, "\\u{{{:04x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// Multi-line text (a PEM block) line by line: the line breaks stay, a
/// carriage return or any other control character is escaped.
pub fn escape_lines(text: &str) -> String {
    text.split('\n').map(escape).collect::<Vec<_>>().join("\n")
}

/// A value as one line of JSON whose text carries no unsafe character raw
/// (serde_json escapes C0 itself; DEL, C1 and bidi controls are escaped
/// here, as `\uNNNN`, which any JSON reader decodes to the same string).
pub fn json_text(value: &impl serde::Serialize) -> String {
    let text = serde_json::to_string(value).expect("plain data serialises");
    if !text.chars().any(is_unsafe) {
        return text;
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if is_unsafe(c) {
            let _ = write!(out, "\\u{:04x}", c as u32);
        } else {
            out.push(c);
        }
    }
    out
}

/// A log writer for the text format: each line tracing writes is escaped
/// whole but for its final line break, so a value with a newline or an
/// escape sequence in it can neither forge a log line nor repaint a screen.
pub struct EscapingWriter<W>(pub W);

impl<W: io::Write> io::Write for EscapingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        // The usual line has nothing to escape: pass it on untouched (no
        // copy on the request path). Any byte that may start an unsafe
        // character (a control, or the lead byte of C1, U+061C, U+2000–2FFF
        // and U+FEFF) takes the careful path.
        let body = buf.strip_suffix(b"\n").unwrap_or(buf);
        let careful = |b: u8| b < 0x20 || matches!(b, 0x7f | 0xc2 | 0xd8 | 0xe2 | 0xef) || b >= 0xf8;
        if !body.iter().any(|&b| careful(b)) {
            self.0.write_all(buf)?;
            return Ok(buf.len());
        }
        let text = String::from_utf8_lossy(buf);
        let (body, end) = match text.strip_suffix('\n') {
            Some(body) => (body, "\n"),
            None => (text.as_ref(), ""),
        };
        let escaped = format!("{}{end}", escape(body));
        self.0.write_all(escaped.as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_are_shown_not_sent() {
        assert!(matches!(escape("edge-1.lan"), Cow::Borrowed(_)));
        assert_eq!(escape("a\x1b[2Jb\x07\r\x7f"), "a\\x1b[2Jb\\x07\\x0d\\x7f");
        assert_eq!(escape("c1\u{9b}31m"), "c1\\x9b31m");
        assert_eq!(escape("rtl\u{202e}gnp.exe"), "rtl\\u{202e}gnp.exe");
        assert_eq!(escape_lines("one\r\ntwo\x1b"), "one\\x0d\ntwo\\x1b");
        assert_eq!(escape("é ünïcödé"), "é ünïcödé");
        // What a Unicode line splitter takes for a line break, and what
        // reorders or hides text.
        for c in [
            '\u{85}', '\u{2028}', '\u{2029}', '\u{200e}', '\u{200f}', '\u{061c}', '\u{2066}', '\u{2067}',
            '\u{2068}', '\u{2069}', '\u{200b}', '\u{200c}', '\u{200d}', '\u{2060}', '\u{feff}',
        ] {
            let text = format!("CN=x{c}CA SHA-256: forged");
            let shown = escape(&text);
            assert!(!shown.contains(c), "{c:?} shown raw");
            assert_eq!(shown.lines().count(), 1);
            assert!(!json_text(&text).contains(c));
            let mut out = Vec::new();
            std::io::Write::write_all(&mut EscapingWriter(&mut out), format!("{text}\n").as_bytes()).unwrap();
            assert!(!String::from_utf8(out).unwrap().contains(c), "{c:?} in a log line");
        }
        assert_eq!(escape("a\u{2028}b"), "a\\u{2028}b");
        assert_eq!(escape("日本語"), "日本語");
    }

    #[test]
    fn json_stays_json() {
        let value = serde_json::json!({"name": "a\x1bb\u{9b}c\u{7f}"});
        let text = json_text(&value);
        assert!(!text.chars().any(is_unsafe), "{text}");
        assert_eq!(serde_json::from_str::<serde_json::Value>(&text).unwrap(), value);
    }

    #[test]
    fn log_lines_keep_their_end_and_nothing_else() {
        use std::io::Write;
        let mut out = Vec::new();
        EscapingWriter(&mut out).write_all(b"INFO name=a\nFAKE LINE\x1b[2J\n").unwrap();
        assert_eq!(out, b"INFO name=a\\x0aFAKE LINE\\x1b[2J\n");
    }
}

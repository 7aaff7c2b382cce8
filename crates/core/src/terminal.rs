//! Text on its way to a terminal. Names, addresses, CA subjects and PEM
//! text come from nodes, or from records the reference or an admin wrote,
//! and a control character among them can repaint an admin's screen (a
//! fake fingerprint line over the real one). Every renderer of the admin
//! commands, every error the binary prints and every text-format log line
//! goes through [`escape`] (or [`escape_lines`]): controls, format
//! characters, default-ignorable code points and line separators (by
//! category) are shown as `\xNN` or `\u{NNNN}`, never sent raw. JSON output goes through [`json_text`], and
//! JSON log lines through [`JsonEscapingWriter`]: still JSON, with the same
//! characters as `\uNNNN` escapes.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::io;

/// Whether `c` is one a reader must not get raw, by category rather than
/// by list of known tricks (Unicode 16.0):
/// - controls, `Cc` (C0, DEL, C1: U+009B is a CSI to many terminals);
/// - format characters, `Cf`: bidi marks, embeddings, overrides and
///   isolates, zero-width joiners and spaces, invisible operators
///   (U+2061–U+2064), the deprecated format characters (U+206A–U+206F),
///   interlinear annotation (U+FFF9–U+FFFB), the tag characters
///   (U+E0001, U+E0020–U+E007F: a whole text no one sees), and the rest;
/// - `Default_Ignorable_Code_Point`: what renders as nothing (U+00AD,
///   U+034F, variation selectors, Hangul fillers, U+180B–U+180F, U+E0000–U+E0FFF);
/// - the line and paragraph separators, `Zl` and `Zp` (U+2028, U+2029: a
///   new line to any tool that splits lines as Unicode does).
fn is_unsafe(c: char) -> bool {
    matches!(
        c,
        // Cc
        '\u{0}'..='\u{1f}'
            | '\u{7f}'..='\u{9f}'
            // Cf and Default_Ignorable_Code_Point, merged
            | '\u{ad}'
            | '\u{34f}'
            | '\u{600}'..='\u{605}'
            | '\u{61c}'
            | '\u{6dd}'
            | '\u{70f}'
            | '\u{890}'..='\u{891}'
            | '\u{8e2}'
            | '\u{115f}'..='\u{1160}'
            | '\u{17b4}'..='\u{17b5}'
            | '\u{180b}'..='\u{180f}'
            | '\u{200b}'..='\u{200f}'
            // Zl, Zp, then Cf again
            | '\u{2028}'..='\u{202e}'
            | '\u{2060}'..='\u{206f}'
            | '\u{3164}'
            | '\u{fe00}'..='\u{fe0f}'
            | '\u{feff}'
            | '\u{ffa0}'
            | '\u{fff0}'..='\u{fffb}'
            | '\u{110bd}'
            | '\u{110cd}'
            | '\u{13430}'..='\u{1343f}'
            | '\u{1bca0}'..='\u{1bca3}'
            | '\u{1d173}'..='\u{1d17a}'
            | '\u{e0000}'..='\u{e0fff}'
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
/// (serde_json escapes C0 itself; the others are escaped here, as `\uNNNN`
/// (a surrogate pair past U+FFFF), which any JSON reader decodes to the
/// same string).
pub fn json_text(value: &impl serde::Serialize) -> String {
    let text = serde_json::to_string(value).expect("plain data serialises");
    escape_json(&text).into_owned()
}

/// JSON text with every unsafe character as a `\u` escape: still the same
/// JSON (outside strings, JSON has none of them).
fn escape_json(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_unsafe) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if is_unsafe(c) {
            for unit in c.encode_utf16(&mut [0; 2]) {
                let _ = write!(out, "\\u{unit:04x}");
            }
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Whether a line of log output may hold an unsafe character: a control
/// byte, or any byte of a non-ASCII character (decoded and looked at).
fn may_be_unsafe(line: &[u8]) -> bool {
    line.iter().any(|b| !(0x20..0x7f).contains(b))
}

/// A log writer for the JSON format (the image's default): each line is
/// JSON already, and an unsafe character in one of its strings (a C1
/// control, a bidi override from a request path) becomes a `\u` escape,
/// so `kubectl logs` shows it and a JSON reader decodes the same value.
pub struct JsonEscapingWriter<W>(pub W);

impl<W: io::Write> io::Write for JsonEscapingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let body = buf.strip_suffix(b"\n").unwrap_or(buf);
        if !may_be_unsafe(body) {
            self.0.write_all(buf)?;
            return Ok(buf.len());
        }
        let text = String::from_utf8_lossy(body);
        self.0.write_all(escape_json(&text).as_bytes())?;
        self.0.write_all(&buf[body.len()..])?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
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
        if !may_be_unsafe(body) {
            self.0.write_all(buf)?;
            return Ok(buf.len());
        }
        let text = String::from_utf8_lossy(buf);
        if !text.chars().any(is_unsafe) {
            self.0.write_all(buf)?;
            return Ok(buf.len());
        }
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
    fn every_invisible_category_is_shown() {
        // What the fourth round found reaching an admin raw: tag characters
        // (a whole hidden text), invisible operators, deprecated format
        // characters, interlinear annotation, the Mongolian vowel separator,
        // the combining grapheme joiner, the soft hyphen, variation
        // selectors, Hangul fillers; and the Arabic number signs (Cf).
        let hidden: String = "ignore".chars().map(|c| char::from_u32(0xe0000 + c as u32).unwrap()).collect();
        for text in [
            format!("edge{hidden}"),
            "a\u{e0001}b".into(),
            "x\u{2061}\u{2062}\u{2063}\u{2064}".into(),
            "x\u{206a}\u{206b}\u{206c}\u{206d}\u{206e}\u{206f}".into(),
            "x\u{fff9}\u{fffa}\u{fffb}".into(),
            "x\u{180e}\u{034f}\u{00ad}".into(),
            "x\u{fe0f}\u{fe00}\u{e0100}\u{180b}".into(),
            "x\u{115f}\u{1160}\u{3164}\u{ffa0}".into(),
            "x\u{0600}\u{06dd}\u{070f}\u{110bd}\u{1d173}".into(),
        ] {
            let shown = escape(&text);
            assert!(shown.is_ascii(), "{shown}");
            let json = json_text(&text);
            assert!(json.is_ascii(), "{json}");
            assert_eq!(serde_json::from_str::<String>(&json).unwrap(), text, "the same string back");
            let mut out = Vec::new();
            let line = format!("{{\"path\":{}}}\n", serde_json::to_string(&text).unwrap());
            std::io::Write::write_all(&mut JsonEscapingWriter(&mut out), line.as_bytes()).unwrap();
            let logged = String::from_utf8(out).unwrap();
            assert!(logged.is_ascii(), "{logged}");
            let value: serde_json::Value = serde_json::from_str(&logged).unwrap();
            assert_eq!(value["path"], text.as_str());
        }
        // Letters, marks and emoji without selectors stay as they are.
        assert!(matches!(escape("Zoë café ✓ 🙂 한국"), Cow::Borrowed(_)));
    }

    #[test]
    fn json_log_lines_escape_c1_and_bidi() {
        let mut out = Vec::new();
        let line = "{\"path\":\"/a\u{9b}31m\u{202e}b\"}\n";
        std::io::Write::write_all(&mut JsonEscapingWriter(&mut out), line.as_bytes()).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "{\"path\":\"/a\\u009b31m\\u202eb\"}\n");
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

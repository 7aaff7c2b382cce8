//! The admin requests as types, shared by the command line, the API, the
//! console and the admin client: who acts ([`Actor`]), a node's CA
//! fingerprint as people paste it ([`Fingerprint`]), an approval and its
//! check ([`Approve`], [`ApproveCa`], [`Check`]), a listing's filter
//! ([`NodeFilter`]), new tokens ([`NewTokens`]) and a revoke ([`Revoke`]).
//!
//! Invariants: each surface turns its input (clap's arguments, a JSON
//! body, a form) into these and nothing else reaches the admin functions;
//! a value that cannot be one is refused here, naming its [`Field`], so
//! the three surfaces refuse the same requests; who acted is an argument,
//! never a process-wide or thread-local setting.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use crate::error::{AdminError, Field, Surface};
use janus_store::tokens as store_tokens;

/// The console line a node prints for its CA, and nothing else.
pub const CONSOLE_MARKER: &str = "pki: this node's CA: SHA-256 ";

/// Who makes a change, and through what: the audit trail names both,
/// `console (alice)`, `api (orchestrator)`, `command (root)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Actor {
    /// The surface the request came through.
    pub surface: Surface,
    /// The admin: a credential's common name, `--as`, or the user running the command.
    pub name: String,
}

impl Actor {
    /// `name` acting through `surface`.
    pub fn new(surface: Surface, name: impl Into<String>) -> Self {
        Actor { surface, name: name.into() }
    }

    /// How the audit trail names it: `api (orchestrator)`.
    pub fn audit_name(&self) -> String {
        format!("{} ({})", self.surface.word(), self.name)
    }
}

/// A CA's SHA-256: 64 lowercase hex digits.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Fingerprint(String);

impl Fingerprint {
    /// What a person pastes: the node's whole console line (`… pki: this
    /// node's CA: SHA-256 <hex>`), or the 64 hex digits, upper or lower
    /// case, with spaces or colons anywhere; blanks around it are fine.
    /// The API's schema pattern ([`Fingerprint::PATTERN`]) says the same.
    pub fn parse(pasted: &str, field: Field) -> Result<Fingerprint, AdminError> {
        let refuse = || {
            AdminError::field(
                field,
                format!(
                    "takes the node's console line `{CONSOLE_MARKER}<hex>`, or its 64 hex digits (spaces, colons \
                     and upper case are fine); {:?} is neither",
                    janus_core::terminal::escape(&pasted.chars().take(100).collect::<String>())
                ),
            )
        };
        let blank = |c: char| matches!(c, ' ' | '\t' | '\r' | '\n');
        let mut text = pasted.trim_matches(blank);
        if let Some(at) = text.rfind(CONSOLE_MARKER) {
            if text[..at].contains('\n') {
                return Err(refuse());
            }
            text = &text[at + CONSOLE_MARKER.len()..];
        }
        if !text.chars().all(|c| c.is_ascii_hexdigit() || matches!(c, ':' | ' ')) {
            return Err(refuse());
        }
        let hex: String =
            text.chars().filter(char::is_ascii_hexdigit).collect::<String>().to_ascii_lowercase();
        if hex.len() != 64 {
            return Err(refuse());
        }
        Ok(Fingerprint(hex))
    }

    /// The schema's pattern for what [`Fingerprint::parse`] takes.
    pub const PATTERN: &'static str =
        "^[ \\t\\r\\n]*([^\\n]*pki: this node's CA: SHA-256 )?[: ]*([0-9A-Fa-f][: ]*){64}[ \\t\\r\\n]*$";

    /// A fingerprint the store computed (64 lowercase hex digits).
    pub fn from_hex(hex: &str) -> Option<Fingerprint> {
        janus_core::pki::is_hex(hex, 64).then(|| Fingerprint(hex.to_ascii_lowercase()))
    }

    /// Its 64 lowercase hex digits.
    pub fn hex(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// How an approval checks that the pending record is the node the admin means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Check {
    /// Its CA must have this fingerprint.
    Expected(Fingerprint),
    /// Its CA must be the one the last console line of this log names (the command line's `--console`).
    ConsoleLog(PathBuf),
    /// No check: whoever announced under that name is trusted.
    Unchecked,
}

/// Approve one node, named by id, id prefix or name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Approve {
    /// The node.
    pub node: String,
    /// How its CA is checked.
    pub check: Check,
    /// Approve even over its CA's rejection.
    pub force: bool,
}

/// Approve every pending node of one CA (one node's re-announcements).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApproveCa {
    /// The CA.
    pub ca: Fingerprint,
    /// With those rejected only because their CA was.
    pub force: bool,
}

/// A label, `key=value`, split at the first `=`.
pub fn parse_label(text: &str, field: Field) -> Result<(String, String), AdminError> {
    text.split_once('=')
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .ok_or_else(|| AdminError::field(field, "takes KEY=VALUE"))
}

/// Which nodes a listing shows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeFilter {
    /// Those waiting for approval.
    pub pending: bool,
    /// Those admitted.
    pub admitted: bool,
    /// Those rejected.
    pub rejected: bool,
    /// Only those admitted at or after this (Unix seconds).
    pub admitted_since: Option<i64>,
    /// Only those whose token carried every one of these labels.
    pub labels: Vec<(String, String)>,
}

impl NodeFilter {
    /// Whether only some states are listed (`admitted_since` lists admitted nodes).
    pub fn filters_by_state(&self) -> bool {
        self.pending || self.admitted || self.rejected || self.admitted_since.is_some()
    }
}

/// What new tokens are: made here, or one given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mint {
    /// This many, 128 bits each from the OS CSPRNG.
    Count(usize),
    /// This one (an orchestrator's own).
    Given(String),
}

/// `tokens add`, `POST /v1/tokens`, the console's mint form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTokens {
    /// Made or given.
    pub mint: Mint,
    /// How many nodes each admits (default 1).
    pub uses: Option<u32>,
    /// How long they admit.
    pub expires_in: Option<Duration>,
    /// What they are for.
    pub description: Option<String>,
    /// Copied into the record of every node they admit.
    pub labels: BTreeMap<String, String>,
}

/// The most tokens one request makes.
pub const MAX_COUNT: usize = 100_000;
/// The longest lifetime: ten years.
pub const MAX_LIFETIME: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

impl NewTokens {
    /// One token, admitting once, forever, unlabelled.
    pub fn one() -> Self {
        NewTokens {
            mint: Mint::Count(1),
            uses: None,
            expires_in: None,
            description: None,
            labels: BTreeMap::new(),
        }
    }

    /// `labels` as given (pairs), refused when a key repeats.
    pub fn labels_from(pairs: Vec<(String, String)>) -> Result<BTreeMap<String, String>, AdminError> {
        let count = pairs.len();
        let labels: BTreeMap<String, String> = pairs.into_iter().collect();
        if labels.len() < count {
            return Err(AdminError::field(Field::Labels, "gives the same key twice"));
        }
        Ok(labels)
    }

    /// Refuses what must not be written: each bound documented
    /// (docs/operating.md) and said in the refusal, with its field.
    pub fn check(&self) -> Result<(), AdminError> {
        match &self.mint {
            Mint::Count(n) if !(1..=MAX_COUNT).contains(n) => {
                return Err(AdminError::field(Field::Count, format!("must be between 1 and {MAX_COUNT}")));
            }
            Mint::Given(token) => check_chosen(token)?,
            Mint::Count(_) => {}
        }
        if self.uses.is_some_and(|n| !(1..=store_tokens::MAX_USES).contains(&n)) {
            return Err(AdminError::field(
                Field::Uses,
                format!("must be between 1 and {}", store_tokens::MAX_USES),
            ));
        }
        if self.expires_in.is_some_and(|d| d.is_zero() || d > MAX_LIFETIME) {
            return Err(AdminError::field(
                Field::ExpiresIn,
                "must be more than 0 s and at most 10 years (3650d)",
            ));
        }
        if self.description.as_ref().is_some_and(|d| d.chars().count() > store_tokens::MAX_DESCRIPTION) {
            return Err(AdminError::field(
                Field::Description,
                format!("must be at most {} characters", store_tokens::MAX_DESCRIPTION),
            ));
        }
        if let Some(why) = store_tokens::labels_refusal(&self.labels) {
            return Err(AdminError::field(Field::Labels, format!(": {why}")));
        }
        Ok(())
    }
}

/// What a token given to register must be: one word of the tokens file
/// (no separator, not a comment) that a node can present (the protocol's
/// printable ASCII, at most 512 bytes), and not guessable.
fn check_chosen(token: &str) -> Result<(), AdminError> {
    if !janus_core::protocol::is_presentable_token(token) {
        return Err(AdminError::field(Field::Token, janus_core::protocol::unpresentable_token_reason()));
    }
    if token.len() < store_tokens::WEAK_BELOW {
        return Err(AdminError::field(
            Field::Token,
            format!(
                "must be at least {} characters: a shorter one is guessable (a made token has 32)",
                store_tokens::WEAK_BELOW
            ),
        ));
    }
    if token.starts_with('#') {
        return Err(AdminError::field(
            Field::Token,
            "must not start with '#': the tokens file reads that line as a comment",
        ));
    }
    Ok(())
}

/// Revoke the token `key` names: whole, a prefix only it has, or its SHA-256 prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Revoke {
    /// What names it.
    pub key: String,
}

/// A token's SHA-256 prefix as a revoke by fingerprint names it (12 to 64
/// hex digits), lower case, or why it is none.
pub fn token_prefix(prefix: &str) -> Result<String, AdminError> {
    if !(12..=64).contains(&prefix.len()) || !prefix.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(AdminError::field(
            Field::Revoked,
            "must be the token's SHA-256 prefix, 12 to 64 hex digits (as the answer that made it said it)",
        ));
    }
    Ok(prefix.to_lowercase())
}

/// The CA fingerprint of the last `pki: this node's CA: SHA-256 <hex>` line.
pub fn console_fingerprint(log: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(log);
    let mut last = None;
    let mut rest = text.as_ref();
    while let Some(at) = rest.find(CONSOLE_MARKER) {
        let after = &rest[at + CONSOLE_MARKER.len()..];
        let hex: String = after.chars().take(64).collect();
        if janus_core::pki::is_hex(&hex, 64) {
            last = Some(hex);
        }
        rest = after;
    }
    last
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprints_as_people_paste_them() {
        let hex = "ab".repeat(32);
        let ok = |pasted: &str| {
            Fingerprint::parse(pasted, Field::ExpectedFingerprint).map(|f| f.hex().to_string())
        };
        assert_eq!(ok(&"AB".repeat(32)).unwrap(), hex);
        assert_eq!(ok(&vec!["AB"; 32].join(":")).unwrap(), hex);
        assert_eq!(ok(&vec!["ab"; 32].join(" ")).unwrap(), hex);
        assert_eq!(ok(&format!("[   2.5] {CONSOLE_MARKER}{hex}\r\n")).unwrap(), hex);
        assert_eq!(ok(&format!("  {hex}\n")).unwrap(), hex);
        for bad in ["abc", "", &format!("{hex}0"), &format!("x{hex}"), &format!("a\nb {CONSOLE_MARKER}{hex}")]
        {
            let refused = ok(bad).unwrap_err();
            assert_eq!(refused.field, Some(Field::ExpectedFingerprint));
            assert!(!refused.said(Surface::Api).contains("--"), "{}", refused.said(Surface::Api));
        }
    }

    #[test]
    fn the_actor_is_named_with_its_surface() {
        assert_eq!(Actor::new(Surface::Console, "alice").audit_name(), "console (alice)");
        assert_eq!(Actor::new(Surface::Api, "orch").audit_name(), "api (orch)");
        assert_eq!(Actor::new(Surface::Command, "root").audit_name(), "command (root)");
    }

    #[test]
    fn the_last_console_line_wins() {
        let a = "a".repeat(64);
        let b = "b".repeat(64);
        let log = format!(
            "[  1.0] pki: this node's CA: SHA-256 {a}\nnoise\n[ 9.0] pki: this node's CA: SHA-256 {b}\r\n"
        );
        assert_eq!(console_fingerprint(log.as_bytes()), Some(b));
        assert_eq!(console_fingerprint(b"nothing"), None);
        assert_eq!(console_fingerprint(b"pki: this node's CA: SHA-256 abc"), None);
    }
}

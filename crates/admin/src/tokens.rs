//! `tokens`: add (printed once, or registered as given), list (redacted), revoke.

use std::fmt::Write as _;
use std::path::Path;

use super::{AdminError, Result, RevokeArgs, TokensCommand, TokensListArgs, open};
use janus_core::clock::now_unix;
use janus_core::terminal::{self, escape};
use janus_store::Store;
use janus_store::audit::current_user;
use janus_store::tokens::{self, TokenMeta};

/// The most tokens one `tokens add` makes.
pub const MAX_COUNT: usize = 100_000;
/// The longest `--expires-in`: ten years.
pub const MAX_LIFETIME: std::time::Duration = std::time::Duration::from_secs(10 * 365 * 24 * 3600);

/// Refuses what `tokens add` must not write: each bound is documented
/// (docs/operating.md) and said in the refusal.
fn check_add(args: &super::TokensAddArgs) -> Result<()> {
    let refuse = |why: String| Err(AdminError::Usage(why));
    if !(1..=MAX_COUNT).contains(&args.count) {
        return refuse(format!("--count must be between 1 and {MAX_COUNT}"));
    }
    if args.uses.is_some_and(|n| !(1..=tokens::MAX_USES).contains(&n)) {
        return refuse(format!("--uses must be between 1 and {}", tokens::MAX_USES));
    }
    if args.expires_in.is_some_and(|d| d.is_zero() || d > MAX_LIFETIME) {
        return refuse("--expires-in must be more than 0 s and at most 10 years (3650d)".into());
    }
    if args.description.as_ref().is_some_and(|d| d.chars().count() > tokens::MAX_DESCRIPTION) {
        return refuse(format!("--description must be at most {} characters", tokens::MAX_DESCRIPTION));
    }
    let labels: std::collections::BTreeMap<String, String> = args.labels.iter().cloned().collect();
    if labels.len() < args.labels.len() {
        return refuse("--label gives the same key twice".into());
    }
    if let Some(why) = tokens::labels_refusal(&labels) {
        return refuse(format!("--label: {why}"));
    }
    if let Some(token) = &args.token {
        check_chosen(token).map_err(|why| AdminError::Usage(format!("--token {why}")))?;
    }
    Ok(())
}

/// What a token given with `--token` must be: one word of the tokens file
/// (no separator, not a comment) that a node can present (the protocol's
/// printable ASCII, at most 512 bytes), and not guessable.
fn check_chosen(token: &str) -> std::result::Result<(), String> {
    if !janus_core::protocol::is_presentable_token(token) {
        return Err(janus_core::protocol::unpresentable_token_reason());
    }
    if token.len() < tokens::WEAK_BELOW {
        return Err(format!(
            "must be at least {} characters: a shorter one is guessable (tokens add without --token makes 32)",
            tokens::WEAK_BELOW
        ));
    }
    if token.starts_with('#') {
        return Err("must not start with '#': the tokens file reads that line as a comment".into());
    }
    Ok(())
}

/// One token `tokens add` made or registered: what `tokens add --json`
/// prints and `POST /v1/tokens` answers, the only place the token is said.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct AddedToken {
    /// The token itself: said here, once.
    pub token: String,
    /// Its SHA-256, hex.
    pub sha256: String,
    /// The first 12 hex digits of its SHA-256, as the audit trail, `tokens
    /// list` and the records of the nodes it admits name it.
    pub sha256_prefix: String,
    /// When it stops admitting (RFC 3339), if it does.
    pub expires_at: Option<String>,
    /// How many nodes it admits in all.
    pub uses: u32,
    /// What it is for.
    pub description: Option<String>,
    /// Its labels, given to the records of the nodes it admits.
    pub labels: std::collections::BTreeMap<String, String>,
}

/// The tokens with a use left, and what makes the list less than certain.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TokenList {
    /// Redacted, in file order.
    pub tokens: Vec<tokens::TokenInfo>,
    /// Said beside the list: metadata that cannot be read, weak tokens.
    pub warnings: Vec<String>,
}

/// A token revoked: its fingerprint, as the audit trail says it.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Revoked {
    /// The first 12 hex digits of its SHA-256.
    pub sha256_prefix: String,
}

/// `tokens add`: the tokens made (or the one given) and registered, each
/// audited in the caller's name; a bound or a token that may not be
/// listed again refuses, and nothing is written.
pub fn add(store: &Store, args: &super::TokensAddArgs) -> Result<Vec<AddedToken>> {
    check_add(args)?;
    let made: Vec<String> = match &args.token {
        Some(chosen) => vec![chosen.clone()],
        None => (0..args.count).map(|_| tokens::generate()).collect(),
    };
    let meta = TokenMeta {
        description: args.description.clone(),
        expires_at: args.expires_in.map(|d| now_unix() + d.as_secs() as i64),
        uses: args.uses.filter(|&n| n > 1),
        added_at: janus_core::clock::now_rfc3339(),
        added_by: current_user(),
        labels: args.labels.iter().cloned().collect(),
        expiry_audited: false,
    };
    store.add_tokens(&made, &meta)?;
    let added = |token: String| AddedToken {
        sha256: janus_core::pki::sha256_hex(token.as_bytes()),
        sha256_prefix: janus_store::audit::token_fingerprint(&token),
        expires_at: meta.expires_at.map(janus_core::clock::unix_to_rfc3339),
        uses: meta.total_uses(),
        description: meta.description.clone(),
        labels: meta.labels.clone(),
        token,
    };
    Ok(made.into_iter().map(added).collect())
}

/// `tokens list`: spent and expired tokens swept first.
pub fn list(store: &Store) -> Result<TokenList> {
    store.sweep_tokens()?;
    let tokens = store.list_tokens()?;
    let mut warnings = Vec::new();
    if let Some(why) = store.token_meta_unreadable() {
        warnings.push(why.to_string());
    }
    let weak = tokens.iter().filter(|t| t.weak).count();
    if weak > 0 {
        warnings.push(format!(
            "{weak} token(s) shorter than {} characters (WEAK): guessable; make tokens with `tokens add`",
            tokens::WEAK_BELOW
        ));
    }
    Ok(TokenList { tokens, warnings })
}

/// `tokens revoke`: the token `key` names (whole, a prefix only it has, or
/// its SHA-256 prefix), revoked and audited in the caller's name.
pub fn revoke(store: &Store, key: &str) -> Result<Revoked> {
    let sha256_prefix = store
        .revoke_token(key, &current_user())
        .map_err(|cause| AdminError::Revoke { key: key.to_string(), cause })?;
    Ok(Revoked { sha256_prefix })
}

/// Runs a `tokens` subcommand on the state directory; `Ok` is what to print.
pub fn tokens(state: &Path, command: &TokensCommand) -> Result<String> {
    let store = open(state)?;
    match command {
        TokensCommand::Add(args) => {
            let made = add(&store, args)?;
            if !args.json {
                return Ok(made.iter().map(|t| t.token.as_str()).collect::<Vec<_>>().join("\n"));
            }
            Ok(made.iter().map(terminal::json_text).collect::<Vec<_>>().join("\n"))
        }
        TokensCommand::List(TokensListArgs { json }) => {
            let TokenList { tokens: list, warnings } = list(&store)?;
            if *json {
                return Ok(list.iter().map(terminal::json_text).collect::<Vec<_>>().join("\n"));
            }
            let mut out = format!(
                "{:<10}  {:<12}  {:<20}  {:>9}  {:<12}  {:<20}  DESCRIPTION\n",
                "TOKEN", "SHA-256", "EXPIRES", "USES LEFT", "ADDED BY", "LABELS"
            );
            for t in &list {
                let (expires, uses_left) = match (&t.expires_at, t.metadata_unreadable) {
                    (_, true) => ("unknown".to_string(), "?".to_string()),
                    (Some(at), false) => (at.clone(), t.uses_left.to_string()),
                    (None, false) => ("never".to_string(), t.uses_left.to_string()),
                };
                let labels: Vec<String> =
                    t.labels.iter().map(|(k, v)| format!("{}={}", escape(k), escape(v))).collect();
                let _ = writeln!(
                    out,
                    "{:<10}  {:<12}  {:<20}  {:>9}  {:<12}  {:<20}  {}{}",
                    escape(&t.shown),
                    t.sha256_prefix,
                    expires,
                    uses_left,
                    if t.added_by.is_empty() { "-".into() } else { escape(&t.added_by) },
                    if labels.is_empty() { "-".into() } else { labels.join(",") },
                    escape(t.description.as_deref().unwrap_or("-")),
                    if t.weak { "  WEAK" } else { "" }
                );
            }
            let _ = write!(out, "{} token(s)", list.len());
            for warning in warnings {
                let _ = write!(out, "\nwarning: {}", escape(&warning));
            }
            Ok(out)
        }
        TokensCommand::Revoke(RevokeArgs { token: key }) => {
            let revoked = revoke(&store, key)?;
            Ok(format!("revoked the token with SHA-256 {}…", revoked.sha256_prefix))
        }
    }
}

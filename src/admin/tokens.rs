//! `tokens`: add (printed once, or registered as given), list (redacted), revoke.

use std::fmt::Write as _;
use std::path::Path;

use super::{AdminError, Result, RevokeArgs, TokensCommand, TokensListArgs, open};
use crate::clock::now_unix;
use crate::store::audit::current_user;
use crate::store::tokens::{self, TokenMeta};
use crate::terminal::{self, escape};

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
    if !crate::protocol::is_presentable_token(token) {
        return Err(crate::protocol::unpresentable_token_reason());
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

/// What `tokens add --json` prints of one token.
#[derive(serde::Serialize)]
struct Added<'a> {
    token: &'a str,
    sha256: String,
    sha256_prefix: String,
    expires_at: Option<String>,
    uses: u32,
    description: Option<&'a str>,
    labels: &'a std::collections::BTreeMap<String, String>,
}

/// Runs a `tokens` subcommand; `Ok` is what to print.
pub fn tokens(state: &Path, command: &TokensCommand) -> Result<String> {
    let store = open(state)?;
    match command {
        TokensCommand::Add(args) => {
            check_add(args)?;
            let made: Vec<String> = match &args.token {
                Some(chosen) => vec![chosen.clone()],
                None => (0..args.count).map(|_| tokens::generate()).collect(),
            };
            let user = current_user();
            let meta = TokenMeta {
                description: args.description.clone(),
                expires_at: args.expires_in.map(|d| now_unix() + d.as_secs() as i64),
                uses: args.uses.filter(|&n| n > 1),
                added_at: crate::clock::now_rfc3339(),
                added_by: user.clone(),
                labels: args.labels.iter().cloned().collect(),
                expiry_audited: false,
            };
            store.add_tokens(&made, &meta)?;
            if !args.json {
                return Ok(made.join("\n"));
            }
            let line = |token: &String| {
                terminal::json_text(&Added {
                    token,
                    sha256: crate::pki::sha256_hex(token.as_bytes()),
                    sha256_prefix: crate::store::audit::token_fingerprint(token),
                    expires_at: meta.expires_at.map(crate::clock::unix_to_rfc3339),
                    uses: meta.total_uses(),
                    description: meta.description.as_deref(),
                    labels: &meta.labels,
                })
            };
            Ok(made.iter().map(line).collect::<Vec<_>>().join("\n"))
        }
        TokensCommand::List(TokensListArgs { json }) => {
            store.sweep_tokens()?;
            let list = store.list_tokens()?;
            if *json {
                return Ok(list.iter().map(terminal::json_text).collect::<Vec<_>>().join("\n"));
            }
            let mut out = format!(
                "{:<10}  {:<12}  {:<20}  {:>9}  {:<12}  DESCRIPTION\n",
                "TOKEN", "SHA-256", "EXPIRES", "USES LEFT", "ADDED BY"
            );
            for t in &list {
                let expires = t.expires_at.clone().unwrap_or_else(|| "never".into());
                let _ = writeln!(
                    out,
                    "{:<10}  {:<12}  {:<20}  {:>9}  {:<12}  {}{}",
                    escape(&t.shown),
                    t.sha256_prefix,
                    expires,
                    t.uses_left,
                    if t.added_by.is_empty() { "-".into() } else { escape(&t.added_by) },
                    escape(t.description.as_deref().unwrap_or("-")),
                    if t.weak { "  WEAK" } else { "" }
                );
            }
            let _ = write!(out, "{} token(s)", list.len());
            if let Some(why) = store.token_meta_unreadable() {
                let _ = write!(out, "\nwarning: {}", escape(&why.to_string()));
            }
            let weak = list.iter().filter(|t| t.weak).count();
            if weak > 0 {
                let _ = write!(
                    out,
                    "\nwarning: {weak} token(s) shorter than {} characters (WEAK): guessable; make tokens with `tokens add`",
                    tokens::WEAK_BELOW
                );
            }
            Ok(out)
        }
        TokensCommand::Revoke(RevokeArgs { token: key }) => {
            let fingerprint = store
                .revoke_token(key, &current_user())
                .map_err(|cause| AdminError::Revoke { key: key.clone(), cause })?;
            Ok(format!("revoked the token with SHA-256 {fingerprint}…"))
        }
    }
}

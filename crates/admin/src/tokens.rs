//! `tokens`: add (said once, or registered as given), list (redacted),
//! revoke; each change made for the [`Actor`] it is given.

use super::Result;
use crate::error::AdminError;
use crate::model::{Actor, Mint, NewTokens, Revoke};
use janus_core::clock::now_unix;
use janus_store::Store;
use janus_store::tokens::{self, TokenMeta};

/// One token `tokens add` made or registered: what `tokens add --json`
/// prints and `POST /v1/tokens` answers, the only place the token is said.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
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
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct Revoked {
    /// The first 12 hex digits of its SHA-256.
    pub sha256_prefix: String,
}

/// `tokens add`: the tokens made (or the one given) and registered, each
/// audited in the caller's name; a bound or a token that may not be
/// listed again refuses, and nothing is written.
pub fn add(store: &Store, request: &NewTokens, actor: &Actor) -> Result<Vec<AddedToken>> {
    request.check()?;
    let made: Vec<String> = match &request.mint {
        Mint::Given(chosen) => vec![chosen.clone()],
        Mint::Count(count) => (0..*count).map(|_| tokens::generate()).collect(),
    };
    let meta = TokenMeta {
        description: request.description.clone(),
        expires_at: request.expires_in.map(|d| now_unix() + d.as_secs() as i64),
        uses: request.uses.filter(|&n| n > 1),
        added_at: janus_core::clock::now_rfc3339(),
        added_by: actor.audit_name(),
        labels: request.labels.clone(),
        expiry_audited: false,
    };
    store.add_tokens(&made, &meta)?;
    let added = |token: String| AddedToken {
        sha256: janus_core::pki::sha256_hex(token.as_bytes()),
        sha256_prefix: janus_store::token_fingerprint(&token),
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
            "{weak} token(s) shorter than {} characters (WEAK): guessable; mint new tokens to replace them",
            tokens::WEAK_BELOW
        ));
    }
    Ok(TokenList { tokens, warnings })
}

/// `tokens revoke`: the token `key` names (whole, a prefix only it has, or
/// its SHA-256 prefix), revoked and audited in the caller's name.
pub fn revoke(store: &Store, request: &Revoke, actor: &Actor) -> Result<Revoked> {
    let sha256_prefix = store.revoke_token(&request.key, &actor.audit_name()).map_err(AdminError::from)?;
    Ok(Revoked { sha256_prefix })
}

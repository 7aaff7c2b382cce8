//! `DIR/tokens`: registration tokens, whitespace-separated as the reference
//! reads it, and `DIR/tokens.meta.json`: the expiry and number of uses of the
//! tokens `tokens add` made, keyed by each token's SHA-256 (never the token).
//!
//! The file says which tokens exist; whether a use is spent is decided by
//! the [`Ledger`] alone, so a copy of `tokens` read a moment ago, or put back
//! by an editor, never admits twice. Invariants on the file, which belongs
//! to the admin:
//! - it is never replaced, truncated or emptied by this crate: a spent token's
//!   bytes are overwritten with spaces in place (under an exclusive `flock`
//!   on `DIR/tokens.lock`, after checking they still hold that token), new
//!   tokens are appended, so bytes an admin appends meanwhile are kept, and a
//!   symlinked or hard-linked `tokens` is edited through every name it has;
//! - a UTF-8 BOM is skipped; a line whose first non-blank character is `#`
//!   is a comment; a word that is not UTF-8 is unusable and blocks nothing;
//! - a token listed twice is one token (its uses come from the metadata);
//! - a token's metadata goes only with its last use (spent for good, or
//!   revoked), never because the token is missing from the list a moment;
//!   `add`, `sweep` and `revoke` read both files under the lock;
//! - a `tokens.meta.json` that cannot be read or parsed fails closed: the
//!   tokens it governed (as its last good copy, `tokens.meta.last-good.json`,
//!   says) admit nobody (503: the node retries), without a good copy every
//!   token does, nothing is blanked or swept, and [`Tokens::health`] says
//!   why; plain tokens (in no good copy) keep working;
//! - `token_expired` is audited once per token: the metadata records it.
//!
//! Reads are cached by the file's identity (device, inode, size, times), so
//! a mass boot against 100,000 tokens parses the file once, not per node.

mod file;
mod meta;
mod metadata;
mod registry;
mod tidier;
mod words;

pub use metadata::{
    MAX_DESCRIPTION, MAX_LABEL_KEY, MAX_LABEL_VALUE, MAX_LABELS, MAX_USES, MetaUnreadable, TokenMeta,
    labels_refusal,
};
pub use registry::*;
pub use words::{is_separator, parse};

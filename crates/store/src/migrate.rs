//! Migrating a state directory to the current format
//! ([`crate::format::CURRENT`]), then marking it.
//!
//! Invariants: from format 1 no existing file changes; each step is
//! idempotent and the marker is written last, so a migration cut short
//! runs again.

use std::io;
use std::path::Path;

use crate::format;
use crate::ledger::Ledger;

/// Migrates `dir` to [`format::CURRENT`] and marks it, durably. Called once its
/// layout is made; `from` is what it was (`None`: unmarked). From format 1
/// no existing file changes: records, approvals and tokens read as they
/// are, and a token the reference (or an older build) spent is absent from
/// `tokens`, so it stays spent. The one step: every ledger marker an
/// earlier build made is indexed under the CA that spent it (a link
/// beside it). The marker is written last: a migration cut short runs
/// again, and each step is idempotent.
pub(crate) fn migrate(dir: &Path, from: Option<u32>) -> io::Result<()> {
    if from.unwrap_or(1) < 2 {
        let indexed = Ledger::new(dir).index_by_ca(dir)?;
        if indexed > 0 {
            tracing::info!(indexed, "indexed the token ledger by CA (state format 2)");
        }
    }
    format::mark(dir, from)
}

//! Approval files that name no node: `approved/<x>` where no record (nor an
//! admission's claim) has the id `x` — a mistyped id, a node's name, an id
//! since forgotten. Never acted on: said, with the nearest id when one
//! differs by a character or a node's name is the file's.
//!
//! Invariants: finding them reads names only, and records (once) only when
//! a file not shaped as an id may be a node's name; suggestions are made
//! for the first [`SUGGESTED_AT_MOST`] files, so a look's cost is bounded; a server keeps what its last
//! maintenance pass found (for `/healthz`) and logs each file once.

use std::collections::HashSet;

use serde::Deserialize;

use super::{CLAIM_PREFIX, NodeId, OrphanApproval, Store, StoreResult};
use janus_core::durable;

/// How many approval files that name no node get a suggested id in one look.
const SUGGESTED_AT_MOST: usize = 100;

impl Store {
    /// Every approval file that names no node, each with the nearest id.
    pub fn orphan_approvals(&self) -> StoreResult<Vec<OrphanApproval>> {
        let mut names = Vec::new();
        self.each_name("approved", |name| {
            if !name.starts_with(durable::TEMP_PREFIX) {
                names.push(name.to_string());
            }
        })?;
        let mut ids: HashSet<String> = HashSet::new();
        self.each_name("nodes", |name| {
            let id = name.strip_prefix(CLAIM_PREFIX).unwrap_or(name);
            if let Some(id) = id.strip_suffix(".json").and_then(NodeId::parse) {
                ids.insert(id.to_string());
            }
        })?;
        let mut orphans: Vec<OrphanApproval> = names
            .into_iter()
            .filter(|name| !ids.contains(name.as_str()))
            .map(|file| OrphanApproval { file, nearest: None, by_name: false })
            .collect();
        orphans.sort_by(|a, b| a.file.cmp(&b.file));
        // A suggestion for the first few: their cost grows with the records
        // (approvals of many forgotten nodes are said, without one each).
        for orphan in orphans.iter_mut().take(SUGGESTED_AT_MOST) {
            orphan.nearest = janus_core::nearest::nearest(&orphan.file, ids.iter().map(String::as_str), 1)
                .map(String::from);
        }
        // A file named as no id can be is looked for among the names: one
        // read of the records, only then.
        if orphans
            .iter()
            .take(SUGGESTED_AT_MOST)
            .any(|o| o.nearest.is_none() && NodeId::parse(&o.file).is_none())
        {
            let suggested = SUGGESTED_AT_MOST.min(orphans.len());
            self.name_the_nodes_of(&mut orphans[..suggested])?;
        }
        Ok(orphans)
    }

    /// Fills `nearest` of the orphans whose file is a node's name.
    fn name_the_nodes_of(&self, orphans: &mut [OrphanApproval]) -> StoreResult<()> {
        #[derive(Deserialize)]
        struct Named {
            name: String,
        }
        let unnamed = |o: &OrphanApproval| o.nearest.is_none() && NodeId::parse(&o.file).is_none();
        let wanted: HashSet<String> = orphans.iter().filter(|o| unnamed(o)).map(|o| o.file.clone()).collect();
        let mut found: Vec<(String, NodeId)> = Vec::new();
        self.scan(|id, record: Named| {
            if wanted.contains(&record.name) {
                found.push((record.name, id));
            }
        })?;
        for orphan in orphans.iter_mut().filter(|o| unnamed(o)) {
            if let Some((_, id)) = found.iter().find(|(name, _)| *name == orphan.file) {
                orphan.nearest = Some(id.to_string());
                orphan.by_name = true;
            }
        }
        Ok(())
    }

    /// A maintenance pass's look: keeps what it found and logs each file
    /// once (a file removed and made again is logged again).
    pub(crate) fn note_orphans(&self) -> StoreResult<usize> {
        let found = self.orphan_approvals()?;
        let mut seen = self.orphans.lock().unwrap_or_else(|e| e.into_inner());
        for orphan in &found {
            if seen.logged.insert(orphan.file.clone()) {
                tracing::warn!(file = %format!("approved/{}", orphan.file), "{orphan}");
            }
        }
        let present: HashSet<&str> = found.iter().map(|o| o.file.as_str()).collect();
        seen.logged.retain(|f| present.contains(f.as_str()));
        let count = found.len();
        seen.last = found;
        Ok(count)
    }

    /// What the last maintenance pass found (empty before the first).
    pub fn orphans_seen(&self) -> Vec<OrphanApproval> {
        self.orphans.lock().unwrap_or_else(|e| e.into_inner()).last.clone()
    }
}

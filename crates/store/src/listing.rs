//! Listing the record directories without reading every record: the
//! unsettled ids (a record with neither approval nor rejection) from three
//! listings of names, cached by the directories' times, and the pending
//! records read one by one from those.
//!
//! Invariants: ids are held as 128-bit numbers while a listing runs (a
//! million settled records cost 16 MiB, not a set of strings); a listing is
//! repeated when a directory's time changed, when that time is too recent
//! to trust, or every `reconcile_every` (network filesystems' times lag).

use std::fs;
use std::io;
use std::path::PathBuf;

use serde::Deserialize;

use super::error::StoreResult;
use super::{CLAIM_PREFIX, Listing, NodeId, NodeRecord, Pending, STALE_TEMP_AGE, Store};
use janus_core::durable;

impl Store {
    /// Calls `each` with every record in `nodes/` that parses as `T`, one at a
    /// time (temp files skipped): a state of 100,000 records is never held in
    /// memory at once. Returns why each unreadable one is, by id: no path
    /// (a listing is shown to admin API clients; the path goes to the log).
    pub fn scan<T: serde::de::DeserializeOwned>(
        &self,
        mut each: impl FnMut(NodeId, T),
    ) -> StoreResult<Vec<String>> {
        let dir = self.dir.join("nodes");
        let mut problems = Vec::new();
        for entry in fs::read_dir(&dir).map_err(|e| durable::with_path(e, &dir))? {
            let entry = entry.map_err(|e| durable::with_path(e, &dir))?;
            let name = entry.file_name();
            let Some(id) = name.to_str().and_then(|n| n.strip_suffix(".json")).and_then(NodeId::parse) else {
                continue;
            };
            match durable::read_fresh(&entry.path()) {
                Ok(bytes) => match serde_json::from_slice(&bytes) {
                    Ok(record) => each(id, record),
                    Err(e) => {
                        problems.push(unreadable(&id, &entry.path(), format!("not a node record: {e}")))
                    }
                },
                // Forgotten between the listing and the read.
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => problems.push(unreadable(
                    &id,
                    &entry.path(),
                    format!("cannot be read now ({})", e.kind()),
                )),
            }
        }
        Ok(problems)
    }

    /// Every whole record in `nodes/`, and why each unreadable one is (by id).
    pub fn list_records(&self) -> StoreResult<(Vec<NodeRecord>, Vec<String>)> {
        let mut records = Vec::new();
        let problems = self.scan(|_, record: NodeRecord| records.push(record))?;
        Ok((records, problems))
    }

    /// The ids with a record and neither `approved/<id>` nor `rejected/<id>`:
    /// three directory listings and no file opened, so the cost is that of
    /// listing names, whatever the number of admitted records. Ids are kept
    /// as 128-bit numbers (16 bytes each) while the listing runs.
    pub fn unsettled_ids(&self) -> StoreResult<Vec<NodeId>> {
        Ok(self.list_names()?.unsettled)
    }

    /// The listing behind [`Store::unsettled_ids`], with the claims seen in it.
    pub(super) fn list_names(&self) -> StoreResult<Listing> {
        let mut settled: Vec<u128> = Vec::new();
        // The crash leftovers among these names are seen in the same listing.
        let mut temps: Vec<PathBuf> = Vec::new();
        for sub in ["approved", "rejected"] {
            self.each_name(sub, |name| {
                if let Some(n) = id_number(name) {
                    settled.push(n);
                } else if name.starts_with(durable::TEMP_PREFIX) {
                    temps.push(self.dir.join(sub).join(name));
                }
            })?;
        }
        // Sorted numbers, 16 bytes an id: a million settled records cost
        // 16 MiB while the listing runs, not a set of strings.
        settled.sort_unstable();
        let mut listing = Listing::default();
        self.each_name("nodes", |name| {
            if let Some(n) = name.strip_suffix(".json").and_then(id_number)
                && settled.binary_search(&n).is_err()
                && let Some(id) = name.strip_suffix(".json").and_then(NodeId::parse)
            {
                listing.unsettled.push(id);
            } else if let Some(id) =
                name.strip_prefix(CLAIM_PREFIX).and_then(|n| n.strip_suffix(".json")).and_then(NodeId::parse)
            {
                listing.claims.push(id);
            } else if name.starts_with(durable::TEMP_PREFIX) {
                temps.push(self.dir.join("nodes").join(name));
            }
        })?;
        remove_stale(&temps);
        Ok(listing)
    }

    /// The ids of every record in `nodes/`, by name: none left out for a
    /// record that does not read (the caller reads each, and refuses).
    pub fn record_ids(&self) -> StoreResult<Vec<NodeId>> {
        let mut ids = Vec::new();
        self.each_name("nodes", |name| ids.extend(name.strip_suffix(".json").and_then(NodeId::parse)))?;
        Ok(ids)
    }

    /// Calls `each` with every name in a subdirectory (none when it is
    /// missing), without holding the listing.
    pub(super) fn each_name(&self, sub: &str, mut each: impl FnMut(&str)) -> StoreResult<()> {
        let dir = self.dir.join(sub);
        let entries = match fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(durable::with_path(e, &dir).into()),
        };
        for entry in entries {
            let entry = entry.map_err(|e| durable::with_path(e, &dir))?;
            if let Some(name) = entry.file_name().to_str() {
                each(name);
            }
        }
        Ok(())
    }

    /// The ids with `rejected/<id>`.
    pub fn rejected_ids(&self) -> StoreResult<Vec<NodeId>> {
        let mut ids = Vec::new();
        self.each_name("rejected", |n| ids.extend(NodeId::parse(n)))?;
        Ok(ids)
    }

    /// The ids with `approved/<id>`.
    pub fn approved_ids(&self) -> StoreResult<Vec<NodeId>> {
        let mut ids = Vec::new();
        self.each_name("approved", |n| ids.extend(NodeId::parse(n)))?;
        Ok(ids)
    }

    /// [`Store::list_names`], but listed again only when one of the three
    /// directories changed (its mtime) or `reconcile_every` passed since
    /// the last listing: an idle server lists nothing, however many records
    /// are admitted. The periodic listing is the backstop for filesystems
    /// whose directory times lag (a network filesystem's other clients).
    pub(super) fn listing_cached(&self, reconcile_every: std::time::Duration) -> StoreResult<Listing> {
        let stamps: Vec<Option<std::time::SystemTime>> = ["nodes", "approved", "rejected"]
            .iter()
            .map(|sub| fs::metadata(self.dir.join(sub)).and_then(|m| m.modified()).ok())
            .collect();
        // A time within the last seconds may hide a second change made in
        // the same clock tick: only a settled directory time is trusted.
        let settled = stamps
            .iter()
            .flatten()
            .all(|t| janus_core::clock::age_of(*t).is_some_and(|age| age.as_secs() >= 2));
        let mut cache = self.unsettled.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((at, known, listing)) = cache.as_ref()
            && settled
            && *known == stamps
            && at.elapsed() < reconcile_every
        {
            return Ok(listing.clone());
        }
        let listing = self.list_names()?;
        *cache = Some((tokio::time::Instant::now(), stamps, listing.clone()));
        Ok(listing)
    }

    /// Records with neither approval nor rejection, read one by one (only
    /// those): the pending ones, and those a crash left between a token's
    /// claim and the end of their admission. What the pending cap, the age
    /// limit and crash recovery need. Age: the record's `announced_at`, else
    /// the file's mtime (a record the reference wrote has no time of its own).
    pub(super) fn pending(&self, reconcile_every: std::time::Duration) -> StoreResult<Vec<Pending>> {
        #[derive(Deserialize)]
        struct Summary {
            #[serde(default)]
            admitted: bool,
            #[serde(default)]
            announced_at: Option<String>,
            #[serde(default)]
            token_claim: Option<String>,
        }
        let rfc3339 = &time::format_description::well_known::Rfc3339;
        let mut pending = Vec::new();
        let listing = self.listing_cached(reconcile_every)?;
        let claims = listing.claims.iter().map(|id| (id, true));
        for (id, is_claim) in listing.unsettled.iter().map(|id| (id, false)).chain(claims) {
            let id = id.clone();
            let path = if is_claim { self.claim_path(&id) } else { self.record_path(&id) };
            let summary = match durable::read_fresh(&path) {
                Ok(bytes) => serde_json::from_slice::<Summary>(&bytes).map_err(io::Error::other),
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue, // forgotten meanwhile
                Err(e) => Err(e),
            };
            let s = match summary {
                Ok(s) => s,
                // Counted as pending (the cap behind --max-pending never
                // undercounts), never forgotten by age (its age is unknown)
                // nor recovered: the admin's to look at.
                Err(e) => {
                    tracing::warn!(node = %id, file = %path.display(), cause = %e, "a record that cannot be read is counted as pending");
                    pending.push(Pending { id, announced: None, token_claim: None, awaits_admin: !is_claim });
                    continue;
                }
            };
            let at = s.announced_at.and_then(|t| time::OffsetDateTime::parse(&t, rfc3339).ok());
            let announced = at.map(|t| t.unix_timestamp()).or_else(|| {
                use std::os::unix::fs::MetadataExt;
                fs::metadata(&path).ok().map(|m| m.mtime())
            });
            // Admitted by its record alone: a token admission between its
            // record and its approval (recovery finishes it), or the reference's.
            let awaits_admin = !s.admitted && !is_claim;
            pending.push(Pending { id, announced, token_claim: s.token_claim, awaits_admin });
        }
        Ok(pending)
    }
}

/// Removes those of `temps` older than [`STALE_TEMP_AGE`].
pub(super) fn remove_stale(temps: &[PathBuf]) {
    for temp in temps {
        let old = fs::symlink_metadata(temp)
            .ok()
            .filter(|m| m.is_file())
            .and_then(|m| m.modified().ok())
            .and_then(janus_core::clock::age_of)
            .is_some_and(|age| age > STALE_TEMP_AGE);
        #[expect(clippy::disallowed_methods, reason = "a crash's temp file: its name was never published")]
        let gone = old && fs::remove_file(temp).is_ok();
        if gone {
            tracing::info!(file = %temp.display(), "removed a temp file a crash left behind");
        }
    }
}

/// A node id as a number, for compact sets of ids.
pub(super) fn id_number(name: &str) -> Option<u128> {
    NodeId::parse(name).and_then(|id| u128::from_str_radix(id.as_str(), 16).ok())
}

/// Why the record `id` (at `path`) is left out of a listing, as its reader
/// is told: by id, no path; the path goes to the log.
fn unreadable(id: &NodeId, path: &std::path::Path, why: String) -> String {
    tracing::warn!(path = %path.display(), cause = %why, "a record cannot be read: left out of a listing");
    format!("{id}: {why}")
}

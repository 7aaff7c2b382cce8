//! Finding a node on the console by what an admin holds: the fingerprint
//! the node's console printed (the whole line, all 64 digits with or
//! without spaces and colons, or its first digits), its name, an id
//! prefix, or its address (announced or TCP source).
//!
//! Invariants: a search looks at every record the listing read, before
//! the page's row cap, so a flood of announcements cannot push a node out
//! of a search for its fingerprint; the rows are newest first, so the
//! node that just announced is at the top; a search never fails (what it
//! does not understand matches by name and address).

use crate::NodeView;

/// Digits of a fingerprint a search needs before it looks at fingerprints
/// (fewer would match most of a fleet).
const FINGERPRINT_DIGITS_AT_LEAST: usize = 4;

/// What a person typed into the search field, read once.
#[derive(Debug, Clone, Default)]
pub struct Search {
    /// As typed, trimmed (shown back in the field).
    pub typed: String,
    /// Lower case, without spaces, colons or the console line's words.
    folded: String,
    /// The fingerprint digits, when what was typed reads as some.
    digits: Option<String>,
}

impl Search {
    /// The search `typed` asks for; an empty one matches everything.
    pub fn new(typed: &str) -> Self {
        let typed = typed.trim().to_string();
        let line = typed.rsplit(crate::CONSOLE_MARKER.trim_end()).next().unwrap_or(&typed);
        let digits: String =
            line.chars().filter(|c| !matches!(c, ':' | ' ' | '\t')).collect::<String>().to_lowercase();
        let digits = (digits.len() >= FINGERPRINT_DIGITS_AT_LEAST
            && digits.len() <= 64
            && digits.bytes().all(|b| b.is_ascii_hexdigit()))
        .then_some(digits);
        Search { folded: typed.to_lowercase(), typed, digits }
    }

    /// Whether it asks for nothing (every node matches).
    pub fn is_empty(&self) -> bool {
        self.typed.is_empty()
    }

    /// Whether `node` is one the search asks for.
    pub fn matches(&self, node: &NodeView) -> bool {
        if self.is_empty() {
            return true;
        }
        if let Some(digits) = &self.digits
            && (node.ca_sha256.starts_with(digits.as_str()) || node.id.starts_with(digits.as_str()))
        {
            return true;
        }
        let contains = |text: &str| text.to_lowercase().contains(&self.folded);
        node.id.starts_with(&self.folded)
            || contains(&node.name)
            || contains(&node.address)
            || node.peer_address.as_deref().is_some_and(contains)
    }
}

/// The nodes `search` asks for, newest first (by announcement, then id).
pub fn found(nodes: Vec<NodeView>, search: &Search) -> Vec<NodeView> {
    let mut found: Vec<NodeView> = nodes.into_iter().filter(|n| search.matches(n)).collect();
    found.sort_by(|a, b| {
        let at = |n: &NodeView| n.announced_at.as_deref().and_then(janus_core::clock::rfc3339_millis);
        at(b).cmp(&at(a)).then_with(|| a.id.cmp(&b.id))
    });
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(i: usize, ca: &str, at: &str) -> NodeView {
        NodeView {
            id: format!("{i:032x}"),
            name: format!("flood-{i}"),
            address: "10.0.0.1:9505".into(),
            peer_address: Some(format!("203.0.113.{}:40000", i % 250)),
            ca_sha256: ca.into(),
            state: janus_store::NodeState::Pending,
            announced_at: Some(at.into()),
            admitted_by: None,
            admitted_at: None,
            ca_cert_pem: String::new(),
            token_sha256_prefix: None,
            token_labels: Default::default(),
            approval_removed: false,
        }
    }

    #[test]
    fn a_flood_cannot_hide_a_node_from_a_search_by_its_fingerprint() {
        let real = "2bcdf1320a".repeat(6) + "beef";
        let mut nodes: Vec<NodeView> =
            (0..600).map(|i| node(i, &format!("{:064x}", i + 1), "2026-12-06T10:00:00Z")).collect();
        let mut edge = node(9999, &real, "2026-12-06T09:00:00Z");
        edge.name = "edge-3".into();
        edge.id = format!("{:032x}", u128::MAX - 5);
        nodes.push(edge);
        let line = format!("{}{}", crate::CONSOLE_MARKER, real.to_uppercase());
        let grouped: Vec<String> =
            real.as_bytes().chunks(2).map(|c| String::from_utf8_lossy(c).into()).collect();
        for typed in [line.as_str(), &real, &real[..8], &grouped.join(":"), "EDGE-3", "ffffffffffff"] {
            let hits = found(nodes.clone(), &Search::new(typed));
            assert_eq!(hits.len(), 1, "{typed:?}");
            assert_eq!(hits[0].name, "edge-3", "{typed:?}");
        }
        // By source address: the flood's own.
        assert_eq!(found(nodes.clone(), &Search::new("203.0.113.7:")).len(), 3);
        // Newest first; an empty search is everything.
        let all = found(nodes, &Search::new(" "));
        assert_eq!(all.len(), 601);
        assert_eq!(all.last().unwrap().name, "edge-3", "the oldest last");
        // Too few digits to mean a fingerprint: a name search.
        assert!(Search::new("2bc").digits.is_none());
    }
}

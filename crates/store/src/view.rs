//! The node as people and programs see it: one record with its state and
//! its approval, under stable field names (`nodes list --json`, the admin
//! API, `nodes watch`, the `--on-admitted` program's input).
//!
//! Invariants: a view is made from what the files say now; a state or an
//! approval that cannot be read refuses the view (never a guess).

use serde::Serialize;

use crate::{NodeId, NodeRecord, NodeState, Store, StoreResult};

/// One node as `nodes list --json` gives it: stable field names.
#[derive(Debug, Clone, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct NodeView {
    /// The node id.
    pub id: String,
    /// The name the node announced.
    pub name: String,
    /// The address the node announced.
    pub address: String,
    /// The address its announcement came from.
    pub peer_address: Option<String>,
    /// The SHA-256 of its CA certificate (DER), as its console prints it.
    pub ca_sha256: String,
    /// Pending, admitted or rejected.
    pub state: NodeState,
    /// When it announced (RFC 3339), if the record says.
    pub announced_at: Option<String>,
    /// Who or what admitted it.
    pub admitted_by: Option<String>,
    /// When it was admitted (RFC 3339): when `approved/<id>` was written.
    pub admitted_at: Option<String>,
    /// Its CA certificate, PEM, as it announced it.
    pub ca_cert_pem: String,
    /// The first 12 hex digits of the SHA-256 of the listed token it
    /// presented (as its `admitted` event and `tokens add --json` say them).
    pub token_sha256_prefix: Option<String>,
    /// That token's labels (`tokens add --label`); `{}` for none.
    pub token_labels: std::collections::BTreeMap<String, String>,
    /// Admitted, holding the fleet's trust, and its approval file removed
    /// since (by hand): the removal withdrew nothing the node has.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub approval_removed: bool,
}

impl NodeView {
    /// Whether the node's token carried every one of `labels`.
    pub fn has_labels(&self, labels: &[(String, String)]) -> bool {
        labels.iter().all(|(key, value)| self.token_labels.get(key) == Some(value))
    }
}

impl Store {
    /// `record` as `nodes list --json` shows it, or (refused) why its state
    /// or its approval cannot be told: a listing never shows a guess.
    pub fn node_view(&self, record: &NodeRecord) -> StoreResult<NodeView> {
        let store = self;
        let approval = store.approval(&record.id)?;
        let admitted_by = approval
            .as_ref()
            // An admin's surface and name (`api (orchestrator)`) say who; an
            // older record's bare user name is said after how.
            .map(|(a, _)| match a.user.as_str() {
                "" => a.by.to_string(),
                actor if actor.ends_with(')') => actor.to_string(),
                user => format!("{} ({user})", a.by),
            })
            .or_else(|| record.admitted_by.as_ref().map(ToString::to_string));
        let state = store.state_of(record)?;
        // Admitted without its approval (so not rejected, and its token's
        // answer or a poll carried the trust): removed, unless an
        // admission is still writing it.
        let approval_removed =
            approval.is_none() && state == NodeState::Admitted && !store.admission_under_way(&record.id)?;
        Ok(NodeView {
            approval_removed,
            id: record.id.to_string(),
            name: record.name.clone(),
            address: record.address.clone(),
            peer_address: record.peer_address.clone(),
            ca_sha256: ca_sha256_of(record),
            state,
            announced_at: record.announced_at.clone(),
            admitted_by,
            admitted_at: approval.map(|(_, at)| janus_core::clock::unix_to_rfc3339(at)),
            ca_cert_pem: record.ca_cert_pem.clone(),
            token_sha256_prefix: record.token_sha256_prefix.clone(),
            token_labels: record.token_labels.clone(),
        })
    }

    /// Adds to a decision's `event` the node it names, as `nodes list --json`
    /// shows it, while its record is there: what `nodes watch` prints and
    /// `serve --on-admitted` gives its program.
    /// A record that cannot be read or told is said as `node_unreadable`
    /// (why), never left out as if forgotten.
    pub fn with_node(&self, event: &mut serde_json::Value) {
        let Some(id) = event["id"].as_str().and_then(NodeId::parse) else { return };
        let shown =
            self.read_record(&id).and_then(|record| record.map(|record| self.node_view(&record)).transpose());
        match shown {
            Ok(Some(node)) => event["node"] = serde_json::to_value(node).unwrap_or_default(),
            Ok(None) => {}
            Err(e) => event["node_unreadable"] = serde_json::Value::String(e.to_string()),
        }
    }
}

/// The record's CA fingerprint; computed for records the reference wrote.
pub fn ca_sha256_of(record: &NodeRecord) -> String {
    record.ca_sha256.clone().unwrap_or_else(|| {
        janus_core::pki::first_certificate(record.ca_cert_pem.as_bytes(), "ca_cert_pem")
            .map(|der| janus_core::pki::sha256_hex(&der))
            .unwrap_or_else(|_| "unparsable".into())
    })
}

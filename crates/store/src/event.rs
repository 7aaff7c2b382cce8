//! The typed state model's vocabulary: who decided on a node
//! ([`DecidedBy`], the `by` of approval and rejection notes and of audit
//! events) and every event the audit trail records ([`AuditEvent`]).
//!
//! Invariants: what these serialise to is what earlier versions wrote, byte
//! for byte (kebab-case `by` values, snake_case event names, the same
//! fields, `null` where a field was `null`), because the audit trail is
//! written with sorted keys from their JSON value ([`super::Audit`]).
//! Readers of the trail take lines as JSON values, so events a later
//! version adds are shown, not refused.

use serde::{Deserialize, Serialize};

use super::NodeId;

/// Who or what approved, rejected or forgot a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DecidedBy {
    /// A registration token admitted it.
    Token,
    /// An admin's `nodes` command.
    Command,
    /// The admission command (`serve --admission-command`).
    Policy,
    /// An approval file made by hand (`touch approved/<id>`).
    ApprovalFile,
    /// A rejection file made by hand.
    RejectionFile,
    /// Its CA was rejected by an admin before.
    RejectedCa,
    /// The pending age limit.
    Expiry,
}

/// As it is written: serde's name for it, the one table of them.
impl std::fmt::Display for DecidedBy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match serde_json::to_value(self) {
            Ok(serde_json::Value::String(name)) => f.write_str(&name),
            _ => Err(std::fmt::Error),
        }
    }
}

/// What an `admitted` event says: which node, and who or what admitted it
/// how. One value makes both the decision and its event ([`super::Store::admit`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Admitted {
    /// Its id.
    pub id: NodeId,
    /// What admitted it.
    pub by: DecidedBy,
    /// Who, when a person or a program did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// The token's fingerprint, when a token did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_sha256_prefix: Option<String>,
    /// The token's labels (`tokens add --label`), when a token with labels did.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub token_labels: std::collections::BTreeMap<String, String>,
    /// The CA fingerprint the admin checked (`nodes approve --ca-sha256`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checked_ca_sha256: Option<String>,
    /// The admin approved over its CA's rejection (`--force`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forced_over_rejected_ca: Option<bool>,
    /// A hand-made approval over a rejected CA.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub over_rejected_ca: Option<bool>,
}

/// Who admitted a node, as its record's `admitted_by` says: a decider this
/// version knows, or a later version's name for one, kept as written (a
/// record is never unreadable, nor rewritten without it, for a new name).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum AdmittedBy {
    /// One of ours.
    Known(DecidedBy),
    /// Another version's.
    Other(String),
}

impl std::fmt::Display for AdmittedBy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AdmittedBy::Known(by) => by.fmt(f),
            AdmittedBy::Other(name) => f.write_str(name),
        }
    }
}

/// Every event of the audit trail; each line is `{"at": …, "event": …}`
/// with the event's fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum AuditEvent {
    /// A node announced itself (and was stored).
    Announced {
        /// Its id.
        id: NodeId,
        /// The name it announced.
        name: String,
        /// The address it announced.
        address: String,
        /// The TCP source.
        peer_address: Option<String>,
        /// Its CA's fingerprint.
        ca_sha256: Option<String>,
        /// Whether it presented a registration token.
        token_presented: bool,
    },
    /// A node was admitted.
    Admitted(Admitted),
    /// A node's spent token was presented again by the same CA within the
    /// readmit window: answered admitted with its first id.
    Readmitted {
        /// The first id.
        id: NodeId,
        /// Always a token.
        by: DecidedBy,
        /// The token's fingerprint.
        token_sha256_prefix: String,
        /// The TCP source of the repeat.
        peer_address: Option<String>,
        /// The address it announced this time.
        address: String,
        /// Its CA's fingerprint.
        ca_sha256: Option<String>,
        /// The bundle version the answer carried.
        bundle_version: u64,
    },
    /// A node was rejected: its polls get 404.
    Rejected {
        /// Its id.
        id: NodeId,
        /// Who: an admin, or its CA's earlier rejection.
        by: DecidedBy,
        /// The admin, when one did.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        user: Option<String>,
        /// Its CA's fingerprint (rejected with it).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ca_sha256: Option<String>,
    },
    /// A node's files were removed.
    Forgotten {
        /// Its id.
        id: NodeId,
        /// An admin, or the age limit.
        by: DecidedBy,
        /// The admin, when one did.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        user: Option<String>,
        /// Why, when the age limit did.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// Forgetting the record an admin rejected lifted its CA's rejection.
    CaUnrejected {
        /// The record forgotten.
        id: NodeId,
        /// The CA no longer rejected.
        ca_sha256: String,
        /// The admin.
        user: String,
    },
    /// The trust went out to a node.
    TrustDelivered {
        /// Its id.
        id: NodeId,
        /// The bundle version it got.
        bundle_version: u64,
    },
    /// The approval of a node that already had the fleet's trust was
    /// removed (`rm approved/<id>`, by hand): seen by a maintenance pass.
    /// It withdraws nothing the node has; it is said, once.
    ApprovalRemoved {
        /// Its id.
        id: NodeId,
        /// The name it announced.
        name: String,
        /// Which writer noticed (who removed the file is not known).
        noticed_by: String,
    },
    /// `tokens add` made a token.
    TokenAdded {
        /// Its fingerprint.
        token_sha256_prefix: String,
        /// When it expires (RFC 3339), if it does.
        expires_at: Option<String>,
        /// How many nodes it admits.
        uses: u32,
        /// The admin.
        user: String,
    },
    /// `tokens revoke` ended a token.
    TokenRevoked {
        /// Its fingerprint.
        token_sha256_prefix: String,
        /// The admin.
        user: String,
    },
    /// A token passed its expiry.
    TokenExpired {
        /// Its fingerprint.
        token_sha256_prefix: String,
    },
}

impl Admitted {
    /// Admitted by `by`, with `user` when a person or a program decided.
    pub fn new(id: NodeId, by: DecidedBy, user: Option<String>) -> Self {
        Admitted {
            id,
            by,
            user,
            token_sha256_prefix: None,
            token_labels: Default::default(),
            checked_ca_sha256: None,
            forced_over_rejected_ca: None,
            over_rejected_ca: None,
        }
    }

    /// Admitted by a token, named by its fingerprint (none for a token
    /// that is empty: a recovery that no longer knows it).
    pub fn by_token(id: NodeId, token_sha256_prefix: Option<String>) -> Self {
        Admitted { token_sha256_prefix, ..Admitted::new(id, DecidedBy::Token, None) }
    }

    /// Admitted by an admin's command, with the CA fingerprint they
    /// checked, and whether they forced it over the CA's rejection.
    pub fn by_command(id: NodeId, user: String, checked: Option<String>, forced: bool) -> Self {
        Admitted {
            checked_ca_sha256: checked,
            forced_over_rejected_ca: forced.then_some(true),
            ..Admitted::new(id, DecidedBy::Command, Some(user))
        }
    }

    /// Admitted by a hand-made `approved/<id>` of `user`'s, and whether it
    /// was over a rejection.
    pub fn by_file(id: NodeId, user: String, over_rejected_ca: bool) -> Self {
        Admitted {
            over_rejected_ca: Some(over_rejected_ca),
            ..Admitted::new(id, DecidedBy::ApprovalFile, Some(user))
        }
    }
}

impl From<Admitted> for AuditEvent {
    fn from(admitted: Admitted) -> Self {
        AuditEvent::Admitted(admitted)
    }
}

impl AuditEvent {
    /// `forgotten` by `by`.
    pub fn forgotten(id: NodeId, by: DecidedBy, user: Option<String>, reason: Option<&str>) -> Self {
        AuditEvent::Forgotten { id, by, user, reason: reason.map(str::to_string) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines as earlier versions wrote them (keys sorted), parsed and
    /// written again: the same bytes.
    #[test]
    fn events_read_and_write_what_earlier_versions_wrote() {
        let id = "0123456789abcdef0123456789abcdef";
        let lines = [
            format!(r#"{{"address":"10.0.2.15:9505","ca_sha256":null,"event":"announced","id":"{id}","name":"edge","peer_address":"127.0.0.1:4000","token_presented":false}}"#),
            format!(r#"{{"by":"token","event":"admitted","id":"{id}","token_sha256_prefix":"abcdef012345"}}"#),
            format!(r#"{{"by":"approval-file","event":"admitted","id":"{id}","over_rejected_ca":true,"user":"root"}}"#),
            format!(r#"{{"by":"command","checked_ca_sha256":"ab","event":"admitted","forced_over_rejected_ca":true,"id":"{id}","user":"alice"}}"#),
            format!(r#"{{"by":"rejected-ca","ca_sha256":"cd","event":"rejected","id":"{id}"}}"#),
            format!(r#"{{"by":"expiry","event":"forgotten","id":"{id}","reason":"pending longer than the limit"}}"#),
            format!(r#"{{"ca_sha256":"cd","event":"ca_unrejected","id":"{id}","user":"alice"}}"#),
            format!(r#"{{"bundle_version":3,"event":"trust_delivered","id":"{id}"}}"#),
            r#"{"event":"token_added","expires_at":null,"token_sha256_prefix":"abcdef012345","user":"alice","uses":2}"#.to_string(),
            r#"{"event":"token_expired","token_sha256_prefix":"abcdef012345"}"#.to_string(),
        ];
        for line in lines {
            let event: AuditEvent = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{line}: {e}"));
            let value = serde_json::to_value(&event).unwrap();
            assert_eq!(serde_json::to_string(&value).unwrap(), line);
        }
    }

    #[test]
    fn decided_by_is_written_as_before() {
        let written = [
            (DecidedBy::Token, "token"),
            (DecidedBy::Command, "command"),
            (DecidedBy::Policy, "policy"),
            (DecidedBy::ApprovalFile, "approval-file"),
            (DecidedBy::RejectionFile, "rejection-file"),
            (DecidedBy::RejectedCa, "rejected-ca"),
            (DecidedBy::Expiry, "expiry"),
        ];
        for (by, name) in written {
            assert_eq!(serde_json::to_value(by).unwrap(), serde_json::json!(name));
            assert_eq!(by.to_string(), name, "shown as written");
        }
        // A record's `admitted_by` of a later version: kept as written.
        let later: AdmittedBy = serde_json::from_str(r#""orchestrator""#).unwrap();
        assert_eq!(later, AdmittedBy::Other("orchestrator".into()));
        assert_eq!(serde_json::to_string(&later).unwrap(), r#""orchestrator""#);
        let ours: AdmittedBy = serde_json::from_str(r#""token""#).unwrap();
        assert_eq!(ours, AdmittedBy::Known(DecidedBy::Token));
    }
}

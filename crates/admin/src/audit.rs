//! The audit trail read as typed events ([`AuditEntry`]): what the console
//! says in words and the event streams filter, without comparing strings
//! of a `Value`.
//!
//! Invariants: an event this version does not know (a newer writer's) is
//! kept as it is, never dropped and never an error: the trail is a log.

use janus_store::AuditEvent;

/// One line of the trail.
#[derive(Debug, Clone, PartialEq)]
pub enum AuditEntry {
    /// An event this version knows, with its time (RFC 3339).
    Known {
        /// When it was written.
        at: String,
        /// What happened.
        event: AuditEvent,
    },
    /// A line of a kind (or shape) this version does not know, as it is.
    Unknown(serde_json::Value),
}

impl AuditEntry {
    /// Its kind, as the trail names it (`admitted`, `rejected`…).
    pub fn kind(&self) -> String {
        match self {
            AuditEntry::Known { event, .. } => {
                serde_json::to_value(event).ok().and_then(|v| v["event"].as_str().map(str::to_string))
            }
            AuditEntry::Unknown(value) => value["event"].as_str().map(str::to_string),
        }
        .unwrap_or_else(|| "event".to_string())
    }

    /// Whether it is a decision about a node: an admission, a
    /// readmission, a rejection or a forget (what `nodes watch` follows).
    pub fn is_decision(&self) -> bool {
        matches!(
            self,
            AuditEntry::Known {
                event: AuditEvent::Admitted(_)
                    | AuditEvent::Readmitted { .. }
                    | AuditEvent::Rejected { .. }
                    | AuditEvent::Forgotten { .. },
                ..
            }
        )
    }
}

/// The line `value` read as a typed event.
pub fn audit_entry(value: &serde_json::Value) -> AuditEntry {
    #[derive(serde::Deserialize)]
    struct Timed {
        at: String,
        #[serde(flatten)]
        event: AuditEvent,
    }
    match serde_json::from_value::<Timed>(value.clone()) {
        Ok(Timed { at, event }) => AuditEntry::Known { at, event },
        Err(_) => AuditEntry::Unknown(value.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_events_are_typed_and_others_kept() {
        let id = janus_store::NodeId::generate();
        let line = serde_json::json!({"at": "2026-12-07T00:00:00Z", "event": "rejected", "id": id.as_str(),
            "by": "command", "user": "command (alice)"});
        let entry = audit_entry(&line);
        assert!(entry.is_decision(), "{entry:?}");
        assert_eq!(entry.kind(), "rejected");
        let future = serde_json::json!({"at": "t", "event": "teleported", "id": "x"});
        assert_eq!(audit_entry(&future), AuditEntry::Unknown(future.clone()));
        assert_eq!(audit_entry(&future).kind(), "teleported");
    }
}

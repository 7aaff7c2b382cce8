//! The node id: 32 lowercase hex characters from a CSPRNG, as the reference
//! issues them. Parsing is the only way to get one from outside, so an id can
//! never name a path outside `nodes/` or `approved/`.

use std::fmt;

/// A node id: 32 lowercase hex characters.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(String);

impl NodeId {
    /// A new random id (128 bits from the OS CSPRNG).
    pub fn generate() -> Self {
        let bytes: [u8; 16] = rand::random();
        NodeId(janus_core::pki::hex(&bytes))
    }

    /// `None` unless `s` is exactly 32 lowercase hex characters.
    pub fn parse(s: &str) -> Option<Self> {
        janus_core::pki::is_hex(s, 32).then(|| NodeId(s.to_string()))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Written as its text, as the reference writes `"id"`.
impl serde::Serialize for NodeId {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

/// Read through [`NodeId::parse`]: a record naming a malformed id is not a record.
impl<'de> serde::Deserialize<'de> for NodeId {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        NodeId::parse(&text).ok_or_else(|| serde::de::Error::custom("an id is 32 lowercase hex characters"))
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_ids_parse_and_differ() {
        let a = NodeId::generate();
        assert_eq!(NodeId::parse(a.as_str()), Some(a.clone()));
        assert_ne!(a, NodeId::generate());
    }

    #[test]
    fn refuses_anything_else() {
        for bad in
            ["", "../../etc/passwd", &"A".repeat(32), &"a".repeat(31), &"a".repeat(33), &"g".repeat(32)]
        {
            assert_eq!(NodeId::parse(bad), None, "{bad}");
            assert!(serde_json::from_value::<NodeId>(serde_json::json!(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn serde_writes_and_reads_the_text() {
        let id = NodeId::generate();
        let text = serde_json::to_string(&id).unwrap();
        assert_eq!(text, format!("\"{id}\""));
        assert_eq!(serde_json::from_str::<NodeId>(&text).unwrap(), id);
    }
}

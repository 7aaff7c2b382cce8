//! The admin API's bodies and answers as types, shared by the server's
//! handlers and the admin client (and derived into the OpenAPI document's
//! schemas, [`super::openapi`]): each body turns into the admin model's
//! request ([`crate::model`]) or is refused naming its field.
//!
//! Invariants: every constraint the server enforces on a body is written
//! on its type here (`#[schema(…)]`), so the document promises exactly
//! what is refused; unknown fields are refused.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::{AdminError, Code, Field};
use crate::model::{Fingerprint, Mint, NewTokens};
use crate::nodes::NodeDetail;
use crate::tokens::{AddedToken, Revoked};

/// `POST /v1/tokens`: mint `count` tokens (default 1), or register `token`, not both.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"count": 3, "uses": 1, "expires_in_seconds": 7200, "description": "rack 3",
    "labels": {"pool": "gpu"}}))]
pub struct NewTokensBody {
    /// How many tokens to make (not with `token`).
    #[schema(minimum = 1, maximum = 100_000)]
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "whole")]
    pub count: Option<u64>,
    /// How many nodes each token admits (default 1).
    #[schema(minimum = 1, maximum = 10_000)]
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "whole")]
    pub uses: Option<u64>,
    /// How long the tokens admit, in seconds (at most ten years).
    #[schema(minimum = 1, maximum = 315_360_000)]
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "whole")]
    pub expires_in_seconds: Option<u64>,
    /// What the tokens are for.
    #[schema(max_length = 1000)]
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub description: Option<String>,
    /// Copied into the record of every node the tokens admit: at most 16,
    /// keys of 1 to 63 letters, digits, '.', '_', '-' or '/', values of at
    /// most 253 characters (the document's schema says so: [`super::openapi`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// An orchestrator's own token to register (not with `count`): 16 to
    /// 512 printable ASCII characters, no space, not starting with '#'.
    #[schema(pattern = "^[!-\"$-~][!-~]{15,511}$")]
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub token: Option<String>,
}

/// A whole number as JSON Schema's `integer` takes it: `3` and `3.0` alike
/// (a negative or fractional one is not one, and is refused).
fn whole<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<u64>, D::Error> {
    // Absent is none (`serde(default)`); `null` is refused, as the schema says.
    let number = serde_json::Number::deserialize(deserializer)?;
    if let Some(n) = number.as_u64() {
        return Ok(Some(n));
    }
    match number.as_f64() {
        Some(f) if f.fract() == 0.0 && (0.0..=u64::MAX as f64).contains(&f) => Ok(Some(f as u64)),
        _ => Err(serde::de::Error::custom(format!("{number} is not a whole number of at least 0"))),
    }
}

/// A field that, when there, is a value: absent is none (`serde(default)`),
/// `null` is refused, as the schema says (`token: null` beside `count`
/// is both fields given).
fn present<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(
    deserializer: D,
) -> Result<Option<T>, D::Error> {
    T::deserialize(deserializer).map(Some)
}

/// A JSON body as the API takes it: an object (never an array, which serde
/// would also read into a struct), then the type.
pub fn object<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, AdminError> {
    let refuse = |why: String| {
        AdminError::new(Code::InvalidRequest, format!("the body is not what this route takes: {why}"))
    };
    let value: serde_json::Value = serde_json::from_slice(body).map_err(|e| refuse(e.to_string()))?;
    if !value.is_object() {
        return Err(refuse("it is not a JSON object".into()));
    }
    serde_json::from_value(value).map_err(|e| refuse(e.to_string()))
}

impl NewTokensBody {
    /// The request it asks for, or why it cannot be one.
    pub fn request(self) -> Result<NewTokens, AdminError> {
        let too_big = |field| AdminError::field(field, "is out of its bounds");
        let mint = match (self.token, self.count) {
            (Some(_), Some(_)) => {
                return Err(AdminError::new(Code::InvalidRequest, "give token or count, not both"));
            }
            (Some(token), None) => Mint::Given(token),
            (None, count) => {
                Mint::Count(usize::try_from(count.unwrap_or(1)).map_err(|_| too_big(Field::Count))?)
            }
        };
        let request = NewTokens {
            mint,
            uses: self.uses.map(|n| u32::try_from(n).map_err(|_| too_big(Field::Uses))).transpose()?,
            expires_in: self.expires_in_seconds.map(Duration::from_secs),
            description: self.description,
            labels: self.labels,
        };
        request.check()?;
        Ok(request)
    }
}

/// `POST /v1/nodes/{id}/approve`: the CA the orchestrator expects the node to have.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"expect_ca_sha256":
    "[    2.512] pki: this node's CA: SHA-256 2bcdf1322bcdf1322bcdf1322bcdf1322bcdf1322bcdf1322bcdf1322bcdf132"}))]
pub struct Approval {
    /// The node's CA SHA-256: the 64 hex digits (upper or lower case, spaces
    /// or colons anywhere), or the node's whole console line `pki: this node's CA: SHA-256 <hex>`.
    #[schema(
        pattern = "^[ \\t\\r\\n]*([^\\n]*pki: this node's CA: SHA-256 )?[: ]*([0-9A-Fa-f][: ]*){64}[ \\t\\r\\n]*$"
    )]
    pub expect_ca_sha256: String,
    /// Approve even a node whose CA was rejected.
    #[serde(default)]
    pub force: bool,
}

impl Approval {
    /// The expected fingerprint, or why it is none.
    pub fn fingerprint(&self) -> Result<Fingerprint, AdminError> {
        Fingerprint::parse(&self.expect_ca_sha256, Field::ExpectedFingerprint)
    }
}

/// `POST /v1/nodes/{id}/reject`: no field (`{}`), or no body.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Rejection {}

/// A decision's answer: what it did, and the node as it stands now.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Decided {
    /// What was done and what follows from it, for people.
    pub said: String,
    /// Whether anything was written (false: it was so already).
    pub changed: bool,
    /// The node, as `GET /v1/nodes/{id}` shows it.
    pub node: Option<NodeDetail>,
}

/// `POST /v1/tokens`'s answer: each token said here, once.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct TokensMade {
    /// The tokens made or registered.
    pub tokens: Vec<AddedToken>,
}

/// `DELETE /v1/tokens/{sha256_prefix}`'s answer.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct TokenRevoked {
    /// The token revoked, by its fingerprint.
    pub revoked: Revoked,
}

/// A token's SHA-256 prefix as a revoke names it (12 to 64 hex digits), lower case.
pub const TOKEN_PREFIX_PATTERN: &str = "^[0-9A-Fa-f]{12,64}$";

pub use crate::model::token_prefix;

/// A duration as the API takes it (`since`): digits and a unit (ms, s, m, h, d).
pub const DURATION_PATTERN: &str = "^[0-9]{1,12}(ms|s|m|h|d)?$";

/// `text` as [`DURATION_PATTERN`] says, nothing else (no blanks).
pub fn duration(text: &str, field: Field) -> Result<Duration, AdminError> {
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    let unit_ok = matches!(&text[digits..], "" | "ms" | "s" | "m" | "h" | "d");
    if !(1..=12).contains(&digits) || !unit_ok {
        return Err(AdminError::field(
            field,
            "must be a duration: digits and a unit, such as 90s, 15m, 2h, 7d",
        ));
    }
    janus_core::clock::parse_duration(text).map_err(|_| {
        AdminError::field(field, "must be a duration: digits and a unit, such as 90s, 15m, 2h, 7d")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_becomes_the_request_or_names_its_field() {
        let body = |json: serde_json::Value| serde_json::from_value::<NewTokensBody>(json).unwrap().request();
        assert!(body(serde_json::json!({})).is_ok());
        let refused = body(serde_json::json!({"count": 0})).unwrap_err();
        assert_eq!((refused.code, refused.field), (Code::InvalidField, Some(Field::Count)));
        let refused = body(serde_json::json!({"count": 2, "token": "a".repeat(20)})).unwrap_err();
        assert_eq!(refused.code, Code::InvalidRequest);
        assert_eq!(body(serde_json::json!({"uses": 5_000_000_000u64})).unwrap_err().field, Some(Field::Uses));
        assert!(serde_json::from_value::<NewTokensBody>(serde_json::json!({"expires_in": "2h"})).is_err());
    }

    #[test]
    fn durations_are_exactly_the_pattern() {
        assert_eq!(duration("90s", Field::Since).unwrap(), Duration::from_secs(90));
        assert_eq!(duration("2", Field::Since).unwrap(), Duration::from_secs(2));
        for bad in [" 5m", "5m ", "", "m", "5w", "1234567890123s"] {
            assert!(duration(bad, Field::Since).is_err(), "{bad:?}");
        }
    }
}

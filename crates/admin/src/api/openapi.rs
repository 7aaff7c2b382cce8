//! The admin API described as an OpenAPI 3.1 document (`GET
//! /v1/openapi.json`): its paths, methods and scopes come from the route
//! table itself (given by [`super::document`]), its schemas are derived from the
//! types the handlers take and answer ([`super::wire`], utoipa's
//! `ToSchema`), and the few constraints a derive cannot say (the labels'
//! keys, `token` versus `count`, path and query patterns) are written
//! here, beside the parsers that enforce them.
//!
//! Invariants: every route of the table is in the document and nothing
//! else is (a test walks both); every operation lists every status the
//! listener can answer it with, each refusal as `application/problem+json`
//! with the closed list of codes; no operation answers 409; schemathesis
//! (CI: scripts/schemathesis-check.sh) finds no request the document
//! allows that the server refuses, nor the reverse.

use serde_json::{Map, Value, json};
use utoipa::openapi::ComponentsBuilder;

use super::wire::{self, Approval, Decided, NewTokensBody, Rejection, TokenRevoked, TokensMade};
use crate::credential::{Caller, Scope};
use crate::error::Code;
use crate::nodes::{NodeDetail, NodeList};
use crate::web::{Needs, Problem};

/// What one operation takes and answers, beyond its path and scope.
struct Operation {
    summary: &'static str,
    parameters: Value,
    body: Option<&'static str>,
    success: (&'static str, Value),
}

fn schema(name: &str) -> Value {
    json!({ "$ref": format!("#/components/schemas/{name}") })
}

fn node_id_parameter(what: &str) -> Value {
    json!([{ "name": "id", "in": "path", "required": true, "description": what,
             "schema": { "type": "string", "minLength": 1, "maxLength": 253 } }])
}

fn operation(method: &str, path: &str) -> Operation {
    let none = json!([]);
    match (method, path) {
        ("get", "/v1/whoami") => Operation {
            summary: "The credential's name and scopes",
            parameters: none,
            body: None,
            success: ("200", schema("Caller")),
        },
        ("get", "/v1/openapi.json") => Operation {
            summary: "This document",
            parameters: none,
            body: None,
            success: ("200", json!({ "type": "object" })),
        },
        ("post", "/v1/tokens") => Operation {
            summary: "Make tokens (or register one given), each said once, in this answer",
            parameters: none,
            body: Some("NewTokensBody"),
            success: ("201", schema("TokensMade")),
        },
        ("delete", "/v1/tokens/{sha256_prefix}") => Operation {
            summary: "Revoke a token by its SHA-256 prefix (12 to 64 hex digits)",
            parameters: json!([{ "name": "sha256_prefix", "in": "path", "required": true,
                "description": "the token's SHA-256 prefix, as POST /v1/tokens said it",
                "schema": { "type": "string", "pattern": wire::TOKEN_PREFIX_PATTERN } }]),
            body: None,
            success: ("200", schema("TokenRevoked")),
        },
        ("get", "/v1/nodes") => Operation {
            summary: "The nodes, filtered by state, token label and admission time",
            parameters: json!([
                { "name": "state", "in": "query", "style": "form", "explode": true,
                  "description": "repeatable: any of them",
                  "schema": { "type": "array", "items": { "type": "string", "enum": ["pending", "admitted", "rejected"] } } },
                { "name": "label", "in": "query", "style": "form", "explode": true,
                  "description": "KEY=VALUE; repeatable: all of them",
                  "schema": { "type": "array", "items": { "type": "string", "pattern": "^[^=]*=" } } },
                { "name": "admitted_since", "in": "query",
                  "description": "an RFC 3339 time, or a duration ago (90s, 15m, 12h, 10d)",
                  "schema": { "type": "string", "pattern": "^([0-9]{1,12}(ms|s|m|h|d)?|[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])[Tt](0[0-9]|1[0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,9})?([Zz]|[+-](0[0-9]|1[0-9]|2[0-3]):[0-5][0-9]))$" } }
            ]),
            body: None,
            success: ("200", schema("NodeList")),
        },
        ("get", "/v1/nodes/{id}") => Operation {
            summary: "One node, by id, id prefix (6 hex digits or more) or name",
            parameters: node_id_parameter("an id, an id prefix or a name"),
            body: None,
            success: ("200", schema("NodeDetail")),
        },
        ("post", "/v1/nodes/{id}/approve") => Operation {
            summary: "Approve a pending node whose CA is the one expected",
            parameters: node_id_parameter("an id, an id prefix or a pending node's name"),
            body: Some("Approval"),
            success: ("200", schema("Decided")),
        },
        ("post", "/v1/nodes/{id}/reject") => Operation {
            summary: "Reject a node and its CA",
            parameters: node_id_parameter("an id, an id prefix or a name"),
            body: Some("Rejection"),
            success: ("200", schema("Decided")),
        },
        ("get", "/v1/events") => Operation {
            summary: "Server-Sent Events: admitted, readmitted, rejected, forgotten",
            parameters: json!([{ "name": "since", "in": "query", "description": "a duration ago (90s, 1h)",
                "schema": { "type": "string", "pattern": wire::DURATION_PATTERN } }]),
            body: None,
            success: ("200", json!({ "type": "string", "description": "text/event-stream" })),
        },
        _ => Operation { summary: "undescribed", parameters: none, body: None, success: ("200", json!({})) },
    }
}

/// The statuses every operation's refusals can have, each with why: the
/// codes of each status (from [`Code`]) are listed in its description.
fn refusals() -> Vec<(u16, String)> {
    let mut statuses: Vec<u16> = Code::ALL.iter().map(|c| c.status()).collect();
    statuses.sort_unstable();
    statuses.dedup();
    statuses
        .into_iter()
        .map(|status| {
            let codes: Vec<&str> =
                Code::ALL.iter().filter(|c| c.status() == status).map(|c| c.name()).collect();
            (status, format!("refused: {}", codes.join(", ")))
        })
        .collect()
}

/// The document of the API whose routes are `routes` (method, path, what each needs).
pub fn document_of(routes: &[(axum::http::Method, &'static str, crate::web::Needs)]) -> Value {
    let mut paths = Map::new();
    for (method, path, needs) in routes.iter().cloned() {
        let method = method.as_str().to_ascii_lowercase();
        let op = operation(&method, path);
        let mut responses = Map::new();
        let success = if path == "/v1/events" {
            json!({ "description": "the stream", "content": { "text/event-stream": { "schema": op.success.1 } } })
        } else {
            json!({ "description": "done", "content": { "application/json": { "schema": op.success.1 } } })
        };
        responses.insert(op.success.0.into(), success);
        if path == "/v1/nodes" {
            responses["200"]["links"] = links();
        }
        for (status, why) in refusals() {
            let mut refusal = json!({ "description": why,
                "content": { "application/problem+json": { "schema": schema("Problem") } } });
            if status == 503 {
                refusal["headers"] = json!({ "Retry-After": { "description": "seconds before a retry",
                    "schema": { "type": "integer" } } });
            }
            responses.insert(status.to_string(), refusal);
        }
        let scope = match needs {
            Needs::Credential => "any valid credential".to_string(),
            Needs::Scope(scope) => format!("the scope `{}`", scope.name()),
        };
        let mut operation = json!({
            "summary": op.summary,
            "description": format!("Needs {scope}."),
            "operationId": operation_id(&method, path),
            "parameters": op.parameters,
            "responses": responses,
            "x-scope": match needs { Needs::Credential => Value::Null, Needs::Scope(s) => json!(s.name()) },
        });
        if let Some(body) = op.body {
            // A reject takes `{}` or no body: its body is optional.
            operation["requestBody"] = json!({ "required": true,
                "content": { "application/json": { "schema": schema(body) } } });
        }
        let entry = paths.entry(path.to_string()).or_insert_with(|| json!({}));
        entry[method] = operation;
    }
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "janus-registration admin API",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Served by `serve --admin-listen` to client certificates of the admin CA \
                (docs/orchestrating.md). Scopes: tokens, read, approve, reject. Every refusal is \
                RFC 9457 application/problem+json with a `code` from a closed list \
                (docs/orchestrating.md: what a client does for each).",
        },
        "servers": [{ "url": "https://controller.fleet.janus" }],
        "paths": paths,
        "components": {
            "schemas": schemas(),
            "securitySchemes": { "adminCredential": { "type": "mutualTLS",
                "description": "a client certificate of the admin CA; its URI SANs are its scopes" } },
        },
        "security": [{ "adminCredential": [] }],
    })
}

fn operation_id(method: &str, path: &str) -> String {
    format!("{method}{}", path.replace(['/', '{', '}', '.'], "_"))
}

/// From a listing to what can be done with its first node.
fn links() -> Value {
    let id = json!({ "id": "$response.body#/nodes/0/id" });
    json!({
        "ShowNode": { "operationId": operation_id("get", "/v1/nodes/{id}"), "parameters": id },
        "ApproveNode": { "operationId": operation_id("post", "/v1/nodes/{id}/approve"), "parameters": id },
        "RejectNode": { "operationId": operation_id("post", "/v1/nodes/{id}/reject"), "parameters": id },
    })
}

/// The schemas, derived from the types; then what a derive cannot say.
fn schemas() -> Value {
    let components = ComponentsBuilder::new()
        .schema_from::<Caller>()
        .schema_from::<Scope>()
        .schema_from::<NewTokensBody>()
        .schema_from::<TokensMade>()
        .schema_from::<TokenRevoked>()
        .schema_from::<Approval>()
        .schema_from::<Rejection>()
        .schema_from::<Decided>()
        .schema_from::<NodeList>()
        .schema_from::<NodeDetail>()
        .schema_from::<Problem>()
        .schema_from::<crate::tokens::AddedToken>()
        .schema_from::<crate::tokens::Revoked>()
        .schema_from::<janus_store::NodeView>()
        .schema_from::<janus_store::NodeState>()
        .schema_from::<janus_store::OrphanApproval>()
        .schema_from::<Code>()
        .build();
    let mut schemas = serde_json::to_value(&components).unwrap_or_default()["schemas"].take();
    let labels = json!({ "type": "object", "maxProperties": janus_store::tokens::MAX_LABELS,
        "propertyNames": { "pattern": "^[A-Za-z0-9._/-]{1,63}$" },
        "additionalProperties": { "type": "string", "maxLength": janus_store::tokens::MAX_LABEL_VALUE } });
    let new_tokens = &mut schemas["NewTokensBody"];
    // An optional field is absent or a value: `null` is refused.
    if let Some(properties) = new_tokens["properties"].as_object_mut() {
        for property in properties.values_mut() {
            if let Some(types) = property["type"].as_array() {
                let kinds: Vec<Value> = types.iter().filter(|t| *t != "null").cloned().collect();
                property["type"] = if kinds.len() == 1 { kinds[0].clone() } else { Value::Array(kinds) };
            }
        }
    }
    new_tokens["properties"]["labels"] = labels;
    new_tokens["additionalProperties"] = json!(false);
    // `token` registers one; `count` makes some: never both.
    new_tokens["not"] = json!({ "required": ["token", "count"] });
    for closed in ["Approval", "Rejection"] {
        schemas[closed]["additionalProperties"] = json!(false);
    }
    schemas
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_route_is_described_and_nothing_else() {
        let document = super::super::document();
        let paths = document["paths"].as_object().unwrap();
        let table = super::super::route_table();
        for (method, path, _) in &table {
            let op = &paths[*path][method.as_str().to_ascii_lowercase()];
            assert!(op.is_object(), "{method} {path} is not in the document");
            assert_ne!(op["summary"], "undescribed", "{method} {path}");
            assert!(op["responses"].get("409").is_none());
        }
        let described: usize = paths.values().map(|p| p.as_object().unwrap().len()).sum();
        assert_eq!(described, table.len(), "a path in the document that is not served");
    }

    #[test]
    fn the_schemas_say_the_bounds_and_the_codes() {
        let document = super::super::document();
        let schemas = &document["components"]["schemas"];
        let tokens = &schemas["NewTokensBody"]["properties"];
        assert_eq!(tokens["count"]["maximum"], crate::model::MAX_COUNT);
        assert_eq!(tokens["uses"]["maximum"], janus_store::tokens::MAX_USES);
        assert_eq!(tokens["description"]["maxLength"], janus_store::tokens::MAX_DESCRIPTION);
        assert_eq!(tokens["expires_in_seconds"]["maximum"], crate::model::MAX_LIFETIME.as_secs());
        assert_eq!(
            schemas["Approval"]["properties"]["expect_ca_sha256"]["pattern"],
            crate::model::Fingerprint::PATTERN
        );
        let codes: Vec<&str> =
            schemas["Code"]["enum"].as_array().unwrap().iter().map(|c| c.as_str().unwrap()).collect();
        assert_eq!(codes, Code::ALL.map(Code::name));
    }
}

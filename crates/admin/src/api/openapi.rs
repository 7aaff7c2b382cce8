//! The admin API described as an OpenAPI 3.1 document (`GET
//! /v1/openapi.json`): its paths, methods and scopes come from the route
//! table itself ([`super::route_table`]), so a route cannot be served and
//! left out; what each takes and answers is said here, beside it.
//!
//! Invariants: every route of the table is in the document and nothing
//! else is (a test walks both); every operation lists the statuses the
//! error table can give it; no operation answers 409.

use serde_json::{Map, Value, json};

use super::{Needs, Scope};

/// What one operation takes and answers, beyond its path and scope.
struct Operation {
    summary: &'static str,
    parameters: Value,
    body: Option<Value>,
    success: (&'static str, Value),
}

fn operation(method: &str, path: &str) -> Operation {
    let schema = |name: &str| json!({ "$ref": format!("#/components/schemas/{name}") });
    let path_param = |name: &str, what: &str| json!([{ "name": name, "in": "path", "required": true, "description": what, "schema": { "type": "string" } }]);
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
            body: Some(schema("NewTokens")),
            success: (
                "201",
                json!({ "type": "object", "required": ["tokens"],
                        "properties": { "tokens": { "type": "array", "items": schema("AddedToken") } } }),
            ),
        },
        ("delete", "/v1/tokens/{sha256_prefix}") => Operation {
            summary: "Revoke a token by its SHA-256 prefix (12 to 64 hex digits)",
            parameters: path_param("sha256_prefix", "the token's SHA-256 prefix, as POST /v1/tokens said it"),
            body: None,
            success: (
                "200",
                json!({ "type": "object", "properties": { "revoked": { "type": "object",
                        "properties": { "sha256_prefix": { "type": "string" } } } } }),
            ),
        },
        ("get", "/v1/nodes") => Operation {
            summary: "The nodes, filtered by state, token label and admission time",
            parameters: json!([
                { "name": "state", "in": "query", "schema": { "type": "string", "enum": ["pending", "admitted", "rejected"] } },
                { "name": "label", "in": "query", "description": "KEY=VALUE; repeatable: all of them", "schema": { "type": "string" } },
                { "name": "admitted_since", "in": "query", "description": "RFC 3339, or a duration ago (1h)", "schema": { "type": "string" } }
            ]),
            body: None,
            success: ("200", schema("NodeList")),
        },
        ("get", "/v1/nodes/{id}") => Operation {
            summary: "One node, by id, id prefix (6 hex digits or more) or name",
            parameters: path_param("id", "an id, an id prefix or a name"),
            body: None,
            success: ("200", schema("NodeDetail")),
        },
        ("post", "/v1/nodes/{id}/approve") => Operation {
            summary: "Approve a pending node whose CA is the one expected",
            parameters: path_param("id", "an id, an id prefix or a pending node's name"),
            body: Some(
                json!({ "type": "object", "required": ["expect_ca_sha256"], "additionalProperties": false,
                "properties": { "expect_ca_sha256": { "type": "string" }, "force": { "type": "boolean" } } }),
            ),
            success: ("200", schema("Decided")),
        },
        ("post", "/v1/nodes/{id}/reject") => Operation {
            summary: "Reject a node and its CA",
            parameters: path_param("id", "an id, an id prefix or a name"),
            body: None,
            success: ("200", schema("Decided")),
        },
        ("get", "/v1/events") => Operation {
            summary: "Server-Sent Events: admitted, readmitted, rejected, forgotten",
            parameters: json!([{ "name": "since", "in": "query", "description": "a duration ago (1h)", "schema": { "type": "string" } }]),
            body: None,
            success: ("200", json!({ "type": "string", "description": "text/event-stream" })),
        },
        _ => Operation { summary: "undescribed", parameters: none, body: None, success: ("200", json!({})) },
    }
}

/// The statuses a route's refusals can give (the error table's), each with the error body.
fn refusals(needs: Needs, has_body: bool, names_something: bool) -> Vec<(&'static str, &'static str)> {
    let mut out = vec![("403", "no valid credential, or one without the route's scope")];
    if has_body || matches!(needs, Needs::Scope(_)) {
        out.push(("400", "a body, filter or argument the route does not take"));
    }
    if names_something {
        out.push(("404", "no such node or token"));
        out.push(("422", "a check asked for failed (not the expected CA); nothing changed"));
    }
    if matches!(needs, Needs::Scope(_)) {
        out.push(("503", "the state cannot be read, told or written now; retry later (Retry-After)"));
        out.push(("500", "our fault; its cause is in the server's log"));
    }
    out
}

/// The document.
pub fn document() -> Value {
    let mut paths = Map::new();
    for (method, path, needs) in super::route_table() {
        let method = method.as_str().to_ascii_lowercase();
        let op = operation(&method, path);
        let mut responses = Map::new();
        let content = |schema: Value| json!({ "application/json": { "schema": schema } });
        let success = if path == "/v1/events" {
            json!({ "description": "the stream", "content": { "text/event-stream": { "schema": op.success.1 } } })
        } else {
            json!({ "description": "done", "content": content(op.success.1) })
        };
        responses.insert(op.success.0.into(), success);
        for (status, why) in refusals(needs, op.body.is_some(), path.contains('{')) {
            responses.insert(
                status.into(),
                json!({ "description": why, "content": content(json!({ "$ref": "#/components/schemas/Error" })) }),
            );
        }
        let scope = match needs {
            Needs::Credential => "any valid credential".to_string(),
            Needs::Scope(scope) => format!("the scope `{}`", scope.name()),
        };
        let mut operation = json!({
            "summary": op.summary,
            "description": format!("Needs {scope}."),
            "operationId": format!("{method}{}", path.replace(['/', '{', '}', '.'], "_")),
            "parameters": op.parameters,
            "responses": responses,
            "x-scope": match needs { Needs::Credential => Value::Null, Needs::Scope(s) => json!(s.name()) },
        });
        if let Some(body) = op.body {
            operation["requestBody"] = json!({ "required": true, "content": content(body) });
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
                (docs/orchestrating.md). Scopes: tokens, read, approve, reject.",
        },
        "servers": [{ "url": "https://controller.fleet.janus" }],
        "paths": paths,
        "components": { "schemas": schemas() },
    })
}

fn schemas() -> Value {
    let string = json!({ "type": "string" });
    let nullable = json!({ "type": ["string", "null"] });
    let labels = json!({ "type": "object", "additionalProperties": { "type": "string" } });
    let node_view = json!({
        "type": "object",
        "required": ["id", "name", "address", "ca_sha256", "state", "ca_cert_pem", "token_labels"],
        "properties": {
            "id": string, "name": string, "address": string, "peer_address": nullable,
            "ca_sha256": string, "state": { "type": "string", "enum": ["pending", "admitted", "rejected"] },
            "announced_at": nullable, "admitted_by": nullable, "admitted_at": nullable,
            "ca_cert_pem": string, "token_sha256_prefix": nullable, "token_labels": labels,
        }
    });
    let mut detail = node_view.clone();
    for (key, value) in [
        ("stored_ca_sha256_matches", json!({ "type": "boolean" })),
        ("ca_subject", string.clone()),
        ("ca_not_before", string.clone()),
        ("ca_not_after", string.clone()),
        ("ca_rejected", json!({ "type": "boolean" })),
    ] {
        detail["properties"][key] = value;
    }
    json!({
        "Error": { "type": "object", "required": ["error"], "properties": { "error": string } },
        "Caller": { "type": "object", "required": ["name", "scopes"], "properties": {
            "name": string,
            "scopes": { "type": "array", "items": { "type": "string", "enum": Scope::ALL.map(Scope::name) } } } },
        "NewTokens": { "type": "object", "additionalProperties": false, "properties": {
            "count": { "type": "integer", "minimum": 1, "maximum": crate::tokens::MAX_COUNT },
            "uses": { "type": "integer", "minimum": 1, "maximum": janus_store::tokens::MAX_USES },
            "expires_in": { "type": "string", "description": "a duration: 2h, 7d" },
            "description": string, "labels": labels, "token": string } },
        "AddedToken": { "type": "object", "required": ["token", "sha256", "sha256_prefix", "uses", "labels"],
            "properties": { "token": string, "sha256": string, "sha256_prefix": string, "expires_at": nullable,
                "uses": { "type": "integer" }, "description": nullable, "labels": labels } },
        "NodeView": node_view,
        "NodeDetail": detail,
        "NodeList": { "type": "object", "required": ["nodes", "unreadable"], "properties": {
            "nodes": { "type": "array", "items": { "$ref": "#/components/schemas/NodeView" } },
            "unreadable": { "type": "array", "items": string,
                "description": "records left out: each why it could not be read or told" } } },
        "Decided": { "type": "object", "required": ["said", "changed"], "properties": {
            "said": string, "changed": { "type": "boolean" },
            "node": { "$ref": "#/components/schemas/NodeDetail" } } },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_route_is_described_and_nothing_else() {
        let document = document();
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
}

//! The admin listener against a browser driven by another site (issue 53):
//! one rule for every route, walked from the route tables (the API's and
//! the console's), as the browser sends each kind of request: a
//! cross-site form, a cross-site `no-cors` fetch, an iframe, the console's
//! own same-origin request, and a program with no browser headers. And
//! every refusal in the documented shape, the framework's own included.
//! The form and the iframe in a real browser: `scripts/console-check.sh`.

use axum::http::Method;
use janus_admin::api::client::{AdminClient, RawReply};
use janus_admin::api::{Needs, Scope, route_table};
use janus_admin::console;
use janus_registration::certs::{self, Minted};

use crate::admin_api::{client, credential, with_admin_api};
use crate::common::*;

/// How a browser (or a program) sends a request.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Sender {
    /// `<form method=POST action=https://admin/...>` on another site.
    CrossSiteForm,
    /// `fetch(url, {mode: "no-cors", method, body})` on another site.
    CrossSiteNoCors,
    /// `<iframe src=https://admin/...>` on another site.
    CrossSiteIframe,
    /// The console's own page, on this origin.
    SameOrigin,
    /// curl, the CLI, an orchestrator: no browser header.
    Program,
}

impl Sender {
    fn is_cross_site(self) -> bool {
        matches!(self, Sender::CrossSiteForm | Sender::CrossSiteNoCors | Sender::CrossSiteIframe)
    }

    /// The headers and body this sender sends for `method` `path` to `host`.
    fn request(self, method: &Method, path: &str, host: &str) -> (Vec<(String, String)>, Vec<u8>) {
        let console = path.starts_with("/console") || path == "/";
        let changes = *method != Method::GET;
        let mut headers: Vec<(&str, String)> = Vec::new();
        let mut body = Vec::new();
        let evil = "https://evil.example".to_string();
        match self {
            Sender::CrossSiteForm => {
                headers.extend([
                    ("Sec-Fetch-Site", "cross-site".into()),
                    ("Sec-Fetch-Mode", "navigate".into()),
                    ("Sec-Fetch-Dest", "document".into()),
                ]);
                if changes {
                    headers.push(("Origin", evil));
                    headers.push(("Content-Type", "application/x-www-form-urlencoded".into()));
                    body = b"expect_ca_sha256=x&count=1".to_vec();
                }
            }
            Sender::CrossSiteNoCors => {
                headers.extend([
                    ("Sec-Fetch-Site", "cross-site".into()),
                    ("Sec-Fetch-Mode", "no-cors".into()),
                    ("Sec-Fetch-Dest", "empty".into()),
                ]);
                if changes {
                    headers.push(("Origin", evil));
                    headers.push(("Content-Type", "text/plain;charset=UTF-8".into()));
                    body = b"{}".to_vec();
                }
            }
            Sender::CrossSiteIframe => headers.extend([
                ("Sec-Fetch-Site", "cross-site".into()),
                ("Sec-Fetch-Mode", "navigate".into()),
                ("Sec-Fetch-Dest", "iframe".into()),
            ]),
            Sender::SameOrigin => {
                headers.push(("Sec-Fetch-Site", "same-origin".into()));
                headers.push(("Origin", format!("https://{host}")));
                if changes {
                    let kind = if console { "application/x-www-form-urlencoded" } else { "application/json" };
                    headers.push(("Content-Type", kind.into()));
                    body = if console { b"a=b".to_vec() } else { b"{}".to_vec() };
                }
            }
            Sender::Program => {
                if changes {
                    headers.push(("Content-Type", "application/json".into()));
                    body = b"{}".to_vec();
                }
            }
        }
        (headers.into_iter().map(|(n, v)| (n.to_string(), v)).collect(), body)
    }
}

const SENDERS: [Sender; 5] = [
    Sender::CrossSiteForm,
    Sender::CrossSiteNoCors,
    Sender::CrossSiteIframe,
    Sender::SameOrigin,
    Sender::Program,
];

async fn send(api: &AdminClient, sender: Sender, method: &Method, path: &str, host: &str) -> RawReply {
    let (headers, body) = sender.request(method, path, host);
    let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
    api.exchange(method.as_str(), path, &headers, body).await.unwrap()
}

/// Whether `reply` is the cross-site rule's refusal.
fn refused_cross_site(reply: &RawReply) -> bool {
    let text = reply.text();
    (reply.status == 403 && (text.contains("another site") || text.contains("another origin")))
        || reply.status == 415
}

/// Every route the admin listener serves, its path parameters filled in.
fn every_route(id: &str, token_prefix: &str) -> Vec<(Method, String, Needs)> {
    let mut routes = route_table();
    routes.extend(console::table());
    routes
        .into_iter()
        .map(|(method, path, needs)| {
            let path = path
                .replace("{id}", id)
                .replace("{sha256_prefix}", token_prefix)
                .replace("{prefix}", token_prefix)
                .replace("{file}", "console.css");
            (method, path, needs)
        })
        .collect()
}

fn is_event_stream(path: &str) -> bool {
    path.ends_with("/events")
}

async fn tokens_listed(api: &AdminClient) -> usize {
    let listed =
        api.exchange("GET", "/console/tokens", &[("Sec-Fetch-Site", "none")], Vec::new()).await.unwrap();
    listed.text().matches("<tr").count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_sites_page_cannot_drive_any_route_and_the_consoles_own_requests_and_programs_can() {
    let fx = Fixture::new();
    let admin_ca = certs::mint_admin_ca("test admin CA").unwrap();
    let (server, admin) = with_admin_api(&fx, &admin_ca).await;
    let host = admin.to_string();
    let nodes = node_client(&fx, server.addr);
    let ca = certs::mint_node_ca("edge-1").unwrap();
    let (id, _, status) = announce(&nodes, "edge-1", &ca, "").await;
    assert_eq!(status, 201);
    let api = client(&fx, admin, &credential(&admin_ca, "alice", &Scope::ALL));
    let minted = api.call("POST", "/v1/tokens", Some(&serde_json::json!({}))).await.unwrap();
    assert_eq!(minted.status, 201, "{:?}", minted.body);
    let prefix = minted.body["tokens"][0]["sha256_prefix"].as_str().unwrap().to_string();
    let tokens_before = tokens_listed(&api).await;

    let routes = every_route(&id, &prefix);
    assert!(routes.len() >= 19, "the API's and the console's routes: {}", routes.len());
    for (method, path, _) in &routes {
        for sender in SENDERS.into_iter().filter(|s| s.is_cross_site()) {
            let reply = send(&api, sender, method, path, &host).await;
            assert_eq!(reply.status, 403, "{sender:?} {method} {path}: {}", reply.text());
            assert!(refused_cross_site(&reply), "{sender:?} {method} {path}: {}", reply.text());
            assert_eq!(reply.headers["x-frame-options"], "DENY", "{path}");
            let kind = reply.headers["content-type"].to_str().unwrap();
            if path.starts_with("/console") {
                assert!(kind.starts_with("text/html"), "{path}: {kind}");
            } else {
                assert_eq!(kind, "application/problem+json", "{path}");
                let body: serde_json::Value = serde_json::from_slice(&reply.body).unwrap();
                assert_eq!(body["code"], "cross_site", "{path}: {body}");
                assert!(body["detail"].is_string() && body["error"] == body["detail"], "{path}: {body}");
            }
        }
    }
    // Nothing another site sent did anything.
    let node = api.call("GET", &format!("/v1/nodes/{id}"), None).await.unwrap();
    assert_eq!(node.body["state"], "pending", "{:?}", node.body);
    assert_eq!(tokens_listed(&api).await, tokens_before, "nothing minted or revoked");
    assert!(!audit_trail(&fx.state()).contains("\"rejected\""), "nothing rejected");

    // The console's own requests and programs pass the rule (what the
    // route then says is its own business: a form without its CSRF token
    // is refused by that check, not by this one). Event streams stay open,
    // so they are asked for below instead.
    for (method, path, _) in routes.iter().filter(|(_, p, _)| !is_event_stream(p)) {
        for sender in [Sender::SameOrigin, Sender::Program] {
            let reply = send(&api, sender, method, path, &host).await;
            assert!(
                !refused_cross_site(&reply),
                "{sender:?} {method} {path}: {} {}",
                reply.status,
                reply.text()
            );
            assert_eq!(reply.headers["x-frame-options"], "DENY", "{path}");
        }
    }
    // A program reads the API's event stream; the console's is its own page's.
    let seen = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (watcher, saw) = (api.clone(), seen.clone());
    let watch = tokio::spawn(async move {
        watcher
            .events("/v1/events", |_| {
                saw.store(true, std::sync::atomic::Ordering::SeqCst);
                false
            })
            .await
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !watch.is_finished() {
        assert!(std::time::Instant::now() < deadline, "no event reached the program's stream");
        let other = certs::mint_node_ca("edge-2").unwrap();
        let (other_id, _, _) = announce(&nodes, "edge-2", &other, "").await;
        let _ = api.call("POST", &format!("/v1/nodes/{other_id}/reject"), Some(&serde_json::json!({}))).await;
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(watch.await.unwrap().is_ok());
    assert!(seen.load(std::sync::atomic::Ordering::SeqCst), "an event was read");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bodyless_or_form_post_to_the_api_changes_nothing_and_json_does() {
    let fx = Fixture::new();
    let admin_ca = certs::mint_admin_ca("test admin CA").unwrap();
    let (server, admin) = with_admin_api(&fx, &admin_ca).await;
    let nodes = node_client(&fx, server.addr);
    let (id, _, _) = announce(&nodes, "edge-1", &certs::mint_node_ca("edge-1").unwrap(), "").await;
    let api = client(&fx, admin, &credential(&admin_ca, "alice", &Scope::ALL));
    let reject = format!("/v1/nodes/{id}/reject");
    // What a page could send without a preflight, even from a browser
    // that sends no Sec-Fetch-* or Origin header.
    for kind in [
        None,
        Some("text/plain"),
        Some("application/x-www-form-urlencoded"),
        Some("multipart/form-data; boundary=x"),
    ] {
        let headers: Vec<(&str, &str)> = kind.map(|k| ("Content-Type", k)).into_iter().collect();
        let reply = api.exchange("POST", &reject, &headers, Vec::new()).await.unwrap();
        assert_eq!(reply.status, 415, "{kind:?}: {}", reply.text());
        assert!(reply.text().contains("application/json"), "{}", reply.text());
    }
    let node = api.call("GET", &format!("/v1/nodes/{id}"), None).await.unwrap();
    assert_eq!(node.body["state"], "pending");
    // A body the route does not take is refused too.
    let odd = api.call("POST", &reject, Some(&serde_json::json!({"force": true}))).await.unwrap();
    assert_eq!(odd.status, 400, "{:?}", odd.body);
    // The admin client (and curl with -H 'Content-Type: application/json') rejects.
    let done = api.call("POST", &reject, Some(&serde_json::json!({}))).await.unwrap();
    assert_eq!(done.status, 200, "{:?}", done.body);
    assert_eq!(done.body["node"]["state"], "rejected");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_refusal_is_the_documented_json_error_or_the_consoles_page() {
    let fx = Fixture::new();
    let admin_ca = certs::mint_admin_ca("test admin CA").unwrap();
    let (server, admin) = with_admin_api(&fx, &admin_ca).await;
    let api = client(&fx, admin, &credential(&admin_ca, "alice", &Scope::ALL));
    let check = |reply: &RawReply, status: u16, what: &str| {
        assert_eq!(reply.status, status, "{what}: {}", reply.text());
        let kind =
            reply.headers.get("content-type").map(|k| k.to_str().unwrap().to_string()).unwrap_or_default();
        if what.contains(" /console") {
            assert!(kind.starts_with("text/html"), "{what}: {kind}");
            assert!(reply.text().contains("<h1>"), "{what}: the console's page");
        } else {
            assert_eq!(kind, "application/problem+json", "{what}: {}", reply.text());
            let body: serde_json::Value = serde_json::from_slice(&reply.body).unwrap();
            assert!(body["detail"].as_str().is_some_and(|e| !e.is_empty()), "{what}: {body}");
            assert_eq!(body["status"], status, "{what}: {body}");
            assert!(body["code"].as_str().is_some_and(|c| !c.is_empty()), "{what}: {body}");
        }
    };
    let json = [("Content-Type", "application/json")];
    for (method, path, _) in every_route("0123456789abcdef0123456789abcdef", "0123456789abcdef") {
        // A method the route does not take.
        let wrong = if method == Method::PUT { "PATCH" } else { "PUT" };
        let reply = api.exchange(wrong, &path, &json, b"{}".to_vec()).await.unwrap();
        check(&reply, 405, &format!("{wrong} {path}"));
        assert!(reply.headers.contains_key("allow"), "{wrong} {path}: Allow kept");
        // A path parameter that is not UTF-8.
        if let Some(template) = ["0123456789abcdef", "console.css"].into_iter().find(|t| path.contains(t)) {
            {
                let bad = path.replacen(template, "%FF%FE", 1);
                let reply = api.exchange(method.as_str(), &bad, &json, b"{}".to_vec()).await.unwrap();
                assert!(reply.status == 400 || reply.status == 404, "{method} {bad}: {}", reply.status);
                check(&reply, reply.status, &format!("{method} {bad}"));
            }
        }
    }
    for path in ["/v1/nope", "/nope", "/v1/nodes/a/b/c"] {
        check(&api.exchange("GET", path, &[], Vec::new()).await.unwrap(), 404, &format!("GET {path}"));
    }
    check(&api.exchange("GET", "/console/nope", &[], Vec::new()).await.unwrap(), 404, "GET /console/nope");
    let large = format!("{{\"description\": \"{}\"}}", "x".repeat(20 * 1024));
    let reply = api.exchange("POST", "/v1/tokens", &json, large.into_bytes()).await.unwrap();
    check(&reply, 413, "POST /v1/tokens, 20 KiB");
    // An unreadable record is named by its id; the server's path is not said.
    let nodes = node_client(&fx, server.addr);
    let (id, _, _) = announce(&nodes, "edge-1", &certs::mint_node_ca("edge-1").unwrap(), "").await;
    std::fs::write(fx.state().join("nodes").join(format!("{id}.json")), b"{ not json").unwrap();
    let state = fx.state().display().to_string();
    for path in ["/v1/nodes", "/v1/nodes?state=pending"] {
        let listed = api.exchange("GET", path, &[], Vec::new()).await.unwrap();
        let said = listed.text();
        assert!(said.contains(&id) && !said.contains(&state) && !said.contains(".json"), "{path}: {said}");
    }
    let page = api.exchange("GET", "/console/", &[("Sec-Fetch-Site", "none")], Vec::new()).await.unwrap();
    assert!(page.text().contains(&id) && !page.text().contains(&state), "{}", page.text());
    server.stop().await;
}

/// The cross-site rule is one layer on the whole listener: a credential
/// without any scope, and a connection without a credential at all, are
/// refused as before, and the rule's refusal comes before a route's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cross_site_rule_comes_before_any_route() {
    let fx = Fixture::new();
    let admin_ca = certs::mint_admin_ca("test admin CA").unwrap();
    let (server, admin) = with_admin_api(&fx, &admin_ca).await;
    let reader: Minted = credential(&admin_ca, "reader", &[Scope::Read]);
    let api = client(&fx, admin, &reader);
    let host = admin.to_string();
    let reply = send(&api, Sender::CrossSiteForm, &Method::POST, "/v1/tokens", &host).await;
    assert!(refused_cross_site(&reply), "before the scope check: {}", reply.text());
    let reply = send(&api, Sender::Program, &Method::POST, "/v1/tokens", &host).await;
    assert_eq!(reply.status, 403, "the scope check: {}", reply.text());
    assert!(!refused_cross_site(&reply));
    server.stop().await;
}

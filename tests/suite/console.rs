//! The admin console (issue 48): pages on the admin listener for people,
//! over the admin API's typed functions, with the same credentials and
//! scopes. Driven over real HTTPS with the crate's admin client, as a
//! browser sends it (cookies, `Origin`, `Sec-Fetch-Site`, forms); the
//! browser itself is `scripts/console-check.sh` (headless Chromium).

use std::net::SocketAddr;
use std::time::Duration;

use janus_admin::api::client::{AdminClient, RawReply};
use janus_admin::api::{Needs, Scope};
use janus_registration::certs::{self, Minted};

use crate::admin_api::{client, credential, with_admin_api};
use crate::common::*;

/// A browser's session with the console: its cookie, once it has one.
pub(crate) struct Browser {
    client: AdminClient,
    host: String,
    cookie: Option<String>,
}

impl Browser {
    pub(crate) fn new(fx: &Fixture, admin: SocketAddr, credential: &Minted) -> Self {
        Browser { client: client(fx, admin, credential), host: admin.to_string(), cookie: None }
    }

    pub(crate) async fn get(&mut self, path: &str) -> RawReply {
        let cookie = self.cookie.clone().map(|c| format!("janus_console={c}"));
        let mut headers = vec![("Sec-Fetch-Site", "none")];
        if let Some(cookie) = &cookie {
            headers.push(("Cookie", cookie));
        }
        let reply = self.client.exchange("GET", path, &headers, Vec::new()).await.unwrap();
        if let Some(set) = reply.headers.get("set-cookie") {
            let set = set.to_str().unwrap();
            assert!(
                set.contains("Secure") && set.contains("HttpOnly") && set.contains("SameSite=Strict"),
                "{set}"
            );
            let value = set.split(';').next().unwrap().split_once('=').unwrap().1;
            self.cookie = Some(value.to_string());
        }
        reply
    }

    /// Posts `fields` as the console's own page does (same origin, its cookie).
    pub(crate) async fn post(&self, path: &str, fields: &[(&str, &str)]) -> RawReply {
        let origin = format!("https://{}", self.host);
        let cookie = format!("janus_console={}", self.cookie.as_deref().unwrap_or(""));
        let headers =
            [("Origin", origin.as_str()), ("Sec-Fetch-Site", "same-origin"), ("Cookie", cookie.as_str())];
        self.post_with(path, &headers, fields).await
    }

    async fn post_with(&self, path: &str, headers: &[(&str, &str)], fields: &[(&str, &str)]) -> RawReply {
        let body = form_urlencoded::Serializer::new(String::new()).extend_pairs(fields).finish();
        let mut all = vec![("Content-Type", "application/x-www-form-urlencoded")];
        all.extend_from_slice(headers);
        self.client.exchange("POST", path, &all, body.into_bytes()).await.unwrap()
    }
}

/// A request header, and a form's field.
type Header<'a> = (&'a str, &'a str);
type Field = (&'static str, String);

/// The value of the hidden field `name` in `page`.
pub(crate) fn field(page: &str, name: &str) -> String {
    let marker = format!("name=\"{name}\" value=\"");
    let at = page.find(&marker).unwrap_or_else(|| panic!("no {name} field in {page}")) + marker.len();
    page[at..].split('"').next().unwrap().to_string()
}

async fn pending_id(fx: &Fixture, admin: SocketAddr, admin_ca: &Minted, name: &str) -> String {
    let api = client(fx, admin, &credential(admin_ca, "lookup", &[Scope::Read]));
    let listed = api.call("GET", "/v1/nodes?state=pending", None).await.unwrap();
    let nodes = listed.body["nodes"].as_array().unwrap().clone();
    let node =
        nodes.iter().find(|n| n["name"] == name).unwrap_or_else(|| panic!("{name} pending: {nodes:?}"));
    node["id"].as_str().unwrap().to_string()
}

async fn state_of(fx: &Fixture, admin: SocketAddr, admin_ca: &Minted, id: &str) -> String {
    let api = client(fx, admin, &credential(admin_ca, "lookup", &[Scope::Read]));
    let node = api.call("GET", &format!("/v1/nodes/{id}"), None).await.unwrap();
    node.body["state"].as_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_sees_a_pending_node_escaped_and_approves_it_only_with_its_fingerprint() {
    let fx = Fixture::new();
    let admin_ca = certs::mint_admin_ca("test admin CA").unwrap();
    let (server, admin) = with_admin_api(&fx, &admin_ca).await;
    let nodes = node_client(&fx, server.addr);
    // Names are hostnames (checked at announcement); a CA's subject is the node's to say.
    let ca = crate::hostile_nodes::crafted_ca("edge-3<script>alert(1)</script>\u{202e}", false);
    announce(&nodes, "edge-3", &ca, "").await;
    let id = pending_id(&fx, admin, &admin_ca, "edge-3").await;

    let mut browser = Browser::new(&fx, admin, &credential(&admin_ca, "alice", &Scope::ALL));
    let page = browser.get("/console/").await;
    assert_eq!(page.status, 200);
    let csp = page.headers["content-security-policy"].to_str().unwrap();
    assert!(
        csp.contains("default-src 'none'") && csp.contains("script-src 'self'") && !csp.contains("unsafe")
    );
    assert_eq!(page.headers["cache-control"], "no-store");
    let escaped = "edge-3&lt;script&gt;alert(1)&lt;/script&gt;\\u{202e}";
    assert!(
        page.text().contains(escaped) && !page.text().contains("<script>alert"),
        "the CA subject, escaped"
    );
    let hash = ca_hash(&ca);
    assert!(
        page.text().contains(&format!("<span>{}</span><wbr><span>{}</span>", &hash[..4], &hash[4..8])),
        "the fingerprint as one run, its groups of four spacing only (a line may break between groups)"
    );

    let node_page = browser.get(&format!("/console/nodes/{id}")).await.text();
    assert!(!node_page.contains("<script>alert"), "node text is HTML-escaped");
    assert!(
        node_page.contains("edge-3&lt;script&gt;alert(1)&lt;/script&gt;\\u{202e}"),
        "bidi shown: {node_page}"
    );
    let input = node_page.split("name=\"expect_ca_sha256\"").nth(1).unwrap().split('>').next().unwrap();
    assert!(!input.contains("value="), "the approve form is never filled with the fingerprint: {input}");
    let csrf = field(&node_page, "csrf");
    let approve = format!("/console/nodes/{id}/approve");
    let mistyped = format!("{}{}", &hash[..63], if hash.ends_with('0') { "1" } else { "0" });
    let refused = browser.post(&approve, &[("csrf", &csrf), ("expect_ca_sha256", &mistyped)]).await;
    assert_eq!(refused.status, 422, "{}", refused.text());
    assert!(refused.text().contains("but CA SHA-256 says"), "{}", refused.text());
    let malformed = browser.post(&approve, &[("csrf", &csrf), ("expect_ca_sha256", "2bcd")]).await;
    assert_eq!(malformed.status, 400);
    let empty = browser.post(&approve, &[("csrf", &csrf), ("expect_ca_sha256", " ")]).await;
    assert_eq!(empty.status, 400);
    assert_eq!(state_of(&fx, admin, &admin_ca, &id).await, "pending");

    // As a person pastes it: upper case, in groups.
    let pasted: Vec<String> =
        hash.to_uppercase().as_bytes().chunks(4).map(|c| String::from_utf8(c.to_vec()).unwrap()).collect();
    let done = browser.post(&approve, &[("csrf", &csrf), ("expect_ca_sha256", &pasted.join(" "))]).await;
    assert_eq!(done.status, 200, "{}", done.text());
    assert_eq!(state_of(&fx, admin, &admin_ca, &id).await, "admitted");
    let again = browser.post(&approve, &[("csrf", &csrf), ("expect_ca_sha256", &hash)]).await;
    assert_ne!(again.status, 409, "a re-sent form is never 409");
    assert!(audit_trail(&fx.state()).contains("alice"), "the audit trail names the credential");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_console_form_refuses_a_request_without_its_csrf_token() {
    let fx = Fixture::new();
    let admin_ca = certs::mint_admin_ca("test admin CA").unwrap();
    let (server, admin) = with_admin_api(&fx, &admin_ca).await;
    let nodes = node_client(&fx, server.addr);
    let (_, _, _) = announce(&nodes, "web-1", &certs::mint_node_ca("web-1").unwrap(), "").await;
    let id = pending_id(&fx, admin, &admin_ca, "web-1").await;
    let token = add_token(&fx.state(), &[]);
    let prefix = janus_store::token_fingerprint(&token);
    let mut browser = Browser::new(&fx, admin, &credential(&admin_ca, "alice", &Scope::ALL));
    let csrf = field(&browser.get(&format!("/console/nodes/{id}")).await.text(), "csrf");
    let tokens_page = browser.get("/console/tokens").await.text();
    let once = field(&tokens_page, "once");
    let tokens_before = fx.tokens();

    let forms = janus_admin::console::table();
    let posts: Vec<String> = forms
        .iter()
        .filter(|(method, _, _)| method == axum::http::Method::POST)
        .map(|(_, path, _)| path.replace("{id}", &id).replace("{prefix}", &prefix))
        .collect();
    assert_eq!(posts.len(), 5, "approve, reject, forget, mint, revoke");
    let origin = format!("https://{admin}");
    let cookie = format!("janus_console={}", browser.cookie.clone().unwrap());
    let other_cookie = format!("janus_console={}", "ab".repeat(16));
    let fields = |csrf: Option<&str>| {
        let mut f = vec![
            ("expect_ca_sha256", "00".repeat(32)),
            ("once", once.clone()),
            ("count", "1".into()),
            ("confirmed", "yes".into()),
        ];
        if let Some(csrf) = csrf {
            f.push(("csrf", csrf.to_string()));
        }
        f
    };
    for path in &posts {
        let same_site =
            [("Origin", origin.as_str()), ("Sec-Fetch-Site", "same-origin"), ("Cookie", cookie.as_str())];
        let cases: Vec<(&str, Vec<Header>, Vec<Field>)> = vec![
            ("no token", same_site.to_vec(), fields(None)),
            ("a wrong token", same_site.to_vec(), fields(Some(&"0".repeat(64)))),
            (
                "another browser's cookie",
                vec![("Origin", origin.as_str()), ("Cookie", other_cookie.as_str())],
                fields(Some(&csrf)),
            ),
            ("no cookie", vec![("Origin", origin.as_str())], fields(Some(&csrf))),
            (
                "another origin",
                vec![("Origin", "https://evil.example"), ("Cookie", cookie.as_str())],
                fields(Some(&csrf)),
            ),
            (
                "a cross-site fetch",
                vec![("Sec-Fetch-Site", "cross-site"), ("Cookie", cookie.as_str())],
                fields(Some(&csrf)),
            ),
        ];
        for (what, headers, form) in cases {
            let pairs: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
            let answer = browser.post_with(path, &headers, &pairs).await;
            assert_eq!(answer.status, 403, "{path} with {what}: {}", answer.text());
        }
    }
    assert_eq!(state_of(&fx, admin, &admin_ca, &id).await, "pending", "nothing was decided");
    assert_eq!(fx.tokens(), tokens_before, "nothing was minted or revoked");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_credential_sees_every_page_and_may_not_act() {
    let fx = Fixture::new();
    let admin_ca = certs::mint_admin_ca("test admin CA").unwrap();
    let (server, admin) = with_admin_api(&fx, &admin_ca).await;
    let nodes = node_client(&fx, server.addr);
    let ca = certs::mint_node_ca("web-2").unwrap();
    announce(&nodes, "web-2", &ca, "").await;
    let id = pending_id(&fx, admin, &admin_ca, "web-2").await;
    let mut reader = Browser::new(&fx, admin, &credential(&admin_ca, "bob", &[Scope::Read]));
    for path in [
        "/console/",
        "/console/nodes?state=pending&label=",
        "/console/tokens",
        &format!("/console/nodes/{id}"),
    ] {
        let page = reader.get(path).await;
        assert_eq!(page.status, 200, "{path}");
        assert!(!page.text().contains("action=\"/console/nodes/"), "{path}: no decision form for a reader");
    }
    // The scope is checked first: whatever the form carries.
    let refused = reader
        .post(&format!("/console/nodes/{id}/approve"), &[("csrf", "0"), ("expect_ca_sha256", &ca_hash(&ca))])
        .await;
    assert_eq!(refused.status, 403);
    assert_eq!(state_of(&fx, admin, &admin_ca, &id).await, "pending");
    for root in ["/", "/console"] {
        let landed = reader.get(root).await;
        assert_eq!(
            (landed.status, landed.headers["location"].to_str().unwrap()),
            (303, "/console/"),
            "{root}"
        );
    }
    let none = Browser::new(&fx, admin, &credential(&admin_ca, "carol", &[Scope::Approve])).client;
    let page = none.exchange("GET", "/console/", &[], Vec::new()).await.unwrap();
    assert_eq!(page.status, 403, "approving is not seeing");
    for bad in ["/console/nodes?state=gone", "/console/nodes?label=novalue", "/console/nodes?colour=red"] {
        assert_eq!(reader.get(bad).await.status, 400, "{bad}");
    }
    assert_eq!(reader.get("/console/nodes/ffffffffffffffffffffffffffffffff").await.status, 404);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mint_form_is_done_once_and_its_tokens_are_shown_once() {
    let fx = Fixture::new();
    let admin_ca = certs::mint_admin_ca("test admin CA").unwrap();
    let (server, admin) = with_admin_api(&fx, &admin_ca).await;
    let mut browser =
        Browser::new(&fx, admin, &credential(&admin_ca, "alice", &[Scope::Read, Scope::Tokens]));
    let page = browser.get("/console/tokens").await.text();
    assert!(page.contains("No tokens: mint one below"), "an empty list says so: {page}");
    let (csrf, once) = (field(&page, "csrf"), field(&page, "once"));
    let form = [
        ("csrf", csrf.as_str()),
        ("once", once.as_str()),
        ("count", "2"),
        ("labels", "pool=gpu, zone=b"),
        ("expires_in", "1h"),
    ];
    let minted = browser.post("/console/tokens", &form).await;
    assert_eq!(minted.status, 200, "{}", minted.text());
    let tokens = fx.tokens();
    let made: Vec<&str> = tokens.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()).collect();
    assert_eq!(made.len(), 2);
    assert!(made.iter().all(|t| minted.text().contains(t)), "shown on the answer that made them");
    // Each alone in a labelled field of its own, with its copy button: a copy
    // takes the token, not its SHA-256 prefix beside it.
    for (n, t) in made.iter().enumerate() {
        let input = format!(r#"<input class="token" id="minted-{n}" type="text" readonly value="{t}""#);
        assert!(minted.text().contains(&input), "{input} in {}", minted.text());
        assert!(minted.text().contains(&format!(r#"data-copy="minted-{n}""#)), "{}", minted.text());
    }
    assert!(!minted.text().contains("No tokens"), "{}", minted.text());
    let trail = audit_trail(&fx.state());
    let added: Vec<&str> = trail.lines().filter(|l| l.contains("\"event\":\"token_added\"")).collect();
    assert!(
        added.len() == 2 && added.iter().all(|l| l.contains("alice")),
        "audited under the credential: {trail}"
    );
    let again = browser.post("/console/tokens", &form).await;
    assert_eq!(again.status, 422, "a re-sent mint form");
    assert_eq!(fx.tokens(), tokens, "nothing minted again");
    let listed = browser.get("/console/tokens").await.text();
    assert!(made.iter().all(|t| !listed.contains(t)), "never shown again");
    assert!(listed.contains("pool=gpu"));
    let fresh = field(&listed, "once");
    let bad = browser.post("/console/tokens", &[("csrf", &csrf), ("once", &fresh), ("count", "x")]).await;
    assert_eq!(bad.status, 400);
    let too_many =
        browser.post("/console/tokens", &[("csrf", &csrf), ("once", &fresh), ("count", "100001")]).await;
    assert_eq!(too_many.status, 400, "{}", too_many.text());
    // Refused, nothing minted: the same form, corrected, may be sent again.
    let corrected =
        browser.post("/console/tokens", &[("csrf", &csrf), ("once", &fresh), ("count", "1")]).await;
    assert_eq!(corrected.status, 200, "{}", corrected.text());
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_event_stream_says_an_announcement_happened_and_nothing_more() {
    let fx = Fixture::new();
    let admin_ca = certs::mint_admin_ca("test admin CA").unwrap();
    let (server, admin) = with_admin_api(&fx, &admin_ca).await;
    let reader = client(&fx, admin, &credential(&admin_ca, "bob", &[Scope::Read]));
    let origin = format!("https://{admin}");
    let cookie = format!("janus_console={}", "ab".repeat(16));
    // Another site cannot make the admin's browser hold the credential's streams.
    for (what, headers) in [
        ("no cookie", vec![("Sec-Fetch-Site", "same-origin")]),
        ("another site", vec![("Sec-Fetch-Site", "cross-site"), ("Cookie", cookie.as_str())]),
        ("another origin", vec![("Origin", "https://evil.example"), ("Cookie", cookie.as_str())]),
    ] {
        let refused = reader.exchange("GET", "/console/events", &headers, Vec::new()).await.unwrap();
        assert_eq!(refused.status, 403, "{what}");
    }
    let (seen_tx, mut seen) = tokio::sync::mpsc::unbounded_channel();
    let follow = tokio::spawn(async move {
        let headers =
            [("Origin", origin.as_str()), ("Sec-Fetch-Site", "same-origin"), ("Cookie", cookie.as_str())];
        reader
            .events_with("/console/events", &headers, |event| {
                let _ = seen_tx.send(event);
                false
            })
            .await
    });
    let nodes = node_client(&fx, server.addr);
    let ca = certs::mint_node_ca("web-3").unwrap();
    // The follower starts at the trail's end: announce until it says so.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let event = loop {
        assert!(tokio::time::Instant::now() < deadline, "no event within 20 s");
        announce(&nodes, "web-3", &ca, "").await;
        if let Ok(Some(event)) = tokio::time::timeout(Duration::from_millis(1500), seen.recv()).await {
            break event;
        }
    };
    assert_eq!(event, serde_json::json!({"event": "announced"}), "only the kind: no node text");
    follow.await.unwrap().unwrap();
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_console_route_is_refused_to_a_credential_without_its_scope() {
    let fx = Fixture::new();
    let admin_ca = certs::mint_admin_ca("test admin CA").unwrap();
    let (server, admin) = with_admin_api(&fx, &admin_ca).await;
    let nodes = node_client(&fx, server.addr);
    announce(&nodes, "web-4", &certs::mint_node_ca("web-4").unwrap(), "").await;
    let id = pending_id(&fx, admin, &admin_ca, "web-4").await;
    for (method, path, needs) in janus_admin::console::table() {
        let Needs::Scope(scope) = needs else { continue };
        let others: Vec<Scope> = Scope::ALL.into_iter().filter(|s| *s != scope).collect();
        let mut browser = Browser::new(&fx, admin, &credential(&admin_ca, "mallory", &others));
        browser.get("/console/tokens").await; // its cookie
        let path =
            path.replace("{id}", &id).replace("{prefix}", &"ab".repeat(6)).replace("{file}", "console.css");
        let answer = match method {
            axum::http::Method::GET => browser.get(&path).await,
            _ => browser.post(&path, &[("csrf", "0")]).await,
        };
        assert_eq!(answer.status, 403, "{method} {path} without {scope:?}");
    }
    assert_eq!(state_of(&fx, admin, &admin_ca, &id).await, "pending");
    server.stop().await;
}

/// Issue 53: 600 tokenless announcements (no credential needed) arrive
/// after a real node: newest first, the page's 500 rows are the flood's,
/// and it says how many are not shown; a search by what the admin holds
/// (the node's console line, its fingerprint's first digits, its name, an
/// id prefix) finds the node whatever the flood.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_cannot_hide_a_pending_node_from_a_search_by_its_fingerprint() {
    let fx = Fixture::new();
    let admin_ca = certs::mint_admin_ca("test admin CA").unwrap();
    let (server, admin) = with_admin_api(&fx, &admin_ca).await;
    let nodes = node_client(&fx, server.addr);
    let ca = certs::mint_node_ca("edge-real").unwrap();
    announce(&nodes, "edge-real", &ca, "").await;
    let id = pending_id(&fx, admin, &admin_ca, "edge-real").await;
    // The flood, as its records land (one CA, newer than the real node).
    let flood = certs::mint_node_ca("flood").unwrap();
    let later = janus_core::clock::unix_to_rfc3339(janus_core::clock::now_unix() + 60);
    for _ in 0..600 {
        let fid = janus_store::NodeId::generate();
        let record = serde_json::json!({
            "id": fid.as_str(), "name": "flood", "address": "10.0.2.15:9505", "ca_cert_pem": flood.cert_pem,
            "ca_sha256": ca_hash(&flood), "admitted": false, "poll_secret_sha256": "00",
            "announced_at": later, "peer_address": "127.0.0.1:40000",
        });
        std::fs::write(fx.state().join("nodes").join(format!("{fid}.json")), record.to_string()).unwrap();
    }
    let mut browser = Browser::new(&fx, admin, &credential(&admin_ca, "alice", &Scope::ALL));
    let page = browser.get("/console/").await.text();
    assert!(page.contains("Showing the newest 500 of 601 nodes; 101 not shown"), "{page}");
    assert!(!page.contains(&id), "pushed off the page by the flood");
    let hash = ca_hash(&ca);
    let line = format!("pki: this node's CA: SHA-256 {}", hash.to_uppercase());
    let id_prefix = id[..10].to_string();
    for typed in [line.as_str(), &hash[..8], "edge-real", id_prefix.as_str()] {
        let query = form_urlencoded::Serializer::new(String::new()).append_pair("q", typed).finish();
        for path in ["/console/", "/console/nodes"] {
            let found = browser.get(&format!("{path}?{query}")).await;
            assert_eq!(found.status, 200, "{typed}: {}", found.text());
            let text = found.text();
            assert!(text.contains(&format!("/console/nodes/{id}")), "{path} {typed}: found");
            assert!(!text.contains("Showing the newest"), "{path} {typed}: one row, nothing hidden");
        }
    }
    server.stop().await;
}

/// Issue 55: reject and revoke take a second step that says what will
/// happen and to what; a rejected node's page offers the undo (forget);
/// a mistyped fingerprint is shown beside the node's, the digits that
/// differ marked; a page says which scope an action it does not offer needs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_one_click_mistakes_and_an_undo_for_a_rejection() {
    let fx = Fixture::new();
    let admin_ca = certs::mint_admin_ca("test admin CA").unwrap();
    let (server, admin) = with_admin_api(&fx, &admin_ca).await;
    let nodes = node_client(&fx, server.addr);
    let ca = certs::mint_node_ca("web-9").unwrap();
    announce(&nodes, "web-9", &ca, "").await;
    let id = pending_id(&fx, admin, &admin_ca, "web-9").await;
    let mut browser = Browser::new(&fx, admin, &credential(&admin_ca, "alice", &Scope::ALL));
    let page = browser.get(&format!("/console/nodes/{id}")).await.text();
    let reject = format!("/console/nodes/{id}/reject");
    assert!(page.contains(&format!("method=\"get\" action=\"{reject}\"")), "a link to a second step: {page}");
    let csrf = field(&page, "csrf");
    // The old one-click post (no confirmation): answered with the second step, nothing done.
    let asked = browser.post(&reject, &[("csrf", &csrf)]).await;
    assert_eq!(asked.status, 200);
    let hash = ca_hash(&ca);
    for said in ["Reject web-9?", id.as_str(), hash.as_str(), "rejected at once", "name=\"confirmed\""] {
        assert!(asked.text().contains(said), "{said}: {}", asked.text());
    }
    assert_eq!(state_of(&fx, admin, &admin_ca, &id).await, "pending");
    let second = browser.get(&reject).await;
    assert_eq!(second.status, 200);
    assert!(second.text().contains("Reject web-9?"));
    // A mistyped fingerprint: both shown, the differing digit marked.
    let mistyped = format!("{}{}", &hash[..63], if hash.ends_with('0') { "1" } else { "0" });
    let refused = browser
        .post(&format!("/console/nodes/{id}/approve"), &[("csrf", &csrf), ("expect_ca_sha256", &mistyped)])
        .await;
    assert_eq!(refused.status, 422);
    assert!(refused.text().contains("You typed") && refused.text().contains("<mark>"), "{}", refused.text());
    // Confirmed: rejected; its page offers the undo.
    let done = browser.post(&reject, &[("csrf", &csrf), ("confirmed", "yes")]).await;
    assert_eq!(done.status, 200, "{}", done.text());
    assert_eq!(state_of(&fx, admin, &admin_ca, &id).await, "rejected");
    assert!(fx.state().join("rejected-cas").join(&hash).exists());
    let page = browser.get(&format!("/console/nodes/{id}")).await.text();
    let forget = format!("/console/nodes/{id}/forget");
    assert!(page.contains("Undo the rejection") && page.contains(&forget), "{page}");
    // History in words (who, from where), the JSON a click away.
    assert!(page.contains("announced from 127.0.0.1:"), "{page}");
    assert!(page.contains("<summary>JSON</summary>"), "{page}");
    let asked = browser.post(&forget, &[("csrf", &csrf)]).await;
    assert!(asked.text().contains("Forget web-9?"), "a second step: {}", asked.text());
    assert!(fx.state().join("rejected-cas").join(&hash).exists(), "nothing done yet");
    let done = browser.post(&forget, &[("csrf", &csrf), ("confirmed", "yes")]).await;
    assert_eq!(done.status, 200, "{}", done.text());
    assert!(done.text().contains("lifted"), "{}", done.text());
    assert!(!fx.state().join("rejected-cas").join(&hash).exists(), "the CA's rejection lifted");
    // Revoke: a second step too.
    let token = add_token(&fx.state(), &[]);
    let prefix = janus_store::token_fingerprint(&token);
    let tokens = browser.get("/console/tokens").await.text();
    let revoke = format!("/console/tokens/{prefix}/revoke");
    assert!(tokens.contains(&format!("method=\"get\" action=\"{revoke}\"")), "{tokens}");
    let asked = browser.post(&revoke, &[("csrf", &csrf)]).await;
    assert!(
        asked.text().contains("Revoke this token?") && asked.text().contains(&prefix),
        "{}",
        asked.text()
    );
    assert!(fx.tokens().contains(&token), "not revoked by one click");
    let done = browser.post(&revoke, &[("csrf", &csrf), ("confirmed", "yes")]).await;
    assert!(done.text().contains("revoked the token"), "{}", done.text());
    // What a credential without a scope is told.
    announce(&nodes, "web-10", &certs::mint_node_ca("web-10").unwrap(), "").await;
    let other = pending_id(&fx, admin, &admin_ca, "web-10").await;
    let mut reader = Browser::new(&fx, admin, &credential(&admin_ca, "bob", &[Scope::Read]));
    let page = reader.get(&format!("/console/nodes/{other}")).await.text();
    assert!(page.contains("Approving needs a credential with the <code>approve</code> scope"), "{page}");
    assert!(page.contains("Rejecting needs a credential with the <code>reject</code> scope"), "{page}");
    let tokens = reader.get("/console/tokens").await.text();
    assert!(tokens.contains("need a credential with the <code>tokens</code> scope"), "{tokens}");
    server.stop().await;
}

/// Issue 61: the console says what an admin's files say: an approval file
/// that names no node (with the id it may have meant), and a node whose
/// approval was removed after it got the trust (admitted, marked).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_says_approval_files_that_name_no_node_and_removed_approvals() {
    let fx = Fixture::new();
    let admin_ca = certs::mint_admin_ca("test admin CA").unwrap();
    let (server, admin) = with_admin_api(&fx, &admin_ca).await;
    let client = node_client(&fx, server.addr);
    let ca = certs::mint_node_ca("edge-9").unwrap();
    let (id, secret, _) = announce(&client, "edge-9", &ca, "").await;
    std::fs::write(fx.state().join("approved").join("edge-9"), b"").unwrap();
    let mut browser = Browser::new(&fx, admin, &credential(&admin_ca, "alice", &Scope::ALL));
    let page = browser.get("/console/").await.text();
    assert!(
        page.contains(&format!(
            "approved/edge-9 names no node and is not acted on: edge-9 is a node&#39;s name; its id is {id}"
        )) || page.contains(&format!(
            "approved/edge-9 names no node and is not acted on: edge-9 is a node's name; its id is {id}"
        )),
        "{page}"
    );
    std::fs::remove_file(fx.state().join("approved").join("edge-9")).unwrap();
    let (ok, _, err) =
        crate::common::admin(&fx.state(), &["nodes", "approve", &id, "--expect-ca-sha256", &ca_hash(&ca)]);
    assert!(ok, "{err}");
    assert_eq!(get(&client, &format!("/register/{id}"), Some(&secret)).await.status, 200);
    std::fs::remove_file(fx.state().join("approved").join(&id)).unwrap();
    let page = browser.get("/console/nodes").await.text();
    assert!(page.contains("approval file removed"), "{page}");
    let node = browser.get(&format!("/console/nodes/{id}")).await.text();
    assert!(node.contains("was removed after it got the fleet") && node.contains("Janus"), "{node}");
}

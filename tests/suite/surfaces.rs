//! One table of admin requests, each driven through the three surfaces of
//! the one admin model: the command line on the state directory, the
//! admin API, and the console's forms. Each gives the same decision (done,
//! or refused with the same code) and leaves the node in the same state;
//! what the API and the console say names no command-line flag or command.

use janus_admin::api::Scope;
use janus_agent::http::Endpoint;
use janus_registration::certs;
use serde_json::json;

use crate::admin_api::{client, credential, with_admin_api};
use crate::common::*;
use crate::console::{Browser, field};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Through {
    Command,
    Api,
    Console,
}

/// A request of the table.
#[derive(Debug, Clone, Copy)]
enum Ask {
    /// Approve a pending node with its CA's fingerprint, as its console line.
    ApproveRight,
    /// Approve a pending node with a fingerprint one digit off.
    ApproveWrong,
    /// Approve with what is no fingerprint.
    ApproveMalformed,
    /// Approve a node an admin rejected.
    ApproveRejected,
    /// Approve a node there is not.
    ApproveMissing,
    /// Reject a pending node.
    Reject,
    /// Reject it again.
    RejectAgain,
    /// Mint no token.
    MintNone,
    /// Mint more tokens each than a token may admit nodes.
    MintTooManyUses,
    /// Revoke a token there is not.
    RevokeMissing,
}

/// What a surface decided: done, or refused with a code; the node's state after.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Decided {
    code: Option<String>,
    state: Option<String>,
}

struct Surfaces {
    fx: Fixture,
    nodes: Endpoint,
    api: janus_admin::api::client::AdminClient,
    browser: Browser,
}

impl Surfaces {
    /// A fresh pending node: its id and CA fingerprint.
    async fn pending(&self, name: &str) -> (String, String) {
        let ca = certs::mint_node_ca(name).unwrap();
        announce(&self.nodes, name, &ca, "").await;
        let listed = self.api.call("GET", "/v1/nodes?state=pending", None).await.unwrap();
        let id = listed.body["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["name"] == name)
            .map(|n| n["id"].as_str().unwrap().to_string())
            .unwrap();
        (id, ca_hash(&ca))
    }

    async fn state_of(&self, id: &str) -> Option<String> {
        let shown = self.api.call("GET", &format!("/v1/nodes/{id}"), None).await.unwrap();
        shown.body["state"].as_str().map(str::to_string)
    }

    /// The command line: done, or its refusal's code (`… (code: X)`).
    fn command(&self, args: &[&str]) -> (Option<String>, String) {
        let (ok, out, err) = admin(&self.fx.state(), args);
        if ok {
            return (None, out);
        }
        let code = err.rsplit("(code: ").next().and_then(|c| c.split(')').next()).map(str::to_string);
        assert!(code.is_some(), "a refusal says its code: {err}");
        (code, err)
    }

    /// The API: done, or its problem's code.
    async fn through_api(
        &self,
        method: &str,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> (Option<String>, String) {
        let reply = self.api.call(method, path, body.as_ref()).await.unwrap();
        if (200..300).contains(&reply.status) {
            return (None, reply.body.to_string());
        }
        assert_eq!(reply.body["status"], reply.status, "{}", reply.body);
        (
            reply.body["code"].as_str().map(str::to_string),
            reply.body["detail"].as_str().unwrap_or("").to_string(),
        )
    }

    /// A console form, sent from its page: done, or the code its page says.
    async fn through_console(
        &mut self,
        page: &str,
        action: &str,
        fields: &[(&str, &str)],
    ) -> (Option<String>, String) {
        let page = self.browser.get(page).await.text();
        let csrf = field(&page, "csrf");
        let once = page.contains("name=\"once\"").then(|| field(&page, "once"));
        let mut all = vec![("csrf", csrf.as_str())];
        if let Some(once) = &once {
            all.push(("once", once));
        }
        all.extend_from_slice(fields);
        let reply = self.browser.post(action, &all).await;
        let text = reply.text();
        if reply.status == 200 && !text.contains("data-code=") {
            return (None, text);
        }
        let code = text.split("data-code=\"").nth(1).and_then(|c| c.split('"').next()).map(str::to_string);
        assert!(code.is_some(), "a refused form's page says its code ({}): {text}", reply.status);
        let words =
            text.split("role=\"alert\"").nth(1).unwrap_or_default().split("</p>").next().unwrap_or_default();
        (code, words.to_string())
    }

    /// `ask` through `through`, on nodes of its own.
    async fn decide(&mut self, ask: Ask, through: Through, n: usize) -> Decided {
        let name = format!("table-{n}");
        let (id, fingerprint) = match ask {
            Ask::MintNone | Ask::MintTooManyUses | Ask::RevokeMissing | Ask::ApproveMissing => {
                ("0123456789abcdef0123456789abcdef".to_string(), "ab".repeat(32))
            }
            _ => self.pending(&name).await,
        };
        if matches!(ask, Ask::ApproveRejected | Ask::RejectAgain) {
            let (ok, _, err) = admin(&self.fx.state(), &["nodes", "reject", &id]);
            assert!(ok, "{err}");
        }
        let console_line = format!("[  2.1] pki: this node's CA: SHA-256 {fingerprint}");
        // One digit off (whatever the last digit is: a 0 made 0 is no mistake).
        let last = if fingerprint.ends_with('0') { '1' } else { '0' };
        let wrong = format!("{}{last}", &fingerprint[..63]);
        let expected = match ask {
            Ask::ApproveRight | Ask::ApproveRejected | Ask::ApproveMissing => console_line.as_str(),
            Ask::ApproveWrong => wrong.as_str(),
            _ => "2bcd",
        };
        let (code, words) = self.send(ask, through, &id, expected).await;
        if through != Through::Command && code.is_some() {
            for cli_word in ["--", "`nodes ", "`tokens ", "nodes forget", "nodes reject"] {
                assert!(!words.contains(cli_word), "{through:?} {ask:?} says {cli_word:?}: {words}");
            }
        }
        let state = match ask {
            Ask::MintNone | Ask::MintTooManyUses | Ask::RevokeMissing | Ask::ApproveMissing => None,
            _ => self.state_of(&id).await,
        };
        Decided { code, state }
    }

    /// `ask` about the node `id` through `through` (`expected`: the fingerprint an approval gives).
    async fn send(
        &mut self,
        ask: Ask,
        through: Through,
        id: &str,
        expected: &str,
    ) -> (Option<String>, String) {
        let approve = format!("/v1/nodes/{id}/approve");
        match (ask, through) {
            (
                Ask::ApproveRight
                | Ask::ApproveWrong
                | Ask::ApproveMalformed
                | Ask::ApproveRejected
                | Ask::ApproveMissing,
                t,
            ) => match t {
                Through::Command => self.command(&["nodes", "approve", id, "--expect-ca-sha256", expected]),
                Through::Api => {
                    self.through_api("POST", &approve, Some(json!({"expect_ca_sha256": expected}))).await
                }
                Through::Console => {
                    let page = if matches!(ask, Ask::ApproveMissing) {
                        "/console/tokens".to_string()
                    } else {
                        format!("/console/nodes/{id}")
                    };
                    self.through_console(
                        &page,
                        &format!("/console/nodes/{id}/approve"),
                        &[("expect_ca_sha256", expected)],
                    )
                    .await
                }
            },
            (Ask::Reject | Ask::RejectAgain, Through::Command) => self.command(&["nodes", "reject", id]),
            (Ask::Reject | Ask::RejectAgain, Through::Api) => {
                self.through_api("POST", &format!("/v1/nodes/{id}/reject"), Some(json!({}))).await
            }
            (Ask::Reject | Ask::RejectAgain, Through::Console) => {
                let page = format!("/console/nodes/{id}");
                self.through_console(&page, &format!("/console/nodes/{id}/reject"), &[("confirmed", "yes")])
                    .await
            }
            (Ask::MintNone, Through::Command) => self.command(&["tokens", "add", "--count", "0"]),
            (Ask::MintNone, Through::Api) => {
                self.through_api("POST", "/v1/tokens", Some(json!({"count": 0}))).await
            }
            (Ask::MintNone, Through::Console) => {
                self.through_console("/console/tokens", "/console/tokens", &[("count", "0")]).await
            }
            (Ask::MintTooManyUses, Through::Command) => self.command(&["tokens", "add", "--uses", "10001"]),
            (Ask::MintTooManyUses, Through::Api) => {
                self.through_api("POST", "/v1/tokens", Some(json!({"uses": 10001}))).await
            }
            (Ask::MintTooManyUses, Through::Console) => {
                self.through_console("/console/tokens", "/console/tokens", &[("uses", "10001")]).await
            }
            (Ask::RevokeMissing, Through::Command) => self.command(&["tokens", "revoke", "0123456789ab"]),
            (Ask::RevokeMissing, Through::Api) => {
                self.through_api("DELETE", "/v1/tokens/0123456789ab", None).await
            }
            (Ask::RevokeMissing, Through::Console) => {
                let action = "/console/tokens/0123456789ab/revoke";
                self.through_console(action, action, &[("confirmed", "yes")]).await
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_command_line_the_api_and_the_console_decide_each_request_alike() {
    let fx = Fixture::new();
    let admin_ca = certs::mint_admin_ca("test admin CA").unwrap();
    let (server, admin) = with_admin_api(&fx, &admin_ca).await;
    let alice = credential(&admin_ca, "alice", &Scope::ALL);
    let mut surfaces = Surfaces {
        nodes: node_client(&fx, server.addr),
        api: client(&fx, admin, &alice),
        browser: Browser::new(&fx, admin, &alice),
        fx,
    };
    let table: [(Ask, Option<&str>, Option<&str>); 10] = [
        (Ask::ApproveRight, None, Some("admitted")),
        (Ask::ApproveWrong, Some("fingerprint_mismatch"), Some("pending")),
        (Ask::ApproveMalformed, Some("invalid_field"), Some("pending")),
        (Ask::ApproveRejected, Some("node_rejected"), Some("rejected")),
        (Ask::ApproveMissing, Some("node_not_found"), None),
        (Ask::Reject, None, Some("rejected")),
        (Ask::RejectAgain, None, Some("rejected")),
        (Ask::MintNone, Some("invalid_field"), None),
        (Ask::MintTooManyUses, Some("invalid_field"), None),
        (Ask::RevokeMissing, Some("token_not_found"), None),
    ];
    let mut n = 0;
    for (ask, code, state) in table {
        let want = Decided { code: code.map(str::to_string), state: state.map(str::to_string) };
        for through in [Through::Command, Through::Api, Through::Console] {
            n += 1;
            let got = surfaces.decide(ask, through, n).await;
            assert_eq!(got, want, "{ask:?} through {through:?}");
        }
    }
    // A command asked for JSON says its refusal as one JSON line, the same code.
    let (ok, _, err) = crate::common::admin(&surfaces.fx.state(), &["nodes", "show", "nosuchnode", "--json"]);
    assert!(!ok);
    let problem: serde_json::Value = serde_json::from_str(err.trim()).expect("one JSON line");
    assert_eq!(
        (problem["code"].as_str(), problem["status"].as_u64()),
        (Some("node_not_found"), Some(404)),
        "{err}"
    );
    // Who acted, as the audit trail names them: the surface and the admin.
    let trail = audit_trail(&surfaces.fx.state());
    for actor in ["command (alice)", "api (alice)", "console (alice)"] {
        assert!(trail.contains(&format!("\"user\":\"{actor}\"")), "{actor} in {trail}");
    }
    server.stop().await;
}

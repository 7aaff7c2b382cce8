//! Deployment: the Dockerfile, the manifests and the systemd unit cannot rot
//! (their paths and versions match the binary), a Kubernetes Secret swap is
//! served without a restart, health and metrics answer, JSON
//! logs carry node ids and no secrets, and several replicas share one state
//! directory safely, one of them killed mid-load.

use secrecy::ExposeSecret;
use std::collections::HashSet;
use std::process::Command;
use std::time::Duration;

use crate::common::*;
use janus_registration::certs;

fn dockerfile() -> String {
    repo_file("Dockerfile")
}

/// The JSON array after `keyword` on its (continued) line.
fn exec_form(text: &str, keyword: &str) -> Vec<String> {
    let joined = text.replace("\\\n", " ");
    let line = joined
        .lines()
        .find(|l| l.trim_start().starts_with(keyword))
        .unwrap_or_else(|| panic!("no {keyword}"));
    let array = &line[line.find('[').unwrap()..=line.rfind(']').unwrap()];
    serde_json::from_str(array).unwrap()
}

fn env_of(text: &str) -> Vec<(String, String)> {
    let joined = text.replace("\\\n", " ");
    joined
        .lines()
        .filter(|l| l.trim_start().starts_with("ENV "))
        .flat_map(|l| l.trim_start()[4..].split_whitespace().map(str::to_string).collect::<Vec<_>>())
        .filter_map(|kv| kv.split_once('=').map(|(k, v)| (k.to_string(), v.to_string())))
        .collect()
}

#[test]
fn the_dockerfile_matches_the_binary_and_the_documented_paths() {
    let text = dockerfile();
    let entrypoint = exec_form(&text, "ENTRYPOINT");
    let cmd = exec_form(&text, "CMD");
    let healthcheck = exec_form(&text, "HEALTHCHECK");
    assert_eq!(entrypoint, ["/usr/local/bin/janus-registration"]);
    assert_eq!(healthcheck[0], "/usr/local/bin/janus-registration");
    let env = env_of(&text);
    let get = |k: &str| env.iter().find(|(key, _)| key == k).map(|(_, v)| v.clone()).unwrap_or_default();
    assert_eq!(get("JANUS_REGISTRATION_STATE"), "/var/lib/janus-registration");
    assert!(text.contains("VOLUME [\"/var/lib/janus-registration\"]"));
    assert!(text.contains("EXPOSE 8443") && get("JANUS_REGISTRATION_LISTEN").ends_with(":8443"));
    assert!(text.contains("STOPSIGNAL SIGTERM") && text.contains("USER 65532"));
    assert!(
        text.contains("cargo build --profile dist --locked")
            && text.contains("target/dist/janus-registration")
    );
    // The state directory ships owned by the runtime's user: a fresh named
    // volume is seeded from it.
    assert!(text.contains("COPY --from=build --chown=65532:65532 /out/state /var/lib/janus-registration"));
    let guide = repo_file("docs/deploying.md");
    for (key, value) in &env {
        assert!(guide.contains(value.as_str()), "docs/deploying.md documents {key}={value}");
    }

    // The image's command, with the image's environment, is a valid `serve`:
    // it gets past argument parsing to the startup checks (no fleet here).
    let (code, _, stderr) = cli_exit(Command::new(BIN).args(&cmd).envs(env.iter().map(|(k, v)| (k, v))));
    assert_eq!(code, Some(1), "the image's command stops at the startup checks (exit 1): {stderr}");
    assert!(stderr.contains("/etc/janus-registration/fleet"), "{stderr}");
    // The health check too: parsed, then no server to ask. Its address is
    // the image's; here it asks a port that refuses, not 8443, which a
    // demo running beside the tests serves.
    assert_eq!(healthcheck[1..3], ["healthcheck", "--addr"], "the HEALTHCHECK's arguments: {healthcheck:?}");
    let (_held, nobody) = refusing_port();
    let mut args = healthcheck[1..].to_vec();
    args[2] = nobody.to_string();
    let (code, stdout, stderr) = cli_exit(Command::new(BIN).args(&args));
    assert_eq!(
        code,
        Some(1),
        "the HEALTHCHECK's command, asking {nobody} where nothing listens, fails (exit 1); stdout: {stdout} stderr: {stderr}"
    );
    assert!(stderr.contains("does not answer"), "{stderr}");
}

/// `deploy/systemd/janus-registration.env`'s settings, as systemd passes them.
fn env_file() -> Vec<(String, String)> {
    repo_file("deploy/systemd/janus-registration.env")
        .lines()
        .filter(|l| !l.trim_start().starts_with('#') && l.contains('='))
        .filter_map(|l| l.split_once('=').map(|(k, v)| (k.trim().to_string(), v.trim().to_string())))
        .collect()
}

fn repo_file(path: &str) -> String {
    std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(path)).unwrap()
}

#[test]
fn every_shipped_artifact_names_the_crates_version() {
    let version = env!("CARGO_PKG_VERSION");
    let (ok, stdout, _) = cli(&["--version"]);
    assert!(ok && stdout.trim() == format!("janus-registration {version}"), "{stdout}");
    // The image's label takes ARG VERSION; scripts/container-check.sh checks
    // the built image's label against its binary's --version.
    let dockerfile = dockerfile();
    assert!(dockerfile.contains(&format!("ARG VERSION={version}\n")), "Dockerfile's ARG VERSION");
    assert!(dockerfile.contains("org.opencontainers.image.version=\"${VERSION}\""));
    // The manifests pin the release's tag.
    let manifest = repo_file("deploy/kubernetes/janus-registration.yaml");
    assert!(manifest.contains(&format!("image: janus-registration:{version}\n")), "the pinned image tag");
    assert!(manifest.contains("strategy: {type: Recreate}"), "never two versions on one volume");
}

#[test]
fn the_systemd_units_settings_are_a_valid_serve() {
    let env = env_file();
    let get = |k: &str| env.iter().find(|(key, _)| key == k).map(|(_, v)| v.clone()).unwrap_or_default();
    assert_eq!(get("JANUS_REGISTRATION_STATE"), "/var/lib/janus-registration");
    let unit = repo_file("deploy/systemd/janus-registration.service");
    assert!(unit.contains("StateDirectory=janus-registration\n"));
    assert!(unit.contains("ExecStart=/usr/local/bin/janus-registration serve\n"));
    // With only the unit's environment, `serve` gets past its arguments to
    // the startup checks (no fleet on this machine).
    let (code, _, stderr) =
        cli_exit(Command::new(BIN).arg("serve").env_clear().envs(env.iter().map(|(k, v)| (k, v))));
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("/etc/janus-registration/fleet"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_metrics_and_json_logs() {
    let fx = Fixture::new();
    let metrics_port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut args = fx.serve_args();
    args.extend(["--log-format", "json", "--metrics-listen"].map(String::from));
    args.push(format!("127.0.0.1:{metrics_port}"));
    let server = Process::start(&args);
    let (ok, stdout, stderr) = cli(&["healthcheck", "--addr", &server.addr.to_string()]);
    assert!(ok && stdout.contains("ok"), "{stdout} {stderr}");

    let client = node_client(&fx, server.addr);
    let ca = certs::mint_node_ca("edge").unwrap();
    let (id, secret, _) = announce(&client, "edge", &ca, "").await;
    assert_eq!(get(&client, &format!("/register/{id}"), Some(&secret)).await.status, 202);
    assert_eq!(post(&client, b"[]").await.status, 400);
    // Admissions by how: a token's at its answer; the command line's at the
    // first poll after the approval (and that poll only).
    let token = add_token(&fx.state(), &[]);
    let (_, _, status) =
        announce(&client, "edge-token", &certs::mint_node_ca("edge-token").unwrap(), &token).await;
    assert_eq!(status, 201);
    let (ok, _, err) = admin(&fx.state(), &["nodes", "approve", &id, "--expect-ca-sha256", &ca_hash(&ca)]);
    assert!(ok, "{err}");
    for _ in 0..2 {
        assert_eq!(get(&client, &format!("/register/{id}"), Some(&secret)).await.status, 200);
    }

    let scrape = || {
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", metrics_port)).unwrap();
        use std::io::{Read, Write};
        stream.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
        let mut text = String::new();
        stream.read_to_string(&mut text).unwrap();
        text
    };
    let text = scrape();
    for expected in [
        "janus_registration_requests_total{route=\"/register\",status=\"201\"} 2",
        "janus_registration_announcements_total{outcome=\"pending\"} 1",
        "janus_registration_announcements_total{outcome=\"refused_bad_request\"} 1",
        "janus_registration_polls_total{outcome=\"pending\"} 1",
        "janus_registration_polls_total{outcome=\"admitted\"} 2",
        "janus_registration_admissions_total{how=\"token\"} 1",
        "janus_registration_admissions_total{how=\"cli\"} 1",
        &format!(
            "janus_registration_build_info{{version=\"{}\",crypto=\"aws-lc-rs\",rust_version=\"{}\"}} 1",
            env!("CARGO_PKG_VERSION"),
            env!("CARGO_PKG_RUST_VERSION")
        ),
        "process_cpu_seconds_total ",
        "process_resident_memory_bytes ",
        "process_open_fds ",
        "process_start_time_seconds ",
        "janus_registration_bundle_version 1",
        "janus_registration_request_duration_seconds_bucket",
        "janus_registration_certificate_not_after_seconds",
    ] {
        assert!(text.contains(expected), "{expected} missing from:\n{text}");
    }
    // A client that never finishes a handshake is counted.
    drop(std::net::TcpStream::connect(server.addr).unwrap());
    assert!(wait_for(Duration::from_secs(20), || scrape()
        .contains("janus_registration_connection_failures_total{outcome=\"tls\"}")));

    assert!(wait_for(Duration::from_secs(10), || server.log().contains(&format!("/register/{id}"))));
    let log = server.log();
    for line in log.lines() {
        let parsed: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|_| panic!("not JSON: {line}"));
        assert!(parsed["fields"].is_object(), "{line}");
    }
    assert!(log.lines().any(|l| l.contains("\"node\":\"") && l.contains(&id)), "node lines carry the id");
    assert!(!log.contains(&secret));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_replicas_on_one_state_directory_survive_a_kill_9() {
    let fx = Fixture::new();
    let tokens: Vec<String> = (0..30).map(|i| format!("replica-token-{i}")).collect();
    fx.write_tokens(&tokens.join("\n"));
    let mut replicas: Vec<Process> = (0..3).map(|_| Process::start(&fx.serve_args())).collect();
    let addrs: Vec<_> = replicas.iter().map(|r| r.addr).collect();
    let ca = certs::mint_node_ca("edge").unwrap();

    // 90 announcements, tokens and tokenless, spread over the replicas;
    // one replica dies part way through, as a load balancer would see it.
    let mut tasks = Vec::new();
    for i in 0..90 {
        let token = if i % 3 == 0 { tokens[i / 3].clone() } else { String::new() };
        let fx_root = fx.fleet.root.cert_pem.clone();
        let addrs = addrs.clone();
        let ca = ca.clone();
        tasks.push(tokio::spawn(async move { announce_somewhere(&addrs, i, token, &ca, &fx_root).await }));
        if i == 45 {
            replicas[0].kill();
        }
    }
    let mut answered = Vec::new();
    for task in tasks {
        answered.push(task.await.unwrap().expect("some replica answered"));
    }
    let admitted_tokens: Vec<&String> = answered.iter().filter(|a| a.2).map(|a| &a.3).collect();
    let unique: HashSet<&&String> = admitted_tokens.iter().collect();
    assert_eq!(admitted_tokens.len(), unique.len(), "no token admitted two nodes");
    assert!(admitted_tokens.iter().all(|t| !t.is_empty()));
    // Spent tokens are blanked just after their answers, by each replica's
    // tidier (and a killed replica's by a later sweep or re-announcement).
    let settled = |left: &str| {
        tokens.iter().all(|t| admitted_tokens.contains(&t) != left.split_whitespace().any(|x| x == t))
    };
    wait_for(Duration::from_secs(10), || settled(&fx.tokens()));
    let left = fx.tokens();
    for t in &tokens {
        let used = admitted_tokens.contains(&t);
        assert_ne!(used, left.split_whitespace().any(|x| x == t), "{t} is either used or still in the file");
    }

    // Every record whole; every answered id on disk.
    let on_disk: HashSet<String> =
        records(&fx.state()).iter().map(|r| r["id"].as_str().unwrap().to_string()).collect();
    for (id, ..) in &answered {
        assert!(on_disk.contains(id), "{id} answered but not on disk");
    }

    // Approve the pending ones with the admin command; any live replica hands out the trust.
    let pending: Vec<_> = answered.iter().filter(|a| !a.2).collect();
    for (id, ..) in pending.iter().take(10) {
        let (ok, _, stderr) = admin(&fx.state(), &["nodes", "approve", id, "--unchecked"]);
        assert!(ok, "{stderr}");
    }
    for (n, (id, secret, admitted, _)) in answered.iter().enumerate() {
        let approved = *admitted || pending.iter().take(10).any(|p| &p.0 == id);
        let client = node_client(&fx, addrs[1 + n % 2]);
        let status = get(&client, &format!("/register/{id}"), Some(secret)).await.status;
        assert_eq!(status, if approved { 200 } else { 202 }, "{id}");
    }
}

/// Announcement `i` with `token`, to replica `i` of `addrs`, then to the
/// next when one does not answer (a load balancer's retry): its id, poll
/// secret, whether it was admitted, and the token.
async fn announce_somewhere(
    addrs: &[std::net::SocketAddr],
    i: usize,
    token: String,
    ca: &certs::Minted,
    fx_root: &str,
) -> Option<(String, String, bool, String)> {
    // Another replica when one does not answer: a load balancer's retry.
    for attempt in 0..addrs.len() {
        let addr = addrs[(i + attempt) % addrs.len()];
        let client = janus_agent::http::Endpoint::new(&addr.to_string(), fx_root.as_bytes(), b"").unwrap();
        let secret = new_secret();
        let body = announcement("edge", ca, &token, &secret);
        let request = janus_agent::http::Request {
            method: "POST",
            path: "/register",
            headers: vec![("Content-Type", "application/json".into())],
            body: Some(&body),
        };
        if let Ok((answer, _)) = client.send(&request).await
            && answer.status == 201
        {
            let body = json(&answer);
            return Some((body["id"].as_str().unwrap().to_string(), secret, body["admitted"] == true, token));
        }
    }
    None
}

/// A Kubernetes Secret volume as the kubelet lays it out: the files live in a
/// timestamped directory, `..data` links to it, and each name links through
/// `..data`. An update writes a new directory and renames a new `..data`
/// link over the old one (one atomic swap), then removes the old directory.
struct SecretVolume {
    dir: std::path::PathBuf,
    generation: u32,
}

impl SecretVolume {
    fn new(dir: std::path::PathBuf, files: &[(&str, &[u8])]) -> Self {
        std::fs::create_dir(&dir).unwrap();
        let mut volume = SecretVolume { dir, generation: 0 };
        volume.update(files);
        for (name, _) in files {
            std::os::unix::fs::symlink(format!("..data/{name}"), volume.dir.join(name)).unwrap();
        }
        volume
    }

    fn update(&mut self, files: &[(&str, &[u8])]) {
        self.generation += 1;
        let old = std::fs::read_link(self.dir.join("..data")).ok();
        let timestamped = format!("..2026_12_01_00_00_0{}.{}", self.generation, 1000 + self.generation);
        std::fs::create_dir(self.dir.join(&timestamped)).unwrap();
        for (name, bytes) in files {
            std::fs::write(self.dir.join(&timestamped).join(name), bytes).unwrap();
        }
        std::os::unix::fs::symlink(&timestamped, self.dir.join("..data_tmp")).unwrap();
        std::fs::rename(self.dir.join("..data_tmp"), self.dir.join("..data")).unwrap();
        if let Some(old) = old {
            std::fs::remove_dir_all(self.dir.join(old)).unwrap();
        }
    }
}

#[tokio::test]
async fn a_kubernetes_secret_update_is_served_without_a_restart() {
    let fx = Fixture::new();
    let tls = fx.dir.path().join("tls-secret");
    let fleet = fx.dir.path().join("fleet-secret");
    let mut tls_volume = SecretVolume::new(
        tls.clone(),
        &[
            ("tls.crt", fx.controller.cert_pem.as_bytes()),
            ("tls.key", fx.controller.key_pem.expose_secret().as_bytes()),
        ],
    );
    let bundle = std::fs::read(fx.fleet_dir().join("bundle.json")).unwrap();
    let mut fleet_volume = SecretVolume::new(
        fleet.clone(),
        &[("root.crt", fx.fleet.root.cert_pem.as_bytes()), ("bundle.json", &bundle)],
    );
    let mut args = fx.serve_args();
    for (flag, value) in
        [("--cert", tls.join("tls.crt")), ("--key", tls.join("tls.key")), ("--fleet", fleet.clone())]
    {
        let at = args.iter().position(|a| a == flag).unwrap();
        args[at + 1] = value.to_str().unwrap().to_string();
    }
    args.extend(["--reload-every".into(), "200ms".into()]);
    let server = Process::start(&args);
    let (client, path, secret) = approved_node(&fx, server.addr).await;
    assert_eq!(get(&client, &path, Some(&secret)).await.status, 200);

    // cert-manager renewed the certificate: the kubelet swaps ..data.
    let renewed = certs::mint_controller(&fx.fleet.issuing, 30, &["127.0.0.1".to_string()]).unwrap();
    tls_volume.update(&[
        ("tls.crt", renewed.cert_pem.as_bytes()),
        ("tls.key", renewed.key_pem.expose_secret().as_bytes()),
    ]);
    let renewed_der =
        janus_core::pki::first_certificate(renewed.cert_pem.as_bytes(), "renewed").unwrap().to_vec();
    let presented = eventually(|| presented_certificate(server.addr), |p| *p == renewed_der).await;
    assert_eq!(presented, renewed_der, "the renewed certificate is used from the next handshake");
    assert!(server.log().contains("reloaded the certificate"), "{}", server.log());

    // A new bundle in the fleet Secret, swapped the same way.
    let bundle_v2 = certs::sign_bundle(
        fx.fleet.root.key_pem.expose_secret(),
        std::slice::from_ref(&fx.fleet.issuing.cert_pem),
        2,
    )
    .unwrap();
    fleet_volume.update(&[("root.crt", fx.fleet.root.cert_pem.as_bytes()), ("bundle.json", &bundle_v2)]);
    let served = eventually(
        || async { json(&get(&client, &path, Some(&secret)).await)["bundle"].clone() },
        |b| {
            b.as_str()
                .map(|b| base64::Engine::decode(&base64::engine::general_purpose::STANDARD, b).unwrap())
                .is_some_and(|b| b == bundle_v2)
        },
    )
    .await;
    assert!(served.is_string(), "{served} {}", server.log());
    assert!(server.log().contains("reloaded the fleet"), "{}", server.log());
}

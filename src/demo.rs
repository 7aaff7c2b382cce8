//! `demo`: the embedded default. One command gives a new user a running
//! endpoint on a development fleet and its admin console: the fleet, the
//! controller certificate, an admin CA and an admin credential (with its
//! PKCS#12 for a browser) are minted once under `certs/`, a fresh state
//! directory is made from the example state compiled into the binary
//! (`state-example/`), and the exact commands to try next are printed,
//! the credential's import into Chromium and Firefox among them.
//!
//! It never touches anything outside `certs/` and `demo-state/` of its
//! directory, and says loudly that the fleet is for development only.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::certs::{self, MintError};
use janus_core::durable::{Presence, ensure_private_dir, write_atomic};
use janus_core::protocol::AnnounceRequest;
use janus_endpoint::ServeConfig;

/// The example state, as `state-example/` holds it.
pub const EXAMPLE_TOKENS: &str = include_str!("../state-example/tokens");
/// The example node's id (`state-example/`).
pub const EXAMPLE_NODE_ID: &str = "8f14e45fceea167a5a36dedd4bea2543";
/// The example node's record, as the reference writes one.
pub const EXAMPLE_NODE: &str = include_str!("../state-example/nodes/8f14e45fceea167a5a36dedd4bea2543.json");
/// The example node's poll secret (its record keeps only the hash).
pub const EXAMPLE_POLL_SECRET: &str = "example-poll-secret-do-not-use-in-production-0001";

/// A demo ready to serve.
pub struct Demo {
    /// The server's configuration.
    pub config: ServeConfig,
    /// The admin console's listener (the demo's admin CA).
    pub admin: janus_admin::listener::AdminApiConfig,
    /// What to print once it listens: the commands to try.
    pub instructions: String,
    /// Held while the demo runs: a second demo from the same directory
    /// refuses before it touches the running one's state. Dropped when the
    /// demo ends, which removes `.demo.lock`.
    pub lock: DemoLock,
}

/// `DIR/.demo.lock`, locked while the demo runs, removed when it ends.
pub struct DemoLock {
    file: std::fs::File,
    path: PathBuf,
}

impl Drop for DemoLock {
    fn drop(&mut self) {
        // Removed while still held: a demo starting now opens a new file.
        #[expect(
            clippy::disallowed_methods,
            reason = "the demo's lock file is a note, not state: nothing to make durable"
        )]
        let _ = std::fs::remove_file(&self.path);
        let _ = self.file.unlock();
    }
}

/// Takes `DIR/.demo.lock`, or says a demo already runs from `dir`.
fn lock_demo(dir: &Path) -> Result<DemoLock, MintError> {
    use std::os::unix::fs::OpenOptionsExt;
    ensure_private_dir(dir)?;
    let path = dir.join(".demo.lock");
    #[expect(
        clippy::disallowed_methods,
        reason = "the demo's lock file, in a directory the demo alone writes"
    )]
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .custom_flags(janus_core::durable::libc_nofollow())
        .open(&path)
        .map_err(|e| janus_core::durable::with_path(e, &path))?;
    match file.try_lock() {
        Ok(()) => Ok(DemoLock { file, path }),
        Err(std::fs::TryLockError::WouldBlock) => Err(MintError::Invalid(format!(
            "a demo is already running from {} (it holds {}); its demo-state/ is left as it is - stop it first",
            dir.display(),
            path.display()
        ))),
        Err(std::fs::TryLockError::Error(e)) => Err(janus_core::durable::with_path(e, &path).into()),
    }
}

/// Mints what is missing, lays out a fresh state, and says what to try;
/// the admin console listens on `admin_listen`.
pub fn prepare(dir: &Path, listen: &str, admin_listen: std::net::SocketAddr) -> Result<Demo, MintError> {
    let lock = lock_demo(dir)?;
    let certs_dir = dir.join("certs");
    let fleet_dir = certs_dir.join("fleet");
    let controller = certs_dir.join("controller");
    let node_ca = certs_dir.join("demo-node-ca");
    mint_missing(&fleet_dir, &controller, &node_ca)?;
    let admin = mint_admin_missing(&certs_dir)?;
    let node_ca_pem = certs::read_text(&certs::with_suffix(&node_ca, "crt"))?;
    let secret = janus_core::pki::hex(&rand::random::<[u8; 32]>());
    let announce = AnnounceRequest {
        protocol: janus_core::protocol::PROTOCOL,
        name: "demo-node".into(),
        address: "127.0.0.1:9505".into(),
        ca_cert_pem: node_ca_pem.clone(),
        registration_token: Default::default(),
        poll_secret: secret.clone().into(),
    };
    let announce_path = certs_dir.join("demo-announce.json");
    write_atomic(&announce_path, &announce.to_go_json(), 0o600)?;

    let state = dir.join("demo-state");
    let afresh = Presence::of(&state).known()?;
    lay_out_example_state(&state)?;

    // A node's NoCloud user-data for this endpoint, as user-data.sh announce writes it.
    let root_pem = certs::read_text(&fleet_dir.join("root.crt"))?;
    let user_data = serde_json::json!({
        "controller_address": listen,
        "controller_ca_cert": root_pem,
        "controller_fleet_root_cert": root_pem,
        "network": {"hostname": "demo-agent"},
    });
    let user_data_path = certs_dir.join("demo-user-data.json");
    write_atomic(&user_data_path, user_data.to_string().as_bytes(), 0o644)?;

    let port = listen.rsplit_once(':').map_or("8443", |(_, p)| p);
    let console = console_instructions(&admin, &fleet_dir.join("root.crt"), admin_listen.port())?;
    let mut instructions = instructions_for(&Paths {
        root: fleet_dir.join("root.crt"),
        state: state.clone(),
        announce: announce_path,
        user_data: user_data_path,
        node_dir: dir.join("demo-node"),
        port: port.to_string(),
        secret,
        console: certs::console_line(&node_ca_pem)?,
    });
    instructions.push('\n');
    instructions.push_str(&console);
    if afresh {
        instructions.insert_str(
            0,
            &format!(
                "{} existed: the demo starts afresh from the example state every time (its records and \
                 approvals are gone); certs/ is kept.\n\n",
                state.display()
            ),
        );
    }
    let config = ServeConfig {
        shutdown_grace: Duration::from_secs(2),
        ..ServeConfig::new(
            fleet_dir,
            certs::with_suffix(&controller, "crt"),
            certs::with_suffix(&controller, "key"),
            state,
        )
    };
    let ca = admin.ca.join("admin-ca.crt");
    let admin = janus_admin::listener::AdminApiConfig { listen: admin_listen, ca };
    Ok(Demo { config, admin, instructions, lock })
}

/// The demo's admin CA and credential, under `certs/`.
#[derive(Debug, Clone)]
pub struct DemoAdmin {
    /// `certs/demo-admin-ca/` (admin-ca.crt, admin-ca.key).
    pub ca: PathBuf,
    /// `certs/demo-admin`: `.crt`, `.key`, `.p12`.
    pub credential: PathBuf,
    /// `certs/demo-admin.p12-password`: the PKCS#12's import password.
    pub password: PathBuf,
}

/// The demo's admin CA and a credential with every scope (and its
/// PKCS#12), each minted only when missing.
pub fn mint_admin_missing(certs_dir: &Path) -> Result<DemoAdmin, MintError> {
    use crate::certs::{AdminArgs, AdminCaArgs, CertsCommand};
    let admin = DemoAdmin {
        ca: certs_dir.join("demo-admin-ca"),
        credential: certs_dir.join("demo-admin"),
        password: certs_dir.join("demo-admin.p12-password"),
    };
    if !Presence::of(&admin.ca.join("admin-ca.crt")).known()? {
        certs::run(&CertsCommand::AdminCa(AdminCaArgs { out: admin.ca.clone() }))?;
    }
    if !Presence::of(&certs::with_suffix(&admin.credential, "p12")).known()? {
        // A development credential: its password is kept beside it.
        let password = janus_core::pki::hex(&rand::random::<[u8; 12]>());
        write_atomic(&admin.password, format!("{password}\n").as_bytes(), 0o600)?;
        for suffix in ["crt", "key"] {
            let stale = certs::with_suffix(&admin.credential, suffix);
            if Presence::of(&stale).known()? {
                janus_core::durable::remove_durably(&stale)?;
            }
        }
        certs::run(&CertsCommand::Admin(AdminArgs {
            ca: admin.ca.clone(),
            name: "demo-admin".into(),
            scopes: janus_admin::api::Scope::ALL.to_vec(),
            out: admin.credential.clone(),
            days: 365,
            p12: true,
            p12_password_file: Some(admin.password.clone()),
        }))?;
    }
    Ok(admin)
}

/// The console's address and the commands that import the demo's
/// credential into a fresh Chromium or Firefox profile (NSS databases,
/// made when missing; `certutil` and `pk12util` are Debian's libnss3-tools).
pub fn console_instructions(admin: &DemoAdmin, root: &Path, port: u16) -> Result<String, MintError> {
    let absolute = |p: &Path| std::path::absolute(p).map_err(|e| janus_core::durable::with_path(e, p));
    let (root, p12, password) = (
        absolute(root)?,
        absolute(&certs::with_suffix(&admin.credential, "p12"))?,
        absolute(&admin.password)?,
    );
    let firefox = absolute(&admin.credential.with_file_name("firefox-profile"))?;
    let url = format!("https://localhost:{port}/console/");
    let import = |db: &str| {
        format!(
            "  certutil -A -d {db} -n 'janus DEVELOPMENT fleet' -t C,, -i {root}\n  pk12util -i {p12} -d {db} -w {password}",
            root = root.display(),
            p12 = p12.display(),
            password = password.display()
        )
    };
    Ok(format!(
        "The admin console: {url} (and the admin API), for the demo's admin credential
{p12} (every scope; its import password is in {password}).
In a fresh profile (certutil and pk12util: Debian's libnss3-tools):

Chromium on Linux (its certificate database, made when missing):
  mkdir -p \"$HOME/.pki/nssdb\"; [ -e \"$HOME/.pki/nssdb/cert9.db\" ] || certutil -N -d \"sql:$HOME/.pki/nssdb\" --empty-password
{chromium}
  chromium {url}

Firefox (a profile of its own for the demo):
  mkdir -p {firefox}; [ -e {firefox}/cert9.db ] || certutil -N -d sql:{firefox} --empty-password
{firefox_import}
  firefox --no-remote --profile {firefox} {url}

",
        p12 = p12.display(),
        password = password.display(),
        chromium = import("\"sql:$HOME/.pki/nssdb\""),
        firefox = firefox.display(),
        firefox_import = import(&format!("sql:{}", firefox.display())),
    ))
}

/// The demo's fleet, the endpoint's certificate and a node CA, each minted
/// only when missing (kept across runs).
fn mint_missing(fleet_dir: &Path, controller: &Path, node_ca: &Path) -> Result<(), MintError> {
    if !Presence::of(&fleet_dir.join("root.crt")).known()? {
        let fleet = certs::mint_fleet("Janus DEVELOPMENT fleet", 1)?;
        certs::write_fleet(fleet_dir, &fleet)?;
    }
    if !Presence::of(&certs::with_suffix(controller, "crt")).known()? {
        let issuing = certs::read_minted(&fleet_dir.join("issuing.crt"), &fleet_dir.join("issuing.key"))?;
        let sans = ["127.0.0.1".to_string(), "localhost".to_string()];
        certs::write_pair(controller, &certs::mint_controller(&issuing, 365, &sans)?, false)?;
    }
    if !Presence::of(&certs::with_suffix(node_ca, "crt")).known()? {
        certs::write_pair(node_ca, &certs::mint_node_ca("demo-node")?, false)?;
    }
    Ok(())
}

/// Replaces `state` with the example state.
pub fn lay_out_example_state(state: &Path) -> Result<(), MintError> {
    if Presence::of(state).known()? {
        std::fs::remove_dir_all(state).map_err(|e| janus_core::durable::with_path(e, state))?;
    }
    for sub in ["", "nodes", "approved"] {
        ensure_private_dir(&state.join(sub))?;
    }
    write_atomic(&state.join("tokens"), EXAMPLE_TOKENS.as_bytes(), 0o600)?;
    let record = state.join("nodes").join(format!("{EXAMPLE_NODE_ID}.json"));
    // Announced now: a fixed time in the past would age out, and maintenance
    // would forget the example a week after the binary was built.
    let mut example: janus_store::NodeRecord =
        serde_json::from_str(EXAMPLE_NODE).map_err(|e| MintError::Invalid(e.to_string()))?;
    example.announced_at = Some(janus_core::clock::now_rfc3339());
    let bytes = serde_json::to_vec_pretty(&example).map_err(|e| MintError::Invalid(e.to_string()))?;
    write_atomic(&record, &bytes, 0o600)?;
    Ok(())
}

struct Paths {
    root: PathBuf,
    state: PathBuf,
    announce: PathBuf,
    user_data: PathBuf,
    node_dir: PathBuf,
    port: String,
    secret: String,
    console: String,
}

fn instructions_for(p: &Paths) -> String {
    let curl = format!(
        "curl --cacert {root} --resolve controller.fleet.janus:{port}:127.0.0.1",
        root = p.root.display(),
        port = p.port
    );
    let url = format!("https://controller.fleet.janus:{}", p.port);
    let state = p.state.display();
    let token = EXAMPLE_TOKENS.split_whitespace().next().unwrap_or_default();
    format!(
        "\
################################################################################
#  DEVELOPMENT FLEET: its keys sit unprotected under certs/. Never provision   #
#  a real node with it; make your fleet's certificates with `certs` (docs).    #
################################################################################

The endpoint serves {url}/register (state: {state}).

Rehearse a node with the agent (it announces, then polls every 15 s until
approved). What it prints is the node's serial-console log: keep it, the
approval below checks the node's CA against it:
  cargo run --release -- agent --user-data {user_data} --dir {node_dir} | tee {node_dir}.log

Announce a node (its CA's console line: {console}):
  {curl} -sS {url}/register -H 'Content-Type: application/json' --data-binary @{announce}

Announce with the example token, admitted at once (it admits one node: a second announcement with it waits for approval):
  jq -c '. + {{registration_token: \"{token}\"}}' {announce} | {curl} -sS {url}/register --data-binary @-

List pending nodes, with the CA SHA-256 to compare with each node's console:
  cargo run --release -- nodes list --pending --state {state}

Approve the agent's node (by its name; or by ID, the id `nodes list` shows):
the tool checks its CA against the console log the agent wrote (or give the
console's fingerprint with --expect-ca-sha256 HEX):
  cargo run --release -- nodes approve demo-agent --console {node_dir}.log --state {state}

Poll as the node does (202 pending, 200 with the trust once approved; ID is
the id the announcement above answered with):
  {curl} -sS -o /dev/null -w '%{{http_code}}\\n' {url}/register/ID -H 'Authorization: Bearer {secret}'

The example node {EXAMPLE_NODE_ID} polls with: -H 'Authorization: Bearer {EXAMPLE_POLL_SECRET}'
",
        announce = p.announce.display(),
        user_data = p.user_data.display(),
        node_dir = p.node_dir.display(),
        console = p.console,
        secret = p.secret,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use janus_store::NodeRecord;

    #[test]
    fn the_example_record_is_exactly_what_serve_writes() {
        let record: NodeRecord = serde_json::from_str(EXAMPLE_NODE).unwrap();
        assert_eq!(record.id.as_str(), EXAMPLE_NODE_ID);
        assert_eq!(serde_json::to_string_pretty(&record).unwrap(), EXAMPLE_NODE);
        assert_eq!(record.poll_secret_sha256, janus_core::pki::sha256_hex(EXAMPLE_POLL_SECRET.as_bytes()));
        let ca = janus_core::pki::NodeCa::check(&record.ca_cert_pem).unwrap();
        assert_eq!(Some(ca.sha256), record.ca_sha256);
    }
}

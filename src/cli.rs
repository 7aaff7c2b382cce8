//! The command line: one subcommand per job, each flag also an environment
//! variable (`JANUS_REGISTRATION_*`) so a container is configured the same way.
//! Parsing only: each command's work lives in its own module, which takes a
//! plain config struct (`to_*` here, at the edge) and never imports this one.

// clap turns doc comments into help text: the types here are documented
// by their fields' help (`--help`), and a doc comment on a type would
// change what `--help` prints.
#![allow(missing_docs)]

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use janus_core::clock::parse_duration;

/// `HOST:PORT` (an IPv6 host in brackets); the error says which part is
/// wrong, with examples.
fn parse_listen(s: &str) -> Result<String, String> {
    const FORM: &str = "e.g. 0.0.0.0:8443 (every address), 127.0.0.1:8443 or [::]:8443";
    let Some((host, port)) = s.rsplit_once(':').filter(|(host, _)| !host.is_empty() && !host.ends_with(':'))
    else {
        return Err(format!("{s:?} is not HOST:PORT (no port); {FORM}"));
    };
    if host.contains(':') && !(host.starts_with('[') && host.ends_with(']')) {
        return Err(format!("{s:?} is not HOST:PORT (an IPv6 host goes in brackets); {FORM}"));
    }
    match port.parse::<u32>() {
        // 0: any free port (tests, and `demo` when asked).
        Ok(0..=65535) => Ok(s.to_string()),
        Ok(_) => Err(format!("{s:?}: port {port} is out of range (0-65535); {FORM}")),
        Err(_) => Err(format!("{s:?}: {port:?} is not a port number; {FORM}")),
    }
}

use crate::certs;
use janus_endpoint::LimitsConfig;
use janus_endpoint::OnAdmittedConfig;
use janus_endpoint::{
    DEFAULT_LISTEN, DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_CONNECTIONS_PER_NETWORK,
    DEFAULT_MAX_CONNECTIONS_PER_SOURCE, ServeConfig,
};
use janus_endpoint::{DEFAULT_QUEUE, PolicyConfig};

#[derive(Debug, Parser)]
#[command(
    name = "janus-registration",
    version,
    about = "The registration endpoint Janus nodes announce themselves to",
    after_help = "Admins act on a state directory (nodes, tokens), or remotely through the admin API and \
its browser console (serve --admin-listen ADDR --admin-ca FILE) with an admin credential: certs admin-ca, \
then certs admin --ca DIR --name NAME --scope read|approve|reject|tokens --out PREFIX [--p12] \
(docs/orchestrating.md, docs/operating.md)."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// Log lines as text, or as one JSON object each (for log shippers).
    #[arg(long, global = true, env = "JANUS_REGISTRATION_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text, help_heading = "Logging")]
    pub log_format: LogFormat,
    /// Log level (error, warn, info, debug, trace); RUST_LOG, when set, wins.
    #[arg(
        long,
        global = true,
        env = "JANUS_REGISTRATION_LOG_LEVEL",
        default_value = "info",
        help_heading = "Logging"
    )]
    pub log_level: String,
    /// How long to wait for the state's lock files (tokens.lock,
    /// decisions.lock) before giving up; a wait past 1 s is said, with the
    /// holder's pid when this host's /proc/locks names it.
    #[arg(
        long,
        global = true,
        env = "JANUS_REGISTRATION_LOCK_WAIT",
        default_value = "60s",
        value_parser = janus_core::clock::parse_duration,
        help_heading = "State"
    )]
    pub lock_wait: std::time::Duration,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the protocol-2 registration endpoint over HTTPS.
    #[command(
        after_help = "Example:\n  janus-registration serve --fleet fleet/ --cert controller.crt --key controller.key --state state/"
    )]
    Serve(Box<ServeArgs>),
    /// Mint a fleet, the endpoint's certificate, a node CA, or admin credentials (admin API and console).
    #[command(
        subcommand,
        after_help = "Example:\n  janus-registration certs fleet --out fleet/ --name 'Example fleet'\n  janus-registration certs controller --fleet fleet/ --out controller --san 10.0.2.2\n  janus-registration certs admin-ca --out admin-ca\n  janus-registration certs admin --ca admin-ca --name alice --scope read --scope approve --out alice --p12"
    )]
    Certs(certs::CertsCommand),
    /// Run the endpoint on a development fleet, minted once under certs/, with a fresh example state.
    #[command(after_help = "Example:\n  cargo run --release -- demo")]
    Demo(DemoArgs),
    /// Play a Janus node's self-registration, exactly as janusd does.
    #[command(
        after_help = "Examples:\n  janus-registration agent --user-data user-data.json --dir node/\n  janus-registration agent --dir node/ --once\n\nExit codes with --once: 0 admitted (or already registered), 2 pending, 1 failed, 3 protocol violation by the endpoint."
    )]
    Agent(Box<AgentArgs>),
    /// List, inspect, approve, reject and forget nodes in a state directory.
    #[command(
        after_help = "Examples:\n  janus-registration nodes list --pending --state /var/lib/janus-registration\n  janus-registration nodes show edge-3\n  janus-registration nodes approve edge-3 --console /var/log/libvirt/qemu/edge-3-serial.log\n\nA node is named by its id, a unique prefix of it (6 hex digits or more), or its unique name."
    )]
    Nodes(NodesArgs),
    /// Add, list and revoke registration tokens in a state directory.
    #[command(
        after_help = "Examples:\n  janus-registration tokens add --count 20 --expires-in 2h --description 'rack 3'\n  janus-registration tokens list\n  janus-registration tokens revoke 3f9a2c"
    )]
    Tokens(TokensArgs),
    /// Print a node's NoCloud user-data, as the specification's user-data.sh makes it.
    #[command(
        subcommand,
        after_help = "Examples:\n  janus-registration user-data fleet --fleet fleet/ --hostname edge-3\n  janus-registration user-data announce --fleet fleet/ --hostname edge-3 --address 10.0.2.2:8443 --new-token --state state/"
    )]
    UserData(crate::user_data::UserDataCommand),
    /// The audit trail: every writer's events merged in time order.
    #[command(
        after_help = "Examples:\n  janus-registration audit --since 1h --state /var/lib/janus-registration\n  janus-registration audit --follow --json"
    )]
    Audit(AuditArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    #[command(
        after_help = "Examples:\n  janus-registration completions bash > /etc/bash_completion.d/janus-registration\n  janus-registration completions zsh > \"${fpath[1]}/_janus-registration\"\n  janus-registration completions fish > ~/.config/fish/completions/janus-registration.fish"
    )]
    Completions(CompletionsArgs),
    /// Print the manual page (roff), or with --out write one page per command.
    #[command(
        after_help = "Examples:\n  janus-registration manpage > /usr/local/share/man/man1/janus-registration.1\n  janus-registration manpage --out /usr/local/share/man/man1   (janus-registration-nodes-approve.1, ...)"
    )]
    Manpage(ManpageArgs),
    /// Print the admin API's OpenAPI 3.1 document (as GET /v1/openapi.json serves it).
    #[command(after_help = "Example:\n  janus-registration openapi > janus-registration-admin-api.json")]
    Openapi,
    /// Ask a running endpoint's /healthz; exit 0 when healthy, 1 otherwise.
    #[command(after_help = "Example:\n  janus-registration healthcheck --addr 127.0.0.1:8443")]
    Healthcheck(HealthcheckArgs),
    /// Lay out a state directory (0700) without serving it: tokens can be minted before the first start.
    #[command(
        after_help = "Example:\n  janus-registration init --state /var/lib/janus-registration\n  janus-registration tokens add --state /var/lib/janus-registration"
    )]
    Init(InitArgs),
    /// Take a consistent copy of a state directory (served or not), the ledger and its key included.
    #[command(
        after_help = "Example:\n  janus-registration backup --state /var/lib/janus-registration --out /backups/state-$(date +%F).tar.gz"
    )]
    Backup(BackupArgs),
    /// Lay out a backup as a new state directory (missing or empty: never over one).
    #[command(
        after_help = "Example:\n  janus-registration restore --from /backups/state-2026-12-07.tar.gz --state /var/lib/janus-registration.new"
    )]
    Restore(RestoreArgs),
}

#[derive(Debug, Args)]
pub struct BackupArgs {
    /// The state directory to copy.
    #[arg(long, env = "JANUS_REGISTRATION_STATE")]
    pub state: std::path::PathBuf,
    /// The backup file to write (a gzip'd tar, 0600; replaced if there).
    #[arg(long)]
    pub out: std::path::PathBuf,
}

#[derive(Debug, Args)]
pub struct RestoreArgs {
    /// The backup file (`backup --out`).
    #[arg(long)]
    pub from: std::path::PathBuf,
    /// The new state directory: missing or empty.
    #[arg(long)]
    pub state: std::path::PathBuf,
}

#[derive(Debug, Args)]
pub struct InitArgs {
    /// The state directory to lay out (its parent must exist), as serve would.
    #[arg(long, env = "JANUS_REGISTRATION_STATE")]
    pub state: std::path::PathBuf,
}

#[derive(Debug, Args)]
pub struct ManpageArgs {
    /// Write one page per command and subcommand into this directory (man's section 1 names:
    /// janus-registration-nodes-approve.1), instead of the top-level page to stdout.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct AgentArgs {
    /// The node's directory: address, ca.crt, fleet-root.crt, token, enrollment.json, registered, pki/, fleet/.
    #[arg(long, default_value = "janus-node")]
    pub dir: PathBuf,
    /// A NoCloud user-data JSON that provisions the directory on first run.
    #[arg(long)]
    pub user_data: Option<PathBuf>,
    /// The node CA to announce (PREFIX.crt); minted and kept in DIR/pki/ when absent.
    #[arg(long)]
    pub node_ca: Option<PathBuf>,
    /// The hostname to announce (default: user-data network.hostname, else this machine's).
    #[arg(long)]
    pub name: Option<String>,
    /// The address to announce (default: the local address routing toward the endpoint, port 9505).
    #[arg(long)]
    pub advertise: Option<String>,
    /// Do one step and exit with a code that says pending, admitted or failed.
    #[arg(long)]
    pub once: bool,
    /// How often a pending node polls (janusd: 15 s).
    #[arg(long, value_parser = parse_duration, default_value = "15s")]
    pub poll_every: Duration,
    /// After a 404, announce again this long after the enrollment began (janusd: 1 h).
    #[arg(long, value_parser = parse_duration, default_value = "1h")]
    pub reannounce_after: Duration,
    /// The first wait after an error, doubled at each error (janusd: 5 s).
    #[arg(long, value_parser = parse_duration, default_value = "5s")]
    pub backoff_base: Duration,
    /// The longest wait after errors (janusd: 2 min).
    #[arg(long, value_parser = parse_duration, default_value = "120s")]
    pub backoff_cap: Duration,
    /// Stop with an error when the endpoint asks for protocol 1 (409, or a 400 naming service_cert_pem).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub fail_on_fallback: bool,
}

#[derive(Debug, Args)]
pub struct NodesArgs {
    /// The state directory.
    #[arg(long, env = "JANUS_REGISTRATION_STATE", global = true)]
    pub state: Option<PathBuf>,
    /// The admin this command acts for, as the audit trail names them (default: the user running it).
    #[arg(long = "as", value_name = "NAME", env = "JANUS_REGISTRATION_ADMIN", global = true)]
    pub acting_for: Option<String>,
    #[command(flatten)]
    pub remote: RemoteArgs,
    #[command(subcommand)]
    pub command: crate::admin_args::NodesCommand,
}

#[derive(Debug, Args)]
pub struct TokensArgs {
    /// The state directory.
    #[arg(long, env = "JANUS_REGISTRATION_STATE", global = true)]
    pub state: Option<PathBuf>,
    /// The admin this command acts for, as the audit trail names them (default: the user running it).
    #[arg(long = "as", value_name = "NAME", env = "JANUS_REGISTRATION_ADMIN", global = true)]
    pub acting_for: Option<String>,
    #[command(flatten)]
    pub remote: RemoteArgs,
    #[command(subcommand)]
    pub command: crate::admin_args::TokensCommand,
}

/// The admin API to go through instead of the state directory.
#[derive(Debug, Args)]
pub struct RemoteArgs {
    /// Use the admin API at this address (https://HOST:PORT) instead of --state; answers are JSON.
    #[arg(long, env = "JANUS_REGISTRATION_SERVER", global = true, requires_all = ["client_cert", "client_key", "server_ca"])]
    pub server: Option<String>,
    /// The admin credential's certificate (`certs admin`), with --server.
    #[arg(long, env = "JANUS_REGISTRATION_CLIENT_CERT", global = true)]
    pub client_cert: Option<PathBuf>,
    /// Its private key.
    #[arg(long, env = "JANUS_REGISTRATION_CLIENT_KEY", global = true)]
    pub client_key: Option<PathBuf>,
    /// The CA the server's certificate must chain to (the fleet's root.crt), checked as controller.fleet.janus.
    #[arg(long, env = "JANUS_REGISTRATION_SERVER_CA", global = true)]
    pub server_ca: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct AuditArgs {
    /// The state directory.
    #[arg(long, env = "JANUS_REGISTRATION_STATE")]
    pub state: Option<PathBuf>,
    /// Only events from this long ago on (e.g. 30m, 2h, 7d).
    #[arg(long, value_parser = parse_duration)]
    pub since: Option<Duration>,
    /// Keep printing events as they are written (every writer's), until interrupted.
    #[arg(long)]
    pub follow: bool,
    /// One JSON object per event and line.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Where certs/ and demo-state/ go.
    #[arg(long, default_value = ".")]
    pub dir: PathBuf,
    /// Address and port to listen on.
    #[arg(long, default_value = "127.0.0.1:8443", value_parser = parse_listen)]
    pub listen: String,
    /// Address and port of the admin console (and the admin API), for the
    /// demo's admin credential.
    #[arg(long, default_value = "127.0.0.1:8444")]
    pub admin_listen: std::net::SocketAddr,
}

#[derive(Debug, Args)]
pub struct HealthcheckArgs {
    /// The endpoint's address (host:port).
    #[arg(long, env = "JANUS_REGISTRATION_HEALTHCHECK_ADDR", default_value = "127.0.0.1:8443", value_parser = parse_listen)]
    pub addr: String,
    /// Liveness only: exit 0 on any HTTP answer, also 503 (for a liveness probe; readiness
    /// and HEALTHCHECK use the full check).
    #[arg(long)]
    pub live: bool,
    /// Ask the plain-HTTP metrics listener (`--metrics-listen`, e.g. 127.0.0.1:9090) instead of
    /// the TLS port: a probe that a flood of the TLS port cannot fail.
    #[arg(long)]
    pub plain: bool,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address and port to listen on.
    #[arg(long, env = "JANUS_REGISTRATION_LISTEN", default_value = DEFAULT_LISTEN, value_parser = parse_listen)]
    pub listen: String,
    /// The fleet directory: root.crt and bundle.json.
    #[arg(long, env = "JANUS_REGISTRATION_FLEET")]
    pub fleet: PathBuf,
    /// This endpoint's certificate chain (PEM: leaf, then the issuing CA).
    #[arg(long, env = "JANUS_REGISTRATION_CERT")]
    pub cert: PathBuf,
    /// This endpoint's private key (PEM).
    #[arg(long, env = "JANUS_REGISTRATION_KEY")]
    pub key: PathBuf,
    /// The state directory: tokens, nodes/, approved/.
    #[arg(long, env = "JANUS_REGISTRATION_STATE")]
    pub state: PathBuf,
    /// Connections open at once; more are closed at accept.
    #[arg(long, env = "JANUS_REGISTRATION_MAX_CONNECTIONS", default_value_t = DEFAULT_MAX_CONNECTIONS)]
    pub max_connections: usize,
    /// Connections one source (an IPv4 address, an IPv6 /64) may hold open; more are closed at
    /// accept, so one address cannot starve the others. Behind a NAT all nodes share one
    /// source: raise it there (0: no per-source cap).
    #[arg(long, env = "JANUS_REGISTRATION_MAX_CONNECTIONS_PER_SOURCE", default_value_t = DEFAULT_MAX_CONNECTIONS_PER_SOURCE)]
    pub max_connections_per_source: usize,
    /// Connections one network (an IPv4 /24, an IPv6 /48) may hold open, so one attacker's many
    /// addresses count together. A site whose nodes sit behind several NAT addresses of one
    /// /24 shares it: raise it there (0: no per-network cap).
    #[arg(long, env = "JANUS_REGISTRATION_MAX_CONNECTIONS_PER_NETWORK", default_value_t = DEFAULT_MAX_CONNECTIONS_PER_NETWORK)]
    pub max_connections_per_network: usize,
    /// How long in-flight requests get to finish after SIGTERM (10s; bare seconds still read).
    #[arg(long, env = "JANUS_REGISTRATION_SHUTDOWN_GRACE", value_parser = parse_duration, default_value = "10s")]
    pub shutdown_grace: Duration,
    /// Announcements one source address may make at once...
    #[arg(long, env = "JANUS_REGISTRATION_RATE_BURST", default_value_t = 10)]
    pub rate_burst: u32,
    /// ...then one per this interval (429 with Retry-After beyond).
    #[arg(long, env = "JANUS_REGISTRATION_RATE_EVERY", value_parser = parse_duration, default_value = "6s")]
    pub rate_every: Duration,
    /// Pending records beyond which announcements that do not admit get 503 (a token that admits still does).
    #[arg(long, env = "JANUS_REGISTRATION_MAX_PENDING", default_value_t = 5000)]
    pub max_pending: usize,
    /// Pending records older than this are forgotten (the node announces again after its next 404).
    #[arg(long, env = "JANUS_REGISTRATION_PENDING_MAX_AGE", value_parser = parse_duration, default_value = "7d")]
    pub pending_max_age: Duration,
    /// A program that decides on every announcement that did not admit: the record as JSON on stdin;
    /// exit 0 admits, 1 leaves pending.
    #[arg(long, env = "JANUS_REGISTRATION_ADMISSION_COMMAND")]
    pub admission_command: Option<PathBuf>,
    /// How long the admission command may run.
    #[arg(long, env = "JANUS_REGISTRATION_ADMISSION_TIMEOUT", value_parser = parse_duration, default_value = "10s")]
    pub admission_timeout: Duration,
    /// How many admission commands may run at once.
    #[arg(long, env = "JANUS_REGISTRATION_ADMISSION_CONCURRENCY", default_value_t = 4)]
    pub admission_concurrency: usize,
    /// Announcements waiting for the admission command, at most; past it a node stays pending
    /// for an admin (counted in metrics, logged once a minute).
    #[arg(long, env = "JANUS_REGISTRATION_ADMISSION_QUEUE", default_value_t = DEFAULT_QUEUE)]
    pub admission_queue: usize,
    /// A program run once after each admission (a token, the admission command, an admin's approval,
    /// on any replica): the `admitted` event with the node, as `nodes watch` prints it, on stdin.
    /// Its failure is logged; it never undoes the admission.
    #[arg(long, env = "JANUS_REGISTRATION_ON_ADMITTED")]
    pub on_admitted: Option<PathBuf>,
    /// How long the --on-admitted program may run.
    #[arg(long, env = "JANUS_REGISTRATION_ON_ADMITTED_TIMEOUT", value_parser = parse_duration, default_value = "10s")]
    pub on_admitted_timeout: Duration,
    /// How often the fleet and certificate files are checked for changes.
    #[arg(long, env = "JANUS_REGISTRATION_RELOAD_EVERY", value_parser = parse_duration, default_value = "5s")]
    pub reload_every: Duration,
    /// How often pending records are counted and expired records and tokens dropped.
    #[arg(long, env = "JANUS_REGISTRATION_MAINTENANCE_EVERY", value_parser = parse_duration, default_value = "60s")]
    pub maintenance_every: Duration,
    /// How often maintenance lists the record directories even when their times say nothing
    /// changed: on a network filesystem another host's changes may not move them at once.
    #[arg(long, env = "JANUS_REGISTRATION_RECONCILE_EVERY", value_parser = parse_duration, default_value = "5m")]
    pub reconcile_every: Duration,
    /// Keep connections open between requests (closed after 5 s idle), for orchestrator clients;
    /// by default every answer closes its connection, as nodes never reuse one.
    #[arg(long, env = "JANUS_REGISTRATION_KEEP_ALIVE")]
    pub keep_alive: bool,
    /// How long after a token admission the same node CA presenting the spent token again is
    /// answered `admitted` with its first id (its answer was lost); after it, the token is spent.
    #[arg(long, env = "JANUS_REGISTRATION_READMIT_WINDOW", value_parser = parse_duration, default_value = "10m")]
    pub readmit_window: Duration,
    /// Serve the admin API (HTTPS, client certificates from --admin-ca only) here, e.g. 0.0.0.0:9443;
    /// off when absent. See docs/orchestrating.md.
    #[arg(long, env = "JANUS_REGISTRATION_ADMIN_LISTEN", requires = "admin_ca")]
    pub admin_listen: Option<std::net::SocketAddr>,
    /// The admin CA's certificate (`certs admin-ca`): the admin API admits the credentials it signed.
    #[arg(long, env = "JANUS_REGISTRATION_ADMIN_CA", requires = "admin_listen")]
    pub admin_ca: Option<PathBuf>,
    /// L4 load balancers (addresses or networks, comma-separated) whose connections start with a
    /// PROXY protocol header (v1 or v2) naming the node's address; a listed peer must send one.
    #[arg(long, env = "JANUS_REGISTRATION_PROXY_PROTOCOL", value_name = "CIDR,...", value_delimiter = ',')]
    pub proxy_protocol: Vec<janus_listen::proxy::Trusted>,
    /// Serve Prometheus metrics over plain HTTP here (e.g. 127.0.0.1:9090); off when absent.
    #[arg(long, env = "JANUS_REGISTRATION_METRICS_LISTEN")]
    pub metrics_listen: Option<std::net::SocketAddr>,
}

/// A `serve` setting that cannot work, and its bound.
#[derive(Debug, thiserror::Error)]
#[error("refusing to serve: {0}")]
pub struct ConfigError(String);

impl ServeArgs {
    /// The admin listener, when `--admin-listen` and `--admin-ca` ask for it.
    pub fn admin(&self) -> Option<janus_admin::listener::AdminApiConfig> {
        let (listen, ca) = self.admin_listen.zip(self.admin_ca.clone())?;
        Some(janus_admin::listener::AdminApiConfig { listen, ca })
    }

    /// The settings, validated in a second phase (as ripgrep does its
    /// arguments): a value that cannot work is refused, naming its bound,
    /// never silently raised to one.
    pub fn config(&self) -> Result<ServeConfig, ConfigError> {
        let at_least_one = [
            ("--max-connections", self.max_connections),
            ("--rate-burst", self.rate_burst as usize),
            ("--admission-concurrency", self.admission_concurrency),
            ("--admission-queue", self.admission_queue),
        ];
        if let Some((flag, _)) = at_least_one.iter().find(|(_, value)| *value == 0) {
            return Err(ConfigError(format!("{flag} must be at least 1")));
        }
        let quickest = Duration::from_millis(100);
        for (flag, every) in
            [("--reload-every", self.reload_every), ("--maintenance-every", self.maintenance_every)]
        {
            if every < quickest {
                return Err(ConfigError(format!("{flag} must be at least 100ms (it is {every:?})")));
            }
        }
        Ok(ServeConfig {
            max_connections: self.max_connections,
            max_connections_per_source: self.max_connections_per_source,
            max_connections_per_network: self.max_connections_per_network,
            shutdown_grace: self.shutdown_grace,
            limits: LimitsConfig {
                burst: self.rate_burst,
                refill_every: self.rate_every,
                max_pending: self.max_pending,
                pending_max_age: self.pending_max_age,
            },
            admission: self.admission_command.clone().map(|command| PolicyConfig {
                command,
                timeout: self.admission_timeout,
                concurrency: self.admission_concurrency,
                queue: self.admission_queue,
            }),
            on_admitted: self
                .on_admitted
                .clone()
                .map(|command| OnAdmittedConfig { command, timeout: self.on_admitted_timeout }),
            reload_every: self.reload_every,
            maintenance_every: self.maintenance_every,
            reconcile_every: self.reconcile_every,
            metrics_listen: self.metrics_listen,
            proxy_protocol: self.proxy_protocol.clone(),
            keep_alive: self.keep_alive,
            readmit_window: self.readmit_window,
            ..ServeConfig::new(self.fleet.clone(), self.cert.clone(), self.key.clone(), self.state.clone())
        })
    }
}

impl AgentArgs {
    /// The command as [`janus_agent`] takes it.
    pub fn to_agent(&self) -> janus_agent::AgentCommand {
        janus_agent::AgentCommand {
            dir: self.dir.clone(),
            user_data: self.user_data.clone(),
            node_ca: self.node_ca.clone(),
            name: self.name.clone(),
            advertise: self.advertise.clone(),
            once: self.once,
            timings: janus_agent::Timings {
                poll_every: self.poll_every,
                reannounce_after: self.reannounce_after,
                backoff_base: self.backoff_base,
                backoff_cap: self.backoff_cap,
            },
            fail_on_fallback: self.fail_on_fallback,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listen_address_says_which_part_is_wrong() {
        for good in ["127.0.0.1:8443", "[::]:8443", "controller.example:1", "127.0.0.1:0"] {
            assert_eq!(parse_listen(good).as_deref(), Ok(good));
        }
        let form = "e.g. 0.0.0.0:8443 (every address), 127.0.0.1:8443 or [::]:8443";
        for (bad, said) in [
            ("127.0.0.1:99999", "\"127.0.0.1:99999\": port 99999 is out of range (0-65535)"),
            ("127.0.0.1", "\"127.0.0.1\" is not HOST:PORT (no port)"),
            ("127.0.0.1:https", "\"127.0.0.1:https\": \"https\" is not a port number"),
            ("::1", "\"::1\" is not HOST:PORT (no port)"),
            ("fe80::1:8443", "\"fe80::1:8443\" is not HOST:PORT (an IPv6 host goes in brackets)"),
        ] {
            assert_eq!(parse_listen(bad), Err(format!("{said}; {form}")), "{bad}");
        }
    }

    #[test]
    fn the_cli_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}

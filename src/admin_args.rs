//! What an admin asks `nodes` and `tokens` for, as the command line parses
//! it (clap derive), and each turned into the admin model's request
//! ([`janus_admin::model`]): the command line is one of its three surfaces.

// clap turns doc comments into help text: the types here are documented
// by their fields' help (`--help`), and a doc comment on a type would
// change what `--help` prints.
#![allow(missing_docs)]

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand};

use janus_admin::{
    Actor, AdminError, Approve, ApproveCa, Check, Code, Field, Fingerprint, Mint, NewTokens, NodeFilter,
    Revoke, Surface,
};
use janus_core::clock::parse_duration;

#[derive(Debug, Subcommand)]
pub enum NodesCommand {
    /// A table of nodes (every record streamed; filtered ones grouped by CA).
    #[command(
        after_help = "Example:\n  janus-registration nodes list --state /var/lib/janus-registration --pending"
    )]
    List(ListArgs),
    /// A node's record, its CA's subject and validity, and the console line its CA gives.
    #[command(after_help = "Example:\n  janus-registration nodes show 8f14e45fceea167a5a36dedd4bea2543")]
    Show(ShowArgs),
    /// Admit a node (after checking its CA against its console).
    #[command(
        after_help = "Examples:\n  janus-registration nodes approve ID --console /var/log/libvirt/qemu/edge-3-serial.log\n  janus-registration nodes approve ID --expect-ca-sha256 2bcdf132...\n  janus-registration nodes approve --ca-sha256 2bcdf132...   (every pending record of that CA)"
    )]
    Approve(ApproveArgs),
    /// Refuse a node: its polls get 404 from now on; the record stays for the audit trail.
    #[command(after_help = "Example:\n  janus-registration nodes reject ID")]
    Reject(IdArg),
    /// Remove a node's record and markers.
    #[command(after_help = "Example:\n  janus-registration nodes forget ID")]
    Forget(IdArg),
    /// A node's events from the audit trail.
    #[command(after_help = "Example:\n  janus-registration nodes history edge-3")]
    History(ShowArgs),
    /// Admissions, rejections and forgets as they happen: one JSON line each, with the node.
    #[command(
        after_help = "Examples:\n  janus-registration nodes watch --state /var/lib/janus-registration\n  janus-registration nodes watch --since 1h --once"
    )]
    Watch(WatchArgs),
}

impl NodesCommand {
    /// Whether its output (and so its refusal) is asked for as JSON.
    pub fn asks_json(&self) -> bool {
        match self {
            NodesCommand::List(args) => args.json,
            NodesCommand::Show(args) | NodesCommand::History(args) => args.json,
            NodesCommand::Watch(_) => true,
            NodesCommand::Approve(_) | NodesCommand::Reject(_) | NodesCommand::Forget(_) => false,
        }
    }
}

#[derive(Debug, Args)]
pub struct WatchArgs {
    /// Start with the events of this long ago (default: only new ones), e.g. 10m, 2h.
    #[arg(long, value_parser = parse_duration)]
    pub since: Option<Duration>,
    /// Print what is there and stop instead of following.
    #[arg(long)]
    pub once: bool,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// Only nodes waiting for approval (reads just those records).
    #[arg(long)]
    pub pending: bool,
    /// Only admitted nodes (by a token, a command, the admission command or an approval file).
    #[arg(long)]
    pub admitted: bool,
    /// Only rejected nodes (by a command, or because their CA was rejected).
    #[arg(long)]
    pub rejected: bool,
    /// One JSON object per node and line: id, name, address, peer_address, ca_sha256, state, announced_at, admitted_by, admitted_at, ca_cert_pem, token_sha256_prefix, token_labels.
    #[arg(long)]
    pub json: bool,
    /// Only nodes admitted at or after WHEN: a duration ago (15m, 2h, 1d) or an RFC 3339 time.
    #[arg(long, value_name = "WHEN", value_parser = janus_core::clock::parse_since)]
    pub admitted_since: Option<i64>,
    /// Only nodes admitted (or presented) with a token carrying this label, KEY=VALUE (repeatable: all of them).
    #[arg(long = "label", value_name = "KEY=VALUE", value_parser = parse_label)]
    pub labels: Vec<(String, String)>,
    /// The order: newest announcement first (as the console lists them), oldest first, or the directory's
    /// own order (each line printed as its record is read: for a state of a million records).
    #[arg(long, value_enum, default_value_t = ListOrder::Newest)]
    pub sort: ListOrder,
}

/// `nodes list --sort`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ListOrder {
    /// Newest announcement first; records that say no time last.
    Newest,
    /// Oldest announcement first.
    Oldest,
    /// As the directory lists them, each printed as it is read.
    Directory,
}

impl ListArgs {
    /// The filter these arguments ask for.
    pub fn filter(&self) -> NodeFilter {
        NodeFilter {
            pending: self.pending,
            admitted: self.admitted,
            rejected: self.rejected,
            admitted_since: self.admitted_since,
            labels: self.labels.clone(),
        }
    }
}

#[derive(Debug, Args)]
pub struct IdArg {
    /// The node: its id, a unique prefix of it (6+ hex digits), or its unique name.
    pub id: String,
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The node: its id, a unique prefix of it (6+ hex digits), or its unique name.
    pub id: String,
    /// JSON for machines (show: one object; history: one event per line).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ApproveArgs {
    /// The node: its id, a unique prefix of it (6+ hex digits), or its unique pending name.
    #[arg(required_unless_present = "ca_sha256")]
    pub id: Option<String>,
    /// Refuse unless the node's CA has this SHA-256.
    #[arg(long, conflicts_with_all = ["console", "ca_sha256", "unchecked"])]
    pub expect_ca_sha256: Option<String>,
    /// Approve without checking the node's CA against its console: anyone who reaches the
    /// endpoint can announce, so this trusts whoever announced under that name.
    #[arg(long, conflicts_with_all = ["console", "ca_sha256"])]
    pub unchecked: bool,
    /// Refuse unless the last `pki: this node's CA: SHA-256 <hex>` line of this serial-console log matches.
    #[arg(long, conflicts_with = "ca_sha256")]
    pub console: Option<PathBuf>,
    /// Approve every pending node with this CA SHA-256 (one node's re-announcements).
    #[arg(long, conflicts_with = "id")]
    pub ca_sha256: Option<String>,
    /// Approve even a node whose CA an admin rejected (`nodes reject`).
    #[arg(long)]
    pub force: bool,
}

/// What `nodes approve` asks for: one node, or every pending node of a CA.
#[derive(Debug)]
pub enum Approval {
    /// One node, checked as asked.
    One(Approve),
    /// Every pending node of one CA.
    OfCa(ApproveCa),
}

impl ApproveArgs {
    /// The request these arguments make, or why they make none.
    pub fn request(&self) -> Result<Approval, AdminError> {
        if let Some(hex) = &self.ca_sha256 {
            let ca = Fingerprint::parse(hex, Field::CaFingerprint)?;
            return Ok(Approval::OfCa(ApproveCa { ca, force: self.force }));
        }
        let Some(node) = self.id.clone() else {
            return Err(AdminError::new(
                Code::InvalidRequest,
                "name the node to approve, or give --ca-sha256",
            ));
        };
        let check = match (&self.expect_ca_sha256, &self.console) {
            (Some(hex), _) => Check::Expected(Fingerprint::parse(hex, Field::ExpectedFingerprint)?),
            (None, Some(log)) => Check::ConsoleLog(log.clone()),
            (None, None) if self.unchecked => Check::Unchecked,
            (None, None) => {
                return Err(AdminError::new(
                    Code::CheckRequired,
                    format!(
                        "approving {node} needs a check of its CA against the node's console: --console LOG, or \
                         --expect-ca-sha256 HEX (the line `{}<hex>` on its console), or --unchecked to trust \
                         whoever announced under that name",
                        janus_admin::CONSOLE_MARKER
                    ),
                ));
            }
        };
        Ok(Approval::One(Approve { node, check, force: self.force }))
    }
}

#[derive(Debug, Subcommand)]
pub enum TokensCommand {
    /// Make tokens (128 bits from the OS CSPRNG) and print them, once.
    #[command(after_help = "Example:\n  janus-registration tokens add --count 20 --expires-in 2h")]
    Add(TokensAddArgs),
    /// The tokens, redacted, with expiry and uses left.
    #[command(after_help = "Example:\n  janus-registration tokens list")]
    List(TokensListArgs),
    /// Remove a token, given whole, by a prefix only it has, or by its SHA-256 prefix (as listed).
    #[command(after_help = "Example:\n  janus-registration tokens revoke 3f9a2c")]
    Revoke(RevokeArgs),
}

#[derive(Debug, Args)]
pub struct TokensAddArgs {
    /// How many tokens to make.
    #[arg(long, default_value_t = 1)]
    pub count: usize,
    /// What the tokens are for (shown by `tokens list`, e.g. 'rack 3').
    #[arg(long)]
    pub description: Option<String>,
    /// The tokens stop admitting after this (e.g. 2h, 7d).
    #[arg(long, value_parser = parse_duration)]
    pub expires_in: Option<Duration>,
    /// How many nodes each token admits (default 1).
    #[arg(long)]
    pub uses: Option<u32>,
    /// Register this token instead of making one (an orchestrator's own:
    /// 16 to 512 printable ASCII characters, not starting with '#'). On the
    /// command line other local users can read it (/proc/PID/cmdline):
    /// prefer --token-file.
    #[arg(long, conflicts_with = "count")]
    pub token: Option<String>,
    /// Register the token this file holds (its one line; `-`: standard
    /// input), kept off the command line.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["count", "token"])]
    pub token_file: Option<std::path::PathBuf>,
    /// One JSON object per token and line: the token, its SHA-256 (and the
    /// prefix the audit trail names), expiry, uses, description and labels.
    #[arg(long)]
    pub json: bool,
    /// A label, KEY=VALUE (repeatable, at most 16): copied into the record
    /// of every node the token admits, and shown by `nodes list`.
    #[arg(long = "label", value_name = "KEY=VALUE", value_parser = parse_label)]
    pub labels: Vec<(String, String)>,
}

impl TokensAddArgs {
    /// The request these arguments make (`--token-file` read already), or why they make none.
    pub fn request(&self) -> Result<NewTokens, AdminError> {
        let request = NewTokens {
            mint: match &self.token {
                Some(token) => Mint::Given(token.clone()),
                None => Mint::Count(self.count),
            },
            uses: self.uses,
            expires_in: self.expires_in,
            description: self.description.clone(),
            labels: NewTokens::labels_from(self.labels.clone())?,
        };
        request.check()?;
        Ok(request)
    }
}

impl RevokeArgs {
    /// The request these arguments make.
    pub fn request(&self) -> Revoke {
        Revoke { key: self.token.clone() }
    }
}

/// Who a command acts as: `--as NAME` (an admin's name: 1 to 64 letters,
/// digits, '.', '_', '-' or '@'), else the user running it.
pub fn actor_here(acting_for: Option<&str>) -> Result<Actor, AdminError> {
    match acting_for {
        Some(name) if janus_store::is_admin_name(name) => Ok(Actor::new(Surface::Command, name)),
        Some(_) => Err(AdminError::new(
            Code::InvalidRequest,
            "--as must be 1 to 64 letters, digits, '.', '_', '-' or '@' (an admin's name)",
        )),
        None => Ok(Actor::new(Surface::Command, janus_store::current_user())),
    }
}

/// `KEY=VALUE`, split at the first `=`; the bounds are checked with the rest.
pub fn parse_label(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) => Ok((key.to_string(), value.to_string())),
        None => Err("a label is KEY=VALUE".into()),
    }
}

#[derive(Debug, Args)]
pub struct TokensListArgs {
    /// One JSON object per token and line (times in RFC 3339).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct RevokeArgs {
    /// The SHA-256 prefix `tokens list` shows, a prefix of the token that no
    /// other token has, or the token; `-` reads it from standard input (a
    /// token on the command line can be read by other local users).
    pub token: String,
}

/// A secret given on the command line or in a file: the file's one line
/// (`-`: standard input), its line ending dropped.
pub fn read_secret(path: &std::path::Path) -> Result<String, AdminError> {
    use std::io::Read;
    let mut text = String::new();
    let read = if path == std::path::Path::new("-") {
        std::io::stdin().lock().take(64 * 1024).read_to_string(&mut text).map(|_| ())
    } else {
        std::fs::File::open(path).and_then(|f| f.take(64 * 1024).read_to_string(&mut text)).map(|_| ())
    };
    read.map_err(|cause| AdminError::new(Code::FileUnreadable, format!("{}: {cause}", path.display())))?;
    let line = text.strip_suffix('\n').unwrap_or(&text);
    let line = line.strip_suffix('\r').unwrap_or(line);
    if line.contains('\n') {
        return Err(AdminError::new(
            Code::InvalidRequest,
            format!("{}: holds more than one line", path.display()),
        ));
    }
    Ok(line.to_string())
}

/// Warns that a secret was given on the command line.
pub fn warn_secret_on_argv(flag: &str) {
    eprintln!(
        "janus-registration: warning: {flag} puts the token on the command line, where other local users \
         can read it (/proc/PID/cmdline); prefer --token-file FILE (or - for standard input)"
    );
}

impl TokensCommand {
    /// Whether its output (and so its refusal) is asked for as JSON.
    pub fn asks_json(&self) -> bool {
        match self {
            TokensCommand::Add(args) => args.json,
            TokensCommand::List(args) => args.json,
            TokensCommand::Revoke(_) => false,
        }
    }

    /// Takes the token of `--token-file` (or `revoke -`) in, off the
    /// command line; warns of one given on it.
    pub fn read_secrets(&mut self) -> Result<(), AdminError> {
        match self {
            TokensCommand::Add(args) => {
                if let Some(path) = args.token_file.take() {
                    args.token = Some(read_secret(&path)?);
                } else if args.token.is_some() {
                    warn_secret_on_argv("--token");
                }
            }
            TokensCommand::Revoke(args) if args.token == "-" => {
                args.token = read_secret(std::path::Path::new("-"))?;
            }
            _ => {}
        }
        Ok(())
    }
}

//! `user-data`: the NoCloud user-data an orchestrator puts in a node's
//! cidata volume, made as the specification's `user-data.sh` makes it (its
//! `jq -n` output: the same keys in the same order, two-space indentation,
//! a final newline), so a program never re-implements it.
//!
//! Invariants: every argument is checked before a file is read or a token
//! minted; a token minted by `--new-token` is registered (durably, audited,
//! as `tokens add` does) before the user-data that carries it is printed.

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use serde::Serialize;

use crate::admin_args::{read_secret, warn_secret_on_argv};
use janus_admin::{AdminError, Code};

type Result<T> = std::result::Result<T, AdminError>;

fn usage(said: String) -> AdminError {
    AdminError::new(Code::InvalidRequest, said)
}

/// `user-data fleet` or `user-data announce`.
#[derive(Debug, Subcommand)]
pub enum UserDataCommand {
    /// The node trusts the fleet from its first boot (`user-data.sh fleet`).
    #[command(after_help = "Example:\n  janus-registration user-data fleet --fleet fleet/ --hostname edge-3")]
    Fleet(FleetArgs),
    /// The node announces itself to this endpoint (`user-data.sh announce`).
    #[command(
        after_help = "Examples:\n  janus-registration user-data announce --fleet fleet/ --hostname edge-3 --address 10.0.2.2:8443 --token \"$T\"\n  janus-registration user-data announce --fleet fleet/ --hostname edge-3 --address 10.0.2.2:8443 --new-token --state state/ --description vm-3"
    )]
    Announce(AnnounceArgs),
}

/// `user-data fleet`'s arguments.
#[derive(Debug, Args)]
pub struct FleetArgs {
    /// The fleet directory (`certs fleet --out`): root.crt and bundle.json are read.
    #[arg(long)]
    pub fleet: PathBuf,
    /// The node's hostname (`network.hostname`).
    #[arg(long)]
    pub hostname: String,
}

/// `user-data announce`'s arguments.
#[derive(Debug, Args)]
pub struct AnnounceArgs {
    /// The fleet directory (`certs fleet --out`): root.crt is read.
    #[arg(long)]
    pub fleet: PathBuf,
    /// The node's hostname (`network.hostname`).
    #[arg(long)]
    pub hostname: String,
    /// This endpoint's address as the node dials it, HOST:PORT (`controller_address`).
    #[arg(long)]
    pub address: String,
    /// The registration token the node presents (none: it waits for an
    /// approval). On the command line other local users can read it:
    /// prefer --token-file.
    #[arg(long, conflicts_with = "new_token")]
    pub token: Option<String>,
    /// The token this file holds (its one line; `-`: standard input), kept
    /// off the command line.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["new_token", "token"])]
    pub token_file: Option<PathBuf>,
    /// Mint a one-time token in --state (as `tokens add`) and put it in the user-data.
    #[arg(long, requires = "state")]
    pub new_token: bool,
    /// The state directory, for --new-token.
    #[arg(long, env = "JANUS_REGISTRATION_STATE")]
    pub state: Option<PathBuf>,
    /// What the minted token is for (`tokens add --description`), e.g. the VM's name.
    #[arg(long, requires = "new_token")]
    pub description: Option<String>,
    /// The minted token stops admitting after this (e.g. 2h).
    #[arg(long, requires = "new_token", value_parser = janus_core::clock::parse_duration)]
    pub expires_in: Option<std::time::Duration>,
    /// A label of the minted token, KEY=VALUE (repeatable), e.g. vm=web-3.
    #[arg(long = "label", value_name = "KEY=VALUE", requires = "new_token", value_parser = crate::admin_args::parse_label)]
    pub labels: Vec<(String, String)>,
}

#[derive(Serialize)]
struct Network<'a> {
    hostname: &'a str,
}

/// `user-data.sh fleet`'s object, its keys in its order.
#[derive(Serialize)]
struct Fleet<'a> {
    fleet_root_cert: &'a str,
    fleet_bundle: serde_json::Value,
    network: Network<'a>,
}

/// `user-data.sh announce`'s object, its keys in its order.
#[derive(Serialize)]
struct Announce<'a> {
    controller_address: &'a str,
    controller_ca_cert: &'a str,
    controller_fleet_root_cert: &'a str,
    registration_token: &'a str,
    network: Network<'a>,
}

/// Runs a `user-data` subcommand; `Ok` is the user-data, to print.
pub fn user_data(command: &UserDataCommand) -> Result<String> {
    match command {
        UserDataCommand::Fleet(args) => {
            check_hostname(&args.hostname)?;
            let root = read(&args.fleet.join("root.crt"))?;
            let bundle_path = args.fleet.join("bundle.json");
            let bundle = serde_json::from_str(&read(&bundle_path)?).map_err(|e| {
                usage(format!("{}: not JSON ({e}): is --fleet a fleet directory?", bundle_path.display()))
            })?;
            pretty(&Fleet {
                fleet_root_cert: &root,
                fleet_bundle: bundle,
                network: Network { hostname: &args.hostname },
            })
        }
        UserDataCommand::Announce(args) => {
            check_hostname(&args.hostname)?;
            janus_core::protocol::check_address(&args.address)
                .map_err(|why| usage(format!("--address {}", why.0.trim_start_matches("address "))))?;
            // What a node can present; the empty token is no token.
            let unpresentable = |t: &str| !t.is_empty() && !janus_core::protocol::is_presentable_token(t);
            if args.token.as_deref().is_some_and(unpresentable) {
                return Err(usage(format!("--token {}", janus_core::protocol::unpresentable_token_reason())));
            }
            let root = read(&args.fleet.join("root.crt"))?;
            let token = match (&args.token, args.new_token, &args.state) {
                (_, true, Some(state)) => mint(state, args)?,
                (Some(token), _, _) => {
                    warn_secret_on_argv("--token");
                    token.clone()
                }
                _ => match &args.token_file {
                    Some(path) => {
                        let token = read_secret(path)?;
                        if !token.is_empty() && !janus_core::protocol::is_presentable_token(&token) {
                            return Err(usage(format!(
                                "--token-file {}",
                                janus_core::protocol::unpresentable_token_reason()
                            )));
                        }
                        token
                    }
                    None => String::new(),
                },
            };
            pretty(&Announce {
                controller_address: &args.address,
                controller_ca_cert: &root,
                controller_fleet_root_cert: &root,
                registration_token: &token,
                network: Network { hostname: &args.hostname },
            })
        }
    }
}

/// A one-time token, registered as `tokens add` registers it.
fn mint(state: &Path, args: &AnnounceArgs) -> Result<String> {
    let add = janus_admin::NewTokens {
        description: args.description.clone(),
        expires_in: args.expires_in,
        labels: janus_admin::NewTokens::labels_from(args.labels.clone())?,
        ..janus_admin::NewTokens::one()
    };
    let store = janus_admin::open_state(state)?;
    let mut made = janus_admin::tokens::add(&store, &add, &crate::admin_args::actor_here(None)?)?;
    Ok(made.remove(0).token)
}

/// A hostname the node can take: letters, digits, '-' and '.' (RFC 1123),
/// each label 1 to 63 characters and not starting or ending with '-'.
fn check_hostname(name: &str) -> Result<()> {
    let label_ok = |l: &str| {
        (1..=63).contains(&l.len())
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    if name.len() <= janus_core::protocol::MAX_NAME && name.split('.').all(label_ok) {
        return Ok(());
    }
    Err(usage(
        "--hostname must be a hostname: labels of 1 to 63 letters, digits or '-' (not first or last), joined by '.'"
            .into(),
    ))
}

fn read(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|e| {
        usage(format!("{}: {e}: is --fleet a fleet directory (`certs fleet --out`)?", path.display()))
    })
}

/// As `jq -n` prints: two-space indentation, then a newline (added by the caller's print).
fn pretty(value: &impl Serialize) -> Result<String> {
    Ok(serde_json::to_string_pretty(value).map_err(std::io::Error::other)?)
}

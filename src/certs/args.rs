//! What `certs` is asked for, as the command line parses it (clap derive)
//! and [`super::run`] takes it.

// clap turns doc comments into help text (see `crate::cli`).
#![allow(missing_docs)]

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand};

use janus_core::clock::parse_duration;

#[derive(Debug, Subcommand)]
pub enum CertsCommand {
    /// A fleet: root.crt/.key, issuing.crt/.key, bundle.json (name it with --name).
    #[command(after_help = "Example:\n  janus-registration certs fleet --out fleet/ --name 'Example fleet'")]
    Fleet(FleetArgs),
    /// The endpoint's controller.fleet.janus certificate, signed by the fleet's issuing CA.
    #[command(
        after_help = "Example:\n  janus-registration certs controller --fleet fleet/ --out controller --san 10.0.2.2"
    )]
    Controller(ControllerArgs),
    /// A node CA with the real node's profile, and its console line.
    #[command(after_help = "Example:\n  janus-registration certs node-ca --name edge-2 --out edge-2-ca")]
    NodeCa(NodeCaArgs),
    /// The admin CA the admin API trusts (`serve --admin-ca DIR/admin-ca.crt`): not the fleet's.
    #[command(after_help = "Example:\n  janus-registration certs admin-ca --out admin-ca/")]
    AdminCa(AdminCaArgs),
    /// An orchestrator's admin API credential, signed by the admin CA, saying what it may do.
    #[command(
        after_help = "Example:\n  janus-registration certs admin --ca admin-ca/ --name orchestrator --scope tokens --scope read --out orchestrator"
    )]
    Admin(AdminArgs),
}

#[derive(Debug, Args)]
pub struct AdminCaArgs {
    /// Directory to write admin-ca.crt and admin-ca.key (0600) into.
    #[arg(long)]
    pub out: PathBuf,
}

#[derive(Debug, Args)]
pub struct AdminArgs {
    /// The admin CA's directory (admin-ca.crt, admin-ca.key).
    #[arg(long)]
    pub ca: PathBuf,
    /// The credential's name: the audit trail names every change made with it so.
    #[arg(long)]
    pub name: String,
    /// What it may do (repeatable): tokens (make, revoke), read (nodes, events), approve, reject.
    #[arg(long = "scope", value_enum, required = true)]
    pub scopes: Vec<janus_admin::api::Scope>,
    /// Writes PREFIX.crt and PREFIX.key (0600).
    #[arg(long)]
    pub out: PathBuf,
    /// Validity in days.
    #[arg(long, default_value_t = 90)]
    pub days: i64,
    /// Also writes PREFIX.p12 (0600): the credential and the admin CA as
    /// PKCS#12, for a browser (the admin console).
    #[arg(long)]
    pub p12: bool,
    /// The PKCS#12's password: this file's first line (8 characters at
    /// least); without it, a random one is made and printed once.
    #[arg(long, requires = "p12", value_name = "FILE")]
    pub p12_password_file: Option<std::path::PathBuf>,
}

#[derive(Debug, Args)]
pub struct FleetArgs {
    /// Directory to write the fleet into.
    #[arg(long)]
    pub out: PathBuf,
    /// The fleet's name, in its certificates' common names.
    #[arg(long, default_value = "Development fleet")]
    pub name: String,
    /// Re-sign bundle.json at this (higher) version with the existing root and issuing CA.
    #[arg(long)]
    pub bundle_version: Option<u64>,
}

#[derive(Debug, Args)]
pub struct ControllerArgs {
    /// The fleet directory (issuing.crt, issuing.key).
    #[arg(long, env = "JANUS_REGISTRATION_FLEET")]
    pub fleet: PathBuf,
    /// Writes PREFIX.crt (leaf + issuing CA) and PREFIX.key (0600).
    #[arg(long)]
    pub out: PathBuf,
    /// Validity in days.
    #[arg(long, default_value_t = 365)]
    pub days: i64,
    /// An extra subject alternative name (DNS name or IP address); repeatable.
    #[arg(long = "san")]
    pub sans: Vec<String>,
    /// Rewrite only when the existing certificate expires within this (e.g. 10d, 12h).
    #[arg(long, value_parser = parse_duration)]
    pub renew_within: Option<Duration>,
}

#[derive(Debug, Args)]
pub struct NodeCaArgs {
    /// The node's hostname.
    #[arg(long)]
    pub name: String,
    /// Writes PREFIX.crt and PREFIX.key (0600).
    #[arg(long)]
    pub out: PathBuf,
}

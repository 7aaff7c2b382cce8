//! The integration tests, one binary: each module is a suite, all of them
//! sharing `common` (fixtures, an HTTPS client that is the agent's, the CLI
//! runner). One binary links once instead of once per file, which is most
//! of a cold `cargo test` after the dependencies.
//!
//! Run one suite with `cargo test --test suite SUITE::`.

// The tests play the admin and the attacker: they write, rename and look at
// state files by hand, as those do, where the crate itself may not.
#![allow(clippy::disallowed_methods)]

mod common;

mod admin_api;
mod admin_surfaces;
mod adversary;
mod agent;
mod agent_cli;
mod bounds;
mod certs_interop;
mod console;
mod cross_site;
mod decisions;
mod deploy;
mod fail_closed;
mod failed_admissions;
mod frictions;
mod front_door;
mod handlers;
mod hostile_nodes;
mod operate;
mod operator;
mod orchestrating;
mod proxy_protocol;
mod replicas_gluster;
mod serve_durability;
mod serve_protocol;
mod serve_startup;
mod serve_validation;
mod stalls;
mod state_integrity;
mod surfaces;
mod token_meta;
mod upgrades;

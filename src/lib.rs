//! janus-registration: the protocol-2 registration endpoint Janus nodes
//! announce themselves to, a drop-in for the reference `registration-server.py`
//! on the same state layout, and the tools around it.
//!
//! # Layers
//! Each layer uses only the ones above it.
//!
//! **Foundation** — no knowledge of nodes or requests:
//! - [`clock`]: Unix time, RFC 3339, Go-style durations.
//! - [`durable`]: the one helper for every file written: atomic, durable, never through a link.
//! - [`terminal`]: escaping what others wrote before it reaches a terminal.
//! - [`shutdown`]: SIGINT/SIGTERM as one future.
//!
//! **Protocol and trust** — what the wire and the certificates say:
//! - [`protocol`]: the wire types, shared by the server and the agent.
//! - [`pki`]: every certificate, key and bundle check (the only DER reader),
//!   and minting with rcgen (its public path: [`certs`]).
//! - [`tls`]: the one crypto provider, the server's and the clients' TLS configurations.
//!
//! **State** — the only writer of the state directory:
//! - [`store`]: `tokens`, `nodes/`, `approved/` and our additions; its async
//!   face [`store::AsyncStore`] is all the server sees.
//!
//! **Services** — long-running roles:
//! - [`server`]: `serve`, the HTTPS endpoint.
//! - [`agent`]: the node side: janusd's HTTPS client and registration loop, and the load generator.
//!
//! **Commands** — one-shot jobs behind the command line:
//! - [`cli`]: the command line (clap), turned into each command's config.
//! - [`admin`]: `nodes` and `tokens`, day-2 operation on the state directory.
//! - [`certs`]: `certs`, writing fleets and certificates.
//! - [`demo`]: `demo`, the embedded default on a development fleet.
//! - [`healthcheck`]: `healthcheck`, the container's probe of `/healthz`.

#![warn(missing_docs)]

// Foundation.
pub mod clock;
pub mod durable;
pub mod shutdown;
pub mod terminal;

// Protocol and trust.
pub mod pki;
pub mod protocol;
pub mod tls;

// State.
pub mod store;

// Services.
pub mod agent;
pub mod server;

// Commands.
pub mod admin;
pub mod certs;
pub mod cli;
pub mod demo;
pub mod healthcheck;

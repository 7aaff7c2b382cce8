//! janus-registration: the protocol-2 registration endpoint Janus nodes
//! announce themselves to, a drop-in for the reference `registration-server.py`
//! on the same state layout, and the tools around it.
//!
//! # Layout
//! - [`cli`]: the command line (clap), turned into each command's config.
//! - [`protocol`]: the wire types, shared by the server and the agent.
//! - [`pki`]: every certificate, key and bundle check; the only DER reader.
//! - [`store`]: the state directory (`tokens`, `nodes/`, `approved/`); the only writer.
//! - [`tls`]: the one crypto provider, the server's and the clients' TLS configurations.
//! - [`server`]: `serve`, the HTTPS endpoint.
//! - [`admin`]: `nodes` and `tokens`, day-2 operation on the state directory.
//! - [`agent`]: the node side: janusd's HTTPS client and registration loop.
//! - [`certs`]: `certs`, minting fleets and certificates with rcgen.
//! - [`durable`]: the one helper for every file written: atomic, durable, never through a link.
//! - [`clock`]: RFC 3339 and Go-style durations.
//! - [`demo`]: `demo`, the embedded default on a development fleet.
//! - [`healthcheck`]: `healthcheck`, the container's probe of `/healthz`.
//! - [`shutdown`]: SIGINT/SIGTERM as one future.

#![warn(missing_docs)]

pub mod admin;
pub mod agent;
pub mod certs;
pub mod cli;
pub mod clock;
pub mod demo;
pub mod durable;
pub mod healthcheck;
pub mod pki;
pub mod protocol;
pub mod server;
pub mod shutdown;
pub mod store;
pub mod terminal;
pub mod tls;

//! janus-core: what every layer above stands on, with no knowledge of
//! nodes, requests or the state directory.
//!
//! **Foundation**:
//! - [`clock`]: Unix time, RFC 3339, Go-style durations; the wall clock's one reader.
//! - [`durable`]: the one helper for every file written: atomic, durable, never through a link.
//! - [`terminal`]: escaping what others wrote before it reaches a terminal.
//! - [`shutdown`]: SIGINT/SIGTERM as one future.
//!
//! **Protocol and trust** — what the wire and the certificates say:
//! - [`protocol`]: the wire types, shared by the server and the agent.
//! - [`pki`]: every certificate, key and bundle check (the only DER reader),
//!   and minting with rcgen.
//! - [`tls`]: the one crypto provider, the server's and the clients' TLS configurations.
//! - [`https`]: the one HTTPS client connection (TCP, TLS, hyper's HTTP/1.1).

#![warn(missing_docs)]

// Foundation.
pub mod clock;
pub mod durable;
pub mod nearest;
pub mod shutdown;
pub mod terminal;

// Protocol and trust.
pub mod https;
pub mod pki;
pub mod protocol;
pub mod tls;

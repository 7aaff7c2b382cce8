//! The load generator, a tool beside the product: `janus-swarm` drives
//! many simulated nodes against one endpoint and reports rates, latency
//! percentiles and errors (`scripts/bench.py`, the replica labs).
//!
//! Invariants: nothing here ships in `janus-registration` (the product
//! binary has no load generator; the container image copies only it); a
//! simulated node is a node on the wire ([`janus_agent::http`]: a new TLS
//! connection per request, the body and headers janusd sends); approvals
//! it makes (`--approve-in`) go through the store as an admin command's
//! do, durably and audited, by the user `janus-swarm`.

mod error;
pub mod swarm;

pub use error::SwarmError;

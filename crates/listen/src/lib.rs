//! What every listener of the process is made of, below both services
//! (the nodes' port in `janus-endpoint`, the admin listener in
//! `janus-admin`): binding ([`bind()`]), the table of open connections with
//! its caps and shedding ([`accept`]), the PROXY header ([`proxy`]), whose
//! connection it is ([`prefix`]), the error answer's shape and log line
//! ([`answer`]), the request spans ([`trace`]) and one shutdown for all
//! ([`Stop`]).
//!
//! Invariant: this crate knows no route, no store and no certificate: a
//! service brings those and builds its listener from these parts.

pub mod accept;
pub mod answer;
mod bind;
pub mod prefix;
pub mod proxy;
mod stop;
pub mod trace;

pub use bind::{LISTEN_BACKLOG, bind};
pub use stop::Stop;

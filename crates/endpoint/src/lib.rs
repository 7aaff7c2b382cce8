//! `serve`: the protocol-2 registration endpoint over HTTPS.
//!
//! One module per job: [`ServeConfig`] (what it is told), the startup
//! checks ([`prepare`], all made before a socket is bound), [`App`] (what
//! every request shares), the listeners and graceful shutdown
//! ([`Prepared::serve`]), what runs beside them (reloads, maintenance,
//! the programs). What each route does is in [`routes`]; what each
//! failure answers is in [`error`], made by [`answer`] as the admin API's
//! is; the connection policy (HTTP/1.1, `Connection: close` after every
//! answer, bounded handshake and header times, a table of open
//! connections) is in [`accept`]; the state is in `janus_store`.

mod app;
mod background;
mod config;
mod listen;
mod startup;

pub mod accept;
pub mod answer;
pub mod door;
pub mod error;
pub mod limits;
pub mod metrics;
pub mod on_admitted;
pub mod policy;
pub mod program;
pub mod proxy;
pub mod reload;
pub mod routes;

pub use app::{App, ServedTrust};
pub use config::{
    DEFAULT_BODY_TIMEOUT, DEFAULT_HANDSHAKE_TIMEOUT, DEFAULT_HEAD_TIMEOUT, DEFAULT_LISTEN,
    DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_CONNECTIONS_PER_NETWORK, DEFAULT_MAX_CONNECTIONS_PER_SOURCE,
    LISTEN_BACKLOG, SHUTDOWN_STRAGGLERS, ServeConfig,
};
pub use listen::{bind, router};
pub use startup::{Prepared, StartupError, prepare};

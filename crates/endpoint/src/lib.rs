//! `serve`'s nodes' port: the protocol-2 registration endpoint over HTTPS.
//!
//! One module per job: [`ServeConfig`] (what it is told), the startup
//! checks ([`prepare`], all made before a socket is bound), [`App`] (what
//! every request shares), the nodes' port and the metrics port
//! ([`Prepared::serve`]), what runs beside them (reloads, maintenance,
//! the programs). What each route does is in `routes`; what each
//! failure answers is in `error` ([`ApiError`]). The listener's parts (the connection
//! table, PROXY, the error answer's shape, spans, one shutdown) are
//! `janus_listen`'s, shared with the admin listener; the state is
//! `janus_store`'s. The binary serves this and the admin listener side by
//! side, over one store, one certificate and one [`janus_listen::Stop`].

mod app;
mod background;
mod config;
mod listen;
mod startup;

mod error;
mod limits;
mod metrics;
mod on_admitted;
mod policy;
mod process_metrics;
mod program;
mod reload;
mod routes;

pub use app::{App, ServedTrust};
pub use config::{
    DEFAULT_BODY_TIMEOUT, DEFAULT_HANDSHAKE_TIMEOUT, DEFAULT_HEAD_TIMEOUT, DEFAULT_LISTEN,
    DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_CONNECTIONS_PER_NETWORK, DEFAULT_MAX_CONNECTIONS_PER_SOURCE,
    SHUTDOWN_STRAGGLERS, ServeConfig,
};
pub use error::ApiError;
pub use limits::LimitsConfig;
pub use listen::router;
pub use on_admitted::OnAdmittedConfig;
pub use policy::{DEFAULT_QUEUE, PolicyConfig};
pub use program::Unusable;
pub use startup::{Prepared, StartupError, prepare};

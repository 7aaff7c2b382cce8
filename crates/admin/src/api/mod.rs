//! The admin API for programs (`/v1/…` on the admin listener): its
//! routes (`routes`), its bodies and answers as types ([`wire`]), the
//! OpenAPI document derived from them ([`openapi`]) and the client the
//! command line's `--server` mode uses ([`client`]).

pub mod client;
pub mod openapi;
mod routes;
pub mod wire;

pub use crate::credential::{Authenticated, Caller, NoPower, Scope};
pub use crate::web::stream::{MAX_STREAMS, MAX_STREAMS_PER_CREDENTIAL};
pub use crate::web::{MAX_WORK, Needs, Problem, REQUEST_DEADLINE};
pub(crate) use routes::routes;
pub use routes::{document, table as route_table};

//! The one web layer under the admin API and the console: the shared
//! state ([`AdminState`]), the route builder ([`Routes`]: a JSON route, a
//! page, a form), the scope guard ([`permitted`]), the store's work for a
//! request ([`on_store`]), the query parser ([`query`]), the event-stream
//! opener ([`AdminState::open_stream`]), the refusal's two shapes ([`refusal`]:
//! `application/problem+json`, or the console's page) and the layers on
//! the whole listener ([`layers`], [`trace`]).
//!
//! Invariants: a route is added only through [`Routes`], with what it
//! needs of the credential, so none is without its guard; the guard
//! refuses before anything is read; a refusal's shape follows its path
//! (`/console…` a page, everything else problem+json), its status, code
//! and `Retry-After` from [`Code`]; the API and the console import this
//! module, never each other.

mod guard;
pub(crate) mod layers;
pub(crate) mod query;
mod refusal;
mod state;
pub(crate) mod stream;
pub(crate) mod trace;

pub use guard::Needs;
pub(crate) use guard::Routes;
pub use refusal::Problem;
pub(crate) use refusal::{page_refusal, problem, refusal};
pub(crate) use state::AdminState;
pub(crate) use state::on_store;
pub use state::{MAX_WORK, REQUEST_DEADLINE};

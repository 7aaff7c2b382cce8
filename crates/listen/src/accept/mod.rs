//! Accepting connections: a table of open connections with caps in all,
//! per source (an IPv4 address, an IPv6 /64) and per network (an IPv4 /24,
//! an IPv6 /48), applied before any handshake work; and shedding instead of
//! falling over: when the table is full, an idle connection — one that has
//! not finished its TLS handshake, or has not sent a request since — is
//! closed to make room, the oldest of the source that holds the most such,
//! so a new source always gets a slot however many idle connections others
//! opened, and is not the one closed while they hold more; under pressure a
//! handshake gets less time.
//!
//! Invariants: a refused connection costs a closed socket and no more; every
//! accepted stream holds its slot until it is dropped or evicted (an
//! evicted stream's next read or write fails, and it is woken to see it);
//! a connection whose first request has reached the router (its headers
//! read) is never evicted, so no answer is cut off; the table's memory is
//! bounded by its cap; refusals are typed ([`Refused`]) so the accept loop
//! counts them without matching error text.

mod acceptor;
mod table;

pub use acceptor::*;
pub use table::*;

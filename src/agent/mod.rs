//! The node side of first contact, played as janusd plays it
//! (janus-node-side.md §1-§4): the wire client in [`http`].

pub mod http;

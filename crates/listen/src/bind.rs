//! Binding a listener: the one way every port of the process is opened.
//!
//! Invariant: the kernel queues [`LISTEN_BACKLOG`] connections before
//! accept, on every listener; `SO_REUSEADDR` so a restart does not wait out
//! `TIME_WAIT`; close-on-exec, so a program the server runs holds no port.

use std::net::{SocketAddr, TcpListener, ToSocketAddrs};

/// Connections the kernel queues before accept: a boot storm of nodes each
/// opening a new connection overflows the usual 128, and a dropped SYN costs
/// the node a 1 s retransmit.
pub const LISTEN_BACKLOG: i32 = 4096;

/// Binds `addr` (`host:port`; the first address it resolves to) with [`LISTEN_BACKLOG`].
pub fn bind(addr: &str) -> std::io::Result<TcpListener> {
    let addr: SocketAddr = addr
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| std::io::Error::other(format!("{addr} resolves to nothing")))?;
    use rustix::net::{AddressFamily, SocketFlags, SocketType};
    let family = if addr.is_ipv4() { AddressFamily::INET } else { AddressFamily::INET6 };
    let socket = rustix::net::socket_with(family, SocketType::STREAM, SocketFlags::CLOEXEC, None)?;
    rustix::net::sockopt::set_socket_reuseaddr(&socket, true)?;
    rustix::net::bind(&socket, &addr)?;
    rustix::net::listen(&socket, LISTEN_BACKLOG)?;
    Ok(TcpListener::from(socket))
}

//! The connection table: open connections counted in all, per source and
//! per network, before any handshake work; a full table evicts the oldest
//! idle connection of the source that holds the most (silent ones, that
//! sent no byte, first; then those not through their handshake; a
//! handshaken one, which on the admin listener holds a credential, last);
//! a stream holds its slot until it is dropped or evicted.
//!
//! Whether a connection is silent is asked of the socket itself (a peek)
//! before it is shed as such, where the table keeps a handle on it (the
//! admin listener): a client whose hello is in the kernel's buffer but
//! whose task has not read it yet is not taken for a stranger who says
//! nothing.

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use axum_server::accept::Accept;
use prometheus_client::metrics::counter::Counter;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use crate::prefix::{network_key, source_key};

/// Why a connection was closed at accept, before any handshake work.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    /// Every connection slot is taken by a connection serving a request.
    #[error("connection cap reached")]
    Cap,
    /// This source holds all the slots it may.
    #[error("per-source connection cap reached")]
    SourceCap,
    /// This source's network holds all the slots it may.
    #[error("per-network connection cap reached")]
    NetworkCap,
    /// Closed to make room for a newer connection: it had not finished
    /// its handshake or sent a request, and was the oldest such.
    #[error("evicted: the connection table was full and this connection had sent no request")]
    Evicted,
    /// Its handshake took longer than the table's pressure allowed.
    #[error("the TLS handshake did not finish in time")]
    HandshakeTimeout,
}

impl Refused {
    /// The reason an accept error carries, if it is one of ours.
    pub fn of(error: &io::Error) -> Option<&Refused> {
        error.get_ref().and_then(|e| e.downcast_ref::<Refused>())
    }
}

/// The caps of a [`ConnectionCap`].
#[derive(Debug, Clone, Copy)]
pub struct Caps {
    /// Connections open at once.
    pub max: usize,
    /// Of them, from one source (0: no such cap).
    pub per_source: usize,
    /// Of them, from one network (0: no such cap).
    pub per_network: usize,
    /// Whether a full table evicts the oldest idle connection (the TLS
    /// listener, whose acceptor marks handshakes and requests: [`super::Shedding`])
    /// or refuses the new one (plain HTTP).
    pub evict: bool,
    /// Whether a source or network at its cap sheds its own oldest silent
    /// connection (one that has sent nothing) for the new one instead of
    /// refusing it (the admin listener: a credential holder that shares a
    /// network with strangers opening silent connections still gets in; a
    /// connection that sent a byte is never shed so).
    pub shed_within: bool,
}

/// The table of open connections, shared by the accept loop and each
/// connection's slot.
#[derive(Clone)]
pub struct ConnectionCap {
    caps: Caps,
    table: Arc<Mutex<Table>>,
    /// Counted where they happen: an evicted connection past its handshake
    /// ends inside the connection's task, which reports nothing.
    evictions: Counter,
}

#[derive(Default)]
struct Table {
    next: u64,
    /// By age: the first is the oldest.
    open: BTreeMap<u64, Entry>,
    sources: HashMap<IpAddr, usize>,
    networks: HashMap<IpAddr, usize>,
}

struct Entry {
    peer: Option<(IpAddr, IpAddr)>,
    signal: Arc<Signal>,
    /// A second handle on the socket, to peek whether it has spoken (only
    /// where a source sheds its own: [`Caps::shed_within`]).
    peek: Option<std::os::fd::OwnedFd>,
    /// When it was admitted.
    since: tokio::time::Instant,
}

/// A connection that spoke but has not finished its handshake in this long
/// may be shed for a newcomer of its source (a stranger that sends a hello
/// and stalls); an honest handshake takes a few round trips, and one still
/// making progress is never shed for a newcomer.
const STALLED_HANDSHAKE: std::time::Duration = std::time::Duration::from_millis(250);

impl Entry {
    /// Whether the peer has sent nothing at all: its bookkeeping, then the
    /// socket itself (a byte waiting in the kernel's buffer counts).
    fn silent(&self) -> bool {
        if self.signal.spoke.load(Ordering::Relaxed) {
            return false;
        }
        let Some(fd) = &self.peek else { return true };
        let spoke = has_spoken(fd);
        if spoke {
            self.signal.spoke.store(true, Ordering::Relaxed);
        }
        !spoke
    }

    /// How evictable it is: 0 silent, 1 spoke but not through its
    /// handshake, 2 through it (on the admin listener: a credential).
    fn class(&self) -> u8 {
        if self.silent() {
            0
        } else if !self.signal.handshaken.load(Ordering::Relaxed) {
            1
        } else {
            2
        }
    }
}

/// What a slot and the table share: whether a request reached the router,
/// and whether the connection was evicted (with the waker to tell it).
#[derive(Default)]
struct Signal {
    requested: AtomicBool,
    /// Whether the peer has sent a byte (a client hello): among idle
    /// connections, silent ones are evicted first, so strangers opening
    /// connections that say nothing cannot shed a client mid-handshake.
    spoke: AtomicBool,
    /// Whether its TLS handshake finished (on the admin listener, with a
    /// client certificate from the admin CA): shed last.
    handshaken: AtomicBool,
    evicted: AtomicBool,
    waker: Mutex<Option<Waker>>,
}

impl Signal {
    /// Idle: evictable. Not yet through its handshake, or through it with no
    /// request yet (a connection opened and left, or headers sent slowly).
    fn idle(&self) -> bool {
        !self.requested.load(Ordering::Acquire)
    }
}

impl Table {
    fn count(&mut self, peer: Option<(IpAddr, IpAddr)>, up: bool) {
        let Some((source, network)) = peer else { return };
        for (map, key) in [(&mut self.sources, source), (&mut self.networks, network)] {
            let open = map.entry(key).or_insert(0);
            if up {
                *open += 1;
            } else {
                *open = open.saturating_sub(1);
                if *open == 0 {
                    map.remove(&key);
                }
            }
        }
    }

    fn remove(&mut self, id: u64) -> Option<Entry> {
        let entry = self.open.remove(&id)?;
        self.count(entry.peer, false);
        Some(entry)
    }

    /// Closes the oldest silent connection (one that has sent nothing, as
    /// its socket says) whose peer `of` takes, else the oldest whose
    /// handshake stalled past [`STALLED_HANDSHAKE`]; whether there was one.
    /// A connection through its handshake (on the admin listener: a
    /// credential) is never shed for a newcomer of its own source or
    /// network, nor a client whose handshake is under way.
    fn evict_oldest_silent(&mut self, of: impl Fn((IpAddr, IpAddr)) -> bool) -> bool {
        let candidates = |e: &Entry| e.signal.idle() && e.peer.is_some_and(&of);
        let silent = self.open.iter().find(|(_, e)| candidates(e) && e.silent());
        let oldest = silent.map(|(id, _)| *id).or_else(|| {
            self.open
                .iter()
                .find(|(_, e)| {
                    candidates(e)
                        && !e.signal.handshaken.load(Ordering::Relaxed)
                        && e.since.elapsed() >= STALLED_HANDSHAKE
                })
                .map(|(id, _)| *id)
        });
        match oldest {
            Some(id) => {
                self.close_evicted(id);
                true
            }
            None => false,
        }
    }

    fn close_evicted(&mut self, id: u64) {
        if let Some(entry) = self.remove(id) {
            entry.signal.evicted.store(true, Ordering::Release);
            if let Some(waker) = entry.signal.waker.lock().unwrap_or_else(|e| e.into_inner()).take() {
                waker.wake();
            }
        }
    }

    /// Closes an idle connection to make room — of the most evictable class
    /// present ([`Entry::class`]: silent, then mid-handshake, then through
    /// it), the oldest of the source holding the most such (a flood's,
    /// never the one a new source just opened while others hold several);
    /// whether there was one. A scan of the table, made only when it is full.
    fn evict_one_idle(&mut self) -> bool {
        let classes: Vec<(u64, u8)> =
            self.open.iter().filter(|(_, e)| e.signal.idle()).map(|(id, e)| (*id, e.class())).collect();
        let Some(lowest) = classes.iter().map(|(_, class)| *class).min() else { return false };
        let mut by_source: HashMap<Option<IpAddr>, (usize, u64)> = HashMap::new();
        for (id, _) in classes.iter().filter(|(_, class)| *class == lowest) {
            let source = self.open.get(id).and_then(|e| e.peer.map(|(source, _)| source));
            let seen = by_source.entry(source).or_insert((0, *id));
            seen.0 += 1;
        }
        // The most held; among equals, the one whose oldest is oldest.
        let Some(id) = by_source
            .values()
            .max_by_key(|(held, oldest)| (*held, std::cmp::Reverse(*oldest)))
            .map(|(_, id)| *id)
        else {
            return false;
        };
        self.close_evicted(id);
        true
    }
}

impl ConnectionCap {
    /// A table with these caps.
    pub fn new(caps: Caps) -> Self {
        ConnectionCap { caps, table: Arc::default(), evictions: Counter::default() }
    }

    /// The same table, counting its evictions in `counter`.
    pub fn counting_evictions(self, counter: Counter) -> Self {
        ConnectionCap { evictions: counter, ..self }
    }

    /// How full the table is, 0.0 to 1.0.
    pub fn occupancy(&self) -> f64 {
        let open = self.table.lock().unwrap_or_else(|e| e.into_inner()).open.len();
        open as f64 / self.caps.max.max(1) as f64
    }

    #[cfg(test)]
    fn admit(&self, peer: Option<IpAddr>) -> Result<Slot, Refused> {
        self.admit_with(peer, None)
    }

    /// Admits a connection from `peer`, keeping `peek` (a second handle on
    /// the socket) to ask it whether it has spoken.
    fn admit_with(&self, peer: Option<IpAddr>, peek: Option<std::os::fd::OwnedFd>) -> Result<Slot, Refused> {
        let peer = peer.map(|ip| (source_key(ip), network_key(ip)));
        let mut table = self.table.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((source, network)) = peer {
            let over =
                |map: &HashMap<IpAddr, usize>, key, cap| cap > 0 && map.get(&key).is_some_and(|&n| n >= cap);
            let shed = self.caps.evict && self.caps.shed_within;
            if over(&table.sources, source, self.caps.per_source) {
                if !(shed && table.evict_oldest_silent(|(s, _)| s == source)) {
                    return Err(Refused::SourceCap);
                }
                self.evictions.inc();
            }
            if over(&table.networks, network, self.caps.per_network) {
                if !(shed && table.evict_oldest_silent(|(_, n)| n == network)) {
                    return Err(Refused::NetworkCap);
                }
                self.evictions.inc();
            }
        }
        if table.open.len() >= self.caps.max.max(1) {
            if !(self.caps.evict && table.evict_one_idle()) {
                return Err(Refused::Cap);
            }
            self.evictions.inc();
        }
        let id = table.next;
        table.next += 1;
        let signal = Arc::new(Signal::default());
        table
            .open
            .insert(id, Entry { peer, signal: signal.clone(), peek, since: tokio::time::Instant::now() });
        table.count(peer, true);
        Ok(Slot { id, signal, table: self.table.clone() })
    }
}

/// One open connection's place in the table; given back when dropped.
struct Slot {
    id: u64,
    signal: Arc<Signal>,
    table: Arc<Mutex<Table>>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.table.lock().unwrap_or_else(|e| e.into_inner()).remove(self.id);
    }
}

impl<S> Accept<TcpStream, S> for ConnectionCap {
    type Stream = Capped<TcpStream>;
    type Service = S;
    type Future = std::future::Ready<io::Result<(Capped<TcpStream>, S)>>;

    fn accept(&self, stream: TcpStream, service: S) -> <Self as Accept<TcpStream, S>>::Future {
        // Answers are written in a few small TLS records: without this, Nagle
        // holds the last one for the client's delayed ACK (40 ms).
        let _ = stream.set_nodelay(true);
        // The node behind a listed balancer, when its PROXY header named one.
        // fold: no state read: outside a PROXY scope there is no proxied source
        let proxied = crate::proxy::SOURCE.try_with(|source| *source).ok().flatten();
        let peer = proxied.or_else(|| stream.peer_addr().ok()).map(|a| a.ip());
        // Where a source sheds its own silent connections (the admin
        // listener), the table keeps a second handle to ask the socket
        // itself whether it spoke before taking it for silent.
        let peek = if self.caps.shed_within { rustix::io::dup(&stream).ok() } else { None };
        std::future::ready(match self.admit_with(peer, peek) {
            Ok(slot) => Ok((Capped { slot, inner: stream }, service)),
            Err(refused) => Err(io::Error::other(refused)),
        })
    }
}

/// Whether the peer has sent a byte that waits to be read (a peek); nothing
/// yet, closed by the peer, or a failed look: it has not.
fn has_spoken(socket: impl std::os::fd::AsFd) -> bool {
    let mut byte = [0u8; 1];
    let flags = rustix::net::RecvFlags::PEEK | rustix::net::RecvFlags::DONTWAIT;
    matches!(rustix::net::recv(socket, &mut byte, flags), Ok((n, _)) if n > 0)
}

/// A stream that holds its connection slot, gives it back when dropped,
/// and fails its next read or write once evicted.
pub struct Capped<I> {
    // The slot first: dropped (its entry and peek handle gone from the
    // table) before the socket closes.
    slot: Slot,
    inner: I,
}

impl<I> Capped<I> {
    /// The mark this connection's requests set.
    pub fn request_mark(&self) -> RequestMark {
        RequestMark(self.slot.signal.clone())
    }

    /// Marks the connection through its TLS handshake: shed last.
    pub fn mark_handshaken(&self) {
        self.slot.signal.handshaken.store(true, Ordering::Relaxed);
    }

    /// `Err` once evicted; else registers the waker an eviction wakes
    /// (only while idle: nothing evicts a connection after).
    fn check(&self, cx: &Context<'_>) -> io::Result<()> {
        let signal = &self.slot.signal;
        if signal.evicted.load(Ordering::Acquire) {
            return Err(io::Error::new(io::ErrorKind::ConnectionAborted, Refused::Evicted));
        }
        if signal.idle() {
            let mut waker = signal.waker.lock().unwrap_or_else(|e| e.into_inner());
            if !waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                *waker = Some(cx.waker().clone());
            }
        }
        Ok(())
    }
}

impl<I: AsyncRead + Unpin> AsyncRead for Capped<I> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        self.check(cx)?;
        let before = buf.filled().len();
        let read = Pin::new(&mut self.inner).poll_read(cx, buf);
        let signal = &self.slot.signal;
        if buf.filled().len() > before && !signal.spoke.load(Ordering::Relaxed) {
            signal.spoke.store(true, Ordering::Relaxed);
        }
        read
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for Capped<I> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.check(cx)?;
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }
    // Vectored writes pass through: rustls hands a handshake's flight (its
    // ServerHello, ChangeCipherSpec and encrypted rest) as several buffers,
    // one `writev` and one TCP segment where the default would make three
    // `sendto`s (measured: docs/benchmarks/history.md, "A poll's system calls").
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.check(cx)?;
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Set by a connection's service when a request reaches it (its headers
/// read): from then on the connection is never evicted. Cheap to clone.
#[derive(Clone)]
pub struct RequestMark(Arc<Signal>);

impl RequestMark {
    pub(super) fn set(&self) {
        if !self.0.requested.swap(true, Ordering::AcqRel) {
            self.0.waker.lock().unwrap_or_else(|e| e.into_inner()).take();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::accept::handshake_time;
    use std::time::Duration;

    fn cap(max: usize, per_source: usize, per_network: usize) -> ConnectionCap {
        ConnectionCap::new(Caps { max, per_source, per_network, evict: true, shed_within: false })
    }

    #[test]
    fn a_full_table_evicts_the_oldest_idle_connection_never_a_served_one() {
        let table = cap(3, 0, 0);
        let ip = |s: &str| Some(s.parse::<IpAddr>().unwrap());
        let served = table.admit(ip("192.0.2.1")).unwrap();
        RequestMark(served.signal.clone()).set();
        let lone = table.admit(ip("203.0.113.9")).unwrap();
        let flood_old = table.admit(ip("198.51.100.1")).unwrap();
        let table = ConnectionCap { caps: Caps { max: 4, ..table.caps }, ..table.clone() };
        let flood_new = table.admit(ip("198.51.100.1")).unwrap();
        let fresh = table.admit(ip("203.0.113.10")).expect("a new source gets a slot");
        assert!(flood_old.signal.evicted.load(Ordering::Acquire), "the flood's oldest goes");
        assert!(!lone.signal.evicted.load(Ordering::Acquire), "not the older lone one: its source holds one");
        assert!(!flood_new.signal.evicted.load(Ordering::Acquire));
        assert!(!served.signal.evicted.load(Ordering::Acquire), "a connection past its handshake stays");
        drop(flood_old); // its slot was given away already: nothing counted twice
        assert_eq!(table.table.lock().unwrap().open.len(), 4);
        // Among sources holding one each, the oldest goes.
        let next = table.admit(ip("203.0.113.11")).unwrap();
        assert!(lone.signal.evicted.load(Ordering::Acquire));
        // Through its handshake or not, a connection with no request is idle.
        let after = table.admit(ip("203.0.113.13")).unwrap();
        assert!(flood_new.signal.evicted.load(Ordering::Acquire), "a handshake with no request is idle");
        for slot in [&fresh, &next, &after] {
            RequestMark(slot.signal.clone()).set();
        }
        assert!(matches!(table.admit(ip("203.0.113.12")), Err(Refused::Cap)), "all busy: refused");
        assert_eq!(table.evictions.get(), 3, "each eviction counted once");
    }

    /// Issue 53: a newcomer of a source at its cap sheds a connection that
    /// said nothing, asked of the socket itself: not one whose hello waits
    /// in the kernel's buffer unread, nor one through its handshake (a
    /// credential), nor one whose handshake is under way.
    #[test]
    fn a_source_at_its_cap_sheds_what_truly_said_nothing() {
        use std::io::Write as _;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let connect = || {
            let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
            let (server, _) = listener.accept().unwrap();
            (client, rustix::io::dup(&server).unwrap(), server)
        };
        let table = ConnectionCap::new(Caps {
            max: 64,
            per_source: 3,
            per_network: 0,
            evict: true,
            shed_within: true,
        });
        let ip = Some("127.0.0.1".parse::<IpAddr>().unwrap());
        let (mut hello, fd, _a) = connect();
        let spoke = table.admit_with(ip, Some(fd)).unwrap();
        let (_, fd, _b) = connect();
        let credential = table.admit_with(ip, Some(fd)).unwrap();
        credential.signal.handshaken.store(true, Ordering::Relaxed);
        credential.signal.spoke.store(true, Ordering::Relaxed);
        let (_, fd, _c) = connect();
        let silent = table.admit_with(ip, Some(fd)).unwrap();
        // The oldest's hello arrives; nothing of this process read it.
        hello.write_all(b"\x16\x03\x01").unwrap();
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
        while !has_spoken(&_a) {
            assert!(tokio::time::Instant::now() < deadline, "the byte arrives");
        }
        let (_, fd, _d) = connect();
        let newcomer = table.admit_with(ip, Some(fd)).expect("the silent one makes room");
        assert!(silent.signal.evicted.load(Ordering::Acquire), "the one that said nothing goes");
        assert!(!spoke.signal.evicted.load(Ordering::Acquire), "its hello unread, still not silent");
        assert!(!credential.signal.evicted.load(Ordering::Acquire));
        // Now none is silent: the handshake under way stays, the newcomer is refused.
        newcomer.signal.spoke.store(true, Ordering::Relaxed);
        let (_, fd, _e) = connect();
        assert!(matches!(table.admit_with(ip, Some(fd)), Err(Refused::SourceCap)));
        assert!(!spoke.signal.evicted.load(Ordering::Acquire), "a handshake under way is not shed");
    }

    #[test]
    fn networks_are_capped_besides_sources() {
        let table = cap(100, 2, 3);
        let from = |s: &str| table.admit(Some(s.parse().unwrap()));
        let held: Vec<_> = ["10.1.2.3", "10.1.2.3", "10.1.2.4"].iter().map(|s| from(s).unwrap()).collect();
        assert!(matches!(from("10.1.2.3"), Err(Refused::SourceCap)));
        assert!(matches!(from("10.1.2.200"), Err(Refused::NetworkCap)), "the same /24");
        assert!(from("10.1.3.1").is_ok(), "the next /24");
        assert_eq!(
            network_key("2001:db8:1:2::1".parse().unwrap()),
            "2001:db8:1::".parse::<IpAddr>().unwrap()
        );
        assert_eq!(
            network_key("2001:db8:1:ffff::1".parse().unwrap()),
            "2001:db8:1::".parse::<IpAddr>().unwrap()
        );
        drop(held);
        assert!(from("10.1.2.200").is_ok(), "slots come back");
    }

    #[test]
    fn a_source_at_its_cap_sheds_its_own_idle_connection_when_asked_to() {
        let table = ConnectionCap::new(Caps {
            max: 100,
            per_source: 2,
            per_network: 3,
            evict: true,
            shed_within: true,
        });
        let from = |s: &str| table.admit(Some(s.parse().unwrap()));
        let (first, second) = (from("10.1.2.3").unwrap(), from("10.1.2.3").unwrap());
        let third = from("10.1.2.3").expect("the source's oldest silent one goes instead");
        assert!(
            first.signal.evicted.load(Ordering::Acquire) && !second.signal.evicted.load(Ordering::Acquire)
        );
        second.signal.spoke.store(true, Ordering::Relaxed); // mid-handshake
        RequestMark(third.signal.clone()).set(); // serving
        assert!(matches!(from("10.1.2.3"), Err(Refused::SourceCap)), "one that spoke is never shed");
        let neighbour = from("10.1.2.4").expect("the network's third");
        let shed = from("10.1.2.5").expect("the network's silent neighbour is shed");
        assert!(neighbour.signal.evicted.load(Ordering::Acquire));
        shed.signal.spoke.store(true, Ordering::Relaxed);
        assert!(matches!(from("10.1.2.6"), Err(Refused::NetworkCap)));
    }

    #[test]
    fn silent_connections_go_before_one_that_spoke() {
        let table = cap(3, 0, 0);
        let ip = |s: &str| Some(s.parse::<IpAddr>().unwrap());
        let handshaking = table.admit(ip("192.0.2.1")).unwrap();
        handshaking.signal.spoke.store(true, Ordering::Relaxed);
        let mut silent: Vec<_> = (0..2).map(|_| table.admit(ip("198.51.100.1")).unwrap()).collect();
        for _ in 0..4 {
            // The table stays full: each newcomer evicts a silent one.
            silent.push(table.admit(ip("198.51.100.1")).unwrap());
            assert!(!handshaking.signal.evicted.load(Ordering::Acquire), "a client that spoke stays");
        }
        assert_eq!(silent.iter().filter(|s| s.signal.evicted.load(Ordering::Acquire)).count(), 4);
    }

    #[test]
    fn handshakes_get_less_time_under_pressure() {
        let five = Duration::from_secs(5);
        assert_eq!(handshake_time(five, 0.5), five);
        assert_eq!(handshake_time(five, 0.8), Duration::from_secs(1));
        assert_eq!(handshake_time(Duration::from_millis(300), 0.9), Duration::from_millis(300));
    }

    #[tokio::test]
    async fn a_capped_stream_writes_several_buffers_in_one_write() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = tokio::net::TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
        let (server, _) = listener.accept().await.unwrap();
        let slot = cap(4, 0, 0).admit(None).unwrap();
        let mut capped = Capped { inner: server, slot };
        assert!(capped.is_write_vectored());
        // A handshake's flight as rustls hands it: three records, one call.
        let flight = [io::IoSlice::new(b"hello"), io::IoSlice::new(b"ccs"), io::IoSlice::new(b"rest")];
        assert_eq!(capped.write_vectored(&flight).await.unwrap(), 12, "every buffer in the one write");
        drop(capped);
        let mut got = Vec::new();
        let mut client = client;
        client.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, b"helloccsrest");
    }
}

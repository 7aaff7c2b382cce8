//! The PROXY protocol (`--proxy-protocol CIDR,…`), v1 (text) and v2
//! (binary), as HAProxy specifies it: an L4 load balancer in front says
//! whose connection it passes on, so rate limits, connection caps and
//! records see the node's address, not the balancer's.
//!
//! Invariants: a header is read only from a peer in the list, and a peer
//! in the list must send one (a listed balancer that does not is refused:
//! otherwise every node behind it would share its address); a peer not in
//! the list is never asked for one, so nobody else can claim an address.
//! The header is read exactly (nothing of the TLS handshake after it is
//! consumed), bounded (107 bytes for v1; for v2, 16 + [`V2_MAX`]: the
//! address block and the TLVs balancers add after it, HAProxy's
//! `send-proxy-v2-ssl` and `unique-id`, AWS's and GCP's among them) and
//! within the handshake's time. A v2 header's TLVs must each fit in it,
//! and its CRC32c (when it carries one) must match, or the connection is
//! refused; their contents are not used. `UNKNOWN` (v1) and `LOCAL` (v2:
//! the balancer's own health check) keep the TCP peer.
//!
//! A listed network is trusted with every source it names: list the
//! balancers' own addresses, never a network other hosts share (a pod
//! network), whose every host could then claim any address.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

const V2_SIGNATURE: [u8; 12] = *b"\r\n\r\n\0\r\nQUIT\n";
/// The longest v1 line, CRLF included.
const V1_MAX: usize = 107;
/// The longest v2 block read after the 16 fixed bytes (addresses and
/// TLVs); a longer one is refused.
pub const V2_MAX: usize = 2048;
/// The v2 TLV of a CRC32c of the whole header.
const PP2_TYPE_CRC32C: u8 = 0x03;

/// A network whose peers are trusted to send the PROXY header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Trusted(ipnet::IpNet);

impl std::str::FromStr for Trusted {
    type Err = String;

    /// An address (`10.0.0.5`) or a network (`10.0.0.0/8`, `fd00::/8`).
    fn from_str(text: &str) -> Result<Self, String> {
        let bad = || format!("{text:?} is not an address or a network such as 10.0.0.0/8");
        let net = match text.parse::<IpAddr>() {
            Ok(address) => ipnet::IpNet::from(address),
            Err(_) => text.parse::<ipnet::IpNet>().map_err(|_| bad())?,
        };
        Ok(Trusted(net.trunc()))
    }
}

impl Trusted {
    /// Whether `ip` is in this network (an IPv4-mapped IPv6 peer as its IPv4 address).
    pub fn contains(&self, ip: IpAddr) -> bool {
        self.0.contains(&ip.to_canonical())
    }
}

tokio::task_local! {
    /// The source a connection's PROXY header named, while its accept runs:
    /// the connection caps count it instead of the balancer's address.
    pub static SOURCE: Option<SocketAddr>;
}

/// The source a PROXY header named, in a request's extensions.
#[derive(Debug, Clone, Copy)]
pub struct ProxiedSource(pub SocketAddr);

/// Whether a connection from `peer` must start with a PROXY header.
pub fn expected_from(trusted: &[Trusted], peer: IpAddr) -> bool {
    trusted.iter().any(|t| t.contains(peer))
}

fn refused(why: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("PROXY protocol: {why}"))
}

/// Reads the header from `stream`: the source it names, or `None` for
/// `UNKNOWN`/`LOCAL`.
pub async fn read_header(stream: &mut TcpStream) -> io::Result<Option<SocketAddr>> {
    let mut start = [0u8; 16];
    // Peeked until enough is there to tell the version: nothing is consumed yet.
    loop {
        let seen = stream.peek(&mut start).await?;
        if seen == 0 {
            return Err(refused("the connection closed before a header"));
        }
        if seen >= 16 || (seen >= 6 && start.starts_with(b"PROXY ")) {
            break;
        }
        if !(V2_SIGNATURE.starts_with(&start[..seen.min(12)]) || b"PROXY ".starts_with(&start[..seen.min(6)]))
        {
            return Err(refused("a listed peer sent no header"));
        }
        // A listed balancer's header comes whole in one segment; a short one waits.
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    if start.starts_with(b"PROXY ") {
        read_v1(stream).await
    } else if start[..12] == V2_SIGNATURE {
        read_v2(stream).await
    } else {
        Err(refused("a listed peer sent no header"))
    }
}

async fn read_v1(stream: &mut TcpStream) -> io::Result<Option<SocketAddr>> {
    // One byte at a time up to CRLF: never a byte of the TLS hello after it.
    let mut line = Vec::with_capacity(V1_MAX);
    while !line.ends_with(b"\r\n") {
        if line.len() >= V1_MAX {
            return Err(refused("a v1 line longer than 107 bytes"));
        }
        line.push(stream.read_u8().await?);
    }
    parse_v1(&line[..line.len() - 2])
}

/// A v1 line without its CRLF.
pub fn parse_v1(line: &[u8]) -> io::Result<Option<SocketAddr>> {
    let text = std::str::from_utf8(line).map_err(|_| refused("a v1 line that is not ASCII"))?;
    let fields: Vec<&str> = text.split(' ').collect();
    match fields.as_slice() {
        ["PROXY", "UNKNOWN", ..] => Ok(None),
        ["PROXY", family @ ("TCP4" | "TCP6"), source, _destination, port, _destination_port] => {
            let ip: IpAddr = source.parse().map_err(|_| refused("a v1 source that is not an address"))?;
            if ip.is_ipv4() != (*family == "TCP4") {
                return Err(refused("a v1 source of the other family"));
            }
            let port: u16 = port.parse().map_err(|_| refused("a v1 source port that is not a port"))?;
            Ok(Some(SocketAddr::new(ip, port)))
        }
        _ => Err(refused("a v1 line that is not PROXY TCP4|TCP6 SRC DST SPORT DPORT")),
    }
}

async fn read_v2(stream: &mut TcpStream) -> io::Result<Option<SocketAddr>> {
    let mut head = [0u8; 16];
    stream.read_exact(&mut head).await?;
    let length = usize::from(u16::from_be_bytes([head[14], head[15]]));
    if length > V2_MAX {
        return Err(refused("a v2 header longer than its bound (2048 bytes after its first 16)"));
    }
    let mut rest = vec![0u8; length];
    stream.read_exact(&mut rest).await?;
    parse_v2(&head, &rest)
}

/// A v2 header: its 16 fixed bytes and the address block after them.
pub fn parse_v2(head: &[u8; 16], rest: &[u8]) -> io::Result<Option<SocketAddr>> {
    if head[..12] != V2_SIGNATURE || head[12] >> 4 != 2 {
        return Err(refused("not a v2 header"));
    }
    match head[12] & 0x0f {
        0 => return Ok(None), // LOCAL: the balancer's own connection
        1 => {}
        _ => return Err(refused("a v2 command that is neither LOCAL nor PROXY")),
    }
    let (source, addresses) = match head[13] {
        0x11 if rest.len() >= 12 => {
            let ip = Ipv4Addr::new(rest[0], rest[1], rest[2], rest[3]);
            (Some(SocketAddr::new(ip.into(), u16::from_be_bytes([rest[8], rest[9]]))), 12)
        }
        0x21 if rest.len() >= 36 => {
            let octets: [u8; 16] = rest[..16].try_into().expect("16 bytes");
            (
                Some(SocketAddr::new(
                    Ipv6Addr::from(octets).into(),
                    u16::from_be_bytes([rest[32], rest[33]]),
                )),
                36,
            )
        }
        0x00 => (None, 0), // UNSPEC: the block is all TLVs, if anything
        _ => return Err(refused("a v2 address family other than TCP over IPv4 or IPv6, or a short block")),
    };
    check_tlvs(head, rest, addresses)?;
    Ok(source)
}

/// The TLVs after the address block: each within the header, and the
/// CRC32c, when one is there, the header's own.
fn check_tlvs(head: &[u8; 16], rest: &[u8], from: usize) -> io::Result<()> {
    let mut at = from;
    while at < rest.len() {
        let Some(&[kind, high, low]) = rest.get(at..at + 3) else {
            return Err(refused("a v2 TLV cut short by the header's end"));
        };
        let length = usize::from(u16::from_be_bytes([high, low]));
        let value = at + 3..at + 3 + length;
        if value.end > rest.len() {
            return Err(refused("a v2 TLV longer than the header holds"));
        }
        if kind == PP2_TYPE_CRC32C {
            if length != 4 {
                return Err(refused("a v2 CRC32c that is not 4 bytes"));
            }
            let said = u32::from_be_bytes(rest[value.clone()].try_into().expect("4 bytes"));
            // Computed over the whole header with the checksum's bytes as zero.
            let mut whole = head.to_vec();
            whole.extend_from_slice(rest);
            whole[16 + value.start..16 + value.end].fill(0);
            if crc32c(&whole) != said {
                return Err(refused("a v2 header whose CRC32c does not match"));
            }
        }
        at = value.end;
    }
    Ok(())
}

/// CRC-32C (Castagnoli), bit by bit: headers are short and rare.
fn crc32c(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in bytes {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ 0x82f6_3b78 } else { crc >> 1 };
        }
    }
    !crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn networks() {
        let net: Trusted = "10.0.0.0/8".parse().unwrap();
        assert!(net.contains("10.1.2.3".parse().unwrap()));
        assert!(net.contains("::ffff:10.1.2.3".parse().unwrap()), "IPv4-mapped");
        assert!(!net.contains("11.0.0.1".parse().unwrap()));
        let one: Trusted = "fd00::1".parse().unwrap();
        assert!(one.contains("fd00::1".parse().unwrap()) && !one.contains("fd00::2".parse().unwrap()));
        assert!("0.0.0.0/0".parse::<Trusted>().unwrap().contains("8.8.8.8".parse().unwrap()));
        for bad in ["10.0.0.0/33", "ten", "10.0.0.0/", "::/129"] {
            assert!(bad.parse::<Trusted>().is_err(), "{bad}");
        }
    }

    #[test]
    fn v1_lines() {
        let said = parse_v1(b"PROXY TCP4 192.0.2.7 10.0.0.1 51234 8443").unwrap();
        assert_eq!(said, Some("192.0.2.7:51234".parse().unwrap()));
        let said = parse_v1(b"PROXY TCP6 2001:db8::7 2001:db8::1 51234 8443").unwrap();
        assert_eq!(said, Some("[2001:db8::7]:51234".parse().unwrap()));
        assert_eq!(parse_v1(b"PROXY UNKNOWN").unwrap(), None);
        for bad in [
            &b"PROXY TCP4 2001:db8::7 10.0.0.1 1 2"[..],
            b"PROXY TCP4 x y 1 2",
            b"PROXY UDP4 1.2.3.4 1.2.3.4 1 2",
            b"GET / HTTP/1.1",
        ] {
            assert!(parse_v1(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn v2_headers() {
        let mut head = [0u8; 16];
        head[..12].copy_from_slice(&V2_SIGNATURE);
        head[12] = 0x21;
        head[13] = 0x11;
        head[15] = 12;
        let rest = [192, 0, 2, 7, 10, 0, 0, 1, 0xc8, 0x22, 0x20, 0xfb];
        assert_eq!(parse_v2(&head, &rest).unwrap(), Some("192.0.2.7:51234".parse().unwrap()));
        head[12] = 0x20;
        assert_eq!(parse_v2(&head, &rest).unwrap(), None, "LOCAL");
        head[12] = 0x21;
        assert!(parse_v2(&head, &rest[..4]).is_err(), "a short block");
        head[12] = 0x11;
        assert!(parse_v2(&head, &rest).is_err(), "version 1 in a v2 signature");
    }

    /// A v2 header with TLVs as HAProxy's `send-proxy-v2-ssl` and
    /// `unique-id` make them, with or without a CRC32c.
    fn with_tlvs(tlvs: &[(u8, Vec<u8>)], crc: bool) -> ([u8; 16], Vec<u8>) {
        let mut rest = vec![192, 0, 2, 7, 10, 0, 0, 1, 0xc8, 0x22, 0x20, 0xfb];
        for (kind, value) in tlvs {
            rest.push(*kind);
            rest.extend((value.len() as u16).to_be_bytes());
            rest.extend(value);
        }
        if crc {
            rest.extend([PP2_TYPE_CRC32C, 0, 4, 0, 0, 0, 0]);
        }
        let mut head = [0u8; 16];
        head[..12].copy_from_slice(&V2_SIGNATURE);
        head[12] = 0x21;
        head[13] = 0x11;
        head[14..].copy_from_slice(&(rest.len() as u16).to_be_bytes());
        if crc {
            let mut whole = head.to_vec();
            whole.extend(&rest);
            let sum = crc32c(&whole).to_be_bytes();
            let at = rest.len() - 4;
            rest[at..].copy_from_slice(&sum);
        }
        (head, rest)
    }

    #[test]
    fn v2_headers_with_tlvs() {
        // PP2_TYPE_SSL with its sub-TLVs (version, CN), PP2_TYPE_UNIQUE_ID, an AWS one.
        let ssl = [
            vec![0x01, 0, 0, 0, 0],
            vec![0x21, 0, 7],
            b"TLSv1.3".to_vec(),
            vec![0x22, 0, 4],
            b"node".to_vec(),
        ]
        .concat();
        let tlvs = vec![(0x20, ssl), (0x05, vec![b'u'; 128]), (0xEA, b"\x01vpce-0123456789abcdef".to_vec())];
        let source = Some("192.0.2.7:51234".parse().unwrap());
        for crc in [false, true] {
            let (head, rest) = with_tlvs(&tlvs, crc);
            assert_eq!(parse_v2(&head, &rest).unwrap(), source, "crc {crc}");
        }
        let (head, mut rest) = with_tlvs(&tlvs, true);
        rest[20] ^= 1;
        assert!(parse_v2(&head, &rest).unwrap_err().to_string().contains("CRC32c"), "a flipped bit");
        let (head, mut rest) = with_tlvs(&tlvs, false);
        rest.truncate(rest.len() - 1);
        assert!(parse_v2(&head, &rest).is_err(), "a TLV past the end");
        assert_eq!(crc32c(b"123456789"), 0xe306_9283, "the check value of CRC-32C");
    }
}

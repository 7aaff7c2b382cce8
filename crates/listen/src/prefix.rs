//! Whose connection or request it is, as the caps and rate limits count
//! it: a source (an IPv4 address; an IPv6 /64, what one host is given) and
//! a network (an IPv4 /24; an IPv6 /48, a site's allocation), so one
//! attacker's many addresses count together.
//!
//! Invariant: an IPv4-mapped IPv6 address (`::ffff:10.0.0.1`, a dual-stack
//! socket's view of an IPv4 peer) counts as the IPv4 address it is.

use std::net::IpAddr;

use ipnet::IpNet;

/// A source: an IPv4 address, an IPv6 /64.
pub fn source_key(ip: IpAddr) -> IpAddr {
    within(ip, 32, 64)
}

/// A network: an IPv4 /24, an IPv6 /48.
pub fn network_key(ip: IpAddr) -> IpAddr {
    within(ip, 24, 48)
}

/// The network of `ip` (canonical) of `v4` or `v6` bits.
fn within(ip: IpAddr, v4: u8, v6: u8) -> IpAddr {
    let ip = ip.to_canonical();
    let bits = if ip.is_ipv4() { v4 } else { v6 };
    // Both lengths are within their family's: never refused.
    IpNet::new(ip, bits).map_or(ip, |net| net.network())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn sources_and_networks_are_the_prefixes_they_say() {
        assert_eq!(source_key(ip("::ffff:10.0.0.1")), ip("10.0.0.1"));
        assert_eq!(source_key(ip("10.0.0.1")), ip("10.0.0.1"));
        assert_eq!(source_key(ip("2001:db8:1:2:3:4:5:6")), ip("2001:db8:1:2::"));
        assert_eq!(network_key(ip("10.0.7.9")), ip("10.0.7.0"));
        assert_eq!(network_key(ip("::ffff:10.0.7.9")), ip("10.0.7.0"));
        assert_eq!(network_key(ip("2001:db8:1:2:3:4:5:6")), ip("2001:db8:1::"));
    }
}

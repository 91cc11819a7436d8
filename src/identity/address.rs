//! The client address as a counter key.
//!
//! A caller is the network its address belongs to: IPv4 addresses per
//! `/32` by default (each address), IPv6 addresses per `/64` (one
//! subscriber usually holds a /64, and an address rotated inside it must
//! not make a fresh caller each time). An IPv4-mapped IPv6 address
//! (`::ffff:a.b.c.d`, a dual-stack listener's view of an IPv4 client) is
//! that IPv4 address. Text that is no IP address (a Unix socket peer, a
//! missing `source.address`) is keyed by itself: still counted, apart from
//! every address, and never a reason to fail.

use std::fmt;
use std::hash::Hasher;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Envoy's `source.address` is `ip:port` (`[v6]:port` for IPv6): keep the
/// ip, so one client's connections share one counter.
pub(crate) fn strip_port(addr: &str) -> &str {
    if let Some(rest) = addr.strip_prefix('[') {
        return rest.split_once(']').map_or(rest, |(ip, _)| ip);
    }
    match addr.rsplit_once(':') {
        Some((ip, port)) if !ip.contains(':') && port.bytes().all(|b| b.is_ascii_digit()) => ip,
        _ => addr,
    }
}

pub use crate::config::plan::Prefixes;

/// The network a client is counted under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Network<'a> {
    V4 {
        net: Ipv4Addr,
        len: u8,
    },
    V6 {
        net: Ipv6Addr,
        len: u8,
    },
    /// Not an IP address: the text as Envoy gave it.
    Other(&'a str),
}

/// The network of `addr` (no port) under `prefixes`.
pub fn network(addr: &str, prefixes: Prefixes) -> Network<'_> {
    // A scope (`fe80::1%eth0`) says which interface, not who.
    let ip = addr.split_once('%').map_or(addr, |(ip, _)| ip);
    match ip.parse::<IpAddr>() {
        Ok(IpAddr::V4(a)) => v4(a, prefixes.ipv4),
        Ok(IpAddr::V6(a)) => match a.to_ipv4_mapped() {
            Some(a) => v4(a, prefixes.ipv4),
            None => {
                let len = prefixes.ipv6.min(128);
                let mask = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
                Network::V6 {
                    net: Ipv6Addr::from(u128::from(a) & mask),
                    len,
                }
            }
        },
        Err(_) => Network::Other(addr),
    }
}

fn v4(a: Ipv4Addr, len: u8) -> Network<'static> {
    let len = len.min(32);
    let mask = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
    Network::V4 {
        net: Ipv4Addr::from(u32::from(a) & mask),
        len,
    }
}

impl Network<'_> {
    /// Feeds the network to a key hash: a family tag, the prefix length and
    /// the masked bits — one input per network, whatever the spelling of
    /// the address, and none shared with another family or with text.
    pub(crate) fn hash_into<H: Hasher>(&self, h: &mut H) {
        match self {
            Network::V4 { net, len } => {
                h.write_u8(4);
                h.write_u8(*len);
                h.write(&net.octets());
            }
            Network::V6 { net, len } => {
                h.write_u8(6);
                h.write_u8(*len);
                h.write(&net.octets());
            }
            Network::Other(text) => {
                h.write_u8(0);
                h.write(text.as_bytes());
            }
        }
    }
}

/// The canonical form: `10.0.0.1`, `10.0.0.0/24`, `2001:db8:1:2::/64`.
impl fmt::Display for Network<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Network::V4 { net, len: 32 } => write!(f, "{net}"),
            Network::V4 { net, len } => write!(f, "{net}/{len}"),
            Network::V6 { net, len: 128 } => write!(f, "{net}"),
            Network::V6 { net, len } => write!(f, "{net}/{len}"),
            Network::Other(text) => f.write_str(text),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_stripped_from_v4_and_v6() {
        assert_eq!(strip_port("127.0.0.1:37220"), "127.0.0.1");
        assert_eq!(strip_port("[::1]:8080"), "::1");
        assert_eq!(strip_port("[2001:db8::1]:1"), "2001:db8::1");
        assert_eq!(strip_port("2001:db8::1"), "2001:db8::1");
        assert_eq!(strip_port("10.0.0.1"), "10.0.0.1");
        assert_eq!(strip_port(""), "");
    }

    fn canonical(addr: &str, ipv4: u8, ipv6: u8) -> String {
        network(addr, Prefixes { ipv4, ipv6 }).to_string()
    }

    #[test]
    fn addresses_are_masked_to_their_family_prefix() {
        assert_eq!(canonical("10.1.2.3", 32, 64), "10.1.2.3");
        assert_eq!(canonical("10.1.2.3", 24, 64), "10.1.2.0/24");
        assert_eq!(canonical("10.1.2.3", 1, 64), "0.0.0.0/1");
        assert_eq!(canonical("200.1.2.3", 1, 64), "128.0.0.0/1");
        assert_eq!(
            canonical("2001:db8:1:2:3:4:5:6", 32, 64),
            "2001:db8:1:2::/64"
        );
        assert_eq!(
            canonical("2001:DB8:1:2:0:0:0:6", 32, 64),
            "2001:db8:1:2::/64"
        );
        assert_eq!(canonical("2001:db8:1:2:3:4:5:6", 32, 48), "2001:db8:1::/48");
        assert_eq!(
            canonical("2001:db8:1:2:3:4:5:6", 32, 128),
            "2001:db8:1:2:3:4:5:6"
        );
        assert_eq!(canonical("2001:db8::1", 32, 1), "::/1");
        assert_eq!(canonical("::1", 32, 64), "::/64");
        assert_eq!(canonical("::1", 32, 128), "::1");
        assert_eq!(canonical("fe80::1%eth0", 32, 128), "fe80::1");
    }

    #[test]
    fn ipv4_mapped_addresses_are_ipv4() {
        assert_eq!(canonical("::ffff:10.1.2.3", 32, 64), "10.1.2.3");
        assert_eq!(canonical("::FFFF:a01:203", 24, 64), "10.1.2.0/24");
        assert_eq!(
            network("::ffff:10.1.2.3", Prefixes::default()),
            network("10.1.2.3", Prefixes::default())
        );
    }

    #[test]
    fn text_that_is_no_address_is_kept_as_it_is() {
        for odd in [
            "",
            "/run/envoy.sock",
            "10.0.0.256",
            "1.2.3",
            "2001:db8::1::2",
            "[::1]",
        ] {
            assert_eq!(network(odd, Prefixes::default()), Network::Other(odd));
        }
    }

    #[test]
    fn out_of_range_prefixes_never_panic() {
        let p = Prefixes { ipv4: 0, ipv6: 0 };
        assert_eq!(network("10.1.2.3", p).to_string(), "0.0.0.0/0");
        assert_eq!(network("2001:db8::1", p).to_string(), "::/0");
        let p = Prefixes {
            ipv4: 200,
            ipv6: 200,
        };
        assert_eq!(network("10.1.2.3", p).to_string(), "10.1.2.3");
        assert_eq!(network("2001:db8::1", p).to_string(), "2001:db8::1");
    }
}

//! The client address as a counter key.

/// Envoy's `source.address` is `ip:port` (`[v6]:port` for IPv6): keep the
/// ip, so one client's connections share one counter.
pub fn strip_port(addr: &str) -> &str {
    if let Some(rest) = addr.strip_prefix('[') {
        return rest.split_once(']').map_or(rest, |(ip, _)| ip);
    }
    match addr.rsplit_once(':') {
        Some((ip, port)) if !ip.contains(':') && port.bytes().all(|b| b.is_ascii_digit()) => ip,
        _ => addr,
    }
}

#[cfg(test)]
mod tests {
    use super::strip_port;

    #[test]
    fn ports_are_stripped_from_v4_and_v6() {
        assert_eq!(strip_port("127.0.0.1:37220"), "127.0.0.1");
        assert_eq!(strip_port("[::1]:8080"), "::1");
        assert_eq!(strip_port("[2001:db8::1]:1"), "2001:db8::1");
        assert_eq!(strip_port("2001:db8::1"), "2001:db8::1");
        assert_eq!(strip_port("10.0.0.1"), "10.0.0.1");
        assert_eq!(strip_port(""), "");
    }
}

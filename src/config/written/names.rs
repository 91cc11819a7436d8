//! The names a configuration may give: its own (instances, routes, bounds)
//! and request headers.

/// A name of ours: `[A-Za-z0-9_-]`, 1 to 64 bytes (it goes into stat names
/// and shared-data keys).
pub(crate) fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// A lowercase request header name a trusted filter can set.
pub(crate) fn is_header_name(v: &str) -> bool {
    !v.is_empty()
        && !v.starts_with(':')
        && v.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
}

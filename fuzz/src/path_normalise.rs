//! Checks of a path normaliser (`fn(&str) -> Cow<str>`), whatever its
//! input:
//!
//! - it is idempotent, and a path it returns comes back borrowed (a
//!   normal path costs no allocation on the request path);
//! - for an origin-form path (starts with `/`, every `%` followed by two
//!   hex digits): the result starts with `/`, has no query, no empty
//!   segment (`//` merged), no `.` or `..` segment (resolved, never above
//!   the root) and no percent-encoded unreserved character (decoded first,
//!   so `%2E%2E` is resolved like `..`).

use std::borrow::Cow;

/// The normaliser under test.
pub type Normaliser = for<'a> fn(&'a str) -> Cow<'a, str>;

pub fn check(normalise: Normaliser, raw: &str) {
    let once = normalise(raw);
    let twice = normalise(&once);
    assert_eq!(
        twice, once,
        "not idempotent: {raw:?} → {once:?} → {twice:?}"
    );
    assert!(
        matches!(twice, Cow::Borrowed(_)),
        "the normal path {once:?} is copied again"
    );
    if !origin_form(raw) {
        return;
    }
    assert!(once.starts_with('/'), "{raw:?} → {once:?}: not a path");
    assert!(!once.contains('?'), "{raw:?} → {once:?}: query kept");
    // The root itself is the one empty segment a path may end with.
    let segments: Vec<&str> = once[1..].split('/').collect();
    for (i, s) in segments.iter().enumerate() {
        let last = i + 1 == segments.len();
        assert!(
            !s.is_empty() || last,
            "{raw:?} → {once:?}: an empty segment (// not merged)"
        );
        assert!(
            *s != "." && *s != "..",
            "{raw:?} → {once:?}: a dot segment left"
        );
    }
    if let Some(at) = encoded_unreserved(&once) {
        panic!("{raw:?} → {once:?}: an encoded unreserved character at byte {at}");
    }
}

/// Starts with `/`, and every `%` is followed by two hex digits.
fn origin_form(raw: &str) -> bool {
    let b = raw.as_bytes();
    raw.starts_with('/')
        && b.iter().enumerate().all(|(i, &c)| {
            c != b'%'
                || (b.get(i + 1).is_some_and(u8::is_ascii_hexdigit)
                    && b.get(i + 2).is_some_and(u8::is_ascii_hexdigit))
        })
}

/// Where `%XX` encodes an RFC 3986 unreserved character, if anywhere.
fn encoded_unreserved(path: &str) -> Option<usize> {
    let b = path.as_bytes();
    (0..b.len()).find(|&i| {
        b[i] == b'%'
            && b.get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .is_some_and(|c| c.is_ascii_alphanumeric() || b"-._~".contains(&c))
    })
}

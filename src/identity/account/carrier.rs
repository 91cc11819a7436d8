//! What a sign-in's head says before its body is read: whether the body is
//! in the carrier's form (content type, charset, no content encoding), and
//! every other place that names the account — the query string, or every
//! copy of the header that carries it.

use super::body;
use super::{Place, Seen, Unreadable};

/// The parts of a request head the account rule reads (every copy of each
/// header, as sent).
#[derive(Debug, Clone, Default)]
pub struct Head<'a> {
    pub content_type: &'a [Vec<u8>],
    pub content_encoding: &'a [Vec<u8>],
    /// `:path`, query string included.
    pub path: Option<&'a str>,
    /// Every value of the carrier header (header carriers only).
    pub header: &'a [Vec<u8>],
}

pub fn read(place: Place, head: &Head) -> Result<Seen, Unreadable> {
    let mut seen = Seen::default();
    let (field, media) = match place {
        Place::Header(_) => {
            // A header sent twice is read as the first copy, the last, or
            // both joined (`a,a`, `a, a`): never one account for sure.
            if head.header.len() > 1 {
                seen.add(Err(Unreadable::Ambiguous));
            }
            for v in head.header {
                match std::str::from_utf8(v) {
                    Ok(s) if s.is_ascii() => seen.add_raw(s),
                    _ => seen.add(Err(Unreadable::NotAscii)),
                }
            }
            return Ok(seen);
        }
        Place::Json(f) => (f, "application/json"),
        Place::Form(f) => (f, "application/x-www-form-urlencoded"),
    };
    if head
        .content_encoding
        .iter()
        .any(|e| !e.trim_ascii().eq_ignore_ascii_case(b"identity"))
    {
        return Err(Unreadable::ContentEncoding);
    }
    match head.content_type {
        [one] if is_media(one, media) => {}
        _ => return Err(Unreadable::ContentType),
    }
    if let Some(query) = head.path.and_then(|p| p.split_once('?')).map(|(_, q)| q) {
        let query = query.split_once('#').map_or(query, |(q, _)| q);
        body::form(field, query.as_bytes(), &mut seen);
    }
    Ok(seen)
}

/// `value` is the media type `want`, with no charset or `charset=utf-8`
/// (quoted or not, any case) and no other parameter twice.
fn is_media(value: &[u8], want: &str) -> bool {
    let Ok(v) = std::str::from_utf8(value) else {
        return false;
    };
    let mut parts = v.split(';');
    let media = parts.next().unwrap_or_default().trim();
    if !media.eq_ignore_ascii_case(want) {
        return false;
    }
    let mut charsets = 0;
    for param in parts.map(str::trim).filter(|p| !p.is_empty()) {
        let Some((name, value)) = param.split_once('=') else {
            return false;
        };
        if name.trim().eq_ignore_ascii_case("charset") {
            charsets += 1;
            let value = value.trim();
            let value = value
                .strip_prefix('"')
                .and_then(|v| v.strip_suffix('"'))
                .unwrap_or(value);
            if !value.eq_ignore_ascii_case("utf-8") {
                return false;
            }
        }
    }
    charsets <= 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ct(v: &str) -> Result<Seen, Unreadable> {
        let types = [v.as_bytes().to_vec()];
        read(
            Place::Json("username"),
            &Head {
                content_type: &types,
                ..Head::default()
            },
        )
    }

    #[test]
    fn the_carriers_content_type_with_utf8_or_no_charset() {
        for ok in [
            "application/json",
            "Application/JSON",
            "application/json; charset=utf-8",
            "application/json;charset=\"UTF-8\"",
        ] {
            assert!(ct(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "text/plain",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
            "application/json; charset=utf-16",
            "application/json; charset=utf-8; charset=latin1",
            // Twice, even alike: a type said twice is not one to read.
            "application/json; charset=utf-8; charset=UTF-8",
            "application/jsonx",
            "application/json; junk",
        ] {
            assert_eq!(ct(bad), Err(Unreadable::ContentType), "{bad:?}");
        }
        let two = [b"application/json".to_vec(), b"application/json".to_vec()];
        let head = Head {
            content_type: &two,
            ..Head::default()
        };
        assert_eq!(
            read(Place::Json("username"), &head),
            Err(Unreadable::ContentType)
        );
        assert_eq!(
            read(Place::Json("username"), &Head::default()),
            Err(Unreadable::ContentType),
            "no content type"
        );
    }

    #[test]
    fn a_compressed_body_is_not_read() {
        let types = [b"application/x-www-form-urlencoded".to_vec()];
        for (enc, ok) in [("gzip", false), ("identity", true), ("br", false)] {
            let encs = [enc.as_bytes().to_vec()];
            let head = Head {
                content_type: &types,
                content_encoding: &encs,
                ..Head::default()
            };
            let got = read(Place::Form("username"), &head);
            assert_eq!(got.is_ok(), ok, "{enc}");
        }
    }

    #[test]
    fn the_query_string_names_the_account_too() {
        let types = [b"application/json".to_vec()];
        let at = |path: &str| {
            let head = Head {
                content_type: &types,
                path: Some(path),
                ..Head::default()
            };
            read(Place::Json("username"), &head).map(Seen::account)
        };
        assert_eq!(at("/login?USERNAME=Alice&x=1"), Ok(Ok("alice".into())));
        assert_eq!(at("/login?user%4eame=bob"), Ok(Ok("bob".into())));
        assert_eq!(
            at("/login?username=a&username=b"),
            Ok(Err(Unreadable::Ambiguous))
        );
        assert_eq!(at("/login?other=1"), Ok(Err(Unreadable::Missing)));
        assert_eq!(at("/login?username=%ff"), Ok(Err(Unreadable::NotUtf8)));
        assert_eq!(at("/login#username=x"), Ok(Err(Unreadable::Missing)));
        // Rack 2 splits a query string on `;` as on `&`.
        assert_eq!(at("/login?x=1;username=victim"), Ok(Ok("victim".into())));
        for two in [
            "/login?username=a;b",
            "/login?username=victim;username=decoy",
            "/login?username=victim;x=1",
        ] {
            assert_eq!(at(two), Ok(Err(Unreadable::Ambiguous)), "{two}");
        }
    }

    #[test]
    fn every_copy_of_a_carrier_header() {
        let read_h = |values: &[&[u8]]| {
            let vs: Vec<Vec<u8>> = values.iter().map(|v| v.to_vec()).collect();
            let head = Head {
                header: &vs,
                ..Head::default()
            };
            read(Place::Header("x-login"), &head).and_then(Seen::account)
        };
        assert_eq!(read_h(&[b"Alice"]), Ok("alice".into()));
        // Django reads `alice,alice`, Express `alice, alice` (the oracle).
        assert_eq!(read_h(&[b"alice", b"alice"]), Err(Unreadable::Ambiguous));
        assert_eq!(read_h(&[b"Alice", b" alice"]), Err(Unreadable::Ambiguous));
        assert_eq!(read_h(&[b"decoy", b"alice"]), Err(Unreadable::Ambiguous));
        assert_eq!(read_h(&[]), Err(Unreadable::Missing));
        assert_eq!(read_h(&[b"\xffx"]), Err(Unreadable::NotAscii));
        // UTF-8 `josé`: Django and Express read the bytes as latin-1, `josÃ©`.
        assert_eq!(read_h(&["jos\u{e9}".as_bytes()]), Err(Unreadable::NotAscii));
    }
}

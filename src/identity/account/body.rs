//! The account in a whole sign-in body: every top-level member of a JSON
//! object, every pair of a urlencoded form, whose name is any spelling of
//! the field's.

use super::normalize::fold;
use super::{Place, Seen, Unreadable};

pub fn read(place: Place, body: &[u8], mut seen: Seen) -> Result<String, Unreadable> {
    // A NUL is never in a JSON text or a form as sent: it is what UTF-16
    // (or UTF-32) looks like byte by byte.
    let utf16 = body.contains(&0);
    if utf16 || body.starts_with(b"\xEF\xBB\xBF") || std::str::from_utf8(body).is_err() {
        return Err(Unreadable::NotUtf8);
    }
    match place {
        Place::Json(field) => json(field, body, &mut seen)?,
        Place::Form(field) => form(field, body, &mut seen),
        Place::Header(_) => {}
    }
    seen.account()
}

/// `name` is the field to a server that compares names case-insensitively
/// or after normalising them.
pub(crate) fn same_field(name: &str, field: &str) -> bool {
    name == field || fold(name) == fold(field)
}

/// Every member of the top-level object (a generic JSON value keeps only
/// the last of a repeated name, and exact names only).
fn json(field: &str, body: &[u8], seen: &mut Seen) -> Result<(), Unreadable> {
    use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
    struct Members<'f, 's>(&'f str, &'s mut Seen);
    impl<'de> Visitor<'de> for Members<'_, '_> {
        type Value = ();
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a JSON object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                if same_field(&key, self.0) {
                    let v: serde_json::Value = map.next_value()?;
                    self.1.add(match v.as_str() {
                        Some(s) => super::key(s),
                        None => Err(Unreadable::NotAString),
                    });
                } else {
                    map.next_value::<IgnoredAny>()?;
                }
            }
            Ok(())
        }
    }
    let mut de = serde_json::Deserializer::from_slice(body);
    de.deserialize_map(Members(field, seen))
        .and_then(|()| de.end())
        .map_err(|_| Unreadable::Malformed)
}

/// Every `name=value` pair of a urlencoded form or a query string whose
/// name is a spelling of `field`, split as every common server splits it:
/// on `&`, and on `&` and `;` (Rack 2 a query string; Python's `parse_qsl`
/// before 3.9.2, and the frameworks on it, a body too). A pair that one
/// split reads and the other does not is one more place naming the
/// account; `a=1;username=x` names `x`, and `username=a;b` names both
/// `a;b` and `a`: ambiguous. A name that does not decode might be the
/// field to a server that decodes it another way: unreadable too.
pub fn form(field: &str, query: &[u8], seen: &mut Seen) {
    pairs(field, query, b"&", seen);
    if query.contains(&b';') {
        pairs(field, query, b"&;", seen);
    }
}

fn pairs(field: &str, body: &[u8], separators: &[u8], seen: &mut Seen) {
    for pair in body
        .split(|b| separators.contains(b))
        .filter(|p| !p.is_empty())
    {
        let mut kv = pair.splitn(2, |b| *b == b'=');
        match decode_form(kv.next().unwrap_or_default()) {
            Ok(k) if same_field(&k, field) => {
                seen.add(decode_form(kv.next().unwrap_or_default()).and_then(|v| super::key(&v)))
            }
            // `username[]`, `username[a]`: the field to qs, Rack and PHP, as
            // a list or a map (which Devise reads as `["a"]`): never one
            // account for sure.
            Ok(k)
                if k.split_once('[')
                    .is_some_and(|(name, _)| same_field(name, field)) =>
            {
                seen.add(Err(Unreadable::Ambiguous))
            }
            Ok(_) => {}
            Err(e) => seen.add(Err(e)),
        }
    }
}

/// `+` and `%XX` decoded.
fn decode_form(raw: &[u8]) -> Result<String, Unreadable> {
    let mut out = Vec::with_capacity(raw.len());
    let mut it = raw.iter();
    while let Some(&b) = it.next() {
        match b {
            b'+' => out.push(b' '),
            b'%' => {
                let mut digit = || {
                    it.next()
                        .and_then(|d| char::from(*d).to_digit(16))
                        .ok_or(Unreadable::Malformed)
                };
                let hi = digit()?;
                let lo = digit()?;
                out.push((hi << 4 | lo) as u8);
            }
            _ => out.push(b),
        }
    }
    String::from_utf8(out).map_err(|_| Unreadable::NotUtf8)
}

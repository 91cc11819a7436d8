//! The account a sign-in request tries, for `per: account` bounds: read from
//! a JSON body field, a urlencoded form field or a header, then normalised
//! so that `Alice ` and `alice` are one account.
//!
//! Nothing here trusts the request: a body over the configured cap, a
//! malformed body, a field that is not a string, or an empty name all mean
//! "no account", and the caller is then counted per address under a key no
//! account can produce (see `pipeline::installation`). A body that names
//! the field twice with different accounts is [`Found::Ambiguous`]: servers
//! disagree on which one counts (first, last), so an attacker could be
//! counted under one and sign in as the other.

use crate::config::AccountSource;

/// Where the account is, once the route's source is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place<'a> {
    Json(&'a str),
    Form(&'a str),
    Header(&'a str),
}

pub fn place(s: &AccountSource) -> Option<Place<'_>> {
    s.json
        .as_deref()
        .map(Place::Json)
        .or_else(|| s.form.as_deref().map(Place::Form))
        .or_else(|| s.header.as_deref().map(Place::Header))
}

/// Trimmed and case-folded (Unicode lowercase: `ÄLICE` and `älice` are
/// one account); `None` when nothing is left.
pub fn normalize(raw: &str) -> Option<String> {
    let t = raw.trim();
    (!t.is_empty()).then(|| t.to_lowercase())
}

/// What a request says about its account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    Account(String),
    Missing,
    /// Two different accounts in one request.
    Ambiguous,
}

impl Found {
    /// Every occurrence of the field, normalised: one account, none, or
    /// several that disagree.
    fn of(values: impl IntoIterator<Item = Option<String>>) -> Found {
        let mut found = Found::Missing;
        for v in values {
            match (&found, v) {
                (_, None) => {}
                (Found::Missing, Some(a)) => found = Found::Account(a),
                (Found::Account(a), Some(b)) if *a == b => {}
                _ => return Found::Ambiguous,
            }
        }
        found
    }
}

/// The account in a whole body (the caller has checked it is complete and
/// within the cap).
pub fn from_body(place: Place, body: &[u8]) -> Found {
    match place {
        Place::Json(field) => from_json(field, body),
        Place::Form(field) => from_form(field, body),
        Place::Header(_) => Found::Missing,
    }
}

/// A top-level string field of a JSON object; every occurrence of the key
/// is read (a generic JSON value would keep only the last).
fn from_json(field: &str, body: &[u8]) -> Found {
    use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
    struct Fields<'f>(&'f str);
    impl<'de> Visitor<'de> for Fields<'_> {
        type Value = Vec<Option<String>>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a JSON object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut seen = Vec::new();
            while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                if key == self.0 {
                    let v: serde_json::Value = map.next_value()?;
                    seen.push(v.as_str().and_then(normalize));
                } else {
                    map.next_value::<IgnoredAny>()?;
                }
            }
            Ok(seen)
        }
    }
    let mut de = serde_json::Deserializer::from_slice(body);
    match de.deserialize_map(Fields(field)) {
        Ok(seen) if de.end().is_ok() => Found::of(seen),
        _ => Found::Missing,
    }
}

/// Every `field=value` of an `application/x-www-form-urlencoded` body,
/// `+` and percent escapes decoded. An undecodable value is no account.
fn from_form(field: &str, body: &[u8]) -> Found {
    Found::of(body.split(|b| *b == b'&').filter_map(|pair| {
        let mut kv = pair.splitn(2, |b| *b == b'=');
        let key = decode_form(kv.next()?)?;
        (key == field)
            .then(|| decode_form(kv.next().unwrap_or_default()).and_then(|v| normalize(&v)))
    }))
}

fn decode_form(raw: &[u8]) -> Option<String> {
    let mut out = Vec::with_capacity(raw.len());
    let mut it = raw.iter();
    while let Some(&b) = it.next() {
        match b {
            b'+' => out.push(b' '),
            b'%' => {
                let hi = hex(*it.next()?)?;
                let lo = hex(*it.next()?)?;
                out.push(hi << 4 | lo);
            }
            _ => out.push(b),
        }
    }
    String::from_utf8(out).ok()
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_account_however_spelled() {
        assert_eq!(normalize("  Alice "), Some("alice".into()));
        assert_eq!(normalize("ÄLICE"), normalize("älice"));
        assert_eq!(normalize(" \t "), None);
    }

    #[test]
    fn json_field_only_when_a_string_at_the_top() {
        let j = Place::Json("username");
        let alice = Found::Account("alice".into());
        assert_eq!(
            from_body(j, br#"{"username":" Alice","password":"x"}"#),
            alice
        );
        assert_eq!(from_body(j, br#"{"username":42}"#), Found::Missing);
        assert_eq!(
            from_body(j, br#"{"user":{"username":"a"}}"#),
            Found::Missing
        );
        assert_eq!(from_body(j, br#"["username"]"#), Found::Missing);
        assert_eq!(
            from_body(j, br#"{"username":"ali"#),
            Found::Missing,
            "truncated"
        );
        assert_eq!(
            from_body(j, br#"{"username":"a"} x"#),
            Found::Missing,
            "trailing"
        );
        assert_eq!(from_body(j, b"\xff\xfe"), Found::Missing);
        assert_eq!(
            from_body(j, br#"{"username":"bob","username":"alice"}"#),
            Found::Ambiguous
        );
        assert_eq!(
            from_body(j, br#"{"username":"Alice","username":"alice "}"#),
            alice
        );
    }

    #[test]
    fn form_field_decoded() {
        let f = Place::Form("username");
        assert_eq!(
            from_body(f, b"password=x&username=Al%69ce+B"),
            Found::Account("alice b".into())
        );
        assert_eq!(
            from_body(f, b"user%6eame=bob"),
            Found::Account("bob".into())
        );
        assert_eq!(from_body(f, b"username=%zz"), Found::Missing);
        assert_eq!(from_body(f, b"username="), Found::Missing);
        assert_eq!(from_body(f, b"other=1"), Found::Missing);
        assert_eq!(from_body(f, b""), Found::Missing);
        assert_eq!(from_body(f, b"username=eve&username=bob"), Found::Ambiguous);
    }
}

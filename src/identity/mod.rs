//! Who the caller is, as far as bounds care: decoded from values the host
//! hands over (JWT claims, the mTLS peer, trusted headers, a session answer).
//! Nothing here reads from the host; it only interprets bytes.

pub mod account;
pub mod address;
pub mod cache;
pub mod jwt_token;

use crate::config::{Access, JwtSource};
use crate::count::bytes::{read_f64, read_u32};
use std::fmt;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Identity {
    pub user: Option<String>,
    pub org: Option<String>,
    /// The id of the credential used (never the secret itself).
    pub token: Option<String>,
    pub roles: Vec<String>,
}

impl Identity {
    /// A verified principal was named.
    pub(crate) fn authenticated(&self) -> bool {
        self.user.is_some() || self.token.is_some()
    }

    /// Fills what `self` lacks from `other` (earlier sources win); roles add up.
    pub fn merge(&mut self, other: Identity) {
        self.user = self.user.take().or(other.user);
        self.org = self.org.take().or(other.org);
        self.token = self.token.take().or(other.token);
        for r in other.roles {
            if !self.roles.contains(&r) {
                self.roles.push(r);
            }
        }
    }
}

impl Access {
    /// Any listed grant matches; no grant means everybody.
    pub fn admits(&self, who: Option<&Identity>) -> bool {
        if self.is_everybody() {
            return true;
        }
        let authenticated = who.is_some_and(Identity::authenticated);
        (self.authenticated && authenticated)
            || (self.anonymous && !authenticated)
            || who.is_some_and(|w| {
                w.roles.iter().any(|r| self.roles.contains(r))
                    || w.org.as_ref().is_some_and(|o| self.orgs.contains(o))
            })
    }
}

/// A claim or header value as text: empty values name nobody. Numbers
/// arrive as 8-byte little-endian f64 (integers are printed without ".0").
pub fn text(bytes: &[u8]) -> Option<String> {
    if bytes.is_empty() {
        return None;
    }
    if let Ok(s) = std::str::from_utf8(bytes) {
        if !s.chars().any(char::is_control) {
            let s = s.trim();
            return (!s.is_empty()).then(|| s.to_string());
        }
    }
    if let Some(f) = read_f64(bytes, 0).filter(|_| bytes.len() == 8) {
        if f.is_finite() {
            // Display writes a whole number without ".0" and never in
            // exponent form; -0 names whom 0 names.
            let f = if f == 0.0 { 0.0 } else { f };
            return Some(f.to_string());
        }
    }
    None
}

/// A list of roles from whatever shape the source used: a JSON array, a
/// space- or comma-delimited string (`scope`), or proxy-wasm pairs.
pub fn roles(bytes: &[u8]) -> Vec<String> {
    if let Some(pairs) = pairs(bytes) {
        return pairs
            .into_iter()
            .flat_map(|(k, v)| [k, v])
            .filter(|s| !s.is_empty())
            .collect();
    }
    let Ok(s) = std::str::from_utf8(bytes) else {
        return Vec::new();
    };
    if let Ok(list) = serde_json::from_str::<Vec<serde_json::Value>>(s) {
        return list
            .iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect();
    }
    s.split([' ', ','])
        .map(str::trim)
        .filter(|r| !r.is_empty())
        .map(str::to_string)
        .collect()
}

/// proxy-wasm map encoding: count, then (key length, value length) pairs,
/// then each key and value followed by a NUL.
fn pairs(bytes: &[u8]) -> Option<Vec<(String, String)>> {
    let word = |at: usize| read_u32(bytes, at).map(|n| n as usize);
    let n = word(0)?;
    if n == 0 || n > 1_000 {
        return None;
    }
    let mut sizes = Vec::with_capacity(n);
    for i in 0..n {
        sizes.push((word(4 + 8 * i)?, word(8 + 8 * i)?));
    }
    let mut at = 4 + 8 * n;
    let mut out = Vec::with_capacity(n);
    for (k, v) in sizes {
        let key = bytes.get(at..at + k)?;
        at += k + 1;
        let value = bytes.get(at..at + v)?;
        at += v + 1;
        out.push((
            String::from_utf8_lossy(key).into_owned(),
            String::from_utf8_lossy(value).into_owned(),
        ));
    }
    (at == bytes.len()).then_some(out)
}

/// The identity in a JWT's claims, `claim` giving each configured claim
/// (dotted path) as the bytes Envoy hands over for it. Shared by the
/// metadata jwt_authn wrote and the token itself, so both read alike.
pub(crate) fn from_claims(
    jwt: &JwtSource,
    mut claim: impl FnMut(&str) -> Option<Vec<u8>>,
) -> Identity {
    let mut read = |name: Option<&str>| name.and_then(&mut claim);
    let user = read(Some(&jwt.user_claim)).and_then(|b| text(&b));
    let org = read(jwt.org_claim.as_deref()).and_then(|b| text(&b));
    let token = read(jwt.token_claim.as_deref()).and_then(|b| text(&b));
    let roles = read(jwt.roles_claim.as_deref())
        .map(|b| roles(&b))
        .unwrap_or_default();
    Identity {
        user,
        org,
        token,
        roles,
    }
}

/// The identity of an mTLS peer from its URI SAN (`spiffe://td/ns/NS/sa/SA`).
pub(crate) fn from_spiffe(uri: &str, org_from_namespace: bool) -> Identity {
    let org = org_from_namespace
        .then(|| {
            let mut parts = uri.split('/');
            parts
                .find(|p| *p == "ns")
                .and(parts.next())
                .map(str::to_string)
        })
        .flatten()
        .filter(|o| !o.is_empty());
    Identity {
        user: (!uri.is_empty()).then(|| uri.to_string()),
        org,
        ..Identity::default()
    }
}

/// The JSON type of a value, as an error names it instead of the value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum JsonType {
    Null,
    Boolean,
    Number,
    String,
    List,
    Object,
}

impl JsonType {
    fn of(v: &serde_json::Value) -> JsonType {
        use serde_json::Value;
        match v {
            Value::Null => JsonType::Null,
            Value::Bool(_) => JsonType::Boolean,
            Value::Number(_) => JsonType::Number,
            Value::String(_) => JsonType::String,
            Value::Array(_) => JsonType::List,
            Value::Object(_) => JsonType::Object,
        }
    }
}

impl fmt::Display for JsonType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            JsonType::Null => "null",
            JsonType::Boolean => "a boolean",
            JsonType::Number => "a number",
            JsonType::String => "a string",
            JsonType::List => "a list",
            JsonType::Object => "an object",
        })
    }
}

/// Why a session resolve gave no identity. It is logged, so it names
/// fields and JSON types only: never a value from the answer (a user, a
/// token id, roles) — serde's own messages quote them, so none is passed on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SessionError {
    /// A 200 without a body.
    Empty,
    /// A status that means neither an identity nor "not signed in"
    /// (`None`: not a number).
    Status(Option<u16>),
    /// Not JSON; where the parser stopped.
    NotJson { line: usize, column: usize },
    /// JSON, but not an object.
    NotAnObject(JsonType),
    /// A field of the wrong type; `index` for an element of `roles`.
    Field {
        field: &'static str,
        index: Option<usize>,
        found: JsonType,
        expected: &'static str,
    },
    /// The call-out was not made; the host's status name.
    NotDispatched(String),
}

impl fmt::Display for SessionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SessionError::Empty => write!(f, "session answer: empty"),
            SessionError::Status(Some(code)) => write!(f, "session service answered {code}"),
            SessionError::Status(None) => {
                write!(f, "session service answered a status that is not a number")
            }
            SessionError::NotJson { line, column } => write!(
                f,
                "session answer: not JSON (stopped at line {line} column {column})"
            ),
            SessionError::NotAnObject(t) => {
                write!(f, "session answer: is {t}, expected an object")
            }
            SessionError::Field {
                field,
                index,
                found,
                expected,
            } => {
                write!(f, "session answer: {field}")?;
                if let Some(i) = index {
                    write!(f, "[{i}]")?;
                }
                write!(f, " is {found}, expected {expected}")
            }
            SessionError::NotDispatched(status) => {
                write!(f, "session call not dispatched: {status}")
            }
        }
    }
}

impl std::error::Error for SessionError {}

/// What the session service's reply means: 200 carries an identity,
/// 401/403/404 mean not signed in (anonymous, a valid answer), anything
/// else is an error. `body` is read only for a 200.
pub(crate) fn session_outcome(
    status: &str,
    body: impl FnOnce() -> Option<Vec<u8>>,
) -> Result<Identity, SessionError> {
    match status {
        "200" => from_session_answer(&body().ok_or(SessionError::Empty)?),
        "401" | "403" | "404" => Ok(Identity::default()),
        other => Err(SessionError::Status(other.parse().ok())),
    }
}

/// The session service's answer: `{"user", "org", "roles", "token_id"}`,
/// every field optional (null is absent), others ignored. Anything else
/// is an error that names the field and its type, never its value.
pub(crate) fn from_session_answer(body: &[u8]) -> Result<Identity, SessionError> {
    use serde_json::Value;
    let answer: Value = serde_json::from_slice(body).map_err(|e| SessionError::NotJson {
        line: e.line(),
        column: e.column(),
    })?;
    let Value::Object(fields) = answer else {
        return Err(SessionError::NotAnObject(JsonType::of(&answer)));
    };
    let wrong = |field, index, v: &Value, expected| SessionError::Field {
        field,
        index,
        found: JsonType::of(v),
        expected,
    };
    let text = |field: &'static str| -> Result<Option<String>, SessionError> {
        match fields.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok((!s.is_empty()).then(|| s.clone())),
            Some(v) => Err(wrong(field, None, v, "a string")),
        }
    };
    let roles = match fields.get("roles") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(list)) => list
            .iter()
            .enumerate()
            .map(|(i, v)| match v {
                Value::String(r) => Ok(r.clone()),
                other => Err(wrong("roles", Some(i), other, "a string")),
            })
            .collect::<Result<_, _>>()?,
        Some(v) => return Err(wrong("roles", None, v, "a list of strings")),
    };
    Ok(Identity {
        user: text("user")?,
        org: text("org")?,
        token: text("token_id")?,
        roles,
    })
}

/// The value of one cookie in a `Cookie` header.
pub fn cookie<'a>(header: &'a str, name: &str) -> Option<&'a str> {
    header.split(';').find_map(|kv| {
        let (k, v) = kv.trim().split_once('=')?;
        (k == name && !v.is_empty()).then_some(v)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn who(user: Option<&str>, org: Option<&str>, roles: &[&str]) -> Identity {
        Identity {
            user: user.map(str::to_string),
            org: org.map(str::to_string),
            token: None,
            roles: roles.iter().map(|r| r.to_string()).collect(),
        }
    }

    #[test]
    fn access_matches_any_grant_and_empty_means_everybody() {
        let partner = Access {
            roles: vec!["partner".into()],
            ..Access::default()
        };
        let alice = who(Some("alice"), Some("acme"), &["partner"]);
        let bob = who(Some("bob"), None, &["trial"]);
        assert!(partner.admits(Some(&alice)));
        assert!(!partner.admits(Some(&bob)));
        assert!(!partner.admits(None));
        assert!(Access::default().admits(None));
        let anon = Access {
            anonymous: true,
            ..Access::default()
        };
        assert!(anon.admits(None) && anon.admits(Some(&Identity::default())));
        assert!(!anon.admits(Some(&bob)));
        let acme_or_authn = Access {
            orgs: vec!["acme".into()],
            authenticated: true,
            ..Access::default()
        };
        assert!(acme_or_authn.admits(Some(&bob)));
        assert!(acme_or_authn.admits(Some(&who(None, Some("acme"), &[]))));
        assert!(!acme_or_authn.admits(None));
    }

    #[test]
    fn roles_come_in_every_shape() {
        assert_eq!(roles(br#"["a","b"]"#), ["a", "b"]);
        assert_eq!(roles(b"read write  admin"), ["read", "write", "admin"]);
        assert_eq!(roles(b"a,b"), ["a", "b"]);
        assert_eq!(roles(&encoded(&[("0", "x")])), ["0", "x"]);
        assert!(roles(&[0xff, 0xfe]).is_empty());
    }

    /// proxy-wasm's map encoding of `entries`.
    fn encoded(entries: &[(&str, &str)]) -> Vec<u8> {
        let mut p = (entries.len() as u32).to_le_bytes().to_vec();
        for (k, v) in entries {
            p.extend((k.len() as u32).to_le_bytes());
            p.extend((v.len() as u32).to_le_bytes());
        }
        for (k, v) in entries {
            p.extend(k.as_bytes());
            p.push(0);
            p.extend(v.as_bytes());
            p.push(0);
        }
        p
    }

    /// Pairs of different lengths are each read at their own sizes; up to
    /// 1,000 pairs are a map, more are not read as one.
    #[test]
    fn roles_from_pairs_of_any_lengths_up_to_a_thousand() {
        let p = encoded(&[("admin", ""), ("ops", "x"), ("", "billing")]);
        assert_eq!(roles(&p), ["admin", "ops", "x", "billing"]);
        let names: Vec<String> = (0..1_001).map(|i| format!("r{i}")).collect();
        let entries: Vec<(&str, &str)> = names.iter().map(|n| (n.as_str(), "")).collect();
        assert_eq!(roles(&encoded(&entries[..1_000])).len(), 1_000);
        let over = roles(&encoded(&entries));
        assert!(!over.contains(&"r1000".to_string()), "{}", over.len());
    }

    #[test]
    fn claim_text_handles_strings_and_numbers() {
        assert_eq!(text(b"alice"), Some("alice".into()));
        assert_eq!(text(b""), None);
        assert_eq!(text(&42.0f64.to_le_bytes()), Some("42".into()));
        // Whole numbers past i64 as written, not cut to i64::MAX; -0 as 0.
        assert_eq!(
            text(&1e20f64.to_le_bytes()),
            Some("100000000000000000000".into())
        );
        assert_eq!(text(&(-0.0f64).to_le_bytes()), Some("0".into()));
        assert_eq!(text(&(-7.5f64).to_le_bytes()), Some("-7.5".into()));
        assert_eq!(text(&1.5f64.to_le_bytes()), Some("1.5".into()));
    }

    #[test]
    fn spiffe_ids_name_the_workload_and_optionally_its_namespace() {
        let id = from_spiffe("spiffe://td/ns/shop/sa/web", true);
        assert_eq!(id.user.as_deref(), Some("spiffe://td/ns/shop/sa/web"));
        assert_eq!(id.org.as_deref(), Some("shop"));
        assert_eq!(from_spiffe("spiffe://td/ns/shop/sa/web", false).org, None);
        assert!(!from_spiffe("", true).authenticated());
    }

    #[test]
    fn session_answers_parse_or_fail_clearly() {
        let id = from_session_answer(
            br#"{"user":"u1","org":"acme","roles":["partner"],"token_id":"t9"}"#,
        )
        .unwrap();
        assert_eq!(id.user.as_deref(), Some("u1"));
        assert_eq!(id.token.as_deref(), Some("t9"));
        assert_eq!(from_session_answer(b"{}").unwrap(), Identity::default());
        assert!(from_session_answer(b"<html>").is_err());
    }

    /// Every way an answer can be wrong, each carrying a recognisable
    /// secret where a value goes: the error (which is logged) names the
    /// field and the JSON type, never the value.
    #[test]
    fn session_answer_errors_never_quote_a_value() {
        const SECRET: &str = "s3cr3t-7c1f9a";
        let hostile = [
            format!(r#"{{"user":"u1","roles":"{SECRET} admin"}}"#),
            format!(r#"{{"token_id":{{"id":"{SECRET}"}}}}"#),
            r#"{"user":7319931337}"#.to_string(),
            format!(r#"{{"roles":["ok","{SECRET}",1]}}"#),
            format!(r#"{{"org":["{SECRET}"]}}"#),
            r#"{"token_id":true}"#.to_string(),
            format!(r#""{SECRET}""#),
            format!(r#"["{SECRET}"]"#),
            format!(r#"{{"user":"{SECRET}""#),
            format!("{{\"user\":\"{SECRET}\u{1}\"}}"),
            format!(r#"{{"user":"{SECRET}"}} trailing {SECRET}"#),
            format!(r#"{{"user":"{SECRET}","user":7319931337,}}"#),
            SECRET.to_string(),
            "-7319931337e999".to_string(),
        ];
        for body in &hostile {
            let e = from_session_answer(body.as_bytes())
                .expect_err(body)
                .to_string();
            assert!(!e.contains(SECRET), "{e:?} quotes the secret of {body}");
            assert!(!e.contains("7319931337"), "{e:?} quotes a number of {body}");
            assert!(!e.contains("true"), "{e:?} quotes a value of {body}");
            assert!(e.starts_with("session answer"), "{e:?}");
        }
        // ...but says which field is wrong and how.
        let e = from_session_answer(hostile[0].as_bytes()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "session answer: roles is a string, expected a list of strings"
        );
        let e = from_session_answer(hostile[3].as_bytes()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "session answer: roles[2] is a number, expected a string"
        );
        let e = from_session_answer(hostile[2].as_bytes()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "session answer: user is a number, expected a string"
        );
    }

    #[test]
    fn session_statuses_mean_an_identity_anonymous_or_an_error() {
        let body = || Some(br#"{"user":"u1"}"#.to_vec());
        assert_eq!(
            session_outcome("200", body).unwrap().user.as_deref(),
            Some("u1")
        );
        for status in ["401", "403", "404"] {
            let unread = || -> Option<Vec<u8>> { panic!("body read for {status}") };
            assert_eq!(session_outcome(status, unread), Ok(Identity::default()));
        }
        assert_eq!(
            session_outcome("503", body),
            Err(SessionError::Status(Some(503)))
        );
        assert_eq!(
            session_outcome("s3cr3t", body).unwrap_err().to_string(),
            "session service answered a status that is not a number"
        );
        assert_eq!(session_outcome("200", || None), Err(SessionError::Empty));
    }

    #[test]
    fn cookies_are_found_by_name() {
        assert_eq!(cookie("a=1; session=xyz; b=2", "session"), Some("xyz"));
        assert_eq!(cookie("sessionx=1", "session"), None);
        assert_eq!(cookie("session=", "session"), None);
    }

    #[test]
    fn earlier_sources_win_and_roles_add_up() {
        let mut a = who(Some("jwt-user"), None, &["x"]);
        a.merge(who(Some("header-user"), Some("org"), &["x", "y"]));
        assert_eq!(a.user.as_deref(), Some("jwt-user"));
        assert_eq!(a.org.as_deref(), Some("org"));
        assert_eq!(a.roles, ["x", "y"]);
    }
}

//! What a JWT says about its holder, read from the token itself — never
//! trusted on its own: a worker remembers a token's identity only after
//! jwt_authn verified that very token and its claims read the same as the
//! verified payload (see `host::identity`). Decoding only; no signature
//! check happens here.

use crate::config::JwtSource;
use crate::identity::{self, Identity};
use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use base64::Engine;
use serde_json::Value;

/// The token in a header value: after a `Bearer ` prefix if there is one.
pub fn bearer(header: &str) -> &str {
    let h = header.trim();
    match h.get(..7) {
        Some(p) if p.eq_ignore_ascii_case("bearer ") => h[7..].trim_start(),
        _ => h,
    }
}

/// base64url (RFC 7515 §2 says without padding; padding is tolerated).
/// Trailing bits that are not zero are accepted: a token jwt_authn took
/// must read here too.
const BASE64URL: GeneralPurpose = GeneralPurpose::new(
    &alphabet::URL_SAFE,
    GeneralPurposeConfig::new()
        .with_decode_padding_mode(DecodePaddingMode::Indifferent)
        .with_decode_allow_trailing_bits(true),
);

fn base64url(text: &str) -> Option<Vec<u8>> {
    BASE64URL.decode(text).ok()
}

/// A claim as Envoy hands over the same claim from jwt_authn's metadata:
/// strings as their bytes, numbers as f64 little endian, lists as JSON.
fn claim_bytes(payload: &Value, dotted: &str) -> Option<Vec<u8>> {
    let v = dotted.split('.').try_fold(payload, |v, k| v.get(k))?;
    match v {
        Value::String(s) => Some(s.as_bytes().to_vec()),
        Value::Number(n) => n.as_f64().map(|f| f.to_le_bytes().to_vec()),
        Value::Array(_) => serde_json::to_vec(v).ok(),
        _ => None,
    }
}

/// The identity a compact JWS claims, and its `exp` (seconds), if any.
fn claimed(token: &str, jwt: &JwtSource) -> Option<(Identity, Option<u64>)> {
    let mut parts = token.split('.');
    let (_, payload, _) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    let payload: Value = serde_json::from_slice(&base64url(payload)?).ok()?;
    let exp = payload
        .get("exp")
        .and_then(Value::as_f64)
        .map(|e| e.max(0.0) as u64);
    let id = identity::from_claims(jwt, |c| claim_bytes(&payload, c));
    Some((id, exp))
}

/// Until when (ms) the identity jwt_authn verified may be remembered under
/// `token`: only if it names someone and the token's own claims read the
/// same, so a token other than the one verified is never remembered; never
/// past the token's `exp`.
pub(crate) fn vouched_until(token: &str, jwt: &JwtSource, verified: &Identity) -> Option<u64> {
    if !verified.authenticated() {
        return None;
    }
    let (own, exp) = claimed(token, jwt)?;
    (own == *verified).then(|| exp.map_or(u64::MAX, |s| s.saturating_mul(1_000)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jwt(roles: Option<&str>) -> JwtSource {
        crate::config::parse(
            format!(
                r#"{{"identity":{{"jwt":{{"org_claim":"org.name"{}}}}},"routes":[]}}"#,
                roles.map_or(String::new(), |r| format!(r#","roles_claim":"{r}""#))
            )
            .as_bytes(),
        )
        .unwrap()
        .identity
        .clone()
        .unwrap()
        .jwt
        .unwrap()
    }

    fn b64(bytes: &[u8]) -> String {
        const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        let mut out = String::new();
        for chunk in bytes.chunks(3) {
            let n =
                chunk.iter().fold(0u32, |a, b| a << 8 | u32::from(*b)) << (8 * (3 - chunk.len()));
            for i in 0..=chunk.len() {
                out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            }
        }
        out
    }

    fn token(payload: &str) -> String {
        format!(
            "{}.{}.c2ln",
            b64(br#"{"alg":"RS256"}"#),
            b64(payload.as_bytes())
        )
    }

    #[test]
    fn reads_claims_as_the_metadata_would_give_them() {
        let t =
            token(r#"{"sub":"alice","org":{"name":"acme"},"roles":["a","b"],"exp":1700000000}"#);
        let (id, exp) = claimed(&t, &jwt(Some("roles"))).unwrap();
        assert_eq!(id.user.as_deref(), Some("alice"));
        assert_eq!(id.org.as_deref(), Some("acme"));
        assert_eq!(id.roles, vec!["a", "b"]);
        assert_eq!(exp, Some(1_700_000_000));
        // A numeric subject reads as the metadata's f64 does.
        let (id, exp) = claimed(&token(r#"{"sub":42}"#), &jwt(None)).unwrap();
        assert_eq!(id.user.as_deref(), Some("42"));
        assert_eq!(exp, None);
        // A space-delimited scope is a list of roles.
        let (id, _) = claimed(
            &token(r#"{"sub":"x","scope":"read write"}"#),
            &jwt(Some("scope")),
        )
        .unwrap();
        assert_eq!(id.roles, vec!["read", "write"]);
    }

    #[test]
    fn anything_but_a_compact_jws_is_no_identity() {
        let j = jwt(None);
        assert!(claimed("", &j).is_none());
        assert!(claimed("a.b", &j).is_none());
        assert!(claimed("a.b.c.d", &j).is_none());
        assert!(claimed("a.!!!.c", &j).is_none());
        assert!(claimed(&format!("a.{}.c", b64(b"not json")), &j).is_none());
    }

    #[test]
    fn bearer_prefix_is_skipped_in_any_case() {
        assert_eq!(bearer("Bearer abc"), "abc");
        assert_eq!(bearer("bearer  abc "), "abc");
        assert_eq!(bearer("abc"), "abc");
        assert_eq!(bearer("eyJhbGci.e30.sig"), "eyJhbGci.e30.sig", "no prefix");
        assert_eq!(bearer("Bear"), "Bear");
    }

    #[test]
    fn base64url_round_trips_every_length() {
        for n in 0..40u8 {
            let data: Vec<u8> = (0..n).map(|i| i.wrapping_mul(37)).collect();
            assert_eq!(base64url(&b64(&data)), Some(data));
        }
        assert_eq!(base64url("A"), None);
    }

    #[test]
    fn base64url_tolerates_padding_and_refuses_the_standard_alphabet() {
        assert_eq!(base64url("QQ"), Some(b"A".to_vec()));
        assert_eq!(base64url("QQ=="), Some(b"A".to_vec()));
        assert_eq!(base64url("QUI="), Some(b"AB".to_vec()));
        // 0xfb 0xff: `+/` in the standard alphabet, `-_` in base64url.
        assert_eq!(base64url("-_8"), Some(vec![0xfb, 0xff]));
        assert_eq!(base64url("+/8"), None);
        assert_eq!(base64url("QQ=x"), None);
    }

    #[test]
    fn only_the_verified_token_is_vouched_for_and_not_past_its_expiry() {
        let j = jwt(None);
        let alice = claimed(&token(r#"{"sub":"alice","exp":100}"#), &j)
            .unwrap()
            .0;
        let t = token(r#"{"sub":"alice","exp":100}"#);
        assert_eq!(vouched_until(&t, &j, &alice), Some(100_000));
        let other = token(r#"{"sub":"mallory","exp":100}"#);
        assert_eq!(vouched_until(&other, &j, &alice), None);
        assert_eq!(
            vouched_until(&token(r#"{"sub":"alice"}"#), &j, &alice),
            Some(u64::MAX)
        );
        assert_eq!(vouched_until(&t, &j, &Identity::default()), None);
    }
}

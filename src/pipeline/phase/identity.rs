//! Who is calling: the configured cheap identity sources read through the
//! host (JWT claims that `jwt_authn` verified, the mTLS peer, trusted
//! headers), then, for a caller none of them named, the session service
//! asked about its credential, and its answer.

use crate::config::{IdentityConfig, JwtSource, OnError, SessionSource};
use crate::identity::cache::{credential_key, IdentityCache};
use crate::identity::jwt_token;
use crate::identity::{self, Identity, SessionError};
use crate::pipeline::flight::Flight;
use crate::pipeline::{Base, CallOut, Decision, Host, Level, Worker};
use crate::stats::Stat;
use std::cell::RefCell;

const JWT_FILTER: &str = "envoy.filters.http.jwt_authn";

/// The claims jwt_authn verified for this request, from its metadata
/// (Envoy converts the metadata on every read: ~10 µs a claim).
fn from_metadata<H: Host>(host: &H, jwt: &JwtSource) -> Identity {
    identity::from_claims(jwt, |name| {
        let mut path = vec![
            "metadata",
            "filter_metadata",
            JWT_FILTER,
            jwt.metadata_key.as_str(),
        ];
        path.extend(name.split('.'));
        host.property(path)
    })
}

/// The identity of the token jwt_authn verified. Remembered per token
/// (a keyed hash of it) once its own claims are seen to be the verified
/// ones, until `cache_ttl_s` or its `exp`, whichever comes first; then the
/// same token costs one header read instead of the metadata reads.
/// True in the second place when it came from memory.
fn from_jwt<H: Host>(host: &H, jwt: &JwtSource, tokens: &Tokens) -> (Identity, bool) {
    let header = (jwt.cache_ttl_s > 0)
        .then(|| host.request_header(&jwt.token_header))
        .flatten();
    let token = header.as_deref().map(jwt_token::bearer).unwrap_or_default();
    if token.is_empty() {
        return (from_metadata(host, jwt), false);
    }
    let key = credential_key(tokens.seed, token);
    let known = tokens
        .cache
        .try_borrow()
        .ok()
        .and_then(|c| c.get(key, tokens.now_ms).cloned());
    if let Some(id) = known {
        return (id, true);
    }
    let verified = from_metadata(host, jwt);
    if let Some(until) = jwt_token::vouched_until(token, jwt, &verified) {
        if let Ok(mut c) = tokens.cache.try_borrow_mut() {
            c.insert_until(key, verified.clone(), tokens.now_ms, until);
        }
    }
    (verified, false)
}

/// A worker's memory of verified tokens, and what keys it.
pub struct Tokens<'a> {
    pub cache: &'a RefCell<IdentityCache>,
    pub seed: [u64; 2],
    pub now_ms: u64,
}

/// The identity from every configured source but the session service;
/// true when the JWT's came from the worker's memory.
pub fn resolve<H: Host>(host: &H, config: &IdentityConfig, tokens: &Tokens) -> (Identity, bool) {
    let mut id = Identity::default();
    let mut remembered = false;
    if let Some(jwt) = &config.jwt {
        let (from_token, hit) = from_jwt(host, jwt, tokens);
        id.merge(from_token);
        remembered = hit;
    }
    if let Some(m) = &config.mtls {
        if let Some(uri) = host
            .property(vec!["connection", "uri_san_peer_certificate"])
            .and_then(|b| identity::text(&b))
        {
            id.merge(identity::from_spiffe(&uri, m.org_from_namespace));
        }
    }
    if let Some(h) = &config.header {
        let get = |name: &Option<String>| {
            name.as_deref()
                .and_then(|n| host.request_header(n))
                .filter(|v| !v.is_empty())
        };
        id.merge(Identity {
            user: get(&h.user),
            org: get(&h.org),
            token: get(&h.token),
            roles: get(&h.roles)
                .map(|r| identity::roles(r.as_bytes()))
                .unwrap_or_default(),
        });
    }
    (id, remembered)
}

/// The credential the session service is asked about, if any: the
/// configured cookie, else the `authorization` header.
pub(crate) fn credential<H: Host>(
    host: &H,
    session: &SessionSource,
) -> Option<(&'static str, String)> {
    if let Some(name) = &session.cookie {
        if let Some(v) = host
            .request_header("cookie")
            .as_deref()
            .and_then(|c| identity::cookie(c, name))
        {
            return Some(("cookie", format!("{name}={v}")));
        }
    }
    if session.authorization {
        if let Some(v) = host
            .request_header("authorization")
            .filter(|v| !v.is_empty())
        {
            return Some(("authorization", v));
        }
    }
    None
}

/// The session service question a request waits for.
pub struct Ask<'p> {
    session: &'p SessionSource,
    /// `cookie` or `authorization`, and its value.
    header: &'static str,
    credential: String,
}

impl Ask<'_> {
    /// Asks the session service.
    pub fn dispatch<H: Base>(&self, host: &mut H) -> Result<u32, String> {
        let s = self.session;
        host.dispatch(&CallOut {
            cluster: &s.cluster,
            headers: &[
                (":method", "GET"),
                (":path", &s.path),
                (":authority", s.authority.as_deref().unwrap_or(&s.cluster)),
                (self.header, &self.credential),
            ],
            body: None,
            timeout_ms: s.timeout_ms,
        })
    }
}

/// Who is calling, as far as the request's own sources tell.
pub(crate) enum Identified<'p> {
    Known(Identity),
    /// Not known without the session service: what the sources said, the
    /// question, and the credential's cache key.
    Ask(Identity, Ask<'p>, u128),
}

impl<'p> Worker<'p> {
    /// Who is calling: the sources, then the session cache; the session
    /// service's question when neither knows.
    pub(in crate::pipeline) fn identify<H: Host>(
        &self,
        host: &mut H,
        config: &'p IdentityConfig,
        now: u64,
    ) -> Identified<'p> {
        let lim = self.limiter;
        let tokens = Tokens {
            cache: self.tokens,
            seed: lim.seed(),
            now_ms: now,
        };
        let (mut id, remembered) = resolve(host, config, &tokens);
        if remembered {
            host.count(Stat::JwtCacheHits);
        }
        let Some(session) = config.session.as_ref().filter(|_| !id.authenticated()) else {
            return Identified::Known(id);
        };
        let Some((header, value)) = credential(host, session) else {
            return Identified::Known(id);
        };
        let key = credential_key(lim.seed(), &value);
        let cached = self
            .sessions
            .try_borrow()
            .ok()
            .and_then(|c| c.get(key, now).cloned());
        match cached {
            Some(found) => {
                host.count(Stat::SessionCacheHits);
                id.merge(found);
                Identified::Known(id)
            }
            None => {
                let ask = Ask {
                    session,
                    header,
                    credential: value,
                };
                Identified::Ask(id, ask, key)
            }
        }
    }

    /// The session service's answer (`status`, and `body`, read only for
    /// a 200), or the question never sent (`Err`): merged into the
    /// request's identity and remembered, or a failure counted and logged;
    /// a decision only when `on_error` is `deny`.
    pub(in crate::pipeline) fn session_answer<H: Host>(
        &self,
        host: &mut H,
        f: &mut Flight,
        answer: Result<(&str, Option<Vec<u8>>), String>,
        now: u64,
    ) -> Option<Decision<'p>> {
        let session = self
            .limiter
            .plan
            .identity
            .as_ref()
            .and_then(|i| i.session.as_ref());
        // Asked only under a plan with a session source.
        let Some(session) = session else {
            return Some(Decision::Pass(None));
        };
        let found = match answer {
            Ok((status, body)) => identity::session_outcome(status, || body),
            Err(s) => Err(SessionError::NotDispatched(s)),
        };
        match found {
            Ok(found) => {
                if let Ok(mut cache) = self.sessions.try_borrow_mut() {
                    cache.insert(f.credential, found.clone(), now);
                }
                f.identity
                    .get_or_insert_with(Identity::default)
                    .merge(found);
                None
            }
            Err(why) => {
                host.count(Stat::IdentityErrors);
                host.log(
                    Level::Warn,
                    &format!("ratebound session resolve failed: {why}"),
                );
                (session.on_error == OnError::Deny).then_some(Decision::Unresolved)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::mock::MockHost;

    /// The session service is asked about the configured cookie first,
    /// else a non-empty `authorization` header; an empty one is no
    /// credential (the request goes without an identity).
    #[test]
    fn the_session_credential_is_the_cookie_else_a_non_empty_authorization() {
        let session: SessionSource =
            serde_json::from_str(r#"{"cluster":"s","cookie":"sid"}"#).unwrap();
        let host = MockHost::new(0)
            .header("cookie", "a=1; sid=abc")
            .header("authorization", "Bearer t");
        assert_eq!(
            credential(&host, &session),
            Some(("cookie", "sid=abc".to_string()))
        );
        let host = MockHost::new(0).header("authorization", "Bearer t");
        assert_eq!(
            credential(&host, &session),
            Some(("authorization", "Bearer t".to_string()))
        );
        let host = MockHost::new(0).header("authorization", "");
        assert_eq!(credential(&host, &session), None);
        let off: SessionSource =
            serde_json::from_str(r#"{"cluster":"s","authorization":false}"#).unwrap();
        let host = MockHost::new(0).header("authorization", "Bearer t");
        assert_eq!(credential(&host, &off), None);
    }
}

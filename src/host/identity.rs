//! Reads the configured cheap identity sources from Envoy: JWT claims that
//! `jwt_authn` verified, the mTLS peer, trusted headers. The session
//! resolve (a call-out) lives with the request context.

use super::shared::request_header;
use crate::config::{IdentityConfig, JwtSource};
use crate::identity::{self, Identity};
use proxy_wasm::hostcalls;

const JWT_FILTER: &str = "envoy.filters.http.jwt_authn";

fn property(path: Vec<&str>) -> Option<Vec<u8>> {
    hostcalls::get_property(path).ok().flatten()
}

fn claim(jwt: &JwtSource, name: &str) -> Option<Vec<u8>> {
    let mut path = vec![
        "metadata",
        "filter_metadata",
        JWT_FILTER,
        jwt.metadata_key.as_str(),
    ];
    path.extend(name.split('.'));
    property(path)
}

fn from_jwt(jwt: &JwtSource) -> Identity {
    let text = |c: &Option<String>| {
        c.as_deref()
            .and_then(|c| claim(jwt, c))
            .and_then(|b| identity::text(&b))
    };
    Identity {
        user: claim(jwt, &jwt.user_claim).and_then(|b| identity::text(&b)),
        org: text(&jwt.org_claim),
        token: text(&jwt.token_claim),
        roles: jwt
            .roles_claim
            .as_deref()
            .and_then(|c| claim(jwt, c))
            .map(|b| identity::roles(&b))
            .unwrap_or_default(),
    }
}

/// The identity from every configured source but the session service.
pub fn resolve(config: &IdentityConfig) -> Identity {
    let mut id = Identity::default();
    if let Some(jwt) = &config.jwt {
        id.merge(from_jwt(jwt));
    }
    if let Some(m) = &config.mtls {
        if let Some(uri) = property(vec!["connection", "uri_san_peer_certificate"])
            .and_then(|b| identity::text(&b))
        {
            id.merge(identity::from_spiffe(&uri, m.org_from_namespace));
        }
    }
    if let Some(h) = &config.header {
        let get = |name: &Option<String>| {
            name.as_deref()
                .and_then(request_header)
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
    id
}

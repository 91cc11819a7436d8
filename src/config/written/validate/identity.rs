//! Identity sources, the bounds that need them, and a sign-in's account.

use super::super::error::{err, ConfigError};
use super::super::names::is_header_name;
use super::super::*;
use super::authority_error;

/// An RFC 6265 cookie name (an RFC 7230 token).
fn is_cookie_name(v: &str) -> bool {
    !v.is_empty()
        && v.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

pub(super) fn validate_identity(id: &IdentityConfig, errors: &mut Vec<ConfigError>) {
    let at = "$.identity";
    if id.jwt.is_none() && id.mtls.is_none() && id.header.is_none() && id.session.is_none() {
        errors.push(err(
            at,
            "names no source; give at least one of \"jwt\", \"mtls\", \"header\", \"session\"",
        ));
    }
    if let Some(j) = &id.jwt {
        let claims = [
            ("metadata_key", Some(&j.metadata_key)),
            ("user_claim", Some(&j.user_claim)),
            ("org_claim", j.org_claim.as_ref()),
            ("roles_claim", j.roles_claim.as_ref()),
            ("token_claim", j.token_claim.as_ref()),
        ];
        for (field, value) in claims {
            if value.is_some_and(|v| v.is_empty() || v.split('.').any(str::is_empty)) {
                errors.push(err(
                    format!("{at}.jwt.{field}"),
                    "must be a claim name, dotted for nested claims (e.g. \"realm_access.roles\")",
                ));
            }
        }
        if !is_header_name(&j.token_header) {
            errors.push(err(
                format!("{at}.jwt.token_header"),
                format!(
                    "{:?} is not a header name; write it in lower case, e.g. \"authorization\"",
                    j.token_header
                ),
            ));
        }
        if j.cache_ttl_s > 3_600 {
            errors.push(err(
                format!("{at}.jwt.cache_ttl_s"),
                "must be 0 (no cache) to 3600 seconds",
            ));
        }
        if !(1..=100_000).contains(&j.cache_entries) {
            errors.push(err(
                format!("{at}.jwt.cache_entries"),
                "must be 1 to 100000",
            ));
        }
    }
    if let Some(h) = &id.header {
        let names = [
            ("user", &h.user),
            ("org", &h.org),
            ("roles", &h.roles),
            ("token", &h.token),
        ];
        if names.iter().all(|(_, v)| v.is_none()) {
            errors.push(err(
                format!("{at}.header"),
                "names no header; set user, org, roles or token",
            ));
        }
        for (field, value) in names {
            if let Some(v) = value {
                if !is_header_name(v) {
                    errors.push(err(
                        format!("{at}.header.{field}"),
                        format!("{v:?} is not a header name; write it in lower case, e.g. \"x-user-id\""),
                    ));
                }
            }
        }
    }
    if let Some(sess) = &id.session {
        let st = format!("{at}.session");
        if sess.cluster.is_empty() {
            errors.push(err(
                format!("{st}.cluster"),
                "must name the Envoy cluster of the session service",
            ));
        }
        if !sess.path.starts_with('/') {
            errors.push(err(
                format!("{st}.path"),
                format!("{:?} must start with '/'", sess.path),
            ));
        }
        if let Some(a) = &sess.authority {
            errors.extend(authority_error(
                a,
                format!("{st}.authority"),
                "for the default port",
            ));
        }
        if let Some(c) = sess.cookie.as_ref().filter(|c| !is_cookie_name(c)) {
            // The name is what comes before the first character a token cannot hold.
            let head: String = c
                .chars()
                .take_while(|ch| is_cookie_name(&ch.to_string()))
                .collect();
            let name = if head.is_empty() {
                "sid"
            } else {
                head.as_str()
            };
            errors.push(err(
                format!("{st}.cookie"),
                format!("{c:?} is not a cookie name (an RFC 6265 token: letters, digits and !#$%&'*+-.^_`|~; no spaces, control characters, quotes, backslashes or ()<>@,;:/[]?={{}}); write the name alone, e.g. {name:?}"),
            ));
        }
        if sess.cookie.is_none() && !sess.authorization {
            errors.push(err(
                st.clone(),
                "forwards no credential; set \"cookie\" or leave \"authorization\" true",
            ));
        }
        if !(1..=10_000).contains(&sess.timeout_ms) {
            errors.push(err(
                format!("{st}.timeout_ms"),
                "must be 1 to 10000 milliseconds",
            ));
        }
        if sess.cache_ttl_s > 3_600 {
            errors.push(err(
                format!("{st}.cache_ttl_s"),
                "must be 0 (no cache) to 3600 seconds",
            ));
        }
        if !(1..=100_000).contains(&sess.cache_entries) {
            errors.push(err(format!("{st}.cache_entries"), "must be 1 to 100000"));
        }
    }
}

/// A bound keyed on, or narrowed by, identity needs a source that gives it.
pub(super) fn validate_identity_needs(
    id: Option<&IdentityConfig>,
    b: &BoundConfig,
    at: &str,
    errors: &mut Vec<ConfigError>,
) {
    let Some(id) = id else {
        if needs_identity(b.per, &b.applies_to) {
            errors.push(err(
                if b.applies_to.is_everybody() { format!("{at}.per") } else { format!("{at}.applies_to") },
                "needs a caller identity, and \"identity\" configures no source; add \"identity\" (jwt, mtls, header or session) or use per \"route\"/\"address\" for everybody",
            ));
        }
        return;
    };
    let session = id.session.is_some();
    let jwt = id.jwt.as_ref();
    let header = id.header.as_ref();
    let gives_org = session
        || jwt.is_some_and(|j| j.org_claim.is_some())
        || header.is_some_and(|h| h.org.is_some())
        || id.mtls.as_ref().is_some_and(|m| m.org_from_namespace);
    let gives_token = session
        || jwt.is_some_and(|j| j.token_claim.is_some())
        || header.is_some_and(|h| h.token.is_some());
    let gives_roles = session
        || jwt.is_some_and(|j| j.roles_claim.is_some())
        || header.is_some_and(|h| h.roles.is_some());
    if b.per == Per::Org && !gives_org {
        errors.push(err(
            format!("{at}.per"),
            "per \"org\" needs an organisation: set identity.jwt.org_claim, identity.header.org, identity.mtls.org_from_namespace or identity.session",
        ));
    }
    if b.per == Per::Token && !gives_token {
        errors.push(err(
            format!("{at}.per"),
            "per \"token\" needs a token id: set identity.jwt.token_claim, identity.header.token or identity.session",
        ));
    }
    let a = &b.applies_to;
    if !a.roles.is_empty() && !gives_roles {
        errors.push(err(
            format!("{at}.applies_to.roles"),
            "no identity source gives roles: set identity.jwt.roles_claim, identity.header.roles or identity.session",
        ));
    }
    if !a.orgs.is_empty() && !gives_org {
        errors.push(err(
            format!("{at}.applies_to.orgs"),
            "no identity source gives an organisation: set identity.jwt.org_claim, identity.header.org, identity.mtls.org_from_namespace or identity.session",
        ));
    }
    for (k, v) in a.roles.iter().chain(a.orgs.iter()).enumerate() {
        if v.is_empty() {
            errors.push(err(
                format!("{at}.applies_to"),
                format!("grant {k} is empty"),
            ));
        }
    }
}

/// The route's `account` source: exactly one place, a sane body cap.
pub(super) fn validate_account(a: &AccountSource, at: &str, errors: &mut Vec<ConfigError>) {
    let given = [a.json.is_some(), a.form.is_some(), a.header.is_some()]
        .into_iter()
        .filter(|g| *g)
        .count();
    if given != 1 {
        errors.push(err(
            at,
            "give exactly one of \"json\" (a top-level field of a JSON body), \"form\" \
             (a field of a urlencoded form) or \"header\" (a request header)",
        ));
    }
    for (field, v) in [("json", &a.json), ("form", &a.form)] {
        if v.as_deref().is_some_and(str::is_empty) {
            errors.push(err(
                format!("{at}.{field}"),
                "names no field; e.g. \"username\"",
            ));
        }
    }
    if let Some(h) = &a.header {
        if !is_header_name(h) {
            errors.push(err(
                format!("{at}.header"),
                format!("{h:?} is not a lowercase request header name; e.g. \"x-login\""),
            ));
        }
    }
    if !(64..=1_048_576).contains(&a.max_body_bytes) {
        errors.push(err(
            format!("{at}.max_body_bytes"),
            format!(
                "{} is out of range: read 64 bytes to 1 MiB of a sign-in body (16384 by default)",
                a.max_body_bytes
            ),
        ));
    }
}

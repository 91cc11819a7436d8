//! Identity sources whose trust rests on the deployment: said where the
//! source is written, since `check` cannot see Envoy's side of it.

use super::{about_route, Warning, WarningCode};
use crate::config::plan::Plan;

/// A `header` identity: the named headers are believed as they arrive, so
/// Envoy must remove them from client requests before any filter runs.
pub(crate) fn trusted_headers(plan: &Plan) -> Option<Warning> {
    let h = plan.identity.as_ref()?.header.as_ref()?;
    let names: Vec<&str> = [&h.user, &h.org, &h.roles, &h.token]
        .into_iter()
        .flatten()
        .map(String::as_str)
        .collect();
    if names.is_empty() {
        return None;
    }
    // Said about the first route, as the other configuration-wide notes.
    let route = plan.routes.first()?;
    let (noun, verb, them) = match names.len() {
        1 => ("header", "says", "it"),
        _ => ("headers", "say", "them"),
    };
    Some(about_route(
        WarningCode::TrustedHeaders,
        "$.identity.header".into(),
        route,
        format!(
            "the caller is whoever the request {noun} {} {verb}: any client can send {them}, so \
             Envoy must remove {them} from client requests before any filter runs (the \
             HttpConnectionManager's early_header_mutation_extensions) and only a filter you \
             trust set {them} (jwt_authn's claim_to_headers, ext_authz); else anyone can claim \
             to be anyone (docs/identity.md)",
            names.join(", ")
        ),
    ))
}

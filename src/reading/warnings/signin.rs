//! Sign-in routes and the keys sent to the rate-limit service: what would
//! refuse honest requests or let Redis give accounts away.

use super::{about_route, route_path, Warning, WarningCode};
use crate::config::plan::{Plan, Route};

/// A configuration whose keys for the service are hashed without a secret.
pub(crate) fn no_key_secret(plan: &Plan) -> Option<Warning> {
    let service = plan.service.as_ref()?;
    if service.key_secret.is_some() {
        return None;
    }
    let route = plan.routes.first()?;
    Some(Warning {
        path: "$.rate_limit_service".into(),
        ..about_route(
            WarningCode::NoKeySecret,
            String::new(),
            route,
            format!(
                "no \"key_secret\": the keys callers are counted under in Redis are hashed with \
                 the domain {:?} alone, which is no secret: anyone who can read Redis can hash a \
                 list of account names or addresses and find them. Add \"key_secret\": \
                 {{\"env\": \"RATEBOUND_KEY_SECRET\"}} and give every Envoy the same value \
                 (docs/sign-in.md)",
                service.domain
            ),
        )
    })
}

/// A sign-in route that takes every method: a `GET` of the sign-in page
/// names no account, and is refused.
pub(crate) fn any_method(route: &Route) -> Option<Warning> {
    let account = route.account.as_ref()?;
    let body = account.header.is_none();
    (body && route.matching.methods.is_empty() && !route.service_bounds.is_empty()).then(|| {
        about_route(
            WarningCode::SignInAnyMethod,
            format!("{}.match", route_path(route)),
            route,
            "a sign-in route whose account is in the body takes every method: any request \
             without that body (a GET of the sign-in page, a CORS preflight) names no account \
             and is refused with 400. Add \"methods\": [\"POST\"] to its match"
                .into(),
        )
    })
}

/// A sign-in route whose account is in the body, in a configuration that
/// does not hold its headers: every refused attempt opens an upstream
/// request (its head; the body is held and the request reset).
pub(crate) fn heads_go_on(route: &Route) -> Option<Warning> {
    let account = route.account.as_ref()?;
    (account.header.is_none() && !route.service_bounds.is_empty()).then(|| {
        about_route(
            WarningCode::SignInHeadsGoOn,
            format!("{}.account", route_path(route)),
            route,
            "the account is in the body: a refused attempt's headers reach the upstream (a \
             request opened, then reset) unless \"hold_sign_in_headers\": true is set together \
             with Envoy's allow_on_headers_stop_iteration (Envoy 1.35 and later; not on Istio's \
             WasmPlugin yet: docs/sign-in.md)"
                .into(),
        )
    })
}

//! Warnings about a route as a whole: never reached, bounding nothing, or
//! bounding only some callers.

use super::{about_route, route_path, Warning, WarningCode};
use crate::config::plan::Route;
use crate::reading::words;

/// A route after one whose matcher covers it never sees a request: the first
/// matching route takes it. Only single earlier routes are compared, so a
/// route covered by several together is not reported.
pub(super) fn shadowed(earlier: &[Route], route: &Route) -> Option<Warning> {
    let by = earlier.iter().find(|e| e.matcher.covers(&route.matcher))?;
    Some(about_route(
        WarningCode::ShadowedRoute,
        format!("{}.match", route_path(route)),
        route,
        format!(
            "route {:?} never matches: the earlier route {:?} ({}) matches every request it would, and the first matching route takes the request",
            route.name,
            by.name,
            route_path(by)
        ),
    ))
}

pub(super) fn no_bounds(route: &Route) -> Option<Warning> {
    if !route.own_bounds().is_empty() {
        return None;
    }
    let message = if route.operations.is_empty() {
        format!(
            "route {:?} has no bounds: the requests it matches are not limited, and no later route counts them",
            route.name
        )
    } else {
        format!(
            "route {:?} has no bounds of its own: only requests to its {} are limited; every other request it matches is not, and no later route counts it",
            route.name,
            if route.operations.len() == 1 { "operation".to_string() } else { format!("{} operations", route.operations.len()) }
        )
    };
    Some(about_route(
        WarningCode::NoBounds,
        format!("{}.bounds", route_path(route)),
        route,
        message,
    ))
}

/// A route whose every bound is narrowed with `applies_to` leaves everyone
/// else unbounded.
pub(super) fn narrowed_only(route: &Route) -> Option<Warning> {
    let own = route.own_bounds();
    if own.is_empty() || own.iter().any(|b| b.applies_to.is_everybody()) {
        return None;
    }
    let mut who: Vec<String> = own
        .iter()
        .filter_map(|b| words::audience(&b.applies_to))
        .collect();
    who.dedup();
    let who = if who.is_empty() {
        "some callers".to_string()
    } else {
        who.join("; ")
    };
    Some(about_route(
        WarningCode::NarrowedOnly,
        format!("{}.bounds", route_path(route)),
        route,
        format!(
            "no bound of route {:?} applies to everybody: it bounds {who}, and everyone else is not bounded at all; add a bound without applies_to to cover them",
            route.name
        ),
    ))
}

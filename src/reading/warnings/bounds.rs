//! Warnings about one bound: another bound always refuses before it (of the
//! route, of the operation, or a route bound over an operation's), and the
//! per-node note every bound gets.

use super::{about_bound, Warning, WarningCode};
use crate::config::plan::{Bound, Operation, Route};
use crate::config::Per;
use crate::reading::words;

/// True when `a` applies to every caller `b` applies to.
fn applies_whenever(a: &Bound, b: &Bound) -> bool {
    a.applies_to.is_everybody() || {
        let who = words::audience(&b.applies_to);
        who.is_some() && words::audience(&a.applies_to) == who
    }
}

/// True when `a` counts, for every request `b` counts, at least the
/// requests `b` counts: one counter for the route counts them all; two
/// bounds on the same key count the same caller's requests.
fn key_covers(a: &Bound, b: &Bound) -> bool {
    a.per == Per::Route || a.per == b.per
}

/// True when `b` can never refuse a request `a` admits.
///
/// Every bound counts exactly the admitted requests (a refused request is
/// counted by none), so a counter that counts at least what `b`'s counts,
/// over windows of the same length (aligned to the same clock, so the same
/// windows and the same weights), always estimates at least as much; with a
/// limit no higher it refuses whenever `b` would. Windows of different
/// lengths weigh their two windows differently and prove nothing either
/// way, so they are never compared. Two keyed bounds on the same key see the
/// same admitted requests of the same callers, so their tables track (and
/// overflow) alike; a `route` bound counts the route's every request, the
/// overflow counters' included. A shadow bound refuses nothing, so it
/// dominates only shadow bounds.
///
/// The same holds for a route bound over a bound of one of the route's
/// operations: every request to the operation is a request of the route,
/// so the route's counter (for the whole route, or for the same caller)
/// counts at least what the operation's counts. (Past the cap, an
/// operation's overflow counter is shared by callers the route may still
/// track one by one; that regime is not one a bound is written for.)
pub(super) fn dominates(a: &Bound, b: &Bound) -> bool {
    (!a.shadow || b.shadow)
        && a.rate.window_ms == b.rate.window_ms
        && a.rate.limit <= b.rate.limit
        && key_covers(a, b)
        && applies_whenever(a, b)
}

/// An operation bound that a route bound always refuses before (or with):
/// it refuses nothing the route would admit.
pub(super) fn loose_operation_bound(
    route: &Route,
    op: &Operation,
    bound: &Bound,
) -> Option<Warning> {
    let by = route
        .own_bounds()
        .iter()
        .find(|r| r.in_shared_data() && dominates(r, bound))?;
    let why = if by.per == Per::Route {
        "counts every request of the route, these included,"
    } else {
        "counts the same callers' requests to the whole route, these included,"
    };
    Some(about_bound(
        WarningCode::LooseOperationBound,
        route,
        bound,
        format!(
            "bound {:?} of {} ({}) refuses nothing the route would admit: route bound {:?} ({}) {why} over the same window with a limit no higher; lower the operation's limit below the route's",
            bound.written.name,
            words::title(op),
            words::of_bound(bound),
            by.written.name,
            words::of_bound(by)
        ),
    ))
}

/// The first bound of the route (or of the operation) that always refuses
/// before `bound` would. Of two bounds that dominate each other (the same
/// bound twice), only the later one is reported.
pub(super) fn unreachable(route: &Route, op: Option<&Operation>, bound: &Bound) -> Option<Warning> {
    let siblings = op.map_or(route.own_bounds(), |o| route.operation_bounds(o));
    let index = |b: &Bound| b.written.index;
    let by = siblings.iter().find(|a| {
        a.in_shared_data()
            && index(a) != index(bound)
            && dominates(a, bound)
            && !(dominates(bound, a) && index(a) > index(bound))
    })?;
    let why = if by.per == Per::Route {
        let scope = if op.is_some() { "operation" } else { "route" };
        format!("counts every request of the {scope}")
    } else {
        "counts the same callers' requests".to_string()
    };
    Some(about_bound(
        WarningCode::UnreachableBound,
        route,
        bound,
        format!(
            "bound {:?} ({}) never refuses: bound {:?} ({}) {why} over the same window with a limit no higher, so it always refuses first",
            bound.written.name,
            words::of_bound(bound),
            by.written.name,
            words::of_bound(by)
        ),
    ))
}

/// A node bound's cluster reading: its figure is per Envoy node (a fleet
/// bound has its own reading).
pub(super) fn per_node(route: &Route, bound: &Bound, nodes: Option<u32>) -> Option<Warning> {
    if bound.fleet().is_some() {
        return None;
    }
    let (limit, ms) = (u64::from(bound.rate.limit), bound.rate.window_ms);
    let message = match bound.written.operation {
        None => words::per_node(limit, ms, bound.per, nodes),
        Some(_) => words::per_node_operation(limit, ms, bound.per, nodes),
    };
    Some(about_bound(WarningCode::PerNode, route, bound, message))
}

/// A note about `bound`.
pub(super) fn about(code: WarningCode, route: &Route, bound: &Bound, message: String) -> Warning {
    about_bound(code, route, bound, message)
}

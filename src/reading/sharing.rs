//! Which bounds of a route keep their windows in one shared-data entry (one
//! read, one write a request for all of them) and why the others do not, in
//! words. The rule is the plan's ([`alone`], [`Tier`]): read, never
//! restated here.

use crate::config::plan::{alone, Alone, Bound, BoundId, Route, Tier};
use crate::count::lane::MAX_TIERS;
use crate::reading::words;

/// "`a`, `b` and `c`".
fn names(bounds: &[&Bound]) -> String {
    let quoted: Vec<String> = bounds.iter().map(|b| format!("`{}`", b.name)).collect();
    match quoted.split_last() {
        None => String::new(),
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
    }
}

/// Where bound `i` of `route` is counted, in one statement: "shares one
/// entry per client address with `minute` and `hour` …", or why it keeps
/// its own; nothing for an installation bound (no entry on the node) or a
/// route's only bound in shared data.
pub fn of(route: &Route, i: BoundId) -> String {
    let Some(b) = route.bound(i) else {
        return String::new();
    };
    // Nothing to share with: a route's only bound in shared data says nothing.
    if route.bounds.iter().filter(|o| o.in_shared_data()).count() < 2 {
        return String::new();
    }
    let lane = route.lane_of(b);
    if !lane.is_empty() {
        let others: Vec<&Bound> = lane
            .iter()
            .copied()
            .filter(|o| !std::ptr::eq(*o, b))
            .collect();
        return format!(
            "shares one entry {} with {}: the {} tiers are read once and written by one \
             compare-and-swap a request",
            words::per(b.per),
            names(&others),
            lane.len()
        );
    }
    let why = match alone(&route.bounds, i) {
        None => return String::new(),
        // Its reading already says the service counts it.
        Some(Alone::Installation) => return String::new(),
        Some(Alone::Fleet) => "a fleet bound is synced with the rate-limit service on its own",
        Some(Alone::Cost) => "it counts a cost, not requests",
        Some(Alone::Shadow) => "a shadow bound is counted apart from the bounds that refuse",
        Some(Alone::Rollout(p)) => {
            return format!(
                "its own entry (its own write): enforced on {p}% (a rollout), it is counted \
                 apart until enforced in full"
            )
        }
        Some(Alone::OnlyOnKey) => {
            "no other bound of the route that may share is keyed like it (the same per, \
             applies_to and operation)"
        }
        Some(Alone::LaneFull) => {
            return format!(
                "its own entry (its own write): the entries of its key already hold {MAX_TIERS} \
                 tiers each"
            )
        }
    };
    format!("its own entry (its own write): {why}")
}

/// The route's shared entries, one statement each: "`second`, `minute`
/// and `hour` share one entry per client address (one write a request)".
pub fn lanes(route: &Route) -> Vec<String> {
    route
        .bounds
        .iter()
        .filter(|b| matches!(b.tier, Tier::Leads(_)))
        .map(|b| {
            let lane = route.lane_of(b);
            format!(
                "{} share one entry {} (one write a request for the {})",
                names(&lane),
                words::per(b.per),
                lane.len()
            )
        })
        .collect()
}

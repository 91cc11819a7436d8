//! How many counters a route's operation bounds can hold, and the warning
//! when that is many: a keyed bound is a counter per operation and per
//! caller.

use super::{about_route, route_path, Warning, WarningCode};
use crate::config::plan::Route;
use crate::config::Per;
use crate::count::lane::Table;
use crate::reading::words;
use serde::Serialize;

/// The counters a route's operation bounds can hold: a keyed bound tracks
/// up to [`Table::DEFAULT`]'s cap of callers, a `per: route` bound is one
/// counter for its operation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counters {
    /// Operation bounds keyed on a caller (address, user, token, org).
    pub keyed_bounds: u64,
    /// Operation bounds with one counter for the operation.
    pub operation_bounds: u64,
    /// Callers each keyed bound tracks at most.
    pub callers_per_bound: u64,
    /// keyed_bounds × callers_per_bound + operation_bounds.
    pub total: u64,
}

/// Above this many potential counters, a route's operations are warned about.
pub const MANY_COUNTERS: u64 = 100_000;

impl Counters {
    pub fn of(route: &Route) -> Counters {
        let all = route
            .operations
            .iter()
            .flat_map(|o| route.operation_bounds(o))
            .filter(|b| b.in_shared_data());
        let (keyed, single): (Vec<_>, Vec<_>) = all.partition(|b| b.per != Per::Route);
        let keyed_bounds = keyed.len() as u64;
        let operation_bounds = single.len() as u64;
        let callers_per_bound = u64::from(Table::DEFAULT.cap);
        Counters {
            keyed_bounds,
            operation_bounds,
            callers_per_bound,
            total: keyed_bounds
                .saturating_mul(callers_per_bound)
                .saturating_add(operation_bounds),
        }
    }

    /// "up to 30,001 counters (3 keyed bounds × 10,000 callers + 1 counter
    /// for a whole operation)".
    pub fn words(&self) -> String {
        let mut parts = Vec::new();
        if self.keyed_bounds > 0 {
            parts.push(format!(
                "{} × {} callers",
                plural(self.keyed_bounds, "keyed bound"),
                words::number(self.callers_per_bound)
            ));
        }
        if self.operation_bounds > 0 {
            parts.push(if self.operation_bounds == 1 {
                "1 counter for a whole operation".to_string()
            } else {
                format!(
                    "{} counters for whole operations",
                    words::number(self.operation_bounds)
                )
            });
        }
        let total = if self.total == 1 {
            "up to 1 counter".to_string()
        } else {
            format!("up to {} counters", words::number(self.total))
        };
        if parts.is_empty() {
            total
        } else {
            format!("{total} ({})", parts.join(" + "))
        }
    }
}

fn plural(n: u64, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{} {what}s", words::number(n))
    }
}

/// Operation bounds multiply: a keyed bound is a counter per operation and
/// per caller, up to the cap of each.
pub(super) fn many_counters(route: &Route) -> Option<Warning> {
    let c = Counters::of(route);
    (c.total > MANY_COUNTERS).then(|| {
        about_route(
            WarningCode::ManyCounters,
            format!("{}.operations", route_path(route)),
            route,
            format!(
                "the operation bounds of route {:?} can hold {}, more than {}: each keyed bound is a counter per operation and per caller, in every Envoy node's memory; bound fewer operations, or put a bound on the route instead",
                route.name,
                c.words(),
                words::number(MANY_COUNTERS)
            ),
        )
    })
}

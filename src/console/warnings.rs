//! What is legal but probably not meant, said out loud: by the CLI (`check`,
//! `explain`) and by the filter once at configure time. Pure: a parsed
//! [`Config`] in, [`Warning`]s out, in route order.
//!
//! The checks read [`RouteFacts`], a small view of the configuration (the
//! compiled matcher and rate, and who each bound applies to), so each check
//! can be tested on hand-built input, including bounds narrowed with
//! `applies_to` before the configuration can express them.

use crate::config::{Config, Per};
use crate::console::words;
use crate::plan::{Matcher, Plan};
use crate::window::Rate;
use serde::Serialize;
use std::fmt;

/// A note informs (the cluster reading of every bound); a warning points at
/// something that is probably a mistake, and fails `check --strict`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Note,
    Warning,
}

/// Stable codes: tools and tests match on these, never on the messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Code {
    /// A route that matches requests and bounds none of them.
    NoBounds,
    /// A route whose every bound is narrowed: everyone else is unbounded.
    NarrowedOnly,
    /// A bound's figure is per Envoy node, not per installation.
    PerNode,
    /// A bound that never refuses: another bound of the route always does first.
    UnreachableBound,
    /// A route that never matches: an earlier route takes all its requests.
    ShadowedRoute,
}

impl Code {
    pub fn as_str(self) -> &'static str {
        match self {
            Code::NoBounds => "no-bounds",
            Code::NarrowedOnly => "narrowed-only",
            Code::PerNode => "per-node",
            Code::UnreachableBound => "unreachable-bound",
            Code::ShadowedRoute => "shadowed-route",
        }
    }

    pub fn level(self) -> Level {
        match self {
            Code::PerNode => Level::Note,
            _ => Level::Warning,
        }
    }
}

impl Level {
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Note => "note",
            Level::Warning => "warning",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Warning {
    pub code: Code,
    pub level: Level,
    /// JSON path of what the warning is about.
    pub path: String,
    /// Index of the route it concerns.
    pub route: usize,
    /// Index of the bound it concerns, when it concerns one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bound: Option<usize>,
    pub message: String,
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}[{}]: {}: {}",
            self.level.as_str(),
            self.code.as_str(),
            self.path,
            self.message
        )
    }
}

/// What the checks know about a route.
#[derive(Debug, Clone)]
pub struct RouteFacts {
    pub index: usize,
    pub name: String,
    pub matcher: Matcher,
    pub bounds: Vec<BoundFacts>,
}

/// What the checks know about a bound.
#[derive(Debug, Clone)]
pub struct BoundFacts {
    pub index: usize,
    pub name: String,
    pub per: Per,
    pub rate: Rate,
    /// True when the bound applies to every caller.
    pub everybody: bool,
    /// Who it applies to, in words, when not everybody.
    pub audience: Option<String>,
}

impl BoundFacts {
    fn words(&self) -> String {
        words::bound(
            u64::from(self.rate.limit),
            self.rate.window_ms,
            self.per,
            self.audience.as_deref(),
        )
    }

    /// True when `self` applies to every caller `other` applies to.
    fn applies_whenever(&self, other: &BoundFacts) -> bool {
        self.everybody || (other.audience.is_some() && self.audience == other.audience)
    }

    /// True when `self` counts, for every request `other` counts, at least
    /// the requests `other` counts: one counter for the route counts them
    /// all; two bounds on the same key count the same caller's requests.
    fn key_covers(&self, other: &BoundFacts) -> bool {
        self.per == Per::Route || self.per == other.per
    }

    /// True when `other` can never refuse a request `self` admits.
    ///
    /// Every bound counts exactly the admitted requests (a refused request is
    /// counted by none), so a counter that counts at least what `other`'s
    /// counts, over windows of the same length (aligned to the same clock,
    /// so the same windows and the same weights), always estimates at least
    /// as much; with a limit no higher it refuses whenever `other` would.
    /// Windows of different lengths weigh their two windows differently and
    /// prove nothing either way, so they are never compared. Two keyed
    /// bounds on the same key see the same admitted requests of the same
    /// callers, so their tables track (and overflow) alike; a `route` bound
    /// counts the route's every request, the overflow counters' included.
    fn dominates(&self, other: &BoundFacts) -> bool {
        self.rate.window_ms == other.rate.window_ms
            && self.rate.limit <= other.rate.limit
            && self.key_covers(other)
            && self.applies_whenever(other)
    }
}

/// The facts of a configuration that parsed.
pub fn facts(config: &Config) -> Vec<RouteFacts> {
    let plan = Plan::compile(config);
    config
        .routes
        .iter()
        .zip(plan.routes)
        .enumerate()
        .map(|(i, (rc, r))| RouteFacts {
            index: i,
            name: r.name,
            matcher: r.matcher,
            bounds: rc
                .bounds
                .iter()
                .zip(r.bounds)
                .enumerate()
                .map(|(j, (bc, b))| BoundFacts {
                    index: j,
                    name: b.name,
                    per: b.per,
                    rate: b.rate,
                    everybody: bc.applies_to_everybody(),
                    audience: bc.audience(),
                })
                .collect(),
        })
        .collect()
}

/// Every warning and note about a configuration that parsed. `nodes` is how
/// many Envoy nodes run it, when known.
pub fn warnings(config: &Config, nodes: Option<u32>) -> Vec<Warning> {
    check(&facts(config), nodes)
}

/// The checks, over facts: per route, its own warnings, then its bounds'.
pub fn check(routes: &[RouteFacts], nodes: Option<u32>) -> Vec<Warning> {
    let mut out = Vec::new();
    for (i, route) in routes.iter().enumerate() {
        out.extend(shadowed(&routes[..i], route));
        out.extend(no_bounds(route));
        out.extend(narrowed_only(route));
        for bound in &route.bounds {
            out.extend(unreachable(route, bound));
            out.push(per_node(route, bound, nodes));
        }
    }
    out
}

fn route_path(route: &RouteFacts) -> String {
    format!("$.routes[{}]", route.index)
}

fn bound_path(route: &RouteFacts, bound: &BoundFacts) -> String {
    format!("$.routes[{}].bounds[{}]", route.index, bound.index)
}

fn warning(
    code: Code,
    path: String,
    route: &RouteFacts,
    bound: Option<usize>,
    message: String,
) -> Warning {
    Warning {
        code,
        level: code.level(),
        path,
        route: route.index,
        bound,
        message,
    }
}

/// A route after one whose matcher covers it never sees a request: the first
/// matching route takes it. Only single earlier routes are compared, so a
/// route covered by several together is not reported.
fn shadowed(earlier: &[RouteFacts], route: &RouteFacts) -> Option<Warning> {
    let by = earlier.iter().find(|e| e.matcher.covers(&route.matcher))?;
    Some(warning(
        Code::ShadowedRoute,
        format!("{}.match", route_path(route)),
        route,
        None,
        format!(
            "route {:?} never matches: the earlier route {:?} ({}) matches every request it would, and the first matching route takes the request",
            route.name,
            by.name,
            route_path(by)
        ),
    ))
}

fn no_bounds(route: &RouteFacts) -> Option<Warning> {
    route.bounds.is_empty().then(|| {
        warning(
            Code::NoBounds,
            format!("{}.bounds", route_path(route)),
            route,
            None,
            format!(
                "route {:?} has no bounds: the requests it matches are not limited, and no later route counts them",
                route.name
            ),
        )
    })
}

fn narrowed_only(route: &RouteFacts) -> Option<Warning> {
    if route.bounds.is_empty() || route.bounds.iter().any(|b| b.everybody) {
        return None;
    }
    let mut who: Vec<&str> = route
        .bounds
        .iter()
        .filter_map(|b| b.audience.as_deref())
        .collect();
    who.dedup();
    let who = if who.is_empty() {
        "some callers".to_string()
    } else {
        who.join("; ")
    };
    Some(warning(
        Code::NarrowedOnly,
        format!("{}.bounds", route_path(route)),
        route,
        None,
        format!(
            "no bound of route {:?} applies to everybody: it bounds {who}, and everyone else is not bounded at all; add a bound without applies_to to cover them",
            route.name
        ),
    ))
}

/// The first bound of the route that always refuses before `bound` would.
/// Of two bounds that dominate each other (the same bound twice), only the
/// later one is reported.
fn unreachable(route: &RouteFacts, bound: &BoundFacts) -> Option<Warning> {
    let by = route.bounds.iter().find(|a| {
        a.index != bound.index
            && a.dominates(bound)
            && !(bound.dominates(a) && a.index > bound.index)
    })?;
    let why = if by.per == Per::Route {
        "counts every request of the route"
    } else {
        "counts the same callers' requests"
    };
    Some(warning(
        Code::UnreachableBound,
        bound_path(route, bound),
        route,
        Some(bound.index),
        format!(
            "bound {:?} ({}) never refuses: bound {:?} ({}) {why} over the same window with a limit no higher, so it always refuses first",
            bound.name,
            bound.words(),
            by.name,
            by.words()
        ),
    ))
}

fn per_node(route: &RouteFacts, bound: &BoundFacts, nodes: Option<u32>) -> Warning {
    warning(
        Code::PerNode,
        bound_path(route, bound),
        route,
        Some(bound.index),
        words::per_node(
            u64::from(bound.rate.limit),
            bound.rate.window_ms,
            bound.per,
            nodes,
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse;

    const MINUTE: u64 = 60_000;

    fn b(index: usize, per: Per, limit: u32, window_ms: u64) -> BoundFacts {
        BoundFacts {
            index,
            name: format!("b{index}"),
            per,
            rate: Rate { limit, window_ms },
            everybody: true,
            audience: None,
        }
    }

    fn narrowed(mut bound: BoundFacts, who: &str) -> BoundFacts {
        bound.everybody = false;
        bound.audience = Some(who.to_string());
        bound
    }

    fn route(bounds: Vec<BoundFacts>) -> RouteFacts {
        RouteFacts {
            index: 0,
            name: "r".into(),
            matcher: Matcher::default(),
            bounds,
        }
    }

    fn codes(ws: &[Warning], code: Code) -> Vec<String> {
        ws.iter()
            .filter(|w| w.code == code)
            .map(|w| w.path.clone())
            .collect()
    }

    fn unreachable_paths(bounds: Vec<BoundFacts>) -> Vec<String> {
        codes(&check(&[route(bounds)], None), Code::UnreachableBound)
    }

    fn from_json(json: &str, nodes: Option<u32>) -> Vec<Warning> {
        warnings(&parse(json.as_bytes()).unwrap(), nodes)
    }

    #[test]
    fn a_route_bound_makes_a_looser_keyed_bound_of_the_same_window_unreachable() {
        // 10 a minute for the route: 20 a minute per address never refuses.
        let ws = unreachable_paths(vec![
            b(0, Per::Route, 10, MINUTE),
            b(1, Per::Address, 20, MINUTE),
        ]);
        assert_eq!(ws, ["$.routes[0].bounds[1]"]);
        // Order does not matter: every bound is checked.
        let ws = unreachable_paths(vec![
            b(0, Per::Address, 20, MINUTE),
            b(1, Per::Route, 10, MINUTE),
        ]);
        assert_eq!(ws, ["$.routes[0].bounds[0]"]);
    }

    #[test]
    fn the_same_key_with_a_lower_limit_makes_the_higher_one_unreachable() {
        let ws = unreachable_paths(vec![
            b(0, Per::Address, 10, MINUTE),
            b(1, Per::Address, 5, MINUTE),
        ]);
        assert_eq!(ws, ["$.routes[0].bounds[0]"]);
    }

    #[test]
    fn a_bound_written_twice_is_reported_once() {
        let ws = unreachable_paths(vec![
            b(0, Per::Address, 5, MINUTE),
            b(1, Per::Address, 5, MINUTE),
            b(2, Per::Address, 5, MINUTE),
        ]);
        assert_eq!(ws, ["$.routes[0].bounds[1]", "$.routes[0].bounds[2]"]);
    }

    #[test]
    fn nothing_is_claimed_that_cannot_be_proved() {
        // Different windows: never compared, whatever the limits.
        assert!(unreachable_paths(vec![
            b(0, Per::Route, 10, MINUTE),
            b(1, Per::Route, 20, 2 * MINUTE)
        ])
        .is_empty());
        assert!(unreachable_paths(vec![
            b(0, Per::Route, 1, 1_000),
            b(1, Per::Route, 1_000, MINUTE)
        ])
        .is_empty());
        // A stricter per-address bound says nothing about the whole route.
        assert!(unreachable_paths(vec![
            b(0, Per::Address, 5, MINUTE),
            b(1, Per::Route, 100, MINUTE)
        ])
        .is_empty());
        // The stricter bound is the narrower key: both can refuse.
        assert!(unreachable_paths(vec![
            b(0, Per::Route, 20, MINUTE),
            b(1, Per::Address, 10, MINUTE)
        ])
        .is_empty());
        // Different keys: a per-address bound never covers a per-user one.
        assert!(unreachable_paths(vec![
            b(0, Per::Address, 5, MINUTE),
            b(1, Per::User, 50, MINUTE)
        ])
        .is_empty());
        // A narrowed bound does not cover one that applies to everybody.
        assert!(unreachable_paths(vec![
            narrowed(b(0, Per::Route, 5, MINUTE), "anyone holding trial"),
            b(1, Per::Route, 50, MINUTE)
        ])
        .is_empty());
    }

    #[test]
    fn a_bound_for_everybody_covers_a_narrowed_one_and_so_does_the_same_audience() {
        let ws = unreachable_paths(vec![
            b(0, Per::Route, 5, MINUTE),
            narrowed(b(1, Per::User, 50, MINUTE), "anyone holding trial"),
        ]);
        assert_eq!(ws, ["$.routes[0].bounds[1]"]);
        let ws = unreachable_paths(vec![
            narrowed(b(0, Per::User, 5, MINUTE), "anyone holding trial"),
            narrowed(b(1, Per::User, 50, MINUTE), "anyone holding trial"),
            narrowed(b(2, Per::User, 50, MINUTE), "anyone holding partner"),
        ]);
        assert_eq!(ws, ["$.routes[0].bounds[1]"]);
    }

    #[test]
    fn a_route_whose_bounds_are_all_narrowed_is_said_to_be_open_to_everyone_else() {
        let r = route(vec![
            narrowed(b(0, Per::User, 1_000, MINUTE), "anyone holding partner"),
            narrowed(b(1, Per::User, 60, MINUTE), "anyone holding trial"),
        ]);
        let ws = check(&[r], None);
        let w: Vec<_> = ws.iter().filter(|w| w.code == Code::NarrowedOnly).collect();
        assert_eq!(w.len(), 1, "{ws:?}");
        assert_eq!(w[0].path, "$.routes[0].bounds");
        assert_eq!(w[0].level, Level::Warning);
        assert!(
            w[0].message
                .contains("anyone holding partner; anyone holding trial"),
            "{}",
            w[0].message
        );
        assert!(
            w[0].message.contains("everyone else is not bounded"),
            "{}",
            w[0].message
        );
        // One bound for everybody is enough.
        let r = route(vec![
            narrowed(b(0, Per::User, 1_000, MINUTE), "anyone holding partner"),
            b(1, Per::Address, 100, MINUTE),
        ]);
        assert!(codes(&check(&[r], None), Code::NarrowedOnly).is_empty());
    }

    #[test]
    fn every_bound_gets_its_cluster_reading() {
        let json = r#"{"routes":[{"name":"a","bounds":[
            {"per":"address","limit":5,"window":"PT1M"},{"per":"route","limit":1000,"window":"PT1S"}]}]}"#;
        let ws = from_json(json, Some(4));
        let notes: Vec<_> = ws.iter().filter(|w| w.code == Code::PerNode).collect();
        assert_eq!(notes.len(), 2);
        assert_eq!(notes[0].level, Level::Note);
        assert_eq!(notes[0].path, "$.routes[0].bounds[0]");
        assert_eq!(
            notes[1].message,
            "per node: on 4 nodes up to 4 × 1,000 = 4,000 a second for the whole route through the installation"
        );
        let ws = from_json(json, None);
        assert!(ws[0]
            .message
            .starts_with("per node: each Envoy node counts on its own"));
    }

    #[test]
    fn routes_without_bounds_and_shadowed_routes_are_warned_about() {
        let ws = from_json(
            r#"{"routes":[
                {"name":"health","match":{"path_prefix":"/health"}},
                {"name":"api","match":{"path_prefix":"/api"},"bounds":[{"per":"route","limit":5,"window":"PT1S"}]},
                {"name":"api_v1","match":{"path_prefix":"/api/v1","methods":["GET"]},"bounds":[{"per":"route","limit":5,"window":"PT1S"}]},
                {"name":"rest","bounds":[{"per":"address","limit":5,"window":"PT1S"}]},
                {"name":"after_rest","match":{"host":"example.com"},"bounds":[{"per":"address","limit":5,"window":"PT1S"}]}]}"#,
            None,
        );
        assert_eq!(codes(&ws, Code::NoBounds), ["$.routes[0].bounds"]);
        assert_eq!(
            codes(&ws, Code::ShadowedRoute),
            ["$.routes[2].match", "$.routes[4].match"]
        );
        let shadowed: Vec<_> = ws
            .iter()
            .filter(|w| w.code == Code::ShadowedRoute)
            .collect();
        assert!(
            shadowed[0].message.contains("route \"api\" ($.routes[1])"),
            "{}",
            shadowed[0].message
        );
        assert_eq!(shadowed[1].route, 4);
    }

    #[test]
    fn the_demo_configuration_has_only_its_cluster_reading() {
        let ws = from_json(
            r#"{"instance":"demo","routes":[{"name":"hello","match":{"route_name":"hello","path_prefix":"/hello","methods":["GET"]},
                "bounds":[{"name":"per_address","per":"address","limit":5,"window":"PT1M"}]}]}"#,
            None,
        );
        assert_eq!(ws.len(), 1);
        assert_eq!(ws[0].code, Code::PerNode);
        assert_eq!(ws[0].to_string().split(':').next(), Some("note[per-node]"));
    }
}

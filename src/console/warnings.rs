//! What is legal but probably not meant, said out loud: by the CLI (`check`,
//! `explain`) and by the filter once at configure time. Pure: a parsed
//! [`Config`] in, [`Warning`]s out, in route order.
//!
//! The checks read [`RouteFacts`], a small view of the configuration (the
//! compiled matcher and rate, and who each bound applies to), so each check
//! can be tested on hand-built input, including bounds narrowed with
//! `applies_to` before the configuration can express them.

use crate::config::operations::{parse_template, Segment};
use crate::config::plan::{Matcher, Plan};
use crate::config::{operation_name, window_ms, BoundConfig, Config, Per};
use crate::console::words;
use crate::count::slots::Table;
use crate::count::window::Rate;
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
    /// A route's operation bounds can hold a large number of counters.
    ManyCounters,
    /// An operation bound that refuses nothing a route bound would admit.
    LooseOperationBound,
    /// An operation the route never sees: its `match` excludes the
    /// operation's path or method.
    UnreachableOperation,
}

impl Code {
    pub fn as_str(self) -> &'static str {
        match self {
            Code::NoBounds => "no-bounds",
            Code::NarrowedOnly => "narrowed-only",
            Code::PerNode => "per-node",
            Code::UnreachableBound => "unreachable-bound",
            Code::ShadowedRoute => "shadowed-route",
            Code::ManyCounters => "many-counters",
            Code::LooseOperationBound => "loose-operation-bound",
            Code::UnreachableOperation => "unreachable-operation",
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
    /// Index of the operation it concerns, when it concerns one (then
    /// `bound` is a bound of that operation).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub operation: Option<usize>,
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
    /// The route's `match.path_prefix` and `match.methods`, as written.
    pub path_prefix: Option<String>,
    pub methods: Vec<String>,
    pub bounds: Vec<BoundFacts>,
    pub operations: Vec<OperationFacts>,
}

/// What the checks know about an operation of a route.
#[derive(Debug, Clone)]
pub struct OperationFacts {
    pub index: usize,
    /// Its stat name (`name`, else `operation_id`, else `op{index}`).
    pub name: String,
    pub method: String,
    /// The path template as written.
    pub template: String,
    pub operation_id: Option<String>,
    pub bounds: Vec<BoundFacts>,
}

impl OperationFacts {
    /// "POST /orders/{id}/pay (payOrder)".
    pub fn title(&self) -> String {
        words::operation(&self.method, &self.template, self.operation_id.as_deref())
    }
}

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
    pub fn of(route: &RouteFacts) -> Counters {
        let all = route.operations.iter().flat_map(|o| o.bounds.iter());
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
    /// Counts and never refuses (the bound's or the whole filter's `shadow`).
    pub shadow: bool,
}

impl BoundFacts {
    /// The facts of a bound as configured.
    pub fn of(index: usize, name: String, b: &BoundConfig, all_shadow: bool) -> BoundFacts {
        BoundFacts {
            index,
            name,
            per: b.per,
            rate: Rate {
                limit: u32::try_from(b.limit).unwrap_or(u32::MAX),
                // Validated; the fallback is never reached.
                window_ms: window_ms(&b.window).unwrap_or(60_000),
            },
            everybody: b.applies_to_everybody(),
            audience: b.audience(),
            shadow: b.shadow || all_shadow,
        }
    }

    fn words(&self) -> String {
        words::bound(
            u64::from(self.rate.limit),
            self.rate.window_ms,
            self.per,
            self.audience.as_deref(),
        )
    }

    fn operation_words(&self) -> String {
        words::operation_bound(
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
    /// A shadow bound refuses nothing, so it dominates only shadow bounds.
    ///
    /// The same holds for a route bound over a bound of one of the route's
    /// operations: every request to the operation is a request of the route,
    /// so the route's counter (for the whole route, or for the same caller)
    /// counts at least what the operation's counts. (Past the cap, an
    /// operation's overflow counter is shared by callers the route may still
    /// track one by one; that regime is not one a bound is written for.)
    fn dominates(&self, other: &BoundFacts) -> bool {
        (!self.shadow || other.shadow)
            && self.rate.window_ms == other.rate.window_ms
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
            path_prefix: rc.matching.path_prefix.clone(),
            methods: rc.matching.methods.clone(),
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
                    shadow: b.shadow,
                })
                .collect(),
            operations: rc
                .operations
                .iter()
                .enumerate()
                .map(|(k, o)| OperationFacts {
                    index: k,
                    name: operation_name(o, k),
                    method: o.method.clone(),
                    template: o.path.clone(),
                    operation_id: o.operation_id.clone(),
                    bounds: o
                        .bounds
                        .iter()
                        .enumerate()
                        .map(|(j, b)| {
                            BoundFacts::of(j, crate::config::bound_name(b, j), b, config.shadow)
                        })
                        .collect(),
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
        out.extend(many_counters(route));
        for bound in &route.bounds {
            out.extend(unreachable(route, None, bound));
            out.push(per_node(route, None, bound, nodes));
        }
        for op in &route.operations {
            out.extend(unreachable_operation(route, op));
            for bound in &op.bounds {
                out.extend(loose_operation_bound(route, op, bound));
                out.extend(unreachable(route, Some(op), bound));
                out.push(per_node(route, Some(op), bound, nodes));
            }
        }
    }
    out
}

fn route_path(route: &RouteFacts) -> String {
    format!("$.routes[{}]", route.index)
}

fn operation_path(route: &RouteFacts, op: &OperationFacts) -> String {
    format!("$.routes[{}].operations[{}]", route.index, op.index)
}

fn bound_path(route: &RouteFacts, op: Option<&OperationFacts>, bound: &BoundFacts) -> String {
    match op {
        None => format!("$.routes[{}].bounds[{}]", route.index, bound.index),
        Some(op) => format!("{}.bounds[{}]", operation_path(route, op), bound.index),
    }
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
        operation: None,
        bound,
        message,
    }
}

fn op_warning(
    code: Code,
    path: String,
    route: &RouteFacts,
    op: &OperationFacts,
    bound: Option<usize>,
    message: String,
) -> Warning {
    Warning {
        operation: Some(op.index),
        ..warning(code, path, route, bound, message)
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
    route.bounds.is_empty().then(|| {
        warning(
            Code::NoBounds,
            format!("{}.bounds", route_path(route)),
            route,
            None,
            message,
        )
    })
}

/// Operation bounds multiply: a keyed bound is a counter per operation and
/// per caller, up to the cap of each.
fn many_counters(route: &RouteFacts) -> Option<Warning> {
    let c = Counters::of(route);
    (c.total > MANY_COUNTERS).then(|| {
        warning(
            Code::ManyCounters,
            format!("{}.operations", route_path(route)),
            route,
            None,
            format!(
                "the operation bounds of route {:?} can hold {}, more than {}: each keyed bound is a counter per operation and per caller, in every Envoy node's memory; bound fewer operations, or put a bound on the route instead",
                route.name,
                c.words(),
                words::number(MANY_COUNTERS)
            ),
        )
    })
}

/// An operation bound that a route bound always refuses before (or with):
/// it refuses nothing the route would admit.
fn loose_operation_bound(
    route: &RouteFacts,
    op: &OperationFacts,
    bound: &BoundFacts,
) -> Option<Warning> {
    let by = route.bounds.iter().find(|r| r.dominates(bound))?;
    let why = if by.per == Per::Route {
        "counts every request of the route, these included,"
    } else {
        "counts the same callers' requests to the whole route, these included,"
    };
    Some(op_warning(
        Code::LooseOperationBound,
        bound_path(route, Some(op), bound),
        route,
        op,
        Some(bound.index),
        format!(
            "bound {:?} of {} ({}) refuses nothing the route would admit: route bound {:?} ({}) {why} over the same window with a limit no higher; lower the operation's limit below the route's",
            bound.name,
            op.title(),
            bound.operation_words(),
            by.name,
            by.words()
        ),
    ))
}

/// An operation whose method or path the route's `match` excludes.
fn unreachable_operation(route: &RouteFacts, op: &OperationFacts) -> Option<Warning> {
    let at = operation_path(route, op);
    // A HEAD request finds a GET operation: a route taking HEAD reaches it.
    let reached = |m: &String| crate::config::normalize::method_matches(&op.method, m);
    if !route.methods.is_empty() && !route.methods.iter().any(reached) {
        return Some(op_warning(
            Code::UnreachableOperation,
            format!("{at}.method"),
            route,
            op,
            None,
            format!(
                "operation {} never matches: route {:?} takes only {} requests, so its bounds never count",
                op.title(),
                route.name,
                route.methods.join(" or ")
            ),
        ));
    }
    let prefix = route.path_prefix.as_deref()?;
    (!template_reachable(prefix, &op.template)).then(|| {
        op_warning(
            Code::UnreachableOperation,
            format!("{at}.path"),
            route,
            op,
            None,
            format!(
                "operation {} never matches: route {:?} takes only paths starting with {prefix}, and no path of {} does, so its bounds never count",
                op.title(),
                route.name,
                op.template
            ),
        )
    })
}

/// One step of a path template, for [`template_reachable`].
#[derive(Clone, Copy, PartialEq, Eq)]
enum Step {
    Byte(u8),
    /// One or more bytes other than `/`.
    Param,
}

/// True unless no request path that the operations matcher takes for
/// `template` starts with `prefix`. Conservative: true whenever unsure
/// (percent-encoding in either, a template that does not parse).
///
/// The paths a template takes: `/` and each segment, a parameter being one
/// or more bytes other than `/`, then an optional trailing `/` (`/` itself
/// for the template `/`). The query string is cut before both the route's
/// prefix and the operation are matched.
pub fn template_reachable(prefix: &str, template: &str) -> bool {
    if prefix.contains('%') || template.contains('%') {
        return true;
    }
    let Ok(segments) = parse_template(template) else {
        return true;
    };
    let mut steps = Vec::new();
    for seg in &segments {
        steps.push(Step::Byte(b'/'));
        match seg {
            Segment::Literal(l) => steps.extend(l.bytes().map(Step::Byte)),
            Segment::Param { prefix, suffix } => {
                steps.extend(prefix.bytes().map(Step::Byte));
                steps.push(Step::Param);
                steps.extend(suffix.bytes().map(Step::Byte));
            }
        }
    }
    if segments.is_empty() {
        steps.push(Step::Byte(b'/'));
    }
    let end = steps.len();
    // States: (i, inside): before step i, or inside the parameter at step i
    // with at least one byte taken; `end + 1` is after the trailing slash.
    let mut states: Vec<(usize, bool)> = vec![(0, false)];
    for c in prefix.bytes() {
        let mut next = Vec::new();
        for &(i, inside) in &states {
            if inside {
                if c != b'/' {
                    next.push((i, true));
                }
                // The parameter may end here: the byte is the next step's.
                step(&steps, end, i + 1, c, &mut next);
            } else {
                step(&steps, end, i, c, &mut next);
            }
        }
        next.sort_unstable();
        next.dedup();
        if next.is_empty() {
            return false;
        }
        states = next;
    }
    true
}

/// The states after byte `c` from before step `i`.
fn step(steps: &[Step], end: usize, i: usize, c: u8, next: &mut Vec<(usize, bool)>) {
    match steps.get(i) {
        Some(Step::Byte(b)) if *b == c => next.push((i + 1, false)),
        Some(Step::Param) if c != b'/' => next.push((i, true)),
        None if i == end && c == b'/' => next.push((end + 1, false)),
        _ => {}
    }
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

/// The first bound of the route (or of the operation) that always refuses
/// before `bound` would. Of two bounds that dominate each other (the same
/// bound twice), only the later one is reported.
fn unreachable(
    route: &RouteFacts,
    op: Option<&OperationFacts>,
    bound: &BoundFacts,
) -> Option<Warning> {
    let siblings = op.map_or(&route.bounds, |o| &o.bounds);
    let by = siblings.iter().find(|a| {
        a.index != bound.index
            && a.dominates(bound)
            && !(bound.dominates(a) && a.index > bound.index)
    })?;
    let (scope, words_of): (&str, fn(&BoundFacts) -> String) = match op {
        None => ("route", BoundFacts::words),
        Some(_) => ("operation", BoundFacts::operation_words),
    };
    let why = if by.per == Per::Route {
        format!("counts every request of the {scope}")
    } else {
        "counts the same callers' requests".to_string()
    };
    let message = format!(
        "bound {:?} ({}) never refuses: bound {:?} ({}) {why} over the same window with a limit no higher, so it always refuses first",
        bound.name,
        words_of(bound),
        by.name,
        words_of(by)
    );
    let path = bound_path(route, op, bound);
    Some(match op {
        None => warning(
            Code::UnreachableBound,
            path,
            route,
            Some(bound.index),
            message,
        ),
        Some(op) => op_warning(
            Code::UnreachableBound,
            path,
            route,
            op,
            Some(bound.index),
            message,
        ),
    })
}

fn per_node(
    route: &RouteFacts,
    op: Option<&OperationFacts>,
    bound: &BoundFacts,
    nodes: Option<u32>,
) -> Warning {
    let (limit, ms) = (u64::from(bound.rate.limit), bound.rate.window_ms);
    let path = bound_path(route, op, bound);
    match op {
        None => warning(
            Code::PerNode,
            path,
            route,
            Some(bound.index),
            words::per_node(limit, ms, bound.per, nodes),
        ),
        Some(op) => op_warning(
            Code::PerNode,
            path,
            route,
            op,
            Some(bound.index),
            words::per_node_operation(limit, ms, bound.per, nodes),
        ),
    }
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
            shadow: false,
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
            path_prefix: None,
            methods: Vec::new(),
            bounds,
            operations: Vec::new(),
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

    /// A shop route: 100 a minute per address for the route, and operations.
    fn shop(route_extra: &str, operations: &str) -> Vec<Warning> {
        from_json(
            &format!(
                r#"{{"identity":{{"header":{{"user":"x-user"}}}},"routes":[{{"name":"shop","match":{{"path_prefix":"/api"{route_extra}}},
                "bounds":[{{"name":"addr","per":"address","limit":100,"window":"PT1M"}},
                          {{"name":"user","per":"user","limit":60,"window":"PT1M"}}],
                "operations":[{operations}]}}]}}"#
            ),
            None,
        )
    }

    fn op(id: &str, method: &str, path: &str, bounds: &str) -> String {
        format!(
            r#"{{"operation_id":"{id}","method":"{method}","path":"{path}","bounds":[{bounds}]}}"#
        )
    }

    #[test]
    fn an_operation_bound_no_stricter_than_a_route_bound_is_loose() {
        let ws = shop(
            "",
            &[
                // Looser than the route's 60 a minute per user: loose.
                op("payOrder", "POST", "/api/orders/{id}/pay", r#"{"per":"user","limit":60,"window":"PT1M"}"#),
                // Stricter: fine.
                op("listMine", "GET", "/api/orders/mine", r#"{"per":"user","limit":5,"window":"PT1M"}"#),
                // Same per, other window: proves nothing.
                op("getOrder", "GET", "/api/orders/{id}", r#"{"per":"user","limit":600,"window":"PT1H"}"#),
                // Other key: a per-address route bound says nothing per token or org.
                op("search", "GET", "/api/search", r#"{"per":"user","limit":5,"window":"PT1S"},{"per":"address","limit":100,"window":"PT1M"}"#),
            ]
            .join(","),
        );
        let loose: Vec<&Warning> = ws
            .iter()
            .filter(|w| w.code == Code::LooseOperationBound)
            .collect();
        let paths: Vec<&str> = loose.iter().map(|w| w.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "$.routes[0].operations[0].bounds[0]",
                "$.routes[0].operations[3].bounds[1]"
            ],
            "{ws:#?}"
        );
        assert_eq!(loose[0].operation, Some(0));
        assert_eq!(loose[0].bound, Some(0));
        assert_eq!(loose[0].level, Level::Warning);
        assert_eq!(
            loose[0].message,
            "bound \"b0\" of POST /api/orders/{id}/pay (payOrder) (60 a minute per user, per operation) refuses nothing the route would admit: route bound \"user\" (60 a minute per user) counts the same callers' requests to the whole route, these included, over the same window with a limit no higher; lower the operation's limit below the route's"
        );
    }

    #[test]
    fn loose_operation_bounds_are_claimed_only_when_proved() {
        let r = |bounds: Vec<BoundFacts>, ob: Vec<BoundFacts>| {
            let mut r = route(bounds);
            r.operations.push(OperationFacts {
                index: 0,
                name: "o".into(),
                method: "GET".into(),
                template: "/o".into(),
                operation_id: None,
                bounds: ob,
            });
            codes(&check(&[r], None), Code::LooseOperationBound)
        };
        // A route counter covers any key of the operation's.
        assert_eq!(
            r(
                vec![b(0, Per::Route, 10, MINUTE)],
                vec![b(0, Per::Org, 10, MINUTE)]
            ),
            ["$.routes[0].operations[0].bounds[0]"]
        );
        // A per-caller route bound says nothing about a counter for the whole operation.
        assert!(r(
            vec![b(0, Per::Address, 10, MINUTE)],
            vec![b(0, Per::Route, 50, MINUTE)]
        )
        .is_empty());
        // Stricter operation bound, other window, other key: nothing.
        assert!(r(
            vec![b(0, Per::User, 10, MINUTE)],
            vec![b(0, Per::User, 9, MINUTE)]
        )
        .is_empty());
        assert!(r(
            vec![b(0, Per::User, 10, MINUTE)],
            vec![b(0, Per::User, 10, 1_000)]
        )
        .is_empty());
        assert!(r(
            vec![b(0, Per::User, 10, MINUTE)],
            vec![b(0, Per::Token, 50, MINUTE)]
        )
        .is_empty());
        // A narrowed route bound does not cover callers it does not apply to.
        assert!(r(
            vec![narrowed(
                b(0, Per::User, 10, MINUTE),
                "anyone holding trial"
            )],
            vec![b(0, Per::User, 50, MINUTE)]
        )
        .is_empty());
        assert_eq!(
            r(
                vec![narrowed(
                    b(0, Per::User, 10, MINUTE),
                    "anyone holding trial"
                )],
                vec![narrowed(
                    b(0, Per::User, 50, MINUTE),
                    "anyone holding trial"
                )]
            ),
            ["$.routes[0].operations[0].bounds[0]"]
        );
        // A shadow route bound refuses nothing: the operation's can.
        let mut shadow = b(0, Per::Route, 10, MINUTE);
        shadow.shadow = true;
        assert!(r(vec![shadow.clone()], vec![b(0, Per::User, 50, MINUTE)]).is_empty());
        // A shadow bound does not make another unreachable either.
        assert!(unreachable_paths(vec![shadow, b(1, Per::Address, 20, MINUTE)]).is_empty());
    }

    #[test]
    fn bounds_of_one_operation_are_compared_among_themselves() {
        let ws = shop(
            "",
            &op(
                "payOrder",
                "POST",
                "/api/orders/{id}/pay",
                r#"{"name":"burst","per":"route","limit":10,"window":"PT1M"},{"name":"mine","per":"user","limit":20,"window":"PT1M"}"#,
            ),
        );
        let w: Vec<_> = ws
            .iter()
            .filter(|w| w.code == Code::UnreachableBound)
            .collect();
        assert_eq!(w.len(), 1, "{ws:#?}");
        assert_eq!(w[0].path, "$.routes[0].operations[0].bounds[1]");
        assert_eq!(w[0].operation, Some(0));
        assert!(
            w[0].message
                .contains("counts every request of the operation"),
            "{}",
            w[0].message
        );
        assert!(
            w[0].message
                .contains("(20 a minute per user, per operation)"),
            "{}",
            w[0].message
        );
    }

    #[test]
    fn operation_bounds_multiply_into_counters() {
        let many: Vec<String> = (0..11)
            .map(|i| {
                op(
                    &format!("op{i}"),
                    "GET",
                    &format!("/api/r{i}"),
                    r#"{"per":"user","limit":5,"window":"PT1M"}"#,
                )
            })
            .collect();
        let ws = shop("", &many[..10].join(","));
        assert!(
            codes(&ws, Code::ManyCounters).is_empty(),
            "100,000 is not more than 100,000"
        );
        let ws = shop("", &many.join(","));
        let w: Vec<_> = ws.iter().filter(|w| w.code == Code::ManyCounters).collect();
        assert_eq!(w.len(), 1);
        assert_eq!(w[0].path, "$.routes[0].operations");
        assert_eq!(w[0].operation, None);
        assert!(
            w[0].message.starts_with("the operation bounds of route \"shop\" can hold up to 110,000 counters (11 keyed bounds × 10,000 callers), more than 100,000"),
            "{}",
            w[0].message
        );
        // Counters for whole operations are one each.
        let mut r = route(vec![]);
        r.operations.push(OperationFacts {
            index: 0,
            name: "o".into(),
            method: "GET".into(),
            template: "/o".into(),
            operation_id: None,
            bounds: vec![
                b(0, Per::Route, 5, MINUTE),
                b(1, Per::Address, 5, MINUTE),
                b(2, Per::Route, 50, 3_600_000),
            ],
        });
        let c = Counters::of(&r);
        assert_eq!(c.total, 10_002);
        assert_eq!(c.words(), "up to 10,002 counters (1 keyed bound × 10,000 callers + 2 counters for whole operations)");
    }

    #[test]
    fn operations_the_route_never_sees_are_warned_about() {
        let ws = shop(
            r#","methods":["GET","POST"]"#,
            &[
                op(
                    "payOrder",
                    "POST",
                    "/api/orders/{id}/pay",
                    r#"{"per":"user","limit":5,"window":"PT1M"}"#,
                ),
                op(
                    "health",
                    "GET",
                    "/health",
                    r#"{"per":"user","limit":5,"window":"PT1M"}"#,
                ),
                op(
                    "cancel",
                    "DELETE",
                    "/api/orders/{id}",
                    r#"{"per":"user","limit":5,"window":"PT1M"}"#,
                ),
            ]
            .join(","),
        );
        assert_eq!(
            codes(&ws, Code::UnreachableOperation),
            [
                "$.routes[0].operations[1].path",
                "$.routes[0].operations[2].method"
            ],
            "{ws:#?}"
        );
        let w = ws
            .iter()
            .find(|w| w.code == Code::UnreachableOperation)
            .unwrap();
        assert_eq!(w.operation, Some(1));
        assert!(w.message.starts_with("operation GET /health (health) never matches: route \"shop\" takes only paths starting with /api"), "{}", w.message);
        // A route taking only HEAD reaches a GET operation (HEAD is its GET).
        let get = op(
            "get",
            "GET",
            "/api/orders/{id}",
            r#"{"per":"user","limit":5,"window":"PT1M"}"#,
        );
        let ws = shop(r#","methods":["HEAD"]"#, &get);
        assert!(codes(&ws, Code::UnreachableOperation).is_empty(), "{ws:#?}");
        let ws = shop(r#","methods":["POST"]"#, &get);
        assert_eq!(codes(&ws, Code::UnreachableOperation).len(), 1, "{ws:#?}");
    }

    #[test]
    fn template_reachability_is_proved_not_guessed() {
        let yes = [
            ("/api", "/api/orders"),
            ("/api/", "/api/orders"),
            ("/api/orders/", "/api/orders"), // trailing slash is the same path
            ("/api/orders/mine", "/api/orders/{id}"),
            ("/api/orders/42/p", "/api/orders/{id}/pay"),
            ("/files/a.j", "/files/{name}.json"),
            ("/files/x.json.json", "/files/{name}.json"),
            ("/", "/"),
            ("//", "/"),
            ("/api/v", "/api/{version}/orders"),
            ("/caf", "/caf%C3%A9"), // percent-encoding: unsure, so yes
            ("/%61pi", "/api"),
            ("/ord", "/{x}"),
            ("", "/anything"),
        ];
        for (p, t) in yes {
            assert!(template_reachable(p, t), "{p} {t}");
        }
        let no = [
            ("/api", "/health"),
            ("/api/v2", "/api/v1/orders"),
            ("/api/orders/5/", "/api/orders/{id}x"),
            ("/api/orders//", "/api/orders/{id}"),
            ("/api/orders/42/pay/", "/api/orders/{id}"),
            ("/api/orders/mine/x", "/api/orders/{id}"),
            ("/api/orders/mine//", "/api/orders/{id}"),
            ("/apis", "/api/orders"),
            ("/files/.json/", "/files/{name}.json"),
            ("/a", "/"),
        ];
        for (p, t) in no {
            assert!(!template_reachable(p, t), "{p} {t}");
        }
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

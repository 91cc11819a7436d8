//! `explain` as data: every route's bounds in words, grouped by the phase in
//! which they are checked, with the warnings beside the rows they concern.
//! A projection of the compiled [`Plan`]: nothing is compiled again.
//! The CLI's `render` (cli/src/render.rs) turns it into text; it
//! serializes as the JSON of `explain --format json`.

use crate::config::plan::{Bound, BoundId, BoundScope, Plan, Route};
use crate::config::Per;
use crate::reading::warnings::{warnings_at, Counters, Severity, Warning};
use crate::reading::{line, sharing, words};
use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct Explanation {
    pub instance: String,
    /// How many Envoy nodes the per-node readings assume, when given.
    pub nodes: Option<u32>,
    pub routes: Vec<RouteRow>,
    pub summary: Summary,
    /// How a client address is counted, when some bound counts one (per
    /// address, or anonymous callers of an identity bound).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_address: Option<ClientAddressRow>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ClientAddressRow {
    pub ipv4_prefix: u32,
    pub ipv6_prefix: u32,
    pub path: String,
    /// "client addresses are counted per IPv4 address and per IPv6 /64 network".
    pub words: String,
}

#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Summary {
    pub routes: usize,
    /// Bounds of routes (operations' bounds not included).
    pub bounds: usize,
    /// Operations with bounds of their own, and their bounds.
    pub operations: usize,
    pub operation_bounds: usize,
    pub warnings: usize,
    pub notes: usize,
    /// Bounds counted on each node on its own (not installation or fleet).
    pub node_bounds: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct RouteRow {
    pub name: String,
    pub path: String,
    /// Which requests the route takes, in words.
    pub matches: String,
    /// Warnings about the route as a whole.
    pub warnings: Vec<Warning>,
    /// Always both phases, in the order they run: the route's bounds, then
    /// its operations' (those rows name their operation).
    pub phases: Vec<PhaseRows>,
    /// Operations with bounds of their own, with their warnings.
    pub operations: Vec<OperationRow>,
    /// Its bounds that share one entry per caller, a statement a lane:
    /// "`second`, `minute` and `hour` share one entry per client address
    /// (one write a request for the 3)".
    pub shared_entries: Vec<String>,
    /// The counters the operations' bounds can hold, when there are any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub counters: Option<Counters>,
}

#[derive(Debug, Clone, Serialize)]
pub struct OperationRow {
    /// Its stat name: the `<operation>` of `<operation>.<bound>`.
    pub name: String,
    pub path: String,
    pub method: String,
    /// The path template as written.
    pub template: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub operation_id: Option<String>,
    /// "POST /orders/{id}/pay (payOrder)".
    pub title: String,
    /// Warnings about the operation as a whole.
    pub warnings: Vec<Warning>,
}

/// When a bound is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// Route and address bounds for everybody: on the request headers, before
    /// any identity is resolved, before the body, before the upstream.
    BeforeIdentity,
    /// Bounds keyed on user, token or org, or narrowed to some callers.
    AfterIdentity,
    /// Bounds counted by the rate-limit service for the whole installation.
    Installation,
}

impl Phase {
    pub fn of(bound: &Bound) -> Phase {
        if !bound.in_shared_data() {
            Phase::Installation
        } else if bound.needs_identity() {
            Phase::AfterIdentity
        } else {
            Phase::BeforeIdentity
        }
    }

    pub fn title(self) -> &'static str {
        match self {
            Phase::BeforeIdentity => {
                "before identity (checked on the request headers, before anything is resolved)"
            }
            Phase::AfterIdentity => "after identity (checked once the caller is known)",
            Phase::Installation => {
                "last, for the whole installation (the rate-limit service, once every bound \
                 above admitted)"
            }
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct PhaseRows {
    pub phase: Phase,
    pub bounds: Vec<BoundRow>,
}

#[derive(Debug, Clone, Serialize)]
pub struct BoundRow {
    /// As a refusal names it: the bound's name, or `<operation>.<bound>`
    /// for an operation's bound.
    pub name: String,
    /// The operation whose bound it is ("POST /orders/{id}/pay (payOrder)").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub operation: Option<String>,
    pub path: String,
    pub per: Per,
    pub limit: u64,
    /// As written in the configuration.
    pub window: String,
    pub window_ms: u64,
    /// Who the bound is about, when not everybody.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub applies_to: Option<String>,
    /// The bound in one phrase: "5 a minute per client address", "5 a minute
    /// per user, per operation".
    pub words: String,
    /// Its reading in one line, at most [`line::CAP`] characters: "on 4
    /// nodes: up to 4 × 100 = 400 a minute per client address".
    pub line: String,
    /// The full statement the line stands for, one statement a line
    /// (`\n`): its words, what a shadow bound does, then every note about
    /// it (its per-node, fleet or installation reading, a partial
    /// enforcement), then whether it shares an entry ([`BoundRow::sharing`]).
    pub detail: String,
    /// Warnings and notes about this bound, the per-node reading among them.
    pub warnings: Vec<Warning>,
    /// Whether it shares one entry with other bounds on its key (one
    /// write for all), or why it keeps its own.
    pub sharing: String,
}

/// Explains a compiled configuration.
pub fn explain(plan: &Plan, nodes: Option<u32>) -> Explanation {
    explain_at(plan, nodes, None)
}

/// [`explain`], fleet bounds' figures for nodes admitting `rate` a second.
pub fn explain_at(plan: &Plan, nodes: Option<u32>, rate: Option<u32>) -> Explanation {
    let mut all = warnings_at(plan, nodes, rate);
    let mut summary = Summary {
        routes: plan.routes.len(),
        ..Summary::default()
    };
    for r in &plan.routes {
        let own = r.own_bounds().len();
        summary.bounds += own;
        summary.operations += r.operations.len();
        summary.operation_bounds += r.bounds.len() - own;
        summary.node_bounds += r
            .bounds
            .iter()
            .filter(|b| b.scope == BoundScope::Node)
            .count();
    }
    for w in &all {
        match w.level {
            Severity::Warning => summary.warnings += 1,
            Severity::Note => summary.notes += 1,
        }
    }
    let at = Figures {
        nodes,
        rate,
        sync_ms: plan.service.as_ref().map_or(500, |s| s.sync_ms),
    };
    let routes = plan
        .routes
        .iter()
        .map(|r| route_row(r, &mut all, at))
        .collect();
    let a = plan.client_address;
    Explanation {
        instance: plan.instance.clone(),
        nodes,
        routes,
        summary,
        client_address: plan.routes.iter().any(|r| r.needs_address).then(|| {
            let (v4, v6) = (u32::from(a.ipv4), u32::from(a.ipv6));
            ClientAddressRow {
                ipv4_prefix: v4,
                ipv6_prefix: v6,
                path: "$.client_address".to_string(),
                words: words::client_address(v4, v6),
            }
        }),
    }
}

/// What a bound's line is read for: the nodes, what each admits a second,
/// how often a fleet bound's node syncs.
#[derive(Clone, Copy)]
struct Figures {
    nodes: Option<u32>,
    rate: Option<u32>,
    sync_ms: u64,
}

/// A route's rows, the warnings about it moved out of `all` beside them.
fn route_row(r: &Route, all: &mut Vec<Warning>, at: Figures) -> RouteRow {
    let i = r.index;
    let mut rows: Vec<(Phase, BoundRow)> = r
        .own_bounds()
        .iter()
        .map(|b| (Phase::of(b), bound_row(r, b, None, all, at)))
        .collect();
    let mut operations = Vec::new();
    for o in &r.operations {
        let title = words::title(o);
        for b in r.operation_bounds(o) {
            rows.push((Phase::of(b), bound_row(r, b, Some(&title), all, at)));
        }
        operations.push(OperationRow {
            name: o.name.clone(),
            path: format!("$.routes[{i}].operations[{}]", o.index),
            method: o.method.clone(),
            template: o.path.clone(),
            operation_id: o.operation_id.clone(),
            title,
            warnings: take(all, |w| w.route == i && w.operation == Some(o.index)),
        });
    }
    let mut phases: Vec<Phase> = vec![Phase::BeforeIdentity, Phase::AfterIdentity];
    if !r.service_bounds.is_empty() {
        phases.push(Phase::Installation);
    }
    let phases = phases
        .into_iter()
        .map(|phase| PhaseRows {
            phase,
            bounds: take(&mut rows, |(p, _)| *p == phase)
                .into_iter()
                .map(|(_, row)| row)
                .collect(),
        })
        .collect();
    RouteRow {
        name: r.name.clone(),
        path: format!("$.routes[{i}]"),
        matches: words::matching(&r.matching),
        warnings: take(all, |w| w.route == i),
        phases,
        counters: (!operations.is_empty()).then(|| Counters::of(r)),
        operations,
        shared_entries: sharing::lanes(r),
    }
}

/// A bound's row (of route `route`; `operation` is the title of the
/// operation whose bound it is), its warnings moved out of `all`, its line
/// and its detail.
fn bound_row(
    route: &Route,
    b: &Bound,
    operation: Option<&str>,
    all: &mut Vec<Warning>,
    at: Figures,
) -> BoundRow {
    let mut row = if b.installation().is_some() {
        installation_row(route.index, b, operation, all)
    } else {
        node_row(route.index, b, operation, all)
    };
    row.line = line::of(b, at.nodes, at.rate, at.sync_ms);
    let id = route.bounds.iter().position(|o| std::ptr::eq(o, b));
    row.sharing = id.map_or_else(String::new, |j| sharing::of(route, BoundId(j)));
    let shadow = b.shadow.then(|| line::shadow(&route.name, b));
    let notes = row
        .warnings
        .iter()
        .filter(|w| w.level == Severity::Note)
        .map(|w| w.message.as_str());
    let shares = Some(row.sharing.as_str()).filter(|s| !s.is_empty());
    row.detail = std::iter::once(row.words.as_str())
        .chain(shadow.as_deref())
        .chain(notes)
        .chain(shares)
        .collect::<Vec<_>>()
        .join("\n");
    row
}

/// A node or fleet bound's row, without its line and detail.
fn node_row(route: usize, b: &Bound, operation: Option<&str>, all: &mut Vec<Warning>) -> BoundRow {
    let at = &b.written;
    BoundRow {
        name: b.name.clone(),
        operation: operation.map(str::to_string),
        path: at.path.clone(),
        per: b.per,
        limit: u64::from(b.rate.limit),
        window: at.window.clone(),
        window_ms: b.rate.window_ms,
        applies_to: words::audience(&b.applies_to),
        words: words::of_bound(b),
        line: String::new(),
        detail: String::new(),
        warnings: take(all, |w| {
            w.route == route && w.operation == at.operation && w.bound == Some(at.index)
        }),
        sharing: String::new(),
    }
}

/// An installation bound's row, its reading among its warnings, without its
/// line and detail.
fn installation_row(
    route: usize,
    b: &Bound,
    operation: Option<&str>,
    all: &mut Vec<Warning>,
) -> BoundRow {
    let at = &b.written;
    let (limit, ms) = (u64::from(b.rate.limit), b.rate.window_ms);
    let who = words::audience(&b.applies_to);
    BoundRow {
        name: b.name.clone(),
        operation: operation.map(str::to_string),
        path: at.path.clone(),
        per: b.per,
        limit,
        window: at.window.clone(),
        window_ms: ms,
        words: match at.operation {
            None => words::bound(limit, ms, b.per, who.as_deref()),
            Some(_) => words::operation_bound(limit, ms, b.per, who.as_deref()),
        },
        applies_to: who,
        line: String::new(),
        detail: String::new(),
        warnings: take(all, |w| {
            w.route == route && w.operation == at.operation && w.bound == Some(at.index)
        }),
        sharing: String::new(),
    }
}

/// Moves the items that satisfy `pick` out of `items`, keeping their order.
fn take<T>(items: &mut Vec<T>, pick: impl Fn(&T) -> bool) -> Vec<T> {
    let (taken, kept) = std::mem::take(items).into_iter().partition(|t| pick(t));
    *items = kept;
    taken
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse;
    use crate::reading::WarningCode;

    fn plan(json: &[u8]) -> Plan {
        Plan::compile(&parse(json).unwrap())
    }

    /// Tiers on one key say they share one entry (one write) and name the
    /// others; a bound on the same key kept apart says why.
    #[test]
    fn bounds_say_which_share_one_entry_and_why_the_others_do_not() {
        let c = plan(
            br#"{"identity":{"header":{"user":"x-user"}},"routes":[{"name":"api","bounds":[
                {"name":"second","per":"address","limit":10,"window":"PT1S"},
                {"name":"minute","per":"address","limit":300,"window":"PT1M"},
                {"name":"hour","per":"address","limit":5000,"window":"PT1H"},
                {"name":"trial","per":"address","limit":20,"window":"PT1M","shadow":true},
                {"name":"half","per":"address","limit":20,"window":"PT1M","enforce_percent":50},
                {"name":"users","per":"user","limit":100,"window":"PT1M"}]}]}"#,
        );
        let e = explain(&c, None);
        let api = &e.routes[0];
        assert_eq!(
            api.shared_entries,
            [
                "`second`, `minute` and `hour` share one entry per client address \
              (one write a request for the 3)"
            ]
        );
        let rows: Vec<&BoundRow> = api.phases.iter().flat_map(|p| &p.bounds).collect();
        let sharing = |name: &str| {
            rows.iter()
                .find(|r| r.name == name)
                .map(|r| r.sharing.clone())
                .unwrap_or_default()
        };
        assert_eq!(
            sharing("minute"),
            "shares one entry per client address with `second` and `hour`: the 3 tiers are \
             read once and written by one compare-and-swap a request"
        );
        assert!(sharing("second").contains("with `minute` and `hour`"));
        assert_eq!(
            sharing("trial"),
            "its own entry (its own write): a shadow bound is counted apart from the bounds \
             that refuse"
        );
        assert!(sharing("half").contains("enforced on 50% (a rollout)"));
        assert!(sharing("users").contains("no other bound of the route that may share"));
        // The verbose reading carries it.
        let minute = rows.iter().find(|r| r.name == "minute").map(|r| &r.detail);
        assert!(
            minute.is_some_and(|d| d.contains("shares one entry")),
            "{minute:?}"
        );
        // One bound alone on a route: no shared entry.
        let one = explain(
            &plan(br#"{"routes":[{"name":"a","bounds":[{"per":"address","limit":1,"window":"PT1M"}]}]}"#),
            None,
        );
        assert!(one.routes[0].shared_entries.is_empty());
    }

    #[test]
    fn bounds_are_grouped_by_phase_with_their_warnings_beside_them() {
        let c = plan(
            br#"{"routes":[{"name":"api","bounds":[
                {"per":"route","limit":10,"window":"PT1M"},
                {"name":"addr","per":"address","limit":20,"window":"PT1M"}]},
                {"name":"open"}]}"#,
        );
        let e = explain(&c, Some(3));
        assert_eq!(e.summary.routes, 2);
        assert_eq!(e.summary.bounds, 2);
        // bound "addr" is unreachable; route "open" has no bounds and, after
        // a route that takes every request, never matches.
        assert_eq!(e.summary.warnings, 3, "{e:#?}");
        assert_eq!(e.summary.notes, 2);
        let api = &e.routes[0];
        assert!(api.warnings.is_empty());
        assert_eq!(api.phases[0].phase, Phase::BeforeIdentity);
        assert_eq!(api.phases[1].phase, Phase::AfterIdentity);
        assert!(api.phases[1].bounds.is_empty());
        let rows = &api.phases[0].bounds;
        assert_eq!(rows[0].words, "10 a minute for the whole route");
        assert_eq!(rows[1].name, "addr");
        let codes: Vec<_> = rows[1].warnings.iter().map(|w| w.code).collect();
        assert_eq!(codes, [WarningCode::UnreachableBound, WarningCode::PerNode]);
        let codes: Vec<_> = e.routes[1].warnings.iter().map(|w| w.code).collect();
        assert_eq!(codes, [WarningCode::ShadowedRoute, WarningCode::NoBounds]);
    }

    #[test]
    fn an_installation_bound_reads_exact_for_the_installation_not_per_node() {
        let c = plan(
            br#"{"rate_limit_service":{"cluster":"rls","domain":"shop"},
            "routes":[{"name":"login","account":{"json":"username"},"bounds":[
                {"name":"addr","per":"address","limit":50,"window":"PT1M"},
                {"name":"attempts","per":"account","scope":"installation","limit":5,"window":"PT1M"}]}]}"#,
        );
        let e = explain(&c, Some(4));
        assert_eq!(e.summary.bounds, 2);
        let phases = &e.routes[0].phases;
        assert_eq!(phases.len(), 3);
        assert_eq!(phases[2].phase, Phase::Installation);
        let row = &phases[2].bounds[0];
        assert_eq!(row.name, "attempts");
        assert_eq!(row.words, "5 a minute per account tried");
        assert_eq!(row.path, "$.routes[0].bounds[1]");
        let codes: Vec<_> = row.warnings.iter().map(|w| w.code).collect();
        assert_eq!(codes, [WarningCode::Installation], "no per-node reading");
        assert_eq!(
            row.warnings[0].message,
            "exact for the whole installation (rate-limit service `rls`, Redis); sliding \
             window (the two-window estimate over the service's counts of two windows): never \
             2× the limit at a window edge, up to about 2× − 1 spread over a whole window by a \
             caller who times it"
        );
        // The line leads; the detail keeps the words and the reading whole.
        assert_eq!(
            row.line,
            "whole installation: one sliding count of 5 a minute per account tried"
        );
        assert_eq!(
            row.detail,
            format!("5 a minute per account tried\n{}", row.warnings[0].message)
        );
        assert_eq!(
            phases[0].bounds[0].line,
            "on 4 nodes: up to 4 × 50 = 200 a minute per client address"
        );
        // The node bound keeps its per-node reading.
        let codes: Vec<_> = phases[0].bounds[0]
            .warnings
            .iter()
            .map(|w| w.code)
            .collect();
        assert_eq!(codes, [WarningCode::PerNode]);
    }

    #[test]
    fn a_fleet_bound_leads_with_its_line_and_keeps_its_paragraph_as_detail() {
        let c = plan(
            br#"{"rate_limit_service":{"cluster":"rls","domain":"api","fleet_nodes":4},
            "routes":[{"name":"api","bounds":[
                {"name":"fleet","per":"address","limit":50,"window":"PT1M","scope":"fleet"},
                {"name":"dry","per":"route","limit":10,"window":"PT1S","shadow":true},
                {"name":"some","per":"address","limit":20,"window":"PT1S","enforce_percent":10}]}]}"#,
        );
        let e = explain(&c, Some(4));
        let rows = &e.routes[0].phases[0].bounds;
        let fleet = &rows[0];
        assert_eq!(
            fleet.line,
            "on 4 nodes: one budget of 50 a minute per client address; up to ~57 in a burst"
        );
        let detail: Vec<&str> = fleet.detail.split('\n').collect();
        assert_eq!(detail.len(), 3, "{detail:?}");
        assert_eq!(detail[0], "50 a minute per client address");
        assert!(
            detail[1].starts_with("fleet: one budget of 50 a minute per client address")
                && detail[1].ends_with("Without the service each node admits 12 a minute alone"),
            "{}",
            detail[1]
        );
        // The paragraph the line replaces under the number.
        assert!(detail[1].split(' ').count() > 150, "{}", detail[1]);
        assert_eq!(
            detail[2],
            "its own entry (its own write): a fleet bound is synced with the rate-limit service \
             on its own"
        );
        let dry = &rows[1];
        assert_eq!(
            dry.line,
            "shadow, on 4 nodes: up to 4 × 10 = 40 a second for the whole route"
        );
        assert!(
            dry.detail.contains("\nshadow: refuses nothing;"),
            "{}",
            dry.detail
        );
        assert!(dry.detail.contains("`api/dry`"), "{}", dry.detail);
        let some = &rows[2];
        assert_eq!(
            some.line,
            "10% enforced, on 4 nodes: up to 4 × 20 = 80 a second per client address"
        );
        assert!(
            some.detail.contains("\ncarries out 10% of its refusals"),
            "{}",
            some.detail
        );
    }

    #[test]
    fn the_json_form_is_stable() {
        let c = plan(br#"{"routes":[{"name":"a","bounds":[{"per":"address","limit":1000,"window":"PT1H"}]}]}"#);
        let v = serde_json::to_value(explain(&c, None)).unwrap();
        let row = &v["routes"][0]["phases"][0];
        assert_eq!(row["phase"], "before-identity");
        assert_eq!(
            row["bounds"][0]["words"],
            "1,000 an hour per client address"
        );
        assert_eq!(row["bounds"][0]["per"], "address");
        assert_eq!(
            row["bounds"][0]["line"],
            "per node: 1,000 an hour per client address; N nodes admit N × 1,000"
        );
        assert_eq!(
            row["bounds"][0]["detail"],
            "1,000 an hour per client address\nper node: each Envoy node counts on its own, so N \
             nodes admit up to N × 1,000 an hour per client address through the installation"
        );
        assert_eq!(row["bounds"][0]["warnings"][0]["code"], "per-node");
        assert_eq!(row["bounds"][0]["warnings"][0]["level"], "note");
        assert_eq!(v["nodes"], serde_json::Value::Null);
        let a = &v["client_address"];
        assert_eq!(
            a["words"],
            "client addresses are counted per IPv4 address and per IPv6 /64 network"
        );
        assert_eq!(
            (a["ipv4_prefix"].as_u64(), a["ipv6_prefix"].as_u64()),
            (Some(32), Some(64))
        );
        assert_eq!(a["path"], "$.client_address");
    }

    #[test]
    fn the_client_address_prefixes_are_said_when_an_address_is_counted() {
        let c = plan(
            br#"{"client_address":{"ipv4_prefix":24,"ipv6_prefix":128},
            "routes":[{"name":"a","bounds":[{"per":"address","limit":1,"window":"PT1H"}]}]}"#,
        );
        assert_eq!(
            explain(&c, None).client_address.map(|a| a.words),
            Some("client addresses are counted per IPv4 /24 network and per IPv6 address".into())
        );
        // Nobody is counted by address: nothing to say.
        let c = plan(
            br#"{"routes":[{"name":"a","bounds":[{"per":"route","limit":1,"window":"PT1H"}]}]}"#,
        );
        assert!(explain(&c, None).client_address.is_none());
    }
}

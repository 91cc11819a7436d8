//! `explain` as data: every route's bounds in words, grouped by the phase in
//! which they are checked, with the warnings beside the rows they concern.
//! [`super::render`] turns it into text; it serializes as the JSON of
//! `explain --format json`.

use crate::config::{bound_name, operation_name, window_ms, BoundConfig, Config, Per};
use crate::console::warnings::{facts, warnings, Counters, Level, Warning};
use crate::console::words;
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
}

impl Phase {
    pub fn of(bound: &BoundConfig) -> Phase {
        if bound.needs_identity() {
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
    /// Warnings and notes about this bound, the per-node reading among them.
    pub warnings: Vec<Warning>,
}

/// Explains a configuration that parsed.
pub fn explain(config: &Config, nodes: Option<u32>) -> Explanation {
    let mut all = warnings(config, nodes);
    let mut summary = Summary {
        routes: config.routes.len(),
        bounds: config.routes.iter().map(|r| r.bounds.len()).sum(),
        operations: config.routes.iter().map(|r| r.operations.len()).sum(),
        operation_bounds: config
            .routes
            .iter()
            .flat_map(|r| r.operations.iter())
            .map(|o| o.bounds.len())
            .sum(),
        ..Summary::default()
    };
    let route_facts = facts(config);
    for w in &all {
        match w.level {
            Level::Warning => summary.warnings += 1,
            Level::Note => summary.notes += 1,
        }
    }
    let routes = config
        .routes
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let mut rows: Vec<(Phase, BoundRow)> = r
                .bounds
                .iter()
                .enumerate()
                .map(|(j, b)| {
                    let ms = window_ms(&b.window).unwrap_or(0);
                    let applies_to = b.audience();
                    let row = BoundRow {
                        name: bound_name(b, j),
                        operation: None,
                        path: format!("$.routes[{i}].bounds[{j}]"),
                        per: b.per,
                        limit: b.limit,
                        window: b.window.clone(),
                        window_ms: ms,
                        words: words::bound(b.limit, ms, b.per, applies_to.as_deref()),
                        applies_to,
                        warnings: take(&mut all, |w| {
                            w.route == i && w.operation.is_none() && w.bound == Some(j)
                        }),
                    };
                    (Phase::of(b), row)
                })
                .collect();
            let mut operations = Vec::new();
            for (k, o) in r.operations.iter().enumerate() {
                let name = operation_name(o, k);
                let title = words::operation(&o.method, &o.path, o.operation_id.as_deref());
                for (j, b) in o.bounds.iter().enumerate() {
                    let ms = window_ms(&b.window).unwrap_or(0);
                    let applies_to = b.audience();
                    let row = BoundRow {
                        name: format!("{name}.{}", bound_name(b, j)),
                        operation: Some(title.clone()),
                        path: format!("$.routes[{i}].operations[{k}].bounds[{j}]"),
                        per: b.per,
                        limit: b.limit,
                        window: b.window.clone(),
                        window_ms: ms,
                        words: words::operation_bound(b.limit, ms, b.per, applies_to.as_deref()),
                        applies_to,
                        warnings: take(&mut all, |w| {
                            w.route == i && w.operation == Some(k) && w.bound == Some(j)
                        }),
                    };
                    rows.push((Phase::of(b), row));
                }
                operations.push(OperationRow {
                    name,
                    path: format!("$.routes[{i}].operations[{k}]"),
                    method: o.method.clone(),
                    template: o.path.clone(),
                    operation_id: o.operation_id.clone(),
                    title,
                    warnings: take(&mut all, |w| w.route == i && w.operation == Some(k)),
                });
            }
            let phases = [Phase::BeforeIdentity, Phase::AfterIdentity]
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
                warnings: take(&mut all, |w| w.route == i),
                phases,
                counters: (!operations.is_empty())
                    .then(|| route_facts.get(i).map(Counters::of))
                    .flatten(),
                operations,
            }
        })
        .collect();
    let counts_addresses = config
        .routes
        .iter()
        .flat_map(|r| {
            r.bounds
                .iter()
                .chain(r.operations.iter().flat_map(|o| &o.bounds))
        })
        .any(|b| b.per != Per::Route);
    let a = &config.client_address;
    Explanation {
        instance: config.instance.clone(),
        nodes,
        routes,
        summary,
        client_address: counts_addresses.then(|| ClientAddressRow {
            ipv4_prefix: a.ipv4_prefix,
            ipv6_prefix: a.ipv6_prefix,
            path: "$.client_address".to_string(),
            words: words::client_address(a.ipv4_prefix, a.ipv6_prefix),
        }),
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
    use crate::console::Code;

    #[test]
    fn bounds_are_grouped_by_phase_with_their_warnings_beside_them() {
        let c = parse(
            br#"{"routes":[{"name":"api","bounds":[
                {"per":"route","limit":10,"window":"PT1M"},
                {"name":"addr","per":"address","limit":20,"window":"PT1M"}]},
                {"name":"open"}]}"#,
        )
        .unwrap();
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
        assert_eq!(codes, [Code::UnreachableBound, Code::PerNode]);
        let codes: Vec<_> = e.routes[1].warnings.iter().map(|w| w.code).collect();
        assert_eq!(codes, [Code::ShadowedRoute, Code::NoBounds]);
    }

    #[test]
    fn the_json_form_is_stable() {
        let c = parse(br#"{"routes":[{"name":"a","bounds":[{"per":"address","limit":1000,"window":"PT1H"}]}]}"#).unwrap();
        let v = serde_json::to_value(explain(&c, None)).unwrap();
        let row = &v["routes"][0]["phases"][0];
        assert_eq!(row["phase"], "before-identity");
        assert_eq!(
            row["bounds"][0]["words"],
            "1,000 an hour per client address"
        );
        assert_eq!(row["bounds"][0]["per"], "address");
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
        let c = parse(
            br#"{"client_address":{"ipv4_prefix":24,"ipv6_prefix":128},
            "routes":[{"name":"a","bounds":[{"per":"address","limit":1,"window":"PT1H"}]}]}"#,
        )
        .unwrap();
        assert_eq!(
            explain(&c, None).client_address.map(|a| a.words),
            Some("client addresses are counted per IPv4 /24 network and per IPv6 address".into())
        );
        // Nobody is counted by address: nothing to say.
        let c = parse(
            br#"{"routes":[{"name":"a","bounds":[{"per":"route","limit":1,"window":"PT1H"}]}]}"#,
        )
        .unwrap();
        assert!(explain(&c, None).client_address.is_none());
    }
}

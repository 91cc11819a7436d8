//! Every bound's reading in one line: what a person reads while typing the
//! number ("on 4 nodes: up to 4 × 100 = 400 a minute per client address",
//! "on 3 nodes: one budget of 300 a minute per client address; up to ~323
//! in a burst"). The full statement (the bound's words and every note about
//! it) is [`explain`](crate::reading::explain)'s `detail`, one click away on
//! the console page and under `explain --verbose`.

use crate::config::plan::Bound;
use crate::config::Shape;
use crate::reading::words::{self, number, rate, FleetFigures};

/// The longest a line may be, in characters: under a field, or after a
/// bound's name in a terminal, it is read at a glance.
pub const CAP: usize = 100;

/// A bound's line on `nodes` nodes (each admitting `admitted` a second, for
/// a fleet bound's figure), its fleet synced every `sync_ms`. Who the bound
/// is narrowed to is said in full when the line has room, else as "some
/// callers" (the detail names them).
pub fn of(b: &Bound, nodes: Option<u32>, admitted: Option<u32>, sync_ms: u64) -> String {
    let who = words::audience(&b.applies_to);
    let fits = |s: &String| s.chars().count() <= CAP;
    let mut tries = [
        (who.as_deref(), true),
        (who.as_ref().map(|_| "some callers"), true),
        (who.as_ref().map(|_| "some callers"), false),
    ]
    .into_iter()
    .map(|(who, hint)| said(b, nodes, admitted, sync_ms, who, hint));
    let first = tries.next().unwrap_or_default();
    if fits(&first) {
        return first;
    }
    tries.find(fits).unwrap_or(first)
}

/// The line, `who` the audience said and `hint` whether a fleet bound
/// without a number of nodes asks for one.
fn said(
    b: &Bound,
    nodes: Option<u32>,
    admitted: Option<u32>,
    sync_ms: u64,
    who: Option<&str>,
    hint: bool,
) -> String {
    let (limit, ms) = (u64::from(b.rate.limit), b.rate.window_ms);
    let mut key = match b.written.operation {
        None => words::per(b.per).to_string(),
        Some(_) => words::per_operation(b.per),
    };
    if let Some(who) = who {
        key = format!("{key}, for {who}");
    }
    // "400 a minute", or "400 tokens a minute" for a bound with a cost.
    let amount = |n: u64| {
        let r = rate(n, ms);
        match &b.cost {
            None => r,
            Some(c) => match r.split_once(' ') {
                Some((n, rest)) => format!("{n} {} {rest}", c.unit),
                None => r,
            },
        }
    };
    let body = if let Some((_, _, shape)) = b.installation() {
        // Its shape's worst case: the detail says why.
        match shape {
            Shape::Sliding => format!(
                "whole installation: one sliding count of {} {key}",
                amount(limit)
            ),
            Shape::Fixed => format!(
                "whole installation: one count of {} {key}; up to {} at a window's edge",
                amount(limit),
                number(limit.saturating_mul(2))
            ),
        }
    } else if b.fleet().is_some() {
        match nodes {
            Some(n) => {
                let f = FleetFigures::of(limit, ms, sync_ms, n, admitted);
                let worst = limit.saturating_add(worst_over(&f, n));
                format!(
                    "on {}: one budget of {} {key}; up to ~{} in a burst",
                    nodes_words(n),
                    amount(limit),
                    number(worst)
                )
            }
            None if hint => format!(
                "all nodes: one budget of {} {key}; say how many nodes for the worst burst",
                amount(limit)
            ),
            None => format!("all nodes: one budget of {} {key}", amount(limit)),
        }
    } else {
        match nodes {
            Some(1) => format!("on 1 node: up to {} {key}", amount(limit)),
            Some(n) => format!(
                "on {n} nodes: up to {n} × {} = {} {key}",
                number(limit),
                amount(limit.saturating_mul(u64::from(n)))
            ),
            None => format!(
                "per node: {} {key}; N nodes admit N × {}",
                amount(limit),
                number(limit)
            ),
        }
    };
    if b.shadow {
        format!("shadow, {body}")
    } else if b.enforce_percent < 100 {
        format!("{}% enforced, {body}", b.enforce_percent)
    } else {
        body
    }
}

/// The most over the budget a fleet bound's reading states on `nodes`
/// nodes: the larger of its steady-load figure and its figure for the
/// shapes of docs/fleet.md ("Under attack": about 1 a node, plus a join
/// share for each node but the one that spent the key).
fn worst_over(f: &FleetFigures, nodes: u32) -> u64 {
    let n = u64::from(nodes.max(1));
    let shapes = n.saturating_add((n - 1).saturating_mul(f.join));
    // `over` is a finite figure, never negative: the cast keeps it.
    (f.over.ceil() as u64).max(shapes)
}

fn nodes_words(n: u32) -> String {
    if n == 1 {
        "1 node".to_string()
    } else {
        format!("{n} nodes")
    }
}

/// What a shadow bound does, for its detail: the line says only "shadow".
pub fn shadow(route: &str, b: &Bound) -> String {
    format!(
        "shadow: refuses nothing; a request it would refuse goes on, uncounted by it, marked \
         with `{route}/{}` in the filter state `wasm.ratebound.would_refuse` for access logs \
         (docs/rollout.md)",
        b.name
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse;
    use crate::config::plan::Plan;

    /// The line of bound `j` of route 0 (operation bounds after the
    /// route's), the configuration `json`.
    fn line_of(json: &str, j: usize, nodes: Option<u32>) -> String {
        let plan = Plan::compile(&parse(json.as_bytes()).unwrap());
        let sync = plan.service.as_ref().map_or(500, |s| s.sync_ms);
        of(&plan.routes[0].bounds[j], nodes, None, sync)
    }

    const SERVICE: &str = r#""rate_limit_service":{"cluster":"rls","domain":"shop"}"#;

    /// A route of one bound; the rate-limit service only for a bound that
    /// needs it (the parser refuses it otherwise).
    fn one(bound: &str) -> String {
        let service = if bound.contains("\"scope\"") {
            format!("{SERVICE},")
        } else {
            String::new()
        };
        format!(
            r#"{{{service}"identity":{{"header":{{"user":"x-user","roles":"x-roles"}}}},
            "routes":[{{"name":"api","account":{{"json":"username"}},"bounds":[{bound}]}}]}}"#
        )
    }

    #[test]
    fn a_node_bound_says_what_the_nodes_admit_together() {
        let c = one(r#"{"per":"address","limit":100,"window":"PT1M"}"#);
        assert_eq!(
            line_of(&c, 0, Some(4)),
            "on 4 nodes: up to 4 × 100 = 400 a minute per client address"
        );
        assert_eq!(
            line_of(&c, 0, Some(1)),
            "on 1 node: up to 100 a minute per client address"
        );
        assert_eq!(
            line_of(&c, 0, None),
            "per node: 100 a minute per client address; N nodes admit N × 100"
        );
    }

    #[test]
    fn a_fleet_bound_says_its_one_budget_and_its_worst_burst() {
        let c = one(r#"{"per":"address","limit":50,"window":"PT1M","scope":"fleet"}"#);
        // 4 nodes: a share of 12, a join share of 1; the shapes' figure
        // (4 × 1 + 3 × 1 = 7) is above steady load's (1).
        assert_eq!(
            line_of(&c, 0, Some(4)),
            "on 4 nodes: one budget of 50 a minute per client address; up to ~57 in a burst"
        );
        assert_eq!(
            line_of(&c, 0, None),
            "all nodes: one budget of 50 a minute per client address; say how many nodes for \
             the worst burst"
        );
        // The example of docs/fleet.md: 300 a minute on 3 nodes, a join
        // share of 10 (320 measured for a key spent on another node).
        let c = one(r#"{"per":"address","limit":300,"window":"PT1M","scope":"fleet"}"#);
        assert_eq!(
            line_of(&c, 0, Some(3)),
            "on 3 nodes: one budget of 300 a minute per client address; up to ~323 in a burst"
        );
        // Steady load's figure, when it is the larger: 16 nodes admitting
        // 100 a second each (`--rate`), 2 × 15 × 100 × 0.5 s = 1,500 over.
        let plan = Plan::compile(&parse(c.as_bytes()).unwrap());
        assert_eq!(
            of(&plan.routes[0].bounds[0], Some(16), Some(100), 500),
            "on 16 nodes: one budget of 300 a minute per client address; up to ~1,800 in a burst"
        );
    }

    #[test]
    fn an_installation_bound_says_one_count_for_the_installation() {
        let c = one(r#"{"per":"account","limit":5,"window":"PT1M","scope":"installation"}"#);
        for nodes in [None, Some(4)] {
            assert_eq!(
                line_of(&c, 0, nodes),
                "whole installation: one sliding count of 5 a minute per account tried"
            );
        }
        let c = c.replace(
            r#""scope":"installation""#,
            r#""scope":"installation","shape":"fixed""#,
        );
        assert_eq!(
            line_of(&c, 0, Some(4)),
            "whole installation: one count of 5 a minute per account tried; up to 10 at a \
             window's edge"
        );
    }

    #[test]
    fn a_cost_bound_says_its_unit() {
        let c = one(r#"{"per":"user","limit":1000,"window":"PT1M",
                "cost":{"response_json":"/usage/total_tokens","reserve":300,"unit":"tokens"}}"#);
        assert_eq!(
            line_of(&c, 0, Some(4)),
            "on 4 nodes: up to 4 × 1,000 = 4,000 tokens a minute per user"
        );
        let c = one(
            r#"{"per":"user","limit":1000,"window":"PT1M","scope":"fleet",
                "cost":{"request_header":"x-cost"}}"#,
        );
        assert_eq!(
            line_of(&c, 0, Some(2)),
            "on 2 nodes: one budget of 1,000 units a minute per user; up to ~1,052 in a burst"
        );
    }

    #[test]
    fn shadow_and_partly_enforced_bounds_say_so_first() {
        let c = one(r#"{"per":"address","limit":100,"window":"PT1M","shadow":true}"#);
        assert_eq!(
            line_of(&c, 0, Some(4)),
            "shadow, on 4 nodes: up to 4 × 100 = 400 a minute per client address"
        );
        let c = one(r#"{"per":"address","limit":100,"window":"PT1M","enforce_percent":25}"#);
        assert_eq!(
            line_of(&c, 0, Some(4)),
            "25% enforced, on 4 nodes: up to 4 × 100 = 400 a minute per client address"
        );
        let c = one(
            r#"{"per":"account","limit":5,"window":"PT1M","scope":"installation","shadow":true}"#,
        );
        assert_eq!(
            line_of(&c, 0, None),
            "shadow, whole installation: one sliding count of 5 a minute per account tried"
        );
        let plan = Plan::compile(&parse(c.as_bytes()).unwrap());
        assert!(shadow("api", &plan.routes[0].bounds[0]).contains("`api/b0`"));
    }

    #[test]
    fn a_narrowed_bound_says_whom_when_there_is_room() {
        let c = one(
            r#"{"per":"user","limit":100,"window":"PT1M","applies_to":{"authenticated":true}}"#,
        );
        assert_eq!(
            line_of(&c, 0, Some(4)),
            "on 4 nodes: up to 4 × 100 = 400 a minute per user, for any signed-in caller"
        );
        let c = one(
            r#"{"per":"user","limit":100,"window":"PT1M","scope":"fleet",
                "applies_to":{"roles":["partner","reseller","integrator"]}}"#,
        );
        // In full it would be 124 characters: the detail names them.
        assert_eq!(
            line_of(&c, 0, Some(4)),
            "on 4 nodes: one budget of 100 a minute per user, for some callers; up to ~110 in a \
             burst"
        );
    }

    #[test]
    fn an_operation_bound_says_per_operation() {
        let c = format!(
            r#"{{{SERVICE},"identity":{{"header":{{"user":"x-user"}}}},"routes":[{{"name":"shop",
            "operations":[{{"operation_id":"payOrder","method":"POST","path":"/orders/{{id}}/pay",
              "bounds":[{{"per":"user","limit":5,"window":"PT1M"}},
                        {{"per":"route","limit":20,"window":"PT1M","scope":"fleet"}}]}}]}}]}}"#
        );
        assert_eq!(
            line_of(&c, 0, Some(2)),
            "on 2 nodes: up to 2 × 5 = 10 a minute per user, per operation"
        );
        assert_eq!(
            line_of(&c, 1, Some(2)),
            "on 2 nodes: one budget of 20 a minute for the whole operation; up to ~23 in a burst"
        );
    }

    #[test]
    fn every_line_of_every_example_is_short() {
        let examples: [&[u8]; 7] = [
            include_bytes!("../../filter-config/examples/demo.json"),
            include_bytes!("../../envoy-demo/ratebound-installation.json"),
            include_bytes!("../../filter-config/examples/fleet.json"),
            include_bytes!("../../filter-config/examples/gateway.json"),
            include_bytes!("../../filter-config/examples/istio-plugin-config.json"),
            include_bytes!("../../filter-config/examples/several-bounds.json"),
            include_bytes!("../../filter-config/examples/shop-operations.json"),
        ];
        let mut lines = 0;
        for json in examples {
            let plan = Plan::compile(&parse(json).unwrap());
            for nodes in [None, Some(1), Some(4), Some(64), Some(10_000)] {
                let e = crate::reading::explain::explain(&plan, nodes);
                for row in e
                    .routes
                    .iter()
                    .flat_map(|r| &r.phases)
                    .flat_map(|p| &p.bounds)
                {
                    let n = row.line.chars().count();
                    assert!(n <= CAP, "{n} characters: {:?}", row.line);
                    assert!(!row.line.contains('\n'), "{:?}", row.line);
                    lines += 1;
                }
            }
        }
        // Every kind the examples hold: node, fleet and installation
        // bounds, operations'.
        assert!(lines > 60, "{lines}");
    }
}

//! Bounds, windows and matches in the words the seed uses: "5 a minute per
//! client address", "100 a second for the whole route", "1,000 a minute per
//! user, for anyone holding partner".

use crate::config::plan::{Bound, Operation};
use crate::config::plan::{Cost, CostSource};
use crate::config::{Access, MatchConfig, Per};

pub use crate::config::number;

/// A window as it is said after a count: "a minute", "10 seconds", "an hour".
pub fn window(window_ms: u64) -> String {
    const UNITS: [(u64, &str, &str); 4] = [
        (86_400_000, "a day", "days"),
        (3_600_000, "an hour", "hours"),
        (60_000, "a minute", "minutes"),
        (1_000, "a second", "seconds"),
    ];
    for (ms, one, many) in UNITS {
        if window_ms.is_multiple_of(ms) {
            let n = window_ms / ms;
            return if n == 1 {
                one.to_string()
            } else {
                format!("{} {many}", number(n))
            };
        }
    }
    // Whole milliseconds that are not whole seconds: 1500 → "1.5 seconds".
    let frac = format!("{:03}", window_ms % 1_000);
    format!(
        "{}.{} seconds",
        number(window_ms / 1_000),
        frac.trim_end_matches('0')
    )
}

/// A count in a window: "5 a minute", "20 every 10 seconds".
pub fn rate(limit: u64, window_ms: u64) -> String {
    let w = window(window_ms);
    if w.starts_with("a ") || w.starts_with("an ") {
        format!("{} {w}", number(limit))
    } else {
        format!("{} every {w}", number(limit))
    }
}

/// What the counter is keyed on, as it is said after the rate.
pub fn per(per: Per) -> &'static str {
    match per {
        Per::Route => "for the whole route",
        Per::Address => "per client address",
        Per::User => "per user",
        Per::Token => "per API token",
        Per::Org => "per organisation",
        Per::Account => "per account tried",
        Per::Model => "per model asked for",
    }
}

/// How a client address is counted: "client addresses are counted per IPv4
/// address and per IPv6 /64 network".
pub fn client_address(ipv4_prefix: u32, ipv6_prefix: u32) -> String {
    let family = |name: &str, len: u32, all: u32| {
        if len == all {
            format!("per {name} address")
        } else {
            format!("per {name} /{len} network")
        }
    };
    format!(
        "client addresses are counted {} and {}",
        family("IPv4", ipv4_prefix, 32),
        family("IPv6", ipv6_prefix, 128)
    )
}

/// A bound in one phrase: "5 a minute per client address", with the
/// audience after a comma when the bound is narrowed.
pub fn bound(limit: u64, window_ms: u64, key: Per, audience: Option<&str>) -> String {
    let mut s = format!("{} {}", rate(limit, window_ms), per(key));
    if let Some(who) = audience {
        s.push_str(", for ");
        s.push_str(who);
    }
    s
}

/// Who a bound is about ("anyone holding partner"), or `None` when it
/// applies to everybody.
pub(crate) fn audience(a: &Access) -> Option<String> {
    if a.is_everybody() {
        return None;
    }
    let mut who = Vec::new();
    if !a.roles.is_empty() {
        who.push(format!("anyone holding {}", a.roles.join(" or ")));
    }
    if !a.orgs.is_empty() {
        who.push(format!("anyone in {}", a.orgs.join(" or ")));
    }
    if a.authenticated {
        who.push("any signed-in caller".to_string());
    }
    if a.anonymous {
        who.push("any anonymous caller".to_string());
    }
    Some(who.join(", or "))
}

/// A compiled bound in one phrase: [`bound`] for a route's,
/// [`operation_bound`] for an operation's.
pub(crate) fn of_bound(b: &Bound) -> String {
    let (limit, ms) = (u64::from(b.rate.limit), b.rate.window_ms);
    let who = audience(&b.applies_to);
    let s = match b.written.operation {
        None => bound(limit, ms, b.per, who.as_deref()),
        Some(_) => operation_bound(limit, ms, b.per, who.as_deref()),
    };
    match &b.cost {
        None => s,
        Some(c) => with_cost(s, c),
    }
}

/// A price table in words: "priced by its request's `model`: gpt-4o at
/// 2.5 microdollars a token in and 10 out; any other at 2.5 and 10".
fn prices(p: &crate::config::plan::Prices, unit: &str) -> String {
    let price = |m: u64| {
        let whole = m as f64 / 1e6;
        format!("{whole}")
    };
    let mut said: Vec<String> = p
        .models
        .iter()
        .map(|(m, (i, o))| {
            format!(
                "{m} at {} {unit} a token in and {} out",
                price(*i),
                price(*o)
            )
        })
        .collect();
    said.push(format!(
        "any other model at {} and {}",
        price(p.other.0),
        price(p.other.1)
    ));
    format!("priced by its request's `model`: {}", said.join("; "))
}

/// A cost bound's phrase: its number in its unit, and where each
/// request's cost comes from ("1,000 tokens a minute per user: each
/// request counts /usage/total_tokens of its response's JSON, 300
/// reserved at admission").
fn with_cost(phrase: String, c: &Cost) -> String {
    // The phrase starts with the limit: the unit goes right after it.
    let (number, rest) = phrase.split_once(' ').unwrap_or((&phrase, ""));
    let from = match &c.source {
        CostSource::RequestHeader(h) => format!("the number in its `{h}` header"),
        CostSource::ResponseHeader(h) => format!("the number in its response's `{h}` header"),
        CostSource::ResponseTrailer(h) => format!("the number in its response's `{h}` trailer"),
        CostSource::ResponseJson(p) => format!("`{p}` of its response's JSON (or event stream)"),
        CostSource::ResponseParts { input, output } => {
            let how = match &c.prices {
                None => "summed".to_string(),
                Some(p) => prices(p, &c.unit),
            };
            format!(
                "`{input}` (tokens in) and `{output}` (tokens out) of its response's JSON \
                 (or event stream), {how}"
            )
        }
    };
    let reserve = match c.from_request {
        Some(most) => {
            let (lo, hi) = (number_of(c.reserve.min(most)), number_of(most));
            format!(
                ", reserving at admission what the request allows itself (its `max_tokens`, \
                 `max_completion_tokens` or `max_output_tokens`, plus its prompt at 4 bytes a \
                 token), at least {lo} and at most {hi} (a caller with k requests in flight can \
                 pass the limit by k × what one answer uses beyond its reservation: nothing from \
                 an upstream that honours its request's ceiling, up to {hi})"
            )
        }
        None if c.from_response() => {
            let r = number_of(c.reserve);
            format!(
                ", {r} reserved at admission (a caller with k requests in flight can pass \
                 the limit by k × (its largest cost − {r}))"
            )
        }
        None => String::new(),
    };
    let reserve = if c.ask_usage {
        format!(
            "{reserve}; a stream that does not ask for its usage is made to, and does not \
             see it"
        )
    } else {
        reserve
    };
    format!(
        "{number} {} {rest}: each request counts {from}{reserve}",
        c.unit
    )
}

fn number_of(n: u32) -> String {
    number(u64::from(n))
}

/// What an operation bound's counter is keyed on: one counter per
/// operation and per caller ("per user, per operation"), or one for the
/// operation ("for the whole operation").
pub(crate) fn per_operation(key: Per) -> String {
    match key {
        Per::Route => "for the whole operation".to_string(),
        other => format!("{}, per operation", per(other)),
    }
}

/// An operation bound in one phrase: "5 a minute per user, per operation".
pub(crate) fn operation_bound(
    limit: u64,
    window_ms: u64,
    key: Per,
    audience: Option<&str>,
) -> String {
    let mut s = format!("{} {}", rate(limit, window_ms), per_operation(key));
    if let Some(who) = audience {
        s.push_str(", for ");
        s.push_str(who);
    }
    s
}

/// An operation as the OpenAPI document names it: "POST /orders/{id}/pay
/// (payOrder)", the operationId only when there is one.
pub fn operation(method: &str, template: &str, operation_id: Option<&str>) -> String {
    match operation_id {
        Some(id) => format!("{method} {template} ({id})"),
        None => format!("{method} {template}"),
    }
}

/// [`operation`] of a compiled operation.
pub fn title(op: &Operation) -> String {
    operation(&op.method, &op.path, op.operation_id.as_deref())
}

/// The cluster reading of a bound: counters live on each node.
pub fn per_node(limit: u64, window_ms: u64, key: Per, nodes: Option<u32>) -> String {
    per_node_keyed(limit, window_ms, per(key), nodes)
}

/// The cluster reading of an operation bound.
pub(crate) fn per_node_operation(
    limit: u64,
    window_ms: u64,
    key: Per,
    nodes: Option<u32>,
) -> String {
    let key = per_operation(key);
    let key = if key.contains(',') {
        format!("{key},")
    } else {
        key
    };
    per_node_keyed(limit, window_ms, &key, nodes)
}

fn per_node_keyed(limit: u64, window_ms: u64, key: &str, nodes: Option<u32>) -> String {
    match nodes {
        Some(1) => format!(
            "per node: on 1 node up to {} {key} through the installation",
            rate(limit, window_ms)
        ),
        Some(n) => format!(
            "per node: on {n} nodes up to {n} × {} = {} {key} through the installation",
            number(limit),
            rate(limit.saturating_mul(u64::from(n)), window_ms)
        ),
        None => format!(
            "per node: each Envoy node counts on its own, so N nodes admit up to N × {} {key} through the installation",
            rate(limit, window_ms)
        ),
    }
}

/// A fleet bound's reading: one budget, how it is kept, and how far over
/// it may go. The figure is the one the simulation measured (docs/fleet.md:
/// about 2 × (nodes − 1) × per-node rate × sync_ms held in 51 of 60 runs
/// under overload; the estimate's own error comes on top), not a proof.
/// `admitted` is what each node admits a second; by default its even
/// share of the limit.
pub fn fleet(
    bound: &crate::config::plan::Bound,
    cluster: &str,
    sync_ms: u64,
    nodes: Option<u32>,
    admitted: Option<u32>,
) -> String {
    let (limit, ms) = (u64::from(bound.rate.limit), bound.rate.window_ms);
    let key = match bound.written.operation {
        None => per(bound.per).to_string(),
        Some(_) => per_operation(bound.per),
    };
    let retry_s = sync_ms.div_ceil(1_000).max(1);
    let head = format!(
        "fleet: one budget of {} {key} for all nodes together, decided on each node from the \
         counts it reconciles with the rate-limit service `{cluster}` every {sync_ms} ms (no \
         call per request). However the requests arrive, a node admits between two answers \
         at most its share of what the fleet had left at the last one, (limit − count) / \
         nodes, and a key new to it (or a node just restarted) a tenth of its share until \
         its first answer; past its share it refuses with Retry-After: {retry_s} (the \
         next answer gives a new share). Under steady load it may go over by up to about \
         2 × (nodes − 1) × each node's admissions a second × {sync_ms} ms, plus the sliding \
         estimate's own error; under the shapes of docs/fleet.md (\"Under attack\": bursts \
         on every node at once, a key spent on another node, outages, restarts, syncs timing \
         out through a Redis failover) by about 1 a node, plus a join share for each node new \
         to the key (measured). A timed-out sync's hits are sent again: if the service had \
         counted them, they count twice and the fleet refuses early, never admits more. The \
         price: compliant callers whose load sits on one node of many are refused while that \
         node waits for answers (large for per-second bounds on many nodes)",
        rate(limit, ms)
    );
    let Some(n) = nodes else {
        return format!(
            "{head}; give --nodes (and --rate) for the figure. Without the service each node \
             admits limit / nodes alone (nodes as last counted, however long ago)"
        );
    };
    let FleetFigures {
        per_node,
        over,
        share,
        join,
    } = FleetFigures::of(limit, ms, sync_ms, n, admitted);
    let nodes_words = if n == 1 {
        "1 node".to_string()
    } else {
        format!("{n} nodes")
    };
    format!(
        "{head}; on {nodes_words} admitting {} a second each: about {} over, a share of at \
         most {share} between two answers, {join} for a new key before its first. Without \
         the service each node admits {} alone",
        decimal(per_node),
        decimal(over.ceil()),
        rate(share, ms)
    )
}

/// A fleet bound's figures on `nodes` nodes (docs/fleet.md): what each node
/// admits a second, how far over the budget steady load may go, a node's
/// share between two answers and a new key's share before its first.
pub(crate) struct FleetFigures {
    pub per_node: f64,
    pub over: f64,
    pub share: u64,
    pub join: u64,
}

impl FleetFigures {
    /// `admitted` is what each node admits a second; by default its even
    /// share of the limit.
    pub(crate) fn of(
        limit: u64,
        window_ms: u64,
        sync_ms: u64,
        nodes: u32,
        admitted: Option<u32>,
    ) -> FleetFigures {
        let n64 = u64::from(nodes.max(1));
        let per_node = admitted.map_or(
            limit as f64 * 1_000.0 / window_ms.max(1) as f64 / n64 as f64,
            f64::from,
        );
        let over = 2.0 * (n64 - 1) as f64 * per_node * sync_ms as f64 / 1_000.0;
        let share = (limit / n64).max(1);
        let per_sync = limit.saturating_mul(sync_ms) / window_ms.max(1) / n64;
        let join = if n64 <= 1 {
            share
        } else {
            (share / 10).max(per_sync).clamp(1, share)
        };
        FleetFigures {
            per_node,
            over,
            share,
            join,
        }
    }
}

/// A figure with at most one decimal.
fn decimal(x: f64) -> String {
    if (x - x.round()).abs() < 0.05 {
        format!("{}", x.round() as u64)
    } else {
        format!("{x:.1}")
    }
}

/// Which requests a route takes, in words.
pub fn matching(m: &MatchConfig) -> String {
    let mut parts = Vec::new();
    if !m.methods.is_empty() {
        parts.push(format!("{} requests", m.methods.join(" or ")));
    }
    if let Some(p) = &m.path_prefix {
        parts.push(format!("path starting with {p}"));
    }
    if let Some(h) = &m.host {
        parts.push(format!("host {h}"));
    }
    if let Some(r) = &m.route_name {
        parts.push(format!("Envoy route {r:?}"));
    }
    if parts.is_empty() {
        "every request".to_string()
    } else {
        parts.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cost_bound_says_its_unit_and_where_each_cost_comes_from() {
        let plan = crate::config::plan::Plan::compile(
            &crate::config::parse(
                br#"{"routes":[{"name":"llm","bounds":[
                {"per":"address","limit":1000,"window":"PT1M",
                 "cost":{"response_json":"/usage/total_tokens","reserve":300,"unit":"tokens"}},
                {"per":"route","limit":50,"window":"PT1H","cost":{"request_header":"x-cost"}}]}]}"#,
            )
            .unwrap(),
        );
        let b = &plan.routes[0].bounds;
        assert_eq!(
            of_bound(&b[0]),
            "1,000 tokens a minute per client address: each request counts \
             `/usage/total_tokens` of its response's JSON (or event stream), 300 reserved at admission (a caller with k requests in flight can pass the limit by k × (its largest cost − 300)); a stream that does not ask for its usage is made to, and does not see it"
        );
        assert_eq!(
            of_bound(&b[1]),
            "50 units an hour for the whole route: each request counts the number in its `x-cost` header"
        );
    }

    #[test]
    fn a_reservation_from_the_request_says_its_floor_ceiling_and_over_admission() {
        let plan = crate::config::plan::Plan::compile(
            &crate::config::parse(
                br#"{"routes":[{"name":"llm","bounds":[
                {"per":"address","limit":10000,"window":"PT1M","cost":{"response_json":"/u",
                 "reserve_floor":200,"reserve_ceiling":4000,"unit":"tokens"}}]}]}"#,
            )
            .unwrap(),
        );
        let said = of_bound(&plan.routes[0].bounds[0]);
        for part in [
            "what the request allows itself (its `max_tokens`",
            "at least 200 and at most 4,000",
            "nothing from an upstream that honours its request's ceiling, up to 4,000",
            "a stream that does not ask for its usage is made to",
        ] {
            assert!(said.contains(part), "{said}");
        }
    }

    #[test]
    fn a_price_table_is_said_in_the_unit_given() {
        let plan = crate::config::plan::Plan::compile(
            &crate::config::parse(
                br#"{"routes":[{"name":"llm","bounds":[
                {"per":"address","limit":50000000,"window":"P1D","cost":{"input_json":"/usage/prompt_tokens",
                 "output_json":"/usage/completion_tokens","unit":"microdollars",
                 "prices":{"gpt-4o":{"input":2.5,"output":10}}}}]}]}"#,
            )
            .unwrap(),
        );
        let said = of_bound(&plan.routes[0].bounds[0]);
        for part in [
            "50,000,000 microdollars a day per client address",
            "`/usage/prompt_tokens` (tokens in) and `/usage/completion_tokens` (tokens out)",
            "priced by its request's `model`: gpt-4o at 2.5 microdollars a token in and 10 out",
        ] {
            assert!(said.contains(part), "{said}");
        }
    }

    #[test]
    fn numbers_have_thousands_separators() {
        assert_eq!(number(0), "0");
        assert_eq!(number(999), "999");
        assert_eq!(number(1_000), "1,000");
        assert_eq!(number(4_294_967_295), "4,294,967,295");
    }

    #[test]
    fn windows_in_words() {
        let w = |s: &str| window(crate::config::window_ms(s).unwrap());
        assert_eq!(w("PT1M"), "a minute");
        assert_eq!(w("PT1S"), "a second");
        assert_eq!(w("PT10S"), "10 seconds");
        assert_eq!(w("PT1H"), "an hour");
        assert_eq!(w("P1D"), "a day");
        assert_eq!(w("PT90S"), "90 seconds");
        assert_eq!(w("PT1M30S"), "90 seconds");
        assert_eq!(w("PT5M"), "5 minutes");
        assert_eq!(w("PT12H"), "12 hours");
        // Fractions of a second are refused by the parser.
        assert!(crate::config::window_ms("PT1.5S").is_err());
    }

    #[test]
    fn bounds_read_the_way_the_seed_writes_them() {
        assert_eq!(
            bound(5, 60_000, Per::Address, None),
            "5 a minute per client address"
        );
        assert_eq!(
            bound(100, 1_000, Per::Route, None),
            "100 a second for the whole route"
        );
        assert_eq!(
            bound(1_000, 60_000, Per::User, Some("anyone holding partner")),
            "1,000 a minute per user, for anyone holding partner"
        );
    }

    #[test]
    fn counts_in_windows_that_are_not_one_unit_say_every() {
        assert_eq!(rate(5, 60_000), "5 a minute");
        assert_eq!(rate(1_000, 3_600_000), "1,000 an hour");
        assert_eq!(rate(20, 10_000), "20 every 10 seconds");
        assert_eq!(
            bound(90, 90_000, Per::Address, None),
            "90 every 90 seconds per client address"
        );
        assert_eq!(
            per_node(90, 90_000, Per::Address, Some(2)),
            "per node: on 2 nodes up to 2 × 90 = 180 every 90 seconds per client address through the installation"
        );
    }

    #[test]
    fn the_cluster_reading_multiplies_by_the_nodes() {
        assert_eq!(
            per_node(100, 60_000, Per::Route, Some(4)),
            "per node: on 4 nodes up to 4 × 100 = 400 a minute for the whole route through the installation"
        );
        assert!(
            per_node(5, 60_000, Per::Address, None).contains("N × 5 a minute per client address")
        );
        assert!(
            per_node(5, 60_000, Per::Address, Some(1)).starts_with("per node: on 1 node up to 5")
        );
    }

    #[test]
    fn operation_bounds_say_per_operation() {
        assert_eq!(
            operation_bound(5, 60_000, Per::User, None),
            "5 a minute per user, per operation"
        );
        assert_eq!(
            operation_bound(100, 1_000, Per::Route, None),
            "100 a second for the whole operation"
        );
        assert_eq!(
            operation_bound(50, 60_000, Per::User, Some("anyone holding trial")),
            "50 a minute per user, per operation, for anyone holding trial"
        );
        assert_eq!(
            operation("POST", "/orders/{id}/pay", Some("payOrder")),
            "POST /orders/{id}/pay (payOrder)"
        );
        assert_eq!(operation("GET", "/orders/mine", None), "GET /orders/mine");
        assert_eq!(
            per_node_operation(5, 60_000, Per::User, Some(2)),
            "per node: on 2 nodes up to 2 × 5 = 10 a minute per user, per operation, through the installation"
        );
    }

    #[test]
    fn matches_in_words() {
        assert_eq!(matching(&MatchConfig::default()), "every request");
        let m = MatchConfig {
            route_name: Some("hello".into()),
            host: None,
            path_prefix: Some("/hello".into()),
            methods: vec!["GET".into()],
        };
        assert_eq!(
            matching(&m),
            "GET requests, path starting with /hello, Envoy route \"hello\""
        );
    }
}

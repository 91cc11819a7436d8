//! The checks on hand-built routes (bounds narrowed before a configuration
//! says so) and on configurations that parsed.
#![cfg(test)]

use super::*;
use crate::config::plan::{Matcher, Written};
use crate::config::{parse, Access, MatchConfig, Per};
use crate::count::window::Rate;

const MINUTE: u64 = 60_000;

fn b(index: usize, per: Per, limit: u32, window_ms: u64) -> Bound {
    Bound {
        name: format!("b{index}"),
        per,
        applies_to: Access::default(),
        rate: Rate { limit, window_ms },
        shadow: false,
        enforce_percent: 100,
        cost: None,
        fingerprint: 0,
        scope: crate::config::plan::BoundScope::Node,
        written: Written {
            path: format!("$.routes[0].bounds[{index}]"),
            operation: None,
            index,
            name: format!("b{index}"),
            window: String::new(),
        },
        tier: crate::config::plan::Tier::Own,
    }
}

/// The bound, for anyone holding `role` only.
fn narrowed(mut bound: Bound, role: &str) -> Bound {
    bound.applies_to.roles = vec![role.to_string()];
    bound
}

fn route(bounds: Vec<Bound>) -> Route {
    Route {
        index: 0,
        name: "r".into(),
        matcher: Matcher::default(),
        matching: MatchConfig::default(),
        bounds,
        early: Vec::new(),
        late: Vec::new(),
        needs_address: false,
        operations: Vec::new(),
        op_tree: None,
        service_bounds: Vec::new(),
        named_costs: Vec::new(),
        plain_answers: false,
        reads_request: None,
        asks_usage: None,
        account_headers: Vec::new(),
        account: None,
    }
}

/// `route` with an operation `GET /o` whose bounds are `bounds`.
fn with_operation(mut route: Route, bounds: Vec<Bound>) -> Route {
    let first = route.bounds.len();
    route.bounds.extend(bounds.into_iter().map(|mut b| {
        b.written.operation = Some(0);
        b.written.path = format!("$.routes[0].operations[0].bounds[{}]", b.written.index);
        b
    }));
    route.operations.push(Operation {
        index: 0,
        name: "o".into(),
        method: "GET".into(),
        path: "/o".into(),
        operation_id: None,
        bounds: first..route.bounds.len(),
        early: Vec::new(),
        late: Vec::new(),
    });
    route
}

fn codes(ws: &[Warning], code: WarningCode) -> Vec<String> {
    ws.iter()
        .filter(|w| w.code == code)
        .map(|w| w.path.clone())
        .collect()
}

fn unreachable_paths(bounds: Vec<Bound>) -> Vec<String> {
    codes(
        &check(&[route(bounds)], None),
        WarningCode::UnreachableBound,
    )
}

fn from_json(json: &str, nodes: Option<u32>) -> Vec<Warning> {
    warnings(&Plan::compile(&parse(json.as_bytes()).unwrap()), nodes)
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
        narrowed(b(0, Per::Route, 5, MINUTE), "trial"),
        b(1, Per::Route, 50, MINUTE)
    ])
    .is_empty());
}

#[test]
fn a_bound_for_everybody_covers_a_narrowed_one_and_so_does_the_same_audience() {
    let ws = unreachable_paths(vec![
        b(0, Per::Route, 5, MINUTE),
        narrowed(b(1, Per::User, 50, MINUTE), "trial"),
    ]);
    assert_eq!(ws, ["$.routes[0].bounds[1]"]);
    let ws = unreachable_paths(vec![
        narrowed(b(0, Per::User, 5, MINUTE), "trial"),
        narrowed(b(1, Per::User, 50, MINUTE), "trial"),
        narrowed(b(2, Per::User, 50, MINUTE), "partner"),
    ]);
    assert_eq!(ws, ["$.routes[0].bounds[1]"]);
}

#[test]
fn a_route_whose_bounds_are_all_narrowed_is_said_to_be_open_to_everyone_else() {
    let r = route(vec![
        narrowed(b(0, Per::User, 1_000, MINUTE), "partner"),
        narrowed(b(1, Per::User, 60, MINUTE), "trial"),
    ]);
    let ws = check(&[r], None);
    let w: Vec<_> = ws
        .iter()
        .filter(|w| w.code == WarningCode::NarrowedOnly)
        .collect();
    assert_eq!(w.len(), 1, "{ws:?}");
    assert_eq!(w[0].path, "$.routes[0].bounds");
    assert_eq!(w[0].level, Severity::Warning);
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
        narrowed(b(0, Per::User, 1_000, MINUTE), "partner"),
        b(1, Per::Address, 100, MINUTE),
    ]);
    assert!(codes(&check(&[r], None), WarningCode::NarrowedOnly).is_empty());
}

#[test]
fn every_bound_gets_its_cluster_reading() {
    let json = r#"{"routes":[{"name":"a","bounds":[
        {"per":"address","limit":5,"window":"PT1M"},{"per":"route","limit":1000,"window":"PT1S"}]}]}"#;
    let ws = from_json(json, Some(4));
    let notes: Vec<_> = ws
        .iter()
        .filter(|w| w.code == WarningCode::PerNode)
        .collect();
    assert_eq!(notes.len(), 2);
    assert_eq!(notes[0].level, Severity::Note);
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
    assert_eq!(codes(&ws, WarningCode::NoBounds), ["$.routes[0].bounds"]);
    assert_eq!(
        codes(&ws, WarningCode::ShadowedRoute),
        ["$.routes[2].match", "$.routes[4].match"]
    );
    let shadowed: Vec<_> = ws
        .iter()
        .filter(|w| w.code == WarningCode::ShadowedRoute)
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
    format!(r#"{{"operation_id":"{id}","method":"{method}","path":"{path}","bounds":[{bounds}]}}"#)
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
        .filter(|w| w.code == WarningCode::LooseOperationBound)
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
    assert_eq!(loose[0].level, Severity::Warning);
    assert_eq!(
        loose[0].message,
        "bound \"b0\" of POST /api/orders/{id}/pay (payOrder) (60 a minute per user, per operation) refuses nothing the route would admit: route bound \"user\" (60 a minute per user) counts the same callers' requests to the whole route, these included, over the same window with a limit no higher; lower the operation's limit below the route's"
    );
}

#[test]
fn loose_operation_bounds_are_claimed_only_when_proved() {
    let r = |bounds: Vec<Bound>, ob: Vec<Bound>| {
        let r = with_operation(route(bounds), ob);
        codes(&check(&[r], None), WarningCode::LooseOperationBound)
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
        vec![narrowed(b(0, Per::User, 10, MINUTE), "trial")],
        vec![b(0, Per::User, 50, MINUTE)]
    )
    .is_empty());
    assert_eq!(
        r(
            vec![narrowed(b(0, Per::User, 10, MINUTE), "trial")],
            vec![narrowed(b(0, Per::User, 50, MINUTE), "trial")]
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
        .filter(|w| w.code == WarningCode::UnreachableBound)
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
        codes(&ws, WarningCode::ManyCounters).is_empty(),
        "100,000 is not more than 100,000"
    );
    let ws = shop("", &many.join(","));
    let w: Vec<_> = ws
        .iter()
        .filter(|w| w.code == WarningCode::ManyCounters)
        .collect();
    assert_eq!(w.len(), 1);
    assert_eq!(w[0].path, "$.routes[0].operations");
    assert_eq!(w[0].operation, None);
    assert!(
        w[0].message.starts_with("the operation bounds of route \"shop\" can hold up to 110,000 counters (11 keyed bounds × 10,000 callers), more than 100,000"),
        "{}",
        w[0].message
    );
    // Counters for whole operations are one each.
    let r = with_operation(
        route(vec![]),
        vec![
            b(0, Per::Route, 5, MINUTE),
            b(1, Per::Address, 5, MINUTE),
            b(2, Per::Route, 50, 3_600_000),
        ],
    );
    let c = Counters::of(&r);
    assert_eq!(c.total, 10_002);
    assert_eq!(
        c.words(),
        "up to 10,002 counters (1 keyed bound × 10,000 callers + 2 counters for whole operations)"
    );
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
        codes(&ws, WarningCode::UnreachableOperation),
        [
            "$.routes[0].operations[1].path",
            "$.routes[0].operations[2].method"
        ],
        "{ws:#?}"
    );
    let w = ws
        .iter()
        .find(|w| w.code == WarningCode::UnreachableOperation)
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
    assert!(
        codes(&ws, WarningCode::UnreachableOperation).is_empty(),
        "{ws:#?}"
    );
    let ws = shop(r#","methods":["POST"]"#, &get);
    assert_eq!(
        codes(&ws, WarningCode::UnreachableOperation).len(),
        1,
        "{ws:#?}"
    );
}

#[test]
fn the_demo_configuration_has_only_its_cluster_reading() {
    let ws = from_json(
        r#"{"instance":"demo","routes":[{"name":"hello","match":{"route_name":"hello","path_prefix":"/hello","methods":["GET"]},
            "bounds":[{"name":"per_address","per":"address","limit":5,"window":"PT1M"}]}]}"#,
        None,
    );
    assert_eq!(ws.len(), 1);
    assert_eq!(ws[0].code, WarningCode::PerNode);
    assert_eq!(ws[0].to_string().split(':').next(), Some("note[per-node]"));
}

#[test]
fn fleet_bounds_without_fleet_nodes_are_warned_about() {
    let json = |service: &str, scope: &str| {
        format!(
            r#"{{"rate_limit_service":{{"cluster":"rls","domain":"d"{service}}},
            "routes":[{{"name":"r","bounds":[
              {{"per":"address","limit":300,"window":"PT1M","scope":"{scope}"}}]}}]}}"#
        )
    };
    let unset = from_json(&json("", "fleet"), None);
    assert_eq!(
        codes(&unset, WarningCode::FleetNodes),
        vec!["$.rate_limit_service"]
    );
    assert!(from_json(&json(r#","fleet_nodes":3"#, "fleet"), None)
        .iter()
        .all(|w| w.code != WarningCode::FleetNodes));
}

/// A cost the response names, reserved 1 (the default), lets k
/// requests in flight pass the limit by nearly k answers: said by `check`.
#[test]
fn a_response_cost_reserving_one_is_warned_of() {
    let json = |cost: &str| {
        format!(
            r#"{{"routes":[{{"name":"llm","bounds":[
            {{"per":"address","limit":1000,"window":"PT1M","cost":{cost}}}]}}]}}"#
        )
    };
    for one in [
        r#"{"response_header":"x-tokens"}"#,
        r#"{"response_json":"/usage/total_tokens","reserve":1}"#,
    ] {
        let ws = from_json(&json(one), None);
        assert_eq!(
            codes(&ws, WarningCode::CostReserve),
            ["$.routes[0].bounds[0]"]
        );
        assert!(ws
            .iter()
            .any(|w| w.message.contains("k requests in flight")));
    }
    for fine in [
        r#"{"response_json":"/usage/total_tokens","reserve":300}"#,
        // Reserving what each request allows itself.
        r#"{"response_json":"/usage/total_tokens"}"#,
        r#"{"request_header":"x-cost"}"#,
    ] {
        assert!(
            codes(&from_json(&json(fine), None), WarningCode::CostReserve).is_empty(),
            "{fine}"
        );
    }
}

/// A body-carried sign-in's head reaches the upstream unless the
/// configuration holds the headers; noted, since Istio cannot set it yet.
#[test]
fn a_sign_in_whose_heads_go_on_is_noted() {
    let json = |hold: bool, account: &str| {
        format!(
            r#"{{"hold_sign_in_headers":{hold},
            "rate_limit_service":{{"cluster":"rls","domain":"d"}},
            "routes":[{{"name":"login","match":{{"methods":["POST"]}},"account":{account},
            "bounds":[{{"per":"account","scope":"installation","limit":5,"window":"PT1M"}}]}}]}}"#
        )
    };
    let ws = from_json(&json(false, r#"{"json":"username"}"#), None);
    let noted: Vec<_> = ws
        .iter()
        .filter(|w| w.code == WarningCode::SignInHeadsGoOn)
        .collect();
    assert_eq!(noted.len(), 1);
    assert_eq!(
        (noted[0].level, noted[0].path.as_str()),
        (Severity::Note, "$.routes[0].account")
    );
    let held = from_json(&json(true, r#"{"json":"username"}"#), None);
    assert!(codes(&held, WarningCode::SignInHeadsGoOn).is_empty());
    let header = from_json(&json(false, r#"{"header":"x-login"}"#), None);
    assert!(codes(&header, WarningCode::SignInHeadsGoOn).is_empty());
}

/// A `header` identity is believed as it arrives: the note names the
/// headers Envoy must strip; the other sources get no such note.
#[test]
fn a_header_identity_is_noted_with_the_headers_to_strip() {
    let json = |identity: &str| {
        format!(
            r#"{{"identity":{identity},"routes":[{{"name":"api",
            "bounds":[{{"per":"user","limit":5,"window":"PT1M"}}]}}]}}"#
        )
    };
    let ws = from_json(
        &json(r#"{"header":{"user":"x-user","roles":"x-roles"}}"#),
        None,
    );
    let noted = codes(&ws, WarningCode::TrustedHeaders);
    assert_eq!(noted.len(), 1, "{ws:#?}");
    let w = ws
        .iter()
        .find(|w| w.code == WarningCode::TrustedHeaders)
        .map(|w| {
            (
                w.level,
                w.path.as_str(),
                w.message.contains("x-user, x-roles"),
            )
        });
    assert_eq!(w, Some((Severity::Note, "$.identity.header", true)));
    let one = from_json(&json(r#"{"header":{"user":"x-user"}}"#), None);
    assert!(
        one.iter().any(|w| w.code == WarningCode::TrustedHeaders
            && w.message.contains("the request header x-user says")),
        "{one:#?}"
    );
    let jwt = from_json(&json(r#"{"jwt":{"user_claim":"sub"}}"#), None);
    assert!(codes(&jwt, WarningCode::TrustedHeaders).is_empty());
}

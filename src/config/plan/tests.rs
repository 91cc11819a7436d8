use super::*;

fn fingerprints(p: &Plan) -> Vec<u64> {
    p.wants().iter().map(|w| w.fingerprint).collect()
}
use crate::config::parse;

fn plan(json: &str) -> Plan {
    Plan::compile(&parse(json.as_bytes()).unwrap())
}

const TWO: &str = r#"{"routes":[
    {"name":"a","match":{"route_name":"r1","path_prefix":"/a","methods":["GET"]},
     "bounds":[{"per":"address","limit":5,"window":"PT1M"}]},
    {"name":"b","match":{"host":"example.com"},
     "bounds":[{"per":"route","limit":100,"window":"PT1M"}]},
    {"name":"rest","bounds":[{"per":"route","limit":1,"window":"PT1S"}]}]}"#;

#[test]
fn first_matching_route_wins() {
    let p = plan(TWO);
    let req = |rn, host, path, m| RequestInfo {
        route_name: rn,
        host,
        path,
        method: m,
    };
    assert_eq!(
        p.route_for(&req(Some("r1"), None, Some("/a/x?q=1"), Some("GET"))),
        Some(RouteId(0))
    );
    assert_eq!(
        p.route_for(&req(Some("r1"), None, Some("/a"), Some("POST"))),
        Some(RouteId(2))
    );
    assert_eq!(
        p.route_for(&req(Some("r2"), None, Some("/a"), Some("GET"))),
        Some(RouteId(2))
    );
    assert_eq!(
        p.route_for(&req(None, Some("Example.COM:8080"), None, None)),
        Some(RouteId(1))
    );
    assert_eq!(
        p.route_for(&req(None, Some("example.org"), None, None)),
        Some(RouteId(2))
    );
    // The query string is not part of the path.
    assert_eq!(
        p.route_for(&req(Some("r1"), None, Some("/x?/a"), Some("GET"))),
        Some(RouteId(2))
    );
    assert!(p.needs.route_name && p.needs.host && p.needs.path && p.needs.method);
}

#[test]
fn odd_spellings_match_what_the_upstream_understands() {
    let p = plan(
        r#"{"routes":[
        {"name":"h","match":{"host":"Example.com.","path_prefix":"/h/"},"bounds":[{"per":"route","limit":1,"window":"PT1S"}]},
        {"name":"p","match":{"host":"example.net:8080","path_prefix":"/p/"},"bounds":[{"per":"route","limit":1,"window":"PT1S"}]},
        {"name":"tls","match":{"host":"example.org:443","path_prefix":"/t/"},"bounds":[{"per":"route","limit":1,"window":"PT1S"}]},
        {"name":"v6","match":{"host":"[::1]","path_prefix":"/6/"},"bounds":[{"per":"route","limit":1,"window":"PT1S"}]},
        {"name":"api","match":{"path_prefix":"/api/","methods":["GET"]},"bounds":[{"per":"route","limit":1,"window":"PT1S"}]},
        {"name":"shop","match":{"path_prefix":"/shop/"},"operations":[
          {"name":"pay","method":"POST","path":"/shop/orders/{id}/pay","bounds":[{"per":"route","limit":1,"window":"PT1S"}]},
          {"name":"get","method":"GET","path":"/shop/orders/{id}","bounds":[{"per":"route","limit":1,"window":"PT1S"}]}]}]}"#,
    );
    let at = |host: Option<&str>, path: &str, method: &str| {
        let req = RequestInfo {
            route_name: None,
            host,
            path: Some(path),
            method: Some(method),
        };
        let r = p.route_for(&req)?;
        let op = p.routes[r.0].operation_for(&req.normalized());
        Some((p.routes[r.0].name.as_str(), op.map(|o| o.0)))
    };
    let api = Some(("api", None));
    for path in [
        "/api/x",
        "/%61pi/x",
        "//api/x",
        "/./api/x",
        "/x/../api/x",
        "/../../api/x",
        "/%2e/api/x",
        "/x/%2E%2E/api/x",
        "/api%2Fx",
        "/api%2fx",
        "/api%5Cx",
        "/api\\x",
        "/api/",
        "/api/x?y=1",
    ] {
        assert_eq!(at(None, path, "GET"), api, "{path}");
    }
    assert_eq!(at(None, "/api/x", "HEAD"), api, "HEAD is a GET");
    assert_eq!(at(None, "/api/x", "POST"), None);
    assert_eq!(at(None, "/api", "GET"), None);
    assert_eq!(at(None, "/api/../x", "GET"), None);
    assert_eq!(
        at(None, "/%41pi/x", "GET"),
        None,
        "paths are case-sensitive"
    );
    // Hosts: case, one trailing dot, the port.
    for host in [
        "example.com",
        "EXAMPLE.com.",
        "example.com:8443",
        "Example.Com.:80",
    ] {
        assert_eq!(at(Some(host), "/h/x", "GET"), Some(("h", None)), "{host}");
    }
    for host in ["example.com..", "example.co", "www.example.com"] {
        assert_ne!(at(Some(host), "/h/x", "GET"), Some(("h", None)), "{host}");
    }
    for host in ["example.net:8080", "EXAMPLE.net.:8080", "example.net:08080"] {
        assert_eq!(at(Some(host), "/p/x", "GET"), Some(("p", None)), "{host}");
    }
    for host in ["example.net", "example.net:9090", "example.net:80"] {
        assert_eq!(at(Some(host), "/p/x", "GET"), None, "{host}");
    }
    // A default port written in the configuration is also the authority
    // without one (the port a client leaves out).
    for host in ["example.org:443", "example.org", "example.org."] {
        assert_eq!(at(Some(host), "/t/x", "GET"), Some(("tls", None)), "{host}");
    }
    assert_eq!(at(Some("example.org:8443"), "/t/x", "GET"), None);
    for host in ["[::1]", "[::1]:80"] {
        assert_eq!(at(Some(host), "/6/x", "GET"), Some(("v6", None)), "{host}");
    }
    // Operations: the same spellings; HEAD is a GET; an id may hold an
    // encoded slash.
    let shop = |op| Some(("shop", Some(op)));
    for path in [
        "/shop/orders/7/pay",
        "/shop//orders/7/./%70ay",
        "/shop/x/../orders/%37/pay?q=/",
        "/shop/orders/a%2Fb/pay",
    ] {
        assert_eq!(at(None, path, "POST"), shop(0), "{path}");
    }
    assert_eq!(at(None, "/shop/orders/7", "HEAD"), shop(1));
    assert_eq!(at(None, "/shop/orders/7/pay", "HEAD"), Some(("shop", None)));
}

/// A shared-data bound's fingerprint names its counters: the values
/// this release computes are the previous release's (an upgrade
/// restarts no count), installation bounds in the list or not.
#[test]
fn fingerprints_are_the_previous_releases() {
    let p = plan(
        r#"{"rate_limit_service":{"cluster":"rls","domain":"d"},"routes":[{"name":"r","bounds":[
        {"name":"i","per":"address","limit":5,"window":"PT1M","scope":"installation"},
        {"name":"a","per":"address","limit":5,"window":"PT1M"},
        {"name":"f","per":"address","limit":50,"window":"PT1M","scope":"fleet"}],
      "operations":[{"name":"o","method":"GET","path":"/x","bounds":[
        {"name":"oi","per":"route","limit":5,"window":"PT1H","scope":"installation"},
        {"name":"ob","per":"route","limit":7,"window":"PT1M"}]}]}]}"#,
    );
    let shared: Vec<(&str, u64)> = p.routes[0]
        .bounds
        .iter()
        .filter(|b| b.in_shared_data())
        .map(|b| (b.name.as_str(), b.fingerprint))
        .collect();
    // Hashing a usize writes its width: the module (wasm32) computes
    // other values from the same function, which these pin.
    #[cfg(target_pointer_width = "64")]
    assert_eq!(
        shared,
        [
            ("a", 0xa950_022e_e9fc_7d74),
            ("f", 0x6ba0_2386_21ad_e7ca),
            ("o.ob", 0x0dcc_46e3_55ad_e7cb)
        ]
    );
    assert_eq!(shared.len(), 3);
    let r = &p.routes[0];
    let names = |ids: &[BoundId]| -> Vec<&str> {
        ids.iter()
            .map(|&i| r.bound(i).unwrap().name.as_str())
            .collect()
    };
    assert_eq!(names(&r.service_bounds), ["i", "o.oi"]);
    assert_eq!(names(&r.early), ["a", "f"]);
    // An operation's lists hold the route's first, built once.
    assert_eq!(names(&r.operations[0].early), ["a", "f", "o.ob"]);
    assert_eq!(names(r.early_bounds(Some(OpId(0)))), ["a", "f", "o.ob"]);
    assert_eq!(names(r.early_bounds(None)), ["a", "f"]);
    assert_eq!(
        r.installation_bounds(None)
            .map(|(_, b)| b.name.as_str())
            .collect::<Vec<_>>(),
        ["i"]
    );
    assert_eq!(
        r.installation_bounds(Some(OpId(0)))
            .map(|(_, b)| b.name.as_str())
            .collect::<Vec<_>>(),
        ["i", "o.oi"]
    );
    assert_eq!(p.wants().len(), 3, "a lane for each shared-data bound only");
}

#[test]
fn changing_a_route_changes_only_its_fingerprints() {
    let p1 = plan(TWO);
    let p2 = plan(&TWO.replace(r#""limit":100"#, r#""limit":200"#));
    let (f1, f2) = (fingerprints(&p1), fingerprints(&p2));
    assert_eq!(f1[0], f2[0], "route a unchanged");
    assert_ne!(f1[1], f2[1], "route b changed");
    assert_eq!(f1[2], f2[2], "route rest unchanged");
    assert_ne!(p1.hash, p2.hash);
    // Same text, same fingerprints: they agree across workers.
    assert_eq!(f1, fingerprints(&plan(TWO)));
}

/// A rollout's steps (`enforce_percent` 0 → 25 → 100) keep the counts;
/// the bound's own share, else the configuration's, else 100.
#[test]
fn enforce_percent_is_no_part_of_a_fingerprint() {
    let p1 = plan(TWO);
    let stepped = TWO.replace(r#""limit":100"#, r#""limit":100,"enforce_percent":25"#);
    let p2 = plan(&format!(r#"{{"enforce_percent":50,{}"#, &stepped[1..]));
    assert_eq!(fingerprints(&p1), fingerprints(&p2));
    let percents: Vec<u8> = p2
        .routes
        .iter()
        .flat_map(|r| r.bounds.iter().map(|b| b.enforce_percent))
        .collect();
    assert!(percents.contains(&25) && percents.contains(&50));
    assert!(p1
        .routes
        .iter()
        .all(|r| r.bounds.iter().all(|b| b.enforce_percent == 100)));
}

#[test]
fn a_matcher_covers_the_narrower_ones() {
    let m = |route_name: Option<&str>, host: Option<&str>, path: Option<&str>, methods: &[&str]| {
        Matcher::new(&MatchConfig {
            route_name: route_name.map(str::to_string),
            host: host.map(str::to_string),
            path_prefix: path.map(str::to_string),
            methods: methods.iter().map(|s| s.to_string()).collect(),
        })
    };
    let any = m(None, None, None, &[]);
    let api = m(None, None, Some("/api"), &[]);
    let api_get = m(None, None, Some("/api/v1"), &["GET"]);
    assert!(any.covers(&api) && any.covers(&api_get) && api.covers(&api_get));
    assert!(!api.covers(&any) && !api_get.covers(&api));
    // Methods: a set covers its subsets, never "any method".
    assert!(m(None, None, None, &["GET", "POST"]).covers(&m(None, None, None, &["GET"])));
    assert!(!m(None, None, None, &["GET"]).covers(&m(None, None, None, &["GET", "POST"])));
    assert!(!m(None, None, None, &["GET"]).covers(&any));
    // HEAD is taken wherever GET is.
    let (get, head) = (
        m(None, None, None, &["GET"]),
        m(None, None, None, &["HEAD"]),
    );
    assert!(get.covers(&head) && !head.covers(&get));
    assert!(get.covers(&m(None, None, None, &["GET", "HEAD"])));
    // Hosts: case-insensitive; a host without a port covers it on a port.
    let h = |s| m(None, Some(s), None, &[]);
    assert!(h("Example.com").covers(&h("example.COM")));
    assert!(h("example.com").covers(&h("example.com:8080")));
    assert!(!h("example.com:8080").covers(&h("example.com")));
    assert!(!h("example.com").covers(&h("example.org")));
    assert!(h("example.com.").covers(&h("Example.com:443")));
    assert!(h("example.com:443").covers(&h("example.com:443")));
    assert!(!h("example.com:443").covers(&h("example.com:80")));
    // Path prefixes compare normalised.
    let p = |s| m(None, None, Some(s), &[]);
    assert!(p("/%61pi").covers(&p("/api//v1")) && p("/api/").covers(&p("/x/../api/v1")));
    // Route names: equal or absent.
    assert!(m(Some("r"), None, None, &[]).covers(&m(Some("r"), None, Some("/x"), &[])));
    assert!(!m(Some("r"), None, None, &[]).covers(&m(Some("s"), None, None, &[])));
    assert!(!m(Some("r"), None, None, &[]).covers(&any));
    // What `covers` claims, `matches` confirms.
    let req = RequestInfo {
        route_name: Some("r"),
        host: Some("example.com:8080"),
        path: Some("/api/v1/x"),
        method: Some("GET"),
    };
    for (a, b) in [
        (&any, &api),
        (&api, &api_get),
        (&h("example.com"), &h("example.com:8080")),
    ] {
        assert!(a.covers(b));
        let req = req.normalized();
        assert!(!b.matches(&req) || a.matches(&req));
    }
}

#[test]
fn bounds_of_one_route_have_distinct_fingerprints() {
    let p = plan(
        r#"{"routes":[{"name":"a","bounds":[
        {"per":"address","limit":5,"window":"PT1M"},{"per":"address","limit":5,"window":"PT1M","name":"x"}]}]}"#,
    );
    // Tiers on one key: one lane (one want), and two fingerprints.
    assert_eq!(fingerprints(&p).len(), 1);
    let f: Vec<u64> = p.routes[0].bounds.iter().map(|b| b.fingerprint).collect();
    assert_ne!(f[0], f[1]);
}

/// Issue 41: which bounds of a route share one lane (tiers on one key):
/// node bounds counting requests, enforced in full, of the same `per`,
/// `applies_to` and operation, in the route's order; any other bound keeps
/// its own lane. A bound that shares takes a fingerprint no lone bound
/// has: its entries are another layout, so its count restarts once.
#[test]
fn bounds_on_one_key_share_a_lane_and_say_so_in_their_fingerprint() {
    let p = plan(
        r#"{"identity":{"header":{"user":"x-user"}},"routes":[{"name":"a","bounds":[
        {"name":"s","per":"address","limit":10,"window":"PT1S"},
        {"name":"u","per":"user","limit":100,"window":"PT1M"},
        {"name":"m","per":"address","limit":300,"window":"PT1M"},
        {"name":"sh","per":"address","limit":300,"window":"PT1M","shadow":true},
        {"name":"half","per":"address","limit":300,"window":"PT1M","enforce_percent":50},
        {"name":"c","per":"address","limit":300,"window":"PT1M","cost":{"request_header":"x-cost"}},
        {"name":"h","per":"address","limit":5000,"window":"PT1H"}]}]}"#,
    );
    let b = &p.routes[0].bounds;
    let rate = |j: usize| b[j].rate;
    assert_eq!(
        b[0].tier,
        Tier::Leads(vec![
            (BoundId(0), rate(0)),
            (BoundId(2), rate(2)),
            (BoundId(6), rate(6))
        ])
    );
    assert_eq!(
        b[2].tier,
        Tier::Joins {
            lead: BoundId(0),
            index: 1
        }
    );
    assert_eq!(
        b[6].tier,
        Tier::Joins {
            lead: BoundId(0),
            index: 2
        }
    );
    for j in [1, 3, 4, 5] {
        assert_eq!(b[j].tier, Tier::Own, "{}", b[j].name);
    }
    // Five lanes: the tiers', the user's, the shadow's, the half's, the cost's.
    assert_eq!(fingerprints(&p).len(), 5);
    // Alone, the same bound has another fingerprint.
    let alone = plan(
        r#"{"identity":{"header":{"user":"x-user"}},"routes":[{"name":"a","bounds":[
        {"name":"s","per":"address","limit":10,"window":"PT1S"},
        {"name":"u","per":"user","limit":100,"window":"PT1M"},
        {"name":"m","per":"address","limit":300,"window":"PT1M"},
        {"name":"sh","per":"address","limit":300,"window":"PT1M","shadow":true},
        {"name":"half","per":"address","limit":300,"window":"PT1M","enforce_percent":100},
        {"name":"c","per":"address","limit":300,"window":"PT1M","cost":{"request_header":"x-cost"}},
        {"name":"h","per":"address","limit":5000,"window":"PT1H"}]}]}"#,
    );
    // `half` enforced in full joins the tiers: theirs all change.
    let a = &alone.routes[0].bounds;
    assert!(matches!(a[4].tier, Tier::Joins { index: 2, .. }));
    for j in [0, 2, 4, 6] {
        assert_ne!(a[j].fingerprint, b[j].fingerprint, "{}", b[j].name);
    }
    assert_eq!(a[1].fingerprint, b[1].fingerprint);
}

/// Why a bound keeps a lane of its own, by the rule the plan grouped by:
/// the reading's words come from here.
#[test]
fn a_bound_alone_says_why() {
    let p = plan(
        r#"{"identity":{"header":{"user":"x-user"}},"routes":[{"name":"a","bounds":[
        {"name":"s","per":"address","limit":10,"window":"PT1S"},
        {"name":"u","per":"user","limit":100,"window":"PT1M"},
        {"name":"m","per":"address","limit":300,"window":"PT1M"},
        {"name":"sh","per":"address","limit":300,"window":"PT1M","shadow":true},
        {"name":"half","per":"address","limit":300,"window":"PT1M","enforce_percent":50},
        {"name":"c","per":"address","limit":300,"window":"PT1M","cost":{"request_header":"x-cost"}},
        {"name":"partner","per":"address","limit":300,"window":"PT1M","applies_to":{"anonymous":true}}]}]}"#,
    );
    let b = &p.routes[0].bounds;
    let why = |j: usize| alone(b, BoundId(j));
    assert_eq!(why(0), None);
    assert_eq!(why(2), None);
    assert_eq!(why(1), Some(Alone::OnlyOnKey));
    assert_eq!(why(3), Some(Alone::Shadow));
    assert_eq!(why(4), Some(Alone::Rollout(50)));
    assert_eq!(why(5), Some(Alone::Cost));
    // The same per, another audience: another key.
    assert_eq!(why(6), Some(Alone::OnlyOnKey));
    assert_eq!(why(7), None, "no such bound");
    // Nine tiers on one key: the ninth finds the first lane full.
    let bounds: Vec<String> = (0..9)
        .map(|i| {
            format!(
                r#"{{"name":"b{i}","per":"address","limit":5,"window":"PT{}M"}}"#,
                i + 1
            )
        })
        .collect();
    let full = plan(&format!(
        r#"{{"routes":[{{"name":"a","bounds":[{}]}}]}}"#,
        bounds.join(",")
    ));
    assert_eq!(
        alone(&full.routes[0].bounds, BoundId(8)),
        Some(Alone::LaneFull)
    );
    assert_eq!(alone(&full.routes[0].bounds, BoundId(7)), None);
}

/// More tiers than a lane carries take another lane.
#[test]
fn more_tiers_than_a_lane_carries_take_another() {
    let bounds: Vec<String> = (0..10)
        .map(|i| {
            format!(
                r#"{{"name":"b{i}","per":"address","limit":5,"window":"PT{}M"}}"#,
                i + 1
            )
        })
        .collect();
    let p = plan(&format!(
        r#"{{"routes":[{{"name":"a","bounds":[{}]}}]}}"#,
        bounds.join(",")
    ));
    assert_eq!(fingerprints(&p).len(), 2);
    let b = &p.routes[0].bounds;
    assert!(matches!(&b[0].tier, Tier::Leads(t) if t.len() == crate::count::lane::MAX_TIERS));
    assert!(matches!(&b[8].tier, Tier::Leads(t) if t.len() == 2));
}

/// A cost read from the answer's JSON with a fixed reservation, not asking
/// for the usage, needs nothing of the request body, until a bound of the
/// route is keyed by the request's model: then the body is read for it.
#[test]
fn a_route_reads_the_request_body_only_for_what_it_needs() {
    let tokens = r#"{"name":"tokens","per":"address","limit":1000000,"window":"PT1H",
         "cost":{"response_json":"/usage/total_tokens","reserve":1,"ask_usage":false}}"#;
    let route = |bounds: &str| {
        plan(&format!(
            r#"{{"routes":[{{"name":"llm","bounds":[{bounds}]}}]}}"#
        ))
    };
    let alone = route(tokens);
    assert_eq!(alone.routes[0].reads_request, None);
    let by_model = route(&format!(
        r#"{tokens},{{"name":"calls","per":"model","limit":2,"window":"PT1H"}}"#
    ));
    assert!(by_model.routes[0].reads_request.is_some());
}

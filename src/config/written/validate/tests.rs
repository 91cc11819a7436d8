use super::*;

fn errors(json: &str) -> Vec<String> {
    match parse(json.as_bytes()) {
        Ok(_) => vec![],
        Err(e) => e.iter().map(|e| e.to_string()).collect(),
    }
}

/// `e` is one error, at `at` (a JSON path; `what` names the case).
fn one_error_at(e: &[String], at: &str, what: &str) {
    assert!(e.len() == 1 && e[0].starts_with(at), "{what}: {e:?}");
}

const GOOD: &str = r#"{"routes":[{"name":"hello","match":{"path_prefix":"/hello","methods":["GET"]},
    "bounds":[{"per":"address","limit":5,"window":"PT1M"}]}]}"#;

#[test]
fn good_config_parses_with_defaults() {
    let c = parse(GOOD.as_bytes()).unwrap();
    assert_eq!(c.instance, "ratebound");
    assert!(c.success_headers);
    assert_eq!(c.routes[0].bounds[0].limit, 5);
}

#[test]
fn enforce_percent_is_a_share_and_never_beside_shadow() {
    let e = errors(
        r#"{"enforce_percent":101,"would_refuse_header":"X Bad","routes":[{"name":"a","bounds":[
        {"per":"address","limit":5,"window":"PT1M","enforce_percent":250},
        {"per":"route","limit":5,"window":"PT1M","shadow":true,"enforce_percent":0}]}]}"#,
    );
    assert!(
        e[0].starts_with("$.enforce_percent: 101 is out of range"),
        "{e:?}"
    );
    assert!(
        e[1].starts_with("$.would_refuse_header: \"X Bad\""),
        "{e:?}"
    );
    assert!(
        e[2].starts_with("$.routes[0].bounds[0].enforce_percent: 250"),
        "{e:?}"
    );
    assert!(
        e[3].starts_with("$.routes[0].bounds[1].enforce_percent: \"shadow\": true"),
        "{e:?}"
    );
    assert_eq!(e.len(), 4);
    assert!(errors(
        r#"{"enforce_percent":10,"routes":[{"name":"a","bounds":[
        {"per":"address","limit":5,"window":"PT1M","enforce_percent":0}]}]}"#
    )
    .is_empty());
}

#[test]
fn empty_configuration_is_an_empty_plan() {
    assert_eq!(parse(b"").unwrap().routes.len(), 0);
}

#[test]
fn windows_outside_one_second_to_one_day_are_rejected() {
    assert_eq!(window_ms("PT1S"), Ok(1_000));
    assert_eq!(window_ms("P1D"), Ok(86_400_000));
    assert_eq!(window_ms("PT1M30S"), Ok(90_000));
    for bad in [
        "PT0S", "PT0.5S", "P2D", "P1M", "P1Y", "1m", "", "PT", "P0YT1S", "P0MT1M",
    ] {
        assert!(window_ms(bad).is_err(), "{bad}");
    }
}

#[test]
fn every_error_names_its_json_path() {
    let e = errors(
        r#"{"routes":[{"name":"a","bounds":[{"per":"address","limit":0,"window":"PT0S"}]},
                      {"name":"a","match":{"path_prefix":"x","methods":["get"]}}]}"#,
    );
    let want = [
        "$.routes[0].bounds[0].limit",
        "$.routes[0].bounds[0].window",
        "$.routes[1].name: duplicate",
        "$.routes[1].match.path_prefix",
        "$.routes[1].match.methods[0]",
    ];
    for w in want {
        assert!(e.iter().any(|m| m.starts_with(w)), "missing {w} in {e:?}");
    }
    assert_eq!(e.len(), want.len(), "{e:?}");
}

#[test]
fn unknown_fields_and_wrong_types_are_rejected_with_a_path() {
    let e = errors(
        r#"{"routes":[{"name":"a","bounds":[{"per":"address","limit":5,"window":"PT1S","burst":3}]}]}"#,
    );
    assert!(e[0].starts_with("$.routes[0].bounds[0]"), "{e:?}");
    assert!(e[0].contains("unknown field `burst`"), "{e:?}");
    let e =
        errors(r#"{"routes":[{"name":"a","bounds":[{"per":"ip","limit":5,"window":"PT1S"}]}]}"#);
    assert!(e[0].starts_with("$.routes[0].bounds[0].per"), "{e:?}");
    let e = errors(r#"{"routes":{"name":"a"}}"#);
    assert!(e[0].starts_with("$.routes"), "{e:?}");
}

#[test]
fn client_address_prefixes_default_and_are_range_checked_with_a_path() {
    let c = parse(GOOD.as_bytes()).unwrap();
    assert_eq!(
        (c.client_address.ipv4_prefix, c.client_address.ipv6_prefix),
        (32, 64)
    );
    let e = errors(r#"{"client_address":{"ipv4_prefix":0,"ipv6_prefix":129}}"#);
    assert_eq!(e.len(), 2, "{e:?}");
    assert!(e[0].starts_with("$.client_address.ipv4_prefix: "), "{e:?}");
    assert!(e[0].contains("1 to 32"), "{e:?}");
    assert!(e[1].starts_with("$.client_address.ipv6_prefix: "), "{e:?}");
    assert!(e[1].contains("1 to 128"), "{e:?}");
    let e = errors(r#"{"client_address":{"ipv6_prefix":"64"}}"#);
    assert!(e[0].starts_with("$.client_address.ipv6_prefix: "), "{e:?}");
    let e = errors(r#"{"client_address":{"ipv6":64}}"#);
    assert!(e[0].starts_with("$.client_address"), "{e:?}");
}

#[test]
fn identity_keyed_bounds_need_an_identity_source() {
    let e =
        errors(r#"{"routes":[{"name":"a","bounds":[{"per":"user","limit":5,"window":"PT1S"}]}]}"#);
    assert!(e[0].starts_with("$.routes[0].bounds[0].per"), "{e:?}");
}

#[test]
fn configurations_that_cannot_work_are_rejected_with_the_fix() {
    let route = |m: &str| format!(r#"{{"routes":[{{"name":"a","match":{m}}}]}}"#);
    let session =
        |s: &str| format!(r#"{{"identity":{{"session":{{"cluster":"s",{s}}}}},"routes":[]}}"#);
    let cases = [
        (
            route(r#"{"path_prefix":"/a?b=1"}"#),
            "$.routes[0].match.path_prefix",
            "query",
        ),
        (
            route(r#"{"path_prefix":"/a#top"}"#),
            "$.routes[0].match.path_prefix",
            "fragment",
        ),
        (
            route(r#"{"host":"example.com:http"}"#),
            "$.routes[0].match.host",
            "port",
        ),
        (
            route(r#"{"host":"example.com:"}"#),
            "$.routes[0].match.host",
            "port",
        ),
        (
            route(r#"{"host":"example.com:0"}"#),
            "$.routes[0].match.host",
            "port",
        ),
        (
            route(r#"{"host":"example.com:65536"}"#),
            "$.routes[0].match.host",
            "port",
        ),
        (
            route(r#"{"host":"example.com:+80"}"#),
            "$.routes[0].match.host",
            "port",
        ),
        (
            route(r#"{"host":"exa mple.com"}"#),
            "$.routes[0].match.host",
            "host name",
        ),
        (
            route(r#"{"host":"example.com/api"}"#),
            "$.routes[0].match.host",
            "host name",
        ),
        (
            route(r#"{"host":":8080"}"#),
            "$.routes[0].match.host",
            "host name",
        ),
        (
            route(r#"{"host":"[::1"}"#),
            "$.routes[0].match.host",
            "host name",
        ),
        (
            route(r#"{"host":"[::g]"}"#),
            "$.routes[0].match.host",
            "host name",
        ),
        (
            session(r#""authority":"session\r\nx-injected: 1""#),
            "$.identity.session.authority",
            "host name",
        ),
        (
            session(r#""authority":"session internal""#),
            "$.identity.session.authority",
            "host name",
        ),
        (
            session(r#""authority":"session\u007f""#),
            "$.identity.session.authority",
            "host name",
        ),
        (
            session(r#""authority":"session:99999""#),
            "$.identity.session.authority",
            "port",
        ),
        (
            session(r#""authority":"""#),
            "$.identity.session.authority",
            "host name",
        ),
        (
            session(r#""cookie":"sid;admin=1""#),
            "$.identity.session.cookie",
            "token",
        ),
        (
            session(r#""cookie":"sid=1""#),
            "$.identity.session.cookie",
            "token",
        ),
        (
            session(r#""cookie":"s id""#),
            "$.identity.session.cookie",
            "token",
        ),
        (
            session(r#""cookie":"sid\u0001""#),
            "$.identity.session.cookie",
            "token",
        ),
        (
            session(r#""cookie":"""#),
            "$.identity.session.cookie",
            "token",
        ),
        (
            session(r#""cookie":"caf\u00e9""#),
            "$.identity.session.cookie",
            "token",
        ),
    ];
    for (json, path, why) in &cases {
        let e = errors(json);
        assert_eq!(e.len(), 1, "{json}: {e:?}");
        assert!(e[0].starts_with(&format!("{path}: ")), "{json}: {e:?}");
        assert!(e[0].contains(why), "{json}: {e:?} should say {why:?}");
    }
    for ok in [
        route(r#"{"path_prefix":"/a/b.json","host":"Example.COM."}"#),
        route(r#"{"host":"example.com:8080"}"#),
        route(r#"{"host":"[::1]:80"}"#),
        route(r#"{"host":"[2001:db8::1]"}"#),
        route(r#"{"host":"xn--bcher-kva.example"}"#),
        session(r#""authority":"session.internal:8443","cookie":"__Host-sid""#),
        session(r#""cookie":"!#$%&'*+-.^_`|~09AZaz""#),
    ] {
        assert_eq!(errors(&ok), Vec::<String>::new(), "{ok}");
    }
}

#[test]
fn hostile_input_is_an_error_not_a_panic() {
    assert!(parse(&[0xff, 0xfe, 0x00]).is_err());
    let deep = "[".repeat(10_000);
    assert!(parse(deep.as_bytes()).is_err());
    assert!(parse(&vec![b' '; MAX_CONFIG_BYTES + 1]).is_err());
    assert!(parse(b"{} {}").is_err());
    // A top-level array: the path is `$[0]`, not `$.[0]`.
    let e = errors("[[[[1]]]]");
    assert!(e[0].starts_with("$[0]: "), "{e:?}");
}

fn with_bounds(keyed: usize, per_route: usize) -> String {
    let b = |j: usize, per: &str| {
        format!(r#"{{"name":"b{j}","per":"{per}","limit":5,"window":"PT1M"}}"#)
    };
    let bounds: Vec<String> = (0..keyed)
        .map(|j| b(j, "address"))
        .chain((keyed..keyed + per_route).map(|j| b(j, "route")))
        .collect();
    format!(
        r#"{{"routes":[{{"name":"r","bounds":[{}]}}]}}"#,
        bounds.join(",")
    )
}

#[test]
fn a_configuration_over_the_key_budget_is_refused_with_the_numbers() {
    assert!(
        errors(&with_bounds(128, 896)).is_empty(),
        "the most that fits"
    );
    let e = errors(&with_bounds(129, 0));
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(
        e[0].starts_with("$.routes: 129 bounds keyed per caller need 161508 shared-data keys")
            && e[0].contains("(1252 each, to track up to 10,000 callers)")
            && e[0].contains("the budget is 161280 keys"),
        "{e:?}"
    );
    let e = errors(&with_bounds(0, 1_025));
    assert!(e[0].starts_with("$.routes: 1025 bounds"), "{e:?}");
    // Keys that fill the budget exactly (128 tables and 1,024 bounds
    // per route) fit it: only the bound count is over.
    let e = errors(&with_bounds(128, 1_024));
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(e[0].starts_with("$.routes: 1152 bounds"), "{e:?}");
}

/// A limit is 1 to u32::MAX, both ends included.
#[test]
fn a_limit_fits_in_32_bits() {
    let with_limit = |n: u64| {
        errors(&format!(
            r#"{{"routes":[{{"name":"a","bounds":[{{"per":"address","limit":{n},"window":"PT1M"}}]}}]}}"#
        ))
    };
    assert!(with_limit(1).is_empty());
    assert!(with_limit(u64::from(u32::MAX)).is_empty());
    for n in [0, u64::from(u32::MAX) + 1] {
        let e = with_limit(n);
        assert!(e[0].starts_with("$.routes[0].bounds[0].limit"), "{e:?}");
    }
}

/// An operation's method is an HTTP method in capitals: an empty one is
/// an error too.
#[test]
fn an_operation_s_method_is_written_in_capitals() {
    let with_method = |m: &str| {
        errors(&format!(
            r#"{{"routes":[{{"name":"a","operations":[{{"operation_id":"op","method":"{m}",
            "path":"/x","bounds":[{{"per":"address","limit":1,"window":"PT1M"}}]}}]}}]}}"#
        ))
    };
    assert!(with_method("POST").is_empty());
    for m in ["", "post", "PO ST"] {
        one_error_at(&with_method(m), "$.routes[0].operations[0].method", m);
    }
}

/// The size cap is inclusive (a configuration of exactly
/// `MAX_CONFIG_BYTES` is read), and a document that is no object is
/// an error at `$`, the root, not at a path of its own.
#[test]
fn the_size_cap_and_the_root_s_path() {
    let pad = |n: usize| format!("{GOOD}{}", " ".repeat(n - GOOD.len()));
    assert!(parse(pad(MAX_CONFIG_BYTES).as_bytes()).is_ok());
    let e = errors(&pad(MAX_CONFIG_BYTES + 1));
    assert!(
        e[0].starts_with("$: configuration is 1048577 bytes"),
        "{e:?}"
    );
    for doc in ["5", "[]", "\"routes\""] {
        let e = errors(doc);
        assert!(e[0].starts_with("$: invalid "), "{doc}: {e:?}");
    }
}

/// A JWT claim is a name, dotted for nested claims: no empty part
/// anywhere (`a..b`, `.a`, `a.`), which no token could carry.
#[test]
fn a_claim_path_has_no_empty_part() {
    let with_claim = |c: &str| {
        errors(&format!(
            r#"{{"identity":{{"jwt":{{"user_claim":"{c}"}}}},"routes":[{{"name":"a",
            "bounds":[{{"per":"user","limit":1,"window":"PT1M"}}]}}]}}"#
        ))
    };
    assert!(with_claim("sub").is_empty());
    assert!(with_claim("realm_access.roles").is_empty());
    for c in ["", "a..b", ".a", "a."] {
        one_error_at(&with_claim(c), "$.identity.jwt.user_claim", c);
    }
}

/// Identity caches keep an answer at most an hour: 3,600 s is
/// accepted, one more is refused, for JWTs and sessions alike.
#[test]
fn identity_caches_keep_an_answer_an_hour_at_most() {
    let jwt = |t: u64| {
        errors(&format!(
            r#"{{"identity":{{"jwt":{{"cache_ttl_s":{t}}}}},"routes":[]}}"#
        ))
    };
    let session = |t: u64| {
        errors(&format!(
            r#"{{"identity":{{"session":{{"cluster":"s","cache_ttl_s":{t}}}}},"routes":[]}}"#
        ))
    };
    for t in [0, 3_600] {
        assert!(jwt(t).is_empty(), "{:?}", jwt(t));
        assert!(session(t).is_empty(), "{:?}", session(t));
    }
    one_error_at(&jwt(3_601), "$.identity.jwt.cache_ttl_s", "jwt");
    one_error_at(&session(3_601), "$.identity.session.cache_ttl_s", "session");
}

/// Which identity sources give an organisation, a token id and roles
/// (a bound per org or per token, a grant to roles or orgs needs one
/// that does), source by source: each gives what it says and nothing
/// more.
#[test]
fn each_identity_source_gives_what_it_says() {
    // (identity, gives org, token, roles)
    let sources = [
        (r#"{"session":{"cluster":"s"}}"#, [true, true, true]),
        (r#"{"jwt":{"org_claim":"org"}}"#, [true, false, false]),
        (r#"{"jwt":{"token_claim":"jti"}}"#, [false, true, false]),
        (r#"{"jwt":{"roles_claim":"roles"}}"#, [false, false, true]),
        (
            r#"{"header":{"user":"x-u","org":"x-o"}}"#,
            [true, false, false],
        ),
        (
            r#"{"header":{"user":"x-u","token":"x-t"}}"#,
            [false, true, false],
        ),
        (
            r#"{"header":{"user":"x-u","roles":"x-r"}}"#,
            [false, false, true],
        ),
        (
            r#"{"mtls":{"org_from_namespace":true}}"#,
            [true, false, false],
        ),
        (r#"{"jwt":{}}"#, [false, false, false]),
    ];
    // (bound, the error's path, needs org, token, roles)
    let bounds = [
        (r#""per":"org""#, "per", [true, false, false]),
        (r#""per":"token""#, "per", [false, true, false]),
        (
            r#""per":"user","applies_to":{"roles":["admin"]}"#,
            "applies_to.roles",
            [false, false, true],
        ),
        (
            r#""per":"user","applies_to":{"orgs":["acme"]}"#,
            "applies_to.orgs",
            [true, false, false],
        ),
    ];
    for (id, gives) in sources {
        for (bound, path, needs) in bounds {
            let e = errors(&format!(
                r#"{{"identity":{id},"routes":[{{"name":"a","bounds":[
                {{{bound},"limit":1,"window":"PT1M"}}]}}]}}"#
            ));
            let refused = needs.iter().zip(gives).any(|(n, g)| *n && !g);
            let at = format!("$.routes[0].bounds[0].{path}");
            if refused {
                one_error_at(&e, &at, &format!("{id} {bound}"));
            } else {
                assert!(e.is_empty(), "{id} {bound}: {e:?}");
            }
        }
    }
}

#[test]
fn every_error_says_its_kind() {
    let kind = |json: &str| match parse(json.as_bytes()) {
        Ok(_) => panic!("{json} parsed"),
        Err(e) => e.first().map(|e| e.kind),
    };
    assert_eq!(kind(r#"{"burst":1}"#), Some(ErrorKind::UnknownField));
    assert_eq!(kind(r#"{"routes":[{}]}"#), Some(ErrorKind::MissingField));
    assert_eq!(kind(r#"{"instance":5}"#), Some(ErrorKind::WrongType));
    assert_eq!(
        kind(r#"{"header_profile":"nope"}"#),
        Some(ErrorKind::WrongType)
    );
    assert_eq!(kind(r#"{"instance":"a b"}"#), Some(ErrorKind::Invalid));
    assert_eq!(kind("{"), Some(ErrorKind::Text));
    assert_eq!(kind("{} x"), Some(ErrorKind::Text));
    assert_eq!(kind("\u{0}"), Some(ErrorKind::Text));
}

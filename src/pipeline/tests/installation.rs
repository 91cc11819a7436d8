//! Installation bounds through the whole pipeline, natively: the account
//! read from the body, the `ShouldRateLimit` call, every answer and
//! failure of the service.
#![cfg(test)]
#![allow(clippy::indexing_slicing)]

use crate::config::plan::BoundId;
use crate::pipeline::limiter::Event;
use crate::pipeline::mock::{Filter, MockHost};
use crate::pipeline::*;
use crate::rls::proto;
use crate::stats::Stat;
use prost::Message;

const T0: u64 = 600_000;

/// A sign-in route: 3 a minute per address on this node, 5 a minute per
/// account for the installation.
fn login(on_error: &str, account: &str) -> String {
    format!(
        r#"{{"instance":"shop",
        "rate_limit_service":{{"cluster":"rls","domain":"shop","timeout_ms":80,"on_error":"{on_error}"}},
        "routes":[{{"name":"login","account":{account},"bounds":[
          {{"name":"per_address","per":"address","limit":3,"window":"PT1M"}},
          {{"name":"attempts","per":"account","scope":"installation","shape":"fixed","limit":5,"window":"PT1M"}}]}}]}}"#
    )
}

fn json_login() -> String {
    login("deny", r#"{"json":"username"}"#)
}

/// An answer of the service: per descriptor (code, remaining).
fn answer(statuses: &[(i32, u32)]) -> Vec<u8> {
    let over = statuses.iter().any(|(c, _)| *c == 2);
    proto::RateLimitResponse {
        overall_code: if over { 2 } else { 1 },
        statuses: statuses
            .iter()
            .map(|&(code, remaining)| proto::DescriptorStatus {
                code,
                current_limit: Some(proto::RateLimit {
                    requests_per_unit: 5,
                    unit: 2,
                    name: String::new(),
                }),
                limit_remaining: remaining,
                duration_until_reset: Some(proto::Duration {
                    seconds: 17,
                    nanos: 250_000_000,
                }),
            })
            .collect(),
    }
    .encode_to_vec()
}

/// A JSON sign-in from 10.0.0.1.
fn sign_in(body: &str) -> MockHost {
    sign_in_as(body, "application/json")
}

fn form_sign_in(body: &str) -> MockHost {
    sign_in_as(body, "application/x-www-form-urlencoded")
}

fn sign_in_as(body: &str, content_type: &str) -> MockHost {
    let mut host = MockHost::new(T0)
        .from_address("10.0.0.1")
        .header("content-type", content_type)
        .header(":path", "/login");
    host.request_body = Some(body.as_bytes().to_vec());
    host
}

/// The node count of the per-address bound for 10.0.0.1.
fn node_count(f: &Filter, host: &MockHost) -> Option<u32> {
    let lim = &f.limiter;
    let caller = Caller {
        address: "10.0.0.1",
        identity: None,
        model: None,
    };
    let key = lim.caller_key(crate::config::Per::Address, &caller);
    crate::count::node_lane::peek(&host.store, lim.lane(RouteId(0), BoundId(0)).unwrap(), key)
        .unwrap()
        .map(|c| c.cur)
}

/// The descriptors of the one call made: entries per descriptor.
fn sent(host: &MockHost) -> proto::RateLimitRequest {
    assert_eq!(host.service_calls.len(), 1, "{:?}", host.service_calls);
    let (cluster, timeout, message) = &host.service_calls[0];
    assert_eq!((cluster.as_str(), *timeout), ("rls", 80));
    proto::RateLimitRequest::decode(message.as_slice()).unwrap()
}

#[test]
fn an_admitted_sign_in_is_counted_by_the_service_then_by_the_node() {
    let mut host = sign_in(r#"{"username":" Alice ","password":"x"}"#);
    host.service_answer = Some((0, answer(&[(1, 4)])));
    let f = Filter::new(&host.store, &json_login()).unwrap();
    // The headers go on (Envoy delivers no body to a filter holding them),
    // the body is held until the service's answer lets it go on.
    assert_eq!(f.request(&mut host), (Step::Continue, Some(Step::Continue)));
    let req = sent(&host);
    assert_eq!(req.domain, "shop");
    let d = &req.descriptors[0];
    assert_eq!(d.entries[0].key, "bound");
    assert_eq!(d.entries[0].value, "login.attempts");
    assert_eq!(d.entries[1].key, "account");
    assert!(
        d.entries[1].value.starts_with('v'),
        "hashed: {:?}",
        d.entries[1]
    );
    assert!(!d.entries[1].value.contains("alice"));
    assert_eq!(
        d.limit.as_ref().map(|l| (l.requests_per_unit, l.unit)),
        Some((5, 2))
    );
    assert_eq!(d.hits_addend.as_ref().map(|h| h.value), Some(1));
    assert!(host.replies.is_empty());
    assert_eq!(node_count(&f, &host), Some(1), "committed after the OK");
    // Success headers show the tightest: the service's 4 left.
    let remaining: u32 = host
        .response_header("ratelimit-remaining")
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(remaining, 2, "node bound: 3 - 1 = 2 < service's 4");
}

/// Issue 36: with `hold_sign_in_headers` (and Envoy's
/// allow_on_headers_stop_iteration), the headers wait for the account too:
/// a refused sign-in opens no upstream request, an admitted one goes on
/// whole once the service answered.
#[test]
fn held_headers_go_on_only_with_an_admitted_sign_in() {
    let held = json_login().replacen('{', r#"{"hold_sign_in_headers":true,"#, 1);
    let mut host = sign_in(r#"{"username":"alice","password":"x"}"#);
    host.service_answer = Some((0, answer(&[(1, 4)])));
    let f = Filter::new(&host.store, &held).unwrap();
    assert_eq!(f.request(&mut host), (Step::Pause, Some(Step::Continue)));
    assert!(host.replies.is_empty());
    // Unreadable: refused while the headers are still held.
    let mut host = sign_in(r#"{"username":"victim\u0001","password":"x"}"#);
    assert_eq!(f.request(&mut host), (Step::Pause, Some(Step::Pause)));
    assert_eq!(host.replies[0].status, 400);
    assert!(host.replies[0].body.contains("control_character"));
    assert!(host.service_calls.is_empty());
    // Refused by the service: the headers never went on.
    let mut host = sign_in(r#"{"username":"alice","password":"x"}"#);
    host.service_answer = Some((0, answer(&[(2, 0)])));
    assert_eq!(f.request(&mut host), (Step::Pause, Some(Step::Pause)));
    assert_eq!(host.replies[0].status, 429);
    // The default keeps sending the headers on.
    let g = Filter::new(&host.store, &json_login()).unwrap();
    let mut host = sign_in(r#"{"username":"alice","password":"x"}"#);
    host.service_answer = Some((0, answer(&[(1, 4)])));
    assert_eq!(g.request(&mut host).0, Step::Continue);
}

#[test]
fn the_same_account_however_spelled_is_one_key() {
    let mut keys = Vec::new();
    for body in [
        r#"{"username":"alice"}"#,
        r#"{"username":"ALICE "}"#,
        r#"{"password":"p","username":"Alice"}"#,
    ] {
        let mut host = sign_in(body);
        host.service_answer = Some((0, answer(&[(1, 4)])));
        let f = Filter::new(&host.store, &json_login()).unwrap();
        f.request(&mut host);
        keys.push(sent(&host).descriptors[0].entries[1].value.clone());
    }
    assert!(keys.windows(2).all(|w| w[0] == w[1]), "{keys:?}");
}

#[test]
fn an_over_limit_answer_is_a_429_with_the_services_figures_and_no_node_count() {
    let mut host = sign_in(r#"{"username":"alice"}"#);
    host.service_answer = Some((0, answer(&[(2, 0)])));
    let f = Filter::new(&host.store, &json_login()).unwrap();
    assert_eq!(f.request(&mut host), (Step::Continue, Some(Step::Pause)));
    let r = &host.replies[0];
    assert_eq!(r.status, 429);
    assert_eq!(r.header("ratelimit-limit"), Some("5"));
    assert_eq!(r.header("ratelimit-remaining"), Some("0"));
    // 17.25 s until the window ends: 18, Retry-After equal to Reset.
    assert_eq!(r.header("ratelimit-reset"), Some("18"));
    assert_eq!(r.header("retry-after"), Some("18"));
    assert!(
        r.body.contains(r#""route":"login","bound":"attempts""#),
        "{}",
        r.body
    );
    assert_eq!(
        node_count(&f, &host),
        None,
        "refused: no node bound counts it"
    );
    let refused: Vec<_> = host
        .events
        .iter()
        .filter(|(_, e)| e.event == Event::Refused)
        .collect();
    assert_eq!(refused.len(), 1);
    assert_eq!(refused[0].1.bound.0, 1, "the bound as written");
}

#[test]
fn a_node_refusal_never_reaches_the_service() {
    let mut host = sign_in(r#"{"username":"alice"}"#);
    host.service_answer = Some((0, answer(&[(1, 4)])));
    let f = Filter::new(&host.store, &json_login()).unwrap();
    for _ in 0..3 {
        f.request(&mut host);
    }
    host.clear();
    assert_eq!(f.request(&mut host), (Step::Pause, None));
    assert_eq!(host.replies[0].status, 429);
    assert!(host.replies[0].body.contains(r#""bound":"per_address""#));
    assert!(host.service_calls.is_empty());
    assert_eq!(host.body_reads_total(), 0, "the body is not even read");
}

#[test]
fn a_failed_call_with_deny_is_a_503_that_counts_nothing() {
    for (status, body) in [(14, None), (4, None), (0, Some(b"\x08".to_vec()))] {
        let mut host = sign_in(r#"{"username":"alice"}"#);
        host.service_answer = Some((status, body.unwrap_or_default()));
        let f = Filter::new(&host.store, &json_login()).unwrap();
        assert_eq!(f.request(&mut host), (Step::Continue, Some(Step::Pause)));
        let r = &host.replies[0];
        assert_eq!(r.status, 503, "status {status}");
        assert_eq!(r.header("retry-after"), Some("1"));
        assert!(r.body.contains("could not be checked"), "{}", r.body);
        assert!(host
            .events
            .iter()
            .any(|(_, e)| e.event == Event::ServiceError));
        assert_eq!(node_count(&f, &host), None);
        assert!(host
            .logs
            .iter()
            .any(|(l, m)| *l == Level::Warn && m.contains("rate-limit service")));
    }
}

#[test]
fn a_failed_call_with_allow_admits_and_counts_the_node() {
    let mut host = sign_in(r#"{"username":"alice"}"#);
    host.service_answer = Some((14, vec![]));
    let f = Filter::new(&host.store, &login("allow", r#"{"json":"username"}"#)).unwrap();
    assert_eq!(f.request(&mut host), (Step::Continue, Some(Step::Continue)));
    assert!(host.replies.is_empty());
    assert_eq!(node_count(&f, &host), Some(1));
    assert!(host
        .events
        .iter()
        .any(|(_, e)| e.event == Event::ServiceError));
}

#[test]
fn a_call_the_host_cannot_dispatch_is_a_failed_call() {
    let mut host = sign_in(r#"{"username":"alice"}"#);
    host.service_dispatch_error = Some("BadArgument".into());
    let f = Filter::new(&host.store, &json_login()).unwrap();
    let (first, last) = f.request(&mut host);
    assert_eq!((first, last), (Step::Continue, Some(Step::Pause)));
    assert_eq!(host.replies[0].status, 503);
}

/// The one reply of a request refused before the service: its status and
/// `reason`, with no call made and no bound counting it.
fn refused_unread(f: &Filter, host: &mut MockHost) -> (u16, String) {
    f.request(host);
    assert!(host.service_calls.is_empty(), "{:?}", host.service_calls);
    assert_eq!(node_count(f, host), None, "counted by no node bound");
    assert_eq!(host.counted(Stat::AccountsUnreadable), 1);
    let r = &host.replies[0];
    assert_eq!(r.header("content-type"), Some("application/problem+json"));
    let doc: serde_json::Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(doc["status"], r.status);
    assert_eq!(doc["route"], "login");
    assert!(
        r.details.starts_with("ratebound.unreadable_account:login/"),
        "{}",
        r.details
    );
    (r.status, doc["reason"].as_str().unwrap().to_string())
}

#[test]
fn a_sign_in_whose_account_cannot_be_read_is_refused_and_never_counted_elsewhere() {
    for (body, want) in [
        (r#"{"user":"alice"}"#, "missing"),
        ("not json", "malformed"),
        (r#"{"username":7}"#, "not_a_string"),
        (r#"{"username":"   "}"#, "missing"),
        ("", "malformed"),
        ("\u{feff}{\"username\":\"alice\"}", "not_utf8"),
        (r#"{"username":"decoy","USERNAME":"alice"}"#, "ambiguous"),
    ] {
        let mut host = sign_in(body);
        host.service_answer = Some((0, answer(&[(1, 4)])));
        let f = Filter::new(&host.store, &json_login()).unwrap();
        assert_eq!(
            refused_unread(&f, &mut host),
            (400, want.to_string()),
            "{body:?}"
        );
    }
}

#[test]
fn a_body_over_the_cap_is_a_413_and_not_read() {
    let cfg = login("deny", r#"{"json":"username","max_body_bytes":64}"#);
    let mut host = sign_in(&format!(
        r#"{{"username":"alice","pad":"{}"}}"#,
        " ".repeat(100)
    ));
    let f = Filter::new(&host.store, &cfg).unwrap();
    assert_eq!(refused_unread(&f, &mut host), (413, "too_large".into()));
    assert_eq!(host.body_reads_total(), 0);
    assert!(
        host.replies[0].body.contains("64 bytes"),
        "{}",
        host.replies[0].body
    );
}

#[test]
fn a_body_not_in_the_carriers_form_is_a_415_before_any_of_it_is_waited_for() {
    for (content_type, encoding) in [
        ("application/x-www-form-urlencoded", None),
        ("multipart/form-data; boundary=b", None),
        ("text/plain", None),
        ("application/json; charset=utf-16", None),
        ("application/json", Some("gzip")),
    ] {
        let mut host = sign_in_as(r#"{"username":"alice"}"#, content_type);
        if let Some(e) = encoding {
            host.request_headers
                .insert("content-encoding".into(), e.into());
        }
        let f = Filter::new(&host.store, &json_login()).unwrap();
        let w = f.worker();
        let mut ex = Exchange::default();
        // Refused on the headers: the body is never held nor read.
        assert_eq!(
            w.on_request(&mut host, &mut ex, false),
            Step::Pause,
            "{content_type}"
        );
        assert_eq!(host.replies[0].status, 415, "{content_type} {encoding:?}");
        assert_eq!(host.body_reads_total(), 0);
        assert!(host.service_calls.is_empty());
    }
    // No content type at all.
    let mut host = sign_in(r#"{"username":"alice"}"#);
    host.request_headers.remove("content-type");
    let f = Filter::new(&host.store, &json_login()).unwrap();
    assert_eq!(refused_unread(&f, &mut host), (415, "content_type".into()));
}

#[test]
fn decoys_in_the_query_string_or_a_repeated_header_are_refused() {
    let mut host = form_sign_in("username=decoy&password=x");
    host.request_headers
        .insert(":path".into(), "/login?username=alice".into());
    let f = Filter::new(&host.store, &login("deny", r#"{"form":"username"}"#)).unwrap();
    assert_eq!(refused_unread(&f, &mut host), (400, "ambiguous".into()));

    let mut host = MockHost::new(T0)
        .from_address("10.0.0.9")
        .header("x-login", "decoy");
    host.repeated_headers
        .push(("x-login".into(), "alice".into()));
    let f = Filter::new(&host.store, &login("deny", r#"{"header":"x-login"}"#)).unwrap();
    assert_eq!(refused_unread(&f, &mut host), (400, "ambiguous".into()));

    // The same account twice too: Django reads `alice,alice`, Express
    // `alice, alice` (the account oracle, issue 36).
    let mut host = MockHost::new(T0)
        .from_address("10.0.0.9")
        .header("x-login", "alice");
    host.repeated_headers
        .push(("x-login".into(), "alice".into()));
    assert_eq!(refused_unread(&f, &mut host), (400, "ambiguous".into()));
    assert!(host.service_calls.is_empty());
    // No header: no account, refused (no per-address fallback).
    let mut host = MockHost::new(T0).from_address("10.0.0.9");
    assert_eq!(refused_unread(&f, &mut host), (400, "missing".into()));
}

#[test]
fn a_body_naming_two_accounts_is_a_400() {
    let mut host = form_sign_in("username=alice&username=bob");
    let f = Filter::new(&host.store, &login("deny", r#"{"form":"username"}"#)).unwrap();
    assert_eq!(f.request(&mut host), (Step::Continue, Some(Step::Pause)));
    assert_eq!(host.replies[0].status, 400);
    assert!(host.service_calls.is_empty());
    assert_eq!(node_count(&f, &host), None);
}

#[test]
fn a_form_and_a_header_source() {
    let mut host = form_sign_in("password=x&username=Alice");
    host.service_answer = Some((0, answer(&[(1, 4)])));
    let f = Filter::new(&host.store, &login("deny", r#"{"form":"username"}"#)).unwrap();
    f.request(&mut host);
    let form_key = sent(&host).descriptors[0].entries[1].value.clone();

    let mut host = MockHost::new(T0)
        .from_address("10.0.0.9")
        .header("x-login", "alice");
    host.service_answer = Some((0, answer(&[(1, 4)])));
    let f = Filter::new(&host.store, &login("deny", r#"{"header":"x-login"}"#)).unwrap();
    // A header source needs no body: the call goes out from the headers.
    assert_eq!(f.request(&mut host), (Step::Pause, Some(Step::Continue)));
    assert_eq!(sent(&host).descriptors[0].entries[1].value, form_key);
}

#[test]
fn the_body_is_held_while_the_request_waits() {
    let host = sign_in(r#"{"username":"alice"}"#);
    let f = Filter::new(&host.store, &json_login()).unwrap();
    let mut host = host;
    let w = f.worker();
    let mut ex = Exchange::default();
    assert_eq!(w.on_request(&mut host, &mut ex, false), Step::Continue);
    assert!(matches!(ex.waits_for(), Some(WaitFor::Body)));
    // A first piece: still waiting for the end of the body.
    assert_eq!(w.on_request_body(&mut host, &mut ex, 5, false), Step::Pause);
    assert!(host.service_calls.is_empty());
    assert_eq!(w.on_request_body(&mut host, &mut ex, 20, true), Step::Pause);
    assert!(matches!(ex.waits_for(), Some(WaitFor::Service)));
    // Trailers while the call is out are held too.
    assert_eq!(w.on_request_trailers(&mut host, &mut ex), Step::Pause);
    host.service_answer = Some((0, answer(&[(1, 4)])));
    let size = host.service_answer_size();
    assert_eq!(
        w.on_service_answer(&mut host, &mut ex, 0, size),
        Step::Continue
    );
}

/// Envoy's own answer (a direct response) before the body: the body never
/// comes to the filter, so nothing waits for it (else the answer would hang).
#[test]
fn envoys_own_answer_before_the_body_is_not_held() {
    let mut host = sign_in(r#"{"username":"alice"}"#);
    let f = Filter::new(&host.store, &json_login()).unwrap();
    let w = f.worker();
    let mut ex = Exchange::default();
    assert_eq!(w.on_request(&mut host, &mut ex, false), Step::Continue);
    assert_eq!(w.on_response(&mut host, &mut ex), Step::Continue);
    assert!(ex.waits_for().is_none());
    assert!(host.service_calls.is_empty());
}

#[test]
fn an_upstream_answer_before_the_decision_waits_for_it() {
    for (answer_code, held_status) in [(1, None), (2, Some(429))] {
        let mut host = sign_in(r#"{"username":"alice"}"#);
        let f = Filter::new(&host.store, &json_login()).unwrap();
        let w = f.worker();
        let mut ex = Exchange::default();
        assert_eq!(w.on_request(&mut host, &mut ex, false), Step::Continue);
        // The upstream answers from the headers alone, before the body.
        host.properties
            .insert("upstream.address".into(), b"10.9.9.9:80".to_vec());
        assert_eq!(w.on_response(&mut host, &mut ex), Step::Pause);
        assert_eq!(w.on_request_body(&mut host, &mut ex, 20, true), Step::Pause);
        host.service_answer = Some((0, answer(&[(answer_code, 4)])));
        let size = host.service_answer_size();
        w.on_service_answer(&mut host, &mut ex, 0, size);
        match held_status {
            None => {
                assert_eq!(host.responses_resumed, 1);
                assert!(host.response_header("ratelimit-limit").is_some());
            }
            Some(status) => {
                assert_eq!(host.responses_resumed, 0, "refused: never let go");
                assert_eq!(host.replies[0].status, status);
            }
        }
    }
}

#[test]
fn routes_without_installation_bounds_never_call_or_read_the_body() {
    let cfg = r#"{"rate_limit_service":{"cluster":"rls","domain":"shop"},
      "routes":[
        {"name":"login","match":{"path_prefix":"/login"},"account":{"json":"username"},"bounds":[
          {"name":"attempts","per":"account","scope":"installation","shape":"fixed","limit":5,"window":"PT1M"}]},
        {"name":"api","bounds":[{"name":"addr","per":"address","limit":9,"window":"PT1M"}]}]}"#;
    let mut host = sign_in(r#"{"username":"alice"}"#).header(":path", "/api/x");
    let f = Filter::new(&host.store, cfg).unwrap();
    assert_eq!(f.request(&mut host), (Step::Continue, None));
    assert!(host.service_calls.is_empty());
    assert_eq!(host.body_reads_total(), 0);
}

#[test]
fn a_shadow_installation_bound_over_its_limit_only_says_so() {
    let cfg = r#"{"rate_limit_service":{"cluster":"rls","domain":"shop"},
      "routes":[{"name":"login","account":{"json":"username"},"bounds":[
          {"name":"attempts","per":"account","scope":"installation","shape":"fixed","limit":5,"window":"PT1M","shadow":true}]}]}"#;
    let mut host = sign_in(r#"{"username":"alice"}"#);
    host.service_answer = Some((0, answer(&[(2, 0)])));
    let f = Filter::new(&host.store, cfg).unwrap();
    assert_eq!(f.request(&mut host), (Step::Continue, Some(Step::Continue)));
    assert!(host.replies.is_empty());
    assert!(host
        .events
        .iter()
        .any(|(_, e)| e.event == Event::WouldRefuse));
}

#[test]
fn a_grpc_sign_in_refused_by_the_service_is_refused_in_grpc() {
    // gRPC bodies are not read: a gRPC sign-in names its account in a header.
    let mut host = MockHost::new(T0)
        .from_address("10.0.0.1")
        .header("content-type", "application/grpc")
        .header("x-login", "alice");
    let f = Filter::new(&host.store, &login("deny", r#"{"header":"x-login"}"#)).unwrap();
    let w = f.worker();
    let mut ex = Exchange::default();
    assert_eq!(w.on_request(&mut host, &mut ex, false), Step::Pause);
    host.service_answer = Some((0, answer(&[(2, 0)])));
    let size = host.service_answer_size();
    w.on_service_answer(&mut host, &mut ex, 0, size);
    let r = &host.replies[0];
    assert_eq!((r.status, r.grpc_status), (429, Some(8)));
    assert_eq!(r.details, "ratebound.refused:login/attempts");

    // A gRPC body on a JSON sign-in route: not the carrier's content type.
    let mut host = sign_in_as("\0\0\0\0\x05hello", "application/grpc");
    let f = Filter::new(&host.store, &json_login()).unwrap();
    f.request(&mut host);
    let r = &host.replies[0];
    assert_eq!((r.status, r.grpc_status), (415, Some(14)));
}

#[test]
fn a_worker_whose_memory_is_stale_still_never_calls_for_a_node_refusal() {
    // Two workers over one store, 2 a minute per address on the node.
    let cfg = login("deny", r#"{"json":"username"}"#).replace(r#""limit":3"#, r#""limit":2"#);
    let mut host = sign_in(r#"{"username":"alice"}"#);
    host.service_answer = Some((0, answer(&[(1, 4)])));
    let a = Filter::new(&host.store, &cfg).unwrap();
    let b = Filter::new(&host.store, &cfg).unwrap();
    a.request(&mut host);
    b.request(&mut host);
    assert_eq!(node_count(&a, &host), Some(2));
    // Worker a remembers its own write (1): only the store says 2.
    host.clear();
    let steps = a.request(&mut host);
    assert_eq!(host.replies[0].status, 429, "{steps:?}");
    assert!(host.replies[0].body.contains(r#""bound":"per_address""#));
    assert!(
        host.service_calls.is_empty(),
        "refused by the node: no call"
    );
}

/// An answer for one descriptor: `code`, `remaining`, `reset_s` seconds to
/// the window's end, and the limit the service applied (`None`: none).
fn answer_with(code: i32, remaining: u32, reset_s: i64, limit: Option<u32>) -> Vec<u8> {
    answer_for(&[(code, remaining)], reset_s, limit)
}

/// An answer: per descriptor (code, remaining), each with `limit` a minute
/// and `reset_s` to the window's end (`None`: no limit applied).
fn answer_for(statuses: &[(i32, u32)], reset_s: i64, limit: Option<u32>) -> Vec<u8> {
    proto::RateLimitResponse {
        overall_code: if statuses.iter().any(|(c, _)| *c == 2) {
            2
        } else {
            1
        },
        statuses: statuses
            .iter()
            .map(|&(code, remaining)| proto::DescriptorStatus {
                code,
                current_limit: limit.map(|l| proto::RateLimit {
                    requests_per_unit: l,
                    unit: 2,
                    name: String::new(),
                }),
                limit_remaining: remaining,
                duration_until_reset: limit.map(|_| proto::Duration {
                    seconds: reset_s,
                    nanos: 0,
                }),
            })
            .collect(),
    }
    .encode_to_vec()
}

/// One JSON sign-in for `account` at `now` on `host` (its store kept from
/// the last one); the service answers `answer` if it is asked.
fn attempt<'h>(
    f: &Filter,
    host: &'h mut MockHost,
    now: u64,
    account: &str,
    answer: &[u8],
) -> &'h MockHost {
    host.clear();
    host.now = now;
    host.request_body = Some(format!(r#"{{"username":"{account}"}}"#).into_bytes());
    host.service_answer = Some((0, answer.to_vec()));
    f.request(host);
    host
}

#[test]
fn a_locked_account_is_refused_without_a_call_until_its_window_ends() {
    let mut host = sign_in("");
    let f = Filter::new(&host.store, &json_login()).unwrap();
    // The service says alice is over: 18 s to the window's end.
    let over = answer_with(2, 0, 18, Some(5));
    let h = attempt(&f, &mut host, T0 + 1_000, "alice", &over);
    assert_eq!((h.service_calls.len(), h.replies[0].status), (1, 429));
    // Locked: refused on this node without a call, with the wait left.
    let h = attempt(&f, &mut host, T0 + 5_000, "ALICE", &over);
    assert!(h.service_calls.is_empty(), "no call for a locked account");
    let r = &h.replies[0];
    assert_eq!(r.status, 429);
    assert_eq!(r.header("retry-after"), Some("14"));
    assert_eq!(r.header("ratelimit-remaining"), Some("0"));
    assert!(r.body.contains(r#""bound":"attempts""#), "{}", r.body);
    assert_eq!(h.counted(Stat::RlsCallsSaved), 1);
    assert!(h
        .events
        .iter()
        .any(|(_, e)| e.event == Event::Refused && e.bound.0 == 1));
    assert!(!h.events.iter().any(|(_, e)| e.event == Event::ServiceCall));
    assert_eq!(node_count(&f, h), None, "not counted by the node either");
    // Another account is asked about.
    let ok = answer_with(1, 4, 18, Some(5));
    assert_eq!(
        attempt(&f, &mut host, T0 + 5_000, "bob", &ok)
            .service_calls
            .len(),
        1
    );
    // The horizon the service gave: asked again from then on.
    assert_eq!(
        attempt(&f, &mut host, T0 + 18_999, "alice", &over)
            .service_calls
            .len(),
        0
    );
    assert_eq!(
        attempt(&f, &mut host, T0 + 19_000, "alice", &ok)
            .service_calls
            .len(),
        1
    );
}

#[test]
fn the_attempt_that_takes_the_last_one_locks_until_the_clock_window_ends() {
    let mut host = sign_in("");
    let f = Filter::new(&host.store, &json_login()).unwrap();
    // 5 s before the minute ends, the service (whole seconds, rounded up)
    // says 30: the clock window's end is the sharper horizon.
    let last = answer_with(1, 0, 30, Some(5));
    let h = attempt(&f, &mut host, T0 + 55_000, "carol", &last);
    assert!(h.replies.is_empty(), "the last one is admitted");
    let h = attempt(&f, &mut host, T0 + 59_999, "carol", &last);
    assert_eq!((h.service_calls.len(), h.replies[0].status), (0, 429));
    assert_eq!(h.replies[0].header("retry-after"), Some("1"));
    let h = attempt(
        &f,
        &mut host,
        T0 + 60_000,
        "carol",
        &answer_with(1, 4, 60, Some(5)),
    );
    assert_eq!(h.service_calls.len(), 1, "a new window is asked about");
}

#[test]
fn a_shadow_bound_or_another_limit_never_uses_a_lock() {
    let mut host = sign_in("");
    let over = answer_with(2, 0, 30, Some(5));
    let shadow = json_login().replace(
        r#""limit":5,"window":"PT1M""#,
        r#""limit":5,"window":"PT1M","shadow":true"#,
    );
    let f = Filter::new(&host.store, &shadow).unwrap();
    attempt(&f, &mut host, T0, "dave", &over);
    assert_eq!(
        attempt(&f, &mut host, T0 + 1, "dave", &over)
            .service_calls
            .len(),
        1
    );
    // The bound edited from 5 to 6 a minute inherits no lock of the old one.
    let f = Filter::new(&host.store, &json_login()).unwrap();
    attempt(&f, &mut host, T0, "erin", &over);
    let six = json_login().replace(r#""limit":5"#, r#""limit":6"#);
    let f6 = Filter::new(&host.store, &six).unwrap();
    assert_eq!(
        attempt(&f6, &mut host, T0 + 1, "erin", &over)
            .service_calls
            .len(),
        1
    );
    assert_eq!(
        attempt(&f, &mut host, T0 + 1, "erin", &over)
            .service_calls
            .len(),
        0
    );
}

#[test]
fn a_service_that_applies_no_limit_fails_closed_and_says_so_once_in_a_while() {
    let mut host = sign_in("");
    let f = Filter::new(&host.store, &json_login()).unwrap();
    // OK without a limit: the service's configuration lacks the domain.
    let unknown = answer_with(1, 0, 0, None);
    let mut logged = Vec::new();
    for dt in [0, 1_000, 9_999, 10_000] {
        let h = attempt(&f, &mut host, T0 + dt, "frank", &unknown);
        assert_eq!(
            h.replies[0].status, 503,
            "deny: not checked, so not admitted"
        );
        assert_eq!(h.counted(Stat::RlsNoLimit), 1);
        assert!(h.events.iter().any(|(_, e)| e.event == Event::ServiceError));
        logged.push(
            h.logs
                .iter()
                .find(|(_, m)| m.contains("applied no limit"))
                .map(|(_, m)| m.clone()),
        );
    }
    assert!(
        logged[0].as_ref().is_some_and(|m| m.contains("rls-config")),
        "{logged:?}"
    );
    assert_eq!(
        (logged[1].as_ref(), logged[2].as_ref()),
        (None, None),
        "at most one a 10 s"
    );
    assert!(
        logged[3].as_ref().is_some_and(|m| m.contains("2 more")),
        "{logged:?}"
    );
}

#[test]
fn keys_sent_to_the_service_take_the_installation_secret() {
    let key = |cfg: &str| {
        let mut host = sign_in(r#"{"username":"alice"}"#);
        host.service_answer = Some((0, answer(&[(1, 4)])));
        let f = Filter::new(&host.store, cfg).unwrap();
        f.request(&mut host);
        sent(&host).descriptors[0].entries[1].value.clone()
    };
    let with = |secret: &str| {
        json_login().replace(
            r#""on_error":"deny"}"#,
            &format!(r#""on_error":"deny","key_secret":{{"value":"{secret}"}}}}"#),
        )
    };
    let none = key(&json_login());
    let a = key(&with("0123456789abcdef"));
    assert_ne!(a, none, "the domain alone no longer makes the key");
    assert_eq!(a, key(&with("0123456789abcdef")), "every Envoy alike");
    assert_ne!(a, key(&with("0123456789abcdeF")));
}

#[test]
fn a_lock_on_any_of_the_requests_bounds_refuses_without_a_call() {
    // Two installation bounds: per account, and per address.
    let cfg = json_login().replace(
        r#"{"name":"attempts","per":"account","scope":"installation","shape":"fixed","limit":5,"window":"PT1M"}"#,
        r#"{"name":"attempts","per":"account","scope":"installation","shape":"fixed","limit":5,"window":"PT1M"},
           {"name":"from","per":"address","scope":"installation","shape":"fixed","limit":9,"window":"PT1M"}"#,
    );
    let mut host = sign_in("");
    let f = Filter::new(&host.store, &cfg).unwrap();
    // The address is at its limit (the account is not).
    let both = |second: (i32, u32)| answer_for(&[(1, 3), second], 30, Some(9));
    let h = attempt(&f, &mut host, T0, "gina", &both((1, 0)));
    assert_eq!(h.service_calls.len(), 1);
    assert!(
        h.replies.is_empty(),
        "admitted: it took the address's last one"
    );
    // Another account from the same address: the address is locked.
    let h = attempt(&f, &mut host, T0 + 1_000, "hugo", &both((1, 5)));
    assert!(
        h.service_calls.is_empty(),
        "the second bound's lock refuses"
    );
    assert_eq!(h.replies[0].status, 429);
    assert!(
        h.replies[0].body.contains(r#""bound":"from""#),
        "{}",
        h.replies[0].body
    );
}

/// An LLM route counted by the service in tokens: 1,000 a minute per
/// address, 100 reserved at admission.
const TOKENS: &str = r#"{"instance":"llm",
    "rate_limit_service":{"cluster":"rls","domain":"llm","timeout_ms":80},
    "routes":[{"name":"chat","bounds":[
      {"name":"tokens","per":"address","scope":"installation","shape":"fixed","limit":1000,"window":"PT1M",
       "cost":{"response_json":"/usage/total_tokens","reserve":100,"unit":"tokens"}}]}]}"#;

/// One chat request from 10.0.0.1 whose answer used `tokens`.
fn chat(f: &Filter, tokens: u32) -> MockHost {
    let mut host = MockHost::new(T0).from_address("10.0.0.1");
    host.service_answer = Some((0, answer(&[(1, 600)])));
    host.upstream_headers
        .insert("content-type".into(), "application/json".into());
    host.upstream_body = vec![format!(r#"{{"usage":{{"total_tokens":{tokens}}}}}"#).into_bytes()];
    f.request(&mut host);
    host
}

#[test]
fn an_installation_cost_is_reserved_in_the_call_and_the_rest_owed_to_the_service() {
    let host = MockHost::new(T0);
    let f = Filter::new(&host.store, TOKENS).unwrap();
    let host = chat(&f, 400);
    let req = sent(&host);
    let admitted = &req.descriptors[0];
    assert_eq!(admitted.hits_addend.as_ref().map(|h| h.value), Some(100));
    assert_eq!(
        host.response_header("ratelimit-remaining"),
        Some("600"),
        "the service's figures, in tokens"
    );
    // 400 used: 300 more are owed, under the admission's descriptor and limit.
    let batch = f.memories.owed().borrow_mut().take_batch();
    let plan = &f.limiter.plan;
    let call = crate::pipeline::owed::charge_call(plan, &batch, T0).unwrap();
    let owed = proto::RateLimitRequest::decode(call.message.as_slice()).unwrap();
    assert_eq!(owed.domain, "llm");
    assert_eq!(owed.descriptors.len(), 1);
    let d = &owed.descriptors[0];
    assert_eq!(d.entries, admitted.entries);
    assert_eq!(d.limit, admitted.limit);
    assert_eq!(d.hits_addend.as_ref().map(|h| h.value), Some(300));

    // Less than reserved: nothing owed (the service keeps the 100).
    chat(&f, 60);
    assert!(f.memories.owed().borrow().is_empty());
    // No usage: the reservation stands, and is counted.
    let mut host = chat(&f, 0);
    host.upstream_body = vec![b"{}".to_vec()];
    f.request(&mut host);
    assert!(f.memories.owed().borrow().is_empty());
    assert_eq!(host.counted(Stat::CostsUnknown), 1);
}

#[test]
fn a_refused_installation_cost_owes_nothing() {
    let host = MockHost::new(T0);
    let f = Filter::new(&host.store, TOKENS).unwrap();
    let mut host = MockHost::new(T0).from_address("10.0.0.1");
    host.service_answer = Some((0, answer(&[(2, 0)])));
    host.upstream_body = vec![br#"{"usage":{"total_tokens":900}}"#.to_vec()];
    assert_eq!(f.request(&mut host).1, Some(Step::Pause));
    assert_eq!(host.replies.len(), 1);
    assert!(f.memories.owed().borrow().is_empty());
}

/// An operation's installation bound is asked of the service for a
/// request to that operation, and for no other request of the route.
#[test]
fn an_operations_installation_bound_is_asked_for_its_operation_only() {
    let json = r#"{"instance":"shop",
        "rate_limit_service":{"cluster":"rls","domain":"shop","timeout_ms":80},
        "routes":[{"name":"api","bounds":[],
          "operations":[{"operation_id":"pay","method":"POST","path":"/pay/{id}",
            "bounds":[{"name":"payments","per":"address","scope":"installation","shape":"fixed",
                       "limit":5,"window":"PT1M"}]}]}]}"#;
    let mut host = MockHost::new(T0)
        .from_address("10.0.0.1")
        .header(":path", "/pay/7")
        .header(":method", "POST");
    host.service_answer = Some((0, answer(&[(1, 4)])));
    let f = Filter::new(&host.store, json).unwrap();
    f.request(&mut host);
    let req = sent(&host);
    assert_eq!(req.descriptors.len(), 1);
    let named = &req.descriptors[0].entries[0].value;
    assert!(named.ends_with("payments"), "{named}");
    assert!(host.replies.is_empty());
    // Another request of the route: nothing to ask.
    host.service_calls.clear();
    host.request_headers
        .insert(":path".into(), "/orders".into());
    assert_eq!(f.request(&mut host), (Step::Continue, None));
    assert!(host.service_calls.is_empty());
}

/// A sign-in body of exactly `len` bytes (padded with spaces).
fn body_of(len: usize) -> String {
    let body = format!(r#"{{"username":"alice","pad":"{}"}}"#, " ".repeat(len - 29));
    assert_eq!(body.len(), len);
    body
}

#[test]
fn a_body_of_exactly_the_cap_is_read_and_one_byte_more_is_not() {
    let cfg = login("deny", r#"{"json":"username","max_body_bytes":64}"#);
    let mut host = sign_in(&body_of(64));
    host.service_answer = Some((0, answer(&[(1, 4)])));
    let f = Filter::new(&host.store, &cfg).unwrap();
    f.request(&mut host);
    assert!(host.replies.is_empty(), "{:?}", host.replies);
    assert_eq!(sent(&host).descriptors.len(), 1);
    let mut host = sign_in(&body_of(65));
    assert_eq!(refused_unread(&f, &mut host), (413, "too_large".into()));
}

/// The body is read when it ends, or as soon as more than the cap has
/// come (refused then, not when the rest has come too); up to the cap,
/// nothing of it is read while more may come.
#[test]
fn a_body_is_read_once_it_ends_or_passes_the_cap_never_before() {
    let cfg = login("deny", r#"{"json":"username","max_body_bytes":64}"#);
    let mut host = sign_in(&body_of(100));
    let f = Filter::new(&host.store, &cfg).unwrap();
    let w = f.worker();
    let mut ex = Exchange::default();
    assert_eq!(w.on_request(&mut host, &mut ex, false), Step::Continue);
    assert_eq!(
        w.on_request_body(&mut host, &mut ex, 64, false),
        Step::Pause
    );
    assert!(host.replies.is_empty(), "{:?}", host.replies);
    assert_eq!(host.body_reads_total(), 0);
    assert_eq!(
        w.on_request_body(&mut host, &mut ex, 65, false),
        Step::Pause
    );
    assert_eq!(host.replies.len(), 1);
    assert_eq!(host.replies[0].status, 413);
    assert_eq!(host.body_reads_total(), 0);
    assert!(host.service_calls.is_empty());
}

/// A request that ends with its headers has no body to wait for: it is
/// decided there (no account in it: refused), not held for ever.
#[test]
fn a_sign_in_without_a_body_is_decided_at_its_headers() {
    let mut host = sign_in("");
    host.request_body = None;
    let f = Filter::new(&host.store, &json_login()).unwrap();
    let mut ex = Exchange::default();
    assert_eq!(f.worker().on_request(&mut host, &mut ex, true), Step::Pause);
    assert_eq!(host.replies.len(), 1);
    assert_eq!(host.replies[0].status, 400);
    assert!(host.service_calls.is_empty());
}

#[test]
fn a_lock_whose_refusal_is_spared_still_asks_the_service() {
    let cfg = json_login().replace(
        r#""limit":5,"window":"PT1M""#,
        r#""limit":5,"window":"PT1M","enforce_percent":0"#,
    );
    let mut host = sign_in("");
    let f = Filter::new(&host.store, &cfg).unwrap();
    let over = answer_with(2, 0, 18, Some(5));
    let h = attempt(&f, &mut host, T0 + 1_000, "alice", &over);
    assert!(h.replies.is_empty(), "spared: {:?}", h.replies);
    // Locked for the service's 18 s, but spared: the service still counts it.
    let h = attempt(&f, &mut host, T0 + 2_000, "alice", &over);
    assert_eq!(h.service_calls.len(), 1);
    assert!(h.replies.is_empty(), "spared: {:?}", h.replies);
    assert!(h.events.iter().any(|(_, e)| e.event == Event::WouldRefuse));
}

/// The login route with three installation bounds: per account (5 a
/// minute), per address (9) and a burst per address (4). Bound ids: the
/// node's per_address 0, then 1, 2, 3.
fn three_service_bounds() -> String {
    json_login()
        .replacen('{', r#"{"structured_headers":true,"#, 1)
        .replace(
            r#"{"name":"attempts","per":"account","scope":"installation","shape":"fixed","limit":5,"window":"PT1M"}"#,
            r#"{"name":"attempts","per":"account","scope":"installation","shape":"fixed","limit":5,"window":"PT1M"},
               {"name":"from","per":"address","scope":"installation","shape":"fixed","limit":9,"window":"PT1M"},
               {"name":"burst","per":"address","scope":"installation","shape":"fixed","limit":4,"window":"PT1M"}"#,
        )
}

/// An admitted response shows the bound with the least left: of the
/// service's, the first of equals; against the node's (2 left of 3 after
/// this request), the node's when they are equal.
#[test]
fn the_tightest_of_the_services_bounds_is_shown_the_first_of_equals() {
    let f_host = sign_in("");
    let f = Filter::new(&f_host.store, &three_service_bounds()).unwrap();
    let shown = |statuses: &[(i32, u32)], who: &str| {
        let mut host = sign_in("");
        let h = attempt(&f, &mut host, T0, who, &answer_for(statuses, 30, Some(9)));
        assert!(h.replies.is_empty(), "{:?}", h.replies);
        (
            h.response_header("ratelimit-policy").map(str::to_string),
            h.response_header("ratelimit-remaining").map(str::to_string),
        )
    };
    let policy = |p: &str, left: &str| (Some(p.to_string()), Some(left.to_string()));
    assert_eq!(
        shown(&[(1, 3), (1, 1), (1, 1)], "a"),
        policy(r#""from";q=9;w=60"#, "1")
    );
    assert_eq!(
        shown(&[(1, 1), (1, 3), (1, 0)], "b"),
        policy(r#""burst";q=4;w=60"#, "0")
    );
    assert_eq!(
        shown(&[(1, 2), (1, 5), (1, 3)], "c"),
        policy(r#""per_address";q=3;w=60"#, "2")
    );
}

/// A request one service bound refuses is recorded as that refusal only:
/// the other bounds' counts are the service's, and no node bound counted it.
#[test]
fn a_refusal_by_one_service_bound_records_only_that_refusal() {
    let mut host = sign_in("");
    let f = Filter::new(&host.store, &three_service_bounds()).unwrap();
    let h = attempt(
        &f,
        &mut host,
        T0,
        "ivan",
        &answer_for(&[(1, 3), (2, 0), (1, 1)], 30, Some(9)),
    );
    assert_eq!(h.replies[0].status, 429);
    let events: Vec<(usize, Event)> = h
        .events
        .iter()
        .filter(|(_, e)| e.event != Event::ServiceCall)
        .map(|(_, e)| (e.bound.0, e.event))
        .collect();
    assert_eq!(events, [(2, Event::Refused)]);
}

/// Sign-ins counted by the service alone: 5 a minute per account, hashed
/// with the secret `key`, reading the count under `also` beside it.
fn rotating(key: &str, also: Option<&str>) -> String {
    rotating_shaped(key, also, "fixed")
}

/// [`rotating`], the bound of `shape`.
pub(super) fn rotating_shaped(key: &str, also: Option<&str>, shape: &str) -> String {
    let also = also.map_or(String::new(), |a| {
        format!(r#","also_read":{{"value":"{a}"}}"#)
    });
    format!(
        r#"{{"instance":"shop",
        "rate_limit_service":{{"cluster":"rls","domain":"shop","timeout_ms":80,"on_error":"deny",
          "key_secret":{{"value":"{key}"{also}}}}},
        "routes":[{{"name":"login","account":{{"json":"username"}},"bounds":[
          {{"name":"attempts","per":"account","scope":"installation","shape":"{shape}","limit":5,"window":"PT1M"}}]}}]}}"#
    )
}

const OLD: &str = "old-secret-0123456789";
const NEW: &str = "new-secret-0123456789";

/// Envoys with these configurations, one counting service between them,
/// taking turns at 20 sign-ins for one account: how many were admitted.
fn admitted_in_turns(configs: &[String]) -> u32 {
    use std::{cell::RefCell, rc::Rc};
    let service = Rc::new(RefCell::new(
        crate::pipeline::mock::CountingService::default(),
    ));
    let mut envoys: Vec<(Filter, MockHost)> = configs
        .iter()
        .map(|c| {
            let mut host = sign_in(r#"{"username":"alice"}"#);
            host.counting_service = Some(service.clone());
            (Filter::new(&host.store, c).unwrap(), host)
        })
        .collect();
    let mut admitted = 0;
    for i in 0..20u64 {
        let n = envoys.len();
        let (f, host) = &mut envoys[usize::try_from(i).unwrap() % n];
        host.clear();
        host.now = T0 + i * 100;
        f.request(host);
        admitted += u32::from(host.replies.is_empty());
    }
    admitted
}

#[test]
fn a_rolling_key_rotation_keeps_one_count_per_account() {
    for shape in ["fixed", "sliding"] {
        let at = |key, also| rotating_shaped(key, also, shape);
        // One secret: 5.
        assert_eq!(admitted_in_turns(&[at(OLD, None), at(OLD, None)]), 5);
        // Swapped in one push, old and new Envoys side by side count one
        // account under two keys: twice the limit.
        assert_eq!(admitted_in_turns(&[at(OLD, None), at(NEW, None)]), 10);
        // The rotation: first every Envoy reads the next secret's counts
        // too (an Envoy not yet there counts the same way: nothing is
        // under it)...
        assert_eq!(admitted_in_turns(&[at(OLD, None), at(OLD, Some(NEW))]), 5);
        // ...then each switches to the new secret, reading the old one's...
        assert_eq!(
            admitted_in_turns(&[at(OLD, Some(NEW)), at(NEW, Some(OLD))]),
            5,
            "{shape}"
        );
        // ...and, once the old counts' windows have passed, drops it.
        assert_eq!(admitted_in_turns(&[at(NEW, Some(OLD)), at(NEW, None)]), 5);
    }
}

#[test]
fn a_rotation_reads_without_counting_in_the_same_call() {
    let mut host = sign_in(r#"{"username":"alice"}"#);
    host.counting_service = Some(Default::default());
    let f = Filter::new(&host.store, &rotating(NEW, Some(OLD))).unwrap();
    f.request(&mut host);
    assert!(host.replies.is_empty());
    assert_eq!(host.service_calls.len(), 1, "one call");
    let call = sent(&host);
    let d: Vec<(String, u64)> = call
        .descriptors
        .iter()
        .map(|d| {
            (
                d.entries[1].value.clone(),
                d.hits_addend.as_ref().unwrap().value,
            )
        })
        .collect();
    assert_eq!(d.len(), 2);
    assert_eq!(
        (d[0].1, d[1].1),
        (1, 0),
        "counted under the new key, read under the old"
    );
    assert_ne!(d[0].0, d[1].0);
    // The old key is what an Envoy with only the old secret counts under.
    let mut old_host = sign_in(r#"{"username":"alice"}"#);
    old_host.counting_service = Some(Default::default());
    let old = Filter::new(&old_host.store, &rotating(OLD, None)).unwrap();
    old.request(&mut old_host);
    assert_eq!(sent(&old_host).descriptors[0].entries[1].value, d[1].0);
}

#[test]
fn the_remaining_shown_is_what_is_left_of_both_counts() {
    let service = std::rc::Rc::new(std::cell::RefCell::new(
        crate::pipeline::mock::CountingService::default(),
    ));
    let mut old_host = sign_in(r#"{"username":"alice"}"#);
    old_host.counting_service = Some(service.clone());
    let old = Filter::new(&old_host.store, &rotating(OLD, Some(NEW))).unwrap();
    for _ in 0..3 {
        old_host.clear();
        old.request(&mut old_host);
    }
    let mut new_host = sign_in(r#"{"username":"alice"}"#);
    new_host.counting_service = Some(service);
    let new = Filter::new(&new_host.store, &rotating(NEW, Some(OLD))).unwrap();
    new.request(&mut new_host);
    assert!(new_host.replies.is_empty(), "the 4th of 5");
    new_host.clear();
    new.request(&mut new_host);
    assert!(new_host.replies.is_empty(), "the 5th");
    new_host.clear();
    new.request(&mut new_host);
    assert_eq!(
        new_host.replies[0].status, 429,
        "the 6th, 3 of them under the old key"
    );
    assert!(new_host.replies[0]
        .headers
        .iter()
        .any(|(k, v)| k == "ratelimit-remaining" && v == "0"));
}

#[test]
fn a_header_account_and_its_other_spellings_take_one_read_of_the_headers() {
    let f_of = |host: &MockHost| {
        Filter::new(&host.store, &login("deny", r#"{"header":"x-login"}"#)).unwrap()
    };
    // `x_login` is the account `x-login` carries to a CGI-style server:
    // another account under it is a decoy, read in the same read.
    let mut host = MockHost::new(T0)
        .from_address("10.0.0.9")
        .header("x-login", "alice")
        .header("x_login", "bob");
    let f = f_of(&host);
    assert_eq!(refused_unread(&f, &mut host), (400, "ambiguous".into()));
    assert!(host.service_calls.is_empty());

    let mut host = MockHost::new(T0)
        .from_address("10.0.0.9")
        .header("x-login", "alice");
    host.service_answer = Some((0, answer(&[(1, 4)])));
    let f = f_of(&host);
    f.request(&mut host);
    assert_eq!(host.service_calls.len(), 1);
    // The account's one read, and the content type's (a gRPC caller?).
    assert_eq!(host.header_reads.get(), 2);
}

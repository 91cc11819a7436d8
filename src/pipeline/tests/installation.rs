//! Installation bounds through the whole pipeline, natively: the account
//! read from the body, the `ShouldRateLimit` call, every answer and
//! failure of the service.
#![cfg(test)]
#![allow(clippy::indexing_slicing)]

use crate::count::limiter::Event;
use crate::count::slots;
use crate::pipeline::mock::{Filter, MockHost};
use crate::pipeline::*;
use crate::rls::proto;
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
          {{"name":"attempts","per":"account","scope":"installation","limit":5,"window":"PT1M"}}]}}]}}"#
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

fn sign_in(body: &str) -> MockHost {
    let mut host = MockHost::new(T0).from_address("10.0.0.1");
    host.request_body = Some(body.as_bytes().to_vec());
    host
}

/// The node count of the per-address bound for 10.0.0.1.
fn node_count(f: &Filter, host: &MockHost) -> Option<u32> {
    let lim = &f.limiter;
    let caller = Caller {
        address: "10.0.0.1",
        identity: None,
    };
    let key = lim.caller_key(crate::config::Per::Address, &caller);
    slots::peek(&host.store, &lim.lanes[0][0], key)
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
    assert_eq!(refused[0].1.bound, 1, "stat index: after the node bound");
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

#[test]
fn a_body_without_the_account_is_counted_per_address_under_its_own_key() {
    let mut keys = Vec::new();
    for body in [r#"{"user":"alice"}"#, "not json", r#"{"username":7}"#, ""] {
        let mut host = sign_in(body);
        host.service_answer = Some((0, answer(&[(1, 4)])));
        let f = Filter::new(&host.store, &json_login()).unwrap();
        f.request(&mut host);
        let d = &sent(&host).descriptors[0];
        assert_eq!(d.entries[1].key, "account");
        keys.push(d.entries[1].value.clone());
    }
    assert!(
        keys.iter().all(|k| k.starts_with('n') && *k == keys[0]),
        "{keys:?}"
    );
}

#[test]
fn a_body_over_the_cap_is_not_read_and_is_counted_per_address() {
    let cfg = login("deny", r#"{"json":"username","max_body_bytes":64}"#);
    let mut host = sign_in(&format!(
        r#"{{"username":"alice","pad":"{}"}}"#,
        "x".repeat(100)
    ));
    host.service_answer = Some((0, answer(&[(1, 4)])));
    let f = Filter::new(&host.store, &cfg).unwrap();
    f.request(&mut host);
    assert!(sent(&host).descriptors[0].entries[1].value.starts_with('n'));
    assert_eq!(host.body_reads_total(), 0);
}

#[test]
fn a_body_naming_two_accounts_is_a_400() {
    let mut host = sign_in("username=alice&username=bob");
    let f = Filter::new(&host.store, &login("deny", r#"{"form":"username"}"#)).unwrap();
    assert_eq!(f.request(&mut host), (Step::Continue, Some(Step::Pause)));
    assert_eq!(host.replies[0].status, 400);
    assert!(host.service_calls.is_empty());
    assert_eq!(node_count(&f, &host), None);
}

#[test]
fn a_form_and_a_header_source() {
    let mut host = sign_in("password=x&username=Alice");
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
    assert_eq!(ex.waits_for(), Some(Waits::Body));
    // A first piece: still waiting for the end of the body.
    assert_eq!(w.on_request_body(&mut host, &mut ex, 5, false), Step::Pause);
    assert!(host.service_calls.is_empty());
    assert_eq!(w.on_request_body(&mut host, &mut ex, 20, true), Step::Pause);
    assert_eq!(ex.waits_for(), Some(Waits::Service));
    // Trailers while the call is out are held too.
    assert_eq!(w.on_request_trailers(&mut host, &mut ex), Step::Pause);
    host.service_answer = Some((0, answer(&[(1, 4)])));
    let size = host.service_answer.as_ref().unwrap().1.len();
    assert_eq!(
        w.on_service_answer(&mut host, &mut ex, 0, size),
        Step::Continue
    );
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
        assert_eq!(w.on_response(&mut host, &mut ex), Step::Pause);
        assert_eq!(w.on_request_body(&mut host, &mut ex, 20, true), Step::Pause);
        host.service_answer = Some((0, answer(&[(answer_code, 4)])));
        let size = host.service_answer.as_ref().unwrap().1.len();
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
          {"name":"attempts","per":"account","scope":"installation","limit":5,"window":"PT1M"}]},
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
          {"name":"attempts","per":"account","scope":"installation","limit":5,"window":"PT1M","shadow":true}]}]}"#;
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
    let mut host = sign_in(r#"{"username":"alice"}"#).header("content-type", "application/grpc");
    let f = Filter::new(&host.store, &json_login()).unwrap();
    let w = f.worker();
    let mut ex = Exchange::default();
    assert_eq!(w.on_request(&mut host, &mut ex, false), Step::Continue);
    // The headers went on: the host has them no more.
    host.request_headers.clear();
    w.on_request_body(&mut host, &mut ex, 20, true);
    host.service_answer = Some((0, answer(&[(2, 0)])));
    let size = host.service_answer.as_ref().unwrap().1.len();
    w.on_service_answer(&mut host, &mut ex, 0, size);
    let r = &host.replies[0];
    assert_eq!((r.status, r.grpc_status), (429, Some(8)));
    assert_eq!(r.details, "ratebound.refused:login/attempts");
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

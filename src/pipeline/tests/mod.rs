//! Every path of a request, natively: the pipeline over a recording host
//! (compiled only under #[cfg(test)], see mod.rs).
#![cfg(test)]
#![allow(clippy::indexing_slicing)]

// Installation bounds through the whole pipeline (test code only, like
// this module: said where it is declared too); fleet bounds, which need
// the node's sync, are tested in node/fleet_tests.rs.
#[cfg(test)]
mod installation;
// Sliding installation bounds against a counting service.
#[cfg(test)]
mod sliding;
// Host calls per request of the bench's variants, held to budgets.
#[cfg(test)]
mod host_calls;
// Which bound's figures an admitted response shows.
#[cfg(test)]
mod shown;

mod caller_choices;
mod request_body;

use super::mock::{Filter, MockHost};
use super::*;
use crate::config::plan::BoundId;
use crate::config::Per;
use crate::identity::Identity;
use crate::stats::Stat;

use crate::pipeline::limiter::Event;

const T0: u64 = 600_000;

fn filter(host: &MockHost, json: &str) -> Filter {
    Filter::new(&host.store, json).unwrap()
}

/// The count bound `b` of route 0 holds for `caller`.
fn count(f: &Filter, host: &MockHost, b: usize, caller: &Caller) -> Option<u32> {
    let lim = &f.limiter;
    let key = lim.caller_key(lim.plan.routes[0].bounds[b].per, caller);
    crate::count::node_lane::peek(&host.store, lim.lane(RouteId(0), BoundId(b)).unwrap(), key)
        .unwrap()
        .map(|c| c.cur)
}

fn anon(address: &str) -> Caller<'_> {
    Caller {
        address,
        identity: None,
        model: None,
    }
}

const PER_ADDRESS: &str = r#"{"routes":[{"name":"api","bounds":[
    {"name":"addr","per":"address","limit":2,"window":"PT1M"}]}]}"#;

#[test]
fn an_early_refusal_is_a_429_with_the_bounds_figures() {
    let mut host = MockHost::new(T0).from_address("10.0.0.1");
    let f = filter(&host, PER_ADDRESS);
    for _ in 0..2 {
        assert_eq!(f.request(&mut host), (Step::Continue, None));
    }
    assert!(host.replies.is_empty());
    host.clear();
    host.now = T0 + 1_500;
    assert_eq!(f.request(&mut host), (Step::Pause, None));
    let reply = &host.replies[0];
    assert_eq!(reply.status, 429);
    assert_eq!(reply.header("ratelimit-limit"), Some("2"));
    assert_eq!(reply.header("ratelimit-remaining"), Some("0"));
    let retry: u64 = reply.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=120).contains(&retry), "{retry}");
    assert_eq!(reply.header("ratelimit-reset"), Some(&*retry.to_string()));
    assert_eq!(
        reply.header("content-type"),
        Some("application/problem+json")
    );
    assert!(reply.body.contains(r#""route":"api","bound":"addr""#));
    // Counted as refused; the local reply gets no success headers.
    assert_eq!(host.events.len(), 1);
    assert_eq!(host.events[0].1.event, Event::Refused);
    assert!(host.response_headers.is_empty());
    // Another address is another caller.
    let mut other = MockHost {
        store: std::mem::take(&mut host.store),
        ..MockHost::new(T0 + 1_500).from_address("10.0.0.2")
    };
    assert_eq!(f.request(&mut other), (Step::Continue, None));
}

#[test]
fn an_admitted_response_shows_the_tightest_bound() {
    let json = r#"{"structured_headers":true,"routes":[{"name":"api","bounds":[
        {"name":"wide","per":"route","limit":100,"window":"PT1M"},
        {"name":"narrow","per":"address","limit":5,"window":"PT10S"}]}]}"#;
    let mut host = MockHost::new(T0).from_address("10.0.0.1");
    let f = filter(&host, json);
    assert_eq!(f.request(&mut host), (Step::Continue, None));
    assert_eq!(host.response_header("ratelimit-limit"), Some("5"));
    assert_eq!(host.response_header("ratelimit-remaining"), Some("4"));
    assert_eq!(host.response_header("ratelimit-reset"), Some("10"));
    assert_eq!(
        host.response_header("ratelimit-policy"),
        Some(r#""narrow";q=5;w=10"#)
    );
    assert_eq!(
        host.response_header("ratelimit"),
        Some(r#""narrow";r=4;t=10"#)
    );
    // Both bounds counted it.
    let allowed = host
        .events
        .iter()
        .filter(|(_, e)| e.event == Event::Allowed)
        .count();
    assert_eq!(allowed, 2);
}

#[test]
fn success_headers_off_adds_nothing() {
    let json = r#"{"success_headers":false,"routes":[{"name":"api","bounds":[
        {"per":"address","limit":5,"window":"PT10S"}]}]}"#;
    let mut host = MockHost::new(T0).from_address("10.0.0.1");
    let f = filter(&host, json);
    assert_eq!(f.request(&mut host), (Step::Continue, None));
    assert!(host.response_headers.is_empty());
}

#[test]
fn a_request_no_route_matches_reads_only_what_matching_needs() {
    let json = r#"{"routes":[{"name":"api","match":{"path_prefix":"/api/"},"bounds":[
        {"per":"address","limit":1,"window":"PT1M"}]}]}"#;
    let mut host = MockHost::new(T0)
        .from_address("10.0.0.1")
        .header(":path", "/static/x");
    let f = filter(&host, json);
    let writes = host.store.writes();
    for _ in 0..3 {
        assert_eq!(f.request(&mut host), (Step::Continue, None));
    }
    // The path, three times: never the address, never the store.
    assert_eq!(host.reads.get(), 3);
    assert!(host.events.is_empty() && host.replies.is_empty());
    assert_eq!(host.store.writes(), writes);
}

#[test]
fn an_admitted_request_reads_the_address_once_and_writes_once() {
    let mut host = MockHost::new(T0).from_address("10.0.0.1");
    let f = filter(&host, PER_ADDRESS);
    f.request(&mut host);
    host.clear();
    let writes = host.store.writes();
    host.now += 1;
    assert_eq!(f.request(&mut host), (Step::Continue, None));
    assert_eq!(host.reads.get(), 1);
    assert_eq!(host.store.writes(), writes + 1);
}

const USERS: &str = r#"{"identity":{"header":{"user":"x-user"}},
    "routes":[{"name":"api","bounds":[
      {"name":"addr","per":"address","limit":10,"window":"PT1M"},
      {"name":"user","per":"user","limit":1,"window":"PT1M"}]}]}"#;

#[test]
fn an_identity_refusal_names_the_identity_bound_and_leaves_the_earlier_untouched() {
    let mut host = MockHost::new(T0)
        .from_address("10.0.0.1")
        .header("x-user", "alice");
    let f = filter(&host, USERS);
    assert_eq!(f.request(&mut host), (Step::Continue, None));
    host.clear();
    host.now += 1;
    assert_eq!(f.request(&mut host), (Step::Pause, None));
    let reply = &host.replies[0];
    assert_eq!(reply.status, 429);
    assert!(reply.body.contains(r#""bound":"user""#));
    // The address bound admitted it, yet counts only the admitted request.
    assert_eq!(count(&f, &host, 0, &anon("10.0.0.1")), Some(1));
    assert_eq!(host.events.len(), 1);
    assert_eq!(host.events[0].1.bound.0, 1);
    // Bob, at the same address, has his own budget.
    host.request_headers.insert("x-user".into(), "bob".into());
    host.clear();
    assert_eq!(f.request(&mut host), (Step::Continue, None));
    assert_eq!(count(&f, &host, 0, &anon("10.0.0.1")), Some(2));
}

fn session(on_error: &str, limit: u32) -> String {
    format!(
        r#"{{"identity":{{"session":{{"cluster":"sessions","path":"/whoami","cookie":"sid",
            "authorization":false,"timeout_ms":250,"on_error":"{on_error}"}}}},
            "routes":[{{"name":"api","bounds":[
              {{"name":"addr","per":"address","limit":100,"window":"PT1M"}},
              {{"name":"user","per":"user","limit":{limit},"window":"PT1M"}}]}}]}}"#
    )
}

fn signed_in(now: u64) -> MockHost {
    MockHost::new(now)
        .from_address("10.0.0.1")
        .header("cookie", "theme=dark; sid=s3cret")
}

#[test]
fn the_session_service_is_asked_with_the_cookie_and_its_user_is_counted() {
    let mut host = signed_in(T0);
    host.session_status = Some("200".into());
    host.session_body = Some(br#"{"user":"alice"}"#.to_vec());
    let f = filter(&host, &session("anonymous", 1));
    assert_eq!(f.request(&mut host), (Step::Pause, Some(Step::Continue)));
    let call = &host.dispatched[0];
    assert_eq!(call.cluster, "sessions");
    assert_eq!(call.timeout_ms, 250);
    assert!(call
        .headers
        .contains(&("cookie".to_string(), "sid=s3cret".to_string())));
    assert!(call
        .headers
        .contains(&(":path".to_string(), "/whoami".to_string())));
    assert_eq!(host.counted(Stat::SessionCalls), 1);
    let alice = Identity {
        user: Some("alice".into()),
        ..Identity::default()
    };
    let as_alice = Caller {
        address: "10.0.0.1",
        identity: Some(&alice),
        model: None,
    };
    assert_eq!(count(&f, &host, 1, &as_alice), Some(1));
    // Remembered: the next request asks nobody, and alice is refused.
    host.clear();
    assert_eq!(f.request(&mut host), (Step::Pause, None));
    assert!(host.dispatched.is_empty());
    assert_eq!(host.counted(Stat::SessionCacheHits), 1);
    assert_eq!(host.replies[0].status, 429);
}

/// A request that waited for its session answer is decided by its own
/// route's bounds, not the first route's.
#[test]
fn a_request_resumed_after_its_session_call_is_counted_by_its_own_route() {
    let json = r#"{"identity":{"session":{"cluster":"sessions","path":"/whoami","cookie":"sid",
            "authorization":false,"timeout_ms":250,"on_error":"anonymous"}},
        "routes":[
          {"name":"static","match":{"path_prefix":"/static/"},"bounds":[
            {"name":"files","per":"address","limit":100,"window":"PT1M"}]},
          {"name":"api","bounds":[
            {"name":"addr","per":"address","limit":100,"window":"PT1M"},
            {"name":"user","per":"user","limit":1,"window":"PT1M"}]}]}"#;
    let mut host = signed_in(T0).header(":path", "/api/x");
    host.session_status = Some("200".into());
    host.session_body = Some(br#"{"user":"alice"}"#.to_vec());
    let f = filter(&host, json);
    assert_eq!(f.request(&mut host), (Step::Pause, Some(Step::Continue)));
    assert!(host.replies.is_empty());
    // Counted by "api": alice's one request is spent.
    host.clear();
    host.now += 1;
    assert_eq!(f.request(&mut host), (Step::Pause, None));
    assert_eq!(host.replies[0].status, 429);
    assert!(host.replies[0]
        .body
        .contains(r#""route":"api","bound":"user""#));
}

#[test]
fn a_session_answer_of_401_403_or_404_is_an_anonymous_caller() {
    for status in ["401", "403", "404"] {
        let mut host = signed_in(T0);
        host.session_status = Some(status.into());
        let f = filter(&host, &session("deny", 1));
        assert_eq!(
            f.request(&mut host),
            (Step::Pause, Some(Step::Continue)),
            "{status}"
        );
        assert_eq!(host.counted(Stat::IdentityErrors), 0, "{status}");
        assert!(host.replies.is_empty());
        // Counted per address under the user bound, as anyone anonymous.
        assert_eq!(count(&f, &host, 1, &anon("10.0.0.1")), Some(1), "{status}");
    }
}

#[test]
fn a_failed_session_resolve_with_on_error_anonymous_goes_on() {
    let mut host = signed_in(T0);
    host.session_status = Some("500".into());
    let f = filter(&host, &session("anonymous", 5));
    assert_eq!(f.request(&mut host), (Step::Pause, Some(Step::Continue)));
    assert_eq!(host.counted(Stat::IdentityErrors), 1);
    assert!(host
        .logs
        .iter()
        .any(|(l, m)| *l == Level::Warn && m.contains("session service answered 500")));
    assert!(host.replies.is_empty());
    assert_eq!(count(&f, &host, 1, &anon("10.0.0.1")), Some(1));
    // Not remembered: the next request asks again.
    host.clear();
    f.request(&mut host);
    assert_eq!(host.dispatched.len(), 1);
}

#[test]
fn a_failed_session_resolve_with_deny_is_a_503_that_counts_nothing() {
    let mut host = signed_in(T0);
    host.session_status = Some("502".into());
    let f = filter(&host, &session("deny", 5));
    assert_eq!(f.request(&mut host), (Step::Pause, Some(Step::Pause)));
    assert_eq!(host.counted(Stat::IdentityErrors), 1);
    let reply = &host.replies[0];
    assert_eq!(reply.status, 503);
    assert_eq!(reply.body, "identity could not be resolved\n");
    assert!(host.response_headers.is_empty());
    // Neither bound counted it.
    assert_eq!(count(&f, &host, 0, &anon("10.0.0.1")), None);
    assert_eq!(count(&f, &host, 1, &anon("10.0.0.1")), None);
}

#[test]
fn a_session_call_the_host_cannot_dispatch_is_a_failed_resolve() {
    for (on_error, step, status) in [
        ("deny", Step::Pause, Some(503)),
        ("anonymous", Step::Continue, None),
    ] {
        let mut host = signed_in(T0);
        host.dispatch_error = Some("BadArgument".into());
        let f = filter(&host, &session(on_error, 5));
        assert_eq!(f.request(&mut host), (step, None), "{on_error}");
        assert_eq!(host.counted(Stat::IdentityErrors), 1);
        assert!(host
            .logs
            .iter()
            .any(|(_, m)| m.contains("not dispatched: BadArgument")));
        assert_eq!(host.replies.first().map(|r| r.status), status, "{on_error}");
    }
}

#[test]
fn without_a_credential_nobody_is_asked() {
    let mut host = MockHost::new(T0).from_address("10.0.0.1");
    let f = filter(&host, &session("deny", 1));
    assert_eq!(f.request(&mut host), (Step::Continue, None));
    assert!(host.dispatched.is_empty());
    assert_eq!(f.request(&mut host), (Step::Pause, None));
    assert_eq!(host.replies[0].status, 429);
}

#[test]
fn an_early_refusal_asks_the_session_service_nothing() {
    let json = r#"{"identity":{"session":{"cluster":"s","cookie":"sid"}},
        "routes":[{"name":"api","bounds":[
          {"name":"addr","per":"address","limit":1,"window":"PT1M"},
          {"name":"user","per":"user","limit":10,"window":"PT1M"}]}]}"#;
    let mut host = signed_in(T0);
    host.session_status = Some("404".into());
    let f = filter(&host, json);
    f.request(&mut host);
    host.clear();
    assert_eq!(f.request(&mut host), (Step::Pause, None));
    assert!(host.dispatched.is_empty());
    assert!(host.replies[0].body.contains(r#""bound":"addr""#));
}

#[test]
fn a_late_refusal_after_the_call_out_leaves_the_earlier_bounds_untouched() {
    let mut host = signed_in(T0);
    host.session_status = Some("200".into());
    host.session_body = Some(br#"{"user":"alice"}"#.to_vec());
    let f = filter(&host, &session("anonymous", 1));
    f.request(&mut host);
    // Forget the answer: the next request asks again, and is refused
    // after the call-out.
    *f.memories.sessions().borrow_mut() = crate::identity::cache::IdentityCache::new(1, 0);
    host.clear();
    assert_eq!(f.request(&mut host), (Step::Pause, Some(Step::Pause)));
    assert_eq!(host.dispatched.len(), 1);
    assert_eq!(host.replies[0].status, 429);
    assert!(host.replies[0].body.contains(r#""bound":"user""#));
    assert_eq!(count(&f, &host, 0, &anon("10.0.0.1")), Some(1));
}

#[test]
fn a_shadow_bound_never_refuses_and_says_it_would_have() {
    let json = r#"{"routes":[{"name":"api","bounds":[
        {"name":"dry","per":"address","limit":1,"window":"PT1M","shadow":true}]}]}"#;
    let mut host = MockHost::new(T0).from_address("10.0.0.1");
    let f = filter(&host, json);
    f.request(&mut host);
    host.clear();
    assert_eq!(f.request(&mut host), (Step::Continue, None));
    assert!(host.replies.is_empty());
    assert_eq!(host.events[0].1.event, Event::WouldRefuse);
    // Its headers show what enforcement would say.
    assert_eq!(host.response_header("ratelimit-remaining"), Some("0"));
}

#[test]
fn a_store_error_fails_open_and_is_counted() {
    let mut host = MockHost::new(T0).from_address("10.0.0.1");
    let f = filter(&host, PER_ADDRESS);
    host.store.fail_next(usize::MAX);
    for _ in 0..5 {
        assert_eq!(f.request(&mut host), (Step::Continue, None));
    }
    assert!(host.replies.is_empty());
    assert_eq!(host.counted(Stat::StoreErrors), 5);
    assert!(host
        .logs
        .iter()
        .all(|(l, m)| *l == Level::Warn && m.contains("store error, bound skipped")));
    host.store.fail_next(0);
}

#[test]
fn a_429_the_host_cannot_send_lets_the_request_through() {
    let mut host = MockHost::new(T0).from_address("10.0.0.1");
    let f = filter(&host, PER_ADDRESS);
    f.request(&mut host);
    f.request(&mut host);
    host.clear();
    host.reply_error = Some("InternalFailure".into());
    assert_eq!(f.request(&mut host), (Step::Continue, None));
    assert!(host.logs.iter().any(|(l, _)| *l == Level::Error));
    // Refused all the same: counted so, and no success headers.
    assert_eq!(host.events[0].1.event, Event::Refused);
}

#[test]
fn decide_runs_the_filters_phases() {
    // The helper the store suite and the bench use counts as the filter does.
    let mut host = MockHost::new(T0).from_address("10.0.0.1");
    let f = filter(&host, PER_ADDRESS);
    f.request(&mut host);
    let once = || {
        decide(
            &f.limiter,
            &host.store,
            RouteId(0),
            None,
            &anon("10.0.0.1"),
            T0,
        )
    };
    assert!(once().refused.is_none());
    assert_eq!(once().refused.map(|r| r.0 .0), Some(0));
    assert_eq!(count(&f, &host, 0, &anon("10.0.0.1")), Some(2));
    let _ = Per::Address;
}

#[test]
fn an_operations_bound_is_shown_by_its_whole_name() {
    let (op, bound) = ("o".repeat(64), "b".repeat(64));
    let json = format!(
        r#"{{"structured_headers":true,"routes":[{{"name":"api","bounds":[],
            "operations":[{{"operation_id":"{op}","method":"POST","path":"/pay/{{id}}",
              "bounds":[{{"name":"{bound}","per":"address","limit":3,"window":"PT1M"}}]}}]}}]}}"#
    );
    let mut host = MockHost::new(T0)
        .from_address("10.0.0.1")
        .header(":path", "/pay/7")
        .header(":method", "POST");
    let f = filter(&host, &json);
    assert_eq!(f.request(&mut host), (Step::Continue, None));
    assert_eq!(
        host.response_header("ratelimit-policy"),
        Some(&*format!("\"{op}.{bound}\";q=3;w=60"))
    );
}

#[test]
fn claims_jwt_authn_verified_name_the_user() {
    let json = r#"{"identity":{"jwt":{"metadata_key":"payload","user_claim":"sub","cache_ttl_s":0}},
        "routes":[{"name":"api","bounds":[{"name":"user","per":"user","limit":1,"window":"PT1M"}]}]}"#;
    let claim = "metadata.filter_metadata.envoy.filters.http.jwt_authn.payload.sub";
    let mut host = MockHost::new(T0).from_address("10.0.0.1");
    host.properties.insert(claim.into(), b"alice".to_vec());
    let f = filter(&host, json);
    assert_eq!(f.request(&mut host), (Step::Continue, None));
    assert_eq!(f.request(&mut host), (Step::Pause, None));
    host.properties.insert(claim.into(), b"bob".to_vec());
    assert_eq!(f.request(&mut host), (Step::Continue, None));
    let alice = Identity {
        user: Some("alice".into()),
        ..Identity::default()
    };
    let who = Caller {
        address: "10.0.0.1",
        identity: Some(&alice),
        model: None,
    };
    assert_eq!(count(&f, &host, 0, &who), Some(1));
}

#[test]
fn a_grpc_caller_is_refused_in_grpc_with_the_details_access_logs_show() {
    for (config, code) in [
        (PER_ADDRESS.to_string(), 8),
        (
            PER_ADDRESS.replacen('{', r#"{"grpc_refusal":"unavailable","#, 1),
            14,
        ),
    ] {
        let mut host = MockHost::new(T0)
            .from_address("10.0.0.1")
            .header("content-type", "application/grpc+proto");
        let f = filter(&host, &config);
        for _ in 0..3 {
            f.request(&mut host);
        }
        let r = &host.replies[0];
        assert_eq!((r.status, r.grpc_status), (429, Some(code)));
        assert_eq!(r.details, "ratebound.refused:api/addr");
        assert!(r.header("grpc-status-details-bin").is_some());
        assert!(r.header("content-type").is_none());
        assert!(r.body.starts_with("rate limit api/addr"), "{}", r.body);
    }
    // An HTTP caller: problem+json, no gRPC status, the same details.
    let mut host = MockHost::new(T0).from_address("10.0.0.1");
    let f = filter(&host, PER_ADDRESS);
    for _ in 0..3 {
        f.request(&mut host);
    }
    let r = &host.replies[0];
    assert_eq!(
        (r.grpc_status, r.details.as_str()),
        (None, "ratebound.refused:api/addr")
    );
}

#[test]
fn the_x_ratelimit_profile_marks_a_refusal_as_envoys_filters_do() {
    let mut host = MockHost::new(T0).from_address("10.0.0.1");
    let cfg = PER_ADDRESS.replacen('{', r#"{"header_profile":"x-ratelimit","#, 1);
    let f = filter(&host, &cfg);
    f.request(&mut host);
    assert_eq!(host.response_header("x-ratelimit-remaining"), Some("1"));
    assert!(host.response_header("ratelimit-remaining").is_none());
    f.request(&mut host);
    f.request(&mut host);
    let r = &host.replies[0];
    assert_eq!(r.header("x-envoy-ratelimited"), Some("true"));
    assert_eq!(r.header("x-ratelimit-limit"), Some("2"));
}

/// A bound rolled out in part: of the requests it would refuse, about
/// `enforce_percent` are refused; the rest go on uncounted, as a shadow
/// bound's would, each marked with the bound that would have refused it.
#[test]
fn a_bound_enforced_in_part_refuses_its_share_and_marks_the_rest() {
    let json = r#"{"would_refuse_header":"x-would-refuse","routes":[{"name":"api","bounds":[
        {"name":"addr","per":"address","limit":1,"window":"PT1H","enforce_percent":30}]}]}"#;
    let mut host = MockHost::new(T0).from_address("10.0.0.1");
    let f = filter(&host, json);
    assert_eq!(f.request(&mut host), (Step::Continue, None));
    assert!(
        host.filter_state.is_empty(),
        "nothing would have refused it"
    );
    host.clear();
    let (mut refused, mut spared) = (0, 0);
    for _ in 0..400 {
        host.now += 1;
        match f.request(&mut host).0 {
            Step::Pause => refused += 1,
            Step::Continue => spared += 1,
        }
    }
    assert!((80..=160).contains(&refused), "about 30% of 400: {refused}");
    let marks = |v: &[(String, String)]| v.iter().filter(|(_, m)| m == "api/addr").count();
    assert_eq!(marks(&host.filter_state), spared);
    assert!(host
        .filter_state
        .iter()
        .all(|(k, _)| k == WOULD_REFUSE_STATE));
    assert_eq!(marks(&host.request_headers_set), spared);
    assert!(host
        .request_headers_set
        .iter()
        .all(|(h, _)| h == "x-would-refuse"));
    // Spared requests are not counted: the caller holds its one admission.
    assert_eq!(count(&f, &host, 0, &anon("10.0.0.1")), Some(1));
}

/// Issue 36: a client's own copy of the mark reached the upstream on every
/// request no bound would refuse, and on paths no route matches.
#[test]
fn a_forged_mark_is_removed_on_every_request() {
    let json = r#"{"would_refuse_header":"x-would-refuse","routes":[{"name":"api",
        "match":{"path_prefix":"/api"},"bounds":[
        {"name":"addr","per":"address","limit":1,"window":"PT1H","shadow":true}]}]}"#;
    let mut host = MockHost::new(T0).from_address("10.0.0.1");
    let f = filter(&host, json);
    let forge = |host: &mut MockHost, path: &str| {
        host.clear();
        host.request_headers.insert(":path".into(), path.into());
        host.request_headers
            .insert("x-would-refuse".into(), "api/forged".into());
        host.repeated_headers
            .push(("x-would-refuse".into(), "api/forged-again".into()));
        // Rack reads `x_would_refuse` as the same header.
        host.repeated_headers
            .push(("x_would_refuse".into(), "api/forged-underscored".into()));
    };
    // No route matches: removed all the same.
    forge(&mut host, "/elsewhere");
    assert_eq!(f.request(&mut host).0, Step::Continue);
    assert_eq!(
        host.request_headers_removed,
        ["x-would-refuse", "x_would_refuse"]
    );
    assert!(!host.request_headers.contains_key("x-would-refuse"));
    assert!(host.repeated_headers.is_empty());
    // Matched, nothing would refuse it: removed, not set.
    forge(&mut host, "/api/a");
    assert_eq!(f.request(&mut host).0, Step::Continue);
    assert_eq!(
        host.request_headers_removed,
        ["x-would-refuse", "x_would_refuse"]
    );
    assert!(host.request_headers_set.is_empty());
    // The shadow bound would refuse the second: the filter's own mark only.
    forge(&mut host, "/api/a");
    assert_eq!(f.request(&mut host).0, Step::Continue);
    assert_eq!(
        host.request_headers_removed,
        ["x-would-refuse", "x_would_refuse"]
    );
    assert_eq!(
        host.request_headers_set,
        [("x-would-refuse".to_string(), "api/addr".to_string())]
    );
    // Without a configured mark, no header is touched.
    let plain = r#"{"routes":[{"name":"api","bounds":[
        {"name":"addr","per":"address","limit":5,"window":"PT1H"}]}]}"#;
    let g = filter(&host, plain);
    forge(&mut host, "/api/a");
    assert_eq!(g.request(&mut host).0, Step::Continue);
    assert!(host.request_headers_removed.is_empty());
}

#[test]
fn enforce_percent_zero_spares_every_refusal_and_one_hundred_none() {
    for (percent, refusals) in [(0, 0), (100, 9)] {
        let json = format!(
            r#"{{"routes":[{{"name":"api","bounds":[
            {{"per":"address","limit":1,"window":"PT1H","enforce_percent":{percent}}}]}}]}}"#
        );
        let mut host = MockHost::new(T0).from_address("10.0.0.1");
        let f = filter(&host, &json);
        let refused = (0..10)
            .filter(|_| {
                host.now += 1;
                f.request(&mut host).0 == Step::Pause
            })
            .count();
        assert_eq!(refused, refusals, "enforce_percent {percent}");
    }
}

/// One request meets a bound in several phases (read, then again at the
/// commit or before a service call): its draw is the same each time, and
/// requests differ.
#[test]
fn a_requests_draw_is_the_same_every_time_it_meets_a_bound() {
    let json = r#"{"routes":[{"name":"api","bounds":[
        {"per":"address","limit":1,"window":"PT1H","enforce_percent":50}]}]}"#;
    let host = MockHost::new(T0);
    let f = filter(&host, json);
    let lim = &f.limiter;
    let bound = &lim.plan.routes[0].bounds[0];
    let draws: Vec<bool> = (0..64)
        .map(|_| {
            let p = lim.start(RouteId(0), None);
            let first = lim.spared(&p, BoundId(0), bound);
            assert_eq!(first, lim.spared(&p, BoundId(0), bound));
            first
        })
        .collect();
    assert!(draws.iter().any(|d| *d) && draws.iter().any(|d| !*d));
}

/// A bound that counts tokens of an LLM API's answers: reserve at
/// admission, true up to the `usage` the answer names.
const TOKENS: &str = r#"{"routes":[{"name":"llm","bounds":[
    {"name":"tokens","per":"address","limit":1000,"window":"PT1M",
     "cost":{"response_json":"/usage/total_tokens","reserve":300,"unit":"tokens"}}]}]}"#;

fn answer(tokens: u32) -> Vec<Vec<u8>> {
    let body = format!(r#"{{"choices":[{{"text":"..."}}],"usage":{{"total_tokens":{tokens}}}}}"#);
    // In three chunks, as an upstream may send it.
    body.as_bytes().chunks(20).map(<[u8]>::to_vec).collect()
}

#[test]
fn a_token_budget_charges_what_the_answers_used_and_refuses_past_it() {
    let mut host = MockHost::new(T0).from_address("10.0.0.1");
    host.upstream_body = answer(300);
    let f = filter(&host, TOKENS);
    let steps: Vec<Step> = (0..4)
        .map(|_| {
            host.now += 1;
            f.request(&mut host).0
        })
        .collect();
    // 300 + 300 + 300 used; the fourth's reservation of 300 does not fit.
    assert_eq!(
        steps,
        [Step::Continue, Step::Continue, Step::Continue, Step::Pause]
    );
    assert_eq!(count(&f, &host, 0, &anon("10.0.0.1")), Some(900));
    // A short answer gives back what it did not use.
    let mut other = MockHost::new(T0).from_address("10.0.0.2");
    other.store = std::mem::take(&mut host.store);
    other.upstream_body = answer(20);
    assert_eq!(f.request(&mut other).0, Step::Continue);
    assert_eq!(count(&f, &other, 0, &anon("10.0.0.2")), Some(20));
    assert_eq!(other.counted(Stat::CostsUnknown), 0);
}

#[test]
fn requests_in_flight_cannot_all_pass_on_an_empty_counter() {
    let mut host = MockHost::new(T0).from_address("10.0.0.1");
    let f = filter(&host, TOKENS);
    let w = f.worker();
    // Five requests start before any answer: each takes its reservation.
    let mut open = Vec::new();
    let mut refused = 0;
    for _ in 0..5 {
        host.now += 1;
        let mut ex = Exchange::default();
        match w.on_request(&mut host, &mut ex, true) {
            Step::Continue => open.push(ex),
            Step::Pause => refused += 1,
        }
    }
    assert_eq!((open.len(), refused), (3, 2));
    assert_eq!(count(&f, &host, 0, &anon("10.0.0.1")), Some(900));
    // They end: one with 500 tokens, one with a malformed usage (it keeps
    // its reservation, and is counted), one cut before its body ended.
    let ends: [(&[u8], bool); 3] = [
        (br#"{"usage":{"total_tokens":500}}"#, true),
        (br#"{"usage":{"total_tokens":"many"}}"#, true),
        (br#"{"usage":{"total"#, false),
    ];
    for (mut ex, (body, ended)) in open.into_iter().zip(ends) {
        host.upstream_body = vec![body.to_vec()];
        host.body_chunks_read.set(0);
        w.on_response(&mut host, &mut ex);
        w.on_response_body(&mut host, &mut ex, body.len(), ended);
        w.on_done(&mut host, &mut ex);
    }
    assert_eq!(
        count(&f, &host, 0, &anon("10.0.0.1")),
        Some(500 + 300 + 300)
    );
    assert_eq!(host.counted(Stat::CostsUnknown), 2);
}

#[test]
fn a_cost_in_a_request_or_response_header_or_an_event_stream() {
    // Named up front: admitted when it fits.
    let json = r#"{"routes":[{"name":"api","bounds":[
        {"per":"address","limit":10,"window":"PT1M","cost":{"request_header":"x-cost"}}]}]}"#;
    let mut host = MockHost::new(T0)
        .from_address("10.0.0.1")
        .header("x-cost", "4");
    let f = filter(&host, json);
    let steps: Vec<Step> = (0..3).map(|_| f.request(&mut host).0).collect();
    assert_eq!(steps, [Step::Continue, Step::Continue, Step::Pause]);
    assert_eq!(count(&f, &host, 0, &anon("10.0.0.1")), Some(8));
    // No number: counted, and charged the reservation (1).
    host.request_headers.insert("x-cost".into(), "lots".into());
    assert_eq!(f.request(&mut host).0, Step::Continue);
    assert_eq!(count(&f, &host, 0, &anon("10.0.0.1")), Some(9));
    assert_eq!(host.counted(Stat::CostsUnknown), 1);

    // In the response's header.
    let json = r#"{"routes":[{"name":"api","bounds":[
        {"per":"address","limit":100,"window":"PT1M","cost":{"response_header":"x-units","reserve":5}}]}]}"#;
    let mut host = MockHost::new(T0).from_address("10.0.0.1");
    host.upstream_headers.insert("x-units".into(), "42".into());
    let f = filter(&host, json);
    f.request(&mut host);
    assert_eq!(count(&f, &host, 0, &anon("10.0.0.1")), Some(42));

    // In the last event of a stream that names it.
    let mut host = MockHost::new(T0).from_address("10.0.0.1");
    host.upstream_headers
        .insert("content-type".into(), "text/event-stream".into());
    host.upstream_body = vec![
        b"data: {\"usage\":null}\n\ndata: {\"usage\":{\"total_".to_vec(),
        b"tokens\":77}}\n\ndata: [DONE]\n\n".to_vec(),
    ];
    let f = filter(&host, TOKENS);
    f.request(&mut host);
    assert_eq!(count(&f, &host, 0, &anon("10.0.0.1")), Some(77));
}

/// gRPC services name their usage in a trailer, after the last message;
/// an answer that is all headers (trailers-only) names it in its headers.
/// No trailer, or no trailers at all: the reservation stays, counted.
#[test]
fn a_cost_in_a_response_trailer_or_a_trailers_only_answer() {
    let json = r#"{"routes":[{"name":"rpc","bounds":[
        {"per":"address","limit":1000,"window":"PT1M",
         "cost":{"response_trailer":"x-tokens","reserve":50,"unit":"tokens"}}]}]}"#;
    let base = MockHost::new(T0).from_address("10.0.0.1");
    let f = filter(&base, json);
    let mut host = base;
    host.upstream_body = vec![b"message".to_vec()];
    host.upstream_trailers = Some([("x-tokens".to_string(), "120".to_string())].into());
    f.request(&mut host);
    assert_eq!(count(&f, &host, 0, &anon("10.0.0.1")), Some(120));
    // Trailers-only: the figure comes with the headers.
    host.upstream_body.clear();
    host.upstream_trailers = None;
    host.upstream_headers.insert("x-tokens".into(), "30".into());
    f.request(&mut host);
    assert_eq!(count(&f, &host, 0, &anon("10.0.0.1")), Some(150));
    // Trailers without it, then none at all: 50 each, both counted.
    host.upstream_headers.clear();
    host.upstream_body = vec![b"message".to_vec()];
    host.upstream_trailers = Some([("grpc-status".to_string(), "0".to_string())].into());
    f.request(&mut host);
    host.upstream_trailers = None;
    f.request(&mut host);
    assert_eq!(count(&f, &host, 0, &anon("10.0.0.1")), Some(250));
    assert_eq!(host.counted(Stat::CostsUnknown), 2);
}

/// A true-up writes the caller's counts again, from the worker's memory of
/// the admission's write: neither the true-up nor the caller's next
/// admission by this worker reads (each read once when the true-up went
/// around the memory).
#[test]
fn a_true_up_is_remembered_so_the_next_admission_needs_no_read() {
    let json = r#"{"routes":[{"name":"api","bounds":[
        {"per":"address","limit":1000,"window":"PT1M","cost":{"response_header":"x-units","reserve":5}}]}]}"#;
    let mut host = MockHost::new(T0).from_address("10.0.0.1");
    host.upstream_headers.insert("x-units".into(), "42".into());
    let f = filter(&host, json);
    f.request(&mut host);
    f.limiter.take_memory_counts();
    for _ in 0..3 {
        f.request(&mut host);
    }
    assert_eq!(
        f.limiter.take_memory_counts(),
        (6, 0),
        "two reads saved a request"
    );
    assert_eq!(count(&f, &host, 0, &anon("10.0.0.1")), Some(4 * 42));
}

/// A caller asking for a compressed answer would be charged only its
/// reservations (the filter reads compressed bytes): a route that reads a
/// cost in the body asks the upstream for a plain answer; others leave
/// the caller's choice alone.
#[test]
fn a_route_reading_its_cost_in_the_body_asks_for_a_plain_answer() {
    let mut host = MockHost::new(T0)
        .from_address("10.0.0.1")
        .header("accept-encoding", "gzip, br");
    let f = filter(&host, TOKENS);
    f.request(&mut host);
    assert_eq!(
        host.request_headers_set,
        [("accept-encoding".to_string(), "identity".to_string())]
    );
    let mut host = MockHost::new(T0)
        .from_address("10.0.0.1")
        .header("accept-encoding", "gzip");
    let f = filter(&host, PER_ADDRESS);
    f.request(&mut host);
    assert!(host.request_headers_set.is_empty());
}

#[test]
fn a_route_without_costs_reads_no_response_body() {
    let mut host = MockHost::new(T0).from_address("10.0.0.1");
    host.upstream_body = answer(300);
    let f = filter(&host, PER_ADDRESS);
    f.request(&mut host);
    assert_eq!(host.body_chunks_read.get(), 0);
}

/// A cost named in a request header is taken by every bound that counts
/// it: the route's and the matched operation's, not only one of them.
#[test]
fn a_cost_named_up_front_is_taken_by_the_route_and_its_operations_bounds() {
    let json = r#"{"routes":[{"name":"api","bounds":[
        {"name":"all","per":"address","limit":100,"window":"PT1M","cost":{"request_header":"x-cost"}}],
        "operations":[{"operation_id":"pay","method":"POST","path":"/pay/{id}",
          "bounds":[{"name":"pay","per":"address","limit":100,"window":"PT1M","cost":{"request_header":"x-cost"}}]}]}]}"#;
    let mut host = MockHost::new(T0)
        .from_address("10.0.0.1")
        .header(":path", "/pay/7")
        .header(":method", "POST")
        .header("x-cost", "7");
    let f = filter(&host, json);
    assert_eq!(f.request(&mut host).0, Step::Continue);
    let who = anon("10.0.0.1");
    assert_eq!(
        (count(&f, &host, 0, &who), count(&f, &host, 1, &who)),
        (Some(7), Some(7))
    );
    assert_eq!(host.counted(Stat::CostsUnknown), 0);
}

/// An admitted request on a cost bound shows the bound's unit; a chunk of
/// the answer with no bytes (Envoy's end of stream) costs no host call.
#[test]
fn an_admitted_cost_bound_shows_its_unit_and_reads_only_chunks_with_bytes() {
    let mut host = MockHost::new(T0).from_address("10.0.0.1");
    host.upstream_body = answer(300);
    let chunks = host.upstream_body.len();
    host.upstream_body.push(Vec::new());
    let f = filter(
        &host,
        &TOKENS.replacen('{', r#"{"structured_headers":true,"#, 1),
    );
    assert_eq!(f.request(&mut host).0, Step::Continue);
    assert_eq!(
        host.response_header("ratelimit-policy"),
        Some(r#""tokens";q=1000;qu="tokens";w=60"#)
    );
    assert_eq!(host.body_chunks_read.get(), chunks);
    assert_eq!(count(&f, &host, 0, &anon("10.0.0.1")), Some(300));
}

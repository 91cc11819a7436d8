//! Which bound's figures an admitted response shows: the one with the
//! fewest requests left, wherever it is among the route's bounds; a shadow
//! bound that would refuse only with `shadow_headers`, and then the one
//! the access log marks.

use super::{filter, T0};
use crate::pipeline::mock::MockHost;
use crate::pipeline::{Step, WOULD_REFUSE_STATE};

/// The `RateLimit` structured field: the bound shown and its remaining.
fn shown(host: &MockHost) -> Option<&str> {
    host.response_header("ratelimit")
}

#[test]
fn the_bound_with_fewest_left_is_shown_wherever_it_is_checked() {
    // Left after one request: 5, 2, 10 (the tightest in the middle).
    let json = r#"{"structured_headers":true,"routes":[{"name":"api","bounds":[
        {"name":"a","per":"route","limit":6,"window":"PT1M"},
        {"name":"b","per":"address","limit":3,"window":"PT1M"},
        {"name":"c","per":"route","limit":11,"window":"PT1M"}]}]}"#;
    let mut host = MockHost::new(T0).from_address("10.0.0.1");
    let f = filter(&host, json);
    assert_eq!(f.request(&mut host), (Step::Continue, None));
    assert_eq!(shown(&host), Some(r#""b";r=2;t=60"#));
    assert_eq!(host.response_header("ratelimit-limit"), Some("3"));
    // Another caller: "b" is its own and has 2 left, "a" has 4 now.
    let mut other = MockHost {
        store: std::mem::take(&mut host.store),
        ..MockHost::new(T0 + 1).from_address("10.0.0.2")
    };
    assert_eq!(f.request(&mut other), (Step::Continue, None));
    assert_eq!(shown(&other), Some(r#""b";r=2;t=60"#));
    for _ in 0..3 {
        other.clear();
        other.now += 1;
        f.request(&mut other);
    }
    // Refused by "b" now: a third caller sees "a" with 1 left, the fewest.
    let mut third = MockHost {
        store: std::mem::take(&mut other.store),
        ..MockHost::new(T0 + 10).from_address("10.0.0.3")
    };
    assert_eq!(f.request(&mut third), (Step::Continue, None));
    let field = shown(&third).unwrap();
    assert!(field.starts_with(r#""a";r=1;"#), "{field}");
}

#[test]
fn without_shadow_headers_a_shadow_bound_that_would_refuse_is_not_shown() {
    let json = r#"{"structured_headers":true,"shadow_headers":false,"routes":[{"name":"api","bounds":[
        {"name":"dry","per":"address","limit":1,"window":"PT1M","shadow":true},
        {"name":"real","per":"route","limit":100,"window":"PT1M"}]}]}"#;
    let mut host = MockHost::new(T0).from_address("10.0.0.1");
    let f = filter(&host, json);
    assert_eq!(f.request(&mut host), (Step::Continue, None));
    host.clear();
    host.now += 1;
    assert_eq!(f.request(&mut host), (Step::Continue, None));
    assert_eq!(host.filter_state.len(), 1, "dry would have refused");
    assert_eq!(shown(&host), Some(r#""real";r=98;t=60"#));
}

/// Nor while it still admits: its remaining, smaller than the enforced
/// bound's, would have the caller slow down for a limit nobody enforces.
#[test]
fn without_shadow_headers_an_admitting_shadow_bound_is_not_shown() {
    let json = r#"{"structured_headers":true,"shadow_headers":false,"routes":[{"name":"api","bounds":[
        {"name":"dry","per":"address","limit":5,"window":"PT1M","shadow":true},
        {"name":"real","per":"route","limit":100,"window":"PT1M"}]}]}"#;
    let mut host = MockHost::new(T0).from_address("10.0.0.1");
    let f = filter(&host, json);
    assert_eq!(f.request(&mut host), (Step::Continue, None));
    assert_eq!(shown(&host), Some(r#""real";r=99;t=60"#));
    // With them, the shadow bound's 4 left is the fewest.
    let json = json.replace(r#""shadow_headers":false,"#, "");
    let mut host = MockHost::new(T0).from_address("10.0.0.1");
    let f = filter(&host, &json);
    f.request(&mut host);
    assert_eq!(shown(&host), Some(r#""dry";r=4;t=60"#));
}

/// Several shadow bounds would refuse: the headers show the first, the
/// bound the access log's `would_refuse` names too.
#[test]
fn shadow_headers_show_the_bound_the_access_log_marks() {
    let json = r#"{"structured_headers":true,"routes":[{"name":"api","bounds":[
        {"name":"minute","per":"address","limit":1,"window":"PT1M","shadow":true},
        {"name":"hour","per":"address","limit":1,"window":"PT1H","shadow":true},
        {"name":"real","per":"route","limit":100,"window":"PT1M"}]}]}"#;
    let mut host = MockHost::new(T0).from_address("10.0.0.1");
    let f = filter(&host, json);
    assert_eq!(f.request(&mut host), (Step::Continue, None));
    host.clear();
    host.now += 1;
    assert_eq!(f.request(&mut host), (Step::Continue, None));
    assert_eq!(
        host.filter_state,
        [(WOULD_REFUSE_STATE.to_string(), "api/minute".to_string())]
    );
    let field = shown(&host).unwrap();
    assert!(field.starts_with(r#""minute";r=0;"#), "{field}");
}

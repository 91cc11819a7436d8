//! The limiter's decisions, natively.
#![allow(clippy::indexing_slicing)] // tests may index

use super::*;
use crate::config::parse;
use crate::count::lane::{Committed, Table};
use crate::count::node_lane;
use crate::count::store::MemStore;
use crate::pipeline::decide;

const SMALL: Table = Table {
    buckets: 16,
    per_bucket: 4,
    cap: 32,
};

fn limiter(store: &MemStore, json: &str) -> Limiter {
    let plan = Plan::compile(&parse(json.as_bytes()).unwrap());
    Limiter::in_store(plan, [11, 12], store, ("t", 1), SMALL).unwrap()
}

fn user(name: &str, roles: &[&str]) -> Identity {
    Identity {
        user: Some(name.into()),
        roles: roles.iter().map(|r| r.to_string()).collect(),
        ..Identity::default()
    }
}

fn admitted(lim: &Limiter, s: &MemStore, who: &Caller, n: usize) -> usize {
    (0..n)
        .filter(|i| {
            decide(lim, s, RouteId(0), None, who, 120_000 + *i as u64)
                .refused
                .is_none()
        })
        .count()
}

const TIERS: &str = r#"{"identity":{"header":{"user":"x-user","roles":"x-roles"}},
    "routes":[{"name":"api","bounds":[
      {"name":"partner","per":"user","applies_to":{"roles":["partner"]},"limit":5,"window":"PT1M"},
      {"name":"trial","per":"user","applies_to":{"roles":["trial"]},"limit":2,"window":"PT1M"}]}]}"#;

#[test]
fn roles_make_pricing_tiers_without_naming_anyone() {
    let s = MemStore::new();
    let lim = limiter(&s, TIERS);
    let (alice, bob, carol) = (
        user("alice", &["partner"]),
        user("bob", &["trial"]),
        user("carol", &[]),
    );
    let at = |id| Caller {
        address: "10.0.0.1",
        identity: Some(id),
        model: None,
    };
    assert_eq!(admitted(&lim, &s, &at(&alice), 10), 5);
    assert_eq!(admitted(&lim, &s, &at(&bob), 10), 2);
    // Nobody bounds carol: narrowed rules leave everyone else open.
    assert_eq!(admitted(&lim, &s, &at(&carol), 10), 10);
    // Refusals name the tier that refused.
    let d = decide(&lim, &s, RouteId(0), None, &at(&bob), 130_000);
    assert_eq!(d.refused.map(|r| r.0 .0), Some(1));
}

#[test]
fn anonymous_callers_are_counted_per_address_apart_from_any_user() {
    let s = MemStore::new();
    let lim = limiter(
        &s,
        r#"{"identity":{"header":{"user":"x-user"}},"routes":[{"name":"a","bounds":[
            {"per":"user","limit":2,"window":"PT1M"}]}]}"#,
    );
    let anon = |a| Caller {
        address: a,
        identity: None,
        model: None,
    };
    assert_eq!(admitted(&lim, &s, &anon("10.0.0.1"), 5), 2);
    assert_eq!(admitted(&lim, &s, &anon("10.0.0.2"), 5), 2);
    // A user whose name is that address has a budget of its own.
    let named = user("10.0.0.1", &[]);
    let as_user = Caller {
        address: "10.0.0.1",
        identity: Some(&named),
        model: None,
    };
    assert_eq!(admitted(&lim, &s, &as_user, 5), 2);
    assert_ne!(
        lim.caller_key(Per::User, &as_user),
        lim.caller_key(Per::User, &anon("10.0.0.1"))
    );
}

const PER_ADDRESS: &str = r#"{"routes":[{"name":"a","bounds":[
    {"per":"address","limit":2,"window":"PT1M"}]}]}"#;

fn address_key(lim: &Limiter, address: &str) -> u64 {
    lim.caller_key(
        Per::Address,
        &Caller {
            address,
            identity: None,
            model: None,
        },
    )
}

/// One subscriber holds a /64: rotating inside it is one caller, the
/// next /64 is another; IPv4 is keyed per address; an IPv4-mapped IPv6
/// address is that IPv4 address; spellings of one address are one.
#[test]
fn ipv6_callers_are_keyed_by_their_64_and_ipv4_by_address() {
    let s = MemStore::new();
    let lim = limiter(&s, PER_ADDRESS);
    let key = |a| address_key(&lim, a);
    assert_eq!(
        key("2001:db8:1:2::1"),
        key("2001:db8:1:2:ffff:ffff:ffff:fffe")
    );
    assert_eq!(key("2001:db8:1:2::1"), key("2001:DB8:1:2:0:0:0:1"));
    assert_ne!(key("2001:db8:1:2::1"), key("2001:db8:1:3::1"));
    assert_eq!(key("::ffff:10.0.0.1"), key("10.0.0.1"));
    assert_ne!(key("10.0.0.1"), key("10.0.0.2"));
    // The whole budget is shared inside the /64.
    let anon = |a| Caller {
        address: a,
        identity: None,
        model: None,
    };
    assert_eq!(admitted(&lim, &s, &anon("2001:db8:1:2::a"), 1), 1);
    assert_eq!(admitted(&lim, &s, &anon("2001:db8:1:2::b"), 5), 1);
    assert_eq!(admitted(&lim, &s, &anon("2001:db8:1:3::a"), 5), 2);
}

#[test]
fn the_prefixes_are_configured() {
    let s = MemStore::new();
    let lim = limiter(
        &s,
        r#"{"client_address":{"ipv4_prefix":24,"ipv6_prefix":128},
            "routes":[{"name":"a","bounds":[{"per":"address","limit":2,"window":"PT1M"}]}]}"#,
    );
    let key = |a| address_key(&lim, a);
    assert_ne!(key("2001:db8:1:2::1"), key("2001:db8:1:2::2"));
    assert_eq!(key("2001:db8:1:2::1"), key("2001:db8:1:2:0::1"));
    assert_eq!(key("10.0.0.1"), key("10.0.0.200"));
    assert_eq!(key("::ffff:10.0.0.7"), key("10.0.0.1"));
    assert_ne!(key("10.0.0.1"), key("10.0.1.1"));
    // Anonymous callers of identity bounds are counted the same way.
    let lim = limiter(
        &s,
        r#"{"client_address":{"ipv6_prefix":48},"identity":{"header":{"user":"x-user"}},
            "routes":[{"name":"a","bounds":[{"per":"user","limit":2,"window":"PT1M"}]}]}"#,
    );
    let anon = |a| Caller {
        address: a,
        identity: None,
        model: None,
    };
    assert_eq!(
        lim.caller_key(Per::User, &anon("2001:db8:1:2::1")),
        lim.caller_key(Per::User, &anon("2001:db8:1:ffff::9"))
    );
}

/// Not an IP address (a Unix socket peer, a missing `source.address`):
/// keyed by its text, so it is still counted, apart from any address.
#[test]
fn an_address_that_does_not_parse_is_counted_by_its_text() {
    let s = MemStore::new();
    let lim = limiter(&s, PER_ADDRESS);
    let key = |a| address_key(&lim, a);
    for odd in [
        "",
        "/run/envoy.sock",
        "@abstract",
        "10.0.0.256",
        "2001:db8::1::2",
        "10.0.0.1:80:90",
    ] {
        assert_eq!(key(odd), key(odd), "{odd:?}");
        assert_ne!(key(odd), key("10.0.0.1"), "{odd:?}");
    }
    assert_ne!(key("/a.sock"), key("/b.sock"));
    let anon = Caller {
        address: "/run/envoy.sock",
        identity: None,
        model: None,
    };
    assert_eq!(admitted(&lim, &s, &anon, 5), 2);
}

#[test]
fn bounds_without_identity_are_checked_first() {
    let s = MemStore::new();
    let lim = limiter(
        &s,
        r#"{"identity":{"header":{"user":"x-user"}},"routes":[{"name":"a","bounds":[
            {"name":"u","per":"user","limit":1,"window":"PT1M"},
            {"name":"addr","per":"address","limit":1,"window":"PT1M"}]}]}"#,
    );
    let r = &lim.plan.routes[0];
    assert_eq!(
        (r.early.clone(), r.late.clone()),
        (vec![BoundId(1)], vec![BoundId(0)])
    );
    let id = user("u1", &[]);
    let c = Caller {
        address: "10.0.0.9",
        identity: Some(&id),
        model: None,
    };
    assert!(decide(&lim, &s, RouteId(0), None, &c, 1_000)
        .refused
        .is_none());
    // Both are exhausted; the address bound refuses, as it is checked first.
    assert_eq!(
        decide(&lim, &s, RouteId(0), None, &c, 1_001)
            .refused
            .map(|r| r.0 .0),
        Some(1)
    );
}

#[test]
fn a_shadow_bound_counts_and_reports_but_never_refuses() {
    let s = MemStore::new();
    let lim = limiter(
        &s,
        r#"{"routes":[{"name":"a","bounds":[
            {"name":"dry","per":"address","limit":2,"window":"PT1M","shadow":true},
            {"name":"real","per":"route","limit":100,"window":"PT1M"}]}]}"#,
    );
    let c = Caller {
        address: "10.0.0.1",
        identity: None,
        model: None,
    };
    let decisions: Vec<Counted> = (0..5)
        .map(|i| decide(&lim, &s, RouteId(0), None, &c, 60_000 + i))
        .collect();
    assert!(decisions.iter().all(|d| d.refused.is_none()));
    let would = |d: &Counted| d.events.iter().any(|e| e.event == Event::WouldRefuse);
    assert_eq!(decisions.iter().filter(|d| would(d)).count(), 3);
    // The shadow bound counted only what enforcement would have admitted;
    // the enforced bound counted every request.
    let dry = lim.caller_key(Per::Address, &c);
    assert_eq!(
        node_lane::peek(&s, lim.lane(RouteId(0), BoundId(0)).unwrap(), dry)
            .unwrap()
            .map(|c| c.cur),
        Some(2)
    );
    assert_eq!(
        node_lane::peek(&s, lim.lane(RouteId(0), BoundId(1)).unwrap(), 0)
            .unwrap()
            .map(|c| c.cur),
        Some(5)
    );
    // Its headers show what enforcement would say.
    assert_eq!(
        decisions[4].tightest.map(|(b, q)| (b.0, q.remaining)),
        Some((0, 0))
    );
}

#[test]
fn a_caller_refused_again_before_its_wait_costs_no_store_read() {
    let s = MemStore::new();
    let lim = limiter(&s, &one_bound("address", 2));
    let c = Caller {
        address: "10.0.0.7",
        identity: None,
        model: None,
    };
    assert_eq!(admitted(&lim, &s, &c, 2), 2);
    let first = decide(&lim, &s, RouteId(0), None, &c, 130_000)
        .refused
        .unwrap();
    let (_, quota) = first;
    // The store would fail every read now: a standing refusal needs none.
    s.fail_next(usize::MAX);
    let again = decide(&lim, &s, RouteId(0), None, &c, 130_500);
    assert!(again.errors.is_empty());
    assert_eq!(
        again.refused.map(|r| r.1.reset_ms),
        Some(quota.reset_ms - 500)
    );
    s.fail_next(0);
    // One millisecond before the wait is over: still refused; at it: in.
    let end = 130_000 + quota.reset_ms;
    assert!(decide(&lim, &s, RouteId(0), None, &c, end - 1)
        .refused
        .is_some());
    assert!(decide(&lim, &s, RouteId(0), None, &c, end)
        .refused
        .is_none());
    // Another caller was never refused: it reads the store as before.
    let other = Caller {
        address: "10.0.0.8",
        identity: None,
        model: None,
    };
    s.fail_next(1);
    assert_eq!(
        decide(&lim, &s, RouteId(0), None, &other, end).errors.len(),
        1
    );
}

/// A refusal by the shared overflow counter (the caller table full) is
/// not remembered: the caller may be given its own entry before the
/// overflow's wait is over, and is admitted at once when it is.
#[test]
fn a_caller_refused_on_overflow_is_admitted_once_it_is_given_its_own_entry() {
    let s = MemStore::new();
    let lim = limiter(&s, &one_bound("address", 2));
    let at = |a: &str, now: u64| {
        let c = Caller {
            address: a,
            identity: None,
            model: None,
        };
        decide(&lim, &s, RouteId(0), None, &c, now)
            .refused
            .is_none()
    };
    // Window 1: the table's 32 places taken.
    for i in 0..SMALL.cap {
        assert!(at(&format!("10.0.0.{i}"), 60_000 + u64::from(i)));
    }
    // End of window 2: newcomers share the overflow counter, 2 a minute.
    let x = "10.1.0.1";
    assert!(at(x, 179_000) && at(x, 179_001));
    let refused = decide(
        &lim,
        &s,
        RouteId(0),
        None,
        &Caller {
            address: x,
            identity: None,
            model: None,
        },
        179_002,
    );
    assert!(refused.events.iter().all(|e| e.overflow));
    let (_, quota) = refused.refused.unwrap();
    assert!(quota.reset_ms > 20_000, "{quota:?}");
    // Window 3: window 1's callers have expired; x takes a place of its
    // own well before the overflow counter would admit it.
    assert!(at(x, 181_000));
}

/// Every refused caller is remembered, not only the last one: several
/// callers hammering while refused cost no store read.
#[test]
fn callers_refused_in_turn_are_all_refused_again_without_a_store_read() {
    let s = MemStore::new();
    let lim = limiter(&s, &one_bound("address", 1));
    let callers: Vec<String> = (0..8).map(|i| format!("10.0.1.{i}")).collect();
    let at = |a: &str, now: u64| {
        let c = Caller {
            address: a,
            identity: None,
            model: None,
        };
        decide(&lim, &s, RouteId(0), None, &c, now)
    };
    for a in &callers {
        assert!(at(a, 120_000).refused.is_none());
        assert!(at(a, 120_001).refused.is_some());
    }
    let reads = s.reads();
    for a in &callers {
        assert!(at(a, 120_002).refused.is_some(), "{a}");
    }
    assert_eq!(s.reads(), reads);
}

fn one_bound(per: &str, limit: u32) -> String {
    format!(
        r#"{{"routes":[{{"name":"r","bounds":[{{"per":"{per}","limit":{limit},"window":"PT1M"}}]}}]}}"#
    )
}

#[test]
fn a_caller_admitted_again_by_the_same_worker_costs_one_write() {
    for per in ["route", "address"] {
        let s = MemStore::new();
        let lim = limiter(&s, &one_bound(per, 50));
        let c = Caller {
            address: "10.0.0.7",
            identity: None,
            model: None,
        };
        let check = |t: u64| decide(&lim, &s, RouteId(0), None, &c, t).refused.is_none();
        assert!(check(120_000) && check(120_001));
        let (reads, writes) = (s.reads(), s.writes());
        assert!((2..12).all(|i| check(120_000 + i)));
        assert_eq!(s.reads(), reads, "{per}");
        assert_eq!(s.writes(), writes + 10, "{per}");
        assert_eq!(s.stale_writes(), 0);
    }
}

#[test]
fn a_refusal_the_memory_suggests_is_checked_with_the_store() {
    // Another worker takes back a request it counted before ours: the
    // store holds one less than this worker last wrote.
    for per in ["route", "address"] {
        let s = MemStore::new();
        let lim = limiter(&s, &one_bound(per, 3));
        let (lane, c) = (lim.lane(RouteId(0), BoundId(0)).unwrap(), Caller::default());
        let key = lim.caller_key(lim.plan.routes[0].bounds[0].per, &c);
        let now = 120_000;
        let theirs = node_lane::prepare(&s, lane, key, now).unwrap();
        let Ok(Committed::Done(undo)) = lane::commit(&s, lane, key, &theirs) else {
            panic!("their request is counted");
        };
        assert_eq!(admitted(&lim, &s, &c, 2), 2);
        lane_upkeep::undo(&s, lane, undo).unwrap();
        assert!(
            decide(&lim, &s, RouteId(0), None, &c, now + 5)
                .refused
                .is_none(),
            "{per}"
        );
        assert!(
            decide(&lim, &s, RouteId(0), None, &c, now + 6)
                .refused
                .is_some(),
            "{per}"
        );
    }
}

/// A standing refusal is of one bound of one route: it does not follow its
/// caller to the bound in the same place on another route.
#[test]
fn a_standing_refusal_stays_with_its_own_bound() {
    let s = MemStore::new();
    let lim = limiter(
        &s,
        r#"{"routes":[
        {"name":"a","match":{"path_prefix":"/a"},"bounds":[
          {"per":"address","limit":1,"window":"PT1M"}]},
        {"name":"b","match":{"path_prefix":"/b"},"bounds":[
          {"per":"address","limit":1,"window":"PT1M"}]}]}"#,
    );
    let who = Caller {
        address: "10.0.0.1",
        identity: None,
        model: None,
    };
    let now = 1_000_000;
    assert!(decide(&lim, &s, RouteId(0), None, &who, now)
        .refused
        .is_none());
    assert!(decide(&lim, &s, RouteId(0), None, &who, now)
        .refused
        .is_some());
    // Refused again from the standing refusal, without a read.
    assert!(decide(&lim, &s, RouteId(0), None, &who, now)
        .refused
        .is_some());
    assert!(decide(&lim, &s, RouteId(1), None, &who, now)
        .refused
        .is_none());
    assert!(decide(&lim, &s, RouteId(1), None, &who, now)
        .refused
        .is_some());
}

/// Issue 41: bounds on one key in one lane (tiers) decide every request as
/// the same bounds each in a lane of its own: the same refusals (the same
/// bound named, the same Remaining and Retry-After), the same tightest
/// bound shown on admission, the same events, over random requests of a
/// few callers.
// proptest builds natively only (the lib's tests also run as wasm).
#[cfg(not(target_arch = "wasm32"))]
mod tiers {
    use super::*;
    use crate::config::plan::Tier;
    use proptest::prelude::*;

    fn tiered(store: &MemStore, json: &str, share: bool) -> Limiter {
        let mut plan = Plan::compile(&parse(json.as_bytes()).unwrap());
        if !share {
            for b in &mut plan.routes[0].bounds {
                b.tier = Tier::Own;
            }
        }
        Limiter::in_store(plan, [11, 12], store, ("t", 1), SMALL).unwrap()
    }

    /// Bounds per address of (limit, window in seconds).
    fn config(tiers: &[(u32, u64)]) -> String {
        config_per("address", tiers)
    }

    /// Bounds keyed `per` of (limit, window in seconds).
    fn config_per(per: &str, tiers: &[(u32, u64)]) -> String {
        let bounds: Vec<String> = tiers
            .iter()
            .enumerate()
            .map(|(j, (limit, secs))| {
                format!(r#"{{"name":"t{j}","per":"{per}","limit":{limit},"window":"PT{secs}S"}}"#)
            })
            .collect();
        format!(
            r#"{{"routes":[{{"name":"r","bounds":[{}]}}]}}"#,
            bounds.join(",")
        )
    }

    #[test]
    fn tiers_share_one_lane() {
        let s = MemStore::new();
        let lim = tiered(&s, &config(&[(10, 1), (300, 60), (5_000, 3_600)]), true);
        let (lane, _) = lim.tier_of(RouteId(0), BoundId(0)).unwrap();
        assert_eq!(lane.rates().len(), 3);
        for b in 1..3 {
            let (l, t) = lim.tier_of(RouteId(0), BoundId(b)).unwrap();
            assert_eq!((l.prefix_key(), t), (lane.prefix_key(), b));
        }
        assert_eq!(lim.bound_lanes().count(), 1);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        #[test]
        fn tiers_in_one_lane_decide_as_separate_lanes(
            tiers in prop::collection::vec((1u32..6, prop::sample::select(vec![1u64, 2, 5, 60])), 2..5),
            steps in prop::collection::vec((0u64..1_500, 0usize..3), 1..120),
            per in prop::sample::select(vec!["address", "route"]),
        ) {
            let json = config_per(per, &tiers);
            let (s1, s2) = (MemStore::new(), MemStore::new());
            let (one, apart) = (tiered(&s1, &json, true), tiered(&s2, &json, false));
            prop_assert_eq!(one.bound_lanes().count(), 1);
            prop_assert_eq!(apart.bound_lanes().count(), tiers.len());
            let addresses = ["10.0.0.1", "10.0.0.2", "10.0.0.3"];
            let mut now = 3_600_000 * 10;
            for (step, who) in steps {
                now += step;
                let c = Caller { address: addresses[who], identity: None, model: None };
                let a = decide(&one, &s1, RouteId(0), None, &c, now);
                let b = decide(&apart, &s2, RouteId(0), None, &c, now);
                prop_assert_eq!(a.refused, b.refused, "at {}", now);
                prop_assert_eq!(a.tightest, b.tightest, "at {}", now);
                prop_assert_eq!(&a.events[..], &b.events[..], "at {}", now);
            }
        }
    }
}

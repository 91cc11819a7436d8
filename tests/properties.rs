//! Property tests of the pure core with a fake clock: the window estimate
//! against an exact sliding log, the boundary fault, the slot table's
//! invariants, and "a refused request writes nothing".

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use proptest::prelude::*;
use ratebound::config::parse;
use ratebound::config::plan::{BoundId, Plan, RouteId};
use ratebound::count::lane::{self, Lane, Table};
use ratebound::count::store::{MemStore, Store};
use ratebound::count::window::{Counts, Rate, Verdict};
use ratebound::count::{lane_upkeep, node_lane};
use ratebound::pipeline::decide;
use ratebound::pipeline::limiter::{Caller, Limiter};
use ratebound_testkit::accuracy::population;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(8))]

    #[test]
    fn on_realistic_traffic_at_most_one_percent_of_decisions_are_wrong(
        seed in 1u64..u64::MAX,
        limit in prop::sample::select(vec![10u32, 100, 500]),
        window_s in prop::sample::select(vec![1u64, 60, 3_600]),
    ) {
        let rate = Rate { limit, window_ms: window_s * 1_000 };
        let e = population(seed, rate, 2_000, 20, 0.05, 1.0);
        let wrong = e.wrong_share();
        prop_assert!(wrong <= 0.01, "{:.3}% of {} wrong", wrong * 100.0, e.requests);
    }

    #[test]
    fn compliant_callers_are_not_refused_even_beside_heavy_abusers(
        seed in 1u64..u64::MAX,
        limit in prop::sample::select(vec![10u32, 100, 500]),
    ) {
        let rate = Rate { limit, window_ms: 60_000 };
        let e = population(seed, rate, 2_000, 20, 0.05, 1.5);
        let refused = e.refused_share();
        prop_assert!(refused <= 0.01, "{:.3}% wrongly refused", refused * 100.0);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Regression (the fixed-window fault): a burst of `limit` just before a
    /// window boundary is never followed by another `limit` just after it.
    #[test]
    fn a_burst_before_a_boundary_is_not_followed_by_another_after_it(
        limit in 1u32..2_000,
        window_ms in prop::sample::select(vec![1_000u64, 60_000, 3_600_000, 86_400_000]),
        boundary in 1u64..1_000_000,
        span_permille in 1u64..500,
    ) {
        let rate = Rate { limit, window_ms };
        let b = boundary * window_ms;
        let span = (window_ms * span_permille / 1_000).max(1);
        let mut c = Counts::default();
        let count = |c: &mut Counts, from: u64| {
            (0..limit)
                .filter(|i| {
                    let t = from + u64::from(*i) * span / u64::from(limit);
                    match rate.decide(*c, t) {
                        Verdict::Admit { counts, .. } => { *c = counts; true }
                        Verdict::Refuse { .. } => false,
                    }
                })
                .count() as u64
        };
        prop_assert_eq!(count(&mut c, b - span), u64::from(limit));
        let after = count(&mut c, b);
        // Only what has slid out of the estimate: limit × span / window.
        prop_assert!(after <= u64::from(limit) * span / window_ms, "{} after the boundary", after);
        prop_assert!(after < u64::from(limit));
    }

    /// The wait a refusal announces is exact: refused just before, admitted at.
    #[test]
    fn retry_after_is_exact(
        limit in 1u32..100,
        window_ms in prop::sample::select(vec![1_000u64, 60_000]),
        cur in 0u32..100,
        prev in 0u32..100,
        elapsed_permille in 0u64..1_000,
    ) {
        let rate = Rate { limit, window_ms };
        let win = 1_000;
        let c = Counts { win, cur: cur.min(limit), prev: prev.min(limit) };
        let now = win * window_ms + window_ms * elapsed_permille / 1_000;
        if let Verdict::Refuse { quota } = rate.decide(c, now) {
            prop_assert!(quota.reset_ms > 0);
            let at = now + quota.reset_ms;
            let admitted = |t| matches!(rate.decide(c, t), Verdict::Admit { .. });
            prop_assert!(admitted(at), "not admitted at the announced time");
            prop_assert!(!admitted(at - 1), "admitted before the announced time");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// A clock that steps back (by a millisecond, by part of a window, by
    /// hours) between requests to one key. At every decision: a refused
    /// caller that waits Retry-After on the clock as it now runs is admitted,
    /// and not a millisecond earlier; `remaining` is exactly how many more
    /// are admitted at that instant; with none left, Reset is that exact
    /// wait; with some left, Reset ends the window the key was written in.
    #[test]
    fn a_clock_stepping_back_never_shortens_a_wait_or_inflates_remaining(
        limit in 1u32..12,
        window_ms in prop::sample::select(vec![1_000u64, 60_000]),
        steps in prop::collection::vec(
            prop_oneof![
                4 => 0i64..2_000,
                2 => -2_000i64..0,
                1 => -200_000i64..-2_000,
                1 => -10_000_000i64..-200_000,
                1 => 2_000i64..200_000,
            ],
            1..150,
        ),
    ) {
        let rate = Rate { limit, window_ms };
        let admits = |c: Counts, t: u64| rate.decide(c, t).admits();
        let mut now = 1_000_000 * window_ms + 7;
        let mut c = Counts::default();
        for step in steps {
            now = now.saturating_add_signed(step);
            match rate.decide(c, now) {
                Verdict::Refuse { quota } => {
                    prop_assert_eq!(quota.remaining, 0);
                    prop_assert!(quota.reset_ms > 0);
                    prop_assert!(admits(c, now + quota.reset_ms), "not admitted after Retry-After");
                    prop_assert!(!admits(c, now + quota.reset_ms - 1), "Retry-After longer than needed");
                }
                Verdict::Admit { counts, quota } => {
                    let mut next = counts;
                    for k in 0..quota.remaining {
                        match rate.decide(next, now) {
                            Verdict::Admit { counts, .. } => next = counts,
                            Verdict::Refuse { .. } => {
                                prop_assert!(false, "remaining {} but refused after {}", quota.remaining, k)
                            }
                        }
                    }
                    prop_assert!(!admits(next, now), "remaining {} undersold", quota.remaining);
                    if quota.remaining == 0 {
                        prop_assert!(quota.reset_ms > 0);
                        prop_assert!(admits(counts, now + quota.reset_ms));
                        prop_assert!(!admits(counts, now + quota.reset_ms - 1));
                    } else {
                        prop_assert_eq!(now + quota.reset_ms, (counts.win + 1) * window_ms);
                    }
                    c = counts;
                }
            }
        }
    }
}

// ---- the slot table ----

const TABLE: Table = Table {
    buckets: 8,
    per_bucket: 4,
    cap: 12,
};

fn lane(store: &MemStore, tag: u32) -> Lane {
    let l = Lane::new(
        "p:0",
        tag,
        Rate {
            limit: 3,
            window_ms: 1_000,
        },
        Some(TABLE),
    );
    l.create_keys(store).unwrap();
    l
}

/// Callers stored in each bucket (decoded from raw values: 4-byte tag,
/// then 24-byte entries starting with the caller).
fn bucket_callers(store: &MemStore) -> Vec<Vec<u64>> {
    (0..TABLE.buckets)
        .map(|i| {
            let v = store
                .get(&format!("p:0:{i}"))
                .unwrap()
                .0
                .unwrap_or_default();
            v.get(4..)
                .unwrap_or_default()
                .chunks_exact(24)
                .map(|e| u64::from_le_bytes(e[..8].try_into().unwrap()))
                .collect()
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn the_table_counts_what_it_holds_and_never_grows(
        ops in prop::collection::vec((0u64..40, 0u64..700, prop::bool::weighted(0.05)), 1..400),
    ) {
        let store = MemStore::new();
        let l = lane(&store, 9);
        let keys = store.key_count();
        prop_assert_eq!(keys, TABLE.keys());
        let mut now = 50_000_000u64;
        for (caller, dt, sweep) in ops {
            now += dt;
            let caller = caller.wrapping_mul(0x9e37_79b9_7f4a_7c15);
            if sweep {
                lane_upkeep::sweep(&store, &l, 0..TABLE.buckets, now).unwrap();
            }
            let p = node_lane::prepare(&store, &l, caller, now).unwrap();
            if let Verdict::Admit { .. } = p.verdict {
                let done = lane::commit(&store, &l, caller, &p).unwrap();
                prop_assert!(matches!(done, lane::Committed::Done(_)));
            }
            let held = bucket_callers(&store);
            let all: Vec<u64> = held.iter().flatten().copied().collect();
            let mut distinct = all.clone();
            distinct.sort_unstable();
            distinct.dedup();
            prop_assert_eq!(distinct.len(), all.len(), "a caller is held twice");
            prop_assert_eq!(lane::tracked(&store, &l).unwrap() as usize, all.len());
            prop_assert!(all.len() <= TABLE.cap as usize);
            prop_assert!(held.iter().all(|b| b.len() <= TABLE.per_bucket));
            prop_assert_eq!(store.key_count(), keys, "keys are never added");
        }
    }

    #[test]
    fn a_refused_request_writes_nothing(
        limits in prop::collection::vec((1u64..6, prop::bool::ANY), 1..4),
        reqs in prop::collection::vec((0u8..4, 0u64..400), 1..120),
    ) {
        let bounds: Vec<String> = limits
            .iter()
            .map(|(limit, route)| {
                let per = if *route { "route" } else { "address" };
                format!(r#"{{"per":"{per}","limit":{limit},"window":"PT1S"}}"#)
            })
            .collect();
        let json = format!(r#"{{"routes":[{{"name":"r","bounds":[{}]}}]}}"#, bounds.join(","));
        let plan = Plan::compile(&parse(json.as_bytes()).unwrap());
        let store = MemStore::new();
        let lim = Limiter::in_store(plan, [3, 4], &store, ("p", 1), TABLE).unwrap();
        let mut now = 7_000_000u64;
        let mut refused = 0;
        for (who, dt) in reqs {
            now += dt;
            let address = format!("10.0.0.{who}");
            let before = store.snapshot();
            let d = decide(&lim, &store, RouteId(0), None, &Caller { address: &address, identity: None, model: None }, now);
            prop_assert!(d.errors.is_empty());
            if d.refused.is_some() {
                refused += 1;
                prop_assert_eq!(&store.snapshot(), &before);
            } else {
                prop_assert_ne!(&store.snapshot(), &before);
            }
        }
        let _ = refused;
    }
}

#[test]
fn a_failing_store_fails_open_and_says_so() {
    let json = r#"{"routes":[{"name":"r","bounds":[{"per":"route","limit":1,"window":"PT1S"}]}]}"#;
    let plan = Plan::compile(&parse(json.as_bytes()).unwrap());
    let store = MemStore::new();
    let lim = Limiter::bind(plan, [0, 0], |n, b| {
        Ok::<_, ()>(ratebound::pipeline::limiter::bound_lane(
            b,
            &format!("f:{n}"),
            1,
            TABLE,
        ))
    })
    .unwrap();
    store.fail_next(1);
    let d = decide(&lim, &store, RouteId(0), None, &Caller::default(), 1_000);
    assert!(d.refused.is_none());
    assert_eq!(d.errors.len(), 1);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Workers that remember their own writes (`write_memory`), interleaved
    /// — a request read by one, then others' requests and other writers'
    /// writes, then its write — lose no update and miss no admission: each
    /// counter holds exactly what was admitted, never past the limit, and
    /// a refusal comes only once the limit is reached.
    #[test]
    fn workers_remembering_their_writes_stay_exact(
        per_route in prop::bool::ANY,
        ops in prop::collection::vec((0usize..3, 0u8..4, 0u8..6), 1..300),
    ) {
        const LIMIT: usize = 6;
        let per = if per_route { "route" } else { "address" };
        let json = format!(
            r#"{{"routes":[{{"name":"r","bounds":[{{"per":"{per}","limit":{LIMIT},"window":"PT1H"}}]}}]}}"#
        );
        let store = MemStore::new();
        let workers: Vec<Limiter> = (0..3)
            .map(|_| {
                let plan = Plan::compile(&parse(json.as_bytes()).unwrap());
                Limiter::in_store(plan, [5, 6], &store, ("x", 1), TABLE).unwrap()
            })
            .collect();
        let addresses: Vec<String> = (0..4).map(|i| format!("10.1.0.{i}")).collect();
        let caller = |c: u8| Caller { address: &addresses[c as usize], identity: None, model: None };
        let counter = |c: u8| if per_route { 0 } else { c as usize };
        let now = 3_600_000 * 500 + 17;
        let mut parked: Vec<Option<(u8, ratebound::pipeline::limiter::Reads)>> = vec![None, None, None];
        let mut admitted = [0usize; 4];
        let mut refused = [false; 4];
        let mut outcome = |c: u8, d: ratebound::pipeline::limiter::Counted, admitted: &mut [usize; 4]| {
            assert!(d.errors.is_empty(), "{:?}", d.errors);
            match d.refused {
                None => admitted[counter(c)] += 1,
                Some(_) => refused[counter(c)] = true,
            }
        };
        let mut foreign = 0u32;
        for (w, c, kind) in ops {
            let lim = &workers[w];
            match kind {
                0 | 1 => outcome(c, decide(lim, &store, RouteId(0), None, &caller(c), now), &mut admitted),
                2 => {
                    // Read now, write later (as around an identity call-out).
                    if let Some((c, p)) = parked[w].take() {
                        outcome(c, lim.commit(&store, lim.route(RouteId(0)).unwrap(), p, now), &mut admitted);
                    }
                    let mut p = lim.start(RouteId(0), None);
                    let early = lim.plan.routes[0].early_bounds(None).to_vec();
                    match lim.prepare(&store, lim.route(RouteId(0)).unwrap(), &mut p, &early, &caller(c), now) {
                        Some(d) => outcome(c, d, &mut admitted),
                        None => parked[w] = Some((c, p)),
                    }
                }
                3 => {
                    if let Some((c, p)) = parked[w].take() {
                        outcome(c, lim.commit(&store, lim.route(RouteId(0)).unwrap(), p, now), &mut admitted);
                    }
                }
                _ => {
                    // Some other plugin writes: the cas counter moves on.
                    foreign += 1;
                    store.set(&format!("other:{}", foreign % 7), b"x", None).unwrap();
                }
            }
        }
        for (w, slot) in parked.iter_mut().enumerate() {
            if let Some((c, p)) = slot.take() {
                outcome(c, workers[w].commit(&store, workers[w].route(RouteId(0)).unwrap(), p, now), &mut admitted);
            }
        }
        for c in 0..4u8 {
            let i = counter(c);
            let key = workers[0].caller_key(workers[0].plan.routes[0].bounds[0].per, &caller(c));
            let held = node_lane::peek(&store, workers[0].lane(RouteId(0), BoundId(0)).unwrap(), key).unwrap().map_or(0, |n| n.cur);
            prop_assert_eq!(held as usize, admitted[i], "counter {} holds what was admitted", i);
            prop_assert!(admitted[i] <= LIMIT);
            if refused[i] {
                prop_assert_eq!(admitted[i], LIMIT, "refused before the limit");
            }
        }
    }
}

proptest! {
    /// Reserve, then true up: whatever the interleaving of admissions
    /// (each with a reservation), known costs and requests that end
    /// without one, the counter holds the known costs plus the
    /// reservations of the requests without one, and nothing refused.
    #[test]
    fn charges_are_the_known_costs_and_the_reservations_of_the_rest(
        ops in proptest::collection::vec((0u8..3, 1u32..50, 0u32..200), 1..60),
        reserve in 1u32..40,
    ) {
        let store = MemStore::new();
        let l = Lane::new("c:0", 1, Rate { limit: 1_000, window_ms: 60_000 }, Some(TABLE));
        l.create_keys(&store).unwrap();
        let now = 60_000 * 77 + 5;
        let caller = 42u64;
        let mut open: Vec<lane::Undo> = Vec::new();
        let mut charged = 0u64;
        for (kind, pick, cost) in ops {
            match kind {
                // A request arrives with its reservation.
                0 => {
                    let p = node_lane::prepare_hits(&store, &l, caller, now, reserve).unwrap();
                    if p.verdict.admits() {
                        match lane::commit(&store, &l, caller, &p).unwrap() {
                            lane::Committed::Done(u) => {
                                open.push(u);
                                charged += u64::from(reserve);
                            }
                            lane::Committed::Stale => unreachable!("one writer"),
                        }
                    }
                }
                // One in flight ends with its cost.
                1 if !open.is_empty() => {
                    let u = open.remove(pick as usize % open.len());
                    lane_upkeep::true_up(&store, &l, u, cost).unwrap();
                    charged = charged - u64::from(reserve) + u64::from(cost);
                }
                // One ends without a usable figure: its reservation stays.
                _ if !open.is_empty() => {
                    open.remove(pick as usize % open.len());
                }
                _ => {}
            }
            let held = node_lane::peek(&store, &l, caller).unwrap().map_or(0, |c| c.cur);
            prop_assert_eq!(u64::from(held), charged);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// A request of `hits` units refused is told the exact wait: admitted
    /// after it, refused a millisecond before; and it is admitted exactly
    /// when all its units fit under the limit.
    #[test]
    fn a_weighted_refusal_tells_the_exact_wait(
        limit in 1u32..5_000,
        hits_permille in 1u32..=1_000,
        cur_permille in 0u32..1_500,
        prev_permille in 0u32..1_500,
        window_ms in prop::sample::select(vec![1_000u64, 60_000, 3_600_000]),
        into in 0u64..1_000,
    ) {
        let rate = Rate { limit, window_ms };
        let hits = (limit * hits_permille / 1_000).max(1);
        let per = |p: u32| (u64::from(limit) * u64::from(p) / 1_000) as u32;
        let win = 500;
        let c = Counts { win, cur: per(cur_permille), prev: per(prev_permille) };
        let now = win * window_ms + window_ms * into / 1_000;
        match rate.decide_hits(c, now, hits) {
            Verdict::Admit { counts, .. } => {
                prop_assert_eq!(counts.cur, c.cur + hits);
                prop_assert!(rate.left(c, now) >= hits);
            }
            Verdict::Refuse { quota } => {
                prop_assert!(rate.left(c, now) < hits);
                let at = now + quota.reset_ms;
                prop_assert!(rate.decide_hits(c, at, hits).admits(), "not admitted after the wait");
                prop_assert!(!rate.decide_hits(c, at - 1, hits).admits(), "admitted before it");
            }
        }
    }
}

//! Property tests of fleet bounds (src/count/fleet/) with a fake clock and
//! a fake rate-limit service: one node with instant syncs is the node
//! estimate; no admitted hit is sent twice or forgotten across boundaries;
//! alone, a node keeps to its share.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use proptest::prelude::*;
use ratebound::count::fleet::{Failure, FleetCounts, FleetRate, FleetVerdict};
use ratebound::count::window::{Counts, Rate, Verdict};
use std::collections::BTreeMap;

/// What a step of a run does at its instant.
#[derive(Debug, Clone, Copy)]
enum Step {
    Request,
    /// Take a sync now; answered `latency` ms later, or failed.
    Sync {
        latency: u64,
        fails: bool,
    },
}

fn steps() -> impl Strategy<Value = Vec<(u64, Step)>> {
    let step = prop_oneof![
        4 => Just(Step::Request),
        1 => (0u64..400, prop::bool::weighted(0.2))
            .prop_map(|(latency, fails)| Step::Sync { latency, fails }),
    ];
    prop::collection::vec((0u64..300, step), 1..400)
}

fn bound(limit: u32, window_ms: u64, nodes: u32) -> FleetRate {
    FleetRate {
        rate: Rate { limit, window_ms },
        nodes,
        stale_ms: 2 * window_ms,
        sync_ms: window_ms / 10,
        down: false,
        counted: true,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// One node whose every admission is synced at once: the service's
    /// counts are its own, and fleet sync decides exactly as node scope.
    #[test]
    fn one_node_with_instant_syncs_is_the_node_estimate(
        limit in 1u32..50,
        window_ms in prop::sample::select(vec![1_000u64, 60_000]),
        gaps in prop::collection::vec(0u64..2_000, 1..300),
    ) {
        let b = bound(limit, window_ms, 1);
        let mut service: BTreeMap<u64, u64> = BTreeMap::new();
        let mut fleet = FleetCounts::default();
        let mut node = Counts::default();
        let mut now = 1_000 * window_ms;
        for gap in gaps {
            now += gap;
            let expected = b.rate.decide(node, now);
            let got = b.decide(fleet, now);
            prop_assert_eq!(got.admits(), expected.admits(), "at {}", now);
            if let (FleetVerdict::Admit { state, .. }, Verdict::Admit { counts, .. }) = (got, expected) {
                fleet = state;
                node = counts;
            }
            let sent = fleet.take_unsynced(b.rate, now).unwrap();
            let c = service.entry(b.rate.window_of(now)).or_insert(0);
            *c += u64::from(sent.hits);
            let read = (*c).min(u64::from(limit)) as u32;
            fleet.apply_answer(b.rate, sent, read, now, 1).unwrap();
        }
    }

    /// Every admitted hit is, at every instant, in exactly one place:
    /// answered, in flight, unsent, or dropped at a boundary because no
    /// sync took it before the window after the one it was admitted in
    /// ended (it no longer weighs). A failed call's hits are put back, or
    /// dropped for the same reason.
    /// Never sent twice, never forgotten while it still weighs; and a node
    /// never counts fewer than its own hits of the current window.
    #[test]
    fn hits_are_never_lost_nor_sent_twice_across_boundaries(
        limit in 1u32..40,
        window_ms in prop::sample::select(vec![500u64, 1_000]),
        others in 0u32..5,
        run in steps(),
    ) {
        let b = bound(limit, window_ms, 3);
        let mut s = FleetCounts::default();
        let mut service: BTreeMap<u64, u64> = BTreeMap::new();
        let mut now = 100 * window_ms;
        let (mut admitted, mut answered, mut failures) = (0u64, 0u64, 0u32);
        // Unsent hits a boundary dropped as too old (no sync for a window).
        let mut dropped = 0u64;
        // What may go, judged here and not by the code under test: at one
        // boundary the hits carried from the window before, at two or more
        // every unsent hit.
        let roll = |s: &mut FleetCounts, t: u64, dropped: &mut u64| {
            let win = b.rate.window_of(t);
            *dropped += u64::from(match win.saturating_sub(s.win) {
                0 => 0,
                1 => s.carried,
                _ => s.unsynced + s.carried,
            });
            *s = s.at(win);
        };
        // A sync in flight: (when it resolves, fails).
        let mut flight = None;
        for (gap, step) in run {
            now += gap;
            if let Some((at, fails)) = flight {
                if at <= now {
                    roll(&mut s, at, &mut dropped);
                    let sent = s.pending.unwrap();
                    if fails {
                        s.sync_failed(b.rate, sent, at, Failure::NotCounted).unwrap();
                        failures += 1;
                    } else {
                        // Other nodes add `others` a call.
                        let c = service.entry(b.rate.window_of(at)).or_insert(0);
                        *c += u64::from(sent.hits + others);
                        let read = (*c).min(u64::from(limit)) as u32;
                        s.apply_answer(b.rate, sent, read, at, 3).unwrap();
                        answered += u64::from(sent.from_cur + sent.from_prev);
                    }
                    flight = None;
                }
            }
            roll(&mut s, now, &mut dropped);
            match step {
                Step::Request => {
                    if let FleetVerdict::Admit { state, .. } = b.decide(s, now) {
                        s = state;
                        admitted += 1;
                    }
                }
                Step::Sync { latency, fails } => {
                    if s.take_unsynced(b.rate, now).is_some() {
                        flight = Some((now + latency, fails));
                    }
                }
            }
            let pending = s.pending.map_or(0, |p| u64::from(p.from_cur + p.from_prev));
            let held = answered + pending + u64::from(s.unsynced + s.carried) + dropped;
            prop_assert!(held <= admitted, "sent twice: {} of {}", held, admitted);
            if failures == 0 {
                prop_assert_eq!(held, admitted, "lost");
            }
            prop_assert!(s.view().cur >= s.own_cur, "{:?}", s);
        }
    }

    /// Alone (the service down), a node never admits more than
    /// ceil(limit / nodes) in any fixed window, whatever the traffic.
    #[test]
    fn alone_a_node_keeps_to_its_share(
        limit in 1u32..200,
        nodes in 1u32..20,
        gaps in prop::collection::vec(0u64..50, 1..1_000),
    ) {
        let b = bound(limit, 1_000, nodes);
        let mut s = FleetCounts::default();
        let mut per_window: BTreeMap<u64, u32> = BTreeMap::new();
        let mut now = 50_000;
        for gap in gaps {
            now += gap;
            if let FleetVerdict::Admit { state, .. } = b.decide_alone(s, now, 1) {
                s = state;
                *per_window.entry(now / 1_000).or_insert(0) += 1;
            }
        }
        let cap = limit.div_ceil(nodes);
        prop_assert!(per_window.values().all(|&n| n <= cap), "{:?} > {}", per_window, cap);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Reserve, then true up, on a fleet key: whatever the interleaving of
    /// admissions (each with a reservation), known costs, requests ending
    /// without one and syncs, what the node sent plus what it still holds
    /// is the known costs plus the reservations of the rest — never less,
    /// and more only by what a true-up could not give back because a sync
    /// had already sent it. Nothing refused is charged.
    #[test]
    fn a_fleet_key_charges_the_known_costs_and_the_reservations_of_the_rest(
        ops in proptest::collection::vec((0u8..4, 0u32..400), 1..80),
        reserve in 1u32..100,
    ) {
        let b = bound(5_000, 60_000, 1);
        let now = 60_000 * 40 + 7;
        let win = b.rate.window_of(now);
        let mut s = FleetCounts::default();
        let (mut open, mut truth, mut sent, mut not_given_back) = (0usize, 0u64, 0u64, 0u64);
        let mut synced = false;
        for (kind, cost) in ops {
            match kind {
                0 => match b.decide_hits(s, now, reserve) {
                    FleetVerdict::Admit { state, .. } => {
                        s = state;
                        open += 1;
                        truth += u64::from(reserve);
                    }
                    FleetVerdict::Refuse { .. } => {}
                },
                1 if open > 0 => {
                    open -= 1;
                    let delta = i64::from(cost) - i64::from(reserve);
                    let before = s.unsynced;
                    s.charge(win, delta);
                    truth = (truth as i64 + delta) as u64;
                    if delta < 0 {
                        let back = u64::from(before - s.unsynced);
                        not_given_back += delta.unsigned_abs() - back;
                    }
                }
                2 if open > 0 => open -= 1,
                3 => {
                    let sync = s.take_unsynced(b.rate, now).unwrap();
                    sent += u64::from(sync.hits);
                    s.apply_answer(b.rate, sync, sent as u32, now, 1).unwrap();
                    synced = true;
                }
                _ => {}
            }
            let held = sent + u64::from(s.local());
            prop_assert_eq!(held, truth + not_given_back);
            if !synced {
                prop_assert_eq!(not_given_back, 0);
            }
        }
    }
}

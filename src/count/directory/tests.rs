//! The directory's rules, its encoding and its store operations.
//! Test-only: the file is compiled under `#[cfg(test)]`.
#![cfg(test)]

use super::*;
use crate::count::store::MemStore;

fn keyed(fps: &[u64]) -> Vec<Want> {
    fps.iter()
        .map(|f| Want {
            fingerprint: *f,
            table: true,
        })
        .collect()
}

/// Lane and tag of each bound (whether a table is new differs between
/// the first registration and those that join it).
fn ids(r: &Registered) -> Vec<(usize, u32)> {
    r.assigned.iter().map(|a| (a.lane, a.tag)).collect()
}

fn lanes(r: &Registered) -> Vec<usize> {
    let mut l: Vec<usize> = r.assigned.iter().map(|a| a.lane).collect();
    l.sort_unstable();
    l
}

const T: u64 = 1_000_000;

/// Registers a configuration and lets `contexts` root contexts tick once.
fn push(d: &mut Directory, config: u64, fps: &[u64], contexts: u32, now: u64) -> Registered {
    let r = d.register("i", config, &keyed(fps), now).unwrap();
    for _ in 0..contexts {
        d.beat(r.gen, true, now).unwrap();
    }
    r
}

fn alive(d: &Directory, gen: u64) -> bool {
    d.live.iter().any(|l| l.gen == gen)
}

#[test]
fn workers_of_one_configuration_join_one_entry() {
    let mut d = Directory::default();
    let a = d.register("i", 1, &keyed(&[10, 20]), T).unwrap();
    let b = d.register("i", 1, &keyed(&[10, 20]), T + 1).unwrap();
    assert!(a.first && !b.first);
    assert_eq!((a.gen, ids(&a)), (b.gen, ids(&b)));
    d.beat(a.gen, true, T + 900);
    d.beat(a.gen, true, T + 950);
    assert_eq!(d.live.len(), 1);
    assert_eq!(d.live[0].refs, 2);
}

#[test]
fn unchanged_bounds_keep_lane_and_tag_changed_ones_start_fresh() {
    let mut d = Directory::default();
    let a1 = push(&mut d, 1, &[10, 20, 30], 3, T);
    // Route order changes and bound 20 is edited into 21.
    let a2 = push(&mut d, 2, &[30, 21, 10], 3, T);
    assert_eq!(ids(&a2)[0], ids(&a1)[2]);
    assert_eq!(ids(&a2)[2], ids(&a1)[0]);
    assert!(
        lanes(&a1).iter().all(|l| *l != a2.assigned[1].lane),
        "20's lane is still draining"
    );
    assert!(a1.assigned.iter().all(|a| a.tag != a2.assigned[1].tag));
}

#[test]
fn a_bound_that_comes_back_does_not_resurrect_its_count() {
    let mut d = Directory::default();
    let a1 = push(&mut d, 1, &[10], 3, T);
    push(&mut d, 2, &[11], 3, T);
    let a3 = push(&mut d, 3, &[10], 3, T);
    assert_ne!(a1.assigned[0].tag, a3.assigned[0].tag);
    assert_ne!(a1.assigned[0].lane, a3.assigned[0].lane, "1 still drains");
}

#[test]
fn no_two_live_configurations_share_a_lane_however_many_drain() {
    // The bypass: 100/min, then 101/min, then 5/min, the first still
    // draining. The third must not take the first's lane.
    let mut d = Directory::default();
    let c1 = push(&mut d, 1, &[100], 3, T);
    let c2 = push(&mut d, 2, &[101], 3, T);
    let c3 = push(&mut d, 3, &[5], 3, T);
    let all = [lanes(&c1), lanes(&c2), lanes(&c3)].concat();
    let mut distinct = all.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), all.len(), "{all:?}");
    // Twenty more pushes, none drained: 43 lanes, all in use.
    for k in 4..24 {
        push(&mut d, k, &[k * 1000, k * 1000 + 1], 3, T);
    }
    assert_eq!(d.lanes.len(), 3 + 20 * 2);
    assert!(d.lanes.iter().all(|e| d.in_use(e)));
}

#[test]
fn a_drained_configuration_frees_its_lanes() {
    let mut d = Directory::default();
    let c1 = push(&mut d, 1, &[1, 2], 3, T);
    let c2 = push(&mut d, 2, &[3, 4], 3, T);
    assert_eq!(d.leave(c1.gen), 2);
    assert_eq!(d.leave(c1.gen), 1);
    assert!(alive(&d, c1.gen));
    assert_eq!(d.leave(c1.gen), 0);
    assert!(!alive(&d, c1.gen), "gone with its last context");
    let c3 = push(&mut d, 3, &[5, 6], 3, T);
    assert_eq!(lanes(&c3), lanes(&c1), "1's lanes reused");
    assert!(lanes(&c2).iter().all(|l| !lanes(&c3).contains(l)));
    assert_eq!(d.lanes.len(), 4, "tables reused");
    assert!(c1.assigned.iter().all(|a| a.new_table));
    assert!(c3.assigned.iter().all(|a| !a.new_table), "their keys exist");
    assert_eq!(d.keys(), 4 * budget::TABLE_KEYS);
}

#[test]
fn a_context_that_never_ticks_does_not_keep_a_configuration_alive() {
    // Envoy configures one more root context per push on the main
    // thread that never ticks and is never destroyed.
    let mut d = Directory::default();
    let c1 = push(&mut d, 1, &[1], 3, T);
    let ghost = d.register("i", 1, &keyed(&[1]), T).unwrap();
    assert_eq!(ghost.gen, c1.gen);
    push(&mut d, 2, &[2], 3, T + 1);
    for _ in 0..3 {
        d.leave(c1.gen);
    }
    assert!(!alive(&d, c1.gen));
}

#[test]
fn a_configuration_no_context_joined_is_forgotten_after_the_grace() {
    let mut d = Directory::default();
    let c1 = d.register("i", 1, &keyed(&[1]), T).unwrap();
    assert!(d.beat(c1.gen, false, T + GRACE_MS - 1).is_some());
    let c2 = push(&mut d, 2, &[2], 3, T + GRACE_MS);
    assert!(!alive(&d, c1.gen), "Envoy rejected it before any tick");
    assert!(alive(&d, c2.gen));
}

#[test]
fn lanes_stay_bounded_over_many_reloads_that_drain() {
    let mut d = Directory::default();
    let mut prev: Option<u64> = None;
    for gen in 0..1_000u64 {
        let fps: Vec<u64> = (0..5).map(|k| gen * 100 + k).collect();
        let r = push(&mut d, gen + 1, &fps, 1, T);
        let mut l = lanes(&r);
        l.dedup();
        assert_eq!(l.len(), 5, "distinct lanes");
        if let Some(p) = prev {
            d.leave(p);
        }
        prev = Some(r.gen);
    }
    assert!(d.lanes.len() <= 10, "{} lanes", d.lanes.len());
}

#[test]
fn a_configuration_that_stops_ticking_is_forgotten_after_its_lease() {
    let mut d = Directory::default();
    let c1 = push(&mut d, 1, &[1], 1, T);
    let c2 = push(&mut d, 2, &[2], 1, T);
    // c2 ticks, c1's VM died without leaving.
    for s in 1..=70 {
        d.beat(c2.gen, false, T + s * 1_000);
    }
    assert!(d.beat(c1.gen, false, T + 70_000).is_none(), "c1 forgotten");
    let c3 = push(&mut d, 3, &[3], 1, T + 70_000);
    assert_eq!(lanes(&c3), lanes(&c1));
    assert_ne!(lanes(&c3), lanes(&c2));
}

/// A context with a configuration joins its live entry while that is
/// the instance's newest, however old; an older one only within
/// `JOIN_MS` of its birth (a rollout's late starters), not after.
#[test]
fn a_configuration_is_joined_while_newest_or_young() {
    let mut d = Directory::default();
    let a = push(&mut d, 1, &[1], 1, T);
    let later = T + 5 * JOIN_MS;
    d.beat(a.gen, true, later - 1).unwrap();
    let again = d.register("i", 1, &keyed(&[1]), later).unwrap();
    assert_eq!((again.gen, again.first), (a.gen, false), "the newest");
    let b = push(&mut d, 2, &[2], 1, later);
    let c = push(&mut d, 3, &[3], 1, later + 1);
    let joins = |d: &mut Directory, gen: u64, at: u64| {
        d.beat(c.gen, true, at - 1).unwrap();
        d.register("i", 2, &keyed(&[2]), at).unwrap().gen == gen
    };
    assert!(joins(&mut d, b.gen, later + JOIN_MS - 1), "young");
    assert!(!joins(&mut d, b.gen, later + JOIN_MS), "too old");
}

/// Forgotten a lease after its last tick to the millisecond: a
/// configuration unseen for `LEASE_MS` no longer holds its lanes.
#[test]
fn a_lease_runs_out_exactly_a_lease_after_the_last_tick() {
    let mut d = Directory::default();
    let c1 = push(&mut d, 1, &[1], 1, T);
    let c2 = push(&mut d, 2, &[2], 1, T);
    let live = |d: &Directory| d.live.iter().any(|l| l.gen == c1.gen);
    // c1's last tick was at T; c2's ticks run the expiry.
    d.beat(c2.gen, false, T + LEASE_MS - 1);
    assert!(live(&d), "still live");
    d.beat(c2.gen, false, T + LEASE_MS);
    assert!(!live(&d), "forgotten");
}

#[test]
fn only_the_newest_of_an_instance_is_current() {
    let mut d = Directory::default();
    let c1 = push(&mut d, 1, &[1], 1, T);
    let o = d.register("other", 1, &keyed(&[1]), T).unwrap();
    assert_ne!(lanes(&c1), lanes(&o), "instances never share");
    assert!(d.beat(c1.gen, false, T + 1_000).unwrap().0.current);
    let c2 = push(&mut d, 2, &[2], 1, T + 1_600);
    assert!(!d.beat(c1.gen, false, T + 3_000).unwrap().0.current);
    assert!(d.beat(c2.gen, false, T + 3_000).unwrap().0.current);
    // The newer one is rejected by Envoy and destroyed: 1 is current again.
    d.leave(c2.gen);
    assert!(d.beat(c1.gen, false, T + 4_000).unwrap().0.current);
    assert!(d.beat(o.gen, true, T + 4_000).unwrap().0.current);
}

#[test]
fn a_steady_state_writes_the_directory_once_per_heartbeat() {
    let mut d = Directory::default();
    let c = push(&mut d, 1, &[1], 3, T);
    let writes = (1..=20u64)
        .filter(|s| d.beat(c.gen, false, T + s * 1_000).unwrap().1)
        .count();
    assert_eq!(writes, 4, "every 5 s over 20 s, whatever the ticks");
    // Another context's tick in the same millisecond writes nothing; a
    // clock that stepped back refreshes `seen` (a write).
    let at = T + 20_000;
    assert!(!d.beat(c.gen, false, at).unwrap().1);
    assert!(d.beat(c.gen, false, at - 1).unwrap().1);
}

#[test]
fn a_late_worker_joins_its_own_configuration_not_a_newer_one() {
    let mut d = Directory::default();
    let main = push(&mut d, 1, &[1], 1, T);
    push(&mut d, 2, &[2], 1, T + 5);
    let worker = d.register("i", 1, &keyed(&[1]), T + 10).unwrap();
    assert_eq!((worker.gen, ids(&worker)), (main.gen, ids(&main)));
}

#[test]
fn the_budget_refuses_and_changes_nothing() {
    let mut d = Directory::default();
    let n = budget::VM_KEYS / budget::TABLE_KEYS;
    let all: Vec<u64> = (0..n).collect();
    push(&mut d, 1, &all, 1, T);
    let before = d.clone();
    let err = d.register("i", 2, &keyed(&[n + 1]), T).unwrap_err();
    assert!(matches!(err, BudgetError::VmKeys { .. }), "{err}");
    assert_eq!(d, before);
    // Unchanged bounds keep their lanes and fit.
    push(&mut d, 3, &all, 1, T);
}

/// The budget is a number of keys the VM may hold: exactly that many
/// fit, one more does not.
#[test]
fn exactly_the_vm_keys_fit() {
    let tables = budget::VM_KEYS / budget::TABLE_KEYS;
    let singles = budget::VM_KEYS - tables * budget::TABLE_KEYS;
    let wants = |extra: u64| -> Vec<Want> {
        (0..tables + singles + extra)
            .map(|f| Want {
                fingerprint: f,
                table: f < tables,
            })
            .collect()
    };
    let mut d = Directory::default();
    assert!(d.register("i", 1, &wants(0), T).is_ok());
    assert_eq!(d.keys(), budget::VM_KEYS);
    let mut d = Directory::default();
    let err = d.register("i", 1, &wants(1), T).unwrap_err();
    assert!(matches!(err, BudgetError::VmKeys { .. }), "{err}");
}

/// The vm_id's budget is four configurations as large as one may be
/// (`CONFIG_BOUNDS` bounds, 128 of them with caller tables): four of
/// them, all alive at once, fit.
#[test]
fn four_configurations_of_the_largest_size_fit_in_one_vm_id() {
    let mut d = Directory::default();
    for k in 0..4u64 {
        let wants: Vec<Want> = (0..budget::CONFIG_BOUNDS as u64)
            .map(|b| Want {
                fingerprint: k * 10_000 + b,
                table: b < 128,
            })
            .collect();
        let r = d.register(&format!("i{k}"), k + 1, &wants, T);
        assert!(r.is_ok(), "configuration {k}: {:?}", r.err());
    }
    assert_eq!(d.lanes.len(), 4 * budget::CONFIG_BOUNDS);
}

#[test]
fn too_many_configurations_alive_are_refused() {
    let mut d = Directory::default();
    for k in 0..budget::LIVE_CONFIGURATIONS as u64 {
        push(&mut d, k + 1, &[], 1, T);
    }
    let err = d.register("i", 999, &[], T).unwrap_err();
    assert!(matches!(err, BudgetError::Alive { .. }), "{err}");
}

#[test]
fn the_encoding_round_trips_and_rejects_garbage() {
    let mut d = Directory::new([3, 4]);
    push(&mut d, 1, &[1, 2], 2, T);
    let single = Want {
        fingerprint: 9,
        table: false,
    };
    d.register("j", 2, &[single], T).unwrap();
    let b = d.encode();
    assert_eq!(Directory::decode(&b), Some(d));
    for cut in 0..b.len() {
        assert_eq!(Directory::decode(&b[..cut]), None);
    }
    let mut long = b.clone();
    long.push(0);
    assert_eq!(Directory::decode(&long), None);
    assert_eq!(Directory::decode(b"{\"seed\":[1,2]}"), None);
}

#[test]
fn register_writes_once_per_configuration_and_agrees_across_workers() {
    let store = MemStore::new();
    let r1 = register(&store, "t", 7, &keyed(&[1, 2]), T, [3, 4]).unwrap();
    let writes = store.writes();
    let r2 = register(&store, "t", 7, &keyed(&[1, 2]), T, [5, 6]).unwrap();
    assert_eq!(store.writes(), writes, "a joining context writes nothing");
    assert!(r1.registered.first && !r2.registered.first);
    assert_eq!(ids(&r1.registered), ids(&r2.registered));
    assert_eq!((r1.seed, r2.seed), ([3, 4], [3, 4]));
    let g1 = r1.registered.gen;
    assert_eq!(
        beat(&store, g1, true, T).unwrap().map(|b| b.current),
        Some(true)
    );
    let r3 = register(&store, "t", 8, &keyed(&[1]), T, [0, 0]).unwrap();
    beat(&store, r3.registered.gen, true, T).unwrap();
    assert!(
        !beat(&store, g1, false, T).unwrap().unwrap().current,
        "superseded"
    );
    leave(&store, r3.registered.gen).unwrap();
    assert!(beat(&store, g1, false, T).unwrap().unwrap().current);
    // A budget refusal writes nothing.
    let writes = store.writes();
    let many: Vec<u64> = (100..100 + budget::VM_KEYS / budget::TABLE_KEYS + 1).collect();
    let e = register(&store, "t", 9, &keyed(&many), T, [0, 0]);
    assert!(matches!(e, Err(RegisterError::Budget(_))));
    assert_eq!(store.writes(), writes);
}

/// A lane's new tag is never 0 (an unwritten value's) nor the tag it
/// replaces, even when the hash says so.
#[test]
fn a_new_tag_is_never_zero_nor_the_old_one() {
    for lane in 0..64 {
        let hashed = new_tag(7, 3, lane, 0);
        assert_ne!(hashed, 0);
        let again = new_tag(7, 3, lane, hashed);
        assert_ne!(again, hashed, "lane {lane}");
        assert_ne!(again, 0);
        assert_eq!(new_tag(7, 3, lane, hashed.wrapping_add(9)), hashed);
    }
}

//! A fleet lane's entries, the request path and the sync over a store.
//! Test-only: the file is compiled under `#[cfg(test)]`.
#![cfg(test)]

use super::*;
use crate::count::fleet::Failure;
use crate::count::lane::{commit, Committed, Table};
use crate::count::store::MemStore;
use crate::count::window::Rate;

const SMALL: Table = Table {
    buckets: 4,
    per_bucket: 2,
    cap: 4,
};

fn lane(limit: u32, table: Option<Table>) -> Lane {
    Lane::new(
        "t",
        7,
        Rate {
            limit,
            window_ms: 60_000,
        },
        table,
    )
}

const FLEET: Fleet = Fleet {
    stale_ms: 2_000,
    sync_ms: 200,
};

fn count(fleet: u32) -> SyncOutcome {
    SyncOutcome::Count { fleet, nodes: 3 }
}

/// Decides and commits one request; true when admitted.
fn hit(s: &MemStore, l: &Lane, caller: u64, nodes: u32, now: u64) -> bool {
    // The service down: a new key takes the outage share.
    let known = || Known {
        nodes,
        down: true,
        counted: true,
    };
    let d = prepare(s, l, FLEET, (caller, caller ^ 1), 1, &known, now).unwrap();
    if !d.prepared.verdict.admits() {
        return false;
    }
    matches!(
        commit(s, l, caller, &d.prepared).unwrap(),
        Committed::Done(_)
    )
}

/// A sweep writes only when it removed an entry whose counts expired.
#[test]
fn a_fleet_sweep_writes_only_what_it_removed() {
    let live = FleetEntry {
        caller: 1,
        fleet_id: 2,
        counts: FleetCounts {
            win: 10,
            cur: 3,
            ..FleetCounts::default()
        },
    };
    let gone = FleetEntry {
        caller: 5,
        fleet_id: 6,
        counts: FleetCounts::default(),
    };
    let (v, n) = sweep_value(7, Some(&encode(7, &[live, gone])), 10);
    assert_eq!((n, decode(7, v.as_deref())), (1, vec![live]));
    assert_eq!(sweep_value(7, Some(&encode(7, &[live])), 10), (None, 0));
}

/// A scan of a table nobody is tracked in reads its single counter
/// and the tracked count, not its buckets.
#[test]
fn an_idle_tables_scan_reads_no_bucket() {
    let s = MemStore::new();
    let l = lane(300, Some(SMALL));
    l.create_keys(&s).unwrap();
    let reads = s.reads();
    assert!(scan(&s, &l, 600_000).unwrap().is_empty());
    assert_eq!(s.reads() - reads, 2);
}

/// Taking keys spread over buckets in any order reads and writes each
/// bucket once.
#[test]
fn taking_writes_each_bucket_once() {
    let s = MemStore::new();
    let l = lane(300, Some(SMALL));
    // Callers 4 and 8 in bucket 0, 5 and 9 in bucket 1; the cap (4)
    // reached, 12 counts in the single overflow counter.
    for c in [4, 5, 8, 9, 12] {
        assert!(hit(&s, &l, c, 3, 600_000));
    }
    let mut these = scan(&s, &l, 600_100).unwrap();
    // Bucket 0, bucket 1, the overflow, bucket 0, bucket 1.
    these.sort_by_key(|c| match c.place {
        LanePlace::Single => 6,
        LanePlace::Bucket(_) => c.caller,
    });
    let order: Vec<LanePlace> = these.iter().map(|c| c.place).collect();
    assert_eq!(order.len(), 5);
    assert!(order[0] == order[3] && order[1] == order[4] && order[2] == LanePlace::Single);
    let (reads, writes) = (s.reads(), s.writes());
    assert_eq!(take_these(&s, &l, &these, 600_100).unwrap().len(), 5);
    assert_eq!(
        (s.reads() - reads, s.writes() - writes),
        (3, 3),
        "{order:?}"
    );
}

/// A charge lands on its own caller, not on another of its bucket.
#[test]
fn a_charge_lands_on_its_own_caller_in_a_shared_bucket() {
    let s = MemStore::new();
    let l = lane(300, Some(SMALL));
    let now = 600_000;
    // Callers 4 and 8 share their first bucket (0 of 4).
    assert!(hit(&s, &l, 4, 3, now));
    assert!(hit(&s, &l, 8, 3, now));
    let counts = |c| peek(&s, &l, c).unwrap().unwrap().counts;
    let (four, eight) = (counts(4), counts(8));
    charge(&s, &l, LanePlace::Bucket(0), 8, l.rate.window_of(now), 5).unwrap();
    assert_eq!(counts(4), four, "the other caller untouched");
    assert_ne!(counts(8), eight);
}

/// A fleet caller whose two buckets are full is not tracked, whatever
/// room the cap leaves (two buckets of two, room for eight).
#[test]
fn a_fleet_caller_whose_buckets_are_full_is_not_tracked() {
    let s = MemStore::new();
    let l = lane(300, Some(crate::count::lane::TWO_BY_TWO));
    for caller in [2, 4, 6, 8] {
        assert!(hit(&s, &l, caller, 3, 600_000));
        assert!(peek(&s, &l, caller).unwrap().is_some());
    }
    hit(&s, &l, 10, 3, 600_000);
    assert!(peek(&s, &l, 10).unwrap().is_none());
    // Caller 6 went to its second bucket: it goes on counting there.
    let before = peek(&s, &l, 6).unwrap().unwrap().counts;
    assert!(hit(&s, &l, 6, 3, 600_001));
    let after = peek(&s, &l, 6).unwrap().unwrap().counts;
    assert_eq!(after.unsynced, before.unsynced + 1, "{before:?} {after:?}");
}

/// A key new to the node while the service answers: a sync's worth of
/// its share until its first answer (30 a minute, 3 nodes, 200 ms
/// syncs: 1), however fast it is asked.
#[test]
fn a_key_new_to_the_node_waits_for_its_first_answer() {
    let s = MemStore::new();
    let l = lane(30, Some(SMALL));
    let now = 600_000;
    let up = || Known {
        nodes: 3,
        down: false,
        counted: true,
    };
    let hit = |t| {
        let d = prepare(&s, &l, FLEET, (7, 8), 1, &up, t).unwrap();
        d.prepared.verdict.admits()
            && matches!(commit(&s, &l, 7, &d.prepared).unwrap(), Committed::Done(_))
    };
    // Decided alone (the `fleet_alone` stat) until the key's answer.
    let alone = |t| prepare(&s, &l, FLEET, (7, 8), 1, &up, t).unwrap().alone;
    assert!(alone(now));
    assert_eq!((0..20).filter(|_| hit(now)).count(), 1);
    let taken = take(&s, &l, now + 100).unwrap();
    settle(&s, &l, &[(taken[0], count(1))], now + 110).unwrap();
    assert!(!alone(now + 120), "answered");
    assert_eq!(
        (0..20).filter(|_| hit(now + 120)).count(),
        9,
        "(30 − 1) / 3"
    );
}

/// A junk spray: thousands of keys of one hit each do not push
/// a busy key out of a capped sync.
#[test]
fn a_sync_takes_the_keys_with_most_to_send_first() {
    let s = MemStore::new();
    let big = Table {
        buckets: 256,
        per_bucket: 32,
        cap: 4_000,
    };
    let l = lane(300, Some(big));
    l.create_keys(&s).unwrap();
    let now = 600_000;
    for c in 1..3_000u64 {
        hit(&s, &l, c * 7_919, 3, now);
    }
    for _ in 0..40 {
        hit(&s, &l, 42, 3, now);
    }
    let mut all = scan(&s, &l, now + 1).unwrap();
    assert_eq!(all.len(), 3_000);
    all.sort_by_key(|c| c.order());
    assert_eq!((all[0].caller, all[0].hits), (42, 40));
    let taken = take_these(&s, &l, &all[..1], now + 1).unwrap();
    assert_eq!(taken.len(), 1);
    assert_eq!(scan(&s, &l, now + 2).unwrap().len(), 2_999, "one in flight");
}

#[test]
fn an_entry_round_trips_through_its_bytes() {
    let e = FleetEntry {
        caller: 1,
        fleet_id: 2,
        counts: FleetCounts {
            win: 3,
            prev: 4,
            cur: 5,
            unsynced: 6,
            carried: 7,
            unplaced: 8,
            own_cur: 9,
            own_prev: 10,
            answered_ms: Some(11),
            pending: Some(Sent {
                hits: 12,
                from_cur: 13,
                from_prev: 14,
                win: 15,
                at_ms: 16,
            }),
            nodes: 17,
            ahead: 19,
            hold: true,
        },
    };
    let bytes = encode(9, &[e, FleetEntry::default()]);
    assert_eq!(bytes.len(), 4 + 2 * ENTRY);
    assert_eq!(decode(9, Some(&bytes)), vec![e, FleetEntry::default()]);
    assert_eq!(decode(8, Some(&bytes)), vec![], "another bound's");
    assert_eq!(decode(9, Some(&bytes[..20])), vec![], "cut short");
    // An entry written before issue 38, with hits in `doubt` (bytes
    // 96..100, never sent again then): they are held and sent again.
    let mut old = encode(
        9,
        &[FleetEntry {
            counts: FleetCounts {
                hold: false,
                ..e.counts
            },
            ..e
        }],
    );
    old[4 + 96..4 + 100].copy_from_slice(&18u32.to_le_bytes());
    let read = decode(9, Some(&old))[0];
    assert_eq!((read.counts.unsynced, read.counts.hold), (6 + 18, true));
    assert_eq!(&encode(9, &[read])[4 + 96..4 + 100], &[0; 4]);
}

#[test]
fn alone_a_new_key_takes_its_share_then_the_fleet_count_decides() {
    let s = MemStore::new();
    let l = lane(30, Some(SMALL));
    let now = 600_000;
    let admitted = (0..20).filter(|_| hit(&s, &l, 42, 3, now)).count();
    assert_eq!(admitted, 10, "30 / 3 nodes, alone");
    // The sync sends the 10 and the service says 25 in the fleet.
    let taken = take(&s, &l, now + 100).unwrap();
    assert_eq!(taken.len(), 1);
    assert_eq!((taken[0].sent.hits, taken[0].fleet_id), (10, 43));
    assert!(take(&s, &l, now + 150).unwrap().is_empty(), "in flight");
    settle(&s, &l, &[(taken[0], count(25))], now + 110).unwrap();
    let more = (0..20).filter(|_| hit(&s, &l, 42, 3, now + 200)).count();
    assert_eq!(more, 1, "(30 − 25) / 3 nodes until the next answer");
    let e = peek(&s, &l, 42).unwrap().unwrap();
    assert_eq!((e.counts.cur, e.counts.unsynced), (25, 1));
}

#[test]
fn a_failed_sync_puts_the_hits_back_and_a_refusal_writes_nothing() {
    let s = MemStore::new();
    let l = lane(2, None);
    let now = 600_000;
    assert!(hit(&s, &l, 0, 1, now));
    let taken = take(&s, &l, now + 1).unwrap();
    settle(
        &s,
        &l,
        &[(taken[0], SyncOutcome::Failed(Failure::NotCounted))],
        now + 2,
    )
    .unwrap();
    let e = peek(&s, &l, 0).unwrap().unwrap();
    assert_eq!((e.counts.unsynced, e.counts.pending), (1, None));
    assert!(hit(&s, &l, 0, 1, now + 3));
    let writes = s.writes();
    assert!(!hit(&s, &l, 0, 1, now + 4));
    assert_eq!(s.writes(), writes);
}

#[test]
fn the_cap_holds_and_extra_callers_share_the_overflow_counter() {
    let s = MemStore::new();
    let l = lane(100, Some(SMALL));
    l.create_keys(&s).unwrap();
    for c in 0..10u64 {
        assert!(hit(&s, &l, c * 7_919, 1, 600_000));
    }
    assert_eq!(tracked_with(&s, &l).unwrap().0, 4);
    let over = peek(&s, &l, u64::MAX).unwrap();
    assert!(over.is_none());
    let single = decode(l.tag, s.get(l.single_key()).unwrap().0.as_deref());
    assert_eq!(single[0].counts.own_cur, 6);
    // Every tracked key and the overflow counter are synced.
    assert_eq!(take(&s, &l, 600_100).unwrap().len(), 5);
}

#[test]
fn undo_takes_back_an_unsynced_admission_only() {
    let s = MemStore::new();
    let l = lane(10, Some(SMALL));
    let now = 600_000;
    let one = || Known {
        nodes: 1,
        down: true,
        counted: true,
    };
    let d = prepare(&s, &l, FLEET, (5, 6), 1, &one, now).unwrap();
    let Committed::Done(_) = commit(&s, &l, 5, &d.prepared).unwrap() else {
        panic!()
    };
    let place = take(&s, &l, now).unwrap()[0].place;
    assert!(hit(&s, &l, 5, 1, now));
    charge(&s, &l, place, 5, 10, -1).unwrap();
    let e = peek(&s, &l, 5).unwrap().unwrap();
    assert_eq!((e.counts.unsynced, e.counts.own_cur), (0, 1));
    charge(&s, &l, place, 5, 10, -1).unwrap();
    let e = peek(&s, &l, 5).unwrap().unwrap();
    assert_eq!(e.counts.own_cur, 1, "the synced hit stays counted");
}

#[test]
fn expired_keys_are_swept_and_not_synced() {
    let s = MemStore::new();
    let l = lane(10, Some(SMALL));
    l.create_keys(&s).unwrap();
    assert!(hit(&s, &l, 5, 1, 600_000));
    let taken = take(&s, &l, 600_001).unwrap();
    settle(&s, &l, &[(taken[0], count(1))], 600_002).unwrap();
    let again = take(&s, &l, 660_500).unwrap();
    assert_eq!(again.len(), 1, "still weighs in the next window");
    settle(&s, &l, &[(again[0], count(0))], 660_501).unwrap();
    let key = l.bucket_key(taken[0].place_index()).as_str().to_string();
    let v = s.get(&key).unwrap().0;
    assert_eq!(sweep_value(l.tag, v.as_deref(), 11).1, 0);
    assert_eq!(sweep_value(l.tag, v.as_deref(), 12).1, 1);
    assert!(take(&s, &l, 720_000).unwrap().is_empty(), "expired");
}

impl Taken {
    fn place_index(&self) -> usize {
        match self.place {
            LanePlace::Bucket(i) => i,
            LanePlace::Single => usize::MAX,
        }
    }
}

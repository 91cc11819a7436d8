//! Where a fleet bound's counts live: a [`Lane`] like a node bound's (the
//! same keys, buckets, cap and overflow counter), whose entries are whole
//! [`FleetCounts`] instead of two-window counts, each with the key the
//! fleet knows the caller by.
//!
//! The request path ([`prepare`]) reads and decides as a node bound does,
//! from shared data only. The sync ([`take`], then [`settle`] with the
//! service's answer) takes every tracked key's unsent hits and puts the
//! fleet's counts back, with compare-and-swap: requests and the sync write
//! the same values.
//!
//! A known caller's entry (104 bytes) is decoded and rewritten in place in
//! the bucket's bytes, as the node path does.

use crate::count::bytes::{u32_at, u64_at};
use crate::count::fleet::{Failure, FleetCounts, FleetRate, FleetVerdict, Sent};
use crate::count::lane::{encode_live_for, tracked_with, Lane, LanePlace, Prepared};
use crate::count::store::{update, update_recalled, Store, StoreError};
use crate::count::window::{Counts, Rate, Verdict};

/// A fleet entry: the caller (this node's key), the fleet's key, the counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FleetEntry {
    pub caller: u64,
    pub fleet_id: u64,
    pub counts: FleetCounts,
}

const ENTRY: usize = 104;
const PENDING: u32 = 1;
const ANSWERED: u32 = 2;

fn decode_entry(e: &[u8]) -> FleetEntry {
    let flags = u32_at(e, 88);
    FleetEntry {
        caller: u64_at(e, 0),
        fleet_id: u64_at(e, 8),
        counts: FleetCounts {
            win: u64_at(e, 16),
            prev: u32_at(e, 24),
            cur: u32_at(e, 28),
            unsynced: u32_at(e, 32),
            carried: u32_at(e, 36),
            unplaced: u32_at(e, 40),
            own_cur: u32_at(e, 44),
            own_prev: u32_at(e, 48),
            answered_ms: (flags & ANSWERED != 0).then(|| u64_at(e, 52)),
            pending: (flags & PENDING != 0).then(|| Sent {
                hits: u32_at(e, 60),
                from_cur: u32_at(e, 64),
                from_prev: u32_at(e, 68),
                win: u64_at(e, 72),
                at_ms: u64_at(e, 80),
            }),
            nodes: u32_at(e, 92),
            doubt: u32_at(e, 96),
            ahead: u32_at(e, 100),
        },
    }
}

fn encode_entry(e: &FleetEntry) -> [u8; ENTRY] {
    let c = &e.counts;
    let p = c.pending.unwrap_or(Sent {
        hits: 0,
        from_cur: 0,
        from_prev: 0,
        win: 0,
        at_ms: 0,
    });
    let flags = if c.pending.is_some() { PENDING } else { 0 }
        | if c.answered_ms.is_some() { ANSWERED } else { 0 };
    let mut out = [0u8; ENTRY];
    let mut at = 0;
    let mut put = |bytes: &[u8]| {
        if let Some(to) = out.get_mut(at..at + bytes.len()) {
            to.copy_from_slice(bytes);
        }
        at += bytes.len();
    };
    put(&e.caller.to_le_bytes());
    put(&e.fleet_id.to_le_bytes());
    put(&c.win.to_le_bytes());
    for n in [
        c.prev, c.cur, c.unsynced, c.carried, c.unplaced, c.own_cur, c.own_prev,
    ] {
        put(&n.to_le_bytes());
    }
    put(&c.answered_ms.unwrap_or(0).to_le_bytes());
    for n in [p.hits, p.from_cur, p.from_prev] {
        put(&n.to_le_bytes());
    }
    put(&p.win.to_le_bytes());
    put(&p.at_ms.to_le_bytes());
    put(&flags.to_le_bytes());
    put(&c.nodes.to_le_bytes());
    put(&c.doubt.to_le_bytes());
    put(&c.ahead.to_le_bytes());
    out
}

/// A value's entries' bytes, if it carries `tag` (another tag: another
/// bound's, read as empty) and whole entries.
fn entries_of(tag: u32, value: &[u8]) -> Option<&[u8]> {
    let rest = value.get(4..)?;
    (u32_at(value, 0) == tag && rest.len().is_multiple_of(ENTRY)).then_some(rest)
}

/// Where `caller`'s entry starts in a value carrying `tag`, if it has one.
fn find(tag: u32, value: &[u8], caller: u64) -> Option<usize> {
    let rest = entries_of(tag, value)?;
    (0..rest.len())
        .step_by(ENTRY)
        .find(|at| u64_at(rest, *at) == caller)
        .map(|at| at + 4)
}

/// A value's entries (none if it is another bound's).
pub fn decode(tag: u32, value: Option<&[u8]>) -> Vec<FleetEntry> {
    value
        .and_then(|v| entries_of(tag, v))
        .map(|b| b.chunks_exact(ENTRY).map(decode_entry).collect())
        .unwrap_or_default()
}

pub fn encode(tag: u32, entries: &[FleetEntry]) -> Vec<u8> {
    let mut v = Vec::with_capacity(4 + entries.len() * ENTRY);
    v.extend_from_slice(&tag.to_le_bytes());
    for e in entries {
        v.extend_from_slice(&encode_entry(e));
    }
    v
}

/// How a fleet bound decides on this node.
#[derive(Debug, Clone, Copy)]
pub struct Fleet {
    /// An answer older than this no longer vouches for the fleet's counts.
    pub stale_ms: u64,
    /// The sync period (the join share, the share refusal's wait).
    pub sync_ms: u64,
}

/// What a node knows of the fleet beside a key's counts, read only when it
/// decides without a fresh answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Known {
    /// Nodes as last counted (the configured guess before any count).
    pub nodes: u32,
    /// The service is down: no answer to wait for.
    pub down: bool,
    /// `nodes` is the service's count, not the configured guess.
    pub counted: bool,
}

/// The two-window counts a verdict carries for [`commit`](super::slots::commit)
/// and undo: only the window is read from them.
fn verdict_of(v: &FleetVerdict) -> Verdict {
    match *v {
        FleetVerdict::Admit { state, quota, .. } => Verdict::Admit {
            counts: Counts {
                win: state.win,
                cur: state.own_cur,
                prev: state.own_prev,
            },
            quota,
        },
        FleetVerdict::Refuse { quota, .. } => Verdict::Refuse { quota },
    }
}

fn alone(v: &FleetVerdict) -> bool {
    matches!(
        v,
        FleetVerdict::Admit { alone: true, .. } | FleetVerdict::Refuse { alone: true, .. }
    )
}

/// What [`prepare`] decided, and whether it decided alone (no fresh answer).
pub struct Decided {
    pub prepared: Prepared,
    pub alone: bool,
}

/// Reads the entry `caller` is counted in and decides one more request of
/// `hits` units; nothing is written. `known` is asked only when the node
/// decides without a fresh answer (a fresh one carries its node count).
pub fn prepare<S: Store + ?Sized>(
    store: &S,
    lane: &Lane,
    fleet: Fleet,
    (caller, fleet_id): (u64, u64),
    hits: u32,
    known: &dyn Fn() -> Known,
    now_ms: u64,
) -> Result<Decided, StoreError> {
    let decide = |counts: FleetCounts| {
        let mut rate = FleetRate {
            rate: lane.rate,
            nodes: 1,
            stale_ms: fleet.stale_ms,
            sync_ms: fleet.sync_ms,
            down: false,
            counted: true,
        };
        if !counts.fresh(now_ms, fleet.stale_ms) {
            let k = known();
            rate.nodes = k.nodes;
            rate.down = k.down;
            rate.counted = k.counted;
        }
        rate.decide_hits(counts, now_ms, hits)
    };
    let prepared = |place, entries: &mut Vec<FleetEntry>, pos: usize, cas, reserve, overflow| {
        let e = entries.get_mut(pos)?;
        let v = decide(e.counts);
        let alone = alone(&v);
        let value = match v {
            FleetVerdict::Admit { state, .. } => {
                e.counts = state;
                encode(lane.tag, entries)
            }
            FleetVerdict::Refuse { .. } => Vec::new(),
        };
        Some(Decided {
            prepared: Prepared::new(verdict_of(&v), overflow, place, value, cas, reserve)
                .taking(hits),
            alone,
        })
    };
    let single = |overflow| -> Result<Decided, StoreError> {
        let (v, cas) = store.get(lane.single_key())?;
        let mut entries = decode(lane.tag, v.as_deref());
        entries.truncate(1);
        if entries.is_empty() {
            entries.push(FleetEntry::default());
        }
        prepared(LanePlace::Single, &mut entries, 0, cas, None, overflow)
            .ok_or(StoreError::Invalid("fleet counter"))
    };
    let Some(table) = lane.table else {
        return single(false);
    };
    let (a, b) = lane.buckets_of(caller);
    // The common path: the caller's entry is decoded and rewritten in the
    // bytes just read, the rest of the bucket left as it is.
    let found =
        |i: usize, v: Option<Vec<u8>>, cas: Option<u32>| -> Result<Decided, Option<Vec<u8>>> {
            let Some(at) = v.as_deref().and_then(|b| find(lane.tag, b, caller)) else {
                return Err(v);
            };
            let mut v = v.unwrap_or_default();
            let e = decode_entry(v.get(at..at + ENTRY).unwrap_or_default());
            let verdict = decide(e.counts);
            let value = match verdict {
                FleetVerdict::Admit { state, .. } => {
                    let bytes = encode_entry(&FleetEntry { counts: state, ..e });
                    if let Some(to) = v.get_mut(at..at + ENTRY) {
                        to.copy_from_slice(&bytes);
                    }
                    v
                }
                FleetVerdict::Refuse { .. } => Vec::new(),
            };
            Ok(Decided {
                alone: alone(&verdict),
                prepared: Prepared::new(
                    verdict_of(&verdict),
                    false,
                    LanePlace::Bucket(i),
                    value,
                    cas,
                    None,
                )
                .taking(hits),
            })
        };
    // This worker's memory of its last write serves an admission, which
    // the write's cas then checks (the sync writes the same buckets); a
    // refusal or an absent caller is read for real.
    let (first, recalled) = store.recall(lane.bucket_key(a).as_str())?;
    let mut first = Some(first);
    if recalled {
        if let Some(Ok(d)) = first.take().map(|(v, cas)| found(a, v, cas)) {
            if d.prepared.verdict.admits() {
                return Ok(d);
            }
        }
    }
    let mut read = Vec::with_capacity(2);
    for i in [a, b] {
        let (v, cas) = match (i == a).then(|| first.take()).flatten() {
            Some(kept) => kept,
            None => store.get(lane.bucket_key(i).as_str())?,
        };
        match found(i, v, cas) {
            Ok(d) => return Ok(d),
            Err(v) => read.push((i, decode(lane.tag, v.as_deref()), cas)),
        }
    }
    // A new caller: as in `slots::prepare`, an expired entry is reclaimed,
    // else a free position taken if the cap allows; past it, the overflow.
    let win = lane.rate.window_of(now_ms);
    let mut live: Option<(u32, Option<u32>)> = None;
    for (i, mut entries, cas) in read {
        let fresh = FleetEntry {
            caller,
            fleet_id,
            counts: FleetCounts::default(),
        };
        if let Some(pos) = entries.iter().position(|e| e.counts.expired(win)) {
            if let Some(e) = entries.get_mut(pos) {
                *e = fresh;
            }
            return prepared(LanePlace::Bucket(i), &mut entries, pos, cas, None, false)
                .ok_or(StoreError::Invalid("fleet entry"));
        }
        if entries.len() < table.per_bucket {
            let (n, meta_cas) = match live {
                Some(m) => m,
                None => *live.insert(tracked_with(store, lane)?),
            };
            if n < table.cap {
                entries.push(fresh);
                let pos = entries.len() - 1;
                let reserve = Some((encode_live_for(lane, n + 1), meta_cas));
                return prepared(LanePlace::Bucket(i), &mut entries, pos, cas, reserve, false)
                    .ok_or(StoreError::Invalid("fleet entry"));
            }
        }
    }
    single(true)
}

/// Adds `delta` units to what `caller` was charged at `place` in window
/// `win` ([`FleetCounts::charge`]): −hits takes an admission back (a later
/// bound refused), a cost known later trues up its reservation.
pub fn charge<S: Store + ?Sized>(
    store: &S,
    lane: &Lane,
    place: LanePlace,
    caller: u64,
    win: u64,
    delta: i64,
) -> Result<(), StoreError> {
    update_recalled(store, lane.key_of(place).as_str(), |v| {
        let mut entries = decode(lane.tag, v);
        let changed = entries
            .iter_mut()
            .find(|e| place == LanePlace::Single || e.caller == caller)
            .is_some_and(|e| e.counts.charge(win, delta));
        (changed.then(|| encode(lane.tag, &entries)), ())
    })
}

/// Removes expired entries from one bucket's value: (what to write, how
/// many were removed).
pub fn sweep_value(tag: u32, value: Option<&[u8]>, win: u64) -> (Option<Vec<u8>>, u32) {
    let mut entries = decode(tag, value);
    let before = entries.len();
    entries.retain(|e| !e.counts.expired(win));
    let gone = (before - entries.len()) as u32;
    ((gone > 0).then(|| encode(tag, &entries)), gone)
}

/// One key's part of a sync: where its entry is and what was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Taken {
    pub place: LanePlace,
    pub caller: u64,
    /// The fleet's key (0 for the route's or the overflow counter).
    pub fleet_id: u64,
    pub sent: Sent,
}

/// A key a sync may take: where it is, and how much it needs syncing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Candidate {
    pub place: LanePlace,
    pub caller: u64,
    /// Unsent hits (0: a read).
    pub hits: u32,
    /// When it was last answered (0: never).
    pub answered_ms: u64,
}

impl Candidate {
    /// Sync order: more unsent hits first (a key with weight is what the
    /// budget is about: junk keys of one hit each cannot push a busy key
    /// out), then the longest unanswered (reads go round).
    pub fn order(&self) -> (std::cmp::Reverse<u32>, u64) {
        (std::cmp::Reverse(self.hits), self.answered_ms)
    }
}

/// Every key the lane tracks that a sync may take at `now` (it still
/// weighs, no sync in flight), read only.
pub fn scan<S: Store + ?Sized>(
    store: &S,
    lane: &Lane,
    now_ms: u64,
) -> Result<Vec<Candidate>, StoreError> {
    let win = lane.rate.window_of(now_ms);
    let mut all = Vec::new();
    for place in places(store, lane)? {
        let v = store.get(lane.key_of(place).as_str())?.0;
        for e in decode(lane.tag, v.as_deref()) {
            let live = !e.counts.expired(win);
            let idle = e.counts.pending.is_none()
                || e.counts.pending.is_some_and(|p| {
                    now_ms.saturating_sub(p.at_ms) >= crate::count::fleet::LOST_MS
                });
            if live && idle {
                let c = e.counts.at(win);
                all.push(Candidate {
                    place,
                    caller: e.caller,
                    hits: c.unsynced.saturating_add(c.carried),
                    answered_ms: c.answered_ms.unwrap_or(0),
                });
            }
        }
    }
    Ok(all)
}

fn places<S: Store + ?Sized>(store: &S, lane: &Lane) -> Result<Vec<LanePlace>, StoreError> {
    let mut places = vec![LanePlace::Single];
    if lane.table.is_some() && tracked_with(store, lane)?.0 > 0 {
        places.extend((0..lane.bucket_count()).map(LanePlace::Bucket));
    }
    Ok(places)
}

/// Takes the unsent hits of every key the lane tracks, at `now`, for a
/// sync: keys that still weigh are synced with 0 hits too (the other
/// nodes' hits are seen only that way). A key with a sync in flight is
/// skipped. Bounded by the lane: its buckets and its single counter.
pub fn take<S: Store + ?Sized>(
    store: &S,
    lane: &Lane,
    now_ms: u64,
) -> Result<Vec<Taken>, StoreError> {
    let all = scan(store, lane, now_ms)?;
    take_these(store, lane, &all, now_ms)
}

/// Takes the unsent hits of the keys `these` names (from [`scan`]), at
/// `now`: one write per bucket they are in.
pub fn take_these<S: Store + ?Sized>(
    store: &S,
    lane: &Lane,
    these: &[Candidate],
    now_ms: u64,
) -> Result<Vec<Taken>, StoreError> {
    let rate = lane.rate;
    let win = rate.window_of(now_ms);
    let mut places: Vec<LanePlace> = these.iter().map(|c| c.place).collect();
    places.sort_unstable_by_key(|p| place_order(*p));
    places.dedup();
    let mut all = Vec::new();
    for place in places {
        let callers: Vec<u64> = these
            .iter()
            .filter(|c| c.place == place)
            .map(|c| c.caller)
            .collect();
        let taken = update(store, lane.key_of(place).as_str(), |v| {
            take_from(lane.tag, rate, place, v, win, now_ms, &callers)
        })?;
        all.extend(taken);
    }
    Ok(all)
}

fn place_order(p: LanePlace) -> usize {
    match p {
        LanePlace::Single => 0,
        LanePlace::Bucket(i) => i + 1,
    }
}

fn take_from(
    tag: u32,
    rate: Rate,
    place: LanePlace,
    value: Option<&[u8]>,
    win: u64,
    now_ms: u64,
    callers: &[u64],
) -> (Option<Vec<u8>>, Vec<Taken>) {
    let mut entries = decode(tag, value);
    let mut taken = Vec::new();
    for e in entries
        .iter_mut()
        .filter(|e| !e.counts.expired(win))
        .filter(|e| place == LanePlace::Single || callers.contains(&e.caller))
    {
        if let Some(sent) = e.counts.take_unsynced(rate, now_ms) {
            taken.push(Taken {
                place,
                caller: e.caller,
                fleet_id: e.fleet_id,
                sent,
            });
        }
    }
    ((!taken.is_empty()).then(|| encode(tag, &entries)), taken)
}

/// What a sync's call said about one key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncOutcome {
    /// The fleet's count after the call, and the nodes known now.
    Count {
        fleet: u32,
        nodes: u32,
    },
    Failed(Failure),
}

/// Puts a sync's outcome back: for each key, the fleet's count from the
/// answer, or the call's failure. Keys are settled bucket by bucket, one
/// write each.
pub fn settle<S: Store + ?Sized>(
    store: &S,
    lane: &Lane,
    outcome: &[(Taken, SyncOutcome)],
    now_ms: u64,
) -> Result<(), StoreError> {
    let mut places: Vec<LanePlace> = outcome.iter().map(|(t, _)| t.place).collect();
    places.sort_unstable_by_key(|p| place_order(*p));
    places.dedup();
    for place in places {
        update(store, lane.key_of(place).as_str(), |v| {
            let mut entries = decode(lane.tag, v);
            let mut changed = false;
            for (t, count) in outcome.iter().filter(|(t, _)| t.place == place) {
                let Some(e) = entries
                    .iter_mut()
                    .find(|e| place == LanePlace::Single || e.caller == t.caller)
                else {
                    continue;
                };
                let done = match *count {
                    SyncOutcome::Count { fleet, nodes } => e
                        .counts
                        .apply_answer(lane.rate, t.sent, fleet, now_ms, nodes)
                        .is_ok(),
                    SyncOutcome::Failed(f) => {
                        e.counts.sync_failed(lane.rate, t.sent, now_ms, f).is_ok()
                    }
                };
                changed |= done;
            }
            (changed.then(|| encode(lane.tag, &entries)), ())
        })?;
    }
    Ok(())
}

/// The entry `caller` holds (tests and inspection).
pub fn peek<S: Store + ?Sized>(
    store: &S,
    lane: &Lane,
    caller: u64,
) -> Result<Option<FleetEntry>, StoreError> {
    if lane.table.is_none() {
        let v = store.get(lane.single_key())?.0;
        return Ok(decode(lane.tag, v.as_deref()).first().copied());
    }
    let (a, b) = lane.buckets_of(caller);
    for i in [a, b] {
        let v = store.get(lane.bucket_key(i).as_str())?.0;
        if let Some(e) = decode(lane.tag, v.as_deref())
            .into_iter()
            .find(|e| e.caller == caller)
        {
            return Ok(Some(e));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::count::lane::{commit, Committed, Table};
    use crate::count::store::MemStore;

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
                doubt: 18,
                ahead: 19,
            },
        };
        let bytes = encode(9, &[e, FleetEntry::default()]);
        assert_eq!(bytes.len(), 4 + 2 * ENTRY);
        assert_eq!(decode(9, Some(&bytes)), vec![e, FleetEntry::default()]);
        assert_eq!(decode(8, Some(&bytes)), vec![], "another bound's");
        assert_eq!(decode(9, Some(&bytes[..20])), vec![], "cut short");
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
}

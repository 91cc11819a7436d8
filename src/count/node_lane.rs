//! A node bound's entries in its lane ([`crate::count::lane`]): one
//! two-window count per caller and tier (an entry is the caller, then each
//! tier's window, current and previous count: 24 bytes for a lane of one
//! bound, 8 + 16 a tier), or the lane's single counter (16 bytes a tier);
//! the decision for one request, taking it back, sweeping expired callers,
//! and reading a caller's counts.
//!
//! A lane of several tiers (a route's bounds on one key, [`Lane::tiered`])
//! decides every tier from the one entry read, admits only when every tier
//! admits (each by [`Rate::decide_hits`], as separate lanes would), and
//! writes every tier's new counts with one compare-and-swap.

use crate::count::bytes::{u32_at, u64_at};
use crate::count::lane::{
    decode_live, encode_live, tagged, Lane, LaneKind, LanePlace, Prepared, Undo,
};
use crate::count::store::{update_recalled, Store, StoreError};
use crate::count::window::{Counts, Quota, Verdict};
use smallvec::{smallvec, SmallVec};

// ---- value encodings (little endian, tag first) ----

/// One tier's counts: window, current, previous.
const TIER: usize = 16;

/// An entry of a lane of `tiers` tiers: the caller, then each tier's counts.
const fn entry_len(tiers: usize) -> usize {
    8 + TIER * tiers
}

/// A caller's counts, a tier each (inline for a lane of one bound).
type TierCounts = SmallVec<[Counts; 1]>;

#[derive(Debug, Clone, PartialEq, Eq)]
struct NodeEntry {
    caller: u64,
    counts: TierCounts,
}

fn counts_at(b: &[u8], at: usize) -> Counts {
    Counts {
        win: u64_at(b, at),
        cur: u32_at(b, at + 8),
        prev: u32_at(b, at + 12),
    }
}

fn put_counts(v: &mut Vec<u8>, c: &Counts) {
    v.extend_from_slice(&c.win.to_le_bytes());
    v.extend_from_slice(&c.cur.to_le_bytes());
    v.extend_from_slice(&c.prev.to_le_bytes());
}

/// Rewrites the 16 bytes of one tier's counts in place.
fn write_counts(to: &mut [u8], c: &Counts) {
    let fields: [(usize, &[u8]); 3] = [
        (0, &c.win.to_le_bytes()),
        (8, &c.cur.to_le_bytes()),
        (12, &c.prev.to_le_bytes()),
    ];
    for (from, bytes) in fields {
        if let Some(to) = to.get_mut(from..from + bytes.len()) {
            to.copy_from_slice(bytes);
        }
    }
}

fn decode_counts(lane: &Lane, value: Option<&[u8]>) -> TierCounts {
    let n = lane.rates().len();
    match tagged(lane.tag, value, TIER * n) {
        Some(b) if b.len() == TIER * n => (0..n).map(|t| counts_at(b, t * TIER)).collect(),
        _ => smallvec![Counts::default(); n],
    }
}

fn encode_counts(lane: &Lane, counts: &[Counts]) -> Vec<u8> {
    let mut v = Vec::with_capacity(4 + TIER * counts.len());
    v.extend_from_slice(&lane.tag.to_le_bytes());
    for c in counts {
        put_counts(&mut v, c);
    }
    v
}

fn decode_bucket(lane: &Lane, value: Option<&[u8]>) -> Vec<NodeEntry> {
    let n = lane.rates().len();
    let len = entry_len(n);
    tagged(lane.tag, value, len)
        .map(|b| {
            b.chunks_exact(len)
                .map(|e| NodeEntry {
                    caller: u64_at(e, 0),
                    counts: (0..n).map(|t| counts_at(e, 8 + t * TIER)).collect(),
                })
                .collect()
        })
        .unwrap_or_default()
}

fn encode_bucket(lane: &Lane, entries: &[NodeEntry]) -> Vec<u8> {
    let n = lane.rates().len();
    let mut v = Vec::with_capacity(4 + entries.len() * entry_len(n));
    v.extend_from_slice(&lane.tag.to_le_bytes());
    for e in entries {
        v.extend_from_slice(&e.caller.to_le_bytes());
        for t in 0..n {
            put_counts(&mut v, &e.counts.get(t).copied().unwrap_or_default());
        }
    }
    v
}

/// True when none of a caller's tiers weighs on an estimate at `now_ms`:
/// its entry can be reclaimed.
fn expired(lane: &Lane, counts: &[Counts], now_ms: u64) -> bool {
    lane.rates()
        .iter()
        .zip(counts)
        .all(|(rate, c)| c.expired(rate.window_of(now_ms)))
}

// ---- the decision for one lane ----

/// What a lane's tiers say about one more request.
struct Decided {
    /// A refusal's quota is the first refusing tier's; an admission's is
    /// the tightest tier's (the fewest left, the first of equals), and its
    /// counts the first tier's.
    verdict: Verdict,
    /// Which tier the quota is.
    tier: u8,
    /// The tiers charged in the window after `now_ms`'s (see
    /// [`Prepared::at_ms`]).
    ahead: u16,
}

/// Decides one more request of `hits` units against every tier's
/// `stored` counts: admitted only when every tier admits. Each admitting
/// tier's counts to write are [`charged`]'s.
fn decide(lane: &Lane, stored: impl Fn(usize) -> Counts, now_ms: u64, hits: u32) -> Decided {
    if let [rate] = lane.rates() {
        // One bound: its verdict as it is.
        let verdict = rate.decide_hits(stored(0), now_ms, hits);
        let ahead = match verdict {
            Verdict::Admit { counts, .. } => u16::from(counts.win != rate.window_of(now_ms)),
            Verdict::Refuse { .. } => 0,
        };
        return Decided {
            verdict,
            tier: 0,
            ahead,
        };
    }
    let mut first = Counts::default();
    let mut ahead = 0u16;
    let mut tightest: Option<(usize, Quota)> = None;
    for (t, rate) in lane.rates().iter().enumerate() {
        match rate.decide_hits(stored(t), now_ms, hits) {
            Verdict::Refuse { quota } => {
                return Decided {
                    verdict: Verdict::Refuse { quota },
                    tier: t as u8,
                    ahead: 0,
                }
            }
            Verdict::Admit { counts, quota } => {
                if t == 0 {
                    first = counts;
                }
                if counts.win != rate.window_of(now_ms) {
                    ahead |= 1 << t;
                }
                if tightest.is_none_or(|(_, q)| quota.remaining < q.remaining) {
                    tightest = Some((t, quota));
                }
            }
        }
    }
    let (tier, quota) = tightest.unwrap_or((
        0,
        Quota {
            limit: lane.rate.limit,
            remaining: 0,
            reset_ms: 0,
        },
    ));
    Decided {
        verdict: Verdict::Admit {
            counts: first,
            quota,
        },
        tier: tier as u8,
        ahead,
    }
}

/// What an admitting tier of rate `rate` writes for `stored`: its counts
/// at `now_ms`'s window, charged `hits` (as [`Rate::decide_hits`] admits).
///
/// [`Rate::decide_hits`]: crate::count::window::Rate::decide_hits
fn charged(rate: &crate::count::window::Rate, stored: Counts, now_ms: u64, hits: u32) -> Counts {
    let c = stored.at(rate.window_of(now_ms));
    Counts {
        cur: c.cur.saturating_add(hits),
        ..c
    }
}

/// The prepared write of decision `d`.
struct Write {
    overflow: bool,
    place: LanePlace,
    value: Vec<u8>,
    cas: Option<u32>,
    reserve: Option<(Vec<u8>, Option<u32>)>,
}

fn prepared(d: &Decided, w: Write, (now_ms, hits): (u64, u32)) -> Prepared {
    Prepared {
        verdict: d.verdict,
        overflow: w.overflow,
        place: w.place,
        value: w.value,
        cas: w.cas,
        reserve: w.reserve,
        hits,
        tier: d.tier,
        at_ms: now_ms,
        ahead: d.ahead,
    }
}

/// Reads the counters `caller` is counted in and decides one more request.
/// Nothing is written.
pub fn prepare<S: Store + ?Sized>(
    store: &S,
    lane: &Lane,
    caller: u64,
    now_ms: u64,
) -> Result<Prepared, StoreError> {
    prepare_hits(store, lane, caller, now_ms, 1)
}

/// [`prepare`] for a request that takes `hits` units
/// ([`crate::count::window::Rate::decide_hits`]).
pub fn prepare_hits<S: Store + ?Sized>(
    store: &S,
    lane: &Lane,
    caller: u64,
    now_ms: u64,
    hits: u32,
) -> Result<Prepared, StoreError> {
    if lane.kind == LaneKind::Fleet {
        return Err(StoreError::Invalid("a fleet lane is decided by fleet_lane"));
    }
    let Some(table) = lane.table else {
        return prepare_single(store, lane, now_ms, false, hits);
    };
    let (a, b) = lane.buckets_of(caller);
    let ((mut va, mut ca), recalled) = store.recall(lane.bucket_key(a).as_str())?;
    if recalled {
        // Memory serves an admission of a caller it holds, which the write
        // will check; a refusal or an absent caller is read for real.
        match prepare_in(lane, a, &mut va, ca, caller, now_ms, hits) {
            Some(p) if p.verdict.admits() => return Ok(p),
            _ => (va, ca) = store.get(lane.bucket_key(a).as_str())?,
        }
    }
    if let Some(p) = prepare_in(lane, a, &mut va, ca, caller, now_ms, hits) {
        return Ok(p);
    }
    let (mut vb, cb) = store.get(lane.bucket_key(b).as_str())?;
    if let Some(p) = prepare_in(lane, b, &mut vb, cb, caller, now_ms, hits) {
        return Ok(p);
    }
    let ea = decode_bucket(lane, va.as_deref());
    let eb = decode_bucket(lane, vb.as_deref());
    // A new caller goes to its first bucket unless that one has no room, so
    // that finding it later costs one read. In a bucket: reclaim an expired
    // entry (the tracked count is unchanged), else take a free position if
    // the cap allows; past the cap, only expired entries are taken.
    let fresh = || NodeEntry {
        caller,
        counts: smallvec![Counts::default(); lane.rates().len()],
    };
    let mut meta: Option<(u32, Option<u32>)> = None;
    for (i, entries, cas) in [(a, ea, ca), (b, eb, cb)] {
        if let Some(pos) = entries
            .iter()
            .position(|e| expired(lane, &e.counts, now_ms))
        {
            let mut entries = entries;
            if let Some(e) = entries.get_mut(pos) {
                *e = fresh();
            }
            return Ok(admit_new(lane, i, entries, pos, cas, None, (now_ms, hits)));
        }
        if entries.len() < table.per_bucket {
            let (live, meta_cas) = match meta {
                Some(m) => m,
                None => {
                    let (v, c) = store.get(&lane.meta_key)?;
                    *meta.insert((decode_live(lane.tag, v.as_deref()), c))
                }
            };
            if live < table.cap {
                let mut entries = entries;
                entries.push(fresh());
                let pos = entries.len() - 1;
                let reserve = Some((encode_live(lane.tag, live + 1), meta_cas));
                return Ok(admit_new(
                    lane,
                    i,
                    entries,
                    pos,
                    cas,
                    reserve,
                    (now_ms, hits),
                ));
            }
        }
    }
    prepare_single(store, lane, now_ms, true, hits)
}

fn prepare_single<S: Store + ?Sized>(
    store: &S,
    lane: &Lane,
    now_ms: u64,
    overflow: bool,
    hits: u32,
) -> Result<Prepared, StoreError> {
    let decide_in = |v: Option<&[u8]>| {
        let stored = decode_counts(lane, v);
        decide(
            lane,
            |t| stored.get(t).copied().unwrap_or_default(),
            now_ms,
            hits,
        )
    };
    let ((mut v, mut cas), recalled) = store.recall(&lane.single_key)?;
    let mut d = decide_in(v.as_deref());
    if recalled && !d.verdict.admits() {
        // A refusal writes nothing, so nothing would check the memory.
        (v, cas) = store.get(&lane.single_key)?;
        d = decide_in(v.as_deref());
    }
    let value = match d.verdict {
        Verdict::Admit { counts, .. } if lane.rates().len() == 1 => encode_counts(lane, &[counts]),
        Verdict::Admit { .. } => {
            let stored = decode_counts(lane, v.as_deref());
            let counts: TierCounts = lane
                .rates()
                .iter()
                .zip(&stored)
                .map(|(rate, c)| charged(rate, *c, now_ms, hits))
                .collect();
            encode_counts(lane, &counts)
        }
        Verdict::Refuse { .. } => Vec::new(),
    };
    let w = Write {
        overflow,
        place: LanePlace::Single,
        value,
        cas,
        reserve: None,
    };
    Ok(prepared(&d, w, (now_ms, hits)))
}

/// The decision for `caller` if bucket `i` (its raw value) holds it. The
/// common path: the entry is found and rewritten in the bytes just read,
/// which become the value to write back (no copy).
fn prepare_in(
    lane: &Lane,
    i: usize,
    value: &mut Option<Vec<u8>>,
    cas: Option<u32>,
    caller: u64,
    now_ms: u64,
    hits: u32,
) -> Option<Prepared> {
    let len = entry_len(lane.rates().len());
    let entries = tagged(lane.tag, value.as_deref(), len)?;
    let at = entries
        .chunks_exact(len)
        .position(|e| u64_at(e, 0) == caller)?
        * len;
    let e = entries.get(at..at + len)?;
    let d = decide(lane, |t| counts_at(e, 8 + t * TIER), now_ms, hits);
    let value = match d.verdict {
        Verdict::Admit { counts, .. } => {
            let mut v = value.take().unwrap_or_default();
            for (t, rate) in lane.rates().iter().enumerate() {
                let from = 4 + at + 8 + t * TIER;
                if let Some(to) = v.get_mut(from..from + TIER) {
                    let c = if t == 0 {
                        counts
                    } else {
                        charged(rate, counts_at(to, 0), now_ms, hits)
                    };
                    write_counts(to, &c);
                }
            }
            v
        }
        Verdict::Refuse { .. } => Vec::new(),
    };
    let w = Write {
        overflow: false,
        place: LanePlace::Bucket(i),
        value,
        cas,
        reserve: None,
    };
    Some(prepared(&d, w, (now_ms, hits)))
}

fn admit_new(
    lane: &Lane,
    i: usize,
    mut entries: Vec<NodeEntry>,
    pos: usize,
    cas: Option<u32>,
    reserve: Option<(Vec<u8>, Option<u32>)>,
    (now_ms, hits): (u64, u32),
) -> Prepared {
    let d = decide(lane, |_| Counts::default(), now_ms, hits);
    if d.verdict.admits() {
        if let Some(e) = entries.get_mut(pos) {
            e.counts = lane
                .rates()
                .iter()
                .map(|rate| charged(rate, Counts::default(), now_ms, hits))
                .collect();
        }
    }
    let w = Write {
        overflow: false,
        place: LanePlace::Bucket(i),
        value: encode_bucket(lane, &entries),
        cas,
        reserve,
    };
    prepared(&d, w, (now_ms, hits))
}

/// Adds `delta` units to what the request `u` was charged, in each tier:
/// −hits takes a request back (a later bound refused: see
/// [`crate::count::lane_upkeep::undo`]), a cost known later trues up its
/// reservation. The units land in the window they were charged in while
/// the counts still hold it (its `cur`, or `prev` once slid once); after
/// that, in the current window, so nothing charged is lost. Never below 0.
pub(crate) fn charge<S: Store + ?Sized>(
    store: &S,
    lane: &Lane,
    u: Undo,
    delta: i64,
) -> Result<(), StoreError> {
    let add = |n: u32| -> u32 {
        let n = i64::from(n)
            .saturating_add(delta)
            .clamp(0, i64::from(u32::MAX));
        n as u32
    };
    let apply_one = |c: &mut Counts, win: u64| {
        let before = *c;
        if c.win == win {
            c.cur = add(c.cur);
        } else if c.win == win.saturating_add(1) {
            c.prev = add(c.prev);
        } else if delta > 0 && c.win > win {
            c.cur = add(c.cur);
        }
        *c != before
    };
    let apply = |counts: &mut [Counts]| {
        let mut changed = false;
        for (t, (c, rate)) in counts.iter_mut().zip(lane.rates()).enumerate() {
            changed |= apply_one(c, u.win_of(t, *rate));
        }
        changed
    };
    update_recalled(store, lane.key_of(u.place).as_str(), |v| match u.place {
        LanePlace::Single => {
            let mut c = decode_counts(lane, v);
            (apply(&mut c).then(|| encode_counts(lane, &c)), ())
        }
        LanePlace::Bucket(_) => {
            let mut entries = decode_bucket(lane, v);
            let changed = entries
                .iter_mut()
                .find(|e| e.caller == u.caller)
                .is_some_and(|e| apply(&mut e.counts));
            (changed.then(|| encode_bucket(lane, &entries)), ())
        }
    })
}

/// A bucket's value without the callers whose every tier expired by
/// `now_ms`, if any were, and how many.
pub(crate) fn sweep_value(
    lane: &Lane,
    value: Option<&[u8]>,
    now_ms: u64,
) -> (Option<Vec<u8>>, u32) {
    let len = entry_len(lane.rates().len());
    let Some(entries) = tagged(lane.tag, value, len) else {
        return (None, 0);
    };
    // On the raw bytes: most sweeps find nothing and copy nothing.
    let gone_at = |e: &[u8]| {
        lane.rates()
            .iter()
            .enumerate()
            .all(|(t, rate)| counts_at(e, 8 + t * TIER).expired(rate.window_of(now_ms)))
    };
    let gone = entries.chunks_exact(len).filter(|e| gone_at(e)).count() as u32;
    if gone == 0 {
        return (None, 0);
    }
    let mut v = Vec::with_capacity(entries.len() + 4);
    v.extend_from_slice(&lane.tag.to_le_bytes());
    for e in entries.chunks_exact(len).filter(|e| !gone_at(e)) {
        v.extend_from_slice(e);
    }
    (Some(v), gone)
}

/// The counts a caller currently holds (for tests and the CLI's
/// inspection): the first tier's.
pub fn peek<S: Store + ?Sized>(
    store: &S,
    lane: &Lane,
    caller: u64,
) -> Result<Option<Counts>, StoreError> {
    peek_tier(store, lane, caller, 0)
}

/// The counts a caller currently holds in tier `t` of the lane.
pub fn peek_tier<S: Store + ?Sized>(
    store: &S,
    lane: &Lane,
    caller: u64,
    t: usize,
) -> Result<Option<Counts>, StoreError> {
    if lane.table.is_none() {
        let counts = decode_counts(lane, store.get(&lane.single_key)?.0.as_deref());
        return Ok(counts.get(t).copied());
    }
    let (a, b) = lane.buckets_of(caller);
    for i in [a, b] {
        let key = lane.bucket_key(i);
        let entries = decode_bucket(lane, store.get(key.as_str())?.0.as_deref());
        if let Some(e) = entries.iter().find(|e| e.caller == caller) {
            return Ok(e.counts.get(t).copied());
        }
    }
    Ok(None)
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::*;
    use crate::count::lane::{commit, Committed, TWO_BY_TWO};
    use crate::count::store::MemStore;
    use crate::count::window::Rate;

    /// Two buckets of two: every caller's buckets are 0 and 1, an even
    /// caller's first is 0.
    fn lane(s: &MemStore) -> Lane {
        let rate = Rate {
            limit: 100,
            window_ms: 60_000,
        };
        let l = Lane::new("t", 7, rate, Some(TWO_BY_TWO));
        l.create_keys(s).unwrap();
        l
    }

    fn hit(s: &MemStore, l: &Lane, caller: u64, now: u64) {
        let p = prepare(s, l, caller, now).unwrap();
        assert!(matches!(
            commit(s, l, caller, &p).unwrap(),
            Committed::Done(_)
        ));
    }

    fn cur(s: &MemStore, l: &Lane, caller: u64) -> Option<u32> {
        peek(s, l, caller).unwrap().map(|c| c.cur)
    }

    /// Callers that share a bucket each count in their own entry,
    /// whichever place in the bucket they hold.
    #[test]
    fn callers_sharing_a_bucket_each_count_in_their_own_entry() {
        let s = MemStore::new();
        let l = lane(&s);
        for (caller, n) in [(2, 3), (4, 2)] {
            for k in 0..n {
                hit(&s, &l, caller, 1_000 + k);
            }
        }
        assert_eq!((cur(&s, &l, 2), cur(&s, &l, 4)), (Some(3), Some(2)));
        hit(&s, &l, 4, 2_000);
        assert_eq!((cur(&s, &l, 2), cur(&s, &l, 4)), (Some(3), Some(3)));
    }

    /// A caller whose two buckets are full is not tracked (it counts in
    /// the overflow counter), however much room the table's cap leaves.
    #[test]
    fn a_caller_whose_buckets_are_full_is_not_tracked() {
        let s = MemStore::new();
        let l = lane(&s);
        for caller in [2, 4, 6, 8] {
            hit(&s, &l, caller, 1_000);
            assert_eq!(cur(&s, &l, caller), Some(1));
        }
        hit(&s, &l, 10, 1_000);
        assert_eq!(cur(&s, &l, 10), None);
        assert_eq!(crate::count::lane::tracked(&s, &l).unwrap(), 4);
    }

    /// A cost known after the admission's window: charged to the window
    /// that still holds the admission, else (more) to the current one, so
    /// nothing charged is lost; a refund once the admission slid out of
    /// the counts takes nothing from later requests.
    #[test]
    fn a_late_charge_is_never_lost_and_a_late_refund_takes_nothing() {
        let s = MemStore::new();
        let l = lane(&s);
        let at = LanePlace::Bucket(0);
        hit(&s, &l, 2, 1_000); // window 0
        hit(&s, &l, 2, 130_000); // window 2: the admission slid out
        let counts = |s: &MemStore| peek(s, &l, 2).unwrap().unwrap();
        assert_eq!((counts(&s).win, counts(&s).cur), (2, 1));
        let u = |win| Undo {
            place: at,
            caller: 2,
            win,
            hits: 1,
            at_ms: 0,
            ahead: 0,
        };
        charge(&s, &l, u(0), -1).unwrap();
        assert_eq!(counts(&s).cur, 1, "a refund of window 0 takes nothing");
        charge(&s, &l, u(0), 5).unwrap();
        assert_eq!(counts(&s).cur, 6, "a charge of window 0 lands now");
        charge(&s, &l, u(1), 2).unwrap();
        assert_eq!(
            (counts(&s).prev, counts(&s).cur),
            (2, 6),
            "window 1 is prev"
        );
        charge(&s, &l, u(2), -4).unwrap();
        assert_eq!(counts(&s).cur, 2);
    }

    /// A sweep writes only when it removed a caller whose counts expired.
    #[test]
    fn a_sweep_writes_only_what_it_removed() {
        let s = MemStore::new();
        let l = lane(&s);
        hit(&s, &l, 2, 1_000);
        hit(&s, &l, 4, 70_000);
        let (v, _) = s.get(l.bucket_key(0).as_str()).unwrap();
        assert_eq!(
            sweep_value(&l, v.as_deref(), 60_000),
            (None, 0),
            "both live"
        );
        let (swept, gone) = sweep_value(&l, v.as_deref(), 120_000);
        assert_eq!(gone, 1);
        let left = decode_bucket(&l, swept.as_deref());
        assert_eq!(left.iter().map(|e| e.caller).collect::<Vec<_>>(), [4]);
    }

    /// A request taken back from a lane of tiers (a later bound refused
    /// after a race) leaves every tier as it was, each in the window it
    /// was charged in; a cost trued up lands in every tier.
    #[test]
    fn a_take_back_from_a_lane_of_tiers_leaves_every_tier_as_it_was() {
        use crate::count::lane_upkeep;
        let s = MemStore::new();
        let rates = [
            Rate {
                limit: 10,
                window_ms: 1_000,
            },
            Rate {
                limit: 300,
                window_ms: 60_000,
            },
            Rate {
                limit: 5_000,
                window_ms: 3_600_000,
            },
        ];
        for table in [Some(TWO_BY_TWO), None] {
            let l = Lane::tiered("t", 9, &rates, table);
            l.create_keys(&s).unwrap();
            let t = 3_600_000 * 7 + 61_500;
            let caller = if table.is_some() { 2 } else { 0 };
            let record = |now| {
                let p = prepare(&s, &l, caller, now).unwrap();
                match commit(&s, &l, caller, &p).unwrap() {
                    Committed::Done(u) => u,
                    Committed::Stale => panic!("stale"),
                }
            };
            record(t);
            let u = record(t + 10);
            let tiers = |s: &MemStore| -> Vec<u32> {
                (0..3)
                    .map(|i| peek_tier(s, &l, caller, i).unwrap().unwrap().cur)
                    .collect()
            };
            assert_eq!(tiers(&s), [2, 2, 2]);
            lane_upkeep::undo(&s, &l, u).unwrap();
            assert_eq!(tiers(&s), [1, 1, 1]);
            // A second on, the first tier slid: the minute and the hour
            // still hold the request, the second's `prev` does.
            let u = record(t + 1_000);
            lane_upkeep::true_up(&s, &l, u, 4).unwrap();
            assert_eq!(tiers(&s), [4, 5, 5]);
            let prev = peek_tier(&s, &l, caller, 0).unwrap().unwrap().prev;
            assert_eq!(prev, 1);
        }
    }

    /// The single counter is read only from a value of its own layout.
    #[test]
    fn a_counter_of_another_layout_reads_as_empty() {
        let c = Counts {
            win: 9,
            cur: 4,
            prev: 2,
        };
        let rate = Rate {
            limit: 5,
            window_ms: 1_000,
        };
        let l = Lane::new("t", 7, rate, None);
        let other = Lane::new("t", 8, rate, None);
        let v = encode_counts(&l, &[c]);
        assert_eq!(decode_counts(&l, Some(&v))[..], [c]);
        let mut two = v.clone();
        two.extend_from_slice(&v[4..]);
        assert_eq!(decode_counts(&l, Some(&two))[..], [Counts::default()]);
        assert_eq!(decode_counts(&other, Some(&v))[..], [Counts::default()]);
        // Two tiers read a value of one as empty, and one tier a value of two.
        let tiers = Lane::tiered("t", 7, &[rate, rate], None);
        assert_eq!(decode_counts(&tiers, Some(&v))[..], [Counts::default(); 2]);
        assert_eq!(
            decode_counts(&l, Some(&encode_counts(&tiers, &[c, c])))[..],
            [Counts::default()]
        );
    }
}

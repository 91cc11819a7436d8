//! A node bound's entries in its lane ([`crate::count::lane`]): one
//! two-window count per caller (24 bytes: caller, window, current,
//! previous), or the lane's single counter; the decision for one request,
//! taking it back, sweeping expired callers, and reading a caller's counts.

use crate::count::bytes::{u32_at, u64_at};
use crate::count::lane::{decode_live, encode_live, tagged, Lane, LaneKind, LanePlace, Prepared};
use crate::count::store::{update_recalled, Store, StoreError};
use crate::count::window::{Counts, Verdict};

// ---- value encodings (little endian, tag first) ----

const ENTRY: usize = 24;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct NodeEntry {
    caller: u64,
    counts: Counts,
}

fn decode_counts(tag: u32, value: Option<&[u8]>) -> Counts {
    match tagged(tag, value, 16) {
        Some(b) if b.len() == 16 => Counts {
            win: u64_at(b, 0),
            cur: u32_at(b, 8),
            prev: u32_at(b, 12),
        },
        _ => Counts::default(),
    }
}

fn encode_counts(tag: u32, c: Counts) -> Vec<u8> {
    let mut v = Vec::with_capacity(20);
    v.extend_from_slice(&tag.to_le_bytes());
    v.extend_from_slice(&c.win.to_le_bytes());
    v.extend_from_slice(&c.cur.to_le_bytes());
    v.extend_from_slice(&c.prev.to_le_bytes());
    v
}

fn decode_bucket(tag: u32, value: Option<&[u8]>) -> Vec<NodeEntry> {
    tagged(tag, value, ENTRY)
        .map(|b| {
            b.chunks_exact(ENTRY)
                .map(|e| NodeEntry {
                    caller: u64_at(e, 0),
                    counts: Counts {
                        win: u64_at(e, 8),
                        cur: u32_at(e, 16),
                        prev: u32_at(e, 20),
                    },
                })
                .collect()
        })
        .unwrap_or_default()
}

fn encode_bucket(tag: u32, entries: &[NodeEntry]) -> Vec<u8> {
    let mut v = Vec::with_capacity(4 + entries.len() * ENTRY);
    v.extend_from_slice(&tag.to_le_bytes());
    for e in entries {
        v.extend_from_slice(&e.caller.to_le_bytes());
        v.extend_from_slice(&e.counts.win.to_le_bytes());
        v.extend_from_slice(&e.counts.cur.to_le_bytes());
        v.extend_from_slice(&e.counts.prev.to_le_bytes());
    }
    v
}

// ---- the decision for one bound ----

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
    let ea = decode_bucket(lane.tag, va.as_deref());
    let eb = decode_bucket(lane.tag, vb.as_deref());
    // A new caller goes to its first bucket unless that one has no room, so
    // that finding it later costs one read. In a bucket: reclaim an expired
    // entry (the tracked count is unchanged), else take a free position if
    // the cap allows; past the cap, only expired entries are taken.
    let win = lane.rate.window_of(now_ms);
    let mut meta: Option<(u32, Option<u32>)> = None;
    for (i, entries, cas) in [(a, ea, ca), (b, eb, cb)] {
        if let Some(pos) = entries.iter().position(|e| e.counts.expired(win)) {
            let mut entries = entries;
            if let Some(e) = entries.get_mut(pos) {
                *e = NodeEntry {
                    caller,
                    counts: Counts::default(),
                };
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
                entries.push(NodeEntry {
                    caller,
                    counts: Counts::default(),
                });
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
    let decide = |v: Option<&[u8]>| {
        lane.rate
            .decide_hits(decode_counts(lane.tag, v), now_ms, hits)
    };
    let ((mut v, mut cas), recalled) = store.recall(&lane.single_key)?;
    let mut verdict = decide(v.as_deref());
    if recalled && !verdict.admits() {
        // A refusal writes nothing, so nothing would check the memory.
        (v, cas) = store.get(&lane.single_key)?;
        verdict = decide(v.as_deref());
    }
    let value = match verdict {
        Verdict::Admit { counts, .. } => encode_counts(lane.tag, counts),
        Verdict::Refuse { .. } => Vec::new(),
    };
    Ok(Prepared {
        verdict,
        overflow,
        place: LanePlace::Single,
        value,
        cas,
        reserve: None,
        hits,
    })
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
    let entries = tagged(lane.tag, value.as_deref(), ENTRY)?;
    let at = entries
        .chunks_exact(ENTRY)
        .position(|e| u64_at(e, 0) == caller)?
        * ENTRY;
    let e = entries.get(at..at + ENTRY)?;
    let stored = Counts {
        win: u64_at(e, 8),
        cur: u32_at(e, 16),
        prev: u32_at(e, 20),
    };
    let verdict = lane.rate.decide_hits(stored, now_ms, hits);
    let value = match verdict {
        Verdict::Admit { counts, .. } => {
            let mut v = value.take().unwrap_or_default();
            let at = 4 + at;
            let fields: [(usize, &[u8]); 3] = [
                (at + 8, &counts.win.to_le_bytes()),
                (at + 16, &counts.cur.to_le_bytes()),
                (at + 20, &counts.prev.to_le_bytes()),
            ];
            for (from, bytes) in fields {
                if let Some(to) = v.get_mut(from..from + bytes.len()) {
                    to.copy_from_slice(bytes);
                }
            }
            v
        }
        Verdict::Refuse { .. } => Vec::new(),
    };
    Some(Prepared {
        verdict,
        overflow: false,
        place: LanePlace::Bucket(i),
        value,
        cas,
        reserve: None,
        hits,
    })
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
    let verdict = lane.rate.decide_hits(Counts::default(), now_ms, hits);
    if let Verdict::Admit { counts, .. } = verdict {
        if let Some(e) = entries.get_mut(pos) {
            e.counts = counts;
        }
    }
    Prepared {
        verdict,
        overflow: false,
        place: LanePlace::Bucket(i),
        value: encode_bucket(lane.tag, &entries),
        cas,
        reserve,
        hits,
    }
}

/// Adds `delta` units to what `caller` was charged at `place` in window
/// `win`: −hits takes a request back (a later bound refused: see
/// [`crate::count::lane_upkeep::undo`]), a cost known later trues up its
/// reservation. The units land in the window they were charged in while
/// the counts still hold it (its `cur`, or `prev` once slid once); after
/// that, in the current window, so nothing charged is lost. Never below 0.
pub(crate) fn charge<S: Store + ?Sized>(
    store: &S,
    lane: &Lane,
    place: LanePlace,
    caller: u64,
    win: u64,
    delta: i64,
) -> Result<(), StoreError> {
    let add = |n: u32| -> u32 {
        let n = i64::from(n)
            .saturating_add(delta)
            .clamp(0, i64::from(u32::MAX));
        n as u32
    };
    let apply = |c: &mut Counts| {
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
    update_recalled(store, lane.key_of(place).as_str(), |v| match place {
        LanePlace::Single => {
            let mut c = decode_counts(lane.tag, v);
            (apply(&mut c).then(|| encode_counts(lane.tag, c)), ())
        }
        LanePlace::Bucket(_) => {
            let mut entries = decode_bucket(lane.tag, v);
            let changed = entries
                .iter_mut()
                .find(|e| e.caller == caller)
                .is_some_and(|e| apply(&mut e.counts));
            (changed.then(|| encode_bucket(lane.tag, &entries)), ())
        }
    })
}

/// A bucket's value without the callers expired by window `win`, if any
/// were, and how many.
pub(crate) fn sweep_value(tag: u32, value: Option<&[u8]>, win: u64) -> (Option<Vec<u8>>, u32) {
    let mut entries = decode_bucket(tag, value);
    let before = entries.len();
    entries.retain(|e| !e.counts.expired(win));
    let gone = (before - entries.len()) as u32;
    ((gone > 0).then(|| encode_bucket(tag, &entries)), gone)
}

/// The counts a caller currently holds (for tests and the CLI's inspection).
pub fn peek<S: Store + ?Sized>(
    store: &S,
    lane: &Lane,
    caller: u64,
) -> Result<Option<Counts>, StoreError> {
    if lane.table.is_none() {
        return Ok(Some(decode_counts(
            lane.tag,
            store.get(&lane.single_key)?.0.as_deref(),
        )));
    }
    let (a, b) = lane.buckets_of(caller);
    for i in [a, b] {
        let key = lane.bucket_key(i);
        let entries = decode_bucket(lane.tag, store.get(key.as_str())?.0.as_deref());
        if let Some(e) = entries.iter().find(|e| e.caller == caller) {
            return Ok(Some(e.counts));
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
        charge(&s, &l, at, 2, 0, -1).unwrap();
        assert_eq!(counts(&s).cur, 1, "a refund of window 0 takes nothing");
        charge(&s, &l, at, 2, 0, 5).unwrap();
        assert_eq!(counts(&s).cur, 6, "a charge of window 0 lands now");
        charge(&s, &l, at, 2, 1, 2).unwrap();
        assert_eq!(
            (counts(&s).prev, counts(&s).cur),
            (2, 6),
            "window 1 is prev"
        );
        charge(&s, &l, at, 2, 2, -4).unwrap();
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
        assert_eq!(sweep_value(7, v.as_deref(), 1), (None, 0), "both live");
        let (swept, gone) = sweep_value(7, v.as_deref(), 2);
        assert_eq!(gone, 1);
        let left = decode_bucket(7, swept.as_deref());
        assert_eq!(left.iter().map(|e| e.caller).collect::<Vec<_>>(), [4]);
    }

    /// The single counter is read only from a value of its own layout.
    #[test]
    fn a_counter_of_another_layout_reads_as_empty() {
        let c = Counts {
            win: 9,
            cur: 4,
            prev: 2,
        };
        let v = encode_counts(7, c);
        assert_eq!(decode_counts(7, Some(&v)), c);
        let mut two = v.clone();
        two.extend_from_slice(&v[4..]);
        assert_eq!(decode_counts(7, Some(&two)), Counts::default());
        assert_eq!(decode_counts(8, Some(&v)), Counts::default());
    }
}

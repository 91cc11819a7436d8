//! The fleet sync's side of a fleet lane: which keys a sync may take, taking
//! their unsent hits, and putting the service's counts back, with
//! compare-and-swap against the request path's writes.

use super::{decode, encode};
use crate::count::fleet::{Failure, Sent};
use crate::count::lane::{tracked_with, Lane, LanePlace};
use crate::count::store::{update, Store, StoreError};
use crate::count::window::Rate;

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

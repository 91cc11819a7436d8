//! Where a fleet bound's counts live: a [`Lane`] like a node bound's (the
//! same keys, buckets, cap and overflow counter), whose entries are whole
//! [`FleetCounts`] instead of two-window counts, each with the key the
//! fleet knows the caller by.
//!
//! The request path ([`prepare`]) reads and decides as a node bound does,
//! from shared data only. The sync ([`take`], then [`settle`] with the
//! service's answer) takes every tracked key's unsent hits and puts the
//! fleet's counts back, with compare-and-swap: requests and the sync write
//! the same values. This file holds the entries and the request path;
//! `sync` the sync's side.
//!
//! A known caller's entry (104 bytes) is decoded and rewritten in place in
//! the bucket's bytes, as the node path does.

mod sync;

pub use sync::{scan, settle, take, take_these, Candidate, SyncOutcome, Taken};

use crate::count::bytes::{u32_at, u64_at};
use crate::count::fleet::{FleetCounts, FleetRate, FleetVerdict, Sent};
use crate::count::lane::{encode_live_for, tracked_with, Lane, LanePlace, Prepared};
use crate::count::store::{update_recalled, Store, StoreError};
use crate::count::window::{Counts, Verdict};

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
/// `FleetCounts::hold`. A module before it reads the flag as unset (it
/// sends the held hits at once, as for a call that never left) and writes
/// it unset: the layout is the same either way.
const HOLD: u32 = 4;

fn decode_entry(e: &[u8]) -> FleetEntry {
    let flags = u32_at(e, 88);
    let mut entry = FleetEntry {
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
            ahead: u32_at(e, 100),
            hold: flags & HOLD != 0,
        },
    };
    // Bytes 96..100 held `doubt` before issue 38: hits of timed-out syncs
    // never sent again. Written by an older module, they are sent again
    // the new way (held until an answer). Written as 0 since.
    let doubt = u32_at(e, 96);
    if doubt > 0 {
        entry.counts.unsynced = entry.counts.unsynced.saturating_add(doubt);
        entry.counts.hold = true;
    }
    entry
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
        | if c.answered_ms.is_some() { ANSWERED } else { 0 }
        | if c.hold { HOLD } else { 0 };
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
    // Once `doubt` (see `decode_entry`).
    put(&0u32.to_le_bytes());
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
pub(crate) fn sweep_value(tag: u32, value: Option<&[u8]>, win: u64) -> (Option<Vec<u8>>, u32) {
    let mut entries = decode(tag, value);
    let before = entries.len();
    entries.retain(|e| !e.counts.expired(win));
    let gone = (before - entries.len()) as u32;
    ((gone > 0).then(|| encode(tag, &entries)), gone)
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
mod tests;

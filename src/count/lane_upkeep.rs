//! What works on a lane whatever kind of entry it holds (node or fleet):
//! taking a counted request back, sweeping expired callers out.

use crate::count::lane::{release, Lane, LaneKind, Undo};
use crate::count::store::{update, Store, StoreError};
use crate::count::{fleet_lane, node_lane};

/// Takes back one request recorded by [`commit`](crate::count::lane::commit)
/// (a later bound refused).
pub(crate) fn undo<S: Store + ?Sized>(store: &S, lane: &Lane, u: Undo) -> Result<(), StoreError> {
    charge(store, lane, u, -i64::from(u.hits))
}

/// Charges a request recorded by [`commit`](crate::count::lane::commit)
/// with `u.hits` units its known `cost` instead: the difference lands
/// where the reservation did (see [`node_lane::charge`]).
pub fn true_up<S: Store + ?Sized>(
    store: &S,
    lane: &Lane,
    u: Undo,
    cost: u32,
) -> Result<(), StoreError> {
    let delta = i64::from(cost) - i64::from(u.hits);
    if delta == 0 {
        return Ok(());
    }
    charge(store, lane, u, delta)
}

/// Adds `delta` units where `u` was charged, in the lane's kind of entry.
fn charge<S: Store + ?Sized>(
    store: &S,
    lane: &Lane,
    u: Undo,
    delta: i64,
) -> Result<(), StoreError> {
    match lane.kind {
        LaneKind::Fleet => fleet_lane::charge(store, lane, u.place, u.caller, u.win, delta),
        LaneKind::Node => node_lane::charge(store, lane, u, delta),
    }
}

/// Removes expired callers from buckets `range` and shrinks the tracked
/// count to match. Returns how many were removed.
pub fn sweep<S: Store + ?Sized>(
    store: &S,
    lane: &Lane,
    range: std::ops::Range<usize>,
    now_ms: u64,
) -> Result<u32, StoreError> {
    if lane.table.is_none() {
        return Ok(0);
    }
    let win = lane.rate.window_of(now_ms);
    let value_of = |v: Option<&[u8]>| match lane.kind {
        LaneKind::Fleet => fleet_lane::sweep_value(lane.tag, v, win),
        LaneKind::Node => node_lane::sweep_value(lane, v, now_ms),
    };
    let mut removed = 0u32;
    for i in range.filter(|i| *i < lane.bucket_count()) {
        removed += update(store, lane.bucket_key(i).as_str(), &value_of)?;
    }
    if removed > 0 {
        release(store, lane, removed)?;
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::count::lane::Table;
    use crate::count::store::MemStore;
    use crate::count::window::Rate;

    /// The node sweeps in chunks of a fixed number of buckets: a chunk that
    /// runs past the table's end reads only the table's own buckets.
    #[test]
    fn a_sweep_past_the_tables_end_reads_only_its_buckets() {
        let s = MemStore::new();
        let table = Table {
            buckets: 16,
            per_bucket: 4,
            cap: 32,
        };
        let rate = Rate {
            limit: 5,
            window_ms: 1_000,
        };
        let l = Lane::new("t:0", 1, rate, Some(table));
        l.create_keys(&s).unwrap();
        let reads = s.reads();
        assert_eq!(sweep(&s, &l, 0..256, 600_000).unwrap(), 0);
        assert_eq!(s.reads() - reads, 16);
    }
}

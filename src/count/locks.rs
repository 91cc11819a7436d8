//! Callers the rate-limit service has locked out, remembered in shared
//! data until the window it locked them in ends: a locked account's
//! further attempts are refused on this node without a call, a Redis write
//! or a count (the seed: a refusal is counted by no bound).
//!
//! Exact, not a guess. The service counts fixed windows aligned to the
//! clock, and within one a count only grows: once it has said the count is
//! at its limit (OK with 0 remaining) or over it (OVER_LIMIT), every later
//! call in the same window would be refused. A lock lasts until the
//! earlier of the horizon the service gave and the end of the clock window
//! it was in, so the next window's first attempt is asked about again.
//!
//! A lock is named by a keyed hash of the bound's descriptor, the caller's
//! key, the limit and the window (`id`): a bound edited to another limit
//! never inherits a lock. The table is a fixed set of [`SLOTS`] shared-data
//! keys per instance (keys can never be deleted), each holding at most
//! [`PER_SLOT`] locks; a full slot forgets the lock that ends first, which
//! only costs that caller one more call.

use crate::count::bytes::u64_at;
use crate::count::store::{update, Store, StoreError};

/// Shared-data keys of an instance's lock table.
pub(crate) const SLOTS: u64 = 64;
/// Locks one key holds (16 bytes each).
pub(crate) const PER_SLOT: usize = 32;
const ENTRY: usize = 16;

/// The shared-data key that holds lock `id` of `instance`.
pub(crate) fn slot_key(instance: &str, id: u64) -> String {
    format!("ratebound:{instance}:locks:{}", id % SLOTS)
}

/// Until when lock `id` stands, if it stands at `now_ms`.
pub fn until<S: Store + ?Sized>(
    store: &S,
    key: &str,
    id: u64,
    now_ms: u64,
) -> Result<Option<u64>, StoreError> {
    let (value, _) = store.get(key)?;
    let found = entries(value.as_deref().unwrap_or_default())
        .find(|(i, until)| *i == id && *until > now_ms)
        .map(|(_, until)| until);
    Ok(found)
}

/// Locks `id` until `until_ms` (a lock already there is extended, never
/// shortened); drops locks that ended.
pub fn lock<S: Store + ?Sized>(
    store: &S,
    key: &str,
    id: u64,
    until_ms: u64,
    now_ms: u64,
) -> Result<(), StoreError> {
    update(store, key, |value| {
        let mut kept: Vec<(u64, u64)> = entries(value.unwrap_or_default())
            .filter(|(_, until)| *until > now_ms)
            .collect();
        match kept.iter_mut().find(|(i, _)| *i == id) {
            Some(e) if e.1 >= until_ms => return (None, ()),
            Some(e) => e.1 = until_ms,
            None => {
                if kept.len() >= PER_SLOT {
                    // Forget the lock that ends first.
                    kept.sort_unstable_by_key(|(_, until)| std::cmp::Reverse(*until));
                    kept.truncate(PER_SLOT - 1);
                }
                kept.push((id, until_ms));
            }
        }
        let mut out = Vec::with_capacity(kept.len() * ENTRY);
        for (i, until) in kept {
            out.extend_from_slice(&i.to_le_bytes());
            out.extend_from_slice(&until.to_le_bytes());
        }
        (Some(out), ())
    })
}

fn entries(bytes: &[u8]) -> impl Iterator<Item = (u64, u64)> + '_ {
    bytes
        .chunks_exact(ENTRY)
        .map(|e| (u64_at(e, 0), u64_at(e, 8)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::count::store::MemStore;

    #[test]
    fn a_lock_stands_until_it_ends_and_is_never_shortened() {
        let s = MemStore::new();
        let k = slot_key("shop", 7);
        assert_eq!(until(&s, &k, 7, 0).unwrap(), None);
        lock(&s, &k, 7, 5_000, 1_000).unwrap();
        assert_eq!(until(&s, &k, 7, 4_999).unwrap(), Some(5_000));
        assert_eq!(until(&s, &k, 7, 5_000).unwrap(), None, "ended");
        assert_eq!(until(&s, &k, 8, 2_000).unwrap(), None, "another id");
        lock(&s, &k, 7, 3_000, 2_000).unwrap();
        assert_eq!(until(&s, &k, 7, 4_000).unwrap(), Some(5_000));
        lock(&s, &k, 7, 9_000, 2_000).unwrap();
        assert_eq!(until(&s, &k, 7, 8_000).unwrap(), Some(9_000));
    }

    #[test]
    fn a_full_slot_forgets_the_lock_that_ends_first_and_ended_ones() {
        let s = MemStore::new();
        let k = slot_key("shop", 0);
        for i in 0..PER_SLOT as u64 {
            lock(&s, &k, i, 10_000 + i, 0).unwrap();
        }
        lock(&s, &k, 999, 20_000, 0).unwrap();
        assert_eq!(until(&s, &k, 0, 1).unwrap(), None, "ended first: forgotten");
        assert_eq!(until(&s, &k, 1, 1).unwrap(), Some(10_001));
        assert_eq!(until(&s, &k, 999, 1).unwrap(), Some(20_000));
        // Past them all, only the new lock is kept.
        lock(&s, &k, 5, 40_000, 30_000).unwrap();
        let (v, _) = s.get(&k).unwrap();
        assert_eq!(v.unwrap().len(), ENTRY);
        // A lock that ends at the moment of the next write has ended: it
        // is dropped then, as it stops counting then.
        lock(&s, &k, 6, 50_000, 40_000).unwrap();
        let (v, _) = s.get(&k).unwrap();
        assert_eq!(v.unwrap().len(), ENTRY);
        assert_eq!(until(&s, &k, 6, 40_000).unwrap(), Some(50_000));
    }

    #[test]
    fn the_table_is_a_fixed_set_of_keys() {
        let keys: std::collections::HashSet<String> = (0..10_000u64)
            .map(|i| slot_key("shop", i.wrapping_mul(0x9e37_79b9)))
            .collect();
        assert_eq!(keys.len() as u64, SLOTS);
    }
}

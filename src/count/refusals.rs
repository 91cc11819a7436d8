//! A worker's memory of the callers it has just refused, so that a caller
//! hammering while refused is refused again without a shared-data read until
//! the instant its estimate admits one more request.
//!
//! Exact, not an approximation: a refusal is remembered until `now + wait`,
//! the shortest wait after which the counts it was decided on admit again
//! (`Rate::wait_ms`). Until then those counts can only grow — every worker
//! refuses the same caller, so nobody adds to them but the window sliding
//! on — and the shared counters would refuse too. Only two things lower a
//! count early, and both are left to the store: an overflow refusal (the
//! caller may be given its own entry before then, so it is not remembered),
//! and a request taken back after a race with a later bound (a refusal
//! decided while that request was counted may be remembered up to its wait).
//!
//! Fixed size and direct-mapped: a collision forgets the older refusal,
//! which only costs the next request its shared-data read.

use crate::count::window::Quota;

/// Remembered refusals per worker and configuration (40 bytes each).
const SLOTS: usize = 1_024;

#[derive(Debug, Clone, Copy, Default)]
struct RefusalSlot {
    /// The bound's place in its plan (`BoundTable::place`) + 1; 0 is an
    /// empty slot.
    bound: u64,
    caller: u64,
    /// Refused at `since_ms`, admitted again from `until_ms`.
    since_ms: u64,
    until_ms: u64,
    limit: u32,
}

pub(crate) struct Refusals {
    slots: Vec<RefusalSlot>,
}

impl Default for Refusals {
    fn default() -> Self {
        Refusals {
            slots: vec![RefusalSlot::default(); SLOTS],
        }
    }
}

fn bound_id(place: usize) -> u64 {
    place as u64 + 1
}

impl Refusals {
    fn index(id: u64, caller: u64) -> usize {
        let h =
            (caller ^ id.wrapping_mul(0x9e37_79b9_7f4a_7c15)).wrapping_mul(0xff51_afd7_ed55_8ccd);
        (h >> 54) as usize % SLOTS
    }

    /// The refusal the bound at `place` gave `caller` and still stands at
    /// `now_ms`, with the wait left.
    pub fn get(&self, place: usize, caller: u64, now_ms: u64) -> Option<Quota> {
        let id = bound_id(place);
        let s = self.slots.get(Self::index(id, caller))?;
        let stands =
            s.bound == id && s.caller == caller && (s.since_ms..s.until_ms).contains(&now_ms);
        stands.then(|| Quota {
            limit: s.limit,
            remaining: 0,
            reset_ms: s.until_ms - now_ms,
        })
    }

    /// Remembers that the bound at `place` refused `caller` at `now_ms`
    /// with `quota`.
    pub fn insert(&mut self, place: usize, caller: u64, now_ms: u64, quota: Quota) {
        if quota.remaining != 0 || quota.reset_ms == 0 {
            return;
        }
        let id = bound_id(place);
        if let Some(s) = self.slots.get_mut(Self::index(id, caller)) {
            *s = RefusalSlot {
                bound: id,
                caller,
                since_ms: now_ms,
                until_ms: now_ms.saturating_add(quota.reset_ms),
                limit: quota.limit,
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(reset_ms: u64) -> Quota {
        Quota {
            limit: 5,
            remaining: 0,
            reset_ms,
        }
    }

    #[test]
    fn remembered_until_the_wait_is_over_and_no_longer() {
        let mut r = Refusals::default();
        r.insert(1, 42, 1_000, q(250));
        assert_eq!(r.get(1, 42, 1_000), Some(q(250)));
        assert_eq!(r.get(1, 42, 1_249), Some(q(1)));
        assert_eq!(r.get(1, 42, 1_250), None);
        // A clock seen going back does not stretch the wait.
        assert_eq!(r.get(1, 42, 999), None);
    }

    #[test]
    fn only_for_the_same_bound_and_caller() {
        let mut r = Refusals::default();
        r.insert(1, 42, 0, q(100));
        assert_eq!(r.get(1, 43, 0), None);
        assert_eq!(r.get(0, 42, 0), None);
        assert_eq!(r.get(2, 42, 0), None);
    }

    /// Route-wide bounds all count their callers under key 0: the bound
    /// alone must spread them over the slots, or each route's refusal
    /// would forget the last one's.
    #[test]
    fn route_wide_refusals_of_different_bounds_are_all_remembered() {
        let mut r = Refusals::default();
        for place in 0..8 {
            r.insert(place, 0, 0, q(100));
        }
        let kept = (0..8).filter(|&place| r.get(place, 0, 0).is_some()).count();
        assert!(kept >= 7, "{kept} of 8 remembered");
    }

    #[test]
    fn a_collision_forgets_rather_than_confuses() {
        let mut r = Refusals::default();
        for caller in 0..(4 * SLOTS as u64) {
            r.insert(0, caller, 0, q(100));
        }
        let kept = (0..(4 * SLOTS as u64))
            .filter(|c| r.get(0, *c, 0).is_some())
            .count();
        assert!(kept <= SLOTS);
        assert!(r.get(0, u64::MAX, 0).is_none());
    }
}

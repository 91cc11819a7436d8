//! Costs owed to the rate-limit service: what an installation bound's
//! response named beyond the reservation its admission sent. A request
//! ends before they can be sent (a call of its own would be cancelled with
//! its context), so they wait in the worker's queue and the root context
//! sends them, a batch a call, at its next tick (`node`).
//!
//! They are counted in the window current when they are sent (a sliding
//! bound's names it; a fixed bound's is the service's clock window): for a
//! response that ends after the window its request was admitted in, the
//! next one (docs/cost.md). Less than the reservation gives nothing back:
//! `hits_addend` only adds.

use crate::config::plan::Plan;
use crate::config::RateLimitServiceConfig;
use crate::pipeline::phase::service::{
    self as installation, Descriptor, ServiceCall, REFUNDED, WINDOW,
};
use crate::rls::Override;
use std::collections::VecDeque;

/// Charges a queue holds at most: past it they are dropped, and counted
/// (the service's counts fall short by their units).
pub(crate) const OWED_MAX: usize = 4_096;
/// Charges one call carries at most; a tick sends the whole queue.
pub(crate) const CHARGES_PER_CALL: usize = 64;

/// One cost owed: the descriptor the admission was counted under, and the
/// units beyond its reservation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Charge {
    /// `<route>.<bound>`: the descriptor's `bound` value.
    pub descriptor: String,
    /// The caller's key and value (none for `per: route`).
    pub caller: Option<(&'static str, String)>,
    /// The limit the admission was sent with (the service counts under it),
    /// in the bound's window.
    pub limit: Override,
    /// Which count it adds to.
    pub at: ChargeAt,
    pub units: u32,
}

/// The count a charge adds to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChargeAt {
    /// A fixed bound's: the service's clock window when it arrives.
    Fixed,
    /// A sliding bound's: the window current when it is sent.
    Window,
    /// A sliding bound's refunds of window `n`: attempts the service
    /// counted there that were refused, taken out of its estimate.
    Refund(u64),
}

/// A worker's owed charges, oldest first.
#[derive(Debug, Default)]
pub struct Owed {
    charges: VecDeque<Charge>,
    dropped: u64,
}

impl Owed {
    /// Owes `c`.
    pub fn push(&mut self, c: Charge) {
        if self.charges.len() < OWED_MAX {
            self.charges.push_back(c);
        } else {
            self.dropped += 1;
        }
    }

    /// The oldest charges, at most a call's worth.
    pub(crate) fn take_batch(&mut self) -> Vec<Charge> {
        let n = self.charges.len().min(CHARGES_PER_CALL);
        self.charges.drain(..n).collect()
    }

    /// Puts back a batch that could not be sent, oldest first again.
    pub(crate) fn put_back(&mut self, batch: Vec<Charge>) {
        for c in batch.into_iter().rev() {
            self.charges.push_front(c);
        }
    }

    /// Charges dropped since the last call (the queue was full).
    pub(crate) fn take_dropped(&mut self) -> u64 {
        std::mem::take(&mut self.dropped)
    }

    pub fn is_empty(&self) -> bool {
        self.charges.is_empty()
    }
}

/// The `ShouldRateLimit` call that charges `batch` at `now` (none when the
/// plan has no service): each descriptor with its limit and its units as
/// `hits_addend`, a sliding bound's in the window of `now`. Its answer
/// says nothing the filter acts on.
pub(crate) fn charge_call<'p>(
    plan: &'p Plan,
    batch: &[Charge],
    now: u64,
) -> Option<ServiceCall<'p>> {
    let service: &'p RateLimitServiceConfig = plan.service.as_ref()?;
    let descriptors: Vec<Descriptor> = batch
        .iter()
        .map(|c| {
            let window = match c.at {
                ChargeAt::Fixed => None,
                ChargeAt::Window => Some((WINDOW, now / c.limit.unit.ms())),
                ChargeAt::Refund(n) => Some((REFUNDED, n)),
            };
            Descriptor {
                bound: &c.descriptor,
                caller: c.caller.as_ref().map(|(per, v)| (*per, v.as_str())),
                window,
                limit: Override {
                    unit: window.map_or(c.limit.unit, |(_, n)| c.limit.unit.keeping(n)),
                    ..c.limit
                },
                hits: c.units,
            }
        })
        .collect();
    Some(installation::call(service, &descriptors))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Unit;

    fn charge(caller: &str, units: u32) -> Charge {
        Charge {
            descriptor: "chat.tokens".into(),
            caller: Some(("user", caller.into())),
            limit: Override {
                requests_per_unit: 1_000,
                unit: Unit::Minute,
            },
            at: ChargeAt::Window,
            units,
        }
    }

    #[test]
    fn charges_leave_oldest_first_a_call_at_a_time_and_a_full_queue_counts_what_it_drops() {
        let mut owed = Owed::default();
        owed.push(charge("a", 200));
        owed.push(charge("b", 50));
        let batch = owed.take_batch();
        assert_eq!(batch, vec![charge("a", 200), charge("b", 50)]);
        assert!(owed.is_empty());
        owed.put_back(batch.clone());
        assert_eq!(owed.take_batch(), batch);

        for i in 0..OWED_MAX + 3 {
            owed.push(charge(&i.to_string(), 1));
        }
        assert_eq!(owed.take_dropped(), 3);
        assert_eq!(owed.take_dropped(), 0);
        assert_eq!(owed.take_batch().len(), CHARGES_PER_CALL);
    }
}

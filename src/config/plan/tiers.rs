//! Which bounds of a route share one lane ([`Tier`]), and why a bound does
//! not ([`Alone`]): the one rule the plan groups by and the reading words.

use super::fingerprint::tier_salt;
use super::{Bound, BoundId, BoundScope, Tier};
use crate::count::window::Rate;

/// Why a bound keeps a lane (an entry per caller, a write) of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alone {
    /// Counted against the fleet's count, synced on its own.
    Fleet,
    /// Counted by the rate-limit service, not in the node's shared data.
    Installation,
    /// Counts a cost, not requests.
    Cost,
    /// A shadow bound: it refuses nothing.
    Shadow,
    /// Enforced on this share of its refusals (a rollout).
    Rollout(u8),
    /// No other bound of the route that may share is on its key (the same
    /// `per`, `applies_to` and operation).
    OnlyOnKey,
    /// The lanes of its key already hold [`crate::count::lane::MAX_TIERS`]
    /// tiers each.
    LaneFull,
}

impl Bound {
    /// What keeps this bound out of any shared lane, whatever the route's
    /// other bounds (None: it may share).
    pub fn barrier(&self) -> Option<Alone> {
        match self.scope {
            BoundScope::Fleet { .. } => Some(Alone::Fleet),
            BoundScope::Installation { .. } => Some(Alone::Installation),
            BoundScope::Node if self.cost.is_some() => Some(Alone::Cost),
            BoundScope::Node if self.shadow => Some(Alone::Shadow),
            BoundScope::Node if self.enforce_percent < 100 => {
                Some(Alone::Rollout(self.enforce_percent))
            }
            BoundScope::Node => None,
        }
    }

    /// Counted on the same caller as `other`: the same `per`, `applies_to`
    /// and operation (or none).
    fn same_key(&self, other: &Bound) -> bool {
        self.per == other.per
            && self.applies_to == other.applies_to
            && self.written.operation == other.written.operation
    }
}

/// Why bound `i` of a route's `bounds` keeps a lane of its own (None: it
/// shares one, or is no bound of them).
pub fn alone(bounds: &[Bound], i: BoundId) -> Option<Alone> {
    let b = bounds.get(i.0)?;
    if b.tier != Tier::Own {
        return None;
    }
    if let Some(why) = b.barrier() {
        return Some(why);
    }
    let partner = bounds
        .iter()
        .enumerate()
        .any(|(j, o)| j != i.0 && o.barrier().is_none() && o.same_key(b));
    Some(if partner {
        Alone::LaneFull
    } else {
        Alone::OnlyOnKey
    })
}

/// Groups a route's bounds on one key into shared lanes ([`Tier`]): in
/// the route's order, each joins the first group of its key with room.
pub(super) fn group_tiers(bounds: &mut [Bound]) {
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for (j, b) in bounds.iter().enumerate() {
        if b.barrier().is_some() {
            continue;
        }
        let same = |g: &&mut Vec<usize>| {
            g.len() < crate::count::lane::MAX_TIERS
                && g.first()
                    .and_then(|&f| bounds.get(f))
                    .is_some_and(|f| f.same_key(b))
        };
        match groups.iter_mut().find(same) {
            Some(g) => g.push(j),
            None => groups.push(vec![j]),
        }
    }
    for g in groups.iter().filter(|g| g.len() > 1) {
        let Some(&lead) = g.first() else {
            continue;
        };
        let salt = tier_salt(g);
        let rates: Vec<(BoundId, Rate)> = g
            .iter()
            .filter_map(|&j| Some((BoundId(j), bounds.get(j)?.rate)))
            .collect();
        for (index, &j) in g.iter().enumerate() {
            if let Some(b) = bounds.get_mut(j) {
                b.fingerprint ^= salt;
                b.tier = if index == 0 {
                    Tier::Leads(rates.clone())
                } else {
                    Tier::Joins {
                        lead: BoundId(lead),
                        index,
                    }
                };
            }
        }
    }
}

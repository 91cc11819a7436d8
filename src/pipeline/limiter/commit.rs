//! A request's commit: recorded in every bound it read, each with the
//! store's compare-and-swap loop ([`crate::count::store::retry`]); a bound
//! that refuses after a race takes back the bounds already recorded.

use super::reads::Reads;
use super::{
    tier_bound, tier_bounds, BoundEvent, Caller, Counted, Event, Keys, Limiter, Receipt, RouteLanes,
};
use crate::config::plan::{Bound, BoundId, RouteId};
use crate::count::lane::{self, Committed, Lane, Prepared};
use crate::count::lane_upkeep;
use crate::count::store::{retry, Attempt, Store, StoreError};
use crate::count::window::{Quota, Verdict};
use smallvec::{smallvec, SmallVec};

/// How recording one bound ended.
enum Outcome {
    Recorded(lane::Undo),
    /// A shadow bound (or a refusal spared) that turned out to refuse
    /// after a race: not counted.
    Shadowed(Quota),
    /// A bound that turned out to refuse after a race (`overflow`: in its
    /// shared overflow counter; `tier`: which of its lane's tiers).
    Refused {
        quota: Quota,
        overflow: bool,
        tier: u8,
    },
}

impl Limiter {
    /// Records the request in every prepared bound, in order. Should a
    /// bound refuse after all (another worker took the last place since it
    /// was read), the bounds already recorded are taken back.
    pub fn commit<S: Store + ?Sized>(
        &self,
        store: &S,
        r: RouteLanes,
        pending: Reads,
        now_ms: u64,
    ) -> Counted {
        let store = &self.remembering(store, now_ms);
        let draw = (pending.nonce, pending.route);
        let mut d = Counted {
            errors: pending.errors,
            at_ms: now_ms,
            prompt: pending.prompt,
            ..Counted::default()
        };
        let mut shadowed = pending.shadowed;
        let mut done: SmallVec<[_; 4]> = SmallVec::new();
        for (i, keys, mut p) in pending.prepared {
            let Some((bound, lane)) = r.counted(i) else {
                continue;
            };
            let what = || format!("bound {}", i.index());
            let at = (draw, i, bound);
            match retry(what, || self.record(store, lane, keys, &mut p, at, now_ms)) {
                // Only what the answer needs is kept, not the written bytes.
                Ok(Outcome::Recorded(u)) => {
                    if bound.cost.as_ref().is_some_and(|c| c.from_response()) {
                        d.receipts.push((i, Receipt::Lane(u)));
                    }
                    done.push((i, u, p.verdict, p.overflow, p.tier));
                }
                Ok(Outcome::Shadowed(quota)) => shadowed.push((i, quota)),
                Ok(Outcome::Refused {
                    quota,
                    overflow,
                    tier,
                }) => {
                    let i = tier_bound(i, bound, tier);
                    for (j, u, _, _, _) in &done {
                        let Some((_, l)) = r.counted(*j) else {
                            continue;
                        };
                        if let Err(e) = lane_upkeep::undo(store, l, *u) {
                            d.errors.push(e);
                        }
                    }
                    d.refused = Some((i, quota));
                    d.receipts.clear();
                    d.events = smallvec![BoundEvent::new(i, Event::Refused, overflow)];
                    return d;
                }
                Err(e) => d.errors.push(e),
            }
        }
        for (i, quota) in shadowed {
            d.events.push(BoundEvent::new(i, Event::WouldRefuse, false));
            if self.plan.shadow_headers
                && d.tightest
                    .is_none_or(|(_, t)| quota.remaining < t.remaining)
            {
                d.tightest = Some((i, quota));
            }
        }
        for &(i, _, verdict, overflow, tier) in &done {
            if let Verdict::Admit { quota, .. } = verdict {
                // A lane of tiers admitted for each of its bounds.
                let Some(bound) = r.route.bound(i) else {
                    continue;
                };
                for b in tier_bounds(i, bound) {
                    d.events.push(BoundEvent::new(b, Event::Allowed, overflow));
                }
                // Without shadow headers a shadow bound shows nothing,
                // refusing or not.
                let shows = self.plan.shadow_headers || !bound.shadow;
                if shows
                    && d.tightest
                        .is_none_or(|(_, t)| quota.remaining < t.remaining)
                {
                    d.tightest = Some((tier_bound(i, bound, tier), quota));
                }
            }
        }
        d
    }

    /// One attempt to record the request at bound `i` with its read `p`:
    /// written; or, when another worker wrote since, read and decided
    /// again: refused after all (spared: shadowed), or `p` tried again.
    fn record<S: Store + ?Sized>(
        &self,
        store: &S,
        lane: &Lane,
        keys: Keys,
        p: &mut Prepared,
        (draw, i, bound): ((u64, RouteId), BoundId, &Bound),
        now_ms: u64,
    ) -> Result<Attempt<Outcome>, StoreError> {
        if let Committed::Done(u) = lane::commit(store, lane, keys.node, p)? {
            return Ok(Attempt::Done(Outcome::Recorded(u)));
        }
        let fresh = self.read(store, lane, keys, now_ms)?;
        if let Verdict::Refuse { quota } = fresh.verdict {
            // The draw is made only for a refusal.
            return Ok(Attempt::Done(if self.spared_at(draw, i, bound) {
                Outcome::Shadowed(quota)
            } else {
                Outcome::Refused {
                    quota,
                    overflow: fresh.overflow,
                    tier: fresh.tier,
                }
            }));
        }
        *p = fresh;
        Ok(Attempt::Stale)
    }

    /// Phase 2 then the request recorded everywhere.
    pub fn finish<S: Store + ?Sized>(
        &self,
        store: &S,
        r: RouteLanes,
        mut pending: Reads,
        caller: &Caller,
        now_ms: u64,
    ) -> Counted {
        if let Some(refused) = self.late(store, r, &mut pending, caller, now_ms) {
            return refused;
        }
        self.commit(store, r, pending, now_ms)
    }
}

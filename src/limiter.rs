//! The decision for one request against every bound of its route.
//!
//! Read everything first and stop at the first bound that refuses: a refused
//! request writes nothing. Then record the request in each bound with
//! compare-and-swap; if a later bound turns out to refuse after a race, the
//! earlier ones are taken back, so a refused request is counted by no bound.
//! A store error skips that bound (fail open) and is reported.

use crate::config::Per;
use crate::plan::Plan;
use crate::slots::{self, Committed, Lane, Prepared};
use crate::store::{Store, StoreError, CAS_RETRIES};
use crate::window::{Quota, Verdict};
use siphasher::sip::SipHasher13;
use std::hash::Hasher;

/// A compiled plan with every bound bound to its lane.
pub struct Limiter {
    pub plan: Plan,
    /// `lanes[route][bound]`.
    pub lanes: Vec<Vec<Lane>>,
    seed: [u64; 2],
}

/// Who is calling, as far as the checked bounds need to know.
#[derive(Debug, Clone, Copy, Default)]
pub struct Caller<'a> {
    /// The client address (no port).
    pub address: &'a str,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    Allowed,
    Refused,
}

/// What happened at one bound, for stats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BoundEvent {
    pub bound: usize,
    pub event: Event,
    /// Counted in the bound's shared overflow counter.
    pub overflow: bool,
}

#[derive(Debug, Default)]
pub struct Decision {
    /// The bound that refused and what to tell the client.
    pub refused: Option<(usize, Quota)>,
    /// When admitted: the most constrained bound.
    pub tightest: Option<(usize, Quota)>,
    pub events: Vec<BoundEvent>,
    pub errors: Vec<StoreError>,
}

impl Limiter {
    pub fn new(plan: Plan, lanes: Vec<Vec<Lane>>, seed: [u64; 2]) -> Limiter {
        Limiter { plan, lanes, seed }
    }

    /// The key a caller is counted under for a bound of kind `per`. Keyed
    /// with the installation's seed so nobody can aim at another's slot.
    pub fn caller_key(&self, per: Per, caller: &Caller) -> u64 {
        let mut h = SipHasher13::new_with_keys(self.seed[0], self.seed[1]);
        match per {
            Per::Route => return 0,
            Per::Address => h.write(b"address\0"),
            Per::User | Per::Token | Per::Org => h.write(per.as_str().as_bytes()),
        }
        h.write(caller.address.as_bytes());
        h.finish()
    }

    /// Decides one request on route `route` at `now_ms`.
    pub fn check<S: Store + ?Sized>(
        &self,
        store: &S,
        route: usize,
        caller: &Caller,
        now_ms: u64,
    ) -> Decision {
        let mut d = Decision::default();
        let (Some(r), Some(lanes)) = (self.plan.routes.get(route), self.lanes.get(route)) else {
            return d;
        };
        let keys: Vec<u64> = r
            .bounds
            .iter()
            .map(|b| self.caller_key(b.per, caller))
            .collect();

        // Phase 1: read and decide; stop at the first refusal.
        let mut prepared: Vec<Option<Prepared>> = Vec::with_capacity(lanes.len());
        for (i, lane) in lanes.iter().enumerate() {
            match slots::prepare(store, lane, keys[i], now_ms) {
                Ok(p) => {
                    if let Verdict::Refuse { quota } = p.verdict {
                        d.refused = Some((i, quota));
                        d.events.push(BoundEvent {
                            bound: i,
                            event: Event::Refused,
                            overflow: p.overflow,
                        });
                        return d;
                    }
                    prepared.push(Some(p));
                }
                Err(e) => {
                    d.errors.push(e);
                    prepared.push(None);
                }
            }
        }

        // Phase 2: record in order; undo on a late refusal.
        let mut done = Vec::with_capacity(lanes.len());
        for (i, p) in prepared.into_iter().enumerate() {
            let Some(mut p) = p else { continue };
            let lane = &lanes[i];
            let (mut recorded, mut failed) = (false, false);
            for _ in 0..CAS_RETRIES {
                match slots::commit(store, lane, keys[i], &p) {
                    Ok(Committed::Done(u)) => {
                        done.push((i, u, p));
                        recorded = true;
                        break;
                    }
                    Ok(Committed::Stale) => match slots::prepare(store, lane, keys[i], now_ms) {
                        Ok(fresh) => {
                            if let Verdict::Refuse { quota } = fresh.verdict {
                                for (j, u, _) in &done {
                                    if let Err(e) = slots::undo(store, &lanes[*j], *u) {
                                        d.errors.push(e);
                                    }
                                }
                                d.refused = Some((i, quota));
                                d.events.push(BoundEvent {
                                    bound: i,
                                    event: Event::Refused,
                                    overflow: fresh.overflow,
                                });
                                return d;
                            }
                            p = fresh;
                        }
                        Err(e) => {
                            d.errors.push(e);
                            failed = true;
                            break;
                        }
                    },
                    Err(e) => {
                        d.errors.push(e);
                        failed = true;
                        break;
                    }
                }
            }
            if !recorded && !failed {
                d.errors.push(StoreError(format!(
                    "bound {}: contended past {CAS_RETRIES} attempts",
                    r.bounds[i].name
                )));
            }
        }
        for (i, _, p) in &done {
            if let Verdict::Admit { quota, .. } = p.verdict {
                d.events.push(BoundEvent {
                    bound: *i,
                    event: Event::Allowed,
                    overflow: p.overflow,
                });
                let tighter = d
                    .tightest
                    .is_none_or(|(_, t)| quota.remaining < t.remaining);
                if tighter {
                    d.tightest = Some((*i, quota));
                }
            }
        }
        d
    }
}

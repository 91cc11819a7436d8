//! A request's reads: each bound of its route read and decided in order,
//! nothing written, stopping at the first that refuses ([`Reads`]).

use super::{
    fleet_known, tier_bound, BoundEvent, Caller, Counted, Event, Keys, Limiter, Prompt, Receipts,
    RouteLanes,
};
use crate::config::plan::{Bound, BoundId, OpId, Route, RouteId};
use crate::count::lane::{Lane, LaneKind, Prepared};
use crate::count::store::{Store, StoreError};
use crate::count::window::{Quota, Verdict};
use crate::count::{fleet_lane, node_lane};
use smallvec::{smallvec, SmallVec};

/// A request part-way through its checks: bounds read and found to admit,
/// nothing recorded yet. It may wait for an identity call-out; a counter
/// that changed meanwhile is noticed by compare-and-swap at commit.
pub struct Reads {
    pub(super) route: RouteId,
    pub(super) op: Option<OpId>,
    /// This request's number in its worker ([`Limiter::spared`]).
    pub(super) nonce: u64,
    pub(super) prepared: SmallVec<[(BoundId, Keys, Prepared); 4]>,
    /// Shadow bounds that would have refused: not counted, not refusing.
    pub(super) shadowed: Vec<(BoundId, Quota)>,
    /// Costs the request named up front (`cost.request_header`), and
    /// reservations of its prompt, by bound.
    pub(super) costs: SmallVec<[(BoundId, u32); 1]>,
    /// What its body said, once read.
    pub(super) prompt: Prompt,
    pub(super) errors: Vec<StoreError>,
}

impl Reads {
    /// The decision when bound `i` refuses before anything was written.
    fn refused(&mut self, i: BoundId, quota: Quota, overflow: bool) -> Counted {
        Counted {
            refused: Some((i, quota)),
            tightest: None,
            events: smallvec![BoundEvent::new(i, Event::Refused, overflow)],
            errors: std::mem::take(&mut self.errors),
            receipts: Receipts::new(),
            at_ms: 0,
            prompt: Prompt::default(),
        }
    }

    pub fn route(&self) -> RouteId {
        self.route
    }

    /// The request named its cost at bound `b` up front.
    pub(crate) fn set_cost(&mut self, b: BoundId, units: u32) {
        self.costs.push((b, units));
    }

    /// The request's body said `prompt` and allows `ceiling` output
    /// tokens: each bound of `route` (or of its operation `op`) whose cost
    /// the response's body names reserves what [`Cost::reservation`] says
    /// of them, at most its limit (a cut answer's estimate counts the
    /// prompt too: [`Counted::prompt`]).
    ///
    /// [`Cost::reservation`]: crate::config::plan::Cost::reservation
    pub(crate) fn reserve_prompt(
        &mut self,
        route: &Route,
        op: Option<OpId>,
        prompt: Prompt,
        ceiling: Option<u32>,
    ) {
        let tokens = crate::pipeline::phase::cost::cost_scan::tokens_in(prompt.bytes);
        for (j, bound) in route.bounds.iter().enumerate() {
            if bound.written.operation.is_some() && bound.written.operation != op.map(OpId::index) {
                continue;
            }
            let Some(cost) = bound.cost.as_ref() else {
                continue;
            };
            let units = cost
                .reservation(ceiling, tokens, prompt.model.as_deref())
                .min(bound.rate.limit);
            if cost.source.in_body() && units != cost.reserve {
                self.costs.push((BoundId(j), units));
            }
        }
        self.prompt = prompt;
    }

    /// The units the request takes at `bound` (`b`) on admission: the cost
    /// it named, or the bound's reservation, or 1.
    pub fn hits(&self, b: BoundId, bound: &Bound) -> u32 {
        match self.costs.iter().find(|(id, _)| *id == b) {
            Some((_, units)) => *units,
            None => bound.cost.as_ref().map_or(1, |c| c.reserve),
        }
    }
    pub fn op(&self) -> Option<OpId> {
        self.op
    }

    /// The model its body asks for, once read.
    pub fn model(&self) -> Option<&str> {
        self.prompt.model.as_deref()
    }
}

impl Limiter {
    /// Reads and decides one more request at one bound, nothing written.
    pub(super) fn read<S: Store + ?Sized>(
        &self,
        store: &S,
        lane: &Lane,
        keys: Keys,
        now_ms: u64,
    ) -> Result<Prepared, StoreError> {
        let Some(f) = self.fleet.as_ref().filter(|_| lane.kind == LaneKind::Fleet) else {
            return node_lane::prepare_hits(store, lane, keys.node, now_ms, keys.hits);
        };
        let known = || fleet_known(store, f, now_ms);
        let ids = (keys.node, keys.fleet);
        let d = fleet_lane::prepare(store, lane, f.fleet, ids, keys.hits, &known, now_ms)?;
        if d.alone {
            self.alone.set(self.alone.get() + 1);
        }
        Ok(d.prepared)
    }

    /// A request to `route` (operation `op`), nothing checked yet.
    pub fn start(&self, route: RouteId, op: Option<OpId>) -> Reads {
        let nonce = self.started.get().wrapping_add(1);
        self.started.set(nonce);
        Reads {
            route,
            op,
            nonce,
            prepared: SmallVec::new(),
            shadowed: Vec::new(),
            costs: SmallVec::new(),
            prompt: Prompt::default(),
            errors: Vec::new(),
        }
    }

    /// The late (identity) bounds of `route` (and of its operation `op`)
    /// that apply to this caller.
    pub(crate) fn late_bounds(
        route: &Route,
        op: Option<OpId>,
        caller: &Caller,
    ) -> SmallVec<[BoundId; 4]> {
        route
            .late_bounds(op)
            .iter()
            .copied()
            .filter(|b| {
                route
                    .bound(*b)
                    .is_some_and(|x| x.applies_to.admits(caller.identity))
            })
            .collect()
    }

    /// Reads and decides `bounds` in order, stopping at the first that
    /// refuses: then the refusal is returned and nothing has been written.
    /// The caller is counted with the model the request's body asks for.
    pub fn prepare<S: Store + ?Sized>(
        &self,
        store: &S,
        r: RouteLanes,
        pending: &mut Reads,
        bounds: &[BoundId],
        caller: &Caller,
        now_ms: u64,
    ) -> Option<Counted> {
        // Lent out of `pending` while it is written to, not copied.
        let model = pending.prompt.model.take();
        let caller = Caller {
            model: model.as_deref(),
            ..*caller
        };
        let d = self.prepare_as(store, r, pending, bounds, &caller, now_ms);
        pending.prompt.model = model;
        d
    }

    fn prepare_as<S: Store + ?Sized>(
        &self,
        store: &S,
        r: RouteLanes,
        pending: &mut Reads,
        bounds: &[BoundId],
        caller: &Caller,
        now_ms: u64,
    ) -> Option<Counted> {
        let store = &self.remembering(store, now_ms);
        for &i in bounds {
            let Some((bound, lane)) = r.counted(i) else {
                continue;
            };
            let keys = self.keys(bound, caller, pending.hits(i, bound));
            let key = keys.node;
            // A standing refusal is the wait for one request of one unit:
            // a cost bound's requests differ in size, so it has none.
            let remembered = !bound.shadow && bound.cost.is_none();
            let place = |b: BoundId| remembered.then(|| self.lanes.place(r.id, b)).flatten();
            // A lane of tiers remembers each tier's refusals under its bound.
            let standing = super::tier_bounds(i, bound).into_iter().find_map(|b| {
                let at = place(b)?;
                Some((b, self.refusals.try_borrow().ok()?.get(at, key, now_ms)?))
            });
            if let Some((b, quota)) = standing {
                if self.spared(pending, i, bound) {
                    pending.shadowed.push((i, quota));
                    continue;
                }
                return Some(pending.refused(b, quota, false));
            }
            match self.read(store, lane, keys, now_ms) {
                Ok(p) => {
                    if let Verdict::Refuse { quota } = p.verdict {
                        if self.spared(pending, i, bound) {
                            // What enforcement would do, without doing it:
                            // not counted here, and the request goes on.
                            pending.shadowed.push((i, quota));
                            continue;
                        }
                        let named = tier_bound(i, bound, p.tier);
                        if let (false, Some(at)) = (p.overflow, place(named)) {
                            if let Ok(mut r) = self.refusals.try_borrow_mut() {
                                r.insert(at, key, now_ms, quota);
                            }
                        }
                        return Some(pending.refused(named, quota, p.overflow));
                    }
                    pending.prepared.push((i, keys, p));
                }
                Err(e) => pending.errors.push(e),
            }
        }
        None
    }

    /// Reads every prepared bound again from the store itself, not from
    /// this worker's memory of its writes (which another worker's write
    /// may have made stale). Before a round trip to the rate-limit service:
    /// a request a node bound refuses must never reach it. `Some` is the
    /// refusal (nothing written).
    pub(crate) fn recheck<S: Store + ?Sized>(
        &self,
        store: &S,
        r: RouteLanes,
        pending: &mut Reads,
        now_ms: u64,
    ) -> Option<Counted> {
        let mut refused = None;
        let draw = (pending.nonce, pending.route);
        for (i, keys, p) in &mut pending.prepared {
            let Some((bound, lane)) = r.counted(*i) else {
                continue;
            };
            // On an error the commit meets the same error and reports it.
            let Ok(fresh) = self.read(store, lane, *keys, now_ms) else {
                continue;
            };
            if let Verdict::Refuse { quota } = fresh.verdict {
                if !self.spared_at(draw, *i, bound) {
                    refused = Some((tier_bound(*i, bound, fresh.tier), quota, fresh.overflow));
                    break;
                }
            }
            *p = fresh;
        }
        let (i, quota, overflow) = refused?;
        Some(pending.refused(i, quota, overflow))
    }

    /// Phase 1 of a request (from `start`): the bounds that need no
    /// identity, read before anything is resolved. `Some` is the refusal
    /// (nothing written); otherwise the request waits for `finish`.
    pub fn early<S: Store + ?Sized>(
        &self,
        store: &S,
        r: RouteLanes,
        pending: &mut Reads,
        address: &str,
        now_ms: u64,
    ) -> Option<Counted> {
        let anonymous = Caller {
            address,
            identity: None,
            model: None,
        };
        let early = r.route.early_bounds(pending.op);
        self.prepare(store, r, pending, early, &anonymous, now_ms)
    }

    /// Phase 2: the identity bounds that apply to `caller`, read. `Some`
    /// is the refusal (nothing written); otherwise the request waits for
    /// `commit` (after its installation bounds, if it has any).
    pub fn late<S: Store + ?Sized>(
        &self,
        store: &S,
        r: RouteLanes,
        pending: &mut Reads,
        caller: &Caller,
        now_ms: u64,
    ) -> Option<Counted> {
        let late = Self::late_bounds(r.route, pending.op, caller);
        self.prepare(store, r, pending, &late, caller, now_ms)
    }
}

//! The decision for one request against every bound of its route.
//!
//! Read everything first and stop at the first bound that refuses: a refused
//! request writes nothing. Then record the request in each bound with
//! compare-and-swap; if a later bound turns out to refuse after a race, the
//! earlier ones are taken back, so a refused request is counted by no bound.
//! A store error skips that bound (fail open) and is reported.

use crate::config::plan::{Bound, BoundId, OpId, Plan, Route, RouteId};
use crate::config::Per;
use crate::count::fleet_lane::{self, Fleet};
use crate::count::lane::{self, Committed, Lane, Prepared, Table};
use crate::count::refusals::Refusals;
use crate::count::store::{Store, StoreError, CAS_RETRIES};
use crate::count::window::{Quota, Verdict};
use crate::count::write_memory::{Remembering, WriteMemory};
use crate::count::{lane_upkeep, node_lane};
use crate::identity::address::Prefixes;
use crate::identity::Identity;
use crate::pipeline::caller_key;
use smallvec::{smallvec, SmallVec};
use std::cell::RefCell;

/// A compiled plan with every bound bound to its lane.
pub struct Limiter {
    pub plan: Plan,
    /// `lanes[route][bound]`: none for a bound the rate-limit service
    /// counts.
    pub lanes: Vec<Vec<Option<Lane>>>,
    seed: [u64; 2],
    /// This worker's standing refusals (see `refusals`).
    refusals: RefCell<Refusals>,
    /// This worker's last writes (see `write_memory`).
    writes: RefCell<WriteMemory>,
    /// Fleet bounds: how this node decides them.
    pub fleet: Option<FleetKeys>,
    /// The hashing keys of everything sent to the rate-limit service
    /// ([`crate::rls::service_keys`]), derived once per configuration.
    pub service_keys: (u64, u64),
    /// During a rotation, the keys of the other secret: each installation
    /// caller's count under them is read beside its count under
    /// `service_keys` ([`Limiter::service_keys`], `key_secret.also_read`).
    pub also_service_keys: Option<(u64, u64)>,
    /// Fleet decisions made alone since the last [`Limiter::take_alone`].
    alone: std::cell::Cell<u64>,
    /// Requests started: each one's number draws its bounds' partial
    /// enforcement ([`Limiter::spared`]).
    started: std::cell::Cell<u64>,
}

/// What every node of the fleet shares to decide fleet bounds, from the
/// configuration.
#[derive(Debug, Clone)]
pub struct FleetKeys {
    /// Hashing keys every node derives alike (from the service's domain):
    /// the key a caller is synced under.
    pub seed: [u64; 2],
    /// This instance's fleet record in shared data (`pipeline::fleet_sync`).
    pub record_key: String,
    pub fleet: Fleet,
    /// The node count assumed before the service counted them.
    pub nodes: u32,
}

/// A caller's keys for one bound: this node's, and for a fleet bound the
/// fleet's (0 otherwise).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Keys {
    node: u64,
    fleet: u64,
    /// The units the request takes at this bound (1 but for a cost).
    hits: u32,
}

/// Who is calling, as far as the checked bounds need to know.
#[derive(Debug, Clone, Copy, Default)]
pub struct Caller<'a> {
    /// The client address (no port), as Envoy gives it: masked to the
    /// configured prefix when it is keyed.
    pub address: &'a str,
    /// Resolved only for routes whose bounds need it.
    pub identity: Option<&'a Identity>,
    /// The model its request body asks for (`per: model`), when read.
    pub model: Option<&'a str>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    Allowed,
    Refused,
    /// A shadow bound that enforcement would have refused with.
    WouldRefuse,
    /// An installation bound sent to the rate-limit service.
    ServiceCall,
    /// An installation bound the rate-limit service did not answer for.
    ServiceError,
}

/// What happened at one bound, for stats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BoundEvent {
    pub bound: BoundId,
    pub event: Event,
    /// Counted in the bound's shared overflow counter.
    pub overflow: bool,
}

impl BoundEvent {
    /// `event` at `bound`, of a caller counted under its own key or
    /// (`overflow`) in the bound's shared overflow counter.
    pub fn new(bound: BoundId, event: Event, overflow: bool) -> BoundEvent {
        BoundEvent {
            bound,
            event,
            overflow,
        }
    }
}

/// A few per request: kept inline, so a decision allocates nothing.
pub type Events = SmallVec<[BoundEvent; 4]>;

#[derive(Debug, Default)]
pub struct Counted {
    /// The bound that refused and what to tell the client.
    pub refused: Option<(BoundId, Quota)>,
    /// When admitted: the most constrained bound.
    pub tightest: Option<(BoundId, Quota)>,
    pub events: Events,
    pub errors: Vec<StoreError>,
    /// When admitted: where each bound whose cost the response gives took
    /// its reservation, to be trued up ([`Limiter::true_up`]).
    pub receipts: Receipts,
    /// When it was counted.
    pub at_ms: u64,
    /// What its body said, for a cost its response's body names.
    pub prompt: Prompt,
}

/// What a request's body said that its charge needs, from admission to
/// its answer: its size (a cut answer's estimate counts the prompt) and
/// the model it asks for (`per: model`, a price table's key).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Prompt {
    pub bytes: u64,
    pub model: Option<String>,
}

/// Reservations to true up: a few per request at most.
pub type Receipts = SmallVec<[(BoundId, Receipt); 1]>;

/// Where a request took its reservation at one bound.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Receipt {
    /// In shared data: a node or fleet bound.
    Lane(lane::Undo),
    /// At the rate-limit service (an installation bound): `hits` sent for
    /// the caller's descriptor value (none for `per: route`).
    Service { caller: Option<String>, hits: u32 },
}

impl Pending {
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
    pub fn set_cost(&mut self, b: BoundId, units: u32) {
        self.costs.push((b, units));
    }

    /// The request's body said `prompt` and allows `ceiling` output
    /// tokens: each bound of `route` (or of its operation `op`) whose cost
    /// the response's body names reserves what [`Cost::reservation`] says
    /// of them, at most its limit (a cut answer's estimate counts the
    /// prompt too: [`Counted::prompt`]).
    ///
    /// [`Cost::reservation`]: crate::config::cost::Cost::reservation
    pub fn reserve_prompt(
        &mut self,
        route: &Route,
        op: Option<OpId>,
        prompt: Prompt,
        ceiling: Option<u32>,
    ) {
        let tokens = super::phase::cost::cost_scan::tokens_in(prompt.bytes);
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

/// How recording one bound ended.
enum Outcome {
    Recorded(lane::Undo),
    /// A shadow bound that turned out to refuse after a race: not counted.
    Shadowed,
    Failed(StoreError),
}

/// A request part-way through its checks: bounds read and found to admit,
/// nothing recorded yet. It may wait for an identity call-out; a counter
/// that changed meanwhile is noticed by compare-and-swap at commit.
pub struct Pending {
    route: RouteId,
    op: Option<OpId>,
    /// This request's number in its worker ([`Limiter::spared`]).
    nonce: u64,
    prepared: SmallVec<[(BoundId, Keys, Prepared); 4]>,
    /// Shadow bounds that would have refused: not counted, not refusing.
    shadowed: Vec<(BoundId, Quota)>,
    /// Costs the request named up front (`cost.request_header`), and
    /// reservations of its prompt, by bound.
    costs: SmallVec<[(BoundId, u32); 1]>,
    /// What its body said, once read.
    prompt: Prompt,
    errors: Vec<StoreError>,
}

/// A caller's key for a bound keyed `per`, hashed with `seed`.
fn key_with(seed: [u64; 2], prefixes: Prefixes, per: Per, caller: &Caller) -> u64 {
    let value = caller_key::value_of(per, caller.identity, caller.model);
    caller_key::key64(seed, per, value, caller.address, prefixes)
}

/// The shared-data key of an instance's fleet record.
pub fn fleet_record_key(instance: &str) -> String {
    format!("ratebound:fleet:{instance}")
}

/// What the node knows of the fleet: the nodes a fleet bound is shared by,
/// as the sync last counted them (the configured guess until then, or when
/// the record cannot be read), and whether the service is down.
fn fleet_known<S: Store + ?Sized>(store: &S, f: &FleetKeys, now_ms: u64) -> fleet_lane::Known {
    let record = store
        .get(&f.record_key)
        .ok()
        .and_then(|(v, _)| crate::count::fleet::Record::decode(v.as_deref()?));
    let counted = record.and_then(|r| r.nodes(now_ms));
    fleet_lane::Known {
        nodes: counted.unwrap_or(f.nodes),
        down: record.is_some_and(|r| r.down(now_ms, f.fleet.stale_ms)),
        counted: counted.is_some(),
    }
}

/// The lane of a compiled bound: its rate, and a caller table of `table`'s
/// size when the bound is keyed on a caller (one counter for `per: route`).
pub fn bound_lane(bound: &Bound, prefix: &str, tag: u32, table: Table) -> Lane {
    let table = (bound.per != Per::Route).then_some(table);
    Lane::new(prefix, tag, bound.rate, table).of_fleet(bound.fleet().is_some())
}

/// A route resolved from a request's [`RouteId`], once per callback, with
/// its lanes.
#[derive(Clone, Copy)]
pub struct RouteLanes<'a> {
    pub id: RouteId,
    pub route: &'a Route,
    lanes: &'a [Option<Lane>],
}

impl<'a> RouteLanes<'a> {
    /// Bound `b` with its lane, for a bound counted in shared data.
    fn counted(&self, b: BoundId) -> Option<(&'a Bound, &'a Lane)> {
        Some((self.route.bound(b)?, self.lanes.get(b.index())?.as_ref()?))
    }
}

/// Each shared-data bound of `plan` on the lane `lane` gives it, asked in
/// plan order (route by route, as [`Plan::wants`] lists them, numbered from
/// 0): `lanes[route][bound]`, as [`Limiter::new`] takes them. The one way a
/// plan meets its lanes; [`bound_lane`] makes each lane.
pub fn lanes_for<E>(
    plan: &Plan,
    mut lane: impl FnMut(usize, &Bound) -> Result<Lane, E>,
) -> Result<Vec<Vec<Option<Lane>>>, E> {
    let mut n = 0;
    let mut all = Vec::with_capacity(plan.routes.len());
    for route in &plan.routes {
        let mut of_route = Vec::with_capacity(route.bounds.len());
        for bound in &route.bounds {
            if bound.in_shared_data() {
                of_route.push(Some(lane(n, bound)?));
                n += 1;
            } else {
                of_route.push(None);
            }
        }
        all.push(of_route);
    }
    Ok(all)
}

impl Limiter {
    /// `plan` with its lanes ([`lanes_for`]).
    pub fn bind<E>(
        plan: Plan,
        seed: [u64; 2],
        lane: impl FnMut(usize, &Bound) -> Result<Lane, E>,
    ) -> Result<Limiter, E> {
        let lanes = lanes_for(&plan, lane)?;
        Ok(Limiter::new(plan, lanes, seed))
    }

    pub fn new(plan: Plan, lanes: Vec<Vec<Option<Lane>>>, seed: [u64; 2]) -> Limiter {
        let service_keys = plan.service.as_ref().map_or((0, 0), |s| {
            crate::rls::service_keys(&s.domain, plan.key_secret.as_ref())
        });
        let also_service_keys = plan
            .service
            .as_ref()
            .zip(plan.also_key_secret.as_ref())
            .map(|(s, k)| crate::rls::service_keys(&s.domain, Some(k)));
        let fleet = plan
            .has_fleet_bounds()
            .then_some(plan.service.as_ref())
            .flatten()
            .map(|s| FleetKeys {
                seed: [service_keys.0, service_keys.1],
                record_key: fleet_record_key(&plan.instance),
                fleet: Fleet {
                    stale_ms: 3 * s.sync_ms + s.sync_timeout_ms(),
                    sync_ms: s.sync_ms,
                },
                nodes: s.fleet_nodes.unwrap_or(1),
            });
        Limiter {
            plan,
            lanes,
            seed,
            refusals: RefCell::default(),
            writes: RefCell::default(),
            fleet,
            service_keys,
            also_service_keys,
            alone: std::cell::Cell::new(0),
            started: std::cell::Cell::new(0),
        }
    }

    /// Fleet decisions made alone (without a fresh answer from the service)
    /// since the last call.
    pub fn take_alone(&self) -> u64 {
        self.alone.replace(0)
    }

    /// A caller's keys for `bound`, taking `hits` units.
    fn keys(&self, bound: &Bound, caller: &Caller, hits: u32) -> Keys {
        Keys {
            hits,
            node: self.caller_key(bound.per, caller),
            fleet: match (bound.fleet(), &self.fleet) {
                (Some(_), Some(f)) if bound.per != Per::Route => {
                    key_with(f.seed, self.plan.client_address, bound.per, caller)
                }
                _ => 0,
            },
        }
    }

    /// Reads and decides one more request at one bound, nothing written.
    fn read<S: Store + ?Sized>(
        &self,
        store: &S,
        lane: &Lane,
        keys: Keys,
        now_ms: u64,
    ) -> Result<Prepared, StoreError> {
        let Some(f) = self.fleet.as_ref().filter(|_| lane.fleet) else {
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

    /// The key a caller is counted under for a bound of kind `per`, keyed
    /// with the installation's seed so nobody can aim at another's slot.
    /// A caller without the identity a user/org/token bound needs is
    /// counted per address, under a key no identity can produce. An
    /// address is keyed by its network (`address::network`: IPv6 per /64
    /// by default).
    pub fn caller_key(&self, per: Per, caller: &Caller) -> u64 {
        if per == Per::Route {
            return 0;
        }
        key_with(self.seed, self.plan.client_address, per, caller)
    }

    fn remembering<'a, S: Store + ?Sized>(
        &'a self,
        store: &'a S,
        now_ms: u64,
    ) -> Remembering<'a, S> {
        Remembering {
            store,
            memory: &self.writes,
            now_ms,
        }
    }

    /// Store reads this worker saved by remembering its writes, and the
    /// writes from memory that were stale, since the last call.
    pub fn take_memory_counts(&self) -> (u64, u64) {
        self.writes
            .try_borrow_mut()
            .map_or((0, 0), |mut m| m.take_counts())
    }

    /// The installation's hashing keys (shared by every worker).
    pub fn seed(&self) -> [u64; 2] {
        self.seed
    }

    /// A request to `route` (operation `op`), nothing checked yet.
    pub fn start(&self, route: RouteId, op: Option<OpId>) -> Pending {
        let nonce = self.started.get().wrapping_add(1);
        self.started.set(nonce);
        Pending {
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

    /// Route `id` with its lanes: what a request's callback resolves its
    /// route to, once.
    pub fn route(&self, id: RouteId) -> Option<RouteLanes<'_>> {
        Some(RouteLanes {
            id,
            route: self.plan.route(id)?,
            lanes: self.lanes.get(id.index())?,
        })
    }

    /// Whether a refusal of `bound` (`b`) for `pending` is spared: always
    /// for a shadow bound, never for an enforced one, and for one
    /// enforced in part, a draw of `100 − enforce_percent` in 100 that is
    /// the same however often this request meets this bound.
    pub fn spared(&self, pending: &Pending, b: BoundId, bound: &Bound) -> bool {
        self.spared_at((pending.nonce, pending.route), b, bound)
    }

    fn spared_at(&self, (nonce, route): (u64, RouteId), b: BoundId, bound: &Bound) -> bool {
        match bound.enforce_percent {
            _ if bound.shadow => true,
            100.. => false,
            0 => true,
            p => {
                use std::hash::Hasher;
                let mut h = siphasher::sip::SipHasher13::new_with_keys(self.seed[1], self.seed[0]);
                h.write_u64(nonce);
                h.write_usize(route.index());
                h.write_usize(b.index());
                h.finish() % 100 >= u64::from(p)
            }
        }
    }

    /// Trues up a reservation (`receipt`, of bound `b` of route `r`) to
    /// the request's known cost. Its write is remembered as the request
    /// path's are, as of `at_ms` (the admission's time: no clock read
    /// more; an older time only lets the memory lapse sooner), so the
    /// caller's next admission by this worker needs no read.
    pub fn true_up<S: Store + ?Sized>(
        &self,
        store: &S,
        (r, b): (RouteId, BoundId),
        receipt: lane::Undo,
        (cost, at_ms): (u32, u64),
    ) -> Result<(), StoreError> {
        let store = &self.remembering(store, at_ms);
        match self.lane(r, b) {
            Some(lane) => lane_upkeep::true_up(store, lane, receipt, cost),
            None => Ok(()),
        }
    }

    /// The lane of bound `b` of route `r`, for a bound counted in shared
    /// data.
    pub fn lane(&self, r: RouteId, b: BoundId) -> Option<&Lane> {
        self.lanes.get(r.index())?.get(b.index())?.as_ref()
    }

    /// Every shared-data bound with its lane, in plan order.
    pub fn bound_lanes(&self) -> impl Iterator<Item = (RouteId, BoundId, &Bound, &Lane)> {
        self.plan.routes_with_ids().flat_map(move |(r, route)| {
            route
                .bounds_with_ids()
                .filter_map(move |(b, bound)| Some((r, b, bound, self.lane(r, b)?)))
        })
    }

    /// The late (identity) bounds of `route` (and of its operation `op`)
    /// that apply to this caller.
    pub fn late_bounds(route: &Route, op: Option<OpId>, caller: &Caller) -> SmallVec<[BoundId; 4]> {
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
        pending: &mut Pending,
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
        pending: &mut Pending,
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
            let standing = (!bound.shadow && bound.cost.is_none())
                .then(|| {
                    self.refusals
                        .try_borrow()
                        .ok()?
                        .get(r.id.index(), i.index(), key, now_ms)
                })
                .flatten();
            if let Some(quota) = standing {
                if self.spared(pending, i, bound) {
                    pending.shadowed.push((i, quota));
                    continue;
                }
                return Some(pending.refused(i, quota, false));
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
                        if !p.overflow && bound.cost.is_none() {
                            if let Ok(mut r) = self.refusals.try_borrow_mut() {
                                r.insert(pending.route.index(), i.index(), key, now_ms, quota);
                            }
                        }
                        return Some(pending.refused(i, quota, p.overflow));
                    }
                    pending.prepared.push((i, keys, p));
                }
                Err(e) => pending.errors.push(e),
            }
        }
        None
    }

    /// Records the request in every prepared bound, in order. Should a
    /// bound refuse after all (another worker took the last place since it
    /// was read), the bounds already recorded are taken back.
    pub fn commit<S: Store + ?Sized>(
        &self,
        store: &S,
        r: RouteLanes,
        pending: Pending,
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
            let key = keys.node;
            let Some((bound, lane)) = r.counted(i) else {
                continue;
            };
            // Decided in the loop; none after every attempt means contention.
            let mut outcome = None;
            for _ in 0..CAS_RETRIES {
                match lane::commit(store, lane, key, &p) {
                    Ok(Committed::Done(u)) => {
                        outcome = Some(Outcome::Recorded(u));
                        break;
                    }
                    Ok(Committed::Stale) => match self.read(store, lane, keys, now_ms) {
                        Ok(fresh) => {
                            // The draw is made only for a refusal.
                            let refused = matches!(fresh.verdict, Verdict::Refuse { .. });
                            if let (Verdict::Refuse { quota }, true) =
                                (fresh.verdict, refused && self.spared_at(draw, i, bound))
                            {
                                shadowed.push((i, quota));
                                outcome = Some(Outcome::Shadowed);
                                break;
                            }
                            if let Verdict::Refuse { quota } = fresh.verdict {
                                for (j, u, _, _) in &done {
                                    let Some((_, l)) = r.counted(*j) else {
                                        continue;
                                    };
                                    if let Err(e) = lane_upkeep::undo(store, l, *u) {
                                        d.errors.push(e);
                                    }
                                }
                                d.refused = Some((i, quota));
                                d.receipts.clear();
                                d.events =
                                    smallvec![BoundEvent::new(i, Event::Refused, fresh.overflow)];
                                return d;
                            }
                            p = fresh;
                        }
                        Err(e) => {
                            outcome = Some(Outcome::Failed(e));
                            break;
                        }
                    },
                    Err(e) => {
                        outcome = Some(Outcome::Failed(e));
                        break;
                    }
                }
            }
            let outcome = outcome.unwrap_or_else(|| {
                Outcome::Failed(StoreError::Contended {
                    what: format!("bound {}", i.index()),
                    attempts: CAS_RETRIES,
                })
            });
            match outcome {
                // Only what the answer needs is kept, not the written bytes.
                Outcome::Recorded(u) => {
                    if bound.cost.as_ref().is_some_and(|c| c.from_response()) {
                        d.receipts.push((i, Receipt::Lane(u)));
                    }
                    done.push((i, u, p.verdict, p.overflow));
                }
                Outcome::Shadowed => {}
                Outcome::Failed(e) => d.errors.push(e),
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
        for &(i, _, verdict, overflow) in &done {
            if let Verdict::Admit { quota, .. } = verdict {
                d.events.push(BoundEvent::new(i, Event::Allowed, overflow));
                // Without shadow headers a shadow bound shows nothing,
                // refusing or not.
                let shows = self.plan.shadow_headers || r.route.bound(i).is_none_or(|b| !b.shadow);
                if shows
                    && d.tightest
                        .is_none_or(|(_, t)| quota.remaining < t.remaining)
                {
                    d.tightest = Some((i, quota));
                }
            }
        }
        d
    }

    /// Reads every prepared bound again from the store itself, not from
    /// this worker's memory of its writes (which another worker's write
    /// may have made stale). Before a round trip to the rate-limit service:
    /// a request a node bound refuses must never reach it. `Some` is the
    /// refusal (nothing written).
    pub fn recheck<S: Store + ?Sized>(
        &self,
        store: &S,
        r: RouteLanes,
        pending: &mut Pending,
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
                    refused = Some((*i, quota, fresh.overflow));
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
        pending: &mut Pending,
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
        pending: &mut Pending,
        caller: &Caller,
        now_ms: u64,
    ) -> Option<Counted> {
        let late = Self::late_bounds(r.route, pending.op, caller);
        self.prepare(store, r, pending, &late, caller, now_ms)
    }

    /// Phase 2 then the request recorded everywhere.
    pub fn finish<S: Store + ?Sized>(
        &self,
        store: &S,
        r: RouteLanes,
        mut pending: Pending,
        caller: &Caller,
        now_ms: u64,
    ) -> Counted {
        if let Some(refused) = self.late(store, r, &mut pending, caller, now_ms) {
            return refused;
        }
        self.commit(store, r, pending, now_ms)
    }
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)] // tests may index
mod tests {
    use super::*;
    use crate::config::parse;
    use crate::count::lane::Table;
    use crate::count::store::MemStore;
    use crate::pipeline::decide;

    const SMALL: Table = Table {
        buckets: 16,
        per_bucket: 4,
        cap: 32,
    };

    fn limiter(store: &MemStore, json: &str) -> Limiter {
        let plan = Plan::compile(&parse(json.as_bytes()).unwrap());
        Limiter::bind(plan, [11, 12], |n, bound| {
            let l = bound_lane(bound, &format!("t:{n}"), 1, SMALL);
            l.create_keys(store).map(|()| l)
        })
        .unwrap()
    }

    fn user(name: &str, roles: &[&str]) -> Identity {
        Identity {
            user: Some(name.into()),
            roles: roles.iter().map(|r| r.to_string()).collect(),
            ..Identity::default()
        }
    }

    fn admitted(lim: &Limiter, s: &MemStore, who: &Caller, n: usize) -> usize {
        (0..n)
            .filter(|i| {
                decide(lim, s, RouteId(0), None, who, 120_000 + *i as u64)
                    .refused
                    .is_none()
            })
            .count()
    }

    const TIERS: &str = r#"{"identity":{"header":{"user":"x-user","roles":"x-roles"}},
        "routes":[{"name":"api","bounds":[
          {"name":"partner","per":"user","applies_to":{"roles":["partner"]},"limit":5,"window":"PT1M"},
          {"name":"trial","per":"user","applies_to":{"roles":["trial"]},"limit":2,"window":"PT1M"}]}]}"#;

    #[test]
    fn roles_make_pricing_tiers_without_naming_anyone() {
        let s = MemStore::new();
        let lim = limiter(&s, TIERS);
        let (alice, bob, carol) = (
            user("alice", &["partner"]),
            user("bob", &["trial"]),
            user("carol", &[]),
        );
        let at = |id| Caller {
            address: "10.0.0.1",
            identity: Some(id),
            model: None,
        };
        assert_eq!(admitted(&lim, &s, &at(&alice), 10), 5);
        assert_eq!(admitted(&lim, &s, &at(&bob), 10), 2);
        // Nobody bounds carol: narrowed rules leave everyone else open.
        assert_eq!(admitted(&lim, &s, &at(&carol), 10), 10);
        // Refusals name the tier that refused.
        let d = decide(&lim, &s, RouteId(0), None, &at(&bob), 130_000);
        assert_eq!(d.refused.map(|r| r.0 .0), Some(1));
    }

    #[test]
    fn anonymous_callers_are_counted_per_address_apart_from_any_user() {
        let s = MemStore::new();
        let lim = limiter(
            &s,
            r#"{"identity":{"header":{"user":"x-user"}},"routes":[{"name":"a","bounds":[
                {"per":"user","limit":2,"window":"PT1M"}]}]}"#,
        );
        let anon = |a| Caller {
            address: a,
            identity: None,
            model: None,
        };
        assert_eq!(admitted(&lim, &s, &anon("10.0.0.1"), 5), 2);
        assert_eq!(admitted(&lim, &s, &anon("10.0.0.2"), 5), 2);
        // A user whose name is that address has a budget of its own.
        let named = user("10.0.0.1", &[]);
        let as_user = Caller {
            address: "10.0.0.1",
            identity: Some(&named),
            model: None,
        };
        assert_eq!(admitted(&lim, &s, &as_user, 5), 2);
        assert_ne!(
            lim.caller_key(Per::User, &as_user),
            lim.caller_key(Per::User, &anon("10.0.0.1"))
        );
    }

    const PER_ADDRESS: &str = r#"{"routes":[{"name":"a","bounds":[
        {"per":"address","limit":2,"window":"PT1M"}]}]}"#;

    fn address_key(lim: &Limiter, address: &str) -> u64 {
        lim.caller_key(
            Per::Address,
            &Caller {
                address,
                identity: None,
                model: None,
            },
        )
    }

    /// One subscriber holds a /64: rotating inside it is one caller, the
    /// next /64 is another; IPv4 is keyed per address; an IPv4-mapped IPv6
    /// address is that IPv4 address; spellings of one address are one.
    #[test]
    fn ipv6_callers_are_keyed_by_their_64_and_ipv4_by_address() {
        let s = MemStore::new();
        let lim = limiter(&s, PER_ADDRESS);
        let key = |a| address_key(&lim, a);
        assert_eq!(
            key("2001:db8:1:2::1"),
            key("2001:db8:1:2:ffff:ffff:ffff:fffe")
        );
        assert_eq!(key("2001:db8:1:2::1"), key("2001:DB8:1:2:0:0:0:1"));
        assert_ne!(key("2001:db8:1:2::1"), key("2001:db8:1:3::1"));
        assert_eq!(key("::ffff:10.0.0.1"), key("10.0.0.1"));
        assert_ne!(key("10.0.0.1"), key("10.0.0.2"));
        // The whole budget is shared inside the /64.
        let anon = |a| Caller {
            address: a,
            identity: None,
            model: None,
        };
        assert_eq!(admitted(&lim, &s, &anon("2001:db8:1:2::a"), 1), 1);
        assert_eq!(admitted(&lim, &s, &anon("2001:db8:1:2::b"), 5), 1);
        assert_eq!(admitted(&lim, &s, &anon("2001:db8:1:3::a"), 5), 2);
    }

    #[test]
    fn the_prefixes_are_configured() {
        let s = MemStore::new();
        let lim = limiter(
            &s,
            r#"{"client_address":{"ipv4_prefix":24,"ipv6_prefix":128},
                "routes":[{"name":"a","bounds":[{"per":"address","limit":2,"window":"PT1M"}]}]}"#,
        );
        let key = |a| address_key(&lim, a);
        assert_ne!(key("2001:db8:1:2::1"), key("2001:db8:1:2::2"));
        assert_eq!(key("2001:db8:1:2::1"), key("2001:db8:1:2:0::1"));
        assert_eq!(key("10.0.0.1"), key("10.0.0.200"));
        assert_eq!(key("::ffff:10.0.0.7"), key("10.0.0.1"));
        assert_ne!(key("10.0.0.1"), key("10.0.1.1"));
        // Anonymous callers of identity bounds are counted the same way.
        let lim = limiter(
            &s,
            r#"{"client_address":{"ipv6_prefix":48},"identity":{"header":{"user":"x-user"}},
                "routes":[{"name":"a","bounds":[{"per":"user","limit":2,"window":"PT1M"}]}]}"#,
        );
        let anon = |a| Caller {
            address: a,
            identity: None,
            model: None,
        };
        assert_eq!(
            lim.caller_key(Per::User, &anon("2001:db8:1:2::1")),
            lim.caller_key(Per::User, &anon("2001:db8:1:ffff::9"))
        );
    }

    /// Not an IP address (a Unix socket peer, a missing `source.address`):
    /// keyed by its text, so it is still counted, apart from any address.
    #[test]
    fn an_address_that_does_not_parse_is_counted_by_its_text() {
        let s = MemStore::new();
        let lim = limiter(&s, PER_ADDRESS);
        let key = |a| address_key(&lim, a);
        for odd in [
            "",
            "/run/envoy.sock",
            "@abstract",
            "10.0.0.256",
            "2001:db8::1::2",
            "10.0.0.1:80:90",
        ] {
            assert_eq!(key(odd), key(odd), "{odd:?}");
            assert_ne!(key(odd), key("10.0.0.1"), "{odd:?}");
        }
        assert_ne!(key("/a.sock"), key("/b.sock"));
        let anon = Caller {
            address: "/run/envoy.sock",
            identity: None,
            model: None,
        };
        assert_eq!(admitted(&lim, &s, &anon, 5), 2);
    }

    #[test]
    fn bounds_without_identity_are_checked_first() {
        let s = MemStore::new();
        let lim = limiter(
            &s,
            r#"{"identity":{"header":{"user":"x-user"}},"routes":[{"name":"a","bounds":[
                {"name":"u","per":"user","limit":1,"window":"PT1M"},
                {"name":"addr","per":"address","limit":1,"window":"PT1M"}]}]}"#,
        );
        let r = &lim.plan.routes[0];
        assert_eq!(
            (r.early.clone(), r.late.clone()),
            (vec![BoundId(1)], vec![BoundId(0)])
        );
        let id = user("u1", &[]);
        let c = Caller {
            address: "10.0.0.9",
            identity: Some(&id),
            model: None,
        };
        assert!(decide(&lim, &s, RouteId(0), None, &c, 1_000)
            .refused
            .is_none());
        // Both are exhausted; the address bound refuses, as it is checked first.
        assert_eq!(
            decide(&lim, &s, RouteId(0), None, &c, 1_001)
                .refused
                .map(|r| r.0 .0),
            Some(1)
        );
    }

    #[test]
    fn a_shadow_bound_counts_and_reports_but_never_refuses() {
        let s = MemStore::new();
        let lim = limiter(
            &s,
            r#"{"routes":[{"name":"a","bounds":[
                {"name":"dry","per":"address","limit":2,"window":"PT1M","shadow":true},
                {"name":"real","per":"route","limit":100,"window":"PT1M"}]}]}"#,
        );
        let c = Caller {
            address: "10.0.0.1",
            identity: None,
            model: None,
        };
        let decisions: Vec<Counted> = (0..5)
            .map(|i| decide(&lim, &s, RouteId(0), None, &c, 60_000 + i))
            .collect();
        assert!(decisions.iter().all(|d| d.refused.is_none()));
        let would = |d: &Counted| d.events.iter().any(|e| e.event == Event::WouldRefuse);
        assert_eq!(decisions.iter().filter(|d| would(d)).count(), 3);
        // The shadow bound counted only what enforcement would have admitted;
        // the enforced bound counted every request.
        let dry = lim.caller_key(Per::Address, &c);
        assert_eq!(
            node_lane::peek(&s, lim.lane(RouteId(0), BoundId(0)).unwrap(), dry)
                .unwrap()
                .map(|c| c.cur),
            Some(2)
        );
        assert_eq!(
            node_lane::peek(&s, lim.lane(RouteId(0), BoundId(1)).unwrap(), 0)
                .unwrap()
                .map(|c| c.cur),
            Some(5)
        );
        // Its headers show what enforcement would say.
        assert_eq!(
            decisions[4].tightest.map(|(b, q)| (b.0, q.remaining)),
            Some((0, 0))
        );
    }

    #[test]
    fn a_caller_refused_again_before_its_wait_costs_no_store_read() {
        let s = MemStore::new();
        let lim = limiter(&s, &one_bound("address", 2));
        let c = Caller {
            address: "10.0.0.7",
            identity: None,
            model: None,
        };
        assert_eq!(admitted(&lim, &s, &c, 2), 2);
        let first = decide(&lim, &s, RouteId(0), None, &c, 130_000)
            .refused
            .unwrap();
        let (_, quota) = first;
        // The store would fail every read now: a standing refusal needs none.
        s.fail_next(usize::MAX);
        let again = decide(&lim, &s, RouteId(0), None, &c, 130_500);
        assert!(again.errors.is_empty());
        assert_eq!(
            again.refused.map(|r| r.1.reset_ms),
            Some(quota.reset_ms - 500)
        );
        s.fail_next(0);
        // One millisecond before the wait is over: still refused; at it: in.
        let end = 130_000 + quota.reset_ms;
        assert!(decide(&lim, &s, RouteId(0), None, &c, end - 1)
            .refused
            .is_some());
        assert!(decide(&lim, &s, RouteId(0), None, &c, end)
            .refused
            .is_none());
        // Another caller was never refused: it reads the store as before.
        let other = Caller {
            address: "10.0.0.8",
            identity: None,
            model: None,
        };
        s.fail_next(1);
        assert_eq!(
            decide(&lim, &s, RouteId(0), None, &other, end).errors.len(),
            1
        );
    }

    /// A refusal by the shared overflow counter (the caller table full) is
    /// not remembered: the caller may be given its own entry before the
    /// overflow's wait is over, and is admitted at once when it is.
    #[test]
    fn a_caller_refused_on_overflow_is_admitted_once_it_is_given_its_own_entry() {
        let s = MemStore::new();
        let lim = limiter(&s, &one_bound("address", 2));
        let at = |a: &str, now: u64| {
            let c = Caller {
                address: a,
                identity: None,
                model: None,
            };
            decide(&lim, &s, RouteId(0), None, &c, now)
                .refused
                .is_none()
        };
        // Window 1: the table's 32 places taken.
        for i in 0..SMALL.cap {
            assert!(at(&format!("10.0.0.{i}"), 60_000 + u64::from(i)));
        }
        // End of window 2: newcomers share the overflow counter, 2 a minute.
        let x = "10.1.0.1";
        assert!(at(x, 179_000) && at(x, 179_001));
        let refused = decide(
            &lim,
            &s,
            RouteId(0),
            None,
            &Caller {
                address: x,
                identity: None,
                model: None,
            },
            179_002,
        );
        assert!(refused.events.iter().all(|e| e.overflow));
        let (_, quota) = refused.refused.unwrap();
        assert!(quota.reset_ms > 20_000, "{quota:?}");
        // Window 3: window 1's callers have expired; x takes a place of its
        // own well before the overflow counter would admit it.
        assert!(at(x, 181_000));
    }

    /// Every refused caller is remembered, not only the last one: several
    /// callers hammering while refused cost no store read.
    #[test]
    fn callers_refused_in_turn_are_all_refused_again_without_a_store_read() {
        let s = MemStore::new();
        let lim = limiter(&s, &one_bound("address", 1));
        let callers: Vec<String> = (0..8).map(|i| format!("10.0.1.{i}")).collect();
        let at = |a: &str, now: u64| {
            let c = Caller {
                address: a,
                identity: None,
                model: None,
            };
            decide(&lim, &s, RouteId(0), None, &c, now)
        };
        for a in &callers {
            assert!(at(a, 120_000).refused.is_none());
            assert!(at(a, 120_001).refused.is_some());
        }
        let reads = s.reads();
        for a in &callers {
            assert!(at(a, 120_002).refused.is_some(), "{a}");
        }
        assert_eq!(s.reads(), reads);
    }

    fn one_bound(per: &str, limit: u32) -> String {
        format!(
            r#"{{"routes":[{{"name":"r","bounds":[{{"per":"{per}","limit":{limit},"window":"PT1M"}}]}}]}}"#
        )
    }

    #[test]
    fn a_caller_admitted_again_by_the_same_worker_costs_one_write() {
        for per in ["route", "address"] {
            let s = MemStore::new();
            let lim = limiter(&s, &one_bound(per, 50));
            let c = Caller {
                address: "10.0.0.7",
                identity: None,
                model: None,
            };
            let check = |t: u64| decide(&lim, &s, RouteId(0), None, &c, t).refused.is_none();
            assert!(check(120_000) && check(120_001));
            let (reads, writes) = (s.reads(), s.writes());
            assert!((2..12).all(|i| check(120_000 + i)));
            assert_eq!(s.reads(), reads, "{per}");
            assert_eq!(s.writes(), writes + 10, "{per}");
            assert_eq!(s.stale_writes(), 0);
        }
    }

    #[test]
    fn a_refusal_the_memory_suggests_is_checked_with_the_store() {
        // Another worker takes back a request it counted before ours: the
        // store holds one less than this worker last wrote.
        for per in ["route", "address"] {
            let s = MemStore::new();
            let lim = limiter(&s, &one_bound(per, 3));
            let (lane, c) = (lim.lane(RouteId(0), BoundId(0)).unwrap(), Caller::default());
            let key = lim.caller_key(lim.plan.routes[0].bounds[0].per, &c);
            let now = 120_000;
            let theirs = node_lane::prepare(&s, lane, key, now).unwrap();
            let Ok(Committed::Done(undo)) = lane::commit(&s, lane, key, &theirs) else {
                panic!("their request is counted");
            };
            assert_eq!(admitted(&lim, &s, &c, 2), 2);
            lane_upkeep::undo(&s, lane, undo).unwrap();
            assert!(
                decide(&lim, &s, RouteId(0), None, &c, now + 5)
                    .refused
                    .is_none(),
                "{per}"
            );
            assert!(
                decide(&lim, &s, RouteId(0), None, &c, now + 6)
                    .refused
                    .is_some(),
                "{per}"
            );
        }
    }
}

//! The decision for one request against every bound of its route.
//!
//! Read everything first and stop at the first bound that refuses: a refused
//! request writes nothing. Then record the request in each bound with
//! compare-and-swap; if a later bound turns out to refuse after a race, the
//! earlier ones are taken back, so a refused request is counted by no bound.
//! A store error skips that bound (fail open) and is reported.
//!
//! - this file: the [`Limiter`] (a plan with its lanes) and what a
//!   decision says ([`Counted`], [`BoundEvent`], [`Receipt`]);
//! - `reads`: a request's reads ([`Reads`]), bound by bound;
//! - `commit`: the request recorded, each bound through the store's one
//!   compare-and-swap loop ([`crate::count::store::retry`]).

use crate::config::plan::BoundTable;
use crate::config::plan::{Bound, BoundId, Plan, Route, RouteId, Tier};
use crate::config::Per;
use crate::count::fleet_lane::{self, Fleet};
use crate::count::lane::{self, Lane, LaneKind, Table};
use crate::count::lane_upkeep;
use crate::count::refusals::Refusals;
use crate::count::store::{Store, StoreError};
use crate::count::window::Quota;
use crate::count::write_memory::{Remembering, WriteMemory};
use crate::identity::address::Prefixes;
use crate::identity::Identity;
use crate::pipeline::caller_key;
use smallvec::SmallVec;
use std::cell::RefCell;

/// A compiled plan with every bound bound to its lane.
pub struct Limiter {
    pub plan: Plan,
    /// Each bound's lane: none for a bound the rate-limit service counts.
    pub lanes: BoundTable<Option<Lane>>,
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
    /// This instance's fleet record in shared data (`node::fleet_sync`).
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
pub(crate) type Events = SmallVec<[BoundEvent; 4]>;

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
pub(crate) type Receipts = SmallVec<[(BoundId, Receipt); 1]>;

/// Where a request took its reservation at one bound.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Receipt {
    /// In shared data: a node or fleet bound.
    Lane(lane::Undo),
    /// At the rate-limit service (an installation bound): `hits` sent for
    /// the caller's descriptor value (none for `per: route`).
    Service { caller: Option<String>, hits: u32 },
}

/// A caller's key for a bound keyed `per`, hashed with `seed`.
fn key_with(seed: [u64; 2], prefixes: Prefixes, per: Per, caller: &Caller) -> u64 {
    let value = caller_key::value_of(per, caller.identity, caller.model);
    caller_key::key64(seed, per, value, caller.address, prefixes)
}

/// The shared-data key of an instance's fleet record.
pub(crate) fn fleet_record_key(instance: &str) -> String {
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
    let kind = match bound.fleet() {
        Some(_) => LaneKind::Fleet,
        None => LaneKind::Node,
    };
    if let Tier::Leads(tiers) = &bound.tier {
        let rates: SmallVec<[_; 8]> = tiers.iter().map(|(_, rate)| *rate).collect();
        return Lane::tiered(prefix, tag, &rates, table);
    }
    Lane::new(prefix, tag, bound.rate, table).of_kind(kind)
}

/// The bound tier `t` of the lane bound `i` (`bound`) leads names: itself
/// for a lane of its own.
pub(crate) fn tier_bound(i: BoundId, bound: &Bound, t: u8) -> BoundId {
    match &bound.tier {
        Tier::Leads(tiers) => tiers.get(usize::from(t)).map_or(i, |(b, _)| *b),
        _ => i,
    }
}

/// The bounds a lane led by bound `i` (`bound`) carries: its tiers, or
/// itself alone.
pub(crate) fn tier_bounds(i: BoundId, bound: &Bound) -> SmallVec<[BoundId; 4]> {
    match &bound.tier {
        Tier::Leads(tiers) => tiers.iter().map(|(b, _)| *b).collect(),
        _ => smallvec::smallvec![i],
    }
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
/// 0), as [`Limiter::new`] takes them. The one way a plan meets its lanes;
/// [`bound_lane`] makes each lane.
pub(crate) fn lanes_for<E>(
    plan: &Plan,
    mut lane: impl FnMut(usize, &Bound) -> Result<Lane, E>,
) -> Result<BoundTable<Option<Lane>>, E> {
    let mut n = 0;
    BoundTable::build(plan, |_, bound| {
        if !bound.has_lane() {
            return Ok(None);
        }
        let l = lane(n, bound)?;
        n += 1;
        Ok(Some(l))
    })
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

    /// `plan` with a lane of `table`'s size for each bound, `{prefix}:{n}`
    /// tagged `tag`, its keys created in `store`: a test's, a bench's or
    /// the store suite's limiter (a node's lanes are the directory's:
    /// `lanes_for`).
    pub fn in_store<S: Store + ?Sized>(
        plan: Plan,
        seed: [u64; 2],
        store: &S,
        (prefix, tag): (&str, u32),
        table: Table,
    ) -> Result<Limiter, StoreError> {
        Limiter::bind(plan, seed, |n, bound| {
            let lane = bound_lane(bound, &format!("{prefix}:{n}"), tag, table);
            lane.create_keys(store).map(|()| lane)
        })
    }

    pub fn new(plan: Plan, lanes: BoundTable<Option<Lane>>, seed: [u64; 2]) -> Limiter {
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
    pub(crate) fn take_alone(&self) -> u64 {
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
    pub(crate) fn take_memory_counts(&self) -> (u64, u64) {
        self.writes
            .try_borrow_mut()
            .map_or((0, 0), |mut m| m.take_counts())
    }

    /// The installation's hashing keys (shared by every worker).
    pub fn seed(&self) -> [u64; 2] {
        self.seed
    }

    /// Route `id` with its lanes: what a request's callback resolves its
    /// route to, once.
    pub fn route(&self, id: RouteId) -> Option<RouteLanes<'_>> {
        Some(RouteLanes {
            id,
            route: self.plan.route(id)?,
            lanes: self.lanes.route(id)?,
        })
    }

    /// Whether a refusal of `bound` (`b`) for `pending` is spared: always
    /// for a shadow bound, never for an enforced one, and for one
    /// enforced in part, a draw of `100 − enforce_percent` in 100 that is
    /// the same however often this request meets this bound.
    pub(crate) fn spared(&self, pending: &Reads, b: BoundId, bound: &Bound) -> bool {
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

    /// The lane bound `b` of route `r` is counted in, for a bound counted
    /// in shared data: its own, or its tiers' (see [`Limiter::tier_of`]).
    pub fn lane(&self, r: RouteId, b: BoundId) -> Option<&Lane> {
        self.tier_of(r, b).map(|(lane, _)| lane)
    }

    /// The lane bound `b` of route `r` is counted in, and its tier there
    /// (0 in a lane of its own).
    pub fn tier_of(&self, r: RouteId, b: BoundId) -> Option<(&Lane, usize)> {
        let bound = self.plan.route(r)?.bound(b)?;
        match bound.tier {
            Tier::Joins { lead, index } => Some((self.lanes.get(r, lead)?.as_ref()?, index)),
            _ => Some((self.lanes.get(r, b)?.as_ref()?, 0)),
        }
    }

    /// Every lane with the bound that has it (its own, or the first of
    /// its tiers), in plan order.
    pub(crate) fn bound_lanes(&self) -> impl Iterator<Item = (RouteId, BoundId, &Bound, &Lane)> {
        self.plan.routes_with_ids().flat_map(move |(r, route)| {
            route
                .bounds_with_ids()
                .filter_map(move |(b, bound)| Some((r, b, bound, self.lanes.get(r, b)?.as_ref()?)))
        })
    }
}

mod commit;
mod reads;
#[cfg(test)]
mod tests;

pub use reads::Reads;

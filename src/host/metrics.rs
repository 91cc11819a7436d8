//! Envoy stats: the filter's side of `crate::stats`, which names them and
//! says which bound or instance has which (and when).
//!
//! Counters are added up in the VM and handed to Envoy on the 1 s tick:
//! a host call per bound per request saved on the request path, for stats
//! that are at most a second late.

use crate::config::plan::Plan;
use crate::pipeline::limiter::{BoundEvent, Event};
use crate::stats::{self, Kind, Stat};
use proxy_wasm::hostcalls;
use proxy_wasm::types::MetricType;
use std::cell::Cell;

/// A counter: Envoy's id and what this VM has not handed over yet.
struct Counter {
    id: u32,
    unflushed: Cell<u64>,
}

/// Where a defined stat goes.
#[derive(Clone, Copy)]
enum Slot {
    /// A counter: its index in `Metrics::counters`, flushed on the tick.
    Counted(usize),
    /// A gauge or histogram: Envoy's id, recorded at once.
    Recorded(u32),
}

/// The stats of one bound (`N` is `Stat::PER_BOUND`) or of the instance
/// (all), by `Stat::index`: none for what it does not have, or what Envoy
/// would not define.
struct Slots<const N: usize>([Option<Slot>; N]);

impl<const N: usize> Slots<N> {
    fn new() -> Self {
        Slots([None; N])
    }

    fn get(&self, stat: Stat) -> Option<Slot> {
        self.0.get(stat.index()).copied().flatten()
    }

    fn set(&mut self, stat: Stat, slot: Option<Slot>) {
        if let Some(s) = self.0.get_mut(stat.index()) {
            *s = slot;
        }
    }
}

type BoundSlots = Slots<{ Stat::PER_BOUND }>;

pub struct Metrics {
    counters: Vec<Counter>,
    bounds: Vec<Vec<BoundSlots>>,
    instance: Slots<{ Stat::ALL.len() }>,
}

impl Metrics {
    pub fn define(plan: &Plan) -> Metrics {
        let mut counters = Vec::new();
        let mut define = |stat: Stat, name: String| match stat.kind() {
            Kind::Counter => {
                let id = hostcalls::define_metric(MetricType::Counter, &name).ok()?;
                counters.push(Counter {
                    id,
                    unflushed: Cell::new(0),
                });
                Some(Slot::Counted(counters.len() - 1))
            }
            Kind::Gauge => hostcalls::define_metric(MetricType::Gauge, &name)
                .ok()
                .map(Slot::Recorded),
            Kind::Histogram => hostcalls::define_metric(MetricType::Histogram, &name)
                .ok()
                .map(Slot::Recorded),
        };
        let instance = &plan.instance;
        // Node bounds, then installation bounds (`installation::stat_index`).
        let bounds = plan
            .routes
            .iter()
            .map(|r| {
                let node = r.bounds.iter().map(|b| (&b.name, false));
                let installation = r.installation.iter().map(|b| (&b.name, true));
                node.chain(installation)
                    .map(|(name, installation)| {
                        let mut slots = BoundSlots::new();
                        for stat in stats::bound_stats(installation) {
                            let n = stats::bound_name(instance, &r.name, name, stat);
                            slots.set(stat, define(stat, n));
                        }
                        slots
                    })
                    .collect()
            })
            .collect();
        let mut slots = Slots::new();
        for stat in stats::instance_stats(plan) {
            slots.set(stat, define(stat, stats::instance_name(instance, stat)));
        }
        Metrics {
            counters,
            bounds,
            instance: slots,
        }
    }

    /// A fleet sync call sent, with `keys` keys.
    pub fn fleet_sync_sent(&self, keys: usize) {
        self.inc(Stat::FleetSyncCalls);
        self.add(Stat::FleetSyncKeys, keys as u64);
    }

    /// A fleet sync call that gave no counts.
    pub fn fleet_sync_failed(&self) {
        self.inc(Stat::FleetSyncErrors);
    }

    /// Fleet decisions made alone (`Limiter::take_alone`).
    pub fn fleet_alone(&self, n: u64) {
        self.add(Stat::FleetAlone, n);
    }

    /// The nodes the fleet record last counted.
    pub fn fleet_nodes(&self, n: u32) {
        Self::put(self.instance.get(Stat::FleetNodes), u64::from(n));
    }

    /// How long one rate-limit service call took.
    pub fn service_latency(&self, ms: u64) {
        Self::put(self.instance.get(Stat::RlsLatencyMs), ms);
    }

    fn inc(&self, stat: Stat) {
        self.add(stat, 1);
    }

    fn add(&self, stat: Stat, n: u64) {
        self.count(self.instance.get(stat), n);
    }

    fn count(&self, slot: Option<Slot>, n: u64) {
        if let Some(c) = slot.and_then(|s| match s {
            Slot::Counted(i) => self.counters.get(i),
            Slot::Recorded(_) => None,
        }) {
            c.unflushed.set(c.unflushed.get() + n);
        }
    }

    /// A gauge's value or a histogram's sample.
    fn put(slot: Option<Slot>, value: u64) {
        if let Some(Slot::Recorded(id)) = slot {
            let _ = hostcalls::record_metric(id, value);
        }
    }

    /// What the worker's memory of its writes did (`Limiter::take_memory_counts`).
    pub fn write_memory(&self, (saved, stale): (u64, u64)) {
        self.add(Stat::StoreReadsSaved, saved);
        self.add(Stat::StoreStaleGuesses, stale);
    }

    /// Hands the counts added up since the last flush to Envoy.
    pub fn flush(&self) {
        for c in &self.counters {
            let n = c.unflushed.replace(0);
            if n > 0 {
                let _ = hostcalls::increment_metric(c.id, i64::try_from(n).unwrap_or(i64::MAX));
            }
        }
    }

    fn slots(&self, route: usize, bound: usize) -> Option<&BoundSlots> {
        self.bounds.get(route).and_then(|r| r.get(bound))
    }

    pub fn record(&self, route: usize, events: &[BoundEvent]) {
        for e in events {
            let Some(slots) = self.slots(route, e.bound) else {
                continue;
            };
            let stat = match e.event {
                Event::Allowed => Stat::Allowed,
                Event::Refused => Stat::Refused,
                Event::WouldRefuse => Stat::WouldRefuse,
                Event::ServiceCall => Stat::RlsCalls,
                Event::ServiceError => Stat::RlsErrors,
            };
            self.count(slots.get(stat), 1);
            if e.overflow {
                self.count(slots.get(Stat::Overflow), 1);
            }
        }
    }

    pub fn tracked(&self, route: usize, bound: usize, n: u32) {
        Self::put(
            self.slots(route, bound).and_then(|s| s.get(Stat::Tracked)),
            u64::from(n),
        );
    }

    pub fn store_error(&self) {
        self.inc(Stat::StoreErrors);
    }

    pub fn identity_error(&self) {
        self.inc(Stat::IdentityErrors);
    }

    pub fn session_call(&self) {
        self.inc(Stat::SessionCalls);
    }

    pub fn session_cache_hit(&self) {
        self.inc(Stat::SessionCacheHits);
    }

    pub fn jwt_cache_hit(&self) {
        self.inc(Stat::JwtCacheHits);
    }

    pub fn account_unreadable(&self) {
        self.inc(Stat::AccountsUnreadable);
    }

    pub fn rls_call_saved(&self) {
        self.inc(Stat::RlsCallsSaved);
    }

    pub fn rls_no_limit(&self) {
        self.inc(Stat::RlsNoLimit);
    }
}

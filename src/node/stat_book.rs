//! A configuration's stats as the filter keeps them: which of `crate::stats`
//! each bound and the instance has, what each request and each tick adds,
//! over a [`StatSink`] that is Envoy's metrics in the module (`host/`) and a
//! recorder in tests.
//!
//! Counters are added up in the VM and handed to the sink on the 1 s tick:
//! a host call per bound per request saved on the request path, for stats
//! that are at most a second late.

use super::{NodeStat, NodeStats};
use crate::config::plan::BoundTable;
use crate::config::plan::{BoundId, Plan, RouteId};
use crate::pipeline::limiter::{BoundEvent, Event};
use crate::stats::{self, Kind, Stat};
use std::cell::Cell;

/// Where stats go: the host's metrics.
pub trait StatSink {
    /// Defines a metric; `None` if the host would not.
    fn define(&self, kind: Kind, name: &str) -> Option<u32>;
    /// Adds `n` to counter `id`.
    fn increment(&self, id: u32, n: u64);
    /// A gauge's value or a histogram's sample.
    fn put(&self, id: u32, value: u64);
}

/// A counter: the sink's id and what this VM has not handed over yet.
struct Counter {
    id: u32,
    unflushed: Cell<u64>,
}

/// Where a defined stat goes.
#[derive(Clone, Copy)]
enum StatSlot {
    /// A counter: its index in `StatBook::counters`, flushed on the tick.
    Counted(usize),
    /// A gauge or histogram: the sink's id, recorded at once.
    Recorded(u32),
}

/// The stats of one bound (`N` is `Stat::PER_BOUND`) or of the instance
/// (all), by `Stat::index`: none for what it does not have, or what the
/// sink would not define.
struct Slots<const N: usize>([Option<StatSlot>; N]);

impl<const N: usize> Slots<N> {
    fn new() -> Self {
        Slots([None; N])
    }

    fn get(&self, stat: Stat) -> Option<StatSlot> {
        self.0.get(stat.index()).copied().flatten()
    }

    fn set(&mut self, stat: Stat, slot: Option<StatSlot>) {
        if let Some(s) = self.0.get_mut(stat.index()) {
            *s = slot;
        }
    }
}

type BoundSlots = Slots<{ Stat::PER_BOUND }>;

/// One configuration's stats.
pub struct StatBook<K> {
    sink: K,
    counters: Vec<Counter>,
    /// Each bound's stats.
    bounds: BoundTable<BoundSlots>,
    instance: Slots<{ Stat::ALL.len() }>,
}

impl<K: StatSink> StatBook<K> {
    /// Defines every stat `plan` has in `sink`.
    pub fn define(sink: K, plan: &Plan) -> StatBook<K> {
        let mut counters = Vec::new();
        let mut define = |stat: Stat, name: String| {
            let id = sink.define(stat.kind(), &name)?;
            Some(match stat.kind() {
                Kind::Counter => {
                    counters.push(Counter {
                        id,
                        unflushed: Cell::new(0),
                    });
                    StatSlot::Counted(counters.len() - 1)
                }
                Kind::Gauge | Kind::Histogram => StatSlot::Recorded(id),
            })
        };
        let instance = &plan.instance;
        let bounds = BoundTable::of(plan, |r, b| {
            let mut slots = BoundSlots::new();
            for stat in stats::bound_stats(!b.in_shared_data()) {
                let n = stats::bound_name(instance, &r.name, &b.name, stat);
                slots.set(stat, define(stat, n));
            }
            slots
        });
        let mut slots = Slots::new();
        for stat in stats::instance_stats(plan) {
            slots.set(stat, define(stat, stats::instance_name(instance, stat)));
        }
        StatBook {
            sink,
            counters,
            bounds,
            instance: slots,
        }
    }

    fn slots(&self, route: RouteId, bound: BoundId) -> Option<&BoundSlots> {
        self.bounds.get(route, bound)
    }

    fn add(&self, slot: Option<StatSlot>, n: u64) {
        if let Some(StatSlot::Counted(i)) = slot {
            if let Some(c) = self.counters.get(i) {
                c.unflushed.set(c.unflushed.get() + n);
            }
        }
    }

    fn put(&self, slot: Option<StatSlot>, value: u64) {
        if let Some(StatSlot::Recorded(id)) = slot {
            self.sink.put(id, value);
        }
    }

    fn inc(&self, stat: Stat) {
        self.add(self.instance.get(stat), 1);
    }

    /// What happened at the bounds of a request to `route`.
    pub fn record(&self, route: RouteId, events: &[BoundEvent]) {
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
            self.add(slots.get(stat), 1);
            if e.overflow {
                self.add(slots.get(Stat::Overflow), 1);
            }
        }
    }

    /// A request's instance stat (a per-bound one counts nothing here:
    /// those go through [`StatBook::record`]).
    pub fn count_request(&self, stat: Stat) {
        self.inc(stat);
    }

    /// How long one rate-limit service call took.
    pub fn service_latency(&self, ms: u64) {
        self.put(self.instance.get(Stat::RlsLatencyMs), ms);
    }

    /// Hands the counts added up since the last flush to the sink.
    fn flush(&self) {
        for c in &self.counters {
            let n = c.unflushed.replace(0);
            if n > 0 {
                self.sink.increment(c.id, n);
            }
        }
    }
}

impl<K: StatSink> NodeStats for StatBook<K> {
    fn count(&self, stat: NodeStat) {
        let add = |s: Stat, n: u64| self.add(self.instance.get(s), n);
        match stat {
            NodeStat::StoreError => self.inc(Stat::StoreErrors),
            NodeStat::FleetNodes(n) => self.put(self.instance.get(Stat::FleetNodes), u64::from(n)),
            NodeStat::FleetSyncSent(keys) => {
                self.inc(Stat::FleetSyncCalls);
                add(Stat::FleetSyncKeys, keys as u64);
            }
            NodeStat::FleetSyncFailed => self.inc(Stat::FleetSyncErrors),
            NodeStat::CostsUnsent(n) => add(Stat::CostsUnsent, n),
            NodeStat::FleetAlone(n) => add(Stat::FleetAlone, n),
            NodeStat::WriteMemory(saved, stale) => {
                add(Stat::StoreReadsSaved, saved);
                add(Stat::StoreStaleGuesses, stale);
            }
            NodeStat::Flush => self.flush(),
            NodeStat::Tracked { route, bound, n } => self.put(
                self.slots(route, bound).and_then(|s| s.get(Stat::Tracked)),
                u64::from(n),
            ),
        }
    }
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::*;
    use crate::config::parse;
    use std::cell::RefCell;

    /// Every metric defined, and what was handed over.
    #[derive(Default)]
    struct Recorder {
        names: RefCell<Vec<(Kind, String)>>,
        counts: RefCell<Vec<(String, u64)>>,
        values: RefCell<Vec<(String, u64)>>,
    }

    impl Recorder {
        fn name(&self, id: u32) -> String {
            self.names.borrow()[id as usize].1.clone()
        }
    }

    impl StatSink for &Recorder {
        fn define(&self, kind: Kind, name: &str) -> Option<u32> {
            let mut names = self.names.borrow_mut();
            names.push((kind, name.to_string()));
            Some(names.len() as u32 - 1)
        }
        fn increment(&self, id: u32, n: u64) {
            self.counts.borrow_mut().push((self.name(id), n));
        }
        fn put(&self, id: u32, value: u64) {
            self.values.borrow_mut().push((self.name(id), value));
        }
    }

    const PLAN: &str = r#"{"instance":"shop",
        "rate_limit_service":{"cluster":"rls","domain":"shop"},
        "routes":[{"name":"api","bounds":[
            {"name":"addr","per":"address","limit":5,"window":"PT1M"},
            {"name":"all","per":"route","limit":900,"window":"PT1H","scope":"installation"}]}]}"#;

    fn book(r: &Recorder) -> StatBook<&Recorder> {
        StatBook::define(r, &Plan::compile(&parse(PLAN.as_bytes()).unwrap()))
    }

    #[test]
    fn counts_reach_the_sink_on_the_flush_under_each_bounds_name() {
        let r = Recorder::default();
        let b = book(&r);
        let event = |bound, event| BoundEvent::new(BoundId(bound), event, bound == 0);
        b.record(
            RouteId(0),
            &[event(0, Event::Allowed), event(1, Event::ServiceCall)],
        );
        b.record(RouteId(0), &[event(0, Event::Allowed)]);
        b.count_request(Stat::RlsCallsSaved);
        assert!(
            r.counts.borrow().is_empty(),
            "counted in the VM until the tick"
        );
        b.count(NodeStat::Flush);
        let mut got = r.counts.borrow().clone();
        got.sort();
        assert_eq!(
            got,
            [
                ("ratebound.shop.api.addr.allowed".to_string(), 2),
                ("ratebound.shop.api.addr.overflow".to_string(), 2),
                ("ratebound.shop.api.all.rls_calls".to_string(), 1),
                ("ratebound.shop.rls_calls_saved".to_string(), 1),
            ]
        );
        b.count(NodeStat::Flush);
        assert_eq!(r.counts.borrow().len(), 4, "nothing handed over twice");
    }

    #[test]
    fn each_bound_has_the_stats_of_its_scope_and_gauges_go_at_once() {
        let r = Recorder::default();
        let b = book(&r);
        let names: Vec<String> = r.names.borrow().iter().map(|(_, n)| n.clone()).collect();
        assert!(names.contains(&"ratebound.shop.api.addr.tracked".to_string()));
        assert!(!names.contains(&"ratebound.shop.api.all.tracked".to_string()));
        assert!(names.contains(&"ratebound.shop.api.all.rls_errors".to_string()));
        assert!(!names.contains(&"ratebound.shop.api.addr.rls_errors".to_string()));
        b.count(NodeStat::Tracked {
            route: RouteId(0),
            bound: BoundId(0),
            n: 7,
        });
        // An installation bound tracks nobody: no gauge, nothing written.
        b.count(NodeStat::Tracked {
            route: RouteId(0),
            bound: BoundId(1),
            n: 9,
        });
        b.service_latency(12);
        assert_eq!(
            *r.values.borrow(),
            [
                ("ratebound.shop.api.addr.tracked".to_string(), 7),
                ("ratebound.shop.rls_latency_ms".to_string(), 12)
            ]
        );
    }
}

//! Envoy stats: per route and bound, `allowed`, `refused`, `would_refuse`
//! (shadow), `overflow` (counters) and `tracked` (gauge); per instance `store_errors`,
//! `identity_errors`, `session_calls`, `session_cache_hits`.
//! Names are `ratebound.<instance>.<route>.<bound>.<stat>` (Envoy shows
//! them under `wasmcustom.`); their number is fixed by the configuration,
//! never by the traffic.

use crate::limiter::{BoundEvent, Event};
use crate::plan::Plan;
use proxy_wasm::hostcalls;
use proxy_wasm::types::MetricType;

#[derive(Default)]
struct BoundIds {
    allowed: Option<u32>,
    refused: Option<u32>,
    would_refuse: Option<u32>,
    overflow: Option<u32>,
    tracked: Option<u32>,
}

pub struct Metrics {
    bounds: Vec<Vec<BoundIds>>,
    store_errors: Option<u32>,
    identity_errors: Option<u32>,
    session_calls: Option<u32>,
    session_cache_hits: Option<u32>,
}

fn define(kind: MetricType, name: &str) -> Option<u32> {
    hostcalls::define_metric(kind, name).ok()
}

impl Metrics {
    pub fn define(plan: &Plan) -> Metrics {
        let base = format!("ratebound.{}", plan.instance);
        let bounds = plan
            .routes
            .iter()
            .map(|r| {
                r.bounds
                    .iter()
                    .map(|b| {
                        let n = format!("{base}.{}.{}", r.name, b.name);
                        BoundIds {
                            allowed: define(MetricType::Counter, &format!("{n}.allowed")),
                            refused: define(MetricType::Counter, &format!("{n}.refused")),
                            would_refuse: define(MetricType::Counter, &format!("{n}.would_refuse")),
                            overflow: define(MetricType::Counter, &format!("{n}.overflow")),
                            tracked: define(MetricType::Gauge, &format!("{n}.tracked")),
                        }
                    })
                    .collect()
            })
            .collect();
        let counter = |name: &str| define(MetricType::Counter, &format!("{base}.{name}"));
        Metrics {
            bounds,
            store_errors: counter("store_errors"),
            identity_errors: counter("identity_errors"),
            session_calls: counter("session_calls"),
            session_cache_hits: counter("session_cache_hits"),
        }
    }

    fn ids(&self, route: usize, bound: usize) -> Option<&BoundIds> {
        self.bounds.get(route).and_then(|r| r.get(bound))
    }

    pub fn record(&self, route: usize, events: &[BoundEvent]) {
        for e in events {
            let Some(ids) = self.ids(route, e.bound) else {
                continue;
            };
            let id = match e.event {
                Event::Allowed => ids.allowed,
                Event::Refused => ids.refused,
                Event::WouldRefuse => ids.would_refuse,
            };
            inc(id);
            if e.overflow {
                inc(ids.overflow);
            }
        }
    }

    pub fn tracked(&self, route: usize, bound: usize, n: u32) {
        if let Some(id) = self.ids(route, bound).and_then(|ids| ids.tracked) {
            let _ = hostcalls::record_metric(id, u64::from(n));
        }
    }

    pub fn store_error(&self) {
        inc(self.store_errors);
    }

    pub fn identity_error(&self) {
        inc(self.identity_errors);
    }

    pub fn session_call(&self) {
        inc(self.session_calls);
    }

    pub fn session_cache_hit(&self) {
        inc(self.session_cache_hits);
    }
}

fn inc(id: Option<u32>) {
    if let Some(id) = id {
        let _ = hostcalls::increment_metric(id, 1);
    }
}

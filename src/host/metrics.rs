//! Envoy stats: per route and bound, `allowed`, `refused`, `would_refuse`
//! (shadow), `overflow` (counters) and `tracked` (gauge); per instance
//! `store_errors`, `identity_errors`, `session_calls`, `session_cache_hits`,
//! `jwt_cache_hits`, `store_reads_saved` and `store_stale_guesses` (see
//! `write_memory`). Installation bounds have `allowed`, `refused`,
//! `would_refuse`, `rls_calls` and `rls_errors`, and the instance a
//! histogram `rls_latency_ms` of the rate-limit service's answers,
//! `rls_calls_saved` (locked callers refused without a call),
//! `rls_no_limit` (answers without a limit: the service's configuration
//! lacks the domain) and, with sign-in routes, `accounts_unreadable`. With
//! fleet bounds, the instance has `fleet_sync_calls`, `fleet_sync_keys`
//! (keys sent: with the calls, how fast the service takes a sync),
//! `fleet_sync_errors` (calls that gave no counts), `fleet_alone` (decisions made without a
//! fresh fleet count) and the gauge `fleet_nodes` (nodes last counted).
//! Names are `ratebound.<instance>.<route>.<bound>.<stat>` (Envoy shows
//! them under `wasmcustom.`); their number is fixed by the configuration,
//! never by the traffic.
//!
//! Counters are added up in the VM and handed to Envoy on the 1 s tick:
//! a host call per bound per request saved on the request path, for stats
//! that are at most a second late.

use crate::config::plan::Plan;
use crate::pipeline::limiter::{BoundEvent, Event};
use proxy_wasm::hostcalls;
use proxy_wasm::types::MetricType;
use std::cell::Cell;

/// A counter: Envoy's id and what this VM has not handed over yet.
struct Counter {
    id: u32,
    unflushed: Cell<u64>,
}

/// Indices into `Metrics::counters`.
struct BoundIds {
    allowed: Option<usize>,
    refused: Option<usize>,
    would_refuse: Option<usize>,
    overflow: Option<usize>,
    tracked: Option<u32>,
    rls_calls: Option<usize>,
    rls_errors: Option<usize>,
}

pub struct Metrics {
    counters: Vec<Counter>,
    bounds: Vec<Vec<BoundIds>>,
    store_errors: Option<usize>,
    identity_errors: Option<usize>,
    session_calls: Option<usize>,
    session_cache_hits: Option<usize>,
    jwt_cache_hits: Option<usize>,
    store_reads_saved: Option<usize>,
    store_stale_guesses: Option<usize>,
    accounts_unreadable: Option<usize>,
    rls_calls_saved: Option<usize>,
    rls_no_limit: Option<usize>,
    rls_latency: Option<u32>,
    fleet: Option<FleetIds>,
}

struct FleetIds {
    sync_calls: Option<usize>,
    sync_keys: Option<usize>,
    sync_errors: Option<usize>,
    alone: Option<usize>,
    nodes: Option<u32>,
}

impl Metrics {
    pub fn define(plan: &Plan) -> Metrics {
        let base = format!("ratebound.{}", plan.instance);
        let mut counters = Vec::new();
        let mut counter = |name: String| {
            let id = hostcalls::define_metric(MetricType::Counter, &name).ok()?;
            counters.push(Counter {
                id,
                unflushed: Cell::new(0),
            });
            Some(counters.len() - 1)
        };
        // Node bounds, then installation bounds (`installation::stat_index`).
        let bounds = plan
            .routes
            .iter()
            .map(|r| {
                let node = r.bounds.iter().map(|b| (&b.name, true));
                let installation = r.installation.iter().map(|b| (&b.name, false));
                node.chain(installation)
                    .map(|(name, node)| {
                        let n = format!("{base}.{}.{name}", r.name);
                        let mut ids = BoundIds {
                            allowed: counter(format!("{n}.allowed")),
                            refused: counter(format!("{n}.refused")),
                            would_refuse: counter(format!("{n}.would_refuse")),
                            overflow: None,
                            tracked: None,
                            rls_calls: None,
                            rls_errors: None,
                        };
                        if node {
                            ids.overflow = counter(format!("{n}.overflow"));
                            ids.tracked = hostcalls::define_metric(
                                MetricType::Gauge,
                                &format!("{n}.tracked"),
                            )
                            .ok();
                        } else {
                            ids.rls_calls = counter(format!("{n}.rls_calls"));
                            ids.rls_errors = counter(format!("{n}.rls_errors"));
                        }
                        ids
                    })
                    .collect()
            })
            .collect();
        let store_errors = counter(format!("{base}.store_errors"));
        let identity_errors = counter(format!("{base}.identity_errors"));
        let session_calls = counter(format!("{base}.session_calls"));
        let session_cache_hits = counter(format!("{base}.session_cache_hits"));
        let jwt_cache_hits = counter(format!("{base}.jwt_cache_hits"));
        let store_reads_saved = counter(format!("{base}.store_reads_saved"));
        let store_stale_guesses = counter(format!("{base}.store_stale_guesses"));
        let fleet = plan.has_fleet_bounds().then(|| FleetIds {
            sync_calls: counter(format!("{base}.fleet_sync_calls")),
            sync_keys: counter(format!("{base}.fleet_sync_keys")),
            sync_errors: counter(format!("{base}.fleet_sync_errors")),
            alone: counter(format!("{base}.fleet_alone")),
            nodes: hostcalls::define_metric(MetricType::Gauge, &format!("{base}.fleet_nodes")).ok(),
        });
        let service = plan.service.is_some();
        let accounts_unreadable = plan
            .routes
            .iter()
            .any(|r| r.account.is_some())
            .then(|| counter(format!("{base}.accounts_unreadable")))
            .flatten();
        let rls_calls_saved = service
            .then(|| counter(format!("{base}.rls_calls_saved")))
            .flatten();
        let rls_no_limit = service
            .then(|| counter(format!("{base}.rls_no_limit")))
            .flatten();
        let rls_latency = plan.service.as_ref().and_then(|_| {
            hostcalls::define_metric(MetricType::Histogram, &format!("{base}.rls_latency_ms")).ok()
        });
        Metrics {
            counters,
            bounds,
            store_errors,
            identity_errors,
            session_calls,
            session_cache_hits,
            jwt_cache_hits,
            store_reads_saved,
            store_stale_guesses,
            accounts_unreadable,
            rls_calls_saved,
            rls_no_limit,
            rls_latency,
            fleet,
        }
    }

    /// A fleet sync call sent, with `keys` keys.
    pub fn fleet_sync_sent(&self, keys: usize) {
        if let Some(f) = &self.fleet {
            self.inc(f.sync_calls);
            self.add(f.sync_keys, keys as u64);
        }
    }

    /// A fleet sync call that gave no counts.
    pub fn fleet_sync_failed(&self) {
        if let Some(f) = &self.fleet {
            self.inc(f.sync_errors);
        }
    }

    /// Fleet decisions made alone (`Limiter::take_alone`).
    pub fn fleet_alone(&self, n: u64) {
        if let Some(f) = &self.fleet {
            self.add(f.alone, n);
        }
    }

    /// The nodes the fleet record last counted.
    pub fn fleet_nodes(&self, n: u32) {
        if let Some(id) = self.fleet.as_ref().and_then(|f| f.nodes) {
            let _ = hostcalls::record_metric(id, u64::from(n));
        }
    }

    /// How long one rate-limit service call took.
    pub fn service_latency(&self, ms: u64) {
        if let Some(id) = self.rls_latency {
            let _ = hostcalls::record_metric(id, ms);
        }
    }

    fn inc(&self, slot: Option<usize>) {
        self.add(slot, 1);
    }

    fn add(&self, slot: Option<usize>, n: u64) {
        if let Some(c) = slot.and_then(|s| self.counters.get(s)) {
            c.unflushed.set(c.unflushed.get() + n);
        }
    }

    /// What the worker's memory of its writes did (`Limiter::take_memory_counts`).
    pub fn write_memory(&self, (saved, stale): (u64, u64)) {
        self.add(self.store_reads_saved, saved);
        self.add(self.store_stale_guesses, stale);
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

    fn ids(&self, route: usize, bound: usize) -> Option<&BoundIds> {
        self.bounds.get(route).and_then(|r| r.get(bound))
    }

    pub fn record(&self, route: usize, events: &[BoundEvent]) {
        for e in events {
            let Some(ids) = self.ids(route, e.bound) else {
                continue;
            };
            self.inc(match e.event {
                Event::Allowed => ids.allowed,
                Event::Refused => ids.refused,
                Event::WouldRefuse => ids.would_refuse,
                Event::ServiceCall => ids.rls_calls,
                Event::ServiceError => ids.rls_errors,
            });
            if e.overflow {
                self.inc(ids.overflow);
            }
        }
    }

    pub fn tracked(&self, route: usize, bound: usize, n: u32) {
        if let Some(id) = self.ids(route, bound).and_then(|ids| ids.tracked) {
            let _ = hostcalls::record_metric(id, u64::from(n));
        }
    }

    pub fn store_error(&self) {
        self.inc(self.store_errors);
    }

    pub fn identity_error(&self) {
        self.inc(self.identity_errors);
    }

    pub fn session_call(&self) {
        self.inc(self.session_calls);
    }

    pub fn session_cache_hit(&self) {
        self.inc(self.session_cache_hits);
    }

    pub fn jwt_cache_hit(&self) {
        self.inc(self.jwt_cache_hits);
    }

    pub fn account_unreadable(&self) {
        self.inc(self.accounts_unreadable);
    }

    pub fn rls_call_saved(&self) {
        self.inc(self.rls_calls_saved);
    }

    pub fn rls_no_limit(&self) {
        self.inc(self.rls_no_limit);
    }
}

//! The thin layer over proxy-wasm: reads what the plan needs from Envoy,
//! hands it to the pure core, and turns decisions into replies and stats.

mod metrics;
mod shared;

use crate::address::strip_port;
use crate::config;
use crate::headers;
use crate::lanes;
use crate::limiter::{Caller, Limiter};
use crate::plan::{Plan, RequestInfo};
use crate::slots::{self, Lane, Table};
use crate::store::ensure;
use crate::window::Quota;
use metrics::Metrics;
use proxy_wasm::hostcalls;
use proxy_wasm::traits::{Context, HttpContext, RootContext};
use proxy_wasm::types::{Action, BufferType, ContextType, LogLevel, MapType};
use shared::{log, now_ms, property_string, request_header, SharedData};
use std::rc::Rc;
use std::time::Duration;

proxy_wasm::main! {{
    proxy_wasm::set_log_level(LogLevel::Info);
    std::panic::set_hook(Box::new(|info| {
        log(LogLevel::Critical, &format!("ratebound panicked: {info}"));
    }));
    proxy_wasm::set_root_context(|_| -> Box<dyn RootContext> { Box::new(Root::default()) });
}}

/// Buckets swept per lane per tick: a full sweep every few seconds.
const SWEEP_CHUNK: usize = 256;

#[derive(Default)]
struct Root {
    active: Option<Rc<Active>>,
    ticks: u64,
}

/// A configuration in force: the limiter and its stats.
struct Active {
    limiter: Limiter,
    metrics: Metrics,
}

impl Context for Root {}

impl RootContext for Root {
    fn on_vm_start(&mut self, _: usize) -> bool {
        log(
            LogLevel::Info,
            &format!(
                "ratebound {} (commit {}) starting",
                env!("CARGO_PKG_VERSION"),
                env!("RATEBOUND_GIT_COMMIT")
            ),
        );
        #[cfg(feature = "selftest")]
        crate::store_suite::report(
            &SharedData,
            &format!("selftest{:x}", fresh_seed()[0]),
            |line| log(LogLevel::Info, line),
        );
        true
    }

    fn on_configure(&mut self, _: usize) -> bool {
        let bytes = hostcalls::get_buffer(BufferType::PluginConfiguration, 0, usize::MAX)
            .ok()
            .flatten()
            .unwrap_or_default();
        match activate(&bytes) {
            Ok(active) => {
                let p = &active.limiter.plan;
                log(
                    LogLevel::Info,
                    &format!(
                        "ratebound configured: instance {:?}, {} routes, {} bounds",
                        p.instance,
                        p.routes.len(),
                        p.routes.iter().map(|r| r.bounds.len()).sum::<usize>()
                    ),
                );
                self.active = Some(Rc::new(active));
                let _ = hostcalls::set_tick_period(Duration::from_secs(1));
                true
            }
            Err(errors) => {
                for e in &errors {
                    log(
                        LogLevel::Error,
                        &format!("ratebound configuration rejected: {e}"),
                    );
                }
                false
            }
        }
    }

    fn on_tick(&mut self) {
        let Some(active) = &self.active else { return };
        self.ticks += 1;
        let now = now_ms();
        let store = SharedData;
        for (r, lanes) in active.limiter.lanes.iter().enumerate() {
            for (b, lane) in lanes.iter().enumerate() {
                let Some(table) = lane.table else { continue };
                let chunks = table.buckets.div_ceil(SWEEP_CHUNK) as u64;
                let start = ((self.ticks % chunks) as usize) * SWEEP_CHUNK;
                if let Err(e) = slots::sweep(&store, lane, start..start + SWEEP_CHUNK, now) {
                    active.metrics.store_error();
                    log(LogLevel::Warn, &format!("ratebound sweep: {e}"));
                }
                if let Ok(n) = slots::tracked(&store, lane) {
                    active.metrics.tracked(r, b, n);
                }
            }
        }
    }

    fn create_http_context(&self, _: u32) -> Option<Box<dyn HttpContext>> {
        Some(Box::new(Request {
            active: self.active.clone(),
            success: None,
            refused: false,
        }))
    }

    fn get_type(&self) -> Option<ContextType> {
        Some(ContextType::HttpContext)
    }
}

/// Parses, compiles, and binds every bound to its lane in shared data.
fn activate(bytes: &[u8]) -> Result<Active, Vec<String>> {
    let config =
        config::parse(bytes).map_err(|es| es.iter().map(|e| e.to_string()).collect::<Vec<_>>())?;
    let plan = Plan::compile(&config);
    let store = SharedData;
    let store_err = |e: crate::store::StoreError| vec![format!("shared data: {e}")];
    let (dir, assigned) = lanes::resolve(
        &store,
        &plan.instance,
        plan.hash,
        &plan.fingerprints(),
        fresh_seed(),
    )
    .map_err(store_err)?;
    let mut next = assigned.iter();
    let mut all = Vec::with_capacity(plan.routes.len());
    for route in &plan.routes {
        let mut lanes_of_route = Vec::with_capacity(route.bounds.len());
        for bound in &route.bounds {
            let a = next
                .next()
                .ok_or_else(|| vec!["lane assignment is shorter than the plan".to_string()])?;
            let table = (bound.per != config::Per::Route).then_some(Table::DEFAULT);
            let lane = Lane::new(
                &lanes::lane_prefix(&plan.instance, a.lane),
                a.tag,
                bound.rate,
                table,
            );
            // Create every key ahead of use so all later writes are CAS.
            for key in lane.all_keys() {
                ensure(&store, key).map_err(store_err)?;
            }
            lanes_of_route.push(lane);
        }
        all.push(lanes_of_route);
    }
    let metrics = Metrics::define(&plan);
    Ok(Active {
        limiter: Limiter::new(plan, all, dir.seed),
        metrics,
    })
}

/// Random keys for a new directory (WASI random through std's RandomState).
fn fresh_seed() -> [u64; 2] {
    use std::hash::BuildHasher;
    let s = std::collections::hash_map::RandomState::new();
    [s.hash_one(now_ms()), s.hash_one(!now_ms())]
}

struct Request {
    active: Option<Rc<Active>>,
    /// Headers for an admitted response, prepared on the request path.
    success: Option<Quota>,
    /// This filter sent the local reply: its response path adds nothing.
    refused: bool,
}

impl Context for Request {}

impl HttpContext for Request {
    fn on_http_request_headers(&mut self, _: usize, _: bool) -> Action {
        let Some(active) = self.active.clone() else {
            return Action::Continue;
        };
        let plan = &active.limiter.plan;
        let needs = plan.needs;
        let route_name = needs
            .route_name
            .then(|| property_string(vec!["xds", "route_name"]))
            .flatten();
        let host = needs.host.then(|| request_header(":authority")).flatten();
        let path = needs.path.then(|| request_header(":path")).flatten();
        let method = needs.method.then(|| request_header(":method")).flatten();
        let info = RequestInfo {
            route_name: route_name.as_deref(),
            host: host.as_deref(),
            path: path.as_deref(),
            method: method.as_deref(),
        };
        let Some(r) = plan.route_for(&info) else {
            return Action::Continue;
        };
        let route = &plan.routes[r];
        if route.bounds.is_empty() {
            return Action::Continue;
        }
        let source = route
            .bounds
            .iter()
            .any(|b| b.per == config::Per::Address)
            .then(|| property_string(vec!["source", "address"]))
            .flatten()
            .unwrap_or_default();
        let caller = Caller {
            address: strip_port(&source),
        };
        let d = active.limiter.check(&SharedData, r, &caller, now_ms());
        active.metrics.record(r, &d.events);
        for e in &d.errors {
            active.metrics.store_error();
            log(
                LogLevel::Warn,
                &format!(
                    "ratebound route {}: store error, bound skipped: {e}",
                    route.name
                ),
            );
        }
        if let Some((b, quota)) = d.refused {
            let h = headers::refusal_headers(&quota);
            let body = headers::refusal_body(&route.name, &route.bounds[b].name, &quota);
            let pairs: Vec<(&str, &str)> = h.iter().map(|(k, v)| (*k, v.as_str())).collect();
            self.refused = true;
            if let Err(s) = hostcalls::send_http_response(429, pairs, Some(body.as_bytes())) {
                log(
                    LogLevel::Error,
                    &format!("ratebound could not send 429: {s:?}"),
                );
                return Action::Continue;
            }
            return Action::Pause;
        }
        if plan.success_headers {
            self.success = d.tightest.map(|(_, q)| q);
        }
        Action::Continue
    }

    fn on_http_response_headers(&mut self, _: usize, _: bool) -> Action {
        if self.refused {
            return Action::Continue;
        }
        if let Some(q) = self.success.take() {
            for (name, value) in headers::quota_headers(&q) {
                let _ = hostcalls::set_map_value(MapType::HttpResponseHeaders, name, Some(&value));
            }
        }
        Action::Continue
    }
}

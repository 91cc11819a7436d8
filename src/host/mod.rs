//! The thin layer over proxy-wasm: reads what the plan needs from Envoy,
//! hands it to the pure core, and turns decisions into replies and stats.

mod identity;
mod metrics;
mod shared;

use crate::address::strip_port;
use crate::config;
use crate::config::{OnError, SessionSource};
use crate::console;
use crate::headers;
use crate::identity::{self as id_decode, Identity, SessionError};
use crate::identity_cache::{credential_key, IdentityCache};
use crate::lanes;
use crate::limiter::{Caller, Decision, Limiter, Pending};
use crate::plan::{Plan, RequestInfo};
use crate::slots::{self, Lane, Table};
use crate::store::Store;
use crate::window::Quota;
use metrics::Metrics;
use proxy_wasm::hostcalls;
use proxy_wasm::traits::{Context, HttpContext, RootContext};
use proxy_wasm::types::{Action, BufferType, ContextType, LogLevel, MapType};
use shared::{log, now_ms, property_string, request_header, SharedData};
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

proxy_wasm::main! {{
    proxy_wasm::set_log_level(LogLevel::Info);
    std::panic::set_hook(Box::new(|info| {
        // Where, not what: a panic message can quote the data it choked on
        // (a string slice error prints the string), and no request value
        // may reach the log.
        let at = info
            .location()
            .map_or_else(String::new, |l| format!(" at {}:{}", l.file(), l.line()));
        log(LogLevel::Critical, &format!("ratebound panicked{at}"));
    }));
    proxy_wasm::set_root_context(|_| -> Box<dyn RootContext> { Box::new(Root::default()) });
}}

/// Buckets swept per lane per sweep: a full sweep every few seconds.
const SWEEP_CHUNK: usize = 256;

#[derive(Default)]
struct Root {
    active: Option<Rc<Active>>,
    /// The configuration's bytes, to register it again if the directory
    /// forgot it while it was in force.
    bytes: Vec<u8>,
    /// It was in force at its last tick.
    current: bool,
    /// Joined its configuration's directory entry (at its first tick).
    joined: bool,
}

/// A configuration in force: the limiter, its stats, the session cache.
struct Active {
    limiter: Limiter,
    /// Its generation in the lane directory.
    gen: u64,
    /// Forgotten by the directory while superseded: its lanes may be
    /// another bound's now, so it counts nothing more.
    orphaned: std::cell::Cell<bool>,
    metrics: Metrics,
    sessions: RefCell<IdentityCache>,
    /// Identities of JWTs jwt_authn verified, per token.
    tokens: RefCell<IdentityCache>,
    /// The last 429 written, its buffers reused for the next.
    refusal: RefCell<headers::Refusal>,
}

impl Context for Root {
    fn on_done(&mut self) -> bool {
        // Envoy destroys a superseded configuration's contexts once its
        // connections drained: its lanes are free when the last one leaves.
        self.leave();
        true
    }
}

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
                self.leave();
                self.bytes = bytes;
                self.current = true;
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
        let Some(active) = self.active.clone() else {
            return;
        };
        active
            .metrics
            .write_memory(active.limiter.take_memory_counts());
        active.metrics.flush();
        let now = now_ms();
        match lanes::beat(&SharedData, active.gen, !self.joined, now) {
            Ok(Some(beat)) => {
                self.joined = true;
                self.current = beat.current;
                // Only the configuration in force keeps gauges and sweeps,
                // one VM a period: a superseded one only serves connections
                // that are draining, and its lanes are not all its own.
                if beat.sweep {
                    sweep(&active, now);
                }
            }
            Ok(None) => self.forgotten(&active),
            Err(e) => {
                active.metrics.store_error();
                log(LogLevel::Warn, &format!("ratebound: lane directory: {e}"));
            }
        }
    }

    fn create_http_context(&self, _: u32) -> Option<Box<dyn HttpContext>> {
        Some(Box::new(Request {
            active: self.active.clone(),
            success: None,
            refused: false,
            waiting: None,
        }))
    }

    fn get_type(&self) -> Option<ContextType> {
        Some(ContextType::HttpContext)
    }
}

impl Root {
    /// Leaves the directory entry this context joined, if it did.
    fn leave(&mut self) {
        let Some(active) = self.active.take() else {
            return;
        };
        if !std::mem::take(&mut self.joined) {
            return;
        }
        match lanes::leave(&SharedData, active.gen) {
            Ok(left) => log(
                LogLevel::Debug,
                &format!(
                    "ratebound: a context of generation {} left the lane directory ({left} left)",
                    active.gen
                ),
            ),
            Err(e) => log(
                LogLevel::Warn,
                &format!("ratebound: leaving the lane directory: {e}"),
            ),
        }
    }

    /// The directory no longer knows this configuration: none of its
    /// contexts ticked for `lanes::LEASE_MS`. In force, it registers again
    /// (its counts start over); superseded, it stops counting, since its
    /// lanes may be another bound's by now.
    fn forgotten(&mut self, active: &Active) {
        active.metrics.store_error();
        if !self.current {
            if !active.orphaned.replace(true) {
                log(
                    LogLevel::Error,
                    "ratebound: a superseded configuration was forgotten by the lane directory \
                     (no tick for a minute); its draining connections are no longer counted",
                );
            }
            return;
        }
        log(
            LogLevel::Error,
            "ratebound: the configuration in force was forgotten by the lane directory \
             (no tick for a minute); registering it again, its counts start over",
        );
        match activate(&self.bytes) {
            Ok(fresh) => {
                self.joined = false;
                self.active = Some(Rc::new(fresh));
            }
            Err(errors) => {
                for e in errors {
                    log(
                        LogLevel::Error,
                        &format!("ratebound: registering again: {e}"),
                    );
                }
            }
        }
    }
}

/// Sweeps expired callers out of the caller tables that track any, a chunk
/// of buckets each, and writes the tracked gauges. Idle tables cost one
/// read.
fn sweep(active: &Active, now: u64) {
    let store = SharedData;
    let period = now / lanes::SWEEP_MS;
    for (r, lanes_of_route) in active.limiter.lanes.iter().enumerate() {
        for (b, lane) in lanes_of_route.iter().enumerate() {
            let Some(table) = lane.table else { continue };
            let mut n = match slots::tracked(&store, lane) {
                Ok(n) => n,
                Err(e) => {
                    active.metrics.store_error();
                    log(LogLevel::Warn, &format!("ratebound sweep: {e}"));
                    continue;
                }
            };
            if n > 0 {
                let chunks = table.buckets.div_ceil(SWEEP_CHUNK).max(1) as u64;
                let start = ((period % chunks) as usize) * SWEEP_CHUNK;
                match slots::sweep(&store, lane, start..start + SWEEP_CHUNK, now) {
                    Ok(removed) => n = n.saturating_sub(removed),
                    Err(e) => {
                        active.metrics.store_error();
                        log(LogLevel::Warn, &format!("ratebound sweep: {e}"));
                    }
                }
            }
            active.metrics.tracked(r, b, n);
        }
    }
}

/// Parses, compiles, and binds every bound to its lane in shared data.
fn activate(bytes: &[u8]) -> Result<Active, Vec<String>> {
    let config =
        config::parse(bytes).map_err(|es| es.iter().map(|e| e.to_string()).collect::<Vec<_>>())?;
    let plan = Plan::compile(&config);
    let store = SharedData;
    let resolved = lanes::register(
        &store,
        &plan.instance,
        plan.hash,
        &plan.wants(),
        now_ms(),
        fresh_seed(),
    )
    .map_err(|e| vec![e.to_string()])?;
    let gen = resolved.registered.gen;
    if resolved.registered.first {
        // Once per configuration, by the first VM to see it.
        log(
            LogLevel::Info,
            &format!(
                "ratebound lanes: instance {:?} is generation {gen}; this vm_id has {} \
                 configurations alive and {} shared-data keys (budget {})",
                plan.instance,
                resolved.alive,
                resolved.keys,
                crate::budget::VM_KEYS
            ),
        );
        for w in console::warnings(&config, None) {
            if w.level == console::Level::Warning {
                log(
                    LogLevel::Warn,
                    &format!("ratebound configuration warning: {w}"),
                );
            }
        }
    }
    let all = bind_lanes(&plan, &resolved.registered.assigned).inspect_err(|_| {
        let _ = lanes::leave(&store, gen);
    })?;
    let metrics = Metrics::define(&plan);
    // (entries, ttl_s) of a configured cache; none caches nothing.
    let cache = |sized: Option<(usize, u64)>| {
        let (entries, ttl_s) = sized.unwrap_or((1, 0));
        RefCell::new(IdentityCache::new(entries, ttl_s * 1_000))
    };
    let id = plan.identity.as_ref();
    let sessions = cache(
        id.and_then(|i| i.session.as_ref())
            .map(|s| (s.cache_entries, s.cache_ttl_s)),
    );
    let tokens = cache(
        id.and_then(|i| i.jwt.as_ref())
            .map(|j| (j.cache_entries, j.cache_ttl_s)),
    );
    Ok(Active {
        limiter: Limiter::new(plan, all, resolved.seed),
        gen,
        orphaned: std::cell::Cell::new(false),
        metrics,
        sessions,
        tokens,
        refusal: RefCell::default(),
    })
}

/// Each bound's lane, its keys created where they are not yet: the first VM
/// to bind a new caller table creates its 1,252 keys (the tracked count
/// last); every other VM reads that one key.
fn bind_lanes(plan: &Plan, assigned: &[lanes::Assigned]) -> Result<Vec<Vec<Lane>>, Vec<String>> {
    let store = SharedData;
    let store_err = |e: crate::store::StoreError| vec![format!("shared data: {e}")];
    let mut next = assigned.iter();
    let mut all = Vec::with_capacity(plan.routes.len());
    for route in &plan.routes {
        let mut lanes_of_route = Vec::with_capacity(route.bounds.len());
        for bound in &route.bounds {
            let a = next
                .next()
                .ok_or_else(|| vec!["lane assignment is shorter than the plan".to_string()])?;
            let table = (bound.per != config::Per::Route).then_some(Table::DEFAULT);
            let lane = Lane::new(&lanes::lane_prefix(a.lane), a.tag, bound.rate, table);
            if store.get(lane.last_key()).map_err(store_err)?.0.is_none() {
                lane.create_keys(&store).map_err(store_err)?;
            }
            lanes_of_route.push(lane);
        }
        all.push(lanes_of_route);
    }
    Ok(all)
}

/// The figures of bound `b` of `route`, as the client is shown them.
fn shown(plan: &Plan, route: usize, b: usize, quota: Quota) -> Option<headers::Shown<'_>> {
    let bound = plan.routes.get(route)?.bounds.get(b)?;
    Some(headers::Shown {
        bound: &bound.name,
        window_ms: bound.rate.window_ms,
        quota,
        structured: plan.structured_headers,
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
    /// The bound an admitted response shows: (route, bound, its quota).
    success: Option<(usize, usize, Quota)>,
    /// This filter sent the local reply: its response path adds nothing.
    refused: bool,
    /// Waiting for the session service.
    waiting: Option<Waiting>,
}

/// A request paused for its session resolve: early bounds already read.
struct Waiting {
    pending: Pending,
    address: String,
    identity: Identity,
    credential: u128,
}

impl Request {
    fn refuse(&mut self, active: &Active, route: usize, d: &Decision) -> Action {
        let Some((b, quota)) = d.refused else {
            return Action::Continue;
        };
        let Some(shown) = shown(&active.limiter.plan, route, b, quota) else {
            return Action::Continue;
        };
        let route_name = active
            .limiter
            .plan
            .routes
            .get(route)
            .map_or("", |r| r.name.as_str());
        // Only busy if re-entered, which a single-threaded VM never does.
        let Ok(mut refusal) = active.refusal.try_borrow_mut() else {
            return Action::Continue;
        };
        refusal.render(&shown, route_name);
        self.refused = true;
        let sent = hostcalls::send_http_response(
            429,
            refusal.headers().collect(),
            Some(refusal.body().as_bytes()),
        );
        if let Err(s) = sent {
            log(
                LogLevel::Error,
                &format!("ratebound could not send 429: {s:?}"),
            );
            self.refused = false;
            return Action::Continue;
        }
        Action::Pause
    }

    /// Records stats and errors of a decision; refuses or lets it through.
    fn conclude(&mut self, active: &Active, route: usize, d: Decision) -> Action {
        active.metrics.record(route, &d.events);
        for e in &d.errors {
            active.metrics.store_error();
            log(
                LogLevel::Warn,
                &format!("ratebound: store error, bound skipped: {e}"),
            );
        }
        if d.refused.is_some() {
            return self.refuse(active, route, &d);
        }
        let plan = &active.limiter.plan;
        if plan.success_headers {
            self.success = d.tightest.map(|(b, q)| (route, b, q));
        }
        Action::Continue
    }

    /// Checks the identity bounds, then records the request everywhere.
    fn finish(
        &mut self,
        active: &Active,
        mut pending: Pending,
        address: &str,
        id: &Identity,
        now: u64,
    ) -> Action {
        let lim = &active.limiter;
        let caller = Caller {
            address,
            identity: Some(id),
        };
        let route = pending.route();
        let late = lim.late_bounds(route, pending.op(), &caller);
        if let Some(refused) = lim.prepare(&SharedData, &mut pending, &late, &caller, now) {
            return self.conclude(active, route, refused);
        }
        let d = lim.commit(&SharedData, pending, now);
        self.conclude(active, route, d)
    }

    /// A failed session resolve: counted, logged, and answered with 503
    /// when the configured outcome is `deny` (then true).
    fn identity_failed(
        &mut self,
        active: &Active,
        session: &SessionSource,
        why: &SessionError,
    ) -> bool {
        active.metrics.identity_error();
        log(
            LogLevel::Warn,
            &format!("ratebound session resolve failed: {why}"),
        );
        if session.on_error != OnError::Deny {
            return false;
        }
        self.refused = true;
        let _ = hostcalls::send_http_response(
            503,
            vec![("content-type", "text/plain")],
            Some(b"identity could not be resolved\n"),
        );
        true
    }

    /// The credential the session service is asked about, if any.
    fn credential(session: &SessionSource) -> Option<(&'static str, String)> {
        if let Some(name) = &session.cookie {
            if let Some(v) = request_header("cookie")
                .as_deref()
                .and_then(|c| id_decode::cookie(c, name))
            {
                return Some(("cookie", format!("{name}={v}")));
            }
        }
        if session.authorization {
            if let Some(v) = request_header("authorization").filter(|v| !v.is_empty()) {
                return Some(("authorization", v));
            }
        }
        None
    }
}

impl Context for Request {
    fn on_http_call_response(&mut self, _: u32, _: usize, body_size: usize, _: usize) {
        let (Some(active), Some(w)) = (self.active.clone(), self.waiting.take()) else {
            return;
        };
        let Some(session) = active
            .limiter
            .plan
            .identity
            .as_ref()
            .and_then(|i| i.session.as_ref())
        else {
            return;
        };
        let status = hostcalls::get_map_value(MapType::HttpCallResponseHeaders, ":status")
            .ok()
            .flatten()
            .unwrap_or_default();
        let answer = id_decode::session_outcome(&status, || {
            hostcalls::get_buffer(BufferType::HttpCallResponseBody, 0, body_size)
                .ok()
                .flatten()
        });
        let mut id = w.identity;
        match answer {
            Ok(found) => {
                if let Ok(mut cache) = active.sessions.try_borrow_mut() {
                    cache.insert(w.credential, found.clone(), now_ms());
                }
                id.merge(found);
            }
            Err(e) => {
                if self.identity_failed(&active, session, &e) {
                    return;
                }
            }
        }
        if self.finish(&active, w.pending, &w.address, &id, now_ms()) == Action::Continue {
            let _ = hostcalls::resume_http_request();
        }
    }
}

impl HttpContext for Request {
    fn on_http_request_headers(&mut self, _: usize, _: bool) -> Action {
        let Some(active) = self.active.clone().filter(|a| !a.orphaned.get()) else {
            return Action::Continue;
        };
        let lim = &active.limiter;
        let plan = &lim.plan;
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
        // Normalised once, for the route and its operation.
        let request = info.normalized();
        let Some(r) = plan.route_for_normalized(&request) else {
            return Action::Continue;
        };
        let route = &plan.routes[r];
        if route.bounds.is_empty() {
            return Action::Continue;
        }
        let source = route
            .needs_address
            .then(|| property_string(vec!["source", "address"]))
            .flatten()
            .unwrap_or_default();
        let address = strip_port(&source);

        let op = route.operation_for(&request);
        let now = now_ms();

        // Phase 1: bounds that need no identity, before anything is resolved.
        let mut pending = lim.start(r, op);
        let anonymous = Caller {
            address,
            identity: None,
        };
        let early = route.early_bounds(op);
        if let Some(refused) = lim.prepare(&SharedData, &mut pending, &early, &anonymous, now) {
            return self.conclude(&active, r, refused);
        }
        let Some(identity_config) = plan.identity.as_ref().filter(|_| route.needs_identity(op))
        else {
            let d = lim.commit(&SharedData, pending, now);
            return self.conclude(&active, r, d);
        };

        // Phase 2: who is calling, then the bounds that depend on it.
        let tokens = identity::Tokens {
            cache: &active.tokens,
            seed: lim.seed(),
            now_ms: now,
        };
        let (mut id, remembered) = identity::resolve(identity_config, &tokens);
        if remembered {
            active.metrics.jwt_cache_hit();
        }
        if let (false, Some(session)) = (id.authenticated(), identity_config.session.as_ref()) {
            if let Some((header, value)) = Self::credential(session) {
                let key = credential_key(lim.seed(), &value);
                let cached = active
                    .sessions
                    .try_borrow()
                    .ok()
                    .and_then(|c| c.get(key, now).cloned());
                match cached {
                    Some(found) => {
                        active.metrics.session_cache_hit();
                        id.merge(found);
                    }
                    None => {
                        active.metrics.session_call();
                        let authority = session.authority.as_deref().unwrap_or(&session.cluster);
                        let call = hostcalls::dispatch_http_call(
                            &session.cluster,
                            vec![
                                (":method", "GET"),
                                (":path", &session.path),
                                (":authority", authority),
                                (header, &value),
                            ],
                            None,
                            vec![],
                            Duration::from_millis(session.timeout_ms),
                        );
                        match call {
                            Ok(_) => {
                                self.waiting = Some(Waiting {
                                    pending,
                                    address: address.to_string(),
                                    identity: id,
                                    credential: key,
                                });
                                return Action::Pause;
                            }
                            Err(s) => {
                                let why = SessionError::NotDispatched(format!("{s:?}"));
                                if self.identity_failed(&active, session, &why) {
                                    return Action::Pause;
                                }
                            }
                        }
                    }
                }
            }
        }
        self.finish(&active, pending, address, &id, now)
    }

    fn on_http_response_headers(&mut self, _: usize, _: bool) -> Action {
        if self.refused {
            return Action::Continue;
        }
        let (Some(active), Some((route, b, quota))) = (&self.active, self.success.take()) else {
            return Action::Continue;
        };
        // Appended, as Envoy's own rate limit filters do: an upstream's own
        // fields stay beside ours, and an append costs less than a replace.
        if let Some(s) = shown(&active.limiter.plan, route, b, quota) {
            headers::each_quota_header(&s, |name, value| {
                let _ = hostcalls::add_map_value(MapType::HttpResponseHeaders, name, value);
            });
        }
        Action::Continue
    }
}

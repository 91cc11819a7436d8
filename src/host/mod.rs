//! The thin layer over proxy-wasm: reads what the plan needs from Envoy,
//! hands it to the pure core, and turns decisions into replies and stats.

mod metrics;
mod shared;

use crate::config;
use crate::config::plan::Plan;
use crate::console;
use crate::count::directory;
use crate::count::lane::{self, Lane, Table};
use crate::count::lane_upkeep;
use crate::count::store::{Store, StoreError};
use crate::identity::cache::IdentityCache;
use crate::pipeline::fleet_sync::{self, Batch, Settled};
use crate::pipeline::installation::ServiceCall;
use crate::pipeline::limiter::{lanes_for, BoundEvent, Limiter};
use crate::pipeline::warm_up::{self, WarmUp};
use crate::pipeline::{
    Exchange, Host, Level, LocalReply, LogGate, SessionCall, Stat, Step, Waits, Worker,
};
use crate::reply;
use metrics::Metrics;
use proxy_wasm::hostcalls;
use proxy_wasm::traits::{Context, HttpContext, RootContext};
use proxy_wasm::types::{Action, BufferType, ContextType, LogLevel, MapType};
use shared::{log, map_value, now_ms, request_header, SharedData};
use std::cell::RefCell;
use std::collections::HashMap;
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
    proxy_wasm::set_root_context(|_| -> Box<dyn RootContext> { Box::new(Root::new()) });
}}

/// Buckets swept per caller table per tick: a full sweep every 5 s.
const SWEEP_CHUNK: usize = 256;

struct Root {
    active: Option<Rc<Active>>,
    /// The configuration's bytes, to register it again if the directory
    /// forgot it while it was in force.
    bytes: Vec<u8>,
    /// It was in force at its last tick.
    current: bool,
    /// Joined its configuration's directory entry (at its first tick).
    joined: bool,
    /// This worker's connection to the rate-limit service.
    warm: WarmUp,
    /// This context's id in the fleet record's lease (random).
    me: u64,
    /// Fleet sync calls in flight, by token, with the configuration that
    /// made them (a reload may come before the answer).
    syncs: HashMap<u32, (Rc<Active>, Batch)>,
    /// When the last 1 s housekeeping and the last fleet sync ran.
    housekept_ms: u64,
    synced_ms: u64,
    /// The fleet sync failed at its last call (logged once until it answers).
    sync_failing: bool,
    /// This node's id for the fleet heartbeat (read at the first sync).
    node: String,
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
    refusal: RefCell<reply::Refusal>,
    /// Rate-limit service failures, logged at most once per 10 s.
    quiet: LogGate,
}

impl Context for Root {
    /// A fleet sync's call, or the warm-up call, was answered.
    fn on_http_call_response(&mut self, token: u32, headers: usize, body: usize, trailers: usize) {
        let status = rls_status(headers, trailers);
        match self.syncs.remove(&token) {
            Some((active, batch)) => {
                let message = (trailers > 0)
                    .then(|| map_value(MapType::HttpCallResponseTrailers, "grpc-message"))
                    .flatten()
                    .or_else(|| {
                        (headers > 0)
                            .then(|| map_value(MapType::HttpCallResponseHeaders, "grpc-message"))
                            .flatten()
                    })
                    .unwrap_or_default();
                let status = fleet_sync::failed_call_status(status, headers > 0, &message);
                self.synced(&active, &batch, status, body)
            }
            None => self.warm_up_answered(status),
        }
    }

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
        crate::pipeline::store_suite::report(
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
                // Fleet bounds sync every `sync_ms`; the rest runs each second.
                let tick_ms = match (&active.limiter.fleet, &p.service) {
                    (Some(_), Some(s)) => s.sync_ms.min(HOUSEKEEPING_MS),
                    _ => HOUSEKEEPING_MS,
                };
                self.active = Some(Rc::new(active));
                let _ = hostcalls::set_tick_period(Duration::from_millis(tick_ms));
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
        let now = now_ms();
        if self.current {
            self.fleet_sync(&active, now);
        }
        if now.saturating_sub(self.housekept_ms) < HOUSEKEEPING_MS - TICK_SLACK_MS {
            return;
        }
        self.housekept_ms = now;
        active.metrics.fleet_alone(active.limiter.take_alone());
        active
            .metrics
            .write_memory(active.limiter.take_memory_counts());
        active.metrics.flush();
        match directory::beat(&SharedData, active.gen, !self.joined, now) {
            Ok(Some(beat)) => {
                self.joined = true;
                self.current = beat.current;
                // Only the configuration in force keeps gauges and sweeps:
                // a superseded one only serves connections that are
                // draining, and its lanes are not all its own.
                if beat.current {
                    sweep(&active, now);
                    self.warm_up(&active);
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
            exchange: Exchange::default(),
        }))
    }

    fn get_type(&self) -> Option<ContextType> {
        Some(ContextType::HttpContext)
    }
}

/// The period of everything but the fleet sync.
const HOUSEKEEPING_MS: u64 = 1_000;
/// Ticks come a little early or late: a tick this close to the period
/// counts as a whole one.
const TICK_SLACK_MS: u64 = 50;

impl Root {
    fn new() -> Root {
        Root {
            active: None,
            bytes: Vec::new(),
            current: false,
            joined: false,
            warm: WarmUp::default(),
            me: fresh_seed()[0] | 1,
            syncs: HashMap::new(),
            housekept_ms: 0,
            synced_ms: 0,
            sync_failing: false,
            node: String::new(),
        }
    }

    /// The node's stable id: Envoy's node id, the same for every run of
    /// the node, so a restart is not counted as one more node. Without one,
    /// this run's random id (each restart then counts until its minute ends).
    fn node_id(&mut self) -> &str {
        if self.node.is_empty() {
            let text = |path: Vec<&str>| {
                hostcalls::get_property(path)
                    .ok()
                    .flatten()
                    .and_then(|b| String::from_utf8(b).ok())
            };
            // The id itself, or the serialized Node message (its field 1).
            let message = |path: Vec<&str>| {
                hostcalls::get_property(path)
                    .ok()
                    .flatten()
                    .and_then(|b| fleet_sync::node_id_of(&b))
            };
            let id = text(vec!["node", "id"])
                .or_else(|| text(vec!["xds", "node", "id"]))
                .filter(|id| !id.is_empty())
                .or_else(|| message(vec!["node"]))
                .or_else(|| message(vec!["xds", "node"]))
                .filter(|id| !id.is_empty() && id.len() <= 256);
            self.node = id.unwrap_or_else(|| format!("run-{:016x}", self.me));
        }
        &self.node
    }

    /// Every `sync_ms`, if this context holds the node's lease: sends every
    /// fleet key's unsent hits to the rate-limit service (`fleet_sync`).
    fn fleet_sync(&mut self, active: &Rc<Active>, now: u64) {
        let (Some(_), Some(service)) = (&active.limiter.fleet, &active.limiter.plan.service) else {
            return;
        };
        if now.saturating_sub(self.synced_ms) < service.sync_ms.saturating_sub(TICK_SLACK_MS) {
            return;
        }
        let store = SharedData;
        let record = match fleet_sync::claim(&store, &active.limiter, (self.me, active.gen), now) {
            Ok(Some(r)) => r,
            Ok(None) => return,
            Err(e) => {
                active.metrics.store_error();
                log(LogLevel::Warn, &format!("ratebound fleet record: {e}"));
                return;
            }
        };
        self.synced_ms = now;
        if let Some(n) = record.nodes(now) {
            active.metrics.fleet_nodes(n);
        }
        let node = self.node_id().to_string();
        let (batches, errors) = fleet_sync::collect(&store, &active.limiter, &record, &node, now);
        for e in errors {
            active.metrics.store_error();
            log(LogLevel::Warn, &format!("ratebound fleet sync: {e}"));
        }
        for mut batch in batches {
            let Some(call) = batch.call(&active.limiter.plan) else {
                continue;
            };
            active.metrics.fleet_sync_sent(batch.keys());
            match dispatch_rls(&call) {
                Ok(token) => {
                    self.syncs.insert(token, (Rc::clone(active), batch));
                }
                Err(e) => {
                    log(
                        LogLevel::Debug,
                        &format!(
                            "ratebound: fleet sync call to {:?} not sent: {e}",
                            call.cluster
                        ),
                    );
                    self.synced(
                        active,
                        &batch,
                        crate::rls::GrpcCode::Unavailable.number(),
                        0,
                    );
                }
            }
        }
    }

    /// A sync call ended with `status` and a body of `body` bytes.
    fn synced(&mut self, active: &Active, batch: &Batch, status: u32, body: usize) {
        let framed = (status == 0)
            .then(|| hostcalls::get_buffer(BufferType::HttpCallResponseBody, 0, body).ok())
            .flatten()
            .flatten();
        let message = framed.as_deref().and_then(|f| crate::rls::unframe(f).ok());
        let (settled, errors) = fleet_sync::settle(
            &SharedData,
            &active.limiter,
            batch,
            status,
            message,
            now_ms(),
        );
        for e in errors {
            active.metrics.store_error();
            log(LogLevel::Warn, &format!("ratebound fleet sync: {e}"));
        }
        match settled {
            Settled::Answered => {
                if std::mem::take(&mut self.sync_failing) {
                    log(LogLevel::Info, "ratebound: fleet sync answered again");
                }
            }
            Settled::Failed(e) => {
                active.metrics.fleet_sync_failed();
                if !std::mem::replace(&mut self.sync_failing, true) {
                    log(
                        LogLevel::Warn,
                        &format!(
                            "ratebound: fleet sync failed ({e}); fleet bounds decide alone at \
                             limit / nodes until the service answers"
                        ),
                    );
                }
            }
        }
    }

    /// Opens this worker's connection to the rate-limit service before its
    /// first sign-in (`pipeline::warm_up`): one call at a time, a tick
    /// apart, until one is answered.
    fn warm_up(&mut self, active: &Active) {
        if !self.warm.due() {
            return;
        }
        let Some(call) = warm_up::call(&active.limiter.plan) else {
            // No route calls the service: nothing to warm, at any tick.
            self.warm = WarmUp::Done { answered: false };
            return;
        };
        if let Err(e) = dispatch_rls(&call) {
            log(
                LogLevel::Debug,
                &format!(
                    "ratebound: warm-up call to {:?} not sent: {e}",
                    call.cluster
                ),
            );
            self.warm_up_answered(crate::rls::GrpcCode::Unavailable.number());
        }
    }

    /// The warm-up call ended with `status`; a warning when that was the
    /// last try.
    fn warm_up_answered(&mut self, status: u32) {
        if !self.warm.answered(status) {
            return;
        }
        let cluster = self
            .active
            .as_ref()
            .and_then(|a| a.limiter.plan.service.as_ref())
            .map_or("", |s| s.cluster.as_str());
        log(
            LogLevel::Warn,
            &format!(
                "ratebound: the rate-limit service (cluster {cluster:?}) answered no warm-up call \
                 in {} tries (last: gRPC status {status}); this worker's first sign-in opens \
                 the connection",
                warm_up::TRIES
            ),
        );
    }

    /// Leaves the directory entry this context joined, if it did.
    fn leave(&mut self) {
        let Some(active) = self.active.take() else {
            return;
        };
        if !std::mem::take(&mut self.joined) {
            return;
        }
        match directory::leave(&SharedData, active.gen) {
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
    /// contexts ticked for `directory::LEASE_MS`. In force, it registers again
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
/// read. Every VM of the configuration in force does it, each second the
/// same chunk: reads only, but for the entries that expired (the first VM
/// removes them), so no VM's sweep moves the host's cas counter for
/// nothing.
fn sweep(active: &Active, now: u64) {
    let store = SharedData;
    let period = now / 1_000;
    for (r, lanes_of_route) in active.limiter.lanes.iter().enumerate() {
        for (b, lane) in lanes_of_route.iter().enumerate() {
            let Some(table) = lane.table else { continue };
            let mut n = match lane::tracked(&store, lane) {
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
                match lane_upkeep::sweep(&store, lane, start..start + SWEEP_CHUNK, now) {
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

/// Why a configuration could not be put in force.
enum ConfigureError {
    /// One problem in the configuration (it names the JSON path).
    Config(config::ConfigError),
    Lanes(directory::RegisterError),
    /// The directory assigned fewer lanes than the plan has bounds.
    ShortAssignment,
    SharedData(StoreError),
}

impl std::fmt::Display for ConfigureError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConfigureError::Config(e) => e.fmt(f),
            ConfigureError::Lanes(e) => e.fmt(f),
            ConfigureError::ShortAssignment => {
                f.write_str("lane assignment is shorter than the plan")
            }
            ConfigureError::SharedData(e) => write!(f, "shared data: {e}"),
        }
    }
}

/// Parses, compiles, and binds every bound to its lane in shared data.
fn activate(bytes: &[u8]) -> Result<Active, Vec<ConfigureError>> {
    let config = config::parse(bytes).map_err(|es| {
        es.into_iter()
            .map(ConfigureError::Config)
            .collect::<Vec<_>>()
    })?;
    let mut plan = Plan::compile(&config);
    // A secret named by `env` is the VM's environment variable (WASI).
    plan.key_secret =
        config::installation::resolve_key_secret(&config, |name| std::env::var(name).ok())
            .map_err(|e| vec![ConfigureError::Config(e)])?;
    let store = SharedData;
    let resolved = directory::register(
        &store,
        &plan.instance,
        plan.hash,
        &plan.wants(),
        now_ms(),
        fresh_seed(),
    )
    .map_err(|e| vec![ConfigureError::Lanes(e)])?;
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
                crate::count::budget::VM_KEYS
            ),
        );
        for w in console::warnings(&plan, None) {
            if w.level == console::Level::Warning {
                log(
                    LogLevel::Warn,
                    &format!("ratebound configuration warning: {w}"),
                );
            }
        }
    }
    let all = bind_lanes(&plan, &resolved.registered.assigned).inspect_err(|_| {
        let _ = directory::leave(&store, gen);
    })?;
    let metrics = Metrics::define(&plan);
    let (sessions, tokens) = crate::identity::cache::caches_for(plan.identity.as_ref());
    Ok(Active {
        limiter: Limiter::new(plan, all, resolved.seed),
        gen,
        orphaned: std::cell::Cell::new(false),
        metrics,
        sessions,
        tokens,
        refusal: RefCell::default(),
        quiet: LogGate::default(),
    })
}

/// Each bound's lane, its keys created where they are not yet: the first VM
/// to bind a new caller table creates its `TABLE_KEYS` keys (the tracked count
/// last); every other VM reads that one key.
fn bind_lanes(
    plan: &Plan,
    assigned: &[directory::Assigned],
) -> Result<Vec<Vec<Lane>>, Vec<ConfigureError>> {
    let store = SharedData;
    let store_err = |e: StoreError| vec![ConfigureError::SharedData(e)];
    lanes_for(plan, |n, bound| {
        let a = assigned
            .get(n)
            .ok_or_else(|| vec![ConfigureError::ShortAssignment])?;
        let lane = crate::pipeline::limiter::bound_lane(
            bound,
            &directory::lane_prefix(a.lane),
            a.tag,
            Table::DEFAULT,
        );
        if a.new_table {
            lane.create_new_keys(&store).map_err(store_err)?;
        } else if store.get(lane.last_key()).map_err(store_err)?.0.is_none() {
            lane.create_keys(&store).map_err(store_err)?;
        }
        Ok(lane)
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
    exchange: Exchange,
}

impl Active {
    fn worker(&self) -> Worker<'_> {
        Worker {
            limiter: &self.limiter,
            sessions: &self.sessions,
            tokens: &self.tokens,
            refusal: &self.refusal,
            quiet: &self.quiet,
        }
    }
}

/// The pipeline's host: Envoy through proxy-wasm, stats into `Metrics`.
struct Envoy<'a> {
    metrics: &'a Metrics,
    /// Headers of the call-out answer being handled: a failed call has
    /// none, and reading a map that is not there panics in the SDK.
    call_headers: usize,
}

impl Host for Envoy<'_> {
    type Store = SharedData;

    fn store(&self) -> &SharedData {
        &SharedData
    }

    fn now_ms(&self) -> u64 {
        now_ms()
    }

    fn request_header(&self, name: &str) -> Option<String> {
        request_header(name)
    }

    fn request_header_values(&self, name: &str) -> Vec<Vec<u8>> {
        shared::map_values(MapType::HttpRequestHeaders, name)
    }

    fn property(&self, path: Vec<&str>) -> Option<Vec<u8>> {
        hostcalls::get_property(path).ok().flatten()
    }

    fn dispatch_session(&mut self, call: &SessionCall) -> Result<(), String> {
        hostcalls::dispatch_http_call(
            call.cluster,
            call.headers.to_vec(),
            None,
            vec![],
            Duration::from_millis(call.timeout_ms),
        )
        .map(|_| ())
        .map_err(|s| format!("{s:?}"))
    }

    fn session_status(&self) -> Option<String> {
        (self.call_headers > 0).then_some(())?;
        map_value(MapType::HttpCallResponseHeaders, ":status")
    }

    fn session_body(&self, size: usize) -> Option<Vec<u8>> {
        hostcalls::get_buffer(BufferType::HttpCallResponseBody, 0, size)
            .ok()
            .flatten()
    }

    fn request_body(&self, size: usize) -> Option<Vec<u8>> {
        hostcalls::get_buffer(BufferType::HttpRequestBody, 0, size)
            .ok()
            .flatten()
    }

    fn dispatch_service(&mut self, call: &ServiceCall) -> Result<(), String> {
        dispatch_rls(call).map(|_| ())
    }

    fn service_body(&self, size: usize) -> Option<Vec<u8>> {
        let framed = hostcalls::get_buffer(BufferType::HttpCallResponseBody, 0, size)
            .ok()
            .flatten()?;
        crate::rls::unframe(&framed).ok().map(<[u8]>::to_vec)
    }

    fn service_latency(&mut self, ms: u64) {
        self.metrics.service_latency(ms);
    }

    fn send_reply(&mut self, reply: &LocalReply) -> Result<(), String> {
        shared::send_local_response(reply)
    }

    fn resume_response(&mut self) {
        let _ = hostcalls::resume_http_response();
    }

    fn add_response_header(&mut self, name: &str, value: &str) {
        let _ = hostcalls::add_map_value(MapType::HttpResponseHeaders, name, value);
    }

    fn record(&mut self, route: usize, events: &[BoundEvent]) {
        self.metrics.record(route, events);
    }

    fn count(&mut self, stat: Stat) {
        let m = self.metrics;
        match stat {
            Stat::StoreError => m.store_error(),
            Stat::IdentityError => m.identity_error(),
            Stat::SessionCall => m.session_call(),
            Stat::SessionCacheHit => m.session_cache_hit(),
            Stat::JwtCacheHit => m.jwt_cache_hit(),
            Stat::AccountUnreadable => m.account_unreadable(),
            Stat::RlsCallSaved => m.rls_call_saved(),
            Stat::RlsNoLimit => m.rls_no_limit(),
        }
    }

    fn log(&mut self, level: Level, msg: &str) {
        let level = match level {
            Level::Debug => LogLevel::Debug,
            Level::Info => LogLevel::Info,
            Level::Warn => LogLevel::Warn,
            Level::Error => LogLevel::Error,
        };
        log(level, msg);
    }
}

/// gRPC as an HTTP/2 call-out, framed here: the SDK's gRPC call panics on a
/// status Envoy returns (BadArgument when it cannot make the client), and
/// the raw import's answer never reaches this context (the SDK routes only
/// calls its own wrapper registered). Envoy's HTTP call returns only
/// statuses the SDK maps (docs/envoy-host.md).
fn dispatch_rls(call: &ServiceCall) -> Result<u32, String> {
    let timeout = format!("{}m", call.timeout_ms);
    let path = format!("/{}/{}", crate::rls::SERVICE, crate::rls::METHOD);
    hostcalls::dispatch_http_call(
        call.cluster,
        vec![
            (":method", "POST"),
            (":path", &path),
            (":authority", call.cluster),
            ("content-type", "application/grpc"),
            ("te", "trailers"),
            ("grpc-timeout", &timeout),
        ],
        Some(&crate::rls::frame(&call.message)),
        vec![],
        Duration::from_millis(call.timeout_ms),
    )
    .map_err(|s| format!("{s:?}"))
}

/// The gRPC status of a rate-limit service call's answer, from the sizes of
/// its header and trailer maps as the callback gives them.
fn rls_status(headers: usize, trailers: usize) -> u32 {
    // A failed call has no maps at all: reading one that is not there is a
    // status the SDK panics on.
    let header = |name| {
        (headers > 0)
            .then(|| map_value(MapType::HttpCallResponseHeaders, name))
            .flatten()
    };
    let trailer = (trailers > 0)
        .then(|| map_value(MapType::HttpCallResponseTrailers, "grpc-status"))
        .flatten();
    // In the trailers, or the headers of a trailers-only answer.
    let grpc = trailer.or_else(|| header("grpc-status"));
    crate::rls::call_status(header(":status").as_deref(), grpc.as_deref())
}

fn resumed(step: Step) -> Action {
    match step {
        Step::Continue => Action::Continue,
        Step::Pause => Action::Pause,
    }
}

impl Context for Request {
    /// The session service or the rate-limit service answered: a request
    /// waits for one call-out at a time.
    fn on_http_call_response(&mut self, _: u32, headers: usize, body_size: usize, trailers: usize) {
        let Some(active) = self.active.clone() else {
            return;
        };
        let mut host = Envoy {
            metrics: &active.metrics,
            call_headers: headers,
        };
        let worker = active.worker();
        let step = match self.exchange.waits_for() {
            Some(Waits::Service) => {
                let status = rls_status(headers, trailers);
                worker.on_service_answer(&mut host, &mut self.exchange, status, body_size)
            }
            _ => worker.on_session_answer(&mut host, &mut self.exchange, body_size),
        };
        if step == Step::Continue {
            let _ = hostcalls::resume_http_request();
        }
    }
}

impl Request {
    /// Runs one callback of the pipeline with this request's configuration
    /// and exchange; without a configuration the request goes on.
    fn step(&mut self, f: impl FnOnce(Worker, &mut Envoy, &mut Exchange) -> Step) -> Action {
        let Some(active) = self.active.clone() else {
            return Action::Continue;
        };
        let mut host = Envoy {
            metrics: &active.metrics,
            call_headers: 0,
        };
        resumed(f(active.worker(), &mut host, &mut self.exchange))
    }
}

impl HttpContext for Request {
    fn on_http_request_headers(&mut self, _: usize, end_of_stream: bool) -> Action {
        // A configuration the directory forgot counts nothing more.
        if self.active.as_ref().is_some_and(|a| a.orphaned.get()) {
            return Action::Continue;
        }
        self.step(|w, host, ex| w.on_request(host, ex, end_of_stream))
    }

    fn on_http_request_body(&mut self, size: usize, end_of_stream: bool) -> Action {
        self.step(|w, host, ex| w.on_request_body(host, ex, size, end_of_stream))
    }

    fn on_http_request_trailers(&mut self, _: usize) -> Action {
        self.step(|w, host, ex| w.on_request_trailers(host, ex))
    }

    fn on_http_response_headers(&mut self, _: usize, _: bool) -> Action {
        self.step(|w, host, ex| w.on_response(host, ex))
    }
}

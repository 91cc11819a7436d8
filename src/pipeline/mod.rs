//! The request path, in plain Rust: match the route, read what the plan
//! needs, the early bounds, identity (and the session call-out), the late
//! bounds, commit, then refuse or pass with the figures to show.
//!
//! Everything it asks of Envoy goes through [`Host`]; `host/` implements it
//! over proxy-wasm, [`mock::MockHost`] records every call for native tests.
//! Generic over the host: each call is monomorphised, none goes through a
//! vtable on the hot path.
//!
//! The module aborts on a panic (panic = "abort"): an out-of-range index
//! must be impossible, so indexing is denied here.
#![deny(clippy::indexing_slicing)]

pub mod installation;
#[cfg(test)]
mod installation_tests;
#[cfg(any(test, not(target_arch = "wasm32")))]
pub mod mock;
mod sources;
#[cfg(test)]
mod tests;

use crate::config::plan::RequestInfo;
use crate::config::{OnError, SessionSource};
use crate::count::limiter::{BoundEvent, Caller, Decision as Counted, Limiter, Pending};
use crate::count::store::Store;
use crate::count::window::Quota;
use crate::identity::account::{self, Found, Place};
use crate::identity::address::strip_port;
use crate::identity::cache::{credential_key, IdentityCache};
use crate::identity::{self as id_decode, Identity, SessionError};
use crate::reply::{self, Refusal, Shown};
use installation::{Ready, ServiceCall};
use std::cell::RefCell;

/// Instance-wide counters the pipeline bumps (per-bound ones go through
/// [`Host::record`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stat {
    StoreError,
    IdentityError,
    SessionCall,
    SessionCacheHit,
    JwtCacheHit,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Debug,
    Info,
    Warn,
    Error,
}

/// The session service call-out a request waits for.
#[derive(Debug, Clone, Copy)]
pub struct SessionCall<'a> {
    pub cluster: &'a str,
    /// `:method`, `:path`, `:authority`, and the credential.
    pub headers: [(&'a str, &'a str); 4],
    pub timeout_ms: u64,
}

/// What the request path needs of its host.
pub trait Host {
    type Store: Store;
    /// Counter storage (Envoy shared data).
    fn store(&self) -> &Self::Store;
    /// Milliseconds since the epoch.
    fn now_ms(&self) -> u64;
    fn request_header(&self, name: &str) -> Option<String>;
    fn property(&self, path: Vec<&str>) -> Option<Vec<u8>>;
    /// Dispatches the call-out; `Err` carries the host's status name.
    fn dispatch_session(&mut self, call: &SessionCall) -> Result<(), String>;
    /// The `:status` of the session service's answer.
    fn session_status(&self) -> Option<String>;
    /// The body of the session service's answer.
    fn session_body(&self, size: usize) -> Option<Vec<u8>>;
    /// The first `size` bytes of the request body buffered so far.
    fn request_body(&self, size: usize) -> Option<Vec<u8>>;
    /// Dispatches the rate-limit service call; `Err` carries the host's
    /// status name.
    fn dispatch_service(&mut self, call: &ServiceCall) -> Result<(), String>;
    /// The message of the rate-limit service's answer.
    fn service_body(&self, size: usize) -> Option<Vec<u8>>;
    /// How long the rate-limit service took to answer (or fail).
    fn service_latency(&mut self, ms: u64);
    /// Lets a held response go on.
    fn resume_response(&mut self);
    /// A local reply; `Err` carries the host's status name.
    fn send_reply(
        &mut self,
        status: u16,
        headers: Vec<(&str, &str)>,
        body: &[u8],
    ) -> Result<(), String>;
    fn add_response_header(&mut self, name: &str, value: &str);
    /// Per-bound stats of route `route` (indices stay inside the stats).
    fn record(&mut self, route: usize, events: &[BoundEvent]);
    fn count(&mut self, stat: Stat);
    fn log(&mut self, level: Level, msg: &str);
}

/// What Envoy is told to do with the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Continue,
    Pause,
}

/// A worker's view of a configuration in force: the limiter and the
/// per-worker memories a request uses.
#[derive(Clone, Copy)]
pub struct Worker<'a> {
    pub limiter: &'a Limiter,
    /// Session identities, per credential.
    pub sessions: &'a RefCell<IdentityCache>,
    /// Identities of JWTs jwt_authn verified, per token.
    pub tokens: &'a RefCell<IdentityCache>,
    /// The last 429 written, its buffers reused for the next.
    pub refusal: &'a RefCell<Refusal>,
}

/// One request's state between its callbacks.
#[derive(Default)]
pub struct Exchange {
    /// The figures an admitted response shows.
    success: Option<Figures>,
    /// This filter sent the local reply: its response path adds nothing.
    refused: bool,
    /// What the paused request waits for.
    stage: Stage,
    /// The request body has fully arrived (or there is none), and its size
    /// so far.
    body_ended: bool,
    body_size: usize,
    /// The upstream answered before the decision (it did not wait for the
    /// body the filter holds): its response waits for the decision too.
    response_held: bool,
}

/// What a paused request waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waits {
    Session,
    Body,
    Service,
}

impl Exchange {
    /// This filter answered the request itself.
    pub fn replied(&self) -> bool {
        self.refused
    }

    pub fn waits_for(&self) -> Option<Waits> {
        match self.stage {
            Stage::Going => None,
            Stage::Session(_) => Some(Waits::Session),
            Stage::Body(_) => Some(Waits::Body),
            Stage::Service(_) => Some(Waits::Service),
        }
    }
}

/// What a paused request waits for; while it waits, its body is held.
#[derive(Default)]
enum Stage {
    #[default]
    Going,
    Session(Box<Waiting>),
    /// Its body, for the account it names.
    Body(Box<Ready>),
    Service(Box<Ready>),
}

/// A request paused for its session resolve: early bounds already read.
pub struct Waiting {
    pending: Pending,
    address: String,
    identity: Identity,
    credential: u128,
}

/// What a request comes to: everything the reply needs, no index to
/// resolve against the plan.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Decision<'p> {
    /// Let through; with the figures the response shows, if it shows any.
    Pass(Option<Shown<'p>>),
    /// 429, naming the route and the bound that refused.
    Refuse { route: &'p str, shown: Shown<'p> },
    /// 503: the session service failed and `on_error` is `deny`.
    Unresolved,
    /// 503: the rate-limit service did not answer for an installation
    /// bound and `on_error` is `deny`.
    Unchecked { route: &'p str, bound: &'p str },
    /// 400: a sign-in request that names two different accounts.
    Ambiguous { route: &'p str },
}

/// Where `begin` (or a later step) stopped.
pub enum Begun<'p> {
    Decided(Decision<'p>),
    /// Ask the session service, then `resume`.
    Needs(Box<Waiting>, Ask<'p>),
    /// Wait for the request body (the account it names), then `with_body`.
    NeedsBody(Box<Ready>),
    /// Call the rate-limit service, then `counted`.
    NeedsService(Box<Ready>, ServiceCall<'p>),
}

/// The session service question a request waits for.
pub struct Ask<'p> {
    session: &'p SessionSource,
    /// `cookie` or `authorization`, and its value.
    header: &'static str,
    credential: String,
}

impl Ask<'_> {
    pub fn call(&self) -> SessionCall<'_> {
        let s = self.session;
        SessionCall {
            cluster: &s.cluster,
            headers: [
                (":method", "GET"),
                (":path", &s.path),
                (":authority", s.authority.as_deref().unwrap_or(&s.cluster)),
                (self.header, &self.credential),
            ],
            timeout_ms: s.timeout_ms,
        }
    }
}

/// The figures of a bound, owned: kept from the request to its response
/// without a borrow of the plan, and without an allocation.
#[derive(Debug, Clone, Copy)]
struct Figures {
    name: [u8; NAME_MAX],
    len: usize,
    window_ms: u64,
    quota: Quota,
    structured: bool,
}

/// Bound names are at most 64 characters; an operation's bound is shown as
/// `<operation>.<bound>`.
const NAME_MAX: usize = 130;

impl Figures {
    fn of(s: &Shown) -> Figures {
        let mut name = [0u8; NAME_MAX];
        let len = s.bound.len().min(NAME_MAX);
        if let (Some(to), Some(from)) = (name.get_mut(..len), s.bound.as_bytes().get(..len)) {
            to.copy_from_slice(from);
        }
        Figures {
            name,
            len,
            window_ms: s.window_ms,
            quota: s.quota,
            structured: s.structured,
        }
    }

    fn shown(&self) -> Shown<'_> {
        let bytes = self.name.get(..self.len).unwrap_or_default();
        Shown {
            bound: std::str::from_utf8(bytes).unwrap_or_default(),
            window_ms: self.window_ms,
            quota: self.quota,
            structured: self.structured,
        }
    }
}

impl<'p> Worker<'p> {
    /// The figures of bound `b` of `route`, as the client is shown them.
    fn shown(&self, route: usize, b: usize, quota: Quota) -> Option<Shown<'p>> {
        let plan = &self.limiter.plan;
        let bound = plan.routes.get(route)?.bounds.get(b)?;
        Some(Shown {
            bound: &bound.name,
            window_ms: bound.rate.window_ms,
            quota,
            structured: plan.structured_headers,
        })
    }

    /// Records stats and errors of a counted request; what it comes to.
    fn conclude<H: Host>(&self, host: &mut H, route: usize, d: Counted) -> Decision<'p> {
        host.record(route, &d.events);
        for e in &d.errors {
            host.count(Stat::StoreError);
            host.log(
                Level::Warn,
                &format!("ratebound: store error, bound skipped: {e}"),
            );
        }
        if let Some((b, quota)) = d.refused {
            let route_name = self
                .limiter
                .plan
                .routes
                .get(route)
                .map_or("", |r| r.name.as_str());
            return match self.shown(route, b, quota) {
                Some(shown) => Decision::Refuse {
                    route: route_name,
                    shown,
                },
                None => Decision::Pass(None),
            };
        }
        let shown = self
            .limiter
            .plan
            .success_headers
            .then(|| d.tightest.and_then(|(b, q)| self.shown(route, b, q)))
            .flatten();
        Decision::Pass(shown)
    }

    /// Checks the identity bounds, then the installation bounds or the
    /// request recorded everywhere.
    fn finish<H: Host>(
        &self,
        host: &mut H,
        mut pending: Pending,
        address: &str,
        id: Identity,
        now: u64,
    ) -> Begun<'p> {
        let caller = Caller {
            address,
            identity: Some(&id),
        };
        let route = pending.route();
        if let Some(refused) = self.limiter.late(host.store(), &mut pending, &caller, now) {
            return Begun::Decided(self.conclude(host, route, refused));
        }
        self.node_admitted(host, pending, address, Some(id), now)
    }

    /// Every node bound admitted the request (nothing recorded yet): on to
    /// its installation bounds, or recorded now.
    fn node_admitted<H: Host>(
        &self,
        host: &mut H,
        pending: Pending,
        address: &str,
        identity: Option<Identity>,
        now: u64,
    ) -> Begun<'p> {
        let bounds = self.installation_bounds(&pending, identity.as_ref());
        if bounds.is_empty() {
            let route = pending.route();
            let d = self.limiter.commit(host.store(), pending, now);
            return Begun::Decided(self.conclude(host, route, d));
        }
        let route = self.limiter.plan.routes.get(pending.route());
        let place = route
            .filter(|r| {
                bounds.iter().any(|&i| {
                    r.installation
                        .get(i)
                        .is_some_and(|b| b.per == crate::config::Per::Account)
                })
            })
            .and_then(|r| r.account.as_ref())
            .and_then(account::place);
        let mut ready = Box::new(Ready {
            pending,
            address: address.to_string(),
            identity,
            bounds,
            account: Found::Missing,
            sent_ms: now,
        });
        match place {
            Some(Place::Header(name)) => {
                ready.account = installation::header_account(host.request_header(name));
            }
            Some(_) => return Begun::NeedsBody(ready),
            None => {}
        }
        self.ask_service(ready)
    }

    /// The body arrived (`size` bytes, all of it unless over the cap): the
    /// account it names, then the service.
    fn with_body<H: Host>(&self, host: &mut H, mut ready: Box<Ready>, size: usize) -> Begun<'p> {
        let source = self
            .limiter
            .plan
            .routes
            .get(ready.pending.route())
            .and_then(|r| r.account.as_ref());
        if let Some((s, place)) = source.and_then(|s| Some((s, account::place(s)?))) {
            // Over the cap: not read at all, counted per address.
            if size <= s.max_body_bytes {
                let body = host.request_body(size).unwrap_or_default();
                ready.account = account::from_body(place, &body);
            }
        }
        if ready.account == Found::Ambiguous {
            let route = self.limiter.plan.routes.get(ready.pending.route());
            return Begun::Decided(Decision::Ambiguous {
                route: route.map_or("", |r| r.name.as_str()),
            });
        }
        self.ask_service(ready)
    }

    fn ask_service(&self, ready: Box<Ready>) -> Begun<'p> {
        match self.service_call(&ready) {
            Some(call) => Begun::NeedsService(ready, call),
            // Validated: installation bounds come with a service.
            None => Begun::Decided(Decision::Pass(None)),
        }
    }

    /// A failed session resolve: counted, logged; 503 when `deny`.
    fn identity_failed<H: Host>(
        &self,
        host: &mut H,
        session: &SessionSource,
        why: &SessionError,
    ) -> Option<Decision<'p>> {
        host.count(Stat::IdentityError);
        host.log(
            Level::Warn,
            &format!("ratebound session resolve failed: {why}"),
        );
        (session.on_error == OnError::Deny).then_some(Decision::Unresolved)
    }

    /// Reads what the plan needs of the request and decides it, as far as
    /// it can without the session service.
    pub fn begin<H: Host>(&self, host: &mut H) -> Begun<'p> {
        let lim = self.limiter;
        let plan = &lim.plan;
        let needs = plan.needs;
        let route_name = needs
            .route_name
            .then(|| host.property(vec!["xds", "route_name"]))
            .flatten()
            .and_then(|b| String::from_utf8(b).ok());
        let hdr = |want: bool, name| want.then(|| host.request_header(name)).flatten();
        let host_h = hdr(needs.host, ":authority");
        let path = hdr(needs.path, ":path");
        let method = hdr(needs.method, ":method");
        let info = RequestInfo {
            route_name: route_name.as_deref(),
            host: host_h.as_deref(),
            path: path.as_deref(),
            method: method.as_deref(),
        };
        // Normalised once, for the route and its operation.
        let request = info.normalized();
        let Some((r, route)) = plan
            .route_for_normalized(&request)
            .and_then(|r| Some((r, plan.routes.get(r)?)))
        else {
            return Begun::Decided(Decision::Pass(None));
        };
        if route.bounds.is_empty() && route.installation.is_empty() {
            return Begun::Decided(Decision::Pass(None));
        }
        let source = route
            .needs_address
            .then(|| host.property(vec!["source", "address"]))
            .flatten()
            .and_then(|b| String::from_utf8(b).ok())
            .unwrap_or_default();
        let address = strip_port(&source);
        let op = route.operation_for(&request);
        let now = host.now_ms();

        // Phase 1: bounds that need no identity, before anything is resolved.
        let mut pending = lim.start(r, op);
        if let Some(refused) = lim.early(host.store(), &mut pending, address, now) {
            return Begun::Decided(self.conclude(host, r, refused));
        }
        let Some(identity_config) = plan.identity.as_ref().filter(|_| route.needs_identity(op))
        else {
            return self.node_admitted(host, pending, address, None, now);
        };

        // Phase 2: who is calling, then the bounds that depend on it.
        let tokens = sources::Tokens {
            cache: self.tokens,
            seed: lim.seed(),
            now_ms: now,
        };
        let (mut id, remembered) = sources::resolve(host, identity_config, &tokens);
        if remembered {
            host.count(Stat::JwtCacheHit);
        }
        if let (false, Some(session)) = (id.authenticated(), identity_config.session.as_ref()) {
            if let Some((header, value)) = sources::credential(host, session) {
                let key = credential_key(lim.seed(), &value);
                let cached = self
                    .sessions
                    .try_borrow()
                    .ok()
                    .and_then(|c| c.get(key, now).cloned());
                match cached {
                    Some(found) => {
                        host.count(Stat::SessionCacheHit);
                        id.merge(found);
                    }
                    None => {
                        let ask = Ask {
                            session,
                            header,
                            credential: value,
                        };
                        let waiting = Box::new(Waiting {
                            pending,
                            address: address.to_string(),
                            identity: id,
                            credential: key,
                        });
                        return Begun::Needs(waiting, ask);
                    }
                }
            }
        }
        self.finish(host, pending, address, id, now)
    }

    /// The session service answered `status` (and `body`, read only for a
    /// 200): the identity bounds, then what comes next.
    pub fn resume<H: Host>(
        &self,
        host: &mut H,
        w: Box<Waiting>,
        status: &str,
        body: impl FnOnce() -> Option<Vec<u8>>,
    ) -> Begun<'p> {
        let Some(session) = self
            .limiter
            .plan
            .identity
            .as_ref()
            .and_then(|i| i.session.as_ref())
        else {
            return Begun::Decided(Decision::Pass(None));
        };
        let mut id = w.identity;
        let now = host.now_ms();
        match id_decode::session_outcome(status, body) {
            Ok(found) => {
                if let Ok(mut cache) = self.sessions.try_borrow_mut() {
                    cache.insert(w.credential, found.clone(), now);
                }
                id.merge(found);
            }
            Err(e) => {
                if let Some(d) = self.identity_failed(host, session, &e) {
                    return Begun::Decided(d);
                }
            }
        }
        self.finish(host, w.pending, &w.address, id, now)
    }

    /// Carries out a decision: a local reply, or the figures kept for the
    /// response. `Pause` when this filter answered.
    fn perform<H: Host>(&self, host: &mut H, ex: &mut Exchange, d: Decision) -> Step {
        let step = self.carry_out(host, ex, d);
        if std::mem::take(&mut ex.response_held) && step == Step::Continue {
            // The upstream's answer waited for this decision: its headers
            // get the figures now, then it goes on.
            self.on_response(host, ex);
            host.resume_response();
        }
        step
    }

    fn carry_out<H: Host>(&self, host: &mut H, ex: &mut Exchange, d: Decision) -> Step {
        match d {
            Decision::Pass(shown) => {
                ex.success = shown.as_ref().map(Figures::of);
                Step::Continue
            }
            Decision::Refuse { route, shown } => {
                // Only busy if re-entered, which a single-threaded VM never does.
                let Ok(mut refusal) = self.refusal.try_borrow_mut() else {
                    return Step::Continue;
                };
                refusal.render(&shown, route);
                ex.refused = true;
                let sent =
                    host.send_reply(429, refusal.headers().collect(), refusal.body().as_bytes());
                if let Err(s) = sent {
                    host.log(Level::Error, &format!("ratebound could not send 429: {s}"));
                    ex.refused = false;
                    return Step::Continue;
                }
                Step::Pause
            }
            Decision::Unresolved => {
                ex.refused = true;
                let _ = host.send_reply(
                    503,
                    vec![("content-type", "text/plain")],
                    b"identity could not be resolved\n",
                );
                Step::Pause
            }
            Decision::Unchecked { route, bound } => {
                ex.refused = true;
                let body = reply::unchecked_body(route, bound);
                let _ = host.send_reply(
                    503,
                    vec![
                        ("retry-after", "1"),
                        ("content-type", "application/problem+json"),
                    ],
                    body.as_bytes(),
                );
                Step::Pause
            }
            Decision::Ambiguous { route } => {
                ex.refused = true;
                let body = reply::ambiguous_body(route);
                let _ = host.send_reply(
                    400,
                    vec![("content-type", "application/problem+json")],
                    body.as_bytes(),
                );
                Step::Pause
            }
        }
    }

    /// Carries out what a step came to: a decision, or the call-out or
    /// wait it needs (a failed dispatch decided at once).
    fn drive<H: Host>(&self, host: &mut H, ex: &mut Exchange, begun: Begun<'p>) -> Step {
        let d = match begun {
            Begun::Decided(d) => d,
            Begun::Needs(waiting, ask) => {
                host.count(Stat::SessionCall);
                match host.dispatch_session(&ask.call()) {
                    Ok(()) => {
                        ex.stage = Stage::Session(waiting);
                        return Step::Pause;
                    }
                    Err(s) => {
                        let why = SessionError::NotDispatched(s);
                        match self.identity_failed(host, ask.session, &why) {
                            Some(d) => d,
                            None => {
                                let now = host.now_ms();
                                let Waiting {
                                    pending,
                                    address,
                                    identity,
                                    ..
                                } = *waiting;
                                let next = self.finish(host, pending, &address, identity, now);
                                return self.drive(host, ex, next);
                            }
                        }
                    }
                }
            }
            Begun::NeedsBody(ready) => {
                if ex.body_ended || self.over_cap(&ready, ex.body_size) {
                    let next = self.with_body(host, ready, ex.body_size);
                    return self.drive(host, ex, next);
                }
                // Envoy delivers no body while the headers are held (the
                // proxy-wasm host turns a paused header phase into a full
                // stop): the headers go on, and the body is held instead,
                // before any of it reaches the upstream.
                ex.stage = Stage::Body(ready);
                return Step::Continue;
            }
            Begun::NeedsService(mut ready, call) => {
                let Some(route) = self.limiter.plan.routes.get(ready.pending.route()) else {
                    return Step::Continue;
                };
                let events: Vec<BoundEvent> = ready
                    .bounds
                    .iter()
                    .map(|&i| BoundEvent {
                        bound: installation::stat_index(route, i),
                        event: crate::count::limiter::Event::ServiceCall,
                        overflow: false,
                    })
                    .collect();
                host.record(ready.pending.route(), &events);
                ready.sent_ms = host.now_ms();
                match host.dispatch_service(&call) {
                    Ok(()) => {
                        ex.stage = Stage::Service(ready);
                        return Step::Pause;
                    }
                    Err(s) => self.service_failed(host, *ready, &format!("not dispatched: {s}")),
                }
            }
        };
        self.perform(host, ex, d)
    }

    /// More of the body than the route reads has arrived.
    fn over_cap(&self, ready: &Ready, size: usize) -> bool {
        self.limiter
            .plan
            .routes
            .get(ready.pending.route())
            .and_then(|r| r.account.as_ref())
            .is_some_and(|a| size > a.max_body_bytes)
    }

    /// The request's headers arrived (`end_of_stream`: it has no body):
    /// decide, or start what the decision waits for.
    pub fn on_request<H: Host>(
        &self,
        host: &mut H,
        ex: &mut Exchange,
        end_of_stream: bool,
    ) -> Step {
        ex.body_ended = end_of_stream;
        let begun = self.begin(host);
        self.drive(host, ex, begun)
    }

    /// More of the request body arrived (`size` bytes buffered in all).
    /// While the request waits, its body is held: none of it reaches the
    /// upstream before the decision.
    pub fn on_request_body<H: Host>(
        &self,
        host: &mut H,
        ex: &mut Exchange,
        size: usize,
        end_of_stream: bool,
    ) -> Step {
        ex.body_size = size;
        ex.body_ended |= end_of_stream;
        match std::mem::take(&mut ex.stage) {
            Stage::Going => Step::Continue,
            Stage::Body(ready) if ex.body_ended || self.over_cap(&ready, size) => {
                let next = self.with_body(host, ready, size);
                self.drive(host, ex, next)
            }
            waiting => {
                ex.stage = waiting;
                Step::Pause
            }
        }
    }

    /// Trailers arrived: the body has ended; held while the request waits.
    pub fn on_request_trailers<H: Host>(&self, host: &mut H, ex: &mut Exchange) -> Step {
        ex.body_ended = true;
        match std::mem::take(&mut ex.stage) {
            Stage::Going => Step::Continue,
            Stage::Body(ready) => {
                let size = ex.body_size;
                let next = self.with_body(host, ready, size);
                self.drive(host, ex, next)
            }
            waiting => {
                ex.stage = waiting;
                Step::Pause
            }
        }
    }

    /// The rate-limit service answered (gRPC status `status`, `size` bytes
    /// of message). `Continue` when the paused request is to go on.
    pub fn on_service_answer<H: Host>(
        &self,
        host: &mut H,
        ex: &mut Exchange,
        status: u32,
        size: usize,
    ) -> Step {
        let Stage::Service(ready) = std::mem::take(&mut ex.stage) else {
            return Step::Pause;
        };
        let body = (status == 0).then(|| host.service_body(size)).flatten();
        let d = self.counted(host, *ready, status, body);
        self.perform(host, ex, d)
    }

    /// The session service answered (`body_size` bytes of body).
    /// `Continue` when the paused request is to go on.
    pub fn on_session_answer<H: Host>(
        &self,
        host: &mut H,
        ex: &mut Exchange,
        body_size: usize,
    ) -> Step {
        let Stage::Session(w) = std::mem::take(&mut ex.stage) else {
            return Step::Pause;
        };
        let status = host.session_status().unwrap_or_default();
        let body = host.session_body(body_size);
        let next = self.resume(host, w, &status, || body);
        self.drive(host, ex, next)
    }

    /// The response's headers: the figures of an admitted request. `Pause`
    /// when the request is still undecided (an upstream that answered
    /// before reading the body the filter holds): the response waits.
    pub fn on_response<H: Host>(&self, host: &mut H, ex: &mut Exchange) -> Step {
        if ex.waits_for().is_some() {
            ex.response_held = true;
            return Step::Pause;
        }
        if ex.refused {
            return Step::Continue;
        }
        let Some(f) = ex.success.take() else {
            return Step::Continue;
        };
        // Appended, as Envoy's own rate limit filters do: an upstream's own
        // fields stay beside ours, and an append costs less than a replace.
        reply::each_quota_header(&f.shown(), |name, value| {
            host.add_response_header(name, value)
        });
        Step::Continue
    }
}

/// One request whose identity is already known, through the same phases
/// the filter runs (without the call-out): for tests, the store suite and
/// the bench.
pub fn decide<S: Store + ?Sized>(
    lim: &Limiter,
    store: &S,
    route: usize,
    op: Option<usize>,
    caller: &Caller,
    now_ms: u64,
) -> Counted {
    let mut pending = lim.start(route, op);
    if let Some(refused) = lim.early(store, &mut pending, caller.address, now_ms) {
        return refused;
    }
    let late = lim.plan.identity.is_some()
        && lim
            .plan
            .routes
            .get(route)
            .is_some_and(|r| r.needs_identity(op));
    if late {
        lim.finish(store, pending, caller, now_ms)
    } else {
        lim.commit(store, pending, now_ms)
    }
}

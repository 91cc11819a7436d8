//! The request path, in plain Rust: match the route, read what the plan
//! needs, the early bounds, identity (and the session call-out), the late
//! bounds, the installation bounds (the account in the body, the
//! rate-limit service), commit, then refuse or pass with the figures to
//! show.
//!
//! - this file: the decision steps (`Worker::begin`, `resume`, and what
//!   they come to: [`Decision`], or [`Begun`] naming what to wait for);
//! - [`limiter`]: every node and fleet bound of the route, read then
//!   committed; `caller_key`: the one rule for what names a caller;
//! - [`installation`]: the last step, the rate-limit service's call and
//!   answer; [`warm_up`]: each worker's connection to it, opened before
//!   its first sign-in; [`fleet_sync`]: fleet bounds' background sync;
//! - `exchange`: one request across Envoy's callbacks ([`Exchange`]);
//! - `host`: the [`Host`] seam; `sources`: identity from the request;
//! - test support: [`mock`] and `store_suite` (one behaviour suite for
//!   every store, also in the selftest module).
//!
//! Everything it asks of Envoy goes through [`Host`]; `host/` implements it
//! over proxy-wasm, [`mock::MockHost`] records every call for native tests.
//! Generic over the host: each call is monomorphised, none goes through a
//! vtable on the hot path.
//!
//! The module aborts on a panic (panic = "abort"): an out-of-range index
//! must be impossible, so indexing is denied here.
#![deny(clippy::indexing_slicing)]

mod caller_key;
mod chat_request;
mod cost_scan;
mod exchange;
pub mod fleet_sync;
mod host;
pub mod installation;
mod json_scan;
pub mod limiter;
#[cfg(any(test, feature = "test-support"))]
pub mod mock;
pub mod owed;
mod request_body;
mod sources;
// A test suite of every store (also built into the selftest module): it may
// index.
#[cfg(any(test, feature = "test-support", feature = "selftest"))]
#[allow(clippy::indexing_slicing)]
pub mod store_suite;
#[cfg(test)]
mod tests;
mod usage_event;
pub mod warm_up;

use crate::config::plan::CostSource;
use crate::config::plan::{BoundId, OpId, RequestInfo, Route, RouteId};
use crate::config::{OnError, SessionSource};
use crate::count::store::Store;
use crate::count::window::Quota;
use crate::identity::account::{self, Place, Seen, Unreadable};
use crate::identity::address::strip_port;
use crate::identity::cache::{credential_key, IdentityCache};
use crate::identity::{self as id_decode, Identity, SessionError};
use crate::pipeline::limiter::{
    BoundEvent, Caller, Counted, Event, Limiter, Pending, Prompt, RouteLanes,
};
use crate::reply::{Refusal, Shown};
use crate::stats::Stat;
pub use exchange::{Exchange, Stage};
pub use host::{dispatch_rls, rls_status, Base, CallOut, Host, Level, LocalReply, LogGate, Step};
use installation::{Ready, ServiceCall};
pub use request_body::Entry;
use smallvec::SmallVec;
use std::cell::RefCell;

/// The filter state key (under Envoy's `wasm.`) of the bound that would
/// have refused a request let through: `%FILTER_STATE(wasm.ratebound.would_refuse:PLAIN)%`.
pub const WOULD_REFUSE_STATE: &str = "ratebound.would_refuse";

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
    /// Warnings of the rate-limit service failing, at most one per 10 s.
    pub quiet: &'a LogGate,
    /// Costs owed to the rate-limit service, sent by the root context.
    pub owed: &'a RefCell<owed::Owed>,
}

/// What a worker remembers for the requests of one configuration: the
/// memories a [`Worker`] lends out beside its limiter.
pub struct Memories {
    sessions: RefCell<IdentityCache>,
    tokens: RefCell<IdentityCache>,
    refusal: RefCell<Refusal>,
    quiet: LogGate,
    /// The worker's queue, shared by its configurations (a request under
    /// a superseded one still owes the node's service).
    owed: std::rc::Rc<RefCell<owed::Owed>>,
}

impl Memories {
    /// Empty memories, with identity caches sized for `identity`, owing
    /// costs to `owed`.
    pub fn new(
        identity: Option<&crate::config::IdentityConfig>,
        owed: std::rc::Rc<RefCell<owed::Owed>>,
    ) -> Memories {
        let (sessions, tokens) = crate::identity::cache::caches_for(identity);
        Memories {
            sessions,
            tokens,
            refusal: RefCell::default(),
            quiet: LogGate::default(),
            owed,
        }
    }

    /// The costs its requests owe the rate-limit service.
    pub fn owed(&self) -> &RefCell<owed::Owed> {
        &self.owed
    }

    /// The session identities (tests size the cache).
    pub fn sessions(&self) -> &RefCell<IdentityCache> {
        &self.sessions
    }

    pub fn worker<'a>(&'a self, limiter: &'a Limiter) -> Worker<'a> {
        Worker {
            limiter,
            sessions: &self.sessions,
            tokens: &self.tokens,
            refusal: &self.refusal,
            quiet: &self.quiet,
            owed: &self.owed,
        }
    }
}

/// Reservations of a request let through, trued up once its response
/// names its cost (`exchange`).
#[derive(Debug, Clone, PartialEq)]
pub struct Charges {
    pub route: RouteId,
    pub receipts: crate::pipeline::limiter::Receipts,
    /// When the request was admitted.
    pub at_ms: u64,
    /// What the request's body said (a cut answer's estimate counts its
    /// prompt; a price table reads its model).
    pub prompt: Prompt,
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
#[derive(Debug, Clone, PartialEq)]
pub enum Decision<'p> {
    /// Let through; with the figures the response shows, if it shows any.
    Pass(Option<Shown<'p>>),
    /// Let through, with reservations its response's cost trues up.
    Charging(Option<Shown<'p>>, Charges),
    /// 429, naming the route and the bound that refused.
    Refuse { route: &'p str, shown: Shown<'p> },
    /// 503: the session service failed and `on_error` is `deny`.
    Unresolved,
    /// 503: the rate-limit service did not answer for an installation
    /// bound and `on_error` is `deny`.
    Unchecked { route: &'p str, bound: &'p str },
    /// 400, 413 or 415: a sign-in whose account cannot be read with
    /// certainty (`why`), for a route whose account is in `place`.
    Unreadable {
        route: &'p str,
        place: Place<'p>,
        why: Unreadable,
    },
    /// 400, 413 or 415: a request whose body a cost bound reads before
    /// admission cannot be read with certainty (`why`).
    Unclear {
        route: &'p str,
        why: chat_request::Unclear,
    },
}

/// Where `begin` (or a later step) stopped.
pub enum Begun<'p> {
    Decided(Decision<'p>),
    /// Ask the session service, then `resume`.
    Needs(Box<Waiting>, Ask<'p>),
    /// Wait for the request body (the account it names), then `with_body`.
    NeedsBody(Box<Ready>),
    /// Wait for the request body (what it asks of its answer, for a cost
    /// the answer names), then `with_request`.
    NeedsRequest(Box<Entry>),
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
    /// Asks the session service.
    pub fn dispatch<H: Base>(&self, host: &mut H) -> Result<u32, String> {
        let s = self.session;
        host.dispatch(&CallOut {
            cluster: &s.cluster,
            headers: &[
                (":method", "GET"),
                (":path", &s.path),
                (":authority", s.authority.as_deref().unwrap_or(&s.cluster)),
                (self.header, &self.credential),
            ],
            body: None,
            timeout_ms: s.timeout_ms,
        })
    }
}

impl<'p> Worker<'p> {
    /// Route `id` with its lanes, resolved once per callback: `None` only
    /// for a request of another configuration (which goes on).
    fn route(&self, id: RouteId) -> Option<RouteLanes<'p>> {
        self.limiter.route(id)
    }

    /// The figures of bound `b` of `route`, as the client is shown them.
    fn shown(&self, route: &'p Route, b: BoundId, quota: Quota) -> Option<Shown<'p>> {
        let bound = route.bound(b)?;
        Some(Shown {
            bound: &bound.name,
            unit: bound.cost.as_ref().map(|c| c.unit.as_str()),
            window_ms: bound.rate.window_ms,
            quota,
            style: self.limiter.plan.style,
        })
    }

    /// Marks a request let through although a bound would have refused it
    /// (a shadow bound, or a refusal `enforce_percent` spared), naming the
    /// first such bound: in the filter state for access logs, and in the
    /// configured request header for the upstream.
    fn mark_would_refuse<H: Host>(&self, host: &mut H, route: &Route, events: &[BoundEvent]) {
        let Some(bound) = events
            .iter()
            .find(|e| e.event == Event::WouldRefuse)
            .and_then(|e| route.bound(e.bound))
        else {
            return;
        };
        let mark = format!("{}/{}", route.name, bound.name);
        host.set_filter_state(WOULD_REFUSE_STATE, &mark);
        if let Some(h) = &self.limiter.plan.would_refuse_header {
            host.set_request_header(h, &mark);
        }
    }

    /// Records stats and errors of a counted request; what it comes to.
    fn conclude<H: Host>(&self, host: &mut H, r: RouteLanes<'p>, d: Counted) -> Decision<'p> {
        let route = r.route;
        host.record(r.id, &d.events);
        if d.refused.is_none() {
            self.mark_would_refuse(host, route, &d.events);
        }
        for e in &d.errors {
            host.count(Stat::StoreErrors);
            host.log(
                Level::Warn,
                &format!("ratebound: store error, bound skipped: {e}"),
            );
        }
        if let Some((b, quota)) = d.refused {
            return match self.shown(route, b, quota) {
                Some(shown) => Decision::Refuse {
                    route: &route.name,
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
        if d.receipts.is_empty() {
            return Decision::Pass(shown);
        }
        Decision::Charging(
            shown,
            Charges {
                route: r.id,
                receipts: d.receipts,
                at_ms: d.at_ms,
                prompt: d.prompt,
            },
        )
    }

    /// Checks the identity bounds, then the installation bounds or the
    /// request recorded everywhere.
    fn finish<H: Host>(
        &self,
        host: &mut H,
        r: RouteLanes<'p>,
        mut pending: Pending,
        address: &str,
        id: Identity,
        now: u64,
    ) -> Begun<'p> {
        let caller = Caller {
            address,
            identity: Some(&id),
            model: None,
        };
        if let Some(refused) = self
            .limiter
            .late(host.store(), r, &mut pending, &caller, now)
        {
            return Begun::Decided(self.conclude(host, r, refused));
        }
        self.node_admitted(host, r, pending, address, Some(id), now)
    }

    /// Every node bound admitted the request (nothing recorded yet): on to
    /// its installation bounds, or recorded now.
    fn node_admitted<H: Host>(
        &self,
        host: &mut H,
        r: RouteLanes<'p>,
        pending: Pending,
        address: &str,
        identity: Option<Identity>,
        now: u64,
    ) -> Begun<'p> {
        let route = r.route;
        let bounds = installation::applying(route, pending.op(), identity.as_ref());
        if bounds.is_empty() {
            let d = self.limiter.commit(host.store(), r, pending, now);
            return Begun::Decided(self.conclude(host, r, d));
        }
        // A worker's memory of its writes may be stale: read the store
        // itself before a round trip a node refusal must never cost.
        let mut pending = pending;
        if let Some(refused) = self.limiter.recheck(host.store(), r, &mut pending, now) {
            return Begun::Decided(self.conclude(host, r, refused));
        }
        let per_account = bounds.iter().any(|&i| {
            route
                .bound(i)
                .is_some_and(|b| b.per == crate::config::Per::Account)
        });
        let place = route
            .account
            .as_ref()
            .filter(|_| per_account)
            .and_then(account::place);
        let mut ready = Box::new(Ready {
            pending,
            address: address.to_string(),
            identity,
            bounds,
            account: None,
            seen: Seen::default(),
            callers: SmallVec::new(),
            also: SmallVec::new(),
            sent_ms: now,
        });
        let Some(place) = place else {
            return self.ask_service(host, route, ready);
        };
        // What the head says, before any of the body is waited for: a body
        // that cannot be read is refused now.
        let (content_type, content_encoding, path, header) = match place {
            Place::Header(h) => {
                let mut values = host.request_header_values(h);
                for other in account::header_spellings(h) {
                    values.extend(host.request_header_values(&other));
                }
                (Vec::new(), Vec::new(), None, values)
            }
            _ => (
                host.request_header_values("content-type"),
                host.request_header_values("content-encoding"),
                host.request_header(":path"),
                Vec::new(),
            ),
        };
        let head = account::Head {
            content_type: &content_type,
            content_encoding: &content_encoding,
            path: path.as_deref(),
            header: &header,
        };
        match account::from_head(place, &head) {
            Err(why) => self.unreadable(host, route, place, why),
            Ok(seen) if matches!(place, Place::Header(_)) => match seen.account() {
                Ok(a) => {
                    ready.account = Some(a);
                    self.ask_service(host, route, ready)
                }
                Err(why) => self.unreadable(host, route, place, why),
            },
            Ok(seen) => {
                ready.seen = seen;
                Begun::NeedsBody(ready)
            }
        }
    }

    /// A sign-in whose account cannot be read with certainty: refused with
    /// why, asked about nowhere, counted by no bound.
    fn unreadable<H: Host>(
        &self,
        host: &mut H,
        route: &'p Route,
        place: Place<'p>,
        why: Unreadable,
    ) -> Begun<'p> {
        host.count(Stat::AccountsUnreadable);
        Begun::Decided(Decision::Unreadable {
            route: &route.name,
            place,
            why,
        })
    }

    /// The body arrived (`size` bytes, all of it unless over the cap): the
    /// account it names, then the service.
    fn read_body<H: Host>(
        &self,
        host: &mut H,
        route: &'p Route,
        mut ready: Box<Ready>,
        size: usize,
    ) -> Begun<'p> {
        let source = route.account.as_ref();
        let Some((s, place)) = source.and_then(|s| Some((s, account::place(s)?))) else {
            return self.ask_service(host, route, ready);
        };
        let read = if size > s.max_body_bytes {
            Err(Unreadable::TooLarge {
                cap: s.max_body_bytes,
            })
        } else {
            let body = host.request_body(size).unwrap_or_default();
            account::from_body(place, &body, std::mem::take(&mut ready.seen))
        };
        match read {
            Ok(a) => {
                ready.account = Some(a);
                self.ask_service(host, route, ready)
            }
            Err(why) => self.unreadable(host, route, place, why),
        }
    }

    /// The caller's keys for each installation bound; refused here if one
    /// of them is locked, else the call to the service.
    fn ask_service<H: Host>(
        &self,
        host: &mut H,
        route: &'p Route,
        mut ready: Box<Ready>,
    ) -> Begun<'p> {
        ready.callers = self.callers(self.limiter.service_keys, route, &ready);
        if let Some(keys) = self.limiter.also_service_keys {
            ready.also = self.callers(keys, route, &ready);
        }
        if let Some(d) = self.locked(host, route, &ready) {
            return Begun::Decided(d);
        }
        match self.service_call(route, &ready) {
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
        host.count(Stat::IdentityErrors);
        host.log(
            Level::Warn,
            &format!("ratebound session resolve failed: {why}"),
        );
        (session.on_error == OnError::Deny).then_some(Decision::Unresolved)
    }

    /// The cost the request names in the header of bound `b` (of its
    /// route or operation `op`), taken at admission; one that is missing
    /// or not a number is counted, and the request takes the bound's
    /// reservation.
    fn named_cost<H: Host>(
        &self,
        host: &mut H,
        route: &Route,
        b: BoundId,
        op: Option<OpId>,
        pending: &mut Pending,
    ) {
        let Some(bound) = route.bound(b) else {
            return;
        };
        if bound.written.operation.is_some() && bound.written.operation != op.map(OpId::index) {
            return;
        }
        let Some(CostSource::RequestHeader(h)) = bound.cost.as_ref().map(|c| &c.source) else {
            return;
        };
        match host.request_header(h).as_deref().and_then(units) {
            Some(n) => pending.set_cost(b, n),
            None => host.count(Stat::CostsUnknown),
        }
    }

    /// Reads what the plan needs of the request and decides it, as far as
    /// it can without the session service.
    pub fn begin<H: Host>(&self, host: &mut H) -> Begun<'p> {
        let lim = self.limiter;
        let plan = &lim.plan;
        // The mark is the filter's alone: a client's copy never reaches the
        // upstream, whatever route the request takes (issue 36).
        if let Some(h) = &plan.would_refuse_header {
            host.remove_request_header(h);
            // Rack and CGI-style servers read `x_mark` as `x-mark`.
            for other in account::header_spellings(h) {
                host.remove_request_header(&other);
            }
        }
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
        let Some(r) = plan
            .route_for_normalized(&request)
            .and_then(|id| self.route(id))
        else {
            return Begun::Decided(Decision::Pass(None));
        };
        let route = r.route;
        if route.bounds.is_empty() {
            return Begun::Decided(Decision::Pass(None));
        }
        if route.plain_answers {
            // Before any phase: the headers may go on at the first call-out.
            host.set_request_header("accept-encoding", "identity");
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
        let mut pending = lim.start(r.id, op);
        for &b in &route.named_costs {
            self.named_cost(host, route, b, op, &mut pending);
        }
        if route.reads_request.is_some() {
            // What the request allows itself is in its body: read first.
            return Begun::NeedsRequest(Box::new(Entry::new(pending, address, now)));
        }
        if route.plain_answers {
            // A cost the response's body names: its prompt is reserved.
            let bytes = host
                .request_header("content-length")
                .and_then(|n| n.trim().parse().ok())
                .unwrap_or(0);
            let prompt = Prompt { bytes, model: None };
            pending.reserve_prompt(route, op, prompt, None);
        }
        self.admit(host, r, pending, address, now)
    }

    /// Phase 1 on: the bounds that need no identity, then who is calling
    /// and the bounds that depend on it, then the installation bounds.
    /// Inlined: `begin` pays no call (and no move of its `Pending`) for it.
    #[inline(always)]
    fn admit<H: Host>(
        &self,
        host: &mut H,
        r: RouteLanes<'p>,
        mut pending: Pending,
        address: &str,
        now: u64,
    ) -> Begun<'p> {
        let lim = self.limiter;
        let plan = &lim.plan;
        let route = r.route;
        let op = pending.op();
        if let Some(refused) = lim.early(host.store(), r, &mut pending, address, now) {
            return Begun::Decided(self.conclude(host, r, refused));
        }
        let Some(identity_config) = plan.identity.as_ref().filter(|_| route.needs_identity(op))
        else {
            return self.node_admitted(host, r, pending, address, None, now);
        };

        // Phase 2: who is calling, then the bounds that depend on it.
        let tokens = sources::Tokens {
            cache: self.tokens,
            seed: lim.seed(),
            now_ms: now,
        };
        let (mut id, remembered) = sources::resolve(host, identity_config, &tokens);
        if remembered {
            host.count(Stat::JwtCacheHits);
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
                        host.count(Stat::SessionCacheHits);
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
        self.finish(host, r, pending, address, id, now)
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
        let session = self
            .limiter
            .plan
            .identity
            .as_ref()
            .and_then(|i| i.session.as_ref());
        let (Some(session), Some(r)) = (session, self.route(w.pending.route())) else {
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
        self.finish(host, r, w.pending, &w.address, id, now)
    }
}

/// A cost as a header or a JSON number writes it: a whole number of
/// units (a fraction is rounded up; past `u32::MAX`, `u32::MAX`).
pub fn units(text: &str) -> Option<u32> {
    let v: f64 = text.trim().parse().ok()?;
    (v.is_finite() && v >= 0.0).then(|| v.ceil().min(f64::from(u32::MAX)) as u32)
}

/// One request whose identity is already known, through the same phases
/// the filter runs (without the call-out): for tests, the store suite and
/// the bench.
pub fn decide<S: Store + ?Sized>(
    lim: &Limiter,
    store: &S,
    route: RouteId,
    op: Option<OpId>,
    caller: &Caller,
    now_ms: u64,
) -> Counted {
    let Some(r) = lim.route(route) else {
        return Counted::default();
    };
    let mut pending = lim.start(route, op);
    if let Some(refused) = lim.early(store, r, &mut pending, caller.address, now_ms) {
        return refused;
    }
    // Phase 2 reads no bound of a route that needs no identity.
    lim.finish(store, r, pending, caller, now_ms)
}

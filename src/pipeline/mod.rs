//! The request path, in plain Rust: match the route, read what the plan
//! needs, the early bounds, identity (and the session call-out), the late
//! bounds, the installation bounds (the account in the body, the
//! rate-limit service), commit, then refuse or pass with the figures to
//! show.
//!
//! - `steps`: `Worker`'s steps in order (`begin`, `admit`, `resume`, …),
//!   each running one phase and saying what comes next;
//! - [`phase`]: one file a phase (route, cost, identity, account, service,
//!   reply);
//! - `flight`: a request kept between callbacks ([`Flight`]) and what a
//!   step comes to ([`Next`]); what a request comes to is [`Decision`];
//! - `exchange`: Envoy's callbacks for one request ([`Exchange`]): each
//!   hands its facts to a step and carries out what it comes to;
//! - [`limiter`]: every node and fleet bound of the route, read then
//!   committed; `caller_key`: the one rule for what names a caller;
//! - `host`: the [`Host`] seam;
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
mod exchange;
mod flight;
mod host;
pub mod limiter;
#[cfg(any(test, feature = "test-support"))]
pub mod mock;
pub mod phase;
mod steps;
// A test suite of every store (also built into the selftest module): it may
// index.
#[cfg(any(test, feature = "test-support", feature = "selftest"))]
#[allow(clippy::indexing_slicing)]
pub mod store_suite;
#[cfg(test)]
mod tests;

use crate::config::plan::{OpId, RouteId};
use crate::count::store::Store;
use crate::identity::account::{Place, Unreadable};
use crate::identity::cache::IdentityCache;
use crate::pipeline::limiter::{Caller, Counted, Limiter, Prompt};
use crate::reply::{Refusal, Shown};
pub use exchange::Exchange;
pub use flight::{Flight, Next, WaitFor};
pub use host::{dispatch_rls, rls_status, Base, CallOut, Host, Level, LocalReply, LogGate, Step};
pub use phase::cost::owed;
pub use phase::cost::units;
use std::cell::RefCell;

/// The filter state key (under Envoy's `wasm.`) of the bound that would
/// have refused a request let through: `%FILTER_STATE(wasm.ratebound.would_refuse:PLAIN)%`.
pub(crate) const WOULD_REFUSE_STATE: &str = "ratebound.would_refuse";

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
        why: phase::cost::chat_request::Unclear,
    },
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

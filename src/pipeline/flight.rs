//! A request kept between Envoy's callbacks ([`Flight`]) and what a step
//! comes to ([`Next`]): decided, or waiting for something ([`WaitFor`]).

use super::limiter::{Reads, RouteLanes};
use super::phase::identity::Ask;
use super::phase::service::ServiceCall;
use super::{Decision, Worker};
use crate::config::plan::BoundId;
use crate::identity::account::Seen;
use crate::identity::Identity;
use smallvec::SmallVec;

/// A request kept while it waits: what its steps have read so far.
pub struct Flight {
    /// The limiter's part: its route, its operation, the bounds read.
    pub(super) pending: Reads,
    /// The caller's address, without its port.
    pub(super) address: String,
    /// When its headers came: a request that waits for its body is decided
    /// at that time.
    pub(super) now: u64,
    /// Who is calling, once asked (`None` for a route that needs no
    /// identity).
    pub(super) identity: Option<Identity>,
    /// While the session service is asked: the credential's cache key.
    pub(super) credential: u128,
    /// Its installation bounds, in the order sent.
    pub(super) bounds: SmallVec<[BoundId; 2]>,
    /// The account it tries, once read (`per: account` bounds).
    pub(super) account: Option<String>,
    /// What its head said of the account, until the body is read.
    pub(super) seen: Seen,
    /// Per bound in `bounds`, the caller's key (none for `per: route`).
    pub(super) callers: SmallVec<[Option<String>; 2]>,
    /// During a key rotation, per bound, the caller's key under the other
    /// secret, whose count is read beside (empty otherwise).
    pub(super) also: SmallVec<[Option<String>; 2]>,
    /// When the call to the rate-limit service went out.
    pub(super) sent_ms: u64,
}

impl Flight {
    pub(super) fn new(pending: Reads, address: &str, now: u64) -> Box<Flight> {
        Box::new(Flight {
            pending,
            address: address.to_string(),
            now,
            identity: None,
            credential: 0,
            bounds: SmallVec::new(),
            account: None,
            seen: Seen::default(),
            callers: SmallVec::new(),
            also: SmallVec::new(),
            sent_ms: now,
        })
    }
}

/// What a step came to. A request that goes on waiting carries its
/// route's handle, resolved by the step, to what the callback does next.
pub enum Next<'p> {
    Decided(Decision<'p>),
    /// Ask the session service, then `resume`.
    Ask(RouteLanes<'p>, Box<Flight>, Ask<'p>),
    /// Call the rate-limit service, then `answered`.
    Call(RouteLanes<'p>, Box<Flight>, ServiceCall<'p>),
    /// Wait for the request's body ([`WaitFor::Body`] or
    /// [`WaitFor::Request`]).
    Wait(RouteLanes<'p>, Box<Flight>, WaitFor),
}

/// What a kept request waits for; while it waits, its body is held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitFor {
    /// The session service's answer (`resume`).
    Session,
    /// Its body, for the account it names (`with_body`).
    Body,
    /// Its body, for what it asks of its answer: a cost the answer names
    /// (`with_request`).
    Request,
    /// The rate-limit service's answer (`answered`).
    Service,
}

impl<'p> Worker<'p> {
    /// The route of a kept request, resolved once per callback. It always
    /// resolves: a request context keeps the configuration its headers
    /// came under (`Request::active`, `filter/src/lib.rs`), so a kept
    /// request is resumed by the worker whose plan named its route.
    pub(super) fn route_of(&self, f: &Flight) -> Option<RouteLanes<'p>> {
        self.limiter.route(f.pending.route())
    }
}

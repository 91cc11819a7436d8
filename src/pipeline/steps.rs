//! A request's steps, in the order it meets them. Each runs one phase
//! (`phase/`) and says what comes next ([`Next`]); `exchange` carries that
//! out across Envoy's callbacks.
//!
//! 1. `begin`: arrive (`phase::route`) and the costs named up front
//!    (`phase::cost`); a request whose body sets its reservation waits for
//!    it, then `with_request` (`phase::cost::request`);
//! 2. `admit`: the bounds that need no identity, then who is calling
//!    (`phase::identity`), asking the session service if need be, then
//!    `resume`;
//! 3. `finish`: the bounds that depend on the caller;
//! 4. `after_nodes`: every node bound admitted the request: committed now,
//!    or on to its installation bounds, with the account its head names
//!    (`phase::account`) or, after waiting for its body, `with_body`;
//! 5. `service`: the rate-limit service's call (`phase::service`), and
//!    its answer: `answered`.
//!
//! What a counted request comes to is concluded in `phase::reply`.

use super::flight::{Flight, Next, WaitFor};
use super::limiter::{Caller, Reads, RouteLanes};
use super::phase::cost::request::Read;
use super::phase::identity::Identified;
use super::{Decision, Host, Worker};
use crate::identity::Identity;

impl<'p> Worker<'p> {
    /// Reads what the plan needs of the request and decides it, as far as
    /// it can without waiting.
    pub(crate) fn begin<H: Host>(&self, host: &mut H) -> Next<'p> {
        let Some(arrived) = self.arrive(host) else {
            return Next::Decided(Decision::Pass(None));
        };
        let r = arrived.lanes;
        let route = r.route;
        let op = arrived.op;
        let address = arrived.address();
        let now = host.now_ms();

        // Phase 1: bounds that need no identity, before anything is resolved.
        let mut pending = self.limiter.start(r.id, op);
        self.named_costs(host, route, op, &mut pending);
        if route.reads_request.is_some() {
            // What the request allows itself is in its body: read first.
            return Next::Wait(r, Flight::new(pending, address, now), WaitFor::Request);
        }
        if route.plain_answers {
            self.reserve_prompt(host, route, op, &mut pending);
        }
        self.admit(host, r, pending, address, now)
    }

    /// The request body arrived (`size` bytes: all of it, unless over the
    /// cap): the reservation it allows itself, the usage asked for, then
    /// its admission. `held`: its headers have not gone on.
    pub(super) fn with_request<H: Host>(
        &self,
        host: &mut H,
        r: RouteLanes<'p>,
        f: Box<Flight>,
        size: usize,
        held: bool,
    ) -> Read<'p> {
        let Flight {
            mut pending,
            address,
            now,
            ..
        } = *f;
        match self.read_request(host, r.route, &mut pending, size, held) {
            Ok(usage_asked) => Read {
                next: self.admit(host, r, pending, &address, now),
                usage_asked,
            },
            Err(why) => Read {
                next: Next::Decided(Decision::Unclear {
                    route: &r.route.name,
                    why,
                }),
                usage_asked: None,
            },
        }
    }

    /// The bounds that need no identity, then who is calling and the
    /// bounds that depend on it, then the installation bounds. Inlined:
    /// `begin` pays no call (and no move of its `Reads`) for it.
    #[inline(always)]
    fn admit<H: Host>(
        &self,
        host: &mut H,
        r: RouteLanes<'p>,
        mut pending: Reads,
        address: &str,
        now: u64,
    ) -> Next<'p> {
        let lim = self.limiter;
        if let Some(refused) = lim.early(host.store(), r, &mut pending, address, now) {
            return Next::Decided(self.conclude(host, r, refused));
        }
        let op = pending.op();
        let Some(config) = lim
            .plan
            .identity
            .as_ref()
            .filter(|_| r.route.needs_identity(op))
        else {
            return self.after_nodes(host, r, pending, address, None, now);
        };

        // Phase 2: who is calling, then the bounds that depend on it.
        match self.identify(host, config, now) {
            Identified::Known(id) => self.finish(host, r, pending, address, id, now),
            Identified::Ask(id, ask, credential) => {
                let mut f = Flight::new(pending, address, now);
                f.identity = Some(id);
                f.credential = credential;
                Next::Ask(r, f, ask)
            }
        }
    }

    /// The session service answered `status` (and `body`, read only for a
    /// 200), or was never asked (`Err`): the identity bounds, then what
    /// comes next.
    pub(crate) fn resume<H: Host>(
        &self,
        host: &mut H,
        r: RouteLanes<'p>,
        mut f: Box<Flight>,
        answer: Result<(&str, Option<Vec<u8>>), String>,
    ) -> Next<'p> {
        let now = host.now_ms();
        if let Some(d) = self.session_answer(host, &mut f, answer, now) {
            return Next::Decided(d);
        }
        let Flight {
            pending,
            address,
            identity,
            ..
        } = *f;
        let id = identity.unwrap_or_default();
        self.finish(host, r, pending, &address, id, now)
    }

    /// Checks the identity bounds, then the installation bounds or the
    /// request recorded everywhere.
    fn finish<H: Host>(
        &self,
        host: &mut H,
        r: RouteLanes<'p>,
        mut pending: Reads,
        address: &str,
        id: Identity,
        now: u64,
    ) -> Next<'p> {
        let caller = Caller {
            address,
            identity: Some(&id),
            model: None,
        };
        if let Some(refused) = self
            .limiter
            .late(host.store(), r, &mut pending, &caller, now)
        {
            return Next::Decided(self.conclude(host, r, refused));
        }
        self.after_nodes(host, r, pending, address, Some(id), now)
    }

    /// Every node bound admitted the request (nothing recorded yet): on to
    /// its installation bounds, or recorded now.
    fn after_nodes<H: Host>(
        &self,
        host: &mut H,
        r: RouteLanes<'p>,
        mut pending: Reads,
        address: &str,
        identity: Option<Identity>,
        now: u64,
    ) -> Next<'p> {
        let bounds = super::phase::service::applying(r.route, pending.op(), identity.as_ref());
        if bounds.is_empty() {
            let d = self.limiter.commit(host.store(), r, pending, now);
            return Next::Decided(self.conclude(host, r, d));
        }
        // A worker's memory of its writes may be stale: read the store
        // itself before a round trip a node refusal must never cost.
        if let Some(refused) = self.limiter.recheck(host.store(), r, &mut pending, now) {
            return Next::Decided(self.conclude(host, r, refused));
        }
        let mut f = Flight::new(pending, address, now);
        f.identity = identity;
        f.bounds = bounds;
        match self.account_from_head(host, r.route, &mut f) {
            Ok(None) => self.service(host, r, f, now),
            Ok(Some(wait)) => Next::Wait(r, f, wait),
            Err(refused) => Next::Decided(refused.decision(r.route)),
        }
    }

    /// The body arrived as far as the route reads it (`size` bytes): the
    /// account it names, then the service.
    pub(super) fn with_body<H: Host>(
        &self,
        host: &mut H,
        r: RouteLanes<'p>,
        mut f: Box<Flight>,
        size: usize,
    ) -> Next<'p> {
        match self.account_from_body(host, r.route, &mut f, size) {
            Ok(()) => {
                let now = host.now_ms();
                self.service(host, r, f, now)
            }
            Err(refused) => Next::Decided(refused.decision(r.route)),
        }
    }

    /// The caller's keys for each installation bound; refused here if one
    /// of them is locked, else the call to the service. `now`: this
    /// callback's clock, read once by whoever called (a host call each).
    fn service<H: Host>(
        &self,
        host: &mut H,
        r: RouteLanes<'p>,
        mut f: Box<Flight>,
        now: u64,
    ) -> Next<'p> {
        let route = r.route;
        f.callers = self.callers(self.limiter.service_keys, route, &f);
        if let Some(keys) = self.limiter.also_service_keys {
            f.also = self.callers(keys, route, &f);
        }
        if let Some(d) = self.locked(host, route, &f, now) {
            return Next::Decided(d);
        }
        // The windows a sliding bound's descriptors name, and the estimate
        // its answer is judged with, are both of this moment.
        f.sent_ms = now;
        match self.service_call(route, &f) {
            Some(call) => Next::Call(r, f, call),
            // Validated: installation bounds come with a service.
            None => Next::Decided(Decision::Pass(None)),
        }
    }

    /// The rate-limit service answered (gRPC status `status`, and its
    /// message), or was never reached (`Err`): refused with its figures,
    /// or the node bounds committed.
    pub(super) fn answered<H: Host>(
        &self,
        host: &mut H,
        r: RouteLanes<'p>,
        f: Box<Flight>,
        answer: Result<(u32, Option<Vec<u8>>), String>,
    ) -> Decision<'p> {
        match answer {
            Ok((status, body)) => self.counted(host, r, *f, status, body),
            Err(why) => self.service_failed(host, r, *f, &format!("not dispatched: {why}")),
        }
    }
}

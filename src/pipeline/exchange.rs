//! One request across Envoy's callbacks: its headers, its body, the
//! call-out answers, its response. Each callback hands its facts to the
//! decision steps (`Worker::begin`, `resume`, `with_body`, `counted`) and
//! carries out what they come to: a local reply, a wait, or the request
//! let on with the figures its response will show.

use super::cost_scan::{tokens_in, Body, CostScan};
use super::installation::Ready;
use super::owed;
use super::request_body::Entry;
use super::usage_event::UsageEvents;
use super::Charges;
use super::{Begun, Decision, Host, Level, LocalReply, SessionError, Step, Waiting, Worker};
use crate::config::plan::CostSource;
use crate::config::plan::{BoundId, RouteId};
use crate::count::window::Quota;
use crate::pipeline::limiter::BoundEvent;
use crate::pipeline::limiter::Receipt;
use crate::reply::{self, Shown, Style};
use crate::stats::Stat;

/// One request's state between its callbacks.
#[derive(Default)]
pub struct Exchange {
    /// The figures an admitted response shows.
    success: Option<Figures>,
    /// This filter sent the local reply: its response path adds nothing
    /// (and the mock host delivers no more of the request, as Envoy does).
    pub(super) refused: bool,
    /// What the paused request waits for.
    stage: Stage,
    /// The request body has fully arrived (or there is none), and its size
    /// so far.
    body_ended: bool,
    body_size: usize,
    /// The upstream answered before the decision (it did not wait for the
    /// body the filter holds): its response waits for the decision too.
    response_held: bool,
    /// The caller speaks gRPC, noted while the request headers can still be
    /// read (once they went on, the host no longer has them).
    grpc: Option<bool>,
    /// Reservations waiting for the response's cost: until its headers
    /// (`charges`), then until its body ends (`scans`).
    charges: Option<Charges>,
    scans: Vec<Scan>,
    /// Reservations waiting for the response's trailers.
    trailers: Vec<(BoundId, Receipt)>,
    /// The route and the time of the admission those wait on.
    admitted: (RouteId, u64),
    /// What the request's body said ([`Charges::prompt`]).
    prompt: super::limiter::Prompt,
    /// The filter asked a stream for its usage, which its caller did not:
    /// the usage event is taken out of the stream it sees.
    /// Boxed: most requests have none, and carry a word, not two scanners.
    usage_events: Option<Box<UsageEvents>>,
    /// The request's headers wait for its body (`hold_sign_in_headers`).
    head_held: bool,
}

/// A cost read in the response's body, for a bound's reservation: one
/// scan (its total), or two (its tokens in, then out).
struct Scan {
    bound: BoundId,
    receipt: Receipt,
    first: CostScan,
    output: Option<CostScan>,
}

/// A gRPC caller, by its content type.
fn is_grpc<H: Host>(host: &H) -> bool {
    host.request_header("content-type")
        .is_some_and(|t| t.starts_with("application/grpc"))
}

impl Exchange {
    /// What the request waits for.
    pub fn stage(&self) -> &Stage {
        &self.stage
    }

    /// The units an admitted request reserved, at its first bound.
    #[cfg(test)]
    pub(crate) fn reserved(&self) -> u32 {
        let receipt = self.charges.as_ref().and_then(|c| c.receipts.first());
        match receipt {
            Some((_, Receipt::Lane(u))) => u.hits,
            Some((_, Receipt::Service { hits, .. })) => *hits,
            None => 0,
        }
    }
}

/// What a paused request waits for, and keeps meanwhile (a step's
/// [`Begun`](super::Begun) once its call is out); while it waits, its body
/// is held.
#[derive(Default)]
pub enum Stage {
    #[default]
    Going,
    Session(Box<Waiting>),
    /// Its body, for the account it names.
    Body(Box<Ready>),
    /// Its body, for what it asks of its answer (a cost the answer names).
    Request(Box<Entry>),
    Service(Box<Ready>),
}

/// A local reply other than a 429.
struct Answer {
    status: u16,
    retry: bool,
    content_type: &'static str,
    body: String,
    details: String,
}

/// The figures of a bound, owned: kept from the request to its response
/// without a borrow of the plan, and without an allocation.
#[derive(Debug, Clone, Copy)]
struct Figures {
    /// The bound's name, then its unit's word (a cost bound's).
    name: [u8; NAME_MAX + UNIT_MAX],
    len: usize,
    unit_len: usize,
    window_ms: u64,
    quota: Quota,
    style: Style,
}

/// Bound names are at most 64 characters; an operation's bound is shown as
/// `<operation>.<bound>`.
const NAME_MAX: usize = 130;
/// A unit is a word of at most 32 letters.
const UNIT_MAX: usize = 32;

impl Figures {
    fn of(s: &Shown) -> Figures {
        let mut name = [0u8; NAME_MAX + UNIT_MAX];
        // Copies `text` (at most `max` bytes) to `at`: its length.
        let mut put = |at: usize, text: &str, max: usize| {
            let n = text.len().min(max);
            if let (Some(to), Some(from)) = (name.get_mut(at..at + n), text.as_bytes().get(..n)) {
                to.copy_from_slice(from);
            }
            n
        };
        let len = put(0, s.bound, NAME_MAX);
        let unit_len = put(len, s.unit.unwrap_or_default(), UNIT_MAX);
        Figures {
            name,
            len,
            unit_len,
            window_ms: s.window_ms,
            quota: s.quota,
            style: s.style,
        }
    }

    fn shown(&self) -> Shown<'_> {
        let text = |r: std::ops::Range<usize>| {
            std::str::from_utf8(self.name.get(r).unwrap_or_default()).unwrap_or_default()
        };
        let unit = text(self.len..self.len + self.unit_len);
        Shown {
            bound: text(0..self.len),
            unit: (!unit.is_empty()).then_some(unit),
            window_ms: self.window_ms,
            quota: self.quota,
            style: self.style,
        }
    }
}

impl<'p> Worker<'p> {
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
        // Read only when refusing (or noted before a wait): an admitted
        // request pays nothing for it.
        let grpc = |host: &H, ex: &Exchange| {
            ex.grpc
                .unwrap_or_else(|| is_grpc(host))
                .then_some(self.limiter.plan.grpc_refusal)
        };
        let reply = match d {
            Decision::Pass(shown) => {
                ex.success = shown.as_ref().map(Figures::of);
                return Step::Continue;
            }
            Decision::Charging(shown, mut charges) => {
                ex.success = shown.as_ref().map(Figures::of);
                ex.prompt = std::mem::take(&mut charges.prompt);
                ex.charges = Some(charges);
                return Step::Continue;
            }
            Decision::Refuse { route, shown } => {
                // Only busy if re-entered, which a single-threaded VM never does.
                let Ok(mut refusal) = self.refusal.try_borrow_mut() else {
                    return Step::Continue;
                };
                let grpc_status = grpc(host, ex);
                refusal.render(&shown, route, grpc_status);
                ex.refused = true;
                let sent = host.send_reply(&LocalReply {
                    status: 429,
                    headers: refusal.headers().collect(),
                    body: refusal.body().as_bytes(),
                    details: refusal.details(),
                    grpc_status,
                });
                if let Err(s) = sent {
                    host.log(Level::Error, &format!("ratebound could not send 429: {s}"));
                    ex.refused = false;
                    return Step::Continue;
                }
                return Step::Pause;
            }
            Decision::Unresolved => Answer {
                status: 503,
                retry: false,
                content_type: "text/plain",
                body: "identity could not be resolved\n".to_string(),
                details: "ratebound.identity_unresolved".to_string(),
            },
            Decision::Unchecked { route, bound } => Answer {
                status: 503,
                retry: true,
                content_type: "application/problem+json",
                body: reply::unchecked_body(route, bound),
                details: format!("ratebound.unchecked:{route}/{bound}"),
            },
            Decision::Unclear { route, why } => Answer {
                status: why.status(),
                retry: false,
                content_type: "application/problem+json",
                body: reply::unreadable_body(route, why.status(), why.reason(), &why.detail()),
                details: format!("ratebound.unclear_request:{route}/{}", why.reason()),
            },
            Decision::Unreadable { route, place, why } => Answer {
                status: why.status(),
                retry: false,
                content_type: "application/problem+json",
                body: reply::unreadable_body(route, why.status(), why.reason(), &why.detail(place)),
                details: format!("ratebound.unreadable_account:{route}/{}", why.reason()),
            },
        };
        ex.refused = true;
        let grpc_status = grpc(host, ex).map(|_| reply::grpc::UNAVAILABLE);
        let mut headers = Vec::with_capacity(2);
        if reply.retry {
            headers.push(("retry-after", "1"));
        }
        if grpc_status.is_none() {
            headers.push(("content-type", reply.content_type));
        }
        let _ = host.send_reply(&LocalReply {
            status: reply.status,
            headers,
            body: reply.body.as_bytes(),
            details: &reply.details,
            grpc_status,
        });
        Step::Pause
    }

    /// Carries out what a step came to: a decision, or the call-out or
    /// wait it needs (a failed dispatch decided at once).
    fn drive<H: Host>(&self, host: &mut H, ex: &mut Exchange, begun: Begun<'p>) -> Step {
        let d = match begun {
            Begun::Decided(d) => d,
            Begun::Needs(waiting, ask) => {
                host.count(Stat::SessionCalls);
                match ask.dispatch(host) {
                    Ok(_) => {
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
                                let Some(r) = self.route(pending.route()) else {
                                    return Step::Continue;
                                };
                                let next = self.finish(host, r, pending, &address, identity, now);
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
                // Without Envoy's allow_on_headers_stop_iteration, Envoy
                // delivers no body while the headers are held (a paused
                // header phase becomes a full stop): the headers go on, and
                // the body is held instead, before any of it reaches the
                // upstream. With it (`hold_sign_in_headers`), the headers
                // wait too: a refused sign-in opens no upstream request.
                ex.grpc = Some(is_grpc(host));
                ex.stage = Stage::Body(ready);
                return if self.limiter.plan.hold_sign_in_headers {
                    Step::Pause
                } else {
                    Step::Continue
                };
            }
            Begun::NeedsRequest(entry) => {
                if ex.body_ended || ex.body_size > self.request_cap(&entry) {
                    return self.read_request(host, ex, entry);
                }
                if let Some(d) = self.request_head(host, &entry) {
                    return self.perform(host, ex, d);
                }
                ex.grpc = Some(is_grpc(host));
                ex.stage = Stage::Request(entry);
                // Its body may be rewritten: a length sent on now would be
                // wrong (on HTTP/1.1, Envoy sends the body chunked). Held
                // headers get the body's length once it is read.
                ex.head_held = self.limiter.plan.hold_sign_in_headers;
                if ex.head_held {
                    return Step::Pause;
                }
                host.remove_request_header("content-length");
                return Step::Continue;
            }
            Begun::NeedsService(mut ready, call) => {
                let events: Vec<BoundEvent> = ready
                    .bounds
                    .iter()
                    .map(|&i| {
                        BoundEvent::new(i, crate::pipeline::limiter::Event::ServiceCall, false)
                    })
                    .collect();
                host.record(ready.pending.route(), &events);
                ready.sent_ms = host.now_ms();
                if ex.grpc.is_none() {
                    ex.grpc = Some(is_grpc(host));
                }
                match super::dispatch_rls(host, &call) {
                    Ok(_) => {
                        ex.stage = Stage::Service(ready);
                        return Step::Pause;
                    }
                    Err(s) => {
                        let Some(r) = self.route(ready.pending.route()) else {
                            return Step::Continue;
                        };
                        self.service_failed(host, r, *ready, &format!("not dispatched: {s}"))
                    }
                }
            }
        };
        self.perform(host, ex, d)
    }

    /// The request body arrived (or more than its route reads): read it,
    /// then what comes next.
    fn read_request<H: Host>(&self, host: &mut H, ex: &mut Exchange, e: Box<Entry>) -> Step {
        let read = self.with_request(host, e, ex.body_size, ex.head_held);
        ex.usage_events = read.usage_asked.map(|p| Box::new(UsageEvents::new(p)));
        self.drive(host, ex, read.next)
    }

    /// More of the body than the route reads has arrived.
    fn over_cap(&self, ready: &Ready, size: usize) -> bool {
        self.limiter
            .plan
            .route(ready.pending.route())
            .and_then(|r| r.account.as_ref())
            .is_some_and(|a| size > a.max_body_bytes)
    }

    /// The body arrived as far as the route reads it: the account, then
    /// what comes next.
    fn with_body<H: Host>(&self, host: &mut H, ready: Box<Ready>, size: usize) -> Begun<'p> {
        match self.limiter.plan.route(ready.pending.route()) {
            Some(route) => self.read_body(host, route, ready, size),
            None => Begun::Decided(Decision::Pass(None)),
        }
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
            Stage::Request(entry) if ex.body_ended || size > self.request_cap(&entry) => {
                self.read_request(host, ex, entry)
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
            Stage::Request(entry) => self.read_request(host, ex, entry),
            waiting => {
                ex.stage = waiting;
                Step::Pause
            }
        }
    }

    /// The call-out the request waits for was answered (`size` bytes of
    /// body): the session service's or the rate-limit service's.
    /// `Continue` when the paused request is to go on.
    pub fn on_answer<H: Host>(&self, host: &mut H, ex: &mut Exchange, size: usize) -> Step {
        match ex.stage {
            Stage::Service(_) => {
                let status = super::rls_status(host);
                self.on_service_answer(host, ex, status, size)
            }
            Stage::Session(_) => self.on_session_answer(host, ex, size),
            Stage::Going | Stage::Body(_) | Stage::Request(_) => Step::Pause,
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
        let body = (status == 0)
            .then(|| super::host::rls_message(host, size))
            .flatten();
        let d = self.counted(host, *ready, status, body);
        self.perform(host, ex, d)
    }

    /// The session service answered (`body_size` bytes of body).
    /// `Continue` when the paused request is to go on.
    fn on_session_answer<H: Host>(
        &self,
        host: &mut H,
        ex: &mut Exchange,
        body_size: usize,
    ) -> Step {
        let Stage::Session(w) = std::mem::take(&mut ex.stage) else {
            return Step::Pause;
        };
        let status = host.answer_header(":status").unwrap_or_default();
        let body = host.answer_body(body_size);
        let next = self.resume(host, w, &status, || body);
        self.drive(host, ex, next)
    }

    /// The response's headers arrived: costs in a header are charged now;
    /// costs in the body are read as it passes.
    fn costs_from_headers<H: Host>(&self, host: &mut H, ex: &mut Exchange, charges: Charges) {
        let Some(route) = self.limiter.plan.route(charges.route) else {
            return;
        };
        // Read once, and only for a cost in the body.
        let mut body = None;
        for (b, receipt) in charges.receipts {
            let Some(cost) = route.bound(b).and_then(|x| x.cost.as_ref()) else {
                continue;
            };
            match &cost.source {
                CostSource::ResponseHeader(h) => {
                    let units = host.response_header(h).as_deref().and_then(super::units);
                    self.charge(host, (charges.route, b, charges.at_ms), receipt, units);
                }
                CostSource::ResponseTrailer(h) => match host.response_header(h) {
                    // An answer that is all headers (gRPC's trailers-only).
                    Some(v) => {
                        let at = (charges.route, b, charges.at_ms);
                        self.charge(host, at, receipt, super::units(&v));
                    }
                    None => ex.trailers.push((b, receipt)),
                },
                CostSource::ResponseJson(_) | CostSource::ResponseParts { .. } => {
                    let body = *body.get_or_insert_with(|| {
                        host.response_header("content-type")
                            .map_or(Body::Json, |t| Body::of(&t))
                    });
                    let (first, output) = match &cost.source {
                        CostSource::ResponseParts { input, output } => {
                            (input, Some(CostScan::new(output, body)))
                        }
                        CostSource::ResponseJson(pointer) => (pointer, None),
                        _ => continue,
                    };
                    ex.scans.push(Scan {
                        bound: b,
                        receipt,
                        first: CostScan::new(first, body),
                        output,
                    });
                }
                CostSource::RequestHeader(_) => {}
            }
            ex.admitted = (charges.route, charges.at_ms);
        }
    }

    /// Trues a reservation up to the cost the response named, or counts a
    /// cost that never came (the reservation stays). An installation
    /// bound's cost beyond its reservation is owed to the service.
    fn charge<H: Host>(
        &self,
        host: &mut H,
        (r, b, at_ms): (RouteId, BoundId, u64),
        receipt: Receipt,
        units: Option<u32>,
    ) {
        let Some(units) = units else {
            host.count(Stat::CostsUnknown);
            return;
        };
        let undo = match receipt {
            Receipt::Lane(u) => u,
            Receipt::Service { caller, hits } => {
                if let Some(c) = self.owed_charge((r, b), caller, units.saturating_sub(hits)) {
                    if let Ok(mut owed) = self.owed.try_borrow_mut() {
                        owed.push(c);
                    }
                }
                return;
            }
        };
        if let Err(e) = self
            .limiter
            .true_up(host.store(), (r, b), undo, (units, at_ms))
        {
            host.count(Stat::StoreErrors);
            host.log(Level::Warn, &format!("ratebound: cost not charged: {e}"));
        }
    }

    /// What an installation bound's caller owes the service: `units` more
    /// under the descriptor and limit its admission was sent with.
    fn owed_charge(
        &self,
        (r, b): (RouteId, BoundId),
        caller: Option<String>,
        units: u32,
    ) -> Option<owed::Charge> {
        let bound = self.limiter.plan.route(r)?.bound(b)?;
        let (descriptor, unit) = bound.installation()?;
        (units > 0).then(|| owed::Charge {
            descriptor: descriptor.to_string(),
            caller: caller.map(|c| (bound.per.as_str(), c)),
            limit: crate::rls::Override {
                requests_per_unit: bound.rate.limit,
                unit,
            },
            units,
        })
    }

    /// A chunk of the response body passes (`size` bytes; `end_of_stream`:
    /// the last). Never held: a cost in the body is read as it goes.
    pub fn on_response_body<H: Host>(
        &self,
        host: &mut H,
        ex: &mut Exchange,
        size: usize,
        end_of_stream: bool,
    ) -> Step {
        if ex.scans.is_empty() && ex.usage_events.is_none() {
            return Step::Continue;
        }
        let chunk = match size {
            0 => Vec::new(),
            _ => host.response_body(size).unwrap_or_default(),
        };
        for scan in &mut ex.scans {
            scan.first.feed(&chunk);
            if let Some(out) = &mut scan.output {
                out.feed(&chunk);
            }
        }
        if let Some(events) = &mut ex.usage_events {
            if let Some(seen) = events.pass(&chunk, end_of_stream) {
                host.set_response_body(size, &seen);
            }
        }
        if end_of_stream {
            for scan in std::mem::take(&mut ex.scans) {
                self.settle(host, ex, scan, true);
            }
        }
        Step::Continue
    }

    /// A body's scan at its end (`ended`), or cut before it: the cost it
    /// read, or none: then the answer is charged what it delivered (its
    /// text and its prompt) where that is more than its reservation, and
    /// counted as unknown. No caller's choice — a stream that names no
    /// usage, a hang-up before it — moves what passed off the counter.
    fn settle<H: Host>(&self, host: &mut H, ex: &Exchange, scan: Scan, ended: bool) {
        let (route, at_ms) = ex.admitted;
        let Scan {
            bound: b,
            receipt,
            first,
            output,
        } = scan;
        let prompt = tokens_in(ex.prompt.bytes);
        let (estimate, cost) = match output {
            None => (
                first.estimate().saturating_add(prompt),
                ended.then(|| first.finish()).flatten(),
            ),
            Some(out) => {
                // Tokens in and out, priced by the request's model.
                let cost = self
                    .limiter
                    .plan
                    .route(route)
                    .and_then(|r| r.bound(b)?.cost.as_ref());
                let model = ex.prompt.model.as_deref();
                let units = |i, o| cost.map_or(0, |c| c.units(i, o, model));
                let estimate = units(prompt, out.estimate());
                let named = match (ended, first.finish(), out.finish()) {
                    (true, Some(i), Some(o)) => Some(units(i, o)),
                    _ => None,
                };
                (estimate, named)
            }
        };
        let units = match cost {
            Some(c) => c,
            None => {
                host.count(Stat::CostsUnknown);
                let reserved = match &receipt {
                    Receipt::Service { hits, .. } => *hits,
                    Receipt::Lane(u) => u.hits,
                };
                if estimate <= reserved {
                    return;
                }
                estimate
            }
        };
        self.charge(host, (route, b, at_ms), receipt, Some(units));
    }

    /// The response's trailers: costs in a trailer are charged, and the
    /// body has ended.
    pub fn on_response_trailers<H: Host>(&self, host: &mut H, ex: &mut Exchange) -> Step {
        let (route, at_ms) = ex.admitted;
        for (b, receipt) in std::mem::take(&mut ex.trailers) {
            let name = self
                .limiter
                .plan
                .route(route)
                .and_then(|r| r.bound(b)?.cost.as_ref())
                .and_then(|c| match &c.source {
                    CostSource::ResponseTrailer(h) => Some(h.as_str()),
                    _ => None,
                });
            let units = name
                .and_then(|h| host.response_trailer(h))
                .as_deref()
                .and_then(super::units);
            self.charge(host, (route, b, at_ms), receipt, units);
        }
        self.on_response_body(host, ex, 0, true)
    }

    /// The request is over (logged): a body cut before its end (a hang-up,
    /// a reset) is charged what passed of it, if more than its
    /// reservation; any other cost that never came keeps its reservation.
    /// Each is counted.
    pub fn on_done<H: Host>(&self, host: &mut H, ex: &mut Exchange) {
        let waiting = ex.charges.take().map_or(0, |c| c.receipts.len()) + ex.trailers.len();
        ex.trailers.clear();
        for _ in 0..waiting {
            host.count(Stat::CostsUnknown);
        }
        for scan in std::mem::take(&mut ex.scans) {
            self.settle(host, ex, scan, false);
        }
    }

    /// The response's headers: the figures of an admitted request. `Pause`
    /// when the request is still undecided (an upstream that answered
    /// before reading the body the filter holds): the response waits.
    pub fn on_response<H: Host>(&self, host: &mut H, ex: &mut Exchange) -> Step {
        if matches!(ex.stage, Stage::Body(_) | Stage::Request(_))
            && host.property(vec!["upstream", "address"]).is_none()
        {
            // Envoy answered itself (a direct response, a route with no
            // upstream): the request's body never comes to this filter, and
            // nothing reached an upstream to count.
            ex.stage = Stage::Going;
            return Step::Continue;
        }
        if !matches!(ex.stage, Stage::Going) {
            ex.response_held = true;
            return Step::Pause;
        }
        if ex.refused {
            return Step::Continue;
        }
        if let Some(charges) = ex.charges.take() {
            self.costs_from_headers(host, ex, charges);
        }
        if ex.usage_events.is_some() {
            // Only an event stream has a usage event to take out; its length
            // changes with it.
            let events = host
                .response_header("content-type")
                .is_some_and(|t| Body::of(&t) == Body::Events);
            if events {
                host.remove_response_header("content-length");
            } else {
                ex.usage_events = None;
            }
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

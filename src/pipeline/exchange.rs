//! One request across Envoy's callbacks: its headers, its body, the
//! call-out answers, its response. Each callback hands its facts to a step
//! (`steps.rs`) and carries out what the step comes to: a local reply, a
//! wait, or the request let on with the figures its response will show.

use super::flight::{Flight, Next, WaitFor};
use super::limiter::{Prompt, Receipt};
use super::phase::account::over_cap;
use super::phase::cost::cost_scan::Body;
use super::phase::cost::usage_event::UsageEvents;
use super::phase::cost::Scan;
use super::phase::reply::Figures;
use super::{Charges, Decision, Host, Step, Worker};
use crate::config::plan::{BoundId, RouteId};
use crate::pipeline::limiter::{BoundEvent, RouteLanes};
use crate::reply;
use crate::stats::Stat;

/// One request's state between its callbacks.
#[derive(Default)]
pub struct Exchange {
    /// The figures an admitted response shows.
    pub(super) success: Option<Figures>,
    /// This filter sent the local reply: its response path adds nothing
    /// (and the mock host delivers no more of the request, as Envoy does).
    pub(super) refused: bool,
    /// The request kept while it waits, and what it waits for.
    kept: Option<(Box<Flight>, WaitFor)>,
    /// The request body has fully arrived (or there is none), and its size
    /// so far.
    body_ended: bool,
    body_size: usize,
    /// The upstream answered before the decision (it did not wait for the
    /// body the filter holds): its response waits for the decision too.
    response_held: bool,
    /// The caller speaks gRPC, noted while the request headers can still be
    /// read (once they went on, the host no longer has them).
    pub(super) grpc: Option<bool>,
    /// Reservations waiting for the response's cost: until its headers
    /// (`charges`), then until its body ends (`scans`).
    pub(super) charges: Option<Charges>,
    pub(super) scans: Vec<Scan>,
    /// Reservations waiting for the response's trailers.
    pub(super) trailers: Vec<(BoundId, Receipt)>,
    /// The route and the time of the admission those wait on.
    pub(super) admitted: (RouteId, u64),
    /// What the request's body said ([`Charges::prompt`]).
    pub(super) prompt: Prompt,
    /// The filter asked a stream for its usage, which its caller did not:
    /// the usage event is taken out of the stream it sees.
    /// Boxed: most requests have none, and carry a word, not two scanners.
    pub(super) usage_events: Option<Box<UsageEvents>>,
    /// The request's headers wait for its body (`hold_sign_in_headers`).
    head_held: bool,
}

/// A gRPC caller, by its content type.
pub(super) fn is_grpc<H: Host>(host: &H) -> bool {
    host.request_header("content-type")
        .is_some_and(|t| t.starts_with("application/grpc"))
}

impl Exchange {
    /// What the request waits for, if it waits.
    pub(crate) fn waits_for(&self) -> Option<WaitFor> {
        self.kept.as_ref().map(|(_, w)| *w)
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

    /// Carries out what a step came to: a decision, or the call-out or
    /// wait it needs (a failed dispatch decided at once).
    fn drive<H: Host>(&self, host: &mut H, ex: &mut Exchange, next: Next<'p>) -> Step {
        let d = match next {
            Next::Decided(d) => d,
            Next::Ask(r, f, ask) => {
                host.count(Stat::SessionCalls);
                match ask.dispatch(host) {
                    Ok(_) => {
                        ex.kept = Some((f, WaitFor::Session));
                        return Step::Pause;
                    }
                    Err(s) => {
                        let next = self.resume(host, r, f, Err(s));
                        return self.drive(host, ex, next);
                    }
                }
            }
            Next::Wait(r, f, WaitFor::Body) => {
                if ex.body_ended || over_cap(r.route, ex.body_size) {
                    let next = self.with_body(host, r, f, ex.body_size);
                    return self.drive(host, ex, next);
                }
                // Without Envoy's allow_on_headers_stop_iteration, Envoy
                // delivers no body while the headers are held (a paused
                // header phase becomes a full stop): the headers go on, and
                // the body is held instead, before any of it reaches the
                // upstream. With it (`hold_sign_in_headers`), the headers
                // wait too: a refused sign-in opens no upstream request.
                ex.grpc = Some(is_grpc(host));
                ex.kept = Some((f, WaitFor::Body));
                return if self.limiter.plan.hold_sign_in_headers {
                    Step::Pause
                } else {
                    Step::Continue
                };
            }
            // Its body, for what it asks of its answer.
            Next::Wait(r, f, wait) => {
                // Only `begin` waits for the request's body, at its headers:
                // none of it has come yet, so only a request without one
                // is read now (its chunks are `on_body`'s).
                if ex.body_ended {
                    return self.read_request_body(host, ex, r, f);
                }
                if let Some(d) = self.request_head(host, r.route) {
                    return self.perform(host, ex, d);
                }
                ex.grpc = Some(is_grpc(host));
                ex.kept = Some((f, wait));
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
            Next::Call(r, f, call) => {
                let events: Vec<BoundEvent> = f
                    .bounds
                    .iter()
                    .map(|&i| {
                        BoundEvent::new(i, crate::pipeline::limiter::Event::ServiceCall, false)
                    })
                    .collect();
                host.record(r.id, &events);
                if ex.grpc.is_none() {
                    ex.grpc = Some(is_grpc(host));
                }
                match super::dispatch_rls(host, &call) {
                    Ok(_) => {
                        ex.kept = Some((f, WaitFor::Service));
                        return Step::Pause;
                    }
                    Err(s) => self.answered(host, r, f, Err(s)),
                }
            }
        };
        self.perform(host, ex, d)
    }

    /// The request body arrived (or more than its route reads): read it,
    /// then what comes next.
    fn read_request_body<H: Host>(
        &self,
        host: &mut H,
        ex: &mut Exchange,
        r: RouteLanes<'p>,
        f: Box<Flight>,
    ) -> Step {
        let read = self.with_request(host, r, f, ex.body_size, ex.head_held);
        ex.usage_events = read.usage_asked.map(|p| Box::new(UsageEvents::new(p)));
        self.drive(host, ex, read.next)
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
        let next = self.begin(host);
        self.drive(host, ex, next)
    }

    /// More of the request body arrived, or all of it: while the request
    /// waits, its body is held (none of it reaches the upstream before the
    /// decision), and read at its end or past its cap, never at a chunk
    /// before.
    fn on_body<H: Host>(&self, host: &mut H, ex: &mut Exchange) -> Step {
        let Some((f, wait)) = ex.kept.take() else {
            return Step::Continue;
        };
        let Some(r) = self.route_of(&f) else {
            return Step::Continue;
        };
        let size = ex.body_size;
        match wait {
            WaitFor::Body if ex.body_ended || over_cap(r.route, size) => {
                let next = self.with_body(host, r, f, size);
                self.drive(host, ex, next)
            }
            WaitFor::Request if ex.body_ended || size > r.route.reads_request.unwrap_or(0) => {
                self.read_request_body(host, ex, r, f)
            }
            _ => {
                ex.kept = Some((f, wait));
                Step::Pause
            }
        }
    }

    /// More of the request body arrived (`size` bytes buffered in all).
    pub fn on_request_body<H: Host>(
        &self,
        host: &mut H,
        ex: &mut Exchange,
        size: usize,
        end_of_stream: bool,
    ) -> Step {
        ex.body_size = size;
        ex.body_ended |= end_of_stream;
        self.on_body(host, ex)
    }

    /// Trailers arrived: the body has ended; held while the request waits.
    pub fn on_request_trailers<H: Host>(&self, host: &mut H, ex: &mut Exchange) -> Step {
        ex.body_ended = true;
        self.on_body(host, ex)
    }

    /// The call-out the request waits for was answered (`size` bytes of
    /// body): the session service's or the rate-limit service's.
    /// `Continue` when the paused request is to go on.
    pub fn on_answer<H: Host>(&self, host: &mut H, ex: &mut Exchange, size: usize) -> Step {
        match ex.waits_for() {
            Some(WaitFor::Service) => {
                let status = super::rls_status(host);
                self.on_service_answer(host, ex, status, size)
            }
            Some(WaitFor::Session) => self.on_session_answer(host, ex, size),
            None | Some(WaitFor::Body | WaitFor::Request) => Step::Pause,
        }
    }

    /// The rate-limit service answered (gRPC status `status`, `size` bytes
    /// of message). `Continue` when the paused request is to go on.
    pub(crate) fn on_service_answer<H: Host>(
        &self,
        host: &mut H,
        ex: &mut Exchange,
        status: u32,
        size: usize,
    ) -> Step {
        let Some((f, WaitFor::Service)) = ex.kept.take() else {
            return Step::Pause;
        };
        let Some(r) = self.route_of(&f) else {
            return Step::Continue;
        };
        let body = (status == 0)
            .then(|| super::host::rls_message(host, size))
            .flatten();
        let d = self.answered(host, r, f, Ok((status, body)));
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
        let Some((f, WaitFor::Session)) = ex.kept.take() else {
            return Step::Pause;
        };
        let Some(r) = self.route_of(&f) else {
            return Step::Continue;
        };
        let status = host.answer_header(":status").unwrap_or_default();
        let body = host.answer_body(body_size);
        let next = self.resume(host, r, f, Ok((&status, body)));
        self.drive(host, ex, next)
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
        self.costs_from_body(host, ex, size, end_of_stream);
        Step::Continue
    }

    /// The response's trailers: costs in a trailer are charged, and the
    /// body has ended.
    pub fn on_response_trailers<H: Host>(&self, host: &mut H, ex: &mut Exchange) -> Step {
        self.costs_from_trailers(host, ex);
        self.on_response_body(host, ex, 0, true)
    }

    /// The request is over (logged): costs that never came are counted.
    pub fn on_done<H: Host>(&self, host: &mut H, ex: &mut Exchange) {
        self.costs_never_named(host, ex);
    }

    /// The response's headers: the figures of an admitted request. `Pause`
    /// when the request is still undecided (an upstream that answered
    /// before reading the body the filter holds): the response waits.
    pub fn on_response<H: Host>(&self, host: &mut H, ex: &mut Exchange) -> Step {
        let waits = ex.waits_for();
        if matches!(waits, Some(WaitFor::Body | WaitFor::Request))
            && host.property(vec!["upstream", "address"]).is_none()
        {
            // Envoy answered itself (a direct response, a route with no
            // upstream): the request's body never comes to this filter, and
            // nothing reached an upstream to count.
            ex.kept = None;
            return Step::Continue;
        }
        if waits.is_some() {
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

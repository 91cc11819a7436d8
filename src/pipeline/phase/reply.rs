//! What a counted request comes to ([`Decision`]): its stats and store
//! errors recorded, the figures it is shown; and carried out: a 429 or
//! another local reply, or the figures kept for its response.

use crate::config::plan::{BoundId, Route};
use crate::count::window::Quota;
use crate::pipeline::exchange::{is_grpc, Exchange};
use crate::pipeline::limiter::{BoundEvent, Counted, Event, RouteLanes};
use crate::pipeline::{
    Charges, Decision, Host, Level, LocalReply, Step, Worker, WOULD_REFUSE_STATE,
};
use crate::reply::{self, Shown, Style};
use crate::stats::Stat;

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
pub(in crate::pipeline) struct Figures {
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
    pub(in crate::pipeline) fn of(s: &Shown) -> Figures {
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

    pub(in crate::pipeline) fn shown(&self) -> Shown<'_> {
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
    pub(in crate::pipeline) fn mark_would_refuse<H: Host>(
        &self,
        host: &mut H,
        route: &Route,
        events: &[BoundEvent],
    ) {
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
    pub(in crate::pipeline) fn conclude<H: Host>(
        &self,
        host: &mut H,
        r: RouteLanes<'p>,
        d: Counted,
    ) -> Decision<'p> {
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

    /// Carries out a decision: a local reply (`Pause`), or the figures
    /// kept for the response.
    pub(in crate::pipeline) fn carry_out<H: Host>(
        &self,
        host: &mut H,
        ex: &mut Exchange,
        d: Decision,
    ) -> Step {
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
}

//! Costs: what a request names up front (a header, or what its body
//! allows itself: `request`), and what its response owes (a header, a
//! trailer, or its body: `cost_scan`, `json_scan`, `usage_event`), trued
//! up against the reservation taken at admission; an installation bound's
//! cost beyond its reservation is owed to the service (`owed`).

pub mod chat_request;
pub mod cost_scan;
mod find;
pub mod json_scan;
pub mod owed;
pub mod request;
pub mod usage_event;

use crate::config::plan::CostSource;
use crate::config::plan::{Bound, BoundId, OpId, Route, RouteId};
use crate::pipeline::exchange::Exchange;
use crate::pipeline::limiter::{Prompt, Reads, Receipt};
use crate::pipeline::{Charges, Host, Level, Worker};
use crate::stats::Stat;
use cost_scan::{tokens_in, Body, CostScan};

/// A cost as a header or a JSON number writes it: a whole number of
/// units (a fraction is rounded up; past `u32::MAX`, `u32::MAX`).
pub fn units(text: &str) -> Option<u32> {
    let v: f64 = text.trim().parse().ok()?;
    (v.is_finite() && v >= 0.0).then(|| v.ceil().min(f64::from(u32::MAX)) as u32)
}

/// What an installation bound's caller owes the service: `units` more
/// under the descriptor and limit its admission was sent with.
fn owed_charge(bound: &Bound, caller: Option<String>, units: u32) -> Option<owed::Charge> {
    let (descriptor, unit, shape) = bound.installation()?;
    (units > 0).then(|| owed::Charge {
        descriptor: descriptor.to_string(),
        caller: caller.map(|c| (bound.per.as_str(), c)),
        limit: crate::rls::Override {
            requests_per_unit: bound.rate.limit,
            unit,
        },
        at: match shape {
            crate::config::Shape::Sliding => owed::ChargeAt::Window,
            crate::config::Shape::Fixed => owed::ChargeAt::Fixed,
        },
        units,
    })
}

/// A cost read in the response's body, for a bound's reservation: one
/// scan (its total), or two (its tokens in, then out).
pub(crate) struct Scan {
    bound: BoundId,
    receipt: Receipt,
    first: CostScan,
    output: Option<CostScan>,
}

impl<'p> Worker<'p> {
    /// The costs the request names in its headers, taken at admission: for
    /// each bound of `route` (or of its operation `op`) whose cost is in a
    /// request header. One that is missing or not a number is counted,
    /// and the request takes the bound's reservation.
    pub(in crate::pipeline) fn named_costs<H: Host>(
        &self,
        host: &mut H,
        route: &Route,
        op: Option<OpId>,
        pending: &mut Reads,
    ) {
        for &b in &route.named_costs {
            let Some(bound) = route.bound(b) else {
                continue;
            };
            if bound.written.operation.is_some() && bound.written.operation != op.map(OpId::index) {
                continue;
            }
            let Some(CostSource::RequestHeader(h)) = bound.cost.as_ref().map(|c| &c.source) else {
                continue;
            };
            match host.request_header(h).as_deref().and_then(units) {
                Some(n) => pending.set_cost(b, n),
                None => host.count(Stat::CostsUnknown),
            }
        }
    }

    /// A cost the response's body names, for a request whose body is not
    /// read: its prompt (its length) is reserved.
    pub(in crate::pipeline) fn reserve_prompt<H: Host>(
        &self,
        host: &mut H,
        route: &Route,
        op: Option<OpId>,
        pending: &mut Reads,
    ) {
        let bytes = host
            .request_header("content-length")
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0);
        let prompt = Prompt { bytes, model: None };
        pending.reserve_prompt(route, op, prompt, None);
    }

    /// The response's headers arrived: costs in a header are charged now;
    /// costs in the body are read as it passes, costs in a trailer wait.
    pub(in crate::pipeline) fn costs_from_headers<H: Host>(
        &self,
        host: &mut H,
        ex: &mut Exchange,
        charges: Charges,
    ) {
        // Always resolves (see `admitted_route`).
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
                    let units = host.response_header(h).as_deref().and_then(units);
                    self.charge(
                        host,
                        route,
                        (charges.route, b, charges.at_ms),
                        receipt,
                        units,
                    );
                }
                CostSource::ResponseTrailer(h) => match host.response_header(h) {
                    // An answer that is all headers (gRPC's trailers-only).
                    Some(v) => {
                        let at = (charges.route, b, charges.at_ms);
                        self.charge(host, route, at, receipt, units(&v));
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
        route: &Route,
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
                let owed = units.saturating_sub(hits);
                if let Some(c) = route.bound(b).and_then(|x| owed_charge(x, caller, owed)) {
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

    /// A chunk of the response body passes (`end_of_stream`: the last):
    /// fed to each scan (and the usage event taken out of a stream whose
    /// caller did not ask for it); at its end, each scan settled.
    pub(in crate::pipeline) fn costs_from_body<H: Host>(
        &self,
        host: &mut H,
        ex: &mut Exchange,
        size: usize,
        end_of_stream: bool,
    ) {
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
            let Some(route) = self.admitted_route(ex) else {
                return;
            };
            for scan in std::mem::take(&mut ex.scans) {
                self.settle(host, ex, route, scan, true);
            }
        }
    }

    /// A body's scan at its end (`ended`), or cut before it: the cost it
    /// read, or none: then the answer is charged what it delivered (its
    /// text and its prompt) where that is more than its reservation, and
    /// counted as unknown. No caller's choice — a stream that names no
    /// usage, a hang-up before it — moves what passed off the counter.
    fn settle<H: Host>(&self, host: &mut H, ex: &Exchange, route: &Route, scan: Scan, ended: bool) {
        let (r, at_ms) = ex.admitted;
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
                let cost = route.bound(b).and_then(|x| x.cost.as_ref());
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
        self.charge(host, route, (r, b, at_ms), receipt, Some(units));
    }

    /// The response's trailers: each cost waiting for its trailer charged.
    pub(in crate::pipeline) fn costs_from_trailers<H: Host>(
        &self,
        host: &mut H,
        ex: &mut Exchange,
    ) {
        if ex.trailers.is_empty() {
            return;
        }
        let Some(route) = self.admitted_route(ex) else {
            return;
        };
        let (r, at_ms) = ex.admitted;
        for (b, receipt) in std::mem::take(&mut ex.trailers) {
            let name = route
                .bound(b)
                .and_then(|x| x.cost.as_ref())
                .and_then(|c| match &c.source {
                    CostSource::ResponseTrailer(h) => Some(h.as_str()),
                    _ => None,
                });
            let units = name
                .and_then(|h| host.response_trailer(h))
                .as_deref()
                .and_then(units);
            self.charge(host, route, (r, b, at_ms), receipt, units);
        }
    }

    /// The request is over: a body cut before its end (a hang-up, a reset)
    /// is charged what passed of it, if more than its reservation; any
    /// other cost that never came keeps its reservation. Each is counted.
    pub(in crate::pipeline) fn costs_never_named<H: Host>(&self, host: &mut H, ex: &mut Exchange) {
        let waiting = ex.charges.take().map_or(0, |c| c.receipts.len()) + ex.trailers.len();
        ex.trailers.clear();
        for _ in 0..waiting {
            host.count(Stat::CostsUnknown);
        }
        if ex.scans.is_empty() {
            return;
        }
        let Some(route) = self.admitted_route(ex) else {
            return;
        };
        for scan in std::mem::take(&mut ex.scans) {
            self.settle(host, ex, route, scan, false);
        }
    }

    /// The route the request was admitted on, resolved once per callback.
    /// It always resolves: a request context keeps the configuration its
    /// headers came under (`Request::active`, `filter/src/lib.rs`).
    fn admitted_route(&self, ex: &Exchange) -> Option<&'p Route> {
        self.limiter.plan.route(ex.admitted.0)
    }
}

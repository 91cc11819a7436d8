//! Arrive: the client's copy of the filter's mark dropped, what the plan
//! reads of the request, normalised once, its route and operation, and
//! the caller's address.

use crate::config::plan::{OpId, RequestInfo};
use crate::identity::address::strip_port;
use crate::pipeline::limiter::RouteLanes;
use crate::pipeline::{Host, Worker};

/// A request on a route with bounds.
pub(crate) struct Arrived<'p> {
    pub lanes: RouteLanes<'p>,
    pub op: Option<OpId>,
    /// `source.address`, with its port (read only for a route that needs
    /// it).
    source: String,
}

impl Arrived<'_> {
    /// The caller's address, without its port.
    pub fn address(&self) -> &str {
        strip_port(&self.source)
    }
}

impl<'p> Worker<'p> {
    /// The request's route: `None` for a request no bound of this plan
    /// counts (it goes on).
    #[inline(always)]
    pub(in crate::pipeline) fn arrive<H: Host>(&self, host: &mut H) -> Option<Arrived<'p>> {
        let plan = &self.limiter.plan;
        // The mark is the filter's alone: a client's copy never reaches the
        // upstream, whatever route the request takes.
        if let Some(h) = &plan.would_refuse_header {
            host.remove_request_header(h);
            // Rack and CGI-style servers read `x_mark` as `x-mark`.
            for other in &plan.would_refuse_spellings {
                host.remove_request_header(other);
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
        let lanes = plan
            .route_for_normalized(&request)
            .and_then(|id| self.limiter.route(id))?;
        let route = lanes.route;
        if route.bounds.is_empty() {
            return None;
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
        Some(Arrived {
            lanes,
            op: route.operation_for(&request),
            source,
        })
    }
}

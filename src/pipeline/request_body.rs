//! A request whose cost its answer names, read whole before admission
//! (`Begun::NeedsRequest`): what it allows itself sets its reservation, and
//! a stream that did not ask for its usage is made to (`chat_request`).
//! A body that cannot be read with certainty is refused, never forwarded
//! unread.

use super::chat_request::{self, Unclear};
use super::limiter::Pending;
use super::{Begun, Decision, Host, Worker};
use crate::stats::Stat;

/// A request waiting for its body, before any bound was read.
pub struct Entry {
    pending: Pending,
    address: String,
    /// When its headers came: the time it is decided at.
    now: u64,
}

impl Entry {
    pub(super) fn new(pending: Pending, address: &str, now: u64) -> Entry {
        Entry {
            pending,
            address: address.to_string(),
            now,
        }
    }

    pub fn route(&self) -> crate::config::plan::RouteId {
        self.pending.route()
    }
}

/// What reading the body came to, beside the next step.
pub struct Read<'p> {
    pub next: Begun<'p>,
    /// The body was rewritten to ask for the usage (at this pointer): the
    /// caller did not, so the usage event is taken out of its stream.
    pub usage_asked: Option<&'p str>,
}

impl<'p> Worker<'p> {
    /// The request's head, before its body is waited for (read while the
    /// headers can still be read): a compressed body is refused.
    pub(super) fn request_head<H: Host>(&self, host: &mut H, e: &Entry) -> Option<Decision<'p>> {
        let route = self.limiter.plan.route(e.route())?;
        let encoded = host
            .request_header_values("content-encoding")
            .iter()
            .any(|v| !v.trim_ascii().eq_ignore_ascii_case(b"identity"));
        if !encoded {
            return None;
        }
        host.count(Stat::RequestsUnclear);
        Some(Decision::Unclear {
            route: &route.name,
            why: Unclear::Encoded,
        })
    }

    /// The largest body the request's route reads before admission.
    pub(super) fn request_cap(&self, e: &Entry) -> usize {
        self.limiter
            .plan
            .route(e.route())
            .and_then(|r| r.reads_request)
            .unwrap_or(0)
    }

    /// The request body arrived (`size` bytes: all of it, unless over the
    /// cap): the reservation it allows itself, the usage asked for, then
    /// its admission. `held`: its headers have not gone on, so its
    /// `content-length` can be mended.
    pub(super) fn with_request<H: Host>(
        &self,
        host: &mut H,
        e: Box<Entry>,
        size: usize,
        held: bool,
    ) -> Read<'p> {
        let Entry {
            mut pending,
            address,
            now,
        } = *e;
        let decided = |d| Read {
            next: Begun::Decided(d),
            usage_asked: None,
        };
        let Some(r) = self.route(pending.route()) else {
            return decided(Decision::Pass(None));
        };
        let route = r.route;
        let unclear = |host: &mut H, why| {
            host.count(Stat::RequestsUnclear);
            decided(Decision::Unclear {
                route: &route.name,
                why,
            })
        };
        let cap = route.reads_request.unwrap_or(0);
        if size > cap {
            return unclear(host, Unclear::TooLarge(cap));
        }
        let body = match size {
            0 => Vec::new(),
            _ => host.request_body(size).unwrap_or_default(),
        };
        let read = match chat_request::read(&body) {
            Ok(read) => read,
            Err(why) => return unclear(host, why),
        };
        let mut usage_asked = None;
        let mut length = body.len();
        let pointer = route.asks_usage.as_deref();
        if let (Some(read), Some(pointer)) = (read.as_ref().filter(|r| r.needs_usage()), pointer) {
            let asking = read.asking_usage(&body);
            host.set_request_body(size, &asking);
            length = asking.len();
            host.count(Stat::UsageAsked);
            usage_asked = Some(pointer);
        }
        if held && size > 0 {
            host.set_request_header("content-length", &length.to_string());
        }
        let ceiling = read.as_ref().and_then(|r| r.asked.ceiling);
        let prompt = super::limiter::Prompt {
            bytes: body.len() as u64,
            model: read.and_then(|r| r.model),
        };
        let op = pending.op();
        pending.reserve_prompt(route, op, prompt, ceiling);
        Read {
            next: self.admit(host, r, pending, &address, now),
            usage_asked,
        }
    }
}

//! A request whose cost its answer names, read whole before admission
//! (`WaitFor::Request`): what it allows itself sets its reservation, and
//! a stream that did not ask for its usage is made to (`chat_request`).
//! A body that cannot be read with certainty is refused, never forwarded
//! unread.

use super::chat_request::{self, Unclear};
use crate::config::plan::Route;
use crate::pipeline::flight::Next;
use crate::pipeline::limiter::{Prompt, Reads};
use crate::pipeline::{Decision, Host, Worker};
use crate::stats::Stat;

/// What reading the body came to, beside the next step.
pub struct Read<'p> {
    pub next: Next<'p>,
    /// The body was rewritten to ask for the usage (at this pointer): the
    /// caller did not, so the usage event is taken out of its stream.
    pub usage_asked: Option<&'p str>,
}

impl<'p> Worker<'p> {
    /// The request's head, before its body is waited for (read while the
    /// headers can still be read): a compressed body is refused.
    pub(in crate::pipeline) fn request_head<H: Host>(
        &self,
        host: &mut H,
        route: &'p Route,
    ) -> Option<Decision<'p>> {
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

    /// The request body arrived (`size` bytes: all of it, unless over the
    /// cap): the reservation it allows itself, and the usage asked for
    /// (the pointer it is asked at); or why it cannot be read (counted).
    /// `held`: its headers have not gone on, so its `content-length` can
    /// be mended.
    pub(in crate::pipeline) fn read_request<H: Host>(
        &self,
        host: &mut H,
        route: &'p Route,
        pending: &mut Reads,
        size: usize,
        held: bool,
    ) -> Result<Option<&'p str>, Unclear> {
        let unclear = |host: &mut H, why| {
            host.count(Stat::RequestsUnclear);
            why
        };
        let cap = route.reads_request.unwrap_or(0);
        if size > cap {
            return Err(unclear(host, Unclear::TooLarge(cap)));
        }
        let body = match size {
            0 => Vec::new(),
            _ => host.request_body(size).unwrap_or_default(),
        };
        let read = match chat_request::read(&body) {
            Ok(read) => read,
            Err(why) => return Err(unclear(host, why)),
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
        let prompt = Prompt {
            bytes: body.len() as u64,
            model: read.and_then(|r| r.model),
        };
        let op = pending.op();
        pending.reserve_prompt(route, op, prompt, ceiling);
        Ok(usage_asked)
    }
}

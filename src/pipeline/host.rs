//! What the request path asks of its host: the [`Host`] seam (over
//! [`Base`], what every context asks, the root's too), and the words it
//! uses to say what to do (`Step`, `Level`; the instance stats it bumps
//! are [`crate::stats::Stat`]'s, per-bound ones go through [`Host::record`]).

use super::phase::service::ServiceCall;
use crate::config::plan::RouteId;
use crate::count::store::Store;
use crate::pipeline::limiter::BoundEvent;
use crate::stats::Stat;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Debug,
    Info,
    Warn,
    Error,
}

/// An HTTP call-out: the session service's, or the rate-limit service's
/// (gRPC, framed by [`crate::rls`]).
#[derive(Debug, Clone)]
pub struct CallOut<'a> {
    pub cluster: &'a str,
    pub headers: &'a [(&'a str, &'a str)],
    pub body: Option<&'a [u8]>,
    pub timeout_ms: u64,
}

/// What every context asks of its host, a request's and the root's: the
/// store, the clock, properties, the log, and its call-outs.
pub trait Base {
    type Store: Store;
    /// Counter storage (Envoy shared data).
    fn store(&self) -> &Self::Store;
    /// Milliseconds since the epoch.
    fn now_ms(&self) -> u64;
    fn property(&self, path: Vec<&str>) -> Option<Vec<u8>>;
    fn log(&mut self, level: Level, msg: &str);
    /// Dispatches a call-out: its token, or the host's status name.
    fn dispatch(&mut self, call: &CallOut) -> Result<u32, String>;
    /// A header of the call-out answer being handled (none when the call
    /// failed without one).
    fn answer_header(&self, name: &str) -> Option<String>;
    /// A trailer of the call-out answer being handled.
    fn answer_trailer(&self, name: &str) -> Option<String>;
    /// The first `size` bytes of the answer's body.
    fn answer_body(&self, size: usize) -> Option<Vec<u8>>;
}

/// Calls the rate-limit service with `call`: gRPC as an HTTP/2 call-out,
/// framed here (the SDK's gRPC call panics on a status Envoy returns, and
/// the raw import's answer never reaches the context: docs/envoy-host.md).
pub fn dispatch_rls<H: Base + ?Sized>(host: &mut H, call: &ServiceCall) -> Result<u32, String> {
    let mut digits = [0; 21];
    let timeout = crate::rls::grpc_timeout(call.timeout_ms, &mut digits);
    let body = crate::rls::frame(&call.message);
    host.dispatch(&CallOut {
        cluster: call.cluster,
        headers: &[
            (":method", "POST"),
            (":path", crate::rls::PATH),
            (":authority", call.cluster),
            ("content-type", "application/grpc"),
            ("te", "trailers"),
            ("grpc-timeout", timeout),
        ],
        body: Some(&body),
        timeout_ms: call.timeout_ms,
    })
}

/// The gRPC status of the rate-limit service's answer being handled: in
/// its trailers, or the headers of a trailers-only answer.
pub fn rls_status<H: Base + ?Sized>(host: &H) -> u32 {
    let grpc = host
        .answer_trailer("grpc-status")
        .or_else(|| host.answer_header("grpc-status"));
    crate::rls::call_status(host.answer_header(":status").as_deref(), grpc.as_deref())
}

/// The message of the rate-limit service's answer (`size` bytes, framed).
pub(crate) fn rls_message<H: Base + ?Sized>(host: &H, size: usize) -> Option<Vec<u8>> {
    let framed = host.answer_body(size)?;
    crate::rls::unframe(&framed).ok().map(<[u8]>::to_vec)
}

/// An answer this filter gives instead of the upstream.
#[derive(Debug, Clone)]
pub struct LocalReply<'a> {
    pub status: u16,
    pub headers: Vec<(&'a str, &'a str)>,
    pub body: &'a [u8],
    /// What access logs show as `%RESPONSE_CODE_DETAILS%`: that ratebound
    /// answered, and why (`ratebound.refused:<route>/<bound>`).
    pub details: &'a str,
    /// For a gRPC caller: the gRPC status (Envoy answers trailers-only,
    /// the body as `grpc-message`).
    pub grpc_status: Option<u32>,
}

/// What the request path needs of its host, beyond [`Base`].
pub trait Host: Base {
    fn request_header(&self, name: &str) -> Option<String>;
    /// Every value of a request header, in order, as sent (a repeated
    /// header has several).
    fn request_header_values(&self, name: &str) -> Vec<Vec<u8>>;
    /// Every value of each of the request headers `names`, the first
    /// name's in order, then the next one's: one read of the headers
    /// where the host can.
    fn request_headers_named(&self, names: &[&str]) -> Vec<Vec<u8>> {
        names
            .iter()
            .flat_map(|n| self.request_header_values(n))
            .collect()
    }
    /// The first `size` bytes of the request body buffered so far.
    fn request_body(&self, size: usize) -> Option<Vec<u8>>;
    /// How long the rate-limit service took to answer (or fail).
    fn service_latency(&mut self, ms: u64);
    /// Lets a held response go on.
    fn resume_response(&mut self);
    /// A local reply; `Err` carries the host's status name.
    fn send_reply(&mut self, reply: &LocalReply) -> Result<(), String>;
    fn add_response_header(&mut self, name: &str, value: &str);
    /// A header of the response, once its headers arrived.
    fn response_header(&self, name: &str) -> Option<String>;
    /// A trailer of the response, once its trailers arrived.
    fn response_trailer(&self, name: &str) -> Option<String>;
    /// The response body's chunk now passing (`size` bytes).
    fn response_body(&self, size: usize) -> Option<Vec<u8>>;
    /// Sets (or replaces) a request header the upstream will see; nothing
    /// once the request headers went on.
    fn set_request_header(&mut self, name: &str, value: &str);
    /// Removes every copy of a request header (before the headers go on).
    fn remove_request_header(&mut self, name: &str);
    /// Replaces the first `size` bytes of the request body buffered so far
    /// (all of it) with `data`.
    fn set_request_body(&mut self, size: usize, data: &[u8]);
    /// Replaces the response body's chunk now passing (`size` bytes).
    fn set_response_body(&mut self, size: usize, data: &[u8]);
    /// Removes a response header (before the response's headers go on).
    fn remove_response_header(&mut self, name: &str);
    /// Leaves `value` in the request's filter state under `key` (Envoy
    /// prefixes `wasm.`), for access logs.
    fn set_filter_state(&mut self, key: &str, value: &str);
    /// Per-bound stats of route `route`.
    fn record(&mut self, route: RouteId, events: &[BoundEvent]);
    fn count(&mut self, stat: Stat);
}

/// What Envoy is told to do with the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Continue,
    Pause,
}

/// A warning that a failing dependency would repeat on every request:
/// logged at most once per [`LogGate::EVERY_MS`], the ones held back
/// counted into the next.
#[derive(Debug, Default)]
pub struct LogGate {
    next_ms: std::cell::Cell<u64>,
    held: std::cell::Cell<u64>,
}

impl LogGate {
    pub(crate) const EVERY_MS: u64 = 10_000;

    /// `Some(held back since the last one)` when this one is to be logged.
    pub fn pass(&self, now_ms: u64) -> Option<u64> {
        if now_ms < self.next_ms.get() {
            self.held.set(self.held.get() + 1);
            return None;
        }
        self.next_ms.set(now_ms.saturating_add(Self::EVERY_MS));
        Some(self.held.replace(0))
    }
}

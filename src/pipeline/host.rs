//! What the request path asks of its host: the [`Host`] seam, and the
//! words it uses to say what to do (`Step`, `Stat`, `Level`).

use super::installation::ServiceCall;
use crate::config::plan::RouteId;
use crate::count::store::Store;
use crate::pipeline::limiter::BoundEvent;

/// Instance-wide counters the pipeline bumps (per-bound ones go through
/// [`Host::record`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stat {
    StoreError,
    IdentityError,
    SessionCall,
    SessionCacheHit,
    JwtCacheHit,
    /// A sign-in refused because its account could not be read.
    AccountUnreadable,
    /// A locked caller refused without a call to the rate-limit service.
    RlsCallSaved,
    /// The rate-limit service answered without a limit for a descriptor
    /// sent with one (its configuration lacks the domain).
    RlsNoLimit,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Debug,
    Info,
    Warn,
    Error,
}

/// The session service call-out a request waits for.
#[derive(Debug, Clone, Copy)]
pub struct SessionCall<'a> {
    pub cluster: &'a str,
    /// `:method`, `:path`, `:authority`, and the credential.
    pub headers: [(&'a str, &'a str); 4],
    pub timeout_ms: u64,
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

/// What the request path needs of its host.
pub trait Host {
    type Store: Store;
    /// Counter storage (Envoy shared data).
    fn store(&self) -> &Self::Store;
    /// Milliseconds since the epoch.
    fn now_ms(&self) -> u64;
    fn request_header(&self, name: &str) -> Option<String>;
    /// Every value of a request header, in order, as sent (a repeated
    /// header has several).
    fn request_header_values(&self, name: &str) -> Vec<Vec<u8>>;
    fn property(&self, path: Vec<&str>) -> Option<Vec<u8>>;
    /// Dispatches the call-out; `Err` carries the host's status name.
    fn dispatch_session(&mut self, call: &SessionCall) -> Result<(), String>;
    /// The `:status` of the session service's answer.
    fn session_status(&self) -> Option<String>;
    /// The body of the session service's answer.
    fn session_body(&self, size: usize) -> Option<Vec<u8>>;
    /// The first `size` bytes of the request body buffered so far.
    fn request_body(&self, size: usize) -> Option<Vec<u8>>;
    /// Dispatches the rate-limit service call; `Err` carries the host's
    /// status name.
    fn dispatch_service(&mut self, call: &ServiceCall) -> Result<(), String>;
    /// The gRPC status of the rate-limit service's answer (its trailers,
    /// or the headers of a trailers-only answer; 14 when it failed).
    fn service_status(&self) -> u32;
    /// The message of the rate-limit service's answer.
    fn service_body(&self, size: usize) -> Option<Vec<u8>>;
    /// How long the rate-limit service took to answer (or fail).
    fn service_latency(&mut self, ms: u64);
    /// Lets a held response go on.
    fn resume_response(&mut self);
    /// A local reply; `Err` carries the host's status name.
    fn send_reply(&mut self, reply: &LocalReply) -> Result<(), String>;
    fn add_response_header(&mut self, name: &str, value: &str);
    /// Per-bound stats of route `route`.
    fn record(&mut self, route: RouteId, events: &[BoundEvent]);
    fn count(&mut self, stat: Stat);
    fn log(&mut self, level: Level, msg: &str);
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
    pub const EVERY_MS: u64 = 10_000;

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

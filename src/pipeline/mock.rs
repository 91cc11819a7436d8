//! A [`Host`] that records every call, over a [`MemStore`]: every path of a
//! request runs natively, and what it asked of the host can be read back.

use super::{Base, CallOut, Exchange, Host, Level, LocalReply, Step, WaitFor, Worker};
use crate::config::parse;
use crate::config::plan::{Plan, RouteId};
use crate::count::lane::Table;
use crate::count::store::MemStore;
use crate::pipeline::limiter::{BoundEvent, Limiter};
use crate::stats::Stat;
use std::cell::Cell;
use std::collections::HashMap;

/// A session call the pipeline dispatched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dispatched {
    pub cluster: String,
    pub headers: Vec<(String, String)>,
    pub timeout_ms: u64,
}

/// A local reply the pipeline sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
    pub details: String,
    pub grpc_status: Option<u32>,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Default)]
pub struct MockHost {
    pub store: MemStore,
    pub now: u64,
    pub request_headers: HashMap<String, String>,
    /// More copies of request headers (a header sent again), after the
    /// one in `request_headers`.
    pub repeated_headers: Vec<(String, String)>,
    /// More copies of request headers, as bytes that need not be UTF-8
    /// (Envoy hands a filter a header's bytes as sent); read by
    /// `request_header_values` only.
    pub byte_headers: Vec<(String, Vec<u8>)>,
    /// Properties by their path joined with '.'.
    pub properties: HashMap<String, Vec<u8>>,
    /// The host refuses to dispatch the session call with this status.
    pub dispatch_error: Option<String>,
    /// The session service's answer.
    pub session_status: Option<String>,
    pub session_body: Option<Vec<u8>>,
    /// The host refuses to send a local reply with this status.
    pub reply_error: Option<String>,
    /// The request body, whole; `None`: the headers end the request.
    pub request_body: Option<Vec<u8>>,
    /// The host refuses to dispatch the rate-limit service call.
    pub service_dispatch_error: Option<String>,
    /// The rate-limit service's answer: gRPC status and message.
    pub service_answer: Option<(u32, Vec<u8>)>,
    /// A service that counts: each call is answered from its counters (and
    /// `service_answer` set to that answer), shared between hosts as
    /// Envoys share one service.
    pub counting_service: Option<std::rc::Rc<std::cell::RefCell<CountingService>>>,
    /// Rate-limit service calls dispatched: cluster, timeout, message.
    pub service_calls: Vec<(String, u64, Vec<u8>)>,
    /// Request body reads.
    pub body_reads: Cell<usize>,
    /// Response body chunks read.
    pub body_chunks_read: Cell<usize>,
    /// Held responses let go.
    pub responses_resumed: usize,
    // What the pipeline did:
    pub dispatched: Vec<Dispatched>,
    pub replies: Vec<Reply>,
    pub response_headers: Vec<(String, String)>,
    /// The upstream's response: its headers, its body's chunks and its
    /// trailers (none: the body ends the response).
    pub upstream_headers: HashMap<String, String>,
    pub upstream_body: Vec<Vec<u8>>,
    pub upstream_trailers: Option<HashMap<String, String>>,
    /// Request headers set for the upstream, and filter state set.
    pub request_headers_set: Vec<(String, String)>,
    /// Request headers removed (one entry per header that was there).
    pub request_headers_removed: Vec<String>,
    pub filter_state: Vec<(String, String)>,
    /// The request body was replaced (then `request_body` is the new one).
    pub request_body_set: usize,
    /// The response body as the client receives it (chunks replaced or
    /// not), and the replacement of the chunk now passing.
    pub client_body: Vec<u8>,
    pub chunk_set: Option<Vec<u8>>,
    pub response_headers_removed: Vec<String>,
    pub events: Vec<(usize, BoundEvent)>,
    pub stats: Vec<Stat>,
    pub logs: Vec<(Level, String)>,
    /// Header and property reads (host calls that read the request), and
    /// each kind alone.
    pub reads: Cell<usize>,
    pub header_reads: Cell<usize>,
    pub property_reads: Cell<usize>,
    /// The last call-out dispatched: the one whose answer is handled.
    pub answering: Option<Answering>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answering {
    Session,
    Service,
}

impl MockHost {
    pub fn new(now: u64) -> MockHost {
        MockHost {
            now,
            ..MockHost::default()
        }
    }

    /// A request from `address` (a port is added, as Envoy gives it).
    pub fn from_address(mut self, address: &str) -> MockHost {
        self.properties.insert(
            "source.address".into(),
            format!("{address}:41000").into_bytes(),
        );
        self
    }

    pub fn header(mut self, name: &str, value: &str) -> MockHost {
        self.request_headers.insert(name.into(), value.into());
        self
    }

    /// How many times the request body was read.
    pub fn body_reads_total(&self) -> usize {
        self.body_reads.get()
    }

    /// How many times `stat` was counted.
    pub fn counted(&self, stat: Stat) -> usize {
        self.stats.iter().filter(|s| **s == stat).count()
    }

    /// A response header added, by name.
    pub fn response_header(&self, name: &str) -> Option<&str> {
        self.response_headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The size of the rate-limit service's answer, framed as Envoy hands
    /// it over.
    pub(crate) fn service_answer_size(&self) -> usize {
        self.service_answer
            .as_ref()
            .map_or(0, |(_, b)| crate::rls::frame(b).len())
    }

    /// Forgets what the pipeline did (the request facts stay).
    pub fn clear(&mut self) {
        self.dispatched.clear();
        self.replies.clear();
        self.response_headers.clear();
        self.request_headers_set.clear();
        self.request_headers_removed.clear();
        self.filter_state.clear();
        self.events.clear();
        self.stats.clear();
        self.logs.clear();
        self.service_calls.clear();
        self.body_reads.set(0);
        self.reads.set(0);
        self.header_reads.set(0);
        self.property_reads.set(0);
    }
}

impl Base for MockHost {
    type Store = MemStore;

    fn store(&self) -> &MemStore {
        &self.store
    }

    fn now_ms(&self) -> u64 {
        self.now
    }

    fn property(&self, path: Vec<&str>) -> Option<Vec<u8>> {
        self.reads.set(self.reads.get() + 1);
        self.property_reads.set(self.property_reads.get() + 1);
        self.properties.get(&path.join(".")).cloned()
    }

    fn log(&mut self, level: Level, msg: &str) {
        self.logs.push((level, msg.to_string()));
    }

    /// A gRPC call is the rate-limit service's (its message unframed into
    /// `service_calls`), any other the session service's (`dispatched`).
    fn dispatch(&mut self, call: &CallOut) -> Result<u32, String> {
        let grpc = call
            .headers
            .iter()
            .any(|(k, v)| *k == "content-type" && *v == "application/grpc");
        if grpc {
            if let Some(e) = &self.service_dispatch_error {
                return Err(e.clone());
            }
            let framed = call.body.unwrap_or_default();
            let message = crate::rls::unframe(framed).map_err(|e| e.to_string())?;
            if let Some(service) = &self.counting_service {
                self.service_answer = Some((0, service.borrow_mut().answer(message, self.now)));
            }
            self.service_calls
                .push((call.cluster.into(), call.timeout_ms, message.to_vec()));
            self.answering = Some(Answering::Service);
        } else {
            if let Some(e) = &self.dispatch_error {
                return Err(e.clone());
            }
            self.dispatched.push(Dispatched {
                cluster: call.cluster.into(),
                headers: call
                    .headers
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
                timeout_ms: call.timeout_ms,
            });
            self.answering = Some(Answering::Session);
        }
        Ok(1)
    }

    fn answer_header(&self, name: &str) -> Option<String> {
        match (self.answering?, name) {
            (Answering::Session, ":status") => self.session_status.clone(),
            (Answering::Service, ":status") => self.service_answer.as_ref().map(|_| "200".into()),
            _ => None,
        }
    }

    fn answer_trailer(&self, name: &str) -> Option<String> {
        match (self.answering?, name) {
            (Answering::Service, "grpc-status") => {
                self.service_answer.as_ref().map(|(s, _)| s.to_string())
            }
            _ => None,
        }
    }

    fn answer_body(&self, size: usize) -> Option<Vec<u8>> {
        let body = match self.answering? {
            Answering::Session => self.session_body.clone()?,
            Answering::Service => crate::rls::frame(&self.service_answer.as_ref()?.1),
        };
        Some(body.into_iter().take(size).collect())
    }
}

impl Host for MockHost {
    fn request_header(&self, name: &str) -> Option<String> {
        self.reads.set(self.reads.get() + 1);
        self.header_reads.set(self.header_reads.get() + 1);
        self.request_headers.get(name).cloned()
    }

    fn request_header_values(&self, name: &str) -> Vec<Vec<u8>> {
        self.request_headers_named(&[name])
    }

    /// One read of the headers, as Envoy's host does it.
    fn request_headers_named(&self, names: &[&str]) -> Vec<Vec<u8>> {
        self.reads.set(self.reads.get() + 1);
        self.header_reads.set(self.header_reads.get() + 1);
        names.iter().flat_map(|n| self.values_of(n)).collect()
    }

    fn request_body(&self, size: usize) -> Option<Vec<u8>> {
        self.body_reads.set(self.body_reads.get() + 1);
        self.request_body
            .as_ref()
            .map(|b| b.iter().take(size).copied().collect())
    }

    fn service_latency(&mut self, _ms: u64) {}

    fn send_reply(&mut self, reply: &LocalReply) -> Result<(), String> {
        if let Some(e) = &self.reply_error {
            return Err(e.clone());
        }
        self.replies.push(Reply {
            status: reply.status,
            headers: reply
                .headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            body: String::from_utf8_lossy(reply.body).into_owned(),
            details: reply.details.to_string(),
            grpc_status: reply.grpc_status,
        });
        Ok(())
    }

    fn resume_response(&mut self) {
        self.responses_resumed += 1;
    }

    fn add_response_header(&mut self, name: &str, value: &str) {
        self.response_headers.push((name.into(), value.into()));
    }

    fn response_header(&self, name: &str) -> Option<String> {
        self.upstream_headers.get(name).cloned()
    }

    fn response_trailer(&self, name: &str) -> Option<String> {
        self.upstream_trailers.as_ref()?.get(name).cloned()
    }

    /// The chunk the last `on_response_body` was given: the one at the
    /// count of chunks read so far.
    fn response_body(&self, size: usize) -> Option<Vec<u8>> {
        let i = self.body_chunks_read.get();
        self.body_chunks_read.set(i + 1);
        let chunk = self.upstream_body.get(i)?;
        Some(chunk.iter().take(size).copied().collect())
    }

    fn set_request_header(&mut self, name: &str, value: &str) {
        self.request_headers_set.push((name.into(), value.into()));
    }

    fn remove_request_header(&mut self, name: &str) {
        let removed = self.request_headers.remove(name).is_some();
        let before = self.repeated_headers.len() + self.byte_headers.len();
        self.repeated_headers.retain(|(k, _)| k != name);
        self.byte_headers.retain(|(k, _)| k != name);
        if removed || self.repeated_headers.len() + self.byte_headers.len() != before {
            self.request_headers_removed.push(name.into());
        }
    }

    fn set_request_body(&mut self, size: usize, data: &[u8]) {
        let mut body = self.request_body.take().unwrap_or_default();
        body.splice(..size.min(body.len()), data.iter().copied());
        self.request_body = Some(body);
        self.request_body_set += 1;
    }

    fn set_response_body(&mut self, _size: usize, data: &[u8]) {
        self.chunk_set = Some(data.to_vec());
    }

    fn remove_response_header(&mut self, name: &str) {
        self.upstream_headers.remove(name);
        self.response_headers_removed.push(name.into());
    }

    fn set_filter_state(&mut self, key: &str, value: &str) {
        self.filter_state.push((key.into(), value.into()));
    }

    fn record(&mut self, route: RouteId, events: &[BoundEvent]) {
        self.events
            .extend(events.iter().map(|e| (route.index(), *e)));
    }

    fn count(&mut self, stat: Stat) {
        self.stats.push(stat);
    }
}

/// A configuration in force over a [`MockHost`]'s store, with a worker's
/// memories: what `node::RootState::configure` builds, with small caller
/// tables.
pub struct Filter {
    pub limiter: Limiter,
    pub memories: super::Memories,
}

/// Small tables: tests fill them quickly.
pub(crate) const SMALL: Table = Table {
    buckets: 16,
    per_bucket: 4,
    cap: 32,
};

impl Filter {
    /// `json` compiled, each bound on a lane of its own in `store`.
    pub fn new(store: &MemStore, json: &str) -> Result<Filter, String> {
        let config = parse(json.as_bytes()).map_err(|es| {
            es.iter()
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
                .join("; ")
        })?;
        let plan = Plan::compile(&config);
        let memories = super::Memories::new(plan.identity.as_ref(), Default::default());
        let limiter =
            Limiter::in_store(plan, [5, 6], store, ("m", 1), SMALL).map_err(|e| e.to_string())?;
        Ok(Filter { limiter, memories })
    }

    pub fn worker(&self) -> Worker<'_> {
        self.memories.worker(&self.limiter)
    }

    /// What the first route's first bound (per address) counts for
    /// `address` in `store`, if anything.
    pub fn count_of(&self, store: &MemStore, address: &str) -> Option<u32> {
        let caller = crate::pipeline::limiter::Caller {
            address,
            identity: None,
            model: None,
        };
        let key = self
            .limiter
            .caller_key(crate::config::Per::Address, &caller);
        let lane = self.limiter.lane(
            crate::config::plan::RouteId(0),
            crate::config::plan::BoundId(0),
        )?;
        crate::count::node_lane::peek(store, lane, key)
            .ok()
            .flatten()
            .map(|c| c.cur)
    }

    /// One whole request as Envoy drives it: its headers, the session
    /// answer if it asked for one, its body in one piece, the rate-limit
    /// service's answer if it called, its response headers (a local
    /// reply's too). The step of the request headers and of the last
    /// callback that decided, if a later one did.
    pub fn request(&self, host: &mut MockHost) -> (Step, Option<Step>) {
        request(self.worker(), host)
    }
}

/// One whole request through worker `w` (see [`Filter::request`]): a
/// configuration the filter's or a node's (`crate::node`).
pub fn request(w: Worker<'_>, host: &mut MockHost) -> (Step, Option<Step>) {
    let mut ex = Exchange::default();
    let first = w.on_request(host, &mut ex, host.request_body.is_none());
    let mut last = None;
    if ex.waits_for() == Some(WaitFor::Session) {
        let size = host.session_body.as_ref().map_or(0, Vec::len);
        last = Some(w.on_answer(host, &mut ex, size));
    }
    // Envoy delivers no more of a request it was told to answer.
    let body = host.request_body.as_ref().map(Vec::len);
    if let Some(size) = body.filter(|_| !ex.refused) {
        let waited = matches!(ex.waits_for(), Some(WaitFor::Body | WaitFor::Request));
        let step = w.on_request_body(host, &mut ex, size, true);
        if waited {
            last = Some(step);
        }
    }
    if ex.waits_for() == Some(WaitFor::Service) {
        let size = host.service_answer_size();
        last = Some(w.on_answer(host, &mut ex, size));
    }
    w.on_response(host, &mut ex);
    let chunks = host.upstream_body.len();
    host.body_chunks_read.set(0);
    let trailers = host.upstream_trailers.is_some();
    for i in 0..chunks {
        let size = host.upstream_body.get(i).map_or(0, Vec::len);
        w.on_response_body(host, &mut ex, size, i + 1 == chunks && !trailers);
        let passed = match host.chunk_set.take() {
            Some(set) => set,
            None => host.upstream_body.get(i).cloned().unwrap_or_default(),
        };
        host.client_body.extend(passed);
    }
    if trailers {
        w.on_response_trailers(host, &mut ex);
    }
    w.on_done(host, &mut ex);
    (first, last)
}

/// envoyproxy/ratelimit's counting: a counter per descriptor (its
/// entries) and clock window of its limit's unit (the service appends the
/// window's start, `now − now mod unit`, to the key), `hits_addend` added
/// (1 when unset), OK up to the limit with what remains, OVER_LIMIT above
/// it with 0; OVER_LIMIT overall when any descriptor is.
/// (docs/rate-limit-service.md says where each was checked against the
/// real service.)
#[derive(Default)]
pub struct CountingService {
    pub counts: HashMap<(Vec<(String, String)>, u64), u64>,
}

impl CountingService {
    /// Its answer to `message` at `now_ms`.
    pub fn answer(&mut self, message: &[u8], now_ms: u64) -> Vec<u8> {
        use crate::rls::proto;
        use prost::Message;
        let Ok(req) = proto::RateLimitRequest::decode(message) else {
            return Vec::new();
        };
        let statuses: Vec<proto::DescriptorStatus> = req
            .descriptors
            .iter()
            .map(|d| {
                let key = d
                    .entries
                    .iter()
                    .map(|e| (e.key.clone(), e.value.clone()))
                    .collect();
                let limit = d.limit.clone().unwrap_or_default();
                let unit_s = crate::rls::answer_unit_seconds(limit.unit).unwrap_or(60);
                let now_s = now_ms / 1_000;
                let count = self
                    .counts
                    .entry((key, now_s - now_s % unit_s))
                    .or_default();
                *count += d.hits_addend.as_ref().map_or(1, |h| h.value);
                let over = *count > u64::from(limit.requests_per_unit);
                proto::DescriptorStatus {
                    code: if over { 2 } else { 1 },
                    limit_remaining: u32::try_from(
                        u64::from(limit.requests_per_unit).saturating_sub(*count),
                    )
                    .unwrap_or(0),
                    current_limit: Some(proto::RateLimit {
                        requests_per_unit: limit.requests_per_unit,
                        unit: limit.unit,
                        name: String::new(),
                    }),
                    duration_until_reset: Some(proto::Duration {
                        seconds: 30,
                        nanos: 0,
                    }),
                }
            })
            .collect();
        let overall = if statuses.iter().any(|s| s.code == 2) {
            2
        } else {
            1
        };
        proto::RateLimitResponse {
            overall_code: overall,
            statuses,
        }
        .encode_to_vec()
    }
}

impl MockHost {
    /// Every value of request header `name`, uncounted.
    fn values_of(&self, name: &str) -> Vec<Vec<u8>> {
        let first = self.request_headers.get(name);
        let more = self.repeated_headers.iter().filter(|(k, _)| k == name);
        let bytes = self.byte_headers.iter().filter(|(k, _)| k == name);
        first
            .into_iter()
            .chain(more.map(|(_, v)| v))
            .map(|v| v.as_bytes().to_vec())
            .chain(bytes.map(|(_, v)| v.clone()))
            .collect()
    }
}

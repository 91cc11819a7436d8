//! The thin layer over proxy-wasm: forwards Envoy's callbacks to the pure
//! core (`node` for a root context's life, `pipeline` for a request's) and
//! gives it what it asks of Envoy.

mod metrics;
mod node;
mod shared;

use crate::config::plan::RouteId;
use crate::count::lane::Table;
use crate::node::{Active, Node, NodeHost};
use crate::pipeline::installation::ServiceCall;
use crate::pipeline::limiter::BoundEvent;
use crate::pipeline::{Exchange, Host, Level, LocalReply, SessionCall, Stat, Step, Worker};
use metrics::Metrics;
use proxy_wasm::hostcalls;
use proxy_wasm::traits::{Context, HttpContext, RootContext};
use proxy_wasm::types::{Action, BufferType, ContextType, LogLevel, MapType};
use shared::{log, now_ms, request_header, SharedData};
use std::rc::Rc;
use std::time::Duration;

proxy_wasm::main! {{
    proxy_wasm::set_log_level(LogLevel::Info);
    std::panic::set_hook(Box::new(|info| {
        // Where, not what: a panic message can quote the data it choked on
        // (a string slice error prints the string), and no request value
        // may reach the log.
        let at = info
            .location()
            .map_or_else(String::new, |l| format!(" at {}:{}", l.file(), l.line()));
        log(LogLevel::Critical, &format!("ratebound panicked{at}"));
    }));
    proxy_wasm::set_root_context(|_| -> Box<dyn RootContext> {
        let random = node::RootHost::default().random()[0];
        Box::new(Root { node: Node::new(random, Table::DEFAULT) })
    });
}}

/// A root context: its life is the node's (`crate::node`).
struct Root {
    node: Node<Metrics>,
}

impl Context for Root {
    /// A fleet sync's call, or the warm-up call, was answered.
    fn on_http_call_response(&mut self, token: u32, headers: usize, body: usize, trailers: usize) {
        let status = node::rls_status(headers, trailers);
        let mut host = node::RootHost { headers, trailers };
        let _ = self
            .node
            .answered(&mut host, token, (status, headers > 0), body);
    }

    fn on_done(&mut self) -> bool {
        self.node.done(&mut node::RootHost::default());
        true
    }
}

impl RootContext for Root {
    fn on_vm_start(&mut self, _: usize) -> bool {
        log(
            LogLevel::Info,
            &format!(
                "ratebound {} (commit {}) starting",
                env!("CARGO_PKG_VERSION"),
                env!("RATEBOUND_GIT_COMMIT")
            ),
        );
        #[cfg(feature = "selftest")]
        crate::pipeline::store_suite::report(
            &SharedData,
            &format!("selftest{:x}", node::RootHost::default().random()[0]),
            |line| log(LogLevel::Info, line),
        );
        true
    }

    fn on_configure(&mut self, _: usize) -> bool {
        let bytes = hostcalls::get_buffer(BufferType::PluginConfiguration, 0, usize::MAX)
            .ok()
            .flatten()
            .unwrap_or_default();
        self.node.configure(&mut node::RootHost::default(), bytes)
    }

    fn on_tick(&mut self) {
        self.node.tick(&mut node::RootHost::default());
    }

    fn create_http_context(&self, _: u32) -> Option<Box<dyn HttpContext>> {
        Some(Box::new(Request {
            active: self.node.for_request(),
            exchange: Exchange::default(),
        }))
    }

    fn get_type(&self) -> Option<ContextType> {
        Some(ContextType::HttpContext)
    }
}

struct Request {
    active: Option<Rc<Active<Metrics>>>,
    exchange: Exchange,
}

/// The pipeline's host: Envoy through proxy-wasm, stats into `Metrics`.
struct Envoy<'a> {
    metrics: &'a Metrics,
    /// The call-out answer being handled ([`node::RootHost`]).
    call: node::RootHost,
}

impl Host for Envoy<'_> {
    type Store = SharedData;

    fn store(&self) -> &SharedData {
        &SharedData
    }

    fn now_ms(&self) -> u64 {
        now_ms()
    }

    fn request_header(&self, name: &str) -> Option<String> {
        request_header(name)
    }

    fn request_header_values(&self, name: &str) -> Vec<Vec<u8>> {
        shared::map_values(MapType::HttpRequestHeaders, name)
    }

    fn property(&self, path: Vec<&str>) -> Option<Vec<u8>> {
        hostcalls::get_property(path).ok().flatten()
    }

    fn dispatch_session(&mut self, call: &SessionCall) -> Result<(), String> {
        hostcalls::dispatch_http_call(
            call.cluster,
            call.headers.to_vec(),
            None,
            vec![],
            Duration::from_millis(call.timeout_ms),
        )
        .map(|_| ())
        .map_err(|s| format!("{s:?}"))
    }

    fn session_status(&self) -> Option<String> {
        node::call_map(
            self.call.headers,
            MapType::HttpCallResponseHeaders,
            ":status",
        )
    }

    fn session_body(&self, size: usize) -> Option<Vec<u8>> {
        node::call_body(size)
    }

    fn request_body(&self, size: usize) -> Option<Vec<u8>> {
        hostcalls::get_buffer(BufferType::HttpRequestBody, 0, size)
            .ok()
            .flatten()
    }

    fn dispatch_service(&mut self, call: &ServiceCall) -> Result<(), String> {
        node::dispatch_rls(call).map(|_| ())
    }

    fn service_status(&self) -> u32 {
        node::rls_status(self.call.headers, self.call.trailers)
    }

    fn service_body(&self, size: usize) -> Option<Vec<u8>> {
        let framed = node::call_body(size)?;
        crate::rls::unframe(&framed).ok().map(<[u8]>::to_vec)
    }

    fn service_latency(&mut self, ms: u64) {
        self.metrics.service_latency(ms);
    }

    fn send_reply(&mut self, reply: &LocalReply) -> Result<(), String> {
        shared::send_local_response(reply)
    }

    fn resume_response(&mut self) {
        let _ = hostcalls::resume_http_response();
    }

    fn add_response_header(&mut self, name: &str, value: &str) {
        let _ = hostcalls::add_map_value(MapType::HttpResponseHeaders, name, value);
    }

    fn record(&mut self, route: RouteId, events: &[BoundEvent]) {
        self.metrics.record(route, events);
    }

    fn count(&mut self, stat: Stat) {
        self.metrics.count_request(stat);
    }

    fn log(&mut self, level: Level, msg: &str) {
        node::log_at(level, msg);
    }
}

impl Context for Request {
    /// The session service or the rate-limit service answered: a request
    /// waits for one call-out at a time.
    fn on_http_call_response(&mut self, _: u32, headers: usize, body_size: usize, trailers: usize) {
        let call = node::RootHost { headers, trailers };
        let step = self.step(call, |w, host, ex| w.on_answer(host, ex, body_size));
        if step == Action::Continue {
            let _ = hostcalls::resume_http_request();
        }
    }
}

impl Request {
    /// Runs one callback of the pipeline with this request's configuration
    /// and exchange; without a configuration the request goes on.
    fn step(
        &mut self,
        call: node::RootHost,
        f: impl FnOnce(Worker, &mut Envoy, &mut Exchange) -> Step,
    ) -> Action {
        let Some(active) = self.active.clone() else {
            return Action::Continue;
        };
        let mut host = Envoy {
            metrics: &active.stats,
            call,
        };
        match f(active.worker(), &mut host, &mut self.exchange) {
            Step::Continue => Action::Continue,
            Step::Pause => Action::Pause,
        }
    }
}

impl HttpContext for Request {
    fn on_http_request_headers(&mut self, _: usize, end_of_stream: bool) -> Action {
        let call = node::RootHost::default();
        self.step(call, |w, host, ex| w.on_request(host, ex, end_of_stream))
    }

    fn on_http_request_body(&mut self, size: usize, end_of_stream: bool) -> Action {
        let call = node::RootHost::default();
        self.step(call, |w, host, ex| {
            w.on_request_body(host, ex, size, end_of_stream)
        })
    }

    fn on_http_request_trailers(&mut self, _: usize) -> Action {
        let call = node::RootHost::default();
        self.step(call, |w, host, ex| w.on_request_trailers(host, ex))
    }

    fn on_http_response_headers(&mut self, _: usize, _: bool) -> Action {
        let call = node::RootHost::default();
        self.step(call, |w, host, ex| w.on_response(host, ex))
    }
}

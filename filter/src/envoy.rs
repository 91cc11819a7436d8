//! Envoy, through proxy-wasm, as the host of a context: the pipeline's
//! [`Host`] for a request, the node's [`NodeHost`] for a root context.

use super::metrics::{EnvoyMetrics, Metrics};
use super::shared::{self, log, map_value, now_ms, SharedData};
use proxy_wasm::hostcalls;
use proxy_wasm::types::{BufferType, LogLevel, MapType};
use ratebound::config::plan::{Plan, RouteId};
use ratebound::node::NodeHost;
use ratebound::pipeline::limiter::BoundEvent;
use ratebound::pipeline::{Base, CallOut, Host, Level, LocalReply};
use ratebound::stats::Stat;
use std::time::Duration;

/// Envoy for one callback: the stats of the configuration in force (a
/// request's), and the sizes of the header and trailer maps of the
/// call-out answer being handled (0 when there is none).
#[derive(Default)]
pub struct Envoy<'a> {
    pub metrics: Option<&'a Metrics>,
    pub headers: usize,
    pub trailers: usize,
}

impl Envoy<'_> {
    /// A header of a call-out answer's map of `size` entries: a failed
    /// call has no maps at all, and reading one that is not there is a
    /// status the SDK panics on.
    fn answer_map(size: usize, map: MapType, name: &str) -> Option<String> {
        (size > 0).then(|| map_value(map, name)).flatten()
    }
}

impl Base for Envoy<'_> {
    type Store = SharedData;

    fn store(&self) -> &SharedData {
        &SharedData
    }

    fn now_ms(&self) -> u64 {
        now_ms()
    }

    fn property(&self, path: Vec<&str>) -> Option<Vec<u8>> {
        hostcalls::get_property(path).ok().flatten()
    }

    fn log(&mut self, level: Level, msg: &str) {
        let level = match level {
            Level::Debug => LogLevel::Debug,
            Level::Info => LogLevel::Info,
            Level::Warn => LogLevel::Warn,
            Level::Error => LogLevel::Error,
        };
        log(level, msg);
    }

    fn dispatch(&mut self, call: &CallOut) -> Result<u32, String> {
        hostcalls::dispatch_http_call(
            call.cluster,
            call.headers.to_vec(),
            call.body,
            vec![],
            Duration::from_millis(call.timeout_ms),
        )
        .map_err(|s| format!("{s:?}"))
    }

    fn answer_header(&self, name: &str) -> Option<String> {
        Self::answer_map(self.headers, MapType::HttpCallResponseHeaders, name)
    }

    fn answer_trailer(&self, name: &str) -> Option<String> {
        Self::answer_map(self.trailers, MapType::HttpCallResponseTrailers, name)
    }

    fn answer_body(&self, size: usize) -> Option<Vec<u8>> {
        hostcalls::get_buffer(BufferType::HttpCallResponseBody, 0, size)
            .ok()
            .flatten()
    }
}

impl Host for Envoy<'_> {
    fn request_header(&self, name: &str) -> Option<String> {
        map_value(MapType::HttpRequestHeaders, name)
    }

    fn request_header_values(&self, name: &str) -> Vec<Vec<u8>> {
        shared::map_values(MapType::HttpRequestHeaders, &[name])
    }

    fn request_headers_named(&self, names: &[&str]) -> Vec<Vec<u8>> {
        shared::map_values(MapType::HttpRequestHeaders, names)
    }

    fn request_body(&self, size: usize) -> Option<Vec<u8>> {
        hostcalls::get_buffer(BufferType::HttpRequestBody, 0, size)
            .ok()
            .flatten()
    }

    fn service_latency(&mut self, ms: u64) {
        if let Some(m) = self.metrics {
            m.service_latency(ms);
        }
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

    fn response_header(&self, name: &str) -> Option<String> {
        map_value(MapType::HttpResponseHeaders, name)
    }

    fn response_trailer(&self, name: &str) -> Option<String> {
        map_value(MapType::HttpResponseTrailers, name)
    }

    fn response_body(&self, size: usize) -> Option<Vec<u8>> {
        hostcalls::get_buffer(BufferType::HttpResponseBody, 0, size)
            .ok()
            .flatten()
    }

    fn set_request_header(&mut self, name: &str, value: &str) {
        let _ = hostcalls::set_map_value(MapType::HttpRequestHeaders, name, Some(value));
    }

    fn remove_request_header(&mut self, name: &str) {
        let _ = hostcalls::set_map_value(MapType::HttpRequestHeaders, name, None);
    }

    fn set_request_body(&mut self, size: usize, data: &[u8]) {
        let _ = hostcalls::set_buffer(BufferType::HttpRequestBody, 0, size, data);
    }

    fn set_response_body(&mut self, size: usize, data: &[u8]) {
        let _ = hostcalls::set_buffer(BufferType::HttpResponseBody, 0, size, data);
    }

    fn remove_response_header(&mut self, name: &str) {
        let _ = hostcalls::set_map_value(MapType::HttpResponseHeaders, name, None);
    }

    fn set_filter_state(&mut self, key: &str, value: &str) {
        let _ = hostcalls::set_property(vec![key], Some(value.as_bytes()));
    }

    fn record(&mut self, route: RouteId, events: &[BoundEvent]) {
        if let Some(m) = self.metrics {
            m.record(route, events);
        }
    }

    fn count(&mut self, stat: Stat) {
        if let Some(m) = self.metrics {
            m.count_request(stat);
        }
    }
}

impl NodeHost for Envoy<'_> {
    type Stats = Metrics;

    /// WASI random through std's RandomState.
    fn random(&mut self) -> [u64; 2] {
        use std::hash::BuildHasher;
        let s = std::collections::hash_map::RandomState::new();
        [s.hash_one(now_ms()), s.hash_one(!now_ms())]
    }

    fn env_var(&self, name: &str) -> Option<String> {
        // The VM's environment (WASI).
        std::env::var(name).ok()
    }

    fn define_stats(&mut self, plan: &Plan) -> Metrics {
        Metrics::define(EnvoyMetrics, plan)
    }

    fn set_tick_period(&mut self, ms: u64) {
        let _ = hostcalls::set_tick_period(Duration::from_millis(ms));
    }
}

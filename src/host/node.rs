//! The node's host ([`NodeHost`]): Envoy through proxy-wasm for a root
//! context, stats into `Metrics`.

use super::metrics::{EnvoyMetrics, Metrics};
use super::shared::{log, map_value, now_ms, SharedData};
use crate::config::plan::Plan;
use crate::node::NodeHost;
use crate::pipeline::installation::ServiceCall;
use crate::pipeline::Level;
use proxy_wasm::hostcalls;
use proxy_wasm::types::{BufferType, LogLevel, MapType};
use std::time::Duration;

/// Envoy for a root context's callback; `headers` and `trailers` are the
/// sizes of the maps of the call-out answer being handled ([`call_map`]).
#[derive(Default)]
pub struct RootHost {
    pub headers: usize,
    pub trailers: usize,
}

impl NodeHost for RootHost {
    type Store = SharedData;
    type Stats = Metrics;

    fn store(&self) -> &SharedData {
        &SharedData
    }

    fn now_ms(&self) -> u64 {
        now_ms()
    }

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

    fn property(&self, path: Vec<&str>) -> Option<Vec<u8>> {
        hostcalls::get_property(path).ok().flatten()
    }

    fn define_stats(&mut self, plan: &Plan) -> Metrics {
        Metrics::define(EnvoyMetrics, plan)
    }

    fn dispatch(&mut self, call: &ServiceCall) -> Result<u32, String> {
        dispatch_rls(call)
    }

    fn call_grpc_message(&self) -> Option<String> {
        let name = "grpc-message";
        call_map(self.trailers, MapType::HttpCallResponseTrailers, name)
            .or_else(|| call_map(self.headers, MapType::HttpCallResponseHeaders, name))
    }

    fn call_body(&self, size: usize) -> Option<Vec<u8>> {
        call_body(size)
    }

    fn set_tick_period(&mut self, ms: u64) {
        let _ = hostcalls::set_tick_period(Duration::from_millis(ms));
    }

    fn log(&mut self, level: Level, msg: &str) {
        log_at(level, msg);
    }
}

/// gRPC as an HTTP/2 call-out, framed here: the SDK's gRPC call panics on a
/// status Envoy returns (BadArgument when it cannot make the client), and
/// the raw import's answer never reaches this context (the SDK routes only
/// calls its own wrapper registered). Envoy's HTTP call returns only
/// statuses the SDK maps (docs/envoy-host.md).
pub fn dispatch_rls(call: &ServiceCall) -> Result<u32, String> {
    let timeout = format!("{}m", call.timeout_ms);
    let path = format!("/{}/{}", crate::rls::SERVICE, crate::rls::METHOD);
    hostcalls::dispatch_http_call(
        call.cluster,
        vec![
            (":method", "POST"),
            (":path", &path),
            (":authority", call.cluster),
            ("content-type", "application/grpc"),
            ("te", "trailers"),
            ("grpc-timeout", &timeout),
        ],
        Some(&crate::rls::frame(&call.message)),
        vec![],
        Duration::from_millis(call.timeout_ms),
    )
    .map_err(|s| format!("{s:?}"))
}

/// The gRPC status of a rate-limit service call's answer, from the sizes of
/// its header and trailer maps as the callback gives them.
pub fn rls_status(headers: usize, trailers: usize) -> u32 {
    // In the trailers, or the headers of a trailers-only answer.
    let grpc = call_map(trailers, MapType::HttpCallResponseTrailers, "grpc-status")
        .or_else(|| call_map(headers, MapType::HttpCallResponseHeaders, "grpc-status"));
    let http = call_map(headers, MapType::HttpCallResponseHeaders, ":status");
    crate::rls::call_status(http.as_deref(), grpc.as_deref())
}

/// A header of a call-out answer's map of `size` entries: a failed call has
/// no maps at all, and reading one that is not there is a status the SDK
/// panics on.
pub fn call_map(size: usize, map: MapType, name: &str) -> Option<String> {
    (size > 0).then(|| map_value(map, name)).flatten()
}

/// The first `size` bytes of a call-out answer's body.
pub fn call_body(size: usize) -> Option<Vec<u8>> {
    hostcalls::get_buffer(BufferType::HttpCallResponseBody, 0, size)
        .ok()
        .flatten()
}

pub fn log_at(level: Level, msg: &str) {
    let level = match level {
        Level::Debug => LogLevel::Debug,
        Level::Info => LogLevel::Info,
        Level::Warn => LogLevel::Warn,
        Level::Error => LogLevel::Error,
    };
    log(level, msg);
}

//! Envoy's metrics as the sink of a configuration's stats
//! ([`ratebound::node::StatBook`] decides what is counted and when).

use proxy_wasm::hostcalls;
use proxy_wasm::types::MetricType;
use ratebound::node::{StatBook, StatSink};
use ratebound::stats::Kind;

pub struct EnvoyMetrics;

pub type Metrics = StatBook<EnvoyMetrics>;

impl StatSink for EnvoyMetrics {
    fn define(&self, kind: Kind, name: &str) -> Option<u32> {
        let kind = match kind {
            Kind::Counter => MetricType::Counter,
            Kind::Gauge => MetricType::Gauge,
            Kind::Histogram => MetricType::Histogram,
        };
        hostcalls::define_metric(kind, name).ok()
    }

    fn increment(&self, id: u32, n: u64) {
        let _ = hostcalls::increment_metric(id, i64::try_from(n).unwrap_or(i64::MAX));
    }

    fn put(&self, id: u32, value: u64) {
        let _ = hostcalls::record_metric(id, value);
    }
}

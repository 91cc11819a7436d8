//! The Store over Envoy shared data, and the few host reads the filter needs,
//! each returning a `Result` (the SDK's `Context` wrappers unwrap).

use crate::count::store::{Store, StoreError, StoreOp, Versioned};
use proxy_wasm::hostcalls;
use proxy_wasm::types::{LogLevel, MapType, Status};

pub struct SharedData;

impl Store for SharedData {
    fn get(&self, key: &str) -> Result<Versioned, StoreError> {
        hostcalls::get_shared_data(key).map_err(|s| host_error(StoreOp::Get, key, s))
    }

    fn set(&self, key: &str, value: &[u8], cas: Option<u32>) -> Result<bool, StoreError> {
        match hostcalls::set_shared_data(key, Some(value), cas) {
            Ok(()) => Ok(true),
            Err(Status::CasMismatch) => Ok(false),
            Err(s) => Err(host_error(StoreOp::Set, key, s)),
        }
    }
}

fn host_error(op: StoreOp, key: &str, status: Status) -> StoreError {
    StoreError::Host {
        op,
        key: key.to_string(),
        status: format!("{status:?}"),
    }
}

pub fn log(level: LogLevel, msg: &str) {
    let _ = hostcalls::log(level, msg);
}

/// Milliseconds since the epoch from the host clock (0 if unavailable,
/// which lands every request in one window: still bounded).
pub fn now_ms() -> u64 {
    hostcalls::get_current_time()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_millis() as u64)
}

pub fn request_header(name: &str) -> Option<String> {
    map_value(MapType::HttpRequestHeaders, name)
}

/// A header of `map`, its bytes read as UTF-8 with any invalid sequence
/// replaced: the SDK's `get_map_value` unwraps the conversion and panics
/// on a header value with a byte such as 0xFF, which Envoy lets through.
/// Replaced, not dropped: a path is still matched by what it starts with.
pub fn map_value(map: MapType, name: &str) -> Option<String> {
    hostcalls::get_map_value_bytes(map, name)
        .ok()
        .flatten()
        .map(|b| match String::from_utf8(b) {
            Ok(s) => s,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        })
}

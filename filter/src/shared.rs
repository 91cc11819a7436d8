//! The Store over Envoy shared data, and the few host reads the filter needs,
//! each returning a `Result` (the SDK's `Context` wrappers unwrap).

use proxy_wasm::hostcalls;
use proxy_wasm::types::{LogLevel, MapType, Status};
use ratebound::count::store::{Store, StoreError, StoreOp, Versioned};
use ratebound::reply::header_map;

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

// The raw host calls where the SDK's wrappers would panic (see each use).
#[link(wasm_import_module = "env")]
extern "C" {
    fn proxy_get_header_map_value(
        map_type: MapType,
        key_data: *const u8,
        key_size: usize,
        return_value_data: *mut *mut u8,
        return_value_size: *mut usize,
    ) -> u32;
    fn proxy_get_header_map_pairs(
        map_type: MapType,
        return_map_data: *mut *mut u8,
        return_map_size: *mut usize,
    ) -> u32;
    fn proxy_send_local_response(
        status_code: u32,
        details_data: *const u8,
        details_size: usize,
        body_data: *const u8,
        body_size: usize,
        headers_data: *const u8,
        headers_size: usize,
        grpc_status: i32,
    ) -> u32;
}

/// A header of `map`, through the raw host call: the SDK's readers panic
/// on any status but Ok and NotFound (a map that is gone, such as the
/// request headers once they went on, or the trailers of a call-out answer
/// without any), and `get_map_value` also on a value that is not UTF-8.
/// Any status but Ok is `None`; invalid UTF-8 sequences are replaced, not
/// dropped, so a path still matches by what it starts with.
pub fn map_value(map: MapType, name: &str) -> Option<String> {
    let mut data: *mut u8 = std::ptr::null_mut();
    let mut size: usize = 0;
    // SAFETY: the key is a live slice; on Ok the host hands over `size`
    // bytes it allocated through this module's allocator
    // (proxy_on_memory_allocate, a Vec's buffer), owned from here on.
    let bytes = unsafe {
        if proxy_get_header_map_value(map, name.as_ptr(), name.len(), &mut data, &mut size) != 0 {
            return None;
        }
        if data.is_null() {
            Vec::new()
        } else {
            Vec::from_raw_parts(data, size, size)
        }
    };
    Some(match String::from_utf8(bytes) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    })
}

/// Every value of each header of `names` in `map`, in order (a repeated
/// header has several), the first name's then the next one's, from one
/// read of the map, through the raw host call: the SDK's `get_map` panics
/// on a value that is not UTF-8, and `map_value` returns only the first
/// copy.
pub fn map_values(map: MapType, names: &[&str]) -> Vec<Vec<u8>> {
    let mut data: *mut u8 = std::ptr::null_mut();
    let mut size: usize = 0;
    // SAFETY: as in `map_value`: on Ok the host hands over `size` bytes it
    // allocated through this module's allocator, owned from here on.
    let bytes = unsafe {
        if proxy_get_header_map_pairs(map, &mut data, &mut size) != 0 || data.is_null() {
            return Vec::new();
        }
        Vec::from_raw_parts(data, size, size)
    };
    names
        .iter()
        .flat_map(|name| {
            header_map::pairs(&bytes)
                .filter(|(k, _)| k.eq_ignore_ascii_case(name.as_bytes()))
                .map(|(_, v)| v.to_vec())
        })
        .collect()
}

/// A local reply through the raw host call: the SDK's `send_http_response`
/// panics on any status but Ok and cannot pass response code details or a
/// gRPC status. Every status is an error here.
pub fn send_local_response(reply: &ratebound::pipeline::LocalReply) -> Result<(), String> {
    let headers = header_map::encode(&reply.headers);
    let grpc = reply
        .grpc_status
        .and_then(|g| i32::try_from(g).ok())
        .unwrap_or(-1);
    // SAFETY: every pointer and length comes from a live slice of this
    // call's arguments; the host copies them before returning.
    let status = unsafe {
        proxy_send_local_response(
            u32::from(reply.status),
            reply.details.as_ptr(),
            reply.details.len(),
            reply.body.as_ptr(),
            reply.body.len(),
            headers.as_ptr(),
            headers.len(),
            grpc,
        )
    };
    match status {
        0 => Ok(()),
        s => Err(format!("host status {s}")),
    }
}

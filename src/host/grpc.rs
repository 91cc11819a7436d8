//! gRPC calls out of the module (the rate-limit service), over the raw
//! proxy-wasm imports, so that no status the host returns can abort the
//! module: proxy-wasm 0.2.5's `hostcalls::dispatch_grpc_call` panics on any
//! status but Ok, ParseFailure and InternalFailure (Envoy also returns
//! BadArgument when it cannot make the gRPC client), and its
//! `get_grpc_call_response_body` unwraps `get_buffer`, which panics on any
//! status but Ok and NotFound. Here the status is a plain `u32`: a number
//! the SDK's `Status` enum lacks (Envoy's InvalidMemoryAccess is 6) is no
//! undefined behaviour either.
//!
//! CAUTION, for whoever wires this in: the SDK routes a call's answer
//! (`proxy_on_grpc_receive` / `proxy_on_grpc_close`, which it exports) to
//! `on_grpc_call_response` only for tokens its own `dispatch_grpc_call`
//! registered (`dispatcher::register_grpc_callout`, crate-private). For a
//! token from [`dispatch`] the SDK finds no context and drops the answer
//! (a trace log, no panic): the response never reaches ratebound. So
//! [`dispatch`] alone is not usable with proxy-wasm 0.2.5's dispatcher; see
//! docs/rate-limit-service.md ("Calling it from the module") for the ways
//! out. [`response_body`] has no such problem.
//!
//! Not declared from `host/mod.rs` yet: wired by the installation-bound
//! host code.

// Wired by the installation-bound host code; unused until then.
#![allow(dead_code)]

use core::ptr::null_mut;
use core::time::Duration;

#[link(wasm_import_module = "env")]
extern "C" {
    // Same import as the SDK's `proxy_grpc_call` (same wasm signature), with
    // the status as the raw number.
    fn proxy_grpc_call(
        upstream_data: *const u8,
        upstream_size: usize,
        service_name_data: *const u8,
        service_name_size: usize,
        method_name_data: *const u8,
        method_name_size: usize,
        initial_metadata_data: *const u8,
        initial_metadata_size: usize,
        message_data: *const u8,
        message_size: usize,
        timeout_milliseconds: u32,
        return_callout_id: *mut u32,
    ) -> u32;

    fn proxy_get_buffer_bytes(
        buffer_type: u32,
        start: usize,
        max_size: usize,
        return_buffer_data: *mut *mut u8,
        return_buffer_size: *mut usize,
    ) -> u32;
}

/// proxy-wasm's `BufferType::GrpcReceiveBuffer`.
const GRPC_RECEIVE_BUFFER: u32 = 5;

/// No initial metadata: the serialised empty map is its pair count, 0
/// (a 32-bit little-endian number).
const NO_METADATA: [u8; 4] = [0; 4];

/// A host call's status other than Ok (proxy-wasm's `WasmResult`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostStatus {
    /// 1.
    NotFound,
    /// 2: for a gRPC call, Envoy could not make the client.
    BadArgument,
    /// 4: for a gRPC call, no cluster of that name.
    ParseFailure,
    /// 10: for a gRPC call, Envoy could not start the request.
    InternalFailure,
    /// Any other number (e.g. 6 InvalidMemoryAccess, 12 Unimplemented).
    Other(u32),
}

impl HostStatus {
    fn from_wire(status: u32) -> Result<(), HostStatus> {
        match status {
            0 => Ok(()),
            1 => Err(HostStatus::NotFound),
            2 => Err(HostStatus::BadArgument),
            4 => Err(HostStatus::ParseFailure),
            10 => Err(HostStatus::InternalFailure),
            other => Err(HostStatus::Other(other)),
        }
    }
}

impl core::fmt::Display for HostStatus {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            HostStatus::NotFound => f.write_str("host status 1 (NotFound)"),
            HostStatus::BadArgument => f.write_str("host status 2 (BadArgument)"),
            HostStatus::ParseFailure => f.write_str("host status 4 (ParseFailure)"),
            HostStatus::InternalFailure => f.write_str("host status 10 (InternalFailure)"),
            HostStatus::Other(n) => write!(f, "host status {n}"),
        }
    }
}

/// Starts the unary call `service`/`method` (e.g. `rls::SERVICE`,
/// `rls::METHOD`) to the Envoy cluster `cluster` with the encoded
/// `message`, no initial metadata, and `timeout` (whole milliseconds, at
/// most u32::MAX). The token comes back with the answer.
pub fn dispatch(
    cluster: &str,
    service: &str,
    method: &str,
    message: &[u8],
    timeout: Duration,
) -> Result<u32, HostStatus> {
    let timeout_ms = u32::try_from(timeout.as_millis()).unwrap_or(u32::MAX);
    let mut token: u32 = 0;
    // SAFETY: every pointer/length pair is a live slice for the call; the
    // host writes the token through a valid `*mut u32`.
    let status = unsafe {
        proxy_grpc_call(
            cluster.as_ptr(),
            cluster.len(),
            service.as_ptr(),
            service.len(),
            method.as_ptr(),
            method.len(),
            NO_METADATA.as_ptr(),
            NO_METADATA.len(),
            message.as_ptr(),
            message.len(),
            timeout_ms,
            &mut token,
        )
    };
    HostStatus::from_wire(status).map(|()| token)
}

/// The answer's message, in `on_grpc_call_response(token, status_code,
/// response_size)` with `status_code` 0: up to `response_size` bytes.
/// `Ok(None)` when the host has none (NotFound, or no data).
pub fn response_body(response_size: usize) -> Result<Option<Vec<u8>>, HostStatus> {
    let mut data: *mut u8 = null_mut();
    let mut size: usize = 0;
    // SAFETY: the host writes through valid pointers; on Ok with data it
    // hands over a buffer of `size` bytes that it allocated through the
    // module's `proxy_on_memory_allocate` (the SDK's, a boxed slice of
    // exactly that length), which the Vec now owns and frees.
    unsafe {
        let status =
            proxy_get_buffer_bytes(GRPC_RECEIVE_BUFFER, 0, response_size, &mut data, &mut size);
        match HostStatus::from_wire(status) {
            Ok(()) if data.is_null() => Ok(None),
            Ok(()) => Ok(Some(Vec::from_raw_parts(data, size, size))),
            Err(HostStatus::NotFound) => Ok(None),
            Err(other) => Err(other),
        }
    }
}

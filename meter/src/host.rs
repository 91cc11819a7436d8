//! The fake proxy-wasm host: what Envoy would give the module, in memory,
//! deterministic (a clock that moves only when told, a seeded random), and
//! every host call counted by kind.
//!
//! ABI facts are the proxy-wasm SDK's (`proxy-wasm` 0.2, hostcalls.rs):
//! statuses, map and buffer numbers, and how a host hands a buffer to the
//! module (it allocates through the module's `proxy_on_memory_allocate`
//! and writes the pointer and size where the module asked).

use std::collections::{BTreeMap, HashMap};
use wasmi::{Caller, Error, Memory, TypedFunc};

/// proxy-wasm `Status`.
pub const OK: i32 = 0;
pub const NOT_FOUND: i32 = 1;
pub const CAS_MISMATCH: i32 = 8;

/// WASI errno values the fake host answers with.
const ERRNO_SUCCESS: i32 = 0;
const ERRNO_BADF: i32 = 8;

/// The map a header call names (proxy-wasm `MapType`).
pub fn map_name(map: i32) -> &'static str {
    match map {
        0 => "request",
        1 => "request trailers",
        2 => "response",
        3 => "response trailers",
        6 => "call-out answer",
        7 => "call-out trailers",
        _ => "other map",
    }
}

/// What the host holds for the module, and what it counted.
#[derive(Default)]
pub struct Host {
    /// The host clock, in nanoseconds since the epoch.
    pub now_ns: u64,
    /// Shared data: value and CAS version per key (Envoy's semantics: a
    /// set with a nonzero, stale CAS is a CasMismatch).
    pub shared: HashMap<Vec<u8>, (Vec<u8>, u32)>,
    last_cas: u32,
    /// Properties by path, its parts joined with '.' (values are the raw
    /// bytes Envoy returns: a string property is its bytes).
    pub properties: HashMap<String, Vec<u8>>,
    /// The request's headers (lowercase names), and the response's.
    pub request_headers: Vec<(String, Vec<u8>)>,
    pub response_headers: Vec<(String, Vec<u8>)>,
    /// The plugin configuration (`proxy_get_buffer_bytes`, type 7).
    pub plugin_config: Vec<u8>,
    /// The response body's chunk now passing (`proxy_get_buffer_bytes`,
    /// type 1).
    pub body_chunk: Vec<u8>,
    /// Host calls by kind (`Meter::request` clears them at its start).
    pub calls: BTreeMap<String, u64>,
    /// Local replies sent (their status codes), since cleared.
    pub replies: Vec<u32>,
    /// What the module logged (level, message), and wrote to stdout/stderr.
    pub logs: Vec<(i32, String)>,
    pub output: String,
    /// Metrics: name and value by id.
    pub metrics: Vec<(String, i64)>,
    /// The tick period the module asked for (ms; 0: none).
    pub tick_ms: u32,
    /// When on, every host call's kind and the fuel left at its start, in
    /// order (`Meter::trace`).
    pub trace: Option<Vec<(String, u64)>>,
    /// Fuel the module spent in its allocator when the host handed it a
    /// buffer (part of the module's own work, counted here too).
    pub alloc_fuel: u64,
    /// The answer a call-out gets (`Meter::request` delivers it when the
    /// request dispatched one): its headers, body and trailers.
    pub answer_headers: Vec<(String, Vec<u8>)>,
    pub answer_body: Vec<u8>,
    pub answer_trailers: Vec<(String, Vec<u8>)>,
    /// The token of the last call-out dispatched, until its answer.
    pub pending_call: Option<u32>,
    /// What the module sent in call-outs, since cleared: bytes of the
    /// headers (names and values) and of the body.
    pub call_bytes: (u64, u64),
    random: u64,
    next_token: u32,
    pub(crate) memory: Option<Memory>,
    pub(crate) alloc: Option<TypedFunc<i32, i32>>,
}

impl Host {
    pub fn new(now_ns: u64) -> Self {
        Host {
            now_ns,
            random: 0x9E37_79B9_7F4A_7C15,
            ..Host::default()
        }
    }

    /// splitmix64: the module's "random" (hash seeds) the same every run,
    /// so that what it does, and the fuel it takes, is too.
    fn next_random(&mut self) -> u64 {
        self.random = self.random.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.random;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn map(&mut self, map: i32) -> Option<&mut Vec<(String, Vec<u8>)>> {
        match map {
            0 => Some(&mut self.request_headers),
            2 => Some(&mut self.response_headers),
            6 => Some(&mut self.answer_headers),
            7 => Some(&mut self.answer_trailers),
            _ => None,
        }
    }
}

type C<'a> = Caller<'a, Host>;

/// Counts a host call of `kind` (and traces it, with the fuel left).
fn tally(c: &mut C, kind: &str) {
    let fuel = c.get_fuel().unwrap_or(0);
    let h = c.data_mut();
    *h.calls.entry(kind.to_string()).or_default() += 1;
    if let Some(t) = &mut h.trace {
        t.push((kind.to_string(), fuel));
    }
}

fn memory(caller: &C) -> Result<Memory, Error> {
    caller
        .data()
        .memory
        .ok_or_else(|| Error::new("the module exports no memory"))
}

fn read(caller: &C, ptr: i32, len: i32) -> Result<Vec<u8>, Error> {
    let mem = memory(caller)?;
    let (p, n) = (ptr as u32 as usize, len as u32 as usize);
    mem.data(caller)
        .get(p..p + n)
        .map(<[u8]>::to_vec)
        .ok_or_else(|| Error::new(format!("read out of bounds: {p}+{n}")))
}

fn write(caller: &mut C, ptr: i32, bytes: &[u8]) -> Result<(), Error> {
    let mem = memory(caller)?;
    let p = ptr as u32 as usize;
    mem.data_mut(caller)
        .get_mut(p..p + bytes.len())
        .ok_or_else(|| Error::new(format!("write out of bounds: {p}+{}", bytes.len())))?
        .copy_from_slice(bytes);
    Ok(())
}

fn write_u32(caller: &mut C, ptr: i32, v: u32) -> Result<(), Error> {
    write(caller, ptr, &v.to_le_bytes())
}

/// Hands `bytes` to the module as Envoy does: a buffer from the module's
/// allocator, its pointer and size written at `data_ptr` and `size_ptr`.
fn hand_over(caller: &mut C, bytes: &[u8], data_ptr: i32, size_ptr: i32) -> Result<(), Error> {
    let alloc = caller
        .data()
        .alloc
        .ok_or_else(|| Error::new("the module exports no proxy_on_memory_allocate"))?;
    let before = caller.get_fuel()?;
    let at = alloc.call(&mut *caller, bytes.len() as i32)?;
    let spent = before - caller.get_fuel()?;
    caller.data_mut().alloc_fuel += spent;
    write(caller, at, bytes)?;
    write_u32(caller, data_ptr, at as u32)?;
    write_u32(caller, size_ptr, bytes.len() as u32)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// proxy-wasm's serialized map: a count, then each pair's sizes, then
/// each name and value NUL-terminated.
fn serialize_map(pairs: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut out = (pairs.len() as u32).to_le_bytes().to_vec();
    for (k, v) in pairs {
        out.extend_from_slice(&(k.len() as u32).to_le_bytes());
        out.extend_from_slice(&(v.len() as u32).to_le_bytes());
    }
    for (k, v) in pairs {
        out.extend_from_slice(k.as_bytes());
        out.push(0);
        out.extend_from_slice(v);
        out.push(0);
    }
    out
}

/// The host functions, by import module and name. Each counts itself.
/// What the module imports and this does not define is linked to a stub
/// that traps naming it (`Meter::new`), so nothing is silently answered.
pub fn define(
    linker: &mut wasmi::Linker<Host>,
) -> Result<Vec<(&'static str, &'static str)>, Error> {
    let mut names = Vec::new();
    macro_rules! def {
        ($module:literal, $name:ident) => {
            linker.func_wrap($module, stringify!($name), $name)?;
            names.push(($module, stringify!($name)));
        };
    }
    // ---- proxy-wasm ABI 0.2.1 (module "env")
    def!("env", proxy_log);
    def!("env", proxy_get_log_level);
    def!("env", proxy_get_current_time_nanoseconds);
    def!("env", proxy_set_tick_period_milliseconds);
    def!("env", proxy_get_buffer_bytes);
    def!("env", proxy_get_header_map_pairs);
    def!("env", proxy_get_header_map_value);
    def!("env", proxy_add_header_map_value);
    def!("env", proxy_replace_header_map_value);
    def!("env", proxy_remove_header_map_value);
    def!("env", proxy_get_property);
    def!("env", proxy_set_property);
    def!("env", proxy_get_shared_data);
    def!("env", proxy_set_shared_data);
    def!("env", proxy_continue_stream);
    def!("env", proxy_close_stream);
    def!("env", proxy_send_local_response);
    def!("env", proxy_http_call);
    def!("env", proxy_set_effective_context);
    def!("env", proxy_done);
    def!("env", proxy_define_metric);
    def!("env", proxy_increment_metric);
    def!("env", proxy_record_metric);
    def!("env", proxy_get_metric);
    // ---- WASI (wasi_snapshot_preview1): what Rust's std asks at start
    // and for a panic's message; an empty environment, no files.
    def!("wasi_snapshot_preview1", fd_write);
    def!("wasi_snapshot_preview1", environ_sizes_get);
    def!("wasi_snapshot_preview1", environ_get);
    def!("wasi_snapshot_preview1", args_sizes_get);
    def!("wasi_snapshot_preview1", args_get);
    def!("wasi_snapshot_preview1", random_get);
    def!("wasi_snapshot_preview1", clock_time_get);
    def!("wasi_snapshot_preview1", proc_exit);
    def!("wasi_snapshot_preview1", sched_yield);
    def!("wasi_snapshot_preview1", fd_close);
    def!("wasi_snapshot_preview1", fd_prestat_get);
    def!("wasi_snapshot_preview1", fd_prestat_dir_name);
    def!("wasi_snapshot_preview1", fd_fdstat_get);
    def!("wasi_snapshot_preview1", fd_seek);
    Ok(names)
}

fn proxy_log(mut c: C, level: i32, ptr: i32, len: i32) -> Result<i32, Error> {
    tally(&mut c, "log");
    let msg = text(&read(&c, ptr, len)?);
    c.data_mut().logs.push((level, msg));
    Ok(OK)
}

fn proxy_get_log_level(mut c: C, ret: i32) -> Result<i32, Error> {
    tally(&mut c, "get_log_level");
    write_u32(&mut c, ret, 2)?; // Info, as the bench's Envoys run
    Ok(OK)
}

fn proxy_get_current_time_nanoseconds(mut c: C, ret: i32) -> Result<i32, Error> {
    tally(&mut c, "get_current_time");
    let now = c.data().now_ns;
    write(&mut c, ret, &now.to_le_bytes())?;
    Ok(OK)
}

fn proxy_set_tick_period_milliseconds(mut c: C, ms: i32) -> i32 {
    tally(&mut c, "set_tick_period");
    c.data_mut().tick_ms = ms as u32;
    OK
}

fn proxy_get_buffer_bytes(
    mut c: C,
    ty: i32,
    start: i32,
    max: i32,
    data: i32,
    size: i32,
) -> Result<i32, Error> {
    tally(&mut c, &format!("get_buffer_bytes[{ty}]"));
    let all = match ty {
        1 => c.data().body_chunk.clone(),
        4 => c.data().answer_body.clone(),
        7 => c.data().plugin_config.clone(),
        _ => return Ok(NOT_FOUND),
    };
    let start = (start as u32 as usize).min(all.len());
    let end = start.saturating_add(max as u32 as usize).min(all.len());
    hand_over(&mut c, &all[start..end], data, size)?;
    Ok(OK)
}

fn proxy_get_header_map_pairs(mut c: C, map: i32, data: i32, size: i32) -> Result<i32, Error> {
    tally(&mut c, &format!("get_header_map_pairs[{}]", map_name(map)));
    let Some(pairs) = c.data_mut().map(map).cloned() else {
        return Ok(NOT_FOUND);
    };
    hand_over(&mut c, &serialize_map(&pairs), data, size)?;
    Ok(OK)
}

fn proxy_get_header_map_value(
    mut c: C,
    map: i32,
    kp: i32,
    ks: i32,
    data: i32,
    size: i32,
) -> Result<i32, Error> {
    let key = text(&read(&c, kp, ks)?).to_ascii_lowercase();
    tally(
        &mut c,
        &format!("get_header_map_value[{} {key}]", map_name(map)),
    );
    let found = c
        .data_mut()
        .map(map)
        .and_then(|m| m.iter().find(|(k, _)| *k == key).map(|(_, v)| v.clone()));
    match found {
        Some(v) => {
            hand_over(&mut c, &v, data, size)?;
            Ok(OK)
        }
        None => Ok(NOT_FOUND),
    }
}

fn proxy_add_header_map_value(
    mut c: C,
    map: i32,
    kp: i32,
    ks: i32,
    vp: i32,
    vs: i32,
) -> Result<i32, Error> {
    tally(&mut c, &format!("add_header_map_value[{}]", map_name(map)));
    let key = text(&read(&c, kp, ks)?).to_ascii_lowercase();
    let value = read(&c, vp, vs)?;
    match c.data_mut().map(map) {
        Some(m) => {
            m.push((key, value));
            Ok(OK)
        }
        None => Ok(NOT_FOUND),
    }
}

fn proxy_replace_header_map_value(
    mut c: C,
    map: i32,
    kp: i32,
    ks: i32,
    vp: i32,
    vs: i32,
) -> Result<i32, Error> {
    tally(
        &mut c,
        &format!("replace_header_map_value[{}]", map_name(map)),
    );
    let key = text(&read(&c, kp, ks)?).to_ascii_lowercase();
    let value = read(&c, vp, vs)?;
    match c.data_mut().map(map) {
        Some(m) => {
            m.retain(|(k, _)| *k != key);
            m.push((key, value));
            Ok(OK)
        }
        None => Ok(NOT_FOUND),
    }
}

fn proxy_remove_header_map_value(mut c: C, map: i32, kp: i32, ks: i32) -> Result<i32, Error> {
    tally(
        &mut c,
        &format!("remove_header_map_value[{}]", map_name(map)),
    );
    let key = text(&read(&c, kp, ks)?).to_ascii_lowercase();
    if let Some(m) = c.data_mut().map(map) {
        m.retain(|(k, _)| *k != key);
    }
    Ok(OK)
}

fn proxy_get_property(mut c: C, pp: i32, ps: i32, data: i32, size: i32) -> Result<i32, Error> {
    let path = text(&read(&c, pp, ps)?).replace('\0', ".");
    tally(&mut c, &format!("get_property[{path}]"));
    match c.data().properties.get(&path).cloned() {
        Some(v) => {
            hand_over(&mut c, &v, data, size)?;
            Ok(OK)
        }
        None => Ok(NOT_FOUND),
    }
}

fn proxy_set_property(mut c: C, pp: i32, ps: i32, vp: i32, vs: i32) -> Result<i32, Error> {
    let path = text(&read(&c, pp, ps)?).replace('\0', ".");
    tally(&mut c, "set_property");
    let value = read(&c, vp, vs)?;
    c.data_mut().properties.insert(path, value);
    Ok(OK)
}

fn proxy_get_shared_data(
    mut c: C,
    kp: i32,
    ks: i32,
    data: i32,
    size: i32,
    cas: i32,
) -> Result<i32, Error> {
    tally(&mut c, "get_shared_data");
    let key = read(&c, kp, ks)?;
    match c.data().shared.get(&key).cloned() {
        Some((v, version)) => {
            hand_over(&mut c, &v, data, size)?;
            write_u32(&mut c, cas, version)?;
            Ok(OK)
        }
        None => Ok(NOT_FOUND),
    }
}

fn proxy_set_shared_data(
    mut c: C,
    kp: i32,
    ks: i32,
    vp: i32,
    vs: i32,
    cas: i32,
) -> Result<i32, Error> {
    tally(&mut c, "set_shared_data");
    let key = read(&c, kp, ks)?;
    let value = read(&c, vp, vs)?;
    let h = c.data_mut();
    if let Some((_, version)) = h.shared.get(&key) {
        if cas != 0 && cas as u32 != *version {
            return Ok(CAS_MISMATCH);
        }
    }
    h.last_cas = h.last_cas.wrapping_add(1).max(1);
    let version = h.last_cas;
    h.shared.insert(key, (value, version));
    Ok(OK)
}

fn proxy_continue_stream(mut c: C, _stream: i32) -> i32 {
    tally(&mut c, "continue_stream");
    OK
}

fn proxy_close_stream(mut c: C, _stream: i32) -> i32 {
    tally(&mut c, "close_stream");
    OK
}

// The ABI's arguments, as the module passes them.
#[allow(clippy::too_many_arguments)]
fn proxy_send_local_response(
    mut c: C,
    status: i32,
    _dp: i32,
    _ds: i32,
    _bp: i32,
    _bs: i32,
    _hp: i32,
    _hs: i32,
    _grpc: i32,
) -> i32 {
    tally(&mut c, "send_local_response");
    c.data_mut().replies.push(status as u32);
    OK
}

#[allow(clippy::too_many_arguments)]
fn proxy_http_call(
    mut c: C,
    _up: i32,
    _us: i32,
    hp: i32,
    hs: i32,
    _bp: i32,
    bs: i32,
    _tp: i32,
    _ts: i32,
    _timeout: i32,
    token: i32,
) -> Result<i32, Error> {
    tally(&mut c, "http_call");
    let headers = header_bytes(&read(&c, hp, hs)?);
    let h = c.data_mut();
    h.call_bytes.0 += headers;
    h.call_bytes.1 += bs as u32 as u64;
    h.next_token += 1;
    let t = h.next_token;
    h.pending_call = Some(t);
    write_u32(&mut c, token, t)?;
    Ok(OK)
}

/// The bytes of names and values in a serialized header map (the SDK's
/// layout: a count, then each pair's sizes, then the pairs, each string
/// followed by a NUL).
fn header_bytes(map: &[u8]) -> u64 {
    let word = |i: usize| {
        map.get(i * 4..i * 4 + 4)
            .and_then(|b| <[u8; 4]>::try_from(b).ok())
            .map_or(0, |b| u64::from(u32::from_le_bytes(b)))
    };
    let n = word(0) as usize;
    (0..2 * n).map(|i| word(1 + i)).sum()
}

fn proxy_set_effective_context(mut c: C, _ctx: i32) -> i32 {
    tally(&mut c, "set_effective_context");
    OK
}

fn proxy_done(mut c: C) -> i32 {
    tally(&mut c, "done");
    OK
}

fn proxy_define_metric(mut c: C, _ty: i32, np: i32, ns: i32, ret: i32) -> Result<i32, Error> {
    tally(&mut c, "define_metric");
    let name = text(&read(&c, np, ns)?);
    let h = c.data_mut();
    let id = h.metrics.len() as u32;
    h.metrics.push((name, 0));
    write_u32(&mut c, ret, id)?;
    Ok(OK)
}

fn proxy_increment_metric(mut c: C, id: i32, by: i64) -> i32 {
    tally(&mut c, "increment_metric");
    match c.data_mut().metrics.get_mut(id as u32 as usize) {
        Some((_, v)) => {
            *v += by;
            OK
        }
        None => NOT_FOUND,
    }
}

fn proxy_record_metric(mut c: C, id: i32, value: i64) -> i32 {
    tally(&mut c, "record_metric");
    match c.data_mut().metrics.get_mut(id as u32 as usize) {
        Some((_, v)) => {
            *v = value;
            OK
        }
        None => NOT_FOUND,
    }
}

fn proxy_get_metric(mut c: C, id: i32, ret: i32) -> Result<i32, Error> {
    tally(&mut c, "get_metric");
    let Some(v) = c.data().metrics.get(id as u32 as usize).map(|(_, v)| *v) else {
        return Ok(NOT_FOUND);
    };
    write(&mut c, ret, &(v as u64).to_le_bytes())?;
    Ok(OK)
}

fn fd_write(mut c: C, fd: i32, iovs: i32, n: i32, written: i32) -> Result<i32, Error> {
    tally(&mut c, "wasi fd_write");
    let mut total = 0u32;
    for i in 0..n {
        let iov = read(&c, iovs + 8 * i, 8)?;
        let ptr = u32::from_le_bytes([iov[0], iov[1], iov[2], iov[3]]);
        let len = u32::from_le_bytes([iov[4], iov[5], iov[6], iov[7]]);
        let bytes = read(&c, ptr as i32, len as i32)?;
        if fd == 1 || fd == 2 {
            c.data_mut().output.push_str(&text(&bytes));
        }
        total += len;
    }
    write_u32(&mut c, written, total)?;
    Ok(if fd == 1 || fd == 2 {
        ERRNO_SUCCESS
    } else {
        ERRNO_BADF
    })
}

fn environ_get(mut c: C, _env: i32, _buf: i32) -> i32 {
    tally(&mut c, "wasi environ_get");
    ERRNO_SUCCESS
}

fn args_sizes_get(mut c: C, count: i32, size: i32) -> Result<i32, Error> {
    tally(&mut c, "wasi args_sizes_get");
    write_u32(&mut c, count, 0)?;
    write_u32(&mut c, size, 0)?;
    Ok(ERRNO_SUCCESS)
}

fn args_get(mut c: C, _argv: i32, _buf: i32) -> i32 {
    tally(&mut c, "wasi args_get");
    ERRNO_SUCCESS
}

fn random_get(mut c: C, buf: i32, len: i32) -> Result<i32, Error> {
    tally(&mut c, "wasi random_get");
    let mut bytes = Vec::with_capacity(len as usize + 8);
    while bytes.len() < len as usize {
        let r = c.data_mut().next_random();
        bytes.extend_from_slice(&r.to_le_bytes());
    }
    bytes.truncate(len as usize);
    write(&mut c, buf, &bytes)?;
    Ok(ERRNO_SUCCESS)
}

fn proc_exit(mut c: C, code: i32) -> Result<(), Error> {
    tally(&mut c, "wasi proc_exit");
    Err(Error::i32_exit(code))
}

fn sched_yield(mut c: C) -> i32 {
    tally(&mut c, "wasi sched_yield");
    ERRNO_SUCCESS
}

fn fd_close(mut c: C, _fd: i32) -> i32 {
    tally(&mut c, "wasi fd_close");
    ERRNO_BADF
}

fn fd_prestat_get(mut c: C, _fd: i32, _ret: i32) -> i32 {
    tally(&mut c, "wasi fd_prestat_get");
    ERRNO_BADF
}

fn fd_fdstat_get(mut c: C, _fd: i32, _ret: i32) -> i32 {
    tally(&mut c, "wasi fd_fdstat_get");
    ERRNO_BADF
}

fn fd_seek(mut c: C, _fd: i32, _off: i64, _whence: i32, _ret: i32) -> i32 {
    tally(&mut c, "wasi fd_seek");
    ERRNO_BADF
}

fn environ_sizes_get(mut c: C, count: i32, size: i32) -> Result<i32, Error> {
    tally(&mut c, "wasi environ_sizes_get");
    write_u32(&mut c, count, 0)?;
    write_u32(&mut c, size, 0)?;
    Ok(ERRNO_SUCCESS)
}

fn clock_time_get(mut c: C, _id: i32, _precision: i64, ret: i32) -> Result<i32, Error> {
    tally(&mut c, "wasi clock_time_get");
    let now = c.data().now_ns;
    write(&mut c, ret, &now.to_le_bytes())?;
    Ok(ERRNO_SUCCESS)
}

fn fd_prestat_dir_name(mut c: C, _fd: i32, _p: i32, _n: i32) -> i32 {
    tally(&mut c, "wasi fd_prestat_dir_name");
    ERRNO_BADF
}
